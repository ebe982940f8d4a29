//! Connection management against rxe, RTL as our endpoint (`sim::rxe::cm`): the librdmacm clients in the VM
//! meet our CM agent on QP1, which listens on rping's service ID with an rping server behind it.

use sim::rxe::cm::{
    probe, CmEvent, REJ_INVALID_SERVICE_ID, RPING_PORT, TARGET_ACK_DELAY,
};
use testbench::wire::mad::{service_id, CmMsg, RDMA_PS_TCP, RDMA_PS_UDP};

/// The lab's VM image, or `None` (the test skips) where qemu cannot run and `RNIC_REQUIRE_VM` is unset.
fn image_or_skip() -> Option<sim::rxe::VmImage> {
    match sim::rxe::vm_available() {
        Ok(i) => {
            if i.is_none() {
                eprintln!("SKIP: qemu-system-x86_64 is not available (set RNIC_REQUIRE_VM=1 to fail instead)");
            }
            i
        }
        Err(e) => panic!("the VM cannot be built: {e:#}"),
    }
}

/// The MADs of a run without what the CM's timers added under load: a MAD identical to one sent earlier the
/// same way (a resend), and the MRA that answers a resent REQ (checked: for a REQ, service timeout 24, as
/// rdma_cm's delayed MRA). Returns the rest and how many were taken out.
fn without_resends(mads: &[(bool, testbench::wire::mad::Mad)]) -> (Vec<(bool, testbench::wire::mad::Mad)>, usize) {
    let mut kept: Vec<(bool, testbench::wire::mad::Mad)> = Vec::new();
    for (dir, m) in mads {
        if let Some(CmMsg::Mra(mra)) = &m.cm {
            assert_eq!((mra.message_mraed, mra.service_timeout), (0, 24), "an MRA other than rdma_cm's for a REQ");
            continue;
        }
        if !kept.iter().any(|(d, k)| d == dir && k == m) {
            kept.push((*dir, m.clone()));
        }
    }
    let n = mads.len() - kept.len();
    (kept, n)
}

/// Every CM MAD of the run, one line each.
fn print_mads(mads: &[(bool, testbench::wire::mad::Mad)]) {
    for (from_vm, m) in mads {
        eprintln!(
            "{} {}",
            if *from_vm { "vm ->" } else { "-> vm" },
            m.summary()
        );
    }
}

