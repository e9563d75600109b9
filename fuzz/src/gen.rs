//! A seeded source of structured values for the targets' generators: ChaCha8, seeded by the
//! campaign's seed and the target's name, so two targets never share a stream and a rerun of
//! one target draws what it drew before.

use rand::distr::uniform::{SampleRange, SampleUniform};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random source with the helpers the generators use.
pub struct Gen {
    /// The stream.
    pub rng: ChaCha8Rng,
}

impl Gen {
    /// The stream of `target` under campaign seed `seed`.
    pub fn new(seed: u64, target: &str) -> Gen {
        // FNV-1a of the name: stable across builds and platforms.
        let name =
            target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        Gen { rng: ChaCha8Rng::seed_from_u64(seed ^ name) }
    }

    /// A value in `range`.
    pub fn range<T: SampleUniform, R: SampleRange<T>>(&mut self, range: R) -> T {
        self.rng.random_range(range)
    }

    /// Any `u8`.
    pub fn u8(&mut self) -> u8 {
        self.edgy() as u8
    }

    /// Any `u16`.
    pub fn u16(&mut self) -> u16 {
        self.edgy() as u16
    }

    /// Any `u32`.
    pub fn u32(&mut self) -> u32 {
        self.edgy() as u32
    }

    /// Any `u64`.
    pub fn u64(&mut self) -> u64 {
        self.edgy()
    }

    /// Any `i32`.
    pub fn i32(&mut self) -> i32 {
        self.edgy() as i32
    }

    /// Any `i64`.
    pub fn i64(&mut self) -> i64 {
        self.edgy() as i64
    }

    /// A coin.
    pub fn bool(&mut self) -> bool {
        self.rng.random_bool(0.5)
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.random_range(0..items.len())]
    }

    /// `len` items (a length drawn from `len`), each from `item`.
    pub fn vec<T>(&mut self, len: std::ops::RangeInclusive<usize>, mut item: impl FnMut(&mut Gen) -> T) -> Vec<T> {
        let n = self.rng.random_range(len);
        (0..n).map(|_| item(self)).collect()
    }

    /// Random bytes of a length in `len`.
    pub fn bytes(&mut self, len: std::ops::RangeInclusive<usize>) -> Vec<u8> {
        let n = self.rng.random_range(len);
        (0..n).map(|_| self.rng.random()).collect()
    }

    /// A 64-bit word that is often a boundary (0, 1, all ones, a sign bit, a small number),
    /// where decoders' checks live, and otherwise uniform.
    fn edgy(&mut self) -> u64 {
        match self.rng.random_range(0..8) {
            0 => 0,
            1 => self.rng.random_range(1..=16),
            2 => u64::MAX - self.rng.random_range(0..4),
            3 => 1 << self.rng.random_range(0..64),
            _ => self.rng.random(),
        }
    }
}
