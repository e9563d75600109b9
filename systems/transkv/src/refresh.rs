//! The controller's hot-key statistics and cache refresh (§IV-D): which keys are hot this
//! epoch, where they should live, and the safe protocol that moves them.
//!
//! **Status: runs refresh** when `RackConfig::refresh_epoch_us` is set (variant `transkv`,
//! simulator and real mode): the controller host drives a [`Refresher`] from its timer and the replies it
//! gets; its control operations reach every switch by id, hop by hop
//! (`pisadb_wire::control::switch_address`); the node's side of a move travels as TransKV
//! messages (`Status::HandOff`, `TakeBack`, `Report` and their answers) and is logged at the
//! node before it is answered (`NodeRecord::Refresh`), so a restarted node keeps a handed key
//! handed and a floor a floor. Checked at the end of every such run (`rack::check`): no move
//! under way or failed, every switch holds exactly the placement, published, every node hands
//! exactly its placed keys, and the history and cached values as in every run; the fuzz cases
//! refresh under loss, jitter, reordering and crashes of nodes, switches and the controller.
//! Real mode (`crate::real`) runs it too, with the same end checks.
//!
//! ## Crashes ([`PlacementRecord`], [`Logged`], [`Refresher::restore`])
//!
//! The controller logs its placement's changes through its host's write-ahead log, each
//! before the sends of the handler that made it: an epoch's moves as it plans them (`Begin`,
//! all at once, before the first step), each finished eviction (`Evicted`, on the node's
//! `TookBack`) and insertion (`Inserted`, once published), and the epoch's end (`Settled`).
//! Replayed over the setup fill they give the placement and the moves under way.
//!
//! - A **restarted controller** waits [`RESEND_NS`] (the crashed one's requests have all
//!   arrived or been lost by then, as the resend rule already assumes) and then evicts every
//!   key whose move was under way: an eviction is finished; an insertion that may have
//!   started (every eviction of its epoch was done) is undone — an eviction is safe from any
//!   state of the entry (mark migrating, wait for the pending writer, carry the floor to the
//!   node), and an insertion not yet published accepted nothing. Then it refreshes as before,
//!   its first epoch only reading the hit counters again (their last readings were lost, and
//!   an epoch counted from nothing would see every cached key unrequested).
//! - A **rebuilt switch** gets the logged placement (`crate::fuzz::rebuild_switch`), the keys
//!   under way migrating, as the controller left them; an insertion whose hand-off the node's
//!   log shows gets its handed value back, since the controller's answered writes died with
//!   the switch and its publish may come next.
//!
//! ## The epoch loop ([`Refresher`])
//!
//! Every epoch: read every cached slot's hit counter and ask every node for its misses;
//! plan; evict the keys whose switch changes, each eviction ended by a take-back at the key's
//! node; then insert, each insertion with a hand-off from the key's node, hottest first. A key
//! moving between switches leaves the old one before the new one asks its node for it. At
//! most [`MOVES_PER_SWITCH`] moves run per switch at once (a key is unavailable at its switch
//! for the length of its own move only) and [`WINDOW`] control requests per switch are
//! outstanding. Every request is idempotent and sent again after [`RESEND_NS`]; an epoch in
//! which nothing was requested puts the loop to sleep until a client message reaches the
//! controller (a closed-loop run ends when its clients are done).
//!
//! ## Statistics ([`HitStats`])
//!
//! Each switch counts the ops it looks up on each cached key (the `HITS` array, §IV-D). Each
//! epoch the controller reads every cached slot's counter ([`HitStats::read_ops`]) and keeps
//! the difference from the last reading (32-bit wrapping): the counters are never reset, so
//! hits landing between a read and a reset cannot be lost. Storage nodes report the requests
//! they saw on keys no switch decided (misses, [`HitStats::record_misses`]). One epoch's
//! counts are comparable across both sources: requests per key.
//!
//! ## Placement ([`plan`])
//!
//! The epoch's counts ranked (hottest first, key as the tie-break; a cached key's count
//! weighs [`INCUMBENT_WEIGHT`] times, so that keys of about equal popularity do not swap
//! places on the noise of one epoch's counts) choose the keys to cache
//! exactly as the setup fill does from the workload's popularity (`layout::Hierarchy::new`):
//! each key at the first of its pod's core, aggregation switch and ToR with room. Of the
//! chosen keys, those cached now stay at their switch and slot (every level is on every path
//! to a key: a move between levels changes no hit, and counts wobble from epoch to epoch);
//! the new ones take the first level with room, hottest first. Every change is one eviction
//! and one insertion, the insertions reusing the slots freed on the same switch.
//!
//! ## The move of one key ([`Eviction`], [`Insertion`])
//!
//! Every step is a control operation ([`pisadb_wire::control::ControlOp`]) that the switch's
//! control plane applies between packets, as Tofino's driver does over PCIe; table entries are
//! only ever changed this way (the data plane cannot write its exact-match table). Between two
//! steps any number of packets may pass.
//!
//! - **Evict** key k from slot s: (1) re-insert k's entry with the [`MIGRATING`] bit: from then
//!   on every transactional op on k aborts at this switch without touching its registers, and
//!   no read is answered from it; replies still release and install; (2) read T-TS until it is
//!   0 (the writer accepted before (1) has committed or aborted; no new one can claim); (3)
//!   read W-TS and R-TS; (4) delete the entry. The result is k's **floor**
//!   ([`Eviction::floor`]): max(W-TS, R-TS), which the storage node must take as k's read and
//!   write timestamps before it decides any op on k by its own TSO — a writer older than a
//!   read the switch accepted must still abort.
//! - **Insert** key k at slot s: (1) insert k's entry with the [`MIGRATING`] bit; (2) the
//!   controller obtains from k's node its committed value, that value's write timestamp and
//!   k's read timestamp, once no transaction on k is prepared there ([`NodeState`]); (3) write
//!   W-TS, R-TS (the floors), T-TS := 0 and the value words at s; (4) re-insert the entry with
//!   the full bitmap (publish).
//!
//! The node's side: step (2) of an insertion is `StorageNode::hand_off`, which also makes the
//! node refuse, from that moment, ops on k that no switch decided (they crossed the switch
//! before (1)); an evicted key's floor goes to `StorageNode::take_back`, below which the
//! node's own TSO refuses ops on k. The keys of the setup fill start handed
//! (`StorageNode::handing`). The order of the
//! steps across switch and node leaves no window: between an insertion's reservation and its
//! publication every op on k aborts at the switch, and the node refuses undecided ops on k
//! from the hand-off on; an evicted key stays handed at the node until its take-back, so an
//! op that crosses the switch after the delete and reaches the node before the floor is
//! refused, never decided below the floor.
//!
//! ## Why control operations, not in-band TransKV frames
//!
//! Carrying the steps in TransKV frames that each switch's program recognises would reach
//! every level, but the program could not carry them out: on Tofino an exact-match table
//! changes only from the control plane, so every step that marks, deletes or publishes an
//! entry is the switch's control-plane agent's work, taking `control_plane_ns`. The shared
//! control channel therefore addresses a switch by id and travels hop by hop
//! (`pisadb_wire::control`); the unit tests below apply the same operations with
//! `Switch::apply_control`, the function the channel ends in.

use crate::layout::{levels_of, Hierarchy, SWITCHES};
use crate::program::{entry_value, CACHE_TABLE, FULL_BITMAP, HITS, MIGRATING, R_TS, T_TS, VALUE0, VALUE_ARRAYS, W_TS};
use crate::wire::{Message, Op, Status, Value, VALUE_BYTES};
use pisadb_core::Nanos;
use pisadb_host::Send;
use pisadb_wire::control::{addressed_switch, switch_address, ControlMessage, ControlOp, ControlResult, ControlStatus};
use pisadb_wire::{Frame, Kind};
use std::collections::BTreeMap;

/// Requests per key over epochs, from the switches' hit counters and the nodes' miss reports.
#[derive(Clone, Debug, Default)]
pub struct HitStats {
    /// The last reading of each (switch, slot) counter, and the key it counted.
    last: BTreeMap<(u16, u16), (u64, u32)>,
    /// This epoch's requests per key.
    counts: BTreeMap<u64, u64>,
}

