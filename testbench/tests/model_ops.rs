//! Two model RNICs over a clean link: every RC operation at the sizes that exercise segmentation
//! (0, 1, PMTU-1, PMTU, PMTU+1, 1 MiB) at PMTU 256, 1024 and 4096; host memory compared byte for byte and
//! every CQE checked. Plus UC and UD.

use testbench::model::harness::{ConnOpts, Pair};
use testbench::model::*;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn mr(dev: &mut Device, pd: Pd, len: usize, fill: Option<&[u8]>) -> Mr {
    let va = dev.alloc(len.max(8));
    if let Some(d) = fill {
        dev.mem_mut().write(va, d).unwrap();
    }
    dev.reg_mr(pd, va, len.max(8) as u64, AccessFlags::ALL).unwrap()
}

fn sge(m: &Mr, len: usize) -> Vec<Sge> {
    if len == 0 {
        vec![]
    } else {
        vec![Sge {
            addr: m.addr,
            length: len as u32,
            lkey: m.lkey,
        }]
    }
}

fn one(dev: &mut Device, cq: Cq) -> WorkCompletion {
    let v = dev.poll_cq(cq, 16);
    assert_eq!(v.len(), 1, "expected exactly one CQE, got {v:?}");
    v[0]
}

fn sizes(pmtu: usize) -> Vec<usize> {
    vec![0, 1, pmtu - 1, pmtu, pmtu + 1, 1 << 20]
}

