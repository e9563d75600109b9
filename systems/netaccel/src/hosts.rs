//! The hosts: a master, the segments of the MPP database, and the switch's control plane.
//!
//! All three are sans-IO state machines ([`pisadb_host::Host`]) with one core each; a handler
//! does the work for real (the executor's operators over the segment's rows, the control
//! plane's joins) and charges the CPU time the calibrated costs give ([`CpuCosts`]) — never a
//! clock.
//!
//! ## The normal plan of pattern 1 (Fig. 7a)
//!
//! Each segment broadcasts its `part_FP` rows to the others (a motion: batches of rows in
//! datagrams). When it has every segment's, it joins them with its `lineitem_FP` and
//! aggregates by (partkey, suppkey) — its share of the groups, since `lineitem_FP` is
//! distributed over that pair — and tells the master.
//!
//! ## The accelerated plan (Fig. 7b)
//!
//! Each segment's *deparse* operator streams its `part_FP` keys to the switch, one tuple per
//! packet, in chunks of [`DEPARSE_CHUNK`] per handler (so the NIC sends while the CPU
//! encodes), then its END; at the switch's `Go` it streams its `lineitem_FP` tuples and END.
//! Its *receive* operator collects the groups the switch drains to it and those the control
//! plane sends it; when the switch announced the end of its drain and the control plane's last
//! batch is in, its share of the groups is complete and it tells the master.
//!
//! ## Q20 after pattern 1
//!
//! With the `q20` query the normal plan goes on from the groups with its steps 2 and 3
//! ([`pisadb_olap::q20`]): pattern 2 with the local `partsupp`, a redistribution of the
//! distinct `suppkey`s, the tail, and a gather of the answer at the master. The accelerated
//! plan runs pattern 2 in the switch too: the switch keeps pattern 1's groups (reloading), and
//! at its second `Go` each segment deparses its `partsupp`; the rows that pass arrive at the
//! segment that owns their `suppkey`, from the switch and from the control plane, and the tail
//! runs on them.
//!
//! The master only counts: its completion time is the response time.

use crate::calibration::{ns, CpuCosts};
use crate::offline::{control_plane_host, segment_host, MASTER};
use crate::overflow::Overflow;
use crate::wire::{Motion, Msg, Op, Stream, LOSS};
use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route, Send};
use pisadb_olap::batch::Batch;
use pisadb_olap::keytable::pack2;
use pisadb_olap::ops::segment_of;
use pisadb_olap::q20::{answer_rows, orig_local, pattern1_counted, pattern2_local, tail_local, AnswerRow};
use pisadb_olap::tpch::SegmentData;
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use serde::{Deserialize, Serialize};

/// Tuples the deparse operator encodes per handler.
pub const DEPARSE_CHUNK: usize = 64;

/// Which plan runs pattern 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Plan {
    /// Broadcast `part_FP`, hash join and hash aggregation on the segments.
    Normal,
    /// Both relations through the switch.
    Accelerated,
    /// Greenplum's own plan for Q20 (the paper's "orig"): `part_FP` ⋈ `partsupp` first, all of
    /// `lineitem_FP` aggregated before the join (Q20 only).
    Orig,
}

/// What the run computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Query {
    /// Pattern 1 only (Fig. 7): done when every segment holds its groups.
    Pattern1,
    /// The whole of Q20 (Fig. 8): done when the master has the answer.
    Q20,
}

/// The hosts' timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// Encode and send the next chunk of the stream being deparsed.
    Deparse,
    /// The control plane's core reached its sends.
    Flush,
}

impl TraceBytes for Tick {
    fn trace(&self, hash: &mut TraceHash) {
        hash.write(match self {
            Tick::Deparse => b"deparse",
            Tick::Flush => b"flush",
        });
    }
}

/// What the hosts report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetEvent {
    /// The master heard from every segment that pattern 1 is complete.
    Pattern1Complete {
        /// Groups over all segments.
        groups: u64,
    },
    /// The master has Q20's answer.
    Answered {
        /// Answer rows.
        rows: usize,
    },
    /// A barrier reported lost tuples: the query fails rather than answer wrongly.
    LossDetected,
    /// The control plane finished its overflow work.
    ControlPlaneDone {
        /// Overflow tuples received by type (i), (ii), (iii).
        received: [u64; 3],
        /// Groups it held.
        groups: u64,
        /// The longest an overflow tuple waited for its core, in ns.
        backlog_ns_max: u64,
    },
    /// A datagram a host could not use.
    Ignored(&'static str),
}