impl HitStats {
    /// The reads of every cached slot's hit counter: (switch, key, slot, operation).
    pub fn read_ops(cached: &BTreeMap<u64, (u16, u16)>) -> Vec<(u16, u64, u16, ControlOp)> {
        cached
            .iter()
            .map(|(&key, &(switch, slot))| {
                (switch, key, slot, ControlOp::ReadRegister { register: HITS, index: u32::from(slot) })
            })
            .collect()
    }

    /// A counter reading `value` of `key` at (`switch`, `slot`): the hits since the last
    /// reading of that slot for that key (a slot given to another key starts from its reading
    /// at the time).
    pub fn record_counter(&mut self, switch: u16, slot: u16, key: u64, value: u32) {
        let since = match self.last.insert((switch, slot), (key, value)) {
            Some((k, before)) if k == key => value.wrapping_sub(before),
            _ => 0,
        };
        *self.counts.entry(key).or_default() += u64::from(since);
    }

    /// A reading known without asking: the counter of (`switch`, `slot`) is `value` for `key`
    /// (the setup fill and a finished insertion start it at 0).
    pub fn baseline(&mut self, switch: u16, slot: u16, key: u64, value: u32) {
        self.last.insert((switch, slot), (key, value));
    }

    /// A storage node's report: `requests` ops on `key` that no switch decided.
    pub fn record_misses(&mut self, key: u64, requests: u64) {
        *self.counts.entry(key).or_default() += requests;
    }

    /// Ends the epoch: its counts, and a fresh epoch.
    pub fn end_epoch(&mut self) -> BTreeMap<u64, u64> {
        std::mem::take(&mut self.counts)
    }
}

/// How much more often an uncached key must be requested in an epoch than a cached one to
/// take its place ([`plan`]).
pub const INCUMBENT_WEIGHT: u64 = 2;

/// What a refresh changes on one switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchPlan {
    /// Keys to evict and their slots.
    pub evict: Vec<(u64, u16)>,
    /// Keys to insert and the slots they get.
    pub insert: Vec<(u64, u16)>,
}

/// The placement an epoch's `counts` call for, given the `current` one, and per switch what
/// changes (module docs). Keys with no requests this epoch stay where they are while there is
/// room; the result keeps `current.cache_per_switch` per switch.
pub fn plan(current: &Hierarchy, counts: &BTreeMap<u64, u64>) -> (BTreeMap<u64, (u16, u16)>, Vec<SwitchPlan>) {
    let per = current.cache_per_switch;
    // A cached key ranks as if requested `INCUMBENT_WEIGHT` times as often: an uncached key
    // displaces it only if clearly hotter, not because two keys of about the same popularity
    // drew counts in the other order this epoch (each swap makes both unavailable for a move).
    let weight = |k: u64, c: u64| if current.cached.contains_key(&k) { c.saturating_mul(INCUMBENT_WEIGHT) } else { c };
    let mut ranked: Vec<(u64, u64)> = counts.iter().filter(|(_, &c)| c > 0).map(|(&k, &c)| (k, weight(k, c))).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    // Then the keys cached now without requests (in key order): they keep their places if
    // there is room left.
    let quiet = current.cached.keys().filter(|k| counts.get(k).copied().unwrap_or(0) == 0).map(|&k| (k, 0));
    let ranked: Vec<(u64, u64)> = ranked.into_iter().chain(quiet).collect();
    let mut used = [0u32; SWITCHES as usize];
    let mut home: BTreeMap<u64, u16> = BTreeMap::new();
    for &(key, count) in &ranked {
        if home.contains_key(&key) || key >= current.records {
            continue;
        }
        let stay = current.cached.get(&key).map(|&(s, _)| s).filter(|&s| count == 0 && used[usize::from(s)] < per);
        let levels = levels_of(current.node_of(key));
        if let Some(s) = stay.or_else(|| levels.iter().copied().find(|&s| used[usize::from(s)] < per)) {
            used[usize::from(s)] += 1;
            home.insert(key, s);
        }
    }
    let home = keep_cached_where_they_are(current, &ranked, &home);
    let mut plans = vec![SwitchPlan::default(); usize::from(SWITCHES)];
    let mut placed: BTreeMap<u64, (u16, u16)> = BTreeMap::new();
    let mut free: Vec<Vec<u16>> = vec![Vec::new(); usize::from(SWITCHES)];
    let mut taken = vec![vec![false; per as usize]; usize::from(SWITCHES)];
    for (&key, &(switch, slot)) in &current.cached {
        if home.get(&key) == Some(&switch) {
            placed.insert(key, (switch, slot));
            taken[usize::from(switch)][usize::from(slot)] = true;
        } else {
            plans[usize::from(switch)].evict.push((key, slot));
        }
    }
    for (s, slots) in free.iter_mut().enumerate() {
        // Lowest free slot last, so `pop` hands out the lowest first.
        *slots = (0..per as u16).rev().filter(|&i| !taken[s][usize::from(i)]).collect();
    }
    for (&key, &switch) in &home {
        if placed.contains_key(&key) {
            continue;
        }
        let slot = free[usize::from(switch)].pop().expect("home leaves room");
        placed.insert(key, (switch, slot));
        plans[usize::from(switch)].insert.push((key, slot));
    }
    (placed, plans)
}

/// The keys `chosen` (by the ranked fill) placed with as few moves as possible: each one cached
/// now stays at its switch (the switches hold no more than before, so it fits), the others
/// take the first level of their pod with room, in rank order (`ranked`). Every level is on
/// every path to a key, so moving a cached key from one level to another changes no hit and
/// only makes it unavailable for its move: with counts that wobble from epoch to epoch, the
/// ranked fill alone would shuffle the cache between levels at every refresh.
fn keep_cached_where_they_are(
    current: &Hierarchy,
    ranked: &[(u64, u64)],
    chosen: &BTreeMap<u64, u16>,
) -> BTreeMap<u64, u16> {
    let mut used = [0u32; SWITCHES as usize];
    let mut home = BTreeMap::new();
    for (&key, &(s, _)) in current.cached.iter().filter(|(k, _)| chosen.contains_key(k)) {
        used[usize::from(s)] += 1;
        home.insert(key, s);
    }
    for &(key, _) in ranked.iter().filter(|(k, _)| chosen.contains_key(k)) {
        if home.contains_key(&key) {
            continue;
        }
        let levels = levels_of(current.node_of(key));
        if let Some(s) = levels.iter().copied().find(|&s| used[usize::from(s)] < current.cache_per_switch) {
            used[usize::from(s)] += 1;
            home.insert(key, s);
        }
    }
    home
}

/// What the controller does next in a key's move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send this operation and feed its reply back.
    Send(ControlOp),
    /// The key still has a pending writer: send this operation again later.
    Retry(ControlOp),
    /// The controller must supply the node's state ([`Insertion::supply`]).
    NeedNode,
    /// The move is done.
    Done,
}

fn cell(reply: Option<(ControlStatus, ControlResult)>) -> Result<i64, String> {
    match reply {
        Some((ControlStatus::Ok, ControlResult::Cell { lo, .. })) => Ok(lo),
        other => Err(format!("expected a register cell, got {other:?}")),
    }
}

fn ok(reply: Option<(ControlStatus, ControlResult)>) -> Result<(), String> {
    match reply {
        Some((ControlStatus::Ok, _)) => Ok(()),
        other => Err(format!("control operation failed: {other:?}")),
    }
}

/// The eviction of one key from one switch (module docs), one control operation at a time.
#[derive(Clone, Debug)]
pub struct Eviction {
    key: u64,
    slot: u16,
    step: u8,
    w_ts: i64,
    r_ts: i64,
    /// Polls of the pending writer so far (bounded by [`MAX_WRITER_POLLS`]).
    polls: u32,
}

/// The most times an eviction polls a key's pending writer (one poll a [`TICK_NS`] tick: 10 s)
/// before it fails the epoch: a writer pending that long lost its decision (its client died
/// mid-write), and waiting on it forever would keep the controller from ever going idle.
pub const MAX_WRITER_POLLS: u32 = 200_000;

impl Eviction {
    /// The eviction of `key` from `slot`.
    pub fn new(key: u64, slot: u16) -> Self {
        Eviction { key, slot, step: 0, w_ts: 0, r_ts: 0, polls: 0 }
    }

