//! The whole RNIC as a Verilator model, driven only through its host interface by the driver, against the
//! golden model as the peer over a paced 100G link: what the RTL requester sends must be accepted by the
//! golden model (which behaves as rxe on the wire) and land byte for byte in the peer's memory.

use sim::system::rig;
use rnic_driver::CsrBus;
use testbench::model::*;

/// RDMA WRITE of every interesting size lands in the golden model's memory, and the model ACKs each.
fn writes(mtu: u32) {
    let dir = std::env::temp_dir().join(format!("rnic-system-write{mtu}-{}", std::process::id()));
    let mut r = rig(mtu, &dir);
    let m = mtu as u64;
    let sizes = [1u64, m - 1, m, m + 1, 3 * m + 17, 65536];
    let mut off = 0u64;
    let mut done = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let mut wr = SendWr::new(i as u64, WrOpcode::RdmaWrite, vec![Sge { addr: r.src + off + 3, length: len as u32, lkey: r.lkey }]);
        wr.remote_addr = r.peer_buf + off + 5;
        wr.rkey = r.peer_rkey;
        r.drv.post_send(r.qpn, &wr).unwrap();
        done.push((off, len));
        off += len + 4096;
    }
    let frames_needed: u64 = sizes.iter().map(|l| l.div_ceil(m)).sum();
    let peer_qpn = r.peer_qpn;
    let ok = r.sys.borrow_mut().run_until(2_000_000, |s| {
        s.peer.qp(peer_qpn).map_or(false, |q| q.resp.msn as usize >= sizes.len())
    });
    let s = r.sys.borrow();
    eprintln!("mtu {mtu}: {} cycles, {} frames sent, {} received, {} DMA read beats", s.cycle, s.sent.len(), s.received.len(), s.dma.read_beats);
    assert!(ok, "the peer did not complete {} writes ({} frames expected, {} sent)", sizes.len(), frames_needed, s.sent.len());
    assert_eq!(s.sent.len() as u64, frames_needed, "one frame per MTU of payload");
    let c = s.peer.counters();
    assert_eq!(c.total_drops(), 0, "the golden model dropped frames: {:?}", c.drops);
    assert_eq!(c.naks_sent_total(), 0, "the golden model NAKed: {:?}", c.naks_sent);
    for (off, len) in done {
        let got = s.peer.mem().read(r.peer_buf + off + 5, len as usize).unwrap();
        assert!(got == r.src_bytes(off + 3, len as usize), "write of {len} bytes at offset {off} differs");
    }
    // every frame the RTL sent passes the golden decoder (ICRC included), from the link's pcap
    let d = testbench::decode::decode_pcap(&r.dir.join("rnic-tx.pcap")).unwrap();
    assert_eq!(d.roce_frames as usize, s.sent.len());
    assert!(d.ok(), "{:?}", d.problems);
    // the peer's ACKs reached our RX Parse as good frames
    drop(s);
    let good = r.drv.bus().read32(rnic_driver::host::REG_COUNTERS).unwrap();
    assert!(good >= 1, "RX Parse counted {good} good frames");
}

#[test]
fn rtl_writes_land_in_the_golden_peer_mtu_256() {
    writes(256);
}

#[test]
fn rtl_writes_land_in_the_golden_peer_mtu_1024() {
    writes(1024);
}

#[test]
fn rtl_writes_land_in_the_golden_peer_mtu_4096() {
    writes(4096);
}

