//! The RNIC's RTL (the Verilator model of the emitted Verilog, [`crate::system::System`]) as our side of the
//! rxe link, driven by the repo's driver (`testbench::driver`) through its register slave and host-memory
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
//! VM's frames into the RNIC's RX MAC (paced at 100G in simulated time) and steps the clock while anything is
//! moving. When every port has been quiet for [`QUIET_CYCLES`] and no send WQE is outstanding (the driver's
//! count: posted and not retired by a polled completion) it sleeps until a call or a frame arrives, and the VM
//! (TCG) gets the CPU; while a send WQE is outstanding it keeps stepping, so the Completer's retransmit timer
//! (in core cycles) runs and a lost ACK or response is retried (see [`RTL_QP_TIMEOUT`]).
//!
//! Host memory is shared: the application reads and writes its buffers directly, as a host program does.
//!
//! Simulated time and the VM's time are unrelated: the RNIC runs at about 10^5 cycles per wall second, a few
//! hundred times slower than real hardware, so rxe may retransmit on its 67 ms timer while the RNIC is still
//! working; the RNIC's responder re-ACKs duplicates, its completer drops stale responses.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use testbench::driver::{CsrBus, Driver};
use testbench::host::{CAP_RC, REG_COUNTERS};
use testbench::model::{AccessFlags, Cq, HostMemory, Pd, QpAttr, QpInitAttr, RecvWr, SendWr, WorkCompletion};

use super::verbs::Verbs;
use super::Endpoint;
use crate::system::{SimBus, System};

/// The retransmit timeout (IBA `timeout`, 4.096 us x 2^N) our harnesses give the RTL's QPs against rxe: 6 =
/// 262 us = 84,480 core cycles, about one wall second of simulation. rxe answers in wall time (a few ms
/// under TCG, so a few hundred simulated cycles); perftest's 14 (67 ms = 21.6 M cycles) would leave a lost
/// ACK unrecovered for minutes of simulation. A timer that fires while rxe is merely slow costs a go-back-N
/// that rxe answers as duplicates.
pub const RTL_QP_TIMEOUT: u8 = 6;
/// Quiet cycles after which the RTL thread stops stepping until something arrives.
pub const QUIET_CYCLES: u64 = 4096;
/// The rate at which the VM's frames enter the RNIC, in Gb/s of simulated time. rxe is a software transport
/// (a few Gb/s on a real host); under TCG it queues whole windows at once, which in simulated time would be
/// one line-rate burst of every frame the VM has produced while the (much slower in wall time) simulation ran.
/// 50 Gb/s is above anything rxe reaches and below what the Responder and Completer sustain per packet today
/// at MTU 1024 (about 32-36 cycles per 1 KiB packet; 100G brings one every 28.5); `rnic bench` measures
/// line rate RTL against RTL.
pub const INBOUND_GBPS: f64 = 25.0;
/// Cycles stepped between looks at the message queue.
const STEP_CYCLES: usize = 64;

/// One RNIC the RTL thread owns: the simulated system and the driver on its register slave.
pub struct Side {
    pub sys: Rc<RefCell<System>>,
    pub drv: Driver<SimBus>,
}

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

/// The RNIC's counter window, named (index = `COUNTER[i]`).
pub fn counter_names() -> Vec<String> {
    let mut v: Vec<String> = vec!["rx_good_frames".into()];
    for r in ["not_ipv4", "not_roce_udp", "not_for_us", "bad_length", "bad_opcode", "bad_tver", "bad_icrc", "overflow"] {
        v.push(format!("rx_drop_{r}"));
    }
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
const UNEXPECTED: [&str; 8] = [
    "mac_tx_underruns",
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
}

/// An RNIC to build: its addresses, inbound pacing and pcap directory.
#[derive(Clone, Debug)]
pub struct RtlConfig {
    pub mac: [u8; 6],
    pub ipv4: u32,
    pub inbound_gbps: f64,
    pub pcap_dir: Option<std::path::PathBuf>,
}

impl RtlDevice {
    /// Build the Verilator RNIC in its own thread, open it with the driver and give it `mac`/`ipv4`; frames
    /// from the peer reach its MAC at most at `inbound_gbps` of simulated time (see [`INBOUND_GBPS`]); with
    /// `pcap_dir`, its MAC writes `rnic-tx.pcap` and `rnic-rx.pcap` there.
    pub fn start(mac: [u8; 6], ipv4: u32, inbound_gbps: f64, pcap_dir: Option<std::path::PathBuf>) -> Result<Arc<RtlDevice>> {
        let mut v = Self::start_many(vec![RtlConfig { mac, ipv4, inbound_gbps, pcap_dir }], false)?;
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
        let mems: Vec<Arc<Mutex<HostMemory>>> = cfgs.iter().map(|_| Arc::new(Mutex::new(HostMemory::new()))).collect();
        let outbox = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, rx) = mpsc::channel::<Msg>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
        let (m2, o2) = (mems.clone(), outbox.clone());
        let thread = std::thread::Builder::new()
            .name("rtl".into())
            .stack_size(256 << 20)
            .spawn(move || {
                let core = (|| -> Result<Core> {
                    let mut sides: Vec<Side> = Vec::new();
                    for (c, mem) in cfgs.iter().zip(m2) {
                        let sys = System::new_detached(mem.clone(), c.pcap_dir.as_deref(), c.inbound_gbps)
                            .context("creating the Verilator RNIC")?;
                        let sys = Rc::new(RefCell::new(sys));
                        if paired && sides.len() == 1 {
                            System::pair(&sides[0usize].sys, &sys);
                        }
                        let mut drv = Driver::open(SimBus::new(sys.clone()), mem).map_err(|e| anyhow!("driver open: {e}"))?;
                        if drv.info.caps & CAP_RC == 0 {
                            bail!("the RNIC does not advertise RC");
                        }
                        drv.set_address(c.mac, c.ipv4).map_err(|e| anyhow!("set_address: {e}"))?;
                        sides.push(Side { sys, drv });
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
        let inner = Arc::new(Inner { tx: Mutex::new(tx), thread: Mutex::new(Some(thread)) });
        Ok(mems
            .into_iter()
            .enumerate()
            .map(|(side, mem)| Arc::new(RtlDevice { inner: inner.clone(), side, mem, outbox: outbox.clone() }))
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
            s.cycle.saturating_sub(s.last_activity) > QUIET_CYCLES && x.drv.send_outstanding() == 0
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

fn err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> anyhow::Error {
    move |e| anyhow!("{what}: {e}")
}

impl Verbs for RtlDevice {
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
    fn create_qp(&self, pd: Pd, init: QpInitAttr) -> Result<u32> {
        self.call(move |c| c.drv.create_qp(pd, init))?.map_err(err("create_qp"))
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
    fn describe(&self) -> String {
        "RTL (Verilator model of the emitted Verilog, driven through the host interface)".into()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v = self.read_counters().unwrap_or_default();
        if let Ok((c, u)) = self.call(|c| {
            let s = c.sys.borrow();
            (s.cycle, s.out.underruns)
        }) {
            v.push(("core_cycles".into(), c));
            v.push(("mac_tx_underruns".into(), u));
        }
        v
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
        let _ = self.dev.send(Msg::Frame(frame.to_vec()));
        self.dev.frames_out()
    }
    fn poll(&mut self, _now_ns: u64) -> Vec<Vec<u8>> {
        self.dev.frames_out()
    }
}
