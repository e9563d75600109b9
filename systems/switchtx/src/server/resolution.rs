//! The resolution of an attempt whose outcome its resolver does not know (§3.5): the rule
//! that decides it from the participants' answers, and how often the query is resent.
//!
//! A client whose attempt timed out, a restarted client, and a participant that must resolve
//! an attempt itself (a promoted primary, or one whose client was removed) all ask every
//! participant ([`crate::wire::MsgType`] `Query`); each freezes the attempt and answers what
//! it did ([`answer`] bits). [`Query`] gathers the answers and decides by [`Query::hear`]; the
//! resolver then tells everyone (`Resolve`) and waits for every acknowledgement. This module is
//! pure: it sends nothing and keeps no clock, so the rule is tested alone below.
//!
//! Query and decision are resent to those that have not answered, first after `timeout_ns`,
//! then after twice as long each time no new answer came, up to [`REQUERY_BACKOFF_CAP`] times
//! `timeout_ns` ([`requery_interval`]); an answer (or the decision) starts the doubling over.
//! Without the backoff, when latency nears the timeout the resends add load that makes more
//! attempts time out. The intervals are exact (no jitter): the run stays deterministic.

use crate::tree::Participants;
use crate::wire::{Data, MsgType};
use pisadb_core::Nanos;

/// A client's resolution of a timed-out attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Query {
    /// Participants asked.
    pub asked: u8,
    /// Those that answered the query (or, once decided, acknowledged the decision).
    pub answered: u8,
    /// Whether a primary said it installed.
    pub installed: bool,
    /// Backups that said they applied the redo record.
    pub replicated: u8,
    /// A participant had moved on to a later attempt of the slot (only a promoted primary's
    /// resolution of an old attempt hears this: [`Query::hear`]).
    pub superseded: bool,
    /// A participant had carried out an abort of the attempt (or failed it).
    pub aborted: bool,
    /// The decision was known before any answer (a participant failed the attempt): kept
    /// under a newer map, where a decision taken by the rule is taken again.
    pub certain: bool,
    /// The shard-map epoch the answers were gathered under: a resolver whose map changes
    /// starts over ([`Query::follow`]).
    pub epoch: u32,
    /// What a participant's "superseded" answer decides: only a participant's own resolution
    /// asks about an attempt its client may have moved on from, and its own part tells which
    /// way that went (a participant's own resolution).
    pub if_superseded: bool,
    /// Participants that hold their part of the attempt (a primary its locked writes, a
    /// backup its redo record), so could carry out a commit.
    pub prepared: u8,
    /// The decision, once every participant answered: commit or not.
    pub decided: Option<bool>,
    /// Resends since the last progress (a new answer, or the decision): the backoff's exponent.
    pub resends: u32,
}

/// What a resolution does after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Decided (commit or not): tell every participant.
    Decided(bool),
    /// Every participant carried the decision out.
    Done(bool),
}

/// A participant's answer to a query, as bits of its `wp` byte.
pub mod answer {
    /// A primary installed the attempt's writes.
    pub const INSTALLED: u8 = 1;
    /// A backup applied its redo record.
    pub const REPLICATED: u8 = 2;
    /// The participant has moved on to a later attempt of the slot.
    pub const SUPERSEDED: u8 = 4;
    /// The resolver's shard map is older than the participant's: nothing was done.
    pub const STALE_RESOLVER: u8 = 8;
    /// The participant carried out an abort of the attempt (or failed it).
    pub const ABORTED: u8 = 16;
    /// The participant holds its part (locked writes or a redo record).
    pub const PREPARED: u8 = 32;
    /// The participant's shard map is older than the resolver's: nothing was done.
    pub const BEHIND: u8 = 64;
}