#[test]
fn rtl_sends_and_writes_with_immediate_complete_at_the_golden_peer() {
    let dir = std::env::temp_dir().join(format!("rnic-system-send-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let sizes = [0u64, 1, 1023, 1024, 1025, 5000];
    {
        let mut s = r.sys.borrow_mut();
        let peer_qpn = r.peer_qpn;
        for (i, _) in sizes.iter().enumerate() {
            let rw = RecvWr { wr_id: 100 + i as u64, sg_list: vec![Sge { addr: r.peer_buf + (i as u64) * 8192, length: 8192, lkey: r.peer_rkey }] };
            s.peer.post_recv(peer_qpn, rw).unwrap();
        }
        let rw = RecvWr { wr_id: 200, sg_list: vec![] };
        s.peer.post_recv(peer_qpn, rw).unwrap();
    }
    for (i, &len) in sizes.iter().enumerate() {
        let op = if i % 2 == 0 { WrOpcode::Send } else { WrOpcode::SendWithImm };
        let mut wr = SendWr::new(i as u64, op, vec![Sge { addr: r.src + (i as u64) * 8192, length: len as u32, lkey: r.lkey }]);
        wr.imm_data = 0xA5A5_0000 + i as u32;
        r.drv.post_send(r.qpn, &wr).unwrap();
    }
    let mut wi = SendWr::new(99, WrOpcode::RdmaWriteWithImm, vec![Sge { addr: r.src, length: 3000, lkey: r.lkey }]);
    wi.remote_addr = r.peer_buf + 0x10_0000;
    wi.rkey = r.peer_rkey;
    wi.imm_data = 0x0BAD_CAFE;
    r.drv.post_send(r.qpn, &wi).unwrap();
    let wcs = r.wait_peer_completions(sizes.len() + 1, 3_000_000);
    assert_eq!(wcs.len(), sizes.len() + 1, "{wcs:?}");
    for (i, &len) in sizes.iter().enumerate() {
        let wc = &wcs[i];
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        assert_eq!((wc.wr_id, wc.opcode, wc.byte_len as u64), (100 + i as u64, WcOpcode::Recv, len));
        assert_eq!(wc.wc_flags.has(WcFlags::WITH_IMM), i % 2 == 1);
        if i % 2 == 1 {
            assert_eq!(wc.imm_data, 0xA5A5_0000 + i as u32);
        }
        let s = r.sys.borrow();
        let got = s.peer.mem().read(r.peer_buf + (i as u64) * 8192, len as usize).unwrap();
        assert!(got == r.src_bytes((i as u64) * 8192, len as usize), "send {i} payload");
    }
    let wc = &wcs[sizes.len()];
    assert_eq!((wc.wr_id, wc.opcode, wc.byte_len, wc.imm_data), (200, WcOpcode::RecvRdmaWithImm, 3000, 0x0BAD_CAFE));
    let s = r.sys.borrow();
    assert!(s.peer.mem().read(r.peer_buf + 0x10_0000, 3000).unwrap() == r.src_bytes(0, 3000));
    assert_eq!(s.peer.counters().total_drops(), 0);
}

#[test]
fn rtl_completes_signaled_writes_and_sends_through_its_cq() {
    let dir = std::env::temp_dir().join(format!("rnic-system-cqe-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    {
        let mut s = r.sys.borrow_mut();
        // one receive for each SEND and each WRITE_WITH_IMM below (3 + 3)
        for i in 0..6u64 {
            let rw = RecvWr { wr_id: i, sg_list: vec![Sge { addr: r.peer_buf + 0x10_0000 + i * 8192, length: 8192, lkey: r.peer_rkey }] };
            s.peer.post_recv(r.peer_qpn, rw).unwrap();
        }
    }
    // 12 WQEs, every third unsignaled: 8 completions, in order
    let mut want = Vec::new();
    for i in 0..12u64 {
        let op = match i % 4 {
            0 | 2 => WrOpcode::RdmaWrite,
            1 => WrOpcode::Send,
            _ => WrOpcode::RdmaWriteWithImm,
        };
        let len = [0u64, 1, 1023, 1024, 1025, 5000][(i % 6) as usize] as u32;
        let mut wr = SendWr::new(1000 + i, op, vec![Sge { addr: r.src + i * 8192, length: len, lkey: r.lkey }]);
        wr.remote_addr = r.peer_buf + i * 8192;
        wr.rkey = r.peer_rkey;
        wr.imm_data = 0x5500 + i as u32;
        wr.flags.signaled = i % 3 != 2;
        if wr.flags.signaled {
            want.push((1000 + i, WcOpcode::from_wr(wr.opcode), len, wr.opcode.has_imm()));
        }
        r.drv.post_send(r.qpn, &wr).unwrap();
    }
    assert_eq!(want.iter().filter(|w| w.3).count(), 2, "signaled WRITE_WITH_IMMs (i = 3, 7; 11 is unsignaled)");
    let wcs = r.our_completions(want.len(), 2_000_000);
    assert_eq!(wcs.len(), want.len(), "{wcs:?}");
    for (wc, (id, op, len, imm)) in wcs.iter().zip(&want) {
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        assert_eq!((wc.wr_id, wc.opcode, wc.byte_len, wc.qp_num), (*id, *op, *len, r.qpn), "{wc:?}");
        assert_eq!(wc.wc_flags.has(WcFlags::WITH_IMM), *imm);
    }
    // the unsignaled WQEs were retired with the signaled ones: the ring has room for a full window again
    for i in 0..100u64 {
        let mut wr = SendWr::new(5000 + i, WrOpcode::RdmaWrite, vec![Sge { addr: r.src, length: 64, lkey: r.lkey }]);
        wr.remote_addr = r.peer_buf;
        wr.rkey = r.peer_rkey;
        wr.flags.signaled = i == 99;
        r.drv.post_send(r.qpn, &wr).unwrap();
    }
    let wcs = r.our_completions(1, 2_000_000);
    assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![5099]);
}

/// RDMA READs from the golden peer of every interesting size up to 1 MiB, posted at once: the peer answers at
/// the wire rate, the Completer keeps up (no frame dropped by RX Parse), every READ completes and lands byte for
/// byte in host memory.
fn reads(mtu: u32) {
    let dir = std::env::temp_dir().join(format!("rnic-system-read{mtu}-{}", std::process::id()));
    let mut r = rig(mtu, &dir);
    // fill the peer's buffer with its own pattern
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..1 << 21).map(|i: u32| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        s.peer.mem_mut().write(r.peer_buf, &pat).unwrap();
    }
    let sizes = [1u32, mtu - 1, mtu, mtu + 1, 65536, 1 << 20];
    let dst = r.src;
    let mut off = 0u64;
    for (i, &len) in sizes.iter().enumerate() {
        let mut wr = SendWr::new(i as u64, WrOpcode::RdmaRead, vec![Sge { addr: dst + off + 1, length: len, lkey: r.lkey }]);
        wr.remote_addr = r.peer_buf + off + 3;
        wr.rkey = r.peer_rkey;
        r.drv.post_send(r.qpn, &wr).unwrap();
        off += u64::from(len) + 256;
    }
    let c0 = r.sys.borrow().cycle;
    let wcs = r.our_completions(sizes.len(), 3_000_000);
    let cycles = r.sys.borrow().cycle - c0;
    let ctr: Vec<u32> = (0..9).map(|i| r.drv.bus().read32(rnic_driver::host::REG_COUNTERS + 4 * i).unwrap()).collect();
    assert_eq!(wcs.len(), sizes.len(), "RX counters {ctr:?}: {wcs:?}");
    assert!(ctr[1..].iter().all(|&c| c == 0), "RX Parse dropped frames (counters 1..8 by reason, 8 = overflow): {ctr:?}");
    let total: u64 = sizes.iter().map(|&l| u64::from(l)).sum();
    let frames: u64 = sizes.iter().map(|&l| u64::from(l.div_ceil(mtu))).sum();
    assert_eq!(u64::from(ctr[0]), frames, "one good frame per response, nothing else received");
    eprintln!(
        "mtu {mtu}: {total} bytes read in {frames} responses, {cycles} cycles from the doorbells to the last completion ({:.1} Gb/s)",
        total as f64 * 8.0 / (cycles as f64 / testbench::mac::CORE_HZ) / 1e9
    );
    let mut off = 0u64;
    for (i, (&len, wc)) in sizes.iter().zip(&wcs).enumerate() {
        assert_eq!((wc.wr_id, wc.status, wc.opcode, wc.byte_len), (i as u64, WcStatus::Success, WcOpcode::RdmaRead, len));
        let s = r.sys.borrow();
        let want = s.peer.mem().read(r.peer_buf + off + 3, len as usize).unwrap();
        let got = r.mem.lock().unwrap().read(dst + off + 1, len as usize).unwrap();
        assert!(got == want, "read {i} ({len} bytes) differs");
        off += u64::from(len) + 256;
    }
    let s = r.sys.borrow();
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
}

#[test]
fn rtl_reads_from_the_golden_peer_land_in_host_memory_and_complete() {
    reads(1024);
}

#[test]
fn rtl_reads_from_the_golden_peer_mtu_4096() {
    reads(4096);
}

#[test]
fn rtl_reads_from_the_golden_peer_mtu_256() {
    reads(256);
}

#[test]
fn the_rnic_answers_arp_for_its_address_only() {
    use testbench::wire::frame::{parse_ethernet, ArpFrame, Frame, MacAddr, ARP_OP_REPLY};
    let dir = std::env::temp_dir().join(format!("rnic-system-arp-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let asker = MacAddr([0x52, 0x54, 0, 0, 0, 9]);
    let ours: std::net::Ipv4Addr = sim::system::OUR_IP.into();
    let other: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 0, 99);
    let who: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 0, 9);
    let mut s = r.sys.borrow_mut();
    let before = s.sent.len();
    s.inject(ArpFrame::request(asker, who, other).build());
    s.inject(ArpFrame::request(asker, who, ours).build());
    assert!(s.run_until(5_000, |s| s.sent.len() > before));
    for _ in 0..2_000 {
        s.step();
    }
    assert_eq!(s.sent.len(), before + 1, "one reply, for our address only");
    let Ok(Frame::Arp(a)) = parse_ethernet(&s.sent[before]) else { panic!("not an ARP reply") };
    assert_eq!(a.arp.oper, ARP_OP_REPLY);
    assert_eq!((a.arp.sha.0, a.arp.spa, a.arp.tha, a.arp.tpa), (sim::system::OUR_MAC, ours, asker, who));
    drop(s);
    assert_eq!(r.drv.bus().read32(rnic_driver::host::REG_COUNTERS + 4 * 9).unwrap(), 1, "ARP answered counter");
}

/// The golden model as the requester, the RTL Responder executing: WRITE and READ against our memory, SEND and
/// WRITE_WITH_IMM into our receive queue, completions in our CQ.
#[test]
fn the_golden_peer_writes_reads_and_sends_to_the_rtl_responder() {
    let dir = std::env::temp_dir().join(format!("rnic-system-responder-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    // our receives: 4 buffers of 8 KiB at src + 1 MiB
    let rbuf = r.src + (1 << 20);
    for i in 0..4u64 {
        r.drv.post_recv(r.qpn, &RecvWr { wr_id: 700 + i, sg_list: vec![Sge { addr: rbuf + i * 8192, length: 8192, lkey: r.lkey }] }).unwrap();
    }
    let peer_qpn = r.peer_qpn;
    let sizes = [1u64, 1023, 1024, 1025, 5000];
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..1 << 20).map(|i: u32| (i.wrapping_mul(2246822519) >> 11) as u8).collect();
        s.peer.mem_mut().write(r.peer_buf, &pat).unwrap();
        let mut off = 0;
        for (i, &len) in sizes.iter().enumerate() {
            // WRITE peer_buf[off..] -> our src[off + 2..]
            let mut w = SendWr::new(i as u64, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf + off, length: len as u32, lkey: r.peer_rkey }]);
            w.remote_addr = r.src + off + 2;
            w.rkey = r.lkey;
            s.peer.post_send(peer_qpn, w).unwrap();
            off += len + 64;
        }
        // READ our src[0x8_0000..] into peer_buf[0x10_0000..]... (within the peer's 2 MiB)
        let mut rd = SendWr::new(50, WrOpcode::RdmaRead, vec![Sge { addr: r.peer_buf + 0x10_0000, length: 3000, lkey: r.peer_rkey }]);
        rd.remote_addr = r.src + 0x8_0000;
        rd.rkey = r.lkey;
        s.peer.post_send(peer_qpn, rd).unwrap();
        // SEND 2000 bytes, SEND_WITH_IMM 0 bytes, WRITE_WITH_IMM 700 bytes
        s.peer.post_send(peer_qpn, SendWr::new(60, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x1000, length: 2000, lkey: r.peer_rkey }])).unwrap();
        let mut si = SendWr::new(61, WrOpcode::SendWithImm, vec![]);
        si.imm_data = 0xFEED_0001;
        s.peer.post_send(peer_qpn, si).unwrap();
        let mut wi = SendWr::new(62, WrOpcode::RdmaWriteWithImm, vec![Sge { addr: r.peer_buf + 0x3000, length: 700, lkey: r.peer_rkey }]);
        wi.remote_addr = r.src + 0x9_0000;
        wi.rkey = r.lkey;
        wi.imm_data = 0xFEED_0002;
        s.peer.post_send(peer_qpn, wi).unwrap();
    }
    let peer_wcs = r.wait_peer_completions(sizes.len() + 4, 3_000_000);
    assert_eq!(peer_wcs.len(), sizes.len() + 4, "{peer_wcs:?}");
    assert!(peer_wcs.iter().all(|w| w.status == WcStatus::Success), "{peer_wcs:?}");
    let ours = r.our_completions(3, 200_000);
    let s = r.sys.borrow();
    let mut off = 0;
    for &len in &sizes {
        let want = s.peer.mem().read(r.peer_buf + off, len as usize).unwrap();
        assert!(r.src_bytes(off + 2, len as usize) == want, "peer WRITE of {len} bytes");
        off += len + 64;
    }
    assert!(s.peer.mem().read(r.peer_buf + 0x10_0000, 3000).unwrap() == r.src_bytes(0x8_0000, 3000), "peer READ");
    assert_eq!(ours.len(), 3, "{ours:?}");
    assert_eq!((ours[0].wr_id, ours[0].opcode, ours[0].byte_len, ours[0].status), (700, WcOpcode::Recv, 2000, WcStatus::Success));
    assert!(r.src_bytes((1 << 20) as u64, 2000) == s.peer.mem().read(r.peer_buf + 0x1000, 2000).unwrap(), "SEND payload");
    assert_eq!((ours[1].wr_id, ours[1].byte_len, ours[1].imm_data), (701, 0, 0xFEED_0001));
    assert!(ours[1].wc_flags.has(WcFlags::WITH_IMM));
    assert_eq!((ours[2].wr_id, ours[2].opcode, ours[2].byte_len, ours[2].imm_data), (702, WcOpcode::RecvRdmaWithImm, 700, 0xFEED_0002));
    assert!(r.src_bytes(0x9_0000, 700) == s.peer.mem().read(r.peer_buf + 0x3000, 700).unwrap(), "WRITE_WITH_IMM payload");
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
    let c = s.peer.counters();
    assert_eq!(c.total_drops(), 0, "{:?}", c.drops);
}

