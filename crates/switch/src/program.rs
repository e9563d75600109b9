//! What a switch program is, and the rules it is checked against when loaded.
//!
//! A program declares its register arrays and its exact-match tables up front
//! ([`ProgramSpec`]): where each lives (its stage), how big it is, and the stateful actions an
//! array can run. The switch checks the declaration against the profile before anything runs
//! ([`ProgramSpec::check`]): a stage has only so many stateful ALUs, logical tables and SRAM
//! blocks, and an action only so many comparisons. A program that does not fit is refused with
//! an error naming the array or table, the stage and the limit, as the P4 compiler would
//! refuse it.
//!
//! ## Tables and their SRAM
//!
//! A [`TableSpec`] is an exact-match table `key -> value` that the data plane only reads and
//! the control plane fills (see the switch's control channel). On Tofino an exact-match table
//! is a set of hash ways over 128-bit-wide SRAM words, 1024 words per 128-Kbit block; an entry
//! holds its key, its action data (here: the value) and a few bits of overhead, and narrow
//! entries are packed several to a word but never straddle one. The model charges
//! ([`TableSpec::blocks`]):
//!
//! ```text
//! entry_bits = key_bits + value_bits + 4          (4: version/valid bits, an assumption)
//! entry_bits <= 128:  blocks = ceil(ceil(entries / floor(128 / entry_bits)) / 1024)
//! entry_bits  > 128:  blocks = ceil(entry_bits / 128) * ceil(entries / 1024)
//! ```
//!
//! It adds no headroom for cuckoo-hash occupancy and charges no map RAM or action-data RAM
//! (the value rides in the entry as immediate data), so it is a lower bound of what the
//! compiler would allocate: a program refused here would be refused there. A table counts
//! toward its stage's SRAM together with the register arrays, and toward the stage's logical
//! tables together with them (each array's stateful actions are invoked from a table).
//!
//! ## Running
//!
//! At run time a program sees packets through two calls:
//! - [`Program::admit`] decodes a datagram and checks that its plan obeys the per-pass rules
//!   (each array at most once per pass, in stage order). A packet that does not is rejected
//!   with a reason before it touches any register.
//! - [`Program::execute_pass`] runs one pass of an admitted packet through a
//!   [`PassContext`], which is the only door to the registers and tables and re-checks the
//!   same rules (a table, too, is read at most once per pass and in stage order), and says
//!   what happens next ([`PassDecision`]).
//!
//! A pass ends in one of these outputs:
//! - back to the sender ([`PassDecision::Reply`]), to one host ([`PassDecision::SendTo`]) or a
//!   multicast group ([`PassDecision::Multicast`]), with the frame rewritten so that it comes
//!   from where the sender addressed it (P4DB's answers come from the switch);
//! - on toward the frame's destination with its source kept ([`PassDecision::Forward`]):
//!   Gotthard's switch passes a request on to the store, which answers the client directly;
//! - to the controller through the CPU port, frame untouched ([`PassDecision::ToControlPlane`]);
//! - another pass through a recirculation port ([`PassDecision::Recirculate`]), or both: a
//!   copy leaves now toward any of the destinations above and the packet recirculates
//!   ([`PassDecision::EmitAndRecirculate`]; Gotthard and SwitchTx answer early and keep
//!   working; Tofino does this with a mirror/clone of the packet);
//! - or a counted drop ([`PassDecision::Drop`]).
//!
//! The model never calls a program with anything but the packet, the registers and the
//! tables: no clock, no randomness. Programs that need time (none yet) would get it in the
//! packet, as hardware gets it from the ingress timestamp.

