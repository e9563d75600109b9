//! The one record framing of every write-ahead log, and the rules for reading a log back after
//! a crash.
//!
//! ## Frame
//!
//! Every record of every system's log is one frame:
//!
//! ```text
//! [payload length: u32 LE][CRC32C of (length bytes ++ payload): u32 LE][payload]
//! ```
//!
//! The payload is the system's own encoding of the record ([`LogCodec`]); the framing does not
//! look inside it. The checksum covers the length too, so a damaged length is caught as surely
//! as a damaged payload when the frame can be read at all.
//!
//! ## Recovery rules
//!
//! [`read`] walks the frames from the start. The first frame that cannot be taken whole (its
//! header or payload runs past the end of the file, its length is out of range, its checksum
//! fails, or its payload does not decode) is *damage*, and what follows it decides what it is:
//!
//! - if a **well-formed frame** (intact checksum, decodable payload) starts anywhere after the
//!   damage, the log is **corrupt**: a crash cuts only the last write short, so damage with good
//!   records after it is something else (a bad disk, a stray write). Reading is refused with
//!   the byte offset of the damage and of the next good record ([`Corrupt`]), and nothing is
//!   cut: the records after it may be committed work, and only a person can decide to lose them.
//!   This is the case a corrupted length field makes: a length pointing past the end of the
//!   file looks like a torn frame, but the intact frames after it give it away;
//! - otherwise the damage is a **torn tail** (the write the crash interrupted): the records
//!   before it are the log, and the caller cuts the file there so new records follow the last
//!   whole one ([`TornTail`]). [`crate::wal_file::WalFile`] copies the bytes it cuts to a side
//!   file first, so even a torn tail is never lost, only set aside.
//!
//! Looking for a good frame after damage tries every byte offset; it runs only on a damaged
//! log, and each try is bounded by the bytes left.

use pisadb_host::LogCodec;

/// Bytes of a frame's header (length and checksum).
pub const FRAME_HEADER_BYTES: usize = 8;
/// The largest payload a frame may carry; a longer length field is damage.
pub const MAX_RECORD_BYTES: usize = 1 << 24;

/// Appends `record` to `out` as one frame.
pub fn append<R: LogCodec>(record: &R, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    record.encode(out);
    let len = out.len() - start - FRAME_HEADER_BYTES;
    assert!(len <= MAX_RECORD_BYTES, "a log record of {len} bytes (at most {MAX_RECORD_BYTES})");
    let len_bytes = (len as u32).to_le_bytes();
    let crc = checksum(len_bytes, &out[start + FRAME_HEADER_BYTES..]);
    out[start..start + 4].copy_from_slice(&len_bytes);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The checksum of a frame: CRC32C over its length bytes and its payload.
fn checksum(len_bytes: [u8; 4], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload)
}

/// What [`read`] found in a log that is not corrupt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered<R> {
    /// The records, in log order.
    pub records: Vec<R>,
    /// Bytes of whole, valid frames: where the log goes on.
    pub valid_bytes: usize,
    /// The torn tail after them, if the last write was cut short.
    pub torn_tail: Option<TornTail>,
}

/// A damaged last frame with no good frame after it: the write a crash interrupted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// What is wrong with the frame.
    pub why: String,
    /// Bytes from where it starts to the end of the file.
    pub bytes: usize,
}

/// Damage followed by a well-formed frame: the log is corrupt, and reading it is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "log corrupt at byte {offset}: {why}, and a well-formed record follows at byte {next_record_at} \
     ({later_bytes} bytes from the damage to the end); refusing to replay or cut anything (restore the \
     log from a copy, or truncate it at byte {offset} by hand to give up what follows)"
)]
pub struct Corrupt {
    /// Where the damaged frame starts.
    pub offset: usize,
    /// What is wrong with it.
    pub why: String,
    /// Where the first well-formed frame after it starts.
    pub next_record_at: usize,
    /// Bytes from the damage to the end of the log.
    pub later_bytes: usize,
}

