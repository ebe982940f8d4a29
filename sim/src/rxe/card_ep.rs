//! The card as our endpoint: the driver (`rnic_driver::Driver`) in the application's thread over a register
//! bus and DMA memory, exactly as a program on the card's host runs it, and the tool peers on top.
//!
//! On the card the bus is the BAR mapped through VFIO and the memory is pinned and mapped through the IOMMU
//! (`rnic_driver::vfio`); the card runs by itself. In the lab (`rnic rxe --endpoint board --sim`, and CI) the
//! same [`CardDevice`] runs over the simulated board: the U250 board shell's Verilator model in the RTL
//! thread ([`super::rtl_ep::RtlDevice`]), each register access a call into it ([`super::rtl_ep::ThreadBus`]),
//! its host memory the board model's. Only the two backend types differ.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Result};
use rnic_driver::{CsrBus, DmaMemory, Driver};
use testbench::model::{AccessFlags, Cq, Pd, QpAttr, QpInitAttr, RecvWr, SendWr, WorkCompletion};

use super::verbs::{CmVerbs, Verbs};

/// How the driver waits between polls on this backend (the card: a millisecond).
pub const POLL_PAUSE: Duration = Duration::from_millis(1);

/// The card (or the simulated board behind the same code), driven from the application's thread.
pub struct CardDevice<B: CsrBus + Send, M: DmaMemory> {
    drv: Mutex<Driver<B, M>>,
    mem: Arc<Mutex<M>>,
    /// Told the count of outstanding send WQEs after each post and poll (the simulated board's clock runs
    /// while any are; the card's always runs).
    on_outstanding: Box<dyn Fn(&mut B, u32) + Send + Sync>,
    what: String,
    /// In the lab: the simulated board's inbound backlog, which paces the VM.
    backlog: Option<super::Backlog>,
}

fn e<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> anyhow::Error {
    move |x| anyhow!("{what}: {x}")
}

impl<B: CsrBus + Send, M: DmaMemory> CardDevice<B, M> {
    /// Open the driver on `bus` and `mem`; `what` names the device in reports.
    pub fn open(bus: B, mem: Arc<Mutex<M>>, what: &str, on_outstanding: Box<dyn Fn(&mut B, u32) + Send + Sync>) -> Result<Self> {
        let drv = Driver::open(bus, mem.clone()).map_err(e("opening the RNIC"))?;
        if drv.info.caps & rnic_driver::host::CAP_RC == 0 {
            anyhow::bail!("the RNIC does not advertise RC (CAPS {:#x})", drv.info.caps);
        }
        Ok(CardDevice { drv: Mutex::new(drv), mem, on_outstanding, what: what.to_string(), backlog: None })
    }

    /// The inbound backlog the lab's link paces the VM by (the simulated board's).
    pub fn with_backlog(mut self, b: Option<super::Backlog>) -> Self {
        self.backlog = b;
        self
    }

    fn drv(&self) -> std::sync::MutexGuard<'_, Driver<B, M>> {
        self.drv.lock().unwrap_or_else(|x| x.into_inner())
    }

    fn tell(&self, d: &mut Driver<B, M>) {
        let n = d.send_outstanding();
        (self.on_outstanding)(d.bus(), n);
    }
}

impl<B: CsrBus + Send, M: DmaMemory> CmVerbs for CardDevice<B, M> {
    fn alloc(&self, len: usize) -> Result<u64> {
        self.mem.lock().unwrap_or_else(|x| x.into_inner()).alloc(len).map_err(e("DMA memory"))
    }
    fn write_mem(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.mem.lock().unwrap_or_else(|x| x.into_inner()).write(addr, data).map_err(e("DMA memory"))
    }
    fn read_mem(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        self.mem.lock().unwrap_or_else(|x| x.into_inner()).read(addr, len).map_err(e("DMA memory"))
    }
    fn alloc_pd(&self) -> Result<Pd> {
        Ok(self.drv().alloc_pd())
    }
    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<(u32, u32)> {
        let k = self.drv().reg_mr(pd, addr, len, access).map_err(e("reg_mr"))?;
        Ok((k, k))
    }
    fn create_cq(&self, cqe: u32) -> Result<Cq> {
        self.drv().create_cq(cqe).map_err(e("create_cq"))
    }
    fn create_gsi_qp(&self, pd: Pd, init: QpInitAttr) -> Result<u32> {
        self.drv().create_gsi_qp(pd, init).map_err(e("create_gsi_qp"))
    }
    fn modify_qp(&self, qpn: u32, attr: &QpAttr) -> Result<()> {
        self.drv().modify_qp(qpn, attr).map_err(e("modify_qp"))
    }
    fn post_send(&self, qpn: u32, wr: SendWr) -> Result<()> {
        let mut d = self.drv();
        let r = d.post_send(qpn, &wr).map_err(e("post_send"));
        self.tell(&mut d);
        r
    }
    fn post_recv(&self, qpn: u32, wr: RecvWr) -> Result<()> {
        self.drv().post_recv(qpn, &wr).map_err(e("post_recv"))
    }
    fn poll_cq(&self, cq: Cq, max: usize) -> Result<Vec<WorkCompletion>> {
        let mut d = self.drv();
        let r = d.poll_cq(cq, max).map_err(e("poll_cq"));
        self.tell(&mut d);
        r
    }
    fn resolve(&self, ip: std::net::Ipv4Addr) -> Result<Option<testbench::wire::MacAddr>> {
        let m = self.drv().resolve(ip, &mut || std::thread::sleep(POLL_PAUSE)).map_err(e("ARP"))?;
        Ok(Some(m))
    }
}