/// Eight QPs at once: every QP posts three WRITEs and a SEND before any completes; every byte lands, every
/// completion comes back on the right QP.
#[test]
fn eight_qps_at_once() {
    let dir = std::env::temp_dir().join(format!("rnic-system-8qp-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let mut pairs = vec![(r.qpn, r.peer_qpn)];
    for k in 1..8u32 {
        pairs.push(r.add_qp_pair(1024, 0x10_0000 * k + 7, 0x20_0000 * k + 3));
    }
    {
        let mut s = r.sys.borrow_mut();
        for (k, &(_, pq)) in pairs.iter().enumerate() {
            let rw = RecvWr { wr_id: 900 + k as u64, sg_list: vec![Sge { addr: r.peer_buf + 0x18_0000 + k as u64 * 4096, length: 4096, lkey: r.peer_rkey }] };
            s.peer.post_recv(pq, rw).unwrap();
        }
    }
    let sizes = [100u64, 1500, 3000];
    for (k, &(q, _)) in pairs.iter().enumerate() {
        for (j, &len) in sizes.iter().enumerate() {
            let off = (k as u64 * 4 + j as u64) * 8192;
            let mut w = SendWr::new((k * 10 + j) as u64, WrOpcode::RdmaWrite, vec![Sge { addr: r.src + off, length: len as u32, lkey: r.lkey }]);
            w.remote_addr = r.peer_buf + off;
            w.rkey = r.peer_rkey;
            r.drv.post_send(q, &w).unwrap();
        }
        let soff = (k as u64 * 4 + 3) * 8192;
        r.drv.post_send(q, &SendWr::new((k * 10 + 3) as u64, WrOpcode::Send, vec![Sge { addr: r.src + soff, length: 2000, lkey: r.lkey }])).unwrap();
    }
    let ours = r.our_completions(32, 2_000_000);
    assert_eq!(ours.len(), 32, "{ours:?}");
    for (k, &(q, _)) in pairs.iter().enumerate() {
        let mine: Vec<u64> = ours.iter().filter(|w| w.qp_num == q).map(|w| w.wr_id).collect();
        assert_eq!(mine, (0..4).map(|j| (k * 10 + j) as u64).collect::<Vec<_>>(), "QP {q}: completions in order");
    }
    assert!(ours.iter().all(|w| w.status == WcStatus::Success));
    let peer_wcs = r.wait_peer_completions(8, 100_000);
    assert_eq!(peer_wcs.len(), 8);
    let s = r.sys.borrow();
    for k in 0..8u64 {
        for (j, &len) in sizes.iter().enumerate() {
            let off = (k * 4 + j as u64) * 8192;
            assert!(s.peer.mem().read(r.peer_buf + off, len as usize).unwrap() == r.src_bytes(off, len as usize), "QP {k} write {j}");
        }
        let soff = (k * 4 + 3) * 8192;
        let wc = peer_wcs.iter().find(|w| w.wr_id == 900 + k).expect("the SEND of every QP arrived");
        assert_eq!(wc.byte_len, 2000);
        assert!(s.peer.mem().read(r.peer_buf + 0x18_0000 + k * 4096, 2000).unwrap() == r.src_bytes(soff, 2000));
    }
    assert_eq!(s.peer.counters().total_drops(), 0);
}

/// Atomics from our Requester to the golden peer's Responder: FETCH_ADD and COMPARE_SWAP (one compare that
/// hits, one that misses) on 8-byte words of the peer's memory; the peer's words change as the verbs say,
/// the original values land in our local buffers in host byte order, and each completes with its own WC opcode.
#[test]
fn rtl_atomics_at_the_golden_peer_return_the_original_values() {
    let dir = std::env::temp_dir().join(format!("rnic-system-atomics-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    assert_ne!(r.drv.info.caps & rnic_driver::host::CAP_ATOMIC, 0, "the RNIC advertises atomics");
    let words = [0x1111_2222_3333_4444u64, u64::MAX, 0x0123_4567_89AB_CDEF, 42];
    {
        let mut s = r.sys.borrow_mut();
        for (i, w) in words.iter().enumerate() {
            s.peer.mem_mut().write_u64(r.peer_buf + 0x100 + 8 * i as u64, *w).unwrap();
        }
    }
    // (opcode, compare/add, swap, want at the peer)
    let ops = [
        (WrOpcode::AtomicFetchAndAdd, 5u64, 0u64, words[0].wrapping_add(5)),
        (WrOpcode::AtomicFetchAndAdd, 1, 0, 0),
        (WrOpcode::AtomicCmpAndSwp, words[2], 0xDEAD_BEEF, 0xDEAD_BEEF),
        (WrOpcode::AtomicCmpAndSwp, 41, 7, 42),
    ];
    for (i, &(op, ca, sw, _)) in ops.iter().enumerate() {
        let mut w = SendWr::new(900 + i as u64, op, vec![Sge { addr: r.src + 0x4000 + 8 * i as u64, length: 8, lkey: r.lkey }]);
        w.remote_addr = r.peer_buf + 0x100 + 8 * i as u64;
        w.rkey = r.peer_rkey;
        w.compare_add = ca;
        w.swap = sw;
        r.drv.post_send(r.qpn, &w).unwrap();
    }
    let wcs = r.our_completions(4, 400_000);
    assert_eq!(wcs.len(), 4, "{wcs:?}");
    for (i, wc) in wcs.iter().enumerate() {
        let want_op = if i < 2 { WcOpcode::FetchAdd } else { WcOpcode::CompSwap };
        assert_eq!((wc.wr_id, wc.status, wc.opcode, wc.byte_len), (900 + i as u64, WcStatus::Success, want_op, 8), "{wc:?}");
    }
    let s = r.sys.borrow();
    for (i, &(_, _, _, want)) in ops.iter().enumerate() {
        assert_eq!(s.peer.mem().read_u64(r.peer_buf + 0x100 + 8 * i as u64).unwrap(), want, "peer word {i}");
        assert_eq!(r.src_bytes(0x4000 + 8 * i as u64, 8), words[i].to_le_bytes(), "original value {i} in our buffer");
    }
    assert_eq!(s.peer.counters().atomic_acks_sent, 4);
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
}

/// An 8-byte atomic WR: result to `local` (address, lkey), target `remote` (address, rkey), operands
/// [compare/add, swap, compare mask / field boundaries, swap mask].
fn atomic_wr(id: u64, op: WrOpcode, local: (u64, u32), remote: (u64, u32), v: [u64; 4]) -> SendWr {
    let mut w = SendWr::new(id, op, vec![Sge { addr: local.0, length: 8, lkey: local.1 }]);
    (w.remote_addr, w.rkey) = remote;
    (w.compare_add, w.swap, w.compare_add_mask, w.swap_mask) = (v[0], v[1], v[2], v[3]);
    w
}

/// The MR of a WQE in flight is deregistered before the WQE has to be sent again: every frame we send is
/// lost, so the retransmit timer sends the QP back to the WRITE; WQE Check finds its lkey gone and the WRITE
/// completes with LOC_PROT_ERR (rxe: `copy_data` fails, COMPST_ERROR), the WRITE behind it (its MR intact)
/// with WR_FLUSH_ERR without going out again, and the peer's memory is untouched. Before the Completer's fix this hung: the failed record of the head
/// WQE was dropped as "the head sent again" and the QP waited for an ACK that could not come.
#[test]
fn a_wqe_whose_mr_is_deregistered_before_its_retransmission_completes_with_loc_prot_err() {
    let dir = std::env::temp_dir().join(format!("rnic-system-dereg-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    r.drv.modify_qp(r.qpn, &QpAttr { timeout: Some(1), retry_cnt: Some(7), ..Default::default() }).unwrap();
    let before = r.sys.borrow().peer.mem().read(r.peer_buf, 8192).unwrap();
    r.sys.borrow_mut().out.set_faults(testbench::mac::MacFaults { drop: 1.0, duplicate: 0.0, reorder: 0.0, corrupt: 0.0, fcs: 0.0, reorder_cycles: 0 }, 1);
    let mut w = SendWr::new(61, WrOpcode::RdmaWrite, vec![Sge { addr: r.src, length: 4096, lkey: r.lkey }]);
    w.remote_addr = r.peer_buf;
    w.rkey = r.peer_rkey;
    w.flags.signaled = true;
    r.drv.post_send(r.qpn, &w).unwrap();
    // behind it a WRITE from another MR, which stays registered: it must not go out once the QP is in error
    let key2 = r.drv.reg_mr(testbench::model::Pd(1), r.src + (1 << 20), 8192, AccessFlags::ALL).unwrap();
    let mut w2 = SendWr::new(62, WrOpcode::RdmaWrite, vec![Sge { addr: r.src + (1 << 20), length: 512, lkey: key2 }]);
    w2.remote_addr = r.peer_buf + 4096;
    w2.rkey = r.peer_rkey;
    w2.flags.signaled = true;
    r.drv.post_send(r.qpn, &w2).unwrap();
    // sent (and lost); then the MR goes away and the link comes back
    assert!(r.our_completions(1, 2_600).is_empty());
    assert!(r.sys.borrow().out.stats.dropped >= 5, "both WRITEs were sent and lost");
    r.drv.dereg_mr(r.lkey).unwrap();
    let sent = r.sys.borrow().out.stats.sent;
    r.sys.borrow_mut().out.set_faults(testbench::mac::MacFaults { drop: 0.0, duplicate: 0.0, reorder: 0.0, corrupt: 0.0, fcs: 0.0, reorder_cycles: 0 }, 1);
    let wcs = r.our_completions(2, 200_000);
    let got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, vec![(61, WcStatus::LocProtErr), (62, WcStatus::WrFlushErr)]);
    assert_eq!(r.sys.borrow().peer.mem().read(r.peer_buf, 8192).unwrap(), before, "nothing reached the peer");
    // (the peer would not have executed the second WRITE anyway, its PSN being past the lost first: so look
    // at what we sent)
    assert_eq!(r.sys.borrow().out.stats.sent, sent, "not one frame left after the MR went away");
}

/// Masked atomics from our Requester to the golden peer's Responder: each WQE's mask slot goes first in the
/// ring, other QPs' WQEs are not needed between them for the point (the WQE Check unit test covers that);
/// the peer's words become what the golden functions say, our buffers get the original values, each WC has
/// the masked opcode. Among them plain atomics, so a masked WQE's masks never leak into the next one.
#[test]
fn rtl_masked_atomics_at_the_golden_peer_return_the_original_values() {
    use testbench::model::responder::{masked_cmp_swap, masked_fetch_add};
    let dir = std::env::temp_dir().join(format!("rnic-system-masked-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    assert_ne!(r.drv.info.caps & rnic_driver::host::CAP_MASKED_ATOMIC, 0, "the RNIC advertises masked atomics");
    let words = [0x0000_00FF_0000_FFFFu64, 0x1111_2222_3333_4444, 0xFFFF_FFFF_FFFF_FFFF, 0x8000_0000_7FFF_FFFF, 5, 0x1234_5678_9ABC_DEF0];
    {
        let mut s = r.sys.borrow_mut();
        for (i, w) in words.iter().enumerate() {
            s.peer.mem_mut().write_u64(r.peer_buf + 0x300 + 8 * i as u64, *w).unwrap();
        }
    }
    // (opcode, compare/add, swap, compare mask / field boundaries, swap mask)
    let ops = [
        // per-byte adds: the carries stop at every byte boundary
        (WrOpcode::MaskedAtomicFetchAndAdd, 0x0101_0101_0101_0101u64, 0u64, 0x8080_8080_8080_8080u64, 0u64),
        // compare the low 16 bits (they match), swap the high 32
        (WrOpcode::MaskedAtomicCmpAndSwp, 0xFFFF_FFFF_FFFF_4444, 0xABCD_EF01_0000_0000, 0xFFFF, 0xFFFF_FFFF_0000_0000),
        // a plain FETCH_ADD between: no masks
        (WrOpcode::AtomicFetchAndAdd, 1, 0, 0, 0),
        // all-zero boundaries: one 64-bit add
        (WrOpcode::MaskedAtomicFetchAndAdd, 0x8000_0000_0000_0001, 0, 0, 0),
        // a compare that misses under its mask: nothing written
        (WrOpcode::MaskedAtomicCmpAndSwp, 4, 0xFFFF, 0xF, u64::MAX),
        // all-ones masks: a plain COMPARE_SWAP that hits
        (WrOpcode::MaskedAtomicCmpAndSwp, words[5], 0x0BAD_F00D, u64::MAX, u64::MAX),
    ];
    for (i, &(op, ca, sw, cm, sm)) in ops.iter().enumerate() {
        let w = atomic_wr(950 + i as u64, op, (r.src + 0x5000 + 8 * i as u64, r.lkey), (r.peer_buf + 0x300 + 8 * i as u64, r.peer_rkey), [ca, sw, cm, sm]);
        r.drv.post_send(r.qpn, &w).unwrap();
    }
    let wcs = r.our_completions(ops.len(), 400_000);
    assert_eq!(wcs.len(), ops.len(), "{wcs:?}");
    for (i, wc) in wcs.iter().enumerate() {
        let want_op = match ops[i].0 {
            WrOpcode::MaskedAtomicFetchAndAdd => WcOpcode::MaskedFetchAdd,
            WrOpcode::MaskedAtomicCmpAndSwp => WcOpcode::MaskedCompSwap,
            _ => WcOpcode::FetchAdd,
        };
        assert_eq!((wc.wr_id, wc.status, wc.opcode, wc.byte_len), (950 + i as u64, WcStatus::Success, want_op, 8), "{wc:?}");
    }
    let s = r.sys.borrow();
    for (i, &(op, ca, sw, cm, sm)) in ops.iter().enumerate() {
        let want = match op {
            WrOpcode::MaskedAtomicFetchAndAdd => masked_fetch_add(words[i], ca, cm),
            WrOpcode::MaskedAtomicCmpAndSwp => masked_cmp_swap(words[i], ca, cm, sw, sm),
            _ => words[i].wrapping_add(ca),
        };
        assert_eq!(s.peer.mem().read_u64(r.peer_buf + 0x300 + 8 * i as u64).unwrap(), want, "peer word {i}");
        assert_eq!(r.src_bytes(0x5000 + 8 * i as u64, 8), words[i].to_le_bytes(), "original value {i} in our buffer");
    }
    // the hand-written expectations of the cases above, so the golden functions are not the only judge
    assert_eq!(s.peer.mem().read_u64(r.peer_buf + 0x300).unwrap(), 0x0101_0100_0101_0000);
    assert_eq!(s.peer.mem().read_u64(r.peer_buf + 0x308).unwrap(), 0xABCD_EF01_3333_4444);
    assert_eq!(s.peer.mem().read_u64(r.peer_buf + 0x320).unwrap(), 5);
    assert_eq!(s.peer.counters().atomic_acks_sent, ops.len() as u64);
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
}

/// Atomics from the golden peer to our Responder (the Atomic Unit): FETCH_ADD, COMPARE_SWAP and their masked
/// forms on words of our memory; our words change as the verbs say and the peer gets the original values back.
#[test]
fn the_golden_peer_runs_atomics_on_the_rtl_responder() {
    let dir = std::env::temp_dir().join(format!("rnic-system-atomics-resp-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let words = [7u64, u64::MAX - 1, 0xAAAA_5555_AAAA_5555, 100, 0x0000_00FF_0000_FFFF, 0x1111_2222_3333_4444];
    for (i, w) in words.iter().enumerate() {
        r.mem.lock().unwrap().write(r.src + 0x6000 + 8 * i as u64, &w.to_le_bytes()).unwrap();
    }
    // (opcode, compare/add, swap, compare mask / field boundaries, swap mask, want)
    let ops = [
        (WrOpcode::AtomicFetchAndAdd, 3u64, 0u64, 0u64, 0u64, 10u64),
        (WrOpcode::AtomicFetchAndAdd, 5, 0, 0, 0, 3),
        (WrOpcode::AtomicCmpAndSwp, words[2], 0x1234, 0, 0, 0x1234),
        (WrOpcode::AtomicCmpAndSwp, 99, 1, 0, 0, 100),
        // two 32-bit fields and 16-bit ones: +1 in each; the low field's carry stops at bit 15 / bit 31
        (WrOpcode::MaskedAtomicFetchAndAdd, 0x0000_0001_0000_0001, 0, 0x8000_8000_8000_8000, 0, 0x0000_0100_0000_0000),
        // compare only the low 16 bits (0x4444), swap only the high 32
        (WrOpcode::MaskedAtomicCmpAndSwp, 0xFFFF_FFFF_FFFF_4444, 0xABCD_EF01_0000_0000, 0xFFFF, 0xFFFF_FFFF_0000_0000, 0xABCD_EF01_3333_4444),
    ];
    {
        let mut s = r.sys.borrow_mut();
        let q = r.peer_qpn;
        for (i, &(op, ca, sw, cm, sm, _)) in ops.iter().enumerate() {
            let w = atomic_wr(i as u64, op, (r.peer_buf + 0x200 + 8 * i as u64, r.peer_rkey), (r.src + 0x6000 + 8 * i as u64, r.lkey), [ca, sw, cm, sm]);
            s.peer.post_send(q, w).unwrap();
        }
    }
    let wcs = r.wait_peer_completions(6, 400_000);
    assert_eq!(wcs.len(), 6, "{wcs:?}");
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    for (i, &(_, _, _, _, _, want)) in ops.iter().enumerate() {
        assert_eq!(r.src_bytes(0x6000 + 8 * i as u64, 8), want.to_le_bytes(), "our word {i}");
        let got = r.sys.borrow().peer.mem().read_u64(r.peer_buf + 0x200 + 8 * i as u64).unwrap();
        assert_eq!(got, words[i], "the original value of word {i} at the peer");
    }
    let w = sim::rxe::rtl_ep::read_counter_window(&mut r.drv).unwrap();
    assert_eq!(sim::rxe::rtl_ep::counter(&w, "resp_requests"), 6);
    assert_eq!(sim::rxe::rtl_ep::counter(&w, "resp_class_c_naks"), 0);
    assert!(r.sys.borrow().dma.faults.is_empty());
}

/// A completion reaches host memory after its data: while the RNIC receives READ responses (the Completer's
/// Scatter Path) and SENDs (the Responder's) at once, no payload write may land in a buffer after that
/// buffer's CQE (`CqeOrder`, on every DMA write). Both Scatter Paths share one DMA write arbiter and CQE
/// Generation another input of the port, so without an ordering rule a CQE can overtake its last beats.
#[test]
fn a_completion_is_written_after_its_payload_with_both_scatter_paths_busy() {
    let dir = std::env::temp_dir().join(format!("rnic-system-cqe-order-{}", std::process::id()));
    let mut r = rig(4096, &dir);
    let (base, n) = r.drv.cq_ring(testbench::model::Cq(0)).unwrap();
    r.sys.borrow_mut().cqe_order.rings.push((base, n));
    let peer_qpn = r.peer_qpn;
    // 16 SENDs and 16 READ responses of 4 KiB come back to back (128 KiB) into RX Parse's 32 KiB: a SEND
    // whose receive WQE is not among the eight read ahead per QP waits for it (one host round trip, 161
    // cycles, against the wire's 107 per 4 KiB), so RX Parse may overflow and the peer resend; a lost last SEND has
    // only the peer's retransmit timer, set to 1 ms here (rig's 67 ms is beyond this test's budget)
    r.sys.borrow_mut().peer.modify_qp(peer_qpn, &QpAttr { timeout: Some(8), ..Default::default() }).unwrap();
    let len = 4096u64;
    let rounds = 16u64;
    for i in 0..rounds {
        let rbuf = r.src + 0x10_0000 + i * len;
        r.drv.post_recv(r.qpn, &RecvWr { wr_id: 900 + i, sg_list: vec![Sge { addr: rbuf, length: len as u32, lkey: r.lkey }] }).unwrap();
        r.sys.borrow_mut().cqe_order.watch.insert(900 + i, (rbuf, len));
    }
    for i in 0..rounds {
        let dst = r.src + 0x18_0000 + i * len;
        let mut rd = SendWr::new(100 + i, WrOpcode::RdmaRead, vec![Sge { addr: dst, length: len as u32, lkey: r.lkey }]);
        rd.remote_addr = r.peer_buf + i * len;
        rd.rkey = r.peer_rkey;
        r.drv.post_send(r.qpn, &rd).unwrap();
        r.sys.borrow_mut().cqe_order.watch.insert(100 + i, (dst, len));
        let s = SendWr::new(i, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x10_0000 + i * len, length: len as u32, lkey: r.peer_rkey }]);
        r.sys.borrow_mut().peer.post_send(peer_qpn, s).unwrap();
    }
    let ours = r.our_completions(2 * rounds as usize, 3_000_000);
    let w = sim::rxe::rtl_ep::read_counter_window(&mut r.drv).unwrap();
    eprintln!("DBG {:?}", w.iter().filter(|x| x.1 != 0).collect::<Vec<_>>());
    eprintln!("DBG faults {:?}", r.sys.borrow().dma.faults);
    assert_eq!(ours.len(), 2 * rounds as usize, "{ours:?}");
    assert!(ours.iter().all(|w| w.status == WcStatus::Success), "{ours:?}");
    let s = r.sys.borrow();
    assert_eq!(s.cqe_order.cqes_seen, 2 * rounds, "every watched CQE seen by the monitor");
    assert!(s.cqe_order.violations.is_empty(), "{} payload writes after their CQE, first: {:?}", s.cqe_order.violations.len(), s.cqe_order.violations.first());
    for i in 0..rounds {
        assert!(r.src_bytes(0x18_0000 + i * len, len as usize) == s.peer.mem().read(r.peer_buf + i * len, len as usize).unwrap(), "READ {i}");
        assert!(r.src_bytes(0x10_0000 + i * len, len as usize) == s.peer.mem().read(r.peer_buf + 0x10_0000 + i * len, len as usize).unwrap(), "SEND {i}");
    }
}

/// Inline WQEs (`CAPS` bit 5): SEND, SEND_WITH_IMM, WRITE and WRITE_WITH_IMM of 0..=256 bytes whose data the
/// driver copies into the send ring (no lkey, no buffer), at path MTU 256 (one packet each, the largest
/// inline payload filling it). Six batches of six, so the ring (64 slots) wraps and the driver pads WQEs to
/// the ring's read groups; one request frame is lost once, so its WQE and the ones after it are sent again
/// from the ring's slots (go-back-N re-reads them). Every payload lands byte for byte at the golden peer,
/// every receive completes with its length and immediate, every WQE completes at our CQ with success.
#[test]
fn rtl_inline_sends_and_writes_land_at_the_golden_peer() {
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    use std::cell::Cell;
    use std::rc::Rc;
    let dir = std::env::temp_dir().join(format!("rnic-system-inline-{}", std::process::id()));
    let mut r = rig(256, &dir);
    assert_ne!(r.drv.info.caps & rnic_driver::host::CAP_INLINE, 0, "the RNIC advertises inline WQEs");
    let (requests, lost) = (Rc::new(Cell::new(0usize)), Rc::new(Cell::new(0usize)));
    {
        let (requests, lost) = (requests.clone(), lost.clone());
        r.sys.borrow_mut().to_peer_filter = Some(Box::new(move |b: &[u8]| {
            let Ok(f) = testbench::wire::RoceFrame::parse(b) else { return true };
            if f.packet.bth.opcode == testbench::wire::opcode::RC_ACKNOWLEDGE {
                return true;
            }
            requests.set(requests.get() + 1);
            // the 10th request frame (batch 2), once
            if requests.get() == 10 && lost.get() == 0 {
                lost.set(1);
                return false;
            }
            true
        }));
    }
    let mut rng = SmallRng::seed_from_u64(0x1111);
    let edge = [0usize, 1, 63, 64, 65, 128, 255, 256];
    // the ring index the driver is at, and the padding slots it wrote (`group_pad`, as `post_send` does)
    let (mut slot_total, mut pads) = (0usize, 0usize);
    for batch in 0..6u64 {
        let mut want = Vec::new();
        for k in 0..6u64 {
            let i = batch * 6 + k;
            let len = if (i as usize) < edge.len() { edge[i as usize] } else { rng.gen_range(0..=256) };
            let op = [WrOpcode::Send, WrOpcode::RdmaWrite, WrOpcode::SendWithImm, WrOpcode::RdmaWriteWithImm][(i % 4) as usize];
            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let dst = r.peer_buf + i * 512;
            if op != WrOpcode::RdmaWrite {
                let rw = RecvWr { wr_id: 7000 + i, sg_list: vec![Sge { addr: dst, length: 512, lkey: r.peer_rkey }] };
                r.sys.borrow_mut().peer.post_recv(r.peer_qpn, rw).unwrap();
            }
            let mut wr = SendWr::new(i, op, vec![]);
            wr.set_inline(data.clone());
            wr.flags.signaled = true;
            wr.remote_addr = dst;
            wr.rkey = r.peer_rkey;
            wr.imm_data = 0x1E00_0000 + i as u32;
            let n = 1 + len.div_ceil(64);
            let p = rnic_driver::host::group_pad(slot_total as u16, n, 64).unwrap();
            pads += p;
            slot_total += p + n;
            r.drv.post_send(r.qpn, &wr).unwrap();
            want.push((i, op, data));
        }
        let wcs = r.our_completions(want.len(), 3_000_000);
        assert_eq!(wcs.len(), want.len(), "batch {batch}: {wcs:?}");
        for (wc, (i, op, _)) in wcs.iter().zip(&want) {
            assert_eq!((wc.status, wc.wr_id, wc.opcode), (WcStatus::Success, *i, WcOpcode::from_wr(*op)), "{wc:?}");
        }
        let n_recv = want.iter().filter(|w| w.1 != WrOpcode::RdmaWrite).count();
        let pw = r.wait_peer_completions(n_recv, 1_000_000);
        assert_eq!(pw.len(), n_recv, "batch {batch}: {pw:?}");
        let mut pw = pw.into_iter();
        for (i, op, data) in &want {
            let dst = r.peer_buf + i * 512;
            if *op != WrOpcode::RdmaWrite {
                let wc = pw.next().unwrap();
                assert_eq!((wc.status, wc.wr_id, wc.byte_len as usize), (WcStatus::Success, 7000 + i, data.len()), "{wc:?}");
                assert_eq!(wc.wc_flags.has(WcFlags::WITH_IMM), op.has_imm());
                if op.has_imm() {
                    assert_eq!(wc.imm_data, 0x1E00_0000 + *i as u32);
                }
            }
            let got = r.sys.borrow().peer.mem().read(dst, data.len()).unwrap();
            assert!(got == *data, "WQE {i} ({op:?}, {} bytes): payload differs", data.len());
        }
    }
    eprintln!("{} cycles, {} request frames, {slot_total} slots ({pads} padding)", r.sys.borrow().cycle, requests.get());
    assert_eq!(lost.get(), 1, "a request frame was lost");
    assert!(slot_total > 2 * 64 && pads > 10, "the ring wrapped twice ({slot_total} slots, {pads} of them padding)");
    // the frames after the lost one were sent again: more request frames than WQEs
    assert!(requests.get() > 36, "{} request frames for 36 WQEs", requests.get());
    let d = testbench::decode::decode_pcap(&r.dir.join("rnic-tx.pcap")).unwrap();
    assert!(d.ok(), "{:?}", d.problems);
}

/// UC both ways over the whole RNIC against the golden peer (which behaves as rxe): SENDs and a WRITE WITH
/// IMMEDIATE complete at the receiver, each side's WQEs complete on transmit with no ACK on the wire; a
/// message that loses a packet is never completed (the receiver counts the drop) and the receive WQE it had
/// taken goes to the next SEND; nothing is sent again.
#[test]
fn uc_both_ways_with_a_lost_packet_each_way() {
    use testbench::wire::opcode::{UC_SEND_MIDDLE, UC_SEND_FIRST};
    let dir = std::env::temp_dir().join(format!("rnic-system-uc-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (qpn, peer_qpn) = r.add_qp_pair_of(QpType::Uc, 1024, 0xFF_FFFE, 0x42, cap, Cq(0));
    let op = roce_opcode;
    // each way, the first SEND's MIDDLE is lost
    let mut seen = 0;
    r.sys.borrow_mut().to_peer_filter = Some(Box::new(move |f: &[u8]| {
        let m = op(f) == Some(UC_SEND_MIDDLE);
        seen += usize::from(m);
        !(m && seen == 1)
    }));
    let mut seen_b = 0;
    r.sys.borrow_mut().to_rnic_filter = Some(Box::new(move |f: &[u8]| {
        let m = op(f) == Some(UC_SEND_MIDDLE);
        seen_b += usize::from(m);
        !(m && seen_b == 1)
    }));
    // ours -> peer: SEND 3000 (loses its MIDDLE), SEND 1, SEND_WITH_IMM 2500, WRITE_WITH_IMM 3000
    {
        let mut s = r.sys.borrow_mut();
        for i in 0..3u64 {
            let rw = RecvWr { wr_id: 100 + i, sg_list: vec![Sge { addr: r.peer_buf + i * 8192, length: 8192, lkey: r.peer_rkey }] };
            s.peer.post_recv(peer_qpn, rw).unwrap();
        }
    }
    let sends = [(WrOpcode::Send, 3000u32), (WrOpcode::Send, 1), (WrOpcode::SendWithImm, 2500)];
    for (i, &(o, len)) in sends.iter().enumerate() {
        let mut wr = SendWr::new(i as u64, o, vec![Sge { addr: r.src + i as u64 * 8192, length: len, lkey: r.lkey }]);
        wr.imm_data = 0x5EED_0000 + i as u32;
        wr.flags.signaled = true;
        r.drv.post_send(qpn, &wr).unwrap();
    }
    let mut wi = SendWr::new(9, WrOpcode::RdmaWriteWithImm, vec![Sge { addr: r.src + 0x4_0000, length: 3000, lkey: r.lkey }]);
    wi.remote_addr = r.peer_buf + 0x10_0000;
    wi.rkey = r.peer_rkey;
    wi.imm_data = 0x0BAD_CAFE;
    wi.flags.signaled = true;
    r.drv.post_send(qpn, &wi).unwrap();
    let wcs = r.wait_peer_completions(3, 3_000_000);
    let got: Vec<(u64, WcOpcode, u32)> = wcs.iter().map(|w| (w.wr_id, w.opcode, w.byte_len)).collect();
    // the SEND that lost its MIDDLE completes nothing; SEND 1 takes its receive from offset 0
    assert_eq!(got, vec![(100, WcOpcode::Recv, 1), (101, WcOpcode::Recv, 2500), (102, WcOpcode::RecvRdmaWithImm, 3000)]);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(wcs[1].imm_data, 0x5EED_0002);
    {
        let s = r.sys.borrow();
        assert!(s.peer.mem().read(r.peer_buf, 1).unwrap() == r.src_bytes(8192, 1), "SEND 1");
        assert!(s.peer.mem().read(r.peer_buf + 8192, 2500).unwrap() == r.src_bytes(2 * 8192, 2500), "SEND 2500");
        assert!(s.peer.mem().read(r.peer_buf + 0x10_0000, 3000).unwrap() == r.src_bytes(0x4_0000, 3000), "WRITE");
        assert_eq!(s.peer.counters().drops.get(&DropReason::UcDropped), Some(&1), "{:?}", s.peer.counters().drops);
    }
    // our WQEs completed on transmit, the lost one too (the sender cannot know)
    let ours = r.our_completions(4, 200_000);
    let ids: Vec<(u64, WcStatus)> = ours.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, vec![(0, WcStatus::Success), (1, WcStatus::Success), (2, WcStatus::Success), (9, WcStatus::Success)]);

    // peer -> ours: SEND 3000 (loses its MIDDLE), SEND 700, WRITE 2000
    let rbuf = r.src + (1 << 20);
    for i in 0..2u64 {
        r.drv.post_recv(qpn, &RecvWr { wr_id: 700 + i, sg_list: vec![Sge { addr: rbuf + i * 8192, length: 8192, lkey: r.lkey }] }).unwrap();
    }
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..1 << 16).map(|i: u32| (i.wrapping_mul(2246822519) >> 11) as u8).collect();
        s.peer.mem_mut().write(r.peer_buf + 0x8_0000, &pat).unwrap();
        s.peer.post_send(peer_qpn, SendWr::new(60, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x8_0000, length: 3000, lkey: r.peer_rkey }])).unwrap();
        s.peer.post_send(peer_qpn, SendWr::new(61, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x8_2000, length: 700, lkey: r.peer_rkey }])).unwrap();
        let mut w = SendWr::new(62, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf + 0x8_4000, length: 2000, lkey: r.peer_rkey }]);
        w.remote_addr = r.src + 0x9_0000;
        w.rkey = r.lkey;
        s.peer.post_send(peer_qpn, w).unwrap();
    }
    let ours = r.our_completions(1, 400_000);
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!((ours[0].wr_id, ours[0].opcode, ours[0].byte_len, ours[0].status), (700, WcOpcode::Recv, 700, WcStatus::Success));
    let s = r.sys.borrow();
    assert!(r.src_bytes(1 << 20, 700) == s.peer.mem().read(r.peer_buf + 0x8_2000, 700).unwrap(), "SEND 700 from offset 0");
    assert!(r.src_bytes(0x9_0000, 2000) == s.peer.mem().read(r.peer_buf + 0x8_4000, 2000).unwrap(), "WRITE 2000");
    drop(s);
    assert_eq!(r.counter("resp_drop_uc"), 1, "the LAST behind the lost MIDDLE");
    // no ACK either way, nothing sent twice
    let s = r.sys.borrow();
    assert!(s.sent.iter().all(|f| op(f).map_or(true, |o| o >> 5 == 1)), "only UC frames from us");
    assert_eq!(s.sent.iter().filter(|f| op(f) == Some(UC_SEND_FIRST)).count(), 2, "each FIRST once");
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
}