fn run_ops_at(pmtu: u32) {
    let mut p = Pair::new(LinkConfig::default(), 1);
    let o = ConnOpts {
        path_mtu: pmtu,
        ..Default::default()
    };
    let (qa, qb) = p.connect(&o, 0xFFFF00, 0x123); // sq PSN of a near the 24-bit wrap
    let mut id = 0u64;
    for len in sizes(pmtu as usize) {
        for op in [WrOpcode::Send, WrOpcode::SendWithImm, WrOpcode::RdmaWrite, WrOpcode::RdmaWriteWithImm, WrOpcode::RdmaRead] {
            id += 1;
            let data = pattern(id, len);
            let (pd_a, pd_b) = (p.pd_a, p.pd_b);
            let is_read = op == WrOpcode::RdmaRead;
            // a = requester. For READ the data lives at b and lands at a.
            let src = mr(&mut p.a, pd_a, len, (!is_read).then_some(&data[..]));
            let dst = mr(&mut p.b, pd_b, len, is_read.then_some(&data[..]));
            let needs_recv = matches!(op, WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm);
            let rbuf = mr(&mut p.b, pd_b, len, None);
            if needs_recv {
                let sg = if op == WrOpcode::RdmaWriteWithImm { vec![] } else { sge(&rbuf, len) };
                p.b.post_recv(qb, RecvWr { wr_id: 1000 + id, sg_list: sg }).unwrap();
            }
            let mut wr = SendWr::new(id, op, sge(&src, len));
            wr.imm_data = 0xA1B2_C3D4 ^ id as u32;
            wr.remote_addr = dst.addr;
            wr.rkey = dst.rkey;
            p.a.post_send(qa, wr).unwrap();
            let r = p.run();
            assert!(r.idle, "{op:?} len {len} pmtu {pmtu}: did not go idle");
            let wc = one(&mut p.a, p.cq_a);
            assert_eq!(wc.status, WcStatus::Success, "{op:?} len {len} pmtu {pmtu}");
            assert_eq!(wc.wr_id, id);
            assert_eq!(wc.byte_len as usize, len);
            assert_eq!(wc.qp_num, qa);
            assert_eq!(wc.opcode, WcOpcode::from_wr(op));
            assert_eq!(wc.wc_flags.has(WcFlags::WITH_IMM), op.has_imm(), "rxe sets WITH_IMM on the send CQE");
            match op {
                WrOpcode::Send | WrOpcode::SendWithImm => {
                    assert_eq!(p.b.mem().read(rbuf.addr, len).unwrap(), data);
                }
                WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => {
                    assert_eq!(p.b.mem().read(dst.addr, len).unwrap(), data);
                }
                _ => {
                    assert_eq!(p.a.mem().read(src.addr, len).unwrap(), data);
                }
            }
            if needs_recv {
                let rwc = one(&mut p.b, p.cq_b);
                assert_eq!(rwc.status, WcStatus::Success);
                assert_eq!(rwc.wr_id, 1000 + id);
                assert_eq!(rwc.qp_num, qb);
                assert_eq!(rwc.byte_len as usize, len, "byte_len = message / whole write length");
                assert!(rwc.wc_flags.has(WcFlags::GRH), "IBV_WC_GRH always");
                let imm = op.has_imm();
                assert_eq!(rwc.wc_flags.has(WcFlags::WITH_IMM), imm);
                if imm {
                    assert_eq!(rwc.imm_data, 0xA1B2_C3D4 ^ id as u32);
                }
                let want = if op == WrOpcode::RdmaWriteWithImm { WcOpcode::RecvRdmaWithImm } else { WcOpcode::Recv };
                assert_eq!(rwc.opcode, want);
            } else {
                assert!(p.b.poll_cq(p.cq_b, 4).is_empty(), "WRITE/READ make no responder CQE");
            }
        }
    }
    // Atomics.
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let target = mr(&mut p.b, pd_b, 64, None);
    let res = mr(&mut p.a, pd_a, 8, None);
    let t = target.addr;
    let cases: Vec<(WrOpcode, u64, u64, u64, u64, u64, u64)> = vec![
        // (op, initial, compare_add, swap, compare_add_mask, swap_mask, expected new)
        (WrOpcode::AtomicCmpAndSwp, 5, 5, 9, 0, 0, 9),
        (WrOpcode::AtomicCmpAndSwp, 5, 6, 9, 0, 0, 5),
        (WrOpcode::AtomicFetchAndAdd, u64::MAX, 2, 0, 0, 0, 1),
        (WrOpcode::MaskedAtomicCmpAndSwp, 0x1234_5678_9ABC_DEF0, 0x0000_0000_9ABC_0000, 0xFFFF_FFFF_FFFF_FFFF, 0x0000_0000_FFFF_0000, 0x0000_0000_0000_FFFF, 0x1234_5678_9ABC_FFFF),
        (WrOpcode::MaskedAtomicCmpAndSwp, 0x1234_5678_9ABC_DEF0, 0x0000_0000_9ABD_0000, 0xFFFF_FFFF_FFFF_FFFF, 0x0000_0000_FFFF_0000, 0x0000_0000_0000_FFFF, 0x1234_5678_9ABC_DEF0),
        // Four 16-bit fields, boundary bits at each field's MSB: 0xFFFF+1 wraps without carrying.
        (WrOpcode::MaskedAtomicFetchAndAdd, 0x0001_FFFF_0002_FFFF, 0x0001_0001_0001_0001, 0, 0x8000_8000_8000_8000, 0, 0x0002_0000_0003_0000),
        // No boundary: a plain 64-bit add.
        (WrOpcode::MaskedAtomicFetchAndAdd, 0x0000_0000_FFFF_FFFF, 1, 0, 0, 0, 0x0000_0001_0000_0000),
    ];
    for (i, (op, init, ca, sw, cam, swm, want)) in cases.into_iter().enumerate() {
        p.b.mem_mut().write_u64(t, init).unwrap();
        let mut wr = SendWr::new(500 + i as u64, op, sge(&res, 8));
        wr.remote_addr = t;
        wr.rkey = target.rkey;
        wr.compare_add = ca;
        wr.swap = sw;
        wr.compare_add_mask = cam;
        wr.swap_mask = swm;
        p.a.post_send(qa, wr).unwrap();
        assert!(p.run().idle);
        let wc = one(&mut p.a, p.cq_a);
        assert_eq!(wc.status, WcStatus::Success, "{op:?}");
        assert_eq!(wc.opcode, WcOpcode::from_wr(op));
        assert_eq!(wc.byte_len, 8);
        assert_eq!(p.a.mem().read_u64(res.addr).unwrap(), init, "{op:?} returns the original value");
        assert_eq!(p.b.mem().read_u64(t).unwrap(), want, "{op:?} new value");
        assert!(p.b.poll_cq(p.cq_b, 4).is_empty());
    }
    // Segmentation really happened: 1 MiB is ceil(2^20 / PMTU) packets for each SEND/SEND_IMM/WRITE/WRITE_IMM.
    assert!(p.a.counters().tx_request_packets >= 4 * (1u64 << 20) / u64::from(pmtu));
    assert_eq!(p.a.counters().retries, 0);
    assert_eq!(p.b.counters().total_drops(), 0, "{:?}", p.b.counters().drops);
    assert_eq!(p.a.counters().total_drops(), 0, "{:?}", p.a.counters().drops);
}

#[test]
fn rc_all_ops_pmtu_256() {
    run_ops_at(256);
}

#[test]
fn rc_all_ops_pmtu_1024() {
    run_ops_at(1024);
}

