//! The RNIC's RTL (the Verilator model of the emitted Verilog, [`crate::system::System`]) as our side of the
//! rxe link, driven by the repo's driver (`rnic_driver`) through its register slave and host-memory
//! rings, exactly as the board will be over PCIe.
//!
//! ```text
//!  app thread (pingpong/perftest peer) ──Verbs calls──┐
//!                                                     v
//!  bridge thread ── frames from the VM ──> RTL thread: System (Verilator RNIC + DmaHost + 100G MacLinks)
//!               <── frames to the VM ────            + Driver<SimBus>
//! ```
//!
//! The Verilator model is not `Send`, so one thread owns it (the **RTL thread**): it runs the driver's calls
//! (each steps the whole system through AXI4-Lite handshakes, as [`crate::system::SimBus`] does), injects the
//! VM's frames into the RNIC's RX MAC (paced at [`INBOUND_GBPS`], 80 Gb/s, of simulated time) and steps the
//! clock while anything is moving. When every port has been quiet for [`QUIET_CYCLES`] and no send WQE is
//! outstanding (the driver's count: posted and not retired by a polled completion) it sleeps until a call or a
//! frame arrives, and the VM (TCG) gets the CPU; while a send WQE is outstanding it keeps stepping, so the
//! Completer's retransmit timer (in core cycles) runs and a lost ACK or response is retried (see
//! [`rtl_qp_timeout`]).
//!
//! Host memory is shared: the application reads and writes its buffers directly, as a host program does.
//!
//! Simulated time and the VM's time are unrelated: the RNIC runs at some 10^4 to 10^5 cycles per wall second
//! (runs plan with [`SIM_CYCLES_PER_SEC`], 40,000), thousands of times slower than real hardware (322 MHz),
//! so rxe may retransmit on its 67 ms timer while the RNIC is still working; the RNIC's responder re-ACKs
//! duplicates, its completer drops stale responses. Each side's retransmit timer is sized for the other's
//! clock: ours (core cycles) by [`rtl_qp_timeout`], rxe's (wall time) by [`vm_qp_timeout`].
//!
//! Nothing is discarded silently: frames from the VM that have not yet entered the RNIC's MAC when the
//! counters are read are reported as `inbound_frames_queued` (a run cut short by its deadline shows them).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rnic_driver::{CsrBus, Driver, DriverError};
use rnic_driver::host::{CAP_RC, REG_COUNTERS};
use testbench::mac::CORE_HZ;
use testbench::model::{AccessFlags, Cq, HostMemory, Pd, QpAttr, QpInitAttr, RecvWr, SendWr, WorkCompletion};

use super::verbs::{CmVerbs, Verbs};
use super::Endpoint;
use crate::system::{SimBus, System};

/// Quiet cycles after which the RTL thread stops stepping until something arrives.
pub const QUIET_CYCLES: u64 = 4096;
/// The rate at which the VM's frames enter the RNIC, in Gb/s of simulated time. rxe runs in wall time and
/// produces whole windows while the (far slower in wall time) simulation runs, so without pacing they would
/// all arrive in one simulated instant; they wait in the harness's queue and enter the RX MAC at this rate,
/// as from a switch port. The faster the queue drains, the less wall time a run takes and the shorter the round
/// trip the timers must cover; but rxe sends its whole window back to back, and at 100 Gb/s the Responder
/// (29.4 cycles per 1 KiB SEND, the wire brings one every 28.5) overflowed RX Parse once in 43,000 SEND
/// packets (`ib_send_bw`, ours server, 2 % loss). 80 Gb/s (a 1 KiB packet every 35.6 cycles) leaves room.
pub const INBOUND_GBPS: f64 = 80.0;
/// The IBA local ACK timeout's unit, 4.096 us, in ns.
const TIMEOUT_UNIT_NS: f64 = 4096.0;
/// Bytes a RoCEv2 packet occupies on the wire besides its payload: preamble and inter-frame gap (20),
/// Ethernet (14), IPv4 (20), UDP (8), BTH (12), the largest extension we carry here (RETH 16), ICRC (4), FCS (4).
pub const WIRE_OVERHEAD_BYTES: u64 = 98;

