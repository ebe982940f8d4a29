//! The model against real rxe frames (testbench/data/rxe-examples.pcap, Linux 6.1 rxe↔rxe, PMTU 1024): fed
//! the captured requests, a model responder must answer with frames identical to rxe's answers (up to the IP
//! ID, which the kernel picks).

use std::net::{IpAddr, Ipv4Addr};

use pcap_file::pcap::PcapReader;
use testbench::model::harness::{connect, ConnOpts};
use testbench::model::*;
use testbench::wire::{ExtHeader, IpHeader, MacAddr, RoceFrame};

fn capture() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/rxe-examples.pcap");
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        v.push(p.unwrap().data.into_owned());
    }
    v
}

/// The server VM A (10.0.0.1) as a model device whose first QP is `qpn`, connected to the same QPN on B.
fn server(qpn: u32, rq_psn: u32) -> (Device, u32, Pd, Cq) {
    let mut d = Device::new(DeviceConfig {
        mac: MacAddr([0x52, 0x54, 0, 0, 0, 0x0a]),
        ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        seed: 1,
        first_qpn: qpn,
        active_mtu: 1024,
        vlan: None,
    });
    let pd = d.alloc_pd();
    let cq = d.create_cq(16);
    let q = d
        .create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap: QpCap::default(), sq_sig_all: false })
        .unwrap();
    assert_eq!(q, qpn);
    let av = AddressVector::new(MacAddr([0x52, 0x54, 0, 0, 0, 0x0b]), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    connect(&mut d, q, qpn, av, &ConnOpts { path_mtu: 1024, ..Default::default() }, 1, rq_psn).unwrap();
    (d, q, pd, cq)
}

/// Model frame with the captured frame's IP ID, rebuilt.
fn with_id(model: &[u8], captured: &[u8]) -> Vec<u8> {
    let want = RoceFrame::parse(captured).unwrap();
    let mut f = RoceFrame::parse(model).unwrap();
    if let (IpHeader::V4(m), IpHeader::V4(c)) = (&mut f.ip, want.ip) {
        m.id = c.id;
    }
    f.build().unwrap()
}

#[test]
fn ack_for_the_captured_send_last_is_byte_identical() {
    let cap = capture();
    let (mut d, q, pd, _cq) = server(0x11, 1984379);
    let va = d.alloc(4096);
    let mr = d.reg_mr(pd, va, 4096, AccessFlags::ALL).unwrap();
    d.post_recv(q, RecvWr { wr_id: 1, sg_list: vec![Sge { addr: va, length: 4096, lkey: mr.lkey }] }).unwrap();
    // Frames 1, 2 and 3 are packets 1, 2 and 4 of the SEND; packet 3 is frame 2 with the next PSN.
    let mut third = RoceFrame::parse(&cap[1]).unwrap();
    third.packet.bth.psn += 1;
    for f in [cap[0].clone(), cap[1].clone(), third.build().unwrap()] {
        assert_eq!(d.receive(0, &f), RxOutcome::Accepted);
        assert!(d.poll(0).is_empty(), "no AckReq, no ACK");
    }
    assert_eq!(d.receive(0, &cap[2]), RxOutcome::Accepted);
    let out = d.poll(0);
    assert_eq!(out.len(), 1);
    assert_eq!(with_id(&out[0], &cap[3]), cap[3], "model ACK == rxe ACK (frame 4)");
}