    /// Given the reply to the last operation (`None` at the start), what to do next.
    pub fn next(&mut self, reply: Option<(ControlStatus, ControlResult)>) -> Result<Next, String> {
        let index = u32::from(self.slot);
        let poll = ControlOp::ReadRegister { register: T_TS, index };
        let (step, next) = match self.step {
            0 => {
                let value = entry_value(self.slot, FULL_BITMAP | MIGRATING, self.slot);
                (1, Next::Send(ControlOp::InsertEntry { table: CACHE_TABLE, key: self.key, value }))
            }
            1 => {
                ok(reply)?;
                (2, Next::Send(poll))
            }
            2 if cell(reply)? != 0 => {
                self.polls += 1;
                if self.polls > MAX_WRITER_POLLS {
                    return Err(format!(
                        "key {}'s pending writer did not finish in {MAX_WRITER_POLLS} polls",
                        self.key
                    ));
                }
                (2, Next::Retry(poll))
            }
            2 => (3, Next::Send(ControlOp::ReadRegister { register: W_TS, index })),
            3 => {
                self.w_ts = cell(reply)?;
                (4, Next::Send(ControlOp::ReadRegister { register: R_TS, index }))
            }
            4 => {
                self.r_ts = cell(reply)?;
                (5, Next::Send(ControlOp::DeleteEntry { table: CACHE_TABLE, key: self.key }))
            }
            5 => {
                ok(reply)?;
                (6, Next::Done)
            }
            _ => return Err("eviction already done".into()),
        };
        self.step = step;
        Ok(next)
    }

    /// Once done: the key's floor for its storage node, max(W-TS, R-TS).
    pub fn floor(&self) -> Option<u32> {
        (self.step == 6).then(|| self.w_ts.max(self.r_ts) as u32)
    }
}

/// A key's committed state at its storage node, handed to the switch that caches it next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// The committed value.
    pub value: Value,
    /// The timestamp that wrote it (the new W-TS).
    pub w_ts: u32,
    /// The largest timestamp that read it (the new R-TS).
    pub r_ts: u32,
}

/// The insertion of one key into one switch (module docs), one control operation at a time.
#[derive(Clone, Debug)]
pub struct Insertion {
    key: u64,
    slot: u16,
    state: Option<NodeState>,
    /// Operations left to send after the reservation.
    queue: Vec<ControlOp>,
    reserved: bool,
    done: bool,
}

impl Insertion {
    /// The insertion of `key` at `slot`.
    pub fn new(key: u64, slot: u16) -> Self {
        Insertion { key, slot, state: None, queue: Vec::new(), reserved: false, done: false }
    }

    /// The node's state of the key (step 2).
    pub fn supply(&mut self, state: NodeState) {
        let index = u32::from(self.slot);
        let mut ops = vec![
            ControlOp::WriteRegister { register: W_TS, index, lo: i64::from(state.w_ts), hi: 0 },
            ControlOp::WriteRegister { register: R_TS, index, lo: i64::from(state.r_ts), hi: 0 },
            ControlOp::WriteRegister { register: T_TS, index, lo: 0, hi: 0 },
            // The key's requests count from 0 (the slot's counter counted the evicted key's).
            ControlOp::WriteRegister { register: HITS, index, lo: 0, hi: 0 },
        ];
        for w in 0..usize::from(VALUE_ARRAYS) {
            let word = u32::from_be_bytes(state.value[4 * w..4 * w + 4].try_into().expect("4 bytes"));
            ops.push(ControlOp::WriteRegister { register: VALUE0 + w as u8, index, lo: i64::from(word), hi: 0 });
        }
        let value = entry_value(self.slot, FULL_BITMAP, self.slot);
        ops.push(ControlOp::InsertEntry { table: CACHE_TABLE, key: self.key, value });
        ops.reverse();
        self.queue = ops;
        self.state = Some(state);
    }

    /// Given the reply to the last operation (`None` at the start), what to do next.
    pub fn next(&mut self, reply: Option<(ControlStatus, ControlResult)>) -> Result<Next, String> {
        if self.done {
            return Err("insertion already done".into());
        }
        if !self.reserved {
            if reply.is_none() {
                let value = entry_value(self.slot, FULL_BITMAP | MIGRATING, self.slot);
                return Ok(Next::Send(ControlOp::InsertEntry { table: CACHE_TABLE, key: self.key, value }));
            }
            ok(reply)?;
            self.reserved = true;
            if self.state.is_none() {
                return Ok(Next::NeedNode);
            }
        } else if reply.is_some() {
            ok(reply)?;
        } else if self.state.is_none() {
            return Ok(Next::NeedNode);
        }
        match self.queue.pop() {
            Some(op) => Ok(Next::Send(op)),
            None => {
                self.done = true;
                Ok(Next::Done)
            }
        }
    }
}

const _: () = assert!(VALUE_BYTES == 4 * VALUE_ARRAYS as usize);

/// How often a busy refresh looks at what it waits for: resends, T-TS polls, hand-offs asked
/// again.
pub const TICK_NS: Nanos = 50_000;
/// A request unanswered this long is sent again. Every request is idempotent (register and
/// table writes write the same thing again; a delete found gone is done; a hand-off or a
/// take-back repeated changes nothing; a report is kept per epoch). A copy executing after a
/// later step of its move could undo that step, so this must exceed any delay the network
/// adds to one datagram (our fault plans add at most 70 µs), not only its loss.
pub const RESEND_NS: Nanos = 2_000_000;
/// Control requests outstanding per switch: keeps its control plane busy without queueing
/// past the resend time (each takes `control_plane_ns`, 20 µs).
pub const WINDOW: usize = 4;
/// Moves under way per switch at once. A key is unavailable at its switch from the first
/// step of its move to the last (every op on it aborts there): starting every move of an
/// epoch at once would mark them all first and keep the whole hot set unavailable for the
/// length of the refresh; two at a time keep the control plane busy (one move waits for a
/// reply while the other's request is served) and each key unavailable for its own move only.
pub const MOVES_PER_SWITCH: usize = 2;

/// What the controller logs of its placement (`ControllerRecord::Placement`), each before
/// the sends of the handler that wrote it: a restarted controller and a rebuilt switch learn
/// from them which key is cached where and which moves were under way ([`Logged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementRecord {
    /// A move of an epoch's plan: `key` to leave (`insert` false) or to enter (`insert`
    /// true) `slot` of `switch`. An epoch logs all its moves at once, before its first step.
    Begin {
        /// The switch.
        switch: u16,
        /// The key.
        key: u64,
        /// Its slot there.
        slot: u16,
        /// An insertion (else an eviction).
        insert: bool,
    },
    /// `key`'s eviction (or the undoing of its insertion) is done: it is cached nowhere.
    Evicted {
        /// The key.
        key: u64,
    },
    /// `key`'s insertion is done: it is cached where its `Begin` said.
    Inserted {
        /// The key.
        key: u64,
    },
    /// The epoch's moves are over: none is under way.
    Settled,
}

/// The placement a controller's records leave (setup fill `setup`, then every finished move):
/// the placed keys, and the moves begun and not finished, as (switch, key, slot, insert).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Logged {
    /// Cached key → (switch, slot).
    pub placed: BTreeMap<u64, (u16, u16)>,
    /// Moves begun and not finished, by key.
    pub pending: BTreeMap<u64, (u16, u16, bool)>,
}

impl Logged {
    /// Replays `records` over the setup placement `setup`.
    pub fn replay<'a>(setup: &Hierarchy, records: impl IntoIterator<Item = &'a PlacementRecord>) -> Self {
        let mut logged = Logged { placed: setup.cached.clone(), pending: BTreeMap::new() };
        for r in records {
            match *r {
                PlacementRecord::Begin { switch, key, slot, insert } => {
                    logged.pending.insert(key, (switch, slot, insert));
                }
                PlacementRecord::Evicted { key } => {
                    logged.pending.remove(&key);
                    logged.placed.remove(&key);
                }
                PlacementRecord::Inserted { key } => {
                    if let Some((switch, slot, true)) = logged.pending.remove(&key) {
                        logged.placed.insert(key, (switch, slot));
                    }
                }
                PlacementRecord::Settled => logged.pending.clear(),
            }
        }
        logged
    }

    /// Whether an insertion may have started: every eviction begun is finished (an epoch
    /// inserts only once all its evictions are done).
    pub fn inserting(&self) -> bool {
        self.pending.values().all(|&(_, _, insert)| insert)
    }
}