/// Bytes on the wire of a message of `size` bytes at path MTU `mtu` (at least one packet).
pub fn wire_bytes(size: u64, mtu: u32) -> u64 {
    let pkts = size.div_ceil(u64::from(mtu)).max(1);
    size + pkts * WIRE_OVERHEAD_BYTES
}

/// The smallest IBA `timeout` exponent t (4.096 us x 2^t) that exceeds `ns` (1 ..= 22; 22 is the longest the
/// RTL's Completer counts, 17 s: `TIMEOUT_LOG2_MAX`).
pub fn timeout_exponent(ns: f64) -> u8 {
    let max = rtl::transport::completer::TIMEOUT_LOG2_MAX as u8;
    let mut t = 1u8;
    while t < max && TIMEOUT_UNIT_NS * f64::from(1u32 << t) <= ns {
        t += 1;
    }
    t
}

/// The retransmit timeout our RTL QPs use against rxe, by the IBA rule: longer than a round trip with
/// everything that can be outstanding on the QP queued in it. Our side may have `outstanding_bytes` (wire
/// bytes of the messages in flight, both ways) queued at `inbound_gbps` of simulated time ahead of the
/// response that acknowledges the last of them; rxe's own turn-around is wall time, during which the
/// simulation steps only while a send WQE is outstanding (at [`SIM_CYCLES_PER_SEC`], 40,000 cycles per wall
/// second, some 40 cycles per millisecond of rxe). Twice that, and at least 100 us. The Completer counts this
/// timer in core cycles, so it is simulated time.
pub fn rtl_qp_timeout(outstanding_bytes: u64, inbound_gbps: f64) -> u8 {
    let queue_ns = outstanding_bytes as f64 * 8.0 / inbound_gbps;
    timeout_exponent((2.0 * queue_ns).max(100_000.0))
}

/// The Verilator RNIC's speed, core cycles per wall second, that the rxe runs plan with: the slowest seen
/// while frames flow both ways (a busy system; an idle one runs faster). `RNIC_SIM_SPEED` overrides it.
pub const SIM_CYCLES_PER_SEC: f64 = 40_000.0;

/// [`SIM_CYCLES_PER_SEC`], or `RNIC_SIM_SPEED` when set.
pub fn sim_speed() -> f64 {
    std::env::var("RNIC_SIM_SPEED").ok().and_then(|v| v.parse().ok()).filter(|v: &f64| *v > 0.0).unwrap_or(SIM_CYCLES_PER_SEC)
}

/// Wall-clock time for the RTL to take `bytes` of the peer's frames at [`INBOUND_GBPS`], at [`sim_speed`].
pub fn wall_for_inbound(bytes: u64) -> std::time::Duration {
    let cycles = bytes as f64 * 8.0 / INBOUND_GBPS * CORE_HZ / 1e9;
    std::time::Duration::from_secs_f64(cycles / sim_speed())
}

/// The retransmit timeout the rxe tool in the VM gets against the RTL (perftest `-u`, ibv_rc_pingpong has
/// none). rxe's timer runs in wall time and is pushed back by every response (`COMPST_EXIT`), so it must
/// exceed the wall time our RNIC may take between two responses: working through rxe's whole unacked window
/// (at most 128 PSNs, `RXE_MAX_UNACKED_PSNS`, of `mtu` bytes each) queued ahead of the packet it answers.
/// Four times that, at least 67 ms (perftest's own 14). Any longer only adds idle wall time to each
/// recovery that needs the timer (a lost NAK, a lost last packet); any shorter and rxe resends what is
/// merely queued.
pub fn vm_qp_timeout(mtu: u32) -> u8 {
    let window = u64::from(testbench::model::requester::RXE_MAX_UNACKED_PSNS) * wire_bytes(u64::from(mtu), mtu);
    let wall_ns = wall_for_inbound(window).as_secs_f64() * 1e9;
    // perftest's own 14 (67 ms) at least: just under 2^14 units gives 14
    timeout_exponent((4.0 * wall_ns).max(TIMEOUT_UNIT_NS * f64::from(1u32 << 14) - 1.0))
}

