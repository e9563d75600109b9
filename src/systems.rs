//! The systems this binary runs. A new system is a crate under `systems/` that implements
//! [`pisadb_harness::System`], and one line here.

use pisadb_harness::Registry;

/// Every system, in the order `pisadb systems` lists them.
pub(crate) fn registry() -> Registry {
    Registry::new(vec![
        &pisadb_p4db::SYSTEM,
        &pisadb_gotthard::SYSTEM,
        &pisadb_netaccel::SYSTEM,
        &pisadb_switchtx::SYSTEM,
        &pisadb_transkv::SYSTEM,
    ])
}
