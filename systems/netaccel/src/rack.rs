//! The paper's setup on the simulator: a master, segments and a control plane on one switch.
//!
//! Host 0 is the master, hosts `1..=segments` the segments, host `segments + 1` the switch's
//! control plane behind its CPU port. Every host link runs at `link_gbps` (25 in Fig. 7); the
//! CPU port's link at `control_plane_gbps` (10 by default: "a single port's worth of
//! bandwidth, sometimes even less", §3.4). The switch is a Tofino 1 running [`NetAccel`] in
//! the layout (`J`, `G`) asked, sized for the scale factor; in the normal plan it only
//! forwards. A run goes until the network is empty; the response time is when the master
//! heard the last of what it waits for.
//!
//! The observer keeps the master's completion time, the control plane's counts and whether a
//! loss was detected; [`run`] then checks the segments' groups (pattern 1) or the master's
//! answer (Q20) against the plain reference and reports it as `answer_ok`.

use crate::calibration::CpuCosts;
use crate::hosts::{ControlPlane, Master, NetEvent, Plan, Query, RackHost, Segment};
use crate::layout::Layout;
use crate::offline::{build_switch, control_plane_host, segment_host, MASTER};
use crate::program::NetAccel;
use crate::scheduler::{choose_split, Estimates};
use pisadb_core::Nanos;
use pisadb_net::{Endpoint, LinkParams, Topology};
use pisadb_olap::q20::{reference, reference_pattern1};
use pisadb_olap::tpch::{distribute, generate, Q20Data, Q20Params};
use pisadb_sim::{Moment, Observer, World};
use pisadb_switch::{Switch, SwitchProfile};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bound on simulated events of one run.
pub const EVENTS_MAX: u64 = 500_000_000;

/// The settings of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RackConfig {
    /// TPC-H scale factor.
    pub sf: f64,
    /// Segments (the paper: 3).
    pub segments: u16,
    /// Join chain positions `J`.
    pub join_positions: u8,
    /// Group-by positions `G`.
    pub group_positions: u8,
    /// Line rate of every host link, Gbit/s.
    pub link_gbps: f64,
    /// Line rate of the CPU port's link to the control plane, Gbit/s.
    pub control_plane_gbps: f64,
    /// What to compute: `pattern1` (Fig. 7) or `q20` (Fig. 8).
    pub query: Query,
    /// Whether the master's network scheduler picks (J, G) from its overflow cost model
    /// (`join_positions` and `group_positions` are then ignored).
    pub schedule_split: bool,
    /// The seed of every random choice (the segments' start offsets).
    pub seed: u64,
    /// The hosts' CPU costs (measured by default: [`CpuCosts::MEASURED`]; left out when
    /// written while they are the measured ones).
    #[serde(default, skip_serializing_if = "CpuCosts::is_measured")]
    pub costs: CpuCosts,
}

impl Default for RackConfig {
    fn default() -> Self {
        RackConfig {
            sf: 0.1,
            segments: 3,
            join_positions: 2,
            group_positions: 2,
            link_gbps: 25.0,
            control_plane_gbps: 10.0,
            query: Query::Pattern1,
            schedule_split: false,
            seed: 1,
            costs: CpuCosts::MEASURED,
        }
    }
}

/// Accepted scale factors (small enough to simulate one packet per tuple).
pub const SF_RANGE: (f64, f64) = (0.001, 10.0);

impl RackConfig {
    /// Checks every setting, naming the bad one and the accepted values.
    pub fn check(&self) -> Result<(), String> {
        let (lo, hi) = SF_RANGE;
        if !(self.sf.is_finite() && (lo..=hi).contains(&self.sf)) {
            return Err(format!("sf {}: accepted {lo}..={hi}", self.sf));
        }
        if !(1..=16).contains(&self.segments) {
            return Err(format!("segments {}: accepted 1..=16", self.segments));
        }
        for (name, gbps) in [("link_gbps", self.link_gbps), ("control_plane_gbps", self.control_plane_gbps)] {
            if !(gbps.is_finite() && (1.0..=400.0).contains(&gbps)) {
                return Err(format!("{name} {gbps}: accepted 1..=400"));
            }
        }
        let layout = self.layout();
        layout.check()?;
        let profile = SwitchProfile::tofino1();
        if layout.stages() > profile.stages_per_pipe {
            return Err(format!(
                "join_positions {} + group_positions {} need {} stages (J + 2G + 1), a Tofino 1 pipe has {}: keep J + 2G <= {}",
                self.join_positions,
                self.group_positions,
                layout.stages(),
                profile.stages_per_pipe,
                profile.stages_per_pipe - 1
            ));
        }
        Ok(())
    }

