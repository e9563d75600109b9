//! Several hosts on one machine: the switch and each host in its own Linux network namespace,
//! joined by veth pairs.
//!
//! ## Topology
//!
//! ```text
//!   pisadb-<pid>-n0            pisadb-<pid>-sw                pisadb-<pid>-n1
//!   eth0 10.77.0.2/24 ──veth── n0 10.77.0.1/24
//!                              lo 10.77.255.1 (the switch)
//!                              n1 10.77.1.1/24 ──veth── eth0 10.77.1.2/24
//! ```
//!
//! Each host's namespace has one veth pair to the switch's namespace, a point-to-point wire
//! on its own /24 (`10.77.<host>.0`), and one route: the switch's address `10.77.255.1` via
//! its end of the wire. The switch's namespace forwards nothing (a new namespace has IP
//! forwarding off), so the software switch process is the only way from one host to another,
//! as the top-of-rack switch is in the simulated rack. One switch only: a network of several
//! switch processes runs on loopback. Every process listens on port
//! [`PORT`] of its own namespace. These addresses exist only inside the namespaces: nothing
//! is ever sent anywhere else.
//!
//! ## Lifetime
//!
//! [`Netns::create`] builds everything with `ip` (iproute2, run as root) and the returned
//! value removes it when dropped: after a normal run, an error, or Ctrl-C (the supervisor
//! stops cleanly on SIGINT, so the drop runs). Deleting a namespace deletes its veth ends.
//! Namespaces a killed supervisor left behind carry its pid in their name and are removed by
//! the next `create` once that pid is gone.

use crate::error::{Result, RuntimeError};
use crate::Role;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;

/// The UDP port every process listens on inside its namespace.
pub const PORT: u16 = 7000;
/// The switch's address, on the loopback device of its namespace.
pub const SWITCH_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 255, 1);
/// The most hosts: one /24 of `10.77.0.0/16` each, below the switch's.
pub const MAX_HOSTS: u16 = 250;
const PREFIX: &str = "pisadb-";

/// A rack's network namespaces; removed when dropped.
pub struct Netns {
    /// `pisadb-<pid>`: every namespace's name starts with it.
    tag: String,
    /// Namespaces created so far (the switch's first).
    created: Vec<String>,
    /// Hosts, each in its own namespace.
    hosts: u16,
}

impl Netns {
    /// Creates the switch's namespace and one per host, wired as in the module documentation.
    pub fn create(hosts: u16) -> Result<Self> {
        if hosts == 0 || hosts > MAX_HOSTS {
            return Err(RuntimeError::bad_setting("hosts in network namespaces", hosts, format!("1..={MAX_HOSTS}")));
        }
        remove_stale();
        let mut ns = Netns { tag: format!("{PREFIX}{}", std::process::id()), created: Vec::new(), hosts };
        let sw = ns.switch_ns();
        ns.add(&sw)?;
        ip(&["-n", &sw, "link", "set", "lo", "up"])?;
        ip(&["-n", &sw, "addr", "add", &format!("{SWITCH_IP}/32"), "dev", "lo"])?;
        for id in 0..hosts {
            let host = ns.host_ns(id);
            ns.add(&host)?;
            let port = format!("n{id}");
            let (address, switch_side) = (host_ip(id), Ipv4Addr::new(10, 77, id as u8, 1));
            ip(&["-n", &host, "link", "set", "lo", "up"])?;
            ip(&["link", "add", "eth0", "netns", &host, "type", "veth", "peer", "name", &port, "netns", &sw])?;
            ip(&["-n", &host, "addr", "add", &format!("{address}/24"), "dev", "eth0"])?;
            ip(&["-n", &host, "link", "set", "eth0", "up"])?;
            ip(&["-n", &sw, "addr", "add", &format!("{switch_side}/24"), "dev", &port])?;
            ip(&["-n", &sw, "link", "set", &port, "up"])?;
            ip(&["-n", &host, "route", "add", &format!("{SWITCH_IP}/32"), "via", &switch_side.to_string()])?;
        }
        Ok(ns)
    }

    fn add(&mut self, name: &str) -> Result<()> {
        ip(&["netns", "add", name])?;
        self.created.push(name.to_string());
        Ok(())
    }

    /// The switch's namespace.
    pub fn switch_ns(&self) -> String {
        format!("{}-sw", self.tag)
    }

    /// Host `id`'s namespace.
    pub fn host_ns(&self, id: u16) -> String {
        format!("{}-n{id}", self.tag)
    }

    /// The namespace the process of `role` runs in.
    pub fn namespace_of(&self, role: Role) -> String {
        match role {
            Role::Switch(_) => self.switch_ns(),
            Role::Host(id) => self.host_ns(id),
        }
    }

    /// Every namespace's name, the switch's first.
    pub fn names(&self) -> Vec<String> {
        std::iter::once(self.switch_ns()).chain((0..self.hosts).map(|id| self.host_ns(id))).collect()
    }

    /// The switch's UDP address.
    pub fn switch_addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(SWITCH_IP, PORT))
    }

    /// Each host's UDP address.
    pub fn host_addrs(&self) -> Vec<SocketAddr> {
        (0..self.hosts).map(|id| SocketAddr::V4(SocketAddrV4::new(host_ip(id), PORT))).collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for name in self.created.iter().rev() {
            if let Err(e) = ip(&["netns", "del", name]) {
                eprintln!("cluster: could not remove network namespace {name}: {e}");
            }
        }
    }
}

fn host_ip(id: u16) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, id as u8, 2)
}

/// Runs `ip args…`; the error names the command and what `ip` said.
fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|source| RuntimeError::NoIp { source })?;
    if !out.status.success() {
        return Err(RuntimeError::Ip {
            command: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Removes `pisadb-<pid>-…` namespaces whose supervisor `pid` is gone (killed before it could
/// clean up).
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            eprintln!("cluster: removing network namespace {name} left by a supervisor that is gone");
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Whether this machine can make network namespaces (root and iproute2): creates and removes
/// a probe namespace. The error says why not.
pub fn available() -> Result<()> {
    let probe = format!("{PREFIX}{}-probe", std::process::id());
    ip(&["netns", "add", &probe])?;
    ip(&["netns", "del", &probe])
}
