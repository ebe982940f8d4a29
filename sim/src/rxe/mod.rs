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

pub mod model_ep;
pub mod rtl_ep;
pub mod verbs;
pub mod perftest;
pub mod pingpong;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};

pub use bridge::{
    Bridge, BridgeConfig, BridgeHandle, BridgeReport, BridgeStats, Endpoint, NullEndpoint,
    MAX_FRAME_LEN,
};
pub use host::{is_roce_v2, HostConfig, HostStack, HostStats, IP_PROTO_ICMP};
pub use mgmt::{Mgmt, TcpConn, TcpListener};
pub use smoltcp::socket::tcp::State as TcpState;
pub use vm::{parse_script_rc, Accel, Vm, VmConfig, VmOutcome, GID_SCRIPT};

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

/// One VM plus the bridge thread serving its link.
pub struct Session<E> {
    pub vm: Vm,
    pub bridge: BridgeHandle<E>,
}

impl<E: Endpoint + Send + 'static> Session<E> {
    /// Listen on `vm_cfg.socket`, start the bridge thread with `endpoint`, then boot the VM.
    pub fn start(vm_cfg: &VmConfig, bridge_cfg: BridgeConfig, endpoint: E) -> Result<Self> {
        let bridge = Bridge::listen(&vm_cfg.socket, bridge_cfg)?.spawn(endpoint);
        match Vm::spawn(vm_cfg) {
            Ok(vm) => Ok(Session { vm, bridge }),
            Err(e) => {
                let _ = bridge.stop_and_join();
                Err(e)
            }
        }
    }

    /// Wait for the VM to finish (or time out), then for the bridge to drain and stop.
    pub fn finish(self) -> Result<(VmOutcome, BridgeReport<E>)> {
        let outcome = self.vm.wait()?;
        // qemu has exited, so the socket is at EOF and the bridge ends by itself once it has handled what it
        // read; stop it anyway after a grace period (qemu may never have connected).
        let report = self.bridge.join_within(std::time::Duration::from_secs(2));
        Ok((outcome, report))
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
