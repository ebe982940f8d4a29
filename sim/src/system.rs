//! The whole RNIC as a Verilator model in a simulated system: the driver (`rnic_driver`) on the register
//! slave, host memory with PCIe latency behind the DMA ports (`testbench::mac::DmaHost`), and a 100G link with
//! MAC pacing (`testbench::mac::MacLink`, one per direction, each with a pcap) to a peer: the golden model
//! (`testbench::model::Device`), which plays rxe.
//!
//! One `System::step` is one core clock cycle of everything. The driver's register accesses run the
//! AXI4-Lite handshakes cycle by cycle through [`SimBus`], so posting a WQE costs the cycles it would cost.
//!
//! The RNIC is any [`RnicDut`]: the Verilator model (the default), the rust-hdl model in its own simulator
//! ([`RustHdlRnic`]), or both on the same stimulus ([`Lockstep`], every output compared every cycle). Host
//! memory answers 500 ns after a read (`DmaHost`'s default). [`System::pair`] puts two RNICs on one link, each
//! step stepping both; a detached system ([`System::new_detached`]) has no golden peer and takes its frames
//! from [`System::inject`], as the rxe bridge does. Timing taps (`tx_first_beats`, `rx_last_beats`,
//! `dma_write_starts`) give latencies; [`CqeOrder`] checks that no payload lands after its CQE.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::vmodels::rnic::Rnic as VRnic;
use crate::vmodels::rnic_ref::RnicRef as VRnicRef;
use crate::Clocked;
use rnic_driver::{CsrBus, Driver, DriverError};
use rnic_driver::host::CAP_RC;
use testbench::mac::{DmaHost, DmaRead, MacLink, CORE_HZ};
use testbench::model::*;
use testbench::wire::frame::MacAddr;

/// The RNIC's inputs in one cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RnicIn {
    pub awvalid: bool,
    pub awaddr: u32,
    pub wvalid: bool,
    pub wdata: u32,
    pub bready: bool,
    pub arvalid: bool,
    pub araddr: u32,
    pub rready: bool,
    pub rd_req_ready: bool,
    pub rd_resp_valid: bool,
    pub rd_resp_data: [u32; 16],
    pub rd_resp_tag: u8,
    pub rd_resp_last: bool,
    pub wr_ready: bool,
    pub m_axis_tready: bool,
    pub s_axis_tvalid: bool,
    pub s_axis_tdata: [u32; 16],
    pub s_axis_tkeep: u64,
    pub s_axis_tlast: bool,
    /// The MAC's error flag, with the last beat (a bad FCS).
    pub s_axis_tuser: bool,
}

/// The RNIC's outputs in one cycle (after the inputs settled).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RnicOut {
    pub awready: bool,
    pub wready: bool,
    pub bvalid: bool,
    pub bresp: u8,
    pub arready: bool,
    pub rvalid: bool,
    pub rdata: u32,
    pub rresp: u8,
    pub rd_req_valid: bool,
    pub rd_req_addr: u64,
    pub rd_req_len: u32,
    pub rd_req_tag: u8,
    pub rd_resp_ready: bool,
    pub wr_valid: bool,
    pub wr_addr: u64,
    pub wr_data: [u32; 16],
    pub wr_strb: u64,
    pub wr_last: bool,
    pub m_axis_tvalid: bool,
    pub m_axis_tdata: [u32; 16],
    pub m_axis_tkeep: u64,
    pub m_axis_tlast: bool,
    pub s_axis_tready: bool,
}

/// One RNIC implementation: the Verilator model, rust-hdl's simulator, or both in lockstep.
pub trait RnicDut {
    /// Set the inputs with the clock low and return the settled outputs.
    fn drive(&mut self, i: &RnicIn) -> RnicOut;
    /// Rising edge.
    fn tick(&mut self);
    /// Start a VCD of every signal now (where the implementation can), and stop sampling it.
    fn start_trace(&mut self, _path: &str) {}
    fn stop_trace(&mut self) {}
}

/// An implementation chosen at run time (the bare core or the board shell: the rxe lab, the bench).
pub type AnyDut = Box<dyn RnicDut>;

