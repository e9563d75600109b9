//! TransKV's switch program on the shared PISA model: a key-value cache whose entries carry
//! basic timestamp ordering (§IV-B/C, Fig. 4 and 6).
//!
//! ## State (one switch)
//!
//! - Stage 0: the exact-match **cache table** ([`CACHE_TABLE`]): key → (v_index, bitmap,
//!   ts_index) packed by [`entry_value`], up to [`CACHE_ENTRIES`] = 64K keys as in §V. The
//!   model's tables match at most 64-bit keys, so a 16-byte key with a non-zero high half is
//!   never cached (a miss: always safe).
//! - Stage 1: **W-TS** (write timestamp of the committed value), stage 2: **R-TS** (largest
//!   timestamp that read it), stage 3: **T-TS** (the pending accepted writer, 0: none) and the
//!   **hit counter** (§IV-D), each 64K × 32 bits at `ts_index`.
//! - Stages 4–6: the **value**, one 16-byte word per stage (Fig. 6b's three registers). A
//!   Tofino 1 stateful ALU outputs one 32-bit word, so a 16-byte slot is four 32-bit arrays of
//!   one stage ([`VALUE_ARRAYS`] = 12 in all), read or written at `v_index`. The bitmap says
//!   which of the three words hold the value; with the fixed 48-byte values of the workload
//!   the control plane always sets all three ([`FULL_BITMAP`]); a key whose bitmap is not full
//!   is never answered from the switch.
//!
//! - Stage 7: **CLAIM-AT** ([`CLAIM_AT`]), 64K × 32 bits at `ts_index`: when the pending claim
//!   was made, or last asked about (the lease, below).
//!
//! Everything fits Tofino 1: the table takes 64 of stage 0's 80 SRAM blocks, each 32-bit array
//! 16 blocks (stage 3: 32, stages 4–6: 64, stage 7: 16); [`TransKvProgram::spec`] is checked
//! at load.
//!
//! ## Basic TSO in the pipeline (our reading of the lost Figs. 7–8)
//!
//! One op is decided per pass: it needs the table and the three timestamp arrays, each usable
//! once per pass, so a transaction of n ops the switch caches takes n passes (recirculating).
//! For a transaction with timestamp t and an op on a cached key:
//!
//! - **read**: W-TS is read (stage 1); R-TS := max(R-TS, t) if t ≥ W-TS (stage 2, two
//!   comparisons); T-TS is read (stage 3). The read aborts if t < W-TS or a pending writer
//!   older than t holds the key (0 < T-TS < t). Else it is accepted and, its committed value
//!   being the one t must see, the value words are read into the op's value slot
//!   ([`FLAG_SERVED`]). *Choice*: when the read aborts only because of the older pending
//!   writer, R-TS has already been raised (stage 2 comes before stage 3). A higher R-TS only
//!   makes later writers older than t abort, so this is conservative, never unsafe; the
//!   alternative (T-TS before R-TS) would need a second pass for every write.
//! - **write**: W-TS and R-TS are read; the packet computes m = max(R-TS, W-TS) (PHV
//!   arithmetic), and T-TS := t if T-TS = 0 and t ≥ m (stage 3, two comparisons). The write
//!   is accepted if the claim succeeded, or if T-TS already is t (an earlier op of the same
//!   transaction). It is then forwarded to storage, which applies it.
//! - A transaction is accepted only if every op is. When op k aborts after earlier ops of the
//!   same packet claimed T-TS on this switch, the packet takes one **cleanup pass** per claim
//!   (T-TS := 0 if T-TS = t) and then goes back to its sender as `SwitchAborted`. The R-TS
//!   raised by its accepted reads stays (conservative, as above). Switches higher up the path
//!   clear their own claims when that reply passes them.
//! - `Committed` passing the switch installs each cached write: W-TS := max(W-TS, t) (its old
//!   value out), T-TS := 0 if it is t, and, if the old W-TS was below t, the value words.
//!   Installing is idempotent and never moves a key backwards, so a `Committed` seen twice
//!   (storage → controller → client) is harmless. `Aborted` and `SwitchAborted` clear T-TS
//!   where it is t. One pass per write op.
//! - Ops already decided by another switch (`FLAG_DECIDED`) are skipped; ops on keys this
//!   switch does not cache are left undecided for the switches below or the storage node.
//! - A transactional request whose ops are all reads served by switches is answered by the
//!   switch that served the last one (`Served`), without reaching storage; a controller's
//!   `Prepare` goes on to its node even then (the node's vote holds it, see `verdict`).
//! - **Non-transactional** (T-TS = 0) read requests are looked up without TSO; if every op
//!   hits, the switch answers; otherwise they go on to the storage node (§IV-A).
//!
//! - An op on an entry marked [`MIGRATING`] (the controller's cache refresh,
//!   `crate::refresh`) aborts the transaction at this switch without touching the entry's
//!   registers: no new claim or read can land on a key while it changes home.
//!
//! ## The lease of a claim
//!
//! A claim (T-TS) ends when the transaction's `Committed` or abort passes the switch. The
//! storage node decides each timestamp once and clients resolve unanswered attempts, so a lost
//! answer is answered again and still passes the switch — except in one window: a request
//! delayed past its own resolution (its node already decided it aborted, the answer already
//! went by) that claims a key here and is then lost, or whose node's `Aborted` is lost on the
//! way back. Nobody would ever answer for that claim again, and every later transaction on the
//! key would abort: the key would be wedged.
//!
//! So a program built [`TransKvProgram::with_lease`] stamps every claim with the packet's
//! ingress time (Tofino's global ingress timestamp, intrinsic metadata; the driver gives it,
//! [`PassContext::ingress_ns`], the program reads no clock) in CLAIM-AT, stage 7 (after T-TS
//! in stage 3, so the stamp depends on the claim's outcome). An op refused by *another*
//! transaction's claim (a write meeting T-TS ∉ {0, t}, a read meeting 0 < T-TS < t) probes the
//! claim's age in the same pass: if CLAIM-AT ≤ now − lease (one comparison; the subtraction is
//! PHV arithmetic), CLAIM-AT := now and the packet is marked. The transaction is refused as
//! before; before its answer leaves, one more pass sends a mirrored copy rewritten as a
//! `Lease` query for the claiming timestamp (`Forward`: from the request's sender to the
//! request's storage node, which holds every key of the request, so the claimed one too; a
//! TSO request always carries the ops of one node). The node answers with its decision:
//! `Committed` (the commit again: the switches on the way install it) or `Aborted` (deciding a
//! never-seen timestamp aborted for good, as a client's `Resolve` does; the switches release
//! the claim); a prepared share gets no answer, its coordinator ends it. The answer names no
//! client ([`crate::wire::LEASE_CLIENT`]): whoever it reaches ignores it.
//!
//! Safety does not depend on time: a claim is only ever released by the node's decision, as
//! before, so switch and node need no clock agreement; the lease only decides when someone
//! asks, once per lease per claim (the probe refreshes CLAIM-AT). A claim restored by a switch
//! rebuild has CLAIM-AT 0 and may be asked about at once, which is harmless. CLAIM-AT counts
//! microseconds in 31 bits (35 minutes); a wrap makes one query early or late, never wrong.
//! Cost: one array in a free stage, no pass for any packet that meets no expired claim, one
//! pass for the refused one that does.
//!
//! Everything else (`Coordinate`, `Voted`, `Commit`, `Resolve`, `Served`) is forwarded
//! untouched. A switch rebuilt after a crash (`crate::fuzz::rebuild_switch`) has its table
//! entries with an empty bitmap: it decides by TSO but answers no value, and the storage node
//! supplies the value as of the reader's timestamp.
//!
//! Timestamps are compared as 32-bit signed words by the ALU, so clients keep them below
//! 2^31 (`client.rs`).
//!
//! ## The transaction log (§IV-E)
//!
//! A program built with [`TransKvProgram::logging`] sends the controller a copy of every
//! transaction it accepted (status `Log`), as the paper's switches do for the controller's
//! log: the copy leaves as a mirrored packet while the packet takes one more pass, then goes
//! on as it would have.
//!
//! ## Modes
//!
//! [`Mode::Tso`] is TransKV. [`Mode::Forward`] only forwards (the Tranx-Coor and No-Cache
//! baselines). [`Mode::CacheOnly`] is TransKV-cache: reads are answered from the cache
//! without any timestamp check, writes pass through and `Committed` installs values.

