//! # pisadb-host: what a host is, to the drivers that run it
//!
//! Every machine that is not a switch — a database node, a client, a key-value store, a
//! replicated OCC server, a controller, an OLAP segment — is a [`Host`]: a sans-IO state
//! machine. It never reads a clock and never touches a socket or a file. A driver hands it the
//! current time with each input ([`Host::handle_datagram`], [`Host::handle_timer`]) and the host
//! appends what it wants done to an [`Outbox`]: datagrams to send, timers to set, write-ahead
//! log records, events for metrics and oracles, and the CPU time the handler took.
//!
//! Two drivers run the same hosts. The simulator (`pisadb-sim`) owns virtual time: it charges
//! `cpu_ns` to the core that ran the handler ([`Host::route`], [`Host::timer_core`]) and lets
//! the outputs take effect when the handler ends. The real runtime (`pisadb-runtime`) owns
//! sockets, threads and files. Neither knows which system it runs; a system with several kinds
//! of host (clients and a store) makes an enum of them and implements `Host` once for it.
//!
//! ## Durability before sends
//!
//! A handler's log records are durable before any of its sends leaves and before its events
//! count: the simulator drops all of a handler's outputs if its host crashes before the handler
//! ends, and the runtime syncs the log before it sends. A host may therefore answer as soon as
//! it has logged, as a real database does after its commit record is on disk.
//!
//! ## Logs on disk
//!
//! The simulator keeps a host's log records in memory as they are; the real runtime writes
//! them to a file. How one record's bytes look is the system's own encoding (its record type
//! implements [`LogCodec`]); the frame around it (length, CRC32C) and the rules for torn tails
//! and corruption are the runtime's, one for every log.
//!
//! ## Receive batches
//!
//! A datagram whose core is busy waits for it. By default the driver hands waiting datagrams
//! over in the order they arrived. A host may instead ask for *batch reordering*
//! ([`Host::sorts_receive_batches`]), as SwitchTx's servers do (seed 001, §3.4.1): when a core
//! frees, the driver takes every datagram waiting for it as one batch, stable-sorts the batch by
//! [`Host::receive_class`] (larger first, as the egress classes of 802.1p: an urgent phase
//! message is handled before the reads queued ahead of it, and messages of one class keep their
//! order), and hands them over in that order. Datagrams that arrive meanwhile form the next
//! batch. The host only names classes; the queue and the sort are the drivers' (the simulator's
//! per-core receive queues, the runtime's batch from the socket), so every system gets the same
//! mechanism.
//!
//! ## Determinism
//!
//! Each timer contributes explicit bytes to the simulator's trace hash ([`TraceBytes`]), so a
//! seed's history is one number that a refactor must not move.
//!
//! See `docs/ARCHITECTURE.md` (the layers; how a datagram travels) for the page that explains it.

use pisadb_core::Nanos;
pub use pisadb_core::{TraceBytes, TraceHash};

/// Which core of a host runs a handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// This core (a worker's own core, for its transaction's events).
    Core(u16),
    /// Whichever core is free first (requests from other hosts).
    AnyCore,
}

/// A datagram to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send {
    /// The destination host, or the switch itself (`pisadb_wire::SWITCH_ID`).
    pub dst: u16,
    /// The whole datagram, frame included.
    pub bytes: Vec<u8>,
}

/// What one handler produced, carried out by the driver when the handler ends.
#[derive(Debug)]
pub struct Outbox<Timer, Log, Event> {
    /// Datagrams to send, in order.
    pub sends: Vec<Send>,
    /// Timers to set: (when, which).
    pub timers: Vec<(Nanos, Timer)>,
    /// Write-ahead log records, durable before any send of the same handler leaves.
    pub log: Vec<Log>,
    /// Events for metrics and oracles (commits, aborts, …), reported when the handler ends.
    pub events: Vec<Event>,
    /// CPU time the handler took.
    pub cpu_ns: Nanos,
}

