//! Gotthard's switch program on the shared PISA model, in four modes.
//!
//! **State.** Every cacheable key has one cell: a 64-bit pair of 32-bit halves, `lo` the value
//! and `hi` the optimistic flag (1: the value was logged from a forwarded write, not yet seen
//! committed). The value is kept offset by `2^31` (`v ^ i32::MIN`, done on the packet's field,
//! not in the ALU), so a cell the switch never filled (all zeros) reads as [`EMPTY`] =
//! `i32::MIN`: the "empty" sentinel costs no bit. A client value equal to the sentinel is only
//! ever a miss, which is always safe (the request goes to the store).
//!
//! **Control plane.** The program holds no configuration of its own: the control plane
//! installs it in exact-match tables over the switch's control channel (`crate::control`).
//! The *mode* is the entry of key 0 in [`MODE_TABLE`] (no entry: `forward`, so an
//! unconfigured or freshly restarted switch only forwards). The *placement* of a cacheable key
//! is its entry in the key maps: key → (register array, index) packed by [`cell_value`]. A
//! table is looked up at most once per pass, so the key map is replicated per op slot
//! ([`KEY_MAP_TABLE0`] + slot, as the original's generated per-op tables), all in stage 0 with
//! the mode table; a packet resolves its mode and its ops' cells on its first pass and carries
//! them as metadata over its recirculations. A key without an entry (or with an entry naming
//! no cell of the program) is not cacheable: a miss, always safe. The control plane must not
//! map two keys to one cell (`crate::control` allocates them one by one).
//!
//! **Placement.** [`ARRAYS`] register arrays of [`ARRAY_ENTRIES`] cells, one per stage from
//! stage 1. A packet touches each array at most once per pass and in stage order, so a pass
//! serves at most one op per array, and a request whose ops share an array (two keys in one
//! array), or that needs a second phase, recirculates.
//!
//! **Requests** (no `FLAG_REPLY`):
//! - `forward`: forwarded untouched.
//! - `read-cache`: a request of only `READ`s is looked up; if every key is cached the switch
//!   answers `OK` with the cached values, else it forwards. Writes never invalidate: a read
//!   right behind a write sees the old value, as in the original.
//! - `early-abort` and `optimistic-abort`: the cells of the `VALUE` (compare) ops are read
//!   (phase *check*). Any miss: forward. Any compare that differs from the cell: the flags of
//!   the differing keys are read (phase *flag*) and the switch answers `OPTIMISTIC_ABORT` if a
//!   differing cell was optimistic, else `ABORT`, with every `VALUE` op rewritten to the
//!   switch's value. Otherwise, in `optimistic-abort`, every `WRITE` is logged (phase *log*:
//!   value := w, optimistic := 1) and the request forwarded. The common request
//!   `[VALUE(k, v), WRITE(k, w)]` does check and log in one conditional action of one pass
//!   (`check_and_log`), so a request right behind it cannot slip through between the two.
//!
//! **Store replies** (`FLAG_REPLY` without `FLAG_FROM_SWITCH`), in every mode but `forward`:
//! `ABORT` sets value := v, optimistic := 0 for its `VALUE` ops; `OK` sets value := v for its
//! `UPDATED` and `VALUE` ops where the cell is not optimistic. Then the reply goes on to the
//! client. Replies the switch made go straight to the client and change nothing.
//!
//! **Duplicates and retransmissions.** The switch cannot tell a retransmitted or duplicated
//! request from a new one, and does not try: a second copy of `[VALUE(k, v), WRITE(k, w)]`
//! finds the first copy's logged `w` and is answered `OPTIMISTIC_ABORT`, although the first
//! copy may commit. That abort is only advice to retry: the client retries under the same
//! request id, and the store, which commits an id at most once, answers the retry with the
//! first copy's commit (`store.rs`, `client.rs`). The cell may then hold a logged value the
//! store never applied (the retry's write); the next compare against it reaches the store,
//! whose `ABORT` resets the cell to the committed value — a cost of aborts, never of
//! correctness.
//!
//! The switch answers `OK` only to all-`READ` requests, so it never commits a write; its state
//! is soft (a restarted switch is empty and only costs misses). Phases of one packet are
//! separate passes, so another packet may change a cell in between; the store's own check
//! keeps that harmless.

