//! A host's write-ahead log on disk: one append-only file, `wal.log` in the host's data
//! directory, of [`framed_log`] frames around the system's own record encoding ([`LogCodec`]).
//! The host's event loop collects the log records of every handler it ran in one round, writes
//! them with one `write` and makes them durable with one `fdatasync` before it sends anything
//! those handlers produced: group commit.
//!
//! At open, the log is read by [`framed_log::read`]'s rules: a torn tail (a write the crash
//! cut short) is copied to a side file `wal.log.torn-at-<offset>` and then cut off, so that new
//! records follow the last whole one and not a byte is lost; damage with a well-formed record
//! after it is refused with the file and the byte offset, and nothing is cut. A new log file,
//! a new side file and every directory created for them are fsynced with their parent
//! directory, so a crash right after creation cannot lose the file itself.

use crate::error::{Result, RuntimeError};
use crate::framed_log;
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
    /// A torn tail that was cut off (a crash in the middle of a write): why, its size in bytes,
    /// and the side file its bytes were kept in.
    pub torn_tail: Option<(String, u64, PathBuf)>,
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

fn decode<R: LogCodec>(path: &Path, bytes: &[u8]) -> Result<framed_log::Recovered<R>> {
    framed_log::read(bytes).map_err(|e| RuntimeError::Log { path: path.into(), source: Box::new(e) })
}

/// Reads the log in `dir` (every record, for recovery), without opening it for writing. A torn
/// tail is left where it is (and not returned); corruption is refused.
pub fn read_dir_log<R: LogCodec>(dir: &Path) -> Result<Vec<R>> {
    let (path, bytes) = read_bytes(dir)?;
    Ok(decode(&path, &bytes)?.records)
}

/// Makes `dir`'s entries durable (a file created or renamed in it).
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| RuntimeError::io(dir, e))
}

/// Creates `dir` and any missing parent, fsyncing each new directory's parent so the new
/// entries survive a crash.
pub fn create_dir_durably(dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_durably(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(RuntimeError::io(dir, e)),
    }
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => sync_dir(Path::new(".")),
    }
}

/// Writes `bytes` to a new file `path` and makes it and its directory entry durable.
fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |e| RuntimeError::io(path, e);
    let mut file = File::create(path).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

impl<R: LogCodec> WalFile<R> {
    /// Opens (creating) the log in `dir`, reads what is in it, and sets a torn tail aside so
    /// that new records follow the last whole one. A corrupt log is refused (see the module
    /// documentation).
    pub fn open(dir: &Path) -> Result<Opened<R>> {
        create_dir_durably(dir)?;
        let (path, bytes) = read_bytes(dir)?;
        let contents = decode::<R>(&path, &bytes)?;
        let io = |e| RuntimeError::io(&path, e);
        let existed = path.exists();
        let file = OpenOptions::new().create(true).read(true).write(true).truncate(false).open(&path).map_err(io)?;
        if !existed {
            file.sync_all().map_err(io)?;
            sync_dir(dir)?;
        }
        let mut torn_tail = None;
        if let Some(torn) = contents.torn_tail {
            let aside = dir.join(format!("{LOG_FILE}.torn-at-{}", contents.valid_bytes));
            write_durably(&aside, &bytes[contents.valid_bytes..])?;
            file.set_len(contents.valid_bytes as u64).map_err(io)?;
            file.sync_all().map_err(io)?;
            torn_tail = Some((torn.why, torn.bytes as u64, aside));
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
            framed_log::append(r, &mut self.buffer);
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

    /// A toy record: one byte.
    #[derive(Clone, Debug, PartialEq)]
    struct Byte(u8);

    impl LogCodec for Byte {
        fn encode(&self, out: &mut Vec<u8>) {
            out.push(self.0);
        }
        fn decode(payload: &[u8]) -> std::result::Result<Self, String> {
            match *payload {
                [b] => Ok(Byte(b)),
                _ => Err(format!("{} bytes, not 1", payload.len())),
            }
        }
    }

    const FRAME: usize = framed_log::FRAME_HEADER_BYTES + 1;

    #[test]
    fn records_survive_a_reopen_and_a_torn_tail_is_set_aside_and_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut opened = WalFile::<Byte>::open(dir.path()).unwrap();
        assert!(opened.records.is_empty());
        opened.wal.commit(&[Byte(7), Byte(8)]).unwrap();
        assert_eq!((opened.wal.syncs, opened.wal.records, opened.wal.bytes), (1, 2, 2 * FRAME as u64));
        drop(opened);
        // A crash in the middle of the next write leaves part of a frame.
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[1, 0, 0]);
        std::fs::write(&path, &bytes).unwrap();
        let mut opened = WalFile::<Byte>::open(dir.path()).unwrap();
        assert_eq!(opened.records, vec![Byte(7), Byte(8)]);
        let (_, torn_bytes, aside) = opened.torn_tail.clone().expect("a torn tail");
        assert_eq!(torn_bytes, 3);
        assert_eq!(std::fs::read(aside).unwrap(), vec![1, 0, 0], "the cut bytes are kept");
        opened.wal.commit(&[Byte(9)]).unwrap();
        assert_eq!(read_dir_log::<Byte>(dir.path()).unwrap(), vec![Byte(7), Byte(8), Byte(9)]);
    }

    #[test]
    fn a_corrupt_log_is_refused_with_its_path_and_offset_and_nothing_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut opened = WalFile::<Byte>::open(dir.path()).unwrap();
        opened.wal.commit(&[Byte(1), Byte(2), Byte(3)]).unwrap();
        drop(opened);
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        // The second frame's length now points past the end of the file.
        bytes[FRAME..FRAME + 4].copy_from_slice(&500u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let err = WalFile::<Byte>::open(dir.path()).err().expect("refused").to_string();
        assert!(err.contains("wal.log") && err.contains(&format!("corrupt at byte {FRAME}")), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing after the damage is deleted");
        assert!(read_dir_log::<Byte>(&dir.path().join("none")).unwrap().is_empty(), "no log: no records");
    }

    #[test]
    fn a_log_in_new_directories_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a").join("b");
        let mut opened = WalFile::<Byte>::open(&deep).unwrap();
        opened.wal.commit(&[Byte(4)]).unwrap();
        assert_eq!(read_dir_log::<Byte>(&deep).unwrap(), vec![Byte(4)]);
    }
}
