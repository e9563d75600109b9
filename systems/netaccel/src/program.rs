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
//! - **Reloading** (Q20's pattern 2, [`NetAccel::reloading`]): the last inner END does not
//!   drain; pattern 1's groups stay where they are as the join state of pattern 2 (the paper
//!   moves them into the next join's stages; ours are already laid out as a join on (partkey,
//!   suppkey) → sum). The control plane is told pattern 1 is complete and the segments get a
//!   `Go` for the probe stream: a `partsupp` tuple *probes* its partkey in the join arrays
//!   (still holding `part_FP`: most rows stop there), then looks its group up (*read* presence,
//!   *match* keys, *read* the sum), and a row with `2·availqty > sum` goes to the segment that
//!   owns its `suppkey`. A miss goes to the control plane only if its join chain or its group
//!   slot overflowed (the key or group can only be there); otherwise the row has no group and
//!   fails the subquery. The last probe END starts the drain, which then only clears.
//!
//! Why a group is never split between switch and control plane: a group's slot, once taken,
//! is never freed before the drain, so every later tuple of the group matches it; a group that
//! found no slot finds all of them still taken by others. A join key is likewise either in the
//! switch or (overflow (i)) in the control plane, never both, because `part_FP`'s keys are
//! unique, and all outer tuples are in before the first inner one (the barrier).

use crate::layout::{
    action, Layout, CHAIN_FULL, DIST_TABLE, ENDS, GROUP_FULL, JOIN0, KEYS0, LOSS_ACC, PRESENCE0, RECEIVED, STREAMS,
    SUMS0,
};
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
/// A probe tuple of the reloaded pattern whose group may be in the control plane.
pub const OVERFLOW_PROBE: u8 = 4;

/// The NetAccel switch program.
#[derive(Clone, Debug)]
pub struct NetAccel {
    /// Its shape.
    layout: Layout,
    /// Whether pattern 1's groups stay in the switch as the join state of the next pattern
    /// (Q20's pattern 2, probed by `partsupp`) instead of being drained to the segments.
    reload: bool,
}

/// The stream number of an op, for the barrier's counters.
fn stream_of(op: Op) -> u32 {
    match op {
        Op::Outer | Op::EndOuter => 0,
        Op::Inner | Op::EndInner => 1,
        _ => 2,
    }
}

impl NetAccel {
    /// The program for `layout` (which must pass [`Layout::check`]), draining pattern 1's
    /// groups to the segments.
    pub fn new(layout: Layout) -> Self {
        NetAccel { layout, reload: false }
    }

    /// The program for `layout` that keeps pattern 1's groups for the reloaded pattern 2.
    pub fn reloading(layout: Layout) -> Self {
        NetAccel { layout, reload: true }
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
        exec(ctx, GROUP_FULL, action::SET, slot, 0, 0);
        m.flags = OVERFLOW_GROUP;
        PassDecision::ToControlPlane
    }

    /// A `partsupp` tuple of the reloaded pattern: its partkey is probed in pattern 1's join
    /// state (`ps_partkey in part_FP`), then its group (partkey, suppkey) is looked up where
    /// pattern 1 left it; the row passes if `2·availqty > sum` and goes to the segment that
    /// owns its `suppkey` (the redistribution of pattern 2's output). A key or group not in the
    /// switch can only be in the control plane if its join chain or its group slot overflowed.
    fn probe(&self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        let l = &self.layout;
        // `ps_partkey in part_FP`: pattern 1's join state is still here, so the probe first
        // looks its partkey up there; most `partsupp` rows stop at this semi-join.
        let join_index = l.join_index(m.a);
        let key = i64::from(m.a);
        let in_switch = (0..l.join_positions).any(|k| exec(ctx, JOIN0 + k, action::PROBE, join_index, key, 0) == 1);
        if !in_switch {
            if exec(ctx, CHAIN_FULL, action::READ, join_index, 0, 0) == 0 {
                return PassDecision::Drop("not_a_build_key");
            }
            // The key may be among the control plane's (overflow (i)), and its groups too.
            m.flags = OVERFLOW_PROBE;
            return PassDecision::ToControlPlane;
        }
        let slot = l.group_index(m.a, m.b);
        let (pk, sk) = (i64::from(m.a), i64::from(m.b));
        let mut sum = None;
        for g in 0..l.group_positions {
            if exec(ctx, PRESENCE0 + g, action::READ_ONLY, slot, 0, 0) == 0 {
                break;
            }
            if exec(ctx, KEYS0 + g, action::MATCH, slot, pk, sk) == 1 {
                sum = Some(exec(ctx, SUMS0 + g, action::READ_ONLY, slot, 0, 0));
                break;
            }
        }
        let Some(sum) = sum else {
            if exec(ctx, GROUP_FULL, action::READ, slot, 0, 0) != 0 {
                m.flags = OVERFLOW_PROBE;
                return PassDecision::ToControlPlane;
            }
            return PassDecision::Drop("no_group");
        };
        if 2 * i64::from(m.c) <= sum {
            return PassDecision::Drop("not_above_half_the_sum");
        }
        match ctx.lookup(DIST_TABLE, u64::from(bucket_of(u64::from(m.b)))) {
            Ok(Some(dst)) => PassDecision::SendTo(dst as u16),
            _ => PassDecision::Drop("no_distribution_entry"),
        }
    }