/// Cycles stepped between looks at the message queue.
const STEP_CYCLES: usize = 64;

/// One RNIC the RTL thread owns: the simulated system and the driver on its register slave.
pub struct Side {
    pub sys: Rc<RefCell<System<Dut>>>,
    pub drv: Driver<SimBus<Dut>>,
    /// Send WQEs outstanding by a driver outside this thread ([`ThreadBus`]'s): the clock keeps running while
    /// it is not zero, as for this thread's own driver.
    pub ext_outstanding: Arc<AtomicU32>,
}

/// The RNIC a side runs: the bare core's Verilator model, or the board shell with its IP models.
pub type Dut = crate::system::AnyDut;

/// What the RTL thread owns: one RNIC (an rxe endpoint), or two on one link in lockstep ([`RtlDevice::pair`]).
pub struct Core {
    pub sides: Vec<Side>,
}

type Call = Box<dyn FnOnce(&mut Core) + Send>;

enum Msg {
    Call(Call),
    Frame(Vec<u8>),
    Stop,
}

/// RX Parse's counters, named in its order (`counters[i]`, i = [`rtl::wire::rx_parse::DropReason`]).
pub fn rx_counter_names() -> Vec<String> {
    let mut v: Vec<String> = vec!["rx_good_frames".into()];
    for r in ["not_ip", "not_roce_udp", "not_for_us", "bad_length", "bad_opcode", "bad_tver", "bad_icrc", "overflow", "mac_error"] {
        v.push(format!("rx_drop_{r}"));
    }
    assert_eq!(v.len(), rtl::wire::rx_parse::RX_COUNTERS);
    v
}

/// Where each of RX Parse's counters sits in the counter window.
pub fn rx_counter_slots() -> Vec<u32> {
    let all = counter_names();
    rx_counter_names().iter().map(|n| all.iter().position(|a| a == n).expect("every RX counter in the window") as u32).collect()
}

/// The RNIC's counter window, named (index = `COUNTER[i]`): RX Parse's first nine, then ARP's, the
/// Responder's and the Completer's, RX Parse's MAC-error count (31), the ICMP echo responder's and ARP's
/// other three (32..37), the Responder's UC drops (38).
pub fn counter_names() -> Vec<String> {
    let rx = rx_counter_names();
    let mut v: Vec<String> = rx[..9].to_vec();
    v.push("arp_answered".into());
    for n in [
        "resp_requests",
        "resp_duplicates",
        "resp_nak_psn_seq",
        "resp_rnr_naks",
        "resp_class_c_naks",
        "resp_drop_qp_lookup",
        "resp_drop_out_of_seq",
        "resp_drop_dup_no_resource",
        "resp_drop_qp_error",
        "resp_drop_malformed",
        "resp_acks",
        "resp_read_responses",
        "comp_acks",
        "comp_naks",
        "comp_rnr_naks",
        "comp_dropped",
        "comp_bad_responses",
        "comp_implied_naks",
        "comp_atomic_acks",
        "comp_retries",
        "comp_timeouts",
    ] {
        v.push(n.into());
    }
    v.push(rx[9].clone());
    assert_eq!(v.len(), 32);
    for n in ["icmp_echo_replies", "icmp_ignored", "icmp_overflow", "arp_ignored", "arp_dropped", "arp_requests", "resp_drop_uc", "cq_overruns", "nd_advertisements", "nd_ignored", "rx_drop_vlan"] {
        v.push(n.into());
    }
    v
}

/// Read the whole counter window through a driver, named as [`counter_names`].
pub fn read_counter_window<B: CsrBus>(drv: &mut Driver<B>) -> Result<Vec<(String, u64)>> {
    counter_names()
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            let v = drv.bus().read32(REG_COUNTERS + 4 * i as u32).map_err(|e| anyhow!("reading counter {n}: {e}"))?;
            Ok((n, u64::from(v)))
        })
        .collect()
}

