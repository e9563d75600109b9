//! The P4DB transaction engine (paper §5), as a program on the pipeline model.
//!
//! ## Memory
//!
//! Stage 0 holds the *pipeline lock*: one pair register whose halves are the two locks of the
//! 2-bit lock of Listing 1 (`left` guards the first half of the data stages, `right` the
//! second). The data stages that follow hold the hot tuples, `arrays_per_stage` register arrays
//! of `entries_per_array` 32-bit cells each (the paper's prototype: ~20 arrays of 32768
//! entries). Data arrays never share stage 0 with the lock, because a stage cannot gate one of
//! its stateful ALUs on another's output: the lock verdict must exist before the first data
//! access. Every tuple operation of [`pisadb_core::OpKind`] is a register action on the data
//! arrays, built from the generic stateful ALU; a test checks each against the reference
//! semantics [`pisadb_core::Op::apply`].
//!
//! ## A transaction's journey
//!
//! A node builds one packet per hot transaction ([`P4dbEngine::packet_for`]): it plans the
//! passes from the data layout and marks their ends; the switch checks the plan when the packet
//! arrives ([`P4dbEngine::check_plan`]) and rejects one that breaks a rule.
//!
//! - *Single-pass* (§5.1): lock-free. In stage 0 the packet checks that the locks it needs (the
//!   halves its stages fall in) are free; if so it executes all its instructions in this pass
//!   and is stamped the next global transaction id (GID), which is its place in the serial
//!   order. If a multi-pass transaction holds one of its locks, it recirculates on a waiting
//!   port and tries again.
//! - *Multi-pass* (§5.2): in its first pass the packet tries to take its locks; failing that it
//!   waits like a single-pass one. Holding them, it is stamped its GID, executes the first
//!   pass's instructions, and recirculates on the fast port (§5.3) for the next pass. At the
//!   start of its last pass it releases the locks: nothing behind it can overtake it, so a
//!   transaction admitted right after sees all of its writes.
//!
//! Why this is serializable in GID order: a single-pass transaction executes entirely at its
//! entry slot, so passes are atomic (see [`pisadb_switch::pipeline`]). A multi-pass transaction `T`
//! holds the locks of every stage it touches from its first pass to the entry of its last, so
//! any transaction admitted in between touches none of `T`'s arrays, commutes with `T`, and
//! can be ordered after it; one that needs `T`'s arrays waits until `T`'s last pass has
//! entered and then follows it stage by stage. GIDs are stamped at admission (lock
//! acquisition for multi-pass), which is such an order. The property tests check exactly this
//! against a serial execution in GID order.
//!
//! ## What the prototype measured, as options
//!
//! The paper's prototype (DataManagementLab/p4db) differs from the design above in three
//! places, each an option here so its figures can be reproduced next to the real protocol:
//!
//! - [`P4dbConfig::first_pass_only`] (the `ideal` layout): every headline figure ran with
//!   `SWITCH_NO_CONFLICT`: each packet is sent single-pass without locks, and the switch's
//!   parser stops at the first instruction marked as starting a new pass, so only the first
//!   pass executes and the rest of the transaction is silently not done. The engine does the
//!   same and counts what it did not execute. It is an upper bound on what any register
//!   layout can give, not a protocol.
//! - [`FineLocks::Parity`]: Fig. 15c's "fine-grained locking" gives each multi-pass
//!   transaction the half its first key's parity picks, whatever stages it touches, so two
//!   transactions on the same arrays can both hold "their" half: not serializable, and printed
//!   as such wherever it runs. Single-pass packets then wait while either half is held (they
//!   cannot know which half guards their arrays; the prototype does the same).
//! - [`RecirculationModel::TwoPortFifo`]: the prototype recirculates on two ports only, one
//!   shared slow port and one fast port for lock holders, served first come, first served;
//!   PisaDB's default spreads waiting packets over every port and serves long-waiting ones
//!   first.
//!
//! ## Where the result goes
//!
//! A finished transaction goes back to its sender, or, when its header names a multicast group,
//! to every member of the group: a warm transaction's participants commit their cold part on
//! it, with no extra round trip (§6.2, Fig. 10). The control plane installs one group per set
//! of nodes, numbered by the set's bitmask ([`multicast_group`]).
//!
//! ## At most once, over a lossy network
//!
//! A node sends a switch transaction again when no answer came in time, so the switch may see
//! a transaction twice: the first copy or its answer was lost, or it is still recirculating.
//! Executing it twice would apply its writes twice. The engine therefore keeps, per worker
//! slot (the transaction id's node and worker), the last transaction it admitted and, once
//! that one finished, its answer (GID, results, accumulator): a copy of the same transaction
//! gets the stored answer again without touching the data, a copy of one still in flight is
//! dropped (its answer is on its way), and a copy of an older one is dropped as stale. Workers
//! run one transaction at a time, so one entry per slot suffices. In hardware this is a
//! first-stage register array of last sequence numbers plus one result array per instruction
//! position; for 8 nodes x 64 workers that is about 70 KiB of the ~120 Mbit of SRAM. The
//! answers are also what a rebuilt switch restores from the nodes' logs (see
//! [`P4dbEngine::remember`]). The paper assumes a lossless fabric and does not need this.
//!
//! ## Constrained writes
//!
//! A write that must keep a value non-negative (SmallBank) is the `AddIfNonNegative` action:
//! its condition is one comparison in the stateful ALU, so the constraint costs no extra pass
//! and needs no rollback (§5.1).