/// What an outstanding request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    /// Reading the hit counter of `key` at (`switch`, `slot`).
    Hits { switch: u16, slot: u16, key: u64 },
    /// A step of eviction `i`.
    Evict(usize),
    /// The take-back that ends eviction `i`.
    TakeBack(usize),
    /// A step of insertion `i`.
    Insert(usize),
    /// The hand-off of insertion `i`.
    HandOff(usize),
}

/// A request sent and not yet answered.
#[derive(Clone, Debug)]
struct Outstanding {
    /// The switch (its id) or the storage node it went to.
    to: Target,
    /// The datagram, to send again.
    bytes: Vec<u8>,
    /// When it was last sent.
    sent_ns: Nanos,
    /// Whether it was sent more than once.
    resent: bool,
    /// What it is for.
    job: Job,
}

/// Who a refresh request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// Switch `id` (its control plane).
    Switch(u16),
    /// Storage node `id`.
    Node(u16),
}

/// Where an epoch's refresh is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the next epoch (or, `dormant`, for any client traffic at all).
    Idle,
    /// Reading the hit counters and the nodes' miss reports.
    Collecting,
    /// Evicting keys whose switch changes, and handing them back to their nodes.
    Evicting,
    /// Inserting keys at their new switches.
    Inserting,
}

/// What the refresh did, for the figures and the checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefreshFigures {
    /// Epochs that collected statistics.
    pub epochs: u64,
    /// Epochs that moved keys.
    pub refreshes: u64,
    /// Keys evicted.
    pub evicted: u64,
    /// Keys inserted.
    pub inserted: u64,
    /// Requests sent again after [`RESEND_NS`].
    pub resends: u64,
    /// Polls of a T-TS still pending, and hand-offs refused for a prepared transaction.
    pub waits: u64,
    /// Steps that failed (a move abandoned: must stay empty).
    pub errors: Vec<String>,
    /// A restored controller's recovery evictions (moves under way at its crash).
    pub recovered: u64,
}

/// The controller's cache refresh (§IV-D) as a state machine driven by the controller host:
/// every `epoch_ns` it reads every cached key's hit counter and asks every node for its
/// misses, plans the placement ([`plan`]), runs the evictions (each ended by a take-back at
/// the key's node), then the insertions (each with a hand-off from the key's node), over the
/// control channel and TransKV messages; then waits for the next epoch. Keys moving between
/// switches leave the old one (and are taken back) before the new one asks for them. An
/// epoch in which no key was requested at all moves nothing and puts the loop to sleep (the
/// clients are done: a closed-loop run must end) until the next client message reaches the
/// controller.
#[derive(Clone, Debug)]
pub struct Refresher {
    /// The controller's host id.
    address: u16,
    /// The epoch.
    epoch_ns: Nanos,
    /// Keys each node reports at most per epoch.
    report_keys: u32,
    /// The keys and their placement now.
    placement: Hierarchy,
    /// The statistics.
    stats: HitStats,
    /// The epoch being collected or moved (counts from 1).
    epoch: u32,
    /// When the current epoch started.
    epoch_start_ns: Nanos,
    /// Where the epoch is.
    phase: Phase,
    /// No epoch scheduled: the last one saw no request.
    dormant: bool,
    /// The next request id (control requests and node messages share the space).
    next_id: u32,
    /// Requests sent and not answered, by id.
    outstanding: BTreeMap<u32, Outstanding>,
    /// Control operations waiting for their switch's window, per switch.
    queued: BTreeMap<u16, std::collections::VecDeque<(ControlOp, Job)>>,
    /// Operations to send at the next tick (a T-TS poll) and hand-offs to ask again.
    later: Vec<(u16, ControlOp, Job)>,
    /// Insertions whose hand-off to ask again at the next tick.
    handoffs_later: Vec<usize>,
    /// Miss reports awaited this epoch: node → (sent, parts seen, parts in all).
    reports: BTreeMap<u16, (Nanos, std::collections::BTreeSet<u16>, Option<u16>)>,
    /// This epoch's evictions: (switch, key, slot, the move, done).
    evictions: Vec<(u16, u64, Eviction, bool)>,
    /// This epoch's insertions: (switch, key, slot, the move, done).
    insertions: Vec<(u16, u64, u16, Insertion, bool)>,
    /// The placement this epoch moves to.
    target: BTreeMap<u64, (u16, u16)>,
    /// Jobs of the phase still to finish.
    remaining: usize,
    /// Moves of the phase not yet started, per switch (indices into `evictions` or
    /// `insertions`), and moves under way per switch.
    moves: BTreeMap<u16, (std::collections::VecDeque<usize>, usize)>,
    /// Placement records written and not yet taken by the controller ([`Refresher::take_log`]).
    log: Vec<PlacementRecord>,
    /// Restored from a log: the first tick waits [`RESEND_NS`] (every request of the crashed
    /// controller has arrived or is lost by then), then runs the recovery moves.
    restored: bool,
    /// Recovery moves to run before any epoch: evictions of the keys whose move was under way
    /// (an eviction finished, an insertion undone), as (switch, key, slot).
    recovery: Vec<(u16, u64, u16)>,
    /// Restored: the first epoch only takes the hit counters' readings (their last readings
    /// died with the crashed controller) and moves nothing; planning on its counts would see
    /// every cached key unrequested and churn the cache.
    rebaseline: bool,
    /// What it did.
    pub figures: RefreshFigures,
}

impl Refresher {
    /// The refresh of a restarted controller: the placement its `records` leave over the
    /// setup fill `setup`; a move under way at the crash is finished if it was an eviction
    /// and undone (evicted again) if it was an insertion that may have started, before any
    /// new epoch. Nothing half done can stay: an eviction is safe from any step (mark the
    /// entry migrating, wait for its pending writer, carry the floor to the node), and an
    /// insertion not yet published has accepted nothing.
    pub fn restore(
        address: u16,
        setup: Hierarchy,
        records: &[PlacementRecord],
        epoch_ns: Nanos,
        report_keys: u32,
    ) -> Self {
        let logged = Logged::replay(&setup, records);
        let inserting = logged.inserting();
        let mut placement = setup;
        placement.cached = logged.placed;
        let mut r = Refresher::new(address, placement, epoch_ns, report_keys);
        r.stats = HitStats::default();
        r.restored = true;
        r.rebaseline = true;
        r.recovery = logged
            .pending
            .iter()
            .filter(|(_, &(_, _, insert))| !insert || inserting)
            .map(|(&key, &(switch, slot, _))| (switch, key, slot))
            .collect();
        r
    }

    /// The placement records written since the last call, for the controller's log.
    pub fn take_log(&mut self) -> Vec<PlacementRecord> {
        std::mem::take(&mut self.log)
    }

    /// The refresh of the placement `placement` (the setup fill: every hit counter is 0) by
    /// controller `address`, every `epoch_ns`, with at most `report_keys` keys per node report.
    pub fn new(address: u16, placement: Hierarchy, epoch_ns: Nanos, report_keys: u32) -> Self {
        let mut stats = HitStats::default();
        for (&key, &(switch, slot)) in &placement.cached {
            stats.baseline(switch, slot, key, 0);
        }
        Refresher {
            address,
            epoch_ns: epoch_ns.max(1),
            report_keys,
            placement,
            stats,
            epoch: 0,
            epoch_start_ns: 0,
            phase: Phase::Idle,
            dormant: false,
            next_id: 1,
            outstanding: BTreeMap::new(),
            queued: BTreeMap::new(),
            later: Vec::new(),
            handoffs_later: Vec::new(),
            reports: BTreeMap::new(),
            evictions: Vec::new(),
            insertions: Vec::new(),
            target: BTreeMap::new(),
            remaining: 0,
            moves: BTreeMap::new(),
            log: Vec::new(),
            restored: false,
            recovery: Vec::new(),
            rebaseline: false,
            figures: RefreshFigures::default(),
        }
    }

