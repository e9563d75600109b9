//! NetAccel (seed 002) on PisaDB: a join and a group-by in the switch for TPC-H Q20.
//!
//! The hosts are segments of an MPP database (and a master); the switch runs a query pattern —
//! a join followed by a group-by — over tuples the segments stream through it, one tuple per
//! packet, and overflows what it cannot hold to a control-plane host, which joins and
//! aggregates it itself. At the end the switch drains its groups to their segments by
//! recirculating an iterator, and clears its state.
//!
//! - [`wire`]: tuple packets and motions behind the shared frame.
//! - [`layout`]: the register arrays, their actions and stages (Algorithms 1–2), sized by
//!   scale factor.
//! - [`program`]: the switch program: join, group-by, overflow, barrier, drain, clearing.
//! - [`overflow`]: the control plane's join and aggregation of the overflow.
//! - [`offline`]: pattern 1 through the switch model alone (property tests, overflow tables).
//! - [`hosts`]: the master, the segments (normal and accelerated plans, deparse and receive
//!   operators) and the control plane, as sans-IO hosts.
//! - [`calibration`]: the CPU costs they charge, measured from our code.
//! - [`rack`]: the rack on the simulator, its settings and figures.
//! - [`scheduler`]: the network scheduler's overflow cost model and its choice of (J, G).
//! - [`system`]: the harness's view (variants, settings, one point).
//! - [`experiments`]: Fig. 7, Tables 1–2, Fig. 8 and an SF sweep as data, with the paper's claims.
//! - [`presets`]: `pisadb` and `paper`, every value with its provenance.
//! - [`real`]: real mode: the same hosts and switch as processes streaming real datagrams on
//!   loopback (`pisadb cluster --system netaccel`).
//!
//! See `systems/netaccel/README.md` for the page that explains it.

pub mod calibration;
pub mod experiments;
pub mod hosts;
pub mod layout;
pub mod offline;
pub mod overflow;
pub mod presets;
pub mod program;
pub mod rack;
pub mod real;
pub mod scheduler;
pub mod system;
pub mod wire;

pub use system::SYSTEM;