use crate::wire::{Message, Op, OpType, Status, FLAG_FROM_SWITCH, FLAG_REPLY, MAX_OPS};
use pisadb_switch::alu::{Branch, CmpOp, Combine, Comparison, Expr, RegisterAction};
use pisadb_switch::registers::PassContext;
use pisadb_switch::{PassDecision, Program, ProgramSpec, Recirc, RegisterArraySpec, Reject, TableSpec};
use pisadb_wire::{Frame, Kind, FRAME_BYTES};
use serde::{Deserialize, Serialize};

/// Register arrays of cached values, one per stage from stage 1.
pub const ARRAYS: u8 = 8;
/// Cells per array (the P4DB build's array size).
pub const ARRAY_ENTRIES: u32 = 32_768;
/// The value an empty cell reads as.
pub const EMPTY: i32 = i32::MIN;

/// The table of the mode: key 0 → [`mode_code`].
pub const MODE_TABLE: u8 = 1;
/// The key map of op slot `i` is table `KEY_MAP_TABLE0 + i`: key → [`cell_value`].
pub const KEY_MAP_TABLE0: u8 = 2;
/// Keys each key map can hold.
pub const KEY_MAP_ENTRIES: u32 = 4096;

/// Action ids of every array, in declaration order.
const READ: u8 = 0;
const FLAG: u8 = 1;
const LOG: u8 = 2;
const FILL: u8 = 3;
const FILL_COMMITTED: u8 = 4;
const CHECK_AND_LOG: u8 = 5;

/// What the switch does with Gotthard traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Only forwards.
    Forward,
    /// Answers all-`READ` requests from cached values.
    ReadCache,
    /// Aborts doomed requests against cached values, logs nothing.
    EarlyAbort,
    /// Gotthard: aborts doomed requests and logs forwarded writes optimistically.
    OptimisticAbort,
}

/// The step a packet is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Read the cells of the ops that matter (compares, or reads in read-cache mode).
    Check,
    /// Read the optimistic flags of the mismatched compares.
    Flag,
    /// Log the writes.
    Log,
    /// Update the cells from a store reply.
    Update,
}

/// A Gotthard message in the switch with its per-packet metadata (not on the wire).
#[derive(Clone, Debug)]
pub struct Packet {
    /// The message, rewritten in place when the switch answers.
    pub msg: Message,
    /// The phase.
    phase: Phase,
    /// Ops of the phase already served (bit per op).
    done: u16,
    /// The cell value read per op in phase `Check` ([`EMPTY`] on a miss).
    seen: [i32; MAX_OPS],
    /// Compare ops that differ from the switch's value (bit per op).
    mismatched: u16,
    /// Whether a mismatched cell was optimistic.
    optimistic: bool,
    /// Passes taken.
    pub passes: u32,
    /// The mode, resolved on the first pass.
    mode: Mode,
    /// Per op: its cell (register id, index), resolved on the first pass; `None`: not cacheable.
    cells: [Option<(u8, u32)>; MAX_OPS],
}

/// The program; its mode and key placement come from the control plane's tables.
#[derive(Clone, Debug, Default)]
pub struct Gotthard;

/// A mode as the mode table holds it.
pub fn mode_code(mode: Mode) -> u64 {
    match mode {
        Mode::Forward => 0,
        Mode::ReadCache => 1,
        Mode::EarlyAbort => 2,
        Mode::OptimisticAbort => 3,
    }
}

fn mode_from(code: u64) -> Option<Mode> {
    [Mode::Forward, Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort].get(usize::try_from(code).ok()?).copied()
}