/// The RNIC's ports on a Verilator model of the whole top (today's, or the reference top of `sim/ref/`: the
/// same port list).
macro_rules! verilator_rnic_dut {
    ($t:ty) => {
        impl RnicDut for Clocked<$t> {
            fn drive(&mut self, i: &RnicIn) -> RnicOut {
                let m = &mut self.m;
                m.set_awvalid(i.awvalid as u64);
                m.set_awaddr(u64::from(i.awaddr));
                m.set_wvalid(i.wvalid as u64);
                m.set_wdata(u64::from(i.wdata));
                m.set_wstrb(0xF);
                m.set_bready(i.bready as u64);
                m.set_arvalid(i.arvalid as u64);
                m.set_araddr(u64::from(i.araddr));
                m.set_rready(i.rready as u64);
                m.set_rd_req_ready(i.rd_req_ready as u64);
                m.set_rd_resp_valid(i.rd_resp_valid as u64);
                m.set_rd_resp_data(&i.rd_resp_data);
                m.set_rd_resp_tag(u64::from(i.rd_resp_tag));
                m.set_rd_resp_last(i.rd_resp_last as u64);
                m.set_wr_ready(i.wr_ready as u64);
                m.set_m_axis_tready(i.m_axis_tready as u64);
                m.set_s_axis_tvalid(i.s_axis_tvalid as u64);
                m.set_s_axis_tdata(&i.s_axis_tdata);
                m.set_s_axis_tkeep(i.s_axis_tkeep);
                m.set_s_axis_tlast(i.s_axis_tlast as u64);
                m.set_s_axis_tuser(i.s_axis_tuser as u64);
                self.settle();
                let m = &self.m;
                RnicOut {
                    awready: m.awready() != 0,
                    wready: m.wready() != 0,
                    bvalid: m.bvalid() != 0,
                    bresp: m.bresp() as u8,
                    arready: m.arready() != 0,
                    rvalid: m.rvalid() != 0,
                    rdata: m.rdata() as u32,
                    rresp: m.rresp() as u8,
                    rd_req_valid: m.rd_req_valid() != 0,
                    rd_req_addr: m.rd_req_addr(),
                    rd_req_len: m.rd_req_len() as u32,
                    rd_req_tag: m.rd_req_tag() as u8,
                    rd_resp_ready: m.rd_resp_ready() != 0,
                    wr_valid: m.wr_valid() != 0,
                    wr_addr: m.wr_addr(),
                    wr_data: m.wr_data(),
                    wr_strb: m.wr_strb(),
                    wr_last: m.wr_last() != 0,
                    m_axis_tvalid: m.m_axis_tvalid() != 0,
                    m_axis_tdata: m.m_axis_tdata(),
                    m_axis_tkeep: m.m_axis_tkeep(),
                    m_axis_tlast: m.m_axis_tlast() != 0,
                    s_axis_tready: m.s_axis_tready() != 0,
                }
            }
            fn tick(&mut self) {
                Clocked::tick(self)
            }
            fn start_trace(&mut self, path: &str) {
                Clocked::start_trace(self, path)
            }
            fn stop_trace(&mut self) {
                Clocked::stop_trace(self)
            }
        }
    };
}

verilator_rnic_dut!(VRnic);
verilator_rnic_dut!(VRnicRef);

/// The rust-hdl model of the same top, in rust-hdl's own simulator (direct drive).
pub struct RustHdlRnic(Box<rtl::rnic::Rnic>);

impl Default for RustHdlRnic {
    fn default() -> Self {
        use rust_hdl::prelude::Block;
        let mut u = Box::<rtl::rnic::Rnic>::default();
        u.connect_all();
        RustHdlRnic(u)
    }
}

fn b512(w: &[u32; 16]) -> rust_hdl::prelude::Bits<512> {
    let mut b = rust_hdl::prelude::Bits::<512>::default();
    for (i, x) in w.iter().enumerate() {
        b.set_bits::<32>(32 * i, rust_hdl::prelude::bits::<32>(u64::from(*x)));
    }
    b
}
fn w512(b: rust_hdl::prelude::Bits<512>) -> [u32; 16] {
    std::array::from_fn(|i| b.get_bits::<32>(32 * i).to_u32())
}

impl RnicDut for RustHdlRnic {
    fn drive(&mut self, i: &RnicIn) -> RnicOut {
        use rust_hdl::prelude::*;
        let u = &mut *self.0;
        u.awvalid.next = i.awvalid;
        u.awaddr.next = bits(u64::from(i.awaddr));
        u.wvalid.next = i.wvalid;
        u.wdata.next = bits(u64::from(i.wdata));
        u.wstrb.next = bits(0xF);
        u.bready.next = i.bready;
        u.arvalid.next = i.arvalid;
        u.araddr.next = bits(u64::from(i.araddr));
        u.rready.next = i.rready;
        u.rd_req_ready.next = i.rd_req_ready;
        u.rd_resp_valid.next = i.rd_resp_valid;
        u.rd_resp_data.next = b512(&i.rd_resp_data);
        u.rd_resp_tag.next = bits(u64::from(i.rd_resp_tag));
        u.rd_resp_last.next = i.rd_resp_last;
        u.wr_ready.next = i.wr_ready;
        u.m_axis.tready.next = i.m_axis_tready;
        u.s_axis.tvalid.next = i.s_axis_tvalid;
        u.s_axis.tdata.next = b512(&i.s_axis_tdata);
        u.s_axis.tkeep.next = bits(i.s_axis_tkeep);
        u.s_axis.tlast.next = i.s_axis_tlast;
        u.s_axis_tuser.next = i.s_axis_tuser;
        u.clock.next = false.into();
        assert!(simulate(u, 2000), "rust-hdl simulation of the RNIC did not settle");
        RnicOut {
            awready: u.awready.val(),
            wready: u.wready.val(),
            bvalid: u.bvalid.val(),
            bresp: u.bresp.val().to_u64() as u8,
            arready: u.arready.val(),
            rvalid: u.rvalid.val(),
            rdata: u.rdata.val().to_u32(),
            rresp: u.rresp.val().to_u64() as u8,
            rd_req_valid: u.rd_req_valid.val(),
            rd_req_addr: u.rd_req_addr.val().to_u64(),
            rd_req_len: u.rd_req_len.val().to_u64() as u32,
            rd_req_tag: u.rd_req_tag.val().to_u64() as u8,
            rd_resp_ready: u.rd_resp_ready.val(),
            wr_valid: u.wr_valid.val(),
            wr_addr: u.wr_addr.val().to_u64(),
            wr_data: w512(u.wr_data.val()),
            wr_strb: u.wr_strb.val().to_u64(),
            wr_last: u.wr_last.val(),
            m_axis_tvalid: u.m_axis.tvalid.val(),
            m_axis_tdata: w512(u.m_axis.tdata.val()),
            m_axis_tkeep: u.m_axis.tkeep.val().to_u64(),
            m_axis_tlast: u.m_axis.tlast.val(),
            s_axis_tready: u.s_axis.tready.val(),
        }
    }
    fn tick(&mut self) {
        use rust_hdl::prelude::*;
        self.0.clock.next = true.into();
        assert!(simulate(&mut *self.0, 2000), "rust-hdl simulation of the RNIC did not settle");
    }
}