use crate::wire::{Message, Op, OpType, Status, FLAG_DECIDED, FLAG_SERVED, LEASE_CLIENT, MAX_OPS, VALUE_BYTES};
use pisadb_core::Nanos;
use pisadb_switch::alu::{Branch, CmpOp, Combine, Comparison, Expr, RegisterAction};
use pisadb_switch::registers::PassContext;
use pisadb_switch::{Output, PassDecision, Program, ProgramSpec, Recirc, RegisterArraySpec, Reject, TableSpec};
use pisadb_wire::{Frame, Kind, FRAME_BYTES};
use serde::{Deserialize, Serialize};

/// Keys one switch caches (§V: a 64K-entry lookup table).
pub const CACHE_ENTRIES: u32 = 65_536;
/// The cache table: key → [`entry_value`].
pub const CACHE_TABLE: u8 = 1;
/// Register id of W-TS.
pub const W_TS: u8 = 1;
/// Register id of R-TS.
pub const R_TS: u8 = 2;
/// Register id of T-TS.
pub const T_TS: u8 = 3;
/// Register id of the hit counters.
pub const HITS: u8 = 4;
/// Register id of the first value array; value word `i` (32 bits) is `VALUE0 + i`.
pub const VALUE0: u8 = 5;
/// 32-bit value arrays: 48 bytes.
pub const VALUE_ARRAYS: u8 = (VALUE_BYTES / 4) as u8;
/// Register id of CLAIM-AT: when the key's pending claim was made, or last asked about, in
/// [`LEASE_UNIT_NS`] units of the switch's ingress time (stage 7; module docs, the lease).
pub const CLAIM_AT: u8 = VALUE0 + VALUE_ARRAYS;
/// Ingress nanoseconds per unit of CLAIM-AT (a microsecond: 2^31 units are 35 minutes).
pub const LEASE_UNIT_NS: Nanos = 1_000;
/// The bitmap of a value held in all three 16-byte words.
pub const FULL_BITMAP: u8 = 0b111;
/// The bitmap bit of an entry the controller is moving in or out of this switch
/// (`crate::refresh`): transactional ops on it abort here without touching its registers, and
/// it is never answered from the switch. Replies passing it still install and release.
pub const MIGRATING: u8 = 0x80;

// Action ids.
const READ: u8 = 0;
/// W-TS: max with in1, old out. R-TS: max with in1 if in1 ≥ in2, old out. T-TS: claim.
/// Values: write in1. Hits: count.
const UPDATE: u8 = 1;
/// T-TS: 0 if it is in1. CLAIM-AT: if it is at most in1 (the claim is older than the lease),
/// set it to in2 (now) and output 1, else output 0.
const RELEASE: u8 = 2;
/// CLAIM-AT's probe (see [`RELEASE`]).
const PROBE: u8 = RELEASE;

/// What the switch does with TransKV traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Only forwards.
    Forward,
    /// TransKV: cache and TSO.
    Tso,
    /// TransKV-cache: cache, no TSO.
    CacheOnly,
}

/// A cache entry as the table holds it: `v_index << 24 | bitmap << 16 | ts_index`.
pub fn entry_value(v_index: u16, bitmap: u8, ts_index: u16) -> u64 {
    (u64::from(v_index) << 24) | (u64::from(bitmap) << 16) | u64::from(ts_index)
}

/// A cache entry resolved by a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Index of the value words.
    pub v_index: u32,
    /// Which 16-byte words hold the value.
    pub bitmap: u8,
    /// Index of the timestamps and the hit counter.
    pub ts_index: u32,
}

fn entry_from(value: u64) -> Entry {
    Entry {
        v_index: ((value >> 24) & 0xffff) as u32,
        bitmap: ((value >> 16) & 0xff) as u8,
        ts_index: (value & 0xffff) as u32,
    }
}

/// What the packet is doing on this switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Deciding (or serving) ops, one per pass.
    Ops,
    /// Releasing this switch's claims of an aborted transaction, one per pass.
    Cleanup,
}