/// Reads a whole log by the rules of the module documentation.
pub fn read<R: LogCodec>(bytes: &[u8]) -> Result<Recovered<R>, Corrupt> {
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match frame_at::<R>(bytes, at) {
            Ok((record, frame_bytes)) => {
                records.push(record);
                at += frame_bytes;
            }
            Err(why) => {
                return match next_good_frame::<R>(bytes, at) {
                    Some(next_record_at) => {
                        Err(Corrupt { offset: at, why, next_record_at, later_bytes: bytes.len() - at })
                    }
                    None => Ok(Recovered {
                        records,
                        valid_bytes: at,
                        torn_tail: Some(TornTail { why, bytes: bytes.len() - at }),
                    }),
                };
            }
        }
    }
    Ok(Recovered { records, valid_bytes: at, torn_tail: None })
}

/// The record of the frame at `at` and the frame's size, if it is whole, intact and decodes.
fn frame_at<R: LogCodec>(bytes: &[u8], at: usize) -> Result<(R, usize), String> {
    let header = bytes.get(at..at + FRAME_HEADER_BYTES).ok_or("a frame header cut short")?;
    let len_bytes: [u8; 4] = header[..4].try_into().expect("4 bytes");
    let len = u32::from_le_bytes(len_bytes) as usize;
    let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    if len > MAX_RECORD_BYTES {
        return Err(format!("a frame length of {len} bytes (at most {MAX_RECORD_BYTES})"));
    }
    let payload = bytes
        .get(at + FRAME_HEADER_BYTES..at + FRAME_HEADER_BYTES + len)
        .ok_or_else(|| format!("a frame of {len} bytes with {} left", bytes.len() - at - FRAME_HEADER_BYTES))?;
    if checksum(len_bytes, payload) != crc {
        return Err("a checksum mismatch".into());
    }
    let record = R::decode(payload).map_err(|e| format!("a record that does not decode ({e})"))?;
    Ok((record, FRAME_HEADER_BYTES + len))
}

