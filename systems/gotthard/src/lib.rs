//! Gotthard (seed 004) on PisaDB: the switch aborts doomed optimistic transactions early.
//!
//! Clients far from their store run optimistic transactions that compare the values they
//! believe (`VALUE(k, v)`) before writing. A switch near the clients caches the latest value
//! of each key it has seen and, when a request's compare already disagrees with it, answers
//! the abort itself — a round trip to the store saved. In its *optimistic* mode it also logs
//! each forwarded write as the key's value, so the next request in a burst is checked against
//! the write still on its way to the store.
//!
//! - [`wire`]: the message format behind the shared frame.
//! - [`store`]: the store host (OCC by value, deduplication).
//! - [`client`]: the closed-loop client host of the micro-benchmark.
//! - [`costs`]: the CPU time each host's handlers charge, as settings.
//! - [`control`]: the control plane (mode and key map over the control channel) and its host.
//! - [`program`]: the switch program and its four modes.
//! - [`real`]: real mode — the hosts and the switch as processes on loopback.
//! - [`rack`]: client host — switch — store on the simulator, and its figures.
//! - [`system`]: the harness's view (variants, settings, one point, fault-injection cases).
//! - [`experiments`]: Fig. 2, the N, delay and jitter sweeps as data, with the paper's claims.
//! - [`presets`]: `pisadb` and `paper`, every value with its provenance.
//! - [`fuzz`]: seeded fault-injection cases and their oracles (`pisadb fuzz --system gotthard`).
//!
//! See `systems/gotthard/README.md` for the page that explains it.

pub mod client;
pub mod control;
pub mod costs;
pub mod experiments;
pub mod fuzz;
pub mod presets;
pub mod program;
pub mod rack;
pub mod real;
pub mod store;
pub mod system;
pub mod wire;

pub use system::SYSTEM;