/// A cell (register id, index) as the key maps hold it: `register << 16 | index`.
pub fn cell_value(register: u8, index: u32) -> u64 {
    (u64::from(register) << 16) | u64::from(index)
}

/// The cell a key-map value names, if the program has it.
fn cell_from(value: u64) -> Option<(u8, u32)> {
    let register = u8::try_from(value >> 16).ok()?;
    let index = u32::try_from(value & 0xffff).ok()?;
    ((1..=ARRAYS).contains(&register) && index < ARRAY_ENTRIES).then_some((register, index))
}

fn stored(value: i32) -> i64 {
    i64::from(value ^ i32::MIN)
}

fn loaded(cell: i64) -> i32 {
    // The cell is 32 bits wide, sign-extended; its low 32 bits are the offset value.
    (cell as i32) ^ i32::MIN
}

fn actions() -> Vec<RegisterAction> {
    let commit_if_not_optimistic = RegisterAction::when(
        "fill_committed",
        vec![Comparison::new(Expr::HI, CmpOp::Eq)],
        Combine::All,
        Branch::set(Expr::IN1, Expr::LO),
        Branch::keep(Expr::LO),
    );
    vec![
        RegisterAction::always("read", Branch::keep(Expr::LO)),
        RegisterAction::always("flag", Branch::keep(Expr::HI)),
        RegisterAction::always("log", Branch { lo: Some(Expr::IN1), hi: Some(Expr::constant(1)), out: Expr::LO }),
        RegisterAction::always("fill", Branch { lo: Some(Expr::IN1), hi: Some(Expr::constant(0)), out: Expr::LO }),
        commit_if_not_optimistic,
        RegisterAction::when(
            "check_and_log",
            vec![Comparison::new(Expr::LO.minus(Expr::IN1), CmpOp::Eq)],
            Combine::All,
            Branch { lo: Some(Expr::IN2), hi: Some(Expr::constant(1)), out: Expr::LO },
            Branch::keep(Expr::LO),
        ),
    ]
}

impl Gotthard {
    /// The program (configured by the control plane's tables).
    pub fn new() -> Self {
        Gotthard
    }

    /// On the first pass: the mode from the mode table and each op's cell from its slot's key
    /// map (stage 0, before any array).
    fn resolve(ctx: &mut PassContext<'_>, p: &mut Packet) {
        // The tables are the program's own: a refused lookup is a bug, read as "not configured".
        p.mode = ctx.lookup(MODE_TABLE, 0).ok().flatten().and_then(mode_from).unwrap_or(Mode::Forward);
        if p.mode == Mode::Forward {
            return;
        }
        for (i, op) in p.msg.ops.iter().enumerate() {
            let table = KEY_MAP_TABLE0 + i as u8;
            p.cells[i] = ctx.lookup(table, u64::from(op.key)).ok().flatten().and_then(cell_from);
        }
    }

    /// Serves, in one pass, the not-yet-done ops `wanted` picks, at most one per array in stage
    /// order, with `action`; `seen` gets each output. Returns whether every wanted op is done.
    fn serve(ctx: &mut PassContext<'_>, p: &mut Packet, action: u8, wanted: impl Fn(usize, &Op) -> bool) -> bool {
        let mut used = 0u16;
        let mut order: Vec<(u8, usize)> = Vec::with_capacity(MAX_OPS);
        for (i, op) in p.msg.ops.iter().enumerate() {
            if p.done & (1 << i) != 0 || !wanted(i, op) {
                continue;
            }
            match p.cells[i] {
                Some((array, _)) if used & (1 << array) == 0 => {
                    used |= 1 << array;
                    order.push((array, i));
                }
                Some(_) => {}
                None => {
                    p.seen[i] = EMPTY;
                    p.done |= 1 << i;
                }
            }
        }
        order.sort_unstable();
        for (array, i) in order {
            let op = p.msg.ops[i];
            let index = p.cells[i].map_or(0, |(_, index)| index);
            // The arrays, actions and indexes are the program's own: an error is a bug.
            let out = ctx.execute(array, action, index, stored(op.value), 0).expect("a valid access");
            if action == FLAG {
                p.optimistic |= out != 0;
            } else {
                p.seen[i] = loaded(out);
            }
            p.done |= 1 << i;
        }
        p.msg.ops.iter().enumerate().all(|(i, op)| p.done & (1 << i) != 0 || !wanted(i, op))
    }