/// Both simulators on the same stimulus: every output compared every cycle; the first difference panics
/// with the cycle number and both outputs.
pub struct Lockstep {
    pub v: Clocked<VRnic>,
    pub r: RustHdlRnic,
    pub cycle: u64,
}

impl Default for Lockstep {
    fn default() -> Self {
        Lockstep { v: Clocked::new(None), r: RustHdlRnic::default(), cycle: 0 }
    }
}

impl RnicDut for Lockstep {
    fn drive(&mut self, i: &RnicIn) -> RnicOut {
        let a = self.v.drive(i);
        let b = self.r.drive(i);
        assert_eq!(a, b, "cycle {}: Verilator (left) and rust-hdl (right) differ on the same inputs", self.cycle);
        a
    }
    fn tick(&mut self) {
        self.v.tick();
        self.r.tick();
        self.cycle += 1;
    }
}

/// Register-slave inputs held across cycles by the bus.
#[derive(Clone, Copy, Default)]
struct CsrIn {
    awvalid: bool,
    awaddr: u32,
    wvalid: bool,
    wdata: u32,
    bready: bool,
    arvalid: bool,
    araddr: u32,
    rready: bool,
}

/// Register-slave outputs seen in the last step.
#[derive(Clone, Copy, Default)]
struct CsrOut {
    awready: bool,
    wready: bool,
    bvalid: bool,
    bresp: u8,
    arready: bool,
    rvalid: bool,
    rdata: u32,
    rresp: u8,
}

pub struct System<D: RnicDut = Clocked<VRnic>> {
    pub rnic: D,
    pub dma: DmaHost,
    /// RNIC to peer, and peer to RNIC.
    pub out: MacLink,
    pub inl: MacLink,
    pub peer: Device,
    pub cycle: u64,
    csr_in: CsrIn,
    csr_out: CsrOut,
    /// Frame being received from the RNIC, and frames the peer is sending to it (with the beat offset).
    rx_frame: Vec<u8>,
    to_rnic: VecDeque<(Vec<u8>, usize)>,
    /// Every frame the RNIC sent, in order (drained to the partner when paired).
    pub sent: Vec<Vec<u8>>,
    /// Frames the RNIC sent, and their bytes (kept when `sent` is drained).
    pub frames_out: u64,
    pub bytes_out: u64,
    /// With `timing` on: the cycle of each frame's first beat out of the RNIC's MAC port, of each frame's last
    /// beat into it, and of each DMA write beat that follows an idle cycle (latency measurements).
    pub timing: bool,
    pub tx_first_beats: Vec<u64>,
    pub rx_last_beats: Vec<u64>,
    pub dma_write_starts: Vec<u64>,
    tx_in_frame: bool,
    wr_prev: bool,
    /// Frames the peer sent to the RNIC.
    pub received: Vec<Vec<u8>>,
    /// Bytes of frames that have wholly entered the RNIC's RX MAC, counted as they do (also while a driver
    /// call steps the system); shared with whoever watches the inbound backlog.
    pub taken_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// No golden peer: frames from the RNIC are only collected in `sent`, frames to it come from
    /// [`System::inject`] (the rxe bridge drives the other end).
    pub detached: bool,
    /// The last cycle anything moved at a port (CSR, DMA, MAC) or was queued for the RNIC: with no timers in
    /// the RTL, a design quiet for a while stays quiet until new input.
    pub last_activity: u64,
    /// The other RNIC on this one's link ([`System::pair`]): each step steps both, frames cross over.
    partner: Option<std::rc::Weak<RefCell<System<D>>>>,
    /// Targeted loss for the rule tests: a frame from the RNIC reaches the golden peer only if this returns
    /// true (the TX pcap and `sent` still show it: the tap is before the loss).
    pub to_peer_filter: Option<FrameFilter>,
    /// The same for the golden peer's frames to the RNIC (a dropped one never enters the link or its pcap).
    pub to_rnic_filter: Option<FrameFilter>,
    /// Checks, on every DMA write, that no payload lands in a watched buffer after its CQE (see [`CqeOrder`]).
    pub cqe_order: CqeOrder,
}

/// A monitor of the host-visible ordering between a completion and its data: once the CQE of a watched work
/// request is written to a CQ ring, no DMA write may touch that request's buffer (the driver may hand the
/// buffer to the application as soon as it sees the CQE; over PCIe, posted writes arrive in order).
#[derive(Clone, Debug, Default)]
pub struct CqeOrder {
    /// CQ rings: base and size in bytes (`Driver::cq_ring`).
    pub rings: Vec<(u64, u64)>,
    /// Work requests to watch: wr_id -> their buffer (address, length).
    pub watch: std::collections::HashMap<u64, (u64, u64)>,
    /// Watched requests whose CQE was written: (wr_id, address, length, cycle of the CQE write).
    completed: Vec<(u64, u64, u64, u64)>,
    /// Every payload write after its CQE: one line each.
    pub violations: Vec<String>,
    /// CQEs of watched requests seen.
    pub cqes_seen: u64,
}