/// One counter of a window read by [`read_counter_window`] (the name must be one of [`counter_names`]).
pub fn counter(window: &[(String, u64)], name: &str) -> u64 {
    window.iter().find(|(k, _)| k == name).map(|(_, v)| *v).unwrap_or_else(|| panic!("no counter named {name}"))
}

/// Counters that a lossless link leaves at zero.
pub const UNEXPECTED: [&str; 9] = [
    "mac_tx_underruns",
    "rx_drop_mac_error",
    "rx_drop_bad_length",
    "rx_drop_bad_opcode",
    "rx_drop_bad_tver",
    "rx_drop_bad_icrc",
    "rx_drop_overflow",
    "resp_drop_malformed",
    "resp_class_c_naks",
];

/// The RTL thread and its message queue; the thread stops when the last handle goes.
struct Inner {
    tx: Mutex<Sender<Msg>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Bytes of the peer's frames handed to the first RNIC, and wholly entered into its RX MAC.
    backlog: super::Backlog,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.tx.lock().unwrap_or_else(|e| e.into_inner()).send(Msg::Stop);
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// One RTL RNIC, shared by the application and the bridge (or its partner on a simulated link).
pub struct RtlDevice {
    inner: Arc<Inner>,
    /// Which of the RTL thread's RNICs this is.
    side: usize,
    mem: Arc<Mutex<HostMemory>>,
    outbox: Arc<Mutex<VecDeque<Vec<u8>>>>,
    /// In the board shell (for reports).
    board: bool,
}

/// An RNIC to build: its addresses, inbound pacing and pcap directory.
#[derive(Clone, Debug)]
pub struct RtlConfig {
    pub mac: [u8; 6],
    pub ipv4: u32,
    pub inbound_gbps: f64,
    pub pcap_dir: Option<std::path::PathBuf>,
    /// The core inside the U250 board shell with models of its IPs (`sim::board`), not the bare core.
    pub board: bool,
    /// Its IPv6 address (`CMD_SET_IPV6`), if any, besides the IPv4 one.
    pub ipv6: Option<std::net::Ipv6Addr>,
    /// The QPN of its first QP (`Driver::set_next_qpn`; the driver's own is 0x11, as rxe's).
    pub first_qpn: u32,
    /// The port's 802.1Q VLAN tag control information (`CMD_SET_VLAN`), if it is on one.
    pub vlan: Option<u16>,
}

impl RtlDevice {
    /// Build the Verilator RNIC in its own thread, open it with the driver and give it `mac`/`ipv4`; frames
    /// from the peer reach its MAC at most at `inbound_gbps` of simulated time (see [`INBOUND_GBPS`]); with
    /// `pcap_dir`, its MAC writes `rnic-tx.pcap` and `rnic-rx.pcap` there.
    pub fn start(mac: [u8; 6], ipv4: u32, inbound_gbps: f64, pcap_dir: Option<std::path::PathBuf>) -> Result<Arc<RtlDevice>> {
        Self::start_with(RtlConfig { mac, ipv4, inbound_gbps, pcap_dir, board: false, ipv6: None, first_qpn: 0x11, vlan: None })
    }

    /// [`RtlDevice::start`] from a configuration (the bare core or the board shell).
    pub fn start_with(c: RtlConfig) -> Result<Arc<RtlDevice>> {
        let mut v = Self::start_many(vec![c], false)?;
        Ok(v.remove(0))
    }

    /// Two RNICs on one link, stepped in lockstep by one thread (a cycle of either is a cycle of both; each
    /// one's frames go to the other's MAC, see [`System::pair`]). No [`Endpoint`]: the link is inside.
    pub fn pair(a: RtlConfig, b: RtlConfig) -> Result<(Arc<RtlDevice>, Arc<RtlDevice>)> {
        let mut v = Self::start_many(vec![a, b], true)?;
        let b = v.remove(1);
        Ok((v.remove(0), b))
    }