/// UD both ways, the whole RNIC against the golden peer. Ours -> peer: SEND 0, SEND_WITH_IMM 1000, a SEND of
/// 1025 bytes (above the 1024-byte MTU: nothing sent, completed with success, as rxe), a SEND with a wrong
/// Q_Key (the peer drops it), SEND 700, then an inline SEND_WITH_IMM of 200 bytes: each sent once as UD SEND_ONLY(_WITH_IMMEDIATE) with the DETH,
/// each receive at the peer 40 bytes longer with the GRH area (20 zero bytes, our IPv4 header) in front.
/// Peer -> ours: SEND_WITH_IMM 500 and SEND 64 land the same way in our receives (byte_len + 40, the peer's
/// QPN, GRH and immediate flags), one with a wrong Q_Key is dropped by our QP lookup, one with no receive
/// posted is dropped and counted; nothing is answered either way.
#[test]
fn ud_both_ways() {
    use std::cell::RefCell;
    use std::rc::Rc;
    use testbench::wire::opcode::{UD_SEND_ONLY, UD_SEND_ONLY_WITH_IMMEDIATE};
    let dir = std::env::temp_dir().join(format!("rnic-system-ud-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (qpn, peer_qpn) = r.add_qp_pair_of(QpType::Ud, 1024, 0x10, 0x20, cap, Cq(0));
    let op = roce_opcode;
    let to_us: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let seen = to_us.clone();
    r.sys.borrow_mut().to_rnic_filter = Some(Box::new(move |f: &[u8]| {
        seen.borrow_mut().push(f.to_vec());
        true
    }));
    let peer_av = r.sys.borrow().peer.av_to_me();
    // ours -> peer
    {
        let mut s = r.sys.borrow_mut();
        for i in 0..4u64 {
            let rw = RecvWr { wr_id: 100 + i, sg_list: vec![Sge { addr: r.peer_buf + i * 8192, length: 2000, lkey: r.peer_rkey }] };
            s.peer.post_recv(peer_qpn, rw).unwrap();
        }
    }
    let sends = [(WrOpcode::Send, 0u32, sim::system::UD_QKEY), (WrOpcode::SendWithImm, 1000, 0x8000_0000), (WrOpcode::Send, 1025, sim::system::UD_QKEY), (WrOpcode::Send, 8, 0x0BAD), (WrOpcode::Send, 700, sim::system::UD_QKEY)];
    for (i, &(o, len, qkey)) in sends.iter().enumerate() {
        let mut wr = SendWr::new(i as u64, o, vec![Sge { addr: r.src + i as u64 * 8192, length: len, lkey: r.lkey }]);
        wr.imm_data = 0x5EED_0000 + i as u32;
        wr.flags.signaled = true;
        wr.ud = Some(UdDest { av: peer_av, remote_qpn: peer_qpn, remote_qkey: qkey });
        r.drv.post_send(qpn, &wr).unwrap();
    }
    // and an inline UD SEND_WITH_IMM of 200 bytes (its data from the send ring)
    let inl: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut wr = SendWr::new(5, WrOpcode::SendWithImm, vec![]);
    wr.set_inline(inl.clone());
    wr.imm_data = 0x5EED_0005;
    wr.flags.signaled = true;
    wr.ud = Some(UdDest { av: peer_av, remote_qpn: peer_qpn, remote_qkey: sim::system::UD_QKEY });
    r.drv.post_send(qpn, &wr).unwrap();
    let wcs = r.wait_peer_completions(4, 2_000_000);
    let got: Vec<(u64, WcOpcode, u32, u32, u32)> = wcs.iter().map(|w| (w.wr_id, w.opcode, w.byte_len, w.src_qp, w.wc_flags.0)).collect();
    let grh = WcFlags::GRH;
    let imm = WcFlags::WITH_IMM;
    assert_eq!(
        got,
        vec![
            (100, WcOpcode::Recv, 40, qpn, grh),
            (101, WcOpcode::Recv, 1040, qpn, grh | imm),
            (102, WcOpcode::Recv, 740, qpn, grh),
            (103, WcOpcode::Recv, 240, qpn, grh | imm)
        ]
    );
    assert_eq!(wcs[3].imm_data, 0x5EED_0005);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(wcs[1].imm_data, 0x5EED_0001);
    {
        let s = r.sys.borrow();
        let ours: Vec<&Vec<u8>> = s.sent.iter().filter(|f| op(f).is_some()).collect();
        let ops: Vec<u8> = ours.iter().map(|f| op(f).unwrap()).collect();
        assert_eq!(
            ops,
            vec![UD_SEND_ONLY, UD_SEND_ONLY_WITH_IMMEDIATE, UD_SEND_ONLY, UD_SEND_ONLY, UD_SEND_ONLY_WITH_IMMEDIATE],
            "the 1025-byte SEND is not sent"
        );
        assert!(s.peer.mem().read(r.peer_buf + 3 * 8192 + 40, 200).unwrap() == inl, "the inline SEND's data");
        for (k, (f, (buf, len))) in [ours[1], ours[3]].iter().zip([(1u64, 1000usize), (2, 700)]).enumerate() {
            let mut want = testbench::wire::frame::ud_grh_area(&f[14..34]).to_vec();
            want.extend_from_slice(&r.src_bytes([8192, 4 * 8192][k], len));
            assert!(s.peer.mem().read(r.peer_buf + buf * 8192, 40 + len).unwrap() == want, "receive {buf}: GRH area and payload");
        }
        assert_eq!(s.peer.counters().drops.get(&DropReason::BadQkey), Some(&1), "{:?}", s.peer.counters().drops);
    }
    let ours = r.our_completions(6, 200_000);
    let ids: Vec<(u64, WcStatus)> = ours.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, (0..6).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(), "every UD WQE completes on transmit, the long one unsent");

    // peer -> ours: SEND_WITH_IMM 500, a wrong Q_Key, SEND 64, then one with no receive left
    let rbuf = r.src + (1 << 20);
    for i in 0..2u64 {
        r.drv.post_recv(qpn, &RecvWr { wr_id: 700 + i, sg_list: vec![Sge { addr: rbuf + i * 8192, length: 4096, lkey: r.lkey }] }).unwrap();
    }
    let our_av = sim::system::our_av();
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..1 << 16).map(|i: u32| (i.wrapping_mul(2246822519) >> 11) as u8).collect();
        s.peer.mem_mut().write(r.peer_buf + 0x8_0000, &pat).unwrap();
        for (i, (o, len, qkey)) in [(WrOpcode::SendWithImm, 500u32, sim::system::UD_QKEY), (WrOpcode::Send, 9, 0x77), (WrOpcode::Send, 64, sim::system::UD_QKEY), (WrOpcode::Send, 10, sim::system::UD_QKEY)].into_iter().enumerate() {
            let mut w = SendWr::new(60 + i as u64, o, vec![Sge { addr: r.peer_buf + 0x8_0000 + i as u64 * 0x1000, length: len, lkey: r.peer_rkey }]);
            w.imm_data = 0xCAFE_0000 + i as u32;
            w.ud = Some(UdDest { av: our_av, remote_qpn: qpn, remote_qkey: qkey });
            s.peer.post_send(peer_qpn, w).unwrap();
        }
    }
    let ours = r.our_completions(2, 400_000);
    let got: Vec<(u64, WcOpcode, u32, u32, u32, WcStatus)> = ours.iter().map(|w| (w.wr_id, w.opcode, w.byte_len, w.src_qp, w.wc_flags.0, w.status)).collect();
    assert_eq!(got, vec![(700, WcOpcode::Recv, 540, peer_qpn, grh | imm, WcStatus::Success), (701, WcOpcode::Recv, 104, peer_qpn, grh, WcStatus::Success)]);
    assert_eq!(ours[0].imm_data, 0xCAFE_0000);
    // let the last datagram arrive and be dropped: nothing completes
    assert!(r.our_completions(1, 50_000).is_empty());
    let frames = to_us.borrow();
    let theirs: Vec<&Vec<u8>> = frames.iter().filter(|f| op(f).is_some()).collect();
    assert_eq!(theirs.len(), 4);
    let s = r.sys.borrow();
    for (k, (f, i)) in [(theirs[0], 0u64), (theirs[2], 2)].into_iter().enumerate() {
        let len = [500usize, 64][k];
        let mut want = testbench::wire::frame::ud_grh_area(&f[14..34]).to_vec();
        want.extend_from_slice(&s.peer.mem().read(r.peer_buf + 0x8_0000 + i * 0x1000, len).unwrap());
        assert!(r.src_bytes((1 << 20) + k as u64 * 8192, 40 + len) == want, "our receive {k}: GRH area and payload");
    }
    drop(s);
    assert_eq!(r.counter("resp_drop_qp_lookup"), 1, "the wrong Q_Key");
    assert_eq!(r.counter("resp_drop_uc"), 1, "the datagram with no receive");
    let s = r.sys.borrow();
    assert!(s.sent.iter().all(|f| op(f).map_or(true, |o| o >> 5 == 3)), "only UD frames from us");
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
}

