//! The supervisor's process machinery: start a rack's switches and hosts as child processes
//! (on loopback, or each in its own network namespace: [`crate::netns`]), give them the go
//! once all are ready (see "Starting together" in the crate documentation), inject the crashes
//! asked for (`kill -9` and restart), wait for the hosts to drain, and stop the rest in order.
//!
//! What each process runs is the system's: a [`Launch`] gives the command line of every
//! [`Role`] (the `pisadb` subcommand and its flags) and the names messages use. The
//! supervisor knows processes, signals and files, never a protocol.
//!
//! ## Stopping
//!
//! The children run in their own process group, so a Ctrl-C reaches the supervisor alone. It
//! then stops the rack in order: the hosts first (SIGTERM: they stop starting new work and
//! drain, with the switches still serving them), then the switches. A child whose supervisor
//! dies is sent SIGTERM by the kernel (parent-death signal), and whatever way the supervisor
//! leaves, dropping it kills what still runs (and then removes its namespaces, if it owns
//! them).

use crate::error::{Result, RuntimeError};
use crate::host_proc::{DrainProgress, DrainStatus, DONE_DRAINED, DONE_STALLED, DRAIN_STALL_NS};
use crate::netns::Netns;
use crate::network::Network;
use crate::switch_proc::SwitchReport;
use crate::{
    read_json, stop_requested, unix_now_ns, write_atomically, Go, RackConfig, Role, DONE_FILE, DRAIN_DIR, GO_FILE,
    READY_DIR,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How the processes of a rack are started: the system's part.
pub trait Launch {
    /// The arguments of the `pisadb` binary for `role` in its `life`-th life (0 at first, `n`
    /// after its `n`-th kill: a switch restarted in a new epoch, rebuilt from the hosts' logs).
    fn args(&self, role: Role, life: u16) -> Vec<OsString>;

    /// The process's name in messages (`switch`, `node 2`).
    fn name(&self, role: Role) -> String {
        match role {
            Role::Switch(id) => format!("switch {id}"),
            Role::Host(id) => format!("host {id}"),
        }
    }

    /// What a restart of `role` does beyond starting it again, for the message announcing it
    /// (`, rebuilt from the nodes' logs`).
    fn restart_note(&self, _role: Role) -> String {
        String::new()
    }
}

/// The usual [`Launch`]: every process reads one rack file and writes its report under one data
/// directory — `pisadb switch --config C --id I --report <data>/switch-<I>.json` and
/// `pisadb node --config C --id I --data-dir <data>/host-<I>` ([`ConfigLaunch::host_dir`],
/// [`ConfigLaunch::switch_report`]). A system whose processes need more says so with a
/// [`Launch`] of its own.
#[derive(Clone, Debug)]
pub struct ConfigLaunch {
    /// The rack file every process reads.
    pub config: PathBuf,
    /// Where the processes write their data and reports.
    pub data_dir: PathBuf,
}

impl ConfigLaunch {
    /// Host `id`'s data directory.
    pub fn host_dir(data_dir: &Path, id: u16) -> PathBuf {
        data_dir.join(format!("host-{id}"))
    }

    /// Switch `id`'s report file.
    pub fn switch_report(data_dir: &Path, id: u16) -> PathBuf {
        data_dir.join(format!("switch-{id}.json"))
    }

    /// Starts a rack of `system` on `network` the usual way: writes `<data_dir>/rack.json`
    /// (the `spec`, the network, the rendezvous in `data_dir`; the epoch and stop time come
    /// with the go), then starts every switch and every host of the network from `exe`. The
    /// caller gives the go ([`Supervisor::start_together`]), waits, and reads the reports
    /// ([`ConfigLaunch::host_reports`], [`ConfigLaunch::switch_reports`]).
    pub fn start<S: Clone + Serialize + DeserializeOwned>(
        system: &str,
        spec: S,
        network: Network,
        data_dir: &Path,
        exe: PathBuf,
    ) -> Result<Supervisor<ConfigLaunch>> {
        std::fs::create_dir_all(data_dir).map_err(|e| RuntimeError::io(data_dir, e))?;
        let (switches, hosts) = (network.switches.len() as u16, network.hosts.len() as u16);
        let cfg = RackConfig {
            system: system.to_string(),
            spec,
            network,
            epoch_unix_ns: 0,
            stop_unix_ns: 0,
            durable: false,
            rendezvous: Some(data_dir.to_path_buf()),
        };
        let config = data_dir.join("rack.json");
        cfg.save(&config)?;
        let launch = ConfigLaunch { config, data_dir: data_dir.to_path_buf() };
        let mut supervisor = Supervisor::new(system, exe, launch, data_dir, None);
        (0..switches).try_for_each(|id| supervisor.spawn(Role::Switch(id)))?;
        (0..hosts).try_for_each(|id| supervisor.spawn(Role::Host(id)))?;
        Ok(supervisor)
    }

    /// The `report.json` every one of `hosts` hosts wrote in its data directory, by id.
    pub fn host_reports<R: DeserializeOwned>(data_dir: &Path, hosts: u16) -> Result<Vec<R>> {
        (0..hosts).map(|id| read_json(&Self::host_dir(data_dir, id).join("report.json"))).collect()
    }

    /// The report every one of `switches` switches wrote, by id.
    pub fn switch_reports(data_dir: &Path, switches: u16) -> Result<Vec<SwitchReport>> {
        (0..switches).map(|id| read_json(&Self::switch_report(data_dir, id))).collect()
    }
}

impl Launch for ConfigLaunch {
    fn args(&self, role: Role, _life: u16) -> Vec<OsString> {
        let (command, id, out_flag, out): (&str, u16, &str, PathBuf) = match role {
            Role::Switch(id) => ("switch", id, "--report", Self::switch_report(&self.data_dir, id)),
            Role::Host(id) => ("node", id, "--data-dir", Self::host_dir(&self.data_dir, id)),
        };
        let config: OsString = self.config.clone().into();
        vec![
            command.into(),
            "--config".into(),
            config,
            "--id".into(),
            id.to_string().into(),
            out_flag.into(),
            out.into(),
        ]
    }
}

/// A crash to inject: `kill -9` the process of `role` this many seconds into the run and
/// restart it after `down_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Crash {
    /// The process.
    pub role: Role,
    /// When, in seconds after the start.
    pub at_s: f64,
    /// How long it stays down.
    pub down_s: f64,
}

