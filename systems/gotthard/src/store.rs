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
//! **The engine's OCC.** Each request runs as one transaction of the platform's OCC engine
//! (`pisadb_engine::Occ`, the one SwitchTx's servers use) over the engine's `Storage`
//! ([`KeyValues`]): every op reads or buffers through it, the request prepares (locks its
//! writes, validates the versions of what it read) and commits (installs each write with the
//! transaction's id as the tuple's version). OCC *by value* needs no extension of the engine:
//! a compare `VALUE(k, v)` is an engine read of `k` whose value the store checks against `v`,
//! answering `ABORT` (and aborting the engine transaction) on a mismatch. The two checks are
//! of different things and both hold: the engine's validation guards the interval between a
//! read and the commit against other transactions (empty while the store runs each request
//! in one handler on one core, but what keeps it right if requests ever interleave); the
//! value compare checks the client's belief, learned earlier from its cache or a switch, and
//! accepts ABA by design (a compare against an equal value succeeds), which a version check
//! could not express because the client never saw a version.
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
//! Log: every commit is logged ([`StoreRecord`]: the request, its reply, its id and the
//! versions it saw and replaced) before its reply leaves (the drivers make a handler's records
//! durable before its sends). A store restarted after a crash ([`Store::restore`]) rebuilds its
//! values, its per-client last replies (so a retransmission of a transaction it committed
//! before the crash is answered, not executed again) and its commit ids from the log, and the
//! commits of its earlier lives are reported again from it ([`StoreRecord::event`]). An abort
//! is not logged: it changed nothing.
//!
//! History: every executed request gets the next engine transaction id, and the engine keeps
//! with each value the id of the commit that wrote it (0: never written), which names its
//! version. [`StoreEvent::Committed`] reports, per key read or compared, the version it saw
//! (its own id for a read of its own write), and per key written the version it overwrote:
//! the record `pisadb_check` checks for serializability.

use crate::costs::Costs;
use crate::wire::{Message, Op, OpType, Status, FLAG_REPLY};
use pisadb_core::Nanos;
use pisadb_core::TupleKey;
use pisadb_engine::store::Tuple;
use pisadb_engine::{Concurrency, Intent, Occ, Read, Storage, StorageError, TxnId, Work};
use pisadb_host::{Host, HostOutbox, Route, TraceBytes, TraceHash};
use std::collections::BTreeMap;

/// CPU time the store charges per request that writes or compares (and per datagram it
/// rejects): the median of `cargo bench -p pisadb-gotthard --bench handlers`'s
/// `store_increment` (`CALIBRATION.md`). The paper's store is a Python process; ours is this
/// code, so this is what we charge.
pub const STORE_REQUEST_NS: Nanos = 780;
/// CPU time the store charges per all-`READ` request: the median of `store_read`.
pub const STORE_READ_NS: Nanos = 480;

/// One commit in the store's write-ahead log (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreRecord {
    /// The commit's id (its version name).
    pub id: u64,
    /// The request as received.
    pub request: Message,
    /// The reply sent.
    pub reply: Message,
    /// Per key compared or read: the version it saw.
    pub read_versions: Vec<(u32, u64)>,
    /// Per key written: the version it overwrote.
    pub write_versions: Vec<(u32, u64)>,
}

impl StoreRecord {
    /// The writes the commit applied, in order, as (key, value).
    pub fn writes(&self) -> Vec<(u32, i32)> {
        self.request.ops.iter().filter(|o| o.op_type == OpType::Write).map(|o| (o.key, o.value)).collect()
    }

    /// The event the commit was reported as.
    pub fn event(&self) -> StoreEvent {
        StoreEvent::Committed {
            client: self.request.client,
            request: self.request.request,
            id: self.id,
            writes: self.writes(),
            read_versions: self.read_versions.clone(),
            write_versions: self.write_versions.clone(),
        }
    }
}

/// A commit on disk: id (8 bytes), the read and the written versions (each a 2-byte count of
/// key (4) and version (8)), the request's and the reply's payloads (each a 2-byte length and
/// the message), all big-endian.
impl pisadb_host::LogCodec for StoreRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_be_bytes());
        for versions in [&self.read_versions, &self.write_versions] {
            out.extend_from_slice(&u16::try_from(versions.len()).unwrap_or(u16::MAX).to_be_bytes());
            for &(key, version) in versions {
                out.extend_from_slice(&key.to_be_bytes());
                out.extend_from_slice(&version.to_be_bytes());
            }
        }
        for msg in [&self.request, &self.reply] {
            out.extend_from_slice(&u16::try_from(msg.payload_bytes()).unwrap_or(u16::MAX).to_be_bytes());
            msg.encode(out);
        }
    }

    fn decode(payload: &[u8]) -> Result<Self, String> {
        let mut at = 0;
        let mut take = |n: usize| -> Result<&[u8], String> {
            let bytes = payload.get(at..at + n).ok_or_else(|| format!("a store record cut short at byte {at}"))?;
            at += n;
            Ok(bytes)
        };
        let id = u64::from_be_bytes(take(8)?.try_into().expect("8 bytes"));
        let mut versions = || -> Result<Vec<(u32, u64)>, String> {
            let count = u16::from_be_bytes(take(2)?.try_into().expect("2 bytes"));
            (0..count)
                .map(|_| {
                    let key = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes"));
                    Ok((key, u64::from_be_bytes(take(8)?.try_into().expect("8 bytes"))))
                })
                .collect()
        };
        let (read_versions, write_versions) = (versions()?, versions()?);
        let mut message = || -> Result<Message, String> {
            let len = u16::from_be_bytes(take(2)?.try_into().expect("2 bytes"));
            Message::decode(take(usize::from(len))?).map_err(|e| e.to_string())
        };
        let (request, reply) = (message()?, message()?);
        if at != payload.len() {
            return Err(format!("{} bytes after a store record", payload.len() - at));
        }
        Ok(StoreRecord { id, request, reply, read_versions, write_versions })
    }
}

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

