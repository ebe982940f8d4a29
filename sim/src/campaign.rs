//! Fault campaigns: the RTL on a link that drops, duplicates, reorders and corrupts frames
//! (`testbench::mac::MacFaults`, seeded), 16 QPs, rounds of 32 mixed verbs and sizes. Run by
//! `sim/tests/rnic_faults.rs` (CI) and by `rnic campaign`.
//!
//! * The RTL as responder, the golden model as requester (it retries as rxe does: go-back-N from the WQE on
//!   a timeout or a PSN-sequence NAK, a partly answered READ retried as a new READ for the rest).
//! * The RTL as requester (its go-back-N: the Completer's NAK / implied-NAK / retransmit-timer rewinds, WQE
//!   Check resuming mid-message, the SQ Ring reading the WQEs again), the golden model as responder.
//!
//! What must hold: every message completes with success at the requester, every byte lands where it should
//! (WRITE targets, SEND receive buffers, READ results), receive completions come exactly once per
//! SEND / SEND_WITH_INV / WRITE_WITH_IMMEDIATE, in order per QP, with the right length and immediate (a
//! SEND_WITH_INV's with WITH_INV and the fast-registration MR it named), nothing hangs, and no
//! DMA write of ours goes outside what the messages address (the rest of host memory is compared with a
//! shadow).

use std::path::Path;

use crate::rxe::rtl_ep::{counter, read_counter_window};
use crate::system::{rig, AnyDut};
use testbench::mac::MacFaults;
use testbench::model::link::LinkStats;

/// Append one line to a summary.
macro_rules! summary_line {
    ($s:ident, $($a:tt)*) => {{
        $s.push_str(&format!($($a)*));
        $s.push('\n');
    }};
}
use testbench::model::*;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Our buffer (2 MiB): WRITE targets, SEND receive buffers, READ sources (never written); one slot of
/// `STRIDE` per message of a round, so no two messages of a round touch the same bytes.
const WRITE_AREA: u64 = 0;
const RECV_AREA: u64 = 600 << 10;
const READ_AREA: u64 = 1280 << 10;
const SLOT: u64 = 16 << 10;
const STRIDE: u64 = SLOT + 64;
/// The peer's buffer: sources in the first MiB, READ destinations (one slot per message) in the second.
const PEER_READ_DEST: u64 = 1 << 20;
/// QP pairs, and messages per round (each side).
pub const QPS: usize = 16;
pub const PER_ROUND: usize = 32;

#[derive(Clone, Copy, Debug)]
struct Msg {
    op: WrOpcode,
    len: u64,
    qp: usize,
    /// Offsets: the peer's buffer (source, or READ destination) and ours (target, or READ source).
    peer_off: u64,
    our_off: u64,
    imm: u32,
}

fn counters<D: crate::system::RnicDut>(r: &mut crate::system::Rig<D>) -> Vec<(String, u64)> {
    read_counter_window(&mut r.drv).expect("counter read")
}

/// A link direction's fault counts, for a summary line.
fn link_faults(l: &LinkStats) -> String {
    format!("{} sent, {} dropped, {} duplicated, {} reordered, {} corrupted", l.sent, l.dropped, l.duplicated, l.reordered, l.corrupted)
}

/// The rig of the RTL against the golden model with [`QPS`] QP pairs (ours, the peer's), and a VCD of the RTL
/// from the start on request.
fn golden_rig(dut: AnyDut, mtu: u32, dir: &Path, vcd: Option<&Path>) -> (crate::system::Rig<AnyDut>, Vec<(u32, u32)>) {
    let mut r = traced_rig(dut, mtu, dir, vcd);
    let mut qps = vec![(r.qpn, r.peer_qpn)];
    for i in 1..QPS {
        qps.push(r.add_qp_pair(mtu, 0x10 * i as u32, 0xFF_FFF0 - i as u32));
    }
    (r, qps)
}

/// The rig of the RTL against the golden model (its first QP pair only), and a VCD of the RTL from the start on
/// request.
fn traced_rig(dut: AnyDut, mtu: u32, dir: &Path, vcd: Option<&Path>) -> crate::system::Rig<AnyDut> {
    let r = crate::system::rig_with(dut, mtu, dir);
    if let Some(v) = vcd {
        r.sys.borrow_mut().rnic.start_trace(v.to_str().expect("a UTF-8 VCD path"));
    }
    r
}

/// The golden sender's first MiB (the messages' sources) filled from `rng`, and the link's faults armed both
/// ways (seeded from `seed`).
fn fill_peer_and_arm_faults(r: &crate::system::Rig<AnyDut>, rng: &mut SmallRng, faults: MacFaults, seed: u64) {
    let mut s = r.sys.borrow_mut();
    let pat: Vec<u8> = (0..1 << 20).map(|_| rng.gen()).collect();
    s.peer.mem_mut().write(r.peer_buf, &pat).unwrap();
    s.out.set_faults(faults, seed ^ 0x7);
    s.inl.set_faults(faults, seed ^ 0x1u64);
}

pub fn responder(seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    responder_on(rtl_dut(), &RESPONDER_OPS, seed, mtu, rounds, faults, dir, vcd, progress)
}

/// The verbs of the responder campaign: WRITE, WRITE_WITH_IMM, SEND, READ and SEND_WITH_INV.
pub const RESPONDER_OPS: [WrOpcode; 5] =
    [WrOpcode::RdmaWrite, WrOpcode::RdmaWriteWithImm, WrOpcode::Send, WrOpcode::RdmaRead, WrOpcode::SendWithInv];

/// What the reference top (`sim/ref/`, emitted before SEND_WITH_INV was received) executes: the campaign
/// without SEND_WITH_INV.
pub const REFERENCE_RESPONDER_OPS: [WrOpcode; 4] =
    [WrOpcode::RdmaWrite, WrOpcode::RdmaWriteWithImm, WrOpcode::Send, WrOpcode::RdmaRead];

/// The RTL as today's Verilator model of the top.
pub fn rtl_dut() -> AnyDut {
    Box::new(crate::Clocked::<crate::vmodels::rnic::Rnic>::new(None))
}