use crate::alu::RegisterAction;
use crate::profile::SwitchProfile;
use crate::registers::PassContext;
use pisadb_wire::{DecodeError, Frame, Kind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// One register array a program declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterArraySpec {
    /// The id instructions use to name it (1..=63).
    pub id: u8,
    /// A human-readable name for errors and listings.
    pub name: String,
    /// The MAU stage that holds it.
    pub stage: u8,
    /// Number of cells.
    pub entries: u32,
    /// Bits per cell (per half for a pair): 8, 16, 32 or 64.
    pub width_bits: u32,
    /// Whether each cell is a pair of two halves updated together.
    pub pair: bool,
    /// The stateful actions instructions may select, by position.
    pub actions: Vec<RegisterAction>,
}

impl RegisterArraySpec {
    /// SRAM bits the cells take.
    pub fn bits(&self) -> u64 {
        u64::from(self.entries) * u64::from(self.width_bits) * if self.pair { 2 } else { 1 }
    }

    /// SRAM blocks the array occupies on `profile`.
    pub fn blocks(&self, profile: &SwitchProfile) -> u64 {
        self.bits().div_ceil(profile.sram_block_bits)
    }
}

/// Bits of one SRAM word: the width an exact-match entry is packed into (Tofino 1 and 2).
pub const SRAM_WORD_BITS: u64 = 128;

/// Bits each exact-match entry carries besides its key and value (version/valid; assumption).
pub const TABLE_ENTRY_OVERHEAD_BITS: u64 = 4;

/// Widest key and value the model's tables hold (it stores them as `u64`).
pub const TABLE_FIELD_BITS_MAX: u32 = 64;

/// One exact-match table a program declares: `key -> value`, read by the data plane, written
/// by the control plane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSpec {
    /// The id lookups and control messages use to name it (1..=63, unique among tables).
    pub id: u8,
    /// A human-readable name for errors and listings.
    pub name: String,
    /// The MAU stage that holds it.
    pub stage: u8,
    /// Bits of the key: 1..=64.
    pub key_bits: u32,
    /// Bits of the value: 0..=64 (0: the table only says hit or miss).
    pub value_bits: u32,
    /// Entries it can hold (what the control plane may install).
    pub entries: u32,
}

impl TableSpec {
    /// Bits one entry takes in SRAM: key, value and the per-entry overhead.
    pub fn entry_bits(&self) -> u64 {
        u64::from(self.key_bits) + u64::from(self.value_bits) + TABLE_ENTRY_OVERHEAD_BITS
    }

    /// SRAM blocks the table occupies on `profile` (the formula is in the module docs).
    pub fn blocks(&self, profile: &SwitchProfile) -> u64 {
        let rows_per_block = (profile.sram_block_bits / SRAM_WORD_BITS).max(1);
        let entries = u64::from(self.entries);
        let entry_bits = self.entry_bits();
        if entry_bits <= SRAM_WORD_BITS {
            let per_word = SRAM_WORD_BITS / entry_bits;
            entries.div_ceil(per_word).div_ceil(rows_per_block)
        } else {
            entry_bits.div_ceil(SRAM_WORD_BITS) * entries.div_ceil(rows_per_block)
        }
    }
}

/// Everything a program declares about its use of switch memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramSpec {
    /// The program's name.
    pub name: String,
    /// Its register arrays.
    pub arrays: Vec<RegisterArraySpec>,
    /// Whether recirculation port 0 is kept for packets that hold a lock (P4DB's fast
    /// recirculation, §5.3); otherwise all ports take all recirculating packets.
    pub reserve_fast_recirc_port: bool,
    /// Its exact-match tables (none for P4DB and the lock manager).
    #[serde(default)]
    pub tables: Vec<TableSpec>,
}

