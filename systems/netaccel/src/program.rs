//! The switch program: Algorithms 1–2 of the paper, overflow, the barrier, draining, clearing.
//!
//! Every packet takes the path its op and the arrays' answers say, touching each array at
//! most once, in stage order ([`crate::layout`] has the stages):
//!
//! - **Outer tuple** (build side): counted; tries *insert-or-match* in `join[0..J]` until a
//!   position takes it (dropped: it is now state). If none does, its chain is flagged full and
//!   the tuple goes to the control plane: overflow (i).
//! - **Inner tuple** (probe side): counted; *probes* `join[0..J]` until one matches. No match:
//!   if its chain is flagged full the key may be in the control plane, so the tuple goes there
//!   (overflow (ii)); otherwise it cannot join and is dropped. A match goes on to the
//!   group-by: for each position `g`, *test-and-set* `presence[g]`; an empty slot is taken
//!   (*insert* both keys into `keys[g]`), an occupied one is compared (*match*). Inserted or
//!   matched, `sums[g]` *adds* the quantity and the tuple is dropped. If no position takes the
//!   group, the tuple goes to the control plane: overflow (iii).
//! - **END** of a segment's stream: *check-and-reset* compares the segment's count with the
//!   cell that counted its tuples (a mismatch is a lost tuple, accumulated in `loss`), and
//!   *arrive* counts ENDs. Until the last one it is dropped. The last outer END becomes `Go`,
//!   multicast to the master and the segments (flagged [`LOSS`] if a tuple was lost): the
//!   barrier between the build and probe streams. The last inner END becomes the drain
//!   iterator, and a copy of it tells the control plane its input is complete.
//! - **Drain**: the iterator visits slot `index` of position `g` per pass, *reads-and-clears*
//!   presence, keys and sums there; an occupied slot's group is emitted as a copy to the
//!   segment its (partkey, suppkey) hashes to (the distribution table), and the iterator
//!   recirculates to the next (slot, position). Past the last slot it becomes the clearing
//!   iterator, announcing it to the segments (every switch group has been sent before), which
//!   clears `join[*]` and `chain_full` slot by slot and then ends.
//!
//! Why a group is never split between switch and control plane: a group's slot, once taken,
//! is never freed before the drain, so every later tuple of the group matches it; a group that
//! found no slot finds all of them still taken by others. A join key is likewise either in the
//! switch or (overflow (i)) in the control plane, never both, because `part_FP`'s keys are
//! unique, and all outer tuples are in before the first inner one (the barrier).

use crate::layout::{action, Layout, CHAIN_FULL, DIST_TABLE, ENDS, JOIN0, KEYS0, LOSS_ACC, PRESENCE0, RECEIVED, SUMS0};
use crate::wire::{Msg, Op, LOSS, MSG_BYTES};
use pisadb_olap::keytable::pack2;
use pisadb_olap::ops::bucket_of;
use pisadb_switch::registers::PassContext;
use pisadb_switch::{Output, PassDecision, Program, ProgramSpec, Recirc, Reject};
use pisadb_wire::{Frame, Kind, FRAME_BYTES};

/// Multicast group of the master and every segment (the barrier's `Go`).
pub const GROUP_ALL: u16 = 1;
/// Multicast group of every segment (the drain's end).
pub const GROUP_SEGMENTS: u16 = 2;

/// Overflow type (i): an outer key that found no room.
pub const OVERFLOW_OUTER: u8 = 1;
/// Overflow type (ii): an inner tuple whose chain was full.
pub const OVERFLOW_CHAIN: u8 = 2;
/// Overflow type (iii): an inner tuple whose group found no room.
pub const OVERFLOW_GROUP: u8 = 3;

/// The NetAccel switch program.
#[derive(Clone, Debug)]
pub struct NetAccel {
    /// Its shape.
    layout: Layout,
}

impl NetAccel {
    /// The program for `layout` (which must pass [`Layout::check`]).
    pub fn new(layout: Layout) -> Self {
        NetAccel { layout }
    }

