//! The short slice of the decoder campaign that `cargo test` runs: every target, a few
//! thousand inputs each, from a fixed seed (seconds, not minutes; the long campaign is the
//! `decoder-campaign` binary). And the campaign's own oracle, broken on purpose: a decoder that
//! accepts what it should refuse, one that panics, and one that refuses valid input are each
//! caught.

use pisadb_decoder_fuzz::check::canonical;
use pisadb_decoder_fuzz::gen::Gen;
use pisadb_decoder_fuzz::{run, targets, Target, Verdict};

const SLICE_INPUTS: u64 = 3_000;

#[test]
fn every_decoder_survives_a_slice_of_the_campaign() {
    let all = targets::all();
    assert_eq!(all.len(), 15, "every decoder of the README's table");
    for target in &all {
        let report = run(target, 7, SLICE_INPUTS);
        if let Some(f) = &report.failure {
            panic!("{}: input {} ({}): {}", target.name, f.index, pisadb_decoder_fuzz::hex(&f.input), f.why);
        }
        assert_eq!(report.inputs, SLICE_INPUTS);
        assert!(report.accepted > SLICE_INPUTS / 20, "{}: only {} accepted", target.name, report.accepted);
        assert!(report.refused > SLICE_INPUTS / 20, "{}: only {} refused", target.name, report.refused);
    }
}

#[test]
fn the_same_seed_draws_the_same_campaign() {
    let target = targets::by_name("gotthard_msg").unwrap();
    let counts = |seed| {
        let r = run(&target, seed, 500);
        (r.accepted, r.refused, r.failure)
    };
    assert_eq!(counts(3), counts(3));
    assert_ne!(counts(3), counts(4));
    assert!(targets::by_name("nope").is_none());
    assert!(targets::unknown("nope").contains("gotthard_msg"));
}

/// A one-byte format: 0 or 1.
fn flag(g: &mut Gen) -> Vec<u8> {
    vec![u8::from(g.bool())]
}

fn lax(bytes: &[u8]) -> Result<Verdict, String> {
    // Reads any nonzero byte as true: two inputs decode to one value.
    canonical(bytes, |b| if b.len() == 1 { Ok(b[0] != 0) } else { Err(()) }, |v, out| out.push(u8::from(*v)))
}

fn panics(bytes: &[u8]) -> Result<Verdict, String> {
    // Indexes past the end of a short input instead of refusing it.
    canonical(bytes, |b| if b[1] == 7 { Ok(0u8) } else { Err(()) }, |v: &u8, out| out.push(*v))
}

fn strict(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, |b| if b == [0] { Ok(false) } else { Err(()) }, |v, out| out.push(u8::from(*v)))
}

#[test]
fn the_oracle_catches_lax_panicking_and_refusing_decoders() {
    let broken = |name, check| Target { name, generate: flag, check, repair: None };
    let why = |target: Target| run(&target, 1, 10_000).failure.expect("caught").why;
    assert!(why(broken("lax", lax)).contains("not the encoding"));
    let panicked = why(broken("panics", panics));
    assert!(panicked.contains("panicked"), "{panicked}");
    assert!(why(broken("strict", strict)).contains("valid encoding was refused"));
}
