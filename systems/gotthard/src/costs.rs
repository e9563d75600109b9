//! The CPU time Gotthard's hosts charge per handler, as settings (`--set costs.store_read_ns=…`).
//!
//! The defaults are this code's own handlers measured by `cargo bench -p pisadb-gotthard
//! --bench handlers` (criterion medians, `CALIBRATION.md`). The paper's store and clients
//! were Python processes, far slower; we charge what our code costs and make it a setting so
//! a user can charge theirs. Against the paper's 50 ms delays none of it is visible; at
//! data-center delays it is what bounds the store.

use crate::client::CLIENT_REPLY_NS;
use crate::store::{STORE_READ_NS, STORE_REQUEST_NS};
use pisadb_core::Nanos;
use serde::{Deserialize, Serialize};

/// What each handler charges, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Costs {
    /// The store, per request that writes or compares, and per datagram it rejects.
    pub store_request_ns: Nanos,
    /// The store, per all-`READ` request.
    pub store_read_ns: Nanos,
    /// A client, per reply it handles and per retransmission.
    pub client_reply_ns: Nanos,
}

impl Costs {
    /// The medians of `cargo bench -p pisadb-gotthard --bench handlers`.
    pub const MEASURED: Costs =
        Costs { store_request_ns: STORE_REQUEST_NS, store_read_ns: STORE_READ_NS, client_reply_ns: CLIENT_REPLY_NS };
}

impl Default for Costs {
    fn default() -> Self {
        Costs::MEASURED
    }
}
