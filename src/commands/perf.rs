//! `pisadb perf`: how fast the simulator runs, system by system, and how its cost grows with
//! the network.
//!
//! Every system's default point runs through the harness contract, one at a time (the
//! figures are wall-clock seconds and the process's memory, so nothing else runs beside a
//! point). Each point's cost is split in two:
//!
//! - **setup**: everything before the event loop — building hosts and switches, fitting a
//!   layout, generating data — and the end-of-run checks after it;
//! - **event loop**: the world's loops, timed by the simulator's probe
//!   ([`pisadb_sim::probe`]), which the world calls as each loop starts and ends. The probe
//!   is the only place a clock is read, and it is installed only here.
//!
//! The machine may be shared, so beside wall seconds the table gives the CPU seconds the
//! simulating thread itself got (`utime + stime` of `/proc/thread-self/stat`, in 10 ms ticks),
//! and events per CPU second: the simulator's speed whatever else runs.
//!
//! Memory is the process's peak resident set (`VmHWM` in `/proc/self/status`), reset before
//! each point (`/proc/self/clear_refs`); `setup` is the peak when the first loop starts. The
//! scaling table runs the systems that can grow their network ([`System::scaled`]) at 1×, 4×
//! and 16× the default's hosts and gives events per second and memory per host.
//!
//! With `--repeat N` each point runs N times and the fastest run is kept (the machine may be
//! shared: the fastest run is the one least disturbed).

use crate::systems::registry;
use clap::Args as ClapArgs;
use pisadb_harness::{apply_set, perf, System};
use pisadb_sim::probe::{self, Phase};
use serde::Serialize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Flags of `pisadb perf`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Only these systems (repeatable); default: every system.
    #[arg(long = "system")]
    systems: Vec<String>,
    /// Runs of each point; the fastest is kept.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Network sizes of the scaling table, as multiples of each system's default hosts.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    scale: Vec<u32>,
    /// Skip the scaling table.
    #[arg(long)]
    no_scaling: bool,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

