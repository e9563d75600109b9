//! A server as participant: write primary, read primary and write backup of other clients'
//! transactions (and of its own clients'), over its [`Store`].
//!
//! After the execute phase a client hands every participant its part (`prepare`): the writes
//! of its shard (write primaries), the writes it backs up (write backups), the reads of its
//! shard with their versions (read primaries), and who the participants are. From there the
//! coordinator (the switch tree, or in FaSST the client) drives the phases here:
//!
//! - *lock*: a write primary try-locks its write keys (no waiting), checking each version is
//!   still the one read (so a read-modify-write key needs no separate validation race), and
//!   answers `lock_ok` or `fail`;
//! - *validate* (on the scattered `lock_ok`): a read primary checks every read version is
//!   unchanged and the record not locked by another attempt: `validate_ok` or `fail`; a write
//!   primary that is the only read primary validates right after locking, without a round
//!   (single-shard transactions, §3.2.3);
//! - *commit backup* (on `validate_ok`): a write backup applies the redo record to its copy
//!   (keeping before-images for a rollback): `replicate_ok`;
//! - *commit primary* (on `replicate_ok`): a write primary installs its writes (version := the
//!   transaction id), unlocks: `commit_ok`;
//! - *abort*: a `fail` reaches the write participants, which unlock and forget; a backup that
//!   already applied its redo record puts its before-images back first (§3.5: the changes of
//!   a transaction that did not commit are rolled back). A `fail` can come after
//!   `validate_ok`: a participant whose prepare arrives late may still refuse it (a promoted
//!   backup whose new map no longer gives it the prepare's roles).
//!
//! A read-only transaction's read primaries copy their versions (`version_copy_ok`), then
//! validate and send the values to the client; a blind write's write primaries lock (no
//! version to check) and answer `validate_ok` at once.
//!
//! **Serializability across participants.** Validation is distributed: each read primary
//! checks only its own keys, and the serialization point is when the last `validate_ok` is
//! gathered, while every write lock is held (locks are taken before any validation starts,
//! since validation is scattered only after all `lock_ok`s). This is OCC's lock → validate
//! order across nodes, which is why the locks are the engine's lock table and the validation
//! is this module's.
//!
//! **Out of order.** A participant keeps, per slot, only the newest attempt it heard of
//! ([`Part`]). A request for an older attempt is dropped; a `fail` or a phase request that
//! overtakes the `prepare` leaves a placeholder that the `prepare` finds (an aborted one makes
//! it a no-op, an early request is replayed after it). A `prepare` for a newer attempt
//! releases what an older one still held (its client has moved on, so it was aborted).
//!
//! **Queries** ([`crate::server::resolution`]): a participant asked about an attempt freezes
//! it (no more control messages for it) and answers what it did; told the decision, it
//! installs or applies what it holds, or rolls back and unlocks.
//!
//! **Promotion** ([`Participant::take_over`]): when its map makes it primary of the shard it
//! backed up, its backup copy becomes primary records; keys whose redo record it applied for
//! an attempt it cannot know decided stay locked by that attempt ([`Part::promoted`]) until
//! that attempt is resolved (by the server's own resolutions); a redo record it had not applied
//! never will be.
//!
//! **Where the client is.** In FaSST a participant's phase result goes to the client, which
//! may be this very server: then it is handed over at once through [`LocalClient`] (no
//! network between them), and the client may hand the next phase back here the same way. The
//! trait is what lets the two pieces call each other without either owning the other.

use super::events::ServerEvent;
use super::resolution::{answer, answer_to};
use super::shared::Out;
use super::shared::Shared;
use super::store::{Owner, Store};
use crate::config::ShardMap;
use crate::keys::shard_of;
use crate::tree::{Coordination, Participants};
use crate::wal::{LoggedParts, WalRecord};
use crate::wire::{Control, Data, Item, MsgType, FLAG_RETRY};
use pisadb_core::Nanos;
use std::collections::BTreeMap;

/// The server's client side, as a participant sees it: where a phase result or outcome for a
/// client on this server goes, handled at once.
pub trait LocalClient {
    /// `c` (a participant's phase result, or a scattered outcome) reaches this server's client.
    fn deliver(&mut self, now: Nanos, c: &Control, sh: &Shared, participant: &mut Participant, out: &mut Out);
}

