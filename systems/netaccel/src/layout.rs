//! Where the switch program's state lives: the register arrays of Algorithms 1–2, their
//! stateful actions, and their stages.
//!
//! ## Stages
//!
//! A join with `J` chain positions and a group-by with `G` positions take `J + 2G + 1` stages:
//!
//! ```text
//! stage 0        received (per-stream tuple counts)  ends (barrier)        join[0]
//! stage k<J      join[k]                                            (Algorithm 1, lines 1-14)
//! stage J        chain_full  loss  presence[0]                        (lines 16-21; Alg. 2 stage 1)
//! stage J+1+2g   keys[g]                                              (Alg. 2 stage 2)
//! stage J+2+2g   sums[g]  presence[g+1]                               (Alg. 2 stage 3)
//! stage J+2G     ... group_full, and the distribution table (destinations by bucket)
//! ```
//!
//! Each array depends on the result of the one before it in the packet's path (a chain
//! position is tried only if the previous one failed; a group position's presence only if the
//! previous position's keys did not match), so dependent arrays sit in successive stages; the
//! chain-full flag and the first presence both depend only on the last join position, and
//! share a stage. The CRC32 indexes are computed by the stages' hash units. 1×5 takes 12
//! stages, a Tofino 1 pipe; every split with `J + G ≤ 5` fits.
//!
//! ## Arrays and actions (at most two comparisons each)
//!
//! - `join[k]` (32-bit key): *insert-or-match* (`cell == 0 || cell == key` → store the key,
//!   found), *probe* (`cell == key`), *clear*.
//! - `chain_full` (8-bit): *set*, *read*, *clear*.
//! - `presence[g]` (32-bit): *test-and-set* (empty → store the partkey; outputs the old cell,
//!   0 meaning absent), *read-and-clear*. Algorithm 2 keeps a flag; ours keeps the partkey
//!   instead, because a stateful ALU has one output (Tofino 1) and the drain must read a
//!   group's two keys in one pass: `presence[g]` gives the partkey, `keys[g]` the suppkey.
//! - `keys[g]` (32-bit pair: partkey, suppkey): *insert* (no comparison), *match* (two
//!   comparisons: both halves equal), *read-and-clear* (outputs the suppkey).
//! - `sums[g]` (32-bit): *add*, *read-and-clear*, *read*; `presence[g]` also has *read*: the
//!   reloaded pattern probes the groups where they are.
//! - `group_full` (8-bit, one per group slot): *set* when a group found no room (overflow
//!   (iii)), *read*, *clear*: a probe of the reloaded pattern that misses in the switch must
//!   look in the control plane only if its slot or its join chain overflowed.
//! - `received` (32-bit, one cell per segment and stream): *count*, *check-and-reset* (the
//!   END's count equals the cell). `ends` (one cell per stream): *arrive* (the last of
//!   `segments` arrivals outputs 1 and resets the cell). `loss` (per stream): *add*,
//!   *read-and-clear*.
//!
//! The tempting group-by in one array — `cell empty || (lo == partkey && hi == suppkey)` —
//! needs three comparisons; [`tempting_one_array_group_by`] declares it so a test can show the
//! model refuses it.
//!
//! ## Sizes
//!
//! The paper gives no table size. It states a budget: the query "never reached above 60% of a
//! MAU's resources in terms of SRAM usage" (seed 002 §5). A Tofino 1 stage has about 10 Mbit
//! of SRAM (GUIDE §3: 80 blocks of 128 Kbit), and a hash-indexed register array takes a power
//! of two of cells (its index is a slice of the hash's bits). The largest such array within
//! 60% of a stage is 2^17 cells of 32 bits for a join position (4 Mbit, 40%; 2^18 would take
//! 80%) and 2^16 cells of a 64-bit pair for a group position's keys (also 4 Mbit)
//! ([`slots_within_sram_budget`]; a test checks the constants against it). That the paper
//! used the largest array the budget allows is our assumption, and the size was first
//! inferred from Table 2 (the join's overflow, 51% at `J = 1`, is what 217 k `part_FP` keys in
//! 2^17 slots give) before the budget was worked through: the two agree, so Table 1-2's
//! overflow *level* rests on this assumption and only its trend in `J` is a result. Slots
//! scale with the scale factor to keep those load factors ([`Layout::for_scale_factor`]).

use pisadb_switch::alu::{Branch, CmpOp, Combine, Comparison, Expr, RegisterAction};
use pisadb_switch::{ProgramSpec, RegisterArraySpec, TableSpec};
use serde::{Deserialize, Serialize};