/// A segment of the MPP database.
#[derive(Debug)]
pub struct Segment {
    /// Its index (0-based); its host id is `index + 1`.
    index: u16,
    /// Segments in the rack.
    segments: u16,
    /// The plan of pattern 1.
    plan: Plan,
    /// The query.
    query: Query,
    /// CPU costs.
    costs: CpuCosts,
    /// Its rows.
    data: SegmentData,
    /// The nation parameter's key.
    nation_key: i64,
    /// When it starts (a seeded offset, so segments do not move in lockstep).
    start_ns: Nanos,
    /// `part_FP` rows received so far (normal plan).
    part_all: Batch,
    /// Segments whose `part_FP` is in.
    part_sources: u16,
    /// Its groups of pattern 1: `l_partkey`, `l_suppkey`, `sum_qty`.
    groups: Batch,
    /// The stream being deparsed and the next row of it.
    deparse: Option<(Op, usize)>,
    /// Whether the switch announced the end of its drain.
    switch_drained: bool,
    /// Whether the control plane's last batch is in.
    control_plane_done: bool,
    /// Whether a barrier reported lost tuples.
    loss: bool,
    /// Whether pattern 1 is complete here.
    pattern1_done: bool,
    /// `suppkey`s received by the redistribution of pattern 2.
    suppkeys: Batch,
    /// Segments whose `suppkey`s are in.
    suppkey_sources: u16,
    /// Whether the switch keeps pattern 1's groups for pattern 2 (the accelerated plan of Q20).
    reload: bool,
    /// The least time between two deparsed tuples (0: as fast as the host runs). The
    /// simulator needs none, since the link serializes each tuple at its line rate; on
    /// loopback nothing does, and a software switch fed faster than it forwards drops
    /// datagrams, so real mode paces the stream here ([`Segment::pace`]).
    tuple_gap_ns: Nanos,
}

