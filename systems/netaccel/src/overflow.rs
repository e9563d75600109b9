//! What the control plane does with overflow: it joins and aggregates the tuples the switch
//! could not hold, itself (seed 002 §3.4, Fig. 5).
//!
//! - (i) an outer key that found no room in its chain: kept in the control plane's own join
//!   table;
//! - (ii) an inner tuple whose chain was full: its key may be one of (i)'s, so it is probed
//!   there, and aggregated if it matches (dropped otherwise);
//! - (iii) an inner tuple that joined in the switch but whose group found no room: aggregated.
//!
//! - a probe tuple of the reloaded pattern (Q20's `partsupp`) whose group may be here: looked
//!   up among its groups, and kept if `2·availqty > sum`.
//!
//! All of (i) arrive before any of (ii) (the switch's barrier; the CPU port is one FIFO
//! link), so a probe never misses a key that is still on its way. The groups it ends with are
//! disjoint from the switch's (see [`crate::program`]), and together they are pattern 1's
//! answer. The structures are the executor's [`KeyTable`]s.

use crate::program::{OVERFLOW_CHAIN, OVERFLOW_GROUP, OVERFLOW_OUTER, OVERFLOW_PROBE};
use crate::wire::Msg;
use pisadb_olap::keytable::{pack2, KeyTable};

/// The control plane's join table and groups.
pub struct Overflow {
    /// Outer keys of overflow (i).
    keys: KeyTable,
    /// (partkey, suppkey) → position in `groups`.
    index: KeyTable,
    /// (partkey, suppkey, sum), in order of first appearance.
    groups: Vec<(u32, u32, i64)>,
    /// Tuples received by type: (i), (ii), (iii).
    pub received: [u64; 3],
    /// Type (ii) tuples that matched no key of (i).
    pub unmatched: u64,
    /// Probe tuples of the reloaded pattern received.
    pub probes: u64,
    /// Probe tuples (partkey, suppkey, availqty) that found their group here and passed
    /// `2·availqty > sum`.
    passing: Vec<(u32, u32, u32)>,
}

impl Default for Overflow {
    fn default() -> Self {
        Overflow {
            keys: KeyTable::with_capacity(64),
            index: KeyTable::with_capacity(64),
            groups: Vec::new(),
            received: [0; 3],
            unmatched: 0,
            probes: 0,
            passing: Vec::new(),
        }
    }
}

impl Overflow {
    /// Takes one overflowed tuple; `false` if it is not an overflow tuple.
    pub fn take(&mut self, m: &Msg) -> bool {
        match m.low_flags() {
            OVERFLOW_OUTER => {
                self.received[0] += 1;
                let _ = self.keys.get_or_insert(u64::from(m.a), 0);
            }
            OVERFLOW_CHAIN => {
                self.received[1] += 1;
                if self.keys.get(u64::from(m.a)).is_some() {
                    self.aggregate(m);
                } else {
                    self.unmatched += 1;
                }
            }
            OVERFLOW_GROUP => {
                self.received[2] += 1;
                self.aggregate(m);
            }
            OVERFLOW_PROBE => {
                self.probes += 1;
                let key = pack2(i64::from(m.a), i64::from(m.b));
                if let Some(i) = self.index.get(key) {
                    if 2 * i64::from(m.c) > self.groups[i as usize].2 {
                        self.passing.push((m.a, m.b, m.c));
                    }
                }
            }
            _ => return false,
        }
        true
    }

    fn aggregate(&mut self, m: &Msg) {
        let key = pack2(i64::from(m.a), i64::from(m.b));
        match self.index.get_or_insert(key, self.groups.len() as u32) {
            Ok(i) => self.groups[i as usize].2 += i64::from(m.c),
            Err(_) => self.groups.push((m.a, m.b, i64::from(m.c))),
        }
    }

    /// The groups it holds: (partkey, suppkey, sum).
    pub fn groups(&self) -> &[(u32, u32, i64)] {
        &self.groups
    }

    /// The probe rows of the reloaded pattern that passed here: (partkey, suppkey, availqty).
    pub fn passing(&self) -> &[(u32, u32, u32)] {
        &self.passing
    }
}