/// Why the switch refused to load a program.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum LoadError {
    /// Register ids are 1..=63 and unique.
    #[error("array `{name}`: register id {id} is invalid or used twice (ids are 1..=63, unique)")]
    BadRegisterId {
        /// The array.
        name: String,
        /// Its id.
        id: u8,
    },
    /// The stage does not exist on this profile.
    #[error("array `{name}` is placed in stage {stage}, but a {profile} pipe has stages 0..={last}")]
    NoSuchStage {
        /// The array.
        name: String,
        /// The stage asked for.
        stage: u8,
        /// The profile's name.
        profile: String,
        /// The last stage.
        last: u8,
    },
    /// More arrays in a stage than it has stateful ALUs.
    #[error("stage {stage} holds {count} register arrays, but a stage has only {max} stateful ALUs")]
    TooManyArrays {
        /// The stage.
        stage: u8,
        /// Arrays placed there.
        count: usize,
        /// Stateful ALUs per stage.
        max: u8,
    },
    /// The arrays of a stage need more SRAM than it has.
    #[error("stage {stage} needs {needed} SRAM blocks ({needed_bits} bits), but has only {max} blocks")]
    SramExceeded {
        /// The stage.
        stage: u8,
        /// Blocks needed.
        needed: u64,
        /// Bits needed.
        needed_bits: u64,
        /// Blocks available.
        max: u32,
    },
    /// A cell width the hardware does not offer.
    #[error("array `{name}`: cell width {width_bits} bits (pair: {pair}) is not supported (8, 16, 32 or 64 bits per half, at most {max} bits per cell)")]
    BadWidth {
        /// The array.
        name: String,
        /// Bits per half.
        width_bits: u32,
        /// Whether it is a pair.
        pair: bool,
        /// The stateful ALU's widest cell.
        max: u32,
    },
    /// An array without cells or without actions, or with more than 16 actions.
    #[error("array `{name}`: {what}")]
    BadArray {
        /// The array.
        name: String,
        /// What is wrong.
        what: String,
    },
    /// An action the stateful ALU cannot run.
    #[error("array `{array}`, action `{action}`: {why}")]
    BadAction {
        /// The array.
        array: String,
        /// The action.
        action: String,
        /// Why it cannot run.
        why: String,
    },
    /// Table ids are 1..=63 and unique among tables.
    #[error("table `{table}`: table id {id} is invalid or used twice (ids are 1..=63, unique among tables)")]
    BadTableId {
        /// The table.
        table: String,
        /// Its id.
        id: u8,
    },
    /// The table's stage does not exist on this profile.
    #[error("table `{table}` is placed in stage {stage}, but a {profile} pipe has stages 0..={last}")]
    TableNoSuchStage {
        /// The table.
        table: String,
        /// The stage asked for.
        stage: u8,
        /// The profile's name.
        profile: String,
        /// The last stage.
        last: u8,
    },
    /// A key or value width the model does not hold, or a table without entries.
    #[error("table `{table}`: {field} is {value}, but accepted values are {min}..={max}")]
    BadTableField {
        /// The table.
        table: String,
        /// The field: `key_bits`, `value_bits` or `entries`.
        field: &'static str,
        /// The value declared.
        value: u64,
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// More tables (with one per register array) in a stage than it has logical tables.
    #[error("stage {stage} holds {count} logical tables ({arrays} for register arrays), but a stage has only {max}")]
    TooManyTables {
        /// The stage.
        stage: u8,
        /// Tables plus register arrays placed there.
        count: usize,
        /// How many of them are register arrays.
        arrays: usize,
        /// Logical tables per stage.
        max: u8,
    },
    /// A table does not fit in its stage's SRAM beside the arrays and earlier tables there.
    #[error("table `{table}` needs {needed} SRAM blocks in stage {stage}, where {used} of its {max} blocks are already taken")]
    TableSramExceeded {
        /// The table.
        table: String,
        /// Its stage.
        stage: u8,
        /// Blocks the table needs.
        needed: u64,
        /// Blocks the stage's arrays and earlier tables take.
        used: u64,
        /// Blocks per stage.
        max: u32,
    },
}

