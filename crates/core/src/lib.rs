//! # pisadb-core: the vocabulary every other crate speaks
//!
//! PisaDB runs the same transaction in two very different places: on a database node, where a
//! tuple is a value in a hash table guarded by a lock, and inside the switch, where a tuple is
//! one entry of a register array touched by a stateful ALU. For the two to agree, an operation
//! must mean exactly one thing. This crate is that one thing:
//!
//! - [`TupleKey`] names a tuple (table + row) independently of where it lives;
//! - [`Op`] is one operation of a transaction (read, write, add, constrained add, SmallBank's
//!   write-check), with a tiny per-transaction *accumulator* that lets a later operation use the
//!   result of an earlier one (read-dependent writes, as SmallBank needs). [`Op::apply`] is the
//!   reference semantics; the switch's register actions are tested against it;
//! - [`Txn`] is an ordered list of operations plus the ordering dependencies between them
//!   ([`Txn::dependencies`]), which both the data-layout algorithm (directed edges of the access
//!   graph) and the pass planner (which operations may share a pipeline pass) consume;
//! - [`rng`] derives every random generator of a run from one seed, so that a seed reproduces a
//!   run exactly.
//!
//! Nothing here does I/O or reads a clock.
//!
//! See `docs/ARCHITECTURE.md` (the layers) for the page that explains it.

pub mod op;
pub mod rng;
pub mod sched;
pub mod trace;
pub mod txn;

pub use op::{AccOut, Op, OpKind, OpOutcome, TupleKey, RESTOCK_AMOUNT, RESTOCK_THRESHOLD};
pub use sched::Scheduler;
pub use trace::{TraceBytes, TraceHash};
pub use txn::{Insert, InsertRow, SerialStore, Txn};

/// Virtual or real time in integer nanoseconds. Units are last in names (`latency_ns`).
pub type Nanos = u64;
