//! The one error type of the network crate.
//!
//! Everything that can go wrong here is a configuration mistake caught before a run starts: a
//! builder asked for zero switches or more hosts than a `u16` can number, a link with a line
//! rate that is not a positive number, a port discipline with too many classes, a link that does
//! not exist. Each variant names the offending field and what would have been accepted, so the
//! message alone is enough to fix a run spec. Nothing at run time returns this error: a full
//! buffer is not an error but a tail drop ([`crate::Dropped`]), counted and reported.

use crate::Endpoint;

/// A rejected topology, link or port configuration.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NetError {
    /// An integer setting outside the range the model accepts.
    #[error("{field} = {value} is out of range: accepted {min}..={max}")]
    OutOfRange {
        /// The setting, as the caller spells it (`hosts_per_tor`, `classes`).
        field: &'static str,
        /// The value given.
        value: u64,
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value (it may depend on the other settings of the same call).
        max: u64,
    },
    /// A line rate that is zero, negative, infinite or not a number.
    #[error("{field} = {gbps} Gbit/s is out of range: accepted a finite rate > 0")]
    BadLineRate {
        /// The link whose rate is wrong (`host_link.gbps`).
        field: &'static str,
        /// The rate given.
        gbps: f64,
    },
    /// A per-link setting for a link the topology does not have.
    #[error("no link {from:?} -> {to:?} in the topology")]
    NoSuchLink {
        /// Where the missing link would start.
        from: Endpoint,
        /// Where it would end.
        to: Endpoint,
    },
}

/// Checks that `value` lies in `min..=max`, naming `field` if not.
pub(crate) fn check_range(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), NetError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(NetError::OutOfRange { field, value, min, max })
    }
}
