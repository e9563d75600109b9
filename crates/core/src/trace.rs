//! The trace hash: one 64-bit digest of everything a simulated run did, so that "same seed,
//! same history" is a comparison of two numbers.
//!
//! The hash is FNV-1a over explicit bytes that each event contributes (its time, who handled
//! it, its kind, the datagram or timer): never `Debug` text, which a derive or a compiler
//! update may change, and never the standard library's hasher, whose algorithm is not stable.
//! FNV-1a is streaming, so an event may feed its bytes in pieces without allocating, and
//! feeding `a` then `b` equals feeding `a ++ b`.

/// A running FNV-1a (64-bit) digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHash(u64);

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash(0xcbf2_9ce4_8422_2325)
    }
}

impl TraceHash {
    /// The digest of nothing (FNV-1a's offset basis).
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds `bytes` in.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Folds in `value` written in decimal ASCII, as text traces spell numbers.
    pub fn write_decimal(&mut self, value: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut v = value;
        loop {
            at -= 1;
            digits[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.write(&digits[at..]);
    }

    /// The digest so far.
    pub fn value(&self) -> u64 {
        self.0
    }
}

/// Something that contributes explicit bytes to a trace hash (a host's timer, an event).
pub trait TraceBytes {
    /// Folds this value's trace bytes into `hash`.
    fn trace(&self, hash: &mut TraceHash);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_fnv1a_vectors() {
        // FNV-1a 64 test vectors (Fowler/Noll/Vo reference).
        assert_eq!(TraceHash::new().value(), 0xcbf2_9ce4_8422_2325);
        let mut h = TraceHash::new();
        h.write(b"a");
        assert_eq!(h.value(), 0xaf63_dc4c_8601_ec8c);
        let mut h = TraceHash::new();
        h.write(b"foobar");
        assert_eq!(h.value(), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn feeding_in_pieces_equals_feeding_at_once() {
        let (mut a, mut b) = (TraceHash::new(), TraceHash::new());
        a.write(b"Begin { worker: ");
        a.write_decimal(17);
        a.write(b" }");
        b.write(format!("Begin {{ worker: {} }}", 17).as_bytes());
        assert_eq!(a, b);
    }

    #[test]
    fn decimals_are_spelled_like_display() {
        for v in [0u64, 7, 10, 65_535, u64::MAX] {
            let (mut a, mut b) = (TraceHash::new(), TraceHash::new());
            a.write_decimal(v);
            b.write(v.to_string().as_bytes());
            assert_eq!(a, b, "{v}");
        }
    }
}