    /// Its shape.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn outer(&self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        let l = &self.layout;
        let index = l.join_index(m.a);
        let key = i64::from(m.a);
        for k in 0..l.join_positions {
            if exec(ctx, JOIN0 + k, action::INSERT_OR_MATCH, index, key, 0) == 1 {
                return PassDecision::Drop("outer_stored");
            }
        }
        exec(ctx, CHAIN_FULL, action::SET, index, 0, 0);
        m.flags = OVERFLOW_OUTER;
        PassDecision::ToControlPlane
    }

    fn inner(&self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        let l = &self.layout;
        let index = l.join_index(m.a);
        let key = i64::from(m.a);
        let found = (0..l.join_positions).any(|k| exec(ctx, JOIN0 + k, action::PROBE, index, key, 0) == 1);
        if !found {
            if exec(ctx, CHAIN_FULL, action::READ, index, 0, 0) != 0 {
                m.flags = OVERFLOW_CHAIN;
                return PassDecision::ToControlPlane;
            }
            return PassDecision::Drop("no_join_partner");
        }
        let slot = l.group_index(m.a, m.b);
        let (pk, sk, q) = (i64::from(m.a), i64::from(m.b), i64::from(m.c));
        for g in 0..l.group_positions {
            let present = exec(ctx, PRESENCE0 + g, action::TEST_AND_SET, slot, pk, 0) != 0;
            let inserted = if present {
                exec(ctx, KEYS0 + g, action::MATCH, slot, pk, sk) == 1
            } else {
                exec(ctx, KEYS0 + g, action::INSERT, slot, pk, sk) == 1
            };
            if inserted {
                exec(ctx, SUMS0 + g, action::ADD, slot, q, 0);
                return PassDecision::Drop("aggregated");
            }
        }
        m.flags = OVERFLOW_GROUP;
        PassDecision::ToControlPlane
    }

    fn end(&self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        let stream = u32::from(m.op == Op::EndInner);
        let counted = exec(ctx, RECEIVED, action::CHECK_RESET, u32::from(m.segment) * 2 + stream, i64::from(m.a), 0);
        let last = exec(ctx, ENDS, action::ARRIVE, stream, 0, 0) == 1;
        let lost = i64::from(counted != 1);
        let loss_action = if last { action::READ_CLEAR } else { action::ADD };
        let any_loss = exec(ctx, LOSS_ACC, loss_action, stream, lost, 0) != 0;
        if !last {
            return PassDecision::Drop("end_counted");
        }
        m.flags = if any_loss { LOSS } else { 0 };
        if m.op == Op::EndOuter {
            m.op = Op::Go;
            return PassDecision::Multicast(GROUP_ALL);
        }
        m.op = Op::Drain;
        m.index = 0;
        PassDecision::EmitAndRecirculate { copy: Output::ControlPlane, recirc: Recirc::Waiting }
    }

    fn drain(&self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        let l = &self.layout;
        if m.index >= l.group_slots {
            m.op = Op::Clear;
            m.index = 0;
            m.flags &= LOSS;
            return PassDecision::EmitAndRecirculate {
                copy: Output::Multicast(GROUP_SEGMENTS),
                recirc: Recirc::Waiting,
            };
        }
        let g = m.low_flags();
        let (slot, loss) = (m.index, m.flags & LOSS);
        let partkey = exec(ctx, PRESENCE0 + g, action::READ_CLEAR, slot, 0, 0);
        let suppkey = exec(ctx, KEYS0 + g, action::KEYS_READ_CLEAR, slot, 0, 0);
        let sum = exec(ctx, SUMS0 + g, action::READ_CLEAR, slot, 0, 0);
        let (next_index, next_g) = if g + 1 == l.group_positions { (slot + 1, 0) } else { (slot, g + 1) };
        m.index = next_index;
        m.flags = loss | next_g;
        if partkey == 0 {
            return PassDecision::Recirculate(Recirc::Waiting);
        }
        (m.a, m.b, m.c) = (partkey as u32, suppkey as u32, sum as u32);
        let bucket = u64::from(bucket_of(pack2(partkey, suppkey)));
        match ctx.lookup(DIST_TABLE, bucket) {
            Ok(Some(dst)) => {
                PassDecision::EmitAndRecirculate { copy: Output::Node(dst as u16), recirc: Recirc::Waiting }
            }
            _ => PassDecision::Drop("no_distribution_entry"),
        }
    }

    fn clear(&self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        let l = &self.layout;
        for k in 0..l.join_positions {
            exec(ctx, JOIN0 + k, action::CLEAR, m.index, 0, 0);
        }
        exec(ctx, CHAIN_FULL, action::CLEAR, m.index, 0, 0);
        m.index += 1;
        if m.index >= l.join_slots {
            return PassDecision::Drop("cleared");
        }
        PassDecision::Recirculate(Recirc::Waiting)
    }
}

/// Runs a register action the layout guarantees is legal (ids, stages and indexes are checked
/// by construction and by the switch's load checks; a refusal here is a program bug, which the
/// debug build reports).
fn exec(ctx: &mut PassContext<'_>, register: u8, act: u8, index: u32, in1: i64, in2: i64) -> i64 {
    let result = ctx.execute(register, act, index, in1, in2);
    debug_assert!(result.is_ok(), "register {register} action {act} index {index}: {result:?}");
    result.unwrap_or(0)
}

impl Program for NetAccel {
    type Packet = Msg;

    fn spec(&self) -> ProgramSpec {
        self.layout.spec()
    }

    fn kind(&self) -> Kind {
        Kind::NetAccel
    }

    fn admit(&self, _frame: &Frame, payload: &[u8]) -> Result<Msg, Reject> {
        let m = Msg::decode(payload)?;
        match m.op {
            Op::Outer | Op::Inner | Op::EndOuter | Op::EndInner => {}
            Op::Go | Op::Drain | Op::Clear => {
                return Err(Reject::rule("switch_op_from_a_host", format!("{:?} is made by the switch only", m.op)))
            }
        }
        if m.segment >= self.layout.segments {
            return Err(Reject::rule(
                "unknown_segment",
                format!("segment {} (accepted 0..{})", m.segment, self.layout.segments),
            ));
        }
        if matches!(m.op, Op::Outer | Op::Inner) && m.a == 0 {
            return Err(Reject::rule("zero_key", "key 0 marks an empty slot; keys start at 1"));
        }
        Ok(m)
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        match m.op {
            Op::Outer | Op::Inner => {
                let stream = u32::from(m.op == Op::Inner);
                exec(ctx, RECEIVED, action::COUNT, u32::from(m.segment) * 2 + stream, 0, 0);
                if m.op == Op::Outer {
                    self.outer(ctx, m)
                } else {
                    self.inner(ctx, m)
                }
            }
            Op::EndOuter | Op::EndInner => self.end(ctx, m),
            Op::Drain => self.drain(ctx, m),
            Op::Clear => self.clear(ctx, m),
            Op::Go => PassDecision::Drop("go_reentered"),
        }
    }

    fn encode(&self, m: &Msg, out: &mut Vec<u8>) {
        m.encode(out);
    }

    fn wire_bytes(&self, _m: &Msg) -> usize {
        FRAME_BYTES + MSG_BYTES
    }
}