    /// The placement now (cached key → (switch, slot)).
    pub fn placement(&self) -> &BTreeMap<u64, (u16, u16)> {
        &self.placement.cached
    }

    /// Whether no epoch is under way.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// When the first tick is due, for a controller started at `now`: the end of the first
    /// epoch, or for a restored one [`RESEND_NS`] on (its recovery).
    pub fn first_tick(&self, now: Nanos) -> Nanos {
        if self.restored {
            now + RESEND_NS
        } else {
            now + self.epoch_ns
        }
    }

    /// A client message reached the controller: a sleeping loop wakes (returns the tick to
    /// schedule).
    pub fn wake(&mut self, now: Nanos) -> Option<Nanos> {
        if !self.dormant {
            return None;
        }
        self.dormant = false;
        Some(now + self.epoch_ns)
    }

    /// The tick: starts an epoch when one is due, resends what is overdue, sends what waited;
    /// returns when the next tick is due (`None`: asleep).
    pub fn tick(&mut self, now: Nanos, sends: &mut Vec<Send>) -> Option<Nanos> {
        if self.phase == Phase::Idle {
            if self.restored {
                self.restored = false;
                self.start_recovery(now, sends);
                return self.next_tick(now);
            }
            if self.dormant {
                return None;
            }
            self.start_epoch(now, sends);
        } else {
            self.resend_overdue(now, sends);
            for (switch, op, job) in std::mem::take(&mut self.later) {
                self.queue(switch, op, job);
            }
            for i in std::mem::take(&mut self.handoffs_later) {
                self.send_handoff(now, i, sends);
            }
            self.pump(now, sends);
        }
        self.next_tick(now)
    }

    fn next_tick(&self, now: Nanos) -> Option<Nanos> {
        match self.phase {
            Phase::Idle if self.dormant => None,
            Phase::Idle => Some((self.epoch_start_ns + self.epoch_ns).max(now + 1)),
            _ => Some(now + TICK_NS),
        }
    }

    /// A restored controller's first work: the recovery evictions (as an epoch's eviction
    /// phase with no insertions), ending with the placement without their keys.
    ///
    /// Its epochs are numbered on from `now / epoch_ns`, above every epoch the controller
    /// started before its crash: an epoch starts at least `epoch_ns` after the one before, so
    /// epoch `k` started at or after `k × epoch_ns` of rack time. A storage node answers a
    /// report for an epoch at or below the last it saw with that epoch's report again (a
    /// resent request must get the same answer), so a restored controller counting from 1
    /// again was handed its previous life's stale miss counts for every epoch up to where it
    /// had been: it planned moves on them epoch after epoch and never went idle (the flaky
    /// refresh-and-kill-the-controller real-mode test).
    fn start_recovery(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        self.epoch = self.epoch.max(u32::try_from(now / self.epoch_ns).unwrap_or(u32::MAX / 2));
        self.epoch_start_ns = now;
        let recovery = std::mem::take(&mut self.recovery);
        self.figures.recovered += recovery.len() as u64;
        self.target = self.placement.cached.clone();
        for &(switch, key, slot) in &recovery {
            self.target.remove(&key);
            self.evictions.push((switch, key, Eviction::new(key, slot), false));
        }
        self.start_evicting(now, sends);
    }

    /// Starts the job's eviction phase (its insertions follow once every eviction is done).
    fn start_evicting(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        self.phase = Phase::Evicting;
        self.remaining = self.evictions.len();
        let switches: Vec<u16> = self.evictions.iter().map(|e| e.0).collect();
        self.schedule_moves(&switches);
        if self.evictions.is_empty() {
            self.remaining = 1;
            self.finish_job(now, sends);
        }
        self.pump(now, sends);
    }

    fn start_epoch(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        self.epoch += 1;
        self.epoch_start_ns = now;
        self.figures.epochs += 1;
        self.phase = Phase::Collecting;
        for (switch, key, slot, op) in HitStats::read_ops(&self.placement.cached) {
            self.queue(switch, op, Job::Hits { switch, slot, key });
        }
        for node in 0..crate::layout::NODES {
            self.reports.insert(node, (now, Default::default(), None));
            self.send_report(node, sends);
        }
        self.remaining = self.placement.cached.len() + usize::from(crate::layout::NODES);
        self.pump(now, sends);
    }

    fn send_report(&mut self, node: u16, sends: &mut Vec<Send>) {
        let msg = Message {
            ts: self.report_keys,
            status: Status::Report,
            client: self.address,
            seq: self.epoch,
            ops: vec![Op::read(0)],
        };
        sends.push(Send { dst: node, bytes: msg.datagram(self.address, node) });
    }

    fn queue(&mut self, switch: u16, op: ControlOp, job: Job) {
        self.queued.entry(switch).or_default().push_back((op, job));
    }

    /// Sends queued control operations while their switch's window has room.
    fn pump(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        let mut busy: BTreeMap<u16, usize> = BTreeMap::new();
        for o in self.outstanding.values() {
            if let Target::Switch(s) = o.to {
                *busy.entry(s).or_default() += 1;
            }
        }
        for (&switch, queue) in self.queued.iter_mut() {
            let room = WINDOW.saturating_sub(busy.get(&switch).copied().unwrap_or(0));
            for (op, job) in queue.drain(..room.min(queue.len())) {
                let id = self.next_id;
                self.next_id = self.next_id.wrapping_add(1).max(1);
                let dst = switch_address(switch).expect("rack switches have addresses");
                let mut bytes = Vec::with_capacity(pisadb_wire::FRAME_BYTES + pisadb_wire::control::CONTROL_BYTES);
                Frame { kind: Kind::CONTROL, src: self.address, dst }.encode(&mut bytes);
                ControlMessage::Request { request_id: id, op }.encode(&mut bytes);
                sends.push(Send { dst, bytes: bytes.clone() });
                let o = Outstanding { to: Target::Switch(switch), bytes, sent_ns: now, resent: false, job };
                self.outstanding.insert(id, o);
            }
        }
    }

    /// Sends a TransKV message `status` about `key` to `node` for `job`.
    fn send_node(
        &mut self,
        now: Nanos,
        node: u16,
        status: Status,
        (key, ts): (u64, u32),
        job: Job,
        sends: &mut Vec<Send>,
    ) {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let msg = Message { ts, status, client: self.address, seq: id, ops: vec![Op::read(u128::from(key))] };
        let bytes = msg.datagram(self.address, node);
        sends.push(Send { dst: node, bytes: bytes.clone() });
        self.outstanding.insert(id, Outstanding { to: Target::Node(node), bytes, sent_ns: now, resent: false, job });
    }

    fn resend_overdue(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        for o in self.outstanding.values_mut().filter(|o| now >= o.sent_ns + RESEND_NS) {
            let dst = match o.to {
                Target::Switch(s) => switch_address(s).expect("rack switches have addresses"),
                Target::Node(n) => n,
            };
            sends.push(Send { dst, bytes: o.bytes.clone() });
            (o.sent_ns, o.resent) = (now, true);
            self.figures.resends += 1;
        }
        let overdue: Vec<u16> = self
            .reports
            .iter()
            .filter(|(_, r)| r.2.is_none_or(|n| r.1.len() < usize::from(n)) && now >= r.0 + RESEND_NS)
            .map(|(&n, _)| n)
            .collect();
        for node in overdue {
            self.reports.get_mut(&node).expect("listed").0 = now;
            self.figures.resends += 1;
            self.send_report(node, sends);
        }
    }