impl<Timer, Log, Event> Default for Outbox<Timer, Log, Event> {
    fn default() -> Self {
        Outbox { sends: Vec::new(), timers: Vec::new(), log: Vec::new(), events: Vec::new(), cpu_ns: 0 }
    }
}

/// The outbox of host type `H`.
pub type HostOutbox<H> = Outbox<<H as Host>::Timer, <H as Host>::Log, <H as Host>::Event>;

/// A host: a state machine driven by datagrams and timers, with the time passed in.
pub trait Host {
    /// A timer the host asks for; it comes back through [`Host::handle_timer`].
    type Timer: Copy + std::fmt::Debug + TraceBytes;
    /// A write-ahead log record (what survives a crash; a restart reads them back).
    type Log: Clone + std::fmt::Debug;
    /// What a handler reports to metrics and oracles.
    type Event;

    /// Cores the host has (at least one).
    fn cores(&self) -> u16;

    /// Starts the host at `now` (workers begin, recovered work resumes).
    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>);

    /// Which core handles datagram `bytes`.
    fn route(&self, bytes: &[u8]) -> Route;

    /// Which core runs `timer`.
    fn timer_core(&self, timer: &Self::Timer) -> u16;

    /// Datagram `bytes` arrives at `now`.
    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>);

    /// `timer` fires at `now`.
    fn handle_timer(&mut self, now: Nanos, timer: Self::Timer, out: &mut HostOutbox<Self>);

    /// Starts no new work from now on; what is in flight finishes.
    fn stop(&mut self);

    /// Whether nothing is in flight (after [`Host::stop`]: the host may leave).
    fn is_idle(&self) -> bool;

    /// How much work is in flight (open transactions, requests awaiting an answer): what a
    /// stopping rack watches fall while it drains, and gives up on when it stops falling. The
    /// default counts 1 while the host is not idle.
    fn in_flight(&self) -> u64 {
        u64::from(!self.is_idle())
    }

    /// Whether the driver stable-sorts each batch of datagrams that waited for a core by
    /// [`Host::receive_class`] before handing them over (see "Receive batches" above). The
    /// default, `false`, hands them over in arrival order.
    fn sorts_receive_batches(&self) -> bool {
        false
    }

    /// The class of datagram `bytes` in a receive batch: larger classes are handled first.
    /// Read only when [`Host::sorts_receive_batches`] says so.
    fn receive_class(&self, _bytes: &[u8]) -> u8 {
        0
    }

    /// A switch this host depends on was rebuilt and answers in `epoch` from now on: answers
    /// from older epochs (a crashed switch's, still on the wire) must be ignored. Hosts that
    /// keep no switch state ignore it.
    fn fence_switch(&mut self, _epoch: u16) {}
}

/// How one of a host's write-ahead log records is kept in a file: each system's own record
/// encoding, inside the one framing every log shares.
///
/// The real runtime frames each record (its length and a CRC32C, `pisadb_runtime::framed_log`),
/// appends the records a round of handlers produced with one write and one `fdatasync`, and
/// reads the whole file back when the host restarts. Torn tails and corruption are the
/// framing's business, so a codec only says how one record's bytes look.
pub trait LogCodec: Sized {
    /// Appends `self`'s encoding to `out` (the framing delimits it: no length is needed).
    fn encode(&self, out: &mut Vec<u8>);

    /// Reads one record from the whole of `payload`, or says why it is not one.
    fn decode(payload: &[u8]) -> Result<Self, String>;
}

/// The log of a host that logs nothing (`type Log = ()`): nothing is written (such a host
/// pushes no record), and any record found in its log is refused.
impl LogCodec for () {
    fn encode(&self, _out: &mut Vec<u8>) {}

    fn decode(payload: &[u8]) -> Result<(), String> {
        Err(format!("this host logs nothing, but its log holds a record of {} bytes", payload.len()))
    }
}