/// A TransKV message in the switch with its per-packet metadata (not on the wire).
#[derive(Clone, Debug)]
pub struct Packet {
    /// The message, rewritten in place.
    pub msg: Message,
    /// Passes taken on this switch.
    pub passes: u32,
    /// The phase.
    phase: Phase,
    /// The next op to look at.
    next: usize,
    /// Per op: its entry on this switch, once looked up.
    entries: [Option<Entry>; MAX_OPS],
    /// Ops whose T-TS claim this switch made (bit per op).
    claimed: u8,
    /// Whether an op aborted.
    aborted: bool,
    /// Whether this switch decided an op of it.
    decided_here: bool,
    /// After the pass that sent the log copy: the status to restore and the decision to take.
    after_log: Option<(Status, PassDecision)>,
    /// A claim met past its lease: the claiming timestamp and the op whose key it holds.
    query: Option<(u32, usize)>,
    /// After the pass that sent the lease query: the message to restore and the decision to
    /// take.
    after_query: Option<(Box<Message>, PassDecision)>,
}

/// The program; one per switch.
#[derive(Clone, Debug)]
pub struct TransKvProgram {
    /// The mode.
    pub mode: Mode,
    /// Where a copy of every transaction this switch accepts goes (the controller's
    /// transaction log, §IV-E), if anywhere.
    pub log_to: Option<u16>,
    /// The lease of a claim (module docs): a request that meets a claim older than this asks
    /// the key's node about it. 0: no lease (no query is ever sent).
    pub lease_ns: Nanos,
}

impl TransKvProgram {
    /// The program in `mode`, logging nothing.
    pub fn new(mode: Mode) -> Self {
        TransKvProgram { mode, log_to: None, lease_ns: 0 }
    }

    /// The program in `mode`, cloning every transaction it accepts to host `log_to`.
    pub fn logging(mode: Mode, log_to: u16) -> Self {
        TransKvProgram { mode, log_to: Some(log_to), lease_ns: 0 }
    }

    /// The same program with claims leased for `lease_ns` (0: no lease).
    pub fn with_lease(mut self, lease_ns: Nanos) -> Self {
        self.lease_ns = lease_ns;
        self
    }
}

fn ts_actions(kind: u8) -> Vec<RegisterAction> {
    let read = RegisterAction::always("read", Branch::keep(Expr::LO));
    let lo_below_in1 = Comparison::new(Expr::LO.minus(Expr::IN1), CmpOp::Lt);
    match kind {
        W_TS => vec![
            read,
            RegisterAction::when(
                "install_max",
                vec![lo_below_in1],
                Combine::All,
                Branch::set(Expr::IN1, Expr::LO),
                Branch::keep(Expr::LO),
            ),
        ],
        R_TS => vec![
            read,
            RegisterAction::when(
                "raise_if_not_late",
                vec![lo_below_in1, Comparison::new(Expr::IN1.minus(Expr::IN2), CmpOp::Ge)],
                Combine::All,
                Branch::set(Expr::IN1, Expr::LO),
                Branch::keep(Expr::LO),
            ),
        ],
        T_TS => vec![
            read,
            RegisterAction::when(
                "claim",
                vec![Comparison::new(Expr::LO, CmpOp::Eq), Comparison::new(Expr::IN1.minus(Expr::IN2), CmpOp::Ge)],
                Combine::All,
                Branch::set(Expr::IN1, Expr::LO),
                Branch::keep(Expr::LO),
            ),
            RegisterAction::when(
                "release",
                vec![Comparison::new(Expr::LO.minus(Expr::IN1), CmpOp::Eq)],
                Combine::All,
                Branch::set(Expr::constant(0), Expr::LO),
                Branch::keep(Expr::LO),
            ),
        ],
        HITS => vec![read, RegisterAction::always("count", Branch::set(Expr::LO.plus(Expr::constant(1)), Expr::LO))],
        CLAIM_AT => vec![
            read,
            RegisterAction::always("stamp", Branch::set(Expr::IN1, Expr::LO)),
            RegisterAction::when(
                "probe_if_expired",
                vec![Comparison::new(Expr::LO.minus(Expr::IN1), CmpOp::Le)],
                Combine::All,
                Branch::set(Expr::IN2, Expr::constant(1)),
                Branch::keep(Expr::constant(0)),
            ),
        ],
        _ => vec![read, RegisterAction::always("write", Branch::set(Expr::IN1, Expr::LO))],
    }
}

/// A 32-bit word of a value.
fn word(value: &[u8; VALUE_BYTES], i: usize) -> i64 {
    i64::from(u32::from_be_bytes([value[4 * i], value[4 * i + 1], value[4 * i + 2], value[4 * i + 3]]))
}

fn exec(ctx: &mut PassContext<'_>, register: u8, action: u8, index: u32, in1: i64, in2: i64) -> i64 {
    // Arrays, actions and indexes are the program's own, in stage order: an error is a bug.
    ctx.execute(register, action, index, in1, in2).expect("a valid access")
}

impl TransKvProgram {
    /// Looks op `i` up (the pass's one lookup); `None` on a miss.
    fn look_up(ctx: &mut PassContext<'_>, p: &mut Packet, i: usize) -> Option<Entry> {
        let key = p.msg.ops[i].key;
        let entry = u64::try_from(key)
            .ok()
            .and_then(|k| ctx.lookup(CACHE_TABLE, k).ok().flatten())
            .map(entry_from)
            .filter(|e| e.ts_index < CACHE_ENTRIES && e.v_index < CACHE_ENTRIES);
        p.entries[i] = entry;
        entry
    }

    /// Reads the value words of `e` into op `i`'s slot; false if the bitmap is not full.
    fn serve(ctx: &mut PassContext<'_>, p: &mut Packet, i: usize, e: Entry) -> bool {
        if e.bitmap != FULL_BITMAP {
            return false;
        }
        let op = &mut p.msg.ops[i];
        for w in 0..usize::from(VALUE_ARRAYS) {
            let out = exec(ctx, VALUE0 + w as u8, READ, e.v_index, 0, 0) as u32;
            op.value[4 * w..4 * w + 4].copy_from_slice(&out.to_be_bytes());
        }
        op.flags |= FLAG_SERVED;
        true
    }

