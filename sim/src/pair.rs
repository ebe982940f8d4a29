//! Two endpoints on one Ethernet link through their [`Endpoint`]s: golden model against golden model, or the
//! model against an RTL endpoint.
//!
//! Each side is a device for the application (the verbs) and an [`Endpoint`] for the link, as in an rxe run
//! ([`crate::rxe::verbs::open_endpoint_with`]); [`Wire`] is the cable: a thread that moves every frame one
//! side emits to the other. The model is event driven (its timers run on the wire's clock, ns since the wire
//! started). Two RTL RNICs do not need it: [`crate::rxe::rtl_ep::RtlDevice::pair`] steps both in lockstep in
//! one thread, with the link between their MACs cycle by cycle.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::rxe::verbs::BoxedEndpoint;
use crate::rxe::Endpoint;

/// What crossed the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    pub a_to_b: u64,
    pub b_to_a: u64,
    pub bytes_a_to_b: u64,
    pub bytes_b_to_a: u64,
}

/// The cable between two endpoints, running until [`Wire::stop`].
pub struct Wire {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<WireStats>>,
}

impl Wire {
    pub fn connect(mut a: BoxedEndpoint, mut b: BoxedEndpoint) -> Wire {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut st = WireStats::default();
            let (mut to_a, mut to_b): (VecDeque<Vec<u8>>, VecDeque<Vec<u8>>) = (VecDeque::new(), VecDeque::new());
            while !s2.load(Ordering::Relaxed) {
                let now = t0.elapsed().as_nanos() as u64;
                to_b.extend(a.poll(now));
                to_a.extend(b.poll(now));
                let moved = !to_a.is_empty() || !to_b.is_empty();
                while !to_a.is_empty() || !to_b.is_empty() {
                    while let Some(f) = to_b.pop_front() {
                        st.a_to_b += 1;
                        st.bytes_a_to_b += f.len() as u64;
                        to_a.extend(b.on_frame(&f, now));
                    }
                    while let Some(f) = to_a.pop_front() {
                        st.b_to_a += 1;
                        st.bytes_b_to_a += f.len() as u64;
                        to_b.extend(a.on_frame(&f, now));
                    }
                }
                if !moved {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            st
        });
        Wire { stop, thread: Some(thread) }
    }

    /// Stop the cable; what crossed it.
    pub fn stop(mut self) -> WireStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default()
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Two RTL RNICs in lockstep, driven from the calling thread (demo, bench)

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;

use rnic_driver::Driver;
use testbench::model::{
    AccessFlags, AddressVector, Cq, HostMemory, Pd, QpAttr, QpCap, QpInitAttr, QpState, QpType, WorkCompletion,
};
use testbench::wire::frame::MacAddr;

use crate::system::{AnyDut, SimBus, System};

/// One of the two RNICs: its system, driver, host memory, one QP and one registered buffer.
pub struct RigSide {
    pub sys: Rc<RefCell<System<AnyDut>>>,
    pub drv: Driver<SimBus<AnyDut>>,
    pub mem: Arc<Mutex<HostMemory>>,
    pub mac: [u8; 6],
    pub ip: u32,
    /// The first QP (`qps[0]`) and all of them.
    pub qpn: u32,
    pub qps: Vec<u32>,
    pub cq: Cq,
    /// `buf_len` bytes registered with every access right; the first half holds a seeded pattern.
    pub buf: u64,
    pub key: u32,
}

/// Two Verilator RNICs on one 100G link in lockstep (a step of either steps both), each with its own driver
/// and host memory (500 ns away), RC QPs connected pairwise (QP i of A to QP i of B), in RTS, one CQ per
/// side; pcaps of both MACs under `pcap_dir/a` and `pcap_dir/b`.
pub struct PairRig {
    pub a: RigSide,
    pub b: RigSide,
}

impl PairRig {
    pub fn new(mtu: u32, buf_len: u64, pcap_dir: &std::path::Path) -> anyhow::Result<PairRig> {
        Self::with_qps(mtu, buf_len, 1, pcap_dir)
    }

    /// `nqp` QP pairs.
    pub fn with_qps(mtu: u32, buf_len: u64, nqp: usize, pcap_dir: &std::path::Path) -> anyhow::Result<PairRig> {
        Self::with_qps_on(mtu, buf_len, nqp, pcap_dir, None)
    }