use crate::wire::p4db::{Instruction, LockPair, TxnPacket, INSTRUCTION_BYTES, MAX_INSTRUCTIONS};
use pisadb_core::{AccOut, OpKind, TupleKey, Txn, RESTOCK_AMOUNT, RESTOCK_THRESHOLD};
use pisadb_p4db_layout::{plan_passes, ArraySlot, Layout, LayoutTarget};
use pisadb_switch::alu::{Branch, CmpOp, Combine, Comparison, Expr, RegisterAction};
use pisadb_switch::profile::SwitchProfile;
use pisadb_switch::program::{PassDecision, Program, ProgramSpec, Recirc, RegisterArraySpec, Reject};
use pisadb_switch::registers::PassContext;
use pisadb_wire::{Frame, Kind, FRAME_BYTES, SWITCH_ID};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Register id of the pipeline lock in stage 0.
pub const LOCK_REGISTER: u8 = 63;
const TRY_LOCK: u8 = 0;
const UNLOCK: u8 = 1;
const CHECK_FREE: u8 = 2;

/// How the engine uses the switch; every figure is a knob of the ablations (paper Fig. 15c).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct P4dbConfig {
    /// First stage holding data arrays (stage 0 holds the lock).
    pub first_data_stage: u8,
    /// Number of consecutive stages holding data arrays.
    pub data_stages: u8,
    /// Data arrays per data stage.
    pub arrays_per_stage: u8,
    /// Cells per data array.
    pub entries_per_array: u32,
    /// Which lock halves a multi-pass transaction takes (§5.3).
    #[serde(default)]
    pub fine_locks: FineLocks,
    /// Lock holders recirculate on a port of their own (§5.3).
    pub fast_recirculation: bool,
    /// How the recirculation ports are set up and served.
    #[serde(default)]
    pub recirculation: RecirculationModel,
    /// The prototype's `SWITCH_NO_CONFLICT` runs (the `ideal` layout): every packet is one
    /// pass with no locks, and the instructions after the first pass's end are not executed
    /// (counted in [`P4dbEngine::first_pass_dropped_ops`]). An upper bound, not a protocol.
    #[serde(default)]
    pub first_pass_only: bool,
    /// A single-pass packet waits while either lock half is held, whatever stages it touches
    /// (the prototype's `is_locked` check); otherwise only for the halves it needs. Always so
    /// under [`FineLocks::Parity`] and [`FineLocks::WholePipeline`].
    #[serde(default)]
    pub single_pass_waits_for_either_half: bool,
}

/// Which halves of the pipeline lock a multi-pass transaction takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FineLocks {
    /// Both halves, always: every multi-pass transaction locks the whole pipeline.
    WholePipeline,
    /// The halves its stages fall in (`left` guards the first half of the data stages,
    /// `right` the second): P4DB's fine-grained locking (§5.3), serializable.
    #[default]
    Stages,
    /// One half chosen by the parity of the transaction's first key (even: `left`), whatever
    /// stages it touches: what the prototype measured as "fine-grained locking" in Fig. 15c
    /// (`YCSB_OPTI_TEST`). NOT serializable: two transactions touching the same stages can
    /// hold different halves at once. Single-pass packets wait while either half is held, as
    /// in the prototype.
    Parity,
}

impl FineLocks {
    /// Whether the rule keeps transactions serializable.
    pub fn is_serializable(self) -> bool {
        self != FineLocks::Parity
    }

