//! The store: one host holding key → value, executing each request atomically in arrival
//! order with optimistic concurrency control *by value*.
//!
//! A request is a list of `READ(k)`, `WRITE(k, v)` and `VALUE(k, v)` ops, where `VALUE` is a
//! compare: "I believe k = v". If any compare fails the store answers `ABORT` carrying the
//! current value of every failed-compare key and every written key (so the client can retry
//! with fresh values). Otherwise it applies the writes in order and answers `OK` with
//! `UPDATED(k, w)` per write and `VALUE(k, v)` per read, reads seeing the request's own
//! earlier writes. An empty request is refused with `BADREQ`. A key never written reads as 0.
//!
//! Why not the engine's `cc::Occ`: that validator checks *versions* (ids of the writing
//! transaction) of tuples read inside the same transaction. Gotthard's compares carry values
//! the client learned earlier (from its cache or a switch reply), so the check is by value and
//! ABA is accepted by design: a compare against an equal value is a success. Each request is
//! validated and applied in one step on one core, so no locks are needed; the check is the
//! few lines of [`Store::execute`].
//!
//! Duplicates: a request id names a client's transaction and stays the same over all its
//! attempts (see `client.rs`). The store keeps, per client, the id of the last transaction it
//! *committed* and that reply. Any attempt of that transaction again — a retransmission, a
//! duplicated datagram, or a retry the client sent because the switch aborted a copy of an
//! attempt that in fact got through — gets the same `OK` and applies nothing: a transaction
//! commits at most once. An older id is dropped (its client has moved on, so it learned the
//! outcome). Aborts are not remembered: an abort changes nothing, so executing a duplicate of
//! an aborted attempt again is harmless and answers with the values current now.
//!
//! History: each commit gets the next sequence number, and every key remembers the number of
//! the commit that last wrote it (0: never written). [`StoreEvent::Committed`] reports, per
//! key read or compared, the commit whose value it saw, and per key written the commit it
//! overwrote, which is the version record `pisadb_check` checks for serializability.

use crate::wire::{Message, Op, OpType, Status, FLAG_REPLY};
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route, TraceBytes, TraceHash};
use std::collections::BTreeMap;

/// CPU time the store charges per request that writes or compares (and per datagram it
/// rejects): the median of `cargo bench -p pisadb-gotthard --bench handlers`'s
/// `store_increment` (`CALIBRATION.md`). The paper's store is a Python process; ours is this
/// code, so this is what we charge.
pub const STORE_REQUEST_NS: Nanos = 560;
/// CPU time the store charges per all-`READ` request: the median of `store_read`.
pub const STORE_READ_NS: Nanos = 340;

/// What the store reports to the observer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreEvent {
    /// A request committed.
    Committed {
        /// The client.
        client: u32,
        /// The request id.
        request: u32,
        /// The commit's sequence number at the store (1, 2, …): its version name.
        id: u64,
        /// The writes applied, in order, as (key, value).
        writes: Vec<(u32, i32)>,
        /// Per key compared or read: the sequence number of the commit whose value it saw
        /// (0: the initial value; its own `id` for a read of its own write).
        read_versions: Vec<(u32, u64)>,
        /// Per key written (once each): the sequence number of the commit it overwrote.
        write_versions: Vec<(u32, u64)>,
    },
    /// A request aborted at the store.
    Aborted,
    /// A duplicate was answered from the last reply.
    Replayed,
    /// A datagram was rejected, with the reason.
    Rejected(&'static str),
}

/// The store has no timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoTimer {}

impl TraceBytes for NoTimer {
    fn trace(&self, _hash: &mut TraceHash) {
        match *self {}
    }
}

/// The store host.
#[derive(Debug, Default)]
pub struct Store {
    /// This host's address (the source of its replies).
    address: u16,
    /// Key → value; absent keys are 0.
    values: BTreeMap<u32, i32>,
    /// Per client: the last request id committed and its reply.
    last: BTreeMap<u32, (u32, Message)>,
    /// Key → sequence number of the commit that last wrote it; absent keys: 0.
    versions: BTreeMap<u32, u64>,
    /// Commits so far.
    commits: u64,
}

impl Store {
    /// An empty store at `address`.
    pub fn new(address: u16) -> Self {
        Store { address, ..Store::default() }
    }

    /// The value of `key` (0 if never written).
    pub fn value(&self, key: u32) -> i32 {
        self.values.get(&key).copied().unwrap_or(0)
    }