/// One VM boot, five clients:
/// * `rping -c` to a port nobody listens on: its REQ comes back as REJ 8 with the REQ's communication ID and
///   transaction ID, and rping reports the rejection;
/// * `rping -c -C 3 -S 64 -V`, then `-C 5 -S 2000`, to our listener: REQ, our REP (the REQ's TID and IDs, our QPN and PSN, target
///   ACK delay 15), rxe's RTU; three pings (rping's SENDs, our READ of its start buffer and WRITE into its
///   sink, the data checked by rping); rping's DREQ names our QP and gets our DREP; rping exits 0;
/// * `ucmatose -s -c 2`: two connections at once; on each we send ten messages, take its ten replies and
///   disconnect (our DREQ, its DREP); ucmatose exits 0;
/// * `udaddy -s`: its SIDR_REQ for our UD service comes back as SIDR_REP status 0 with our UD QP and
///   rdma_cm's Q_Key (request ID, service ID and TID echoed); its ten datagrams reach us (GRH area, its QPN as
///   immediate) and our ten replies reach it; udaddy exits 0.
/// Nothing is retransmitted: rxe took every MAD of ours as it was.
#[test]
fn librdmacm_clients_against_the_cm_agent() {
    let Some(img) = image_or_skip() else { return };
    let p = probe(&img, "cm_rping", sim::rxe::cm::LAB_CLIENTS).unwrap();
    for (name, rc, text) in &p.clients {
        eprintln!("--- {name} rc {rc:?}\n{text}");
    }
    print_mads(&p.mads);
    eprintln!("{:?}\n{:?}", p.stats, p.events);
    assert_eq!(p.error, None, "{:?}", p.stats);
    let client = |n: &str| p.clients.iter().find(|c| c.0 == n).unwrap().clone();
    let (_, rc, text) = client("rping_no_listener");
    assert!(
        rc.is_some_and(|r| r != 0) && text.contains("REJECTED"),
        "rping without a listener: rc {rc:?}\n{text}"
    );
    for (name, pings) in [("rping", 3), ("rping_2000", 5)] {
        let (_, rc, text) = client(name);
        assert_eq!(rc, Some(0), "{name}:\n{text}");
        assert_eq!(
            text.matches("ping data: rdma-ping-").count(),
            pings,
            "{text}"
        );
    }
    let (_, rc, text) = client("udaddy");
    assert!(rc == Some(0) && text.contains("data transfers complete"), "udaddy: rc {rc:?}\n{text}");
    assert_eq!(p.udaddy, Some((10, 10, 0)), "udaddy: ten datagrams in (GRH area, immediate), ten replies out");
    let (_, rc, text) = client("ucmatose");
    assert!(rc == Some(0) && text.contains("data transfers complete"), "ucmatose: rc {rc:?}\n{text}");
    assert_eq!(p.cmatose, vec![(10, true), (10, true)], "ucmatose: ten replies on each connection, each ended by our DREQ");
    // on the link: each answer matching its request; ucmatose's two connections (REQ, REP, RTU each, our
    // DREQ and its DREP) interleave
    let (mads, resends) = without_resends(&p.mads);
    eprintln!("{resends} MADs resent (or MRAs for them) under load");
    let mut seq: Vec<(bool, &str)> = mads
        .iter()
        .map(|(v, m)| (*v, m.cm.as_ref().map_or("?", |c| c.name())))
        .collect();
    let mut cmatose: Vec<(bool, &str)> = seq.drain(12..22).collect();
    cmatose.sort();
    assert_eq!(cmatose, vec![(false, "DREQ"), (false, "DREQ"), (false, "REP"), (false, "REP"), (true, "DREP"), (true, "DREP"), (true, "REQ"), (true, "REQ"), (true, "RTU"), (true, "RTU")]);
    assert_eq!(
        seq,
        vec![
            (true, "REQ"),
            (false, "REJ"),
            (true, "REQ"),
            (false, "REP"),
            (true, "RTU"),
            (true, "DREQ"),
            (false, "DREP"),
            (true, "REQ"),
            (false, "REP"),
            (true, "RTU"),
            (true, "DREQ"),
            (false, "DREP"),
            (true, "SIDR_REQ"),
            (false, "SIDR_REP"),
        ]
    );
    let m = |i: usize| mads[i].1.cm.clone().unwrap();
    let tid = |i: usize| mads[i].1.hdr.tid;
    let (CmMsg::Req(lonely), CmMsg::Rej(rej)) = (m(0), m(1)) else {
        panic!()
    };
    assert_eq!(lonely.service_id, service_id(RDMA_PS_TCP, 9999));
    assert_eq!(
        (
            rej.reason,
            rej.message_rejected,
            rej.remote_comm_id,
            rej.local_comm_id
        ),
        (REJ_INVALID_SERVICE_ID, 0, lonely.local_comm_id, 0)
    );
    assert_eq!(tid(1), tid(0));
    let (CmMsg::Req(req), CmMsg::Rep(rep), CmMsg::Rtu(rtu)) = (m(2), m(3), m(4)) else {
        panic!()
    };
    assert_eq!(req.service_id, service_id(RDMA_PS_TCP, RPING_PORT));
    assert_eq!((rep.remote_comm_id, tid(3)), (req.local_comm_id, tid(2)));
    assert_ne!(rep.local_comm_id, 0);
    assert_eq!(
        (
            rep.target_ack_delay,
            rep.failover_accepted,
            rep.responder_resources,
            rep.initiator_depth
        ),
        (TARGET_ACK_DELAY, 0, 1, 1)
    );
    assert_eq!(
        (rtu.local_comm_id, rtu.remote_comm_id),
        (req.local_comm_id, rep.local_comm_id)
    );
    let (CmMsg::Dreq(dreq), CmMsg::Drep(drep)) = (m(5), m(6)) else {
        panic!()
    };
    assert_eq!(
        (dreq.remote_comm_id, dreq.remote_qpn),
        (rep.local_comm_id, rep.local_qpn),
        "rping's DREQ names our QP"
    );
    assert_eq!(
        (drep.local_comm_id, drep.remote_comm_id, tid(6)),
        (rep.local_comm_id, req.local_comm_id, tid(5))
    );
    let CmMsg::Rep(rep2) = m(8) else { panic!() };
    assert_ne!(
        rep2.local_comm_id, rep.local_comm_id,
        "a new communication ID for the second connection"
    );
    let peer = std::net::Ipv4Addr::new(10, 0, 0, 1);
    let (a, b) = (rep.local_comm_id, rep2.local_comm_id);
    let ids: Vec<(u32, &str)> = p
        .events
        .iter()
        .filter(|e| matches!(e, CmEvent::ConnectRequest { id, .. } | CmEvent::Established { id } | CmEvent::Disconnected { id } if *id == a || *id == b))
        .map(|e| match e {
            CmEvent::ConnectRequest { id, peer: from, .. } if *from == peer => (*id, "request"),
            CmEvent::Established { id } => (*id, "established"),
            CmEvent::Disconnected { id } => (*id, "disconnected"),
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(p.events.len(), 13, "three events for each of four connections, one SIDR request: {:?}", p.events);
    assert_eq!(p.events.iter().filter(|e| matches!(e, CmEvent::SidrRequest { .. })).count(), 1);
    assert_eq!(
        ids,
        vec![
            (a, "request"),
            (a, "established"),
            (a, "disconnected"),
            (b, "request"),
            (b, "established"),
            (b, "disconnected")
        ]
    );
    // what our server read from rping's start buffer, ping by ping: "rdma-ping-N: " and rping's letters, up to
    // the NUL rping puts last
    assert_eq!(p.pings.len(), 3 + 5);
    for (i, d) in p.pings.iter().enumerate() {
        let (n, len) = if i < 3 { (i, 63) } else { (i - 3, 1999) };
        let want = sim::rxe::rping::RpingClient::pattern(n as u32, len as u32 + 1);
        assert!(
            d[..] == want[..len],
            "ping {i}: {:?}",
            String::from_utf8_lossy(d)
        );
    }
    let (CmMsg::SidrReq(sreq), CmMsg::SidrRep(srep)) = (m(22), m(23)) else {
        panic!()
    };
    assert_eq!(sreq.service_id, service_id(RDMA_PS_UDP, 7174));
    assert_eq!(
        (srep.request_id, srep.status, srep.service_id, srep.qkey),
        (sreq.request_id, 0, sreq.service_id, testbench::wire::mad::RDMA_UDP_QKEY)
    );
    assert_ne!(srep.qpn, 0, "our UD QP");
    assert_eq!(tid(23), tid(22));
    // every MAD the VM sent reached the agent (its resends under load too: a REQ again is answered by an MRA
    // or dropped as a duplicate, nothing else)
    let from_vm = p.mads.iter().filter(|m| m.0).count() as u64;
    assert_eq!(p.stats.received, from_vm, "{:?}", p.stats);
    // (a DREQ the VM sent again gets the DREP again)
    let dreqs = p.mads.iter().filter(|m| m.0 && matches!(m.1.cm, Some(CmMsg::Dreq(_)))).count() as u64;
    assert_eq!(
        (p.stats.rejected, p.stats.reps, p.stats.established, p.stats.dreps, p.stats.sidr_unsupported, p.stats.sidr_replies),
        (1, 4, 4, dreqs, 0, 1),
        "{:?}",
        p.stats
    );
    assert!(p.stats.dropped.keys().all(|k| *k == "duplicate REQ"), "{:?}", p.stats.dropped);
}

/// Our side as rping's client (`sim::rxe::rping::RpingClient` through the agent's active side) against the
/// VM's `rping -s -v`, three pings of 64 bytes, then five of 2,000: our REQ (rdma_cm's fields, the rdma_cm
/// header with our addresses), rxe's REP, our RTU; three pings, each written back by the server and equal to what we sent; our DREQ names the
/// server's QP and rxe answers with a DREP; the VM's rping server saw every ping and exits 0.
#[test]
fn our_rping_client_against_rping_server() {
    let Some(img) = image_or_skip() else { return };
    for (count, size) in [(3u32, 64u32), (5, 2000)] {
        let p = sim::rxe::cm::probe_client(&img, &format!("cm_rping_client_{size}"), count, size)
            .unwrap();
        eprintln!("--- rping -s rc {:?}\n{}", p.server_rc, p.server_out);
        print_mads(&p.mads);
        eprintln!("{:?}\n{:?}", p.stats, p.events);
        assert_eq!(p.error, None);
        assert_eq!((p.pings, p.mismatches), (count, 0));
        assert_eq!(p.server_rc, Some(0), "{}", p.server_out);
        assert_eq!(
            p.server_out.matches("server ping data: rdma-ping-").count(),
            count as usize,
            "{}",
            p.server_out
        );
        let (mads, resends) = without_resends(&p.mads);
        eprintln!("{resends} MADs resent (or MRAs for them) under load");
        let seq: Vec<(bool, &str)> = mads
            .iter()
            .map(|(v, m)| (*v, m.cm.as_ref().map_or("?", |c| c.name())))
            .collect();
        assert_eq!(
            seq,
            vec![
                (false, "REQ"),
                (true, "REP"),
                (false, "RTU"),
                (false, "DREQ"),
                (true, "DREP")
            ]
        );
        let m = |i: usize| mads[i].1.cm.clone().unwrap();
        let (
            CmMsg::Req(req),
            CmMsg::Rep(rep),
            CmMsg::Rtu(rtu),
            CmMsg::Dreq(dreq),
            CmMsg::Drep(drep),
        ) = (m(0), m(1), m(2), m(3), m(4))
        else {
            panic!()
        };
        assert_eq!(req.service_id, service_id(RDMA_PS_TCP, RPING_PORT));
        let hdr = testbench::wire::mad::CmaHdr::parse(&req.private_data).unwrap();
        assert_eq!(
            hdr.v4_addrs(),
            Some((
                std::net::Ipv4Addr::new(10, 0, 0, 2),
                std::net::Ipv4Addr::new(10, 0, 0, 1)
            ))
        );
        assert_eq!(
            (rep.remote_comm_id, mads[1].1.hdr.tid),
            (req.local_comm_id, mads[0].1.hdr.tid)
        );
        assert_eq!(
            (rtu.local_comm_id, rtu.remote_comm_id),
            (req.local_comm_id, rep.local_comm_id)
        );
        assert_eq!(
            (dreq.local_comm_id, dreq.remote_comm_id, dreq.remote_qpn),
            (req.local_comm_id, rep.local_comm_id, rep.local_qpn)
        );
        assert_eq!(
            (drep.remote_comm_id, mads[4].1.hdr.tid),
            (req.local_comm_id, mads[3].1.hdr.tid)
        );
        assert!(p.stats.dropped.is_empty(), "{:?}", p.stats.dropped);
    }
}

/// Our side as ucmatose's client (`sim::rxe::cmatose::CmatoseClient`, two connections through the agent's
/// active side) against the VM's `ucmatose -c 2`: each connection gets its ten messages and sends its ten
/// replies, the server's DREQs end both (our DREPs), and ucmatose exits 0.
#[test]
fn our_ucmatose_client_against_ucmatose_server() {
    let Some(img) = image_or_skip() else { return };
    let p = sim::rxe::cm::probe_cmatose_client(&img, "cm_ucmatose_client", 2).unwrap();
    eprintln!("--- ucmatose rc {:?}\n{}", p.server_rc, p.server_out);
    print_mads(&p.mads);
    assert_eq!(p.error, None, "{:?}", p.stats);
    assert_eq!(p.server_rc, Some(0), "{}", p.server_out);
    assert!(p.server_out.contains("data transfers complete"), "{}", p.server_out);
    assert_eq!(p.connections, vec![(10, 10, true), (10, 10, true)]);
    let (mads, _) = without_resends(&p.mads);
    let mut seq: Vec<(bool, &str)> = mads.iter().map(|(v, m)| (*v, m.cm.as_ref().map_or("?", |c| c.name()))).collect();
    seq.sort();
    assert_eq!(seq, vec![(false, "DREP"), (false, "DREP"), (false, "REQ"), (false, "REQ"), (false, "RTU"), (false, "RTU"), (true, "DREQ"), (true, "DREQ"), (true, "REP"), (true, "REP")]);
    assert_eq!(p.stats.dreps, 2);
}

/// Our side as udaddy's client against the VM's `udaddy`: our SIDR_REQ (the rdma_cm header with our
/// addresses) is answered with status 0, the server's UD QPN and rdma_cm's Q_Key; our ten datagrams reach it
/// and its ten replies reach us (GRH area with its IPv4 header); udaddy exits 0.
#[test]
fn our_udaddy_client_against_udaddy_server() {
    let Some(img) = image_or_skip() else { return };
    let p = sim::rxe::cm::probe_udaddy_client(&img, "cm_udaddy_client").unwrap();
    eprintln!("--- udaddy rc {:?}\n{}", p.server_rc, p.server_out);
    print_mads(&p.mads);
    assert_eq!(p.error, None, "{:?}", p.stats);
    assert_eq!(p.server_rc, Some(0), "{}", p.server_out);
    assert!(p.server_out.contains("data transfers complete"), "{}", p.server_out);
    assert_eq!((p.sent, p.received, p.bad), (10, 10, 0));
    let rep = p.sidr.expect("the SIDR_REP");
    assert_eq!((rep.status, rep.qkey, rep.service_id), (0, testbench::wire::mad::RDMA_UDP_QKEY, service_id(RDMA_PS_UDP, 7174)));
    let (mads, _) = without_resends(&p.mads);
    let seq: Vec<(bool, &str)> = mads.iter().map(|(v, m)| (*v, m.cm.as_ref().map_or("?", |c| c.name()))).collect();
    assert_eq!(seq, vec![(false, "SIDR_REQ"), (true, "SIDR_REP")]);
    let Some(CmMsg::SidrReq(req)) = &mads[0].1.cm else { panic!() };
    let hdr = testbench::wire::mad::CmaHdr::parse(&req.private_data).unwrap();
    assert_eq!(hdr.v4_addrs(), Some((std::net::Ipv4Addr::new(10, 0, 0, 2), std::net::Ipv4Addr::new(10, 0, 0, 1))));
}

/// 1 % of the MADs dropped each way on the link (frames to QP1 only; seed 56, which drops the 14th MAD from the VM and the 22nd to it in
/// this run's sequence of MADs): `ucmatose -c 20` and an rping to our listener still set up, use and tear
/// down every connection through the resends of both CMs (rxe's REQ, DREQ, DREP answers; our REP until the
/// RTU, our DREQ until the DREP). Every resent REQ finds its connection: our agent raises exactly one
/// connection request per connection, and ends holding none that is not in timewait.
#[test]
fn connections_complete_with_one_percent_of_the_mads_lost() {
    let Some(img) = image_or_skip() else { return };
    let clients = [("ucmatose", "ucmatose -s 10.0.0.2 -c 20"), ("rping", "rping -c -a 10.0.0.2 -p 7174 -C 2 -S 64 -V -v")];
    let p = sim::rxe::cm::probe_lossy(&img, "cm_lossy", &clients, 0.01, 56).unwrap();
    for (name, rc, text) in &p.clients {
        eprintln!("--- {name} rc {rc:?}\n{text}");
    }
    print_mads(&p.mads);
    eprintln!("dropped (from the VM, to it): {:?}\n{:?}", p.dropped, p.stats);
    assert_eq!(p.error, None, "{:?}", p.stats);
    for (name, rc, text) in &p.clients {
        assert_eq!(*rc, Some(0), "{name}:\n{text}");
    }
    assert!(p.dropped.0 > 0 && p.dropped.1 > 0, "the seed drops MADs both ways: {:?}", p.dropped);
    assert_eq!(p.cmatose.len(), 20, "{:?}", p.cmatose);
    assert!(p.cmatose.iter().all(|c| *c == (10, true)), "{:?}", p.cmatose);
    assert_eq!(p.pings.len(), 2);
    // every connection completed although MADs were lost both ways: the lost ones went again (a resend is on
    // the link only as the one copy that arrived, so the capture alone cannot count them)
    let requests = p.events.iter().filter(|e| matches!(e, CmEvent::ConnectRequest { .. })).count();
    assert_eq!(requests, 21, "one connection request per connection, whatever was resent");
}
