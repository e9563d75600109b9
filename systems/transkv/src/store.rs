//! A storage node: the shim of §III over an in-memory key-value map, running basic TSO
//! (`pisadb_engine::TimestampOrdering`) for the keys no switch caches.
//!
//! Every key's committed state is a version: the timestamp of its last writer (0: the initial
//! load). The value a version stands for is [`value_of`]`(key, version)`, so the map holds one
//! number per written key and a 10M-key store costs only the keys touched.
//!
//! What arrives:
//! - `Request` with T-TS ≠ 0 (a client, every key cached): ops a switch decided are applied as
//!   they are (the switch holds their timestamps); any undecided op (a key no switch caches)
//!   goes through the node's TSO. All accepted: writes installed, `Committed` to the sender,
//!   read values filled. A late op: `Aborted` (the switches on the way release their claims).
//! - `Request` with T-TS = 0: a non-transactional read; `Committed` with the values.
//! - `Prepare` (the controller): the same checks; accepted ops stay pending in the TSO and the
//!   node answers `Voted` with the read values; a late op: `Aborted`.
//! - `Commit` (the controller): installs the prepared transaction, answers `Committed`.
//! - `Aborted` (the controller: another node's share of the transaction was refused): a
//!   prepared transaction leaves the TSO, a never-seen one is refused from now on; either is
//!   recorded aborted and answered `Aborted` (releasing the switches' claims on the way).
//! - `Resolve` (a client or the controller after a timeout): the recorded outcome again, or
//!   `Voted` for a prepared transaction; a timestamp never seen is recorded as aborted, so a
//!   late copy of it is refused, and answered `Aborted`. Every decided transaction keeps its
//!   final answer, and any later message for its timestamp gets that answer: the node is the
//!   one place a transaction's outcome is decided, whatever copies the network delays or
//!   loses. Its `Aborted` passes the switches on the way back and releases any claim the
//!   transaction left there, which is how a lost reply never wedges a key.
//! - `Lease` (a switch, about a claim met past its lease, `crate::program`): the recorded
//!   commit again (the switches install it), or `Aborted` with the query's ops (deciding a
//!   never-seen timestamp aborted, as `Resolve` does), or nothing for a prepared share. An abort
//!   a lease query decided holds only the query's key, so a later message of that timestamp
//!   is answered `Aborted` with its own ops, releasing whatever it claimed on its way.
//!
//! **Crashes.** The node logs each vote and each outcome before answering
//! ([`NodeRecord`]); the simulator keeps the log as its disk. A restarted node
//! ([`StorageNode::restore`]) has every committed write, answers every decided timestamp as
//! before, and keeps its votes (the prepared writes go back into the TSO). The TSO's read and
//! write timestamps are gone, so the node takes a floor from the time of its first message
//! after the restart: an uncached op below it aborts. Every timestamp accepted before the
//! crash is below the floor, so nothing accepted after it can break the order.
//!
//! **Switch crashes.** When a switch is rebuilt (`fence_switch`), ops the crashed switch
//! decided may still be on the wire; the node refuses any transaction carrying a decided op
//! with a timestamp below a floor taken from the time of its next message, so only the
//! rebuilt switch's decisions (timestamps above its own floor, `crate::fuzz`) commit from
//! then on. Votes given before stay valid: the rebuilt switch restores their claims.
//!
//! Timestamps in the TSO are the transactions' T-TS, which are unique, so T-TS is also the
//! engine's transaction id. The CPU time of each message comes from [`crate::costs`].

use crate::control::ControllerRecord;
use crate::costs;
use crate::refresh::PlacementRecord;
use crate::wire::{value_of, version_of, Message, OpType, Rejections, Status, LEASE_CLIENT};
use pisadb_core::{Nanos, TupleKey};
use pisadb_engine::{Concurrency, Intent, Read, Storage, StorageError, TimestampOrdering, Tuple, TxnId, Work};

/// Keys a message made the store read and write (what [`costs::store_ns`] charges).
#[derive(Clone, Copy, Debug, Default)]
struct StoreWork {
    /// Point reads.
    reads: u64,
    /// Inserts.
    writes: u64,
}
use pisadb_host::{Host, HostOutbox, Route, Send};
use std::collections::BTreeMap;

/// Where a storage node keeps its committed versions: any engine [`Storage`] a node can own.
/// The simulator's is [`Versions`] (an in-memory map, charged with the CPU time measured on
/// the real store); real mode's is an embedded LSM store on disk (`crate::real::FjallStore`).
/// The protocol code is the same over both.
pub trait NodeStore: Storage + std::fmt::Debug + std::marker::Send {
    /// Makes every write so far durable (nothing to do in memory).
    fn persist(&self) -> Result<(), String> {
        Ok(())
    }

    /// Reads that failed so far (an on-disk store's I/O errors).
    fn failed_reads(&self) -> u64 {
        0
    }
}

impl NodeStore for Versions {}

/// The node's committed versions: an engine [`Storage`] over a map.
#[derive(Debug, Default)]
pub struct Versions {
    /// Key → its committed tuple (`version` = writer's T-TS); absent: never written.
    map: BTreeMap<TupleKey, Tuple>,
}

impl Storage for Versions {
    fn get(&self, key: TupleKey) -> Option<Tuple> {
        self.map.get(&key).copied()
    }

    fn put(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        self.map.insert(key, tuple);
        Ok(())
    }

    fn create(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        self.map.insert(key, tuple);
        Ok(())
    }

    fn created_rows(&self) -> usize {
        0
    }

    fn scan(&self, visit: &mut dyn FnMut(TupleKey, Tuple)) {
        for (&k, &t) in &self.map {
            visit(k, t);
        }
    }
}

fn tuple_key(key: u128) -> TupleKey {
    TupleKey::new(0, key as u64)
}

/// What a storage node writes to its log (its disk): enough to come back after a crash with
/// every committed write, every recorded outcome and every vote it gave. It is also the
/// rack's log record (`RackHost::Log`): the controller's records (variant `transkv-log`) go
/// in as [`NodeRecord::Controller`], which a storage node never writes and skips.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRecord {
    /// A yes vote: the transaction as prepared (its pending writes are a promise).
    Prepared(Message),
    /// A decided transaction's final answer; a `Committed` one's write ops are installed at
    /// version T-TS, in log order.
    Outcome(Message),
    /// A cache-refresh step taken (`crate::refresh`), before it is answered: a `HandOff`
    /// (its keys are handed to a switch) or a `TakeBack` (its keys are back, `ts` their
    /// floor). A restarted node keeps a handed key handed and a floor a floor.
    Refresh(Message),
    /// The controller's record of its transaction log (`crate::control`); never a node's.
    Controller(ControllerRecord),
}