    /// The warning to print wherever a run with this rule is reported, if any.
    pub fn warning(self) -> Option<&'static str> {
        (!self.is_serializable()).then_some(
            "warning: --fine-locks parity is the prototype's Fig. 15c measurement (one lock half by the \
             parity of the first key), not a serializable protocol: two multi-pass transactions on the \
             same stages can run at once",
        )
    }
}

/// How a switch's recirculation ports are set up and served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecirculationModel {
    /// Every recirculation port of the profile: one reserved for lock holders (with fast
    /// recirculation), the others shared round-robin by waiting packets; each port's queue is
    /// served by priority class, the packet's recirculation count (§5.3).
    #[default]
    Priority,
    /// The prototype's: two recirculation paths only, one slow port shared by waiting packets
    /// (and by lock holders without fast recirculation) and one fast port for lock holders;
    /// each queue first come, first served.
    TwoPortFifo,
}

impl P4dbConfig {
    /// The prototype's shape on `profile`: 32768-entry 32-bit arrays, two per stage, in every
    /// stage but the lock's and the last (kept for forwarding), with both optimizations on.
    /// On Tofino 1: 10 data stages, 20 arrays, 655,360 hot tuples.
    pub fn for_profile(profile: &SwitchProfile) -> Self {
        P4dbConfig {
            first_data_stage: 1,
            data_stages: profile.stages_per_pipe.saturating_sub(2).max(1),
            arrays_per_stage: 2,
            entries_per_array: 32_768,
            fine_locks: FineLocks::Stages,
            fast_recirculation: true,
            recirculation: RecirculationModel::Priority,
            first_pass_only: false,
            single_pass_waits_for_either_half: false,
        }
    }

    /// The data arrays as the layout algorithm sees them, in (stage, register) order.
    pub fn layout_target(&self, profile: &SwitchProfile) -> LayoutTarget {
        let arrays = self
            .data_arrays()
            .map(|(register, stage)| ArraySlot { stage, register, capacity: self.entries_per_array, width_bits: 32 })
            .collect();
        LayoutTarget { arrays, sram_block_bits: profile.sram_block_bits }
    }

    /// The switch `profile` as this configuration uses it: under
    /// [`RecirculationModel::TwoPortFifo`] only two recirculation ports (one when there is no
    /// fast recirculation, whose port then stays unused), whatever the hardware has.
    pub fn switch_profile(&self, profile: &SwitchProfile) -> SwitchProfile {
        let mut profile = profile.clone();
        if self.recirculation == RecirculationModel::TwoPortFifo {
            profile.recirc_ports_per_pipe = if self.fast_recirculation { 2 } else { 1 };
        }
        profile
    }

    /// `(register id, stage)` of every data array; ids count from 1 in stage order.
    fn data_arrays(&self) -> impl Iterator<Item = (u8, u8)> + '_ {
        pisadb_switch::program::array_grid(self.first_data_stage, self.data_stages, self.arrays_per_stage)
    }

    /// The locks a transaction touching `stage` needs (a single-pass one checks they are free).
    fn lock_for_stage(&self, stage: u8) -> LockPair {
        if self.fine_locks != FineLocks::Stages {
            return LockPair::BOTH;
        }
        let left = stage < self.first_data_stage + self.data_stages.div_ceil(2);
        LockPair { left, right: !left }
    }
}

/// Number of register actions on the data arrays (one per [`OpKind`]).
pub const DATA_ACTIONS: u8 = 6;

/// The register action number of each operation kind on the data arrays.
pub fn action_for(kind: OpKind) -> u8 {
    match kind {
        OpKind::Read => 0,
        OpKind::Write => 1,
        OpKind::Add => 2,
        OpKind::AddIfNonNegative => 3,
        OpKind::WriteCheck => 4,
        OpKind::Restock => 5,
    }
}

/// The data arrays' register actions, in [`action_for`] order. Inputs: `in1` is the
/// instruction's data, `in2` the accumulator when the instruction reads it (else 0).
pub fn data_actions() -> Vec<RegisterAction> {
    let operand = Expr::IN1.plus(Expr::IN2);
    let sum = Expr::LO.plus(operand);
    vec![
        RegisterAction::always("read", Branch::keep(Expr::LO)),
        RegisterAction::always("write", Branch::set(operand, Expr::LO)),
        RegisterAction::always("add", Branch::set(sum, Expr::LO)),
        RegisterAction::when(
            "add_if_non_negative",
            vec![Comparison::new(sum, CmpOp::Ge)],
            Combine::All,
            Branch::set(sum, operand),
            Branch::keep(Expr::constant(0)),
        ),
        RegisterAction::when(
            "write_check",
            vec![Comparison::new(Expr::LO.plus(Expr::IN2).minus(Expr::IN1), CmpOp::Lt)],
            Combine::All,
            Branch::set(Expr::LO.minus(Expr::IN1).plus(Expr::constant(-1)), Expr::LO),
            Branch::set(Expr::LO.minus(Expr::IN1), Expr::LO),
        ),
        RegisterAction::when(
            "restock",
            vec![Comparison::new(Expr::LO.minus(operand).plus(Expr::constant(-RESTOCK_THRESHOLD)), CmpOp::Ge)],
            Combine::All,
            Branch::set(Expr::LO.minus(operand), Expr::LO),
            Branch::set(Expr::LO.minus(operand).plus(Expr::constant(RESTOCK_AMOUNT)), Expr::LO),
        ),
    ]
}