    fn end(&self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        let stream = stream_of(m.op);
        let counted =
            exec(ctx, RECEIVED, action::CHECK_RESET, u32::from(m.segment) * STREAMS + stream, i64::from(m.a), 0);
        let last = exec(ctx, ENDS, action::ARRIVE, stream, 0, 0) == 1;
        let lost = i64::from(counted != 1);
        let loss_action = if last { action::READ_CLEAR } else { action::ADD };
        let any_loss = exec(ctx, LOSS_ACC, loss_action, stream, lost, 0) != 0;
        if !last {
            return PassDecision::Drop("end_counted");
        }
        m.flags = if any_loss { LOSS } else { 0 };
        match m.op {
            Op::EndOuter => {
                m.op = Op::Go;
                m.index = 1;
                PassDecision::Multicast(GROUP_ALL)
            }
            // Pattern 1 is complete and its groups stay: the control plane is told (a copy),
            // and the packet comes back round as the `Go` of the probe stream.
            Op::EndInner if self.reload => {
                m.op = Op::Go;
                m.index = 2;
                PassDecision::EmitAndRecirculate { copy: Output::ControlPlane, recirc: Recirc::Waiting }
            }
            _ => {
                m.op = Op::Drain;
                m.index = 0;
                PassDecision::EmitAndRecirculate { copy: Output::ControlPlane, recirc: Recirc::Waiting }
            }
        }
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
        if g + 1 == l.group_positions {
            exec(ctx, GROUP_FULL, action::CLEAR, slot, 0, 0);
        }
        let (next_index, next_g) = if g + 1 == l.group_positions { (slot + 1, 0) } else { (slot, g + 1) };
        m.index = next_index;
        m.flags = loss | next_g;
        if partkey == 0 || self.reload {
            // An empty slot, or a group the reloaded pattern has already consumed.
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
        crate::wire::KIND
    }

    fn admit(&self, _frame: &Frame, payload: &[u8]) -> Result<Msg, Reject> {
        let m = Msg::decode(payload)?;
        match m.op {
            Op::Outer | Op::Inner | Op::EndOuter | Op::EndInner => {}
            Op::Probe | Op::EndProbe if self.reload => {}
            Op::Probe | Op::EndProbe => {
                return Err(Reject::rule(
                    "no_reloaded_pattern",
                    "this program drains its groups; it has no probe stream",
                ))
            }
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
        if matches!(m.op, Op::Outer | Op::Inner | Op::Probe) && m.a == 0 {
            return Err(Reject::rule("zero_key", "key 0 marks an empty slot; keys start at 1"));
        }
        Ok(m)
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, m: &mut Msg) -> PassDecision {
        match m.op {
            Op::Outer | Op::Inner | Op::Probe => {
                exec(ctx, RECEIVED, action::COUNT, u32::from(m.segment) * STREAMS + stream_of(m.op), 0, 0);
                match m.op {
                    Op::Outer => self.outer(ctx, m),
                    Op::Inner => self.inner(ctx, m),
                    _ => self.probe(ctx, m),
                }
            }
            Op::EndOuter | Op::EndInner | Op::EndProbe => self.end(ctx, m),
            Op::Drain => self.drain(ctx, m),
            Op::Clear => self.clear(ctx, m),
            // The probe stream's `Go`, back from its recirculation (see `end`).
            Op::Go => PassDecision::Multicast(GROUP_ALL),
        }
    }

    fn encode(&self, m: &Msg, out: &mut Vec<u8>) {
        m.encode(out);
    }

    fn wire_bytes(&self, _m: &Msg) -> usize {
        FRAME_BYTES + MSG_BYTES
    }
}
