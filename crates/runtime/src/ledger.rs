//! The supervisor's ledger: a record of every acknowledged commit kept by a process that is
//! never killed, so that "nothing acknowledged was lost" is proved against something the victim
//! of a `kill -9` never held.
//!
//! ## Why a ledger
//!
//! A host's own write-ahead log cannot prove that the host lost nothing: a host that forgot to
//! log a commit, or whose log lost a record, restarts from that log and agrees with it. The
//! proof needs a witness outside the host. Where a system's clients are separate processes that
//! are not killed (TransKV's, Gotthard's), they are the witness. Where the hosts generate their
//! own load (P4DB's nodes run their workers), the supervisor is: every host streams what it
//! commits to the supervisor, which appends it to its own framed, fsynced log
//! ([`crate::framed_log`], in `<data dir>/ledger/`).
//!
//! ## Two stages per commit
//!
//! A host's event loop ([`crate::host_proc`]) makes a round's log records durable, then shows
//! the round's effects. With a ledger, each event the system chooses to record is streamed
//! twice: as an [`Stage::Intent`] *before* the round's log records are synced, and as
//! [`Stage::Acked`] *after* (when the commit is durable and visible). So:
//!
//! - whatever a host's log holds, the ledger holds its intent (a kill between the two can only
//!   leave an intent without its log record: a commit nobody was told of, which may be lost);
//! - whatever the ledger holds as acknowledged was durable on the host before it was sent, and
//!   must be in the final state after any kill: the check a system runs at the end.
//!
//! The stream is a Unix stream socket (`<data dir>/ledger.sock`): reliable and ordered, and what
//! a host wrote to it before being killed is still delivered. A frame cut short by the kill is
//! dropped: its intent never reached the ledger, and its log records were never written.
//!
//! ## The supervisor's side
//!
//! [`LedgerServer`] accepts one connection per host process (a restarted host connects again),
//! a thread per connection checks each frame (length and CRC32C, as in every log) and hands it
//! to one writer thread, which appends what has arrived and fsyncs once per batch (group
//! commit). [`LedgerServer::finish`], called after every host has exited, waits for the
//! writer to make the last batch durable. [`read_ledger`] reads the ledger back for the
//! checks. The payload of each entry is the system's (the ledger does not look inside it).

use crate::error::{Result, RuntimeError};
use crate::framed_log::{self, FRAME_HEADER_BYTES, MAX_RECORD_BYTES};
use crate::wal_file::{read_dir_log, WalFile};
use pisadb_host::LogCodec;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// The ledger's directory in a rack's data directory.
pub const LEDGER_DIR: &str = "ledger";
/// The ledger's socket in a rack's data directory.
pub const LEDGER_SOCKET: &str = "ledger.sock";

/// When a host streamed an entry (see "Two stages per commit" in the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Before the host's log records of the round were synced: the host may die before the
    /// commit is durable.
    Intent,
    /// After they were synced: the commit is durable and acknowledged.
    Acked,
}

/// One entry of the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The host that streamed it.
    pub host: u16,
    /// When.
    pub stage: Stage,
    /// What the system recorded (its own encoding).
    pub payload: Vec<u8>,
}

/// An entry's bytes: stage (0 intent, 1 acked), host (u16 LE), payload.
impl LogCodec for Entry {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(match self.stage {
            Stage::Intent => 0,
            Stage::Acked => 1,
        });
        out.extend_from_slice(&self.host.to_le_bytes());
        out.extend_from_slice(&self.payload);
    }

    fn decode(payload: &[u8]) -> Result<Self, String> {
        let stage = match payload.first() {
            Some(0) => Stage::Intent,
            Some(1) => Stage::Acked,
            Some(other) => return Err(format!("a ledger entry of stage {other}: expected 0 (intent) or 1 (acked)")),
            None => return Err("an empty ledger entry".into()),
        };
        let host = payload.get(1..3).ok_or("a ledger entry cut short before its host")?;
        let host = u16::from_le_bytes([host[0], host[1]]);
        Ok(Entry { host, stage, payload: payload[3..].to_vec() })
    }
}

/// The supervisor's end of the ledger (see the module documentation).
pub struct LedgerServer {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    acceptor: JoinHandle<()>,
    writer: JoinHandle<Result<u64>>,
}

impl LedgerServer {
    /// Creates the ledger in `data_dir` (refusing one left by an earlier run) and starts
    /// accepting hosts on its socket.
    pub fn start(data_dir: &Path) -> Result<Self> {
        let dir = data_dir.join(LEDGER_DIR);
        let opened = WalFile::<Entry>::open(&dir)?;
        if !opened.records.is_empty() {
            return Err(RuntimeError::EarlierRun { dir });
        }
        let mut wal = opened.wal;
        let socket = data_dir.join(LEDGER_SOCKET);
        match std::fs::remove_file(&socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(RuntimeError::io(&socket, e)),
            _ => {}
        }
        let listener = UnixListener::bind(&socket).map_err(|e| RuntimeError::io(&socket, e))?;
        let (tx, rx) = mpsc::channel::<Entry>();
        let stop = Arc::new(AtomicBool::new(false));
        let accepting = Arc::clone(&stop);
        let acceptor = std::thread::spawn(move || {
            let mut readers = Vec::new();
            let mut read = |stream: UnixStream| {
                let tx = tx.clone();
                readers.push(std::thread::spawn(move || read_frames(stream, &tx)));
            };
            for stream in listener.incoming() {
                if let Ok(stream) = stream {
                    read(stream);
                }
                if accepting.load(Ordering::SeqCst) {
                    // Stopping: every connection already queued is still read (the one that
                    // woke the acceptor ends at once).
                    if listener.set_nonblocking(true).is_ok() {
                        while let Ok((stream, _)) = listener.accept() {
                            if stream.set_nonblocking(false).is_ok() {
                                read(stream);
                            }
                        }
                    }
                    break;
                }
            }
            drop(tx);
            readers.into_iter().for_each(|r| r.join().expect("a ledger reader panicked"));
        });
        let writer = std::thread::spawn(move || {
            let mut batch = Vec::new();
            while let Ok(first) = rx.recv() {
                batch.push(first);
                batch.extend(rx.try_iter());
                wal.commit(&batch)?;
                batch.clear();
            }
            Ok(wal.records)
        });
        Ok(LedgerServer { socket, stop, acceptor, writer })
    }

