//! The properties every decoder must have, written once for all formats.
//!
//! - [`canonical`]: for a message format with an encoder. Whatever the decoder accepts must
//!   re-encode to exactly the bytes it read, and decode again to the same value.
//! - [`log`]: for a write-ahead log: the runtime's one framing ([`framed_log`]) around a
//!   system's record codec ([`LogCodec`]). Whatever part of the bytes the reader calls valid
//!   must re-encode, record by record, to exactly that part; a torn tail is reported if and
//!   only if bytes are left over, and covers them; the records read back from their own
//!   encoding are the same records. Damage followed by a good frame is refused (corrupt).
//! - [`log_of_json`]: the same for a log whose record bodies are JSON (SwitchTx's), except
//!   that the bytes need not re-encode to themselves: JSON has many spellings of one value
//!   (spaces, key order), all behind the record's checksum, and reading any of them as that
//!   value is right.
//!
//! A panic is not checked here: the campaign catches it around the whole check.

use crate::Verdict;
use pisadb_host::LogCodec;
use pisadb_runtime::framed_log::{self, FRAME_HEADER_BYTES};
use std::fmt::Debug;

/// Checks a message decoder against its encoder (see the module documentation).
pub fn canonical<T: PartialEq + Debug, E>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, E>,
    encode: impl Fn(&T, &mut Vec<u8>),
) -> Result<Verdict, String> {
    let Ok(value) = decode(bytes) else { return Ok(Verdict::Refused) };
    let mut again = Vec::new();
    encode(&value, &mut again);
    if again != bytes {
        return Err(format!(
            "accepted bytes that are not the encoding of what they decode to: {value:?} encodes as {}",
            crate::hex(&again)
        ));
    }
    match decode(&again) {
        Ok(back) if back == value => Ok(Verdict::Accepted),
        Ok(back) => Err(format!("{value:?} decodes back as {back:?}")),
        Err(_) => Err(format!("the encoding of {value:?} is refused")),
    }
}

/// The log `records` make: one frame of the runtime's framing each.
pub fn encode_log<R: LogCodec>(records: &[R]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for record in records {
        framed_log::append(record, &mut bytes);
    }
    bytes
}

/// Checks the framed log reader with a system's record codec (see the module documentation).
/// An input is accepted when it reads whole, with no torn tail.
pub fn log<R: LogCodec + PartialEq + Debug>(bytes: &[u8]) -> Result<Verdict, String> {
    read_log_checked::<R>(bytes, true)
}

/// Checks a log whose records are JSON (see the module documentation).
pub fn log_of_json<R: LogCodec + PartialEq + Debug>(bytes: &[u8]) -> Result<Verdict, String> {
    read_log_checked::<R>(bytes, false)
}

fn read_log_checked<R: LogCodec + PartialEq + Debug>(bytes: &[u8], canonical: bool) -> Result<Verdict, String> {
    let Ok(log) = framed_log::read::<R>(bytes) else { return Ok(Verdict::Refused) };
    let torn = log.torn_tail.as_ref().map_or(0, |t| t.bytes);
    if log.valid_bytes + torn != bytes.len() || (log.torn_tail.is_some() && torn == 0) {
        return Err(format!("{} valid bytes and a torn tail of {torn} in a log of {}", log.valid_bytes, bytes.len()));
    }
    let again = encode_log(&log.records);
    if canonical && again != bytes[..log.valid_bytes] {
        return Err(format!("records {:?} re-encode to other bytes than the {} read", log.records, log.valid_bytes));
    }
    match framed_log::read::<R>(&again) {
        Ok(back) if back.records == log.records && back.torn_tail.is_none() => {}
        _ => return Err(format!("records {:?} do not read back from their own encoding", log.records)),
    }
    Ok(if log.torn_tail.is_none() { Verdict::Accepted } else { Verdict::Refused })
}

/// Recomputes the checksum of every whole frame of a log in the runtime's framing (`[length
/// u32 LE][CRC32C of length and payload u32 LE][payload]`), so that a mutated payload reaches
/// the record decoder behind the checksum.
pub fn repair_frames(bytes: &mut [u8]) {
    let mut at = 0;
    while let Some(head) = bytes.get(at..at + FRAME_HEADER_BYTES) {
        let len_bytes = [head[0], head[1], head[2], head[3]];
        let len = u32::from_le_bytes(len_bytes) as usize;
        let Some(payload) = bytes.get(at + FRAME_HEADER_BYTES..at + FRAME_HEADER_BYTES + len) else { return };
        let crc = crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload);
        bytes[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at += FRAME_HEADER_BYTES + len;
    }
}
