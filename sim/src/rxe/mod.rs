//! The project's Linux soft-RoCE (rdma_rxe) peer: a qemu VM running a stock Debian 12 kernel with `rdma_rxe`
//! and the stock rdma-core / perftest tools, whose one Ethernet link ends in this process.
//!
//! ```text
//!  qemu VM (10.0.0.1, rxe0 on eth0)          this process (10.0.0.2, 02:00:00:00:00:02)
//!  virtio-net -netdev stream ──unix socket──> Bridge ──> HostStack ──┬─ ARP / ICMP echo (answered here)
//!           (4-byte BE length + frame)          │ pcap               ├─ TCP -> Mgmt (smoltcp): management path
//!                                               │ seeded drops       └─ UDP 4791 -> inner Endpoint
//!                                                                        (golden model, later the RTL)
//! ```
//!
//! * [`build_vm`] runs `sim/vm/build-vm.sh` (kernel + busybox/rdma-core initramfs from Debian packages; cached,
//!   under a second when up to date) and returns the [`VmImage`].
//! * [`Vm`] boots one VM (TCG by default, about 4 s to `rxe0` ACTIVE) with a script delivered through
//!   `fw_cfg`; the VM prints `=== SCRIPT_EXIT rc=N ===` and powers off; a timeout kills qemu.
//! * [`Bridge`] listens on the unix socket qemu connects to, writes a pcap of every frame in both directions,
//!   can drop frames with a seeded probability per direction, and hands frames to an [`Endpoint`].
//! * [`HostStack`] is the basic host on our side: ARP (golden wire model), ICMP echo, the management TCP stack
//!   and an inner RoCE [`Endpoint`] for UDP port 4791.
//! * [`Session`] ties them together: bridge thread + VM, then [`Session::finish`].
//! * Connection management: [`cm`] (the CM agent on QP1 and its protocol, `CmCore`), the peers of the librdmacm
//!   tools over any endpoint's verbs ([`rping`] both roles, [`cmatose`] both roles, [`udaddy`] both roles), and [`capture`] (two VMs back to back,
//!   real CM traffic to a pcap).
//!
//! # Management path: choice (b), a userspace TCP stack on the same link
//!
//! ibv_rc_pingpong and perftest exchange QPN/PSN/GID (and rkey/VA) over TCP (ports 18515+) before any RDMA
//! traffic. We run **smoltcp** on our side of the one Ethernet link ([`Mgmt`], inside [`HostStack`]) instead
//! of giving the VM a second NIC with qemu user networking:
//! * one NIC per VM, as on a real host: the out-of-band exchange, ARP and RoCE share the wire and all show up
//!   in the pcap (as in the two-VM recipe's captures);
//! * no host networking at all: no hostfwd/guestfwd ports on 127.0.0.1 to allocate, no fixed ports at boot
//!   (qemu's `guestfwd=tcp:` connects once, at start), any number of connections in both directions;
//! * the same stack serves whatever endpoint answers RoCE (golden model or RTL), with the same addresses.
//!
//! Rust code calls [`Mgmt::connect`] (to a listener in the VM; retries until it is up) or [`Mgmt::listen`] +
//! [`TcpListener::accept`] (the VM connects to 10.0.0.2:PORT), then [`TcpConn::send_all`] /
//! [`TcpConn::recv`] / [`TcpConn::recv_to_end`]. Calls block with timeouts and can run from any thread while
//! the bridge thread drives the stack (every 1 ms).
//!
//! Only a unix socket is used on the host; the VM has no other network.

mod bridge;
mod host;
mod mgmt;
mod vm;

pub mod capture;
pub mod card_ep;
pub mod cm;
pub mod cmatose;
pub mod model_ep;
pub mod oob;
pub mod rtl_ep;
pub mod verbs;
pub mod verbs_agent;
pub mod perftest;
pub mod perftest_cm;
pub mod pingpong;
pub mod rping;
pub mod ud;
pub mod udaddy;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

