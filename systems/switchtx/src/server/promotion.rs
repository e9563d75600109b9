//! Resolutions a participant runs itself: of the attempts whose redo records it had applied
//! when it was promoted to their primary, and of the attempts of a client removed from the
//! shard map (§3.5; [`crate::config`]).
//!
//! No client will tell such a participant the outcome: its client may be gone, or may have
//! decided without it. So it asks every participant, as a client whose attempt timed out does
//! ([`crate::server::resolution`]), decides by the same rule, tells everyone and waits for
//! their acknowledgements, resending with the same backoff. What a participant that "moved on"
//! answers is read off this server's own part ([`Query::hear`], "superseded"). The queries go
//! out from the attempt's thread's core (a timer), not from the core that adopted the map: that
//! is the lease core, which must stay free for renewals.

use super::events::ServerTimer;
use super::participant::Participant;
use super::resolution::{requery_interval, Query, Step};
use super::shared::Out;
use super::shared::Shared;
use crate::wire::Data;
use pisadb_core::Nanos;
use std::collections::BTreeMap;

/// A server's own resolutions in progress (see the module documentation).
#[derive(Debug, Default)]
pub struct Resolutions {
    /// (slot, attempt) → the query in progress.
    queries: BTreeMap<(u16, u32), Query>,
}

impl Resolutions {
    /// Starts resolving (slot, attempt), which this server holds a part of and cannot leave to
    /// its client, unless it already does or `lane_runs_it` (one of its own client lanes'
    /// current attempts: the lane resolves it).
    pub fn start(
        &mut self,
        now: Nanos,
        (slot, attempt): (u16, u32),
        lane_runs_it: bool,
        p: &Participant,
        out: &mut Out,
    ) {
        if lane_runs_it || self.queries.contains_key(&(slot, attempt)) {
            return;
        }
        let Some(part) = p.part(slot, attempt) else { return };
        let asked = part.parts.wp | part.parts.wb | part.parts.rp;
        self.queries.insert((slot, attempt), Query { asked, ..Query::default() });
        out.timers.push((now, ServerTimer::Recover(slot, attempt)));
    }

    /// Sends a resolution's query (or its decision) to those that have not answered, and
    /// waits.
    pub fn tick(&mut self, now: Nanos, slot: u16, attempt: u32, sh: &Shared, p: &Participant, out: &mut Out) {
        let Some(part) = p.part(slot, attempt) else {
            // Released by a later attempt: its client decided and told everyone.
            self.queries.remove(&(slot, attempt));
            return;
        };
        let (client, thread) = (part.client, part.thread);
        let Some(q) = self.queries.get_mut(&(slot, attempt)) else { return };
        q.follow(sh.map.epoch);
        let sent = *q;
        q.resends = q.resends.saturating_add(1);
        sh.send_resolution(out, sent.asked & !sent.answered, (slot, attempt), (client, thread), sent.decided);
        out.timers.push((now + requery_interval(sh.cfg.timeout_ns, sent.resends), ServerTimer::Recover(slot, attempt)));
    }

    /// An answer to a resolution's query or decision.
    pub fn answer(&mut self, d: &Data, from: u8, sh: &Shared, p: &Participant, out: &mut Out) {
        let key = (d.slot, d.attempt);
        let Some(part) = p.part(d.slot, d.attempt) else {
            // Released by a later attempt: its client decided and told everyone.
            self.queries.remove(&key);
            return;
        };
        let (parts, client, thread) = (part.parts, part.client, part.thread);
        // What a "superseded" answer means is read off this server's part as it is now: its
        // client moved on only once this server had carried the outcome out.
        let me = 1 << sh.me();
        let (writes, backs) = (parts.wp & me != 0, parts.wb & me != 0);
        let if_superseded =
            !part.aborted && (writes || backs) && (!writes || part.installed) && (!backs || part.replicated);
        let Some(q) = self.queries.get_mut(&key) else { return };
        q.if_superseded = if_superseded;
        q.follow(sh.map.epoch);
        if d.txn != u64::from(sh.map.epoch) {
            return;
        }
        match q.hear(d.msg, d.wp, from, &parts, sh.map.members) {
            None => {}
            Some(Step::Decided(commit)) => {
                let asked = q.asked;
                sh.send_resolution(out, asked, (d.slot, d.attempt), (client, thread), Some(commit));
            }
            Some(Step::Done(_)) => {
                self.queries.remove(&key);
            }
        }
    }

    /// A new map: the resolutions that had started resend under it at once.
    pub fn follow_new_map(&self, now: Nanos, out: &mut Out) {
        for (&(slot, attempt), q) in &self.queries {
            if q.epoch != 0 || q.answered != 0 {
                out.timers.push((now, ServerTimer::Recover(slot, attempt)));
            }
        }
    }
}
