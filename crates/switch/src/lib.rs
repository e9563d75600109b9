//! # pisadb-switch: a PISA switch that enforces the hardware's rules
//!
//! Intel Tofino switches are out of production, so PisaDB models one faithfully enough that
//! what runs here would compile and run there, and fast enough that a simulated rack never
//! waits for its switch. The model is layered:
//!
//! - [`profile`]: every hardware figure (pipes, stages, stateful ALUs and SRAM per stage, clock,
//!   cycle costs, recirculation ports and queues) as a named parameter; `tofino1`, `tofino2`.
//! - [`alu`]: the stateful ALU. A register action reads-modifies-writes one cell (or one pair)
//!   with additions, subtractions and at most a profile-given number of comparisons.
//! - [`program`]: what a program declares (register arrays placed in stages, their actions,
//!   exact-match tables) and the load-time checks that refuse what would not fit (SALUs,
//!   logical tables and SRAM per stage, widths, comparisons), plus the [`Program`] trait a
//!   switch program implements and the outputs a pass can end in ([`PassDecision`]).
//! - [`registers`]: register memory, and the per-pass door to it and to the tables that
//!   enforces "each array or table at most once per pass, in stage order" on every access.
//! - [`tables`]: exact-match tables, read by the data plane, written by the control plane.
//! - [`ports`]: host, neighbour-switch and CPU ports, and the forwarding table that lets a
//!   switch sit in a network of switches.
//! - [`pipeline`]: the [`Switch`], a sans-IO state machine: entry slots at one packet per clock,
//!   atomic passes in entry order (the argument for why that is exact is in its docs), pass
//!   latency, finite recirculation queues with priority, multicast groups, a GID counter,
//!   routed egress, the control channel to a controller host (which addresses a switch by id,
//!   hop by hop, in a network of switches), and counters for everything it refused or
//!   dropped.
//! - [`device`]: [`SwitchDevice`], the program-independent view the simulator and the real
//!   runtime drive.
//!
//! The programs that run on the model belong to their systems (`systems/p4db/src/programs`:
//! P4DB's transaction engine and the LM-Switch lock manager); each implements [`Program`] on
//! the same model without changes to it.
//!
//! No I/O, no clock, no randomness: the simulator and the real runtime drive the same code.
//!
//! See `docs/ARCHITECTURE.md` (how a datagram travels; hardware facts the switch model uses) for
//! the page that explains it.

pub mod alu;
pub mod device;
pub mod pipeline;
pub mod ports;
pub mod profile;
pub mod program;
pub mod registers;
pub mod tables;

pub use device::SwitchDevice;
pub use pipeline::{Switch, SwitchStats, Transmit};
pub use ports::{Port, PortError};
pub use profile::SwitchProfile;
pub use program::{
    Forwarder, LoadError, Output, PassDecision, Program, ProgramSpec, Recirc, RegisterArraySpec, Reject, TableSpec,
};
pub use tables::{TableError, TableFile};
