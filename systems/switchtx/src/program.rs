//! The gather-and-scatter switch program (§3.2, Table 1) on the shared PISA model.
//!
//! **State.** Per slot (2^16 slots; a client's slot is derived from its server, thread and
//! lane, so two in-flight attempts never share one) three register arrays in three stages:
//! the attempt's 16-bit *tag* (stage 1), an 8-bit *aborted* flag (stage 2) and a 16-bit
//! *counter* (stage 3) — 5 bytes a slot, as the paper's. Every packet touches each array at
//! most once, in stage order, so one pass serves any message.
//!
//! **One pass** of a control message at a switch whose entry in the message names a role:
//! - `init` (from the client): tag := the message's tag, flag := 0, counter := 0; a leaf sends
//!   it up, a root passes it down to the other leaves, a leaf receiving it from above drops it.
//! - A message coming down the tree (`FLAG_DOWN`): multicast to the entry's group.
//! - Otherwise the tag must match (else drop as `stale`: an old attempt's message); a `fail`
//!   sets the flag and goes on (up or scattered) only if it was clear (abort once); any other
//!   message is dropped if the flag is set, else counted: below the threshold it is dropped,
//!   at the threshold the counter resets and the message goes on.
//!
//! "Goes on" is: a leaf sends it up to S0 (`SendTo` its anchor, a server behind S0); the root
//! sets `FLAG_DOWN` and multicasts it to its scatter group. A switch without a role, or that is
//! not programmable (the ToRs of +GaS, every switch of FaSST), forwards. Data messages are
//! always forwarded.
//!
//! [`Reference`] is the same logic over a plain map, and a property test holds the program to
//! it on random message sequences.

use crate::wire::{Control, Message, MsgType, Role, FLAG_DOWN};
use pisadb_switch::alu::{Branch, CmpOp, Combine, Comparison, Expr, RegisterAction};
use pisadb_switch::registers::PassContext;
use pisadb_switch::{PassDecision, Program, ProgramSpec, RegisterArraySpec, Reject};
use pisadb_wire::{Frame, Kind, FRAME_BYTES};
use std::collections::BTreeMap;

/// Slots of each array.
pub const SLOTS: u32 = 1 << 16;
/// The tag array.
pub const TAG: u8 = 1;
/// The aborted-flag array.
pub const ABORTED: u8 = 2;
/// The counter array.
pub const COUNTER: u8 = 3;
/// The Eris sequencer's counter of shard `k` is array `SEQ0 + k` (one cell each), three in
/// each of stages 1–3 beside the GaS arrays, then four per stage.
pub const SEQ0: u8 = 4;

/// The stage of shard `k`'s sequence counter.
fn seq_stage(k: u8) -> u8 {
    if k < 9 {
        1 + k / 3
    } else {
        4 + (k - 9) / 4
    }
}

const READ: u8 = 0;
const WRITE: u8 = 1;
const SET: u8 = 1;
const CLEAR: u8 = 2;
const COUNT: u8 = 0;
const RESET: u8 = 1;

/// A SwitchTx packet in the switch.
#[derive(Clone, Debug)]
pub struct Packet {
    /// The message, its flags rewritten on the way down.
    pub msg: Message,
}

/// The program of one switch.
#[derive(Clone, Debug)]
pub struct GatherScatter {
    /// Which switch it runs on (its entry in control messages).
    pub switch: u16,
    /// Whether it coordinates at all (a plain switch forwards).
    pub programmable: bool,
    /// Where a leaf sends a message up (a server behind S0); `None` at S0.
    pub up: Option<u16>,
    /// Whether it is the Eris baseline's sequencer (stamps one sequence number per
    /// destination shard and multicasts to the destination servers).
    pub sequencer: bool,
}

/// What a pass decides, in the reference's terms.
fn go_on(role: Role, up: Option<u16>, c: &mut Control, scatter: u16) -> PassDecision {
    match (role, up) {
        (Role::Leaf, Some(up)) => PassDecision::SendTo(up),
        _ if scatter == 0 => PassDecision::Drop("empty_scatter"),
        _ => {
            c.flags |= FLAG_DOWN;
            PassDecision::Multicast(scatter)
        }
    }
}

impl GatherScatter {
    /// The program of switch `switch`.
    pub fn new(switch: u16, programmable: bool, up: Option<u16>) -> Self {
        GatherScatter { switch, programmable, up, sequencer: false }
    }

