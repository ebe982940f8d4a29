//! [`Vm`]: one qemu soft-RoCE VM whose only NIC is a `-netdev stream` client of our unix socket.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use testbench::wire::frame::MacAddr;

use super::VmImage;

/// The in-VM prelude of the tool scripts (`sim/vm/scripts/gid.sh`): sets `RNIC_GID` to the index of rxe0's
/// RoCE v2 GID for eth0's IPv4 address, looked up (and waited for) rather than assumed to be 1.
pub const GID_SCRIPT: &str = include_str!("../../vm/scripts/gid.sh");

/// qemu accelerator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Accel {
    /// Software emulation: works everywhere, about 4 s to boot. The default.
    #[default]
    Tcg,
    /// KVM with `-cpu host,-arch-capabilities`. Unusable on paravirtual nested (`kvm_pvm`) hosts.
    Kvm,
}

/// How to boot one VM.
#[derive(Clone, Debug)]
pub struct VmConfig {
    /// Host name in the VM, and the log's name.
    pub name: String,
    pub image: VmImage,
    /// The unix socket our [`Bridge`](super::Bridge) listens on.
    pub socket: PathBuf,
    /// Directory for `<name>.log` (serial console + qemu's stderr) and `<name>.sh` (the script).
    pub run_dir: PathBuf,
    /// eth0 address and prefix.
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    pub mac: MacAddr,
    /// eth0 MTU (1500 gives RoCE active_mtu 1024; 9000 gives 4096).
    pub mtu: u32,
    /// Shell script run in the VM once rxe0 is ACTIVE; the VM powers off after it. `None`: interactive shell
    /// on the serial console (only useful with a long timeout).
    pub script: Option<String>,
    /// qemu is killed after this long.
    pub timeout: Duration,
    pub accel: Accel,
    pub memory_mb: u32,
    /// qemu's machine protocol (QMP) on this unix socket, for [`Qmp`] (pausing the guest). `None`: no QMP.
    pub qmp: Option<PathBuf>,
    /// A second NIC, eth1, on qemu's user network (the VM at 10.0.2.15, this host's loopback at
    /// [`MGMT_HOST_IP`] from inside): the ordinary network beside the RoCE link, as a real rxe host has, for
    /// the tools' exchange when our side is the card's code path. `Some((host, guest))` forwards
    /// `127.0.0.1:host` here to the VM's `guest` port.
    pub mgmt_net: Option<(u16, u16)>,
    /// The VM's address on the 802.1Q VLAN device `eth0.VID` instead of eth0 (which then has none; rxe0 stays
    /// on eth0 and takes its GIDs from the VLAN device): every RoCE, ARP and ND frame of the VM carries the tag.
    pub vlan: Option<u16>,
    /// The link's socket is this VM's own (qemu listens on it) instead of the bridge's: a second VM connects
    /// to it, two rxe hosts back to back ([`super::capture`]).
    pub stream_server: bool,
    /// qemu writes every frame of the link (both ways) to this pcap (its `filter-dump`).
    pub dump: Option<PathBuf>,
}

/// This host as the VM sees it on the management NIC (qemu user networking maps it to our loopback).
pub const MGMT_HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// The VM's eth0 IPv4 address in the lab (every [`VmConfig`] starts with it; our side is 10.0.0.2).
pub const LAB_VM_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// The VM's eth0 IPv6 address in the lab's RoCEv2-over-IPv6 runs (prefix /64; the VM's IPv4 one stays for the
/// tools' exchange).
pub const LAB_VM_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// Our side's IPv6 address in those runs.
pub const LAB_OUR_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// The lines a tool script puts before [`GID_SCRIPT`] for RoCEv2 over IPv6: the VM's eth0 gets `ip`/64 and
/// the tools its GID (sysfs spells a GID as eight groups of four hex digits).
pub fn ipv6_prelude(ip: Ipv6Addr) -> String {
    let gid: Vec<String> = ip.segments().iter().map(|g| format!("{g:04x}")).collect();
    format!("RNIC_IP6={ip}/64\nRNIC_GID6={}\n", gid.join(":"))
}

impl VmConfig {
    /// VM `name` at 10.0.0.1/24, MAC 52:54:00:00:00:01, MTU 1500, TCG, 512 MB, timeout 60 s.
    pub fn new(
        name: &str,
        image: VmImage,
        socket: impl Into<PathBuf>,
        run_dir: impl Into<PathBuf>,
    ) -> Self {
        VmConfig {
            name: name.to_string(),
            image,
            socket: socket.into(),
            run_dir: run_dir.into(),
            ip: LAB_VM_IP,
            prefix_len: 24,
            mac: MacAddr([0x52, 0x54, 0, 0, 0, 0x01]),
            mtu: 1500,
            script: None,
            timeout: Duration::from_secs(60),
            accel: Accel::Tcg,
            memory_mb: 512,
            qmp: None,
            mgmt_net: None,
            vlan: None,
            stream_server: false,
            dump: None,
        }
    }