/// QP1, the GSI QP: a UD QP whose Q_Key is 0x80010000 whatever is asked. A datagram to QP1 with the GSI Q_Key
/// lands (GRH area, byte_len + 40, the sender's QPN); one with another Q_Key is dropped by the lookup; what QP1
/// sends carries the GSI Q_Key whatever the work request names (as rxe's QP1), so a peer QP whose Q_Key is
/// the GSI one takes it.
#[test]
fn qp1_takes_and_sends_the_gsi_q_key() {
    use testbench::wire::frame::{parse_ethernet, Frame};
    use testbench::wire::headers::GSI_QKEY;
    let dir = std::env::temp_dir().join(format!("rnic-system-gsi-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    // a UD pair for the peer's side, then our QP1
    let (_, peer_qpn) = r.add_qp_pair_of(QpType::Ud, 1024, 0x10, 0x20, cap, Cq(0));
    let qp1 = r.drv.create_gsi_qp(Pd(1), QpInitAttr { qp_type: QpType::Ud, send_cq: Cq(0), recv_cq: Cq(0), cap, sq_sig_all: false }).unwrap();
    assert_eq!(qp1, 1);
    assert!(r.drv.create_gsi_qp(Pd(1), QpInitAttr { qp_type: QpType::Ud, send_cq: Cq(0), recv_cq: Cq(0), cap, sq_sig_all: false }).is_err(), "one QP1");
    for a in [
        QpAttr { qp_state: Some(QpState::Init), qkey: Some(0x1111_1111), ..Default::default() },
        QpAttr { qp_state: Some(QpState::Rtr), ..Default::default() },
        QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(0), ..Default::default() },
    ] {
        r.drv.modify_qp(qp1, &a).unwrap();
    }
    let rbuf = r.src + (1 << 20);
    r.drv.post_recv(qp1, &RecvWr { wr_id: 900, sg_list: vec![Sge { addr: rbuf, length: 512, lkey: r.lkey }] }).unwrap();
    let our_av = sim::system::our_av();
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..256u32).map(|i| i as u8 ^ 0x5A).collect();
        s.peer.mem_mut().write(r.peer_buf + 0x8_0000, &pat).unwrap();
        // (the peer follows the IBA rule: a WR's Q_Key with bit 31 set, as the GSI one, takes the sending QP's
        // own, so its QP gets the GSI Q_Key first)
        s.peer.modify_qp(peer_qpn, &QpAttr { qkey: Some(GSI_QKEY), ..Default::default() }).unwrap();
        // 0x1111_1111 (what QP1 was asked to take) is not the GSI Q_Key: dropped
        for (id, qkey) in [(70u64, 0x1111_1111u32), (71, GSI_QKEY)] {
            let mut w = SendWr::new(id, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x8_0000, length: 256, lkey: r.peer_rkey }]);
            w.ud = Some(UdDest { av: our_av, remote_qpn: 1, remote_qkey: qkey });
            s.peer.post_send(peer_qpn, w).unwrap();
        }
    }
    let ours = r.our_completions(1, 300_000);
    let got: Vec<(u64, u32, u32, WcStatus)> = ours.iter().map(|w| (w.wr_id, w.byte_len, w.src_qp, w.status)).collect();
    assert_eq!(got, vec![(900, 296, peer_qpn, WcStatus::Success)]);
    assert!(r.src_bytes((1 << 20) + 40, 256) == (0..256u32).map(|i| i as u8 ^ 0x5A).collect::<Vec<u8>>());
    assert_eq!(r.counter("resp_drop_qp_lookup"), 1, "the datagram with another Q_Key");
    // QP1 sends the GSI Q_Key whatever the WR says; the peer's QP takes it, its Q_Key being the GSI one
    r.sys.borrow_mut().peer.post_recv(peer_qpn, RecvWr { wr_id: 800, sg_list: vec![Sge { addr: r.peer_buf, length: 512, lkey: r.peer_rkey }] }).unwrap();
    let peer_av = r.sys.borrow().peer.av_to_me();
    let mut w = SendWr::new(5, WrOpcode::Send, vec![Sge { addr: r.src, length: 100, lkey: r.lkey }]);
    w.flags.signaled = true;
    w.ud = Some(UdDest { av: peer_av, remote_qpn: peer_qpn, remote_qkey: 0x1234 });
    r.drv.post_send(qp1, &w).unwrap();
    // (the peer's CQ holds its two send completions first)
    let wcs = r.wait_peer_completions(3, 300_000);
    let got: Vec<(u64, u32, u32, WcStatus)> =
        wcs.iter().filter(|w| w.opcode == WcOpcode::Recv).map(|w| (w.wr_id, w.byte_len, w.src_qp, w.status)).collect();
    assert_eq!(got, vec![(800, 140, 1, WcStatus::Success)]);
    let s = r.sys.borrow();
    let deths: Vec<u32> = s
        .sent
        .iter()
        .filter_map(|f| match parse_ethernet(f) {
            Ok(Frame::Roce(rf)) => rf.packet.deth().map(|d| d.qkey),
            _ => None,
        })
        .collect();
    assert_eq!(deths, vec![GSI_QKEY]);
}