impl ProgramSpec {
    /// Checks the declaration against `profile`; the first violation found is returned.
    pub fn check(&self, profile: &SwitchProfile) -> Result<(), LoadError> {
        let mut ids = [false; 64];
        let mut per_stage: BTreeMap<u8, (usize, u64, u64)> = BTreeMap::new();
        for a in &self.arrays {
            if a.id == 0 || a.id > 63 || ids[usize::from(a.id)] {
                return Err(LoadError::BadRegisterId { name: a.name.clone(), id: a.id });
            }
            ids[usize::from(a.id)] = true;
            if a.stage >= profile.stages_per_pipe {
                return Err(LoadError::NoSuchStage {
                    name: a.name.clone(),
                    stage: a.stage,
                    profile: profile.name.clone(),
                    last: profile.stages_per_pipe - 1,
                });
            }
            let cell_bits = a.width_bits * if a.pair { 2 } else { 1 };
            if ![8, 16, 32, 64].contains(&a.width_bits) || cell_bits > profile.salu_width_bits_max {
                return Err(LoadError::BadWidth {
                    name: a.name.clone(),
                    width_bits: a.width_bits,
                    pair: a.pair,
                    max: profile.salu_width_bits_max,
                });
            }
            if a.entries == 0 || a.actions.is_empty() || a.actions.len() > 16 {
                let what = format!(
                    "needs at least one entry and 1..=16 actions (has {} entries, {} actions)",
                    a.entries,
                    a.actions.len()
                );
                return Err(LoadError::BadArray { name: a.name.clone(), what });
            }
            for action in &a.actions {
                if let Some(why) = action.check(profile.salu_comparisons_max, a.pair) {
                    return Err(LoadError::BadAction { array: a.name.clone(), action: action.name.clone(), why });
                }
            }
            let entry = per_stage.entry(a.stage).or_default();
            *entry = (entry.0 + 1, entry.1 + a.blocks(profile), entry.2 + a.bits());
        }
        for (&stage, &(count, blocks, bits)) in &per_stage {
            if count > usize::from(profile.salus_per_stage) {
                return Err(LoadError::TooManyArrays { stage, count, max: profile.salus_per_stage });
            }
            if blocks > u64::from(profile.sram_blocks_per_stage) {
                return Err(LoadError::SramExceeded {
                    stage,
                    needed: blocks,
                    needed_bits: bits,
                    max: profile.sram_blocks_per_stage,
                });
            }
        }
        self.check_tables(profile, &per_stage)
    }

    /// Checks the tables, given each stage's `(arrays, blocks, bits)` taken by register arrays.
    fn check_tables(&self, profile: &SwitchProfile, arrays: &BTreeMap<u8, (usize, u64, u64)>) -> Result<(), LoadError> {
        let mut ids = [false; 64];
        // Per stage: (tables, blocks) taken so far, starting from the arrays'.
        let mut per_stage: BTreeMap<u8, (usize, u64)> =
            arrays.iter().map(|(&stage, &(count, blocks, _))| (stage, (count, blocks))).collect();
        for t in &self.tables {
            if t.id == 0 || t.id > 63 || ids[usize::from(t.id)] {
                return Err(LoadError::BadTableId { table: t.name.clone(), id: t.id });
            }
            ids[usize::from(t.id)] = true;
            if t.stage >= profile.stages_per_pipe {
                return Err(LoadError::TableNoSuchStage {
                    table: t.name.clone(),
                    stage: t.stage,
                    profile: profile.name.clone(),
                    last: profile.stages_per_pipe - 1,
                });
            }
            let max_bits = u64::from(TABLE_FIELD_BITS_MAX);
            let fields = [
                ("key_bits", u64::from(t.key_bits), 1, max_bits),
                ("value_bits", u64::from(t.value_bits), 0, max_bits),
                ("entries", u64::from(t.entries), 1, u64::from(u32::MAX)),
            ];
            if let Some(&(field, value, min, max)) = fields.iter().find(|f| !(f.2..=f.3).contains(&f.1)) {
                return Err(LoadError::BadTableField { table: t.name.clone(), field, value, min, max });
            }
            let (count, used) = per_stage.entry(t.stage).or_default();
            let needed = t.blocks(profile);
            if *used + needed > u64::from(profile.sram_blocks_per_stage) {
                let (table, stage, used, max) = (t.name.clone(), t.stage, *used, profile.sram_blocks_per_stage);
                return Err(LoadError::TableSramExceeded { table, stage, needed, used, max });
            }
            (*count, *used) = (*count + 1, *used + needed);
        }
        for (&stage, &(count, _)) in &per_stage {
            if count > usize::from(profile.tables_per_stage) {
                let arrays = arrays.get(&stage).map_or(0, |a| a.0);
                return Err(LoadError::TooManyTables { stage, count, arrays, max: profile.tables_per_stage });
            }
        }
        Ok(())
    }