    pub fn log_path(&self) -> PathBuf {
        self.run_dir.join(format!("{}.log", self.name))
    }

    /// The qemu command line (without spawning it). Writes the script file.
    pub fn command(&self) -> Result<Command> {
        let qemu = super::qemu_binary()
            .context("qemu-system-x86_64 not found (sim/vm/build-vm.sh installs it)")?;
        let mut c = Command::new(qemu);
        match self.accel {
            Accel::Tcg => c.args(["-accel", "tcg", "-cpu", "max"]),
            Accel::Kvm => c.args(["-accel", "kvm", "-cpu", "host,-arch-capabilities"]),
        };
        c.args(["-m", &self.memory_mb.to_string(), "-smp", "1"]);
        c.args([
            "-display",
            "none",
            "-no-reboot",
            "-nodefaults",
            "-monitor",
            "none",
            "-serial",
            "stdio",
        ]);
        if let Some(q) = &self.qmp {
            c.arg("-qmp").arg(format!("unix:{},server=on,wait=off", q.display()));
        }
        c.arg("-kernel").arg(&self.image.kernel);
        c.arg("-initrd").arg(&self.image.initrd);
        c.arg("-append").arg(format!(
            "console=ttyS0 panic=-1 loglevel=4 rnic.ip={}/{} rnic.mtu={} rnic.name={}{}",
            self.ip,
            self.prefix_len,
            self.mtu,
            self.name,
            self.vlan.map_or(String::new(), |v| format!(" rnic.vlan={v}"))
        ));
        c.arg("-netdev").arg(format!(
            "stream,id=n0,server={},addr.type=unix,addr.path={}",
            if self.stream_server { "on" } else { "off" },
            self.socket.display()
        ));
        if let Some(d) = &self.dump {
            c.arg("-object").arg(format!("filter-dump,id=d0,netdev=n0,file={}", d.display()));
        }
        c.arg("-device").arg(format!(
            "virtio-net-pci,netdev=n0,mac={},romfile=",
            self.mac
        ));
        if let Some((host, guest)) = self.mgmt_net {
            c.arg("-netdev").arg(format!("user,id=m0,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:{host}-:{guest}"));
            c.arg("-device").arg("virtio-net-pci,netdev=m0,mac=52:54:00:00:02:0f,romfile=");
        }
        if let Some(script) = &self.script {
            std::fs::create_dir_all(&self.run_dir)?;
            let p = self.run_dir.join(format!("{}.sh", self.name));
            std::fs::write(&p, script).with_context(|| format!("writing {}", p.display()))?;
            c.arg("-fw_cfg")
                .arg(format!("name=opt/rnic/script,file={}", p.display()));
        }
        Ok(c)
    }
}

/// A running VM. Dropping it kills qemu.
pub struct Vm {
    child: Option<Child>,
    log: PathBuf,
    started: Instant,
    deadline: Instant,
    timeout: Duration,
}

/// How a VM run ended.
#[derive(Debug)]
pub struct VmOutcome {
    /// The script's exit status from the `SCRIPT_EXIT rc=N` line, if the script finished.
    pub script_rc: Option<i32>,
    /// qemu was killed by the timeout.
    pub timed_out: bool,
    /// qemu's own exit status (`None` if killed).
    pub qemu_status: Option<ExitStatus>,
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// Guest uptime when rxe0 was ACTIVE (from `RNIC_READY ... uptime=`).
    pub ready_uptime_s: Option<f64>,
    /// The serial console (and qemu's stderr), carriage returns removed.
    pub log: String,
    /// How the link paused the VM, when it did ([`super::Session::start_paced`]).
    pub pause: Option<super::PauseStats>,
    pub log_path: PathBuf,
}

impl VmOutcome {
    /// The script ran to the end with exit status 0.
    pub fn ok(&self) -> bool {
        self.script_rc == Some(0) && !self.timed_out
    }

    /// A short diagnostic: the last `n` lines of the log.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// The `N` of the last `SCRIPT_EXIT rc=N` marker in a console log.
pub fn parse_script_rc(log: &str) -> Option<i32> {
    log.lines().rev().find_map(|l| {
        let i = l.find("SCRIPT_EXIT rc=")?;
        let rest = &l[i + "SCRIPT_EXIT rc=".len()..];
        let end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '-')
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    })
}

fn parse_ready_uptime(log: &str) -> Option<f64> {
    log.lines().find_map(|l| {
        let i = l.find("RNIC_READY")?;
        let u = l[i..]
            .split_whitespace()
            .find_map(|w| w.strip_prefix("uptime="))?;
        u.parse().ok()
    })
}

