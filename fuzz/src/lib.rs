//! # Decoders under fire
//!
//! Every decoder of bytes that cross a wire (frames, node and control messages, each system's
//! messages, the echo host's pings) or a disk (the write-ahead logs, TransKV's fjall records)
//! is a [`Target`] here, and [`run`] gives it millions of inputs from one seed. A target
//! knows two things: how to *generate* a random valid encoding (structure-aware: a random
//! value of the format, encoded by the format's own encoder), and how to *check* one input.
//! The campaign feeds it
//!
//! - valid encodings as generated, which must be accepted and decode to what was encoded
//!   (`decode(encode(x)) == x`);
//! - valid encodings after one to four [`mutate`] steps (bit flips, boundary values, cut,
//!   grown, spliced, a region copied or dropped; a log's checksums recomputed half the time so
//!   that mutations reach the decoder behind them);
//! - plain random bytes.
//!
//! and asserts, for every input, the properties of [`check`]: decoding never panics (a panic
//! is caught and reported with the input), never takes longer than [`HANG_NS`] (twice in a
//! row: one slow check may be the scheduler of a shared machine), and whatever
//! it accepts re-encodes to exactly the bytes it read. The last is how "bytes that should be
//! refused are refused" is checked without a second decoder: a format whose decoder accepted
//! an unknown enum byte, a stray flag bit, a nonzero reserved byte or trailing bytes would
//! decode two inputs to one value, and one of them would not re-encode to itself.
//!
//! Everything is drawn from one ChaCha8 stream per target and seed, so a failure names the
//! seed and the input's index and reruns exactly (`decoder-campaign --target T --seed S`).
//! `cargo test -p pisadb-decoder-fuzz` runs a short slice of every target; the campaign binary
//! runs the long one (see `fuzz/README.md`).
//!
//! See `fuzz/README.md` for the page that explains it.

pub mod check;
pub mod gen;
pub mod mutate;
pub mod targets;

use gen::Gen;
use rand::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// An input that takes longer than this to check is reported as a hang. The largest inputs are
/// logs of a few kilobytes, checked in microseconds; the bound is generous because the
/// machine may be shared (a busy scheduler stalls a check for tens of milliseconds), while a
/// decoder that loops, or allocates per announced rather than present item, takes far longer.
pub const HANG_NS: u64 = 1_000_000_000;

/// What a decoder did with an input that broke none of its properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Decoded (and re-encoded to the same bytes).
    Accepted,
    /// Refused with an error.
    Refused,
}

/// One decoder under test.
#[derive(Clone, Copy)]
pub struct Target {
    /// The name the campaign is run by.
    pub name: &'static str,
    /// A random valid encoding.
    pub generate: fn(&mut Gen) -> Vec<u8>,
    /// Decodes the input and checks its properties; `Err` says which one broke.
    pub check: fn(&[u8]) -> Result<Verdict, String>,
    /// Repairs what a mutation broke that guards the decoder (a log's checksums), if any.
    pub repair: Option<fn(&mut [u8])>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Target({})", self.name)
    }
}

/// A property that broke, with the input that broke it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Which input of the campaign (0-based), to rerun it.
    pub index: u64,
    /// The input.
    pub input: Vec<u8>,
    /// What went wrong.
    pub why: String,
}

/// What a campaign of one target saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The target's name.
    pub target: &'static str,
    /// Inputs checked.
    pub inputs: u64,
    /// Inputs the decoder accepted.
    pub accepted: u64,
    /// Inputs the decoder refused.
    pub refused: u64,
    /// The longest check of one input, in nanoseconds (wall clock: a test tool, not protocol
    /// code).
    pub slowest_ns: u64,
    /// The first failure, which ends the campaign.
    pub failure: Option<Failure>,
}

/// How an input is made.
enum Shape {
    /// A valid encoding as generated: must be accepted.
    Valid,
    /// A valid encoding mutated.
    Mutated,
    /// Random bytes.
    Random,
}

/// Checks `inputs` inputs for `target` drawn from `seed`; stops at the first failure.
pub fn run(target: &Target, seed: u64, inputs: u64) -> Report {
    let mut g = Gen::new(seed, target.name);
    let mut report = Report { target: target.name, inputs: 0, accepted: 0, refused: 0, slowest_ns: 0, failure: None };
    for index in 0..inputs {
        let shape = match g.rng.random_range(0..16) {
            0..=1 => Shape::Valid,
            2 => Shape::Random,
            _ => Shape::Mutated,
        };
        let input = match shape {
            Shape::Valid => (target.generate)(&mut g),
            Shape::Random => g.bytes(0..=256),
            Shape::Mutated => {
                let mut bytes = (target.generate)(&mut g);
                let other = (target.generate)(&mut g);
                mutate::mutate(&mut g, &mut bytes, &other);
                if let Some(repair) = target.repair.filter(|_| g.rng.random_bool(0.5)) {
                    repair(&mut bytes);
                }
                bytes
            }
        };
        let (outcome, mut took_ns) = timed(|| catch_unwind(AssertUnwindSafe(|| (target.check)(&input))));
        if took_ns > HANG_NS {
            // A hang is deterministic; a stall of a shared machine's scheduler is not: time it again.
            took_ns = took_ns.min(timed(|| catch_unwind(AssertUnwindSafe(|| (target.check)(&input)))).1);
        }
        report.slowest_ns = report.slowest_ns.max(took_ns);
        report.inputs += 1;
        let failed = |why: String| Some(Failure { index, input: input.clone(), why });
        report.failure = match outcome {
            Err(panic) => failed(format!("the decoder panicked: {}", panic_text(&panic))),
            Ok(Err(why)) => failed(why),
            Ok(Ok(_)) if took_ns > HANG_NS => failed(format!("one input took {took_ns} ns (more than {HANG_NS})")),
            Ok(Ok(Verdict::Refused)) if matches!(shape, Shape::Valid) => {
                failed("a valid encoding was refused".to_string())
            }
            Ok(Ok(Verdict::Accepted)) => {
                report.accepted += 1;
                None
            }
            Ok(Ok(Verdict::Refused)) => {
                report.refused += 1;
                None
            }
        };
        if report.failure.is_some() {
            break;
        }
    }
    report
}

/// What `f` returns and how long it took in nanoseconds (wall clock: a test tool's figure, which
/// no protocol reads).
fn timed<T>(f: impl FnOnce() -> T) -> (T, u64) {
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let value = f();
    (value, u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// Bytes as hex, for a failure's report.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// For a coverage-guided fuzzer (`fuzz/libfuzzer`): checks one input against the properties of
/// the target called `target`, and panics, which the fuzzer records as a crash, if one breaks.
pub fn check_or_panic(target: &str, input: &[u8]) {
    let target = targets::by_name(target).unwrap_or_else(|| panic!("{}", targets::unknown(target)));
    if let Err(why) = (target.check)(input) {
        panic!("{}: {why}", target.name);
    }
}