    /// The same program, as the Eris sequencer.
    pub fn with_sequencer(mut self) -> Self {
        self.sequencer = true;
        self
    }

    /// Eris: one pass stamps every destination shard's next sequence number (each shard's
    /// counter is its own array, visited in stage order) and multicasts to the servers.
    fn sequence(&self, ctx: &mut PassContext<'_>, q: &mut crate::wire::Sequenced, threads: u8) -> PassDecision {
        if !self.sequencer {
            return PassDecision::Forward;
        }
        let mask = q.header.mask.get();
        let mut servers = 0u16;
        for k in 0..crate::wire::ERIS_SHARDS as u8 {
            if mask & (1 << k) != 0 {
                // The arrays are the program's own: an access error is a bug.
                let n = ctx.execute(SEQ0 + k, 0, 0, 0, 0).expect("valid access");
                q.header.seq[usize::from(k)].set(n as u32);
                servers |= 1 << (k / threads.max(1));
            }
        }
        q.header.flags |= FLAG_DOWN;
        if servers == 0 || servers >= 0x100 {
            return PassDecision::Drop("bad_shards");
        }
        PassDecision::Multicast(servers)
    }

    fn control(&self, ctx: &mut PassContext<'_>, c: &mut Control) -> PassDecision {
        let Some(entry) = c.entries.get(usize::from(self.switch)).copied() else { return PassDecision::Forward };
        let role = entry.role();
        if !self.programmable || role == Role::None {
            return PassDecision::Forward;
        }
        let slot = u32::from(c.slot.get());
        let tag = i64::from(c.tag.get());
        let scatter = entry.scatter.get();
        let down = c.flags & FLAG_DOWN != 0;
        // The arrays and actions are the program's own: an access error is a bug.
        let mut exec =
            |array: u8, action: u8, in1: i64| ctx.execute(array, action, slot, in1, 0).expect("valid access");
        if c.msg_type() == MsgType::Init {
            exec(TAG, WRITE, tag);
            exec(ABORTED, CLEAR, 0);
            exec(COUNTER, RESET, 0);
            return match role {
                Role::Leaf if down => PassDecision::Drop("init"),
                Role::Root if scatter & 0xff == 0 => PassDecision::Drop("init"),
                _ => go_on(role, self.up, c, scatter),
            };
        }
        if down {
            return if scatter == 0 { PassDecision::Drop("empty_scatter") } else { PassDecision::Multicast(scatter) };
        }
        if exec(TAG, READ, 0) as u16 != c.tag.get() {
            return PassDecision::Drop("stale");
        }
        if c.msg_type() == MsgType::Fail {
            if exec(ABORTED, SET, 0) != 0 {
                return PassDecision::Drop("aborted");
            }
            return go_on(role, self.up, c, scatter);
        }
        if exec(ABORTED, READ, 0) != 0 {
            return PassDecision::Drop("aborted");
        }
        let count = exec(COUNTER, COUNT, i64::from(entry.threshold));
        if count < i64::from(entry.threshold) {
            return PassDecision::Drop("gathering");
        }
        go_on(role, self.up, c, scatter)
    }
}

impl Program for GatherScatter {
    type Packet = Packet;

    fn spec(&self) -> ProgramSpec {
        let array = |id: u8, name: &str, width_bits: u32, actions: Vec<RegisterAction>| RegisterArraySpec {
            id,
            name: name.into(),
            stage: id,
            entries: SLOTS,
            width_bits,
            pair: false,
            actions,
        };
        let read = RegisterAction::always("read", Branch::keep(Expr::LO));
        let count = RegisterAction::when(
            "count",
            // old + 1 >= threshold: reset, else count; the output is old + 1 either way.
            vec![Comparison::new(Expr::LO.minus(Expr::IN1).plus(Expr::constant(1)), CmpOp::Ge)],
            Combine::All,
            Branch::set(Expr::constant(0), Expr::LO.plus(Expr::constant(1))),
            Branch::set(Expr::LO.plus(Expr::constant(1)), Expr::LO.plus(Expr::constant(1))),
        );
        let inc = RegisterAction::always(
            "next",
            Branch::set(Expr::LO.plus(Expr::constant(1)), Expr::LO.plus(Expr::constant(1))),
        );
        let sequencers = (0..crate::wire::ERIS_SHARDS as u8).map(|k| RegisterArraySpec {
            id: SEQ0 + k,
            name: format!("eris_seq_{k}"),
            stage: seq_stage(k),
            entries: 1,
            width_bits: 32,
            pair: false,
            actions: vec![inc.clone()],
        });
        ProgramSpec {
            name: "switchtx_gather_scatter".into(),
            arrays: vec![
                array(
                    TAG,
                    "gas_tag",
                    16,
                    vec![read.clone(), RegisterAction::always("install", Branch::set(Expr::IN1, Expr::LO))],
                ),
                array(
                    ABORTED,
                    "gas_aborted",
                    8,
                    vec![
                        read,
                        RegisterAction::always("set", Branch::set(Expr::constant(1), Expr::LO)),
                        RegisterAction::always("clear", Branch::set(Expr::constant(0), Expr::LO)),
                    ],
                ),
                array(
                    COUNTER,
                    "gas_counter",
                    16,
                    vec![count, RegisterAction::always("reset", Branch::set(Expr::constant(0), Expr::LO))],
                ),
            ]
            .into_iter()
            .chain(sequencers)
            .collect(),
            reserve_fast_recirc_port: false,
            tables: Vec::new(),
        }
    }

