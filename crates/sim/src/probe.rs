//! A process-wide probe of the event loop, for measuring the simulator from outside.
//!
//! The simulator reads no clock (its runs must replay bit for bit), so how fast it runs is its
//! caller's to measure. A caller that wants to split a point's cost into setup (building the
//! hosts and switches, fitting a layout, generating data) and the event loop cannot see where
//! one ends inside a system's code, so the world says so: [`World::run`](crate::World::run)
//! and [`World::drain`](crate::World::drain) call the installed probe with
//! [`Phase::LoopStart`] before their first event and [`Phase::LoopEnd`] after their last.
//! What the probe does with that (read a clock, read the process's peak memory) is the
//! caller's business; with no probe installed (every run but `pisadb perf`'s) the call is an
//! uncontended read lock, twice per run.
//!
//! A point may build and run several worlds (a recovery replay, a system that runs one world
//! per phase): the probe sees every loop, in order, and sums them. The probe is a plain `fn`
//! so that the world passes no state to it; one installed probe serves every thread, so a
//! caller measuring with it runs one point at a time.

use std::sync::RwLock;

/// Where a world's event loop is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The loop is about to handle its first event.
    LoopStart {
        /// Events the world had processed before (a drain after a run starts where it ended).
        events: u64,
    },
    /// The loop handled its last event.
    LoopEnd {
        /// Events the world has processed since it was built.
        events: u64,
    },
}

/// The function called at each [`Phase`].
pub type Probe = fn(Phase);

/// The installed probe (read twice per run: a lock costs nothing here).
static PROBE: RwLock<Option<Probe>> = RwLock::new(None);

/// Installs `probe` for every world of the process, or removes it with `None`.
pub fn set_probe(probe: Option<Probe>) {
    *PROBE.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = probe;
}

/// Tells the installed probe, if any, that a loop reached `phase`.
pub(crate) fn fire(phase: Phase) {
    let probe = *PROBE.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(probe) = probe {
        probe(phase);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    static SEEN: AtomicU64 = AtomicU64::new(0);

    fn count(phase: Phase) {
        let add = match phase {
            Phase::LoopStart { events } => 1 + events,
            Phase::LoopEnd { events } => 1000 * events,
        };
        SEEN.fetch_add(add, Ordering::SeqCst);
    }

    #[test]
    fn an_installed_probe_hears_every_phase_and_a_removed_one_nothing() {
        set_probe(Some(count));
        fire(Phase::LoopStart { events: 0 });
        fire(Phase::LoopEnd { events: 7 });
        set_probe(None);
        fire(Phase::LoopStart { events: 7 });
        assert_eq!(SEEN.load(Ordering::SeqCst), 7001);
    }
}
