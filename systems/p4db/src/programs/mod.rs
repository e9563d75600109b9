//! Switch programs: each is one P4 program's data plane on the shared pipeline model.
//!
//! - [`p4db`]: P4DB's in-switch transaction engine (the core of PisaDB).
//! - [`lock_manager`]: the LM-Switch baseline, a lock manager for hot tuples.
//!
//! The other papers' programs (SwitchTx's gather-and-scatter, TransKV's timestamp ordering,
//! Gotthard's optimistic abort, NetAccel's join and group-by) implement the same
//! [`pisadb_switch::Program`] trait on the same model.

pub mod lock_manager;
pub mod p4db;