/// [`responder`] on any implementation of the top (e.g. `sim::system::RefLockstep`), with the verbs `ops`.
#[allow(clippy::too_many_arguments)]
pub fn responder_on(dut: AnyDut, ops: &[WrOpcode], seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    let dir = dir.to_path_buf();
    let mut summary = String::new();
    let (mut r, qps) = golden_rig(dut, mtu, &dir, vcd);
    let mut rng = SmallRng::seed_from_u64(seed);
    fill_peer_and_arm_faults(&r, &mut rng, faults, seed);
    {
        let mut s = r.sys.borrow_mut();
        // the golden requester's retransmit timer: 4.096 us x 2^4 = 65.5 us (21,000 cycles), not the tools' 67 ms
        for &(_, pq) in &qps {
            s.peer.modify_qp(pq, &QpAttr { timeout: Some(4), ..Default::default() }).unwrap();
        }
    }
    // what host memory must look like: everything the messages do not address stays as it was
    let mut shadow = r.mem.lock().unwrap().read(r.src, 2 << 20).unwrap();
    let sizes = [0u64, 1, 100, mtu as u64 - 1, mtu as u64, mtu as u64 + 1, 4096, 10_000, SLOT];
    let mut total = 0;
    let is_send = |op: WrOpcode| matches!(op, WrOpcode::Send | WrOpcode::SendWithInv);
    // the verbs that take one of our receives
    let takes_recv = |op: WrOpcode| is_send(op) || op == WrOpcode::RdmaWriteWithImm;
    for round in 0..rounds {
        let mut msgs = Vec::new();
        for i in 0..PER_ROUND {
            let op = ops[rng.gen_range(0..ops.len())];
            let len = sizes[rng.gen_range(0..sizes.len())];
            let slot = i as u64 * STRIDE;
            let m = match op {
                WrOpcode::RdmaRead => Msg { op, len, qp: i % QPS, peer_off: PEER_READ_DEST + slot + rng.gen_range(0..8), our_off: READ_AREA + rng.gen_range(0..(2 << 20) - READ_AREA - SLOT), imm: 0 },
                // a SEND_WITH_INV names a fast-registration MR of ours (in `imm`), registered for it below
                WrOpcode::Send | WrOpcode::SendWithInv => Msg { op, len, qp: i % QPS, peer_off: rng.gen_range(0..(1 << 20) - SLOT), our_off: RECV_AREA + slot, imm: 0 },
                _ => Msg { op, len, qp: i % QPS, peer_off: rng.gen_range(0..(1 << 20) - SLOT), our_off: WRITE_AREA + slot + rng.gen_range(0..8), imm: rng.gen() },
            };
            msgs.push(m);
        }
        // each SEND_WITH_INV's key: a fast-registration MR over a page of the READ area (never written)
        for m in msgs.iter_mut().filter(|m| m.op == WrOpcode::SendWithInv) {
            m.imm = r.drv.reg_mr_fast(Pd(1), r.src + READ_AREA, 4096, AccessFlags::ALL).unwrap();
        }
        // our receives first (a missing one would cost an RNR wait): one per SEND / WRITE_WITH_IMM
        for (i, m) in msgs.iter().enumerate() {
            if takes_recv(m.op) {
                let (addr, length) = if is_send(m.op) { (r.src + m.our_off, SLOT as u32) } else { (r.src + RECV_AREA + i as u64 * STRIDE, 0) };
                r.drv.post_recv(qps[m.qp].0, &RecvWr { wr_id: (round * PER_ROUND + i) as u64, sg_list: vec![Sge { addr, length, lkey: r.lkey }] }).unwrap();
            }
        }
        {
            let mut s = r.sys.borrow_mut();
            for (i, m) in msgs.iter().enumerate() {
                let id = (round * PER_ROUND + i) as u64;
                let (laddr, raddr) = (r.peer_buf + m.peer_off, r.src + m.our_off);
                let mut w = SendWr::new(id, m.op, vec![Sge { addr: laddr, length: m.len as u32, lkey: r.peer_rkey }]);
                w.flags.signaled = true;
                w.remote_addr = raddr;
                w.rkey = r.lkey;
                w.imm_data = m.imm;
                if m.op == WrOpcode::SendWithInv {
                    (w.imm_data, w.invalidate_rkey) = (0, m.imm);
                }
                s.peer.post_send(qps[m.qp].1, w).unwrap();
            }
        }
        // run until the peer has every completion (and poll ours as they come)
        let mut peer_wcs = Vec::new();
        let mut ours = Vec::new();
        let want_ours = msgs.iter().filter(|m| takes_recv(m.op)).count();
        let mut steps = 0u64;
        while peer_wcs.len() < PER_ROUND || ours.len() < want_ours {
            assert!(steps < 30_000_000, "round {round}: hung with {} of {PER_ROUND} peer completions, {} of {want_ours} ours", peer_wcs.len(), ours.len());
            {
                let mut s = r.sys.borrow_mut();
                for _ in 0..2048 {
                    s.step();
                }
                peer_wcs.extend(s.peer.poll_cq(r.peer_cq, 64));
            }
            ours.extend(r.drv.poll_cq(Cq(0), 64).unwrap());
            steps += 2048;
        }
        assert!(peer_wcs.iter().all(|w| w.status == WcStatus::Success), "round {round}: {peer_wcs:?}");
        let mut ids: Vec<u64> = peer_wcs.iter().map(|w| w.wr_id).collect();
        ids.sort();
        assert_eq!(ids, ((round * PER_ROUND) as u64..((round + 1) * PER_ROUND) as u64).collect::<Vec<_>>());
        // our receive completions: exactly one per SEND / WRITE_WITH_IMM, in posting order per QP
        assert_eq!(ours.len(), want_ours, "round {round}: {ours:?}");
        for q in 0..QPS {
            let want: Vec<usize> = (0..PER_ROUND).filter(|&i| msgs[i].qp == q && takes_recv(msgs[i].op)).collect();
            let got: Vec<&WorkCompletion> = ours.iter().filter(|w| w.qp_num == qps[q].0).collect();
            assert_eq!(got.len(), want.len(), "round {round} QP {q}");
            for (w, &i) in got.iter().zip(&want) {
                let m = msgs[i];
                assert_eq!(w.wr_id, (round * PER_ROUND + i) as u64, "round {round} QP {q}: order");
                assert_eq!(w.status, WcStatus::Success);
                assert_eq!(w.byte_len as u64, m.len);
                if m.op == WrOpcode::RdmaWriteWithImm {
                    assert_eq!((w.opcode, w.imm_data), (WcOpcode::RecvRdmaWithImm, m.imm));
                } else {
                    assert_eq!(w.opcode, WcOpcode::Recv);
                    // a SEND_WITH_INV invalidated its key once (a duplicate is re-ACKed, not executed)
                    let inv = m.op == WrOpcode::SendWithInv;
                    assert_eq!(w.wc_flags.has(WcFlags::WITH_INV), inv, "round {round} QP {q}: {w:?}");
                    assert_eq!(w.invalidated_rkey, if inv { m.imm } else { 0 }, "round {round} QP {q}: {w:?}");
                }
            }
        }
        // the round's fast-registration MRs are freed for the next round's
        for m in msgs.iter().filter(|m| m.op == WrOpcode::SendWithInv) {
            r.drv.dereg_mr(m.imm).unwrap();
        }
        // every byte
        let s = r.sys.borrow();
        let mem = r.mem.lock().unwrap();
        for (i, m) in msgs.iter().enumerate() {
            let n = m.len as usize;
            match m.op {
                WrOpcode::RdmaRead => {
                    let got = s.peer.mem().read(r.peer_buf + m.peer_off, n).unwrap();
                    assert!(got == mem.read(r.src + m.our_off, n).unwrap(), "round {round} msg {i}: READ of {n}");
                }
                _ => {
                    let want = s.peer.mem().read(r.peer_buf + m.peer_off, n).unwrap();
                    let at = (m.our_off) as usize;
                    shadow[at..at + n].copy_from_slice(&want);
                }
            }
        }
        let now = mem.read(r.src, 2 << 20).unwrap();
        if now != shadow {
            let i = now.iter().zip(&shadow).position(|(a, b)| a != b).unwrap();
            panic!("round {round}: host memory differs from the shadow first at offset {i:#x}");
        }
        total += PER_ROUND;
        progress(round + 1);
        drop(mem);
        drop(s);
    }
    let s = r.sys.borrow();
    let (o, i) = (s.out.stats.clone(), s.inl.stats.clone());
    let pc = s.peer.counters().clone();
    let cycles = s.cycle;
    drop(s);
    let c = counters(&mut r);
    let get = |n: &str| counter(&c, n);
    summary_line!(summary, "{total} messages over {QPS} QPs at MTU {mtu} in {cycles} cycles; link to the RTL: {}; from the RTL: {}", link_faults(&i), link_faults(&o));
    summary_line!(summary, 
        "golden requester: {} go-back-N passes ({} after a timeout), {} packets retransmitted, {} implied NAKs, NAKs received {:?}; RTL: {} duplicates, {} PSN-sequence NAKs, {} out-of-sequence drops, {} duplicates without resource, {} bad-ICRC drops",
        pc.retries, pc.timeouts, pc.tx_retransmitted_packets, pc.implied_naks, pc.naks_received,
        get("resp_duplicates"), get("resp_nak_psn_seq"), get("resp_drop_out_of_seq"), get("resp_drop_dup_no_resource"), get("rx_drop_bad_icrc")
    );
    summary_line!(summary, "RX Parse: {} good frames, {} overflow drops", get("rx_good_frames"), get("rx_drop_overflow"));
    // the faults were exercised and recovered from
    assert!(i.dropped > 0 && o.dropped > 0, "no frame dropped: rates too low for the run");
    assert!(pc.retries > 0 && get("resp_duplicates") > 0);
    // no class-C error, nothing dropped as QP-in-error, no lookup failures: only the link's faults. (RX Parse
    // overflows are counted but not an error here: a go-back-N pass arrives at line rate, faster than the
    // Responder executes small packets, and the requester's next retry recovers them.)
    for n in ["resp_class_c_naks", "resp_drop_qp_error", "resp_drop_qp_lookup", "resp_drop_malformed"] {
        assert_eq!(get(n), 0, "{n}: {c:?}");
    }
    assert!(r.sys.borrow().dma.faults.is_empty());
    summary
}


/// UC QP pairs of the UC campaign, and messages per round.
const UC_QPS: usize = 4;
pub const UC_PER_ROUND: usize = 16;
/// Receive buffers of the UC campaign (SLOT bytes each, in RECV_AREA), and how many receives a QP keeps posted.
const UC_BUFS: usize = 16;
const UC_POSTED: usize = 4;

/// The UC campaign: the golden model sends SEND, SEND_WITH_IMM, RDMA WRITE and WRITE_WITH_IMM on [`UC_QPS`]
/// UC QP pairs to the RTL over a link with faults (drops, duplicates, reorders, corruption). UC recovers
/// nothing: a message that loses a packet is never completed, a duplicated or late FIRST/ONLY may deliver a
/// message again, and a SEND that finds no receive is dropped. What must hold: the sender completes every
/// WQE (on transmit); every receive completion of ours is SUCCESS, takes our receive WQEs in posting order,
/// and holds one whole message of its QP, byte for byte (its length, immediate, SEND data in its buffer,
/// WRITE_WITH_IMM data at its target): never a corrupt or partial one; no DMA write outside the WRITE targets
/// and the receive buffers; no class-C error, no QP in error; the drops are counted (`resp_drop_uc`).
pub fn uc_responder(seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    unreliable_responder(QpType::Uc, seed, mtu, rounds, faults, dir, vcd, progress)
}

/// The UD campaign: as the UC campaign ([`uc_responder`]), on UD QP pairs with SEND and SEND_WITH_IMM (some
/// longer than the MTU: the sender completes them unsent). What must hold besides the UC campaign's rules:
/// every receive completion holds one whole datagram of its QP behind the GRH area (20 zero bytes, an IPv4
/// header from the peer to us), `byte_len` = payload + 40, the peer's QPN as `src_qp`, the GRH flag; a lost,
/// corrupted or unreceived datagram is simply not delivered; a duplicated one may be delivered twice, as rxe
/// would.
pub fn ud_responder(seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    unreliable_responder(QpType::Ud, seed, mtu, rounds, faults, dir, vcd, progress)
}