/// A participant's state for one slot's newest attempt.
#[derive(Clone, Debug, Default)]
pub struct Part {
    /// The attempt.
    pub attempt: u32,
    /// Its tag (the switch's check of the slot's current attempt).
    pub tag: u16,
    /// Its transaction id.
    pub txn: u64,
    /// The client server.
    pub client: u8,
    /// The client's thread.
    pub thread: u8,
    /// How it is coordinated ([`Coordination`] as a byte).
    pub coord: u8,
    /// Whether it is a retry (high priority).
    pub retry: bool,
    /// Its participants.
    pub parts: Participants,
    /// Whether its `prepare` arrived.
    pub prepared: bool,
    /// Whether it aborted here.
    pub aborted: bool,
    /// Frozen by a query: no more control messages for it.
    pub frozen: bool,
    /// Primary: writes of this shard.
    pub writes: Vec<(u64, u64)>,
    /// Primary: reads of this shard with their versions.
    pub reads: Vec<(u64, u64)>,
    /// Backup: writes it backs up.
    pub redo: Vec<(u64, u64)>,
    /// Backup: before-images of what it applied, for a rollback.
    pub undo: Vec<(u64, (u64, u64))>,
    /// Keys it holds locked.
    pub locked: Vec<u64>,
    /// Since when.
    pub locked_at: Nanos,
    /// Whether a primary installed its writes here.
    pub installed: bool,
    /// Whether a backup applied its redo record here.
    pub replicated: bool,
    /// Requests that came before the prepare.
    pub early: Vec<MsgType>,
    /// Keys whose redo record this backup had applied when it was promoted to their primary,
    /// locked by this attempt until its outcome is known ([`Participant::take_over`]).
    pub promoted: Vec<u64>,
}

impl Part {
    /// Whether it holds its part (locked writes or a redo record, applied or not, or done).
    fn holds(&self) -> bool {
        !self.locked.is_empty() || !self.redo.is_empty() || self.installed || self.replicated
    }
}

/// The participant participants' sets as logged.
pub fn logged(p: &Participants) -> LoggedParts {
    (p.wp, p.wb, p.rp, p.client)
}

/// The participants' sets a log record names.
pub fn unlogged((wp, wb, rp, client): LoggedParts) -> Participants {
    Participants { wp, wb, rp, client }
}

/// A server's participant side (see the module documentation).
#[derive(Debug, Default)]
pub struct Participant {
    /// Per slot, its newest attempt's state.
    parts: BTreeMap<u16, Part>,
    /// The newest attempt of each slot this server has heard of as a participant: one older
    /// than it was decided by its client ([`Query::hear`](super::resolution::Query::hear),
    /// "superseded"), even where its part was dropped.
    seen: BTreeMap<u16, u32>,
    /// The data.
    store: Store,
}

impl Participant {
    /// The stores and locks.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The stores, to change (Eris's executor writes the primary records).
    pub fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    /// The part of `slot`, if it is for `attempt`.
    pub fn part(&self, slot: u16, attempt: u32) -> Option<&Part> {
        self.parts.get(&slot).filter(|p| p.attempt == attempt)
    }

    /// The client thread of `slot`'s part (the core its resolution runs on).
    pub fn thread_of(&self, slot: u16) -> Option<u16> {
        self.parts.get(&slot).map(|p| u16::from(p.thread))
    }

    /// The (slot, attempt)s holding promoted redo records still undecided.
    pub fn promoted(&self) -> Vec<(u16, u32)> {
        self.parts.iter().filter(|(_, p)| !p.promoted.is_empty()).map(|(&s, p)| (s, p.attempt)).collect()
    }

    /// A restarted server's locks count from `now`.
    pub fn restart_lock_clocks(&mut self, now: Nanos) {
        for part in self.parts.values_mut() {
            part.locked_at = now;
        }
    }

    /// Notes that a participant heard of `attempt` of `slot` (with leases on: only a promoted
    /// primary's resolution asks about old attempts).
    pub fn note_attempt(&mut self, slot: u16, attempt: u32, sh: &Shared) {
        if sh.cfg.lease_ns > 0 {
            let newest = self.seen.entry(slot).or_insert(0);
            *newest = (*newest).max(attempt);
        }
    }

    /// The attempts a removed client left with this server holding a part: a member resolves
    /// them itself (every member holding a part does, and the same rule under the same map
    /// decides the same).
    pub fn orphans(&self, removed: u8) -> Vec<(u16, u32)> {
        self.parts
            .iter()
            .filter(|(_, p)| removed & (1 << p.client) != 0 && !p.aborted && (!p.locked.is_empty() || p.replicated))
            .map(|(&slot, p)| (slot, p.attempt))
            .collect()
    }

    /// A client's read (the execute phase): each key's value and version, or "locked".
    pub fn serve_read(&mut self, now: Nanos, d: &Data, from: u8, sh: &Shared, out: &mut Out) {
        if !sh.serving(now) {
            return;
        }
        // A newer attempt of the slot: the client decided the older one aborted, so whatever
        // it still holds here (its `fail` was lost on the way) goes.
        if self.parts.get(&d.slot).is_some_and(|p| p.attempt < d.attempt) {
            self.release(now, d.slot, sh, out);
            self.parts.remove(&d.slot);
        }
        let mut reply = Data::new(MsgType::ReadReply, d.slot, d.tag, d.attempt, 0);
        reply.client = d.client;
        reply.thread = d.thread;
        reply.flags = d.flags;
        reply.items = d
            .items
            .iter()
            .map(|i| {
                let r = self.store.get(i.key);
                // A key this server is not (or no longer) primary of reads as locked: the
                // client, routing by an older map, aborts and retries.
                let foreign = sh.map.primary_of(shard_of(i.key)) != sh.me();
                Item { key: i.key, value: r.value, version: r.version, locked: self.store.is_locked(i.key) || foreign }
            })
            .collect();
        out.cpu_ns += sh.cfg.costs.handler_ns + sh.cfg.costs.item_ns * d.items.len() as u64;
        sh.send(out, from, reply.datagram(u16::from(sh.me()), u16::from(from)));
    }