    fn next_phase(p: &mut Packet, phase: Phase) -> PassDecision {
        p.phase = phase;
        p.done = 0;
        PassDecision::Recirculate(Recirc::Waiting)
    }

    fn request(&self, ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        let all_reads = !p.msg.ops.is_empty() && p.msg.ops.iter().all(|o| o.op_type == OpType::Read);
        let checks = |_: usize, o: &Op| o.op_type == OpType::Value;
        match (p.mode, p.phase) {
            (Mode::Forward, _) => PassDecision::Forward,
            (Mode::ReadCache, _) if !all_reads => PassDecision::Forward,
            (Mode::ReadCache, _) => {
                if !Self::serve(ctx, p, READ, |_, _| true) {
                    return PassDecision::Recirculate(Recirc::Waiting);
                }
                if p.seen[..p.msg.ops.len()].contains(&EMPTY) {
                    return PassDecision::Forward;
                }
                for (i, op) in p.msg.ops.iter_mut().enumerate() {
                    *op = Op::value(op.key, p.seen[i]);
                }
                Self::answer(p, Status::Ok)
            }
            (Mode::OptimisticAbort, Phase::Check) if Self::single_increment(p).is_some() => self.check_and_log(ctx, p),
            (_, Phase::Check) => {
                if !Self::serve(ctx, p, READ, checks) {
                    return PassDecision::Recirculate(Recirc::Waiting);
                }
                let compares = || p.msg.ops.iter().enumerate().filter(|(_, o)| o.op_type == OpType::Value);
                if compares().any(|(i, _)| p.seen[i] == EMPTY) {
                    return PassDecision::Forward;
                }
                if compares().any(|(i, o)| p.seen[i] != o.value) {
                    for (i, op) in p.msg.ops.iter_mut().enumerate() {
                        if op.op_type == OpType::Value && p.seen[i] != op.value {
                            op.value = p.seen[i];
                            p.mismatched |= 1 << i;
                        }
                    }
                    return Self::next_phase(p, Phase::Flag);
                }
                match p.mode {
                    Mode::OptimisticAbort if p.msg.ops.iter().any(|o| o.op_type == OpType::Write) => {
                        Self::next_phase(p, Phase::Log)
                    }
                    _ => PassDecision::Forward,
                }
            }
            (_, Phase::Flag) => {
                let mismatched = p.mismatched;
                if !Self::serve(ctx, p, FLAG, |i, _| mismatched & (1 << i) != 0) {
                    return PassDecision::Recirculate(Recirc::Waiting);
                }
                let status = if p.optimistic { Status::OptimisticAbort } else { Status::Abort };
                Self::answer(p, status)
            }
            (_, Phase::Log) => {
                if Self::serve(ctx, p, LOG, |_, o| o.op_type == OpType::Write) {
                    PassDecision::Forward
                } else {
                    PassDecision::Recirculate(Recirc::Waiting)
                }
            }
            (_, Phase::Update) => PassDecision::Forward,
        }
    }

    /// `(array, index)` of a request that is exactly `[VALUE(k, v), WRITE(k, w)]` on a
    /// cacheable key: its compare and its log are one conditional action, in one pass, so no
    /// other request can be checked between them (the two-pass path would let a request right
    /// behind it through against the old value).
    fn single_increment(p: &Packet) -> Option<(u8, u32)> {
        match p.msg.ops.as_slice() {
            [c, w] if c.op_type == OpType::Value && w.op_type == OpType::Write && c.key == w.key => p.cells[0],
            _ => None,
        }
    }