impl CqeOrder {
    fn beat(&mut self, c: u64, addr: u64, data: &[u8], strb: u64) {
        if strb == 0 {
            return;
        }
        if self.rings.iter().any(|&(b, n)| addr >= b && addr < b + n) {
            // CQEs are 32 bytes, two per beat: bytes 0..8 of each written half are its wr_id
            for half in 0..2 {
                if (strb >> (32 * half)) & 0xFFFF_FFFF == 0 {
                    continue;
                }
                let wr_id = u64::from_le_bytes(data[32 * half..32 * half + 8].try_into().unwrap());
                if let Some((a, n)) = self.watch.remove(&wr_id) {
                    self.cqes_seen += 1;
                    self.completed.push((wr_id, a, n, c));
                }
            }
            return;
        }
        let lo = addr + u64::from(strb.trailing_zeros());
        let hi = addr + 64 - u64::from(strb.leading_zeros());
        for &(wr_id, a, n, at) in &self.completed {
            if lo < a + n && a < hi {
                self.violations.push(format!(
                    "cycle {c}: a DMA write to {lo:#x}..{hi:#x} lands in wr_id {wr_id}'s buffer {a:#x}+{n} {} cycles after its CQE",
                    c - at
                ));
            }
        }
        // a completed buffer stays watched for 100,000 cycles (a write that late is no longer this message's)
        self.completed.retain(|x| c - x.3 < 100_000);
    }
}

/// A frame filter: `true` delivers the frame.
pub type FrameFilter = Box<dyn FnMut(&[u8]) -> bool>;

impl System<Clocked<VRnic>> {
    /// The Verilator model; `pcap_dir`: where `rnic-tx.pcap` and `rnic-rx.pcap` go.
    pub fn new(mem: Arc<Mutex<HostMemory>>, peer: Device, pcap_dir: Option<&Path>, vcd: Option<&str>) -> std::io::Result<Self> {
        Self::with_dut(Clocked::new(vcd), mem, peer, pcap_dir)
    }
}

impl System<Clocked<VRnic>> {
    /// The Verilator model with no golden peer ([`System::detached`]): frames to it come from
    /// [`System::inject`], paced at `inbound_gbps` of simulated time (a peer that is not itself simulated
    /// cycle by cycle, like the rxe VM, would otherwise deliver everything it queued at once).
    pub fn new_detached(mem: Arc<Mutex<HostMemory>>, pcap_dir: Option<&Path>, inbound_gbps: f64) -> std::io::Result<Self> {
        let mut s = Self::with_links(Clocked::new(None), mem, Device::new(DeviceConfig::simple(9)), pcap_dir, inbound_gbps)?;
        s.detached = true;
        Ok(s)
    }
}

/// Any implementation, chosen at run time (the rxe endpoint: the bare core or the board shell).
impl RnicDut for Box<dyn RnicDut> {
    fn drive(&mut self, i: &RnicIn) -> RnicOut {
        (**self).drive(i)
    }
    fn tick(&mut self) {
        (**self).tick()
    }
    fn start_trace(&mut self, path: &str) {
        (**self).start_trace(path)
    }
    fn stop_trace(&mut self) {
        (**self).stop_trace()
    }
}

impl<D: RnicDut> System<D> {
    /// [`System::new_detached`] with any implementation of the RNIC.
    pub fn detached_with(rnic: D, mem: Arc<Mutex<HostMemory>>, pcap_dir: Option<&Path>, inbound_gbps: f64) -> std::io::Result<Self> {
        let mut s = Self::with_links(rnic, mem, Device::new(DeviceConfig::simple(9)), pcap_dir, inbound_gbps)?;
        s.detached = true;
        Ok(s)
    }

    /// Any implementation of the RNIC.
    pub fn with_dut(rnic: D, mem: Arc<Mutex<HostMemory>>, peer: Device, pcap_dir: Option<&Path>) -> std::io::Result<Self> {
        Self::with_links(rnic, mem, peer, pcap_dir, 100.0)
    }

    fn with_links(rnic: D, mem: Arc<Mutex<HostMemory>>, peer: Device, pcap_dir: Option<&Path>, inbound_gbps: f64) -> std::io::Result<Self> {
        let mut out = MacLink::new(100.0, CORE_HZ, 100);
        let mut inl = MacLink::new(inbound_gbps, CORE_HZ, 100);
        if let Some(d) = pcap_dir {
            std::fs::create_dir_all(d)?;
            out = out.with_pcap(Box::new(std::fs::File::create(d.join("rnic-tx.pcap"))?))?;
            inl = inl.with_pcap(Box::new(std::fs::File::create(d.join("rnic-rx.pcap"))?))?;
        }
        Ok(System {
            rnic,
            dma: DmaHost::new(mem, CORE_HZ),
            out,
            inl,
            peer,
            cycle: 0,
            csr_in: CsrIn::default(),
            csr_out: CsrOut::default(),
            rx_frame: Vec::new(),
            to_rnic: VecDeque::new(),
            sent: Vec::new(),
            received: Vec::new(),
            taken_bytes: Default::default(),
            detached: false,
            last_activity: 0,
            partner: None,
            frames_out: 0,
            bytes_out: 0,
            timing: false,
            tx_first_beats: Vec::new(),
            rx_last_beats: Vec::new(),
            dma_write_starts: Vec::new(),
            tx_in_frame: false,
            wr_prev: false,
            to_peer_filter: None,
            to_rnic_filter: None,
            cqe_order: CqeOrder::default(),
        })
    }

    fn now_ns(&self) -> u64 {
        (self.cycle as f64 * 1e9 / CORE_HZ) as u64
    }

    /// Put two detached systems on one link, in lockstep: from now on a step of either steps both (one core
    /// clock), and every frame one RNIC sends is delivered to the other (its MAC paces it at its inbound
    /// rate). Step only one of them per cycle.
    pub fn pair(a: &Rc<RefCell<System<D>>>, b: &Rc<RefCell<System<D>>>) {
        a.borrow_mut().partner = Some(Rc::downgrade(b));
        b.borrow_mut().partner = Some(Rc::downgrade(a));
        a.borrow_mut().detached = true;
        b.borrow_mut().detached = true;
    }