    /// Releases what `slot`'s part holds at this primary. Keys it holds as a promoted redo
    /// record still undecided are released as committed: a part is released undecided only
    /// when a later attempt of its slot arrives, and its client moved on from this one either
    /// committed or after every participant, this one included, carried out the abort.
    pub fn release(&mut self, now: Nanos, slot: u16, sh: &Shared, out: &mut Out) {
        self.unlock_promoted(slot, true, sh, out);
        let Some(part) = self.parts.get_mut(&slot) else { return };
        let owner = (slot, part.attempt);
        let locked = std::mem::take(&mut part.locked);
        if !locked.is_empty() {
            out.events.push(ServerEvent::LockTime(now.saturating_sub(part.locked_at)));
            sh.log(out, || WalRecord::Unlocked { slot, attempt: owner.1 });
        }
        for key in locked {
            self.store.unlock(key, owner);
        }
    }

    /// A client's `prepare`: its part of the attempt; starts the lock phase (a write primary)
    /// or the version copy (a read-only transaction's read primary).
    pub fn prepare(&mut self, now: Nanos, d: &Data, sh: &Shared, client: &mut dyn LocalClient, out: &mut Out) {
        let me = sh.me();
        let slot = d.slot;
        if !sh.serving(now) {
            return;
        }
        let existing = self.parts.get(&slot).map(|p| (p.attempt, p.prepared));
        match existing {
            Some((a, _)) if a > d.attempt => return,
            Some((a, true)) if a == d.attempt => return,
            Some((a, _)) if a < d.attempt => {
                self.release(now, slot, sh, out);
                self.parts.remove(&slot);
            }
            _ => {}
        }
        let part = self.parts.entry(slot).or_insert_with(|| Part { attempt: d.attempt, ..Part::default() });
        if part.aborted || part.frozen {
            part.prepared = true;
            return;
        }
        part.tag = d.tag;
        part.txn = d.txn;
        part.client = d.client;
        part.thread = d.thread;
        part.coord = d.coord;
        part.retry = d.flags & FLAG_RETRY != 0;
        part.parts = Participants { wp: d.wp, wb: d.wb, rp: d.rp, client: d.client };
        part.prepared = true;
        let (writes, reads) = d.items.split_at(usize::from(d.writes));
        let map = &sh.map;
        let primary = |k: u64| map.primary_of(shard_of(k)) == me;
        let backup = |k: u64| map.backup_of(shard_of(k)) == Some(me);
        // The client's map must agree with ours about every shard it hands us
        // ([`crate::config`]); else the attempt fails here. The roles it gives us (write
        // primary, write backup) must be ours for every write item, and every role it gives us
        // must have an item: a client whose map made us the primary of a shard we still only
        // back up would otherwise have us lock nothing and answer for writes never installed.
        let (as_primary, as_backup) = (d.wp & (1 << me) != 0, d.wb & (1 << me) != 0);
        let agreed = writes.iter().all(|i| (primary(i.key) && as_primary) || (backup(i.key) && as_backup))
            && (!as_primary || writes.iter().any(|i| primary(i.key)))
            && (!as_backup || writes.iter().any(|i| backup(i.key)))
            && reads.iter().all(|i| primary(i.key));
        part.writes = writes.iter().filter(|i| primary(i.key)).map(|i| (i.key, i.value)).collect();
        part.redo =
            writes.iter().filter(|i| backup(i.key) && d.wb & (1 << me) != 0).map(|i| (i.key, i.value)).collect();
        part.reads = reads.iter().map(|i| (i.key, i.version)).collect();
        let early = std::mem::take(&mut part.early);
        out.cpu_ns += sh.cfg.costs.prepare_ns + sh.cfg.costs.item_ns * d.items.len() as u64;
        if !agreed {
            part.writes.clear();
            part.redo.clear();
            return self.fail(now, slot, sh, client, out);
        }
        if d.wp == 0 {
            self.version_copy(now, slot, sh, client, out);
        } else if d.wp & (1 << me) != 0 {
            self.lock(now, slot, sh, client, out);
        }
        for msg in early {
            self.phase(now, slot, msg, sh, client, out);
        }
    }

    /// Version copy of a read-only transaction at a read primary: the versions now (a locked
    /// record fails at once).
    fn version_copy(&mut self, now: Nanos, slot: u16, sh: &Shared, client: &mut dyn LocalClient, out: &mut Out) {
        let Some(part) = self.parts.get(&slot) else { return };
        let store = &self.store;
        let copied: Option<Vec<(u64, u64)>> =
            part.reads.iter().map(|&(k, _)| (!store.is_locked(k)).then_some((k, store.get(k).version))).collect();
        match copied {
            Some(reads) => {
                self.parts.get_mut(&slot).expect("present").reads = reads;
                self.reply(now, slot, MsgType::VersionCopyOk, sh, client, out);
            }
            None => self.fail(now, slot, sh, client, out),
        }
    }