    /// The switch program's shape for these settings, before the scheduler (if asked) picks
    /// the split.
    pub fn layout(&self) -> Layout {
        Layout::for_scale_factor(self.sf, self.join_positions, self.group_positions, self.segments)
    }

    /// The shape the switch is loaded with: the settings', or the scheduler's pick for `data`.
    pub fn loaded_layout(&self, data: &Q20Data) -> Layout {
        if !self.schedule_split {
            return self.layout();
        }
        let part_rows = 200_000.0 * self.sf;
        let est = Estimates::q20_pattern1(data.part_fp.rows(), data.lineitem_fp.rows(), part_rows);
        choose_split(&est, self.sf, self.segments, SwitchProfile::tofino1().stages_per_pipe)
    }
}

/// The figures of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figures {
    /// The plan that ran pattern 1.
    pub plan: Plan,
    /// The split the switch was loaded with: join positions, group positions.
    pub split: [u8; 2],
    /// Response time: when the master had what it waits for, in milliseconds.
    pub response_ms: f64,
    /// Groups of pattern 1 the segments received or computed (0 when they never reach the
    /// segments: the accelerated plan of Q20 consumes them in the switch, `orig` has none).
    pub groups: u64,
    /// Q20's answer rows (0 for pattern 1 alone).
    pub answer_rows: usize,
    /// Whether the groups (or the answer) equal the plain reference.
    pub answer_ok: bool,
    /// Whether a barrier detected lost tuples (the query then fails).
    pub loss_detected: bool,
    /// `part_FP` and `lineitem_FP` tuples.
    pub tuples: [u64; 2],
    /// Overflow tuples (i), (ii), (iii) received by the control plane.
    pub overflow: [u64; 3],
    /// (i) as % of outer tuples, (ii) and (iii) as % of inner tuples (the paper's Table 2).
    pub overflow_pct: [f64; 3],
    /// All overflow as % of all tuples (the paper's Table 1).
    pub overflow_pct_total: f64,
    /// Groups the control plane held.
    pub control_plane_groups: u64,
    /// The longest an overflow tuple waited for the control plane's core, in ms (0: one
    /// core kept up).
    pub control_plane_backlog_ms: f64,
    /// Pipeline passes (tuples, ENDs and the iterators' passes).
    pub passes: u64,
    /// Recirculations (the drain and clearing iterators).
    pub recirculations: u64,
    /// Simulated events.
    pub events: u64,
    /// The trace hash, hex.
    pub trace_hash: String,
}

/// What the observer keeps.
#[derive(Debug, Default)]
pub struct RackObserver {
    /// When the master heard that pattern 1 is complete everywhere.
    pattern1_ns: Option<Nanos>,
    /// When the master had Q20's answer.
    answer_ns: Option<Nanos>,
    /// Groups the master counted.
    groups: u64,
    /// Answer rows.
    answer_rows: usize,
    /// Whether a loss was detected.
    loss: bool,
    /// The control plane's counts: overflow by type, groups, longest wait for its core.
    control_plane: Option<([u64; 3], u64, u64)>,
    /// Datagrams ignored, by reason.
    ignored: BTreeMap<&'static str, u64>,
}

impl RackObserver {
    /// Keeps what `event`, seen at `at`, says (the simulator's and real mode's one path).
    pub fn record(&mut self, event: NetEvent, at: Nanos) {
        match event {
            NetEvent::Pattern1Complete { groups } => {
                self.groups = groups;
                self.pattern1_ns = Some(at);
            }
            NetEvent::Answered { rows } => {
                self.answer_rows = rows;
                self.answer_ns = Some(at);
            }
            NetEvent::LossDetected => self.loss = true,
            NetEvent::ControlPlaneDone { received, groups, backlog_ns_max } => {
                self.control_plane = Some((received, groups, backlog_ns_max))
            }
            NetEvent::Ignored(why) => *self.ignored.entry(why).or_default() += 1,
        }
    }