impl Segment {
    /// Segment `index` of `segments` holding `data`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        index: u16,
        segments: u16,
        plan: Plan,
        query: Query,
        costs: CpuCosts,
        data: SegmentData,
        nation_key: i64,
        start_ns: Nanos,
    ) -> Self {
        Segment {
            index,
            segments,
            plan,
            query,
            costs,
            data,
            nation_key,
            start_ns,
            part_all: Batch::empty(&["p_partkey"]),
            part_sources: 0,
            groups: Batch::empty(&["l_partkey", "l_suppkey", "sum_qty"]),
            deparse: None,
            switch_drained: false,
            control_plane_done: false,
            loss: false,
            pattern1_done: false,
            suppkeys: Batch::empty(&["ps_suppkey"]),
            suppkey_sources: 0,
            reload: plan == Plan::Accelerated && query == Query::Q20,
            tuple_gap_ns: 0,
        }
    }

    /// Paces the deparse operator: at least `tuple_gap_ns` between two tuples it streams.
    pub fn pace(&mut self, tuple_gap_ns: Nanos) {
        self.tuple_gap_ns = tuple_gap_ns;
    }

    /// Its groups of pattern 1 (complete once the master heard from it).
    pub fn groups(&self) -> &Batch {
        &self.groups
    }

    fn host(&self) -> u16 {
        segment_host(self.index)
    }

    fn send_motions(&self, to: u16, stream: Stream, width: u8, values: &[u32], out: &mut HostOutbox<RackHost>) {
        for m in Motion::batches(stream, self.host(), width, values) {
            out.cpu_ns += ns(1, self.costs.stack_ns_per_datagram)
                + ns(m.values.len() / usize::from(width), self.costs.motion_ns_per_row);
            out.sends.push(motion_send(self.host(), to, &m));
        }
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<RackHost>) {
        match self.plan {
            Plan::Normal | Plan::Orig => {
                let keys: Vec<u32> = self.data.part_fp.col("p_partkey").iter().map(|&k| k as u32).collect();
                for other in (0..self.segments).filter(|&s| s != self.index) {
                    self.send_motions(segment_host(other), Stream::PartFp, 1, &keys, out);
                }
                let own = self.data.part_fp.clone();
                self.part_all.append(&own);
                self.part_arrived(out);
            }
            Plan::Accelerated => {
                self.deparse = Some((Op::Outer, 0));
                out.timers.push((now + self.start_ns, Tick::Deparse));
            }
        }
    }

    fn part_arrived(&mut self, out: &mut HostOutbox<RackHost>) {
        self.part_sources += 1;
        if self.part_sources < self.segments {
            return;
        }
        if self.plan == Plan::Orig {
            let (distinct, rows) = orig_local(&self.part_all, &self.data.lineitem_fp, &self.data.partsupp);
            out.cpu_ns += ns(rows, self.costs.aggregate_ns_per_row)
                + ns(self.data.partsupp.rows(), self.costs.join_probe_ns_per_row);
            self.pattern1_done = true;
            self.send_motions(MASTER, Stream::Pattern1Done, 2, &[0, 0], out);
            return self.redistribute_suppkeys(&distinct, out);
        }
        let (groups, joined) = pattern1_counted(&self.part_all, &self.data.lineitem_fp);
        self.groups = groups;
        // The build side (`part_FP`, about 1% of parts) is charged as probe rows too: inserting
        // and probing an open-addressing table cost about the same.
        out.cpu_ns += ns(self.data.lineitem_fp.rows() + self.part_all.rows(), self.costs.join_probe_ns_per_row)
            + ns(joined, self.costs.aggregate_ns_per_row);
        self.finish_pattern1(out);
    }

    fn deparse_chunk(&mut self, now: Nanos, out: &mut HostOutbox<RackHost>) {
        let Some((op, next)) = self.deparse else { return };
        let (batch, cols, end_op) = match op {
            Op::Outer => (&self.data.part_fp, ["p_partkey", "p_partkey", "p_partkey"], Op::EndOuter),
            Op::Inner => (&self.data.lineitem_fp, ["l_partkey", "l_suppkey", "l_quantity"], Op::EndInner),
            _ => (&self.data.partsupp, ["ps_partkey", "ps_suppkey", "ps_availqty"], Op::EndProbe),
        };
        let rows = batch.rows();
        let end = (next + DEPARSE_CHUNK).min(rows);
        let (a, b, c) = (batch.col(cols[0]), batch.col(cols[1]), batch.col(cols[2]));
        for row in next..end {
            let m = if op == Op::Outer {
                Msg::new(op, self.index, a[row] as u32, 0, 0)
            } else {
                Msg::new(op, self.index, a[row] as u32, b[row] as u32, c[row] as u32)
            };
            out.sends.push(tuple_send(self.host(), &m));
        }
        out.cpu_ns += ns(end - next, self.costs.deparse_ns_per_tuple);
        if end < rows {
            self.deparse = Some((op, end));
            out.timers.push((now + (end - next) as Nanos * self.tuple_gap_ns, Tick::Deparse));
            return;
        }
        out.sends.push(tuple_send(self.host(), &Msg::new(end_op, self.index, rows as u32, 0, 0)));
        self.deparse = None;
    }

    fn on_switch(&mut self, now: Nanos, m: Msg, out: &mut HostOutbox<RackHost>) {
        self.loss |= m.loss();
        match m.op {
            Op::Go => {
                self.deparse = Some((if m.index == 2 { Op::Probe } else { Op::Inner }, 0));
                out.timers.push((now, Tick::Deparse));
            }
            Op::Probe => {
                self.suppkeys.push_row(&[i64::from(m.b)]);
                out.cpu_ns += ns(1, self.costs.receive_ns_per_tuple);
            }
            Op::Drain => {
                self.groups.push_row(&[i64::from(m.a), i64::from(m.b), i64::from(m.c)]);
                out.cpu_ns += ns(1, self.costs.receive_ns_per_tuple);
            }
            Op::Clear => {
                self.switch_drained = true;
                self.maybe_complete_accelerated(out);
            }
            _ => out.events.push(NetEvent::Ignored("tuple_op_at_a_segment")),
        }
    }

    fn maybe_complete_accelerated(&mut self, out: &mut HostOutbox<RackHost>) {
        if !self.switch_drained || !self.control_plane_done || self.pattern1_done {
            return;
        }
        if !self.reload {
            return self.finish_pattern1(out);
        }
        // Both patterns ran in the switch: what arrived are pattern 2's rows, redistributed
        // by suppkey; the master hears of a loss, then the tail runs.
        self.pattern1_done = true;
        let report = [0, u32::from(self.loss)];
        self.send_motions(MASTER, Stream::Pattern1Done, 2, &report, out);
        self.finish_tail(out);
    }

    fn finish_pattern1(&mut self, out: &mut HostOutbox<RackHost>) {
        self.pattern1_done = true;
        let report = [self.groups.rows() as u32, u32::from(self.loss)];
        self.send_motions(MASTER, Stream::Pattern1Done, 2, &report, out);
        if self.query == Query::Q20 {
            let distinct = pattern2_local(&self.groups, &self.data.partsupp);
            out.cpu_ns += ns(self.data.partsupp.rows(), self.costs.pattern2_ns_per_row);
            self.redistribute_suppkeys(&distinct, out);
        }
    }

    /// Pattern 2's motion: each distinct `suppkey` to the segment that owns it.
    fn redistribute_suppkeys(&mut self, distinct: &Batch, out: &mut HostOutbox<RackHost>) {
        {
            let keys = distinct.col("ps_suppkey");
            for to in 0..self.segments {
                let mine: Vec<u32> = keys
                    .iter()
                    .filter(|&&k| segment_of(k as u64, usize::from(self.segments)) == usize::from(to))
                    .map(|&k| k as u32)
                    .collect();
                if to == self.index {
                    self.suppkeys_arrived(&mine, out);
                } else {
                    self.send_motions(segment_host(to), Stream::Suppkeys, 1, &mine, out);
                }
            }
        }
    }

    fn suppkeys_arrived(&mut self, keys: &[u32], out: &mut HostOutbox<RackHost>) {
        for &k in keys {
            self.suppkeys.push_row(&[i64::from(k)]);
        }
        self.suppkey_sources += 1;
        if self.suppkey_sources == self.segments {
            self.finish_tail(out);
        }
    }

    /// The tail: the distinct `suppkey`s received, of suppliers in the nation, to the master.
    fn finish_tail(&mut self, out: &mut HostOutbox<RackHost>) {
        let found = tail_local(&self.suppkeys, &self.data.supplier, self.nation_key);
        out.cpu_ns += ns(self.suppkeys.rows() + self.data.supplier.rows(), self.costs.aggregate_ns_per_row);
        let keys: Vec<u32> = found.col("s_suppkey").iter().map(|&k| k as u32).collect();
        self.send_motions(MASTER, Stream::Answer, 1, &keys, out);
    }

    fn on_motion(&mut self, m: Motion, out: &mut HostOutbox<RackHost>) {
        let rows = m.values.len() / usize::from(m.width.max(1));
        out.cpu_ns += ns(1, self.costs.stack_ns_per_datagram) + ns(rows, self.costs.motion_ns_per_row);
        match m.stream {
            Stream::PartFp => {
                for &k in &m.values {
                    self.part_all.push_row(&[i64::from(k)]);
                }
                if m.last {
                    self.part_arrived(out);
                }
            }
            Stream::CpSuppkeys => {
                for &k in &m.values {
                    self.suppkeys.push_row(&[i64::from(k)]);
                }
                if m.last {
                    self.control_plane_done = true;
                    self.maybe_complete_accelerated(out);
                }
            }
            Stream::CpGroups => {
                for g in m.values.chunks_exact(3) {
                    self.groups.push_row(&[i64::from(g[0]), i64::from(g[1]), i64::from(g[2])]);
                }
                if m.last {
                    self.control_plane_done = true;
                    self.maybe_complete_accelerated(out);
                }
            }
            Stream::Suppkeys => {
                if m.last {
                    self.suppkeys_arrived(&m.values, out);
                } else {
                    for &k in &m.values {
                        self.suppkeys.push_row(&[i64::from(k)]);
                    }
                }
            }
            Stream::Pattern1Done | Stream::Answer => out.events.push(NetEvent::Ignored("master_stream_at_a_segment")),
        }
    }
}