/// Register id of the per-stream tuple counters.
pub const RECEIVED: u8 = 1;
/// Register id of the barrier counters.
pub const ENDS: u8 = 2;
/// Register id of the loss accumulators.
pub const LOSS_ACC: u8 = 3;
/// Register id of the chain-full flags.
pub const CHAIN_FULL: u8 = 4;
/// Register id of the group-chain-full flags (a group found no room in its slot's positions).
pub const GROUP_FULL: u8 = 5;
/// Tuple streams the barrier counts: outer, inner, and the probe stream of the reloaded
/// pattern (Q20's `partsupp`).
pub const STREAMS: u32 = 3;
/// Register id of join position 0 (position `k` is `JOIN0 + k`).
pub const JOIN0: u8 = 10;
/// Register id of presence position 0.
pub const PRESENCE0: u8 = 30;
/// Register id of keys position 0.
pub const KEYS0: u8 = 40;
/// Register id of sums position 0.
pub const SUMS0: u8 = 50;
/// Table id of the distribution table (bucket → destination host).
pub const DIST_TABLE: u8 = 1;

/// Most join positions (register ids 10..=25).
pub const JOIN_POSITIONS_MAX: u8 = 16;
/// Most group positions (register ids 30..=39, 40..=49, 50..=59).
pub const GROUP_POSITIONS_MAX: u8 = 10;

/// The most of a stage's SRAM the paper's query used (seed 002 §5: "never reached above 60%
/// of a MAU's resources in terms of SRAM usage").
pub const SRAM_SHARE_MAX: f64 = 0.6;
/// Join slots per position at SF 100: [`slots_within_sram_budget`] of a 32-bit key on a
/// Tofino 1 (2^17; the same value Table 2's overflow implies).
pub const JOIN_SLOTS_SF100: f64 = 131_072.0;
/// Group slots per position at SF 100: [`slots_within_sram_budget`] of a 64-bit key pair on a
/// Tofino 1 (2^16).
pub const GROUP_SLOTS_SF100: f64 = 65_536.0;

/// The largest power-of-two register array of `cell_bits`-wide cells that fits in
/// [`SRAM_SHARE_MAX`] of one stage's SRAM on `profile`.
pub fn slots_within_sram_budget(profile: &pisadb_switch::SwitchProfile, cell_bits: u64) -> u64 {
    let budget_bits = (profile.sram_bits_per_stage() as f64 * SRAM_SHARE_MAX) as u64;
    let cells = budget_bits / cell_bits.max(1);
    if cells == 0 {
        0
    } else {
        1 << cells.ilog2()
    }
}

/// Action numbers.
pub mod action {
    /// `join[k]`: insert or match.
    pub const INSERT_OR_MATCH: u8 = 0;
    /// `join[k]`: probe.
    pub const PROBE: u8 = 1;
    /// `join[k]`, `chain_full`: clear.
    pub const CLEAR: u8 = 2;
    /// `chain_full`: set.
    pub const SET: u8 = 0;
    /// `chain_full`: read.
    pub const READ: u8 = 1;
    /// `presence[g]`: test and set.
    pub const TEST_AND_SET: u8 = 0;
    /// `presence[g]`, `keys[g]`, `sums[g]`: read and clear (index 1 or 2, see `layout`).
    pub const READ_CLEAR: u8 = 1;
    /// `keys[g]`: insert.
    pub const INSERT: u8 = 0;
    /// `keys[g]`: match.
    pub const MATCH: u8 = 1;
    /// `keys[g]`: read the suppkey and clear.
    pub const KEYS_READ_CLEAR: u8 = 2;
    /// `presence[g]`, `sums[g]`: read (the reloaded pattern probes them).
    pub const READ_ONLY: u8 = 2;
    /// `sums[g]`, `loss`: add.
    pub const ADD: u8 = 0;
    /// `received`: count.
    pub const COUNT: u8 = 0;
    /// `received`: check and reset.
    pub const CHECK_RESET: u8 = 1;
    /// `ends`: arrive.
    pub const ARRIVE: u8 = 0;
}

/// The shape of the program: positions, slots, segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Join chain positions (`J`).
    pub join_positions: u8,
    /// Group-by positions (`G`).
    pub group_positions: u8,
    /// Slots per join position.
    pub join_slots: u32,
    /// Slots per group position.
    pub group_slots: u32,
    /// Segments streaming tuples.
    pub segments: u16,
}

impl Layout {
    /// The paper's load factors at scale factor `sf`.
    pub fn for_scale_factor(sf: f64, join_positions: u8, group_positions: u8, segments: u16) -> Layout {
        let scaled = |at_sf100: f64| ((at_sf100 * sf / 100.0).round() as u32).max(1);
        Layout {
            join_positions,
            group_positions,
            join_slots: scaled(JOIN_SLOTS_SF100),
            group_slots: scaled(GROUP_SLOTS_SF100),
            segments,
        }
    }

    /// The stage of join position `k`.
    pub fn join_stage(&self, k: u8) -> u8 {
        k
    }