/// The UC and UD campaigns.
#[allow(clippy::too_many_arguments)]
fn unreliable_responder(ty: QpType, seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    use std::collections::VecDeque;
    let ud = ty == QpType::Ud;
    let mut summary = String::new();
    let mut r = traced_rig(rtl_dut(), mtu, dir, vcd);
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qps: Vec<(u32, u32)> =
        (0..UC_QPS).map(|i| r.add_qp_pair_of(ty, mtu, 0x10 * i as u32, 0xFF_FFF0 - i as u32, cap, Cq(0))).collect();
    let our_av = crate::system::our_av();
    let mut rng = SmallRng::seed_from_u64(seed);
    fill_peer_and_arm_faults(&r, &mut rng, faults, seed);
    let before = r.mem.lock().unwrap().read(r.src, 2 << 20).unwrap();
    let sizes: Vec<u64> = if ud {
        // (above the MTU: completed unsent)
        vec![0, 1, 100, mtu as u64 - 1, mtu as u64, mtu as u64 + 1]
    } else {
        vec![0, 1, 100, mtu as u64 - 1, mtu as u64, mtu as u64 + 1, 4096, 10_000, SLOT]
    };
    let mut free: Vec<u64> = (0..UC_BUFS as u64).collect();
    // per QP: the receives posted and not completed (wr_id, buffer), oldest first
    let mut posted: Vec<VecDeque<(u64, u64)>> = vec![VecDeque::new(); UC_QPS];
    let mut next_wr = 0u64;
    let (mut sent, mut delivered) = (0usize, 0usize);
    let mut recent: Vec<Vec<Msg>> = vec![Vec::new(); UC_QPS];
    for round in 0..rounds {
        let mut msgs = Vec::new();
        for i in 0..UC_PER_ROUND {
            let op = if ud {
                [WrOpcode::Send, WrOpcode::SendWithImm][rng.gen_range(0..2)]
            } else {
                [WrOpcode::RdmaWrite, WrOpcode::RdmaWriteWithImm, WrOpcode::Send, WrOpcode::SendWithImm][rng.gen_range(0..4)]
            };
            let len = sizes[rng.gen_range(0..sizes.len())];
            let our_off = WRITE_AREA + i as u64 * STRIDE + rng.gen_range(0..8);
            msgs.push(Msg { op, len, qp: i % UC_QPS, peer_off: rng.gen_range(0..(1 << 20) - SLOT), our_off, imm: rng.gen() });
        }
        // receives for the SENDs and WRITE_WITH_IMMs, while the QP has fewer than UC_POSTED and a buffer is free
        for m in &msgs {
            if m.op != WrOpcode::RdmaWrite && posted[m.qp].len() < UC_POSTED {
                if let Some(b) = free.pop() {
                    next_wr += 1;
                    let addr = r.src + RECV_AREA + b * STRIDE;
                    r.drv.post_recv(qps[m.qp].0, &RecvWr { wr_id: next_wr, sg_list: vec![Sge { addr, length: SLOT as u32, lkey: r.lkey }] }).unwrap();
                    posted[m.qp].push_back((next_wr, b));
                }
            }
        }
        {
            let mut s = r.sys.borrow_mut();
            for (i, m) in msgs.iter().enumerate() {
                let mut w = SendWr::new((round * UC_PER_ROUND + i) as u64, m.op, vec![Sge { addr: r.peer_buf + m.peer_off, length: m.len as u32, lkey: r.peer_rkey }]);
                w.flags.signaled = true;
                w.remote_addr = r.src + m.our_off;
                w.rkey = r.lkey;
                w.imm_data = m.imm;
                if ud {
                    w.ud = Some(UdDest { av: our_av, remote_qpn: qps[m.qp].0, remote_qkey: crate::system::UD_QKEY });
                }
                s.peer.post_send(qps[m.qp].1, w).unwrap();
            }
        }
        // the sender completes on transmit; then run until the RNIC has been quiet for a while
        let mut peer_wcs = Vec::new();
        let mut ours = Vec::new();
        let mut steps = 0u64;
        loop {
            assert!(steps < 30_000_000, "round {round}: hung with {} of {UC_PER_ROUND} peer completions", peer_wcs.len());
            let quiet = {
                let mut s = r.sys.borrow_mut();
                for _ in 0..2048 {
                    s.step();
                }
                peer_wcs.extend(s.peer.poll_cq(r.peer_cq, 64));
                s.cycle > s.last_activity + 20_000
            };
            ours.extend(r.drv.poll_cq(Cq(0), 64).unwrap());
            steps += 2048;
            if peer_wcs.len() == UC_PER_ROUND && quiet {
                break;
            }
        }
        ours.extend(r.drv.poll_cq(Cq(0), 64).unwrap());
        assert!(peer_wcs.iter().all(|w| w.status == WcStatus::Success), "round {round}: {peer_wcs:?}");
        sent += UC_PER_ROUND;
        for q in 0..UC_QPS {
            recent[q].extend(msgs.iter().filter(|m| m.qp == q).copied());
            let keep = recent[q].len().saturating_sub(3 * UC_PER_ROUND / UC_QPS);
            recent[q].drain(..keep);
        }
        let s = r.sys.borrow();
        let mem = r.mem.lock().unwrap();
        for w in &ours {
            let q = qps.iter().position(|p| p.0 == w.qp_num).unwrap_or_else(|| panic!("round {round}: a completion for QP {:#x}", w.qp_num));
            assert_eq!(w.status, WcStatus::Success, "round {round}: {w:?}");
            let (wr_id, b) = posted[q].pop_front().unwrap_or_else(|| panic!("round {round}: a completion with no receive posted: {w:?}"));
            assert_eq!(w.wr_id, wr_id, "round {round} QP {q}: receives taken out of order");
            // the whole message it holds, one of the QP's messages of this round or the two before
            let src = |m: &Msg| s.peer.mem().read(r.peer_buf + m.peer_off, m.len as usize).unwrap();
            let buf = r.src + RECV_AREA + b * STRIDE;
            // UD: the datagram behind its GRH area (20 zero bytes, then an IPv4 header from the peer to us)
            let ud_whole = |m: &Msg| {
                let imm = m.op == WrOpcode::SendWithImm;
                let grh = mem.read(buf, 40).unwrap();
                m.len + 40 == u64::from(w.byte_len)
                    && w.opcode == WcOpcode::Recv
                    && w.src_qp == qps[q].1
                    && w.wc_flags.has(WcFlags::GRH)
                    && w.wc_flags.has(WcFlags::WITH_IMM) == imm
                    && (!imm || w.imm_data == m.imm)
                    && grh[..20] == [0u8; 20]
                    && grh[20] == 0x45
                    && grh[36..40] == crate::system::OUR_IP.to_be_bytes()
                    && mem.read(buf + 40, m.len as usize).unwrap() == src(m)
            };
            let whole = recent[q].iter().any(|m| {
                if ud {
                    return ud_whole(m);
                }
                m.len == u64::from(w.byte_len)
                    && match m.op {
                        WrOpcode::RdmaWriteWithImm => {
                            (w.opcode, w.imm_data) == (WcOpcode::RecvRdmaWithImm, m.imm)
                                && msgs.iter().any(|x| x.our_off == m.our_off)
                                && mem.read(r.src + m.our_off, m.len as usize).unwrap() == src(m)
                        }
                        WrOpcode::Send | WrOpcode::SendWithImm => {
                            let imm = m.op == WrOpcode::SendWithImm;
                            w.opcode == WcOpcode::Recv
                                && w.wc_flags.has(WcFlags::WITH_IMM) == imm
                                && (!imm || w.imm_data == m.imm)
                                && mem.read(buf, m.len as usize).unwrap() == src(m)
                        }
                        _ => false,
                    }
            });
            assert!(whole, "round {round} QP {q}: a completion that holds no whole message of its QP: {w:?}");
            delivered += 1;
            free.push(b);
        }
        // nothing written outside the WRITE targets and the receive buffers
        let now = mem.read(r.src, 2 << 20).unwrap();
        let writable = |a: usize| (a as u64) < WRITE_AREA + UC_PER_ROUND as u64 * STRIDE || (RECV_AREA..RECV_AREA + UC_BUFS as u64 * STRIDE).contains(&(a as u64));
        if let Some(i) = now.iter().zip(&before).enumerate().position(|(a, (x, y))| x != y && !writable(a)) {
            panic!("round {round}: host memory written outside the messages' targets at offset {i:#x}");
        }
        progress(round + 1);
    }
    let s = r.sys.borrow();
    let (o, i) = (s.out.stats.clone(), s.inl.stats.clone());
    let cycles = s.cycle;
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
    drop(s);
    let c = counters(&mut r);
    let get = |n: &str| counter(&c, n);
    let name = if ud { "UD" } else { "UC" };
    summary_line!(summary, "{name}: {sent} messages over {UC_QPS} QPs at MTU {mtu} in {cycles} cycles; link to the RTL: {}", link_faults(&i));
    summary_line!(summary, "RTL: {delivered} receive completions, each a whole message; {} requests, {} dropped by the UC/UD rules, {} bad-ICRC drops, {} overflow drops", get("resp_requests"), get("resp_drop_uc"), get("rx_drop_bad_icrc"), get("rx_drop_overflow"));
    assert!(i.dropped > 0, "no frame dropped: rates too low for the run");
    // (UC: a lost packet leaves the rest of its message to drop; a UD datagram lost on the link is simply gone)
    assert!(ud || get("resp_drop_uc") > 0, "the link's losses left no UC drop to count");
    assert!(delivered > 0, "nothing delivered");
    // UC answers nothing and never goes to error here
    assert_eq!(o.sent, 0, "the RTL sent {} frames on UC QPs", o.sent);
    for n in ["resp_class_c_naks", "resp_drop_qp_error", "resp_drop_malformed", "resp_acks", "resp_nak_psn_seq", "resp_rnr_naks"] {
        assert_eq!(get(n), 0, "{n}: {c:?}");
    }
    summary
}



/// The RTL as requester: our driver posts the messages (WRITE, WRITE_WITH_IMM, SEND, READ, and about one in
/// nine a local operation: a LOCAL_INV of a fast-registration MR of its own or a BIND_MW of a type 2 window of
/// its own), the golden model answers. Every WQE completes with success and its WC opcode, each QP's in posting
/// order (a local operation after the WQEs before it on its QP, through the go-back-Ns that read it again
/// and must not do it again: a bind done twice fails); after the last round our SEND gathering from an
/// invalidated key completes LOC_PROT_ERR.
pub fn requester(seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    requester_on(rtl_dut(), true, seed, mtu, rounds, faults, dir, vcd, progress)
}