impl<B: CsrBus + Send, M: DmaMemory> Verbs for CardDevice<B, M> {
    fn alloc_mw(&self, pd: Pd) -> Result<u32> {
        self.drv().alloc_mw(pd).map_err(e("alloc_mw"))
    }
    fn alloc_mw2(&self, pd: Pd) -> Result<u32> {
        self.drv().alloc_mw2(pd).map_err(e("alloc_mw2"))
    }
    fn bind_mw(&self, qpn: u32, mw: u32, mr: u32, addr: u64, len: u64, access: AccessFlags) -> Result<u32> {
        self.drv().bind_mw(qpn, mw, mr, addr, len, access).map_err(e("bind_mw"))
    }
    fn reg_mr_fast(&self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<(u32, u32)> {
        let k = self.drv().reg_mr_fast(pd, addr, len, access).map_err(e("reg_mr_fast"))?;
        Ok((k, k))
    }
    fn create_qp(&self, pd: Pd, init: QpInitAttr) -> Result<u32> {
        self.drv().create_qp(pd, init).map_err(e("create_qp"))
    }
    fn describe(&self) -> String {
        self.what.clone()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        crate::bringup::stats(self.drv().bus()).unwrap_or_default()
    }
    fn unexpected_drops(&self) -> Vec<(String, u64)> {
        self.counters()
            .into_iter()
            .filter(|(n, v)| *v != 0 && super::rtl_ep::UNEXPECTED.contains(&n.as_str()))
            .collect()
    }
    fn inbound_backlog(&self) -> Option<super::Backlog> {
        self.backlog.clone()
    }
}

/// The exchange with a tool on a remote rxe host: we connect to `peer:port` (our role client) or listen on
/// every address at `port` (our role server), over the host's ordinary network.
pub fn remote_oob(peer: std::net::Ipv4Addr, port: u16) -> super::oob::Oob {
    super::oob::Oob::Net {
        connect: std::net::SocketAddr::from((peer, port)),
        listen: std::net::SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port)),
    }
}

/// The command a user runs on the rxe host against our side: the lab's command with the GID index left to
/// them (the index of the host's RoCE v2 GID of its address on the 100G link) and, when their tool is the
/// client, this host's address on the ordinary network.
pub fn remote_command(vm_command: &str) -> String {
    vm_command.replace("$RNIC_GID", "<GID index of its RoCE v2 IPv4 GID>")
}

/// A perftest tool on a remote rxe host against `dev` (the card): the QP set up, the exchange with `peer`
/// (see [`remote_oob`]), the tool's protocol. `our_ip` is the card's RoCE address (its GID); the peer's GID
/// says its own. `tell` gets the command the user runs on the peer.
pub fn perftest_remote(
    o: &super::perftest::PerftestOpts,
    dev: &super::verbs::Dev,
    our_ip: std::net::Ipv4Addr,
    peer: std::net::Ipv4Addr,
    tell: &mut dyn FnMut(&str),
) -> Result<super::perftest::OurResult> {
    let oob = remote_oob(peer, o.port);
    let side = super::perftest::OurSide::prepare(o, dev, &oob)?;
    tell(&remote_command(&o.vm_command_to("<this host's address>", o.port)));
    let deadline = std::time::Instant::now() + o.timeout;
    let mut r = side.run(o, &oob, our_ip, None, deadline);
    r.endpoint = dev.describe();
    r.endpoint_counters = dev.counters();
    r.unexpected_drops = dev.unexpected_drops();
    Ok(r)
}

/// `ibv_rc_pingpong` (or `ibv_uc_pingpong`, `o.conn`) on a remote rxe host against `dev` (the card), as
/// [`perftest_remote`].
pub fn pingpong_remote(
    o: &super::pingpong::PingpongOpts,
    dev: super::verbs::Dev,
    our_ip: std::net::Ipv4Addr,
    peer: std::net::Ipv4Addr,
    tell: &mut dyn FnMut(&str),
) -> Result<super::pingpong::OurResult> {
    let oob = remote_oob(peer, o.port);
    let listener = match o.role {
        super::pingpong::Role::Server => Some(oob.listen(o.port)?),
        super::pingpong::Role::Client => None,
    };
    let args = format!("-d rxe0 -g <GID index of its RoCE v2 IPv4 GID> -p {} -m {} -s {} -n {} -r {}", o.port, o.mtu, o.size, o.iters, o.rx_depth);
    tell(&match o.role {
        super::pingpong::Role::Server => format!("{} {args} <this host's address>", o.tool()),
        super::pingpong::Role::Client => format!("{} {args}", o.tool()),
    });
    let mut res = super::pingpong::OurResult::default();
    let link = super::pingpong::LinkAddrs {
        vm_ip: None,
        vm_mac: testbench::wire::MacAddr::ZERO,
        our_gid: std::net::IpAddr::V4(our_ip),
    };
    let last = std::sync::atomic::AtomicBool::new(false);
    if let Err(e) = super::pingpong::our_side(o, dev, listener, &oob, link, std::time::Instant::now() + o.timeout, &last, &mut res) {
        res.error = Some(format!("{e:#}"));
    }
    Ok(res)
}
