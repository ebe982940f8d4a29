//! Connection management against rxe, RTL as our endpoint (`sim::rxe::cm`): the librdmacm clients in the VM
//! meet our CM agent on QP1, which has no listener yet and answers as Linux does on a port nobody listens on.

use sim::rxe::cm::{probe_no_listener, REJ_INVALID_SERVICE_ID, SIDR_UNSUPPORTED};
use testbench::wire::mad::{service_id, CmMsg, RDMA_PS_TCP, RDMA_PS_UDP};

/// `rping -c` to our address: its REQ (rdma_cm's, PS_TCP port 7174) comes back as REJ 8 with the REQ's
/// communication ID and transaction ID, and rping reports the rejection; `udaddy -s`: its SIDR_REQ comes
/// back as SIDR_REP status 1 (service ID not supported) with the request ID, service ID and transaction ID
/// echoed, and udaddy gives up. rxe took our MADs as they are: nothing is retransmitted after our answer.
#[test]
fn librdmacm_clients_meet_a_cm_agent_without_listeners() {
    let img = match sim::rxe::vm_available() {
        Ok(Some(i)) => i,
        Ok(None) => {
            eprintln!("SKIP: qemu-system-x86_64 is not available (set RNIC_REQUIRE_VM=1 to fail instead)");
            return;
        }
        Err(e) => panic!("the VM cannot be built: {e:#}"),
    };
    let p = probe_no_listener(&img, "cm_no_listener").unwrap();
    for (name, rc, text) in &p.clients {
        eprintln!("--- {name} rc {rc:?}\n{text}");
    }
    for (from_vm, m) in &p.mads {
        eprintln!("{} {}", if *from_vm { "vm ->" } else { "-> vm" }, m.summary());
    }
    assert_eq!(p.error, None, "{:?}", p.stats);
    let client = |n: &str| p.clients.iter().find(|c| c.0 == n).unwrap().clone();
    let (_, rc, text) = client("rping");
    assert!(rc.is_some_and(|r| r != 0) && text.contains("REJECTED"), "rping: rc {rc:?}\n{text}");
    let (_, rc, text) = client("udaddy");
    assert!(rc.is_some_and(|r| r != 0), "udaddy: rc {rc:?}\n{text}");
    // on the link: exactly REQ, REJ, SIDR_REQ, SIDR_REP, each answer matching its request
    let seq: Vec<(bool, &str)> = p.mads.iter().map(|(v, m)| (*v, m.cm.as_ref().map_or("?", |c| c.name()))).collect();
    assert_eq!(seq, vec![(true, "REQ"), (false, "REJ"), (true, "SIDR_REQ"), (false, "SIDR_REP")]);
    let (Some(CmMsg::Req(req)), Some(CmMsg::Rej(rej))) = (&p.mads[0].1.cm, &p.mads[1].1.cm) else { panic!() };
    assert_eq!(req.service_id, service_id(RDMA_PS_TCP, 7174));
    assert_eq!((rej.reason, rej.message_rejected, rej.remote_comm_id, rej.local_comm_id), (REJ_INVALID_SERVICE_ID, 0, req.local_comm_id, 0));
    assert_eq!(p.mads[1].1.hdr.tid, p.mads[0].1.hdr.tid);
    let (Some(CmMsg::SidrReq(sreq)), Some(CmMsg::SidrRep(srep))) = (&p.mads[2].1.cm, &p.mads[3].1.cm) else { panic!() };
    assert_eq!(sreq.service_id, service_id(RDMA_PS_UDP, 7174));
    assert_eq!((srep.request_id, srep.status, srep.service_id, srep.qpn), (sreq.request_id, SIDR_UNSUPPORTED, sreq.service_id, 0));
    assert_eq!(p.mads[3].1.hdr.tid, p.mads[2].1.hdr.tid);
    assert_eq!((p.stats.received, p.stats.rejected, p.stats.sidr_unsupported), (2, 1, 1), "{:?}", p.stats);
    assert!(p.stats.dropped.is_empty(), "{:?}", p.stats.dropped);
}