    /// One core clock cycle of the RNIC, host memory, both link directions and the peer (and of the partner
    /// RNIC, when paired).
    pub fn step(&mut self) {
        self.step_one();
        if let Some(p) = self.partner.as_ref().and_then(|w| w.upgrade()) {
            let mut p = p.borrow_mut();
            p.step_one();
            for f in std::mem::take(&mut self.sent) {
                p.inject(f);
            }
            for f in std::mem::take(&mut p.sent) {
                self.inject(f);
            }
            let last = self.last_activity.max(p.last_activity);
            self.last_activity = last;
            p.last_activity = last;
        }
    }

    fn step_one(&mut self) {
        let c = self.cycle;
        // ---- inputs
        let ci = self.csr_in;
        let mut i = RnicIn {
            awvalid: ci.awvalid,
            awaddr: ci.awaddr,
            wvalid: ci.wvalid,
            wdata: ci.wdata,
            bready: ci.bready,
            arvalid: ci.arvalid,
            araddr: ci.araddr,
            rready: ci.rready,
            rd_req_ready: self.dma.rd_req_ready(),
            wr_ready: true,
            m_axis_tready: self.out.tx_ready(),
            ..Default::default()
        };
        let beat = self.dma.rd_resp(c);
        if let Some(b) = &beat {
            i.rd_resp_valid = true;
            i.rd_resp_data = words(&b.data);
            i.rd_resp_tag = b.tag;
            i.rd_resp_last = b.last;
        }
        if let Some(b) = self.inl.rx_beat(c) {
            i.s_axis_tvalid = true;
            i.s_axis_tdata = words(&b.data);
            i.s_axis_tkeep = if b.len == 64 { u64::MAX } else { (1u64 << b.len) - 1 };
            i.s_axis_tlast = b.last;
            i.s_axis_tuser = b.err;
        }
        let o = self.rnic.drive(&i);
        if ci.awvalid || ci.wvalid || ci.arvalid || ci.bready || beat.is_some() || i.s_axis_tvalid || o.rd_req_valid
            || o.wr_valid || o.m_axis_tvalid || o.bvalid || o.rvalid || !self.to_rnic.is_empty() || !self.rx_frame.is_empty()
            || !self.dma.idle() || !self.inl.idle() || !self.out.idle()
        {
            self.last_activity = c;
        }
        // ---- outputs
        self.csr_out = CsrOut {
            awready: o.awready,
            wready: o.wready,
            bvalid: o.bvalid,
            bresp: o.bresp,
            arready: o.arready,
            rvalid: o.rvalid,
            rdata: o.rdata,
            rresp: o.rresp,
        };
        if o.rd_req_valid && i.rd_req_ready {
            self.dma.rd_req(c, DmaRead { addr: o.rd_req_addr, len: o.rd_req_len, tag: o.rd_req_tag });
        }
        if beat.is_some() && o.rd_resp_ready {
            self.dma.rd_resp_taken();
        }
        if o.wr_valid {
            let data = bytes(&o.wr_data);
            self.dma.wr_beat(o.wr_addr, &data, o.wr_strb);
            self.cqe_order.beat(c, o.wr_addr, &data, o.wr_strb);
        }
        if self.timing {
            if o.wr_valid && !self.wr_prev {
                self.dma_write_starts.push(c);
            }
            if o.m_axis_tvalid && i.m_axis_tready && !self.tx_in_frame {
                self.tx_first_beats.push(c);
            }
            if i.s_axis_tvalid && i.s_axis_tlast {
                self.rx_last_beats.push(c);
            }
        }
        self.wr_prev = o.wr_valid;
        if o.m_axis_tvalid && i.m_axis_tready {
            self.tx_in_frame = !o.m_axis_tlast;
            let n = o.m_axis_tkeep.trailing_ones() as usize;
            self.out.tx_beat(c, &bytes(&o.m_axis_tdata)[..n.max(1)], o.m_axis_tlast).expect("pcap write");
        }
        self.rnic.tick();
        self.out.tick();
        self.inl.tick();
        // ---- the peer: frames from the RNIC in, its answers out
        while let Some(b) = self.out.rx_beat(c) {
            self.rx_frame.extend_from_slice(&b.data[..b.len]);
            if b.last {
                self.frames_out += 1;
                self.bytes_out += self.rx_frame.len() as u64;
            }
            if b.last && self.detached {
                self.sent.push(std::mem::take(&mut self.rx_frame));
                break;
            }
            if b.last {
                let f = std::mem::take(&mut self.rx_frame);
                let now = self.now_ns();
                if self.to_peer_filter.as_mut().map_or(true, |keep| keep(&f)) {
                    for o in self.peer.process(now, &f) {
                        self.queue_to_rnic(o);
                    }
                }
                self.sent.push(f);
            }
            if b.last {
                break;
            }
        }
        if c % 64 == 0 && !self.detached {
            let now = self.now_ns();
            for o in self.peer.poll(now) {
                self.queue_to_rnic(o);
            }
        }
        if self.inl.tx_ready() {
            if let Some((f, off)) = self.to_rnic.front_mut() {
                let n = (f.len() - *off).min(64);
                let last = *off + n == f.len();
                self.inl.tx_beat(c, &f[*off..*off + n], last).expect("pcap write");
                *off += n;
                if last {
                    let (f, _) = self.to_rnic.pop_front().unwrap();
                    self.taken_bytes.fetch_add(f.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    self.received.push(f);
                }
            }
        }
        self.cycle += 1;
    }

    /// A frame of the golden peer's, through `to_rnic_filter`, onto the link to the RNIC.
    fn queue_to_rnic(&mut self, f: Vec<u8>) {
        if self.to_rnic_filter.as_mut().map_or(true, |keep| keep(&f)) {
            self.to_rnic.push_back((f, 0));
        }
    }

    /// Frames queued for the RNIC that have not wholly entered its MAC yet.
    pub fn queued_to_rnic(&self) -> usize {
        self.to_rnic.len()
    }

    /// Send a frame to the RNIC as if the peer had sent it (after the peer's own queued frames).
    pub fn inject(&mut self, f: Vec<u8>) {
        self.last_activity = self.cycle;
        self.to_rnic.push_back((f, 0));
    }

    /// Step until `done(self)` or `max` cycles; false on timeout.
    pub fn run_until(&mut self, max: u64, mut done: impl FnMut(&System<D>) -> bool) -> bool {
        for _ in 0..max {
            if done(self) {
                return true;
            }
            self.step();
        }
        done(self)
    }
}

/// 64 bytes as the model's 16 little-endian words, and back.
pub(crate) fn words(b: &[u8; 64]) -> [u32; 16] {
    std::array::from_fn(|w| u32::from_le_bytes(b[4 * w..4 * w + 4].try_into().unwrap()))
}
pub(crate) fn bytes(w: &[u32; 16]) -> [u8; 64] {
    let mut b = [0u8; 64];
    for (i, x) in w.iter().enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
    b
}

/// The driver's register bus over the simulated RNIC: each access is an AXI4-Lite handshake, the whole system
/// stepping while it runs.
pub struct SimBus<D: RnicDut = Clocked<VRnic>> {
    pub sys: Rc<RefCell<System<D>>>,
    /// Cycles an access may take before it is a bus error.
    pub timeout: u64,
}

impl<D: RnicDut> SimBus<D> {
    pub fn new(sys: Rc<RefCell<System<D>>>) -> Self {
        SimBus { sys, timeout: 10_000 }
    }
}

impl<D: RnicDut> CsrBus for SimBus<D> {
    fn write32(&mut self, addr: u32, value: u32) -> Result<(), DriverError> {
        let mut s = self.sys.borrow_mut();
        s.csr_in = CsrIn { awvalid: true, awaddr: addr, wvalid: true, wdata: value, ..Default::default() };
        let (mut aw, mut w) = (false, false);
        for _ in 0..self.timeout {
            // a handshake happens at the edge when valid and ready were both high during the cycle
            let bready = s.csr_in.bready;
            s.step();
            let o = s.csr_out;
            if bready && o.bvalid {
                s.csr_in = CsrIn::default();
                return if o.bresp == 0 {
                    Ok(())
                } else {
                    Err(DriverError::Bus(format!("write 0x{addr:05x}: bresp {}", o.bresp)))
                };
            }
            if s.csr_in.awvalid && o.awready {
                aw = true;
                s.csr_in.awvalid = false;
            }
            if s.csr_in.wvalid && o.wready {
                w = true;
                s.csr_in.wvalid = false;
            }
            s.csr_in.bready = aw && w;
        }
        Err(DriverError::Bus(format!("write 0x{addr:05x}: no response in {} cycles", self.timeout)))
    }