/// The 2-bit lock of Listing 1, on a pair register: `lo` is the left lock, `hi` the right;
/// `in1`/`in2` say which of them the packet wants.
fn lock_actions() -> Vec<RegisterAction> {
    let taken = |half: Expr, want: Expr| Comparison::new(half.plus(want).plus(Expr::constant(-2)), CmpOp::Eq);
    let conflicts = vec![taken(Expr::LO, Expr::IN1), taken(Expr::HI, Expr::IN2)];
    let acquire =
        Branch { lo: Some(Expr::LO.plus(Expr::IN1)), hi: Some(Expr::HI.plus(Expr::IN2)), out: Expr::constant(1) };
    let release =
        Branch { lo: Some(Expr::LO.minus(Expr::IN1)), hi: Some(Expr::HI.minus(Expr::IN2)), out: Expr::constant(0) };
    let busy = Branch::keep(Expr::constant(0));
    vec![
        RegisterAction::when("try_lock", conflicts.clone(), Combine::Any, busy, acquire),
        RegisterAction::always("unlock", release),
        RegisterAction::when("check_free", conflicts, Combine::Any, busy, Branch::keep(Expr::constant(1))),
    ]
}

/// A switch transaction inside the switch.
#[derive(Clone, Debug)]
pub struct P4dbPacket {
    /// The packet as received; results overwrite instruction data as they are produced.
    pub txn: TxnPacket,
    /// Index of the first instruction of the next pass.
    cursor: usize,
    /// Passes left to run, including the next.
    passes_left: usize,
    /// Whether the packet holds its locks (multi-pass, between first and last pass).
    holds_locks: bool,
}

/// The P4DB engine program.
#[derive(Clone, Debug)]
pub struct P4dbEngine {
    config: P4dbConfig,
    /// Stage of each data register id; `u8::MAX` where the id is not a data array.
    stage_of: [u8; 256],
    /// Per worker slot (`txn_id >> 32`): the last transaction admitted and its answer once it
    /// finished (see "At most once" above).
    last: BTreeMap<u32, LastTxn>,
    /// Copies answered from `last` without executing.
    pub replayed: u64,
    /// With [`P4dbConfig::first_pass_only`]: instructions not executed because they lay
    /// beyond their packet's first pass (the prototype's parser stops there).
    pub first_pass_dropped_ops: u64,
    /// With [`P4dbConfig::first_pass_only`]: transactions that lost at least one instruction.
    pub first_pass_truncated_txns: u64,
    /// This switch's incarnation, stamped on every answer (see the wire format).
    epoch: u16,
}

/// The last transaction a worker slot got admitted. The entry and its results buffer are
/// reused by the slot's next transaction: no allocation per transaction in the pipeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct LastTxn {
    /// Its full id.
    txn_id: u64,
    /// Whether its last pass ran (then `answer` holds its answer).
    finished: bool,
    /// Its answer, once finished.
    answer: Answer,
}

/// What a finished switch transaction answered: enough to answer a copy again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Its global transaction id.
    pub gid: u64,
    /// Each instruction's result, in packet order.
    pub results: Vec<i32>,
    /// The accumulator at the end.
    pub acc: i32,
}

/// Why a transaction cannot be sent to the switch as one packet.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum BuildError {
    /// A tuple is not on the switch.
    #[error("tuple {0:?} is not on the switch")]
    NotOnSwitch(TupleKey),
    /// A value does not fit the 32-bit registers.
    #[error("operand {0} does not fit a 32-bit register")]
    ValueOutOfRange(i64),
    /// Too many operations for one packet.
    #[error("{0} operations, but a packet carries at most {MAX_INSTRUCTIONS}")]
    TooManyOps(usize),
}