    /// When the query `query` completed (the master heard the last of it), if it did.
    pub fn completed_ns(&self, query: Query) -> Option<Nanos> {
        match query {
            Query::Pattern1 => self.pattern1_ns,
            Query::Q20 => self.answer_ns,
        }
    }

    /// Whether a barrier detected lost tuples.
    pub fn loss_detected(&self) -> bool {
        self.loss
    }

    /// The control plane's overflow tuples by type, its groups and the longest wait for its
    /// core (zeros if it did not report).
    pub fn control_plane(&self) -> ([u64; 3], u64, u64) {
        self.control_plane.unwrap_or(([0; 3], 0, 0))
    }

    /// Groups and answer rows the master counted.
    pub fn counted(&self) -> (u64, usize) {
        (self.groups, self.answer_rows)
    }

    /// Datagrams ignored, by reason.
    pub fn ignored(&self) -> &BTreeMap<&'static str, u64> {
        &self.ignored
    }
}

impl Observer<RackHost, Switch<NetAccel>> for RackObserver {
    fn on_event(&mut self, _host: u16, event: NetEvent, moment: Moment) -> Result<(), String> {
        self.record(event, moment.at);
        Ok(())
    }
}

/// The error of a query whose barrier counted fewer tuples than were sent.
pub const LOSS_ERROR: &str = "tuples were lost between the segments and the switch (a barrier's per-stream counts disagree): the query fails rather than answer from incomplete input";

/// Overflow as the paper's tables give it: (i) as % of outer tuples, (ii) and (iii) as % of
/// inner tuples (Table 2), and all overflow as % of all tuples (Table 1).
pub fn overflow_shares(overflow: [u64; 3], tuples: [u64; 2]) -> ([f64; 3], f64) {
    let pct = |n: u64, of: u64| if of == 0 { 0.0 } else { 100.0 * n as f64 / of as f64 };
    let by_type = [pct(overflow[0], tuples[0]), pct(overflow[1], tuples[1]), pct(overflow[2], tuples[1])];
    (by_type, pct(overflow.iter().sum(), tuples[0] + tuples[1]))
}

/// Whether pattern 1's groups, as (`l_partkey`, `l_suppkey`, `sum_qty`) rows from every
/// segment, equal the plain reference over `data`.
pub fn groups_equal_reference(rows: impl IntoIterator<Item = [i64; 3]>, data: &Q20Data) -> bool {
    let got: BTreeMap<(i64, i64), i64> = rows.into_iter().map(|[p, s, q]| ((p, s), q)).collect();
    got == reference_pattern1(data)
}

/// A segment's groups as rows.
pub fn group_rows(segment: &Segment) -> impl Iterator<Item = [i64; 3]> + '_ {
    let g = segment.groups();
    (0..g.rows()).map(move |i| {
        let r = g.row(i);
        [r[0], r[1], r[2]]
    })
}

/// The simulated rack of one run.
pub type RackWorld = World<RackHost, Switch<NetAccel>, RackObserver>;

/// The world of one run, not started, and the data it runs on.
pub fn build(plan: Plan, cfg: &RackConfig) -> Result<(RackWorld, Q20Data), String> {
    cfg.check()?;
    let data = generate(cfg.sf, &Q20Params::validation()).map_err(|e| e.to_string())?;
    let world = build_with(plan, cfg, &data, cfg.costs)?;
    Ok((world, data))
}

/// The world of one run over `data` with `costs`.
pub fn build_with(plan: Plan, cfg: &RackConfig, data: &Q20Data, costs: CpuCosts) -> Result<RackWorld, String> {
    cfg.check()?;
    if plan == Plan::Orig && cfg.query != Query::Q20 {
        return Err(
            "variant orig is Greenplum's plan for the whole of Q20: set query=q20 (accepted for orig: q20)".into()
        );
    }
    let n = cfg.segments;
    let link = LinkParams { gbps: cfg.link_gbps, ..LinkParams::twenty_five_gbe() };
    let cpu_link = LinkParams { gbps: cfg.control_plane_gbps, ..LinkParams::ten_gbe() };
    let mut topology = Topology::default();
    topology.connect(Endpoint::Host(MASTER), Endpoint::Switch(0), &link);
    for s in 0..n {
        topology.connect(Endpoint::Host(segment_host(s)), Endpoint::Switch(0), &link);
    }
    topology.connect(Endpoint::Host(control_plane_host(n)), Endpoint::Switch(0), &cpu_link);
    let switch = rack_switch(plan, cfg, data)?;
    let hosts = hosts(plan, cfg, data, costs);
    let mut world = World::new(topology, hosts, vec![switch], RackObserver::default()).map_err(|e| e.to_string())?;
    world.set_controller(0, control_plane_host(n));
    Ok(world)
}