    /// Lock phase at a write primary.
    fn lock(&mut self, now: Nanos, slot: u16, sh: &Shared, client: &mut dyn LocalClient, out: &mut Out) {
        let Some(part) = self.parts.get(&slot) else { return };
        let owner = (slot, part.attempt);
        let version_read = |k: u64| part.reads.iter().find(|r| r.0 == k).map_or(0, |r| r.1);
        // A blind write read nothing, so there is no version to hold it to.
        let blind = part.reads.is_empty();
        let store = &self.store;
        let ok =
            part.writes.iter().all(|&(k, _)| !store.is_locked(k) && (blind || store.get(k).version == version_read(k)));
        let keys: Vec<u64> = part.writes.iter().map(|w| w.0).collect();
        if !ok {
            return self.fail(now, slot, sh, client, out);
        }
        self.store.lock(&keys, owner);
        let part = self.parts.get_mut(&slot).expect("present");
        part.locked = keys;
        part.locked_at = now;
        sh.log(out, || WalRecord::Locked {
            slot,
            attempt: part.attempt,
            txn: part.txn,
            tag: part.tag,
            client: part.client,
            thread: part.thread,
            coord: part.coord,
            retry: part.retry,
            parts: logged(&part.parts),
            writes: part.writes.clone(),
            reads: part.reads.clone(),
            redo: part.redo.clone(),
        });
        if blind {
            // No validate phase: locked is validated.
            return self.reply(now, slot, MsgType::ValidateOk, sh, client, out);
        }
        if part.parts.rp == 1 << sh.me() {
            // The validate phase needs only this participant (a single-shard transaction,
            // §3.2.3): validate now, no coordination round.
            return self.phase(now, slot, MsgType::LockOk, sh, client, out);
        }
        self.reply(now, slot, MsgType::LockOk, sh, client, out);
    }

    /// The attempt fails here: roll back what it applied, unlock, and say so.
    fn fail(&mut self, now: Nanos, slot: u16, sh: &Shared, client: &mut dyn LocalClient, out: &mut Out) {
        let Some(attempt) = self.parts.get(&slot).map(|p| p.attempt) else { return };
        self.roll_back(now, slot, attempt, sh, out);
        self.reply(now, slot, MsgType::Fail, sh, client, out);
    }

    /// Sends a participant's phase result to the coordinator.
    fn reply(&mut self, now: Nanos, slot: u16, msg: MsgType, sh: &Shared, client: &mut dyn LocalClient, out: &mut Out) {
        let Some(p) = self.parts.get(&slot) else { return };
        let coord = Coordination::from_u8(p.coord);
        let c = sh.control(msg, (slot, p.tag, p.attempt, p.txn), u16::from(p.thread), &p.parts, coord, p.retry);
        let me = sh.me();
        if coord == Coordination::Client && p.client == me {
            // The client is on this server: no network between them.
            return client.deliver(now, &c, sh, self, out);
        }
        let dst = if coord == Coordination::Client { p.client } else { sh.cfg.layout.anchor(me) as u8 };
        sh.send(out, dst, c.datagram(u16::from(me), u16::from(dst)));
    }

    /// A request from the coordinator (`FLAG_DOWN`).
    pub fn down(&mut self, now: Nanos, c: &Control, sh: &Shared, client: &mut dyn LocalClient, out: &mut Out) {
        let (slot, attempt) = (c.slot.get(), c.attempt.get());
        let msg = c.msg_type();
        if c.client == sh.me() && matches!(msg, MsgType::CommitOk | MsgType::Fail) {
            client.deliver(now, c, sh, self, out);
        }
        if msg == MsgType::CommitOk || !sh.serving(now) {
            return;
        }
        match self.parts.get(&slot).map(|p| p.attempt) {
            Some(a) if a > attempt => return,
            Some(a) if a == attempt => {}
            _ => {
                // Before the prepare (or a newer attempt's first news): a placeholder.
                if self.parts.contains_key(&slot) {
                    self.release(now, slot, sh, out);
                }
                self.parts.insert(slot, Part { attempt, ..Part::default() });
            }
        }
        let part = self.parts.get_mut(&slot).expect("present");
        if part.frozen {
            return;
        }
        if msg == MsgType::Fail {
            // An abort: a redo record this backup already applied is rolled back (a `fail`
            // can follow `validate_ok` when a late participant refuses its prepare).
            return self.roll_back(now, slot, attempt, sh, out);
        }
        if !part.prepared {
            part.early.push(msg);
            return;
        }
        self.phase(now, slot, msg, sh, client, out);
    }

