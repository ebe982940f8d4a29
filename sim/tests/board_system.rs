//! System scenarios through the board top (`sim::board`): the driver's register accesses go through the
//! QDMA model's AXI4-Lite master, the BAR crossing and split into the core; the core's DMA through the AXI4
//! master and its crossing into the bridge model (PCIe Gen3 x16 limits, latency with jitter, 32 bursts
//! outstanding, backpressure, every burst checked); its frames through the CMAC model (bring-up by the
//! board's own sequence, no TX pause inside a frame) to the golden peer. The core's clock and the PCIe clock
//! are asynchronous (322.265625 and 250 MHz, a seeded phase). The core's own system tests cover the rest of
//! its behaviour; these prove the board layer carries it.

use sim::board::{BoardDut, PcieHost};
use sim::rxe::rtl_ep::{counter, read_counter_window};
use sim::system::{rig_on, Rig};
use rnic_driver::CsrBus;
use testbench::mac::MacFaults;
use testbench::model::*;

fn dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rnic-board-{name}-{}", std::process::id()))
}

fn board_rig(seed: u64, host: PcieHost, mtu: u32, name: &str) -> Rig<BoardDut> {
    let mut r = rig_on(|mem| BoardDut::new(mem.clone(), host, seed, None), mtu, &dir(name));
    // the board answers on BAR0 from 1 MiB, and brings its link up by itself (LINK_CTL is 0x13 after
    // configuration): the CMAC model aligns, CmacCtl enables TX
    assert_eq!(r.drv.bus().read32(BoardDut::board_reg(0)).unwrap(), 0x524E_4942, "BOARD_ID");
    sim::board::wait_link_up(&mut r.drv, &r.sys).expect("LINK_STATUS: link up and RX aligned");
    r
}

/// The board registers that must stay 0 (RX_BAD_FCS: the frames the link gave a bad FCS), and the IP
/// models' rule checks.
fn board_clean(r: &mut Rig<BoardDut>) {
    let bad_fcs = r.sys.borrow().inl.stats.fcs_errors;
    assert_eq!(u64::from(r.drv.bus().read32(BoardDut::board_reg(8)).unwrap()), bad_fcs, "RX_BAD_FCS");
    for (w, name) in [(9, "TX_UNDERFLOWS"), (10, "TX_GAPS")] {
        assert_eq!(r.drv.bus().read32(BoardDut::board_reg(w)).unwrap(), 0, "{name}");
    }
    for (w, name) in [(11, "DMA_RD"), (12, "DMA_WR")] {
        assert_eq!(r.drv.bus().read32(BoardDut::board_reg(w)).unwrap() >> 16, 0, "{name} error responses");
    }
    let s = r.sys.borrow();
    let st = &s.rnic.stats;
    assert!(st.violations.is_empty(), "{:#?}", &st.violations[..st.violations.len().min(10)]);
    assert!(st.most_reads_outstanding <= 32 && st.most_writes_outstanding <= 32, "{st:?}");
    assert!(s.dma.faults.is_empty() && s.dma.idle(), "the system's own DMA host is not used");
    eprintln!(
        "board: {} pclk cycles, {} read bursts ({} beats, at most {} outstanding), {} write bursts ({} beats, at most {}), {} TX and {} RX beats",
        st.pclk_cycles, st.ar_bursts, st.r_beats, st.most_reads_outstanding, st.aw_bursts, st.w_beats, st.most_writes_outstanding, st.tx_beats, st.rx_beats
    );
}

/// WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM, READ, FETCH_ADD and COMPARE_SWAP from us; WRITE, READ and SEND
/// from the golden peer into our memory. Sizes cross 4 KiB pages on both sides, so the AXI master splits
/// bursts, and READs of 64 KiB keep many bursts outstanding.
#[test]
fn every_verb_through_the_board_top() {
    let mut r = board_rig(1, PcieHost::gen3_x16(), 1024, "verbs");
    let (q, pq) = (r.qpn, r.peer_qpn);
    // the peer's receives for our WRITE_WITH_IMM and SENDs, ours for its SEND
    {
        let mut s = r.sys.borrow_mut();
        for k in 0..3u64 {
            let rw = RecvWr { wr_id: 500 + k, sg_list: vec![Sge { addr: r.peer_buf + 0x10_0000 + k * 0x4000, length: 0x4000, lkey: r.peer_rkey }] };
            s.peer.post_recv(pq, rw).unwrap();
        }
    }
    r.drv.post_recv(q, &RecvWr { wr_id: 700, sg_list: vec![Sge { addr: r.src + 0x18_0000, length: 0x4000, lkey: r.lkey }] }).unwrap();
    let words = [0x1111_2222_3333_4444u64, 0x0123_4567_89AB_CDEF];
    {
        let mut s = r.sys.borrow_mut();
        s.peer.mem_mut().write_u64(r.peer_buf + 0x1F_0000, words[0]).unwrap();
        s.peer.mem_mut().write_u64(r.peer_buf + 0x1F_0008, words[1]).unwrap();
    }
    let mut wrs = Vec::new();
    let mut w = SendWr::new(1, WrOpcode::RdmaWrite, vec![Sge { addr: r.src + 0x0FC0, length: 10_000, lkey: r.lkey }]);
    (w.remote_addr, w.rkey) = (r.peer_buf + 0x33, r.peer_rkey);
    wrs.push(w);
    let mut w = SendWr::new(2, WrOpcode::RdmaWriteWithImm, vec![Sge { addr: r.src + 0x9000, length: 3000, lkey: r.lkey }]);
    (w.remote_addr, w.rkey, w.imm_data) = (r.peer_buf + 0x8000, r.peer_rkey, 0xB0A2_D001);
    wrs.push(w);
    wrs.push(SendWr::new(3, WrOpcode::Send, vec![Sge { addr: r.src + 0xA000, length: 5000, lkey: r.lkey }]));
    let mut w = SendWr::new(4, WrOpcode::SendWithImm, vec![Sge { addr: r.src + 0xC000, length: 64, lkey: r.lkey }]);
    w.imm_data = 0xB0A2_D002;
    wrs.push(w);
    let mut w = SendWr::new(5, WrOpcode::RdmaRead, vec![Sge { addr: r.src + 0x10_0010, length: 65_536, lkey: r.lkey }]);
    (w.remote_addr, w.rkey) = (r.peer_buf + 0x2_0000, r.peer_rkey);
    wrs.push(w);
    let mut w = SendWr::new(6, WrOpcode::AtomicFetchAndAdd, vec![Sge { addr: r.src + 0x1E_0000, length: 8, lkey: r.lkey }]);
    (w.remote_addr, w.rkey, w.compare_add) = (r.peer_buf + 0x1F_0000, r.peer_rkey, 5);
    wrs.push(w);
    let mut w = SendWr::new(7, WrOpcode::AtomicCmpAndSwp, vec![Sge { addr: r.src + 0x1E_0008, length: 8, lkey: r.lkey }]);
    (w.remote_addr, w.rkey, w.compare_add, w.swap) = (r.peer_buf + 0x1F_0008, r.peer_rkey, words[1], 0xDEAD_BEEF);
    wrs.push(w);
    for mut w in wrs {
        w.flags.signaled = true;
        r.drv.post_send(q, &w).unwrap();
    }
    // and the peer: WRITE 9,000 bytes to us, READ 20,000 from us, SEND 3,000
    {
        let mut s = r.sys.borrow_mut();
        let mut w = SendWr::new(60, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf + 0x4_0000, length: 9000, lkey: r.peer_rkey }]);
        (w.remote_addr, w.rkey) = (r.src + 0x14_0FF0, r.lkey);
        s.peer.post_send(pq, w).unwrap();
        let mut w = SendWr::new(61, WrOpcode::RdmaRead, vec![Sge { addr: r.peer_buf + 0x6_0000, length: 20_000, lkey: r.peer_rkey }]);
        (w.remote_addr, w.rkey) = (r.src + 0x7F0, r.lkey);
        s.peer.post_send(pq, w).unwrap();
        s.peer.post_send(pq, SendWr::new(62, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x9_0000, length: 3000, lkey: r.peer_rkey }])).unwrap();
    }
    let peer = r.wait_peer_completions(3 + 3, 2_000_000);
    let ours = r.our_completions(8, 1_000_000);
    let want: Vec<(u64, WcOpcode)> = vec![
        (1, WcOpcode::RdmaWrite),
        (2, WcOpcode::RdmaWrite),
        (3, WcOpcode::Send),
        (4, WcOpcode::Send),
        (5, WcOpcode::RdmaRead),
        (6, WcOpcode::FetchAdd),
        (7, WcOpcode::CompSwap),
    ];
    let got: Vec<(u64, WcOpcode)> = ours.iter().filter(|w| w.wr_id < 100).map(|w| (w.wr_id, w.opcode)).collect();
    if got != want {
        let c: Vec<_> = read_counter_window(&mut r.drv).unwrap().into_iter().filter(|c| c.1 != 0).collect();
        let s = r.sys.borrow();
        panic!("{ours:?}\npeer {peer:?}\ncounters {c:?}\npeer counters {:?}\nboard {:?}", s.peer.counters(), s.rnic.stats);
    }
    assert!(ours.iter().all(|w| w.status == WcStatus::Success), "{ours:?}");
    let recv = ours.iter().find(|w| w.wr_id == 700).expect("our receive completes");
    assert_eq!((recv.opcode, recv.byte_len), (WcOpcode::Recv, 3000));
    assert!(peer.iter().all(|w| w.status == WcStatus::Success), "{peer:?}");
    assert_eq!(peer.len(), 6, "{peer:?}");
    {
        let s = r.sys.borrow();
        let pm = s.peer.mem();
        assert!(pm.read(r.peer_buf + 0x33, 10_000).unwrap() == r.src_bytes(0x0FC0, 10_000), "WRITE");
        assert!(pm.read(r.peer_buf + 0x8000, 3000).unwrap() == r.src_bytes(0x9000, 3000), "WRITE_WITH_IMM");
        assert!(pm.read(r.peer_buf + 0x10_4000, 5000).unwrap() == r.src_bytes(0xA000, 5000), "SEND");
        assert!(pm.read(r.peer_buf + 0x10_8000, 64).unwrap() == r.src_bytes(0xC000, 64), "SEND_WITH_IMM");
        assert!(r.src_bytes(0x10_0010, 65_536) == pm.read(r.peer_buf + 0x2_0000, 65_536).unwrap(), "READ");
        assert_eq!(r.src_bytes(0x1E_0000, 16), [words[0].to_le_bytes(), words[1].to_le_bytes()].concat(), "atomics' original values");
        assert_eq!(pm.read_u64(r.peer_buf + 0x1F_0000).unwrap(), words[0] + 5);
        assert_eq!(pm.read_u64(r.peer_buf + 0x1F_0008).unwrap(), 0xDEAD_BEEF);
        assert!(r.src_bytes(0x14_0FF0, 9000) == pm.read(r.peer_buf + 0x4_0000, 9000).unwrap(), "the peer's WRITE");
        assert!(pm.read(r.peer_buf + 0x6_0000, 20_000).unwrap() == r.src_bytes(0x7F0, 20_000), "the peer's READ");
        assert!(r.src_bytes(0x18_0000, 3000) == pm.read(r.peer_buf + 0x9_0000, 3000).unwrap(), "the peer's SEND");
        let st = &s.rnic.stats;
        assert!(st.most_reads_outstanding > 4, "64 KiB READs of ours keep bursts outstanding: {st:?}");
    }
    board_clean(&mut r);
}