/// The hosts of one run over `data`, by id: the master, the segments (each with its share
/// of the tables), the control plane.
pub fn hosts(plan: Plan, cfg: &RackConfig, data: &Q20Data, costs: CpuCosts) -> Vec<RackHost> {
    let n = cfg.segments;
    let mut rng = pisadb_core::rng::derive(cfg.seed, "segment-start");
    let mut hosts = vec![RackHost::Master(Master::new(n, cfg.query, data.supplier_text.clone()))];
    for (s, share) in distribute(data, usize::from(n)).into_iter().enumerate() {
        let start_ns = rng.random_range(0..1_000);
        let seg = Segment::new(s as u16, n, plan, cfg.query, costs, share, data.nation_key, start_ns);
        hosts.push(RackHost::Segment(Box::new(seg)));
    }
    hosts.push(RackHost::ControlPlane(ControlPlane::new(n, costs, reloads(plan, cfg))));
    hosts
}

/// Whether the switch keeps pattern 1's groups as pattern 2's join state (the accelerated
/// plan of the whole of Q20).
fn reloads(plan: Plan, cfg: &RackConfig) -> bool {
    plan == Plan::Accelerated && cfg.query == Query::Q20
}

/// The rack's switch for `plan` over `data`: the NetAccel program in the layout loaded (the
/// settings' or the scheduler's); in the normal and orig plans it only forwards.
pub fn rack_switch(plan: Plan, cfg: &RackConfig, data: &Q20Data) -> Result<Switch<NetAccel>, String> {
    build_switch(SwitchProfile::tofino1(), cfg.loaded_layout(data), reloads(plan, cfg))
}

/// Runs one point to completion and returns its figures.
pub fn run(plan: Plan, cfg: &RackConfig) -> Result<Figures, String> {
    let (world, data) = build(plan, cfg)?;
    finish(plan, cfg, world, &data)
}

/// Runs a built world to completion and checks its answer against the reference.
pub fn finish(plan: Plan, cfg: &RackConfig, mut world: RackWorld, data: &Q20Data) -> Result<Figures, String> {
    world.run(0, Nanos::MAX / 2, EVENTS_MAX).map_err(|e| e.to_string())?;
    let obs = world.observer();
    if obs.loss {
        return Err(LOSS_ERROR.into());
    }
    let done_ns = obs
        .completed_ns(cfg.query)
        .ok_or_else(|| format!("the query did not complete (ignored datagrams: {:?})", obs.ignored))?;
    let answer_ok = match cfg.query {
        Query::Pattern1 => {
            let segments = world.hosts().iter().filter_map(|h| match h {
                RackHost::Segment(s) => Some(s),
                _ => None,
            });
            groups_equal_reference(segments.flat_map(|s| group_rows(s)), data)
        }
        Query::Q20 => match &world.hosts()[usize::from(MASTER)] {
            RackHost::Master(m) => m.answer() == Some(reference(data).as_slice()),
            _ => false,
        },
    };
    let (overflow, control_plane_groups, backlog_ns) = obs.control_plane();
    let tuples = [data.part_fp.rows() as u64, data.lineitem_fp.rows() as u64];
    let (overflow_pct, overflow_pct_total) = overflow_shares(overflow, tuples);
    let stats = world.switch(0).stats().clone();
    let layout = *world.switch(0).program().layout();
    Ok(Figures {
        plan,
        split: [layout.join_positions, layout.group_positions],
        response_ms: done_ns as f64 / 1e6,
        groups: obs.groups,
        answer_rows: obs.answer_rows,
        answer_ok,
        loss_detected: obs.loss,
        tuples,
        overflow,
        overflow_pct,
        overflow_pct_total,
        control_plane_groups,
        control_plane_backlog_ms: backlog_ns as f64 / 1e6,
        passes: stats.passes,
        recirculations: stats.recirculations,
        events: world.events_processed(),
        trace_hash: format!("{:016x}", world.trace_hash()),
    })
}
