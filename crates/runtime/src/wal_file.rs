//! A host's write-ahead log on disk: one append-only file, `wal.log` in the host's data
//! directory, in the system's own record format ([`LogCodec`]). The host's event loop
//! collects the log records of every handler it ran in one round, writes them with one
//! `write` and makes them durable with one `fdatasync` before it sends anything those handlers
//! produced: group commit.
//!
//! At open, a torn tail (a write the crash cut short) is cut off so that new records follow
//! the last whole one; damage before the tail is refused, never replayed.

use crate::error::{Result, RuntimeError};
use pisadb_host::LogCodec;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// The log file's name in a data directory.
pub const LOG_FILE: &str = "wal.log";

/// An open write-ahead log of records `R`.
pub struct WalFile<R> {
    file: File,
    path: PathBuf,
    buffer: Vec<u8>,
    /// Bytes written so far (the file's length).
    pub bytes: u64,
    /// `fdatasync` calls made.
    pub syncs: u64,
    /// Records written.
    pub records: u64,
    /// The file holds `R`s; it owns none.
    record: PhantomData<fn(&R)>,
}

/// What opening a log found in it.
pub struct Opened<R> {
    /// The log, ready for appends.
    pub wal: WalFile<R>,
    /// Its records, in order.
    pub records: Vec<R>,
    /// A torn tail that was cut off (a crash in the middle of a write): why, and its size in
    /// bytes.
    pub torn_tail: Option<(String, u64)>,
}

/// The log file's bytes in `dir`; empty if there is none yet.
fn read_bytes(dir: &Path) -> Result<(PathBuf, Vec<u8>)> {
    let path = dir.join(LOG_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => Ok((path, bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((path, Vec::new())),
        Err(e) => Err(RuntimeError::io(path, e)),
    }
}

fn decode<R: LogCodec>(path: &Path, bytes: &[u8]) -> Result<pisadb_host::DecodedLog<R>> {
    R::read_log(bytes).map_err(|e| RuntimeError::Log { path: path.into(), source: Box::new(e) })
}

/// Reads the log in `dir` (every record, for recovery), without opening it for writing.
pub fn read_dir_log<R: LogCodec>(dir: &Path) -> Result<Vec<R>> {
    let (path, bytes) = read_bytes(dir)?;
    Ok(decode(&path, &bytes)?.records)
}

impl<R: LogCodec> WalFile<R> {
    /// Opens (creating) the log in `dir`, reads what is in it, and cuts off a torn tail so
    /// that new records follow the last whole one. A log corrupt before its tail is an error.
    pub fn open(dir: &Path) -> Result<Opened<R>> {
        std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io(dir, e))?;
        let (path, bytes) = read_bytes(dir)?;
        let contents = decode::<R>(&path, &bytes)?;
        let io = |e| RuntimeError::io(&path, e);
        let file = OpenOptions::new().create(true).read(true).write(true).truncate(false).open(&path).map_err(io)?;
        let torn_tail = contents.torn_tail.map(|why| (why.to_string(), (bytes.len() - contents.valid_bytes) as u64));
        if torn_tail.is_some() {
            file.set_len(contents.valid_bytes as u64).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        let mut wal = WalFile {
            file,
            path,
            buffer: Vec::new(),
            bytes: contents.valid_bytes as u64,
            syncs: 0,
            records: 0,
            record: PhantomData,
        };
        wal.seek_end()?;
        Ok(Opened { wal, records: contents.records, torn_tail })
    }

    fn seek_end(&mut self) -> Result<()> {
        use std::io::Seek;
        self.file.seek(std::io::SeekFrom::End(0)).map_err(|e| RuntimeError::io(&self.path, e))?;
        Ok(())
    }

    /// Writes `records` and makes them durable (one write, one `fdatasync`).
    pub fn commit(&mut self, records: &[R]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.buffer.clear();
        for r in records {
            r.append_to(&mut self.buffer);
        }
        self.file.write_all(&self.buffer).map_err(|e| RuntimeError::io(&self.path, e))?;
        self.file.sync_data().map_err(|e| RuntimeError::io(&self.path, e))?;
        self.bytes += self.buffer.len() as u64;
        self.syncs += 1;
        self.records += records.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_host::DecodedLog;

    /// A toy record: one byte, length-prefixed; a zero length is a torn frame.
    #[derive(Clone, Debug, PartialEq)]
    struct Byte(u8);

    #[derive(Debug, thiserror::Error)]
    #[error("bad frame at {0}")]
    struct Bad(usize);

    impl LogCodec for Byte {
        type Error = Bad;
        fn append_to(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(&[1, self.0]);
        }
        fn read_log(bytes: &[u8]) -> Result<DecodedLog<Self>, Bad> {
            let mut records = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                match bytes[at..] {
                    [1, b, ..] => records.push(Byte(b)),
                    [1] => return Ok(DecodedLog { records, valid_bytes: at, torn_tail: Some("cut short") }),
                    _ => return Err(Bad(at)),
                }
                at += 2;
            }
            Ok(DecodedLog { records, valid_bytes: at, torn_tail: None })
        }
    }

    #[test]
    fn records_survive_a_reopen_and_a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut opened = WalFile::<Byte>::open(dir.path()).unwrap();
        assert!(opened.records.is_empty());
        opened.wal.commit(&[Byte(7), Byte(8)]).unwrap();
        assert_eq!((opened.wal.syncs, opened.wal.records, opened.wal.bytes), (1, 2, 4));
        drop(opened);
        // A crash in the middle of the next write leaves half a frame.
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(1);
        std::fs::write(&path, &bytes).unwrap();
        let mut opened = WalFile::<Byte>::open(dir.path()).unwrap();
        assert_eq!(opened.records, vec![Byte(7), Byte(8)]);
        assert_eq!(opened.torn_tail, Some(("cut short".to_string(), 1)));
        opened.wal.commit(&[Byte(9)]).unwrap();
        assert_eq!(read_dir_log::<Byte>(dir.path()).unwrap(), vec![Byte(7), Byte(8), Byte(9)]);
    }

    #[test]
    fn a_corrupt_log_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOG_FILE), [5, 5, 1, 1]).unwrap();
        let err = WalFile::<Byte>::open(dir.path()).err().expect("refused").to_string();
        assert!(err.contains("wal.log") && err.contains("bad frame at 0"), "{err}");
        assert!(read_dir_log::<Byte>(&dir.path().join("none")).unwrap().is_empty(), "no log: no records");
    }
}