impl Query {
    /// Takes participant `from`'s answer (`msg` with its [`answer`] bits `state`) to the
    /// resolution of an attempt with `parts`, under a shard map whose members are `members`.
    ///
    /// While every write participant is in the map, the decision needs only a primary that
    /// installed, or every backup's answer (§3.5: committed iff some primary says committed or
    /// every backup does). A primary installs only once every backup has applied the redo
    /// record, and a frozen backup that has not applied it never will; so a crashed or silent
    /// primary (or read primary) does not hold the decision up: its backup answers for it, and
    /// the live participants release their locks. Where the shards written have no backup left
    /// ([`crate::config`]), every write primary's answer is needed instead.
    ///
    /// Once a write participant has been removed from the map its answer never comes, and the
    /// decision is taken from the others (FaRM's rule): commit if a primary installed, or if a
    /// backup applied its redo record (so validation passed everywhere) and every remaining
    /// write participant holds its part and none carried out an abort; else abort. Resolvers
    /// of one attempt may differ in rule only across maps, and a participant answers and acts
    /// only for a resolver at its own map's epoch, so an older resolver's decision is either
    /// carried out where a newer one will see it, or refused (and the older resolver starts
    /// over under the newer map).
    ///
    /// A participant that moved on to a later attempt of the slot answers "superseded": its
    /// client decided this attempt and went on. Only a participant resolving an attempt itself
    /// (a promoted primary, or one whose client was removed) asks about such an old attempt,
    /// and its own part tells the outcome: a client moves on from a commit only once every
    /// write primary installed (or carried out the decision) and from an abort only once every
    /// participant acknowledged it, so an attempt whose resolver holds an applied redo record
    /// or installed writes and saw no abort was committed, and one whose resolver is a write
    /// primary that did not install was not. The acknowledgements of the decision are awaited
    /// from all members.
    pub fn hear(&mut self, msg: MsgType, state: u8, from: u8, parts: &Participants, members: u8) -> Option<Step> {
        if state & (answer::STALE_RESOLVER | answer::BEHIND) != 0 {
            return None;
        }
        if self.answered & (1 << from) == 0 {
            // Progress: the next resend waits `timeout_ns` again.
            self.resends = 0;
        }
        if members & (1 << from) == 0 && (parts.wp | parts.wb) & !members != 0 {
            // A removed server's state no longer counts (it may have been cut off, not
            // crashed, and still answers): under the rule for removed participants only the
            // members' answers do.
            return None;
        }
        match (msg, self.decided) {
            (MsgType::QueryReply, None) => {
                self.answered |= 1 << from;
                self.installed |= state & answer::INSTALLED != 0;
                if state & answer::REPLICATED != 0 {
                    self.replicated |= 1 << from;
                }
                if state & answer::PREPARED != 0 {
                    self.prepared |= 1 << from;
                }
                self.superseded |= state & answer::SUPERSEDED != 0;
                self.aborted |= state & answer::ABORTED != 0;
            }
            (MsgType::ResolveAck, Some(_)) => self.answered |= 1 << from,
            _ => return None,
        }
        let (wp, wb) = (parts.wp, parts.wb);
        let writers = wp | wb;
        match self.decided {
            None if self.superseded => Some(self.decide(self.if_superseded && !self.aborted)),
            None if writers & !members == 0 => {
                let heard_all = if wb != 0 { self.answered & wb == wb } else { self.answered & wp == wp };
                if !(self.installed || heard_all) {
                    return None;
                }
                // Committed iff a primary installed or every backup applied the redo record.
                let commit = self.installed || (wb != 0 && self.replicated & wb == wb);
                Some(self.decide(commit))
            }
            None => {
                let live = writers & members;
                if !(self.installed || self.aborted || self.answered & live == live) {
                    return None;
                }
                let validated = self.replicated != 0 && self.prepared & live == live && !self.aborted;
                Some(self.decide(self.installed || validated))
            }
            // A removed participant's acknowledgement never comes (nor is it needed: its copy
            // no longer counts).
            Some(commit) => (self.answered & members == self.asked & members).then_some(Step::Done(commit)),
        }
    }

    /// Follows the resolver's map to `epoch`: answers gathered under another map do not count
    /// (a participant acts only for a resolver at its own epoch), so a decision taken by the
    /// rule is taken again; a certain one is only sent again.
    pub fn follow(&mut self, epoch: u32) {
        if self.epoch == epoch {
            return;
        }
        if self.certain {
            self.answered = 0;
        } else {
            let (asked, if_superseded) = (self.asked, self.if_superseded);
            *self = Query { asked, if_superseded, ..Query::default() };
        }
        self.resends = 0;
        self.epoch = epoch;
    }

    fn decide(&mut self, commit: bool) -> Step {
        self.decided = Some(commit);
        self.answered = 0;
        self.resends = 0;
        Step::Decided(commit)
    }
}

/// The most the interval between a client's resends of a query or decision grows to, in
/// multiples of `timeout_ns`.
pub const REQUERY_BACKOFF_CAP: u64 = 8;