impl Crash {
    /// The crashes a real-mode run asks for (`--kill-node`, `--kill-switch`), each process down
    /// for the run's `--down`.
    pub fn of_run(run: &pisadb_harness::real::ClusterRun) -> Vec<Crash> {
        use pisadb_harness::real::RealKill;
        let crash = |kill: &RealKill| match *kill {
            RealKill::Node { id, at_s } => Crash { role: Role::Host(id), at_s, down_s: run.down_s },
            RealKill::Switch { id, at_s } => Crash { role: Role::Switch(id), at_s, down_s: run.down_s },
        };
        run.kills.iter().map(crash).collect()
    }
}

/// The processes of a rack and how to start them (see the module documentation).
pub struct Supervisor<L: Launch> {
    /// The system's command lines.
    launch: L,
    /// The `pisadb` binary.
    exe: PathBuf,
    /// Where the processes meet and the hosts report their drain.
    rendezvous: PathBuf,
    /// The network namespaces the processes run in, if any (removed after them).
    namespaces: Option<Netns>,
    /// Running processes (and those that ended but were not yet waited for).
    children: BTreeMap<Role, Child>,
    /// Each role's life: how often it was started before.
    lives: BTreeMap<Role, u16>,
    /// Prefix of the supervisor's messages (`cluster`).
    label: String,
}