    fn kind(&self) -> Kind {
        crate::wire::KIND
    }

    fn admit(&self, frame: &Frame, payload: &[u8]) -> Result<Packet, Reject> {
        if frame.kind != crate::wire::KIND {
            return Err(Reject::rule("not_switchtx", format!("{:?}", frame.kind)));
        }
        let msg = Message::decode(payload).map_err(|e| Reject::rule(e.reason(), e.to_string()))?;
        Ok(Packet { msg })
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, p: &mut Packet) -> PassDecision {
        match &mut p.msg {
            Message::Data(_) => PassDecision::Forward,
            Message::Control(c) => self.control(ctx, c),
            Message::Sequenced(q) => {
                let threads = q.header.tag.get().min(255) as u8;
                self.sequence(ctx, q, threads)
            }
        }
    }

    fn encode(&self, p: &Packet, out: &mut Vec<u8>) {
        match &p.msg {
            Message::Control(c) => out.extend_from_slice(zerocopy::IntoBytes::as_bytes(c)),
            Message::Data(d) => d.encode(out),
            Message::Sequenced(q) => q.encode(out),
        }
    }

    fn wire_bytes(&self, p: &Packet) -> usize {
        FRAME_BYTES
            + match &p.msg {
                Message::Control(_) => crate::wire::CONTROL_BYTES,
                Message::Data(d) => d.payload_bytes(),
                Message::Sequenced(q) => q.payload_bytes(),
            }
    }
}

/// The program's logic over a plain map, slot → (tag, aborted, counter): what the switch must
/// do, written without the pipeline's rules.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    /// The slots touched so far (absent: all zero).
    pub slots: BTreeMap<u16, (u16, bool, u16)>,
}

