//! Which server is primary and which is backup of each shard, and how that changes when a
//! server fails (§3.5: "SwitchTx can select a backup participant as the new primary
//! participant"; the paper leaves the mechanism to prior work, FaRM).
//!
//! **The map.** Shard `i` starts on server `i` with its backup on `i + 1 mod n`
//! ([`ShardMap::initial`]). A map has an epoch; it changes only by removing a failed server
//! ([`ShardMap::without`]), which makes the next epoch: every shard that server was primary of
//! is served by its backup from now on (and has no backup), every shard it backed up keeps its
//! primary and loses its backup. A shard whose primary and backup have both gone is lost: its
//! primary stays named, so transactions on it wait (and time out) rather than read nothing.
//! Nothing is re-replicated and a removed server never comes back into the map: FaRM would
//! copy the shards to a new backup in the background; we do not.
//!
//! **Who changes it.** One configuration manager (the last server, [`ShardMap::manager`]),
//! standing in for FaRM's ZooKeeper-backed one: it grants every server a lease, and removes a
//! server whose lease it has not renewed for a lease and a margin. A server serves as a
//! primary or backup only while it holds a lease, which it counts from when it *asked* for it,
//! so by the time the manager removes it, it has stopped serving: a cut-off primary never
//! answers next to its promoted backup. The manager itself is assumed not to fail (FaRM elects
//! a new one through ZooKeeper; not built), so fault injection never crashes its server.
//!
//! **How it travels.** Every lease grant carries the manager's map; a server adopts a map of
//! a higher epoch than its own. Clients route by their server's map, and participants check
//! that a prepare's roles match their own map (a write of a shard must come to its primary or
//! its backup, a read to its primary) and refuse it otherwise, so a transaction is never
//! carried out under two maps that disagree about the shards it touches. Resolutions of
//! attempts in flight at a change are fenced the same way (the resolution rule, `Query::hear`).

use crate::wire::Item;

/// The shards' primaries and backups at one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardMap {
    /// Bumped by every change.
    pub epoch: u32,
    /// Shard → its primary server.
    pub primary: Vec<u8>,
    /// Shard → its backup server, if it still has one.
    pub backup: Vec<Option<u8>>,
    /// Servers in the map (bit set).
    pub members: u8,
}

/// A backup field on the wire that names no server.
const NO_BACKUP: u64 = u64::MAX;

impl ShardMap {
    /// Shard `i` on server `i`, backed up on `i + 1 mod n`; epoch 0.
    pub fn initial(n: u8) -> Self {
        ShardMap {
            epoch: 0,
            primary: (0..n).collect(),
            backup: (0..n).map(|i| Some((i + 1) % n)).collect(),
            members: if n >= 8 { u8::MAX } else { (1u8 << n) - 1 },
        }
    }

    /// The server that runs the configuration manager among `n`.
    pub fn manager(n: u8) -> u8 {
        n - 1
    }

    /// The primary of `shard`.
    pub fn primary_of(&self, shard: u8) -> u8 {
        self.primary.get(usize::from(shard)).copied().unwrap_or(shard)
    }

    /// The backup of `shard`, if any.
    pub fn backup_of(&self, shard: u8) -> Option<u8> {
        self.backup.get(usize::from(shard)).copied().flatten()
    }

    /// Whether `server` is in the map.
    pub fn is_member(&self, server: u8) -> bool {
        self.members & (1 << server) != 0
    }

    /// Whether removing `server` keeps every shard served: each shard it leads has a backup to
    /// take over. The manager removes a server whose lease lapsed only then; otherwise it
    /// waits for it (a shard with no copy left would be lost, where the server may only be
    /// cut off for a while, as behind a restarting ToR switch).
    pub fn can_remove(&self, server: u8) -> bool {
        (0..self.primary.len()).all(|s| self.primary[s] != server || self.backup[s].is_some())
    }

    /// The next map, without `server`: its primary shards go to their backups (none left to
    /// back them up), its backup roles end.
    pub fn without(&self, server: u8) -> Self {
        let mut next = self.clone();
        next.epoch += 1;
        next.members &= !(1 << server);
        for shard in 0..next.primary.len() {
            if next.backup[shard] == Some(server) {
                next.backup[shard] = None;
            }
            if next.primary[shard] == server {
                if let Some(b) = next.backup[shard].take() {
                    next.primary[shard] = b;
                }
            }
        }
        next
    }

    /// The map as the items of a lease grant: item `i` is shard `i` (value: primary; version:
    /// backup or none), its `locked` bit whether server `i` is a member.
    pub fn to_items(&self) -> Vec<Item> {
        (0..self.primary.len())
            .map(|i| Item {
                key: i as u64,
                value: u64::from(self.primary[i]),
                version: self.backup[i].map_or(NO_BACKUP, u64::from),
                locked: self.is_member(i as u8),
            })
            .collect()
    }

    /// The map of a lease grant's items at `epoch`; `None` if they do not describe `n` shards
    /// on servers below `n`.
    pub fn from_items(epoch: u32, n: u8, items: &[Item]) -> Option<Self> {
        if items.len() != usize::from(n) {
            return None;
        }
        let mut map = ShardMap { epoch, primary: Vec::new(), backup: Vec::new(), members: 0 };
        for (i, item) in items.iter().enumerate() {
            let server = |v: u64| u8::try_from(v).ok().filter(|&s| s < n);
            if item.key != i as u64 {
                return None;
            }
            map.primary.push(server(item.value)?);
            map.backup.push(if item.version == NO_BACKUP { None } else { Some(server(item.version)?) });
            if item.locked {
                map.members |= 1 << i;
            }
        }
        Some(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removing_a_server_promotes_its_backup_and_ends_its_backup_role() {
        let m = ShardMap::initial(8).without(3);
        assert_eq!(m.epoch, 1);
        assert_eq!((m.primary_of(3), m.backup_of(3)), (4, None), "shard 3 is served by its backup");
        assert_eq!((m.primary_of(2), m.backup_of(2)), (2, None), "shard 2 lost its backup");
        assert_eq!((m.primary_of(4), m.backup_of(4)), (4, Some(5)), "others unchanged");
        assert!(!m.is_member(3) && m.is_member(4));
    }

    #[test]
    fn a_shard_whose_primary_and_backup_both_went_stays_on_its_primary() {
        let m = ShardMap::initial(8).without(3).without(4);
        assert_eq!(m.epoch, 2);
        assert_eq!((m.primary_of(3), m.backup_of(3)), (4, None), "lost: still named, never answered");
        assert_eq!((m.primary_of(4), m.backup_of(4)), (5, None));
    }

    #[test]
    fn a_server_whose_shard_has_no_backup_left_is_not_removed() {
        let m = ShardMap::initial(8).without(3);
        assert!(!m.can_remove(2), "server 2 leads shard 2, whose backup was server 3");
        assert!(!m.can_remove(4), "server 4 leads shard 3, which has no backup left");
        assert!(m.can_remove(5), "shard 5 is backed up on server 6");
    }

    #[test]
    fn a_map_survives_its_wire_items() {
        let m = ShardMap::initial(8).without(6);
        assert_eq!(ShardMap::from_items(m.epoch, 8, &m.to_items()), Some(m.clone()));
        let mut bad = m.to_items();
        bad[2].value = 9;
        assert_eq!(ShardMap::from_items(1, 8, &bad), None, "a server out of range");
        assert_eq!(ShardMap::from_items(1, 7, &m.to_items()), None, "the wrong number of shards");
    }
}