#[test]
fn responses_to_the_captured_read_request_match_rxe() {
    let cap = capture();
    let (mut d, q, pd, _cq) = server(0x14, 5025839);
    let va = d.alloc(16384);
    let mr = d.reg_mr(pd, va, 16384, AccessFlags::ALL).unwrap();
    // Put the captured response payloads where they came from: packets 1, 2 and 16 of the reply.
    let p = |i: usize| RoceFrame::parse(&cap[i]).unwrap().packet.payload;
    d.mem_mut().write(va, &p(8)).unwrap();
    d.mem_mut().write(va + 1024, &p(9)).unwrap();
    d.mem_mut().write(va + 15 * 1024, &p(10)).unwrap();
    // The captured request with our MR's VA and rkey (they never appear in the responses).
    let mut req = RoceFrame::parse(&cap[7]).unwrap();
    if let ExtHeader::Reth(r) = &mut req.packet.ext[0] {
        assert_eq!(r.dma_len, 16384);
        r.va = va;
        r.rkey = mr.rkey;
    }
    assert_eq!(d.receive(0, &req.build().unwrap()), RxOutcome::Accepted);
    let out = d.poll(0);
    assert_eq!(out.len(), 16);
    assert_eq!(with_id(&out[0], &cap[8]), cap[8], "READ_RESPONSE_FIRST (frame 9)");
    assert_eq!(with_id(&out[1], &cap[9]), cap[9], "READ_RESPONSE_MIDDLE (frame 10)");
    assert_eq!(with_id(&out[15], &cap[10]), cap[10], "READ_RESPONSE_LAST (frame 11)");
    for f in &out[2..15] {
        let f = RoceFrame::parse(f).unwrap();
        assert_eq!(f.packet.bth.opcode, testbench::wire::opcode::RC_RDMA_READ_RESPONSE_MIDDLE);
        assert!(f.packet.aeth().is_none());
    }
    let _ = q;
}

#[test]
fn atomic_ack_for_the_captured_fetch_add_matches_rxe() {
    let cap = capture();
    let (mut d, _q, pd, _cq) = server(0x15, 10863063);
    let va = d.alloc(8);
    let mr = d.reg_mr(pd, va, 8, AccessFlags::ALL).unwrap();
    d.mem_mut().write_u64(va, 0x70bb_5422_82b2_a7f8).unwrap();
    let mut req = RoceFrame::parse(&cap[11]).unwrap();
    if let ExtHeader::AtomicEth(a) = &mut req.packet.ext[0] {
        a.va = va;
        a.rkey = mr.rkey;
    }
    assert_eq!(d.receive(0, &req.build().unwrap()), RxOutcome::Accepted);
    let out = d.poll(0);
    assert_eq!(out.len(), 1);
    assert_eq!(with_id(&out[0], &cap[12]), cap[12], "ATOMIC_ACKNOWLEDGE (frame 13)");
    assert_eq!(d.mem().read_u64(va).unwrap(), 0x70bb_5422_82b2_a7f9);
}

#[test]
fn model_requester_frames_have_rxe_layout() {
    // A model requester at B (10.0.0.2) sending the same 4 KiB SEND as ibv_rc_pingpong: the frames equal the
    // captured ones (up to IP ID), payload included.
    let cap = capture();
    let mut d = Device::new(DeviceConfig {
        mac: MacAddr([0x52, 0x54, 0, 0, 0, 0x0b]),
        ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        seed: 2,
        first_qpn: 0x11,
        active_mtu: 1024,
        vlan: None,
    });
    let pd = d.alloc_pd();
    let cq = d.create_cq(16);
    let q = d.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap: QpCap::default(), sq_sig_all: false }).unwrap();
    let av = AddressVector::new(MacAddr([0x52, 0x54, 0, 0, 0, 0x0a]), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    connect(&mut d, q, 0x11, av, &ConnOpts { path_mtu: 1024, ..Default::default() }, 1984379, 1).unwrap();
    let va = d.alloc(4096);
    let p = |i: usize| RoceFrame::parse(&cap[i]).unwrap().packet.payload;
    d.mem_mut().write(va, &p(0)).unwrap();
    d.mem_mut().write(va + 1024, &p(1)).unwrap();
    d.mem_mut().write(va + 3072, &p(2)).unwrap();
    let mr = d.reg_mr(pd, va, 4096, AccessFlags::ALL).unwrap();
    d.post_send(q, SendWr::new(1, WrOpcode::Send, vec![Sge { addr: va, length: 4096, lkey: mr.lkey }])).unwrap();
    let out = d.poll(0);
    assert_eq!(out.len(), 4);
    assert_eq!(with_id(&out[0], &cap[0]), cap[0]);
    assert_eq!(with_id(&out[1], &cap[1]), cap[1]);
    assert_eq!(with_id(&out[3], &cap[2]), cap[2]);
    // And the captured ACK completes it.
    assert_eq!(d.receive(1, &cap[3]), RxOutcome::Accepted);
    assert_eq!(d.poll_cq(cq, 4)[0].status, WcStatus::Success);
}