    /// A control reply from address `src`.
    pub fn on_control(&mut self, now: Nanos, src: u16, reply: ControlMessage, sends: &mut Vec<Send>) {
        let ControlMessage::Reply { request_id, op, mut status, result } = reply else { return };
        let Some(o) = self.outstanding.get(&request_id) else { return };
        if o.to != Target::Switch(addressed_switch(src).unwrap_or(u16::MAX)) {
            return;
        }
        let o = self.outstanding.remove(&request_id).expect("present");
        // A delete sent again found its first copy's work done.
        if o.resent && status == ControlStatus::NoSuchEntry && matches!(op, ControlOp::DeleteEntry { .. }) {
            status = ControlStatus::Ok;
        }
        let reply = Some((status, result));
        match o.job {
            Job::Hits { switch, slot, key } => {
                match (status, result) {
                    (ControlStatus::Ok, ControlResult::Cell { lo, .. }) => {
                        self.stats.record_counter(switch, slot, key, lo as u32)
                    }
                    other => self.figures.errors.push(format!("hit counter of key {key}: {other:?}")),
                }
                self.finish_job(now, sends);
            }
            Job::Evict(i) => {
                let (switch, key) = (self.evictions[i].0, self.evictions[i].1);
                match self.evictions[i].2.next(reply) {
                    Ok(Next::Send(op)) => self.queue(switch, op, Job::Evict(i)),
                    Ok(Next::Retry(op)) => {
                        self.figures.waits += 1;
                        self.later.push((switch, op, Job::Evict(i)));
                    }
                    Ok(Next::Done) => {
                        let floor = self.evictions[i].2.floor().expect("done");
                        let node = self.placement.node_of(key);
                        self.send_node(now, node, Status::TakeBack, (key, floor), Job::TakeBack(i), sends);
                    }
                    Ok(Next::NeedNode) | Err(_) => {
                        self.fail(now, format!("evicting key {key} from switch {switch}: {reply:?}"), sends)
                    }
                }
            }
            Job::Insert(i) => {
                let (switch, key) = (self.insertions[i].0, self.insertions[i].1);
                match self.insertions[i].3.next(reply) {
                    Ok(Next::Send(op)) => self.queue(switch, op, Job::Insert(i)),
                    Ok(Next::NeedNode) => self.send_handoff(now, i, sends),
                    Ok(Next::Done) => {
                        self.log.push(PlacementRecord::Inserted { key });
                        self.insertions[i].4 = true;
                        self.stats.baseline(switch, self.insertions[i].2, key, 0);
                        self.figures.inserted += 1;
                        self.next_move(switch);
                        self.finish_job(now, sends);
                    }
                    Ok(Next::Retry(_)) | Err(_) => {
                        self.fail(now, format!("inserting key {key} at switch {switch}: {reply:?}"), sends)
                    }
                }
            }
            Job::TakeBack(_) | Job::HandOff(_) => {}
        }
        self.pump(now, sends);
    }

    fn send_handoff(&mut self, now: Nanos, i: usize, sends: &mut Vec<Send>) {
        let key = self.insertions[i].1;
        let node = self.placement.node_of(key);
        self.send_node(now, node, Status::HandOff, (key, 0), Job::HandOff(i), sends);
    }

    /// A TransKV message from storage node `src` for the refresh (`HandedOff`, `TookBack`,
    /// `Misses`).
    pub fn on_node(&mut self, now: Nanos, src: u16, msg: &Message, sends: &mut Vec<Send>) {
        if msg.status == Status::Misses {
            return self.on_misses(now, src, msg, sends);
        }
        let Some(o) = self.outstanding.get(&msg.seq) else { return };
        if o.to != Target::Node(src) {
            return;
        }
        let o = self.outstanding.remove(&msg.seq).expect("present");
        match (o.job, msg.status) {
            (Job::TakeBack(i), Status::TookBack) => {
                self.log.push(PlacementRecord::Evicted { key: self.evictions[i].1 });
                self.evictions[i].3 = true;
                self.figures.evicted += 1;
                self.next_move(self.evictions[i].0);
                self.finish_job(now, sends);
            }
            (Job::HandOff(i), Status::HandedOff) => match msg.ops.first() {
                Some(op) if op.served() => {
                    let w_ts = u32::try_from(crate::wire::version_of(&op.value)).unwrap_or(u32::MAX);
                    let ins = &mut self.insertions[i].3;
                    ins.supply(NodeState { value: op.value, w_ts, r_ts: msg.ts });
                    let (switch, key) = (self.insertions[i].0, self.insertions[i].1);
                    match self.insertions[i].3.next(None) {
                        Ok(Next::Send(op)) => self.queue(switch, op, Job::Insert(i)),
                        other => self.fail(now, format!("inserting key {key}: {other:?} after the hand-off"), sends),
                    }
                }
                _ => {
                    self.figures.waits += 1;
                    self.handoffs_later.push(i);
                }
            },
            (job, status) => self.fail(now, format!("{job:?} answered {status:?}"), sends),
        }
        self.pump(now, sends);
    }

    fn on_misses(&mut self, now: Nanos, src: u16, msg: &Message, sends: &mut Vec<Send>) {
        if self.phase != Phase::Collecting || msg.seq != self.epoch {
            return;
        }
        let Some(report) = self.reports.get_mut(&src) else { return };
        if report.2.is_some_and(|n| report.1.len() >= usize::from(n)) || !report.1.insert(msg.client) {
            return;
        }
        report.2 = Some(u16::try_from(msg.ts).unwrap_or(u16::MAX));
        for op in &msg.ops {
            let n = u64::from_be_bytes(op.value[..8].try_into().expect("8 bytes"));
            if n > 0 {
                self.stats.record_misses(op.key as u64, n);
            }
        }
        if report.2.is_some_and(|n| report.1.len() >= usize::from(n)) {
            self.finish_job(now, sends);
        }
    }

    /// One job of the phase is done; the last one moves the epoch on.
    fn finish_job(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        self.remaining = self.remaining.saturating_sub(1);
        if self.remaining > 0 {
            return;
        }
        match self.phase {
            Phase::Collecting => self.plan_epoch(now, sends),
            Phase::Evicting => self.start_insertions(now, sends),
            Phase::Inserting => {
                self.placement.cached = std::mem::take(&mut self.target);
                self.insertions.clear();
                self.evictions.clear();
                self.phase = Phase::Idle;
                self.log.push(PlacementRecord::Settled);
            }
            Phase::Idle => {}
        }
    }

    fn plan_epoch(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        self.reports.clear();
        let counts = self.stats.end_epoch();
        if counts.values().all(|&c| c == 0) {
            self.phase = Phase::Idle;
            self.dormant = true;
            return;
        }
        if std::mem::take(&mut self.rebaseline) {
            self.phase = Phase::Idle;
            return;
        }
        let (target, plans) = plan(&self.placement, &counts);
        self.target = target;
        for (s, p) in plans.iter().enumerate() {
            for &(key, slot) in &p.evict {
                self.evictions.push((s as u16, key, Eviction::new(key, slot), false));
            }
            // The hottest keys first: they are the ones waiting clients miss most.
            let mut insert = p.insert.clone();
            insert.sort_by_key(|&(key, _)| (std::cmp::Reverse(counts.get(&key).copied().unwrap_or(0)), key));
            for (key, slot) in insert {
                self.insertions.push((s as u16, key, slot, Insertion::new(key, slot), false));
            }
        }
        if self.evictions.is_empty() && self.insertions.is_empty() {
            self.placement.cached = std::mem::take(&mut self.target);
            self.phase = Phase::Idle;
            return;
        }
        self.figures.refreshes += 1;
        for &(switch, key, ref e, _) in &self.evictions {
            self.log.push(PlacementRecord::Begin { switch, key, slot: e.slot, insert: false });
        }
        for &(switch, key, slot, _, _) in &self.insertions {
            self.log.push(PlacementRecord::Begin { switch, key, slot, insert: true });
        }
        self.start_evicting(now, sends);
    }

    fn start_insertions(&mut self, now: Nanos, sends: &mut Vec<Send>) {
        self.phase = Phase::Inserting;
        self.remaining = self.insertions.len();
        if self.insertions.is_empty() {
            self.remaining = 1;
            return self.finish_job(now, sends);
        }
        let switches: Vec<u16> = self.insertions.iter().map(|e| e.0).collect();
        self.schedule_moves(&switches);
        self.pump(now, sends);
    }

    /// Lines up the phase's moves (move `i` on `switches[i]`) and starts
    /// [`MOVES_PER_SWITCH`] on each switch.
    fn schedule_moves(&mut self, switches: &[u16]) {
        self.moves.clear();
        for (i, &s) in switches.iter().enumerate() {
            self.moves.entry(s).or_default().0.push_back(i);
        }
        let all: Vec<u16> = self.moves.keys().copied().collect();
        for s in all {
            for _ in 0..MOVES_PER_SWITCH {
                self.start_move(s);
            }
        }
    }