/// The store's key → value map, as the engine's [`Storage`]: every key exists, a key never
/// written holds value 0 at version 0 (so a write is an overwrite, as `put` requires).
#[derive(Debug, Default)]
pub struct KeyValues(BTreeMap<TupleKey, Tuple>);

impl Storage for KeyValues {
    fn get(&self, key: TupleKey) -> Option<Tuple> {
        Some(self.0.get(&key).copied().unwrap_or_default())
    }

    fn put(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        self.0.insert(key, tuple);
        Ok(())
    }

    fn create(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        // Every key exists already (see the type's documentation): creating one is writing it.
        self.put(key, tuple)
    }

    fn created_rows(&self) -> usize {
        0
    }

    fn scan(&self, visit: &mut dyn FnMut(TupleKey, Tuple)) {
        self.0.iter().for_each(|(&k, &t)| visit(k, t));
    }
}

/// A Gotthard key as the engine names tuples: table 0, row = key.
fn tuple_key(key: u32) -> TupleKey {
    TupleKey::new(0, u64::from(key))
}

/// What a commit saw and replaced, for the history.
#[derive(Debug)]
struct Versions {
    /// Per key compared or read: the version (writer) it saw.
    read: Vec<(u32, u64)>,
    /// Per key written, once: the version it overwrote.
    written: Vec<(u32, u64)>,
}

/// The store host.
#[derive(Debug, Default)]
pub struct Store {
    /// This host's address (the source of its replies).
    address: u16,
    /// Key → value, with versions.
    data: KeyValues,
    /// The engine's optimistic concurrency control.
    occ: Occ,
    /// Per client: the last request id committed and its reply.
    last: BTreeMap<u32, (u32, Message)>,
    /// Requests executed so far: the next one's engine transaction id is this plus one.
    executed: u64,
    /// What its handlers charge (the store's two costs).
    costs: Costs,
}

impl Store {
    /// An empty store at `address`.
    pub fn new(address: u16) -> Self {
        Store { address, ..Store::default() }
    }

    /// The same store charging `costs` per request (its default: [`Costs::MEASURED`]).
    pub fn with_costs(self, costs: Costs) -> Self {
        Store { costs, ..self }
    }

    /// The store at `address` restarted from its log `records`: every logged commit's writes
    /// installed at its version, each client's last committed reply remembered, and ids going
    /// on above the last logged one.
    pub fn restore(address: u16, records: &[StoreRecord]) -> Result<Self, String> {
        let mut store = Store::new(address);
        for r in records {
            if r.id <= store.executed {
                return Err(format!("store log: commit id {} after {}", r.id, store.executed));
            }
            for (key, value) in r.writes() {
                let tuple = Tuple { value: i64::from(value), version: r.id };
                store.data.put(tuple_key(key), tuple).map_err(|e| e.to_string())?;
            }
            store.last.insert(r.request.client, (r.request.request, r.reply.clone()));
            store.executed = r.id;
        }
        Ok(store)
    }

    /// The value of `key` (0 if never written).
    pub fn value(&self, key: u32) -> i32 {
        self.current(key).value as i32
    }

    fn current(&self, key: u32) -> Tuple {
        self.data.get(tuple_key(key)).unwrap_or_default()
    }

    /// Executes one request atomically and returns the reply (status and ops).
    pub fn execute(&mut self, request: &Message) -> Message {
        self.run(request).0
    }