    /// The phase that the scattered `msg` starts, at this participant.
    fn phase(&mut self, now: Nanos, slot: u16, msg: MsgType, sh: &Shared, client: &mut dyn LocalClient, out: &mut Out) {
        let me = sh.me();
        let Some(part) = self.parts.get(&slot) else { return };
        if part.aborted || part.frozen {
            return;
        }
        let owner = (slot, part.attempt);
        match msg {
            MsgType::LockOk if part.parts.rp & (1 << me) != 0 => {
                out.cpu_ns += sh.cfg.costs.item_ns * part.reads.len() as u64;
                let ok = part.reads.iter().all(|&(k, v)| self.validates(k, v, owner));
                if ok {
                    self.reply(now, slot, MsgType::ValidateOk, sh, client, out);
                } else {
                    self.fail(now, slot, sh, client, out);
                }
            }
            MsgType::VersionCopyOk if part.parts.rp & (1 << me) != 0 => {
                out.cpu_ns += sh.cfg.costs.item_ns * part.reads.len() as u64;
                let store = &self.store;
                let items: Option<Vec<Item>> = part
                    .reads
                    .iter()
                    .map(|&(k, v)| {
                        let r = store.get(k);
                        (r.version == v && !store.is_locked(k)).then_some(Item {
                            key: k,
                            value: r.value,
                            version: v,
                            locked: false,
                        })
                    })
                    .collect();
                let Some(items) = items else { return self.fail(now, slot, sh, client, out) };
                let mut d = Data::new(MsgType::ReadReply, slot, part.tag, part.attempt, part.txn);
                d.client = part.client;
                d.thread = part.thread;
                d.items = items;
                let to = part.client;
                sh.send(out, to, d.datagram(u16::from(me), u16::from(to)));
            }
            MsgType::ValidateOk if part.parts.wb & (1 << me) != 0 && !part.replicated => {
                self.apply_redo(slot, sh, out);
                self.reply(now, slot, MsgType::ReplicateOk, sh, client, out);
            }
            MsgType::ReplicateOk if part.parts.wp & (1 << me) != 0 && !part.installed => {
                self.install(now, slot, sh, out);
                self.reply(now, slot, MsgType::CommitOk, sh, client, out);
            }
            MsgType::ValidateOk if part.parts.wb == 0 && part.parts.wp & (1 << me) != 0 && !part.installed => {
                // No backup left for the shards it writes ([`crate::config`]): commit primary
                // straight after validation.
                self.install(now, slot, sh, out);
                self.reply(now, slot, MsgType::CommitOk, sh, client, out);
            }
            _ => {}
        }
    }

    /// Whether a read of `key` at version `version` by `owner` still validates: the version
    /// unchanged and the record not locked by another attempt.
    fn validates(&self, key: u64, version: u64, owner: Owner) -> bool {
        self.store.get(key).version == version && (!self.store.is_locked(key) || self.store.held_by(key, owner))
    }

    /// Commit backup: apply the part's redo record to the backup copy (keeping the
    /// before-images for a rollback).
    fn apply_redo(&mut self, slot: u16, sh: &Shared, out: &mut Out) {
        let Some(part) = self.parts.get(&slot) else { return };
        let txn = part.txn;
        let redo = part.redo.clone();
        out.cpu_ns += sh.cfg.costs.item_ns * redo.len() as u64;
        let undo: Vec<(u64, (u64, u64))> = redo.iter().map(|&(k, v)| (k, self.store.back_up(k, (v, txn)))).collect();
        sh.log(out, || WalRecord::Replicated {
            slot,
            attempt: part.attempt,
            txn,
            client: part.client,
            thread: part.thread,
            parts: logged(&part.parts),
            redo: redo.clone(),
            undo: undo.iter().map(|&(k, (v, ver))| (k, v, ver)).collect(),
        });
        let part = self.parts.get_mut(&slot).expect("present");
        part.undo = undo;
        part.replicated = true;
    }

    /// Commit primary: install the writes, unlock.
    fn install(&mut self, now: Nanos, slot: u16, sh: &Shared, out: &mut Out) {
        let Some(part) = self.parts.get(&slot) else { return };
        let (txn, attempt, writes) = (part.txn, part.attempt, part.writes.clone());
        out.cpu_ns += sh.cfg.costs.item_ns * writes.len() as u64;
        let mut logged_writes = Vec::with_capacity(writes.len());
        for (k, v) in writes {
            let r = self.store.entry(k);
            out.events.push(ServerEvent::Installed(txn, k, r.version));
            logged_writes.push((k, v, r.version));
            r.value = v;
            r.version = txn;
        }
        sh.log(out, || WalRecord::Installed { slot, attempt, txn, writes: logged_writes });
        self.release(now, slot, sh, out);
        if let Some(p) = self.parts.get_mut(&slot) {
            p.installed = true;
        }
    }

