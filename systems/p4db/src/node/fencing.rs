//! Fencing a crashed switch: answers from its epoch are dropped.
//!
//! When the switch crashes, the control plane rebuilds its registers from every node's log
//! and the rebuilt switch answers in a new *epoch* (the top 16 bits of the GID word). The
//! crashed switch may still have answers on the wire, and the rebuild may have decided those
//! transactions differently (it replays the logs, not the lost registers), so once a node has
//! handed over its log it must never act on an answer from an older epoch: it drops them, and
//! the rebuilt switch answers the resent transactions again. A node also moves to the newest
//! epoch it hears from, so it needs no message from the control plane in the real runtime.

use super::machine::Node;

impl Node {
    /// Fences off a crashed switch: the switch rebuilt from the nodes' logs answers with
    /// `epoch`, and once this node has handed over its log it drops answers from older
    /// epochs, which the crashed switch may still have in flight.
    pub fn fence_switch(&mut self, epoch: u16) {
        self.switch_epoch = self.switch_epoch.max(epoch);
    }

    /// Whether an answer from switch epoch `epoch` may be acted on: not if it is older than
    /// the newest this node knows of (which it becomes otherwise).
    pub(super) fn accept_switch_epoch(&mut self, epoch: u16) -> bool {
        if epoch < self.switch_epoch {
            return false;
        }
        self.switch_epoch = epoch;
        true
    }
}