    /// [`PairRig::with_qps`]; with `host`, each RNIC is the core inside the U250 board shell with its host
    /// memory behind the PCIe bridge model of those limits (`crate::board`), its link brought up first.
    pub fn with_qps_on(mtu: u32, buf_len: u64, nqp: usize, pcap_dir: &std::path::Path, host: Option<crate::board::PcieHost>) -> anyhow::Result<PairRig> {
        use anyhow::anyhow;
        let mk = |d: &str| -> anyhow::Result<(Rc<RefCell<System<AnyDut>>>, Arc<Mutex<HostMemory>>)> {
            let mem = Arc::new(Mutex::new(HostMemory::new()));
            let dut: AnyDut = match host {
                Some(h) => Box::new(crate::board::BoardDut::new(mem.clone(), h, d.len() as u64 + 0xB0A2D, None)),
                None => Box::new(crate::Clocked::<crate::vmodels::rnic::Rnic>::new(None)),
            };
            let s = System::detached_with(dut, mem.clone(), Some(&pcap_dir.join(d)), 100.0)?;
            Ok((Rc::new(RefCell::new(s)), mem))
        };
        let (sa, ma) = mk("a")?;
        let (sb, mb) = mk("b")?;
        System::pair(&sa, &sb);
        let mut sides = Vec::new();
        for (last, sys, mem) in [(1u8, sa, ma), (2, sb, mb)] {
            let mut drv = Driver::open(SimBus::new(sys.clone()), mem.clone()).map_err(|e| anyhow!("{e}"))?;
            if host.is_some() {
                crate::board::wait_link_up(&mut drv, &sys)?;
            }
            let (mac, ip) = ([2, 0, 0, 0, 0, last], 0x0A00_0000 | u32::from(last));
            drv.set_address(mac, ip).map_err(|e| anyhow!("{e}"))?;
            let buf = mem.lock().unwrap().alloc(buf_len as usize);
            let pat: Vec<u8> = (0..buf_len / 2).map(|i| ((i * 2_654_435_761) >> (13 + last)) as u8).collect();
            mem.lock().unwrap().write(buf, &pat).map_err(|e| anyhow!("{e}"))?;
            let pd: Pd = drv.alloc_pd();
            let key = drv.reg_mr(pd, buf, buf_len, AccessFlags::ALL).map_err(|e| anyhow!("{e}"))?;
            let cq = drv.create_cq(4096).map_err(|e| anyhow!("{e}"))?;
            let cap = QpCap { max_send_wr: 256, max_recv_wr: 256, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
            let mut qps = Vec::new();
            for _ in 0..nqp {
                qps.push(
                    drv.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap, sq_sig_all: false })
                        .map_err(|e| anyhow!("{e}"))?,
                );
            }
            sides.push(RigSide { sys, drv, mem, mac, ip, qpn: qps[0], qps, cq, buf, key });
        }
        let b = sides.pop().unwrap();
        let a = sides.pop().unwrap();
        let mut r = PairRig { a, b };
        for i in 0..nqp {
            let (qa, qb) = (r.a.qps[i], r.b.qps[i]);
            let (ta, tb) = ((r.a.mac, r.a.ip, qa), (r.b.mac, r.b.ip, qb));
            connect(&mut r.a, qa, tb, mtu, 0xFF_FF00, 0x10)?;
            connect(&mut r.b, qb, ta, mtu, 0x10, 0xFF_FF00)?;
        }
        Ok(r)
    }

    /// Step both RNICs `n` cycles.
    pub fn run(&mut self, n: u64) {
        let mut s = self.a.sys.borrow_mut();
        for _ in 0..n {
            s.step();
        }
    }

    /// Cycles so far.
    pub fn cycle(&self) -> u64 {
        self.a.sys.borrow().cycle
    }
}

impl RigSide {
    /// Poll this side's CQ until `n` completions arrived (stepping both RNICs 64 cycles between polls) or
    /// `max_cycles` passed.
    pub fn wait(&mut self, n: usize, max_cycles: u64) -> Vec<WorkCompletion> {
        let mut got = Vec::new();
        let c0 = self.sys.borrow().cycle;
        while got.len() < n && self.sys.borrow().cycle - c0 < max_cycles {
            got.extend(self.drv.poll_cq(self.cq, 64).unwrap_or_default());
            if got.len() < n {
                let mut s = self.sys.borrow_mut();
                for _ in 0..64 {
                    s.step();
                }
            }
        }
        got
    }
}

/// The three `modify_qp` steps that bring an RC QP to RTS, connected to `dest_qp` behind `av` (our send PSN
/// `sq_psn`, the peer's `rq_psn`): access ALL, `max_(dest_)rd_atomic` 16, `min_rnr_timer` 12, timeout 14,
/// retry and RNR retry 7. The pair rig and the pair tests connect their QPs with it.
pub fn rc_rts_attrs(mtu: u32, dest_qp: u32, av: AddressVector, sq_psn: u32, rq_psn: u32) -> [QpAttr; 3] {
    [
        QpAttr { qp_state: Some(QpState::Init), qp_access_flags: Some(AccessFlags::ALL), ..Default::default() },
        QpAttr {
            qp_state: Some(QpState::Rtr),
            path_mtu: Some(mtu),
            dest_qp_num: Some(dest_qp),
            rq_psn: Some(rq_psn),
            max_dest_rd_atomic: Some(16),
            min_rnr_timer: Some(12),
            av: Some(av),
            ..Default::default()
        },
        QpAttr {
            qp_state: Some(QpState::Rts),
            sq_psn: Some(sq_psn),
            timeout: Some(14),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            max_rd_atomic: Some(16),
            ..Default::default()
        },
    ]
}

fn connect(x: &mut RigSide, qpn: u32, (mac, ip, dqp): ([u8; 6], u32, u32), mtu: u32, psn_x: u32, psn_y: u32) -> anyhow::Result<()> {
    let av = AddressVector::new(MacAddr(mac), std::net::IpAddr::V4(ip.into()));
    for attr in rc_rts_attrs(mtu, dqp, av, psn_x, psn_y) {
        x.drv.modify_qp(qpn, &attr).map_err(|e| anyhow::anyhow!("modify_qp: {e}"))?;
    }
    Ok(())
}