    /// A query or a decision reaches a participant.
    pub fn query_serve(&mut self, now: Nanos, d: &Data, from: u8, sh: &Shared, out: &mut Out) {
        let me = sh.me();
        let slot = d.slot;
        let epoch = u64::from(sh.map.epoch);
        if d.txn != epoch {
            // A resolver under another shard map (`Query::hear`): do nothing, say why.
            let why = if d.txn < epoch { answer::STALE_RESOLVER } else { answer::BEHIND };
            let reply = answer_to(d, epoch, why);
            out.cpu_ns += sh.cfg.costs.handler_ns;
            if why == answer::BEHIND {
                sh.ask_for_map(now, out);
            }
            return sh.send(out, from, reply.datagram(u16::from(me), u16::from(from)));
        }
        let held = self.parts.get(&slot).map(|p| p.attempt);
        let newest = held.max(self.seen.get(&slot).copied());
        match held {
            Some(a) if a == d.attempt => {}
            _ if newest > Some(d.attempt) => {
                // Its client has moved on: only a promoted primary resolving an old attempt
                // asks this (`Query::hear`). Say so, and do nothing.
                let reply = answer_to(d, epoch, answer::SUPERSEDED);
                out.cpu_ns += sh.cfg.costs.handler_ns;
                return sh.send(out, from, reply.datagram(u16::from(me), u16::from(from)));
            }
            _ => {
                if self.parts.contains_key(&slot) {
                    self.release(now, slot, sh, out);
                }
                self.parts.insert(slot, Part { attempt: d.attempt, ..Part::default() });
            }
        }
        let part = self.parts.get_mut(&slot).expect("present");
        if !part.frozen {
            // Answered: after a restart it must still do nothing more unprompted.
            sh.log(out, || WalRecord::Frozen { slot, attempt: d.attempt });
        }
        part.frozen = true;
        let mut reply = answer_to(d, epoch, 0);
        if d.msg == MsgType::Query {
            let holds = part.holds();
            reply.wp = (if part.installed { answer::INSTALLED } else { 0 })
                | (if part.replicated { answer::REPLICATED } else { 0 });
            if sh.cfg.lease_ns > 0 {
                // What only the rule for removed participants reads (`Query::hear`).
                reply.wp |= (if part.aborted { answer::ABORTED } else { 0 })
                    | (if holds && !part.aborted { answer::PREPARED } else { 0 });
            }
        } else if d.wp == 1 {
            let unapplied =
                part.parts.wb & (1 << me) != 0 && !part.replicated && !part.redo.is_empty() && !part.aborted;
            if part.prepared && part.parts.wp & (1 << me) != 0 && !part.installed && !part.aborted {
                self.install(now, slot, sh, out);
            }
            if unapplied {
                // Committed without this backup's `replicate_ok` (its primary's other backup
                // was removed, `Query::hear`): apply the redo record now.
                self.apply_redo(slot, sh, out);
            }
            self.unlock_promoted(slot, true, sh, out);
        } else {
            self.roll_back(now, slot, d.attempt, sh, out);
        }
        out.cpu_ns += sh.cfg.costs.handler_ns;
        sh.send(out, from, reply.datagram(u16::from(me), u16::from(from)));
    }

    /// Carries out an abort decided for `slot`'s part: puts back the before-images of what it
    /// applied (where no later transaction wrote since), unlocks.
    fn roll_back(&mut self, now: Nanos, slot: u16, attempt: u32, sh: &Shared, out: &mut Out) {
        let me = sh.me();
        let part = self.parts.get_mut(&slot).expect("present");
        let undo = std::mem::take(&mut part.undo);
        let was_replicated = part.replicated;
        part.replicated = false;
        part.aborted = true;
        let txn = part.txn;
        let mut restored = Vec::new();
        for (k, before) in undo.into_iter().rev() {
            // Only if no later transaction has written the key since (its primary lock was
            // released by this same decision, possibly earlier than here).
            if sh.map.primary_of(shard_of(k)) == me {
                // A redo record this server applied as a backup and was promoted over.
                if let Some(r) = self.store.get_mut(k).filter(|r| r.version == txn) {
                    (r.value, r.version) = before;
                    restored.push((k, before.0, before.1));
                }
            } else if self.store.backed_up(k).map(|v| v.1) == Some(txn) {
                self.store.back_up(k, before);
                restored.push((k, before.0, before.1));
            }
        }
        if was_replicated {
            // Logged even if nothing was restored: a restarted backup must not answer that it
            // holds the redo of an attempt decided aborted.
            sh.log(out, || WalRecord::RolledBack { slot, attempt, restored });
        }
        self.unlock_promoted(slot, false, sh, out);
        self.release(now, slot, sh, out);
    }

