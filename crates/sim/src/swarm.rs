//! One fault-swarm generator: a fuzz case's [`Faults`] drawn from a seed, limited to the faults
//! a system declares it tolerates.
//!
//! *Swarm testing* (Groce et al., ISSTA 2012) gives each case a random subset of the possible
//! faults rather than a little of everything: a case with only loss and a switch crash finds
//! bugs that a case drowning in every fault at once hides. Every system's fuzzer wants that,
//! and before this module each drew it by hand, four times over, with the same steps in
//! different orders: toggle each fault on with some chance, draw its strength, draw slow
//! links and crashes, keep crashes of one target apart.
//!
//! [`Swarm`] is those steps, once. A system declares what it tolerates ([`Tolerated`]: loss,
//! duplication, jitter, reordering, slow links, node crashes, switch crashes; a controller is
//! a node) and calls the steps in the order its cases were drawn in, each with the
//! distribution it wants ([`Pick`], [`TargetPick`]); the swarm draws a fault only if the
//! system tolerates it and (when the case toggled it, [`Swarm::toggle`]) it is on, and
//! [`Swarm::finish`] hands back the plan. A step for a fault the system does not tolerate
//! draws nothing, so one system's cases do not shift when another kind of fault is added to
//! the swarm. Partitions are not among the faults: the simulator has none yet.
//!
//! **Why the caller orders the steps.** A fuzz case is named by its seed, and a seed that
//! failed once must replay the same case for ever: the draws must stay in the order they
//! were made in. So the swarm fixes *how* each fault is drawn (which generator call, which
//! type: a count is drawn as `u32`, a time as `u64`, a list entry by its `usize` index) and
//! leaves *when* to the system; the systems' cases are the same draws in the same order as
//! before the swarm existed (`pisadb fuzz --system X --json` prints the same cases).
//!
//! The swarm draws from the caller's generator (one stream per case, seeded by the case's
//! seed, [`pisadb_core::rng::derive`]); the plan's own seed, for the per-datagram draws, is
//! the case's seed.

use crate::faults::{Crash, Faults, SlowLink, Target};
use pisadb_core::Nanos;
use rand::distr::uniform::SampleUniform;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// A kind of fault a system may tolerate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// Datagrams lost on a hop.
    Loss,
    /// Datagrams delivered twice.
    Duplication,
    /// Datagrams held for a random extra delay (in order unless reordering is tolerated).
    Jitter,
    /// Jitter that lets a later datagram overtake an earlier one.
    Reordering,
    /// One node's links slowed for a while.
    SlowLink,
    /// A host (a database node, a store, a controller) crashes and restarts from its log.
    NodeCrash,
    /// A switch crashes and is rebuilt.
    SwitchCrash,
}

/// The faults a system declares it tolerates (its oracles must hold under any mix of them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tolerated(BTreeSet<FaultKind>);

impl Tolerated {
    /// Exactly `kinds`.
    pub fn of(kinds: &[FaultKind]) -> Self {
        Self(kinds.iter().copied().collect())
    }

    /// Whether `kind` is tolerated.
    pub fn allows(&self, kind: FaultKind) -> bool {
        self.0.contains(&kind)
    }

    /// Whether a crash of `target` is tolerated.
    pub fn allows_crash_of(&self, target: Target) -> bool {
        match target {
            Target::Node(_) => self.allows(FaultKind::NodeCrash),
            Target::Switch(_) => self.allows(FaultKind::SwitchCrash),
        }
    }
}

/// How one value is drawn.
#[derive(Clone, Debug, PartialEq)]
pub enum Pick<T> {
    /// Always this value; draws nothing.
    Fixed(T),
    /// Uniform in `low..high` (half open): one `random_range` of `T`.
    Range(T, T),
    /// One of the values, equally likely: one `random_range` of a `usize` index.
    OneOf(Vec<T>),
    /// The first with probability `p`, else the second: one `random_bool(p)`.
    Coin(f64, T, T),
}

impl<T: SampleUniform + PartialOrd + Copy> Pick<T> {
    /// Draws the value from `rng`.
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> T {
        match self {
            Pick::Fixed(v) => *v,
            Pick::Range(low, high) => rng.random_range(*low..*high),
            Pick::OneOf(values) => values[rng.random_range(0..values.len())],
            Pick::Coin(p, heads, tails) => {
                if rng.random_bool(*p) {
                    *heads
                } else {
                    *tails
                }
            }
        }
    }
}