    /// Stops accepting, waits for every host's stream to end (call it once every host has
    /// exited) and for the last entries to be durable; the number of entries written.
    pub fn finish(self) -> Result<u64> {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor out of `accept` so it sees the stop.
        drop(UnixStream::connect(&self.socket));
        self.acceptor.join().expect("the ledger's acceptor panicked");
        let written = self.writer.join().expect("the ledger's writer panicked")?;
        let _ = std::fs::remove_file(&self.socket);
        Ok(written)
    }
}

/// Hands each whole, intact frame of `stream` to the writer, until the stream ends or a frame
/// is damaged (a host killed mid-write: the rest of that stream is nothing).
fn read_frames(mut stream: UnixStream, tx: &mpsc::Sender<Entry>) {
    let mut frame = vec![0; FRAME_HEADER_BYTES];
    loop {
        frame.truncate(FRAME_HEADER_BYTES);
        if stream.read_exact(&mut frame).is_err() {
            return;
        }
        let len = u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")) as usize;
        if len > MAX_RECORD_BYTES {
            return;
        }
        frame.resize(FRAME_HEADER_BYTES + len, 0);
        if stream.read_exact(&mut frame[FRAME_HEADER_BYTES..]).is_err() {
            return;
        }
        match framed_log::read::<Entry>(&frame) {
            Ok(read) if read.torn_tail.is_none() && read.records.len() == 1 => {
                if read.records.into_iter().try_for_each(|e| tx.send(e)).is_err() {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// A host's end of the ledger: streams entries to the supervisor.
pub struct LedgerClient {
    stream: UnixStream,
    host: u16,
    buffer: Vec<u8>,
}

impl LedgerClient {
    /// Connects host `host` to the ledger of the rack whose data directory is `data_dir`.
    pub fn connect(data_dir: &Path, host: u16) -> Result<Self> {
        let socket = data_dir.join(LEDGER_SOCKET);
        let stream = UnixStream::connect(&socket).map_err(|e| RuntimeError::io(&socket, e))?;
        Ok(LedgerClient { stream, host, buffer: Vec::new() })
    }

    /// Connects host `host` of the rack `cfg` to its supervisor's ledger, if the supervisor
    /// keeps one (its socket is in the rack's rendezvous directory); `None` if not.
    pub fn of_rack<S>(cfg: &crate::RackConfig<S>, host: u16) -> Result<Option<Self>> {
        match &cfg.rendezvous {
            Some(dir) if dir.join(LEDGER_SOCKET).exists() => Self::connect(dir, host).map(Some),
            _ => Ok(None),
        }
    }

    /// Streams `payloads` at `stage`, in one write.
    pub fn send(&mut self, stage: Stage, payloads: &[Vec<u8>]) -> Result<()> {
        if payloads.is_empty() {
            return Ok(());
        }
        self.buffer.clear();
        for payload in payloads {
            // The entry is built only to be framed; the payload is copied once.
            framed_log::append(&Entry { host: self.host, stage, payload: payload.clone() }, &mut self.buffer);
        }
        self.stream.write_all(&self.buffer).map_err(|e| RuntimeError::io(LEDGER_SOCKET, e))
    }
}

/// The ledger in `data_dir`, entry by entry in the order the supervisor wrote them.
pub fn read_ledger(data_dir: &Path) -> Result<Vec<Entry>> {
    read_dir_log(&data_dir.join(LEDGER_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_streamed_by_hosts_are_in_the_ledger_and_a_frame_cut_short_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let server = LedgerServer::start(dir.path()).unwrap();
        let mut a = LedgerClient::connect(dir.path(), 0).unwrap();
        let mut b = LedgerClient::connect(dir.path(), 1).unwrap();
        a.send(Stage::Intent, &[b"one".to_vec(), b"two".to_vec()]).unwrap();
        b.send(Stage::Acked, &[b"three".to_vec()]).unwrap();
        // A host killed mid-write: half a frame, then the stream ends.
        let mut cut = Vec::new();
        framed_log::append(&Entry { host: 0, stage: Stage::Acked, payload: b"lost".to_vec() }, &mut cut);
        a.stream.write_all(&cut[..cut.len() - 2]).unwrap();
        drop((a, b));
        assert_eq!(server.finish().unwrap(), 3);
        let mut entries = read_ledger(dir.path()).unwrap();
        entries.sort_by(|x, y| x.payload.cmp(&y.payload));
        let got: Vec<(u16, Stage, &[u8])> = entries.iter().map(|e| (e.host, e.stage, &e.payload[..])).collect();
        assert_eq!(
            got,
            vec![(0, Stage::Intent, &b"one"[..]), (1, Stage::Acked, &b"three"[..]), (0, Stage::Intent, &b"two"[..])]
        );
        // A second run in the same directory would mix two runs' ledgers: refused.
        assert!(matches!(LedgerServer::start(dir.path()), Err(RuntimeError::EarlierRun { .. })));
    }
}
