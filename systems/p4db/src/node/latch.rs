//! The row latches of the P4DB prototype's engine, and when two cores meet at one.
//!
//! The prototype guards each row's lock state with a `std::mutex` (`no_wait.hpp`), taken on
//! every lock and unlock, shared or exclusive. An uncontended acquisition is part of the
//! per-operation CPU the testbed's fit already contains ([`CpuCosts::lock_ns`] is derived
//! from it); what the fit cannot contain is two cores taking the same latch at once, which
//! costs a measured [`CpuCosts::latch_ns`] instead (`benches/latch.rs`: two threads on one
//! lock word, each acquisition while the other contends).
//!
//! The simulator runs each handler atomically, so "at once" is judged in virtual time: an
//! acquisition at `t` on core `c` is contended if another core took the same row's latch less
//! than `latch_ns` before or after `t` — the time one contended acquisition takes, within which
//! the two would have met. The memory of the last acquisition per row is pruned of entries
//! older than that window whenever it grows past [`Latches::PRUNE_AT`] rows, so it stays as
//! small as the set of rows touched in the last few microseconds.
//!
//! [`CpuCosts::lock_ns`]: crate::node::CpuCosts::lock_ns
//! [`CpuCosts::latch_ns`]: crate::node::CpuCosts::latch_ns

use pisadb_core::{Nanos, TupleKey};
use std::collections::BTreeMap;

/// The last acquisition of each recently latched row.
#[derive(Debug, Default)]
pub(super) struct Latches {
    /// Per row: when its latch was last taken, and by which core.
    last: BTreeMap<TupleKey, (Nanos, u16)>,
    /// Contended acquisitions so far.
    pub(super) contended: u64,
}

impl Latches {
    /// Rows remembered before old entries are pruned.
    const PRUNE_AT: usize = 4_096;

    /// Core `core` takes `key`'s latch at `at`: the extra CPU time it costs, `contended_ns` if
    /// another core took it within `contended_ns` of `at`, else nothing.
    pub(super) fn take(&mut self, at: Nanos, core: u16, key: TupleKey, contended_ns: Nanos) -> Nanos {
        let met = self.last.get(&key).is_some_and(|&(t, c)| c != core && t.abs_diff(at) < contended_ns);
        self.last.insert(key, (at, core));
        if self.last.len() > Self::PRUNE_AT {
            self.last.retain(|_, &mut (t, _)| t.saturating_add(contended_ns) > at);
        }
        if met {
            self.contended += 1;
            contended_ns
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_another_core_within_the_window_contends() {
        let mut l = Latches::default();
        let row = TupleKey::new(0, 7);
        assert_eq!(l.take(1_000, 0, row, 200), 0, "first at the row");
        assert_eq!(l.take(1_050, 0, row, 200), 0, "the same core again");
        assert_eq!(l.take(1_100, 1, row, 200), 200, "another core 50 ns later");
        assert_eq!(l.take(1_400, 0, row, 200), 0, "another core, but 300 ns later");
        assert_eq!(l.take(1_450, 1, TupleKey::new(0, 8), 200), 0, "another row");
        assert_eq!(l.contended, 1);
    }
}
