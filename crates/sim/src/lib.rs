//! # pisadb-sim: a network of hosts and switches, simulated deterministically
//!
//! [`world`] is the discrete-event engine, generic over the hosts ([`pisadb_host::Host`]), the
//! switch ([`pisadb_switch::SwitchDevice`]) and what observes the hosts' events
//! ([`world::Observer`]): links from [`net`], faults from [`faults`], one event scheduler in
//! virtual nanoseconds; [`swarm`] draws a fuzz case's faults from the ones a system tolerates;
//! [`probe`] lets a caller time its event loops. It names no system: each system builds its racks
//! on it (P4DB's are in `systems/p4db`). The simulator reads no clock: how fast it runs is
//! measured by its caller.
//!
//! See `docs/ARCHITECTURE.md` (how a datagram travels in the simulator; determinism; fault
//! injection) for the page that explains it.

pub mod faults;
pub mod probe;
pub mod swarm;
pub mod world;

pub use faults::{Crash, FaultStats, Faults, NoRestarts, SlowLink, Target};
/// The network model ([`pisadb_net`]), re-exported under its old path.
pub use pisadb_net as net;
pub use pisadb_net::{LinkParams, Topology};
pub use world::{Moment, Observer, Restarts, SimError, World, WorldError};