impl<L: Launch> Supervisor<L> {
    /// A supervisor of no process yet, starting `exe` as `launch` says; processes meet in
    /// `rendezvous` (stale files of an earlier start there are removed) and run in
    /// `namespaces` if given.
    pub fn new(label: &str, exe: PathBuf, launch: L, rendezvous: &Path, namespaces: Option<Netns>) -> Self {
        // Leftovers of an earlier start in this directory must not start this one.
        let _ = std::fs::remove_dir_all(rendezvous.join(READY_DIR));
        let _ = std::fs::remove_file(rendezvous.join(GO_FILE));
        let _ = std::fs::remove_dir_all(rendezvous.join(DRAIN_DIR));
        let _ = std::fs::remove_file(rendezvous.join(DONE_FILE));
        Supervisor {
            launch,
            exe,
            rendezvous: rendezvous.to_path_buf(),
            namespaces,
            children: BTreeMap::new(),
            lives: BTreeMap::new(),
            label: label.to_string(),
        }
    }

    /// The system's launcher.
    pub fn launch(&self) -> &L {
        &self.launch
    }

    /// The network namespaces the rack runs in, if any.
    pub fn namespaces(&self) -> Option<&Netns> {
        self.namespaces.as_ref()
    }

    /// Starts the process of `role` (its next life if it ran before).
    pub fn spawn(&mut self, role: Role) -> Result<()> {
        let life = self.lives.get(&role).map_or(0, |l| l + 1);
        let args = self.launch.args(role, life);
        let mut cmd = match self.namespaces.as_ref().map(|ns| ns.namespace_of(role)) {
            // `ip netns exec` replaces itself with the program: the child's pid is the
            // program's, so `kill -9` reaches it.
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", &ns]).arg(&self.exe);
                cmd
            }
            None => Command::new(&self.exe),
        };
        cmd.args(args);
        let child = spawn(cmd, &self.launch.name(role))?;
        self.children.insert(role, child);
        self.lives.insert(role, life);
        Ok(())
    }

    /// Waits until every process started so far is ready at the rendezvous, then gives the
    /// go: the rack's time starts in a moment and hosts stop starting new work `seconds`
    /// later.
    pub fn start_together(&mut self, seconds: f64) -> Result<Go> {
        let dir = self.rendezvous.clone();
        let deadline = unix_now_ns() + crate::RENDEZVOUS_TIMEOUT_NS;
        loop {
            if self.children.keys().all(|role| dir.join(READY_DIR).join(role.tag()).exists()) {
                break;
            }
            for (&role, child) in &mut self.children {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(RuntimeError::EndedBeforeStart { process: self.launch.name(role), status });
                }
            }
            if stop_requested() {
                return Err(RuntimeError::StoppedBeforeStart { who: self.label.clone() });
            }
            if unix_now_ns() > deadline {
                return Err(RuntimeError::RendezvousTimeout {
                    who: self.label.clone(),
                    dir: dir.join(READY_DIR),
                    timeout_s: crate::RENDEZVOUS_TIMEOUT_NS / 1_000_000_000,
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // A moment for every process to see the go before the rack's time starts.
        let epoch = unix_now_ns() + 50_000_000;
        let go = Go { epoch_unix_ns: epoch, stop_unix_ns: epoch + (seconds * 1e9) as u64 };
        write_atomically(&dir.join(GO_FILE), &go)?;
        Ok(go)
    }

    /// Injects `crashes` into the rack started at `epoch_unix_ns`, in time order: each is a
    /// `kill -9`, a pause and a restart. Stops early on SIGINT/SIGTERM. Returns the crashes
    /// carried out.
    pub fn inject(&mut self, epoch_unix_ns: u64, crashes: &[Crash]) -> Result<Vec<Crash>> {
        let mut crashes = crashes.to_vec();
        crashes.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        let mut done = Vec::new();
        for crash in crashes {
            sleep_until(epoch_unix_ns + (crash.at_s * 1e9) as u64);
            if stop_requested() {
                break;
            }
            let name = self.launch.name(crash.role);
            eprintln!("{}: kill -9 {name}", self.label);
            self.kill9(crash.role)?;
            std::thread::sleep(Duration::from_secs_f64(crash.down_s));
            eprintln!("{}: restarting {name}{}", self.label, self.launch.restart_note(crash.role));
            self.spawn(crash.role)?;
            done.push(crash);
        }
        Ok(done)
    }

    /// An error if the process of `role` has ended (it was to serve first).
    pub fn check_running(&mut self, role: Role) -> Result<()> {
        let process = self.launch.name(role);
        match self.children.get_mut(&role).map(Child::try_wait) {
            Some(Ok(Some(status))) => Err(RuntimeError::EndedBeforeStart { process, status }),
            Some(Err(source)) => Err(RuntimeError::Signal { process, action: "wait", source }),
            Some(Ok(None)) | None => Ok(()),
        }
    }

    /// Kills the process of `role` (`kill -9`) and waits for it.
    pub fn kill9(&mut self, role: Role) -> Result<()> {
        let name = self.launch.name(role);
        let child = self.children.get_mut(&role).ok_or_else(|| {
            RuntimeError::bad_setting("process to kill", &name, "a process of the rack that was started")
        })?;
        kill9(child, &name)
    }

    /// Waits until every host has ended. On SIGINT/SIGTERM to the supervisor alone (a Ctrl-C
    /// in a terminal reaches the children too) the hosts are asked to stop; the switches keep
    /// serving them while they drain. Once every host reports itself idle with nothing moving,
    /// it tells them they may leave (see "Leaving together" in [`crate::host_proc`]). Returns
    /// when the stop was asked for, if it was.
    pub fn wait_for_hosts(&mut self) -> Result<Option<u64>> {
        self.wait_for_hosts_or(|| false)
    }

    /// [`Supervisor::wait_for_hosts`], and asks the hosts to stop as soon as `done()` says
    /// the rack's work is complete, before its stop time: a run with an end of its own (a
    /// query answered) needs no fixed length.
    pub fn wait_for_hosts_or(&mut self, mut done: impl FnMut() -> bool) -> Result<Option<u64>> {
        let hosts: Vec<Role> = self.children.keys().copied().filter(|r| matches!(r, Role::Host(_))).collect();
        let mut asked = None;
        let mut last_drain = None;
        let (mut progress, mut stalled) = (DrainProgress::default(), false);
        loop {
            let mut running = 0;
            for role in &hosts {
                let child = self.children.get_mut(role).expect("a started host");
                let ended = child.try_wait().map_err(|source| RuntimeError::Signal {
                    process: self.launch.name(*role),
                    action: "wait",
                    source,
                })?;
                match ended {
                    Some(status) if !status.success() => {
                        return Err(RuntimeError::ProcessFailed { process: self.launch.name(*role), status })
                    }
                    Some(_) => {}
                    None => running += 1,
                }
            }
            if running == 0 {
                return Ok(asked);
            }
            // Every host idle, and nothing moved since the last look: they may all leave. Work
            // in flight that stops reaching new lows: the drain has stalled, and they leave.
            let drain = self.drain_statuses(&hosts);
            if let Some(statuses) = &drain {
                if statuses.iter().all(|s| s.idle) && drain == last_drain {
                    let _ = std::fs::write(self.rendezvous.join(DONE_FILE), DONE_DRAINED);
                } else if progress.stalled(unix_now_ns(), statuses.iter().map(|s| s.in_flight).sum()) && !stalled {
                    stalled = true;
                    let left: Vec<String> = hosts
                        .iter()
                        .zip(statuses)
                        .filter(|(_, s)| !s.idle)
                        .map(|(r, s)| format!("{} ({} in flight)", self.launch.name(*r), s.in_flight))
                        .collect();
                    eprintln!(
                        "supervisor: the drain stalled: no new low of the work in flight for {} s; still busy: {}",
                        DRAIN_STALL_NS / 1_000_000_000,
                        left.join(", ")
                    );
                    let _ = std::fs::write(self.rendezvous.join(DONE_FILE), DONE_STALLED);
                }
            }
            last_drain = drain;
            if asked.is_none() && (stop_requested() || done()) {
                asked = Some(unix_now_ns());
                for role in &hosts {
                    let child = self.children.get_mut(role).expect("a started host");
                    // Only a child not yet reaped: a reaped one's pid may belong to another.
                    if matches!(child.try_wait(), Ok(None)) {
                        terminate(child);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every host's last drain report, if every host has made one.
    fn drain_statuses(&self, hosts: &[Role]) -> Option<Vec<DrainStatus>> {
        hosts
            .iter()
            .map(|role| {
                let bytes = std::fs::read(self.rendezvous.join(DRAIN_DIR).join(role.tag())).ok()?;
                serde_json::from_slice(&bytes).ok()
            })
            .collect()
    }

    /// Asks the process of `role` to stop (SIGTERM) and waits for it; an error if it failed.
    pub fn stop(&mut self, role: Role) -> Result<()> {
        let name = self.launch.name(role);
        let Some(child) = self.children.get_mut(&role) else { return Ok(()) };
        terminate(child);
        let status =
            child.wait().map_err(|source| RuntimeError::Signal { process: name.clone(), action: "wait", source })?;
        if !status.success() {
            return Err(RuntimeError::ProcessFailed { process: name, status });
        }
        Ok(())
    }

    /// Stops every switch (after the hosts: see "Stopping" in the module documentation).
    pub fn stop_switches(&mut self) -> Result<()> {
        let switches: Vec<Role> = self.children.keys().copied().filter(|r| matches!(r, Role::Switch(_))).collect();
        switches.into_iter().try_for_each(|role| self.stop(role))
    }
}

impl<L: Launch> Drop for Supervisor<L> {
    fn drop(&mut self) {
        for (role, child) in &mut self.children {
            // A child already waited for is not signalled again (std remembers its status).
            if matches!(child.try_wait(), Ok(None)) {
                let _ = kill9(child, &role.tag());
            }
        }
        // The namespaces go once nothing runs in them: the field drops after this.
    }
}

/// Starts a rack process in its own process group, so a Ctrl-C in the terminal reaches the
/// supervisor alone, which then stops the rack in order (hosts drain while the switches still
/// serve them). A process whose supervisor dies gets SIGTERM and stops cleanly, so none is
/// left behind.
fn spawn(mut cmd: Command, process: &str) -> Result<Child> {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit()).process_group(0);
    // SAFETY: between fork and exec the child only makes one prctl system call, which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).map_err(std::io::Error::from)
        });
    }
    cmd.spawn().map_err(|source| RuntimeError::Spawn { process: process.to_string(), source })
}

fn kill9(child: &mut Child, process: &str) -> Result<()> {
    let error = |action, source| RuntimeError::Signal { process: process.to_string(), action, source };
    child.kill().map_err(|e| error("kill", e))?;
    child.wait().map_err(|e| error("wait", e))?;
    Ok(())
}

/// Sends SIGTERM to a child that still runs (it stops cleanly).
fn terminate(child: &Child) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
}

/// Sleeps until the wall clock reads `unix_ns`, or a stop is requested.
pub fn sleep_until(unix_ns: u64) {
    while !stop_requested() {
        let now = unix_now_ns();
        if now >= unix_ns {
            return;
        }
        std::thread::sleep(Duration::from_nanos((unix_ns - now).min(10_000_000)));
    }
}

/// `n` free UDP ports on loopback (bound, noted and released; nothing else runs here).
pub fn free_ports(n: usize) -> Result<Vec<SocketAddr>> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let sockets = (0..n)
        .map(|_| UdpSocket::bind(loopback).map_err(|source| RuntimeError::Bind { addr: loopback, source }))
        .collect::<Result<Vec<_>>>()?;
    Ok(sockets.iter().map(|s| s.local_addr().expect("a bound socket has an address")).collect())
}
