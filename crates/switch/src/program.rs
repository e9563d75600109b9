//! What a switch program is, and the rules it is checked against when loaded.
//!
//! A program declares its register arrays up front ([`ProgramSpec`]): where each lives (its
//! stage), how big it is, and the stateful actions it can run. The switch checks the
//! declaration against the profile before anything runs ([`ProgramSpec::check`]): a stage has
//! only so many stateful ALUs and so much SRAM, and an action only so many comparisons. A
//! program that does not fit is refused with an error naming the array, the stage and the
//! limit, as the P4 compiler would refuse it.
//!
//! At run time a program sees packets through two calls:
//! - [`Program::admit`] decodes a datagram and checks that its plan obeys the per-pass rules
//!   (each array at most once per pass, in stage order). A packet that does not is rejected
//!   with a reason before it touches any register.
//! - [`Program::execute_pass`] runs one pass of an admitted packet through a
//!   [`PassContext`], which is the only door to the registers and re-checks the same rules, and
//!   says what happens next ([`PassDecision`]): reply, multicast, recirculate or drop.
//!
//! The model never calls a program with anything but the packet and the registers: no clock,
//! no randomness. Programs that need time (none yet) would get it in the packet, as hardware
//! gets it from the ingress timestamp.

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
        Ok(())
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
