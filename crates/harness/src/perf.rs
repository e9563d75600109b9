//! What `pisadb perf` needs of a system beyond its points: how to grow its network, and how
//! many transactions a point committed.
//!
//! `pisadb perf` measures the simulator itself (events, wall seconds, memory) on every
//! system's default point, and on networks of growing size. It runs points through the same
//! contract as every command ([`crate::System::run_point`]), so the only things it must ask a
//! system are the ones the contract does not say:
//!
//! - **A larger network** ([`crate::System::scaled`]): the settings edits (as `--set`
//!   overrides) that give a network `factor` times the default's hosts, and how many hosts
//!   that is, so the table can say events per second and memory *per host* as the network
//!   grows. A system whose topology is fixed in its code offers none (the default).
//! - **Work done** ([`committed`]): the transactions a point committed, read from its figures
//!   by the names the systems already share (`commits`, or P4DB's `hot_committed` plus
//!   `cold_committed`); a system that runs queries rather than transactions has none.
//!
//! The measurement itself is here too ([`measure`]); the command only chooses the points and
//! prints. Each point runs alone (the figures are wall seconds and the process's memory) and
//! its cost is split in two:
//!
//! - **setup**: everything before the event loop — building hosts and switches, fitting a
//!   layout, generating data — and the end-of-run checks after it;
//! - **event loop**: the world's loops, timed by the simulator's probe
//!   ([`pisadb_sim::probe`]), which the world calls as each loop starts and ends. The probe is
//!   the only place a clock is read, and it is installed only while [`measure_once`] runs.
//!
//! The machine may be shared, so beside wall seconds it gives the CPU seconds the simulating
//! thread itself got (`utime + stime` of `/proc/thread-self/stat`, in 10 ms ticks), and events
//! per CPU second: the simulator's speed whatever else runs. Memory is the process's peak
//! resident set (`VmHWM` in `/proc/self/status`), reset before each point
//! (`/proc/self/clear_refs`); `setup` is the peak when the first loop starts. With a repeat
//! count, the fastest of the runs is kept (the one least disturbed).

use crate::{apply_set, System};
use pisadb_sim::probe::{self, Phase};
use serde::Serialize;
use serde_json::Value;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A network grown from a system's default point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Scaled {
    /// `--set key=value` overrides on the default settings that build it.
    pub sets: Vec<String>,
    /// Its hosts (nodes, servers, clients: every host the world simulates).
    pub hosts: u64,
}

/// Transactions committed by a point, from its figures: `commits`, or `hot_committed` plus
/// `cold_committed` where a system splits them; `None` where it reports neither.
pub fn committed(figures: &Value) -> Option<u64> {
    let split: Option<u64> = ["hot_committed", "cold_committed"]
        .iter()
        .map(|k| figures.get(*k).and_then(Value::as_u64))
        .try_fold(0u64, |sum, n| Some(sum + n?));
    split.or_else(|| figures.get("commits").and_then(Value::as_u64))
}

/// One point, measured.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    /// The system.
    pub system: &'static str,
    /// The variant (the system's default).
    pub variant: String,
    /// Hosts in its network, where the system says (the scaling table).
    pub hosts: Option<u64>,
    /// Events its event loops handled.
    pub events: u64,
    /// Wall seconds of the whole point.
    pub wall_s: f64,
    /// Wall seconds outside the event loop (setup and end-of-run checks).
    pub setup_s: f64,
    /// Wall seconds inside the event loop.
    pub loop_s: f64,
    /// CPU seconds of the simulating thread, whole point.
    pub cpu_s: f64,
    /// CPU seconds of the simulating thread inside the event loop.
    pub loop_cpu_s: f64,
    /// Events per CPU second of the event loop.
    pub loop_events_per_cpu_s: f64,
    /// Event loops run (a point may run several worlds, or a run and a drain).
    pub loops: u32,
    /// Events per wall second of the whole point.
    pub events_per_s: f64,
    /// Events per wall second of the event loop alone.
    pub loop_events_per_s: f64,
    /// Transactions committed (none for a system that runs queries).
    pub committed: Option<u64>,
    /// Simulated transactions committed per wall second of the whole point.
    pub sim_txn_per_wall_s: Option<f64>,
    /// Peak resident memory by the first event, MiB.
    pub setup_peak_mib: f64,
    /// Peak resident memory of the whole point, MiB.
    pub peak_mib: f64,
    /// Resident memory before the point, MiB (what earlier points left).
    pub before_mib: f64,
    /// The run's trace hash (equal for equal seeds, whatever the speed).
    pub trace_hash: String,
}

/// What the probe has seen of the current point.
#[derive(Default)]
struct LoopClock {
    /// When the loop now running started, the thread's CPU seconds then, and the world's
    /// event count then.
    started: Option<(Instant, f64, u64)>,
    /// Time spent in finished loops.
    inside: Duration,
    /// CPU seconds spent in finished loops.
    inside_cpu_s: f64,
    /// Events handled by finished loops.
    events: u64,
    /// Loops finished.
    loops: u32,
    /// Peak resident memory when the first loop started, KiB.
    setup_peak_kib: Option<u64>,
}