impl P4dbEngine {
    /// The engine with `config`.
    pub fn new(config: P4dbConfig) -> Self {
        let stage_of = pisadb_switch::program::stage_map(config.data_arrays());
        P4dbEngine {
            config,
            stage_of,
            last: BTreeMap::new(),
            replayed: 0,
            first_pass_dropped_ops: 0,
            first_pass_truncated_txns: 0,
            epoch: 0,
        }
    }

    /// Sets the epoch a switch rebuilt from the logs answers with: nodes then drop answers the
    /// crashed incarnation sent, which the rebuild may have decided differently.
    pub fn set_epoch(&mut self, epoch: u16) {
        self.epoch = epoch;
    }

    /// Records that transaction `txn_id` finished with `answer`, so a copy of it is answered
    /// without executing: what the switch learns again from the nodes' logs when it is rebuilt.
    pub fn remember(&mut self, txn_id: u64, answer: Answer) {
        let slot = (txn_id >> 32) as u32;
        let newer = self.last.get(&slot).is_some_and(|l| is_older(txn_id, l.txn_id));
        if !newer {
            self.last.insert(slot, LastTxn { txn_id, finished: true, answer });
        }
    }

    /// Notes that `txn_id` was admitted (stamped its GID): copies of it are dropped until it
    /// finishes.
    fn admitted(&mut self, txn_id: u64) {
        let last = self.last.entry((txn_id >> 32) as u32).or_default();
        (last.txn_id, last.finished) = (txn_id, false);
    }

    /// Stores the answer of admitted transaction `txn` as it leaves, in its slot's buffer.
    fn answered(&mut self, txn: &TxnPacket) {
        let Some(last) = self.last.get_mut(&((txn.txn_id >> 32) as u32)).filter(|l| l.txn_id == txn.txn_id) else {
            return;
        };
        last.answer.results.clear();
        last.answer.results.extend(txn.instrs.iter().map(|i| i.data));
        (last.answer.gid, last.answer.acc, last.finished) = (txn.gid, txn.acc, true);
    }

    /// Forgets what slot `txn_id` remembers about it (a rebuild undoing a trial execution).
    pub fn forget(&mut self, txn_id: u64) {
        let slot = (txn_id >> 32) as u32;
        if self.last.get(&slot).is_some_and(|l| l.txn_id == txn_id) {
            self.last.remove(&slot);
        }
    }

    /// How a copy of `txn_id` arriving now is treated: `None` to execute it, or the decision.
    fn check_duplicate(&mut self, p: &mut P4dbPacket) -> Option<PassDecision> {
        let id = p.txn.txn_id;
        let last = self.last.get(&((id >> 32) as u32))?;
        if is_older(id, last.txn_id) {
            return Some(PassDecision::Drop("stale_duplicate"));
        }
        if last.txn_id != id {
            return None;
        }
        if !last.finished {
            return Some(PassDecision::Drop("duplicate_in_flight"));
        }
        let answer = &last.answer;
        if answer.results.len() != p.txn.instrs.len() {
            return Some(PassDecision::Drop("duplicate_mismatch"));
        }
        for (instr, &r) in p.txn.instrs.iter_mut().zip(&answer.results) {
            instr.data = r;
        }
        (p.txn.gid, p.txn.acc) = (answer.gid, answer.acc);
        self.replayed += 1;
        Some(finished(&p.txn))
    }

    /// The engine's configuration.
    pub fn config(&self) -> &P4dbConfig {
        &self.config
    }

    /// The locks a transaction touching `stages` needs.
    pub fn locks_for(&self, stages: impl IntoIterator<Item = u8>) -> LockPair {
        stages.into_iter().fold(LockPair::default(), |acc, s| acc.union(self.config.lock_for_stage(s)))
    }

