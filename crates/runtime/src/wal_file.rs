//! A node's write-ahead log on disk: one append-only file, `wal.log` in the node's data
//! directory, in the format of [`pisadb_p4db::node::wal`]. The node's event loop collects the log
//! records of every handler it ran in one round, writes them with one `write` and makes them
//! durable with one `fdatasync` before it sends anything those handlers produced: group commit.

use pisadb_p4db::node::wal::{append, read_log, LogRecord};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The log file's name in a data directory.
pub const LOG_FILE: &str = "wal.log";

/// An open write-ahead log.
pub struct WalFile {
    file: File,
    path: PathBuf,
    buffer: Vec<u8>,
    /// Bytes written so far (the file's length).
    pub bytes: u64,
    /// `fdatasync` calls made.
    pub syncs: u64,
    /// Records written.
    pub records: u64,
}

/// What opening a log found in it.
pub struct Opened {
    /// The log, ready for appends.
    pub wal: WalFile,
    /// Its records, in order.
    pub records: Vec<LogRecord>,
    /// A torn tail that was cut off (a crash in the middle of a write), with its size.
    pub torn_tail: Option<(String, u64)>,
}

/// Reads the log in `dir` (every record, for recovery), without opening it for writing.
pub fn read_dir_log(dir: &Path) -> Result<Vec<LogRecord>, String> {
    let path = dir.join(LOG_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    read_log(&bytes).map(|c| c.records).map_err(|e| format!("{}: {e}", path.display()))
}

impl WalFile {
    /// Opens (creating) the log in `dir`, reads what is in it, and cuts off a torn tail so
    /// that new records follow the last whole one. A log corrupt before its tail is an error.
    pub fn open(dir: &Path) -> Result<Opened, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
        let path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let contents = read_log(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let torn_tail = contents.torn_tail.map(|why| (why.to_string(), (bytes.len() - contents.valid_bytes) as u64));
        if torn_tail.is_some() {
            file.set_len(contents.valid_bytes as u64).map_err(|e| format!("{}: truncating: {e}", path.display()))?;
            file.sync_all().map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let mut wal =
            WalFile { file, path, buffer: Vec::new(), bytes: contents.valid_bytes as u64, syncs: 0, records: 0 };
        wal.seek_end()?;
        Ok(Opened { wal, records: contents.records, torn_tail })
    }

    fn seek_end(&mut self) -> Result<(), String> {
        use std::io::Seek;
        self.file.seek(std::io::SeekFrom::End(0)).map_err(|e| format!("{}: {e}", self.path.display()))?;
        Ok(())
    }

    /// Writes `records` and makes them durable (one write, one `fdatasync`).
    pub fn commit(&mut self, records: &[LogRecord]) -> Result<(), String> {
        if records.is_empty() {
            return Ok(());
        }
        self.buffer.clear();
        for r in records {
            append(r, &mut self.buffer);
        }
        self.file.write_all(&self.buffer).map_err(|e| format!("{}: write: {e}", self.path.display()))?;
        self.file.sync_data().map_err(|e| format!("{}: fdatasync: {e}", self.path.display()))?;
        self.bytes += self.buffer.len() as u64;
        self.syncs += 1;
        self.records += records.len() as u64;
        Ok(())
    }
}