    /// Basic TSO for op `i` (a hit on `e`): whether it is accepted. With a lease
    /// (`lease_ns` > 0), a claim made here is stamped with the ingress time, and an op refused
    /// by another transaction's claim probes that claim's age (module docs, the lease).
    fn decide(ctx: &mut PassContext<'_>, p: &mut Packet, i: usize, e: Entry, lease_ns: Nanos) -> bool {
        let t = i64::from(p.msg.ts);
        let op = p.msg.ops[i];
        let w = exec(ctx, W_TS, READ, e.ts_index, 0, 0);
        // The claim of another transaction that refused this op, if any.
        let (accepted, claimed, holder) = match op.op_type {
            OpType::Read => {
                exec(ctx, R_TS, UPDATE, e.ts_index, t, w);
                let pending = exec(ctx, T_TS, READ, e.ts_index, 0, 0);
                let held = pending != 0 && pending < t;
                (t >= w && !held, false, held.then_some(pending))
            }
            OpType::Write => {
                let r = exec(ctx, R_TS, READ, e.ts_index, 0, 0);
                let before = exec(ctx, T_TS, UPDATE, e.ts_index, t, r.max(w));
                let claimed = before == 0 && t >= r.max(w);
                if claimed {
                    p.claimed |= 1 << i;
                }
                (claimed || before == t, claimed, (before != 0 && before != t).then_some(before))
            }
        };
        exec(ctx, HITS, UPDATE, e.ts_index, 0, 0);
        if accepted {
            p.decided_here = true;
            p.msg.ops[i].flags |= FLAG_DECIDED;
            if op.op_type == OpType::Read {
                Self::serve(ctx, p, i, e);
            }
        }
        if lease_ns > 0 {
            Self::lease(ctx, p, i, e, lease_ns, claimed, holder);
        }
        accepted
    }

    /// Stage 7, CLAIM-AT: stamps a claim just made; for a claim `holder` that refused op `i`,
    /// probes its age and, once per lease, marks the packet to ask the key's node about it.
    /// Times are 31-bit words of [`LEASE_UNIT_NS`]: a wrap only makes one query early or late.
    fn lease(
        ctx: &mut PassContext<'_>,
        p: &mut Packet,
        i: usize,
        e: Entry,
        lease_ns: Nanos,
        claimed: bool,
        holder: Option<i64>,
    ) {
        let unit = |ns: Nanos| ((ns / LEASE_UNIT_NS) & 0x7fff_ffff) as i64;
        let now = unit(ctx.ingress_ns());
        if claimed {
            exec(ctx, CLAIM_AT, UPDATE, e.ts_index, now, 0);
        } else if let Some(holder) = holder {
            // The subtraction is PHV arithmetic; the ALU compares the cell with its result.
            let expired_before = now - ((lease_ns / LEASE_UNIT_NS).max(1) as i64);
            if exec(ctx, CLAIM_AT, PROBE, e.ts_index, expired_before, now) == 1 {
                p.query = Some((holder as u32, i));
            }
        }
    }

    /// An aborted request that met a claim past its lease: one more pass, whose mirrored copy
    /// leaves (as `Forward`: from the request's sender to its storage node, which holds every
    /// key of the request, so the claimed one too) rewritten as a `Lease` query for the
    /// claiming timestamp; the next pass restores the request and takes `decision`.
    fn lease_query(p: &mut Packet, decision: PassDecision) -> PassDecision {
        if decision != PassDecision::Reply || p.msg.status != Status::SwitchAborted {
            return decision;
        }
        let Some((holder, i)) = p.query.take() else { return decision };
        let query = Message {
            ts: holder,
            status: Status::Lease,
            client: LEASE_CLIENT,
            seq: 0,
            ops: vec![Op::write(p.msg.ops[i].key, [0; VALUE_BYTES])],
        };
        let request = std::mem::replace(&mut p.msg, query);
        p.after_query = Some((Box::new(request), decision));
        PassDecision::EmitAndRecirculate { copy: Output::Forward, recirc: Recirc::Waiting }
    }

    /// A transactional request in TSO mode: one op per pass, then the verdict.
    fn tso_request(ctx: &mut PassContext<'_>, p: &mut Packet, lease_ns: Nanos) -> PassDecision {
        if p.phase == Phase::Cleanup {
            return Self::cleanup(ctx, p);
        }
        let mut looked_up = false;
        while p.next < p.msg.ops.len() {
            let i = p.next;
            if p.msg.ops[i].decided() {
                p.next += 1;
                continue;
            }
            if looked_up {
                return PassDecision::Recirculate(Recirc::Waiting);
            }
            looked_up = true;
            p.next += 1;
            if let Some(e) = Self::look_up(ctx, p, i) {
                if e.bitmap & MIGRATING != 0 || !Self::decide(ctx, p, i, e, lease_ns) {
                    p.aborted = true;
                    return Self::cleanup(ctx, p);
                }
                if p.next < p.msg.ops.len() {
                    return PassDecision::Recirculate(Recirc::Waiting);
                }
            }
        }
        Self::verdict(p)
    }

    /// Releases one claim per pass, then answers the abort.
    fn cleanup(ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        if p.claimed == 0 {
            p.msg.status = Status::SwitchAborted;
            return PassDecision::Reply;
        }
        if p.phase == Phase::Cleanup {
            let i = p.claimed.trailing_zeros() as usize;
            p.claimed &= !(1 << i);
            if let Some(e) = p.entries[i] {
                exec(ctx, T_TS, RELEASE, e.ts_index, i64::from(p.msg.ts), 0);
            }
            if p.claimed == 0 {
                p.msg.status = Status::SwitchAborted;
                return PassDecision::Reply;
            }
        }
        p.phase = Phase::Cleanup;
        PassDecision::Recirculate(Recirc::Waiting)
    }

    /// All ops seen: answer a client's request if every op is a read served by a switch,
    /// else forward. A `Prepare` (the controller's share of a transaction over several nodes)
    /// always goes on to its node, whose vote then holds the share: a share answered here
    /// would leave no trace a restarted controller could resolve it by, while another share
    /// of the same transaction committed.
    fn verdict(p: &mut Packet) -> PassDecision {
        let all_served = p.msg.ops.iter().all(|o| o.op_type == OpType::Read && o.served());
        if all_served && p.msg.status == Status::Request {
            p.msg.status = Status::Served;
            PassDecision::Reply
        } else {
            PassDecision::Forward
        }
    }

    /// A read-only request answered from the cache without TSO (non-transactional, or any in
    /// cache-only mode): one lookup per pass.
    fn cached_read(ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        if p.msg.ops.iter().any(|o| o.op_type != OpType::Read) {
            return PassDecision::Forward;
        }
        let mut looked_up = false;
        while p.next < p.msg.ops.len() {
            let i = p.next;
            if p.msg.ops[i].served() {
                p.next += 1;
                continue;
            }
            if looked_up {
                return PassDecision::Recirculate(Recirc::Waiting);
            }
            looked_up = true;
            p.next += 1;
            if let Some(e) = Self::look_up(ctx, p, i) {
                exec(ctx, HITS, UPDATE, e.ts_index, 0, 0);
                Self::serve(ctx, p, i, e);
            }
        }
        Self::verdict(p)
    }