    fn check_and_log(&self, ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        let Some((array, index)) = Self::single_increment(p) else { return PassDecision::Forward };
        let (compare, write) = (p.msg.ops[0], p.msg.ops[1]);
        // The array and index come from `cell_of`: an error is a bug of the program.
        let out = ctx.execute(array, CHECK_AND_LOG, index, stored(compare.value), stored(write.value));
        let seen = loaded(out.expect("a valid access"));
        if seen == EMPTY || seen == compare.value {
            // A miss (an empty cell never matches: nothing was logged) or a logged write.
            return PassDecision::Forward;
        }
        p.msg.ops[0].value = seen;
        p.mismatched = 1;
        Self::next_phase(p, Phase::Flag)
    }

    fn answer(p: &mut Packet, status: Status) -> PassDecision {
        p.msg.flags = FLAG_REPLY | FLAG_FROM_SWITCH;
        p.msg.status = status;
        PassDecision::Reply
    }

    fn store_reply(&self, ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        let (action, ops): (u8, fn(&Op) -> bool) = match p.msg.status {
            Status::Abort => (FILL, |o| o.op_type == OpType::Value),
            Status::Ok => (FILL_COMMITTED, |o| matches!(o.op_type, OpType::Value | OpType::Updated)),
            _ => return PassDecision::Forward,
        };
        p.phase = Phase::Update;
        if Self::serve(ctx, p, action, |_, o| ops(o)) {
            PassDecision::Forward
        } else {
            PassDecision::Recirculate(Recirc::Waiting)
        }
    }
}

impl Program for Gotthard {
    type Packet = Packet;

    fn spec(&self) -> ProgramSpec {
        let arrays = (1..=ARRAYS)
            .map(|id| RegisterArraySpec {
                id,
                name: format!("gotthard_values_{id}"),
                stage: id,
                entries: ARRAY_ENTRIES,
                width_bits: 32,
                pair: true,
                actions: actions(),
            })
            .collect();
        let table = |id: u8, name: String, key_bits: u32, value_bits: u32, entries: u32| TableSpec {
            id,
            name,
            stage: 0,
            key_bits,
            value_bits,
            entries,
        };
        let mut tables = vec![table(MODE_TABLE, "gotthard_mode".into(), 8, 8, 1)];
        for slot in 0..MAX_OPS as u8 {
            tables.push(table(KEY_MAP_TABLE0 + slot, format!("gotthard_key_map_{slot}"), 32, 24, KEY_MAP_ENTRIES));
        }
        ProgramSpec { name: "gotthard".into(), arrays, reserve_fast_recirc_port: false, tables }
    }

    fn kind(&self) -> Kind {
        crate::wire::KIND
    }

    fn admit(&self, frame: &Frame, payload: &[u8]) -> Result<Packet, Reject> {
        if frame.kind != crate::wire::KIND {
            return Err(Reject::rule("not_gotthard", format!("{:?}", frame.kind)));
        }
        let msg = Message::decode(payload).map_err(|e| Reject::rule(e.reason(), e.to_string()))?;
        Ok(Packet {
            msg,
            phase: Phase::Check,
            done: 0,
            seen: [EMPTY; MAX_OPS],
            mismatched: 0,
            optimistic: false,
            passes: 0,
            mode: Mode::Forward,
            cells: [None; MAX_OPS],
        })
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        p.passes += 1;
        if p.passes == 1 {
            Self::resolve(ctx, p);
        }
        let from_store = p.msg.is_reply() && p.msg.flags & FLAG_FROM_SWITCH == 0;
        match (p.mode, p.msg.is_reply()) {
            (Mode::Forward, _) => PassDecision::Forward,
            (_, true) if from_store => self.store_reply(ctx, p),
            (_, true) => PassDecision::Forward,
            (_, false) => self.request(ctx, p),
        }
    }

    fn encode(&self, p: &Packet, out: &mut Vec<u8>) {
        p.msg.encode(out);
    }

