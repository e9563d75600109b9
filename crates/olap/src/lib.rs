//! # pisadb-olap: the analytical side of PisaDB
//!
//! NetAccel (seed 002) puts a join and a group-by of an MPP database into the switch. To
//! compare it with what the database does without the switch we need the database: segments
//! that hold hash-distributed tables and run a plan over them. This crate is that database's
//! engine, and it names no system:
//!
//! - [`tpch`]: TPC-H data from the `tpchgen` crate (dbgen's generator, so the bundled SF 1
//!   answers apply), reduced to what Q20 reads, with the validation parameters ('forest',
//!   1994-01-01, 'CANADA'), and hash-distributed over segments. It lives here rather than in
//!   `pisadb-workload` because it is columnar data for this executor, not a transaction
//!   generator, and keeps tpchgen out of every transactional system's build.
//! - [`batch`]: a column batch: named `i64` columns of equal length. Every value Q20 touches
//!   (keys, quantities, dates) is an integer; the only strings of the answer (a supplier's name
//!   and address) are looked up by key at the end.
//! - [`keytable`]: an open-addressing hash table from a `u64` key to a row number, the one
//!   structure under the hash join and the hash aggregation. It is ours, not `std`'s `HashMap`,
//!   so that nothing can depend on a randomly seeded iteration order.
//! - [`ops`]: the operators: filter, project, hash join (inner and semi), hash aggregation
//!   (used locally and globally), the motions (broadcast, redistribute, gather) and sort.
//! - [`q20`]: Q20's normal plan as steps a segment runs (the same functions run in process for
//!   the tests and inside the simulated segments), a plain reference implementation written
//!   without the executor, and the bundled SF 1 answer.
//!
//! Everything is deterministic: row order out of every operator is a function of row order in.
//!
//! See `docs/ARCHITECTURE.md` (the layers) and `systems/netaccel/README.md` for the page that
//! explains it.

pub mod batch;
pub mod keytable;
pub mod ops;
pub mod q20;
pub mod tpch;

pub use batch::Batch;