    /// Follows `map` (newer than this server's): every shard it now leads and only backed up
    /// moves from its backup copy into its primary store. A redo record it applied for such a
    /// shard may belong to an attempt still undecided (its old primary may not have installed
    /// yet, or may never): its keys are locked by that attempt ([`Part::promoted`]) until the
    /// outcome is known; the (slot, attempt)s to resolve are returned. A redo record it had
    /// not applied yet never will be (its part is frozen, as if queried): a primary installs
    /// only after every backup applied, so its attempt cannot have committed. Also the replay
    /// of [`WalRecord::Adopted`], which names the attempts found undecided (`logged`): a part
    /// replaced live by a later attempt that was never logged would otherwise be taken for
    /// undecided again.
    pub fn take_over(&mut self, sh: &mut Shared, map: ShardMap, logged: Option<&[(u16, u32)]>) -> Vec<(u16, u32)> {
        let me = sh.me();
        let gained: Vec<u8> =
            (0..map.primary.len() as u8).filter(|&s| map.primary_of(s) == me && sh.map.primary_of(s) != me).collect();
        sh.map = map;
        let mut undecided = Vec::new();
        for shard in gained {
            let first = u64::from(shard) << 40;
            self.store.promote(first..first + (1 << 40));
            for (&slot, part) in self.parts.iter_mut().filter(|(_, p)| !p.aborted) {
                let redo: Vec<u64> = part.redo.iter().map(|r| r.0).filter(|&k| shard_of(k) == shard).collect();
                if redo.is_empty() {
                    continue;
                }
                let listed = logged.is_none_or(|l| l.contains(&(slot, part.attempt)));
                if part.replicated && listed {
                    self.store.lock(&redo, (slot, part.attempt));
                    part.promoted.extend(redo);
                    undecided.push((slot, part.attempt));
                } else if !part.replicated {
                    // Never applied: its attempt cannot have committed (no primary installs
                    // without this backup), and applying it now could overwrite what this
                    // server commits as primary from here on. Its resolution will say so.
                    part.aborted = true;
                    part.frozen = true;
                }
            }
        }
        undecided.dedup();
        undecided
    }

    /// Unlocks the keys `slot`'s part holds as promoted redo records, its outcome now known:
    /// committed, they are this primary's installed writes (reported and logged as installs);
    /// rolled back, their before-images were put back by the caller.
    pub fn unlock_promoted(&mut self, slot: u16, committed: bool, sh: &Shared, out: &mut Out) {
        let Some(part) = self.parts.get_mut(&slot) else { return };
        let keys = std::mem::take(&mut part.promoted);
        if keys.is_empty() {
            return;
        }
        let (txn, attempt) = (part.txn, part.attempt);
        let overwritten = |k: u64| part.undo.iter().find(|u| u.0 == k).map_or(0, |u| u.1 .1);
        let mut installed = Vec::new();
        for k in keys {
            let Some(r) = self.store.get_mut(k).copied() else { continue };
            self.store.unlock(k, (slot, attempt));
            if committed {
                out.events.push(ServerEvent::Installed(txn, k, overwritten(k)));
                installed.push((k, r.value, overwritten(k)));
            }
        }
        if committed {
            sh.log(out, || WalRecord::Installed { slot, attempt, txn, writes: installed });
        }
    }

    /// Applies one logged participant record to a restarting server (the client's records,
    /// `Begin` and `Closed`, are the client side's).
    pub fn replay(&mut self, record: &WalRecord, sh: &mut Shared) {
        match record.clone() {
            WalRecord::Begin { .. } | WalRecord::Closed { .. } => {}
            WalRecord::Locked { slot, attempt, txn, tag, client, thread, coord, retry, parts, writes, reads, redo } => {
                let keys: Vec<u64> = writes.iter().map(|w| w.0).collect();
                self.store.lock(&keys, (slot, attempt));
                let part = self.replayed_part(slot, attempt);
                (part.txn, part.tag, part.client, part.thread, part.coord, part.retry) =
                    (txn, tag, client, thread, coord, retry);
                part.parts = unlogged(parts);
                part.prepared = true;
                part.writes = writes;
                part.reads = reads;
                part.redo = redo;
                part.locked = keys;
            }
            WalRecord::Unlocked { slot, attempt } => {
                let Some(part) = self.parts.get_mut(&slot).filter(|p| p.attempt == attempt) else { return };
                for k in std::mem::take(&mut part.locked) {
                    self.store.unlock(k, (slot, attempt));
                }
                part.aborted |= !part.installed;
            }
            WalRecord::Installed { slot, attempt, txn, writes } => {
                for &(k, v, _) in &writes {
                    let r = self.store.entry(k);
                    (r.value, r.version) = (v, txn);
                    if self.store.held_by(k, (slot, attempt))
                        && self.parts.get(&slot).is_some_and(|p| p.promoted.contains(&k))
                    {
                        // A promoted redo record found committed (`unlock_promoted`).
                        self.store.unlock(k, (slot, attempt));
                    }
                }
                let part = self.replayed_part(slot, attempt);
                part.promoted.retain(|k| !writes.iter().any(|w| w.0 == *k));
                part.installed = true;
            }
            WalRecord::Replicated { slot, attempt, txn, client, thread, parts, redo, undo } => {
                for &(k, v) in &redo {
                    self.store.back_up(k, (v, txn));
                }
                let part = self.replayed_part(slot, attempt);
                (part.txn, part.client, part.thread) = (txn, client, thread);
                part.parts = unlogged(parts);
                part.prepared = true;
                part.redo = redo;
                part.undo = undo.into_iter().map(|(k, v, ver)| (k, (v, ver))).collect();
                part.replicated = true;
            }
            WalRecord::RolledBack { slot, attempt, restored } => {
                for (k, v, ver) in restored {
                    if sh.map.primary_of(shard_of(k)) == sh.me() {
                        // A promoted redo record rolled back: its key is a primary's now.
                        let r = self.store.entry(k);
                        (r.value, r.version) = (v, ver);
                    } else {
                        self.store.back_up(k, (v, ver));
                    }
                }
                let promoted =
                    self.parts.get_mut(&slot).filter(|p| p.attempt == attempt).map(|p| std::mem::take(&mut p.promoted));
                for k in promoted.unwrap_or_default() {
                    self.store.unlock(k, (slot, attempt));
                }
                let part = self.replayed_part(slot, attempt);
                part.undo.clear();
                part.replicated = false;
                part.aborted = true;
            }
            WalRecord::Frozen { slot, attempt } => self.replayed_part(slot, attempt).frozen = true,
            WalRecord::Adopted { epoch, primary, backup, members, undecided } => {
                let map = ShardMap { epoch, primary, backup, members };
                self.take_over(sh, map, Some(&undecided));
            }
        }
    }