    /// Builds the packet for a hot transaction under `layout`: plans its passes, marks their
    /// ends, and sets the multi-pass flag and locks. Also returns, for each instruction, the
    /// index of the operation it carries (results come back in instruction order).
    ///
    /// With [`P4dbConfig::first_pass_only`] the packet still carries every pass, as the
    /// prototype's did, but is flagged single-pass and takes no locks: the switch runs its first
    /// pass only. With [`FineLocks::Parity`] a multi-pass packet takes the half its first
    /// operation's key picks ([`parity_lock`]).
    pub fn packet_for(&self, txn: &Txn, layout: &Layout, txn_id: u64) -> Result<(TxnPacket, Vec<usize>), BuildError> {
        if txn.ops.len() > MAX_INSTRUCTIONS {
            return Err(BuildError::TooManyOps(txn.ops.len()));
        }
        let plan = plan_passes(txn, layout).map_err(|e| BuildError::NotOnSwitch(e.key))?;
        let mut instrs = Vec::with_capacity(txn.ops.len());
        let mut order = Vec::with_capacity(txn.ops.len());
        let mut stages = Vec::new();
        for pass in &plan.passes {
            for (k, &i) in pass.iter().enumerate() {
                let op = &txn.ops[i];
                let place = layout.get(op.key).ok_or(BuildError::NotOnSwitch(op.key))?;
                let data = i32::try_from(op.data).map_err(|_| BuildError::ValueOutOfRange(op.data))?;
                stages.push(place.stage);
                order.push(i);
                instrs.push(Instruction {
                    register: place.register,
                    action: action_for(op.kind),
                    acc_in: op.acc_in,
                    acc_out: op.acc_out,
                    index: place.index as u16,
                    data,
                    end_of_pass: k + 1 == pass.len(),
                });
            }
        }
        let is_multipass = plan.passes.len() > 1 && !self.config.first_pass_only;
        let locks = match txn.ops.first() {
            _ if self.config.first_pass_only => LockPair::default(),
            Some(first) if is_multipass && self.config.fine_locks == FineLocks::Parity => parity_lock(first.key),
            _ if !is_multipass && self.config.single_pass_waits_for_either_half => LockPair::BOTH,
            _ => self.locks_for(stages),
        };
        let packet = TxnPacket { txn_id, is_multipass, locks, instrs, ..TxnPacket::default() };
        Ok((packet, order))
    }

    /// Checks a packet's plan against the pipeline's rules and returns its number of passes.
    ///
    /// Per pass: instructions in non-decreasing stage order; each array at most once; an
    /// instruction that reads the accumulator strictly after (in a later stage than) any that
    /// wrote it in the same pass, and one that writes it strictly after any that touched it
    /// (the accumulator is one PHV field: a stage cannot both produce and consume it). Across
    /// the packet: only data arrays, known actions, indices in range; the multi-pass flag
    /// matches the plan; the locks cover every stage touched. With
    /// [`P4dbConfig::first_pass_only`] a packet is single-pass whatever its plan and needs no
    /// locks; with [`FineLocks::Parity`] a multi-pass packet holds exactly one half.
    pub fn check_plan(&self, pkt: &TxnPacket) -> Result<usize, Reject> {
        let actions = DATA_ACTIONS;
        let mut passes = 0;
        let mut needed = LockPair::default();
        let mut pass = PassCheck::default();
        for (n, instr) in pkt.instrs.iter().enumerate() {
            let stage = self.stage_of[usize::from(instr.register)];
            if stage == u8::MAX {
                return Err(Reject::rule(
                    "unknown_register",
                    format!("instruction {n}: register {} holds no data", instr.register),
                ));
            }
            if instr.action >= actions {
                return Err(Reject::rule("unknown_action", format!("instruction {n}: action {}", instr.action)));
            }
            if u32::from(instr.index) >= self.config.entries_per_array {
                return Err(Reject::rule("index_out_of_range", format!("instruction {n}: index {}", instr.index)));
            }
            pass.admit(n, instr, stage)?;
            needed = needed.union(self.config.lock_for_stage(stage));
            if instr.end_of_pass {
                passes += 1;
                pass = PassCheck::default();
            }
        }
        if self.config.first_pass_only {
            if pkt.is_multipass {
                return Err(Reject::rule("multipass_flag", "first-pass-only packets are single-pass".to_string()));
            }
            return Ok(passes);
        }
        if pkt.is_multipass != (passes > 1) {
            return Err(Reject::rule(
                "multipass_flag",
                format!("plan has {passes} passes but is_multipass = {}", pkt.is_multipass),
            ));
        }
        if pkt.is_multipass && self.config.fine_locks == FineLocks::Parity {
            if pkt.locks.left == pkt.locks.right {
                return Err(Reject::rule("parity_lock", format!("needs one half, packet has {:?}", pkt.locks)));
            }
            return Ok(passes);
        }
        if !pkt.locks.covers(needed) {
            return Err(Reject::rule("locks_do_not_cover", format!("needs {needed:?}, packet has {:?}", pkt.locks)));
        }
        Ok(passes)
    }