pub use bridge::{
    Bridge, BridgeConfig, BridgeHandle, BridgeReport, BridgeStats, Endpoint, NullEndpoint,
    MAX_FRAME_LEN,
};
pub use host::{is_roce_v2, HostConfig, HostStack, HostStats, IP_PROTO_ICMP};
pub use mgmt::{Mgmt, TcpConn, TcpListener};
pub use smoltcp::socket::tcp::State as TcpState;
pub use vm::{ipv6_prelude, parse_script_rc, Accel, Qmp, Vm, VmConfig, VmOutcome, GID_SCRIPT, LAB_OUR_IP6, LAB_VM_IP, LAB_VM_IP6};

/// Env var: when set, tests that need the VM fail instead of skipping when qemu cannot run.
pub const REQUIRE_VM_ENV: &str = "RNIC_REQUIRE_VM";
/// Env var: directory of a prebuilt image (default `sim/vm/out`).
pub const VM_OUT_ENV: &str = "RNIC_VM_OUT";

/// The VM's kernel and initramfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmImage {
    /// Uncompressed ELF kernel (PVH direct boot).
    pub kernel: PathBuf,
    pub initrd: PathBuf,
}

impl VmImage {
    /// The image in `dir` (`vmlinux`, `initramfs.cpio.gz`).
    pub fn in_dir(dir: impl AsRef<Path>) -> Self {
        let d = dir.as_ref();
        VmImage {
            kernel: d.join("vmlinux"),
            initrd: d.join("initramfs.cpio.gz"),
        }
    }
    pub fn exists(&self) -> bool {
        self.kernel.is_file() && self.initrd.is_file()
    }
}

/// `sim/vm` in this source tree.
pub fn vm_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vm")
}

/// Where the image is built: `$RNIC_VM_OUT` or `sim/vm/out`.
pub fn image_dir() -> PathBuf {
    std::env::var_os(VM_OUT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| vm_dir().join("out"))
}

/// Scratch directory for runs (logs, pcaps, scripts): `sim/vm/work/run/<name>`.
pub fn run_dir(name: &str) -> PathBuf {
    vm_dir().join("work").join("run").join(name)
}

/// A fresh unix socket path in the temp dir (short enough for `sun_path` wherever the tree is).
pub fn temp_socket_path(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    std::env::temp_dir().join(format!("rnic-{tag}-{}-{n}.sock", std::process::id()))
}

/// `qemu-system-x86_64` from `$RNIC_QEMU` or `PATH`.
pub fn qemu_binary() -> Option<PathBuf> {
    if let Some(q) = std::env::var_os("RNIC_QEMU") {
        let q = PathBuf::from(q);
        return q.is_file().then_some(q);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("qemu-system-x86_64"))
        .find(|p| p.is_file())
}