/// A CQ that fills up: the completions that find it full are not written, the CQ goes to error (IBA CQ
/// overrun) and counter 39 `cq_overruns` counts each; nothing is written outside its ring.
#[test]
fn a_full_cq_overruns_and_counts_it() {
    let dir = std::env::temp_dir().join(format!("rnic-system-cq-overrun-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let small = r.drv.create_cq(2).unwrap();
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (qpn, peer_qpn) = r.add_qp_pair_of(QpType::Ud, 1024, 0x10, 0x20, cap, small);
    let rbuf = r.src + (1 << 20);
    for i in 0..5u64 {
        r.drv.post_recv(qpn, &RecvWr { wr_id: 500 + i, sg_list: vec![Sge { addr: rbuf + i * 4096, length: 4096, lkey: r.lkey }] }).unwrap();
    }
    let our_av = sim::system::our_av();
    {
        let mut s = r.sys.borrow_mut();
        for i in 0..5u64 {
            let mut w = SendWr::new(i, WrOpcode::Send, vec![Sge { addr: r.peer_buf, length: 64, lkey: r.peer_rkey }]);
            w.ud = Some(UdDest { av: our_av, remote_qpn: qpn, remote_qkey: sim::system::UD_QKEY });
            s.peer.post_send(peer_qpn, w).unwrap();
        }
        assert!(s.run_until(2_000_000, |s| s.cycle - s.last_activity > 20_000));
    }
    assert_eq!(r.counter("cq_overruns"), 3, "five completions into a CQ of two: three not written");
    let wcs = r.drv.poll_cq(small, 16).unwrap();
    assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![500, 501], "the two that fitted");
    assert!(r.sys.borrow().dma.faults.is_empty());
}

/// RoCEv2 over IPv6: our RNIC at fd00::11 (`CMD_SET_IPV6`), the golden peer at fd00::2, an RC pair and a UD pair
/// whose paths are IPv6. Both ways: WRITEs (one of several packets), a SEND, a READ, a FETCH_ADD and their ACKs
/// and responses; UD SENDs whose receive holds the 40-byte IPv6 header as received in front of the payload.
/// Every frame either side sends is IPv6 between the two addresses, and nothing is dropped.
#[test]
fn rc_and_ud_over_ipv6_both_ways() {
    use std::net::{IpAddr, Ipv6Addr};
    use testbench::wire::frame::{parse_ethernet, Frame};
    use testbench::wire::IpHeader;
    let dir = std::env::temp_dir().join(format!("rnic-system-ipv6-{}", std::process::id()));
    let mut r = sim::system::rig_v6(1024, &dir);
    let (ours6, peer6) = (Ipv6Addr::from(sim::system::OUR_IP6), Ipv6Addr::from(sim::system::PEER_IP6));
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (uqpn, peer_uqpn) = r.add_qp_pair_of(QpType::Ud, 1024, 0x10, 0x20, cap, Cq(0));
    let peer_qpn = r.peer_qpn;
    let peer_av = r.sys.borrow().peer.av_to_me();
    assert_eq!(peer_av.dip, IpAddr::V6(peer6));
    // ours -> peer: WRITE 3000 (3 packets), SEND 100, READ 2500, FETCH_ADD, UD SEND 500
    r.sys.borrow_mut().peer.post_recv(peer_uqpn, RecvWr { wr_id: 41, sg_list: vec![Sge { addr: r.peer_buf + 0x5_0000, length: 4096, lkey: r.peer_rkey }] }).unwrap();
    post_rc_four(&mut r);
    let mut u = SendWr::new(5, WrOpcode::Send, vec![Sge { addr: r.src + 0x2_0000, length: 500, lkey: r.lkey }]);
    u.ud = Some(UdDest { av: peer_av, remote_qpn: peer_uqpn, remote_qkey: sim::system::UD_QKEY });
    u.flags.signaled = true;
    r.drv.post_send(uqpn, &u).unwrap();
    let wcs = r.our_completions(5, 1_000_000);
    let mut ids: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    ids.sort();
    assert_eq!(ids, vec![(1, WcStatus::Success), (2, WcStatus::Success), (3, WcStatus::Success), (4, WcStatus::Success), (5, WcStatus::Success)], "{wcs:?}");
    let peer_wcs = r.wait_peer_completions(2, 400_000);
    {
        check_rc_four(&r, "over IPv6");
        let s = r.sys.borrow();
        let got: Vec<(u64, u32, u32)> = peer_wcs.iter().map(|w| (w.wr_id, w.byte_len, w.src_qp)).collect();
        assert_eq!(got, vec![(40, 100, 0), (41, 540, uqpn)], "{peer_wcs:?}");
        // the UD receive: the IPv6 header of our datagram as it went, then the payload
        let ud = s.sent.iter().find(|f| roce_opcode(f) == Some(testbench::wire::opcode::UD_SEND_ONLY)).expect("our UD SEND");
        let mut want = ud[14..54].to_vec();
        want.extend_from_slice(&r.src_bytes(0x2_0000, 500));
        assert!(s.peer.mem().read(r.peer_buf + 0x5_0000, 540).unwrap() == want, "GRH area (our IPv6 header) and payload");
    }
    // peer -> ours: WRITE 2000, SEND_WITH_IMM 300, READ 1500, UD SEND_WITH_IMM 200
    let rbuf = r.src + (1 << 20);
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 700, sg_list: vec![Sge { addr: rbuf, length: 4096, lkey: r.lkey }] }).unwrap();
    r.drv.post_recv(uqpn, &RecvWr { wr_id: 701, sg_list: vec![Sge { addr: rbuf + 0x1000, length: 4096, lkey: r.lkey }] }).unwrap();
    let av6 = r.av;
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..1 << 16).map(|i: u32| (i.wrapping_mul(2246822519) >> 11) as u8).collect();
        s.peer.mem_mut().write(r.peer_buf + 0x8_0000, &pat).unwrap();
        let mut w = SendWr::new(50, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf + 0x8_0000, length: 2000, lkey: r.peer_rkey }]);
        (w.remote_addr, w.rkey) = (r.src + 0xA_0000, r.lkey);
        s.peer.post_send(peer_qpn, w).unwrap();
        let mut si = SendWr::new(51, WrOpcode::SendWithImm, vec![Sge { addr: r.peer_buf + 0x8_1000, length: 300, lkey: r.peer_rkey }]);
        si.imm_data = 0xFEED_0006;
        s.peer.post_send(peer_qpn, si).unwrap();
        let mut rd = SendWr::new(52, WrOpcode::RdmaRead, vec![Sge { addr: r.peer_buf + 0x9_0000, length: 1500, lkey: r.peer_rkey }]);
        (rd.remote_addr, rd.rkey) = (r.src + 0xB_0000, r.lkey);
        s.peer.post_send(peer_qpn, rd).unwrap();
        let mut us = SendWr::new(53, WrOpcode::SendWithImm, vec![Sge { addr: r.peer_buf + 0x8_2000, length: 200, lkey: r.peer_rkey }]);
        us.imm_data = 0xFEED_0007;
        us.ud = Some(UdDest { av: av6, remote_qpn: uqpn, remote_qkey: sim::system::UD_QKEY });
        s.peer.post_send(peer_uqpn, us).unwrap();
    }
    let peer_wcs = r.wait_peer_completions(4, 1_000_000);
    assert!(peer_wcs.len() == 4 && peer_wcs.iter().all(|w| w.status == WcStatus::Success), "{peer_wcs:?}");
    let ours = r.our_completions(2, 400_000);
    let got: Vec<(u64, WcOpcode, u32, u32, WcStatus)> = ours.iter().map(|w| (w.wr_id, w.opcode, w.byte_len, w.imm_data, w.status)).collect();
    assert_eq!(got, vec![(700, WcOpcode::Recv, 300, 0xFEED_0006, WcStatus::Success), (701, WcOpcode::Recv, 240, 0xFEED_0007, WcStatus::Success)]);
    assert_eq!(ours[1].src_qp, peer_uqpn);
    let s = r.sys.borrow();
    assert!(r.src_bytes(0xA_0000, 2000) == s.peer.mem().read(r.peer_buf + 0x8_0000, 2000).unwrap(), "peer WRITE over IPv6");
    assert!(r.src_bytes(1 << 20, 300) == s.peer.mem().read(r.peer_buf + 0x8_1000, 300).unwrap(), "peer SEND over IPv6");
    assert!(s.peer.mem().read(r.peer_buf + 0x9_0000, 1500).unwrap() == r.src_bytes(0xB_0000, 1500), "peer READ over IPv6");
    // our UD receive: the peer's IPv6 header as it came, then the payload
    let ud = s.received.iter().find(|f| roce_opcode(f) == Some(testbench::wire::opcode::UD_SEND_ONLY_WITH_IMMEDIATE)).expect("the peer's UD SEND");
    let mut want = ud[14..54].to_vec();
    want.extend_from_slice(&s.peer.mem().read(r.peer_buf + 0x8_2000, 200).unwrap());
    assert!(r.src_bytes((1 << 20) + 0x1000, 240) == want, "our UD receive: GRH area (the peer's IPv6 header) and payload");
    // every frame on the link is IPv6 between the two addresses
    let mut n = 0;
    for (f, from_us) in s.sent.iter().map(|f| (f, true)).chain(s.received.iter().map(|f| (f, false))) {
        let Ok(Frame::Roce(rf)) = parse_ethernet(f) else { continue };
        let IpHeader::V6(h) = rf.ip else { panic!("an IPv4 RoCE frame: {rf:?}") };
        assert_eq!((h.src, h.dst), if from_us { (ours6, peer6) } else { (peer6, ours6) });
        n += 1;
    }
    assert!(n >= 12, "{n} RoCE frames");
    assert_eq!(s.peer.counters().total_drops(), 0, "{:?}", s.peer.counters().drops);
    assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
    drop(s);
    // neighbour discovery: a solicitation for our address is answered with the golden advertisement, one for
    // another address is not
    use testbench::wire::ndp::{neighbour_advertisement, neighbour_solicitation};
    let asker = testbench::wire::MacAddr([0x52, 0x54, 0, 0, 0, 9]);
    let me = testbench::wire::MacAddr(sim::system::OUR_MAC);
    {
        let mut s = r.sys.borrow_mut();
        let before = s.sent.len();
        s.inject(neighbour_solicitation(asker, peer6, "fd00::99".parse().unwrap()));
        let ns = neighbour_solicitation(asker, peer6, ours6);
        s.inject(ns.clone());
        assert!(s.run_until(5_000, |s| s.sent.len() > before));
        for _ in 0..2_000 {
            s.step();
        }
        assert_eq!(s.sent.len(), before + 1, "one advertisement, for our address only");
        assert_eq!(Some(s.sent[before].clone()), neighbour_advertisement(&ns, me, ours6));
    }
    assert_eq!((r.counter("nd_advertisements"), r.counter("nd_ignored")), (1, 1));
}

