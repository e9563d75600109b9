//! Basic timestamp ordering: every operation in timestamp order, or the transaction aborts.
//!
//! This is the concurrency control TransKV runs on its storage nodes (and, for cached keys, in
//! the switch): each transaction has a timestamp fixed when it first starts, and the committed
//! history must be equivalent to running the transactions one at a time in timestamp order.
//! Each tuple keeps the largest timestamp that read it (`read_ts`) and the timestamp of its
//! last committed writer (`write_ts`), and an operation that comes too late aborts:
//!
//! - **read** by T (timestamp `ts`): too late if `ts < write_ts` (a younger transaction's
//!   value is already there). It also aborts if another transaction's write of the tuple is
//!   pending (not committed) with a smaller timestamp: T would have to see that value, which
//!   is not there yet. (A pending write with a larger timestamp is fine: T precedes it and
//!   reads the value before it.) Otherwise `read_ts = max(read_ts, ts)`.
//! - **write** by T: too late if `ts < read_ts` (a younger transaction read the value T would
//!   replace) or `ts < write_ts`; refused while another transaction's write of the tuple is
//!   pending. Otherwise the write is pending until T commits (installed, `write_ts = ts`) or
//!   aborts (dropped).
//!
//! No operation ever waits, so there is no deadlock; the price is aborts of late operations,
//! which retry with their original timestamp and so eventually become the oldest.
//!
//! Why it is serializable: for every conflict `A → B` the checks above force `ts(A) < ts(B)`
//! — a write-write pair commits in timestamp order (one pending write per tuple, and a write
//! must not be older than the committed one), a read of A's version by B needs `ts(B) ≥
//! write_ts = ts(A)`, and a read by A of a version B overwrote either came first (then B's
//! write needed `ts(B) ≥ read_ts ≥ ts(A)`) or found B's write pending with a larger
//! timestamp. Timestamps are unique, so the graph follows timestamp order and has no cycle.
//!
//! The per-tuple timestamps are kept for every tuple ever touched (two words each).

use super::{install, stored, Concurrency, Conflict, Grant, Intent, Misuse, Read, TxnError, Work};
use crate::id::{Timestamp, TxnId};
use crate::storage::Storage;
use crate::store::Tuple;
use pisadb_core::TupleKey;
use std::collections::BTreeMap;

/// Timestamp ordering (see the module documentation).
#[derive(Debug, Default)]
pub struct TimestampOrdering {
    /// The timestamps of every tuple touched so far.
    tuples: BTreeMap<TupleKey, TupleTimes>,
    /// Active transactions.
    txns: BTreeMap<TxnId, Ordered>,
}

/// What timestamp ordering remembers about one tuple.
#[derive(Clone, Copy, Debug, Default)]
struct TupleTimes {
    /// The largest timestamp that read it.
    read_ts: Timestamp,
    /// The timestamp of its last committed writer (0: the initial load).
    write_ts: Timestamp,
    /// A write not committed yet: the writer and its timestamp.
    pending: Option<(TxnId, Timestamp)>,
}

/// One active transaction.
#[derive(Debug)]
struct Ordered {
    /// Its timestamp.
    ts: Timestamp,
    /// Its pending writes, one per tuple, installed in this order at commit.
    writes: Vec<(TupleKey, i64)>,
}

impl TimestampOrdering {
    /// No transaction yet.
    pub fn new() -> Self {
        TimestampOrdering::default()
    }

    fn withdraw(&mut self, txn: TxnId, writes: &[(TupleKey, i64)], work: &mut Work) {
        for (key, _) in writes {
            work.cc_ops += 1;
            if let Some(times) = self.tuples.get_mut(key) {
                if times.pending.is_some_and(|(writer, _)| writer == txn) {
                    times.pending = None;
                }
            }
        }
    }
}

impl Concurrency for TimestampOrdering {
    fn begin(&mut self, txn: TxnId, ts: Timestamp) -> Result<(), TxnError> {
        if self.txns.contains_key(&txn) {
            return Err(Misuse::AlreadyActive { txn }.into());
        }
        self.txns.insert(txn, Ordered { ts, writes: Vec::new() });
        Ok(())
    }

    fn read<S: Storage + ?Sized>(
        &mut self,
        storage: &S,
        txn: TxnId,
        key: TupleKey,
        intent: Intent,
        work: &mut Work,
    ) -> Result<Read, TxnError> {
        let t = self.txns.get(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        if let Some(&(_, value)) = t.writes.iter().find(|&&(k, _)| k == key) {
            work.tuple_ops += 1;
            return Ok(Read::Done(Tuple { value, version: txn.bits() }));
        }
        if intent != Intent::Unguarded {
            work.cc_ops += 1;
            let times = self.tuples.entry(key).or_default();
            if t.ts < times.write_ts {
                return Err(Conflict::TooLate { key, ts: t.ts, seen: times.write_ts }.into());
            }
            if times.pending.is_some_and(|(writer, ts)| writer != txn && ts < t.ts) {
                return Err(Conflict::Pending { key }.into());
            }
            times.read_ts = times.read_ts.max(t.ts);
        }
        work.tuple_ops += 1;
        Ok(Read::Done(stored(storage, key)))
    }

    fn write(&mut self, txn: TxnId, key: TupleKey, value: i64, work: &mut Work) -> Result<(), TxnError> {
        let t = self.txns.get_mut(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        if let Some(w) = t.writes.iter_mut().find(|(k, _)| *k == key) {
            w.1 = value;
            return Ok(());
        }
        work.cc_ops += 1;
        let times = self.tuples.entry(key).or_default();
        let seen = times.read_ts.max(times.write_ts);
        if t.ts < seen {
            return Err(Conflict::TooLate { key, ts: t.ts, seen }.into());
        }
        if times.pending.is_some() {
            return Err(Conflict::Pending { key }.into());
        }
        times.pending = Some((txn, t.ts));
        t.writes.push((key, value));
        Ok(())
    }

    fn prepare<S: Storage + ?Sized>(&mut self, _storage: &S, txn: TxnId, _work: &mut Work) -> Result<(), TxnError> {
        // Every check was made when the operation came: nothing can make it late now.
        match self.txns.contains_key(&txn) {
            true => Ok(()),
            false => Err(Misuse::UnknownTxn { txn }.into()),
        }
    }

    fn commit<S: Storage + ?Sized>(
        &mut self,
        storage: &mut S,
        txn: TxnId,
        work: &mut Work,
    ) -> Result<Vec<Grant>, TxnError> {
        let t = self.txns.remove(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        let installed = install(storage, txn, &t.writes, work);
        for &(key, _) in &t.writes {
            let times = self.tuples.entry(key).or_default();
            times.write_ts = t.ts;
            times.pending = None;
        }
        installed.map(|()| Vec::new())
    }

    fn abort<S: Storage + ?Sized>(&mut self, _storage: &S, txn: TxnId, work: &mut Work) -> Vec<Grant> {
        if let Some(t) = self.txns.remove(&txn) {
            self.withdraw(txn, &t.writes, work);
        }
        Vec::new()
    }

    fn is_active(&self, txn: TxnId) -> bool {
        self.txns.contains_key(&txn)
    }

    fn active(&self) -> usize {
        self.txns.len()
    }
}