#[test]
fn rc_all_ops_pmtu_4096() {
    run_ops_at(4096);
}

#[test]
fn multi_sge_send_and_read_scatter() {
    let mut p = Pair::new(LinkConfig::default(), 2);
    let (qa, qb) = p.connect(&ConnOpts { path_mtu: 256, ..Default::default() }, 1, 2);
    let data = pattern(7, 1000);
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let s1 = mr(&mut p.a, pd_a, 300, Some(&data[..300]));
    let s2 = mr(&mut p.a, pd_a, 700, Some(&data[300..]));
    let r1 = mr(&mut p.b, pd_b, 10, None);
    let r2 = mr(&mut p.b, pd_b, 2000, None);
    p.b.post_recv(qb, RecvWr { wr_id: 9, sg_list: vec![sge(&r1, 10)[0], sge(&r2, 2000)[0]] }).unwrap();
    let wr = SendWr::new(1, WrOpcode::Send, vec![sge(&s1, 300)[0], sge(&s2, 700)[0]]);
    p.a.post_send(qa, wr).unwrap();
    assert!(p.run().idle);
    assert_eq!(one(&mut p.a, p.cq_a).status, WcStatus::Success);
    assert_eq!(one(&mut p.b, p.cq_b).byte_len, 1000);
    let mut got = p.b.mem().read(r1.addr, 10).unwrap();
    got.extend(p.b.mem().read(r2.addr, 990).unwrap());
    assert_eq!(got, data);
}