/// One point, measured.
#[derive(Clone, Debug, Serialize)]
struct Measured {
    /// The system.
    system: &'static str,
    /// The variant (the system's default).
    variant: String,
    /// Hosts in its network, where the system says (the scaling table).
    hosts: Option<u64>,
    /// Events its event loops handled.
    events: u64,
    /// Wall seconds of the whole point.
    wall_s: f64,
    /// Wall seconds outside the event loop (setup and end-of-run checks).
    setup_s: f64,
    /// Wall seconds inside the event loop.
    loop_s: f64,
    /// CPU seconds of the simulating thread, whole point.
    cpu_s: f64,
    /// CPU seconds of the simulating thread inside the event loop.
    loop_cpu_s: f64,
    /// Events per CPU second of the event loop.
    loop_events_per_cpu_s: f64,
    /// Event loops run (a point may run several worlds, or a run and a drain).
    loops: u32,
    /// Events per wall second of the whole point.
    events_per_s: f64,
    /// Events per wall second of the event loop alone.
    loop_events_per_s: f64,
    /// Transactions committed (none for a system that runs queries).
    committed: Option<u64>,
    /// Simulated transactions committed per wall second of the whole point.
    sim_txn_per_wall_s: Option<f64>,
    /// Peak resident memory by the first event, MiB.
    setup_peak_mib: f64,
    /// Peak resident memory of the whole point, MiB.
    peak_mib: f64,
    /// Resident memory before the point, MiB (what earlier points left).
    before_mib: f64,
    /// The run's trace hash (equal for equal seeds, whatever the speed).
    trace_hash: String,
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
fn measure_once(system: &dyn System, sets: &[String], hosts: Option<u64>) -> Result<Measured, String> {
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
    let committed = perf::committed(&report.figures);
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
fn measure(system: &dyn System, sets: &[String], hosts: Option<u64>, repeat: u32) -> Result<Measured, String> {
    let mut best: Option<Measured> = None;
    for _ in 0..repeat.max(1) {
        let m = measure_once(system, sets, hosts)?;
        if best.as_ref().is_none_or(|b| m.wall_s < b.wall_s) {
            best = Some(m);
        }
    }
    best.ok_or_else(|| "no run".to_string())
}

/// Everything `perf` measured.
#[derive(Serialize)]
struct Report {
    /// Each system's default point.
    points: Vec<Measured>,
    /// The scaling table: each system that can grow, at each size.
    scaling: Vec<Measured>,
}

/// Runs `pisadb perf`.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let registry = registry();
    let systems: Vec<&'static dyn System> = if args.systems.is_empty() {
        registry.systems().to_vec()
    } else {
        args.systems.iter().map(|name| registry.get(name).map_err(|e| e.to_string())).collect::<Result<_, _>>()?
    };
    let mut report = Report { points: Vec::new(), scaling: Vec::new() };
    for &system in &systems {
        let point = measure(system, &[], None, args.repeat)?;
        if !args.json {
            eprintln!("{}: {:.2} s", system.name(), point.wall_s);
        }
        report.points.push(point);
    }
    if !args.no_scaling {
        for &system in &systems {
            for &factor in &args.scale {
                let Some(scaled) = system.scaled(factor) else { continue };
                let point = measure(system, &scaled.sets, Some(scaled.hosts), args.repeat)?;
                if !args.json {
                    eprintln!("{} x{factor}: {:.2} s", system.name(), point.wall_s);
                }
                report.scaling.push(point);
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
        return Ok(());
    }
    print_points(&report.points);
    if !report.scaling.is_empty() {
        println!();
        print_scaling(&report.scaling);
    }
    let without: Vec<&str> = systems.iter().filter(|s| s.scaled(1).is_none()).map(|s| s.name()).collect();
    if !args.no_scaling && !without.is_empty() {
        println!("(no scaling for {}: their networks are fixed in their code)", without.join(", "));
    }
    Ok(())
}

fn print_points(points: &[Measured]) {
    println!(
        "{:<9} {:>10} {:>8} {:>8} {:>8} {:>7} {:>9} {:>10} {:>10} {:>12} {:>9} {:>8}",
        "system",
        "events",
        "wall s",
        "setup s",
        "loop s",
        "cpu s",
        "Mev/s",
        "loop Mev/s",
        "Mev/cpu s",
        "sim txn/s",
        "setup MiB",
        "peak MiB"
    );
    for p in points {
        println!(
            "{:<9} {:>10} {:>8.3} {:>8.3} {:>8.3} {:>7.2} {:>9.2} {:>10.2} {:>10.2} {:>12} {:>9.1} {:>8.1}",
            p.system,
            p.events,
            p.wall_s,
            p.setup_s,
            p.loop_s,
            p.cpu_s,
            p.events_per_s / 1e6,
            p.loop_events_per_s / 1e6,
            p.loop_events_per_cpu_s / 1e6,
            p.sim_txn_per_wall_s.map_or("-".to_string(), |r| format!("{r:.0}")),
            p.setup_peak_mib,
            p.peak_mib,
        );
    }
}

fn print_scaling(points: &[Measured]) {
    println!(
        "{:<9} {:>6} {:>11} {:>8} {:>8} {:>10} {:>10} {:>12} {:>9} {:>12}",
        "system",
        "hosts",
        "events",
        "wall s",
        "setup s",
        "loop Mev/s",
        "Mev/cpu s",
        "kev/s/host",
        "peak MiB",
        "KiB/host"
    );
    for p in points {
        let hosts = p.hosts.unwrap_or(1).max(1) as f64;
        println!(
            "{:<9} {:>6} {:>11} {:>8.3} {:>8.3} {:>10.2} {:>10.2} {:>12.1} {:>9.1} {:>12.1}",
            p.system,
            p.hosts.unwrap_or(0),
            p.events,
            p.wall_s,
            p.setup_s,
            p.loop_events_per_s / 1e6,
            p.loop_events_per_cpu_s / 1e6,
            p.loop_events_per_s / hosts / 1e3,
            p.peak_mib,
            (p.peak_mib - p.before_mib).max(0.0) * 1024.0 / hosts,
        );
    }
}
