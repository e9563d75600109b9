//! Where coordination happens (§3.3): the racks, each transaction's coordination tree, and the
//! per-switch entries of its control messages.
//!
//! The testbed's one Tofino is split into four switches: a core S0 (switch 0) over three ToRs
//! (switch `r + 1` for rack `r`) holding servers {0,1,2}, {3,4,5}, {6,7} ([`Layout::paper`]).
//! A transaction's participants are bit sets of servers: write primaries `W_P`, write backups
//! `W_B`, read primaries `R_P`, and the client. How it is coordinated ([`Coordination`]):
//!
//! - `Client` (FaSST): no switch helps; participants answer the client, which gathers and
//!   sends the next phase itself.
//! - `Core` (+GaS): only S0 is programmable; it is the root of every transaction, gathers from
//!   the servers directly and scatters to them (the ToRs only forward).
//! - `Tree` (+Tree-GaS): the tree is the one ToR when every participant and the client are in
//!   one rack (it is the root), else S0 as root over the involved ToRs as leaves. A leaf gathers
//!   its rack's messages and sends the last one up; S0 gathers one message per leaf that had
//!   something to gather and scatters one copy per leaf with something to deliver; each leaf
//!   multicasts it to its servers.
//!
//! Multicast groups are preloaded on every switch (§4: "the mapping from the bitmap to the
//! switch physical port"): group `g < 0x100` is the set of servers whose bits `g` has; group
//! `0x100 | r` (core only) is one representative server per rack in bit set `r`, to reach
//! that rack's ToR (which passes a down message on to its own group, so the representative
//! only receives it if its own group names it).
//!
//! Control messages from a server are addressed to its *anchor*, the first server of the
//! next rack, so that they cross the sender's ToR and S0 whichever switch coordinates; a
//! coordinating switch consumes them (drops while gathering, multicasts at the threshold).

use crate::wire::{MsgType, Role, SwitchEntry, MAX_SWITCHES};

/// How a transaction is coordinated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Coordination {
    /// By its client over the network (FaSST).
    Client = 0,
    /// By the core switch S0 alone (+GaS).
    Core = 1,
    /// By a tree of switches (+Tree-GaS and up).
    Tree = 2,
}

impl Coordination {
    /// From its byte (anything unknown is `Client`, which needs no switch).
    pub fn from_u8(byte: u8) -> Self {
        match byte {
            1 => Coordination::Core,
            2 => Coordination::Tree,
            _ => Coordination::Client,
        }
    }
}

/// The racks: which servers hang off which ToR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Servers of each rack, rack `r` on switch `r + 1`.
    pub racks: Vec<Vec<u8>>,
}

/// The participants of a transaction, as bit sets of servers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Participants {
    /// Write primaries.
    pub wp: u8,
    /// Write backups.
    pub wb: u8,
    /// Read primaries.
    pub rp: u8,
    /// The client's server.
    pub client: u8,
}

impl Participants {
    /// Every server involved.
    pub fn all(&self) -> u8 {
        self.wp | self.wb | self.rp | (1 << self.client)
    }

    /// Who sends messages of type `msg` (whom a switch gathers from).
    pub fn gather(&self, msg: MsgType) -> u8 {
        match msg {
            MsgType::LockOk | MsgType::CommitOk => self.wp,
            MsgType::ValidateOk | MsgType::VersionCopyOk => self.rp,
            MsgType::ReplicateOk => self.wb,
            MsgType::Init => 1 << self.client,
            _ => self.all(),
        }
    }

    /// Who receives the result of gathering messages of type `msg` (Table 1).
    pub fn scatter(&self, msg: MsgType) -> u8 {
        match msg {
            MsgType::LockOk | MsgType::VersionCopyOk => self.rp,
            // With no backup left for the shards written (`ShardMap`), straight to commit
            // primary.
            MsgType::ValidateOk if self.wb == 0 => self.wp,
            MsgType::ValidateOk => self.wb,
            MsgType::ReplicateOk => self.wp,
            MsgType::CommitOk => 1 << self.client,
            MsgType::Fail => self.wp | self.wb | (1 << self.client),
            _ => 0,
        }
    }
}

/// How many messages of type `msg` a switch that hears from `senders` gathers.
fn threshold(msg: MsgType, senders: u8) -> u8 {
    match msg {
        MsgType::Fail | MsgType::Init => u8::from(senders != 0),
        _ => senders.count_ones() as u8,
    }
}