/// Where the first well-formed frame after the damaged one at `at` starts, if any.
fn next_good_frame<R: LogCodec>(bytes: &[u8], at: usize) -> Option<usize> {
    (at + 1..bytes.len().saturating_sub(FRAME_HEADER_BYTES - 1)).find(|&i| frame_at::<R>(bytes, i).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A toy record: its bytes as they are (any length, any content).
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Blob(Vec<u8>);

    impl LogCodec for Blob {
        fn encode(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(&self.0);
        }
        fn decode(payload: &[u8]) -> Result<Self, String> {
            Ok(Blob(payload.to_vec()))
        }
    }

    fn blobs() -> impl Strategy<Value = Vec<Blob>> {
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40).prop_map(Blob), 2..12)
    }

    fn encode_all(records: &[Blob]) -> Vec<u8> {
        let mut bytes = Vec::new();
        records.iter().for_each(|r| append(r, &mut bytes));
        bytes
    }

    /// Where each frame of `records` starts, and the end.
    fn starts(records: &[Blob]) -> Vec<usize> {
        let mut at = vec![0];
        for r in records {
            at.push(at.last().unwrap() + FRAME_HEADER_BYTES + r.0.len());
        }
        at
    }

    #[test]
    fn a_flipped_byte_in_the_middle_is_refused_with_its_offset() {
        let records: Vec<Blob> = (0..5).map(|i| Blob(vec![i; 10])).collect();
        let mut bytes = encode_all(&records);
        let third = starts(&records)[2];
        bytes[third + FRAME_HEADER_BYTES + 3] ^= 0x10;
        let err = read::<Blob>(&bytes).unwrap_err();
        assert_eq!((err.offset, err.next_record_at), (third, starts(&records)[3]));
        assert!(err.to_string().contains(&format!("corrupt at byte {third}")), "{err}");
    }

    #[test]
    fn a_corrupted_length_pointing_past_the_end_is_refused_not_cut() {
        let records: Vec<Blob> = (0..5).map(|i| Blob(vec![i; 10])).collect();
        let mut bytes = encode_all(&records);
        let second = starts(&records)[1];
        bytes[second..second + 4].copy_from_slice(&1000u32.to_le_bytes());
        let err = read::<Blob>(&bytes).unwrap_err();
        assert_eq!((err.offset, err.next_record_at), (second, starts(&records)[2]));
    }

    #[test]
    fn a_cut_last_record_is_a_torn_tail() {
        let records: Vec<Blob> = (0..3).map(|i| Blob(vec![i; 10])).collect();
        let bytes = encode_all(&records);
        let read = read::<Blob>(&bytes[..bytes.len() - 4]).unwrap();
        assert_eq!(read.records, records[..2].to_vec());
        assert_eq!(read.valid_bytes, starts(&records)[2]);
        assert_eq!(read.torn_tail.unwrap().bytes, FRAME_HEADER_BYTES + 10 - 4);
    }

    proptest! {
        #[test]
        fn records_read_back_as_written(records in blobs()) {
            let bytes = encode_all(&records);
            prop_assert_eq!(read::<Blob>(&bytes).unwrap(), Recovered { records, valid_bytes: bytes.len(), torn_tail: None });
        }

        /// Cutting the log anywhere inside its last frame loses that frame only, and says so.
        #[test]
        fn a_cut_anywhere_in_the_last_frame_is_a_torn_tail(records in blobs(), cut in any::<prop::sample::Index>()) {
            let bytes = encode_all(&records);
            let last = starts(&records)[records.len() - 1];
            let len = last + cut.index(bytes.len() - last);
            let read = read::<Blob>(&bytes[..len]).unwrap();
            prop_assert_eq!(&read.records[..], &records[..records.len() - 1]);
            prop_assert_eq!(read.valid_bytes, last);
            prop_assert_eq!(read.torn_tail.map(|t| t.bytes), (len > last).then_some(len - last));
        }

        /// A flipped bit in any frame but the last is refused, at that frame's offset, whatever
        /// field it hits (length, checksum, payload): nothing after it is dropped.
        #[test]
        fn a_flipped_bit_before_the_last_frame_is_refused_at_its_frame(records in blobs(), which in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut bytes = encode_all(&records);
            let starts = starts(&records);
            let last = starts[records.len() - 1];
            let at = which.index(last);
            bytes[at] ^= 1 << bit;
            let frame = starts.iter().rev().find(|&&s| s <= at).copied().unwrap();
            let err = read::<Blob>(&bytes).unwrap_err();
            prop_assert_eq!(err.offset, frame);
            prop_assert!(err.next_record_at > frame);
        }

        /// Splicing: a torn write followed by whole records (a crash, then a restart that did not
        /// cut the tail) is corruption, never a tail to cut.
        #[test]
        fn a_torn_frame_with_whole_frames_after_it_is_refused(records in blobs(), cut in 1usize..8) {
            let bytes = encode_all(&records);
            let starts = starts(&records);
            let mut spliced = bytes[..starts[1] - cut.min(starts[1] - starts[0])].to_vec();
            spliced.extend_from_slice(&bytes[starts[1]..]);
            // When the bytes that slide into the cut equal the bytes cut away, the first frame is
            // whole again and the splice is undetectable by any reader (seen: a one-byte payload
            // `8` cut, and the next frame's length byte `8` sliding in).
            prop_assume!(spliced.get(..starts[1]) != Some(&bytes[..starts[1]]));
            let err = read::<Blob>(&spliced).unwrap_err();
            prop_assert_eq!(err.offset, 0);
        }

        /// Arbitrary bytes are read or refused, never a panic.
        #[test]
        fn arbitrary_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = read::<Blob>(&bytes);
        }
    }
}
