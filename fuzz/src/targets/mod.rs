//! The decoders under test, one [`Target`] each, grouped by the crate that owns the format.
//! A new format gets a target here (its generator and its check, usually one line of
//! [`crate::check`]); [`all`] is what the campaign and the test slice run.

mod gotthard;
mod netaccel;
mod p4db;
mod shared;
mod switchtx;
mod transkv;

use crate::Target;

/// Every target, in a fixed order.
pub fn all() -> Vec<Target> {
    [shared::TARGETS, p4db::TARGETS, gotthard::TARGETS, switchtx::TARGETS, transkv::TARGETS, netaccel::TARGETS].concat()
}

/// The target called `name`.
pub fn by_name(name: &str) -> Option<Target> {
    all().into_iter().find(|t| t.name == name)
}

/// Why `name` is no target, listing the names there are.
pub fn unknown(name: &str) -> String {
    let names: Vec<&str> = all().iter().map(|t| t.name).collect();
    format!("unknown target `{name}`; the targets are: {}", names.join(", "))
}