    /// The table with id `id`.
    pub fn table(&self, id: u8) -> Option<&TableSpec> {
        self.tables.iter().find(|t| t.id == id)
    }

    /// The array with register id `id`.
    pub fn array(&self, id: u8) -> Option<&RegisterArraySpec> {
        self.arrays.iter().find(|a| a.id == id)
    }
}

/// Why an admitted-looking datagram was refused by a program, before touching any register.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Reject {
    /// The bytes do not decode.
    #[error("malformed: {0}")]
    Malformed(#[from] DecodeError),
    /// The packet decodes but breaks a rule of the pipeline or the program.
    #[error("{reason}: {detail}")]
    Rule {
        /// A stable label for counting.
        reason: &'static str,
        /// What exactly is wrong.
        detail: String,
    },
}

impl Reject {
    /// A rule violation with a stable `reason` label and a detailed message.
    pub fn rule(reason: &'static str, detail: impl Into<String>) -> Self {
        Reject::Rule { reason, detail: detail.into() }
    }

    /// The stable label this rejection is counted under.
    pub fn reason(&self) -> &'static str {
        match self {
            Reject::Malformed(e) => e.reason(),
            Reject::Rule { reason, .. } => reason,
        }
    }
}

/// Which recirculation ports a recirculating packet may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recirc {
    /// The fast port kept for lock holders (falls back to any port if none is reserved).
    Fast,
    /// Any waiting port, chosen round-robin.
    Waiting,
}

/// Where a packet (or a copy of it) leaves the switch for.
///
/// One enum for every destination, so that a copy sent while the packet recirculates
/// ([`PassDecision::EmitAndRecirculate`]) can go anywhere a packet can, and the pipeline has
/// one way to send each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Back to the host that sent it, as if from where it was addressed (as
    /// [`PassDecision::Reply`]).
    Reply,
    /// To one host, as if from where the packet was addressed (as [`PassDecision::SendTo`]).
    Node(u16),
    /// A copy to every member of a multicast group (as [`PassDecision::Multicast`]).
    Multicast(u16),
    /// On toward the frame's destination, keeping its source (as [`PassDecision::Forward`]).
    Forward,
    /// To the controller through the CPU port, frame untouched (as
    /// [`PassDecision::ToControlPlane`]).
    ControlPlane,
}

/// What happens to a packet after a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassDecision {
    /// Send the packet back to the node that sent it.
    Reply,
    /// Send the packet to one node.
    SendTo(u16),
    /// Send a copy to every member of a multicast group.
    Multicast(u16),
    /// Take another pass through the pipe via a recirculation port.
    Recirculate(Recirc),
    /// Drop the packet, counted under this reason.
    Drop(&'static str),
    /// Send the packet on toward its frame's destination host, keeping the original source in
    /// the frame (Gotthard's switch passes a request on to the store, which answers the client
    /// directly). A destination that is not attached leaves by its route.
    Forward,
    /// A copy leaves now toward `copy` (encoded as the packet is after this pass) and the
    /// packet itself takes another pass via a recirculation port of kind `recirc`: answer
    /// early, keep working.
    EmitAndRecirculate {
        /// Where the copy goes.
        copy: Output,
        /// Which recirculation ports the packet may take.
        recirc: Recirc,
    },
    /// Send the packet to the CPU port, i.e. to the controller host, with its frame as the
    /// sender wrote it (a packet-in: the controller sees who sent it and to whom). Dropped as
    /// `no_controller` if none is set.
    ToControlPlane,
}

