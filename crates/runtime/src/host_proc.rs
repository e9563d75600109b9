//! A host as a process: any [`Host`] driven by a UDP socket, a timer heap and the wall clock,
//! with its write-ahead log on disk.
//!
//! ## The event loop
//!
//! One thread runs rounds. A round reads the clock once, runs the timers that are due, receives
//! a batch of datagrams (waiting at most until the next timer) and hands each to the host. The
//! log records all these handlers produced are then written and made durable with one
//! `fdatasync` (group commit), and only then are their datagrams sent and their events
//! reported: nothing anyone can see is ahead of the log ([`pisadb_host`]'s "Durability before
//! sends"). A host's cores are logical here: they share the thread, as they share the state
//! machine; `cpu_ns` is what the simulator charges, and the real process spends it for real.
//!
//! With a ledger ([`serve_ledgered`]), the events the system keeps are streamed to the
//! supervisor's ledger twice: as intents before the round's records are synced, acknowledged
//! after its events are reported ([`crate::ledger`]).
//!
//! ## Receive batches
//!
//! By default a round hands over what one batched receive returned, in arrival order. A host
//! that sorts its receive batches ([`Host::sorts_receive_batches`]; SwitchTx's servers, seed
//! 001 §3.4.1) gets the simulator's batch reordering for real: the round drains what is ready
//! on the socket (up to [`RECEIVE_BATCH_MAX`] datagrams, so timers are not starved), stable-sorts
//! it by [`Host::receive_class`] (larger first, arrival order within a class) and hands it over
//! in that order. The socket's buffer is the receive queue: what waited there while the host
//! was busy with the last round is this round's batch.
//!
//! Everything a host sends goes to the switch it hangs off; only datagrams from that switch's
//! address are handed to it (anything else is counted and dropped).
//!
//! ## Start, stop
//!
//! The system builds its host first (from the records [`open_log`] found, if it restarts) and
//! hands it to [`serve`], which binds the host's address, meets the others at the rendezvous,
//! waits for the rack's epoch and runs the loop. At the config's stop time the host is told to
//! stop starting new work ([`Host::stop`]); it keeps serving until it is idle. SIGINT or
//! SIGTERM stops it the same way. What the system reports afterwards is its own.
//!
//! ## Drain ends on progress, not on a clock
//!
//! A stopping rack waits as long as its work in flight ([`Host::in_flight`], summed over the
//! hosts) keeps reaching new lows: a restarted switch rebuilding from the logs, or a host down
//! after a kill, holds it up only while nothing else finishes. When the sum has not reached a
//! new low for [`DRAIN_STALL_NS`] the drain has stalled ([`DrainProgress`]): the hosts leave
//! with their work in flight, undrained, and say what was left (a livelock, such as a
//! controller that never goes idle, ends the run in that time instead of running a grace out).
//!
//! ## Leaving together
//!
//! A host that is idle may still be needed: another host's transaction, aborted and retried,
//! may send it a request a moment later. A host that left as soon as it was idle would leave
//! that transaction retrying, undrained. So in a rack with a rendezvous a stopping host reports
//! whether it is idle, its work in flight and how many datagrams it has moved, to the
//! supervisor every few milliseconds ([`DrainStatus`]). The supervisor writes `done` saying
//! `drained` once it has seen every host idle with no datagram moving between two looks (that
//! state is stable: every message in flight has a sender or a receiver that is not idle), and
//! a host then leaves once idle; or saying `stalled` when the rack's drain stalls, and every
//! host leaves at once. A host alone applies the stall rule to itself.

use crate::error::Result;
use crate::ledger::{LedgerClient, Stage};
use crate::udp::BatchSocket;
use crate::wal_file::WalFile;
use crate::{stop_requested, unix_now_ns, write_atomically, RackConfig, Role, DONE_FILE, DRAIN_DIR};
use pisadb_core::{Nanos, Scheduler};
use pisadb_host::{Host, HostOutbox, LogCodec};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// How long a stopping rack's work in flight may go without reaching a new low before the
/// drain is given up: a reason to stop (no progress), where a fixed grace was only a clock.
/// Long enough for a process killed near the end to come back and a restarted switch to
/// rebuild from the logs, during which nothing may finish.
pub const DRAIN_STALL_NS: Nanos = 8_000_000_000;

/// What the supervisor's `done` file says: every host may leave once idle.
pub const DONE_DRAINED: &[u8] = b"drained";
/// What the supervisor's `done` file says: the drain stalled; every host leaves now.
pub const DONE_STALLED: &[u8] = b"stalled";