/// The master: it counts segments done and gathers the answer.
#[derive(Debug)]
pub struct Master {
    /// Segments in the rack.
    segments: u16,
    /// The query.
    query: Query,
    /// Segments done with pattern 1.
    pattern1_done: u16,
    /// Groups they reported.
    groups: u64,
    /// Whether any reported lost tuples.
    loss: bool,
    /// Answer `s_suppkey`s gathered.
    answer: Batch,
    /// Segments whose answer is in.
    answer_sources: u16,
    /// `s_name`, `s_address` by `s_suppkey - 1`.
    supplier_text: Vec<(String, String)>,
    /// The answer, once complete.
    rows: Option<Vec<AnswerRow>>,
}

impl Master {
    /// The master of `segments` segments running `query`.
    pub fn new(segments: u16, query: Query, supplier_text: Vec<(String, String)>) -> Self {
        Master {
            segments,
            query,
            pattern1_done: 0,
            groups: 0,
            loss: false,
            answer: Batch::empty(&["s_suppkey"]),
            answer_sources: 0,
            supplier_text,
            rows: None,
        }
    }

    /// Q20's answer, once complete.
    pub fn answer(&self) -> Option<&[AnswerRow]> {
        self.rows.as_deref()
    }

    fn on_motion(&mut self, m: Motion, out: &mut HostOutbox<RackHost>) {
        match m.stream {
            Stream::Pattern1Done => {
                self.pattern1_done += 1;
                self.groups += u64::from(m.values.first().copied().unwrap_or(0));
                if m.values.get(1).copied().unwrap_or(0) != 0 && !self.loss {
                    self.loss = true;
                    out.events.push(NetEvent::LossDetected);
                }
                if self.pattern1_done == self.segments && !self.loss {
                    out.events.push(NetEvent::Pattern1Complete { groups: self.groups });
                }
            }
            Stream::Answer => {
                for &k in &m.values {
                    self.answer.push_row(&[i64::from(k)]);
                }
                if m.last {
                    self.answer_sources += 1;
                }
                if self.answer_sources == self.segments && self.query == Query::Q20 && !self.loss {
                    let rows = answer_rows(&self.answer, &self.supplier_text);
                    out.events.push(NetEvent::Answered { rows: rows.len() });
                    self.rows = Some(rows);
                }
            }
            _ => out.events.push(NetEvent::Ignored("segment_stream_at_the_master")),
        }
    }
}