    fn run_instructions(
        &self,
        ctx: &mut PassContext<'_>,
        p: &mut P4dbPacket,
    ) -> Result<(), pisadb_switch::registers::AccessError> {
        while let Some(instr) = p.txn.instrs.get_mut(p.cursor) {
            let acc_term = if instr.acc_in { i64::from(p.txn.acc) } else { 0 };
            let out =
                ctx.execute(instr.register, instr.action, u32::from(instr.index), i64::from(instr.data), acc_term)?;
            let out = out as i32;
            instr.data = out;
            p.txn.acc = match instr.acc_out {
                AccOut::None => p.txn.acc,
                AccOut::Set => out,
                AccOut::Add => p.txn.acc.wrapping_add(out),
                AccOut::Sub => p.txn.acc.wrapping_sub(out),
            };
            p.cursor += 1;
            if instr.end_of_pass {
                break;
            }
        }
        p.passes_left -= 1;
        Ok(())
    }
}

/// The lock half [`FineLocks::Parity`] gives a multi-pass transaction whose first operation is
/// on `key`: `left` for an even row, `right` for an odd one (the prototype's `YCSB_OPTI_TEST`:
/// `ops[0].id % 2 == 0 ? {1, 0} : {0, 1}`).
pub fn parity_lock(key: TupleKey) -> LockPair {
    let left = key.row.is_multiple_of(2);
    LockPair { left, right: !left }
}

/// Where a finished transaction's answer goes.
fn finished(txn: &TxnPacket) -> PassDecision {
    match txn.multicast {
        0 => PassDecision::Reply,
        group => PassDecision::Multicast(group),
    }
}

/// Whether transaction id `a` is an earlier attempt of the same worker than `b` (sequence
/// numbers in the low 32 bits, compared with wrap-around).
fn is_older(a: u64, b: u64) -> bool {
    (a >> 32) == (b >> 32) && ((a as u32).wrapping_sub(b as u32) as i32) < 0
}

/// Running state of the per-pass checks of [`P4dbEngine::check_plan`].
#[derive(Default)]
struct PassCheck {
    stage: u8,
    touched: u64,
    acc_written_at: Option<u8>,
    acc_touched_at: Option<u8>,
}

impl PassCheck {
    fn admit(&mut self, n: usize, instr: &Instruction, stage: u8) -> Result<(), Reject> {
        if stage < self.stage {
            return Err(Reject::rule(
                "stage_order",
                format!("instruction {n}: stage {stage} after stage {} in one pass", self.stage),
            ));
        }
        let bit = 1u64 << instr.register;
        if self.touched & bit != 0 {
            return Err(Reject::rule(
                "array_twice_in_pass",
                format!("instruction {n}: register {} again in one pass", instr.register),
            ));
        }
        let writes = instr.acc_out != AccOut::None;
        let same_stage = |at: Option<u8>| at.is_some_and(|s| s >= stage);
        if (instr.acc_in && same_stage(self.acc_written_at)) || (writes && same_stage(self.acc_touched_at)) {
            return Err(Reject::rule(
                "accumulator_same_stage",
                format!("instruction {n}: accumulator produced and used in stage {stage}"),
            ));
        }
        self.stage = stage;
        self.touched |= bit;
        if writes {
            self.acc_written_at = Some(stage);
        }
        if writes || instr.acc_in {
            self.acc_touched_at = Some(stage);
        }
        Ok(())
    }
}

impl Program for P4dbEngine {
    type Packet = P4dbPacket;

    fn spec(&self) -> ProgramSpec {
        let lock = RegisterArraySpec {
            id: LOCK_REGISTER,
            name: "pipeline_lock".into(),
            stage: 0,
            entries: 1,
            width_bits: 8,
            pair: true,
            actions: lock_actions(),
        };
        let data = self.config.data_arrays().map(|(id, stage)| RegisterArraySpec {
            id,
            name: format!("hot_{id}"),
            stage,
            entries: self.config.entries_per_array,
            width_bits: 32,
            pair: false,
            actions: data_actions(),
        });
        ProgramSpec {
            name: "p4db".into(),
            arrays: std::iter::once(lock).chain(data).collect(),
            reserve_fast_recirc_port: self.config.fast_recirculation,
            tables: Vec::new(),
        }
    }

    fn kind(&self) -> Kind {
        crate::wire::TXN_KIND
    }

