//! Key popularity as YCSB draws it: a rank from Zipf (or uniform), scrambled one-to-one onto
//! the key space.
//!
//! YCSB's "scrambled Zipfian" draws a popularity *rank* (0 the hottest) and then hashes it to
//! a key, so that the hot keys are spread over the key space (and so over range-partitioned
//! nodes) instead of sitting at its start. The hash must be a **bijection** of `0..records`:
//! a hash taken mod `records` collides, so some keys are never drawn (about 1/e of them, 37%,
//! for a random function) while others are drawn for two or three ranks; under a uniform draw
//! that makes "uniform" skewed, and under Zipf it gives a colliding key the weight of two ranks.
//!
//! [`Scramble`] is the bijection: over the smallest power-of-two domain `2^k ≥ records`, two
//! rounds of *add a constant and multiply by an odd constant mod 2^k* (a bijection: odd
//! numbers are invertible mod 2^k; the addition keeps 0 from mapping to 0) and *xor with the value shifted right by about k/2* (a bijection: the top bits
//! pass through unchanged and the rest can be peeled off from the top down). A value that
//! lands at or above `records` is mapped again (*cycle walking*): the permutation of `0..2^k`
//! restricted this way is a permutation of `0..records`, and since `records > 2^(k-1)` a key
//! takes fewer than two steps on average. It is not a cryptographic permutation and does not
//! try to be: it spreads neighbouring ranks over the key space, which is all YCSB asks.
//!
//! [`Popularity`] is the whole generator: [`rand_distr::Zipf`] over `1..=records` (exponent
//! `theta`, YCSB's 0.99 by default in the systems that use it) or a uniform rank when `theta`
//! is 0, then the scramble. It holds no generator of its own: the caller passes its seeded
//! stream ([`pisadb_core::rng::derive`]), so one host's draws stay in one stream and a seed
//! reproduces them exactly. [`Popularity::rank`] and [`Popularity::key_of_rank`] are separate
//! so that a system can move the popularity (shift ranks, as TransKV's hot-set change does)
//! before scrambling, and fill caches by walking ranks from the hottest.

use crate::ConfigError;
use rand::Rng;
use rand_distr::{Distribution, Zipf};

/// The (addend, odd multiplier) of the two rounds (the constants of SplitMix64 and
/// MurmurHash3's finaliser; any odd multipliers make a bijection, these mix bits well).
const ROUNDS: [(u64, u64); 2] =
    [(0xbf58_476d_1ce4_e5b9, 0x9e37_79b9_7f4a_7c15), (0x94d0_49bb_1331_11eb, 0xff51_afd7_ed55_8ccd)];

/// A one-to-one map of `0..records` onto itself that spreads neighbouring values apart: see
/// the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scramble {
    /// The size of the domain (and of the range).
    records: u64,
    /// The bits of the power-of-two domain the rounds permute: `2^bits ≥ records`.
    bits: u32,
}

impl Scramble {
    /// The scramble of `0..records`; `records` must be at least 1.
    pub fn new(records: u64) -> Result<Self, ConfigError> {
        if records == 0 {
            return Err(ConfigError::new("records", records, "1 or more"));
        }
        // At least 2 bits so that the xor's shift is below the width.
        let bits = (u64::BITS - (records - 1).leading_zeros()).max(2);
        Ok(Self { records, bits })
    }

    /// The size of the domain.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The key of `value`, taken mod `records` first (so a shifted rank wraps around).
    pub fn apply(&self, value: u64) -> u64 {
        let mut x = value % self.records;
        loop {
            x = self.round_trip(x);
            if x < self.records {
                return x;
            }
        }
    }

    /// One pass of the permutation of `0..2^bits`.
    fn round_trip(&self, mut x: u64) -> u64 {
        let mask = if self.bits == 64 { u64::MAX } else { (1 << self.bits) - 1 };
        let shift = self.bits / 2 + 1;
        for (addend, multiplier) in ROUNDS {
            x = x.wrapping_add(addend).wrapping_mul(multiplier) & mask;
            x ^= x >> shift;
        }
        x
    }
}

/// YCSB's key popularity: a Zipf (or uniform) rank scrambled one-to-one onto `0..records`.
/// See the module doc.
#[derive(Clone, Debug)]
pub struct Popularity {
    /// Zipf over ranks `1..=records`; `None`: uniform.
    zipf: Option<Zipf<f64>>,
    /// Ranks onto keys.
    scramble: Scramble,
}