/// Four RC requests of ours to the golden peer, each signaled: WRITE 3000 bytes (several packets) as wr 1,
/// SEND 100 (into the peer's receive 40, posted here) as 2, READ 2500 as 3, FETCH_ADD 5 (to 1000, set here) as 4.
fn post_rc_four(r: &mut sim::system::Rig) {
    {
        let mut s = r.sys.borrow_mut();
        s.peer.post_recv(r.peer_qpn, RecvWr { wr_id: 40, sg_list: vec![Sge { addr: r.peer_buf + 0x4_0000, length: 4096, lkey: r.peer_rkey }] }).unwrap();
        s.peer.mem_mut().write_u64(r.peer_buf + 0x6_0000, 1000).unwrap();
    }
    let sig = |mut w: SendWr| {
        w.flags.signaled = true;
        w
    };
    let mut w = SendWr::new(1, WrOpcode::RdmaWrite, vec![Sge { addr: r.src, length: 3000, lkey: r.lkey }]);
    (w.remote_addr, w.rkey) = (r.peer_buf + 8, r.peer_rkey);
    r.drv.post_send(r.qpn, &sig(w)).unwrap();
    r.drv.post_send(r.qpn, &sig(SendWr::new(2, WrOpcode::Send, vec![Sge { addr: r.src + 0x1_0000, length: 100, lkey: r.lkey }]))).unwrap();
    let mut rd = SendWr::new(3, WrOpcode::RdmaRead, vec![Sge { addr: r.src + 0x8_0000, length: 2500, lkey: r.lkey }]);
    (rd.remote_addr, rd.rkey) = (r.peer_buf + 0x2_0000, r.peer_rkey);
    r.drv.post_send(r.qpn, &sig(rd)).unwrap();
    r.drv.post_send(r.qpn, &sig(atomic_wr(4, WrOpcode::AtomicFetchAndAdd, (r.src + 0x9_0000, r.lkey), (r.peer_buf + 0x6_0000, r.peer_rkey), [5, 0, 0, 0]))).unwrap();
}