    fn admit(&self, frame: &Frame, payload: &[u8]) -> Result<P4dbPacket, Reject> {
        if frame.kind != crate::wire::TXN_KIND || frame.dst != SWITCH_ID {
            return Err(Reject::rule("not_for_p4db", format!("{:?} to node {}", frame.kind, frame.dst)));
        }
        let mut txn = TxnPacket::decode(payload)?;
        let planned = self.check_plan(&txn)?;
        let passes = if self.config.first_pass_only { 1 } else { planned };
        txn.epoch = self.epoch;
        Ok(P4dbPacket { txn, cursor: 0, passes_left: passes, holds_locks: false })
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, p: &mut P4dbPacket) -> PassDecision {
        let locks = p.txn.locks;
        let (want_left, want_right) = (i64::from(locks.left), i64::from(locks.right));
        let first_pass = p.cursor == 0;
        let lock_step = if p.txn.is_multipass && first_pass {
            Some(TRY_LOCK)
        } else if p.holds_locks && p.passes_left == 1 {
            Some(UNLOCK)
        } else if first_pass {
            Some(CHECK_FREE)
        } else {
            None
        };
        if first_pass && !p.holds_locks {
            if let Some(decision) = self.check_duplicate(p) {
                return decision;
            }
        }
        if let Some(action) = lock_step {
            let granted = match ctx.execute(LOCK_REGISTER, action, 0, want_left, want_right) {
                Ok(out) => out == 1 || action == UNLOCK,
                Err(_) => return PassDecision::Drop("rule_violation"),
            };
            if !granted {
                p.txn.recircs = p.txn.recircs.saturating_add(1);
                return PassDecision::Recirculate(Recirc::Waiting);
            }
            if first_pass {
                p.txn.gid = ctx.stamp_gid();
                p.holds_locks = action == TRY_LOCK;
                self.admitted(p.txn.txn_id);
            }
            if action == UNLOCK {
                p.holds_locks = false;
            }
        }
        if self.run_instructions(ctx, p).is_err() {
            return PassDecision::Drop("rule_violation");
        }
        if p.passes_left == 0 {
            let dropped = (p.txn.instrs.len() - p.cursor) as u64;
            self.first_pass_dropped_ops += dropped;
            self.first_pass_truncated_txns += u64::from(dropped > 0);
            self.answered(&p.txn);
            finished(&p.txn)
        } else if self.config.fast_recirculation {
            PassDecision::Recirculate(Recirc::Fast)
        } else {
            PassDecision::Recirculate(Recirc::Waiting)
        }
    }

    fn encode(&self, p: &P4dbPacket, out: &mut Vec<u8>) {
        p.txn.encode(out);
    }

    fn wire_bytes(&self, p: &P4dbPacket) -> usize {
        FRAME_BYTES + p.txn.encoded_len()
    }

    fn priority(&self, p: &P4dbPacket) -> u32 {
        match self.config.recirculation {
            RecirculationModel::Priority => p.txn.recircs,
            // One class: each port's queue is first come, first served.
            RecirculationModel::TwoPortFifo => 0,
        }
    }
}

/// The multicast group of a set of nodes: its bitmask (bit `n` = node `n`), so the control plane
/// can install every set once at start. `None` when a node id is 16 or more (no group: the
/// sender then tells the others itself).
pub fn multicast_group(nodes: impl IntoIterator<Item = u16>) -> Option<u16> {
    nodes.into_iter().try_fold(0u16, |mask, n| (n < 16).then(|| mask | (1 << n)))
}

/// Every group [`multicast_group`] can name among the first `nodes` nodes, with its members,
/// for the control plane to install (at most 65,535 groups: 16 nodes).
pub fn multicast_groups(nodes: u16) -> impl Iterator<Item = (u16, Vec<u16>)> {
    let n = nodes.min(16);
    let last = if n == 16 { u16::MAX } else { (1u16 << n) - 1 };
    (1..=last).map(move |mask| (mask, (0..n).filter(|&i| mask & (1 << i) != 0).collect()))
}

/// Bytes of a P4DB packet with `instructions` instructions on the wire, frame included.
pub fn packet_bytes(instructions: usize) -> usize {
    FRAME_BYTES + crate::wire::p4db::HEADER_BYTES + instructions * INSTRUCTION_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_groups_are_node_bitmasks() {
        assert_eq!(multicast_group([0, 2]), Some(0b101));
        assert_eq!(multicast_group([3, 16]), None);
        let groups: Vec<_> = multicast_groups(3).collect();
        assert_eq!(groups.len(), 7);
        assert_eq!(groups[4], (5, vec![0, 2]));
        assert_eq!(multicast_groups(16).count(), 65_535);
    }

    #[test]
    fn there_is_one_data_action_per_operation_kind() {
        let kinds =
            [OpKind::Read, OpKind::Write, OpKind::Add, OpKind::AddIfNonNegative, OpKind::WriteCheck, OpKind::Restock];
        assert_eq!(data_actions().len(), usize::from(DATA_ACTIONS));
        assert!(kinds.iter().all(|&k| action_for(k) < DATA_ACTIONS));
    }
}