    /// The stage of the chain-full flags, the loss accumulators and presence position 0.
    pub fn flags_stage(&self) -> u8 {
        self.join_positions
    }

    /// The stage of presence position `g`.
    pub fn presence_stage(&self, g: u8) -> u8 {
        self.join_positions + 2 * g
    }

    /// The stage of keys position `g`.
    pub fn keys_stage(&self, g: u8) -> u8 {
        self.join_positions + 1 + 2 * g
    }

    /// The stage of sums position `g`.
    pub fn sums_stage(&self, g: u8) -> u8 {
        self.join_positions + 2 + 2 * g
    }

    /// Stages used.
    pub fn stages(&self) -> u8 {
        self.join_positions + 2 * self.group_positions + 1
    }

    /// The join index of `key`: CRC32 of its 4 bytes, the same in every position.
    pub fn join_index(&self, key: u32) -> u32 {
        crc32fast::hash(&key.to_le_bytes()) % self.join_slots
    }

    /// The group index of (`partkey`, `suppkey`): CRC32 of the 8 bytes from another initial
    /// value, so that it is independent of the join's.
    pub fn group_index(&self, partkey: u32, suppkey: u32) -> u32 {
        let mut h = crc32fast::Hasher::new_with_initial(0x5bd1_e995);
        h.update(&partkey.to_le_bytes());
        h.update(&suppkey.to_le_bytes());
        h.finalize() % self.group_slots
    }

    /// Checks the shape, naming the bad field and the accepted values.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=JOIN_POSITIONS_MAX).contains(&self.join_positions) {
            return Err(format!("join_positions {}: accepted 1..={JOIN_POSITIONS_MAX}", self.join_positions));
        }
        if !(1..=GROUP_POSITIONS_MAX).contains(&self.group_positions) {
            return Err(format!("group_positions {}: accepted 1..={GROUP_POSITIONS_MAX}", self.group_positions));
        }
        if self.segments == 0 || self.segments > 64 {
            return Err(format!("segments {}: accepted 1..=64", self.segments));
        }
        Ok(())
    }

    /// The program's declaration, which the switch checks against its profile when loading.
    pub fn spec(&self) -> ProgramSpec {
        let n = i64::from(self.segments);
        let always = |name: &str, lo: Expr, out: Expr| RegisterAction::always(name, Branch::set(lo, out));
        let zero = Expr::constant(0);
        let one = Expr::constant(1);
        let eq = |e: Expr| Comparison::new(e, CmpOp::Eq);
        let array = |id: u8, name: String, stage: u8, entries: u32, width_bits: u32, pair: bool, actions| {
            RegisterArraySpec { id, name, stage, entries, width_bits, pair, actions }
        };
        let mut arrays = vec![
            array(
                RECEIVED,
                "received".into(),
                0,
                u32::from(self.segments) * STREAMS,
                32,
                false,
                vec![
                    always("count", Expr::LO.plus(one), Expr::LO.plus(one)),
                    RegisterAction::when(
                        "check_and_reset",
                        vec![eq(Expr::LO.minus(Expr::IN1))],
                        Combine::All,
                        Branch::set(zero, one),
                        Branch::set(zero, zero),
                    ),
                ],
            ),
            array(
                ENDS,
                "ends".into(),
                0,
                STREAMS,
                32,
                false,
                vec![RegisterAction::when(
                    "arrive",
                    vec![eq(Expr::LO.plus(Expr::constant(1 - n)))],
                    Combine::All,
                    Branch::set(zero, one),
                    Branch::set(Expr::LO.plus(one), zero),
                )],
            ),
            array(
                LOSS_ACC,
                "loss".into(),
                self.flags_stage(),
                STREAMS,
                32,
                false,
                vec![
                    always("add", Expr::LO.plus(Expr::IN1), Expr::LO.plus(Expr::IN1)),
                    always("read_and_clear", zero, Expr::LO.plus(Expr::IN1)),
                ],
            ),
            array(
                CHAIN_FULL,
                "chain_full".into(),
                self.flags_stage(),
                self.join_slots,
                8,
                false,
                vec![
                    always("set", one, one),
                    RegisterAction::always("read", Branch::keep(Expr::LO)),
                    always("clear", zero, zero),
                ],
            ),
        ];
        for k in 0..self.join_positions {
            arrays.push(array(
                JOIN0 + k,
                format!("join[{k}]"),
                self.join_stage(k),
                self.join_slots,
                32,
                false,
                vec![
                    RegisterAction::when(
                        "insert_or_match",
                        vec![eq(Expr::LO), eq(Expr::LO.minus(Expr::IN1))],
                        Combine::Any,
                        Branch::set(Expr::IN1, one),
                        Branch::keep(zero),
                    ),
                    RegisterAction::when(
                        "probe",
                        vec![eq(Expr::LO.minus(Expr::IN1))],
                        Combine::All,
                        Branch::keep(one),
                        Branch::keep(zero),
                    ),
                    always("clear", zero, zero),
                ],
            ));
        }
        for g in 0..self.group_positions {
            arrays.push(array(
                PRESENCE0 + g,
                format!("presence[{g}]"),
                self.presence_stage(g),
                self.group_slots,
                32,
                false,
                vec![
                    RegisterAction::when(
                        "test_and_set",
                        vec![eq(Expr::LO)],
                        Combine::All,
                        Branch::set(Expr::IN1, zero),
                        Branch::keep(Expr::LO),
                    ),
                    always("read_and_clear", zero, Expr::LO),
                    RegisterAction::always("read", Branch::keep(Expr::LO)),
                ],
            ));
            arrays.push(array(
                KEYS0 + g,
                format!("keys[{g}]"),
                self.keys_stage(g),
                self.group_slots,
                32,
                true,
                vec![
                    RegisterAction::always("insert", Branch { lo: Some(Expr::IN1), hi: Some(Expr::IN2), out: one }),
                    RegisterAction::when(
                        "match",
                        vec![eq(Expr::LO.minus(Expr::IN1)), eq(Expr::HI.minus(Expr::IN2))],
                        Combine::All,
                        Branch::keep(one),
                        Branch::keep(zero),
                    ),
                    RegisterAction::always("read_and_clear", Branch { lo: Some(zero), hi: Some(zero), out: Expr::HI }),
                ],
            ));
            arrays.push(array(
                SUMS0 + g,
                format!("sums[{g}]"),
                self.sums_stage(g),
                self.group_slots,
                32,
                false,
                vec![
                    always("add", Expr::LO.plus(Expr::IN1), Expr::LO.plus(Expr::IN1)),
                    always("read_and_clear", zero, Expr::LO),
                    RegisterAction::always("read", Branch::keep(Expr::LO)),
                ],
            ));
        }
        arrays.push(array(
            GROUP_FULL,
            "group_full".into(),
            self.stages() - 1,
            self.group_slots,
            8,
            false,
            vec![
                always("set", one, one),
                RegisterAction::always("read", Branch::keep(Expr::LO)),
                always("clear", zero, zero),
            ],
        ));
        let dist = TableSpec {
            id: DIST_TABLE,
            name: "distribution".into(),
            stage: self.stages() - 1,
            key_bits: 8,
            value_bits: 16,
            entries: pisadb_olap::ops::DISTRIBUTION_BUCKETS,
        };
        ProgramSpec { name: "netaccel".into(), arrays, reserve_fast_recirc_port: false, tables: vec![dist] }
    }
}

