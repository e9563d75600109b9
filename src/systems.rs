//! The systems this binary runs. A new system is a crate under `systems/` that implements
//! [`pisadb_harness::System`] (and, to run as processes, [`RealMode`]), and a line in each
//! table here.

use pisadb_harness::real::{RealFlag, RealMode, RealModes};
use pisadb_harness::Registry;
use pisadb_runtime::echo;
use std::path::{Path, PathBuf};

/// P4DB's layout measurement, behind `pisadb layout` (a command of P4DB's alone): reached
/// through this module, the one place the binary names systems' crates.
pub(crate) use pisadb_p4db::layout_report;

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

/// The runtime's own echo system in the table of real modes (its tests run it through this
/// binary).
struct EchoReal;

static ECHO: EchoReal = EchoReal;

impl RealMode for EchoReal {
    fn name(&self) -> &'static str {
        echo::SYSTEM
    }

    fn flags(&self) -> &'static [RealFlag] {
        &[]
    }

    fn serve_switch(&self, config: &Path, id: u16, _: &[PathBuf], _: u16, report: Option<&Path>) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| echo::serve_switch(cfg, id, report))
    }

    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| echo::serve_host(cfg, id, data_dir))
    }
}

/// Every real mode this binary runs: the systems' and the runtime's echo. The first is the
/// one `cluster` runs without `--system`.
pub(crate) fn real_modes() -> RealModes {
    RealModes::new(vec![
        &pisadb_p4db::real::REAL,
        &pisadb_gotthard::real::REAL,
        &pisadb_netaccel::real::REAL,
        &pisadb_switchtx::real::REAL,
        &pisadb_transkv::real::REAL,
        &ECHO,
    ])
}

#[cfg(test)]
mod tests {
    use super::registry;
    use pisadb_wire::Kind;
    use std::collections::BTreeMap;

    /// The frame kinds each system of [`registry`] declares ([`pisadb_harness::System::wire_kinds`]),
    /// in its order.
    fn frame_kinds() -> Vec<(&'static str, &'static [Kind])> {
        registry().systems().iter().map(|s| (s.name(), s.wire_kinds())).collect()
    }

    /// Who claims each kind byte, shared kinds included; `Err` names the first byte claimed twice.
    fn owners<'a>(claims: &[(&'a str, &[Kind])]) -> Result<BTreeMap<u8, &'a str>, String> {
        let mut owner = BTreeMap::new();
        for (name, kinds) in claims {
            for kind in *kinds {
                if let Some(first) = owner.insert(kind.byte(), *name) {
                    return Err(format!("frame kind {} is declared by both {first} and {name}", kind.byte()));
                }
            }
        }
        Ok(owner)
    }

    #[test]
    fn every_system_declares_its_kinds_and_no_two_collide() {
        let mut claims = vec![("shared", Kind::SHARED)];
        claims.extend(frame_kinds());
        let owner = owners(&claims).unwrap();
        assert!(frame_kinds().iter().all(|(_, kinds)| !kinds.is_empty()), "each system sends some kind");
        assert_eq!(owner.len(), 8, "two shared kinds and six of the systems'");
    }

    #[test]
    fn a_collision_is_caught() {
        const CLASH: &[Kind] = &[Kind::new(7)];
        let mut claims = vec![("shared", Kind::SHARED)];
        claims.extend(frame_kinds());
        claims.push(("newcomer", CLASH));
        assert_eq!(owners(&claims).unwrap_err(), "frame kind 7 is declared by both switchtx and newcomer");
        assert!(owners(&[("shared", Kind::SHARED), ("forger", &[Kind::CONTROL])]).is_err());
    }
}