    /// A move on `switch` ended: the next one there starts.
    fn next_move(&mut self, switch: u16) {
        if let Some(m) = self.moves.get_mut(&switch) {
            m.1 = m.1.saturating_sub(1);
        }
        self.start_move(switch);
    }

    /// Starts the next move of the phase on `switch`, if there is one.
    fn start_move(&mut self, switch: u16) {
        let Some(i) = self.moves.get_mut(&switch).and_then(|m| m.0.pop_front()) else { return };
        self.moves.get_mut(&switch).expect("present").1 += 1;
        let first = match self.phase {
            Phase::Evicting => self.evictions[i].2.next(None).map(|n| (n, Job::Evict(i))),
            _ => self.insertions[i].3.next(None).map(|n| (n, Job::Insert(i))),
        };
        match first {
            Ok((Next::Send(op), job)) => self.queue(switch, op, job),
            other => self.figures.errors.push(format!("a move's start: {other:?}")),
        }
    }

    /// A step failed: recorded (the end-of-run check fails on it); the move is abandoned.
    fn fail(&mut self, now: Nanos, why: String, sends: &mut Vec<Send>) {
        self.figures.errors.push(why);
        self.finish_job(now, sends);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::key_of_rank;
    use crate::program::{fill, Mode, TransKvProgram};
    use crate::wire::value_of;
    use pisadb_switch::{Switch, SwitchProfile};

    fn switches(h: &Hierarchy) -> Vec<Switch<TransKvProgram>> {
        (0..SWITCHES)
            .map(|id| {
                let mut s = Switch::new(SwitchProfile::tofino1(), TransKvProgram::new(Mode::Tso)).unwrap();
                for (&key, &(_, slot)) in h.cached.iter().filter(|(_, &(s, _))| s == id) {
                    fill(&mut s, key, slot, &value_of(u128::from(key), 0), 0).unwrap();
                }
                s
            })
            .collect()
    }

    /// Drives a move to its end on `switch`; `pending` is called before each T-TS poll
    /// after the first (a writer finishing); returns the number of polls.
    fn drive(
        switch: &mut Switch<TransKvProgram>,
        mut next: impl FnMut(Option<(ControlStatus, ControlResult)>) -> Result<Next, String>,
        mut between: impl FnMut(&mut Switch<TransKvProgram>),
    ) -> usize {
        let mut reply = None;
        let mut retries = 0;
        loop {
            match next(reply).unwrap() {
                Next::Send(op) => reply = Some(switch.apply_control(&op)),
                Next::Retry(op) => {
                    retries += 1;
                    between(switch);
                    reply = Some(switch.apply_control(&op));
                }
                Next::NeedNode => panic!("state supplied up front"),
                Next::Done => return retries,
            }
        }
    }

    fn entry(switch: &Switch<TransKvProgram>, key: u64) -> Option<u64> {
        switch.tables().get(CACHE_TABLE, key).unwrap()
    }

    /// The root cause of the flaky refresh-and-kill-the-controller real-mode test: a restored
    /// controller numbered its epochs from 1 again, and a storage node answers a report for an
    /// epoch at or below the last it saw with that old epoch's counts.
    #[test]
    fn a_restored_controller_numbers_its_epochs_above_every_epoch_before_its_crash() {
        let epoch_ns: Nanos = 20_000_000;
        let restart_ns = 50 * epoch_ns + 7;
        let setup = Hierarchy::new(20_000, 8).unwrap();
        let mut r = Refresher::restore(crate::layout::CONTROLLER, setup, &[], epoch_ns, 16);
        let mut now = r.first_tick(restart_ns);
        let mut reports = Vec::new();
        for _ in 0..4 {
            let mut sends = Vec::new();
            let next = r.tick(now, &mut sends);
            reports.extend(sends.iter().filter(|s| s.dst < crate::layout::NODES).filter_map(|s| {
                let (_, payload) = Frame::decode(&s.bytes).ok()?;
                Message::decode(payload).ok().filter(|m| m.status == Status::Report)
            }));
            if !reports.is_empty() {
                break;
            }
            now = next.expect("a restored controller ticks");
        }
        assert!(!reports.is_empty(), "the first epoch after recovery asks the nodes for reports");
        // Before the crash, at most 50 epochs can have started in 50 epoch lengths.
        assert!(reports.iter().all(|m| m.seq > 50), "epochs {:?}", reports.iter().map(|m| m.seq).collect::<Vec<_>>());
    }

    #[test]
    fn counters_give_hits_since_the_last_reading_and_misses_add_up() {
        let mut stats = HitStats::default();
        stats.record_counter(0, 3, 42, 10);
        stats.record_misses(7, 5);
        assert_eq!(stats.end_epoch(), BTreeMap::from([(42, 0), (7, 5)]), "a first reading is a baseline");
        stats.record_counter(0, 3, 42, 25);
        stats.record_counter(0, 3, 42, 25);
        assert_eq!(stats.end_epoch(), BTreeMap::from([(42, 15)]));
        stats.record_counter(0, 3, 42, 4);
        assert_eq!(stats.end_epoch()[&42], u64::from(u32::MAX - 25 + 5), "32-bit wrap");
        stats.record_counter(0, 3, 9, 100);
        assert_eq!(stats.end_epoch()[&9], 0, "a slot given to another key starts over");
    }

    #[test]
    fn the_plan_follows_a_shifted_hot_set_hottest_at_the_core_and_keeps_unmoved_slots() {
        let h = Hierarchy::new(20_000, 8).unwrap();
        // The new hot set: ranks far down the old popularity, hotter by rank.
        let hot: Vec<u64> =
            (5_000..5_400u64).map(|r| key_of_rank(r, 20_000)).filter(|k| !h.cached.contains_key(k)).collect();
        let counts: BTreeMap<u64, u64> = hot.iter().enumerate().map(|(i, &k)| (k, 10_000 - i as u64)).collect();
        let (placed, plans) = plan(&h, &counts);
        assert_eq!(placed.len(), h.cached.len(), "every switch stays full");
        let level = |key: u64, s: u16| levels_of(h.node_of(key)).iter().position(|&x| x == s).unwrap();
        let cold: Vec<&u64> = placed.keys().filter(|k| !counts.contains_key(k)).collect();
        assert!(cold.is_empty(), "cold keys {cold:?} stayed while hot keys waited");
        // Hottest first: the hottest key of each pod is at its core.
        for pod in 0..2 {
            let first = hot.iter().find(|&&k| crate::layout::pod_of(h.node_of(k)) == pod).unwrap();
            assert_eq!(level(*first, placed[first].0), 0, "pod {pod}'s hottest key at its core");
        }
        // Each switch's plan: evictions and insertions balance, slots reused, none twice.
        for (s, p) in plans.iter().enumerate() {
            assert_eq!(p.evict.len(), p.insert.len(), "switch {s}");
            let mut slots: Vec<u16> = p.insert.iter().map(|&(_, slot)| slot).collect();
            slots.sort_unstable();
            let mut freed: Vec<u16> = p.evict.iter().map(|&(_, slot)| slot).collect();
            freed.sort_unstable();
            assert_eq!(slots, freed, "switch {s} reuses exactly the freed slots");
        }
        // A quiet epoch moves nothing: every key keeps its switch and slot.
        let (same, plans) = plan(&h, &BTreeMap::new());
        assert_eq!(same, h.cached);
        assert!(plans.iter().all(|p| p.evict.is_empty() && p.insert.is_empty()));
        // The same counts again: nothing moves.
        let moved = Hierarchy { cached: placed.clone(), ..h.clone() };
        let (again, plans) = plan(&moved, &counts);
        assert_eq!(again, placed);
        assert!(plans.iter().all(|p| p.evict.is_empty() && p.insert.is_empty()));
    }

    #[test]
    fn a_whole_refresh_after_a_hot_set_shift_leaves_exactly_the_new_keys_cached_at_their_nodes_values() {
        use crate::store::StorageNode;
        use crate::wire::{Message, Op, Status};
        use pisadb_host::{Host, HostOutbox};
        let h = Hierarchy::new(20_000, 8).unwrap();
        let mut sw = switches(&h);
        let mut nodes: Vec<StorageNode> = (0..crate::layout::NODES).map(StorageNode::new).collect();
        for &key in h.cached.keys() {
            nodes[usize::from(h.node_of(key))].hand_off(key, 0).unwrap();
        }
        let hot: Vec<u64> = (5_000..5_400u64).map(|r| key_of_rank(r, 20_000)).collect();
        // The new hot keys were written at their nodes (uncached: the node's TSO decides).
        for (i, &key) in hot.iter().enumerate().filter(|&(_, k)| !h.cached.contains_key(k)) {
            let ts = 100 + 4 * i as u32;
            let msg = Message {
                ts,
                status: Status::Request,
                client: 16,
                seq: 1,
                ops: vec![Op::write(u128::from(key), value_of(u128::from(key), u64::from(ts)))],
            };
            let node = h.node_of(key);
            let mut out = HostOutbox::<StorageNode>::default();
            nodes[usize::from(node)].handle_datagram(0, &msg.datagram(16, node), &mut out);
        }
        // One epoch's statistics: the old keys' counters did not move, the new keys missed.
        let mut stats = HitStats::default();
        for (switch, key, slot, op) in HitStats::read_ops(&h.cached) {
            let (_, reply) = sw[usize::from(switch)].apply_control(&op);
            let ControlResult::Cell { lo, .. } = reply else { panic!("{reply:?}") };
            stats.record_counter(switch, slot, key, lo as u32);
        }
        for (i, &key) in hot.iter().enumerate() {
            stats.record_misses(key, 1_000 - i as u64);
        }
        let (placed, plans) = plan(&h, &stats.end_epoch());
        let mut moved = 0;
        for (s, p) in plans.iter().enumerate() {
            for &(key, slot) in &p.evict {
                let mut ev = Eviction::new(key, slot);
                drive(&mut sw[s], |r| ev.next(r), |_| {});
                nodes[usize::from(h.node_of(key))].take_back(key, ev.floor().unwrap());
            }
            for &(key, slot) in &p.insert {
                let mut ins = Insertion::new(key, slot);
                let Next::Send(reserve) = ins.next(None).unwrap() else { panic!() };
                let reply = sw[s].apply_control(&reserve);
                assert_eq!(ins.next(Some(reply)).unwrap(), Next::NeedNode);
                ins.supply(nodes[usize::from(h.node_of(key))].hand_off(key, 0).unwrap());
                drive(&mut sw[s], |r| ins.next(r), |_| {});
                moved += 1;
            }
        }
        assert!(moved > 0);
        let written = placed.keys().filter(|&&k| nodes[usize::from(h.node_of(k))].version(k) > 0).count();
        assert!(written > placed.len() / 2, "most new keys carry a version written at their node: {written}");
        assert!(placed.keys().all(|k| hot.contains(k)), "only hot keys are cached");
        for s in 0..SWITCHES {
            let on_switch = placed.iter().filter(|(_, &(x, _))| x == s).count();
            assert_eq!(
                sw[usize::from(s)].tables().len(CACHE_TABLE).unwrap(),
                on_switch,
                "switch {s}: the old keys are gone"
            );
        }
        for (&key, &(s, slot)) in &placed {
            let switch = &sw[usize::from(s)];
            assert_eq!(entry(switch, key), Some(entry_value(slot, FULL_BITMAP, slot)), "key {key} published");
            let cell = |r: u8| switch.registers().read(r, u32::from(slot)).unwrap().0;
            let mut value = [0u8; VALUE_BYTES];
            for w in 0..usize::from(VALUE_ARRAYS) {
                value[4 * w..4 * w + 4].copy_from_slice(&(cell(VALUE0 + w as u8) as u32).to_be_bytes());
            }
            let node = &nodes[usize::from(h.node_of(key))];
            assert_eq!(
                value,
                value_of(u128::from(key), node.version(key)),
                "key {key}: the cached value is the store's"
            );
            assert_eq!((cell(W_TS), cell(T_TS)), (node.version(key) as i64, 0));
        }
    }

    #[test]
    fn eviction_waits_for_the_pending_writer_and_yields_the_floor() {
        let h = Hierarchy::new(20_000, 8).unwrap();
        let mut sw = switches(&h);
        let (&key, &(s, slot)) = h.cached.iter().next().unwrap();
        let s = usize::from(s);
        sw[s].registers_mut().write(T_TS, u32::from(slot), 70, 0).unwrap();
        sw[s].registers_mut().write(R_TS, u32::from(slot), 90, 0).unwrap();
        let mut ev = Eviction::new(key, slot);
        let mut polls = 0;
        let retries = drive(
            &mut sw[s],
            |r| ev.next(r),
            |switch| {
                polls += 1;
                assert_eq!(entry(switch, key).map(|e| (e >> 16) as u8 & MIGRATING), Some(MIGRATING));
                if polls == 3 {
                    // The pending writer commits: W-TS 70, T-TS released.
                    switch.registers_mut().write(W_TS, u32::from(slot), 70, 0).unwrap();
                    switch.registers_mut().write(T_TS, u32::from(slot), 0, 0).unwrap();
                }
            },
        );
        assert_eq!(retries, 3, "polled until the writer cleared");
        assert_eq!(entry(&sw[s], key), None, "deleted");
        assert_eq!(ev.floor(), Some(90), "max(W-TS 70, R-TS 90)");
    }

    #[test]
    fn an_eviction_gives_up_on_a_writer_that_never_finishes_instead_of_polling_forever() {
        let h = Hierarchy::new(20_000, 8).unwrap();
        let mut sw = switches(&h);
        let (&key, &(s, slot)) = h.cached.iter().next().unwrap();
        let s = usize::from(s);
        sw[s].registers_mut().write(T_TS, u32::from(slot), 70, 0).unwrap();
        let mut ev = Eviction::new(key, slot);
        let mut reply = None;
        let mut polls = 0u32;
        let err = loop {
            match ev.next(reply) {
                Ok(Next::Send(op)) => reply = Some(sw[s].apply_control(&op)),
                Ok(Next::Retry(op)) => {
                    polls += 1;
                    reply = Some(sw[s].apply_control(&op));
                }
                Ok(other) => panic!("the writer never finishes, yet {other:?}"),
                Err(e) => break e,
            }
        };
        assert_eq!(polls, MAX_WRITER_POLLS, "polled up to the bound, then failed");
        assert!(err.contains("pending writer did not finish"), "{err}");
    }

    #[test]
    fn insertion_reserves_then_installs_floors_and_value_then_publishes() {
        let h = Hierarchy::new(20_000, 8).unwrap();
        let mut sw = switches(&h);
        let (&old, &(s, slot)) = h.cached.iter().next().unwrap();
        let s = usize::from(s);
        let mut ev = Eviction::new(old, slot);
        drive(&mut sw[s], |r| ev.next(r), |_| {});
        let new = (0..20_000).find(|&k| !h.cached.contains_key(&k) && h.node_of(k) == h.node_of(old)).unwrap();
        let mut ins = Insertion::new(new, slot);
        let first = ins.next(None).unwrap();
        let Next::Send(op) = first else { panic!("{first:?}") };
        let reply = sw[s].apply_control(&op);
        assert_eq!(ins.next(Some(reply)).unwrap(), Next::NeedNode);
        assert_eq!(entry(&sw[s], new).map(|e| (e >> 16) as u8), Some(FULL_BITMAP | MIGRATING), "reserved");
        ins.supply(NodeState { value: value_of(u128::from(new), 33), w_ts: 33, r_ts: 41 });
        drive(&mut sw[s], |r| ins.next(r), |_| {});
        assert_eq!(entry(&sw[s], new), Some(entry_value(slot, FULL_BITMAP, slot)), "published");
        let cell = |r: u8| sw[s].registers().read(r, u32::from(slot)).unwrap().0;
        assert_eq!((cell(W_TS), cell(R_TS), cell(T_TS)), (33, 41, 0));
        let mut value = [0u8; VALUE_BYTES];
        for w in 0..usize::from(VALUE_ARRAYS) {
            value[4 * w..4 * w + 4].copy_from_slice(&(cell(VALUE0 + w as u8) as u32).to_be_bytes());
        }
        assert_eq!(value, value_of(u128::from(new), 33), "the node's committed value");
    }
}