/// [`requester`] on any implementation of the top, with LOCAL_INVs among the messages or not (the reference
/// top, `sim/ref`, was emitted before LOCAL_INV; without them the messages are what they were then).
#[allow(clippy::too_many_arguments)]
pub fn requester_on(dut: AnyDut, local_inv: bool, seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    let dir = dir.to_path_buf();
    let mut summary = String::new();
    let (mut r, qps) = golden_rig(dut, mtu, &dir, vcd);
    let mut rng = SmallRng::seed_from_u64(seed);
    // our retransmit timer: 4.096 us x 2^4 = 65.5 us (21,000 cycles)
    for &(q, _) in &qps {
        r.drv.modify_qp(q, &QpAttr { timeout: Some(4), ..Default::default() }).unwrap();
    }
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..2 << 20).map(|_| rng.gen()).collect();
        s.peer.mem_mut().write(r.peer_buf, &pat).unwrap();
        s.out.set_faults(faults, seed ^ 0x7);
        s.inl.set_faults(faults, seed ^ 0x1);
    }
    let sizes = [0u64, 1, 100, mtu as u64 - 1, mtu as u64, mtu as u64 + 1, 4096, 10_000, SLOT];
    let mut shadow = r.mem.lock().unwrap().read(r.src, 2 << 20).unwrap();
    let (mut total, mut n_linv, mut n_bind) = (0, 0, 0);
    let bind_mr = r.drv.reg_mr(Pd(1), r.src + (1 << 20), 1 << 16, AccessFlags::ALL | AccessFlags::MW_BIND).unwrap();
    for round in 0..rounds {
        let mut msgs = Vec::new();
        for i in 0..PER_ROUND {
            let mut op = [WrOpcode::RdmaWrite, WrOpcode::RdmaWriteWithImm, WrOpcode::Send, WrOpcode::RdmaRead][rng.gen_range(0..4)];
            if local_inv && rng.gen_range(0..9) == 0 {
                op = if rng.gen() { WrOpcode::LocalInv } else { WrOpcode::BindMw };
            }
            let len = sizes[rng.gen_range(0..sizes.len())];
            let slot = i as u64 * STRIDE;
            // our_off: our source (or READ destination); peer_off: the peer's target (or READ source)
            let m = match op {
                WrOpcode::RdmaRead => Msg { op, len, qp: i % QPS, our_off: (1 << 20) + slot + rng.gen_range(0..8), peer_off: READ_AREA + rng.gen_range(0..(2 << 20) - READ_AREA - SLOT), imm: 0 },
                WrOpcode::Send => Msg { op, len, qp: i % QPS, our_off: rng.gen_range(0..(1 << 20) - SLOT), peer_off: RECV_AREA + slot, imm: 0 },
                // its key: a fast-registration MR of its own over a page of our buffer (registered below)
                WrOpcode::LocalInv | WrOpcode::BindMw => Msg { op, len: 0, qp: i % QPS, our_off: 0, peer_off: 0, imm: 0 },
                _ => Msg { op, len, qp: i % QPS, our_off: rng.gen_range(0..(1 << 20) - SLOT), peer_off: WRITE_AREA + slot + rng.gen_range(0..8), imm: rng.gen() },
            };
            msgs.push(m);
        }
        {
            let mut s = r.sys.borrow_mut();
            for (i, m) in msgs.iter().enumerate() {
                if matches!(m.op, WrOpcode::Send | WrOpcode::RdmaWriteWithImm) {
                    let (addr, length) = if m.op == WrOpcode::Send { (r.peer_buf + m.peer_off, SLOT as u32) } else { (r.peer_buf + RECV_AREA + i as u64 * STRIDE, 0) };
                    s.peer.post_recv(qps[m.qp].1, RecvWr { wr_id: (round * PER_ROUND + i) as u64, sg_list: vec![Sge { addr, length, lkey: r.peer_rkey }] }).unwrap();
                }
            }
        }
        for m in msgs.iter_mut().filter(|m| m.op == WrOpcode::LocalInv) {
            m.imm = r.drv.reg_mr_fast(Pd(1), r.src + (1 << 20), 4096, AccessFlags::ALL).unwrap();
        }
        // each BIND_MW's window: a type 2 window of its own, bound with its next key over a page of `bind_mr`
        for m in msgs.iter_mut().filter(|m| m.op == WrOpcode::BindMw) {
            let w = r.drv.alloc_mw2(Pd(1)).unwrap();
            m.imm = rnic_driver::verbs::inc_rkey(w);
        }
        for (i, m) in msgs.iter().enumerate() {
            let id = (round * PER_ROUND + i) as u64;
            let mut w = SendWr::new(id, m.op, vec![Sge { addr: r.src + m.our_off, length: m.len as u32, lkey: r.lkey }]);
            w.flags.signaled = true;
            w.remote_addr = r.peer_buf + m.peer_off;
            w.rkey = r.peer_rkey;
            w.imm_data = m.imm;
            if m.op == WrOpcode::LocalInv {
                (w.sg_list, w.invalidate_rkey, w.imm_data) = (vec![], m.imm, 0);
            }
            if m.op == WrOpcode::BindMw {
                w.sg_list = vec![Sge { addr: r.src + (1 << 20) + 4096, length: 4096, lkey: bind_mr }];
                (w.rkey, w.imm_data, w.mw_access) = (m.imm, 0, AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0));
            }
            inline_every_other(&mut w, &r.mem);
            r.drv.post_send(qps[m.qp].0, &w).unwrap();
        }
        let mut ours: Vec<WorkCompletion> = Vec::new();
        let mut peer_wcs = Vec::new();
        let want_peer = msgs.iter().filter(|m| matches!(m.op, WrOpcode::Send | WrOpcode::RdmaWriteWithImm)).count();
        let mut steps = 0u64;
        while ours.len() < PER_ROUND || peer_wcs.len() < want_peer {
            if steps >= 5_000_000 {
                let done: std::collections::HashSet<u64> = ours.iter().map(|w: &WorkCompletion| w.wr_id).collect();
                for (i, m) in msgs.iter().enumerate() {
                    let id = (round * PER_ROUND + i) as u64;
                    if !done.contains(&id) {
                        let s = r.sys.borrow();
                        let pq = s.peer.qp(qps[m.qp].1).unwrap();
                        eprintln!("incomplete: id {id} QP {} (ours {:#x}, peer {:#x}) {:?} len {}: peer resp psn {:#x}", m.qp, qps[m.qp].0, qps[m.qp].1, m.op, m.len, pq.resp.psn);
                    }
                }
                let c = counters(&mut r);
                eprintln!("{c:?}; pcaps in {}", dir.display());
                if std::env::var("RNIC_HANG_VCD").is_ok() {
                    let mut s = r.sys.borrow_mut();
                    let p = dir.join("hang.vcd");
                    s.rnic.start_trace(p.to_str().unwrap());
                    for _ in 0..3000 {
                        s.step();
                    }
                    eprintln!("VCD of 3,000 cycles: {}", p.display());
                }
                panic!("round {round}: hung with {} of {PER_ROUND} of our completions, {} of {want_peer} at the peer", ours.len(), peer_wcs.len());
            }
            {
                let mut s = r.sys.borrow_mut();
                for _ in 0..2048 {
                    s.step();
                }
                peer_wcs.extend(s.peer.poll_cq(r.peer_cq, 64));
            }
            ours.extend(r.drv.poll_cq(Cq(0), 64).unwrap());
            steps += 2048;
        }
        assert!(ours.iter().all(|w| w.status == WcStatus::Success), "round {round}: {ours:?}");
        for w in &ours {
            let m = &msgs[w.wr_id as usize - round * PER_ROUND];
            assert_eq!(w.opcode, WcOpcode::from_wr(m.op), "round {round}: {w:?}");
            if m.op.is_local() {
                assert_eq!(w.byte_len, 0, "round {round}: {w:?}");
            }
        }
        for q in 0..QPS {
            let order: Vec<u64> = ours.iter().filter(|w| w.qp_num == qps[q].0).map(|w| w.wr_id).collect();
            assert!(order.windows(2).all(|p| p[0] < p[1]), "round {round} QP {q}: completions out of posting order: {order:?}");
        }
        let mut ids: Vec<u64> = ours.iter().map(|w: &WorkCompletion| w.wr_id).collect();
        ids.sort();
        assert_eq!(ids, ((round * PER_ROUND) as u64..((round + 1) * PER_ROUND) as u64).collect::<Vec<_>>(), "one completion per message");
        assert_eq!(peer_wcs.len(), want_peer);
        for q in 0..QPS {
            let want: Vec<usize> = (0..PER_ROUND).filter(|&i| msgs[i].qp == q && matches!(msgs[i].op, WrOpcode::Send | WrOpcode::RdmaWriteWithImm)).collect();
            let got: Vec<&WorkCompletion> = peer_wcs.iter().filter(|w| w.qp_num == qps[q].1).collect();
            assert_eq!(got.len(), want.len(), "round {round} QP {q}");
            for (w, &i) in got.iter().zip(&want) {
                assert_eq!((w.wr_id, w.status, w.byte_len as u64), ((round * PER_ROUND + i) as u64, WcStatus::Success, msgs[i].len));
                if msgs[i].op == WrOpcode::RdmaWriteWithImm {
                    assert_eq!(w.imm_data, msgs[i].imm);
                }
            }
        }
        let s = r.sys.borrow();
        let mem = r.mem.lock().unwrap();
        for (i, m) in msgs.iter().enumerate() {
            let n = m.len as usize;
            let peer = s.peer.mem().read(r.peer_buf + m.peer_off, n).unwrap();
            if m.op == WrOpcode::RdmaRead {
                assert!(mem.read(r.src + m.our_off, n).unwrap() == peer, "round {round} msg {i}: READ of {n}");
                let at = m.our_off as usize;
                shadow[at..at + n].copy_from_slice(&peer);
            } else {
                assert!(mem.read(r.src + m.our_off, n).unwrap() == peer, "round {round} msg {i}: {:?} of {n}", m.op);
            }
        }
        let now = mem.read(r.src, 2 << 20).unwrap();
        if now != shadow {
            let i = now.iter().zip(&shadow).position(|(a, b)| a != b).unwrap();
            panic!("round {round}: our memory differs from the shadow first at offset {i:#x}");
        }
        drop(mem);
        drop(s);
        // the LOCAL_INVs' keys: invalid now (after the last round, one is tried: our SEND gathering from it on a
        // QP of its own completes LOC_PROT_ERR), then freed
        let keys: Vec<u32> = msgs.iter().filter(|m| m.op == WrOpcode::LocalInv).map(|m| m.imm).collect();
        if round + 1 == rounds {
            if let Some(&k) = keys.last() {
                let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
                let (q, _) = r.add_qp_pair_with(mtu, 0x1000, 0x2000, cap, Cq(0));
                r.drv.post_send(q, &SendWr::new(1 << 40, WrOpcode::Send, vec![Sge { addr: r.src + (1 << 20), length: 64, lkey: k }])).unwrap();
                let w = r.our_completions(1, 200_000);
                assert_eq!(w.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(1 << 40, WcStatus::LocProtErr)], "an invalidated key");
                summary_line!(summary, "LOCAL_INV: key {k:#x} invalidated (our SEND from it: LOC_PROT_ERR)");
            }
        }
        n_linv += keys.len();
        for k in keys {
            r.drv.dereg_mr(k).unwrap();
        }
        for m in msgs.iter().filter(|m| m.op == WrOpcode::BindMw) {
            r.drv.dealloc_mw(m.imm).unwrap();
            n_bind += 1;
        }
        total += PER_ROUND;
        progress(round + 1);
    }
    let s = r.sys.borrow();
    let (o, i) = (s.out.stats.clone(), s.inl.stats.clone());
    let pc = s.peer.counters().clone();
    let cycles = s.cycle;
    drop(s);
    let c = counters(&mut r);
    let get = |n: &str| counter(&c, n);
    summary_line!(summary, "RTL requester: {total} messages ({n_linv} LOCAL_INV, {n_bind} BIND_MW) over {QPS} QPs at MTU {mtu} in {cycles} cycles; from the RTL: {}; to the RTL: {}", link_faults(&o), link_faults(&i));
    summary_line!(summary, 
        "RTL completer: {} go-back-N ({} after a timeout), {} NAKs, {} implied NAKs, {} dropped responses; golden responder: {} duplicates, {} read replays, NAKs sent {:?}",
        get("comp_retries"), get("comp_timeouts"), get("comp_naks"), get("comp_implied_naks"), get("comp_dropped"),
        pc.duplicate_requests, pc.read_replays, pc.naks_sent
    );
    assert!(i.dropped > 0 && o.dropped > 0);
    assert!(get("comp_retries") > 0, "the faults made the RTL go back");
    assert_eq!(get("comp_bad_responses"), 0);
    assert!(r.sys.borrow().dma.faults.is_empty());
    summary
}




