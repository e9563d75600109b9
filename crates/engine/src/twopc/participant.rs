//! The participant's side of two-phase commit: the transactions a node serves, their votes and
//! leases.

use crate::id::TxnId;
use std::collections::BTreeMap;

/// Who a served transaction is served for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// One of this node's own workers (its attempt id says which): no messages, no lease.
    Local,
    /// A coordinator on node `0`.
    Remote(u16),
}

/// One transaction a node serves: its 2PC state and the system's own progress `T` (which reads
/// are done, what they returned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served<T> {
    /// Who it is served for.
    pub origin: Origin,
    /// Whether it voted yes: from then on only its coordinator may end it.
    pub voted: bool,
    /// The system's progress on it.
    pub progress: T,
}

/// What to do when a served transaction's lease runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseAction {
    /// Nothing: it ended already, or it is a local one (its worker ends it).
    Nothing,
    /// It voted yes: ask coordinator `coordinator` for the outcome, and again after another
    /// lease if no answer comes.
    Inquire {
        /// The node to ask.
        coordinator: u16,
    },
    /// It has not voted: its coordinator gave up on it or crashed. Abort it here; a late
    /// `prepare` will find it gone and vote no.
    Expire,
}

/// The transactions a node serves (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant<T> {
    /// Served transactions by id.
    txns: BTreeMap<TxnId, Served<T>>,
}

impl<T> Default for Participant<T> {
    fn default() -> Self {
        Participant { txns: BTreeMap::new() }
    }
}

impl<T> Participant<T> {
    /// Serving nothing yet.
    pub fn new() -> Self {
        Participant::default()
    }

    /// Starts serving `txn` for `origin`; `false` (and nothing changes) if it is served
    /// already — a duplicated request, which must not start the work twice.
    pub fn admit(&mut self, txn: TxnId, origin: Origin, progress: T) -> bool {
        if self.txns.contains_key(&txn) {
            return false;
        }
        self.txns.insert(txn, Served { origin, voted: false, progress });
        true
    }

    /// Serves `txn`, which voted yes before a crash, for `coordinator` again (recovery).
    pub fn admit_prepared(&mut self, txn: TxnId, coordinator: u16, progress: T) {
        self.txns.insert(txn, Served { origin: Origin::Remote(coordinator), voted: true, progress });
    }

    /// The served transaction `txn`.
    pub fn get(&self, txn: TxnId) -> Option<&Served<T>> {
        self.txns.get(&txn)
    }

    /// The served transaction `txn`, to update its progress.
    pub fn get_mut(&mut self, txn: TxnId) -> Option<&mut Served<T>> {
        self.txns.get_mut(&txn)
    }

    /// Whether `txn` is served here.
    pub fn contains(&self, txn: TxnId) -> bool {
        self.txns.contains_key(&txn)
    }

    /// Phase one: votes yes for `txn` if it is served here, has not voted, and is `ready` (its
    /// reads are done) — and from then on it is bound to its coordinator. Otherwise no.
    pub fn vote(&mut self, txn: TxnId, ready: impl FnOnce(&T) -> bool) -> bool {
        match self.txns.get_mut(&txn) {
            Some(s) if !s.voted && ready(&s.progress) => {
                s.voted = true;
                true
            }
            _ => false,
        }
    }

    /// What `txn`'s lease running out means (see [`LeaseAction`]).
    pub fn lease_expired(&self, txn: TxnId) -> LeaseAction {
        match self.txns.get(&txn) {
            Some(Served { origin: Origin::Remote(coordinator), voted: true, .. }) => {
                LeaseAction::Inquire { coordinator: *coordinator }
            }
            Some(Served { origin: Origin::Remote(_), voted: false, .. }) => LeaseAction::Expire,
            Some(Served { origin: Origin::Local, .. }) | None => LeaseAction::Nothing,
        }
    }

    /// Stops serving `txn` (it committed or aborted) and returns what it was; the host logs the
    /// outcome if it had voted.
    pub fn end(&mut self, txn: TxnId) -> Option<Served<T>> {
        self.txns.remove(&txn)
    }

    /// Transactions that voted yes and wait for their outcome, in id order.
    pub fn in_doubt(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.txns.iter().filter(|(_, s)| s.voted).map(|(&txn, _)| txn)
    }

    /// Every served transaction, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (TxnId, &Served<T>)> + '_ {
        self.txns.iter().map(|(&txn, s)| (txn, s))
    }

    /// Transactions served.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether none is served.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }
}