    fn start_many(cfgs: Vec<RtlConfig>, paired: bool) -> Result<Vec<Arc<RtlDevice>>> {
        let boards: Vec<bool> = cfgs.iter().map(|c| c.board).collect();
        let mems: Vec<Arc<Mutex<HostMemory>>> = cfgs.iter().map(|_| Arc::new(Mutex::new(HostMemory::new()))).collect();
        let outbox = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, rx) = mpsc::channel::<Msg>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
        let (m2, o2) = (mems.clone(), outbox.clone());
        let backlog = super::Backlog::default();
        let taken = backlog.taken.clone();
        let thread = std::thread::Builder::new()
            .name("rtl".into())
            .stack_size(256 << 20)
            .spawn(move || {
                let core = (|| -> Result<Core> {
                    let mut sides: Vec<Side> = Vec::new();
                    for (c, mem) in cfgs.iter().zip(m2) {
                        let dut: Dut = if c.board {
                            Box::new(crate::board::BoardDut::new(mem.clone(), crate::board::PcieHost::gen3_x16(), u64::from(c.ipv4), None))
                        } else {
                            Box::new(crate::Clocked::<crate::vmodels::rnic::Rnic>::new(None))
                        };
                        let mut sys = System::detached_with(dut, mem.clone(), c.pcap_dir.as_deref(), c.inbound_gbps)
                            .context("creating the Verilator RNIC")?;
                        if sides.is_empty() && !paired {
                            sys.taken_bytes = taken.clone();
                        }
                        let sys = Rc::new(RefCell::new(sys));
                        if paired && sides.len() == 1 {
                            System::pair(&sides[0usize].sys, &sys);
                        }
                        let mut drv = Driver::open(SimBus::new(sys.clone()), mem).map_err(|e| anyhow!("driver open: {e}"))?;
                        if drv.info.caps & CAP_RC == 0 {
                            bail!("the RNIC does not advertise RC");
                        }
                        drv.set_address(c.mac, c.ipv4).map_err(|e| anyhow!("set_address: {e}"))?;
                        drv.set_next_qpn(c.first_qpn);
                        if c.vlan.is_some() {
                            drv.set_vlan(c.vlan).map_err(|e| anyhow!("set_vlan: {e}"))?;
                        }
                        if c.ipv6.is_some() {
                            drv.set_ipv6(c.ipv6).map_err(|e| anyhow!("set_ipv6: {e}"))?;
                        }
                        if c.board {
                            crate::board::wait_link_up(&mut drv, &sys)?;
                        }
                        sides.push(Side { sys, drv, ext_outstanding: Arc::new(AtomicU32::new(0)) });
                    }
                    Ok(Core { sides })
                })();
                match core {
                    Ok(core) => {
                        let _ = ready_tx.send(Ok(()));
                        rtl_thread(core, rx, o2, paired);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })?;
        ready_rx.recv().map_err(|_| anyhow!("the RTL thread died while starting"))??;
        let inner = Arc::new(Inner { tx: Mutex::new(tx), thread: Mutex::new(Some(thread)), backlog });
        Ok(mems
            .into_iter()
            .enumerate()
            .map(|(side, mem)| Arc::new(RtlDevice { inner: inner.clone(), side, mem, outbox: outbox.clone(), board: boards[side] }))
            .collect())
    }

    fn send(&self, m: Msg) -> Result<()> {
        self.inner.tx.lock().unwrap_or_else(|e| e.into_inner()).send(m).map_err(|_| anyhow!("the RTL thread has stopped"))
    }

    /// Run `f` on this RNIC in the RTL thread and wait for its result.
    pub fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut Side) -> R + Send + 'static) -> Result<R> {
        let (rtx, rrx) = mpsc::channel();
        let side = self.side;
        self.send(Msg::Call(Box::new(move |c: &mut Core| {
            let _ = rtx.send(f(&mut c.sides[side]));
        })))?;
        rrx.recv().map_err(|_| anyhow!("the RTL thread stopped during a call"))
    }

