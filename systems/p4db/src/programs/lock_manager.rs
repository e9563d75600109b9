//! The LM-Switch baseline: the switch as a lock manager for hot tuples (NetLock-style; P4DB
//! paper §7.1). Data stays on the nodes; only the locks live in the switch.
//!
//! Each hot tuple has one lock cell: a pair register whose low half counts shared holders and
//! whose high half is the exclusive flag. Acquiring is one stateful action with at most two
//! comparisons (shared: "no exclusive holder"; exclusive: "no holder at all"), so a grant or a
//! denial is decided in the stage that holds the lock, at line rate. There is no waiting queue
//! in the switch: a denied request is answered at once and the node's concurrency control
//! (NO_WAIT or WAIT_DIE) decides what to do, as for a local lock.
//!
//! A request carries all lock operations of a transaction in stage order. A pass executes the
//! operations it can without breaking the per-pass rules (each array once, stages forward) and
//! recirculates on the fast port for the rest. Acquisition stops at the first denial: the reply
//! says which operations were granted, and the node releases those. Locks of one request need
//! no isolation from each other, so no pipeline lock is involved.

use crate::wire::lock::{LockEntry, LockOp, LockPacket, MAX_ENTRIES};
use pisadb_core::TupleKey;
use pisadb_p4db_layout::{ArraySlot, Layout, LayoutTarget};
use pisadb_switch::alu::{Branch, CmpOp, Combine, Comparison, Expr, RegisterAction};
use pisadb_switch::profile::SwitchProfile;
use pisadb_switch::program::{PassDecision, Program, ProgramSpec, Recirc, RegisterArraySpec, Reject};
use pisadb_switch::registers::PassContext;
use pisadb_wire::{Frame, Kind, FRAME_BYTES, SWITCH_ID};
use serde::{Deserialize, Serialize};

/// The shape of the lock table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockManagerConfig {
    /// First stage holding lock arrays.
    pub first_stage: u8,
    /// Consecutive stages holding lock arrays.
    pub stages: u8,
    /// Lock arrays per stage.
    pub arrays_per_stage: u8,
    /// Locks per array.
    pub entries_per_array: u32,
}

impl LockManagerConfig {
    /// Two arrays of 32768 locks (32-bit halves) in every stage but the last.
    pub fn for_profile(profile: &SwitchProfile) -> Self {
        LockManagerConfig {
            first_stage: 0,
            stages: profile.stages_per_pipe.saturating_sub(1).max(1),
            arrays_per_stage: 2,
            entries_per_array: 32_768,
        }
    }

    /// `(register id, stage)` of every lock array.
    fn arrays(&self) -> impl Iterator<Item = (u8, u8)> + '_ {
        pisadb_switch::program::array_grid(self.first_stage, self.stages, self.arrays_per_stage)
    }

    /// The lock arrays as the layout algorithm sees them.
    pub fn layout_target(&self, profile: &SwitchProfile) -> LayoutTarget {
        let arrays = self
            .arrays()
            .map(|(register, stage)| ArraySlot { stage, register, capacity: self.entries_per_array, width_bits: 64 })
            .collect();
        LayoutTarget { arrays, sram_block_bits: profile.sram_block_bits }
    }
}

/// Register actions of a lock cell, in [`LockOp`] order: `lo` = shared holders, `hi` = exclusive.
pub fn lock_actions() -> Vec<RegisterAction> {
    let granted = Expr::constant(1);
    let denied = Branch::keep(Expr::constant(0));
    let no_exclusive = Comparison::new(Expr::HI, CmpOp::Eq);
    let no_shared = Comparison::new(Expr::LO, CmpOp::Eq);
    vec![
        RegisterAction::when(
            "acquire_shared",
            vec![no_exclusive],
            Combine::All,
            Branch::set(Expr::LO.plus(Expr::constant(1)), granted),
            denied,
        ),
        RegisterAction::when(
            "acquire_exclusive",
            vec![no_exclusive, no_shared],
            Combine::All,
            Branch { lo: None, hi: Some(Expr::constant(1)), out: granted },
            denied,
        ),
        RegisterAction::when(
            "release_shared",
            vec![Comparison::new(Expr::LO, CmpOp::Gt)],
            Combine::All,
            Branch::set(Expr::LO.plus(Expr::constant(-1)), granted),
            denied,
        ),
        RegisterAction::always("release_exclusive", Branch { lo: None, hi: Some(Expr::constant(0)), out: granted }),
    ]
}

