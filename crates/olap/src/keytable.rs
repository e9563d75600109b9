//! An open-addressing hash table from a `u64` key to a `u32` row number.
//!
//! The hash join builds one over its build side's key; the hash aggregation keeps one from a
//! group's key to its row in the output. Linear probing over a power-of-two array kept at most
//! half full, a fixed multiplicative hash (no random seed: lookups are all we do, but nothing
//! here should differ between two runs), and no deletion, which no operator needs. Composite
//! keys are packed into the `u64` by the caller ([`pack2`]).

/// Packs two 32-bit key parts into one key (`a` high, `b` low).
#[inline]
pub fn pack2(a: i64, b: i64) -> u64 {
    ((a as u64) << 32) | (b as u64 & 0xffff_ffff)
}

/// A slot: a key and the row it maps to (`row == u32::MAX`: empty).
#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    row: u32,
}

const EMPTY: Slot = Slot { key: 0, row: u32::MAX };

/// `u64` key → row number.
pub struct KeyTable {
    slots: Vec<Slot>,
    mask: usize,
    len: usize,
}

impl KeyTable {
    /// A table sized for about `expected` keys (it grows if more come).
    pub fn with_capacity(expected: usize) -> Self {
        let size = (expected.max(8) * 2).next_power_of_two();
        KeyTable { slots: vec![EMPTY; size], mask: size - 1, len: 0 }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 17) as usize & self.mask
    }

    /// The row of `key`, if present.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.row == u32::MAX {
                return None;
            }
            if s.key == key {
                return Some(s.row);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The row of `key`; if absent, `key` is inserted with row `new_row` and `Err(new_row)` is
    /// returned, so a caller can tell a new key from a found one.
    #[inline]
    pub fn get_or_insert(&mut self, key: u64, new_row: u32) -> Result<u32, u32> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.row == u32::MAX {
                self.slots[i] = Slot { key, row: new_row };
                self.len += 1;
                return Err(new_row);
            }
            if s.key == key {
                return Ok(s.row);
            }
            i = (i + 1) & self.mask;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; (self.mask + 1) * 2]);
        self.mask = self.slots.len() - 1;
        self.len = 0;
        for s in old.into_iter().filter(|s| s.row != u32::MAX) {
            let _ = self.get_or_insert(s.key, s.row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    proptest::proptest! {
        #[test]
        fn the_table_agrees_with_a_btreemap(keys in proptest::collection::vec(0u64..500, 0..2000)) {
            let mut table = KeyTable::with_capacity(4);
            let mut model = BTreeMap::new();
            for (i, &k) in keys.iter().enumerate() {
                let got = table.get_or_insert(k, i as u32);
                match model.get(&k) {
                    Some(&row) => proptest::prop_assert_eq!(got, Ok(row)),
                    None => {
                        proptest::prop_assert_eq!(got, Err(i as u32));
                        model.insert(k, i as u32);
                    }
                }
            }
            proptest::prop_assert_eq!(table.len(), model.len());
            for k in 0..600u64 {
                proptest::prop_assert_eq!(table.get(k), model.get(&k).copied());
            }
        }
    }

    #[test]
    fn pack2_keeps_both_parts() {
        assert_eq!(pack2(1, 2), (1 << 32) | 2);
        assert_ne!(pack2(1, 2), pack2(2, 1));
    }
}