    fn read32(&mut self, addr: u32) -> Result<u32, DriverError> {
        let mut s = self.sys.borrow_mut();
        s.csr_in = CsrIn { arvalid: true, araddr: addr, rready: true, ..Default::default() };
        for _ in 0..self.timeout {
            s.step();
            let o = s.csr_out;
            if s.csr_in.arvalid && o.arready {
                s.csr_in.arvalid = false;
            }
            if !s.csr_in.arvalid && o.rvalid {
                s.csr_in = CsrIn::default();
                return if o.rresp == 0 {
                    Ok(o.rdata)
                } else {
                    Err(DriverError::Bus(format!("read 0x{addr:05x}: rresp {}", o.rresp)))
                };
            }
        }
        Err(DriverError::Bus(format!("read 0x{addr:05x}: no response in {} cycles", self.timeout)))
    }
}

pub const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x11];
pub const OUR_IP: u32 = 0x0A00_0011;
/// Our IPv6 address and the peer's in [`rig_v6`].
pub const OUR_IP6: u128 = 0xFD00_0000_0000_0000_0000_0000_0000_0011;
pub const PEER_IP6: u128 = 0xFD00_0000_0000_0000_0000_0000_0000_0002;

/// The RNIC with one RC QP connected to a QP of the golden-model peer, both in RTS, with 2 MiB registered on
/// each side (ours filled with a seeded pattern).
pub struct Rig<D: RnicDut = Clocked<VRnic>> {
    pub sys: Rc<RefCell<System<D>>>,
    pub drv: Driver<SimBus<D>>,
    pub mem: Arc<Mutex<HostMemory>>,
    pub qpn: u32,
    pub peer_qpn: u32,
    pub src: u64,
    pub lkey: u32,
    pub peer_buf: u64,
    pub peer_rkey: u32,
    pub peer_cq: Cq,
    pub dir: std::path::PathBuf,
    /// Our address vector as the peer addresses us ([`our_av`], or [`our_av6`] in [`rig_v6`]).
    pub av: AddressVector,
}

pub fn rig(mtu: u32, dir: &Path) -> Rig {
    rig_with(Clocked::new(None), mtu, dir)
}

/// [`rig`] on any implementation of the RNIC (rust-hdl's simulator, or both simulators in lockstep).
pub fn rig_with<D: RnicDut>(dut: D, mtu: u32, dir: &Path) -> Rig<D> {
    rig_on(|_| dut, mtu, dir)
}