/// The controller's records in a rack log (what `Controller::restore` replays).
pub fn controller_records(log: &[NodeRecord]) -> Vec<ControllerRecord> {
    log.iter()
        .filter_map(|r| match r {
            NodeRecord::Controller(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// Slots of 100 ns a restarted node's timestamp floor lies past its first message's time: more
/// than any client's timestamps run ahead of time (`client.rs`).
pub const FLOOR_MARGIN_SLOTS: u64 = 10_000;

/// A storage node sets no timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoTimer {}

impl pisadb_core::TraceBytes for NoTimer {
    fn trace(&self, _hash: &mut pisadb_core::TraceHash) {
        match *self {}
    }
}

/// What a storage node reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreEvent {
    /// A transaction committed here: its T-TS and, per key written, the version overwritten.
    Committed {
        /// T-TS.
        ts: u32,
        /// (key, previous version) per write.
        writes: Vec<(u64, u64)>,
    },
    /// A transaction aborted here (TSO).
    Aborted,
    /// A switch's lease query answered (`Status::Lease`).
    LeaseQuery,
    /// A datagram rejected, with the reason.
    Rejected(&'static str),
}

/// A storage node.
#[derive(Debug)]
pub struct StorageNode {
    /// Its host id.
    address: u16,
    /// Committed versions.
    versions: Box<dyn NodeStore>,
    /// TSO for uncached keys.
    tso: TimestampOrdering,
    /// Prepared transactions by T-TS: the message as voted.
    prepared: BTreeMap<u32, Message>,
    /// Decided transactions by T-TS: the final answer (`Committed` or `Aborted`).
    outcomes: BTreeMap<u32, Message>,
    /// After a restart: uncached ops with a timestamp below this abort (the TSO's read and
    /// write timestamps were lost with the crash; every timestamp accepted before it is below
    /// the floor). 0: no floor. `None`: restarted, floor not yet set (set from the time of the
    /// first message).
    floor: Option<u32>,
    /// After a switch was rebuilt: ops a switch decided with a timestamp below this are
    /// refused (the crashed switch's decisions still on the wire; `None`: set from the time of
    /// the next message). 0: no floor.
    decided_floor: Option<u32>,
    /// The latest switch epoch fenced off.
    switch_epoch: u16,
    /// Keys the cache refresh handed to a switch ([`StorageNode::hand_off`]): undecided ops on
    /// them crossed the switch before it held them and abort.
    handed: std::collections::BTreeSet<u64>,
    /// Keys the cache refresh took back from a switch ([`StorageNode::take_back`]): undecided
    /// ops below the key's floor abort.
    key_floors: BTreeMap<u64, u32>,
    /// Every version a switch-decided write installed, per key, in commit (= timestamp) order.
    history: BTreeMap<u64, Vec<u64>>,
    /// The cache refresh's statistics: ops on each key that no switch decided, this epoch
    /// (`None`: not counting; counting starts with the controller's first `Report`).
    misses: Option<BTreeMap<u64, u64>>,
    /// The last epoch reported and its report (key, misses), hottest first: a `Report`
    /// asked again (a lost answer) gets the same one.
    reported: (u32, Vec<(u64, u64)>),
    /// Variant `transkv-log`: the controller that gets a copy of every commit with its before
    /// images (`crate::recovery`).
    log_to: Option<u16>,
    /// Rejected datagrams by reason.
    pub rejections: Rejections,
}

impl StorageNode {
    /// This node sending the controller `controller` a copy of every transaction it commits:
    /// its reads as answered and, in each write op's value slot, the key's value before the
    /// write (its before image; the after image is the T-TS's value).
    pub fn logging_to(mut self, controller: u16) -> Self {
        self.log_to = Some(controller);
        self
    }

    /// This node with `keys` handed to switches from the start (the setup fill of a run whose
    /// cache is refreshed: an evicted key stays refused until its take-back, `crate::refresh`).
    pub fn handing(mut self, keys: impl IntoIterator<Item = u64>) -> Self {
        self.handed.extend(keys);
        self
    }

    /// An empty node (every key at version 0) over an in-memory map.
    pub fn new(address: u16) -> Self {
        Self::with_store(address, Box::new(Versions::default()))
    }

    /// A node over `store` (empty, or holding the versions of an earlier run of this node).
    pub fn with_store(address: u16, store: Box<dyn NodeStore>) -> Self {
        StorageNode {
            address,
            versions: store,
            tso: TimestampOrdering::new(),
            prepared: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            floor: Some(0),
            decided_floor: Some(0),
            switch_epoch: 0,
            handed: std::collections::BTreeSet::new(),
            key_floors: BTreeMap::new(),
            history: BTreeMap::new(),
            misses: None,
            reported: (0, Vec::new()),
            log_to: None,
            rejections: Rejections::default(),
        }
    }

    /// The node rebuilt from its log after a crash: committed versions, outcomes and prepared
    /// transactions (their pending writes back in the TSO); a timestamp floor for the rest.
    pub fn restore(address: u16, log: &[NodeRecord]) -> Result<Self, String> {
        Self::restore_into(address, Box::new(Versions::default()), log)
    }

    /// [`StorageNode::restore`] over `store`: the log's committed writes are put (again) into
    /// it, so a store that survived the crash with some or all of them ends the same.
    pub fn restore_into(address: u16, store: Box<dyn NodeStore>, log: &[NodeRecord]) -> Result<Self, String> {
        Self::restore_handing(address, store, log, std::iter::empty())
    }

    /// [`StorageNode::restore_into`] of a node that started with `handed` handed to switches
    /// ([`StorageNode::handing`]): the log's refresh steps apply after them.
    pub fn restore_handing(
        address: u16,
        store: Box<dyn NodeStore>,
        log: &[NodeRecord],
        handed: impl IntoIterator<Item = u64>,
    ) -> Result<Self, String> {
        let mut node = StorageNode::with_store(address, store).handing(handed);
        for record in log {
            match record {
                NodeRecord::Refresh(m) => node.apply_refresh(m),
                NodeRecord::Controller(_) => {}
                NodeRecord::Prepared(m) => {
                    node.prepared.insert(m.ts, m.clone());
                }
                NodeRecord::Outcome(m) => {
                    node.prepared.remove(&m.ts);
                    if m.status == Status::Committed {
                        for op in m.ops.iter().filter(|o| o.op_type == OpType::Write) {
                            let tuple = Tuple { value: 0, version: u64::from(m.ts) };
                            node.versions.put(tuple_key(op.key), tuple).map_err(|e| e.to_string())?;
                            if op.decided() {
                                node.history.entry(op.key as u64).or_default().push(u64::from(m.ts));
                            }
                        }
                    }
                    node.outcomes.insert(m.ts, m.clone());
                }
            }
        }
        // A store that survived the crash may hold writes of a transaction whose outcome never
        // reached the log (the store is written while handling, the log made durable after the
        // round): never answered, so never committed. The log's keys were put back above; any
        // other key written in the store goes back to the initial load.
        let logged: std::collections::BTreeSet<u64> = node.logged_keys(log);
        let mut dirty = Vec::new();
        node.versions.scan(&mut |k, t| {
            if t.version != 0 && !logged.contains(&k.row) {
                dirty.push(k);
            }
        });
        for key in dirty {
            node.versions.put(key, Tuple { value: 0, version: 0 }).map_err(|e| e.to_string())?;
        }
        let mut work = Work::default();
        for (&ts, m) in &node.prepared {
            let txn = TxnId::from_bits(u64::from(ts));
            node.tso.begin(txn, u64::from(ts)).map_err(|e| e.to_string())?;
            for op in m.ops.iter().filter(|o| o.op_type == OpType::Write && !o.decided()) {
                node.tso.write(txn, tuple_key(op.key), 0, &mut work).map_err(|e| format!("restoring {ts}: {e}"))?;
            }
        }
        node.floor = None;
        Ok(node)
    }

    /// The keys `log`'s committed outcomes wrote.
    fn logged_keys(&self, log: &[NodeRecord]) -> std::collections::BTreeSet<u64> {
        log.iter()
            .filter_map(|r| match r {
                NodeRecord::Outcome(m) if m.status == Status::Committed => Some(m),
                _ => None,
            })
            .flat_map(|m| m.ops.iter().filter(|o| o.op_type == OpType::Write).map(|o| o.key as u64))
            .collect()
    }

    /// The newest committed version of `key` not younger than `ts` (0: the initial load).
    fn version_at(&self, key: u64, ts: u32) -> u64 {
        let newest = self.version(key);
        if newest <= u64::from(ts) {
            return newest;
        }
        let older = self.history.get(&key).map_or(&[][..], |h| h.as_slice());
        older.iter().rev().copied().find(|&v| v <= u64::from(ts)).unwrap_or(0)
    }

    /// The committed version of `key`.
    pub fn version(&self, key: u64) -> u64 {
        self.versions.get(TupleKey::new(0, key)).map_or(0, |t| t.version)
    }

    /// Keys in the node's store and the store's failed reads.
    pub fn store_figures(&self) -> (u64, u64) {
        let mut keys = 0;
        self.versions.scan(&mut |_, _| keys += 1);
        (keys, self.versions.failed_reads())
    }

    /// Makes the store's writes durable.
    pub fn persist_store(&self) -> Result<(), String> {
        self.versions.persist()
    }

    /// The cache refresh hands `key` to a switch (`crate::refresh`, insertion step 2) at time
    /// `now`: its committed value and W-TS, and as R-TS a floor above every timestamp this node
    /// can have accepted (the restart floor's argument: `FLOOR_MARGIN_SLOTS` past `now`; the
    /// engine's per-key read timestamp is not exposed, so this is conservative: writers on the
    /// key below it abort at the switch for about a millisecond). `None` while a prepared
    /// transaction has an op on the key: the controller asks again later. From then on an
    /// undecided op on the key aborts here (it crossed the switch before the switch held it).
    /// Over the network: `Status::HandOff`, logged as [`NodeRecord::Refresh`].
    pub fn hand_off(&mut self, key: u64, now: Nanos) -> Option<crate::refresh::NodeState> {
        if self.prepared.values().any(|p| p.ops.iter().any(|o| o.key == u128::from(key))) {
            return None;
        }
        let floor = u32::try_from((now / 100).saturating_add(FLOOR_MARGIN_SLOTS) << 2).unwrap_or(u32::MAX);
        let version = self.version(key);
        // The key's floor stays (a hand-off asked again must not lose it).
        let r_ts = floor.max(self.key_floors.get(&key).copied().unwrap_or(0));
        self.handed.insert(key);
        let w_ts = u32::try_from(version).unwrap_or(u32::MAX);
        Some(crate::refresh::NodeState { value: value_of(u128::from(key), version), w_ts, r_ts })
    }

    /// The cache refresh takes `key` back from a switch with its `floor` (max of the switch's
    /// W-TS and R-TS, `crate::refresh::Eviction::floor`): undecided ops on it below the floor
    /// abort here from now on. Over the network: `Status::TakeBack`, logged as
    /// [`NodeRecord::Refresh`].
    pub fn take_back(&mut self, key: u64, floor: u32) {
        self.handed.remove(&key);
        let f = self.key_floors.entry(key).or_default();
        *f = (*f).max(floor);
    }

    /// Whether the cache refresh refuses an undecided op on `key` at `ts` here.
    fn refused_by_refresh(&self, key: u128, ts: u32) -> bool {
        let Ok(key) = u64::try_from(key) else { return false };
        self.handed.contains(&key) || self.key_floors.get(&key).is_some_and(|&f| ts < f)
    }

    /// Applies a logged refresh step (`HandOff` or `TakeBack`).
    fn apply_refresh(&mut self, m: &Message) {
        for op in &m.ops {
            let Ok(key) = u64::try_from(op.key) else { continue };
            match m.status {
                Status::HandOff if op.served() => {
                    self.handed.insert(key);
                }
                Status::TakeBack => self.take_back(key, m.ts),
                _ => {}
            }
        }
    }

    /// Keys handed to switches now.
    pub fn handed(&self) -> &std::collections::BTreeSet<u64> {
        &self.handed
    }

    /// Counts the ops of `msg` no switch decided or served (the refresh's miss statistics).
    fn count_misses(&mut self, msg: &Message) {
        let Some(misses) = self.misses.as_mut() else { return };
        for op in msg.ops.iter().filter(|o| !o.decided() && !o.served()) {
            if let Ok(key) = u64::try_from(op.key) {
                *misses.entry(key).or_default() += 1;
            }
        }
    }

    /// The cache refresh's messages: `HandOff`, `TakeBack`, `Report` (see [`Status`]).
    fn refresh_step(&mut self, now: Nanos, src: u16, mut msg: Message, out: &mut HostOutbox<Self>) {
        match msg.status {
            Status::HandOff => {
                let mut floor = 0;
                for op in msg.ops.iter_mut() {
                    let Ok(key) = u64::try_from(op.key) else { continue };
                    if let Some(state) = self.hand_off(key, now) {
                        op.value = state.value;
                        op.flags |= crate::wire::FLAG_SERVED;
                        floor = state.r_ts;
                    }
                }
                msg.ts = floor;
                out.log.push(NodeRecord::Refresh(msg.clone()));
                self.answer(msg, Status::HandedOff, src, out);
            }
            Status::TakeBack => {
                out.log.push(NodeRecord::Refresh(msg.clone()));
                self.apply_refresh(&msg);
                self.answer(msg, Status::TookBack, src, out);
            }
            Status::Report => {
                if msg.seq > self.reported.0 || self.misses.is_none() {
                    let counts = self.misses.replace(BTreeMap::new()).unwrap_or_default();
                    let mut ranked: Vec<(u64, u64)> = counts.into_iter().collect();
                    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    ranked.truncate(usize::try_from(msg.ts).unwrap_or(usize::MAX));
                    self.reported = (msg.seq, ranked);
                }
                let report = &self.reported.1;
                let parts = report.len().div_ceil(crate::wire::MAX_OPS).max(1);
                for part in 0..parts {
                    let chunk = report.chunks(crate::wire::MAX_OPS).nth(part).unwrap_or(&[(0, 0)]);
                    let ops = chunk
                        .iter()
                        .map(|&(key, n)| {
                            let mut op = crate::wire::Op::read(u128::from(key));
                            op.value[..8].copy_from_slice(&n.to_be_bytes());
                            op
                        })
                        .collect();
                    let reply =
                        Message { ts: parts as u32, status: Status::Misses, client: part as u16, seq: msg.seq, ops };
                    self.answer(reply, Status::Misses, src, out);
                }
            }
            _ => {}
        }
    }

    /// Transactions prepared and not yet decided.
    pub fn prepared(&self) -> usize {
        self.prepared.len()
    }

    /// The outcome this node decided for timestamp `ts` (`Committed` or `Aborted`), if any.
    pub fn outcome(&self, ts: u32) -> Option<Status> {
        self.outcomes.get(&ts).map(|m| m.status)
    }

    /// Runs TSO on the undecided ops; fills read values; `false` (and nothing pending) if an
    /// op is late.
    fn check(&mut self, msg: &mut Message, work: &mut Work, io: &mut StoreWork) -> bool {
        let txn = TxnId::from_bits(u64::from(msg.ts));
        let late = msg.ts < self.floor.unwrap_or(u32::MAX);
        let late_decided = msg.ts < self.decided_floor.unwrap_or(u32::MAX);
        if (late && msg.ops.iter().any(|o| !o.decided()))
            || (late_decided && msg.ops.iter().any(|o| o.decided()))
            || msg.ops.iter().any(|o| !o.decided() && self.refused_by_refresh(o.key, msg.ts))
            || self.tso.begin(txn, u64::from(msg.ts)).is_err()
        {
            return false;
        }
        for op in msg.ops.iter_mut().filter(|o| !o.decided()) {
            let key = tuple_key(op.key);
            let ok = match op.op_type {
                OpType::Read => match self.tso.read(&*self.versions, txn, key, Intent::Read, work) {
                    Ok(Read::Done(tuple)) => {
                        io.reads += 1;
                        op.value = value_of(op.key, tuple.version);
                        true
                    }
                    _ => false,
                },
                OpType::Write => self.tso.write(txn, key, 0, work).is_ok(),
            };
            if !ok {
                self.tso.abort(&*self.versions, txn, work);
                return false;
            }
        }
        if self.conflicts_with_a_vote(msg) {
            self.tso.abort(&*self.versions, txn, work);
            return false;
        }
        for op in msg.ops.iter_mut().filter(|o| o.decided() && o.op_type == OpType::Read && !o.served()) {
            // Decided by a switch that holds no value for it (a rebuilt switch): the value as of
            // the reader's timestamp is here. The switch let the read pass only if no older
            // writer is pending, but a younger one may have committed here since: read the
            // newest version not younger than the reader.
            io.reads += 1;
            let version = self.version_at(op.key as u64, msg.ts);
            op.value = value_of(op.key, version);
        }
        true
    }

    /// Whether a switch-decided op of `msg` meets a write this node voted for (another
    /// transaction's, undecided): a write, or a read younger than that write. The switch that
    /// decided it should have seen the claim; after a switch was rebuilt from logs that lag
    /// the node, it may not have.
    fn conflicts_with_a_vote(&self, msg: &Message) -> bool {
        msg.ops.iter().filter(|o| o.decided()).any(|op| {
            self.prepared.values().filter(|p| p.ts != msg.ts).any(|p| {
                p.ops.iter().any(|w| {
                    w.op_type == OpType::Write && w.key == op.key && (op.op_type == OpType::Write || p.ts < msg.ts)
                })
            })
        })
    }

    /// Installs `msg`'s writes (the TSO's pending ones and the switch-decided ones).
    fn install(&mut self, msg: &Message, work: &mut Work, io: &mut StoreWork, out: &mut HostOutbox<Self>) {
        let txn = TxnId::from_bits(u64::from(msg.ts));
        let writes: Vec<(u64, u64)> = msg
            .ops
            .iter()
            .filter(|o| o.op_type == OpType::Write)
            .map(|o| (o.key as u64, self.version(o.key as u64)))
            .collect();
        io.writes += writes.len() as u64;
        // The TSO's own transaction (possibly without ops) ends here either way.
        let _ = self.tso.commit(&mut *self.versions, txn, work);
        for op in msg.ops.iter().filter(|o| o.decided() && o.op_type == OpType::Write) {
            work.tuple_ops += 1;
            let tuple = Tuple { value: 0, version: u64::from(msg.ts) };
            let _ = self.versions.put(tuple_key(op.key), tuple);
            self.history.entry(op.key as u64).or_default().push(u64::from(msg.ts));
        }
        if let Some(controller) = self.log_to {
            let mut copy = msg.clone();
            copy.status = Status::CommitLog;
            for (op, &(key, before)) in copy.ops.iter_mut().filter(|o| o.op_type == OpType::Write).zip(&writes) {
                op.value = value_of(u128::from(key), before);
            }
            out.sends.push(Send { dst: controller, bytes: copy.datagram(self.address, controller) });
        }
        if !writes.is_empty() {
            out.events.push(StoreEvent::Committed { ts: msg.ts, writes });
        }
    }

    /// Records the transaction's outcome (answered again to any later copy or resolve) and
    /// answers it.
    fn decide(&mut self, mut msg: Message, status: Status, to: u16, out: &mut HostOutbox<Self>) {
        msg.status = status;
        out.log.push(NodeRecord::Outcome(msg.clone()));
        self.outcomes.insert(msg.ts, msg.clone());
        self.answer(msg, status, to, out);
    }

    fn answer(&self, mut msg: Message, status: Status, to: u16, out: &mut HostOutbox<Self>) {
        msg.status = status;
        out.sends.push(Send { dst: to, bytes: msg.datagram(self.address, to) });
    }

    /// A switch's lease query (`Status::Lease`): the outcome of the claiming timestamp, to the
    /// switches on the way back. Committed: the recorded commit again (they install it).
    /// Aborted, or never seen (decided aborted now, as a client's `Resolve` would): `Aborted`
    /// with the query's ops (they release the claim). Prepared: nothing; the coordinator ends
    /// it, and its answer passes the same switches. The answer names [`LEASE_CLIENT`], so the
    /// host it reaches takes it for no transaction of its own.
    fn lease(&mut self, src: u16, msg: Message, out: &mut HostOutbox<Self>) {
        out.events.push(StoreEvent::LeaseQuery);
        match self.outcomes.get(&msg.ts) {
            Some(outcome) if outcome.status == Status::Committed => {
                let again = Message { client: msg.client, seq: msg.seq, ..outcome.clone() };
                self.answer(again, Status::Committed, src, out);
            }
            Some(_) => self.answer(msg, Status::Aborted, src, out),
            None if self.prepared.contains_key(&msg.ts) => {}
            None => {
                out.events.push(StoreEvent::Aborted);
                self.decide(msg, Status::Aborted, src, out);
            }
        }
    }

    fn serve(&mut self, now: Nanos, src: u16, mut msg: Message, out: &mut HostOutbox<Self>) {
        let mut work = Work::default();
        let mut io = StoreWork::default();
        if matches!(msg.status, Status::Request | Status::Prepare) {
            self.count_misses(&msg);
        }
        match msg.status {
            Status::HandOff | Status::TakeBack | Status::Report => self.refresh_step(now, src, msg, out),
            Status::Lease => self.lease(src, msg, out),
            Status::Request if msg.ts == 0 => {
                for op in msg.ops.iter_mut() {
                    if op.op_type == OpType::Read && !op.served() {
                        io.reads += 1;
                        op.value = value_of(op.key, self.version(op.key as u64));
                    }
                }
                if msg.ops.iter().any(|o| o.op_type == OpType::Write) {
                    self.rejections.count("non_transactional_write");
                    out.events.push(StoreEvent::Rejected("non_transactional_write"));
                    return;
                }
                self.answer(msg, Status::Committed, src, out);
            }
            Status::Request | Status::Prepare | Status::Resolve | Status::Aborted
                if self.outcomes.contains_key(&msg.ts) =>
            {
                // Decided before: the same answer again (a late copy, or a client resolving).
                // An abort a lease query decided holds only the query's key: the message is
                // answered with its own ops instead (releasing whatever it claimed on the way).
                let outcome = self.outcomes[&msg.ts].clone();
                if outcome.client == LEASE_CLIENT {
                    self.answer(msg, Status::Aborted, src, out);
                } else {
                    self.answer(outcome.clone(), outcome.status, src, out);
                }
            }
            Status::Request => {
                if self.check(&mut msg, &mut work, &mut io) {
                    self.install(&msg, &mut work, &mut io, out);
                    self.decide(msg, Status::Committed, src, out);
                } else {
                    out.events.push(StoreEvent::Aborted);
                    self.decide(msg, Status::Aborted, src, out);
                }
            }
            Status::Prepare | Status::Resolve if self.prepared.contains_key(&msg.ts) => {
                let voted = self.prepared[&msg.ts].clone();
                self.answer(voted, Status::Voted, src, out);
            }
            Status::Prepare => {
                if self.check(&mut msg, &mut work, &mut io) {
                    out.log.push(NodeRecord::Prepared(msg.clone()));
                    self.prepared.insert(msg.ts, msg.clone());
                    self.answer(msg, Status::Voted, src, out);
                } else {
                    out.events.push(StoreEvent::Aborted);
                    self.decide(msg, Status::Aborted, src, out);
                }
            }
            Status::Aborted => {
                // The controller aborts this node's share of a transaction another share of
                // which was refused. Prepared: its pending ops leave the TSO. Never seen:
                // aborted from now on, so that a late `Prepare` is refused. Either way the
                // answer passes the switches on the way and releases the share's claims.
                let share = match self.prepared.remove(&msg.ts) {
                    Some(prepared) => {
                        self.tso.abort(&*self.versions, TxnId::from_bits(u64::from(msg.ts)), &mut work);
                        prepared
                    }
                    None => msg,
                };
                out.events.push(StoreEvent::Aborted);
                self.decide(share, Status::Aborted, src, out);
            }
            Status::Resolve => {
                // Never seen: aborted from now on, so that a late copy is refused.
                out.events.push(StoreEvent::Aborted);
                self.decide(msg, Status::Aborted, src, out);
            }
            Status::Commit => match self.prepared.remove(&msg.ts) {
                Some(prepared) => {
                    self.install(&prepared, &mut work, &mut io, out);
                    self.decide(prepared, Status::Committed, src, out);
                }
                None => match self.outcomes.get(&msg.ts) {
                    Some(outcome) if outcome.status == Status::Committed => {
                        let outcome = outcome.clone();
                        self.answer(outcome, Status::Committed, src, out);
                    }
                    _ => {
                        self.rejections.count("unknown_commit");
                        out.events.push(StoreEvent::Rejected("unknown_commit"));
                    }
                },
            },
            _ => {
                self.rejections.count("unexpected_status");
                out.events.push(StoreEvent::Rejected("unexpected_status"));
            }
        }
        out.cpu_ns += costs::store_ns(io.reads, io.writes);
    }
}

impl Host for StorageNode {
    type Timer = NoTimer;
    type Log = NodeRecord;
    type Event = StoreEvent;

    fn cores(&self) -> u16 {
        costs::STORE_CORES
    }

    fn start(&mut self, _now: Nanos, _out: &mut HostOutbox<Self>) {}

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::AnyCore
    }

    fn timer_core(&self, timer: &NoTimer) -> u16 {
        match *timer {}
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        out.cpu_ns += costs::STORE_MESSAGE_NS;
        let floor_now = || u32::try_from((now / 100).saturating_add(FLOOR_MARGIN_SLOTS) << 2).unwrap_or(u32::MAX);
        self.floor = self.floor.or_else(|| Some(floor_now()));
        self.decided_floor = self.decided_floor.or_else(|| Some(floor_now()));
        match Message::open(bytes) {
            Ok((frame, msg)) => self.serve(now, frame.src, msg, out),
            Err(e) => {
                self.rejections.count(e.reason());
                out.events.push(StoreEvent::Rejected(e.reason()));
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

    fn fence_switch(&mut self, epoch: u16) {
        if epoch > self.switch_epoch {
            self.switch_epoch = epoch;
            self.decided_floor = None;
        }
    }
}

/// The version a served or returned value names (what a client records as read).
pub fn read_version(value: &crate::wire::Value) -> u64 {
    version_of(value)
}

/// A record on disk (real mode's write-ahead log, one frame of the runtime's framing, which
/// gives its length and checksum): a tag (1 `Prepared`, 2 `Outcome`, 3 `Refresh`, 4 the
/// controller's `Copy`, 5 the controller's `Span`, 6 the controller's `Placement`) and the body:
/// a message's payload; for a `Span` its T-TS (4 bytes, big-endian) and its node count (1 byte);
/// for a `Placement` (the cache refresh) 13 bytes: kind (0/1 `Begin` eviction/insertion, 2
/// `Evicted`, 3 `Inserted`, 4 `Settled`), switch (2 bytes), key (8), slot (2), big-endian.
impl pisadb_host::LogCodec for NodeRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        let (tag, msg) = match self {
            NodeRecord::Prepared(m) => (1u8, m),
            NodeRecord::Outcome(m) => (2u8, m),
            NodeRecord::Refresh(m) => (3u8, m),
            NodeRecord::Controller(ControllerRecord::Copy(m)) => (4u8, m),
            NodeRecord::Controller(ControllerRecord::Span { ts, nodes }) => {
                out.push(5);
                out.extend_from_slice(&ts.to_be_bytes());
                out.push(*nodes);
                return;
            }
            NodeRecord::Controller(ControllerRecord::Placement(p)) => {
                let (kind, switch, key, slot) = match *p {
                    PlacementRecord::Begin { switch, key, slot, insert } => (u8::from(insert), switch, key, slot),
                    PlacementRecord::Evicted { key } => (2, 0, key, 0),
                    PlacementRecord::Inserted { key } => (3, 0, key, 0),
                    PlacementRecord::Settled => (4, 0, 0, 0),
                };
                out.push(6);
                out.push(kind);
                out.extend_from_slice(&switch.to_be_bytes());
                out.extend_from_slice(&key.to_be_bytes());
                out.extend_from_slice(&slot.to_be_bytes());
                return;
            }
        };
        out.push(tag);
        msg.encode(out);
    }

    fn decode(payload: &[u8]) -> Result<Self, String> {
        let (&tag, body) = payload.split_first().ok_or("an empty record")?;
        let msg = || Message::decode(body).map_err(|e| e.to_string());
        Ok(match tag {
            1 => NodeRecord::Prepared(msg()?),
            2 => NodeRecord::Outcome(msg()?),
            3 => NodeRecord::Refresh(msg()?),
            4 => NodeRecord::Controller(ControllerRecord::Copy(msg()?)),
            5 => match *body {
                [a, b, c, d, nodes] => {
                    NodeRecord::Controller(ControllerRecord::Span { ts: u32::from_be_bytes([a, b, c, d]), nodes })
                }
                _ => return Err(format!("a span record of {} bytes, not 5", body.len())),
            },
            6 if body.len() == 13 => {
                let switch = u16::from_be_bytes([body[1], body[2]]);
                let key = u64::from_be_bytes(body[3..11].try_into().expect("8 bytes"));
                let slot = u16::from_be_bytes([body[11], body[12]]);
                NodeRecord::Controller(ControllerRecord::Placement(match (body[0], switch, key, slot) {
                    (0 | 1, ..) => PlacementRecord::Begin { switch, key, slot, insert: body[0] == 1 },
                    (2, 0, key, 0) => PlacementRecord::Evicted { key },
                    (3, 0, key, 0) => PlacementRecord::Inserted { key },
                    (4, 0, 0, 0) => PlacementRecord::Settled,
                    (kind @ 2..=4, ..) => {
                        return Err(format!("a placement record of kind {kind} with a field it does not use"))
                    }
                    (kind, ..) => return Err(format!("a placement record of kind {kind}")),
                }))
            }
            6 => return Err(format!("a placement record of {} bytes, not 13", body.len())),
            tag => return Err(format!("unknown tag {tag}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Op, FLAG_DECIDED};

    fn send(node: &mut StorageNode, msg: Message) -> (Vec<Message>, Vec<StoreEvent>) {
        let mut out = HostOutbox::<StorageNode>::default();
        node.handle_datagram(0, &msg.datagram(20, 3), &mut out);
        assert!(out.cpu_ns > 0);
        (out.sends.iter().map(|s| Message::open(&s.bytes).unwrap().1).collect(), out.events)
    }

    fn msg(ts: u32, status: Status, ops: Vec<Op>) -> Message {
        Message { ts, status, client: 16, seq: 1, ops }
    }

    fn decided(mut op: Op) -> Op {
        op.flags = FLAG_DECIDED;
        op
    }

    #[test]
    fn a_resolve_decides_an_unseen_timestamp_for_good_and_replays_decided_ones() {
        let mut node = StorageNode::new(3);
        let w = |ts: u32| decided(Op::write(5, value_of(5, u64::from(ts))));
        assert_eq!(send(&mut node, msg(8, Status::Resolve, vec![w(8)])).0[0].status, Status::Aborted);
        // The late request itself is refused: its switch claims are released on the way back.
        assert_eq!(send(&mut node, msg(8, Status::Request, vec![w(8)])).0[0].status, Status::Aborted);
        assert_eq!(node.version(5), 0);
        assert_eq!(send(&mut node, msg(12, Status::Request, vec![w(12)])).0[0].status, Status::Committed);
        let (replies, events) = send(&mut node, msg(12, Status::Resolve, vec![w(12)]));
        assert_eq!((replies[0].status, events), (Status::Committed, vec![]), "replayed, not applied again");
    }

    #[test]
    fn after_a_switch_is_rebuilt_the_crashed_switchs_decisions_are_refused() {
        let mut node = StorageNode::new(3);
        node.fence_switch(1);
        // The floor comes from the time of the next message: 1 ms → slot 10,000 + margin.
        let mut out = HostOutbox::<StorageNode>::default();
        let old = msg(40_000, Status::Request, vec![decided(Op::write(5, value_of(5, 40_000)))]);
        node.handle_datagram(1_000_000, &old.datagram(16, 3), &mut out);
        assert_eq!(Message::open(&out.sends[0].bytes).unwrap().1.status, Status::Aborted);
        let floor = ((1_000_000 / 100 + FLOOR_MARGIN_SLOTS) << 2) as u32;
        let new = msg(floor + 4, Status::Request, vec![decided(Op::write(5, value_of(5, u64::from(floor) + 4)))]);
        assert_eq!(send(&mut node, new).0[0].status, Status::Committed);
        // Uncached ops are not fenced by a switch's rebuild.
        assert_eq!(send(&mut node, msg(44, Status::Request, vec![Op::read(9)])).0[0].status, Status::Committed);
    }

    #[test]
    fn a_restarted_node_keeps_commits_outcomes_and_votes_and_floors_uncached_ops() {
        let mut node = StorageNode::new(3);
        let mut log = Vec::new();
        let mut step = |node: &mut StorageNode, m: Message| {
            let mut out = HostOutbox::<StorageNode>::default();
            node.handle_datagram(0, &m.datagram(20, 3), &mut out);
            log.extend(out.log);
        };
        step(&mut node, msg(8, Status::Request, vec![Op::write(1, value_of(1, 8))]));
        step(&mut node, msg(12, Status::Prepare, vec![Op::write(2, value_of(2, 12))]));
        step(&mut node, msg(16, Status::Resolve, vec![Op::read(3)]));
        let mut back = StorageNode::restore(3, &log).unwrap();
        assert_eq!((back.version(1), back.prepared()), (8, 1));
        // The vote stands: a younger reader of key 2 aborts, the commit installs.
        let mut out = HostOutbox::<StorageNode>::default();
        back.handle_datagram(2_000_000, &msg(10_000_000, Status::Request, vec![Op::read(2)]).datagram(16, 3), &mut out);
        assert_eq!(Message::open(&out.sends[0].bytes).unwrap().1.status, Status::Aborted);
        assert_eq!(send(&mut back, msg(12, Status::Commit, vec![Op::read(2)])).0[0].status, Status::Committed);
        assert_eq!(back.version(2), 12);
        // The tombstone survived; an old uncached op is below the floor.
        assert_eq!(send(&mut back, msg(16, Status::Request, vec![Op::read(3)])).0[0].status, Status::Aborted);
        assert_eq!(send(&mut back, msg(20, Status::Request, vec![Op::read(4)])).0[0].status, Status::Aborted);
    }

    #[test]
    fn a_decided_read_without_a_switch_value_reads_as_of_its_timestamp() {
        let mut node = StorageNode::new(3);
        let w = |ts: u32| decided(Op::write(5, value_of(5, u64::from(ts))));
        send(&mut node, msg(10, Status::Request, vec![w(10)]));
        send(&mut node, msg(20, Status::Request, vec![w(20)]));
        let (replies, _) = send(&mut node, msg(15, Status::Request, vec![decided(Op::read(5))]));
        assert_eq!(version_of(&replies[0].ops[0].value), 10);
        // A vote of another transaction on the key refuses a decided write and a younger read.
        send(&mut node, msg(30, Status::Prepare, vec![w(30)]));
        assert_eq!(send(&mut node, msg(32, Status::Request, vec![w(32)])).0[0].status, Status::Aborted);
        assert_eq!(send(&mut node, msg(33, Status::Request, vec![decided(Op::read(5))])).0[0].status, Status::Aborted);
        assert_eq!(
            send(&mut node, msg(25, Status::Request, vec![decided(Op::read(5))])).0[0].status,
            Status::Committed
        );
    }

    #[test]
    fn prepare_votes_commit_installs_and_a_late_reader_aborts() {
        let mut node = StorageNode::new(3);
        let (replies, _) = send(&mut node, msg(10, Status::Prepare, vec![Op::write(7, value_of(7, 10))]));
        assert_eq!(replies[0].status, Status::Voted);
        // A younger reader must wait for the pending older writer: abort.
        let (replies, _) = send(&mut node, msg(12, Status::Prepare, vec![Op::read(7)]));
        assert_eq!(replies[0].status, Status::Aborted);
        let (replies, events) = send(&mut node, msg(10, Status::Commit, vec![Op::read(7)]));
        assert_eq!(replies[0].status, Status::Committed);
        assert_eq!(events, vec![StoreEvent::Committed { ts: 10, writes: vec![(7, 0)] }]);
        assert_eq!(node.version(7), 10);
        let (replies, _) = send(&mut node, msg(13, Status::Request, vec![Op::read(7)]));
        assert_eq!((replies[0].status, version_of(&replies[0].ops[0].value)), (Status::Committed, 10));
        let (replies, _) = send(&mut node, msg(9, Status::Request, vec![Op::read(7)]));
        assert_eq!(replies[0].status, Status::Aborted, "too late: W-TS is 10");
    }

    #[test]
    fn the_controllers_abort_frees_a_prepared_share_and_refuses_an_unseen_one_for_good() {
        let mut node = StorageNode::new(3);
        assert_eq!(
            send(&mut node, msg(10, Status::Prepare, vec![Op::write(7, value_of(7, 10))])).0[0].status,
            Status::Voted
        );
        // Another share of ts 10 was refused elsewhere: the controller aborts this one.
        let (replies, events) = send(&mut node, msg(10, Status::Aborted, vec![Op::write(7, value_of(7, 10))]));
        assert_eq!((replies[0].status, replies[0].ops[0].key, events), (Status::Aborted, 7, vec![StoreEvent::Aborted]));
        assert_eq!(node.prepared(), 0);
        // Its pending write left the TSO: a younger reader no longer waits on it.
        let (replies, _) = send(&mut node, msg(12, Status::Request, vec![Op::read(7)]));
        assert_eq!((replies[0].status, version_of(&replies[0].ops[0].value)), (Status::Committed, 0));
        // A late Commit installs nothing; a resolve hears the abort again.
        assert!(send(&mut node, msg(10, Status::Commit, vec![Op::read(7)])).0.is_empty());
        assert_eq!(send(&mut node, msg(10, Status::Resolve, vec![Op::read(7)])).0[0].status, Status::Aborted);
        assert_eq!(node.version(7), 0);
        // An abort that overtakes its share's Prepare: the Prepare is refused when it comes.
        assert_eq!(
            send(&mut node, msg(20, Status::Aborted, vec![Op::write(8, value_of(8, 20))])).0[0].status,
            Status::Aborted
        );
        assert_eq!(
            send(&mut node, msg(20, Status::Prepare, vec![Op::write(8, value_of(8, 20))])).0[0].status,
            Status::Aborted
        );
        assert_eq!(node.prepared(), 0);
    }

    #[test]
    fn a_key_handed_to_a_switch_refuses_undecided_ops_and_one_taken_back_keeps_its_floor() {
        let mut node = StorageNode::new(3);
        send(&mut node, msg(10, Status::Prepare, vec![Op::write(7, value_of(7, 10))]));
        assert_eq!(node.hand_off(7, 0), None, "a prepared writer holds the key");
        send(&mut node, msg(10, Status::Commit, vec![Op::read(7)]));
        let state = node.hand_off(7, 1_000).unwrap();
        let floor = ((1_000 / 100 + FLOOR_MARGIN_SLOTS) << 2) as u32;
        assert_eq!((state.w_ts, state.r_ts, state.value), (10, floor, value_of(7, 10)));
        // An undecided op crossed the switch before it held the key: refused.
        assert_eq!(send(&mut node, msg(20, Status::Request, vec![Op::read(7)])).0[0].status, Status::Aborted);
        // The switch's decisions are applied.
        let w = decided(Op::write(7, value_of(7, u64::from(floor + 8))));
        assert_eq!(send(&mut node, msg(floor + 8, Status::Request, vec![w])).0[0].status, Status::Committed);
        // Taken back with the switch's floor: the node's TSO decides again, above it only.
        node.take_back(7, floor + 20);
        let r = |ts: u32| msg(ts, Status::Request, vec![Op::read(7)]);
        assert_eq!(send(&mut node, r(floor + 19)).0[0].status, Status::Aborted);
        let (replies, _) = send(&mut node, r(floor + 21));
        assert_eq!(
            (replies[0].status, version_of(&replies[0].ops[0].value)),
            (Status::Committed, u64::from(floor) + 8)
        );
        assert_eq!(node.hand_off(7, 0).unwrap().r_ts, floor + 20, "the floor carries into the next hand-off");
    }

    #[test]
    fn refresh_steps_over_the_wire_are_logged_and_a_restarted_node_keeps_them() {
        let logged = |node: &mut StorageNode, m: Message| {
            let mut out = HostOutbox::<StorageNode>::default();
            node.handle_datagram(1_000, &m.datagram(20, 3), &mut out);
            let replies: Vec<Message> = out.sends.iter().map(|s| Message::open(&s.bytes).unwrap().1).collect();
            (replies, out.log)
        };
        let mut node = StorageNode::new(3).handing([5]);
        let mut log = Vec::new();
        // Key 7 handed over the wire: answered with its value and the R-TS floor, logged.
        let (replies, records) = logged(&mut node, msg(0, Status::HandOff, vec![Op::read(7)]));
        assert_eq!(replies[0].status, Status::HandedOff);
        assert!(replies[0].ops[0].served() && replies[0].ts > 0, "{:?}", replies[0]);
        assert_eq!(replies[0].ops[0].value, value_of(7, 0));
        log.extend(records);
        // Key 5 (handed at setup) taken back with floor 900: logged.
        let (replies, records) = logged(&mut node, msg(900, Status::TakeBack, vec![Op::read(5)]));
        assert_eq!(replies[0].status, Status::TookBack);
        log.extend(records);
        assert_eq!(log.len(), 2, "each step is logged before it is answered");
        // A restart from the log keeps 7 handed and 5's floor, on top of the setup's hand-offs.
        let mut back = StorageNode::restore_handing(3, Box::new(Versions::default()), &log, [5]).unwrap();
        assert_eq!(back.handed().iter().copied().collect::<Vec<_>>(), vec![7]);
        back.floor = Some(0);
        let r = |ts: u32, key: u128| msg(ts, Status::Request, vec![Op::read(key)]);
        assert_eq!(send(&mut back, r(950, 7)).0[0].status, Status::Aborted, "7 is still handed");
        assert_eq!(send(&mut back, r(899, 5)).0[0].status, Status::Aborted, "5 below its floor");
        assert_eq!(send(&mut back, r(901, 5)).0[0].status, Status::Committed, "5 above its floor");
        // The log codec carries the records.
        let mut bytes = Vec::new();
        log.iter().for_each(|r| pisadb_runtime::framed_log::append(r, &mut bytes));
        let decoded = pisadb_runtime::framed_log::read::<NodeRecord>(&bytes).unwrap();
        assert_eq!(decoded.records, log);
    }

    #[test]
    fn a_report_counts_the_epochs_misses_hottest_first_and_is_the_same_when_asked_again() {
        let mut node = StorageNode::new(3);
        let report = |node: &mut StorageNode, epoch: u32| {
            let m = Message { ts: 2, status: Status::Report, client: 20, seq: epoch, ops: vec![Op::read(0)] };
            let (replies, _) = send(node, m);
            replies
                .iter()
                .flat_map(|r| {
                    r.ops.iter().map(|o| (o.key as u64, u64::from_be_bytes(o.value[..8].try_into().unwrap())))
                })
                .filter(|&(_, n)| n > 0)
                .collect::<Vec<_>>()
        };
        assert!(report(&mut node, 1).is_empty(), "counting starts with the first report");
        for (ts, key) in [(10, 4), (11, 4), (12, 9), (13, 4), (14, 9), (15, 2)] {
            send(&mut node, msg(ts, Status::Request, vec![Op::read(key)]));
        }
        send(&mut node, msg(16, Status::Request, vec![decided(Op::read(2))]));
        assert_eq!(report(&mut node, 2), vec![(4, 3), (9, 2)], "the top 2, decided ops not counted");
        assert_eq!(report(&mut node, 2), vec![(4, 3), (9, 2)], "asked again: the same report");
        assert!(report(&mut node, 3).is_empty(), "a new epoch starts from zero");
    }

    #[test]
    fn switch_decided_writes_are_applied_without_the_node_tso() {
        let mut node = StorageNode::new(3);
        let mut w = Op::write(5, value_of(5, 4));
        w.flags = FLAG_DECIDED;
        let (replies, events) = send(&mut node, msg(4, Status::Request, vec![w]));
        assert_eq!(replies[0].status, Status::Committed);
        assert_eq!(events, vec![StoreEvent::Committed { ts: 4, writes: vec![(5, 0)] }]);
        assert_eq!(node.version(5), 4);
        let mut out = HostOutbox::<StorageNode>::default();
        node.handle_datagram(0, &[1, 2, 3], &mut out);
        assert_eq!(node.rejections.total(), 1);
    }

    #[test]
    fn the_log_codec_reads_node_records_and_the_controllers_records_back() {
        use pisadb_runtime::framed_log;
        let m = |ts: u32, status| msg(ts, status, vec![Op::write(5, value_of(5, 3))]);
        let node_records = vec![
            NodeRecord::Prepared(m(8, Status::Voted)),
            NodeRecord::Outcome(m(8, Status::Committed)),
            NodeRecord::Refresh(m(9, Status::HandOff)),
        ];
        // The controller's records, between a node's, come back; a span cut short is a torn tail.
        let mut log = node_records.clone();
        log.insert(1, NodeRecord::Controller(ControllerRecord::Span { ts: 0x0102_0304, nodes: 3 }));
        for p in [
            PlacementRecord::Begin { switch: 7, key: 0x0102_0304_0506_0708, slot: 0xfffe, insert: true },
            PlacementRecord::Begin { switch: 0, key: 9, slot: 3, insert: false },
            PlacementRecord::Evicted { key: 9 },
            PlacementRecord::Inserted { key: u64::MAX },
            PlacementRecord::Settled,
        ] {
            log.insert(2, NodeRecord::Controller(ControllerRecord::Placement(p)));
        }
        log.push(NodeRecord::Controller(ControllerRecord::Copy(m(12, Status::CommitLog))));
        let mut bytes = Vec::new();
        log.iter().for_each(|r| framed_log::append(r, &mut bytes));
        let decoded = framed_log::read::<NodeRecord>(&bytes).unwrap();
        assert_eq!((decoded.records, decoded.torn_tail), (log.clone(), None));
        let mut torn = bytes.clone();
        framed_log::append(&NodeRecord::Controller(ControllerRecord::Span { ts: 7, nodes: 2 }), &mut torn);
        torn.pop();
        let decoded = framed_log::read::<NodeRecord>(&torn).unwrap();
        assert_eq!(
            (decoded.records, decoded.valid_bytes, decoded.torn_tail.map(|t| t.bytes)),
            (log, bytes.len(), Some(13))
        );
        // A storage node restored from a log with the controller's records skips them.
        let mut mixed = vec![NodeRecord::Controller(ControllerRecord::Copy(m(12, Status::CommitLog)))];
        mixed.push(NodeRecord::Outcome(msg(8, Status::Committed, vec![decided(Op::write(5, value_of(5, 8)))])));
        assert_eq!(StorageNode::restore(3, &mixed).unwrap().version(5), 8);
    }
}