/// RTL against RTL (`sim::pair::PairRig`, two Verilator RNICs in lockstep): both directions at once, 16 QP
/// pairs, each RNIC's inbound link faulty; every message of both sides completes with success, every byte
/// lands, receive completions exactly once and in order per QP.
pub fn pair(seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> String {
    let mut summary = String::new();
    use crate::pair::PairRig;
    const BUF: u64 = 4 << 20;
    let (wr_area, recv_area, rd_area) = (2u64 << 20, (2u64 << 20) + (600 << 10), (2u64 << 20) + (1200 << 10));
    let mut p = PairRig::with_qps(mtu, BUF, QPS, &dir).unwrap();
    if let Some(v) = vcd {
        // A into the file given, B beside it
        let b = v.with_extension("b.vcd");
        p.a.sys.borrow_mut().rnic.start_trace(v.to_str().expect("a UTF-8 VCD path"));
        p.b.sys.borrow_mut().rnic.start_trace(b.to_str().expect("a UTF-8 VCD path"));
    }
    for side in [&mut p.a, &mut p.b] {
        for q in side.qps.clone() {
            side.drv.modify_qp(q, &QpAttr { timeout: Some(4), ..Default::default() }).unwrap();
        }
    }
    p.a.sys.borrow_mut().inl.set_faults(faults, seed ^ 0xA);
    p.b.sys.borrow_mut().inl.set_faults(faults, seed ^ 0xB);
    let mut rng = SmallRng::seed_from_u64(seed);
    let sizes = [0u64, 1, 100, mtu as u64 - 1, mtu as u64, mtu as u64 + 1, 4096, 10_000, SLOT];
    for round in 0..rounds {
        // msgs[s]: side s posts them to the other side (QP i of A is connected to QP i of B)
        let mut msgs: [Vec<Msg>; 2] = [Vec::new(), Vec::new()];
        for (s, list) in msgs.iter_mut().enumerate() {
            for i in 0..PER_ROUND {
                let op = [WrOpcode::RdmaWrite, WrOpcode::RdmaWriteWithImm, WrOpcode::Send, WrOpcode::RdmaRead][rng.gen_range(0..4)];
                let len = sizes[rng.gen_range(0..sizes.len())];
                let slot = i as u64 * STRIDE;
                // our_off: on the posting side (source, or READ destination); peer_off: on the other side
                let src = rng.gen_range(0..(2 << 20) - SLOT);
                let m = match op {
                    WrOpcode::RdmaRead => Msg { op, len, qp: i % QPS, our_off: rd_area + slot, peer_off: src, imm: 0 },
                    WrOpcode::Send => Msg { op, len, qp: i % QPS, our_off: src, peer_off: recv_area + slot, imm: 0 },
                    _ => Msg { op, len, qp: i % QPS, our_off: src, peer_off: wr_area + slot + rng.gen_range(0..8), imm: rng.gen() },
                };
                let _ = s;
                list.push(m);
            }
        }
        // receives first, then the sends of both sides
        for s in 0..2 {
            let (poster, other) = if s == 0 { (&mut p.a, &mut p.b) } else { (&mut p.b, &mut p.a) };
            for (i, m) in msgs[s].iter().enumerate() {
                if matches!(m.op, WrOpcode::Send | WrOpcode::RdmaWriteWithImm) {
                    let (addr, length) = if m.op == WrOpcode::Send { (other.buf + m.peer_off, SLOT as u32) } else { (other.buf, 0) };
                    let id = (1 << 32) | ((round * PER_ROUND + i) as u64);
                    other.drv.post_recv(other.qps[m.qp], &RecvWr { wr_id: id, sg_list: vec![Sge { addr, length, lkey: other.key }] }).unwrap();
                }
            }
            for (i, m) in msgs[s].iter().enumerate() {
                let mut w = SendWr::new((round * PER_ROUND + i) as u64, m.op, vec![Sge { addr: poster.buf + m.our_off, length: m.len as u32, lkey: poster.key }]);
                w.flags.signaled = true;
                w.remote_addr = other.buf + m.peer_off;
                w.rkey = other.key;
                w.imm_data = m.imm;
                inline_every_other(&mut w, &poster.mem);
                poster.drv.post_send(poster.qps[m.qp], &w).unwrap();
            }
        }
        let recvs = |s: usize| msgs[1 - s].iter().filter(|m| matches!(m.op, WrOpcode::Send | WrOpcode::RdmaWriteWithImm)).count();
        let want = [PER_ROUND + recvs(0), PER_ROUND + recvs(1)];
        let mut got: [Vec<WorkCompletion>; 2] = [Vec::new(), Vec::new()];
        let mut steps = 0u64;
        while got[0].len() < want[0] || got[1].len() < want[1] {
            assert!(steps < 5_000_000, "round {round}: hung: A {} of {}, B {} of {}", got[0].len(), want[0], got[1].len(), want[1]);
            p.run(2048);
            steps += 2048;
            got[0].extend(p.a.drv.poll_cq(p.a.cq, 256).unwrap());
            got[1].extend(p.b.drv.poll_cq(p.b.cq, 256).unwrap());
        }
        for s in 0..2 {
            assert_eq!(got[s].len(), want[s], "round {round} side {s}: {:?}", got[s]);
            assert!(got[s].iter().all(|w| w.status == WcStatus::Success), "round {round} side {s}: {:?}", got[s]);
            let mut sends: Vec<u64> = got[s].iter().filter(|w| w.wr_id >> 32 == 0).map(|w| w.wr_id).collect();
            sends.sort();
            assert_eq!(sends, ((round * PER_ROUND) as u64..((round + 1) * PER_ROUND) as u64).collect::<Vec<_>>());
            // receive completions of what the other side sent, in order per QP
            let (me, them) = if s == 0 { (&p.a, &p.b) } else { (&p.b, &p.a) };
            let _ = them;
            for q in 0..QPS {
                let want: Vec<usize> = (0..PER_ROUND).filter(|&i| msgs[1 - s][i].qp == q && matches!(msgs[1 - s][i].op, WrOpcode::Send | WrOpcode::RdmaWriteWithImm)).collect();
                let r: Vec<&WorkCompletion> = got[s].iter().filter(|w| w.wr_id >> 32 == 1 && w.qp_num == me.qps[q]).collect();
                assert_eq!(r.len(), want.len(), "round {round} side {s} QP {q}");
                for (w, &i) in r.iter().zip(&want) {
                    assert_eq!((w.wr_id & 0xFFFF_FFFF, w.byte_len as u64), ((round * PER_ROUND + i) as u64, msgs[1 - s][i].len));
                }
            }
        }
        // every byte
        let (ma, mb) = (p.a.mem.lock().unwrap(), p.b.mem.lock().unwrap());
        for s in 0..2 {
            let (mine, theirs, bm, bt) = if s == 0 { (&ma, &mb, p.a.buf, p.b.buf) } else { (&mb, &ma, p.b.buf, p.a.buf) };
            for (i, m) in msgs[s].iter().enumerate() {
                let n = m.len as usize;
                let here = mine.read(bm + m.our_off, n).unwrap();
                let there = theirs.read(bt + m.peer_off, n).unwrap();
                assert!(here == there, "round {round} side {s} msg {i}: {:?} of {n}", m.op);
            }
        }
        drop((ma, mb));
        progress(round + 1);
    }
    let (ca, cb) = (read_counter_window(&mut p.a.drv).expect("counter read"), read_counter_window(&mut p.b.drv).expect("counter read"));
    let get = |c: &Vec<(String, u64)>, n: &str| counter(c, n);
    let (ia, ib) = (p.a.sys.borrow().inl.stats.clone(), p.b.sys.borrow().inl.stats.clone());
    summary_line!(summary, "RTL pair: {} messages each way over {QPS} QPs at MTU {mtu} in {} cycles; into A: {}; into B: {}", rounds * PER_ROUND, p.cycle(), link_faults(&ia), link_faults(&ib));
    for (n, c) in [("A", &ca), ("B", &cb)] {
        summary_line!(summary, 
            "{n}: go-back-N {} ({} after a timeout), NAKs received {}, implied NAKs {}; responder: duplicates {}, PSN-sequence NAKs {}, RX overflow drops {}",
            get(c, "comp_retries"), get(c, "comp_timeouts"), get(c, "comp_naks"), get(c, "comp_implied_naks"),
            get(c, "resp_duplicates"), get(c, "resp_nak_psn_seq"), get(c, "rx_drop_overflow")
        );
        for k in ["resp_class_c_naks", "resp_drop_qp_error", "comp_bad_responses"] {
            assert_eq!(get(c, k), 0, "{n}: {k}");
        }
    }
    assert!(get(&ca, "comp_retries") + get(&cb, "comp_retries") > 0);
    summary
}



/// Atomics under contention, RTL against RTL on a lossy link: RNIC A's 16 QPs (connected to 16 QPs
/// of RNIC B) each run `per_qp` FETCH_ADD(1) on one 8-byte counter in B's memory, at most 16 outstanding per
/// QP (`max_rd_atomic`), every result into its own word of A's memory. What must hold: every atomic completes
/// with success; the counter ends at exactly 16 x `per_qp`; the returned original values are a permutation of
/// 0 .. 16 x `per_qp` - 1 (an atomic executed twice, or a duplicate answered with a wrong saved value, breaks
/// one or the other). Between them each QP runs `masked` masked FETCH_ADDs (every fourth operation until
/// they are used up) with random operand and field boundaries on a word of the QP's own (so a retransmission
/// must send the masks of its own mask slot again): each QP's word must end as the golden `masked_fetch_add`
/// folded over its operations in order, and each returned value must be that fold's prefix. Then `locks`
/// rounds of a COMPARE_SWAP spin lock on every QP guarding a non-atomic increment (READ the second counter, WRITE it + 1, COMPARE_SWAP the lock free): that counter ends at
/// 16 x `locks`. `timeout` is every QP's local ACK timeout exponent (4.096 us x 2^timeout) on both sides,
/// `host_ns` the host-memory latency of both (500: a PCIe round trip).
pub fn atomics(seed: u64, per_qp: usize, masked: usize, locks: usize, timeout: u8, host_ns: f64, faults: MacFaults, dir: &Path, progress: &mut dyn FnMut(usize)) -> String {
    use crate::pair::PairRig;
    let mut summary = String::new();
    // each QP's operations in order: true = masked
    let kinds: Vec<bool> = {
        let (mut v, mut m) = (Vec::new(), 0);
        while v.len() < per_qp + masked {
            let mk = m < masked && (v.len() % 4 == 3 || v.len() - m == per_qp);
            m += usize::from(mk);
            v.push(mk);
        }
        v
    };
    let plain = QPS * per_qp;
    let per_qp = per_qp + masked;
    let n = QPS * per_qp;
    let masked = |k: usize| kinds[k];
    let buf_len = ((8 * n as u64 + (1 << 16)).next_power_of_two()).max(1 << 20);
    let mut p = PairRig::with_qps(1024, buf_len, QPS, dir).unwrap();
    for side in [&mut p.a, &mut p.b] {
        for q in side.qps.clone() {
            side.drv.modify_qp(q, &QpAttr { timeout: Some(timeout), ..Default::default() }).unwrap();
        }
    }
    let lat = (host_ns * 1e-9 * testbench::mac::CORE_HZ).round() as u64;
    p.a.sys.borrow_mut().dma.latency_cycles = lat;
    p.b.sys.borrow_mut().dma.latency_cycles = lat;
    p.a.sys.borrow_mut().inl.set_faults(faults, seed ^ 0xA);
    p.b.sys.borrow_mut().inl.set_faults(faults, seed ^ 0xB);
    // B's words: the FETCH_ADD counter, the lock, the locked counter
    let (ctr, lock, ctr2) = (p.b.buf, p.b.buf + 64, p.b.buf + 128);
    for a in [ctr, lock, ctr2] {
        p.b.mem.lock().unwrap().write(a, &0u64.to_le_bytes()).unwrap();
    }
    // per QP a word for its masked FETCH_ADDs, a random start, and their operands in order
    let bbuf = p.b.buf;
    let mword = move |q: usize| bbuf + 256 + 8 * q as u64;
    // (from a generator of their own, so that a seed gives the same run with or without them)
    let mut mrng = SmallRng::seed_from_u64(seed ^ 0x6D61_736B);
    let mstart: Vec<u64> = (0..QPS).map(|_| mrng.gen()).collect();
    for q in 0..QPS {
        p.b.mem.lock().unwrap().write(mword(q), &mstart[q].to_le_bytes()).unwrap();
    }
    let mops: Vec<Vec<(u64, u64)>> = (0..QPS).map(|_| (0..per_qp).map(|_| (mrng.gen(), mrng.gen())).collect()).collect();
    // A's words: one per atomic's result, then per QP a scratch word for the lock's READ
    let res = p.a.buf;
    let scratch = p.a.buf + 8 * n as u64;
    let faa = |qp: usize, k: usize, p: &PairRig| {
        let op = if masked(k) { WrOpcode::MaskedAtomicFetchAndAdd } else { WrOpcode::AtomicFetchAndAdd };
        let mut w = SendWr::new((qp * per_qp + k) as u64, op, vec![Sge { addr: res + 8 * (qp * per_qp + k) as u64, length: 8, lkey: p.a.key }]);
        w.remote_addr = ctr;
        w.rkey = p.b.key;
        w.compare_add = 1;
        if masked(k) {
            w.remote_addr = mword(qp);
            (w.compare_add, w.compare_add_mask) = mops[qp][k];
        }
        w
    };
    let (mut posted, mut done) = (vec![0usize; QPS], 0usize);
    let mut inflight = vec![0usize; QPS];
    let mut rng = SmallRng::seed_from_u64(seed);
    let c0 = p.cycle();
    while done < n {
        for q in 0..QPS {
            while inflight[q] < 16 && posted[q] < per_qp {
                let w = faa(q, posted[q], &p);
                p.a.drv.post_send(p.a.qps[q], &w).unwrap();
                posted[q] += 1;
                inflight[q] += 1;
            }
        }
        let before = p.cycle();
        let wcs = p.a.wait(1, 2_000_000);
        if wcs.is_empty() {
            let wa = read_counter_window(&mut p.a.drv).unwrap();
            let wb = read_counter_window(&mut p.b.drv).unwrap();
            let nz = |w: &[(String, u64)]| w.iter().filter(|x| x.1 != 0).map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            eprintln!("in flight per QP {inflight:?}, posted {posted:?}\nA: {}\nB: {}", nz(&wa), nz(&wb));
            p.run(200_000);
            let wa = read_counter_window(&mut p.a.drv).unwrap();
            let wb = read_counter_window(&mut p.b.drv).unwrap();
            eprintln!("200,000 cycles later:\nA: {}\nB: {}", nz(&wa), nz(&wb));
            if std::env::var("RNIC_HANG_VCD").is_ok() {
                let pa = dir.join("hang-a.vcd");
                let pb = dir.join("hang-b.vcd");
                p.a.sys.borrow_mut().rnic.start_trace(pa.to_str().unwrap());
                p.b.sys.borrow_mut().rnic.start_trace(pb.to_str().unwrap());
                p.run(30_000);
                eprintln!("VCDs of 30,000 cycles: {} {}", pa.display(), pb.display());
            }
        }
        assert!(!wcs.is_empty(), "atomics hung: {done} of {n} done after {} cycles", p.cycle() - before);
        for wc in wcs {
            let q = p.a.qps.iter().position(|&x| x == wc.qp_num).unwrap();
            let want_op = if masked(wc.wr_id as usize % per_qp) { WcOpcode::MaskedFetchAdd } else { WcOpcode::FetchAdd };
            assert_eq!((wc.status, wc.opcode), (WcStatus::Success, want_op), "{wc:?}");
            inflight[q] -= 1;
            done += 1;
        }
        progress(done);
        let _ = rng.gen::<u8>();
    }
    let word = |m: &std::sync::Mutex<testbench::model::HostMemory>, a: u64| u64::from_le_bytes(m.lock().unwrap().read(a, 8).unwrap().try_into().unwrap());
    assert_eq!(word(&p.b.mem, ctr), plain as u64, "the counter");
    let mut vals: Vec<u64> = (0..n).filter(|i| !masked(i % per_qp)).map(|i| word(&p.a.mem, res + 8 * i as u64)).collect();
    vals.sort_unstable();
    assert!(vals.iter().enumerate().all(|(i, &v)| v == i as u64), "the returned values are not a permutation of 0..{plain}");
    // each QP's masked word: the golden fold, every returned value its prefix
    for q in 0..QPS {
        let mut v = mstart[q];
        for k in (0..per_qp).filter(|&k| masked(k)) {
            assert_eq!(word(&p.a.mem, res + 8 * (q * per_qp + k) as u64), v, "QP {q}: the original value returned by masked FETCH_ADD {k}");
            v = testbench::model::responder::masked_fetch_add(v, mops[q][k].0, mops[q][k].1);
        }
        assert_eq!(word(&p.b.mem, mword(q)), v, "QP {q}: the word of its masked FETCH_ADDs");
    }
    let faa_cycles = p.cycle() - c0;
    summary_line!(summary, "{n} atomics from 16 QPs in {faa_cycles} cycles: {plain} FETCH_ADD(1) on one counter, counter = {plain}, the returned values a permutation of 0..{plain}; {} masked FETCH_ADDs on a word per QP, each word and every returned value as the golden fold", n - plain);

    // the spin lock: each QP takes it (COMPARE_SWAP 0 -> its id), READs the counter, WRITEs it + 1, frees it
    // (COMPARE_SWAP id -> 0), `locks` times; one QP at a time holds it
    let c1 = p.cycle();
    let mut left = vec![locks; QPS];
    // per QP: 0 idle, 1 CAS out, 2 READ out, 3 WRITE + CAS-free out
    let mut stage = vec![0u8; QPS];
    let mut spins = 0u64;
    // a QP that found the lock taken waits a random time below its backoff window before trying again, the
    // window doubling per failed try (to 64 K cycles) and reset when it gets the lock: without it the 15
    // losers' COMPARE_SWAPs queue at B's Atomic Unit ahead of the holder's READ, WRITE and release
    let mut retry_at = vec![0u64; QPS];
    let mut window = vec![256u64; QPS];
    let wr = |kind: u64, q: usize| (kind << 32) | q as u64;
    while left.iter().any(|&l| l > 0) || stage.iter().any(|&s| s != 0) {
        if stage.iter().all(|&s| s == 0) {
            // everyone is backing off: run to the first retry
            let first = (0..QPS).filter(|&q| left[q] > 0).map(|q| retry_at[q]).min().unwrap_or(0);
            if first > p.cycle() {
                p.run(first - p.cycle());
            }
        }
        for q in 0..QPS {
            if stage[q] == 0 && left[q] > 0 && p.cycle() >= retry_at[q] {
                let mut w = SendWr::new(wr(1, q), WrOpcode::AtomicCmpAndSwp, vec![Sge { addr: scratch + 16 * q as u64, length: 8, lkey: p.a.key }]);
                w.remote_addr = lock;
                w.rkey = p.b.key;
                w.compare_add = 0;
                w.swap = q as u64 + 1;
                p.a.drv.post_send(p.a.qps[q], &w).unwrap();
                stage[q] = 1;
            }
        }
        let wcs = if stage.iter().any(|&s| s != 0) { p.a.wait(1, 2_000_000) } else { Vec::new() };
        assert!(!wcs.is_empty() || stage.iter().all(|&s| s == 0), "spin lock hung");
        for wc in wcs {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            let (kind, q) = (wc.wr_id >> 32, (wc.wr_id & 0xFFFF) as usize);
            match kind {
                1 => {
                    if word(&p.a.mem, scratch + 16 * q as u64) == 0 {
                        // ours: READ the counter
                        let mut w = SendWr::new(wr(2, q), WrOpcode::RdmaRead, vec![Sge { addr: scratch + 16 * q as u64 + 8, length: 8, lkey: p.a.key }]);
                        w.remote_addr = ctr2;
                        w.rkey = p.b.key;
                        p.a.drv.post_send(p.a.qps[q], &w).unwrap();
                        stage[q] = 2;
                    } else {
                        spins += 1;
                        stage[q] = 0;
                        retry_at[q] = p.cycle() + rng.gen_range(0..window[q]);
                        window[q] = (window[q] * 2).min(1 << 16);
                    }
                }
                2 => {
                    // WRITE counter + 1, then free the lock (ordered after the WRITE on this QP)
                    let v = word(&p.a.mem, scratch + 16 * q as u64 + 8) + 1;
                    p.a.mem.lock().unwrap().write(scratch + 16 * q as u64 + 8, &v.to_le_bytes()).unwrap();
                    let mut w = SendWr::new(wr(3, q), WrOpcode::RdmaWrite, vec![Sge { addr: scratch + 16 * q as u64 + 8, length: 8, lkey: p.a.key }]);
                    w.remote_addr = ctr2;
                    w.rkey = p.b.key;
                    w.flags.signaled = false;
                    p.a.drv.post_send(p.a.qps[q], &w).unwrap();
                    let mut f = SendWr::new(wr(4, q), WrOpcode::AtomicCmpAndSwp, vec![Sge { addr: scratch + 16 * q as u64, length: 8, lkey: p.a.key }]);
                    f.remote_addr = lock;
                    f.rkey = p.b.key;
                    f.compare_add = q as u64 + 1;
                    f.swap = 0;
                    p.a.drv.post_send(p.a.qps[q], &f).unwrap();
                    stage[q] = 3;
                }
                4 => {
                    assert_eq!(word(&p.a.mem, scratch + 16 * q as u64), q as u64 + 1, "QP {q} freed a lock it did not hold");
                    left[q] -= 1;
                    window[q] = 256;
                    stage[q] = 0;
                }
                _ => unreachable!("wr_id {:#x}", wc.wr_id),
            }
        }
        progress(n + QPS * locks - left.iter().sum::<usize>());
    }
    let c = word(&p.b.mem, ctr2);
    assert_eq!(c, (QPS * locks) as u64, "the counter under the spin lock");
    summary_line!(summary, "spin lock: {} increments under a COMPARE_SWAP lock from 16 QPs in {} cycles ({spins} failed tries): counter = {c}", QPS * locks, p.cycle() - c1);
    let (ia, ib) = (p.a.sys.borrow().inl.stats.clone(), p.b.sys.borrow().inl.stats.clone());
    summary_line!(summary, "into A: {}; into B: {}", link_faults(&ia), link_faults(&ib));
    let wa = read_counter_window(&mut p.a.drv).unwrap();
    let wb = read_counter_window(&mut p.b.drv).unwrap();
    summary_line!(
        summary,
        "A: go-back-N {} ({} after a timeout), atomic ACKs {}; B: requests {}, duplicates {} (atomics answered from their saved values)",
        counter(&wa, "comp_retries"), counter(&wa, "comp_timeouts"), counter(&wa, "comp_atomic_acks"), counter(&wb, "resp_requests"), counter(&wb, "resp_duplicates")
    );
    summary
}

/// Every other SEND / WRITE (by wr_id) of at most `MAX_INLINE` bytes goes as an inline WQE: its bytes copied
/// from the buffer its SGE names (so every check of the payload stands), no SGE; under the campaign's faults
/// its retransmissions read the data slots from the ring again.
fn inline_every_other(w: &mut SendWr, mem: &std::sync::Arc<std::sync::Mutex<HostMemory>>) {
    let Some(sge) = w.sg_list.first().copied() else { return };
    if w.opcode.may_be_inline() && sge.length as usize <= rnic_driver::host::MAX_INLINE && w.wr_id % 2 == 1 {
        w.set_inline(mem.lock().unwrap().read(sge.addr, sge.length as usize).unwrap());
    }
}

/// READs posted at once on each QP in the `reads` campaign: ib_read_bw's depth against rxe (rxe's
/// `max_qp_rd_atom`, 128). At most `max_rd_atomic` (16, the Completer's record ring per QP) of them are on
/// the wire at a time; the rest wait in the Send Queue.
pub const READS_PER_QP: usize = 128;

/// The work one requester of the `reads` campaign needed (the RTL's run, or the golden twin's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadsEffort {
    /// READ WQEs completed.
    pub reads: u64,
    /// READ request packets sent, first and resent.
    pub request_frames: u64,
    /// Frames the responder (the golden model in both runs) sent.
    pub response_frames: u64,
    /// Response packets the READs need without loss (one per path MTU, at least one).
    pub needed_responses: u64,
    /// Go-back-N passes, and those started by the retransmit timer.
    pub retries: u64,
    pub timeouts: u64,
    /// Responses our RX Parse dropped for want of buffer room (RTL only; recovered like losses).
    pub rx_overflow: u64,
    /// Simulated time, ns.
    pub ns: u64,
}