/// The switch's control plane: one core that joins and aggregates the overflow.
///
/// It keeps its own run queue: each overflow tuple is served in arrival order on its one core
/// (`busy_until` advances by the tuple's cost), its state changes at once, and what it sends
/// leaves when the core gets to it (a timer). That is exactly a single-threaded FIFO server,
/// and it spares the simulator its per-core wait, which re-schedules every waiting datagram
/// each time the core frees (quadratic in the tens of thousands of tuples that can queue here).
#[derive(Default)]
pub struct ControlPlane {
    /// Segments in the rack (its groups go to their owners).
    segments: u16,
    /// Its join table and groups.
    overflow: Overflow,
    /// CPU costs.
    costs: CpuCosts,
    /// When its core has served everything that arrived so far.
    busy_until: Nanos,
    /// The longest any tuple waited for the core, in ns (0: it kept up).
    backlog_ns_max: Nanos,
    /// What it sends when the core gets to it.
    pending: Vec<Send>,
    /// Whether the switch reloads pattern 1's groups (the control plane then answers pattern
    /// 2's probes and sends `suppkey`s instead of groups).
    reload: bool,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ControlPlane {{ received: {:?}, busy_until: {} }}", self.overflow.received, self.busy_until)
    }
}

impl ControlPlane {
    /// The control plane of a rack of `segments`.
    pub fn new(segments: u16, costs: CpuCosts, reload: bool) -> Self {
        ControlPlane { segments, costs, reload, ..ControlPlane::default() }
    }

    /// Its overflow work.
    pub fn overflow(&self) -> &Overflow {
        &self.overflow
    }

    fn serve(&mut self, now: Nanos, cost_ns: Nanos) {
        let start = self.busy_until.max(now);
        self.backlog_ns_max = self.backlog_ns_max.max(start - now);
        self.busy_until = start + cost_ns;
    }

    fn on_switch(&mut self, now: Nanos, m: Msg, out: &mut HostOutbox<RackHost>) {
        self.serve(now, ns(1, self.costs.stack_ns_per_datagram) + ns(1, self.costs.control_plane_ns_per_tuple));
        match m.op {
            Op::Drain => {}
            // Pattern 1's input is complete; its groups stay here for pattern 2's probes.
            Op::Go => return,
            _ => {
                if !self.overflow.take(&m) {
                    out.events.push(NetEvent::Ignored("control_plane_tuple_without_overflow_type"));
                }
                return;
            }
        }
        // The input is complete: every group (or, reloading, every passing row's suppkey)
        // goes to the segment that owns it.
        let n = usize::from(self.segments);
        let mut per_segment: Vec<Vec<u32>> = vec![Vec::new(); n];
        let (stream, width) = if self.reload { (Stream::CpSuppkeys, 1) } else { (Stream::CpGroups, 3) };
        if self.reload {
            for &(_, sk, _) in self.overflow.passing() {
                per_segment[segment_of(u64::from(sk), n)].push(sk);
            }
        } else {
            for &(pk, sk, sum) in self.overflow.groups() {
                per_segment[segment_of(pack2(i64::from(pk), i64::from(sk)), n)].extend([pk, sk, sum as u32]);
            }
        }
        let me = control_plane_host(self.segments);
        for (s, values) in per_segment.iter().enumerate() {
            for batch in Motion::batches(stream, me, width, values) {
                let rows = batch.values.len() / usize::from(width);
                let cost = ns(1, self.costs.stack_ns_per_datagram) + ns(rows, self.costs.motion_ns_per_row);
                self.serve(now, cost);
                self.pending.push(motion_send(me, segment_host(s as u16), &batch));
            }
        }
        out.timers.push((self.busy_until, Tick::Flush));
    }