    /// The participant state of `slot` for `attempt`, as a replay finds it: the one there if
    /// it is that attempt's, else a fresh one (an older attempt's locks were released before
    /// a newer attempt's state was logged, and that release was logged too).
    fn replayed_part(&mut self, slot: u16, attempt: u32) -> &mut Part {
        if self.parts.get(&slot).is_none_or(|p| p.attempt != attempt) {
            self.parts.insert(slot, Part { attempt, ..Part::default() });
        }
        self.parts.get_mut(&slot).expect("present")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costs::Costs;
    use crate::keys::key_of;
    use crate::rack::{layout_of, server_config, variant_of, RackConfig};
    use crate::wire::FLAG_DOWN;

    /// A client side that hears nothing (the phase results go to the switch tree).
    struct NoClient;
    impl LocalClient for NoClient {
        fn deliver(&mut self, _: Nanos, _: &Control, _: &Shared, _: &mut Participant, _: &mut Out) {}
    }

    /// Server 1, the backup of shard 0, logging (no leases: it always serves).
    fn backup_of_shard_0() -> Shared {
        let rack = RackConfig { durable: true, ..RackConfig::default() };
        let v = variant_of("switchtx").expect("a variant");
        Shared::new(server_config(1, &v, &rack, &layout_of(&rack), Costs::default()))
    }

    /// An attempt's prepare writing `value` to `key` (shard 0: primary server 0, backup 1).
    fn prepare(key: u64, value: u64, attempt: u32, txn: u64) -> Data {
        let mut d = Data::new(MsgType::Prepare, 3, Shared::tag(attempt), attempt, txn);
        (d.wp, d.wb, d.rp, d.writes) = (0b01, 0b10, 0b01, 1);
        d.coord = Coordination::Tree as u8;
        d.items = vec![Item { key, value, version: 0, locked: false }];
        d
    }

    /// A scattered request `msg` for `attempt` of slot 3.
    fn down(msg: MsgType, attempt: u32, txn: u64) -> Control {
        let mut c = Control::new(msg, 3, Shared::tag(attempt), attempt, txn);
        c.flags = FLAG_DOWN;
        c
    }

    /// Seed 001 §3.5 rolls back the changes of a transaction that did not commit: a `fail`
    /// scattered after `validate_ok` (a late participant refused its prepare) finds this
    /// backup's redo record applied, and puts the before-image back (and logs it), where
    /// before the fix the aborted write stayed in the backup copy (the model checker's
    /// finding in `crates/check/tests/switchtx_resolution.rs`).
    #[test]
    fn a_fail_after_the_backup_applied_its_redo_record_rolls_it_back() {
        let sh = backup_of_shard_0();
        let key = key_of(0, 5, 0, 24);
        let mut p = Participant::default();
        let mut out = Out::default();
        let (first, second) = ((7u32, 0x0700_0001u64), (8u32, 0x0800_0001u64));
        // A committed attempt leaves (11, its txn) in the copy.
        p.prepare(0, &prepare(key, 11, first.0, first.1), &sh, &mut NoClient, &mut out);
        p.down(1, &down(MsgType::ValidateOk, first.0, first.1), &sh, &mut NoClient, &mut out);
        assert_eq!(p.store().backed_up(key), Some((11, first.1)));
        // The next attempt applies 42, then is failed.
        p.prepare(2, &prepare(key, 42, second.0, second.1), &sh, &mut NoClient, &mut out);
        p.down(3, &down(MsgType::ValidateOk, second.0, second.1), &sh, &mut NoClient, &mut out);
        assert_eq!(p.store().backed_up(key), Some((42, second.1)), "applied on validate_ok");
        let mut out = Out::default();
        p.down(4, &down(MsgType::Fail, second.0, second.1), &sh, &mut NoClient, &mut out);
        assert_eq!(p.store().backed_up(key), Some((11, first.1)), "the aborted write is rolled back");
        let part = p.part(3, second.0).expect("its part");
        assert!(part.aborted && !part.replicated, "aborted, no longer answered as applied");
        let rolled = WalRecord::RolledBack { slot: 3, attempt: second.0, restored: vec![(key, 11, first.1)] };
        assert!(out.log.contains(&rolled), "a restarted backup must find the rollback in its log: {:?}", out.log);
    }
}