impl ReadsEffort {
    /// READ requests sent beyond one per WQE (a partly answered READ is re-requested for its rest).
    pub fn resent(&self) -> u64 {
        self.request_frames - self.reads
    }
}

impl std::fmt::Display for ReadsEffort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} READ requests ({} resent), {} responder frames ({} needed), {} go-back-N ({} after a timeout), {:.1} us",
            self.request_frames,
            self.resent(),
            self.response_frames,
            self.needed_responses,
            self.retries,
            self.timeouts,
            self.ns as f64 / 1e3
        )?;
        if self.rx_overflow > 0 {
            write!(f, ", {} RX overflow drops", self.rx_overflow)?;
        }
        Ok(())
    }
}

/// What the `reads` campaign measured: the RTL requester and the golden requester, each against the golden
/// responder, on links with the same fault rates.
#[derive(Clone, Debug)]
pub struct ReadsReport {
    pub rtl: ReadsEffort,
    pub model: ReadsEffort,
    pub summary: String,
}

impl ReadsReport {
    /// RTL / golden: resent READ requests, and responder frames.
    pub fn ratios(&self) -> (f64, f64) {
        let r = |a: u64, b: u64| if b == 0 { if a == 0 { 1.0 } else { f64::INFINITY } } else { a as f64 / b as f64 };
        (r(self.rtl.resent(), self.model.resent()), r(self.rtl.response_frames, self.model.response_frames))
    }
}