    /// `Committed`, `Aborted` or `SwitchAborted` on its way back: per cached write, one pass.
    fn reply(ctx: &mut PassContext<'_>, p: &mut Packet, commit: bool) -> PassDecision {
        let t = i64::from(p.msg.ts);
        let mut looked_up = false;
        while p.next < p.msg.ops.len() {
            let i = p.next;
            if p.msg.ops[i].op_type != OpType::Write {
                p.next += 1;
                continue;
            }
            if looked_up {
                return PassDecision::Recirculate(Recirc::Waiting);
            }
            looked_up = true;
            p.next += 1;
            let Some(e) = Self::look_up(ctx, p, i) else { continue };
            if commit {
                let before = exec(ctx, W_TS, UPDATE, e.ts_index, t, 0);
                exec(ctx, T_TS, RELEASE, e.ts_index, t, 0);
                if before < t && e.bitmap == FULL_BITMAP {
                    let value = p.msg.ops[i].value;
                    for w in 0..usize::from(VALUE_ARRAYS) {
                        exec(ctx, VALUE0 + w as u8, UPDATE, e.v_index, word(&value, w), 0);
                    }
                }
            } else {
                exec(ctx, T_TS, RELEASE, e.ts_index, t, 0);
            }
        }
        PassDecision::Forward
    }
}

impl TransKvProgram {
    /// A transaction this switch accepted (it decided an op and lets it go on, or answers it)
    /// sends a copy to the log first: one extra pass, the copy leaving as a mirror would
    /// (`EmitAndRecirculate`), its status `Log`; the next pass restores the status and takes
    /// `decision`.
    fn log_copy(&self, p: &mut Packet, decision: PassDecision) -> PassDecision {
        let accepted = matches!(decision, PassDecision::Forward)
            || (decision == PassDecision::Reply && p.msg.status == Status::Served);
        match self.log_to {
            Some(host) if accepted && p.decided_here => {
                p.after_log = Some((p.msg.status, decision));
                p.msg.status = Status::Log;
                PassDecision::EmitAndRecirculate { copy: Output::Node(host), recirc: Recirc::Waiting }
            }
            _ => decision,
        }
    }
}

impl Program for TransKvProgram {
    type Packet = Packet;

    fn spec(&self) -> ProgramSpec {
        let array = |id: u8, name: String, stage: u8| RegisterArraySpec {
            id,
            name,
            stage,
            entries: CACHE_ENTRIES,
            width_bits: 32,
            pair: false,
            actions: ts_actions(id),
        };
        let mut arrays = vec![
            array(W_TS, "transkv_w_ts".into(), 1),
            array(R_TS, "transkv_r_ts".into(), 2),
            array(T_TS, "transkv_t_ts".into(), 3),
            array(HITS, "transkv_hits".into(), 3),
        ];
        for w in 0..VALUE_ARRAYS {
            arrays.push(array(VALUE0 + w, format!("transkv_value_{w}"), 4 + w / 4));
        }
        arrays.push(array(CLAIM_AT, "transkv_claim_at".into(), 7));
        let table = TableSpec {
            id: CACHE_TABLE,
            name: "transkv_cache".into(),
            stage: 0,
            key_bits: 64,
            value_bits: 40,
            entries: CACHE_ENTRIES,
        };
        ProgramSpec { name: "transkv".into(), arrays, reserve_fast_recirc_port: false, tables: vec![table] }
    }

    fn kind(&self) -> Kind {
        crate::wire::KIND
    }

    fn admit(&self, frame: &Frame, payload: &[u8]) -> Result<Packet, Reject> {
        if frame.kind != crate::wire::KIND {
            return Err(Reject::rule("not_transkv", format!("{:?}", frame.kind)));
        }
        let msg = Message::decode(payload).map_err(|e| Reject::rule(e.reason(), e.to_string()))?;
        Ok(Packet {
            msg,
            passes: 0,
            phase: Phase::Ops,
            next: 0,
            entries: [None; MAX_OPS],
            claimed: 0,
            aborted: false,
            decided_here: false,
            after_log: None,
            query: None,
            after_query: None,
        })
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        p.passes += 1;
        let status = p.msg.status;
        match self.mode {
            Mode::Forward => PassDecision::Forward,
            _ if p.after_log.is_some() => {
                let (status, decision) = p.after_log.take().expect("checked");
                p.msg.status = status;
                decision
            }
            _ if p.after_query.is_some() => {
                let (request, decision) = p.after_query.take().expect("checked");
                p.msg = *request;
                decision
            }
            Mode::Tso if status.is_tso_request() && p.msg.ts != 0 => {
                let decision = Self::tso_request(ctx, p, self.lease_ns);
                let decision = Self::lease_query(p, decision);
                self.log_copy(p, decision)
            }
            Mode::Tso | Mode::CacheOnly if status == Status::Request => Self::cached_read(ctx, p),
            Mode::Tso | Mode::CacheOnly if status == Status::Committed => Self::reply(ctx, p, true),
            Mode::Tso if status.is_abort() => Self::reply(ctx, p, false),
            Mode::Tso | Mode::CacheOnly => PassDecision::Forward,
        }
    }

    fn encode(&self, p: &Packet, out: &mut Vec<u8>) {
        p.msg.encode(out);
    }

    fn wire_bytes(&self, p: &Packet) -> usize {
        FRAME_BYTES + p.msg.payload_bytes()
    }
}

