//! `pisadb fuzz`: many short simulated racks with injected faults, each checked by the
//! oracles of the system's own fault-injection cases ([`pisadb_harness::System::fuzz_case`],
//! each in its system's `fuzz` module). Seeds run in parallel on the harness's one thread pool,
//! one per core (`--shard K/N`: a slice of them); every seed's line says what it ran and what
//! happened, and a failing seed comes with the command that replays it alone.

use crate::systems::registry;
use clap::Args as ClapArgs;
use pisadb_harness::pool::{default_threads, run_parallel};
use pisadb_harness::FuzzReport;
use pisadb_report::Progress;
use std::sync::atomic::{AtomicU64, Ordering};

/// The registry's first system with fault-injection cases, the one `fuzz` runs by default.
fn first_fuzzer() -> String {
    let registry = registry();
    let first = registry.systems().iter().find(|s| s.fuzz_case().is_some());
    first.map_or_else(String::new, |s| s.name().to_string())
}

/// Flags of `pisadb fuzz`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// The system whose fault-injection cases run (`pisadb systems` lists them); by default the
    /// registry's first with fault-injection cases.
    #[arg(long, default_value_t = first_fuzzer())]
    pub system: String,
    /// How many seeds to run.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,
    /// The first seed (a failing seed replays with `--seed S --seeds 1`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Threads running seeds (default: one per core).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub threads: Option<u64>,
    /// Print one JSON object (every seed's report) instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Run only the K-th of N deterministic slices of the seeds (seed index i with
    /// i mod N = K - 1), so N machines share one campaign (see the README).
    #[arg(long, value_name = "K/N", value_parser = pisadb_harness::Shard::parse)]
    pub shard: Option<pisadb_harness::Shard>,
}

/// Runs the campaign.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let run_case = registry().fuzzer(&args.system).map_err(|e| e.to_string())?;
    let all: Vec<u64> = (0..args.seeds).map(|i| args.seed.wrapping_add(i)).collect();
    let seeds = match args.shard {
        Some(shard) => shard.slice(&all),
        None => all,
    };
    if seeds.is_empty() {
        return Err(format!("--shard leaves no seeds of {} to run", args.seeds));
    }
    let threads = args.threads.map_or_else(default_threads, |t| t as usize);
    let progress = Progress::new(seeds.len() as u64, "seeds");
    let failed = AtomicU64::new(0);
    let mut reports = run_parallel(
        &seeds,
        threads,
        &progress,
        |&seed| run_case(seed),
        |_, report| {
            if report.failure.is_some() {
                failed.fetch_add(1, Ordering::SeqCst);
            }
            if !args.json {
                progress.println(&line(report));
            }
            format!("{} failed", failed.load(Ordering::SeqCst))
        },
    );
    progress.clear();
    reports.sort_by_key(|r| r.seed);
    let failures: Vec<&FuzzReport> = reports.iter().filter(|r| r.failure.is_some()).collect();
    if args.json {
        let cases: Vec<&serde_json::Value> = reports.iter().map(|r| &r.report).collect();
        let json = serde_json::json!({ "seeds": reports.len(), "failed": failures.len(), "cases": cases });
        println!("{}", serde_json::to_string_pretty(&json).expect("reports serialize"));
    } else {
        let crashes: u64 = reports.iter().map(|r| r.crashes).sum();
        let lost: u64 = reports.iter().map(|r| r.lost).sum();
        let duplicated: u64 = reports.iter().map(|r| r.duplicated).sum();
        let committed: u64 = reports.iter().map(|r| r.committed).sum();
        println!(
            "{} seeds ({}..={}): {} failed; {committed} transactions committed; faults injected: {crashes} crashes, \
             {lost} datagrams lost, {duplicated} duplicated",
            reports.len(),
            seeds[0],
            seeds[seeds.len() - 1],
            failures.len()
        );
    }
    if failures.is_empty() {
        return Ok(());
    }
    for r in &failures {
        eprintln!(
            "seed {} failed: {}\n  replay: pisadb fuzz --system {} --seed {} --seeds 1",
            r.seed,
            r.failure.as_deref().unwrap_or(""),
            args.system,
            r.seed
        );
    }
    Err(format!("{} of {} seeds failed", failures.len(), reports.len()))
}

/// One seed's line: what ran, what was injected, and the verdict.
fn line(r: &FuzzReport) -> String {
    let verdict = match &r.failure {
        None => "ok".to_string(),
        Some(why) => format!("FAILED: {why}"),
    };
    format!("seed {:>6}  {:<34} {:>6} committed  {}  [{}]  {verdict}", r.seed, r.case, r.committed, r.detail, r.faults)
}