/// One READ of the `reads` campaign: its QP, length, source offset in the responder's buffer, destination
/// offset in the requester's.
#[derive(Clone, Copy, Debug)]
struct Read {
    qp: usize,
    len: u64,
    src: u64,
    dst: u64,
}

/// The READs of one round: [`READS_PER_QP`] on each of [`QPS`] QPs, each into a slot of its own.
fn read_round(rng: &mut SmallRng, mtu: u32) -> Vec<Read> {
    let sizes = [0u64, 1, 100, mtu as u64 - 1, mtu as u64, mtu as u64 + 1, 4096, 10_000, SLOT];
    let mut v = Vec::new();
    for j in 0..READS_PER_QP {
        for qp in 0..QPS {
            let len = sizes[rng.gen_range(0..sizes.len())];
            let slot = (j * QPS + qp) as u64 * STRIDE;
            v.push(Read { qp, len, src: rng.gen_range(0..(2 << 20) - SLOT), dst: slot + rng.gen_range(0..8) });
        }
    }
    v
}

/// Bytes of the requester's READ destination area: one slot per READ of a round.
const READ_DEST_BYTES: usize = QPS * READS_PER_QP * STRIDE as usize;

fn needed_responses(reads: &[Read], mtu: u32) -> u64 {
    reads.iter().map(|r| r.len.div_ceil(u64::from(mtu)).max(1)).sum()
}

/// The retransmit timeout exponent of the `reads` campaign's QPs, on both requesters: by the rule the rxe
/// runs use (`rtl_ep::rtl_qp_timeout`), longer than twice the time the link takes to carry everything that
/// can be outstanding: 16 READs of up to 16 KiB on each of the 16 QPs (4 MiB of responses, 0.34 ms at
/// 100 Gb/s: exponent 8, 1.05 ms). A shorter timer fires while the responses to a QP's READs still queue
/// behind the other QPs' and starts go-back-N passes that only add to the queue (seen with the 65.5 us of
/// the other campaigns: 6,041 timeouts, 1,698 of 2,048 READs in 124 ms).
pub fn reads_timeout() -> u8 {
    let outstanding = (QPS * 16) as u64 * crate::rxe::rtl_ep::wire_bytes(SLOT, 256);
    crate::rxe::rtl_ep::rtl_qp_timeout(outstanding, 100.0)
}