impl Reference {
    /// One message through the switch described by `program`; the message is rewritten as
    /// the switch would.
    pub fn step(&mut self, program: &GatherScatter, c: &mut Control) -> PassDecision {
        let entry = c.entries[usize::from(program.switch)];
        let role = entry.role();
        if !program.programmable || role == Role::None {
            return PassDecision::Forward;
        }
        let down = c.flags & FLAG_DOWN != 0;
        let scatter = entry.scatter.get();
        let state = self.slots.entry(c.slot.get()).or_default();
        match c.msg_type() {
            MsgType::Init => {
                *state = (c.tag.get(), false, 0);
                if (role == Role::Leaf && down) || (role == Role::Root && scatter & 0xff == 0) {
                    return PassDecision::Drop("init");
                }
                go_on(role, program.up, c, scatter)
            }
            _ if down => {
                if scatter == 0 {
                    PassDecision::Drop("empty_scatter")
                } else {
                    PassDecision::Multicast(scatter)
                }
            }
            _ if state.0 != c.tag.get() => PassDecision::Drop("stale"),
            MsgType::Fail if state.1 => PassDecision::Drop("aborted"),
            MsgType::Fail => {
                state.1 = true;
                go_on(role, program.up, c, scatter)
            }
            _ if state.1 => PassDecision::Drop("aborted"),
            _ => {
                let count = state.2.wrapping_add(1);
                if count < u16::from(entry.threshold) {
                    state.2 = count;
                    return PassDecision::Drop("gathering");
                }
                state.2 = 0;
                go_on(role, program.up, c, scatter)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SwitchEntry;
    use pisadb_switch::registers::RegisterFile;
    use pisadb_switch::{SwitchProfile, TableFile};
    use proptest::prelude::*;
    use zerocopy::IntoBytes;

    struct Bench {
        program: GatherScatter,
        registers: RegisterFile,
        tables: TableFile,
        gid: u64,
    }

    impl Bench {
        fn new(program: GatherScatter) -> Self {
            let spec = program.spec();
            assert_eq!(spec.check(&SwitchProfile::tofino1()), Ok(()), "the program loads on Tofino 1");
            Bench { registers: RegisterFile::new(&spec), tables: TableFile::new(&spec), program, gid: 0 }
        }

        fn run(&mut self, c: &Control) -> (PassDecision, Control) {
            let frame = Frame { kind: crate::wire::KIND, src: 0, dst: 1 };
            let mut p = self.program.admit(&frame, c.as_bytes()).unwrap();
            let mut ctx = PassContext::with_tables(&mut self.registers, &self.tables, &mut self.gid);
            let d = self.program.execute_pass(&mut ctx, &mut p);
            let Message::Control(out) = p.msg else { panic!("a control message stays one") };
            (d, out)
        }
    }

    fn msg(t: MsgType, slot: u16, tag: u16, role: Role, threshold: u8, scatter: u16) -> Control {
        let mut c = Control::new(t, slot, tag, 1, 1);
        c.entries[0] = SwitchEntry::new(role, threshold, scatter);
        c
    }

    #[test]
    fn lock_oks_are_gathered_to_the_threshold_then_scattered_and_the_counter_resets() {
        let mut sw = Bench::new(GatherScatter::new(0, true, None));
        sw.run(&msg(MsgType::Init, 5, 3, Role::Root, 1, 0));
        let ok = msg(MsgType::LockOk, 5, 3, Role::Root, 3, 0b1010);
        assert_eq!(sw.run(&ok).0, PassDecision::Drop("gathering"));
        assert_eq!(sw.run(&ok).0, PassDecision::Drop("gathering"));
        let (d, out) = sw.run(&ok);
        assert_eq!(d, PassDecision::Multicast(0b1010));
        assert_eq!(out.flags & FLAG_DOWN, FLAG_DOWN);
        let v = msg(MsgType::ValidateOk, 5, 3, Role::Root, 1, 0b1);
        assert_eq!(sw.run(&v).0, PassDecision::Multicast(1), "the counter was reset");
    }

    #[test]
    fn stale_tags_are_dropped_and_a_fail_is_multicast_once() {
        let mut sw = Bench::new(GatherScatter::new(0, true, None));
        sw.run(&msg(MsgType::Init, 9, 4, Role::Root, 1, 0));
        assert_eq!(sw.run(&msg(MsgType::LockOk, 9, 3, Role::Root, 1, 1)).0, PassDecision::Drop("stale"));
        let fail = msg(MsgType::Fail, 9, 4, Role::Root, 1, 0b111);
        assert_eq!(sw.run(&fail).0, PassDecision::Multicast(0b111));
        assert_eq!(sw.run(&fail).0, PassDecision::Drop("aborted"));
        assert_eq!(sw.run(&msg(MsgType::LockOk, 9, 4, Role::Root, 1, 1)).0, PassDecision::Drop("aborted"));
        sw.run(&msg(MsgType::Init, 9, 5, Role::Root, 1, 0));
        assert_eq!(
            sw.run(&msg(MsgType::LockOk, 9, 5, Role::Root, 1, 1)).0,
            PassDecision::Multicast(1),
            "re-init clears"
        );
    }

    #[test]
    fn a_leaf_sends_the_last_message_up_and_passes_down_messages_on() {
        let mut sw = Bench::new(GatherScatter::new(2, true, Some(6)));
        let mut init = Control::new(MsgType::Init, 1, 1, 1, 1);
        init.entries[2] = SwitchEntry::new(Role::Leaf, 1, 0);
        assert_eq!(sw.run(&init).0, PassDecision::SendTo(6));
        let mut ok = Control::new(MsgType::LockOk, 1, 1, 1, 1);
        ok.entries[2] = SwitchEntry::new(Role::Leaf, 2, 0b11000);
        assert_eq!(sw.run(&ok).0, PassDecision::Drop("gathering"));
        assert_eq!(sw.run(&ok).0, PassDecision::SendTo(6));
        ok.flags = FLAG_DOWN;
        assert_eq!(sw.run(&ok).0, PassDecision::Multicast(0b11000));
        let plain = GatherScatter::new(2, false, Some(6));
        let mut reference = Reference::default();
        assert_eq!(reference.step(&plain, &mut ok), PassDecision::Forward, "not programmable: forward");
    }

    #[test]
    fn the_sequencer_stamps_each_destination_shard_in_turn_and_multicasts_to_their_servers() {
        use crate::wire::{Sequenced, SequencedHeader, SEQUENCED_BYTES};
        use zerocopy::FromBytes;
        let mut sw = Bench::new(GatherScatter::new(0, false, None).with_sequencer());
        let txn = |mask: u64| {
            let mut h = SequencedHeader::read_from_bytes(&[0u8; SEQUENCED_BYTES][..]).unwrap();
            h.msg = MsgType::ErisTxn as u8;
            h.tag.set(5); // five threads per server: shard k on server k / 5
            h.mask.set(mask);
            Sequenced { header: h, keys: vec![(1, true)] }
        };
        let mut run = |q: Sequenced| {
            let frame = Frame { kind: crate::wire::KIND, src: 0, dst: 1 };
            let mut bytes = Vec::new();
            q.encode(&mut bytes);
            let mut p = sw.program.admit(&frame, &bytes).unwrap();
            let mut ctx = PassContext::with_tables(&mut sw.registers, &sw.tables, &mut sw.gid);
            let d = sw.program.execute_pass(&mut ctx, &mut p);
            let Message::Sequenced(q) = p.msg else { panic!("stays sequenced") };
            (d, q.header)
        };
        let (d, h) = run(txn((1 << 0) | (1 << 7) | (1 << 39)));
        assert_eq!(d, PassDecision::Multicast(0b1000_0011), "servers 0, 1 and 7");
        assert_eq!((h.seq[0].get(), h.seq[7].get(), h.seq[39].get(), h.seq[1].get()), (1, 1, 1, 0));
        assert_eq!(h.flags & FLAG_DOWN, FLAG_DOWN);
        let (_, h) = run(txn((1 << 7) | (1 << 8)));
        assert_eq!((h.seq[7].get(), h.seq[8].get()), (2, 1), "one counter per shard");
        let mut plain = Bench::new(GatherScatter::new(1, false, Some(3)));
        let frame = Frame { kind: crate::wire::KIND, src: 0, dst: 1 };
        let mut bytes = Vec::new();
        txn(1).encode(&mut bytes);
        let mut p = plain.program.admit(&frame, &bytes).unwrap();
        let mut ctx = PassContext::with_tables(&mut plain.registers, &plain.tables, &mut plain.gid);
        assert_eq!(plain.program.execute_pass(&mut ctx, &mut p), PassDecision::Forward, "only the sequencer stamps");
    }

    proptest! {
        /// On any sequence of init, gather and fail messages over a few slots, at a root or a
        /// leaf, the program decides exactly as the reference and leaves the same registers.
        #[test]
        fn the_program_matches_the_reference(
            leaf in any::<bool>(),
            steps in proptest::collection::vec((0u8..7, 0u16..3, 1u16..4, 0u8..4, any::<bool>()), 1..80),
        ) {
            let program = if leaf { GatherScatter::new(1, true, Some(3)) } else { GatherScatter::new(0, true, None) };
            let mut sw = Bench::new(program.clone());
            let mut reference = Reference::default();
            let types = [MsgType::Init, MsgType::LockOk, MsgType::ValidateOk, MsgType::ReplicateOk, MsgType::CommitOk, MsgType::Fail, MsgType::LockOk];
            for (t, slot, tag, threshold, down) in steps {
                let mut c = Control::new(types[usize::from(t)], slot, tag, 1, 1);
                c.flags = if down { FLAG_DOWN } else { 0 };
                let role = if leaf { Role::Leaf } else { Role::Root };
                c.entries[usize::from(program.switch)] = SwitchEntry::new(role, threshold, 0x105);
                let (d, out) = sw.run(&c);
                let expected = reference.step(&program, &mut c);
                prop_assert_eq!(d, expected);
                prop_assert_eq!(out, c);
            }
            for (&slot, &(tag, aborted, count)) in &reference.slots {
                let read = |array| sw.registers.read(array, u32::from(slot)).unwrap().0;
                prop_assert_eq!(read(TAG) as u16, tag);
                prop_assert_eq!(read(ABORTED) != 0, aborted);
                prop_assert_eq!(read(COUNTER) as u16, count);
            }
        }
    }
}