/// How a crash's target is drawn.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetPick {
    /// A node, by id.
    Node(Pick<u16>),
    /// A switch, by id.
    Switch(Pick<u16>),
    /// One of the picks, equally likely (a `usize` index), then that pick's own draw.
    OneOf(Vec<TargetPick>),
    /// The first pick with probability `p` (one `random_bool(p)`), else the second.
    Coin(f64, Box<TargetPick>, Box<TargetPick>),
}

impl TargetPick {
    /// Draws a target from `rng`.
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> Target {
        match self {
            TargetPick::Node(id) => Target::Node(id.draw(rng)),
            TargetPick::Switch(id) => Target::Switch(id.draw(rng)),
            TargetPick::OneOf(picks) => picks[rng.random_range(0..picks.len())].draw(rng),
            TargetPick::Coin(p, heads, tails) => {
                if rng.random_bool(*p) {
                    heads.draw(rng)
                } else {
                    tails.draw(rng)
                }
            }
        }
    }
}

/// How crashes of one target are kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spacing {
    /// Every crash drawn is kept, in the order drawn.
    Any,
    /// A crash whose down time touches an earlier-drawn one of the same target is dropped;
    /// the rest are sorted by time.
    Disjoint,
    /// A crash of a target that an earlier-drawn crash of it is down at or after (when it
    /// would begin) is dropped; the rest are sorted by time. Stricter than `Disjoint`: a
    /// crash drawn later must also come later.
    AfterEarlierDraws,
}

/// How a case's slow links are drawn: per link, its start, node, length and extra delay, in
/// that order.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowLinks {
    /// How many links.
    pub count: Pick<u32>,
    /// When a link slows down.
    pub from_ns: Pick<Nanos>,
    /// Whose links.
    pub node: Pick<u16>,
    /// For how long.
    pub length_ns: Pick<Nanos>,
    /// The extra delay per datagram.
    pub extra_ns: Pick<Nanos>,
}

/// How a case's crashes are drawn: per crash, its target, time and down time, in that order.
#[derive(Clone, Debug, PartialEq)]
pub struct Crashes {
    /// How many crashes are drawn (some may be dropped by `spacing`).
    pub count: Pick<u32>,
    /// What crashes.
    pub target: TargetPick,
    /// When.
    pub at_ns: Pick<Nanos>,
    /// For how long.
    pub down_ns: Pick<Nanos>,
    /// How crashes of one target are kept apart.
    pub spacing: Spacing,
}

/// A fuzz case's faults being drawn: see the module doc.
#[derive(Debug)]
pub struct Swarm<'r, R: Rng + ?Sized> {
    /// The case's generator.
    rng: &'r mut R,
    /// What the system tolerates.
    tolerated: Tolerated,
    /// The faults the case toggled, on or off; a fault never toggled is on.
    toggled: BTreeMap<FaultKind, bool>,
    /// The plan so far.
    faults: Faults,
}

impl<'r, R: Rng + ?Sized> Swarm<'r, R> {
    /// A case with no faults yet, drawing from `rng`; its per-datagram draws are seeded by
    /// `seed`.
    pub fn new(rng: &'r mut R, seed: u64, tolerated: Tolerated) -> Self {
        Self { rng, tolerated, toggled: BTreeMap::new(), faults: Faults { seed, ..Faults::default() } }
    }

    /// The case's generator, for draws of the system's own between the swarm's steps.
    pub fn rng(&mut self) -> &mut R {
        self.rng
    }

    /// Whether `kind` is tolerated and toggled on (or never toggled).
    fn on(&self, kind: FaultKind) -> bool {
        self.tolerated.allows(kind) && self.toggled.get(&kind).copied().unwrap_or(true)
    }

    /// When the faults end: from then on the network is healthy and no crash begins.
    pub fn heal(&mut self, at_ns: Pick<Nanos>) -> Nanos {
        self.faults.heal_at_ns = at_ns.draw(self.rng);
        self.faults.heal_at_ns
    }

    /// The healing time drawn so far (0 before [`Self::heal`]).
    pub fn heal_at_ns(&self) -> Nanos {
        self.faults.heal_at_ns
    }