/// Whether a drain still progresses: its work in flight reached a new low within the last
/// [`DRAIN_STALL_NS`] (see "Drain ends on progress" in the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainProgress {
    /// The lowest work in flight seen, and when it was first seen.
    low: Option<(u64, Nanos)>,
}

impl DrainProgress {
    /// Takes in the work in flight at `now`; whether the drain has stalled.
    pub fn stalled(&mut self, now: Nanos, in_flight: u64) -> bool {
        match self.low {
            Some((low, _)) if in_flight >= low => {}
            _ => self.low = Some((in_flight, now)),
        }
        self.low.is_some_and(|(_, since)| now.saturating_sub(since) > DRAIN_STALL_NS)
    }
}

/// How often a stopping host tells the supervisor whether it is idle.
pub const DRAIN_REPORT_NS: Nanos = 5_000_000;

/// The longest a round waits for a datagram when no timer is due sooner.
const IDLE_WAIT_NS: Nanos = 1_000_000;

/// The most datagrams one round drains from the socket for a host that sorts its receive
/// batches: a bound, so that a flood cannot hold its timers back indefinitely.
pub const RECEIVE_BATCH_MAX: usize = 8 * crate::udp::BATCH;

/// A stopping host's standing, in `<rendezvous>/drain/host-N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainStatus {
    /// Nothing in flight: no work of its own, none served for others.
    pub idle: bool,
    /// Datagrams received and sent so far.
    pub activity: u64,
    /// Its work in flight ([`Host::in_flight`]).
    pub in_flight: u64,
}

/// What a stopping host does next.
enum Leave {
    /// Keeps serving.
    Stay,
    /// Leaves, idle.
    Drained,
    /// Leaves with work in flight: the drain stalled.
    Stalled,
}

/// What [`serve`] saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostRun {
    /// Rack time of the first round (ns since the epoch).
    pub started_ns: Nanos,
    /// Seconds between the first round and the stop time.
    pub seconds: f64,
    /// Whether the host was idle when it left (else the drain stalled).
    pub drained: bool,
    /// If not drained: the timers still pending, in words.
    pub timers_pending: Option<String>,
    /// Datagrams received from the switch.
    pub datagrams_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// Datagrams from any address other than the host's switch, dropped unread.
    pub not_from_switch: u64,
}

/// One round's receive: hands the datagrams from `switch` that arrive within `wait` (none:
/// only those already there) to `host`, counting them in `run`. A host that sorts its receive
/// batches gets everything ready on the socket (up to [`RECEIVE_BATCH_MAX`]), stable-sorted by
/// class (see "Receive batches" above); any other host what one batched receive returns, in
/// order.
fn receive_round<H: Host>(
    host: &mut H,
    socket: &mut BatchSocket,
    switch: SocketAddr,
    now: Nanos,
    wait: Duration,
    out: &mut HostOutbox<H>,
    run: &mut HostRun,
) -> Result<usize> {
    if !host.sorts_receive_batches() {
        return socket.recv_batch(wait, |from, bytes| {
            if from == switch {
                run.datagrams_in += 1;
                host.handle_datagram(now, bytes, out);
            } else {
                run.not_from_switch += 1;
            }
        });
    }
    let mut batch: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut received = 0;
    let mut wait = wait;
    loop {
        let got = socket.recv_batch(wait, |from, bytes| {
            if from == switch {
                batch.push((host.receive_class(bytes), bytes.to_vec()));
            } else {
                run.not_from_switch += 1;
            }
        })?;
        received += got;
        // A short read means the socket is drained; only the first receive waits.
        if got < crate::udp::BATCH || received >= RECEIVE_BATCH_MAX {
            break;
        }
        wait = Duration::ZERO;
    }
    // Stable: arrival order within a class.
    batch.sort_by_key(|&(class, _)| std::cmp::Reverse(class));
    run.datagrams_in += batch.len() as u64;
    for (_, bytes) in batch {
        host.handle_datagram(now, &bytes, out);
    }
    Ok(received)
}

/// Opens host `name`'s log in `dir` if `durable`: the log, ready for appends, and the records
/// it holds (empty for a fresh host). A torn tail is cut off and said so on stderr.
pub fn open_log<R: LogCodec>(durable: bool, dir: &Path, name: &str) -> Result<(Option<WalFile<R>>, Vec<R>)> {
    if !durable {
        return Ok((None, Vec::new()));
    }
    let opened = WalFile::open(dir)?;
    if let Some((why, bytes, aside)) = &opened.torn_tail {
        eprintln!(
            "{name}: the log ended in a torn record ({why}, {bytes} bytes), as a crash mid-write leaves it: \
             cut off, its bytes kept in {}",
            aside.display()
        );
    }
    Ok((Some(opened.wal), opened.records))
}

