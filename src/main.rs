//! # pisadb: the command line
//!
//! One binary for everything a user runs. Each subcommand lives in [`commands`] and does three
//! things only: turn flags into configurations (with errors that name the flag and the
//! accepted values), call the library crates, and print a readable table or, with `--json`,
//! one JSON object with stable field names.
//!
//! See `README.md` and `docs/ARCHITECTURE.md` for the page that explains it.

mod commands;
mod systems;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// PisaDB: a distributed in-memory database whose hottest transactions run inside a
/// (simulated) programmable switch.
#[derive(Parser, Debug)]
#[command(name = "pisadb", version, about, long_about = None)]
struct Cli {
    /// What to run; without one, `compare` with its defaults.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the systems this build runs (each paper's design and its baselines), or one
    /// system's settings.
    Systems(commands::systems::Args),
    /// Lay hot tuples out on the switch (P4DB's declustered layout vs a random one) and report
    /// how many hot transactions then run in a single pipeline pass.
    Layout(commands::layout::Args),
    /// Compare a system with its baselines on one simulated rack (the default job: P4DB,
    /// No-Switch and LM-Switch).
    Compare(commands::bench::CompareArgs),
    /// Run a named experiment of a system's paper (`pisadb systems` lists them); write its CSV and SVG under results/.
    Sweep(commands::sweep::Args),
    /// Run every experiment of a paper and write `results/<paper>.md` beside the CSVs and charts.
    Reproduce(commands::reproduce::Args),
    /// Assemble the shards of a sharded sweep or reproduce (`--shard K/N`) into its CSVs,
    /// charts and report.
    Merge(commands::merge::Args),
    /// Simulate one system on one workload (YCSB, SmallBank or TPC-C) and report its figures.
    Bench(commands::bench::Args),
    /// Fault-injection testing: many short simulated racks with lossy links and crashes, each
    /// checked for serializability, lost commits, invariants and progress.
    Fuzz(commands::fuzz::Args),
    /// Real mode: start a software switch and N node processes on loopback (UDP, write-ahead
    /// logs), run a workload, optionally kill -9 and restart some, and check the result.
    Cluster(commands::real::ClusterArgs),
    /// Real mode: the software switch process (started by `cluster`).
    Switch(commands::real::SwitchArgs),
    /// Real mode: a database node process (started by `cluster`).
    Node(commands::real::NodeArgs),
    /// Real mode: the software switch process alone under a load generator, measured beside
    /// the simulator's switch model on the same load.
    SwitchBench(commands::real::SwitchBenchArgs),
    /// How fast the simulator runs: each system's default point split into setup and event loop (events/s, simulated txn/s, peak memory), and a scaling table.
    Perf(commands::perf::Args),
}

fn main() -> ExitCode {
    // Output piped into `head` or `less` ends quietly when the reader leaves, as other command
    // line tools do, instead of panicking on a broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    let _ =
        unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl) };
    // A system's alias flags (`cluster --nodes 4`) become what they stand for (`--set nodes=4`).
    let args = match commands::real::rewrite_aliases(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    let command =
        cli.command.unwrap_or_else(|| Command::Compare(commands::bench::CompareArgs::parse_from(["compare"])));
    let result = match command {
        Command::Systems(args) => commands::systems::run(&args),
        Command::Layout(args) => commands::layout::run(&args),
        Command::Compare(args) => commands::bench::run_compare(&args),
        Command::Bench(args) => commands::bench::run_bench(&args),
        Command::Sweep(args) => commands::sweep::run_sweep(&args),
        Command::Reproduce(args) => commands::reproduce::run(&args),
        Command::Merge(args) => commands::merge::run(&args),
        Command::Fuzz(args) => commands::fuzz::run(&args),
        Command::Cluster(args) => commands::real::run_cluster_command(&args),
        Command::Switch(args) => commands::real::run_switch(&args),
        Command::Node(args) => commands::real::run_node(&args),
        Command::SwitchBench(args) => commands::real::run_switch_bench_command(&args),
        Command::Perf(args) => commands::perf::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