/// The group-by one would like to write: one pair array that inserts into an empty cell or
/// matches both keys in a single action (`lo == 0 || (lo == partkey && hi == suppkey)`): three
/// comparisons. The switch model must refuse it (a test); Algorithm 2 splits it over a
/// presence stage and a keys stage instead.
pub fn tempting_one_array_group_by(slots: u32) -> ProgramSpec {
    let eq = |e: Expr| Comparison::new(e, CmpOp::Eq);
    let action = RegisterAction::when(
        "insert_or_match_pair",
        vec![eq(Expr::LO), eq(Expr::LO.minus(Expr::IN1)), eq(Expr::HI.minus(Expr::IN2))],
        Combine::Any,
        Branch { lo: Some(Expr::IN1), hi: Some(Expr::IN2), out: Expr::constant(1) },
        Branch::keep(Expr::constant(0)),
    );
    let keys = RegisterArraySpec {
        id: KEYS0,
        name: "group_by_in_one_array".into(),
        stage: 0,
        entries: slots,
        width_bits: 32,
        pair: true,
        actions: vec![action],
    };
    ProgramSpec { name: "tempting".into(), arrays: vec![keys], reserve_fast_recirc_port: false, tables: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_switch::SwitchProfile;

    #[test]
    fn the_sf100_slot_counts_are_the_largest_arrays_within_the_papers_sram_budget() {
        let tofino1 = SwitchProfile::tofino1();
        assert_eq!(slots_within_sram_budget(&tofino1, 32) as f64, JOIN_SLOTS_SF100, "a join position: 32-bit keys");
        assert_eq!(slots_within_sram_budget(&tofino1, 64) as f64, GROUP_SLOTS_SF100, "a group position: key pairs");
        // One more power of two breaks the budget: 2^18 32-bit cells take 80% of a stage.
        let doubled_bits = 2.0 * JOIN_SLOTS_SF100 * 32.0;
        assert!(doubled_bits > SRAM_SHARE_MAX * tofino1.sram_bits_per_stage() as f64);
    }
}