/// Run `sim/vm/build-vm.sh` (installs missing Debian packages when root; cached) and return the image.
pub fn build_vm() -> Result<VmImage> {
    let script = vm_dir().join("build-vm.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("OUT", image_dir())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}):\n{}{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let img = VmImage::in_dir(image_dir());
    if !img.exists() {
        bail!(
            "{} succeeded but {} is missing",
            script.display(),
            img.kernel.display()
        );
    }
    Ok(img)
}

/// Whether a VM can run here: `Ok(Some(image))` when it can, `Ok(None)` when the host cannot run qemu at all
/// (no qemu and the build could not install it) and `$RNIC_REQUIRE_VM` is unset, `Err` otherwise (the
/// build failed although qemu is there, or the VM is required). Tests use this to skip cleanly.
pub fn vm_available() -> Result<Option<VmImage>> {
    match build_vm() {
        Ok(img) if qemu_binary().is_some() => Ok(Some(img)),
        Ok(_) | Err(_) if qemu_binary().is_none() && std::env::var_os(REQUIRE_VM_ENV).is_none() => {
            Ok(None)
        }
        Ok(_) => bail!("qemu-system-x86_64 not found after build-vm.sh"),
        Err(e) => Err(e),
    }
}

/// One VM plus the bridge thread serving its link (and, when paced, the thread that pauses the VM).
pub struct Session<E> {
    pub vm: Vm,
    pub bridge: BridgeHandle<E>,
    pause: Option<LinkPause>,
}

impl<E: Endpoint + Send + 'static> Session<E> {
    /// Listen on `vm_cfg.socket`, start the bridge thread with `endpoint`, then boot the VM.
    pub fn start(vm_cfg: &VmConfig, bridge_cfg: BridgeConfig, endpoint: E) -> Result<Self> {
        Self::start_paced(vm_cfg, bridge_cfg, endpoint, None)
    }

    /// [`Session::start`], and with `backlog` (the frames from the VM that our endpoint has not yet taken)
    /// the link pauses the VM whenever that backlog exceeds [`PAUSE_HIGH_BYTES`], until it is back under
    /// [`PAUSE_LOW_BYTES`] ([`LinkPause`]).
    pub fn start_paced(
        vm_cfg: &VmConfig,
        bridge_cfg: BridgeConfig,
        endpoint: E,
        backlog: Option<Backlog>,
    ) -> Result<Self> {
        let mut vm_cfg = vm_cfg.clone();
        if backlog.is_some() {
            vm_cfg.qmp = Some(vm_cfg.socket.with_extension("qmp"));
        }
        let bridge = Bridge::listen(&vm_cfg.socket, bridge_cfg)?.spawn(endpoint);
        let vm = match Vm::spawn(&vm_cfg) {
            Ok(vm) => vm,
            Err(e) => {
                let _ = bridge.stop_and_join();
                return Err(e);
            }
        };
        let pause = match (backlog, &vm_cfg.qmp) {
            (Some(b), Some(q)) => match LinkPause::start(q, b) {
                Ok(p) => Some(p),
                Err(e) => {
                    drop(vm);
                    let _ = bridge.stop_and_join();
                    return Err(e);
                }
            },
            _ => None,
        };
        Ok(Session { vm, bridge, pause })
    }

    /// Wait for the VM to finish (or time out), then for the bridge to drain and stop.
    pub fn finish(self) -> Result<(VmOutcome, BridgeReport<E>)> {
        let mut outcome = self.vm.wait()?;
        outcome.pause = self.pause.map(LinkPause::stop);
        // qemu has exited, so the socket is at EOF and the bridge ends by itself once it has handled what it
        // read; stop it anyway after a grace period (qemu may never have connected).
        let report = self.bridge.join_within(std::time::Duration::from_secs(2));
        Ok((outcome, report))
    }
}

/// Bytes of frames from the VM waiting for our endpoint at which the link pauses the VM.
pub const PAUSE_HIGH_BYTES: u64 = 32 << 10;
/// Bytes at which a paused VM is resumed.
pub const PAUSE_LOW_BYTES: u64 = 8 << 10;
/// A paused VM is resumed for good when the endpoint has taken nothing for this long.
const PAUSE_STALL: std::time::Duration = std::time::Duration::from_secs(10);
/// How often the pause thread looks at the backlog.
const PAUSE_POLL: std::time::Duration = std::time::Duration::from_micros(200);

/// The frames from the VM that our endpoint has been offered and has not yet taken, in bytes: `offered` is
/// counted as frames are handed to the endpoint, `taken` as they wholly enter it (the RTL's RX MAC).
#[derive(Clone, Debug, Default)]
pub struct Backlog {
    pub offered: Arc<AtomicU64>,
    pub taken: Arc<AtomicU64>,
}

impl Backlog {
    pub fn bytes(&self) -> u64 {
        self.offered.load(Ordering::Relaxed).saturating_sub(self.taken.load(Ordering::Relaxed))
    }
}