/// [`rig_with`] for an implementation that needs the host memory itself (the board-level model, whose DMA
/// reaches host memory through its own PCIe bridge model: `sim::board`).
pub fn rig_on<D: RnicDut>(make: impl FnOnce(&Arc<Mutex<HostMemory>>) -> D, mtu: u32, dir: &Path) -> Rig<D> {
    rig_at(make, mtu, dir, false, None)
}

/// [`rig`] over IPv6: our RNIC at [`OUR_IP6`] (as well as [`OUR_IP`]), the peer at [`PEER_IP6`], the QP pairs'
/// paths RoCEv2 over IPv6.
pub fn rig_v6(mtu: u32, dir: &Path) -> Rig {
    rig_at(|_| Clocked::new(None), mtu, dir, true, None)
}

/// [`rig`] on an 802.1Q VLAN: our RNIC's port (`CMD_SET_VLAN`) and the golden peer (as rxe on `eth0.VID`) both
/// with tag control information `tci`.
pub fn rig_vlan(mtu: u32, dir: &Path, tci: u16) -> Rig {
    rig_vlan_with(Clocked::new(None), mtu, dir, tci)
}

/// [`rig_vlan`] on any implementation of the RNIC.
pub fn rig_vlan_with<D: RnicDut>(dut: D, mtu: u32, dir: &Path, tci: u16) -> Rig<D> {
    rig_at(|_| dut, mtu, dir, false, Some(tci))
}

fn rig_at<D: RnicDut>(
    make: impl FnOnce(&Arc<Mutex<HostMemory>>) -> D,
    mtu: u32,
    dir: &Path,
    v6: bool,
    vlan: Option<u16>,
) -> Rig<D> {
    let mem = Arc::new(Mutex::new(HostMemory::new()));
    let dut = make(&mem);
    let mut pcfg = DeviceConfig::simple(2);
    if v6 {
        pcfg.ip = std::net::IpAddr::V6(PEER_IP6.into());
    }
    pcfg.vlan = vlan.map(|tci| testbench::wire::VlanTag { tci });
    let mut peer = Device::new(pcfg);
    let av = if v6 { our_av6() } else { our_av() };
    let sys = Rc::new(RefCell::new(System::with_dut(dut, mem.clone(), Device::new(DeviceConfig::simple(9)), Some(dir)).unwrap()));
    let mut drv = Driver::open(SimBus::new(sys.clone()), mem.clone()).expect("the driver opens the RTL device");
    assert_eq!(drv.info.caps & CAP_RC, CAP_RC);
    assert_eq!((drv.info.log2_qps, drv.info.log2_mrs), (8, 10));
    drv.set_address(OUR_MAC, OUR_IP).unwrap();
    if v6 {
        drv.set_ipv6(Some(OUR_IP6.into())).unwrap();
    }
    if vlan.is_some() {
        drv.set_vlan(vlan).unwrap();
    }
    // our side
    let src = mem.lock().unwrap().alloc(1 << 21);
    let mut rng = SmallRng::seed_from_u64(u64::from(mtu));
    let pattern: Vec<u8> = (0..1 << 21).map(|_| rng.gen()).collect();
    mem.lock().unwrap().write(src, &pattern).unwrap();
    let pd = drv.alloc_pd();
    let lkey = drv.reg_mr(pd, src, 1 << 21, AccessFlags::ALL).unwrap();
    let cq = drv.create_cq(64).unwrap();
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qpn = drv.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap, sq_sig_all: false }).unwrap();
    // the peer: the golden model
    let peer_buf = peer.alloc(1 << 21);
    let ppd = peer.alloc_pd();
    let pmr = peer.reg_mr(ppd, peer_buf, 1 << 21, AccessFlags::ALL).unwrap();
    let peer_cq = peer.create_cq(64);
    let peer_qpn = peer
        .create_qp(ppd, QpInitAttr { qp_type: QpType::Rc, send_cq: peer_cq, recv_cq: peer_cq, cap, sq_sig_all: false })
        .unwrap();
    connect_pair(&mut drv, &mut peer, &av, mtu, qpn, peer_qpn, 0xFF_FFF0, 0x1234);
    sys.borrow_mut().peer = peer;
    Rig { sys, drv, mem, qpn, peer_qpn, src, lkey, peer_buf, peer_rkey: pmr.rkey, peer_cq, dir: dir.to_path_buf(), av }
}

impl<D: RnicDut> Rig<D> {
    /// Another RC QP pair between us and the peer (same PD, CQs and memory as the first), in RTS.
    pub fn add_qp_pair(&mut self, mtu: u32, psn_a: u32, psn_b: u32) -> (u32, u32) {
        let cap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        self.add_qp_pair_with(mtu, psn_a, psn_b, cap, Cq(0))
    }

    /// [`Rig::add_qp_pair`] with our QP's queue sizes and completion queue chosen (the peer's QP gets the same
    /// sizes).
    pub fn add_qp_pair_with(&mut self, mtu: u32, psn_a: u32, psn_b: u32, cap: QpCap, cq: Cq) -> (u32, u32) {
        self.add_qp_pair_of(QpType::Rc, mtu, psn_a, psn_b, cap, cq)
    }

    /// `COUNTER[i]` of the RNIC by its name (`crate::rxe::rtl_ep::counter_names`), read through the driver.
    pub fn counter(&mut self, name: &str) -> u32 {
        let i = crate::rxe::rtl_ep::counter_names().iter().position(|n| n == name).unwrap_or_else(|| panic!("no counter {name}"));
        self.drv.bus().read32(rnic_driver::host::REG_COUNTERS + 4 * i as u32).expect("counter read")
    }