    /// Executes one request atomically and returns the reply (status and ops).
    pub fn execute(&mut self, request: &Message) -> Message {
        let mut reply = Message {
            flags: FLAG_REPLY,
            client: request.client,
            request: request.request,
            attempt: request.attempt,
            status: Status::Ok,
            ops: Vec::new(),
        };
        if request.ops.is_empty() {
            reply.status = Status::BadRequest;
            return reply;
        }
        let failed: Vec<u32> = request
            .ops
            .iter()
            .filter(|op| op.op_type == OpType::Value && self.value(op.key) != op.value)
            .map(|op| op.key)
            .collect();
        if !failed.is_empty() {
            reply.status = Status::Abort;
            for op in &request.ops {
                let listed = reply.ops.iter().any(|o: &Op| o.key == op.key);
                let wanted = (op.op_type == OpType::Value && failed.contains(&op.key)) || op.op_type == OpType::Write;
                if wanted && !listed {
                    reply.ops.push(Op::value(op.key, self.value(op.key)));
                }
            }
            return reply;
        }
        for op in &request.ops {
            match op.op_type {
                OpType::Write => {
                    self.values.insert(op.key, op.value);
                    reply.ops.push(Op::updated(op.key, op.value));
                }
                OpType::Read => reply.ops.push(Op::value(op.key, self.value(op.key))),
                OpType::Value | OpType::Updated => {}
            }
        }
        reply
    }

    fn serve(&mut self, src: u16, request: Message, out: &mut HostOutbox<Self>) {
        if request.is_reply() {
            return out.events.push(StoreEvent::Rejected("reply_to_store"));
        }
        match self.last.get(&request.client) {
            Some((id, reply)) if *id == request.request => {
                out.sends.push(pisadb_host::Send { dst: src, bytes: reply.datagram(self.address, src) });
                return out.events.push(StoreEvent::Replayed);
            }
            Some((id, _)) if *id > request.request => return out.events.push(StoreEvent::Rejected("stale_request")),
            _ => {}
        }
        // The versions of the request's keys before it applies.
        let before: BTreeMap<u32, u64> =
            request.ops.iter().filter_map(|op| self.versions.get(&op.key).map(|v| (op.key, *v))).collect();
        let reply = self.execute(&request);
        if reply.status == Status::Ok {
            self.commits += 1;
            let id = self.commits;
            let event = self.commit_event(&request, id, &before);
            out.events.push(event);
            self.last.insert(request.client, (request.request, reply.clone()));
        } else {
            out.events.push(StoreEvent::Aborted);
        }
        out.sends.push(pisadb_host::Send { dst: src, bytes: reply.datagram(self.address, src) });
    }

    /// Records commit `id` of `request` in the version map and says what it saw and replaced
    /// (`before`: the versions of its keys before it applied).
    fn commit_event(&mut self, request: &Message, id: u64, before: &BTreeMap<u32, u64>) -> StoreEvent {
        let version = |key: u32| before.get(&key).copied().unwrap_or(0);
        let mut written: Vec<u32> = Vec::new();
        let mut read_versions = Vec::new();
        let mut write_versions = Vec::new();
        for op in &request.ops {
            match op.op_type {
                OpType::Read | OpType::Value => {
                    let seen = if written.contains(&op.key) { id } else { version(op.key) };
                    if !read_versions.contains(&(op.key, seen)) {
                        read_versions.push((op.key, seen));
                    }
                }
                OpType::Write if !written.contains(&op.key) => {
                    written.push(op.key);
                    write_versions.push((op.key, version(op.key)));
                    self.versions.insert(op.key, id);
                }
                OpType::Write | OpType::Updated => {}
            }
        }
        StoreEvent::Committed {
            client: request.client,
            request: request.request,
            id,
            writes: request.ops.iter().filter(|o| o.op_type == OpType::Write).map(|o| (o.key, o.value)).collect(),
            read_versions,
            write_versions,
        }
    }
}

impl Host for Store {
    type Timer = NoTimer;
    type Log = ();
    type Event = StoreEvent;

    fn cores(&self) -> u16 {
        1
    }