    /// The endpoint to hand to the bridge (inside a `HostStack`).
    pub fn endpoint(self: &Arc<Self>) -> RtlEndpoint {
        RtlEndpoint { dev: self.clone() }
    }

    /// The counter window, named.
    pub fn read_counters(&self) -> Result<Vec<(String, u64)>> {
        self.call(|c| read_counter_window(&mut c.drv))?
    }

    /// Simulated core cycles so far.
    pub fn cycles(&self) -> Result<u64> {
        self.call(|c| c.sys.borrow().cycle)
    }

    /// A register bus into this RNIC for a driver in another thread ([`ThreadBus`]), with the count of its
    /// outstanding send WQEs that keeps the clock running.
    pub fn thread_bus(self: &Arc<Self>) -> Result<ThreadBus> {
        let hint = self.call(|c| c.ext_outstanding.clone())?;
        Ok(ThreadBus { dev: self.clone(), hint })
    }

    /// The host memory behind this RNIC's DMA ports.
    pub fn memory(&self) -> Arc<Mutex<HostMemory>> {
        self.mem.clone()
    }

    fn frames_out(&self) -> Vec<Vec<u8>> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect()
    }
}

fn rtl_thread(mut core: Core, rx: Receiver<Msg>, outbox: Arc<Mutex<VecDeque<Vec<u8>>>>, paired: bool) {
    let handle = |core: &mut Core, m: Msg| -> bool {
        match m {
            Msg::Call(f) => f(core),
            Msg::Frame(f) => core.sides[0].sys.borrow_mut().inject(f),
            Msg::Stop => return false,
        }
        true
    };
    loop {
        loop {
            match rx.try_recv() {
                Ok(m) => {
                    if !handle(&mut core, m) {
                        return;
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        // Quiet: no port has moved for QUIET_CYCLES and no send WQE is outstanding. While one is, the clock
        // must keep running: the Completer's retransmit timer counts core cycles, and a lost ACK or response
        // is only recovered when it expires.
        let quiet = core.sides.iter().all(|x| {
            let s = x.sys.borrow();
            s.cycle.saturating_sub(s.last_activity) > QUIET_CYCLES
                && x.drv.send_outstanding() == 0
                && x.ext_outstanding.load(Ordering::Relaxed) == 0
        });
        if quiet {
            match rx.recv_timeout(Duration::from_millis(1)) {
                Ok(m) => {
                    if !handle(&mut core, m) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            // a paired system steps its partner too
            let n = if paired { 1 } else { core.sides.len() };
            for x in &core.sides[..n] {
                let mut s = x.sys.borrow_mut();
                for _ in 0..STEP_CYCLES {
                    s.step();
                }
            }
        }
        for x in &core.sides {
            let mut s = x.sys.borrow_mut();
            if !s.sent.is_empty() {
                let frames = std::mem::take(&mut s.sent);
                outbox.lock().unwrap_or_else(|e| e.into_inner()).extend(frames);
            }
            s.received.clear();
        }
    }
}

/// A register bus into an [`RtlDevice`] from another thread: each access is a call into the RTL thread
/// (which keeps the clock running between them, as a card's runs), so a driver in the application thread
/// drives the simulated RNIC exactly as it drives the card's BAR.
pub struct ThreadBus {
    dev: Arc<RtlDevice>,
    hint: Arc<AtomicU32>,
}

impl ThreadBus {
    /// Tell the RTL thread how many send WQEs the driver has outstanding (its clock runs while any are).
    pub fn set_outstanding(&self, n: u32) {
        self.hint.store(n, Ordering::Relaxed);
    }
}

impl CsrBus for ThreadBus {
    fn write32(&mut self, addr: u32, value: u32) -> Result<(), DriverError> {
        self.dev.call(move |c| c.drv.bus().write32(addr, value)).map_err(|e| DriverError::Bus(format!("{e:#}")))?
    }
    fn read32(&mut self, addr: u32) -> Result<u32, DriverError> {
        self.dev.call(move |c| c.drv.bus().read32(addr)).map_err(|e| DriverError::Bus(format!("{e:#}")))?
    }
}

fn err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> anyhow::Error {
    move |e| anyhow!("{what}: {e}")
}

impl CmVerbs for RtlDevice {
    fn alloc(&self, len: usize) -> Result<u64> {
        Ok(self.mem.lock().unwrap_or_else(|e| e.into_inner()).alloc(len))
    }
    fn write_mem(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.mem.lock().unwrap_or_else(|e| e.into_inner()).write(addr, data).map_err(err("host memory"))
    }
    fn read_mem(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        self.mem.lock().unwrap_or_else(|e| e.into_inner()).read(addr, len).map_err(err("host memory"))
    }
    fn alloc_pd(&self) -> Result<Pd> {
        self.call(|c| c.drv.alloc_pd())
    }
    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<(u32, u32)> {
        let key = self.call(move |c| c.drv.reg_mr(pd, addr, len, access))?.map_err(err("reg_mr"))?;
        Ok((key, key))
    }
    fn create_cq(&self, cqe: u32) -> Result<Cq> {
        self.call(move |c| c.drv.create_cq(cqe))?.map_err(err("create_cq"))
    }
    fn create_gsi_qp(&self, pd: Pd, init: QpInitAttr) -> Result<u32> {
        self.call(move |c| c.drv.create_gsi_qp(pd, init))?.map_err(err("create_gsi_qp"))
    }
    fn modify_qp(&self, qpn: u32, attr: &QpAttr) -> Result<()> {
        let attr = attr.clone();
        self.call(move |c| c.drv.modify_qp(qpn, &attr))?.map_err(err("modify_qp"))
    }
    fn post_send(&self, qpn: u32, wr: SendWr) -> Result<()> {
        self.call(move |c| c.drv.post_send(qpn, &wr))?.map_err(err("post_send"))
    }
    fn post_recv(&self, qpn: u32, wr: RecvWr) -> Result<()> {
        self.call(move |c| c.drv.post_recv(qpn, &wr))?.map_err(err("post_recv"))
    }
    fn poll_cq(&self, cq: Cq, max: usize) -> Result<Vec<WorkCompletion>> {
        self.call(move |c| c.drv.poll_cq(cq, max))?.map_err(err("poll_cq"))
    }
    fn resolve(&self, ip: std::net::Ipv4Addr) -> Result<Option<testbench::wire::MacAddr>> {
        // polled from this (the application's) thread, so the RTL thread runs on between the polls
        let bus = |e: anyhow::Error| DriverError::Bus(format!("{e:#}"));
        let m = rnic_driver::driver::resolve_by(
            ip,
            &mut |ip| self.call(move |c| c.drv.arp_query(ip)).map_err(bus)?,
            &mut || self.call(|c| c.drv.arp_answer()).map_err(bus)?,
            &mut || std::thread::sleep(Duration::from_millis(1)),
        )?;
        Ok(Some(m))
    }
}

impl Verbs for RtlDevice {
    fn alloc_mw(&self, pd: Pd) -> Result<u32> {
        self.call(move |c| c.drv.alloc_mw(pd))?.map_err(err("alloc_mw"))
    }
    fn alloc_mw2(&self, pd: Pd) -> Result<u32> {
        self.call(move |c| c.drv.alloc_mw2(pd))?.map_err(err("alloc_mw2"))
    }
    fn bind_mw(&self, qpn: u32, mw: u32, mr: u32, addr: u64, len: u64, access: AccessFlags) -> Result<u32> {
        self.call(move |c| c.drv.bind_mw(qpn, mw, mr, addr, len, access))?.map_err(err("bind_mw"))
    }
    fn reg_mr_fast(&self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<(u32, u32)> {
        let key = self.call(move |c| c.drv.reg_mr_fast(pd, addr, len, access))?.map_err(err("reg_mr_fast"))?;
        Ok((key, key))
    }
    fn create_qp(&self, pd: Pd, init: QpInitAttr) -> Result<u32> {
        self.call(move |c| c.drv.create_qp(pd, init))?.map_err(err("create_qp"))
    }
    fn describe(&self) -> String {
        if self.board {
            "RTL in the U250 board shell (Verilator model; PCIe bridge and CMAC models at the IPs' ports, asynchronous PCIe clock)".into()
        } else {
            "RTL (Verilator model of the emitted Verilog, driven through the host interface)".into()
        }
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v = self.read_counters().unwrap_or_default();
        if let Ok((c, u, q)) = self.call(|c| {
            let s = c.sys.borrow();
            (s.cycle, s.out.underruns, s.queued_to_rnic() as u64)
        }) {
            v.push(("core_cycles".into(), c));
            v.push(("mac_tx_underruns".into(), u));
            // frames of the VM's still waiting to enter the RX MAC (every earlier Frame message has been
            // handed to the system: this call came after them through the same queue)
            v.push(("inbound_frames_queued".into(), q));
        }
        v
    }
    fn inbound_backlog(&self) -> Option<super::Backlog> {
        Some(self.inner.backlog.clone())
    }
    fn unexpected_drops(&self) -> Vec<(String, u64)> {
        self.counters()
            .into_iter()
            .filter(|(n, v)| *v != 0 && UNEXPECTED.contains(&n.as_str()))
            .collect()
    }
}

/// [`Endpoint`] over an [`RtlDevice`]: the VM's RoCE frames into the RNIC's RX MAC, its TX frames back.
pub struct RtlEndpoint {
    dev: Arc<RtlDevice>,
}

impl Endpoint for RtlEndpoint {
    fn on_frame(&mut self, frame: &[u8], _now_ns: u64) -> Vec<Vec<u8>> {
        self.dev.inner.backlog.offered.fetch_add(frame.len() as u64, Ordering::Relaxed);
        let _ = self.dev.send(Msg::Frame(frame.to_vec()));
        self.dev.frames_out()
    }
    fn poll(&mut self, _now_ns: u64) -> Vec<Vec<u8>> {
        self.dev.frames_out()
    }
    fn answers_icmp(&self) -> bool {
        true
    }
    fn answers_arp(&self) -> bool {
        true
    }
    fn answers_nd(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_exceeds_what_it_must_cover() {
        // 4.096 us x 2^t, strictly longer than the time given
        assert_eq!(timeout_exponent(100_000.0), 5); // 131 us
        assert_eq!(timeout_exponent(131_072.0), 6); // exactly 2^5 units is not longer
        assert_eq!(timeout_exponent(1e12), 22); // the Completer's longest
        // ours: 16 messages of 64 KiB at MTU 1024 queued at 100 Gb/s (92 us), twice 184 us: 2^6 units (262 us)
        assert_eq!(rtl_qp_timeout(16 * wire_bytes(65536, 1024), 100.0), 6);
        // 16 READs of 1 MiB: 1.47 ms, twice 2.94 ms: 2^10 units (4.2 ms)
        assert_eq!(rtl_qp_timeout(16 * wire_bytes(1 << 20, 1024), 100.0), 10);
        // one small message: the 100 us floor
        assert_eq!(rtl_qp_timeout(wire_bytes(4096, 1024), 100.0), 5);
        assert_eq!(wire_bytes(0, 1024), WIRE_OVERHEAD_BYTES);
    }

    #[test]
    fn the_vms_timeout_covers_rxes_window_at_the_simulation_speed() {
        if std::env::var_os("RNIC_SIM_SPEED").is_some() {
            return;
        }
        // MTU 1024: 128 packets (144 KB) at 80 Gb/s = 4,628 cycles = 116 ms of wall time at 40,000 cycles/s;
        // four times that is 463 ms: 2^17 units (537 ms)
        assert_eq!(vm_qp_timeout(1024), 17);
        // MTU 4096: 1.73 s: 2^19 (2.1 s); MTU 256: 146 ms: 2^16 (268 ms)
        assert_eq!(vm_qp_timeout(4096), 19);
        assert_eq!(vm_qp_timeout(256), 16);
        assert!(wall_for_inbound(128 * wire_bytes(1024, 1024)).as_secs_f64() > 0.09);
    }
}
