//! A UDP socket that moves datagrams in batches: one `recvmmsg` or `sendmmsg` system call for
//! up to [`BATCH`] datagrams, which is what keeps a software switch or node from spending its
//! time in the kernel. Receiving waits for at most the timeout given, then takes what is
//! queued.
//!
//! The wait is a `ppoll`, not a socket receive timeout: Linux rounds `SO_RCVTIMEO` up to whole
//! scheduler ticks (1-10 ms), so a loop that asks to wait 5 µs for its next timer would sleep a
//! tick instead, while `ppoll` sleeps on a high-resolution timer.

use crate::error::{Result, RuntimeError};
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrIn, SockaddrStorage};
use nix::sys::time::TimeSpec;
use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

/// Datagrams per system call.
pub const BATCH: usize = 64;
/// The largest datagram we send or accept (a P4DB packet of 32 instructions is ~300 bytes).
pub const MAX_DATAGRAM: usize = 2048;

/// The receive buffer every socket asks for. The kernel's default (about 200 KB) holds a few
/// hundred small datagrams: a burst of that many while the process waits for a core (two
/// cores shared by a whole rack of processes) would be lost. 8 MB holds tens of thousands.
/// Root gets it (`SO_RCVBUFFORCE`); anyone else gets what `net.core.rmem_max` allows.
pub const RECEIVE_BUFFER: usize = 8 << 20;

/// A bound UDP socket with batched I/O, IPv4 only (loopback and our own namespaces).
pub struct BatchSocket {
    socket: UdpSocket,
    buffers: Vec<[u8; MAX_DATAGRAM]>,
    headers: MultiHeaders<SockaddrIn>,
}

impl BatchSocket {
    /// Binds `addr` (an IPv4 address: loopback or a namespace's).
    pub fn bind(addr: SocketAddr) -> Result<Self> {
        if !addr.is_ipv4() {
            return Err(RuntimeError::bad_setting("address", addr, "an IPv4 address (loopback or a namespace's)"));
        }
        let socket = UdpSocket::bind(addr).map_err(|source| RuntimeError::Bind { addr, source })?;
        grow_receive_buffer(&socket, RECEIVE_BUFFER);
        Ok(BatchSocket {
            socket,
            buffers: vec![[0; MAX_DATAGRAM]; BATCH],
            headers: MultiHeaders::preallocate(BATCH, None),
        })
    }

    /// The receive buffer the kernel gave the socket, in bytes (it reports twice what was
    /// granted, for its own bookkeeping).
    pub fn receive_buffer(&self) -> usize {
        nix::sys::socket::getsockopt(&self.socket, nix::sys::socket::sockopt::RcvBuf).unwrap_or(0)
    }

    /// The socket's descriptor, to wait on several sockets at once (`poll`).
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().expect("a bound socket has an address")
    }

    /// Waits up to `timeout` until a datagram is queued; whether one is.
    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        let mut fds = [PollFd::new(self.socket.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
            Ok(n) => Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => Ok(false),
            Err(source) => Err(RuntimeError::Syscall { call: "ppoll", source }),
        }
    }

    /// Receives up to [`BATCH`] datagrams, waiting at most `timeout` for the first; calls
    /// `each(from, bytes)` for each one.
    pub fn recv_batch(&mut self, timeout: Duration, mut each: impl FnMut(SocketAddr, &[u8])) -> Result<usize> {
        if !timeout.is_zero() && !self.wait(timeout)? {
            return Ok(0);
        }
        let fd = self.socket.as_raw_fd();
        let received: Vec<(Option<SocketAddr>, usize)> = {
            let mut slices: Vec<[IoSliceMut<'_>; 1]> =
                self.buffers.iter_mut().map(|b| [IoSliceMut::new(&mut b[..])]).collect();
            match recvmmsg(fd, &mut self.headers, slices.iter_mut(), MsgFlags::MSG_DONTWAIT, None) {
                Ok(msgs) => msgs.map(|m| (m.address.map(|a| SocketAddr::V4(SocketAddrV4::from(a))), m.bytes)).collect(),
                Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return Ok(0),
                // A datagram sent earlier bounced off a closed port (a peer is down): not an error here.
                Err(nix::errno::Errno::ECONNREFUSED) => return Ok(0),
                Err(source) => return Err(RuntimeError::Syscall { call: "recvmmsg", source }),
            }
        };
        for (i, (from, len)) in received.iter().enumerate() {
            if let Some(from) = from {
                each(*from, &self.buffers[i][..(*len).min(MAX_DATAGRAM)]);
            }
        }
        Ok(received.len())
    }

    /// Sends every `(to, bytes)`, [`BATCH`] per system call. A datagram the kernel refuses
    /// (a full buffer, a peer that is down) is lost, as on a wire: the protocols retry.
    /// Returns how many were handed to the kernel.
    pub fn send_batch(&mut self, datagrams: &[(SocketAddr, Vec<u8>)]) -> usize {
        let mut sent = 0;
        for chunk in datagrams.chunks(BATCH) {
            let slices: Vec<[IoSlice<'_>; 1]> = chunk.iter().map(|(_, b)| [IoSlice::new(b)]).collect();
            let addrs: Vec<Option<SockaddrStorage>> =
                chunk.iter().map(|(a, _)| Some(SockaddrStorage::from(*a))).collect();
            let mut headers: MultiHeaders<SockaddrStorage> = MultiHeaders::preallocate(chunk.len(), None);
            match sendmmsg(self.socket.as_raw_fd(), &mut headers, &slices, &addrs, [], MsgFlags::MSG_DONTWAIT) {
                Ok(results) => sent += results.count(),
                Err(_) => {
                    // Some datagram of the batch failed: send the rest one by one.
                    for (to, bytes) in chunk {
                        sent += usize::from(self.socket.send_to(bytes, to).is_ok());
                    }
                }
            }
        }
        sent
    }
}

/// Asks for a receive buffer of `bytes`: forced past `net.core.rmem_max` where allowed (root),
/// else as much as the limit allows. Best effort: a smaller buffer only risks losses the
/// protocols already handle or report.
fn grow_receive_buffer(socket: &UdpSocket, bytes: usize) {
    use nix::sys::socket::{setsockopt, sockopt};
    if setsockopt(socket, sockopt::RcvBufForce, &bytes).is_err() {
        let _ = setsockopt(socket, sockopt::RcvBuf, &bytes);
    }
}
