//! `--set key=value`: editing a system's settings from the command line.
//!
//! A system's settings are one serde value (its run configuration serialized as JSON). A key
//! is a dotted path into it (`workers`, `link.gbps`, `workload.Ycsb.hot_prob`: enum variants
//! appear under their name, as serde writes them). The value is read as JSON where it parses
//! (`8`, `0.5`, `true`, `"text"`, `{…}`) and as a plain string otherwise (`NoWait`), and must
//! have the kind of the value it replaces: a number for a number, an integer for an integer.
//! Keys must exist: a typo is an error that lists the keys accepted at that level, not a
//! setting silently ignored. The edited value is then read back into the system's typed
//! configuration ([`read_back`]), whose own checks (an enum's accepted names, a range) name
//! the keys that were set.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why an override could not be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// Not of the form `key=value`.
    #[error("`--set {0}`: expected key=value (keys are dotted paths, e.g. workers=8 or link.gbps=25)")]
    Syntax(String),
    /// The key names nothing in the settings.
    #[error("`--set {assignment}`: no setting `{key}`; accepted here: {}", known.join(", "))]
    UnknownKey {
        /// The whole assignment.
        assignment: String,
        /// The path up to the part that does not exist.
        key: String,
        /// The keys that exist at that level.
        known: Vec<String>,
    },
    /// The value is not of the setting's kind.
    #[error("`--set {assignment}`: `{key}` takes {expected}, not `{value}`")]
    BadValue {
        /// The whole assignment.
        assignment: String,
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What the key takes.
        expected: &'static str,
    },
    /// The edited settings do not make a valid configuration.
    #[error("{}{why}", if sets.is_empty() { String::new() } else { format!("settings after --set {}: ", sets.join(" --set ")) })]
    Invalid {
        /// The assignments applied.
        sets: Vec<String>,
        /// What the configuration's reader said.
        why: String,
    },
}

/// Applies one `key=value` assignment to `settings`.
pub fn apply_set(settings: &mut Value, assignment: &str) -> Result<(), SettingsError> {
    let (key, raw) = assignment.split_once('=').ok_or_else(|| SettingsError::Syntax(assignment.to_string()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(SettingsError::Syntax(assignment.to_string()));
    }
    let mut at = settings;
    let mut path = String::new();
    for part in key.split('.') {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(part);
        let known = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
        let keys: Vec<String> = known(at);
        match at.get_mut(part) {
            Some(next) => at = next,
            None => {
                return Err(SettingsError::UnknownKey {
                    assignment: assignment.to_string(),
                    key: path,
                    known: if keys.is_empty() { vec!["(nothing: this setting has no parts)".into()] } else { keys },
                })
            }
        }
    }
    let value = serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
    let bad = |expected| SettingsError::BadValue {
        assignment: assignment.to_string(),
        key: key.to_string(),
        value: raw.to_string(),
        expected,
    };
    let expected = match (&*at, &value) {
        (Value::Number(old), Value::Number(new)) if old.is_u64() && !new.is_u64() => Some("a non-negative integer"),
        (Value::Number(old), Value::Number(new)) if old.is_i64() && new.is_f64() => Some("an integer"),
        (Value::Number(_), Value::Number(_)) | (Value::Bool(_), Value::Bool(_)) => None,
        (Value::Number(_), _) => Some("a number"),
        (Value::Bool(_), _) => Some("true or false"),
        // Strings, enums (a string or an object) and optional parts are checked when the
        // settings are read back into the typed configuration.
        _ => None,
    };
    if let Some(expected) = expected {
        return Err(bad(expected));
    }
    *at = value;
    Ok(())
}

/// Applies every assignment of `sets` to `defaults` and reads the result back as `T`.
pub fn read_back<T: DeserializeOwned>(mut defaults: Value, sets: &[String]) -> Result<T, SettingsError> {
    for set in sets {
        apply_set(&mut defaults, set)?;
    }
    serde_json::from_value(defaults).map_err(|e| SettingsError::Invalid { sets: sets.to_vec(), why: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    enum Cc {
        NoWait,
        WaitDie,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Config {
        workers: u16,
        cc: Cc,
        link: Link,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Link {
        gbps: f64,
    }

    fn defaults() -> Value {
        json!({ "workers": 20, "cc": "NoWait", "link": { "gbps": 10.0 } })
    }

    #[test]
    fn dotted_keys_set_nested_values_of_their_kind() {
        let sets = ["workers=8".to_string(), "link.gbps=25".to_string(), "cc=WaitDie".to_string()];
        let config: Config = read_back(defaults(), &sets).expect("valid");
        assert_eq!(config, Config { workers: 8, cc: Cc::WaitDie, link: Link { gbps: 25.0 } });
    }

    #[test]
    fn unknown_keys_list_what_is_accepted_at_their_level() {
        let err = apply_set(&mut defaults(), "link.gpbs=25").unwrap_err();
        assert_eq!(err.to_string(), "`--set link.gpbs=25`: no setting `link.gpbs`; accepted here: gbps");
        let err = apply_set(&mut defaults(), "wrokers=3").unwrap_err();
        assert!(err.to_string().contains("accepted here: cc, link, workers"), "{err}");
    }

    #[test]
    fn values_of_the_wrong_kind_are_refused_with_what_the_key_takes() {
        let err = apply_set(&mut defaults(), "workers=eight").unwrap_err();
        assert_eq!(err.to_string(), "`--set workers=eight`: `workers` takes a number, not `eight`");
        let err = apply_set(&mut defaults(), "workers=2.5").unwrap_err();
        assert!(err.to_string().contains("a non-negative integer"), "{err}");
        let err = apply_set(&mut defaults(), "workers=-1").unwrap_err();
        assert!(err.to_string().contains("a non-negative integer"), "{err}");
        assert!(matches!(apply_set(&mut defaults(), "workers"), Err(SettingsError::Syntax(_))));
    }

    #[test]
    fn enum_names_are_checked_when_read_back_naming_the_sets() {
        let err = read_back::<Config>(defaults(), &["cc=Optimistic".to_string()]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cc=Optimistic") && text.contains("NoWait") && text.contains("WaitDie"), "{text}");
    }
}
