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
//! - [`program`]: what a program declares (register arrays placed in stages, their actions) and
//!   the load-time checks that refuse what would not fit (SALUs and SRAM per stage, widths,
//!   comparisons), plus the [`Program`] trait a switch program implements.
//! - [`registers`]: register memory, and the per-pass door to it that enforces "each array at
//!   most once per pass, in stage order" on every access.
//! - [`pipeline`]: the [`Switch`], a sans-IO state machine: entry slots at one packet per clock,
//!   atomic passes in entry order (the argument for why that is exact is in its docs), pass
//!   latency, finite recirculation queues with priority, multicast groups, a GID counter, and
//!   counters for everything it refused or dropped.
//! - [`device`]: [`SwitchDevice`], the program-independent view the simulator and the real
//!   runtime drive.
//! - [`programs`]: the switch programs — P4DB's transaction engine and the LM-Switch lock
//!   manager; later the other papers' programs, on the same model without changes to it.
//!
//! No I/O, no clock, no randomness: the simulator and the real runtime drive the same code.

pub mod alu;
pub mod device;
pub mod pipeline;
pub mod profile;
pub mod program;
pub mod programs;
pub mod registers;

pub use device::SwitchDevice;
pub use pipeline::{Switch, SwitchStats, Transmit};
pub use profile::SwitchProfile;
pub use program::{LoadError, PassDecision, Program, ProgramSpec, Recirc, RegisterArraySpec, Reject};