impl Popularity {
    /// Keys `0..records` drawn by Zipf with exponent `theta` (0: uniform). `records` must be
    /// at least 1 and `theta` finite and not negative.
    pub fn new(records: u64, theta: f64) -> Result<Self, ConfigError> {
        let scramble = Scramble::new(records)?;
        if !theta.is_finite() || theta < 0.0 {
            return Err(ConfigError::new("theta", theta, "a Zipf exponent ≥ 0 (0: uniform)"));
        }
        let zipf = if theta == 0.0 {
            None
        } else {
            Some(Zipf::new(records as f64, theta).map_err(|e| ConfigError::new("theta", theta, e.to_string()))?)
        };
        Ok(Self { zipf, scramble })
    }

    /// The number of keys.
    pub fn records(&self) -> u64 {
        self.scramble.records
    }

    /// Whether every key is equally likely (`theta` 0).
    pub fn is_uniform(&self) -> bool {
        self.zipf.is_none()
    }

    /// A popularity rank in `0..records`, 0 the hottest: one draw from `rng`.
    pub fn rank<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let last = self.records() - 1;
        match &self.zipf {
            Some(zipf) => (zipf.sample(rng) as u64).saturating_sub(1).min(last),
            None => rng.random_range(0..self.records()),
        }
    }

    /// The key of popularity rank `rank` (taken mod `records`).
    pub fn key_of_rank(&self, rank: u64) -> u64 {
        self.scramble.apply(rank)
    }

    /// A key: [`Self::rank`] scrambled by [`Self::key_of_rank`].
    pub fn key<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.key_of_rank(self.rank(rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::rng::derive;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_scramble_is_one_to_one_onto_the_key_space(records in 1u64..3_000) {
            let scramble = Scramble::new(records).unwrap();
            let mut seen = vec![false; records as usize];
            for value in 0..records {
                let key = scramble.apply(value);
                prop_assert!(key < records, "{value} -> {key} outside 0..{records}");
                prop_assert!(!seen[key as usize], "{key} drawn twice (records {records})");
                seen[key as usize] = true;
            }
        }

        #[test]
        fn the_scramble_stays_in_range_for_large_key_spaces(records in 1u64..=u64::MAX, value: u64) {
            prop_assert!(Scramble::new(records).unwrap().apply(value) < records);
        }
    }

    #[test]
    fn a_value_past_the_domain_wraps_around() {
        let scramble = Scramble::new(1_000).unwrap();
        assert_eq!(scramble.apply(1_007), scramble.apply(7));
    }

    #[test]
    fn neighbouring_ranks_land_apart() {
        // The hottest 100 ranks of a million keys fall on more than half of 16 ranges.
        let scramble = Scramble::new(1_000_000).unwrap();
        let ranges: std::collections::BTreeSet<u64> = (0..100).map(|r| scramble.apply(r) * 16 / 1_000_000).collect();
        assert!(ranges.len() > 8, "{ranges:?}");
    }

    #[test]
    fn uniform_draws_every_key_about_equally() {
        // 100 keys, 100,000 draws: each key about 1,000 times (a hash mod 100 misses ~37).
        let uniform = Popularity::new(100, 0.0).unwrap();
        let mut rng = derive(1, "uniform");
        let mut counts = [0u32; 100];
        for _ in 0..100_000 {
            counts[uniform.key(&mut rng) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (850..1_150).contains(&c)), "{counts:?}");
    }

    #[test]
    fn zipf_makes_rank_zero_the_hottest_and_its_key_the_most_drawn() {
        let zipf = Popularity::new(1_000, 0.99).unwrap();
        let mut rng = derive(2, "zipf");
        let mut counts = vec![0u32; 1_000];
        for _ in 0..50_000 {
            counts[zipf.key(&mut rng) as usize] += 1;
        }
        let hottest = (0..1_000).max_by_key(|&k| counts[k]).unwrap() as u64;
        assert_eq!(hottest, zipf.key_of_rank(0));
        // θ = 0.99 over 1,000 ranks: rank 0 carries about 13% of the draws.
        assert!((5_000..8_000).contains(&counts[hottest as usize]), "{}", counts[hottest as usize]);
    }

    #[test]
    fn the_same_stream_draws_the_same_keys() {
        let zipf = Popularity::new(10_000, 1.2).unwrap();
        let draw = |seed| {
            let mut rng = derive(seed, "keys");
            (0..50).map(|_| zipf.key(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn bad_settings_name_the_field_and_what_it_accepts() {
        assert_eq!(Scramble::new(0).unwrap_err().field, "records");
        let err = Popularity::new(10, -1.0).unwrap_err();
        assert_eq!(err.field, "theta");
        assert!(err.to_string().contains("Zipf exponent"), "{err}");
        assert!(Popularity::new(10, f64::NAN).is_err());
    }
}