    fn start(&mut self, _now: Nanos, _out: &mut HostOutbox<Self>) {}

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::Core(0)
    }

    fn timer_core(&self, timer: &NoTimer) -> u16 {
        match *timer {}
    }

    fn handle_datagram(&mut self, _now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        match Message::open(bytes) {
            Ok((frame, msg)) => {
                let reads_only = !msg.ops.is_empty() && msg.ops.iter().all(|o| o.op_type == OpType::Read);
                out.cpu_ns += if reads_only { STORE_READ_NS } else { STORE_REQUEST_NS };
                self.serve(frame.src, msg, out)
            }
            Err(e) => {
                out.cpu_ns += STORE_REQUEST_NS;
                out.events.push(StoreEvent::Rejected(e.reason()))
            }
        }
    }

    fn handle_timer(&mut self, _now: Nanos, timer: NoTimer, _out: &mut HostOutbox<Self>) {
        match timer {}
    }

    fn stop(&mut self) {}

    fn is_idle(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(store: &mut Store, src: u16, msg: &Message) -> (Vec<Message>, Vec<StoreEvent>) {
        let mut out = HostOutbox::<Store>::default();
        store.handle_datagram(0, &msg.datagram(src, 9), &mut out);
        let replies = out.sends.iter().map(|s| Message::open(&s.bytes).unwrap().1).collect();
        assert!(out.sends.iter().all(|s| s.dst == src));
        (replies, out.events)
    }

    #[test]
    fn compares_commit_or_abort_with_current_values() {
        let mut store = Store::new(9);
        let ok = store.execute(&Message::request(1, 1, vec![Op::value(5, 0), Op::write(5, 1), Op::read(5)]));
        assert_eq!(ok.status, Status::Ok);
        assert_eq!(ok.ops, vec![Op::updated(5, 1), Op::value(5, 1)]);
        let abort = store.execute(&Message::request(2, 1, vec![Op::value(5, 0), Op::write(5, 1), Op::write(6, 3)]));
        assert_eq!(abort.status, Status::Abort);
        assert_eq!(abort.ops, vec![Op::value(5, 1), Op::value(6, 0)]);
        assert_eq!(store.value(6), 0, "an aborted request applies nothing");
    }

    #[test]
    fn empty_requests_are_refused() {
        assert_eq!(Store::new(9).execute(&Message::request(1, 1, vec![])).status, Status::BadRequest);
    }

    #[test]
    fn a_duplicate_replays_the_last_reply_and_applies_once() {
        let mut store = Store::new(9);
        let inc = Message::request(1, 4, vec![Op::value(1, 0), Op::write(1, 1)]);
        let (first, _) = run(&mut store, 3, &inc);
        let (again, events) = run(&mut store, 3, &inc);
        assert_eq!(first, again);
        assert_eq!(events, vec![StoreEvent::Replayed]);
        assert_eq!(store.value(1), 1);
        let (stale, events) = run(&mut store, 3, &Message::request(1, 2, vec![Op::read(1)]));
        assert!(stale.is_empty());
        assert_eq!(events, vec![StoreEvent::Rejected("stale_request")]);
    }

    #[test]
    fn a_later_attempt_of_a_committed_transaction_gets_the_commit_and_applies_nothing() {
        // Attempt 0 committed (its reply was lost, say); the switch then aborted a copy of it,
        // and the client retried as attempt 1 with the refreshed value: the store must not
        // apply the increment a second time.
        let mut store = Store::new(9);
        let (first, _) = run(&mut store, 3, &Message::request(1, 4, vec![Op::value(1, 0), Op::write(1, 1)]));
        let retry = Message::request(1, 4, vec![Op::value(1, 1), Op::write(1, 2)]).with_attempt(1);
        let (again, events) = run(&mut store, 3, &retry);
        assert_eq!(again, first, "the commit's reply, replayed");
        assert_eq!(events, vec![StoreEvent::Replayed]);
        assert_eq!(store.value(1), 1, "applied once");
    }

    #[test]
    fn an_aborted_attempt_is_not_remembered_so_its_retry_can_commit() {
        let mut store = Store::new(9);
        let (abort, _) = run(&mut store, 3, &Message::request(1, 4, vec![Op::value(1, 5), Op::write(1, 6)]));
        assert_eq!((abort[0].status, abort[0].ops.clone()), (Status::Abort, vec![Op::value(1, 0)]));
        let retry = Message::request(1, 4, vec![Op::value(1, 0), Op::write(1, 1)]).with_attempt(1);
        let (ok, _) = run(&mut store, 3, &retry);
        assert_eq!((ok[0].status, ok[0].attempt), (Status::Ok, 1));
        assert_eq!(store.value(1), 1);
    }

    #[test]
    fn commits_report_the_versions_they_saw_and_replaced() {
        let mut store = Store::new(9);
        run(&mut store, 3, &Message::request(1, 1, vec![Op::write(1, 0)]));
        let (_, events) =
            run(&mut store, 3, &Message::request(2, 1, vec![Op::value(1, 0), Op::write(1, 1), Op::read(1)]));
        let StoreEvent::Committed { id, read_versions, write_versions, .. } = &events[0] else {
            panic!("a commit: {events:?}")
        };
        assert_eq!(*id, 2);
        assert_eq!(read_versions, &vec![(1, 1), (1, 2)], "the compare saw commit 1, the read its own write");
        assert_eq!(write_versions, &vec![(1, 1)]);
    }

    #[test]
    fn garbage_is_rejected_with_a_reason() {
        let mut out = HostOutbox::<Store>::default();
        Store::new(9).handle_datagram(0, &[1, 5, 0], &mut out);
        assert_eq!(out.events, vec![StoreEvent::Rejected("too_short")]);
    }
}