/// Runs `host` as host `id` of `cfg` until it is stopped and has drained (see the module
/// documentation), logging to `wal` if given; `on_event` sees each event at the rack time its
/// round's records became durable. `name` names the host in messages (`node 2`).
pub fn serve<H, S>(
    cfg: &RackConfig<S>,
    id: u16,
    name: &str,
    host: &mut H,
    wal: Option<&mut WalFile<H::Log>>,
    on_event: impl FnMut(Nanos, H::Event),
) -> Result<HostRun>
where
    H: Host,
    H::Log: LogCodec,
    S: Clone + Serialize + serde::de::DeserializeOwned,
{
    serve_ledgered(cfg, id, name, host, wal, None, on_event)
}

/// What a host streams to the supervisor's ledger ([`crate::ledger`]): the connection, and
/// which of its events to record and how (`None`: an event the ledger does not keep).
pub struct Ledgered<'a, E> {
    /// The host's end of the ledger.
    pub client: &'a mut LedgerClient,
    /// An event's entry, if the ledger keeps it.
    pub entry: fn(&E) -> Option<Vec<u8>>,
}

/// [`serve`], streaming to `ledger` each event it keeps: as an intent before the round's
/// log records are synced, acknowledged after (see [`crate::ledger`]).
pub fn serve_ledgered<H, S>(
    cfg: &RackConfig<S>,
    id: u16,
    name: &str,
    host: &mut H,
    wal: Option<&mut WalFile<H::Log>>,
    ledger: Option<Ledgered<'_, H::Event>>,
    on_event: impl FnMut(Nanos, H::Event),
) -> Result<HostRun>
where
    H: Host,
    H::Log: LogCodec,
    S: Clone + Serialize + serde::de::DeserializeOwned,
{
    let listen = cfg.network.hosts[usize::from(id)];
    let mut socket = BatchSocket::bind(listen)?;
    let cfg = &cfg.ready(Role::Host(id))?;
    // Every host starts at the rack's epoch (a restarted one at once).
    std::thread::sleep(Duration::from_nanos(cfg.epoch_unix_ns.saturating_sub(unix_now_ns())));
    let mut driver = Driver {
        cfg,
        id,
        name,
        switch: cfg.network.uplink_addr(id),
        timers: Scheduler::new(),
        run: HostRun::default(),
        next_drain_report: 0,
        progress: DrainProgress::default(),
        on_event,
        ledger,
    };
    driver.run(host, &mut socket, wal)?;
    Ok(driver.run)
}

struct Driver<'a, H: Host, S, F> {
    /// The supervisor's ledger, if the rack keeps one.
    ledger: Option<Ledgered<'a, H::Event>>,
    cfg: &'a RackConfig<S>,
    id: u16,
    name: &'a str,
    /// The switch the host hangs off: everything goes there, only its datagrams are taken.
    switch: SocketAddr,
    timers: Scheduler<H::Timer>,
    run: HostRun,
    next_drain_report: Nanos,
    /// A host alone: its own drain's progress.
    progress: DrainProgress,
    on_event: F,
}

