//! What can go wrong in the real runtime, as one error enum.
//!
//! Every variant says what failed and on what (the file, the address, the process, the
//! setting), so a message reaches the user without a caller adding context. A setting out of
//! range names the setting, the value given and the values accepted ([`RuntimeError::BadSetting`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use thiserror::Error;

/// An error of the real runtime.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// A file or directory could not be read, written or created.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A JSON file (a config, a report) does not parse.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        source: serde_json::Error,
    },
    /// A write-ahead log is corrupt before its tail.
    #[error("{}: {source}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// The codec's complaint.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A setting is out of range.
    #[error("{setting} {value}: expected {accepted}")]
    BadSetting {
        /// The setting (a config field or a flag).
        setting: String,
        /// The value given.
        value: String,
        /// The values accepted.
        accepted: String,
    },
    /// A UDP socket could not be bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// A system call of the event loop failed.
    #[error("{call}: {source}")]
    Syscall {
        /// The call (`ppoll`, `recvmmsg`, `sigaction`, …).
        call: &'static str,
        /// Its error number.
        source: nix::errno::Errno,
    },
    /// A process of the rack could not be started.
    #[error("cannot start the {process} process: {source}")]
    Spawn {
        /// The process (`switch`, `node 2`, …).
        process: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// A process of the rack could not be signalled or waited for.
    #[error("{process}: {action}: {source}")]
    Signal {
        /// The process.
        process: String,
        /// What was tried (`kill`, `wait`).
        action: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
    /// A process of the rack ended with a failure.
    #[error("the {process} process failed ({status}); see its messages above")]
    ProcessFailed {
        /// The process.
        process: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
    /// A process of the rack ended before the rack started.
    #[error("the {process} process ended before the rack started ({status}); see its messages above")]
    EndedBeforeStart {
        /// The process.
        process: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
    /// SIGINT or SIGTERM arrived before the rack started.
    #[error("{who}: stopped before the rack started")]
    StoppedBeforeStart {
        /// Who was waiting.
        who: String,
    },
    /// The rendezvous did not complete in time.
    #[error("{who}: nobody completed the rendezvous in {} within {timeout_s} s", dir.display())]
    RendezvousTimeout {
        /// Who was waiting.
        who: String,
        /// The rendezvous directory.
        dir: PathBuf,
        /// How long it waited.
        timeout_s: u64,
    },
    /// A data directory holds a log of an earlier run.
    #[error("{} holds a log from an earlier run: pick an empty --data-dir", dir.display())]
    EarlierRun {
        /// The directory.
        dir: PathBuf,
    },
    /// An `ip` command (network namespaces) failed.
    #[error("`ip {command}` failed: {stderr}")]
    Ip {
        /// Its arguments.
        command: String,
        /// What it printed.
        stderr: String,
    },
    /// `ip` could not be run at all.
    #[error("cannot run `ip` ({source}): network namespaces need iproute2 (apt-get install -y iproute2) and root")]
    NoIp {
        /// What the system said.
        source: std::io::Error,
    },
}

impl RuntimeError {
    /// A [`RuntimeError::Io`] on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RuntimeError::Io { path: path.into(), source }
    }

    /// A [`RuntimeError::BadSetting`].
    pub fn bad_setting(setting: impl Into<String>, value: impl ToString, accepted: impl Into<String>) -> Self {
        RuntimeError::BadSetting { setting: setting.into(), value: value.to_string(), accepted: accepted.into() }
    }
}

/// A result of the runtime.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