/// What the link's pausing did in one run.
#[derive(Clone, Debug, Default)]
pub struct PauseStats {
    /// Times the VM was paused.
    pub pauses: u64,
    /// Wall time it spent paused.
    pub paused: std::time::Duration,
    /// The largest backlog seen, bytes (the high mark plus what the VM sent while being stopped).
    pub max_backlog: u64,
    /// Why pausing ended early (qemu gone, a QMP error), if it did.
    pub error: Option<String>,
}

impl std::fmt::Display for PauseStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VM paused {} times, {:.1} s in all; largest backlog {} B",
            self.pauses,
            self.paused.as_secs_f64(),
            self.max_backlog
        )?;
        match &self.error {
            Some(e) => write!(f, "; stopped pausing: {e}"),
            None => Ok(()),
        }
    }
}

/// Flow control on the VM's link, as a switch port with PFC pauses its sender: when more than
/// [`PAUSE_HIGH_BYTES`] of the VM's frames wait for our endpoint, the VM is stopped (QMP `stop`), and it
/// resumes once they are down to [`PAUSE_LOW_BYTES`].
///
/// Why: the VM runs in wall time and the simulated RNIC thousands of times slower, so without it rxe fills
/// its whole unacknowledged window (128 PSNs) long before the RNIC has worked through the first packets, and
/// every lost packet costs rxe the rest of that window (go-back-N resends all of it), far more than against
/// hardware or the fast golden model. A stopped guest's clock stops too, so rxe's timers do not run while
/// it waits for the RNIC: the two clocks are held together at the granularity of the backlog.
pub struct LinkPause {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<PauseStats>,
}

impl LinkPause {
    /// Connect to the VM's QMP socket and start watching `backlog`.
    pub fn start(qmp: &Path, backlog: Backlog) -> Result<LinkPause> {
        let mut q = Qmp::connect(qmp, std::time::Duration::from_secs(10))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new().name("rxe-link-pause".into()).spawn(move || {
            let mut st = PauseStats::default();
            let mut since: Option<std::time::Instant> = None;
            // the last time the endpoint took anything in, to never hold the VM for an endpoint that stopped
            let (mut taken, mut moved) = (backlog.taken.load(Ordering::Relaxed), std::time::Instant::now());
            while !s2.load(Ordering::SeqCst) {
                let b = backlog.bytes();
                st.max_backlog = st.max_backlog.max(b);
                let t = backlog.taken.load(Ordering::Relaxed);
                if t != taken {
                    (taken, moved) = (t, std::time::Instant::now());
                } else if since.is_some() && moved.elapsed() > PAUSE_STALL {
                    st.error = Some(format!("the endpoint took nothing for {PAUSE_STALL:?} with {b} B waiting"));
                    break;
                }
                let r = match since {
                    None if b > PAUSE_HIGH_BYTES => q.stop().map(|()| {
                        since = Some(std::time::Instant::now());
                        st.pauses += 1;
                    }),
                    Some(t) if b <= PAUSE_LOW_BYTES => q.cont().map(|()| {
                        st.paused += t.elapsed();
                        since = None;
                    }),
                    _ => Ok(()),
                };
                if let Err(e) = r {
                    // qemu exited (the run is over) or QMP failed: stop pausing, never leave the VM held
                    st.error = Some(format!("{e:#}"));
                    break;
                }
                std::thread::sleep(PAUSE_POLL);
            }
            if let Some(t) = since {
                let _ = q.cont();
                st.paused += t.elapsed();
            }
            st
        })?;
        Ok(LinkPause { stop, thread })
    }

    /// Stop watching (resuming the VM if it is paused) and report.
    pub fn stop(self) -> PauseStats {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

/// Boot a VM running `vm_cfg.script` against `endpoint` and wait for it: the one-call form of [`Session`].
pub fn run_vm<E: Endpoint + Send + 'static>(
    vm_cfg: &VmConfig,
    bridge_cfg: BridgeConfig,
    endpoint: E,
) -> Result<(VmOutcome, BridgeReport<E>)> {
    Session::start(vm_cfg, bridge_cfg, endpoint)?.finish()
}