/// What [`post_rc_four`]'s requests did, once complete: the WRITE's and SEND's bytes at the peer, the READ's
/// here, the FETCH_ADD's original value here and its sum there.
fn check_rc_four(r: &sim::system::Rig, how: &str) {
    let s = r.sys.borrow();
    assert!(s.peer.mem().read(r.peer_buf + 8, 3000).unwrap() == r.src_bytes(0, 3000), "WRITE {how}");
    assert!(s.peer.mem().read(r.peer_buf + 0x4_0000, 100).unwrap() == r.src_bytes(0x1_0000, 100), "SEND {how}");
    assert!(s.peer.mem().read(r.peer_buf + 0x2_0000, 2500).unwrap() == r.src_bytes(0x8_0000, 2500), "READ {how}");
    assert_eq!(r.src_bytes(0x9_0000, 8), 1000u64.to_le_bytes(), "FETCH_ADD's original value {how}");
    assert_eq!(s.peer.mem().read_u64(r.peer_buf + 0x6_0000).unwrap(), 1005, "FETCH_ADD {how}");
}

/// On an 802.1Q VLAN (VID 100, PCP 5): our port (`CMD_SET_VLAN`) and the golden peer (as rxe on `eth0.100`).
/// RC WRITE (3 packets), SEND, READ and FETCH_ADD ours -> peer, WRITE and SEND peer -> ours, with their ACKs and
/// responses: every RoCE frame both ways carries the tag, and the peer drops nothing. Then frames off our VLAN
/// (the peer's SEND again untagged, and tagged VID 101) are dropped and counted as `rx_drop_vlan` without
/// reaching the Responder; a tagged ARP request for our address is answered on the VLAN (the golden reply), an
/// untagged one is dropped.
#[test]
fn rc_on_a_vlan_both_ways_and_other_vlans_dropped() {
    use testbench::wire::frame::{parse_ethernet, ArpFrame, Frame};
    use testbench::wire::{MacAddr, VlanTag};
    const TCI: u16 = 0xA000 | 100;
    let dir = std::env::temp_dir().join(format!("rnic-system-vlan-{}", std::process::id()));
    let mut r = sim::system::rig_vlan(1024, &dir, TCI);
    let peer_qpn = r.peer_qpn;
    post_rc_four(&mut r);
    let wcs = r.our_completions(4, 1_000_000);
    assert!(wcs.len() == 4 && wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    r.wait_peer_completions(1, 400_000);
    check_rc_four(&r, "on the VLAN");
    // peer -> ours: WRITE 2000, SEND 300
    let rbuf = r.src + (1 << 20);
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 700, sg_list: vec![Sge { addr: rbuf, length: 4096, lkey: r.lkey }] }).unwrap();
    {
        let mut s = r.sys.borrow_mut();
        let pat: Vec<u8> = (0..1 << 14).map(|i: u32| (i.wrapping_mul(2246822519) >> 11) as u8).collect();
        s.peer.mem_mut().write(r.peer_buf + 0x8_0000, &pat).unwrap();
        let mut w = SendWr::new(50, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf + 0x8_0000, length: 2000, lkey: r.peer_rkey }]);
        (w.remote_addr, w.rkey) = (r.src + 0xA_0000, r.lkey);
        s.peer.post_send(peer_qpn, w).unwrap();
        s.peer.post_send(peer_qpn, SendWr::new(51, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x8_1000, length: 300, lkey: r.peer_rkey }])).unwrap();
    }
    let peer_wcs = r.wait_peer_completions(2, 1_000_000);
    assert!(peer_wcs.len() == 2 && peer_wcs.iter().all(|w| w.status == WcStatus::Success), "{peer_wcs:?}");
    let ours = r.our_completions(1, 400_000);
    assert_eq!(ours.iter().map(|w| (w.wr_id, w.byte_len, w.status)).collect::<Vec<_>>(), vec![(700, 300, WcStatus::Success)]);
    let send_frame = {
        let s = r.sys.borrow();
        assert!(r.src_bytes(0xA_0000, 2000) == s.peer.mem().read(r.peer_buf + 0x8_0000, 2000).unwrap(), "peer WRITE on the VLAN");
        assert!(r.src_bytes(1 << 20, 300) == s.peer.mem().read(r.peer_buf + 0x8_1000, 300).unwrap(), "peer SEND on the VLAN");
        // every RoCE frame on the link carries our tag, TPID 0x8100 then the TCI, right after the MACs
        let mut n = 0;
        for f in s.sent.iter().chain(s.received.iter()) {
            let Ok(Frame::Roce(rf)) = parse_ethernet(f) else { continue };
            assert_eq!(rf.eth.vlan, Some(VlanTag { tci: TCI }), "{rf:?}");
            assert_eq!(f[12..16], [0x81, 0x00, 0xA0, 100]);
            n += 1;
        }
        assert!(n >= 12, "{n} RoCE frames");
        assert_eq!(s.peer.counters().total_drops(), 0, "{:?}", s.peer.counters().drops);
        assert!(s.dma.faults.is_empty(), "{:?}", s.dma.faults);
        s.received.iter().find(|f| roce_opcode(f) == Some(testbench::wire::opcode::RC_SEND_ONLY)).expect("the peer's SEND").clone()
    };
    assert_eq!(r.counter("rx_drop_vlan"), 0);
    // the peer's SEND again, untagged and on VLAN 101: both dropped before the Responder (which would count a
    // duplicate), and counted
    let (requests, dups) = (r.counter("resp_requests"), r.counter("resp_duplicates"));
    let Ok(Frame::Roce(mut rf)) = parse_ethernet(&send_frame) else { panic!() };
    for tag in [None, Some(VlanTag { tci: 101 })] {
        rf.eth.vlan = tag;
        r.sys.borrow_mut().inject(rf.build().unwrap());
    }
    // ARP on the VLAN: a tagged request for our address is answered tagged; the same request untagged is not
    let asker = MacAddr([0x52, 0x54, 0, 0, 0, 9]);
    let mut req = ArpFrame::request(asker, std::net::Ipv4Addr::new(10, 0, 0, 9), std::net::Ipv4Addr::from(sim::system::OUR_IP));
    let before = r.sys.borrow().sent.len();
    {
        let mut s = r.sys.borrow_mut();
        s.inject(req.build());
        req.eth.vlan = Some(VlanTag { tci: TCI });
        s.inject(req.build());
        assert!(s.run_until(20_000, |s| s.sent.len() > before));
        for _ in 0..5_000 {
            s.step();
        }
        assert_eq!(s.sent.len(), before + 1, "one ARP reply, to the tagged request");
        let Ok(Frame::Arp(got)) = parse_ethernet(&s.sent[before]) else { panic!("not ARP: {:02x?}", s.sent[before]) };
        let want = req.reply_from(MacAddr(sim::system::OUR_MAC));
        assert_eq!((got.eth, got.arp), (want.eth, want.arp), "the golden reply, on our VLAN");
    }
    assert_eq!(r.counter("rx_drop_vlan"), 3, "two RoCE frames and an ARP request off our VLAN");
    assert_eq!((r.counter("resp_requests"), r.counter("resp_duplicates")), (requests, dups), "none reached the Responder");
}

/// The BTH opcode of a RoCEv2 frame, `None` for any other frame.
fn roce_opcode(f: &[u8]) -> Option<u8> {
    use testbench::wire::frame::{parse_ethernet, Frame};
    match parse_ethernet(f) {
        Ok(Frame::Roce(rf)) => Some(rf.packet.bth.opcode),
        _ => None,
    }
}