static CLOCK: Mutex<Option<LoopClock>> = Mutex::new(None);

/// The probe `perf` installs: times each loop and notes the memory when the first starts.
#[allow(clippy::disallowed_methods)] // the simulator's own speed is a wall-clock figure
fn on_phase(phase: Phase) {
    let mut guard = CLOCK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(clock) = guard.as_mut() else { return };
    match phase {
        Phase::LoopStart { events } => {
            if clock.setup_peak_kib.is_none() {
                clock.setup_peak_kib = memory_kib("VmHWM:");
            }
            clock.started = Some((Instant::now(), thread_cpu_s(), events));
        }
        Phase::LoopEnd { events } => {
            if let Some((at, cpu, before)) = clock.started.take() {
                clock.inside += at.elapsed();
                clock.inside_cpu_s += thread_cpu_s() - cpu;
                clock.events += events - before;
                clock.loops += 1;
            }
        }
    }
}

/// CPU seconds the calling thread has had (user and system), from `/proc/thread-self/stat`
/// (clock ticks, assumed 100 per second as on every Linux build this runs on); 0 elsewhere.
fn thread_cpu_s() -> f64 {
    const TICKS_PER_S: f64 = 100.0;
    let Ok(stat) = std::fs::read_to_string("/proc/thread-self/stat") else { return 0.0 };
    // Fields after the command name (which may hold spaces, inside parentheses): state is
    // field 3, utime 14 and stime 15.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return 0.0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    (tick(11) + tick(12)) as f64 / TICKS_PER_S
}

/// A field of `/proc/self/status` in KiB (`VmHWM:`, `VmRSS:`), where the kernel has it.
fn memory_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Resets the process's peak resident memory to its current size (Linux `clear_refs` 5).
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mib(kib: Option<u64>) -> f64 {
    kib.map_or(0.0, |k| k as f64 / 1024.0)
}

/// Runs `system`'s default variant with its default settings edited by `sets`, once.
#[allow(clippy::disallowed_methods)] // the simulator's own speed is a wall-clock figure
pub fn measure_once(system: &dyn System, sets: &[String], hosts: Option<u64>) -> Result<Measured, String> {
    let variant = system.variants().first().ok_or_else(|| format!("{} has no variants", system.name()))?.name;
    let mut settings = system.default_settings();
    for set in sets {
        apply_set(&mut settings, set).map_err(|e| format!("{}: {e}", system.name()))?;
    }
    reset_peak_memory();
    let before_kib = memory_kib("VmRSS:");
    *CLOCK.lock().unwrap_or_else(|p| p.into_inner()) = Some(LoopClock::default());
    probe::set_probe(Some(on_phase));
    let (started, cpu_before) = (Instant::now(), thread_cpu_s());
    let report = system.run_point(variant, &settings);
    let (wall, cpu_s) = (started.elapsed(), thread_cpu_s() - cpu_before);
    probe::set_probe(None);
    let clock = CLOCK.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
    let report = report.map_err(|e| e.to_string())?;
    let (wall_s, loop_s) = (wall.as_secs_f64(), clock.inside.as_secs_f64());
    let committed = committed(&report.figures);
    Ok(Measured {
        system: report.system,
        variant: report.variant,
        hosts,
        events: clock.events,
        wall_s,
        setup_s: (wall_s - loop_s).max(0.0),
        loop_s,
        cpu_s,
        loop_cpu_s: clock.inside_cpu_s,
        loop_events_per_cpu_s: clock.events as f64 / clock.inside_cpu_s.max(0.01),
        loops: clock.loops,
        events_per_s: clock.events as f64 / wall_s.max(1e-9),
        loop_events_per_s: clock.events as f64 / loop_s.max(1e-9),
        committed,
        sim_txn_per_wall_s: committed.map(|c| c as f64 / wall_s.max(1e-9)),
        setup_peak_mib: mib(clock.setup_peak_kib),
        peak_mib: mib(memory_kib("VmHWM:")),
        before_mib: mib(before_kib),
        trace_hash: report.trace_hash,
    })
}

/// [`measure_once`] `repeat` times; the fastest run.
pub fn measure(system: &dyn System, sets: &[String], hosts: Option<u64>, repeat: u32) -> Result<Measured, String> {
    let mut best: Option<Measured> = None;
    for _ in 0..repeat.max(1) {
        let m = measure_once(system, sets, hosts)?;
        if best.as_ref().is_none_or(|b| m.wall_s < b.wall_s) {
            best = Some(m);
        }
    }
    best.ok_or_else(|| "no run".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn committed_reads_commits_or_the_hot_and_cold_split_and_nothing_else() {
        assert_eq!(committed(&json!({ "commits": 12, "aborts": 3 })), Some(12));
        assert_eq!(committed(&json!({ "hot_committed": 5, "cold_committed": 7, "commits": 1 })), Some(12));
        assert_eq!(committed(&json!({ "hot_committed": 5 })), None);
        assert_eq!(committed(&json!({ "answer_rows": 40 })), None);
    }
}
