//! `pisadb perf`: how fast the simulator runs, system by system, and how its cost grows with
//! the network. Every system's default point runs through the harness contract, one at a time;
//! [`pisadb_harness::perf::measure`] splits its cost into setup and event loop (wall and CPU
//! seconds, memory). The scaling table runs the systems that can grow their network
//! ([`System::scaled`]) at 1x, 4x and 16x the default's hosts and gives events per second and
//! memory per host. With `--repeat N` each point runs N times and the fastest run is kept.
//! This command chooses the points and prints.

use crate::systems::registry;
use clap::Args as ClapArgs;
use pisadb_harness::perf::{measure, Measured};
use pisadb_harness::System;
use serde::Serialize;

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
