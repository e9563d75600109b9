//! `decoder-campaign`: runs the decoder campaign (see the crate's documentation) and prints one
//! line of counts per target. Exits with status 1 if any target failed, printing the seed, the
//! input's index and the input itself.
//!
//! ```text
//! cargo run --release -p pisadb-decoder-fuzz --bin decoder-campaign -- --inputs 10000000 --seed 1
//! cargo run --release -p pisadb-decoder-fuzz --bin decoder-campaign -- --target p4db_log --inputs 100000
//! ```

use clap::Parser;
use pisadb_decoder_fuzz::{hex, run, targets, Target};
use std::process::ExitCode;
use std::time::Instant;

/// Runs every decoder (or one) against seeded random and mutated inputs.
#[derive(Parser)]
struct Args {
    /// Inputs per target.
    #[arg(long, default_value_t = 1_000_000)]
    inputs: u64,
    /// The campaign's seed: the same seed draws the same inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only this target (default: all of them); `--list` names them.
    #[arg(long)]
    target: Option<String>,
    /// Lists the targets and exits.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        targets::all().iter().for_each(|t| println!("{}", t.name));
        return ExitCode::SUCCESS;
    }
    let chosen: Vec<Target> = match &args.target {
        Some(name) => match targets::by_name(name) {
            Some(target) => vec![target],
            None => {
                eprintln!("{}", targets::unknown(name));
                return ExitCode::FAILURE;
            }
        },
        None => targets::all(),
    };
    println!("target,inputs,accepted,refused,slowest_us,seconds,result");
    let mut failed = false;
    for target in &chosen {
        #[allow(clippy::disallowed_methods)] // the campaign's duration, reported to the user
        let started = Instant::now();
        let report = run(target, args.seed, args.inputs);
        let result = match &report.failure {
            None => "ok".to_string(),
            Some(f) => {
                failed = true;
                format!("FAILED at input {} (seed {}): {} -- input {}", f.index, args.seed, f.why, hex(&f.input))
            }
        };
        println!(
            "{},{},{},{},{:.1},{:.1},{}",
            report.target,
            report.inputs,
            report.accepted,
            report.refused,
            report.slowest_ns as f64 / 1e3,
            started.elapsed().as_secs_f64(),
            result
        );
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