/// 2 % of frames dropped each way: go-back-N through the board top (the retransmissions re-read host memory
/// through the bridge).
#[test]
fn a_lossy_link_through_the_board_top() {
    let host = PcieHost { w_after_aw: true, backpressure: 4, ..PcieHost::gen3_x16() };
    let mut r = board_rig(2, host, 1024, "lossy");
    r.drv.modify_qp(r.qpn, &QpAttr { timeout: Some(8), ..Default::default() }).unwrap();
    {
        let mut s = r.sys.borrow_mut();
        s.out.set_faults(MacFaults::drop(0.02), 21);
        // and bit errors on the wire into the board: the CMAC flags those frames (bad FCS), the core drops them
        s.inl.set_faults(MacFaults { fcs: 0.02, ..MacFaults::drop(0.02) }, 22);
    }
    for i in 0..24u64 {
        let op = if i % 3 == 2 { WrOpcode::RdmaRead } else { WrOpcode::RdmaWrite };
        let off = i * 0x1_0000;
        let mut w = SendWr::new(i, op, vec![Sge { addr: r.src + off + 0x100 * (i % 5), length: 12_000, lkey: r.lkey }]);
        (w.remote_addr, w.rkey) = (r.peer_buf + off + 0x40 * (i % 7), r.peer_rkey);
        w.flags.signaled = true;
        r.drv.post_send(r.qpn, &w).unwrap();
    }
    let ours = r.our_completions(24, 6_000_000);
    assert_eq!(ours.len(), 24, "{ours:?}");
    assert!(ours.iter().enumerate().all(|(i, w)| w.wr_id == i as u64 && w.status == WcStatus::Success), "{ours:?}");
    {
        let s = r.sys.borrow();
        for i in 0..24u64 {
            let off = i * 0x1_0000;
            let theirs = s.peer.mem().read(r.peer_buf + off + 0x40 * (i % 7), 12_000).unwrap();
            assert!(theirs == r.src_bytes(off + 0x100 * (i % 5), 12_000), "message {i}");
        }
    }
    let c = read_counter_window(&mut r.drv).unwrap();
    assert!(counter(&c, "comp_retries") > 0, "the drops cost go-back-N passes: {c:?}");
    let fcs = r.sys.borrow().inl.stats.fcs_errors;
    assert!(fcs > 0 && counter(&c, "rx_drop_mac_error") == fcs, "{fcs} frames with a bad FCS: {c:?}");
    assert_eq!(counter(&c, "rx_drop_bad_icrc"), 0, "no flagged frame reached the ICRC check");
    board_clean(&mut r);
}