    /// Toggles each fault on with its chance: one `random_bool` per entry, in order, whether
    /// or not the system tolerates the fault (so a case's draws do not depend on it).
    pub fn toggle(&mut self, chances: &[(FaultKind, f64)]) {
        for &(kind, p) in chances {
            let on = self.rng.random_bool(p);
            self.toggled.insert(kind, on);
        }
    }

    /// The chance that a datagram is lost on a hop, if loss is on.
    pub fn loss(&mut self, p: Pick<f64>) {
        if self.on(FaultKind::Loss) {
            self.faults.loss = p.draw(self.rng);
        }
    }

    /// The chance that a datagram is delivered twice, if duplication is on.
    pub fn duplicate(&mut self, p: Pick<f64>) {
        if self.on(FaultKind::Duplication) {
            self.faults.duplicate = p.draw(self.rng);
        }
    }

    /// The largest extra delay of a datagram, if jitter is on.
    pub fn jitter(&mut self, ns: Pick<Nanos>) {
        if self.on(FaultKind::Jitter) {
            self.faults.jitter_ns = ns.draw(self.rng);
        }
    }

    /// Whether jitter may reorder, with probability `p`, if reordering is on.
    pub fn reorder(&mut self, p: f64) {
        if self.on(FaultKind::Reordering) {
            self.faults.reorder = self.rng.random_bool(p);
        }
    }

    /// Slow links, if they are on.
    pub fn slow_links(&mut self, links: &SlowLinks) {
        if !self.on(FaultKind::SlowLink) {
            return;
        }
        for _ in 0..links.count.draw(self.rng) {
            let from_ns = links.from_ns.draw(self.rng);
            let node = links.node.draw(self.rng);
            let until_ns = from_ns + links.length_ns.draw(self.rng);
            let extra_ns = links.extra_ns.draw(self.rng);
            self.faults.slow.push(SlowLink { node, from_ns, until_ns, extra_ns });
        }
    }

    /// Crashes, if the system tolerates a crash of a node or a switch. A crash of a target
    /// the system does not tolerate is drawn (so the draws stay the same) and dropped.
    pub fn crashes(&mut self, crashes: &Crashes) {
        if !self.on(FaultKind::NodeCrash) && !self.on(FaultKind::SwitchCrash) {
            return;
        }
        let mut drawn: Vec<Crash> = Vec::new();
        for _ in 0..crashes.count.draw(self.rng) {
            let target = crashes.target.draw(self.rng);
            let at_ns = crashes.at_ns.draw(self.rng);
            let down_ns = crashes.down_ns.draw(self.rng);
            let same = |c: &&Crash| c.target == target;
            let clash = match crashes.spacing {
                Spacing::Any => false,
                Spacing::Disjoint => {
                    drawn.iter().filter(same).any(|c| c.at_ns + c.down_ns >= at_ns && at_ns + down_ns >= c.at_ns)
                }
                Spacing::AfterEarlierDraws => drawn.iter().filter(same).any(|c| c.at_ns + c.down_ns >= at_ns),
            };
            if !clash && self.tolerated.allows_crash_of(target) {
                drawn.push(Crash { target, at_ns, down_ns });
            }
        }
        if crashes.spacing != Spacing::Any {
            drawn.sort_by_key(|c| c.at_ns);
        }
        self.faults.crashes.extend(drawn);
    }

