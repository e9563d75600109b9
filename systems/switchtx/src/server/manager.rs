//! The configuration manager (§3.5; FaRM's, [`crate::config`]): it grants leases and removes a
//! server whose lease lapsed; every grant carries the shard map.
//!
//! The manager runs on the rack's last server ([`ShardMap::manager`]), on that server's lease
//! core, beside its own shard (as FaRM's configuration manager runs on a machine of the
//! cluster): it is a type of its own, owned by that server alone, holding only what a manager
//! needs — when it last heard each server ask, and when its own last tick ran. A server's
//! lease ends at most `lease` after the request the manager last heard (it counts from when it
//! asked); a quarter lease more covers clock drift. A manager that was itself held up (its
//! tick late by more than half a lease) cannot tell a late renewal from a missing one, and
//! removes no one that time.

use super::events::ServerEvent;
use super::shared::Out;
use super::shared::Shared;
use crate::config::ShardMap;
use crate::wire::{Data, MsgType};
use pisadb_core::Nanos;

/// The configuration manager's state (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manager {
    /// When it last heard each server ask for a lease.
    heard: Vec<Nanos>,
    /// When its last lease tick ran.
    last_tick: Option<Nanos>,
}

impl Manager {
    /// The manager of `servers` servers, having heard no one yet.
    pub fn new(servers: u8) -> Self {
        Manager { heard: vec![0; usize::from(servers)], last_tick: None }
    }

    /// The manager starts (or restarts): it counts every server from `now`.
    pub fn start(&mut self, now: Nanos) {
        self.heard.iter_mut().for_each(|h| *h = now);
    }

    /// A tick at `now`: the members of `map` other than `me` whose leases of `lease` have
    /// surely lapsed (none if this tick came late).
    pub fn lapsed(&mut self, now: Nanos, map: &ShardMap, me: u8, lease: Nanos) -> Vec<u8> {
        let held_up = self.last_tick.is_some_and(|t| now.saturating_sub(t) > lease / 2);
        self.last_tick = Some(now);
        (0..self.heard.len() as u8)
            .filter(|_| !held_up)
            .filter(|&s| s != me && map.is_member(s))
            .filter(|&s| now.saturating_sub(self.heard[usize::from(s)]) > lease + lease / 4)
            .collect()
    }

    /// A lease request `d` from `from`: noted, and answered with a grant (to a member) and the
    /// map.
    pub fn request(&mut self, now: Nanos, d: &Data, from: u8, sh: &Shared, out: &mut Out) {
        out.cpu_ns += sh.cfg.costs.handler_ns;
        let Some(heard) = self.heard.get_mut(usize::from(from)) else {
            return out.events.push(ServerEvent::Rejected("unknown_source"));
        };
        *heard = (*heard).max(now);
        let mut g = Data::new(MsgType::Grant, 0, 0, sh.map.epoch, d.txn);
        g.client = from;
        g.wp = u8::from(sh.map.is_member(from));
        g.items = sh.map.to_items();
        sh.send(out, from, g.datagram(u16::from(sh.me()), u16::from(from)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapsed_lease_is_found_unless_the_manager_itself_was_held_up() {
        let lease = 100;
        let map = ShardMap::initial(4);
        let mut m = Manager::new(4);
        m.start(1_000);
        m.heard[1] = 1_100;
        assert_eq!(m.lapsed(1_110, &map, 3, lease), Vec::<u8>::new(), "no one lapsed yet");
        assert_eq!(m.lapsed(1_130, &map, 3, lease), vec![0, 2], "a lease and a quarter since they asked");
        assert_eq!(m.lapsed(1_300, &map, 3, lease), Vec::<u8>::new(), "this tick came late: no one removed");
        assert_eq!(m.lapsed(1_310, &map, 3, lease), vec![0, 1, 2]);
    }
}