/// A WRITE with a wrong R_Key: the peer NAKs it, it completes with REM_ACCESS_ERR, nothing is written; the
/// QP's next WQE is flushed.
#[test]
fn an_access_error_through_the_board_top() {
    let mut r = board_rig(3, PcieHost::gen3_x16(), 4096, "access");
    let before = r.sys.borrow().peer.mem().read(r.peer_buf, 8192).unwrap();
    let mut w = SendWr::new(1, WrOpcode::RdmaWrite, vec![Sge { addr: r.src, length: 5000, lkey: r.lkey }]);
    (w.remote_addr, w.rkey) = (r.peer_buf, r.peer_rkey ^ 0x100);
    w.flags.signaled = true;
    r.drv.post_send(r.qpn, &w).unwrap();
    let mut w2 = SendWr::new(2, WrOpcode::RdmaWrite, vec![Sge { addr: r.src, length: 100, lkey: r.lkey }]);
    (w2.remote_addr, w2.rkey) = (r.peer_buf, r.peer_rkey);
    w2.flags.signaled = true;
    r.drv.post_send(r.qpn, &w2).unwrap();
    let ours = r.our_completions(2, 400_000);
    let got: Vec<(u64, WcStatus)> = ours.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]);
    assert!(r.sys.borrow().peer.mem().read(r.peer_buf, 8192).unwrap() == before, "nothing written");
    board_clean(&mut r);
}

/// The bench's PCIe-limited host (`rnic bench --host pcie`): two RNICs, each in the board shell with its
/// host memory behind the bridge model, WRITE 64 KiB at MTU 4096. Every message lands, and the goodput is
/// bounded by what the bridge can read from host memory (Gen3 x16 with 64-byte completions: 87 Gb/s of
/// payload), not by the 100G wire: the host model's limits take effect.
#[test]
fn the_pcie_host_bounds_the_bench_goodput() {
    use sim::bench::{goodput, BenchOpts};
    let host = PcieHost::gen3_x16();
    let o = BenchOpts { bytes_per_point: 1 << 20, host: Some(host), ..BenchOpts::full(322.265625) };
    let p = goodput(&o, WrOpcode::RdmaWrite, 4096, 1, 65536, &dir("bench")).unwrap();
    eprintln!("WRITE 64 KiB through the board shells: {:.1} Gb/s (PCIe read limit {:.1}, wire {:.1})", p.gbps, host.read_gbps(), p.wire_limit_gbps);
    assert!(p.problem.is_empty() && p.bad_messages == 0, "{}", p.problem);
    assert!(p.gbps <= host.read_gbps() * 1.01, "{:.1} Gb/s is more than the bridge can read ({:.1})", p.gbps, host.read_gbps());
    assert!(p.gbps >= 0.8 * host.read_gbps(), "{:.1} Gb/s: far below the PCIe limit {:.1}", p.gbps, host.read_gbps());
}