    /// [`Rig::add_qp_pair_with`] of this service type (RC, UC or UD).
    pub fn add_qp_pair_of(&mut self, qp_type: QpType, mtu: u32, psn_a: u32, psn_b: u32, cap: QpCap, cq: Cq) -> (u32, u32) {
        let qpn = self.drv.create_qp(Pd(1), QpInitAttr { qp_type, send_cq: cq, recv_cq: cq, cap, sq_sig_all: false }).unwrap();
        // the peer leaves the system while the driver's register accesses step it
        let mut peer = std::mem::replace(&mut self.sys.borrow_mut().peer, Device::new(DeviceConfig::simple(9)));
        let pcq = self.peer_cq;
        let peer_qpn = peer.create_qp(Pd(1), QpInitAttr { qp_type, send_cq: pcq, recv_cq: pcq, cap, sq_sig_all: false }).unwrap();
        connect_pair(&mut self.drv, &mut peer, &self.av, mtu, qpn, peer_qpn, psn_a, psn_b);
        self.sys.borrow_mut().peer = peer;
        (qpn, peer_qpn)
    }

    /// Step until the peer has `n` completions (or `max_cycles`).
    pub fn wait_peer_completions(&mut self, n: usize, max_cycles: u64) -> Vec<WorkCompletion> {
        let mut got = Vec::new();
        let cq = self.peer_cq;
        let mut s = self.sys.borrow_mut();
        for _ in 0..max_cycles / 256 {
            got.extend(s.peer.poll_cq(cq, 64));
            if got.len() >= n {
                break;
            }
            for _ in 0..256 {
                s.step();
            }
        }
        got
    }

    /// Our completions on CQ 0, polled through the driver while the system runs (512 cycles between polls),
    /// until `n` came or `max_cycles` passed.
    pub fn our_completions(&mut self, n: usize, max_cycles: u64) -> Vec<WorkCompletion> {
        let mut got = Vec::new();
        for _ in 0..max_cycles / 512 {
            got.extend(self.drv.poll_cq(Cq(0), 64).expect("poll_cq"));
            if got.len() >= n {
                break;
            }
            let mut s = self.sys.borrow_mut();
            for _ in 0..512 {
                s.step();
            }
        }
        got
    }

    pub fn src_bytes(&self, off: u64, len: usize) -> Vec<u8> {
        self.mem.lock().unwrap().read(self.src + off, len).unwrap()
    }
}

/// The address vector of our RNIC ([`OUR_MAC`], [`OUR_IP`]), as the peer addresses it.
pub fn our_av() -> AddressVector {
    AddressVector::new(MacAddr(OUR_MAC), std::net::IpAddr::V4(OUR_IP.into()))
}

/// Our IPv6 address vector ([`OUR_MAC`], [`OUR_IP6`]).
pub fn our_av6() -> AddressVector {
    AddressVector::new(MacAddr(OUR_MAC), std::net::IpAddr::V6(OUR_IP6.into()))
}

/// The Q_Key [`Rig::add_qp_pair_of`] gives both QPs of a UD pair.
pub const UD_QKEY: u32 = 0x1234_5678;

/// Bring our QP `qpn` and the peer's `peer_qpn` to RTS, connected to each other (our send PSN `psn_a`, the
/// peer's `psn_b`); UD QPs with the Q_Key [`UD_QKEY`] and no destination.
#[allow(clippy::too_many_arguments)]
fn connect_pair<D: RnicDut>(drv: &mut Driver<SimBus<D>>, peer: &mut Device, our_av: &AddressVector, mtu: u32, qpn: u32, peer_qpn: u32, psn_a: u32, psn_b: u32) {
    let our_av = *our_av;
    // a UD QP has no destination: its Q_Key instead, and each WR names where it goes
    let ud = peer.qp(peer_qpn).map_or(false, |q| q.qp_type == QpType::Ud);
    let qkey = ud.then_some(UD_QKEY);
    for attr in [
        QpAttr { qp_state: Some(QpState::Init), qp_access_flags: Some(AccessFlags::ALL), qkey, ..Default::default() },
        QpAttr {
            qp_state: Some(QpState::Rtr),
            path_mtu: Some(mtu),
            dest_qp_num: (!ud).then_some(qpn),
            rq_psn: (!ud).then_some(psn_a),
            max_dest_rd_atomic: Some(16),
            min_rnr_timer: Some(12),
            av: (!ud).then_some(our_av),
            ..Default::default()
        },
        QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(psn_b), timeout: Some(14), retry_cnt: Some(7), rnr_retry: Some(7), max_rd_atomic: Some(16), ..Default::default() },
    ] {
        peer.modify_qp(peer_qpn, &attr).unwrap();
    }
    let peer_av = peer.av_to_me();
    for attr in [
        QpAttr { qp_state: Some(QpState::Init), qp_access_flags: Some(AccessFlags::ALL), qkey, ..Default::default() },
        QpAttr {
            qp_state: Some(QpState::Rtr),
            path_mtu: Some(mtu),
            dest_qp_num: (!ud).then_some(peer_qpn),
            rq_psn: (!ud).then_some(psn_b),
            max_dest_rd_atomic: Some(16),
            av: (!ud).then_some(peer_av),
            ..Default::default()
        },
        QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(psn_a), timeout: Some(14), retry_cnt: Some(7), rnr_retry: Some(7), max_rd_atomic: Some(16), ..Default::default() },
    ] {
        drv.modify_qp(qpn, &attr).unwrap();
    }
}