/// A switch program: a P4 program's data plane, as a state machine over packets.
pub trait Program {
    /// A packet in flight, decoded once on arrival.
    type Packet;

    /// The program's register arrays and their actions.
    fn spec(&self) -> ProgramSpec;

    /// The frame kind of the datagrams it emits.
    fn kind(&self) -> Kind;

    /// Decodes the payload behind `frame` and checks its plan; nothing is executed yet.
    fn admit(&self, frame: &Frame, payload: &[u8]) -> Result<Self::Packet, Reject>;

    /// Runs one pass of `packet` and says what happens next.
    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, packet: &mut Self::Packet) -> PassDecision;

    /// Appends the packet (payload, without frame) as it leaves the switch.
    fn encode(&self, packet: &Self::Packet, out: &mut Vec<u8>);

    /// Bytes the packet takes on a wire, frame included (for serialization delays).
    fn wire_bytes(&self, packet: &Self::Packet) -> usize;

    /// The recirculation count carried by the packet, used by the traffic manager to serve
    /// long-waiting packets first (P4DB §5.3). Programs without one return 0.
    fn priority(&self, _packet: &Self::Packet) -> u32 {
        0
    }
}

/// Register ids and stages of a grid of arrays: `per_stage` arrays in each of `stages` stages
/// from `first_stage`, numbered from 1 in stage order. An id past 255 comes out as 0, which
/// [`ProgramSpec::check`] refuses at load, so an oversized grid is an error, not a wrap-around.
pub fn array_grid(first_stage: u8, stages: u8, per_stage: u8) -> impl Iterator<Item = (u8, u8)> {
    (0..u16::from(stages)).flat_map(move |s| {
        (0..u16::from(per_stage)).map(move |a| {
            let id = u8::try_from(1 + s * u16::from(per_stage) + a).unwrap_or(0);
            let stage = u8::try_from(u16::from(first_stage) + s).unwrap_or(u8::MAX);
            (id, stage)
        })
    })
}

/// The stage of each register id of a program (`u8::MAX`: no such array).
pub fn stage_map(arrays: impl IntoIterator<Item = (u8, u8)>) -> [u8; 256] {
    let mut stage_of = [u8::MAX; 256];
    for (id, stage) in arrays {
        stage_of[usize::from(id)] = stage;
    }
    stage_of
}

/// A switch program that runs nothing: plain traffic ([`Kind::FORWARD`]) is forwarded by the
/// pipeline itself, anything else is refused. For racks and tests whose switches only route.
#[derive(Clone, Copy, Debug, Default)]
pub struct Forwarder;

impl Program for Forwarder {
    type Packet = ();

    fn spec(&self) -> ProgramSpec {
        ProgramSpec {
            name: "forwarder".into(),
            arrays: Vec::new(),
            reserve_fast_recirc_port: false,
            tables: Vec::new(),
        }
    }

    fn kind(&self) -> Kind {
        Kind::FORWARD
    }

    fn admit(&self, frame: &Frame, _payload: &[u8]) -> Result<(), Reject> {
        Err(Reject::rule("no_program", format!("the forwarding switch runs no {:?} program", frame.kind)))
    }

    fn execute_pass(&mut self, _ctx: &mut PassContext<'_>, _packet: &mut ()) -> PassDecision {
        PassDecision::Drop("no_program")
    }

    fn encode(&self, _packet: &(), _out: &mut Vec<u8>) {}

    fn wire_bytes(&self, _packet: &()) -> usize {
        pisadb_wire::FRAME_BYTES
    }
}
