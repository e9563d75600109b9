//! A server's data: its primary shard (single-version records), its backup copy of the
//! previous shard, and the write locks of its primary shard in the engine's lock table.
//!
//! A record is a value and a version (the id of the transaction that wrote it; 0 initially);
//! records are created on first touch. A write lock is exclusive and never waited for
//! (NO_WAIT: a participant that finds one fails its attempt), held by one attempt of one
//! switch slot, (slot, attempt), which is the lock table's transaction id `(slot + 1) << 32 |
//! attempt` (the attempt's own transaction id). Validation is not the lock table's: each read
//! primary checks its own keys' versions once every write lock is held (see
//! the participant), which is why the engine's single-node OCC is not used.

use crate::keys::shard_of;
use pisadb_core::TupleKey;
use pisadb_engine::id::TxnId;
use pisadb_engine::locks::{Acquire, LockTable};
use pisadb_wire::node::{LockMode, OnConflict};
use std::collections::BTreeMap;
use std::ops::Range;

/// A record of the primary shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The value.
    pub value: u64,
    /// The writer's transaction id (0: initial).
    pub version: u64,
}

/// An attempt that holds locks: (switch slot, attempt).
pub type Owner = (u16, u32);

/// A server's stores and locks (see the module documentation).
#[derive(Debug, Default)]
pub struct Store {
    /// The primary shard's records (and those of shards taken over).
    primary: BTreeMap<u64, Record>,
    /// The backup copy of the previous shard: key → (value, version).
    backup: BTreeMap<u64, (u64, u64)>,
    /// The write locks of the primary records.
    locks: LockTable,
}

/// The lock table's name of a key.
fn tuple(key: u64) -> TupleKey {
    TupleKey::new(u16::from(shard_of(key)), key & ((1 << 40) - 1))
}

/// The key a lock table's tuple names.
fn key(t: TupleKey) -> u64 {
    (u64::from(t.table) << 40) | t.row
}

/// The lock table's id of an owner: the attempt's transaction id.
fn id((slot, attempt): Owner) -> TxnId {
    TxnId::from_bits(((u64::from(slot) + 1) << 32) | u64::from(attempt))
}

/// The owner a lock table's id names.
fn owner(t: TxnId) -> Owner {
    (((t.bits() >> 32) - 1) as u16, t.bits() as u32)
}

impl Store {
    /// The primary records.
    pub fn primary(&self) -> &BTreeMap<u64, Record> {
        &self.primary
    }

    /// The backup copy: key → (value, version).
    pub fn backup(&self) -> &BTreeMap<u64, (u64, u64)> {
        &self.backup
    }

    /// The record of `key` as it reads (a default one if never written).
    pub fn get(&self, key: u64) -> Record {
        self.primary.get(&key).copied().unwrap_or_default()
    }

    /// The record of `key`, created if it was not there.
    pub fn entry(&mut self, key: u64) -> &mut Record {
        self.primary.entry(key).or_default()
    }

    /// The record of `key`, if there is one.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut Record> {
        self.primary.get_mut(&key)
    }

    /// Whether any attempt holds `key`'s lock.
    pub fn is_locked(&self, key: u64) -> bool {
        self.locks.is_held(tuple(key))
    }

    /// Whether `owner` holds `key`'s lock.
    pub fn held_by(&self, key: u64, owner: Owner) -> bool {
        self.locks.holds(tuple(key), id(owner))
    }

    /// Locks every key of `keys` for `owner`, whoever held them (the caller checked they
    /// were free, or restores them as a log or a promotion says); creates their records.
    pub fn lock(&mut self, keys: &[u64], owner: Owner) {
        for &k in keys {
            self.primary.entry(k).or_default();
            match self.locks.acquire(tuple(k), id(owner), 0, LockMode::Exclusive, OnConflict::Deny) {
                Acquire::Granted => {}
                _ => {
                    self.locks.install_exclusive(tuple(k), id(owner));
                }
            }
        }
    }

    /// Releases `key`'s lock if `owner` holds it (and its record exists, as every locked
    /// one does).
    pub fn unlock(&mut self, key: u64, owner: Owner) {
        if self.primary.contains_key(&key) && self.held_by(key, owner) {
            self.locks.release(tuple(key), id(owner));
        }
    }

    /// Every key still locked with its holder, in key order.
    pub fn locked(&self) -> Vec<(u64, Owner)> {
        self.locks.held().map(|(t, o)| (key(t), owner(o))).collect()
    }

    /// Puts (value, version) in the backup copy; the before-image (or (0, 0)).
    pub fn back_up(&mut self, key: u64, value: (u64, u64)) -> (u64, u64) {
        self.backup.insert(key, value).unwrap_or((0, 0))
    }

    /// The backup copy of `key`.
    pub fn backed_up(&self, key: u64) -> Option<(u64, u64)> {
        self.backup.get(&key).copied()
    }

    /// Moves the backup copy of `keys` into the primary store (a promotion), unlocked.
    pub fn promote(&mut self, keys: Range<u64>) {
        let moved: Vec<u64> = self.backup.range(keys).map(|(&k, _)| k).collect();
        for k in moved {
            let (value, version) = self.backup.remove(&k).expect("listed");
            self.primary.insert(k, Record { value, version });
            if self.is_locked(k) {
                let holders: Vec<TxnId> = self.locks.holders(tuple(k)).collect();
                for h in holders {
                    self.locks.release(tuple(k), h);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_has_one_owner_is_released_only_by_it_and_is_listed_by_key() {
        let mut s = Store::default();
        let (a, b) = (crate::keys::key_of(3, 1, 0, 24), crate::keys::key_of(1, 9, 2, 24));
        s.lock(&[a, b], (7, 2));
        assert!(s.is_locked(a) && s.held_by(a, (7, 2)) && !s.held_by(a, (7, 1)));
        assert_eq!(s.locked(), vec![(b, (7, 2)), (a, (7, 2))]);
        s.unlock(a, (7, 1));
        assert!(s.is_locked(a), "only its owner releases it");
        s.lock(&[a], (9, 1));
        assert_eq!(s.locked(), vec![(b, (7, 2)), (a, (9, 1))], "restored over the old holder");
        s.unlock(a, (9, 1));
        s.unlock(b, (7, 2));
        assert!(s.locked().is_empty());
        assert_eq!(s.get(a), Record::default(), "locking created the record, unwritten");
    }

    #[test]
    fn a_promoted_backup_copy_becomes_primary_records() {
        let mut s = Store::default();
        let k = crate::keys::key_of(2, 5, 0, 24);
        assert_eq!(s.back_up(k, (4, 77)), (0, 0));
        s.promote(2 << 40..3 << 40);
        assert_eq!((s.get(k), s.backed_up(k)), (Record { value: 4, version: 77 }, None));
    }
}
