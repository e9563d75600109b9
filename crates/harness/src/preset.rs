//! Presets: named sets of settings, every value with where it comes from.
//!
//! A system's model charges costs and makes assumptions; each is a setting (`pisadb systems
//! --settings NAME`), and a [`Preset`] names a consistent choice of them: `pisadb` (our own
//! model, measured on our code where it can be; the default) and `paper` (the paper's testbed,
//! as far as its text states it). Every value says which of three kinds it is
//! ([`Provenance`]), as `GUIDE.md` §6 asks: *measured* (the bench that measured it on our
//! code), *stated* (the paper's section, a datasheet) or *assumed* (and why). A value inferred
//! from a paper's result says so in its *stated* or *assumed* text; a value chosen to make a
//! chart match has no place here.
//!
//! A preset is applied to the system's default settings through the same path as `--set`
//! ([`crate::settings::apply_set`]), so a preset that names a setting the system no longer has
//! fails with the keys it accepts instead of being ignored. [`preset_settings`] is the one
//! function every command (and the real-mode `cluster`) calls to start from a preset, and
//! [`describe`] is what a run prints of the choice.

use crate::settings::apply_set;
use crate::{HarnessError, System};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// The preset every system starts from unless told otherwise.
pub const DEFAULT_PRESET: &str = "pisadb";

/// Where a preset's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "source", rename_all = "lowercase")]
pub enum Provenance {
    /// Measured on our own code: the bench that measured it (and `CALIBRATION.md`'s entry).
    Measured(String),
    /// Stated by a paper (its section) or a datasheet.
    Stated(String),
    /// Assumed, and why.
    Assumed(String),
}

impl Provenance {
    /// `measured: …`, `stated: …` or `assumed: …`.
    pub fn text(&self) -> String {
        match self {
            Provenance::Measured(s) => format!("measured: {s}"),
            Provenance::Stated(s) => format!("stated: {s}"),
            Provenance::Assumed(s) => format!("assumed: {s}"),
        }
    }
}

/// One value of a preset.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PresetValue {
    /// The setting, a dotted key as `--set` takes it.
    pub key: String,
    /// Its value.
    pub value: Value,
    /// Where it comes from.
    pub provenance: Provenance,
}

/// A named set of settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Preset {
    /// Its name on the command line.
    pub name: &'static str,
    /// Other names it answers to (an old name kept working).
    pub aliases: Vec<&'static str>,
    /// One sentence on what it is.
    pub summary: String,
    /// Its values, applied in order over the default settings.
    pub values: Vec<PresetValue>,
}

impl Preset {
    /// A preset without values yet.
    pub fn new(name: &'static str, summary: impl Into<String>) -> Self {
        Preset { name, aliases: Vec::new(), summary: summary.into(), values: Vec::new() }
    }

    /// Adds `key = value` (anything that serializes), measured by `bench`.
    pub fn measured(self, key: &str, value: impl Serialize, bench: &str) -> Self {
        self.with(key, value, Provenance::Measured(bench.into()))
    }

    /// Adds `key = value`, stated by `source`.
    pub fn stated(self, key: &str, value: impl Serialize, source: &str) -> Self {
        self.with(key, value, Provenance::Stated(source.into()))
    }

    /// Adds `key = value`, assumed for the reason `why`.
    pub fn assumed(self, key: &str, value: impl Serialize, why: &str) -> Self {
        self.with(key, value, Provenance::Assumed(why.into()))
    }

    /// The same preset also answering to `alias`.
    pub fn alias(mut self, alias: &'static str) -> Self {
        self.aliases.push(alias);
        self
    }

    fn with(mut self, key: &str, value: impl Serialize, provenance: Provenance) -> Self {
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        self.values.push(PresetValue { key: key.into(), value, provenance });
        self
    }

    /// Whether it answers to `name`.
    pub fn is(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }

    /// Applies its values to `settings`; an error names the value the settings refused.
    pub fn apply(&self, settings: &mut Value) -> Result<(), HarnessError> {
        for v in &self.values {
            apply_set(settings, &format!("{}={}", v.key, v.value))?;
        }
        Ok(())
    }
}

/// The preset of `system` called `name` (or one of its aliases), or an error listing them.
pub fn find_preset(system: &dyn System, name: &str) -> Result<Preset, HarnessError> {
    lookup(system.name(), system.presets(), name)
}

/// The preset of `presets` (system `system`'s) called `name` or one of its aliases, or an
/// error listing them.
pub fn lookup(system: &str, presets: Vec<Preset>, name: &str) -> Result<Preset, HarnessError> {
    let names: Vec<String> = presets.iter().map(|p| p.name.to_string()).collect();
    presets.into_iter().find(|p| p.is(name)).ok_or_else(|| HarnessError::Run {
        system: system.into(),
        why: format!(
            "no preset `{name}`; its presets: {}",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ),
    })
}

/// `system`'s default settings with preset `name` applied, and the preset.
pub fn preset_settings(system: &dyn System, name: &str) -> Result<(Value, Preset), HarnessError> {
    let preset = find_preset(system, name)?;
    let mut settings = system.default_settings();
    preset.apply(&mut settings)?;
    Ok((settings, preset))
}

/// What a preset chose, one value a line with its provenance.
pub fn describe(system: &dyn System, preset: &Preset) -> String {
    let mut s = format!("preset `{}` of {}: {}\n", preset.name, system.name(), preset.summary);
    let width = preset.values.iter().map(|v| v.key.len()).max().unwrap_or(0);
    for v in &preset.values {
        let _ = writeln!(s, "  {:<width$} = {:<12} {}", v.key, v.value.to_string(), v.provenance.text());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_preset_edits_settings_through_set_and_refuses_unknown_keys() {
        let p = Preset::new("paper", "the testbed").stated("link.gbps", 25, "§7").assumed("workers", 8, "why not");
        let mut settings = json!({ "workers": 20, "link": { "gbps": 10.0 } });
        p.apply(&mut settings).unwrap();
        assert_eq!(settings, json!({ "workers": 8, "link": { "gbps": 25 } }));
        let bad = Preset::new("bad", "").assumed("wrokers", 8, "typo");
        let err = bad.apply(&mut settings).unwrap_err().to_string();
        assert!(err.contains("no setting `wrokers`"), "{err}");
    }

    #[test]
    fn aliases_find_the_same_preset() {
        let p = Preset::new("paper", "").alias("p4db-testbed");
        assert!(p.is("paper") && p.is("p4db-testbed") && !p.is("pisadb"));
        assert_eq!(Provenance::Measured("benches/x".into()).text(), "measured: benches/x");
    }
}