    /// Executes one request as one engine transaction: the reply, and for a commit its
    /// engine transaction id and the versions it saw and replaced.
    fn run(&mut self, request: &Message) -> (Message, Option<(u64, Versions)>) {
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
            return (reply, None);
        }
        self.executed += 1;
        let txn = TxnId::from_bits(self.executed);
        let mut work = Work::default();
        let mut versions = Versions { read: Vec::new(), written: Vec::new() };
        let mut failed: Vec<u32> = Vec::new();
        // A fresh id never collides and an OCC read never waits: an engine error here would
        // be a bug of this function; it is answered as an abort, which applies nothing.
        let mut executed = self.occ.begin(txn, 0).is_ok();
        for op in &request.ops {
            if !executed {
                break;
            }
            let key = tuple_key(op.key);
            executed = match op.op_type {
                OpType::Value | OpType::Read => match self.occ.read(&self.data, txn, key, Intent::Read, &mut work) {
                    Ok(Read::Done(tuple)) => {
                        // A read of a key this request wrote earlier sees its own version.
                        if !versions.read.contains(&(op.key, tuple.version)) {
                            versions.read.push((op.key, tuple.version));
                        }
                        match op.op_type {
                            OpType::Value if tuple.value as i32 != op.value => failed.push(op.key),
                            OpType::Read => reply.ops.push(Op::value(op.key, tuple.value as i32)),
                            _ => {}
                        }
                        true
                    }
                    Ok(Read::Waiting) | Err(_) => false,
                },
                OpType::Write => {
                    if !versions.written.iter().any(|(k, _)| *k == op.key) {
                        versions.written.push((op.key, self.current(op.key).version));
                    }
                    reply.ops.push(Op::updated(op.key, op.value));
                    self.occ.write(txn, key, i64::from(op.value), &mut work).is_ok()
                }
                OpType::Updated => true,
            };
        }
        let committed = failed.is_empty()
            && executed
            && self.occ.prepare(&self.data, txn, &mut work).is_ok()
            && self.occ.commit(&mut self.data, txn, &mut work).is_ok();
        if committed {
            return (reply, Some((txn.bits(), versions)));
        }
        self.occ.abort(&self.data, txn, &mut work);
        reply.status = Status::Abort;
        reply.ops.clear();
        for op in &request.ops {
            let listed = reply.ops.iter().any(|o: &Op| o.key == op.key);
            let wanted = (op.op_type == OpType::Value && failed.contains(&op.key)) || op.op_type == OpType::Write;
            if wanted && !listed {
                reply.ops.push(Op::value(op.key, self.value(op.key)));
            }
        }
        (reply, None)
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
        let (reply, commit) = self.run(&request);
        match commit {
            Some((id, versions)) => {
                self.last.insert(request.client, (request.request, reply.clone()));
                let record = StoreRecord {
                    id,
                    request,
                    reply: reply.clone(),
                    read_versions: versions.read,
                    write_versions: versions.written,
                };
                out.events.push(record.event());
                out.log.push(record);
            }
            None => out.events.push(StoreEvent::Aborted),
        }
        out.sends.push(pisadb_host::Send { dst: src, bytes: reply.datagram(self.address, src) });
    }
}

impl Host for Store {
    type Timer = NoTimer;
    type Log = StoreRecord;
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
                out.cpu_ns += if reads_only { self.costs.store_read_ns } else { self.costs.store_request_ns };
                self.serve(frame.src, msg, out)
            }
            Err(e) => {
                out.cpu_ns += self.costs.store_request_ns;
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
    fn a_store_restarted_from_its_log_has_its_values_ids_and_last_replies_back() {
        let mut store = Store::new(9);
        let mut log = Vec::new();
        for (client, request, value) in [(1, 1, 10), (2, 1, 20), (1, 2, 11)] {
            let mut out = HostOutbox::<Store>::default();
            let msg = Message::request(client, request, vec![Op::read(5), Op::write(5, value), Op::write(6, -value)]);
            store.handle_datagram(0, &msg.datagram(3, 9), &mut out);
            log.extend(out.log);
        }
        // An abort logs nothing.
        let mut out = HostOutbox::<Store>::default();
        store.handle_datagram(0, &Message::request(2, 2, vec![Op::value(5, 99)]).datagram(3, 9), &mut out);
        assert!(out.log.is_empty(), "an abort changed nothing and is not logged");
        // The records survive the one framing on disk.
        let mut bytes = Vec::new();
        log.iter().for_each(|r| pisadb_runtime::framed_log::append(r, &mut bytes));
        let read = pisadb_runtime::framed_log::read::<StoreRecord>(&bytes).unwrap();
        assert_eq!(read.records, log);
        let mut back = Store::restore(9, &read.records).unwrap();
        assert_eq!((back.value(5), back.value(6)), (11, -11));
        assert_eq!(back.current(5).version, store.current(5).version, "versions come back");
        // A retransmission of a commit before the crash is answered from the log, not run again.
        let (replies, events) = run(&mut back, 3, &Message::request(1, 2, vec![Op::write(5, 11)]));
        assert_eq!((replies[0].status, events), (Status::Ok, vec![StoreEvent::Replayed]));
        // New commits get ids above every logged one.
        let (_, events) = run(&mut back, 3, &Message::request(3, 1, vec![Op::write(7, 1)]));
        let last_logged = log.last().unwrap().id;
        assert!(matches!(events[0], StoreEvent::Committed { id, .. } if id > last_logged), "{events:?}");
        assert!(Store::restore(9, &[log[1].clone(), log[0].clone()]).is_err(), "ids out of order are refused");
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