/// Writes the cache entry of `key` into a switch's table and registers (the control plane's
/// fill, done by the driver at setup): slot `slot`, committed `value` written at `version`.
pub fn fill(
    switch: &mut pisadb_switch::Switch<TransKvProgram>,
    key: u64,
    slot: u16,
    value: &[u8; VALUE_BYTES],
    version: u32,
) -> Result<(), String> {
    switch.insert_entry(CACHE_TABLE, key, entry_value(slot, FULL_BITMAP, slot)).map_err(|e| e.to_string())?;
    let registers = switch.registers_mut();
    let index = u32::from(slot);
    registers.write(W_TS, index, i64::from(version), 0).map_err(|e| e.to_string())?;
    for w in 0..VALUE_ARRAYS {
        registers.write(VALUE0 + w, index, word(value, usize::from(w)), 0).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{value_of, Op, Value};
    use pisadb_switch::registers::RegisterFile;
    use pisadb_switch::{SwitchProfile, TableFile};
    use std::collections::BTreeMap;

    /// Keys 0..KEYS are cached at slot = key.
    const KEYS: u64 = 8;

    struct Bench {
        program: TransKvProgram,
        registers: RegisterFile,
        tables: TableFile,
        gid: u64,
        /// The ingress time of the next pass.
        now: Nanos,
        /// The mirrored copies the passes sent, as they left.
        copies: Vec<(Output, Message)>,
    }

    impl Bench {
        fn new(mode: Mode) -> Self {
            let program = TransKvProgram::new(mode);
            let spec = program.spec();
            assert_eq!(spec.check(&SwitchProfile::tofino1()), Ok(()), "the program loads on Tofino 1");
            let mut tables = TableFile::new(&spec);
            let mut registers = RegisterFile::new(&spec);
            for key in 0..KEYS {
                tables.insert(CACHE_TABLE, key, entry_value(key as u16, FULL_BITMAP, key as u16)).unwrap();
                let value = value_of(u128::from(key), 0);
                for w in 0..VALUE_ARRAYS {
                    registers.write(VALUE0 + w, key as u32, word(&value, usize::from(w)), 0).unwrap();
                }
            }
            Bench { program, registers, tables, gid: 0, now: 0, copies: Vec::new() }
        }

        fn run(&mut self, msg: Message) -> (PassDecision, Message, u32) {
            let frame = Frame { kind: crate::wire::KIND, src: 0, dst: 1 };
            let mut bytes = Vec::new();
            msg.encode(&mut bytes);
            let mut p = self.program.admit(&frame, &bytes).unwrap();
            loop {
                let mut ctx = PassContext::with_tables(&mut self.registers, &self.tables, &mut self.gid).at(self.now);
                let decision = self.program.execute_pass(&mut ctx, &mut p);
                assert!(p.passes <= 2 * MAX_OPS as u32 + 2, "bounded passes");
                match decision {
                    PassDecision::Recirculate(Recirc::Waiting) => {}
                    PassDecision::EmitAndRecirculate { copy, recirc: Recirc::Waiting } if self.program.lease_ns > 0 => {
                        self.copies.push((copy, p.msg.clone()));
                    }
                    _ => return (decision, p.msg, p.passes),
                }
            }
        }

        fn cell(&self, register: u8, key: u64) -> i64 {
            self.registers.read(register, key as u32).unwrap().0
        }
    }

    fn txn(ts: u32, status: Status, ops: Vec<Op>) -> Message {
        Message { ts, status, client: 1, seq: 1, ops }
    }

    fn w(key: u64, version: u64) -> Op {
        Op::write(u128::from(key), value_of(u128::from(key), version))
    }

    fn r(key: u64) -> Op {
        Op::read(u128::from(key))
    }

    #[test]
    fn a_cached_read_is_answered_with_the_committed_value_and_raises_r_ts() {
        let mut sw = Bench::new(Mode::Tso);
        let (d, reply, passes) = sw.run(txn(10, Status::Request, vec![r(3)]));
        assert_eq!((d, reply.status, passes), (PassDecision::Reply, Status::Served, 1));
        assert_eq!(reply.ops[0].value, value_of(3, 0));
        assert_eq!(sw.cell(R_TS, 3), 10);
    }

    #[test]
    fn a_write_claims_then_commit_installs_and_an_older_write_aborts() {
        let mut sw = Bench::new(Mode::Tso);
        let (d, fwd, _) = sw.run(txn(20, Status::Request, vec![w(2, 20)]));
        assert_eq!((d, fwd.ops[0].decided()), (PassDecision::Forward, true));
        assert_eq!(sw.cell(T_TS, 2), 20);
        // Another writer while one is pending aborts; so does a newer reader.
        assert_eq!(sw.run(txn(30, Status::Request, vec![w(2, 30)])).1.status, Status::SwitchAborted);
        assert_eq!(sw.run(txn(25, Status::Request, vec![r(2)])).1.status, Status::SwitchAborted);
        // An older reader is fine: it precedes the pending writer.
        assert_eq!(sw.run(txn(15, Status::Request, vec![r(2)])).1.ops[0].value, value_of(2, 0));
        sw.run(txn(20, Status::Committed, fwd.ops.clone()));
        assert_eq!((sw.cell(T_TS, 2), sw.cell(W_TS, 2)), (0, 20));
        assert_eq!(sw.run(txn(26, Status::Request, vec![r(2)])).1.ops[0].value, value_of(2, 20));
        // Too late: below W-TS (19) or below R-TS (25 read it).
        assert_eq!(sw.run(txn(19, Status::Request, vec![r(2)])).1.status, Status::SwitchAborted);
        assert_eq!(sw.run(txn(24, Status::Request, vec![w(2, 24)])).1.status, Status::SwitchAborted);
        // A second Committed of the same write changes nothing.
        sw.run(txn(20, Status::Committed, fwd.ops));
        assert_eq!(sw.cell(W_TS, 2), 20);
    }

    #[test]
    fn a_migrating_entry_aborts_new_ops_untouched_but_still_releases_its_writer() {
        let mut sw = Bench::new(Mode::Tso);
        let (_, fwd, _) = sw.run(txn(20, Status::Request, vec![w(2, 20)]));
        let marked = entry_value(2, FULL_BITMAP | MIGRATING, 2);
        sw.tables.insert(CACHE_TABLE, 2, marked).unwrap();
        let (d, reply, _) = sw.run(txn(30, Status::Request, vec![r(2)]));
        assert_eq!((d, reply.status), (PassDecision::Reply, Status::SwitchAborted));
        assert_eq!((sw.cell(R_TS, 2), sw.cell(T_TS, 2)), (0, 20), "the refused read raised nothing");
        assert_eq!(sw.run(txn(40, Status::Request, vec![w(2, 40)])).1.status, Status::SwitchAborted);
        // A non-transactional read is not answered from it: it goes on to the node.
        assert_eq!(sw.run(txn(0, Status::Request, vec![r(2)])).0, PassDecision::Forward);
        // The pending writer's commit still installs and releases.
        sw.run(txn(20, Status::Committed, fwd.ops));
        assert_eq!((sw.cell(T_TS, 2), sw.cell(W_TS, 2)), (0, 20));
    }

    /// The wedge the lease closes, with and without the lease: a client's `Resolve` of ts 20
    /// overtakes its request, so the node decides 20 aborted and the answer passes the
    /// switch with nothing to release; the request then claims key 2 here and is lost before
    /// the node. Every later writer of key 2 is refused by that claim, unless the lease makes
    /// one of them ask the node, whose `Aborted` releases it.
    #[test]
    fn a_claim_lost_after_its_client_resolved_is_freed_by_the_lease_and_wedges_without_it() {
        use crate::store::StorageNode;
        use pisadb_host::{Host, HostOutbox};
        const LEASE_NS: Nanos = 40_000_000;
        let to_node = |node: &mut StorageNode, msg: &Message| -> Vec<Message> {
            let mut out = HostOutbox::<StorageNode>::default();
            node.handle_datagram(0, &msg.datagram(16, 3), &mut out);
            out.sends.iter().map(|s| Message::open(&s.bytes).unwrap().1).collect()
        };
        for lease_ns in [0, LEASE_NS] {
            let mut sw = Bench::new(Mode::Tso);
            sw.program = TransKvProgram::new(Mode::Tso).with_lease(lease_ns);
            let mut node = StorageNode::new(3);
            for answer in to_node(&mut node, &txn(20, Status::Resolve, vec![w(2, 20)])) {
                assert_eq!(answer.status, Status::Aborted);
                sw.run(answer);
            }
            sw.now = 1_000_000;
            assert_eq!(sw.run(txn(20, Status::Request, vec![w(2, 20)])).0, PassDecision::Forward);
            assert_eq!(sw.cell(T_TS, 2), 20, "claimed, then lost on the way to the node");
            let mut committed = false;
            for k in 0..4u32 {
                sw.now += LEASE_NS / 2;
                let ts = 30 + k;
                let (d, reply, _) = sw.run(txn(ts, Status::Request, vec![w(2, u64::from(ts))]));
                if d == PassDecision::Forward {
                    // Accepted: its node commits it and the answer installs it here.
                    for answer in to_node(&mut node, &reply) {
                        sw.run(answer);
                    }
                    committed = true;
                    break;
                }
                assert_eq!(reply.status, Status::SwitchAborted);
                for (copy, query) in std::mem::take(&mut sw.copies) {
                    assert_eq!(
                        (copy, query.status, query.ts, query.client),
                        (Output::Forward, Status::Lease, 20, LEASE_CLIENT)
                    );
                    for answer in to_node(&mut node, &query) {
                        assert_eq!((answer.status, answer.ts), (Status::Aborted, 20));
                        sw.run(answer);
                    }
                }
            }
            if lease_ns == 0 {
                assert!(!committed && sw.cell(T_TS, 2) == 20, "without the lease the key stays wedged");
            } else {
                assert!(committed, "the lease freed the key");
                assert_eq!(
                    (sw.cell(T_TS, 2), sw.cell(W_TS, 2)),
                    (0, 32),
                    "asked once: the second writer after the lease won"
                );
            }
        }
    }

    #[test]
    fn a_claim_of_a_committed_writer_met_past_its_lease_is_installed_by_the_nodes_answer() {
        use crate::store::StorageNode;
        use pisadb_host::{Host, HostOutbox};
        let mut sw = Bench::new(Mode::Tso);
        sw.program = TransKvProgram::new(Mode::Tso).with_lease(1_000);
        let mut node = StorageNode::new(3);
        let (_, fwd, _) = sw.run(txn(20, Status::Request, vec![w(2, 20)]));
        // The node commits it; the answer is lost before the switch.
        let mut out = HostOutbox::<StorageNode>::default();
        node.handle_datagram(0, &fwd.datagram(16, 3), &mut out);
        assert_eq!(Message::open(&out.sends[0].bytes).unwrap().1.status, Status::Committed);
        sw.now = 5_000;
        // A reader after the writer meets the claim past its lease: refused, and asks.
        assert_eq!(sw.run(txn(25, Status::Request, vec![r(2)])).1.status, Status::SwitchAborted);
        let (_, query) = sw.copies.pop().expect("a lease query");
        let mut out = HostOutbox::<StorageNode>::default();
        node.handle_datagram(0, &query.datagram(16, 3), &mut out);
        let answer = Message::open(&out.sends[0].bytes).unwrap().1;
        assert_eq!((answer.status, answer.client), (Status::Committed, LEASE_CLIENT));
        sw.run(answer);
        assert_eq!((sw.cell(T_TS, 2), sw.cell(W_TS, 2)), (0, 20), "installed");
        assert_eq!(sw.run(txn(26, Status::Request, vec![r(2)])).1.ops[0].value, value_of(2, 20));
    }

    #[test]
    fn an_abort_after_a_claim_cleans_up_in_an_extra_pass() {
        let mut sw = Bench::new(Mode::Tso);
        sw.run(txn(50, Status::Request, vec![r(5)]));
        let (d, reply, passes) = sw.run(txn(40, Status::Request, vec![w(1, 40), w(5, 40)]));
        assert_eq!((d, reply.status), (PassDecision::Reply, Status::SwitchAborted));
        assert_eq!(passes, 3, "two ops, one cleanup");
        assert_eq!(sw.cell(T_TS, 1), 0, "the claim of op 1 was undone");
    }

    #[test]
    fn uncached_and_decided_ops_are_left_alone_and_aborts_release() {
        let mut sw = Bench::new(Mode::Tso);
        let mut decided = w(1, 7);
        decided.flags = FLAG_DECIDED;
        let (d, fwd, passes) = sw.run(txn(7, Status::Prepare, vec![decided, w(100, 7), w(2, 7)]));
        assert_eq!((d, passes), (PassDecision::Forward, 2));
        assert_eq!((sw.cell(T_TS, 1), sw.cell(T_TS, 2)), (0, 7));
        assert!(!fwd.ops[1].decided() && fwd.ops[2].decided());
        sw.run(txn(7, Status::Aborted, fwd.ops));
        assert_eq!(sw.cell(T_TS, 2), 0);
    }

    #[test]
    fn a_logging_switch_clones_what_it_accepts_to_the_log_then_goes_on() {
        let mut sw = Bench::new(Mode::Tso);
        sw.program = TransKvProgram::logging(Mode::Tso, 20);
        let frame = Frame { kind: crate::wire::KIND, src: 16, dst: 1 };
        let mut bytes = Vec::new();
        txn(7, Status::Request, vec![w(2, 7)]).encode(&mut bytes);
        let mut p = sw.program.admit(&frame, &bytes).unwrap();
        let mut pass = |p: &mut Packet| {
            let mut ctx = PassContext::with_tables(&mut sw.registers, &sw.tables, &mut sw.gid);
            sw.program.execute_pass(&mut ctx, p)
        };
        let first = pass(&mut p);
        assert_eq!(first, PassDecision::EmitAndRecirculate { copy: Output::Node(20), recirc: Recirc::Waiting });
        assert_eq!(p.msg.status, Status::Log, "the copy leaves as a log record");
        assert_eq!((pass(&mut p), p.msg.status), (PassDecision::Forward, Status::Request));
        // An abort is not logged; nor is a transaction the switch decided nothing of.
        assert_eq!(sw.run(txn(5, Status::Request, vec![w(2, 5)])).1.status, Status::SwitchAborted);
        assert_eq!(sw.run(txn(9, Status::Request, vec![w(300, 9)])).0, PassDecision::Forward);
    }

    #[test]
    fn non_transactional_reads_hit_or_go_on_and_forward_mode_touches_nothing() {
        let mut sw = Bench::new(Mode::Tso);
        assert_eq!(sw.run(txn(0, Status::Request, vec![r(1), r(2)])).1.status, Status::Served);
        assert_eq!(sw.cell(R_TS, 1), 0, "no TSO for non-transactional reads");
        assert_eq!(sw.run(txn(0, Status::Request, vec![r(1), r(200)])).0, PassDecision::Forward);
        let mut cache = Bench::new(Mode::CacheOnly);
        assert_eq!(cache.run(txn(9, Status::Request, vec![r(1)])).1.status, Status::Served);
        let mut fwd = Bench::new(Mode::Forward);
        assert_eq!(fwd.run(txn(9, Status::Request, vec![r(1)])).0, PassDecision::Forward);
    }

    /// Plain basic TSO over a map, with this program's two documented choices: an op is
    /// decided in order and a transaction aborts at its first late op, undoing its claims;
    /// a read not late against W-TS raises R-TS even if it then aborts on a pending writer.
    #[derive(Default)]
    struct Reference {
        keys: BTreeMap<u64, (i64, i64, i64, Value)>,
    }

    impl Reference {
        fn get(&mut self, k: u64) -> &mut (i64, i64, i64, Value) {
            self.keys.entry(k).or_insert((0, 0, 0, value_of(u128::from(k), 0)))
        }

        /// Some(values read) if accepted.
        fn request(&mut self, t: i64, ops: &[(bool, u64)]) -> Option<Vec<Value>> {
            let mut claimed = Vec::new();
            let mut values = Vec::new();
            for &(write, k) in ops {
                let (rts, wts, pending, value) = *self.get(k);
                let ok = if write {
                    if pending == 0 && t >= rts.max(wts) {
                        self.get(k).2 = t;
                        claimed.push(k);
                        true
                    } else {
                        pending == t
                    }
                } else {
                    if t >= wts && rts < t {
                        self.get(k).0 = t;
                    }
                    values.push(value);
                    t >= wts && !(pending != 0 && pending < t)
                };
                if !ok {
                    for k in claimed {
                        self.get(k).2 = 0;
                    }
                    return None;
                }
            }
            Some(values)
        }

        fn finish(&mut self, t: i64, ops: &[(bool, u64)], commit: bool) {
            for &(write, k) in ops.iter().filter(|o| o.0) {
                let _ = write;
                let e = self.get(k);
                if e.2 == t {
                    e.2 = 0;
                }
                if commit && e.1 < t {
                    e.1 = t;
                    e.3 = value_of(u128::from(k), t as u64);
                }
            }
        }
    }

    proptest::proptest! {
        /// Any mix of transactions (1–3 ops over 8 cached keys, random timestamps) and of
        /// commits and aborts of accepted ones: the pipeline accepts exactly what the
        /// reference TSO accepts, answers reads with the same values, and ends with the same
        /// timestamps.
        #[test]
        fn the_pipeline_decides_as_the_reference_tso(
            steps in proptest::collection::vec(
                (1i64..60, proptest::collection::vec((proptest::bool::ANY, 0u64..KEYS), 1..4), 0u8..3),
                1..40),
        ) {
            let mut sw = Bench::new(Mode::Tso);
            let mut model = Reference::default();
            let mut pending: Vec<(i64, Vec<(bool, u64)>)> = Vec::new();
            for (t, ops, finish) in steps {
                // Finish an accepted writer first, sometimes.
                if finish > 0 && !pending.is_empty() {
                    let (pt, pops) = pending.remove(0);
                    let commit = finish == 1;
                    let wire: Vec<Op> = pops.iter().map(|&(wr, k)| if wr { w(k, pt as u64) } else { r(k) }).collect();
                    sw.run(txn(pt as u32, if commit { Status::Committed } else { Status::Aborted }, wire));
                    model.finish(pt, &pops, commit);
                }
                if pending.iter().any(|(pt, _)| *pt == t) {
                    continue;
                }
                let wire: Vec<Op> = ops.iter().map(|&(wr, k)| if wr { w(k, t as u64) } else { r(k) }).collect();
                let (d, reply, _) = sw.run(txn(t as u32, Status::Request, wire));
                let expected = model.request(t, &ops);
                let accepted = d != PassDecision::Reply || reply.status == Status::Served;
                proptest::prop_assert_eq!(accepted, expected.is_some(), "t={} ops={:?}", t, ops);
                if let Some(values) = expected {
                    let got: Vec<Value> = reply.ops.iter().filter(|o| o.op_type == OpType::Read).map(|o| o.value).collect();
                    proptest::prop_assert_eq!(got, values);
                    if ops.iter().any(|o| o.0) {
                        pending.push((t, ops));
                    }
                }
            }
            for (k, (rts, wts, p, _)) in &model.keys {
                proptest::prop_assert_eq!((sw.cell(R_TS, *k), sw.cell(W_TS, *k), sw.cell(T_TS, *k)), (*rts, *wts, *p));
            }
        }
    }
}