/// 128 READs outstanding per QP under faults (`rnic campaign --role reads`): the RTL requester against the
/// golden responder, then the golden requester against the golden responder on a link with the same fault
/// rates, line rate (100 Gb/s), latency and retransmit timeout ([`reads_timeout`]), the same READs. What must
/// hold in both: every READ completes with success, every destination holds the responder's bytes, and (RTL)
/// no byte of our memory outside the destinations changes. What it reports: the READ requests each requester
/// resent and the frames the responder had to send, and their ratio RTL / golden.
pub fn reads(seed: u64, mtu: u32, rounds: usize, faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> ReadsReport {
    let mut rng = SmallRng::seed_from_u64(seed);
    let source: Vec<u8> = (0..2 << 20).map(|_| rng.gen()).collect();
    let plan: Vec<Vec<Read>> = (0..rounds).map(|_| read_round(&mut rng, mtu)).collect();
    // the golden twin first (seconds): a hung RTL run is reported beside what the golden requester needed
    let model = reads_golden(seed, mtu, &plan, &source, faults);
    eprintln!("golden requester: {model}");
    let rtl = reads_rtl(seed, mtu, &plan, &source, faults, dir, vcd, progress);
    let mut summary = String::new();
    summary_line!(
        summary,
        "{} READs at MTU {mtu}: {READS_PER_QP} posted at once on each of {QPS} QPs (at most 16 in flight per QP), retransmit timeout 4.096 us x 2^{}, faults each way: {} drop, {} duplicate, {} reorder, {} corrupt",
        rtl.reads, reads_timeout(), faults.drop, faults.duplicate, faults.reorder, faults.corrupt
    );
    summary_line!(summary, "RTL requester:    {rtl}");
    summary_line!(summary, "golden requester: {model}");
    let mut rep = ReadsReport { rtl, model, summary };
    let (a, b) = rep.ratios();
    let s = &mut rep.summary;
    summary_line!(s, "RTL / golden: resent READ requests {a:.2}x, responder frames {b:.2}x");
    rep
}

#[allow(clippy::too_many_arguments)]
fn reads_rtl(seed: u64, mtu: u32, plan: &[Vec<Read>], source: &[u8], faults: MacFaults, dir: &Path, vcd: Option<&Path>, progress: &mut dyn FnMut(usize)) -> ReadsEffort {
    let mut r = rig(mtu, dir);
    if let Some(v) = vcd {
        r.sys.borrow_mut().rnic.start_trace(v.to_str().expect("a UTF-8 VCD path"));
    }
    let cq = r.drv.create_cq((QPS * READS_PER_QP) as u32).unwrap();
    let cap = QpCap { max_send_wr: READS_PER_QP as u32, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qps: Vec<(u32, u32)> = (0..QPS).map(|i| r.add_qp_pair_with(mtu, 0x100 * i as u32 + 7, 0xFF_FF00 - i as u32, cap, cq)).collect();
    for &(q, _) in &qps {
        r.drv.modify_qp(q, &QpAttr { timeout: Some(reads_timeout()), ..Default::default() }).unwrap();
    }
    let dest = r.mem.lock().unwrap().alloc(READ_DEST_BYTES);
    let dkey = r.drv.reg_mr(Pd(1), dest, READ_DEST_BYTES as u64, AccessFlags::ALL).unwrap();
    let (cycle0, peer_tx0, sent0) = {
        let mut s = r.sys.borrow_mut();
        s.peer.mem_mut().write(r.peer_buf, source).unwrap();
        s.out.set_faults(faults, seed ^ 0x7);
        s.inl.set_faults(faults, seed ^ 0x1);
        (s.cycle, s.peer.counters().tx_frames, s.sent.len())
    };
    let c0 = counters(&mut r);
    let mut e = ReadsEffort::default();
    for (round, reads) in plan.iter().enumerate() {
        let mut shadow = r.mem.lock().unwrap().read(dest, READ_DEST_BYTES).unwrap();
        for (i, m) in reads.iter().enumerate() {
            let mut w = SendWr::new(i as u64, WrOpcode::RdmaRead, vec![Sge { addr: dest + m.dst, length: m.len as u32, lkey: dkey }]);
            w.flags.signaled = true;
            w.remote_addr = r.peer_buf + m.src;
            w.rkey = r.peer_rkey;
            r.drv.post_send(qps[m.qp].0, &w).unwrap();
        }
        let mut got: Vec<WorkCompletion> = Vec::new();
        let mut steps = 0u64;
        while got.len() < reads.len() {
            if steps >= 20_000_000 {
                let c = counters(&mut r);
                let pc = r.sys.borrow().peer.counters().clone();
                panic!(
                    "reads round {round}: hung with {} of {} completions; RTL counters {c:?}; golden responder: {} duplicates, {} read replays, drops {:?}; pcaps in {}",
                    got.len(),
                    reads.len(),
                    pc.duplicate_requests,
                    pc.read_replays,
                    pc.drops,
                    dir.display()
                );
            }
            {
                let mut s = r.sys.borrow_mut();
                for _ in 0..1024 {
                    s.step();
                }
            }
            got.extend(r.drv.poll_cq(cq, 512).unwrap());
            steps += 1024;
        }
        assert!(got.iter().all(|w| w.status == WcStatus::Success && w.opcode == WcOpcode::RdmaRead), "reads round {round}: {:?}", got.iter().find(|w| w.status != WcStatus::Success));
        let mut ids: Vec<u64> = got.iter().map(|w| w.wr_id).collect();
        ids.sort();
        assert_eq!(ids, (0..reads.len() as u64).collect::<Vec<_>>(), "reads round {round}: one completion per READ");
        for (q, &(qpn, _)) in qps.iter().enumerate() {
            let order: Vec<u64> = got.iter().filter(|w| w.qp_num == qpn).map(|w| w.wr_id).collect();
            assert!(order.windows(2).all(|p| p[0] < p[1]), "reads round {round}: QP {q}'s completions out of order");
        }
        for m in reads {
            let (at, n) = (m.dst as usize, m.len as usize);
            shadow[at..at + n].copy_from_slice(&source[m.src as usize..m.src as usize + n]);
        }
        let now = r.mem.lock().unwrap().read(dest, READ_DEST_BYTES).unwrap();
        if now != shadow {
            let i = now.iter().zip(&shadow).position(|(a, b)| a != b).unwrap();
            panic!("reads round {round}: our memory differs from the expected first at destination offset {i:#x}");
        }
        e.reads += reads.len() as u64;
        e.needed_responses += needed_responses(reads, mtu);
        progress(round + 1);
    }
    let c = counters(&mut r);
    let s = r.sys.borrow();
    e.request_frames = s.sent[sent0..]
        .iter()
        .filter(|f| matches!(testbench::wire::parse_ethernet(f), Ok(testbench::wire::Frame::Roce(fr)) if fr.packet.bth.opcode == 0x0C))
        .count() as u64;
    e.response_frames = s.peer.counters().tx_frames - peer_tx0;
    e.retries = counter(&c, "comp_retries") - counter(&c0, "comp_retries");
    e.timeouts = counter(&c, "comp_timeouts") - counter(&c0, "comp_timeouts");
    e.rx_overflow = counter(&c, "rx_drop_overflow") - counter(&c0, "rx_drop_overflow");
    e.ns = ((s.cycle - cycle0) as f64 * 1e9 / testbench::mac::CORE_HZ) as u64;
    assert_eq!(counter(&c, "comp_bad_responses"), 0);
    assert!(s.dma.faults.is_empty(), "DMA faults: {:?}", s.dma.faults);
    e
}

fn reads_golden(seed: u64, mtu: u32, plan: &[Vec<Read>], source: &[u8], faults: MacFaults) -> ReadsEffort {
    use testbench::model::harness::{ConnOpts, Pair};
    let hz = testbench::mac::CORE_HZ;
    let link = LinkConfig {
        drop: faults.drop,
        duplicate: faults.duplicate,
        reorder: faults.reorder,
        corrupt: faults.corrupt,
        // the RTL rig's MAC links: 100 cycles from last bit out to first beat in, 100 Gb/s
        latency_ns: (100.0 * 1e9 / hz) as u64,
        reorder_delay_ns: (faults.reorder_cycles as f64 * 1e9 / hz) as u64,
        ns_per_byte: 0,
        gbps: 100.0,
    };
    let mut p = Pair::new(link, seed ^ 0x7eed);
    let dest = p.a.alloc(READ_DEST_BYTES);
    let dmr = p.a.reg_mr(p.pd_a, dest, READ_DEST_BYTES as u64, AccessFlags::ALL).unwrap();
    let src = p.b.alloc(2 << 20);
    p.b.mem_mut().write(src, source).unwrap();
    let smr = p.b.reg_mr(p.pd_b, src, 2 << 20, AccessFlags::ALL).unwrap();
    let o = ConnOpts { path_mtu: mtu, timeout: reads_timeout(), ..Default::default() };
    let qps: Vec<(u32, u32)> = (0..QPS).map(|i| p.connect(&o, 0x100 * i as u32 + 7, 0xFF_FF00 - i as u32)).collect();
    let mut e = ReadsEffort::default();
    let t0 = p.now;
    for (round, reads) in plan.iter().enumerate() {
        for (i, m) in reads.iter().enumerate() {
            let mut w = SendWr::new(i as u64, WrOpcode::RdmaRead, vec![Sge { addr: dest + m.dst, length: m.len as u32, lkey: dmr.lkey }]);
            w.flags.signaled = true;
            w.remote_addr = src + m.src;
            w.rkey = smr.rkey;
            p.a.post_send(qps[m.qp].0, w).unwrap();
        }
        let r = p.run();
        assert!(r.idle, "golden reads round {round}: not idle after 100 s of simulated time");
        let got = p.a.poll_cq(p.cq_a, usize::MAX);
        assert_eq!(got.len(), reads.len(), "golden reads round {round}");
        assert!(got.iter().all(|w| w.status == WcStatus::Success), "golden reads round {round}");
        for m in reads {
            let n = m.len as usize;
            assert!(p.a.mem().read(dest + m.dst, n).unwrap() == source[m.src as usize..m.src as usize + n], "golden reads round {round}");
        }
        e.reads += reads.len() as u64;
        e.needed_responses += needed_responses(reads, mtu);
    }
    let (a, b) = (p.a.counters(), p.b.counters());
    e.request_frames = a.tx_request_packets;
    e.response_frames = b.tx_frames;
    e.retries = a.retries;
    e.timeouts = a.timeouts;
    e.ns = p.now - t0;
    e
}