impl<H, S, F> Driver<'_, H, S, F>
where
    H: Host,
    H::Log: LogCodec,
    F: FnMut(Nanos, H::Event),
{
    fn run(&mut self, host: &mut H, socket: &mut BatchSocket, mut wal: Option<&mut WalFile<H::Log>>) -> Result<()> {
        let stop_at = self.cfg.stop_ns();
        let mut now = self.cfg.now_ns();
        self.run.started_ns = now;
        self.run.seconds = stop_at.saturating_sub(now) as f64 / 1e9;
        let mut out = HostOutbox::<H>::default();
        host.start(now, &mut out);
        let mut stopping = false;
        loop {
            self.flush(&mut out, socket, wal.as_deref_mut())?;
            now = self.cfg.now_ns().max(now);
            if !stopping && (now >= stop_at || stop_requested()) {
                host.stop();
                stopping = true;
            }
            if stopping {
                match self.may_leave(now, host.is_idle(), host.in_flight())? {
                    Leave::Stay => {}
                    Leave::Drained => {
                        self.run.drained = true;
                        return Ok(());
                    }
                    Leave::Stalled => {
                        eprintln!(
                            "{}: the drain stalled ({} in flight, no new low for {} s); stopping anyway",
                            self.name,
                            host.in_flight(),
                            DRAIN_STALL_NS / 1_000_000_000
                        );
                        let next = self.timers.peek().map(|(at, t)| format!("{t:?} in {} ns", at.saturating_sub(now)));
                        self.run.timers_pending = Some(format!("{} timers pending, next: {next:?}", self.timers.len()));
                        return Ok(());
                    }
                }
            }
            if self.timers.peek_time().is_some_and(|at| at <= now) {
                // Replies that arrived while this host was busy (a slow log write) count before
                // the timeouts waiting for them: otherwise the host resends what was answered.
                self.receive(host, socket, now, Duration::ZERO, &mut out)?;
            }
            while let Some((_, timer)) = self.timers.pop_due(now) {
                host.handle_timer(now, timer, &mut out);
            }
            if !out.timers.is_empty() || !out.sends.is_empty() {
                continue; // flush first: a timer due now must not wait for the socket
            }
            let next_timer = self.timers.peek_time().unwrap_or(now + IDLE_WAIT_NS);
            let wait = Duration::from_nanos(next_timer.saturating_sub(now).clamp(1_000, IDLE_WAIT_NS));
            self.receive(host, socket, now, wait, &mut out)?;
        }
    }

    /// Hands the datagrams that arrive within `wait` (none: only those already there) to the
    /// host.
    fn receive(
        &mut self,
        host: &mut H,
        socket: &mut BatchSocket,
        now: Nanos,
        wait: Duration,
        out: &mut HostOutbox<H>,
    ) -> Result<usize> {
        receive_round(host, socket, self.switch, now, wait, out, &mut self.run)
    }

    /// Whether a stopping host may leave now that it is `idle` or not, with `in_flight` work.
    /// Alone, as soon as it is idle, or when its own drain stalls. In a rack with a
    /// rendezvous, as the supervisor's `done` says (see "Leaving together" in the module
    /// documentation): until then it tells the supervisor how it stands, every
    /// [`DRAIN_REPORT_NS`].
    fn may_leave(&mut self, now: Nanos, idle: bool, in_flight: u64) -> Result<Leave> {
        let Some(dir) = &self.cfg.rendezvous else {
            return Ok(match (idle, self.progress.stalled(now, in_flight)) {
                (true, _) => Leave::Drained,
                (false, true) => Leave::Stalled,
                (false, false) => Leave::Stay,
            });
        };
        if now < self.next_drain_report {
            return Ok(Leave::Stay);
        }
        self.next_drain_report = now + DRAIN_REPORT_NS;
        let status = DrainStatus { idle, activity: self.run.datagrams_in + self.run.datagrams_out, in_flight };
        write_atomically(&dir.join(DRAIN_DIR).join(Role::Host(self.id).tag()), &status)?;
        Ok(match std::fs::read(dir.join(DONE_FILE)) {
            Ok(said) if said == DONE_STALLED => Leave::Stalled,
            Ok(_) if idle => Leave::Drained,
            _ => Leave::Stay,
        })
    }

    /// Group commit: makes the round's log records durable, then sends, sets timers and
    /// reports events.
    fn flush(
        &mut self,
        out: &mut HostOutbox<H>,
        socket: &mut BatchSocket,
        wal: Option<&mut WalFile<H::Log>>,
    ) -> Result<()> {
        let entries: Vec<Vec<u8>> = match &mut self.ledger {
            Some(l) => {
                let entries: Vec<_> = out.events.iter().filter_map(l.entry).collect();
                l.client.send(Stage::Intent, &entries)?;
                entries
            }
            None => Vec::new(),
        };
        if let Some(wal) = wal {
            wal.commit(&out.log)?;
        }
        out.log.clear();
        let switch = self.switch;
        let datagrams: Vec<_> = out.sends.drain(..).map(|s| (switch, s.bytes)).collect();
        self.run.datagrams_out += datagrams.len() as u64;
        socket.send_batch(&datagrams);
        for (at, timer) in out.timers.drain(..) {
            self.timers.push(at, timer);
        }
        let now = self.cfg.now_ns();
        for event in out.events.drain(..) {
            (self.on_event)(now, event);
        }
        if let Some(l) = &mut self.ledger {
            l.client.send(Stage::Acked, &entries)?;
        }
        out.cpu_ns = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::TraceHash;
    use pisadb_host::{Route, TraceBytes};

    #[test]
    fn a_drain_whose_work_keeps_falling_goes_on_and_one_that_stops_falling_stalls() {
        let s = DRAIN_STALL_NS;
        let mut p = DrainProgress::default();
        assert!(!p.stalled(0, 10));
        assert!(!p.stalled(s, 10), "no new low yet, but not for longer than the window");
        assert!(!p.stalled(s + 1, 9), "a new low restarts the window");
        assert!(!p.stalled(2 * s, 12), "work rising again is no progress, but the window is young");
        assert!(p.stalled(2 * s + 2, 9), "no new low for longer than the window: stalled");
        let mut busy = DrainProgress::default();
        assert!(!busy.stalled(0, 3) && !busy.stalled(s / 2, 2) && !busy.stalled(s, 1) && !busy.stalled(3 * s / 2, 0));
    }

    #[derive(Clone, Copy, Debug)]
    struct NoTimer;

    impl TraceBytes for NoTimer {
        fn trace(&self, _hash: &mut TraceHash) {}
    }

    /// A host whose datagrams are (class, tag): it records the tags in handling order.
    struct Recorder {
        sorts: bool,
        tags: Vec<u8>,
    }

    impl Host for Recorder {
        type Timer = NoTimer;
        type Log = ();
        type Event = ();
        fn cores(&self) -> u16 {
            1
        }
        fn start(&mut self, _now: Nanos, _out: &mut HostOutbox<Self>) {}
        fn route(&self, _bytes: &[u8]) -> Route {
            Route::AnyCore
        }
        fn timer_core(&self, _timer: &NoTimer) -> u16 {
            0
        }
        fn handle_datagram(&mut self, _now: Nanos, bytes: &[u8], _out: &mut HostOutbox<Self>) {
            self.tags.push(bytes[1]);
        }
        fn handle_timer(&mut self, _now: Nanos, _timer: NoTimer, _out: &mut HostOutbox<Self>) {}
        fn stop(&mut self) {}
        fn is_idle(&self) -> bool {
            true
        }
        fn sorts_receive_batches(&self) -> bool {
            self.sorts
        }
        fn receive_class(&self, bytes: &[u8]) -> u8 {
            bytes[0]
        }
    }

    /// A backlog of 100 low-class datagrams (tags 0..100), then one high-class one
    /// (tag 255), sent over loopback from a "switch" socket before the host receives; then
    /// the rounds until all have been handed over. The tags in handling order.
    fn backlog_then_urgent(sorts: bool) -> (Vec<u8>, HostRun) {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut host_socket = BatchSocket::bind(loopback).unwrap();
        let mut switch_socket = BatchSocket::bind(loopback).unwrap();
        let to = host_socket.local_addr();
        let mut datagrams: Vec<(SocketAddr, Vec<u8>)> = (0..100u8).map(|t| (to, vec![0, t])).collect();
        datagrams.push((to, vec![2, 255]));
        assert_eq!(switch_socket.send_batch(&datagrams), 101);
        let mut host = Recorder { sorts, tags: Vec::new() };
        let mut out = HostOutbox::<Recorder>::default();
        let mut run = HostRun::default();
        let switch = switch_socket.local_addr();
        // Bounded: each round takes at least one datagram while any is queued.
        for _ in 0..1_000 {
            if host.tags.len() == 101 {
                break;
            }
            receive_round(&mut host, &mut host_socket, switch, 0, Duration::from_millis(100), &mut out, &mut run)
                .unwrap();
        }
        (host.tags, run)
    }

    #[test]
    fn a_sorting_host_handles_a_high_class_datagram_before_the_low_backlog_queued_ahead_of_it() {
        let (tags, run) = backlog_then_urgent(true);
        assert_eq!(tags.len(), 101, "every datagram handed over once");
        assert_eq!(tags[0], 255, "the urgent datagram overtakes the whole backlog");
        assert_eq!(tags[1..], (0..100).collect::<Vec<u8>>()[..], "the backlog keeps its order");
        assert_eq!(run.datagrams_in, 101);
    }

    #[test]
    fn a_host_that_does_not_sort_handles_datagrams_in_arrival_order() {
        let (tags, _) = backlog_then_urgent(false);
        assert_eq!(tags.len(), 101);
        assert_eq!(tags[100], 255, "the urgent datagram waits behind the backlog");
    }

    #[test]
    fn datagrams_from_anyone_but_the_switch_are_counted_and_not_handed_over() {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut host_socket = BatchSocket::bind(loopback).unwrap();
        let mut stranger = BatchSocket::bind(loopback).unwrap();
        assert_eq!(stranger.send_batch(&[(host_socket.local_addr(), vec![2, 1])]), 1);
        let mut host = Recorder { sorts: true, tags: Vec::new() };
        let (mut out, mut run) = (HostOutbox::<Recorder>::default(), HostRun::default());
        let switch = SocketAddr::from(([127, 0, 0, 1], 9));
        receive_round(&mut host, &mut host_socket, switch, 0, Duration::from_millis(100), &mut out, &mut run).unwrap();
        assert_eq!((host.tags.len(), run.not_from_switch, run.datagrams_in), (0, 1, 0));
    }
}