    fn wire_bytes(&self, p: &Packet) -> usize {
        FRAME_BYTES + p.msg.payload_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_switch::registers::RegisterFile;
    use pisadb_switch::{SwitchProfile, TableFile};

    const X: u32 = 1;

    /// A switch's registers and the program, driven pass by pass.
    struct Bench {
        program: Gotthard,
        registers: RegisterFile,
        tables: TableFile,
        gid: u64,
    }

    impl Bench {
        /// The program in `mode`, keys 0..64 placed as key `k` → array `k % 8 + 1`, index `k / 8`
        /// (so keys 8 apart share an array), as a control plane would install them.
        fn new(mode: Mode) -> Self {
            let program = Gotthard::new();
            let spec = program.spec();
            assert_eq!(spec.check(&SwitchProfile::tofino1()), Ok(()), "the program loads on Tofino 1");
            let mut tables = TableFile::new(&spec);
            tables.insert(MODE_TABLE, 0, mode_code(mode)).unwrap();
            for key in 0..64u32 {
                let cell = cell_value((key % u32::from(ARRAYS)) as u8 + 1, key / u32::from(ARRAYS));
                for slot in 0..MAX_OPS as u8 {
                    tables.insert(KEY_MAP_TABLE0 + slot, u64::from(key), cell).unwrap();
                }
            }
            Bench { registers: RegisterFile::new(&spec), tables, program, gid: 0 }
        }

        /// Runs `msg` through as many passes as it takes; the decision and the message as it leaves.
        fn run(&mut self, msg: Message) -> (PassDecision, Message, u32) {
            let frame = Frame { kind: crate::wire::KIND, src: 0, dst: 1 };
            let mut bytes = Vec::new();
            msg.encode(&mut bytes);
            let mut p = self.program.admit(&frame, &bytes).unwrap();
            loop {
                let mut ctx = PassContext::with_tables(&mut self.registers, &self.tables, &mut self.gid);
                let decision = self.program.execute_pass(&mut ctx, &mut p);
                assert!(p.passes <= 2 * MAX_OPS as u32 + 2, "bounded passes");
                if decision != PassDecision::Recirculate(Recirc::Waiting) {
                    return (decision, p.msg, p.passes);
                }
            }
        }

        fn store_reply(&mut self, status: Status, ops: Vec<Op>) -> PassDecision {
            let msg = Message { flags: FLAG_REPLY, client: 0, request: 0, attempt: 0, status, ops };
            self.run(msg).0
        }
    }

    fn increment(client: u32, believed: i32) -> Message {
        Message::request(client, 1, vec![Op::value(X, believed), Op::write(X, believed + 1)])
    }

    #[test]
    fn two_concurrent_increments_the_second_gets_an_optimistic_abort_with_the_first_value() {
        let mut sw = Bench::new(Mode::OptimisticAbort);
        sw.store_reply(Status::Ok, vec![Op::updated(X, 0)]);
        let (first, _, _) = sw.run(increment(1, 0));
        assert_eq!(first, PassDecision::Forward);
        let (second, reply, _) = sw.run(increment(2, 0));
        assert_eq!(second, PassDecision::Reply);
        assert_eq!(reply.status, Status::OptimisticAbort);
        assert_eq!(reply.flags, FLAG_REPLY | FLAG_FROM_SWITCH);
        assert_eq!(reply.ops[0], Op::value(X, 1));
    }

    #[test]
    fn an_increment_checks_and_logs_in_one_pass() {
        let mut sw = Bench::new(Mode::OptimisticAbort);
        sw.store_reply(Status::Ok, vec![Op::updated(X, 0)]);
        assert_eq!(sw.run(increment(1, 0)), (PassDecision::Forward, increment(1, 0), 1));
        let (d, reply, passes) = sw.run(increment(2, 0));
        assert_eq!((d, reply.status, passes), (PassDecision::Reply, Status::OptimisticAbort, 2), "check, then flag");
    }

    #[test]
    fn a_pipelined_chain_passes_the_switch() {
        let mut sw = Bench::new(Mode::OptimisticAbort);
        sw.store_reply(Status::Ok, vec![Op::updated(X, 0)]);
        for v in 0..5 {
            assert_eq!(sw.run(increment(v as u32, v)).0, PassDecision::Forward, "increment from {v}");
        }
        // The commits come back in order; the optimistic cell keeps the newest logged value.
        for v in 1..=5 {
            assert_eq!(sw.store_reply(Status::Ok, vec![Op::updated(X, v)]), PassDecision::Forward);
        }
        assert_eq!(sw.run(increment(9, 4)).1.status, Status::OptimisticAbort);
        assert_eq!(sw.run(increment(9, 5)).0, PassDecision::Forward);
    }

    #[test]
    fn early_abort_logs_nothing_and_answers_plain_abort() {
        let mut sw = Bench::new(Mode::EarlyAbort);
        sw.store_reply(Status::Abort, vec![Op::value(X, 3)]);
        assert_eq!(sw.run(increment(1, 3)).0, PassDecision::Forward);
        assert_eq!(sw.run(increment(2, 3)).0, PassDecision::Forward, "nothing was logged");
        let (d, reply, _) = sw.run(increment(2, 1));
        assert_eq!((d, reply.status, reply.ops[0]), (PassDecision::Reply, Status::Abort, Op::value(X, 3)));
    }

    #[test]
    fn a_miss_is_forwarded_and_a_store_abort_clears_the_optimistic_flag() {
        let mut sw = Bench::new(Mode::OptimisticAbort);
        assert_eq!(sw.run(increment(1, 0)).0, PassDecision::Forward, "empty cell: miss");
        sw.store_reply(Status::Abort, vec![Op::value(X, 7)]);
        assert_eq!(sw.run(increment(1, 7)).0, PassDecision::Forward);
        sw.store_reply(Status::Abort, vec![Op::value(X, 7)]);
        let (_, reply, _) = sw.run(increment(1, 0));
        assert_eq!((reply.status, reply.ops[0]), (Status::Abort, Op::value(X, 7)));
        // An OK does not overwrite an optimistic value.
        sw.run(increment(1, 7));
        sw.store_reply(Status::Ok, vec![Op::value(X, 2)]);
        assert_eq!(sw.run(increment(1, 2)).1.status, Status::OptimisticAbort);
    }

    #[test]
    fn read_cache_answers_reads_with_the_old_value_right_behind_a_write() {
        let mut sw = Bench::new(Mode::ReadCache);
        assert_eq!(sw.run(Message::request(1, 1, vec![Op::read(X)])).0, PassDecision::Forward, "miss");
        sw.store_reply(Status::Ok, vec![Op::value(X, 0)]);
        assert_eq!(sw.run(increment(1, 0)).0, PassDecision::Forward, "writes pass through");
        let (d, reply, _) = sw.run(Message::request(2, 1, vec![Op::read(X)]));
        assert_eq!((d, reply.status, reply.ops.clone()), (PassDecision::Reply, Status::Ok, vec![Op::value(X, 0)]));
        sw.store_reply(Status::Ok, vec![Op::updated(X, 1)]);
        assert_eq!(sw.run(Message::request(2, 2, vec![Op::read(X)])).1.ops, vec![Op::value(X, 1)]);
    }

    #[test]
    fn keys_in_one_array_take_more_passes_and_forward_mode_touches_nothing() {
        let mut sw = Bench::new(Mode::OptimisticAbort);
        let a = X;
        let b = X + u32::from(ARRAYS);
        sw.store_reply(Status::Ok, vec![Op::updated(a, 1), Op::updated(b, 2)]);
        let (d, _, passes) = sw.run(Message::request(1, 1, vec![Op::value(a, 1), Op::value(b, 2), Op::write(a, 5)]));
        assert_eq!(d, PassDecision::Forward);
        assert_eq!(passes, 3, "two check passes (same array) and one log pass");
        let mut fwd = Bench::new(Mode::Forward);
        assert_eq!(fwd.run(increment(1, 0)), (PassDecision::Forward, increment(1, 0), 1));
    }

    #[test]
    fn an_unconfigured_switch_forwards_and_an_unmapped_key_is_a_miss() {
        let mut bare = Bench::new(Mode::OptimisticAbort);
        bare.tables = TableFile::new(&bare.program.spec());
        bare.store_reply(Status::Ok, vec![Op::updated(X, 0)]);
        bare.run(increment(1, 0));
        assert_eq!(bare.run(increment(2, 0)).0, PassDecision::Forward, "no mode entry: forward, nothing logged");
        let mut sw = Bench::new(Mode::OptimisticAbort);
        let unmapped = 1_000;
        sw.store_reply(Status::Ok, vec![Op::updated(unmapped, 0)]);
        let twice = Message::request(1, 1, vec![Op::value(unmapped, 0), Op::write(unmapped, 1)]);
        sw.run(twice.clone());
        assert_eq!(sw.run(twice).0, PassDecision::Forward, "a key without a cell is never cached");
        // An entry naming no cell of the program (array 0) is not cacheable either.
        sw.tables.insert(KEY_MAP_TABLE0, u64::from(X), cell_value(0, 0)).unwrap();
        sw.tables.insert(KEY_MAP_TABLE0 + 1, u64::from(X), cell_value(0, 0)).unwrap();
        sw.run(increment(1, 0));
        assert_eq!(sw.run(increment(1, 0)).0, PassDecision::Forward);
    }

    #[test]
    fn the_mode_table_switches_the_mode_between_packets() {
        let mut sw = Bench::new(Mode::Forward);
        sw.store_reply(Status::Ok, vec![Op::updated(X, 0)]);
        assert_eq!(sw.run(Message::request(1, 1, vec![Op::read(X)])).0, PassDecision::Forward);
        sw.tables.insert(MODE_TABLE, 0, mode_code(Mode::ReadCache)).unwrap();
        sw.store_reply(Status::Ok, vec![Op::updated(X, 0)]);
        assert_eq!(sw.run(Message::request(1, 1, vec![Op::read(X)])).0, PassDecision::Reply);
    }

    #[test]
    fn the_switch_never_answers_ok_to_a_write() {
        for mode in [Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort] {
            let mut sw = Bench::new(mode);
            sw.store_reply(Status::Ok, vec![Op::updated(X, 0)]);
            for believed in -1..3 {
                let (d, reply, _) = sw.run(increment(1, believed));
                assert!(!(d == PassDecision::Reply && reply.status == Status::Ok), "{mode:?}");
            }
        }
    }

    proptest::proptest! {
        /// Whatever mix of requests and store replies the switch sees, in any mode, it answers
        /// only all-`READ` requests with `OK`, and it answers aborts only with the values its
        /// cells hold (never a made-up value).
        #[test]
        fn never_ok_to_a_write_under_any_mix(
            mode in 0u8..4,
            steps in proptest::collection::vec((0u8..4, 0u32..20, -2i32..4), 1..60),
        ) {
            let mode = [Mode::Forward, Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort][usize::from(mode)];
            let mut sw = Bench::new(mode);
            for (what, key, v) in steps {
                match what {
                    0 => {
                        let (d, reply, _) = sw.run(Message::request(1, 1, vec![Op::value(key, v), Op::write(key, v + 1)]));
                        proptest::prop_assert!(!(d == PassDecision::Reply && reply.status == Status::Ok));
                    }
                    1 => {
                        let (d, reply, _) = sw.run(Message::request(1, 1, vec![Op::read(key), Op::read(key + 8)]));
                        if d == PassDecision::Reply {
                            proptest::prop_assert_eq!(reply.status, Status::Ok);
                            proptest::prop_assert_eq!(mode, Mode::ReadCache);
                        }
                    }
                    2 => { sw.store_reply(Status::Ok, vec![Op::updated(key, v)]); }
                    _ => { sw.store_reply(Status::Abort, vec![Op::value(key, v)]); }
                }
            }
        }
    }
}