/// How long a client waits for answers after sending a query or decision with `resends`
/// earlier sends since the last progress: `timeout_ns` doubled `resends` times, at most
/// [`REQUERY_BACKOFF_CAP`] × `timeout_ns`.
pub fn requery_interval(timeout_ns: Nanos, resends: u32) -> Nanos {
    let factor = 1u64.checked_shl(resends).unwrap_or(u64::MAX).min(REQUERY_BACKOFF_CAP);
    timeout_ns.saturating_mul(factor)
}

/// A participant's answer to a query or decision `d`: its shard map's `epoch` and its
/// [`answer`] bits `state`.
pub fn answer_to(d: &Data, epoch: u64, state: u8) -> Data {
    let msg = if d.msg == MsgType::Query { MsgType::QueryReply } else { MsgType::ResolveAck };
    let mut reply = Data::new(msg, d.slot, d.tag, d.attempt, epoch);
    (reply.client, reply.thread, reply.wp) = (d.client, d.thread, state);
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes on servers 1 and 2 (primaries), backed up on 2 and 3; the client is server 0.
    fn parts_1_2() -> Participants {
        Participants { wp: 0b0110, wb: 0b1100, rp: 0b0110, client: 0 }
    }

    fn answer(q: &mut Query, from: u8, state: u8, members: u8) -> Option<Step> {
        q.hear(MsgType::QueryReply, state, from, &parts_1_2(), members)
    }

    #[test]
    fn with_every_participant_in_the_map_every_backup_decides() {
        let all = 0xff;
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 2, answer::REPLICATED, all), None, "backup 3 not heard yet");
        assert_eq!(answer(&mut q, 3, answer::REPLICATED, all), Some(Step::Decided(true)));
        let mut q = Query { asked: 0b1110, ..Query::default() };
        answer(&mut q, 2, answer::REPLICATED, all);
        assert_eq!(answer(&mut q, 3, 0, all), Some(Step::Decided(false)), "a backup never applied it");
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 1, answer::INSTALLED, all), Some(Step::Decided(true)), "a primary installed");
    }

    #[test]
    fn without_a_removed_backup_the_rule_needs_every_member_to_hold_its_part() {
        // Server 3 (a backup) was removed: its answer never comes and no longer counts.
        let members: u8 = !(1 << 3);
        let held = answer::PREPARED;
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 1, held, members), None);
        assert_eq!(answer(&mut q, 2, held | answer::REPLICATED, members), Some(Step::Decided(true)));
        // No backup applied its redo record: validation may not have passed.
        let mut q = Query { asked: 0b1110, ..Query::default() };
        answer(&mut q, 1, held, members);
        assert_eq!(answer(&mut q, 2, held, members), Some(Step::Decided(false)));
        // A member that carried out an abort decides it at once.
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 1, answer::ABORTED, members), Some(Step::Decided(false)));
        // The removed server's own answer is not counted.
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 3, answer::ABORTED, members), None);
        assert_eq!(q.answered, 0);
    }

    #[test]
    fn answers_under_another_map_do_not_count_and_a_new_map_starts_a_resolution_over() {
        let all = 0xff;
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 2, answer::STALE_RESOLVER | answer::REPLICATED, all), None);
        assert_eq!(answer(&mut q, 3, answer::BEHIND | answer::REPLICATED, all), None);
        assert_eq!(q.answered, 0);
        answer(&mut q, 2, answer::REPLICATED, all);
        assert_eq!(answer(&mut q, 3, answer::REPLICATED, all), Some(Step::Decided(true)));
        q.follow(1);
        assert_eq!((q.decided, q.answered, q.epoch), (None, 0, 1), "a decision by the rule is taken again");
        let mut certain =
            Query { asked: 0b1110, decided: Some(false), certain: true, answered: 0b0110, ..Query::default() };
        certain.follow(1);
        assert_eq!((certain.decided, certain.answered), (Some(false), 0), "a known abort is only sent again");
    }

    #[test]
    fn the_requery_interval_doubles_per_resend_and_caps_at_eight_timeouts() {
        let t = 20_000_000;
        let waits: Vec<Nanos> = (0..6).map(|r| requery_interval(t, r)).collect();
        assert_eq!(waits, vec![t, 2 * t, 4 * t, 8 * t, 8 * t, 8 * t]);
        assert_eq!(requery_interval(t, u32::MAX), REQUERY_BACKOFF_CAP * t, "capped however many resends");
        assert_eq!(requery_interval(0, 3), 0, "no timeout, no wait");
    }
}
