//! Seeded randomness: one run seed derives an independent generator per component.
//!
//! Every random choice in PisaDB comes from a [`SeededRng`] (ChaCha8, a named algorithm whose
//! output is fixed across platforms and crate versions, unlike `StdRng`). Components do not
//! share a generator: each derives its own from the run seed and a stable name
//! ([`fn@derive`]), so adding a random draw in one component does not shift the draws of another,
//! and a trace stays comparable across small changes.

use rand::SeedableRng;

/// The generator used everywhere: ChaCha8, seeded.
pub type SeededRng = rand_chacha::ChaCha8Rng;

/// A generator for the component called `stream`, derived from the run's `seed`.
///
/// The derivation is a fixed function (SplitMix64 over the seed and the FNV-1a hash of the
/// name), so it never changes between builds.
pub fn derive(seed: u64, stream: &str) -> SeededRng {
    let name_hash =
        stream.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    SeededRng::seed_from_u64(splitmix64(seed ^ splitmix64(name_hash)))
}

/// One step of SplitMix64: a good, fixed 64-bit mixing function.
pub const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn same_seed_and_stream_give_the_same_draws() {
        let a: Vec<u64> = (0..4).map(|_| 0).scan(derive(7, "ycsb"), |r, _: u64| Some(r.random())).collect();
        let b: Vec<u64> = (0..4).map(|_| 0).scan(derive(7, "ycsb"), |r, _: u64| Some(r.random())).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn different_streams_are_independent() {
        let a: u64 = derive(7, "ycsb").random();
        let b: u64 = derive(7, "layout").random();
        let c: u64 = derive(8, "ycsb").random();
        assert_ne!(a, b);
        assert_ne!(a, c);
    }
}
