//! The CM MAD model against real rxe traffic (`testbench/data/rxe-cm.pcap`: two Linux 6.1 rxe hosts, 10.0.0.2
//! the clients of rping, udaddy and ucmatose, 10.0.0.1 their servers; `rnic capture-cm`): every MAD on QP1
//! parses and rebuilds byte for byte, and the fields Linux's rdma_cm puts in each message are the ones the
//! project's CM follows (`docs/cm.md`).

use std::net::Ipv4Addr;

use pcap_file::pcap::PcapReader;
use testbench::wire::mad::*;
use testbench::wire::{parse_ethernet, Frame, IpHeader, RoceFrame};

/// Every UD frame to or from QP1 in the capture, in order.
fn cm_frames() -> Vec<RoceFrame> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/rxe-cm.pcap");
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        if let Ok(Frame::Roce(f)) = parse_ethernet(&p.unwrap().data) {
            if f.packet.bth.dest_qpn == 1 {
                v.push(f);
            }
        }
    }
    v
}

fn addrs(f: &RoceFrame) -> (Ipv4Addr, Ipv4Addr) {
    match f.ip {
        IpHeader::V4(h) => (h.src, h.dst),
        IpHeader::V6(_) => panic!("IPv6 in the capture"),
    }
}

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// The GID rdma_cm puts in a REQ for an IPv4 address: IPv4-mapped.
fn gid(a: Ipv4Addr) -> [u8; 16] {
    a.to_ipv6_mapped().octets()
}