    fn flush(&mut self, out: &mut HostOutbox<RackHost>) {
        out.sends.append(&mut self.pending);
        out.events.push(NetEvent::ControlPlaneDone {
            received: self.overflow.received,
            groups: self.overflow.groups().len() as u64,
            backlog_ns_max: self.backlog_ns_max,
        });
    }
}

/// A datagram carrying a motion from `from` to `to` (forwarded by the switch).
fn motion_send(from: u16, to: u16, m: &Motion) -> Send {
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: from, dst: to }.encode(&mut bytes);
    m.encode(&mut bytes);
    Send { dst: to, bytes }
}

/// A tuple packet from segment host `from` to the switch.
fn tuple_send(from: u16, m: &Msg) -> Send {
    let mut bytes = Vec::new();
    Frame { kind: crate::wire::KIND, src: from, dst: SWITCH_ID }.encode(&mut bytes);
    m.encode(&mut bytes);
    Send { dst: SWITCH_ID, bytes }
}

/// A host of the rack.
#[derive(Debug)]
pub enum RackHost {
    /// The master (host 0).
    Master(Master),
    /// A segment (hosts 1..=segments).
    Segment(Box<Segment>),
    /// The control plane (the host after the segments, behind the CPU port).
    ControlPlane(ControlPlane),
}

impl Host for RackHost {
    type Timer = Tick;
    type Log = ();
    type Event = NetEvent;

    fn cores(&self) -> u16 {
        1
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        if let RackHost::Segment(s) = self {
            s.start(now, out);
        }
    }

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::Core(0)
    }

    fn timer_core(&self, _timer: &Tick) -> u16 {
        0
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        let Ok((frame, payload)) = Frame::decode(bytes) else {
            return out.events.push(NetEvent::Ignored("malformed_frame"));
        };
        match frame.kind {
            crate::wire::KIND => {
                let Ok(m) = Msg::decode(payload) else { return out.events.push(NetEvent::Ignored("malformed_tuple")) };
                match self {
                    RackHost::Segment(s) => s.on_switch(now, m, out),
                    RackHost::ControlPlane(c) => c.on_switch(now, m, out),
                    RackHost::Master(master) => {
                        if m.op == Op::Go && m.flags & LOSS != 0 && !master.loss {
                            master.loss = true;
                            out.events.push(NetEvent::LossDetected);
                        }
                    }
                }
            }
            Kind::FORWARD => {
                let Ok(m) = Motion::decode(payload) else {
                    return out.events.push(NetEvent::Ignored("malformed_motion"));
                };
                match self {
                    RackHost::Segment(s) => s.on_motion(m, out),
                    RackHost::Master(master) => master.on_motion(m, out),
                    RackHost::ControlPlane(_) => out.events.push(NetEvent::Ignored("motion_at_the_control_plane")),
                }
            }
            _ => out.events.push(NetEvent::Ignored("foreign_kind")),
        }
    }

    fn handle_timer(&mut self, now: Nanos, timer: Tick, out: &mut HostOutbox<Self>) {
        match (self, timer) {
            (RackHost::Segment(s), Tick::Deparse) => s.deparse_chunk(now, out),
            (RackHost::ControlPlane(c), Tick::Flush) => c.flush(out),
            _ => out.events.push(NetEvent::Ignored("timer_at_a_host_without_one")),
        }
    }

    fn stop(&mut self) {}

    fn is_idle(&self) -> bool {
        match self {
            RackHost::Segment(s) => s.deparse.is_none(),
            _ => true,
        }
    }
}