/// A lock request inside the switch.
#[derive(Clone, Debug)]
pub struct LockFlight {
    /// The request; `granted` fills in as operations succeed.
    pub pkt: LockPacket,
    /// The next operation to run.
    cursor: usize,
}

/// The lock-manager program.
#[derive(Clone, Debug)]
pub struct LockManager {
    config: LockManagerConfig,
    stage_of: [u8; 256],
}

impl LockManager {
    /// The lock manager with `config`.
    pub fn new(config: LockManagerConfig) -> Self {
        let stage_of = pisadb_switch::program::stage_map(config.arrays());
        LockManager { config, stage_of }
    }

    /// Builds a request for `ops` on tuples placed by `layout`, in stage order (fewest
    /// passes). Returns `None` if a tuple has no lock on the switch or there are too many ops.
    pub fn request_for(&self, txn_id: u64, ops: &[(TupleKey, LockOp)], layout: &Layout) -> Option<LockPacket> {
        if ops.is_empty() || ops.len() > MAX_ENTRIES {
            return None;
        }
        let mut entries = ops
            .iter()
            .map(|&(key, op)| {
                let p = layout.get(key)?;
                Some((p.stage, LockEntry { register: p.register, op, index: p.index as u16 }))
            })
            .collect::<Option<Vec<_>>>()?;
        entries.sort_by_key(|&(stage, e)| (stage, e.register, e.index));
        Some(LockPacket { txn_id, granted: 0, entries: entries.into_iter().map(|(_, e)| e).collect() })
    }
}

impl Program for LockManager {
    type Packet = LockFlight;

    fn spec(&self) -> ProgramSpec {
        let arrays = self
            .config
            .arrays()
            .map(|(id, stage)| RegisterArraySpec {
                id,
                name: format!("locks_{id}"),
                stage,
                entries: self.config.entries_per_array,
                width_bits: 32,
                pair: true,
                actions: lock_actions(),
            })
            .collect();
        ProgramSpec { name: "lock_manager".into(), arrays, reserve_fast_recirc_port: true, tables: Vec::new() }
    }

    fn kind(&self) -> Kind {
        crate::wire::LOCK_KIND
    }

    fn admit(&self, frame: &Frame, payload: &[u8]) -> Result<LockFlight, Reject> {
        if frame.kind != crate::wire::LOCK_KIND || frame.dst != SWITCH_ID {
            return Err(Reject::rule("not_for_lock_manager", format!("{:?} to node {}", frame.kind, frame.dst)));
        }
        let pkt = LockPacket::decode(payload)?;
        for (n, e) in pkt.entries.iter().enumerate() {
            if self.stage_of[usize::from(e.register)] == u8::MAX {
                return Err(Reject::rule(
                    "unknown_register",
                    format!("entry {n}: register {} holds no locks", e.register),
                ));
            }
            if u32::from(e.index) >= self.config.entries_per_array {
                return Err(Reject::rule("index_out_of_range", format!("entry {n}: index {}", e.index)));
            }
        }
        Ok(LockFlight { pkt: LockPacket { granted: 0, ..pkt }, cursor: 0 })
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, f: &mut LockFlight) -> PassDecision {
        let (mut reached, mut touched) = (0u8, 0u64);
        while let Some(&e) = f.pkt.entries.get(f.cursor) {
            let stage = self.stage_of[usize::from(e.register)];
            let bit = 1u64 << e.register;
            if stage < reached || touched & bit != 0 {
                return PassDecision::Recirculate(Recirc::Fast);
            }
            let out = match ctx.execute(e.register, e.op as u8, u32::from(e.index), 0, 0) {
                Ok(out) => out,
                Err(_) => return PassDecision::Drop("rule_violation"),
            };
            (reached, touched) = (stage, touched | bit);
            let acquiring = matches!(e.op, LockOp::AcquireShared | LockOp::AcquireExclusive);
            if out == 1 {
                f.pkt.granted |= 1 << f.cursor;
            } else if acquiring {
                return PassDecision::Reply;
            }
            f.cursor += 1;
        }
        PassDecision::Reply
    }

    fn encode(&self, f: &LockFlight, out: &mut Vec<u8>) {
        f.pkt.encode(out);
    }

    fn wire_bytes(&self, f: &LockFlight) -> usize {
        FRAME_BYTES + f.pkt.encoded_len()
    }
}