    /// The plan.
    pub fn finish(self) -> Faults {
        self.faults
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::rng::derive;

    fn everything() -> Tolerated {
        use FaultKind::*;
        Tolerated::of(&[Loss, Duplication, Jitter, Reordering, SlowLink, NodeCrash, SwitchCrash])
    }

    fn crashes(spacing: Spacing) -> Crashes {
        Crashes {
            count: Pick::Fixed(40),
            target: TargetPick::OneOf(vec![TargetPick::Node(Pick::Range(0, 3)), TargetPick::Switch(Pick::Fixed(0))]),
            at_ns: Pick::Range(0, 1_000_000),
            down_ns: Pick::Range(1_000, 100_000),
            spacing,
        }
    }

    fn case(seed: u64, tolerated: Tolerated) -> Faults {
        let mut rng = derive(seed, "swarm-test");
        let mut swarm = Swarm::new(&mut rng, seed, tolerated);
        swarm.heal(Pick::Range(1_000_000, 2_000_001));
        swarm.toggle(&[(FaultKind::Loss, 0.5), (FaultKind::Duplication, 0.5)]);
        swarm.loss(Pick::Range(0.001, 0.1));
        swarm.duplicate(Pick::OneOf(vec![0.01, 0.02]));
        swarm.jitter(Pick::Range(1_000, 10_000));
        swarm.reorder(0.5);
        let heal = swarm.heal_at_ns();
        swarm.slow_links(&SlowLinks {
            count: Pick::Range(0, 3),
            from_ns: Pick::Range(0, heal / 2),
            node: Pick::Coin(0.5, 1, 2),
            length_ns: Pick::Fixed(1_000),
            extra_ns: Pick::Range(10, 20),
        });
        swarm.crashes(&crashes(Spacing::Disjoint));
        swarm.finish()
    }

    #[test]
    fn a_seed_draws_the_same_case_and_another_seed_another() {
        assert_eq!(case(3, everything()), case(3, everything()));
        assert_ne!(case(3, everything()), case(4, everything()));
    }

    #[test]
    fn only_tolerated_faults_are_drawn() {
        for seed in 0..50 {
            let f = case(seed, Tolerated::of(&[FaultKind::Jitter, FaultKind::SwitchCrash]));
            assert_eq!((f.loss, f.duplicate, f.reorder), (0.0, 0.0, false), "seed {seed}: {f:?}");
            assert!(f.slow.is_empty() && f.jitter_ns > 0, "seed {seed}: {f:?}");
            assert!(f.crashes.iter().all(|c| c.target == Target::Switch(0)), "seed {seed}: {f:?}");
            assert_eq!(f.seed, seed);
        }
        let none = case(1, Tolerated::default());
        assert_eq!(none, Faults { seed: 1, heal_at_ns: none.heal_at_ns, ..Faults::default() });
    }

    #[test]
    fn toggled_off_faults_are_not_drawn_and_the_swarm_varies_the_mix() {
        let cases: Vec<Faults> = (0..100).map(|seed| case(seed, everything())).collect();
        assert!(cases.iter().any(|f| f.loss == 0.0) && cases.iter().any(|f| f.loss > 0.0));
        assert!(cases.iter().any(|f| f.duplicate == 0.0) && cases.iter().any(|f| f.duplicate > 0.0));
        assert!(cases.iter().all(|f| f.loss < 0.1 && [0.0, 0.01, 0.02].contains(&f.duplicate)));
        assert!(cases
            .iter()
            .flat_map(|f| &f.slow)
            .all(|s| [1, 2].contains(&s.node) && s.until_ns == s.from_ns + 1_000));
    }

    #[test]
    fn spacing_keeps_crashes_of_one_target_apart_as_declared() {
        let draw = |spacing| {
            let mut rng = derive(9, "spacing");
            let mut swarm = Swarm::new(&mut rng, 9, everything());
            swarm.crashes(&crashes(spacing));
            swarm.finish().crashes
        };
        let any = draw(Spacing::Any);
        assert_eq!(any.len(), 40, "every crash kept");
        let disjoint = draw(Spacing::Disjoint);
        let after = draw(Spacing::AfterEarlierDraws);
        assert!(after.len() <= disjoint.len() && disjoint.len() < any.len(), "{} {}", after.len(), disjoint.len());
        for kept in [&disjoint, &after] {
            assert!(kept.windows(2).all(|w| w[0].at_ns <= w[1].at_ns), "sorted");
            for (i, a) in kept.iter().enumerate() {
                for b in &kept[i + 1..] {
                    let apart = a.at_ns + a.down_ns < b.at_ns || b.at_ns + b.down_ns < a.at_ns;
                    assert!(a.target != b.target || apart, "{a:?} and {b:?} overlap");
                }
            }
        }
    }

    #[test]
    fn picks_draw_what_they_say() {
        let mut rng = derive(1, "picks");
        assert_eq!(Pick::Fixed(7u64).draw(&mut rng), 7);
        assert!((0..100).all(|_| (5..9).contains(&Pick::Range(5u16, 9).draw(&mut rng))));
        assert!((0..100).all(|_| [2u64, 4].contains(&Pick::OneOf(vec![2, 4]).draw(&mut rng))));
        assert!((0..100).all(|_| Pick::Coin(1.0, 1u32, 2).draw(&mut rng) == 1));
    }
}