impl Layout {
    /// The paper's testbed: S0 over three ToRs with servers {0,1,2}, {3,4,5}, {6,7}.
    pub fn paper() -> Self {
        Layout { racks: vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]] }
    }

    /// All `servers` in one rack (one ToR under S0).
    pub fn single_rack(servers: u8) -> Self {
        Layout { racks: vec![(0..servers).collect()] }
    }

    /// Servers in all.
    pub fn servers(&self) -> u8 {
        self.racks.iter().map(|r| r.len() as u8).sum()
    }

    /// Switches in all (S0 and one ToR per rack).
    pub fn switches(&self) -> usize {
        self.racks.len() + 1
    }

    /// The rack of `server`.
    pub fn rack_of(&self, server: u8) -> usize {
        self.racks.iter().position(|r| r.contains(&server)).unwrap_or(0)
    }

    /// The servers of bit set `set` that are in rack `rack`, as a bit set.
    fn in_rack(&self, set: u8, rack: usize) -> u8 {
        self.racks[rack].iter().filter(|&&s| set & (1 << s) != 0).fold(0, |m, &s| m | (1 << s))
    }

    /// The racks with a server of `set`, as a bit set.
    fn racks_of(&self, set: u8) -> u8 {
        (0..self.racks.len()).filter(|&r| self.in_rack(set, r) != 0).fold(0, |m, r| m | (1 << r))
    }

    /// Where `server` addresses its control messages: the first server of the next rack (or
    /// itself with one rack), so they cross its ToR and, with several racks, S0.
    pub fn anchor(&self, server: u8) -> u16 {
        let next = (self.rack_of(server) + 1) % self.racks.len();
        u16::from(self.racks[next][0])
    }

    /// The multicast groups of switch `switch`: every server bit set, and on S0 the rack
    /// groups (`0x100 | racks`, one representative server each).
    pub fn groups(&self, switch: u16) -> Vec<(u16, Vec<u16>)> {
        let n = self.servers();
        let mut groups: Vec<(u16, Vec<u16>)> =
            (1..(1u16 << n)).map(|g| (g, (0..u16::from(n)).filter(|s| g & (1 << s) != 0).collect())).collect();
        if switch == 0 {
            for bits in 1..(1u16 << self.racks.len()) {
                let members = (0..self.racks.len())
                    .filter(|r| bits & (1 << r) != 0)
                    .map(|r| u16::from(self.racks[r][0]))
                    .collect();
                groups.push((0x100 | bits, members));
            }
        }
        groups
    }

    /// The switch entries of a message of type `msg` of a transaction with `parts` under
    /// `coord`.
    pub fn entries(&self, coord: Coordination, parts: &Participants, msg: MsgType) -> [SwitchEntry; MAX_SWITCHES] {
        let mut e = [SwitchEntry::default(); MAX_SWITCHES];
        let (gather, scatter) = (parts.gather(msg), parts.scatter(msg));
        match coord {
            Coordination::Client => {}
            Coordination::Core => e[0] = SwitchEntry::new(Role::Root, threshold(msg, gather), u16::from(scatter)),
            Coordination::Tree => {
                let involved = self.racks_of(parts.all());
                if involved.count_ones() == 1 {
                    let rack = involved.trailing_zeros() as usize;
                    e[rack + 1] = SwitchEntry::new(Role::Root, threshold(msg, gather), u16::from(scatter));
                    return e;
                }
                let gathering = self.racks_of(gather);
                let mut down = self.racks_of(scatter);
                if msg == MsgType::Init {
                    down = involved & !(1 << self.rack_of(parts.client));
                }
                e[0] = SwitchEntry::new(Role::Root, threshold(msg, gathering), 0x100 | u16::from(down));
                for rack in (0..self.racks.len()).filter(|r| involved & (1 << r) != 0) {
                    let local = threshold(msg, self.in_rack(gather, rack));
                    e[rack + 1] = SwitchEntry::new(Role::Leaf, local, u16::from(self.in_rack(scatter, rack)));
                }
            }
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(wp: u8, wb: u8, rp: u8, client: u8) -> Participants {
        Participants { wp, wb, rp, client }
    }

    #[test]
    fn a_one_rack_transaction_is_coordinated_by_its_tor_alone() {
        let l = Layout::paper();
        let p = parts(0b011, 0b110, 0b011, 0);
        let e = l.entries(Coordination::Tree, &p, MsgType::LockOk);
        assert_eq!(e[1], SwitchEntry::new(Role::Root, 2, 0b011));
        assert!([0, 2, 3].iter().all(|&s| e[s].role() == Role::None));
    }

    #[test]
    fn a_cross_rack_transaction_has_s0_over_the_involved_tors() {
        let l = Layout::paper();
        // Write primaries 1 and 4, backups 2 and 5, reads at 1, 4 and 6, client on 0.
        let p = parts(0b0001_0010, 0b0010_0100, 0b0101_0010, 0);
        let e = l.entries(Coordination::Tree, &p, MsgType::LockOk);
        assert_eq!(e[0], SwitchEntry::new(Role::Root, 2, 0x100 | 0b111), "two racks lock, three read");
        assert_eq!(e[1], SwitchEntry::new(Role::Leaf, 1, 0b10));
        assert_eq!(e[2], SwitchEntry::new(Role::Leaf, 1, 0b1_0000));
        assert_eq!(e[3], SwitchEntry::new(Role::Leaf, 0, 0b100_0000));
        let init = l.entries(Coordination::Tree, &p, MsgType::Init);
        assert_eq!(init[0].scatter.get(), 0x100 | 0b110, "init goes down to the other racks only");
        let fail = l.entries(Coordination::Tree, &p, MsgType::Fail);
        assert_eq!((fail[0].threshold, fail[1].threshold, fail[3].threshold), (1, 1, 1));
        assert_eq!(fail[3].scatter.get(), 0, "rack 2 holds no write participant");
    }

    #[test]
    fn core_coordination_names_only_s0_and_anchors_cross_it() {
        let l = Layout::paper();
        let p = parts(0b11, 0b110, 0b1, 7);
        let e = l.entries(Coordination::Core, &p, MsgType::ReplicateOk);
        assert_eq!(e[0], SwitchEntry::new(Role::Root, 2, 0b11));
        assert!(e[1..].iter().all(|x| x.role() == Role::None));
        for s in 0..8 {
            assert_ne!(l.rack_of(l.anchor(s) as u8), l.rack_of(s), "server {s}");
        }
        assert_eq!(l.groups(0).len(), 255 + 7);
        assert_eq!(l.groups(1).len(), 255);
    }
}