#[test]
fn uc_send_and_write_complete_on_transmit() {
    let mut p = Pair::new(LinkConfig::default(), 3);
    let o = ConnOpts { qp_type: QpType::Uc, path_mtu: 512, ..Default::default() };
    let (qa, qb) = p.connect(&o, 10, 20);
    let data = pattern(3, 3000);
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let s = mr(&mut p.a, pd_a, 3000, Some(&data));
    let r = mr(&mut p.b, pd_b, 3000, None);
    let w = mr(&mut p.b, pd_b, 3000, None);
    p.b.post_recv(qb, RecvWr { wr_id: 5, sg_list: sge(&r, 3000) }).unwrap();
    p.a.post_send(qa, SendWr::new(1, WrOpcode::Send, sge(&s, 3000))).unwrap();
    let mut wr = SendWr::new(2, WrOpcode::RdmaWrite, sge(&s, 3000));
    wr.remote_addr = w.addr;
    wr.rkey = w.rkey;
    p.a.post_send(qa, wr).unwrap();
    assert!(p.run().idle);
    let wcs = p.a.poll_cq(p.cq_a, 8);
    assert_eq!(wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(one(&mut p.b, p.cq_b).byte_len, 3000);
    assert_eq!(p.b.mem().read(r.addr, 3000).unwrap(), data);
    assert_eq!(p.b.mem().read(w.addr, 3000).unwrap(), data);
    assert_eq!(p.b.counters().acks_sent, 0, "UC sends no ACKs");
}

#[test]
fn ud_send_grh_area_src_qp_and_qkey() {
    let mut p = Pair::new(LinkConfig::default(), 4);
    let o = ConnOpts { qp_type: QpType::Ud, ..Default::default() };
    let (qa, qb) = p.connect(&o, 0, 0);
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let data = pattern(4, 100);
    let s = mr(&mut p.a, pd_a, 100, Some(&data));
    let r = mr(&mut p.b, pd_b, 140, None);
    p.b.post_recv(qb, RecvWr { wr_id: 77, sg_list: sge(&r, 140) }).unwrap();
    let ud = UdDest { av: p.b.av_to_me(), remote_qpn: qb, remote_qkey: o.qkey };
    let mut wr = SendWr::new(1, WrOpcode::SendWithImm, sge(&s, 100));
    wr.ud = Some(ud);
    wr.imm_data = 0xDEAD_BEEF;
    p.a.post_send(qa, wr.clone()).unwrap();
    // A wrong Q_Key is dropped by check_keys.
    let mut bad = wr.clone();
    bad.wr_id = 2;
    bad.ud = Some(UdDest { remote_qkey: 0x2222, ..ud });
    p.a.post_send(qa, bad).unwrap();
    assert!(p.run().idle);
    assert_eq!(p.a.poll_cq(p.cq_a, 4).len(), 2, "UD completes on transmit");
    let wc = one(&mut p.b, p.cq_b);
    assert_eq!((wc.wr_id, wc.status, wc.byte_len, wc.src_qp), (77, WcStatus::Success, 140, qa));
    assert!(wc.wc_flags.has(WcFlags::GRH) && wc.wc_flags.has(WcFlags::WITH_IMM));
    assert_eq!(wc.imm_data, 0xDEAD_BEEF);
    let buf = p.b.mem().read(r.addr, 140).unwrap();
    assert_eq!(&buf[..20], &[0u8; 20], "IPv4: 20 zero bytes first");
    assert_eq!(buf[20], 0x45, "then the IPv4 header");
    assert_eq!(&buf[32..36], &[10, 0, 0, 1], "source IP in the GRH area");
    assert_eq!(&buf[40..], &data[..]);
    assert_eq!(p.b.counters().drop_count(DropReason::BadQkey), 1);
}

#[test]
fn link_writes_a_pcap_of_every_delivered_frame() {
    let path = std::env::temp_dir().join(format!("model_link_{}.pcap", std::process::id()));
    let mut p = Pair::new(LinkConfig::default(), 5);
    p.link = Link::new(LinkConfig::default(), 5).with_pcap(Box::new(std::fs::File::create(&path).unwrap())).unwrap();
    let (qa, qb) = p.connect(&ConnOpts::default(), 1, 2);
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let s = mr(&mut p.a, pd_a, 2000, Some(&pattern(1, 2000)));
    let r = mr(&mut p.b, pd_b, 2000, None);
    p.b.post_recv(qb, RecvWr { wr_id: 1, sg_list: sge(&r, 2000) }).unwrap();
    p.a.post_send(qa, SendWr::new(1, WrOpcode::Send, sge(&s, 2000))).unwrap();
    assert!(p.run().idle);
    drop(p.link.finish_pcap());
    let mut rd = pcap_file::pcap::PcapReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(rd.header().datalink, pcap_file::DataLink::ETHERNET);
    let mut ops = Vec::new();
    while let Some(pkt) = rd.next_packet() {
        let f = testbench::wire::RoceFrame::parse(&pkt.unwrap().data).unwrap();
        assert!(f.icrc_ok());
        ops.push(f.packet.bth.opcode);
    }
    use testbench::wire::opcode::*;
    assert_eq!(ops, vec![RC_SEND_FIRST, RC_SEND_LAST, RC_ACKNOWLEDGE]);
    let _ = std::fs::remove_file(&path);
}

/// rxe 6.1 (`send_data_in` → `copy_data` -EINVAL → RESPST_ERR_MALFORMED_WQE): a UD SEND whose payload does not
/// fit behind the 40-byte GRH area completes the receive LOC_QP_OP_ERR and puts the QP in error (the next
/// receive is flushed); the GRH area is written, the payload is not.
#[test]
fn ud_send_longer_than_its_receive_is_loc_qp_op_err_and_qp_error() {
    let mut p = Pair::new(LinkConfig::default(), 6);
    let o = ConnOpts { qp_type: QpType::Ud, ..Default::default() };
    let (qa, qb) = p.connect(&o, 0, 0);
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let data = pattern(6, 100);
    let s = mr(&mut p.a, pd_a, 100, Some(&data));
    let r = mr(&mut p.b, pd_b, 280, None);
    let before = p.b.mem().read(r.addr, 280).unwrap();
    p.b.post_recv(qb, RecvWr { wr_id: 77, sg_list: sge(&r, 139) }).unwrap();
    p.b.post_recv(qb, RecvWr { wr_id: 78, sg_list: vec![Sge { addr: r.addr + 140, length: 140, lkey: r.lkey }] }).unwrap();
    let mut wr = SendWr::new(1, WrOpcode::Send, sge(&s, 100));
    wr.ud = Some(UdDest { av: p.b.av_to_me(), remote_qpn: qb, remote_qkey: o.qkey });
    p.a.post_send(qa, wr).unwrap();
    assert!(p.run().idle);
    let wcs = p.b.poll_cq(p.cq_b, 4);
    let got: Vec<(u64, WcStatus, u32)> = wcs.iter().map(|w| (w.wr_id, w.status, w.byte_len)).collect();
    assert_eq!(got, vec![(77, WcStatus::LocQpOpErr, 0), (78, WcStatus::WrFlushErr, 0)]);
    assert_eq!(p.b.qp(qb).unwrap().state, QpState::Error);
    let buf = p.b.mem().read(r.addr, 280).unwrap();
    assert_eq!(buf[20], 0x45, "the GRH area is written");
    assert_eq!(&buf[40..], &before[40..], "nothing of the payload");
}
