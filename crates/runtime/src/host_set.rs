//! Several hosts in one thread, each on its own socket: how a load generator plays many
//! senders against a switch process without a process (and a core) per sender.
//!
//! [`drive`] polls every socket at once and hands what arrives to the host whose socket it
//! came in on, runs each host's due timers, and sends what the hosts produced from their own
//! sockets to their switch. The hosts keep no log (a load generator has nothing to recover),
//! and their `cpu_ns` is spent for real on this thread. The caller decides when to stop and
//! sees every event with the time and the host that reported it.

use crate::error::{Result, RuntimeError};
use crate::udp::BatchSocket;
use crate::unix_now_ns;
use pisadb_core::{Nanos, Scheduler};
use pisadb_host::{Host, HostOutbox};
use std::net::SocketAddr;
use std::time::Duration;

/// The longest a round waits for datagrams (ms): short, so timers and the stop are timely.
const POLL_WAIT_MS: u8 = 1;

/// What [`drive`] counted besides the hosts' events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetRun {
    /// Datagrams received from the switch.
    pub datagrams_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// Datagrams from any other address, dropped unread.
    pub not_from_switch: u64,
}

/// Runs `hosts[i]` on `sockets[i]`, all sending to and taking from `switch`, with the time in
/// nanoseconds since the call; `keep_going(now)` is asked every round and ends the run when
/// false; `on_event(now, host, event)` sees every event.
pub fn drive<H: Host>(
    hosts: &mut [H],
    sockets: &mut [BatchSocket],
    switch: SocketAddr,
    mut keep_going: impl FnMut(Nanos) -> bool,
    mut on_event: impl FnMut(Nanos, u16, H::Event),
) -> Result<SetRun> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    assert_eq!(hosts.len(), sockets.len(), "one socket per host");
    let start = unix_now_ns();
    let clock = || unix_now_ns().saturating_sub(start);
    let mut run = SetRun::default();
    let mut timers: Vec<Scheduler<H::Timer>> = hosts.iter().map(|_| Scheduler::new()).collect();
    let mut outboxes: Vec<HostOutbox<H>> = hosts.iter().map(|_| HostOutbox::<H>::default()).collect();
    let mut batch: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
    let mut ready = vec![false; sockets.len()];
    let now = clock();
    for (host, out) in hosts.iter_mut().zip(&mut outboxes) {
        host.start(now, out);
    }
    loop {
        let now = clock();
        for (i, out) in outboxes.iter_mut().enumerate() {
            batch.extend(out.sends.drain(..).map(|s| (switch, s.bytes)));
            run.datagrams_out += batch.len() as u64;
            sockets[i].send_batch(&batch);
            batch.clear();
            for (at, timer) in out.timers.drain(..) {
                timers[i].push(at, timer);
            }
            for event in out.events.drain(..) {
                on_event(now, i as u16, event);
            }
            out.log.clear();
            out.cpu_ns = 0;
        }
        if !keep_going(now) {
            return Ok(run);
        }
        for (i, host) in hosts.iter_mut().enumerate() {
            while let Some((_, timer)) = timers[i].pop_due(now) {
                host.handle_timer(now, timer, &mut outboxes[i]);
            }
        }
        {
            let mut fds: Vec<PollFd> = sockets.iter().map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN)).collect();
            match poll(&mut fds, PollTimeout::from(POLL_WAIT_MS)) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(source) => return Err(RuntimeError::Syscall { call: "poll", source }),
            }
            for (r, fd) in ready.iter_mut().zip(&fds) {
                *r = fd.revents().is_some_and(|e| e.contains(PollFlags::POLLIN));
            }
        }
        let now = clock();
        for (i, host) in hosts.iter_mut().enumerate() {
            if !ready[i] {
                continue;
            }
            let out = &mut outboxes[i];
            sockets[i].recv_batch(Duration::ZERO, |from, bytes| {
                if from == switch {
                    run.datagrams_in += 1;
                    host.handle_datagram(now, bytes, out);
                } else {
                    run.not_from_switch += 1;
                }
            })?;
        }
    }
}