#[test]
fn every_cm_mad_rebuilds_byte_for_byte_with_rdma_cm_fields() {
    let frames = cm_frames();
    let mut mads: Vec<(Ipv4Addr, Ipv4Addr, Mad)> = Vec::new();
    for f in &frames {
        // QP1 on RoCEv2: a UD SEND_ONLY from QP1 with the GSI Q_Key, P_Key 0xFFFF, one 256-byte MAD
        assert_eq!(f.packet.bth.opcode, testbench::wire::opcode::UD_SEND_ONLY);
        assert_eq!(f.packet.bth.pkey, 0xFFFF);
        let d = f.packet.deth().expect("DETH");
        assert_eq!((d.qkey, d.src_qp), (GSI_QKEY, 1));
        assert_eq!(f.packet.payload.len(), MAD_LEN);
        let m = Mad::parse(&f.packet.payload).unwrap();
        assert!(m.hdr.is_cm(), "{:?}", m.hdr);
        let cm = m.cm.as_ref().unwrap_or_else(|| panic!("attribute 0x{:04x} is no CM message", m.hdr.attr_id));
        assert_eq!(cm.mad(m.hdr.tid)[..], f.packet.payload[..], "{} rebuilds byte for byte", cm.name());
        assert_eq!((m.hdr.status, m.hdr.class_specific, m.hdr.attr_mod), (0, 0, 0));
        let (s, d) = addrs(f);
        mads.push((s, d, m));
    }
    let names: Vec<(&str, bool)> = mads.iter().map(|(s, _, m)| (m.cm.as_ref().unwrap().name(), *s == CLIENT)).collect();
    // the tools in order: rping to a port nobody listens on, rping, udaddy, ucmatose with two connections
    // (its server disconnects)
    let c = |n| (n, true);
    let s = |n| (n, false);
    assert_eq!(
        names,
        vec![
            c("REQ"), s("REJ"),
            c("REQ"), s("REP"), c("RTU"), c("DREQ"), s("DREP"),
            c("SIDR_REQ"), s("SIDR_REP"),
            c("REQ"), c("REQ"), s("REP"), s("REP"), c("RTU"), c("RTU"), s("DREQ"), s("DREQ"), c("DREP"), c("DREP"),
        ]
    );
    let msg = |i: usize| mads[i].2.cm.clone().unwrap();
    let tid = |i: usize| mads[i].2.hdr.tid;
    // ---- REQ as rdma_cm sends it on RoCEv2 (rping: PS_TCP port 7174)
    let CmMsg::Req(req) = msg(2) else { panic!() };
    assert_eq!(req.service_id, service_id(RDMA_PS_TCP, 7174));
    assert_ne!(req.local_comm_id, 0);
    assert_eq!((req.vendor_id, req.local_qkey, req.local_eecn, req.remote_eecn), (0, 0, 0, 0));
    assert_eq!((req.remote_cm_response_timeout, req.local_cm_response_timeout, req.max_cm_retries), (20, 20, 15));
    assert_eq!((req.transport_service_type, req.end_to_end_flow_control, req.srq, req.extended_transport_type), (0, 0, 0, 0));
    assert_eq!((req.pkey, req.path_mtu, req.rdc_exists), (0xFFFF, 3, 0), "P_Key, MTU 1024 on a 1500-byte netdev");
    assert_eq!((req.retry_count, req.rnr_retry_count), (7, 7), "rping's retry and RNR retry");
    assert_eq!((req.responder_resources, req.initiator_depth), (1, 1), "rping's conn_param");
    assert_eq!((req.primary_local_lid, req.primary_remote_lid, req.primary_subnet_local), (0xFFFF, 0xFFFF, 0), "permissive LIDs on RoCE");
    assert_eq!((req.primary_local_gid, req.primary_remote_gid), (gid(CLIENT), gid(SERVER)));
    assert_eq!((req.primary_hop_limit, req.primary_traffic_class, req.primary_sl), (64, 0, 0));
    assert_eq!(req.primary_local_ack_timeout, 19, "cm_ack_timeout(15, 18)");
    assert_eq!((req.alternate_local_lid, req.alternate_local_gid, req.alternate_local_ack_timeout), (0, [0; 16], 0), "no alternate path");
    let hdr = CmaHdr::parse(&req.private_data).unwrap();
    assert_eq!((hdr.cma_version, hdr.ip_version), (0, 4));
    assert_eq!(hdr.v4_addrs(), Some((CLIENT, SERVER)), "zero-padded IPv4 addresses");
    assert_ne!(hdr.src_port, 0);
    assert!(req.private_data[CMA_HDR_LEN..].iter().all(|&b| b == 0), "rping sends no private data of its own");
    // ---- REJ 8 for the REQ nobody listens for: message REQ, remote ID = the REQ's local ID, the REQ's TID
    let (CmMsg::Req(lonely), CmMsg::Rej(rej)) = (msg(0), msg(1)) else { panic!() };
    assert_eq!(lonely.service_id, service_id(RDMA_PS_TCP, 9999));
    assert_eq!((rej.reason, rej.message_rejected, rej.remote_comm_id, rej.local_comm_id), (8, 0, lonely.local_comm_id, 0));
    assert_eq!(tid(1), tid(0));
    let line = testbench::decode::roce_line(&frames[1]);
    assert!(line.contains("CM REJ") && line.contains("reason 8 (invalid service ID) rejected REQ"), "{line}");
    // ---- REP, RTU, DREQ, DREP of the connection
    let CmMsg::Rep(rep) = msg(3) else { panic!() };
    assert_eq!(rep.remote_comm_id, req.local_comm_id);
    assert_ne!(rep.local_comm_id, 0);
    assert_eq!((rep.target_ack_delay, rep.failover_accepted, rep.local_qkey), (15, 0, 0), "rxe's ack delay 15, no failover");
    assert_eq!((rep.vendor_id_h, rep.vendor_id_m, rep.vendor_id_l), (0, 0, 0));
    assert_eq!((rep.responder_resources, rep.initiator_depth, rep.rnr_retry_count), (1, 1, 7));
    assert_eq!(tid(3), tid(2), "REP takes the REQ's TID");
    let CmMsg::Rtu(rtu) = msg(4) else { panic!() };
    assert_eq!((rtu.local_comm_id, rtu.remote_comm_id, tid(4)), (req.local_comm_id, rep.local_comm_id, tid(2)));
    let (CmMsg::Dreq(dreq), CmMsg::Drep(drep)) = (msg(5), msg(6)) else { panic!() };
    assert_eq!((dreq.local_comm_id, dreq.remote_comm_id), (req.local_comm_id, rep.local_comm_id));
    assert_eq!(dreq.remote_qpn, rep.local_qpn, "DREQ names the receiver's QPN");
    assert_eq!((drep.local_comm_id, drep.remote_comm_id, tid(6)), (rep.local_comm_id, req.local_comm_id, tid(5)));
    // ---- SIDR (udaddy: PS_UDP port 7174)
    let (CmMsg::SidrReq(sreq), CmMsg::SidrRep(srep)) = (msg(7), msg(8)) else { panic!() };
    assert_eq!((sreq.service_id, sreq.pkey), (service_id(RDMA_PS_UDP, 7174), 0xFFFF));
    assert_eq!(CmaHdr::parse(&sreq.private_data).unwrap().v4_addrs(), Some((CLIENT, SERVER)));
    assert_eq!((srep.request_id, srep.status, srep.qkey, srep.service_id), (sreq.request_id, 0, RDMA_UDP_QKEY, sreq.service_id));
    assert_ne!(srep.qpn, 0);
    assert_eq!(tid(8), tid(7));
    // ---- ucmatose: two connections at once, the server's DREQs answered by the client's DREPs
    let (CmMsg::Req(r1), CmMsg::Req(r2)) = (msg(9), msg(10)) else { panic!() };
    assert_eq!((r1.service_id, r2.service_id), (service_id(RDMA_PS_TCP, 7471), service_id(RDMA_PS_TCP, 7471)));
    assert_ne!(r1.local_comm_id, r2.local_comm_id);
    assert_eq!((r1.retry_count, r1.responder_resources, r1.initiator_depth), (5, 1, 1), "ucmatose's conn_param");
}