impl Vm {
    /// Start qemu. The bridge must already be listening on `cfg.socket`.
    pub fn spawn(cfg: &VmConfig) -> Result<Vm> {
        if !cfg.image.kernel.exists() || !cfg.image.initrd.exists() {
            bail!(
                "VM image missing ({}); run sim/vm/build-vm.sh",
                cfg.image.kernel.display()
            );
        }
        std::fs::create_dir_all(&cfg.run_dir)?;
        let log = cfg.log_path();
        let f =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut c = cfg.command()?;
        c.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
        let child = c.spawn().context("starting qemu")?;
        let started = Instant::now();
        Ok(Vm {
            child: Some(child),
            log,
            started,
            deadline: started + cfg.timeout,
            timeout: cfg.timeout,
        })
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The console log so far.
    pub fn log(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).replace('\r', ""))
            .unwrap_or_default()
    }

    /// qemu's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Wait until the log contains `needle` (true), qemu exits or `timeout` passes (false).
    pub fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = (Instant::now() + timeout).min(self.deadline);
        loop {
            if self.log().contains(needle) {
                return true;
            }
            let exited = matches!(
                self.child.as_mut().map(|c| c.try_wait()),
                Some(Ok(Some(_))) | None
            );
            if exited || Instant::now() > deadline {
                return self.log().contains(needle);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill qemu now.
    pub fn kill(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Wait for qemu to exit (the script powers the VM off), killing it at the timeout.
    pub fn wait(mut self) -> Result<VmOutcome> {
        let mut child = self.child.take().expect("child present");
        let mut timed_out = false;
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break Some(s);
            }
            if Instant::now() > self.deadline {
                timed_out = true;
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let wall = self.started.elapsed();
        let log = self.log();
        let mut log_text = log;
        if timed_out {
            log_text.push_str(&format!(
                "\n[rnic] qemu killed after the {:?} timeout\n",
                self.timeout
            ));
            let _ = std::fs::write(&self.log, &log_text);
        }
        Ok(VmOutcome {
            script_rc: parse_script_rc(&log_text),
            timed_out,
            qemu_status: status,
            wall,
            ready_uptime_s: parse_ready_uptime(&log_text),
            log: log_text,
            log_path: self.log.clone(),
            pause: None,
        })
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_markers() {
        let log = "x\n=== RNIC_READY name=a ip=10.0.0.1/24 mtu=1500 uptime=3.71 ===\n...\n=== SCRIPT_EXIT rc=3 ===\n";
        assert_eq!(parse_script_rc(log), Some(3));
        assert_eq!(parse_ready_uptime(log), Some(3.71));
        assert_eq!(parse_script_rc("no marker"), None);
    }
}

/// The part of qemu's machine protocol (QMP, JSON lines on a unix socket) the link needs: pause and resume
/// the guest. A stopped guest's clocks stop with it (under TCG the virtual clock and the TSC derived from it;
/// under KVM, kvmclock is saved on stop and restored on resume), so its timers do not run while it is held.
pub struct Qmp {
    r: BufReader<UnixStream>,
    w: UnixStream,
}

impl Qmp {
    /// Connect to `path` (retrying until qemu has created it, for up to `within`) and leave capabilities
    /// negotiation mode.
    pub fn connect(path: &Path, within: Duration) -> Result<Qmp> {
        let deadline = Instant::now() + within;
        let s = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(e).with_context(|| format!("connecting to qemu's QMP socket {}", path.display()))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut q = Qmp { r: BufReader::new(s.try_clone()?), w: s };
        let mut greeting = String::new();
        q.r.read_line(&mut greeting).context("reading qemu's QMP greeting")?;
        if !greeting.contains("\"QMP\"") {
            bail!("not a QMP greeting: {}", greeting.trim());
        }
        q.execute("qmp_capabilities")?;
        Ok(q)
    }

    /// Run one argument-less command and wait for its answer (events in between are skipped).
    pub fn execute(&mut self, command: &str) -> Result<()> {
        writeln!(self.w, "{{\"execute\":\"{command}\"}}").with_context(|| format!("QMP {command}"))?;
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).with_context(|| format!("QMP {command}"))? == 0 {
                bail!("qemu closed its QMP socket during {command}");
            }
            if line.contains("\"return\"") {
                return Ok(());
            }
            if line.contains("\"error\"") {
                bail!("QMP {command}: {}", line.trim());
            }
        }
    }

    /// Pause the guest (returns once its vCPUs have stopped).
    pub fn stop(&mut self) -> Result<()> {
        self.execute("stop")
    }

    /// Resume the guest.
    pub fn cont(&mut self) -> Result<()> {
        self.execute("cont")
    }
}
