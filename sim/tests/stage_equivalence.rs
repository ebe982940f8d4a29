//! Today's top against the reference top (`sim/ref/`: the whole RNIC as emitted before the Responder and the
//! Completer were split into stage blocks), by completions, memory and frames. Both sides' timing has changed
//! since (WQE Check sends a one-packet RC RDMA WRITE's record without waiting for the Requester; the Responder
//! takes a request of the same QP in the write-back's cycle of the one before), so the reference is retired as
//! a cycle reference; `sim::system::RefLockstep` still runs the two models cycle for cycle where that is
//! wanted.
//!
//! * The golden fault campaigns, with the RTL as responder (without SEND_WITH_INV, which the reference does
//!   not take) and as requester, run on each top alone, each checked against the same expectation (every
//!   completion, every byte of both memories).
//! * A scenario of every verb in both directions (atomics, masked atomics, an RNR NAK, an access error) runs on
//!   each, and their completions, both memories and the frames each sent (requests and responses, each in
//!   order) must be equal.

use sim::system::rig_with;
use testbench::mac::MacFaults;
use testbench::model::*;

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rnic-stage-eq-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn responder_campaign_passes_on_todays_top_and_on_the_reference() {
    let ops = &sim::campaign::REFERENCE_RESPONDER_OPS;
    let s = sim::campaign::responder_on(sim::campaign::rtl_dut(), ops, 0xFA17, 1024, 6, MacFaults::campaign(), &dir("resp"), None, &mut |_| {});
    eprint!("today's top:\n{s}");
    let reference = Box::new(sim::Clocked::<sim::vmodels::rnic_ref::RnicRef>::new(None));
    let s = sim::campaign::responder_on(reference, ops, 0xFA17, 1024, 6, MacFaults::campaign(), &dir("resp-ref"), None, &mut |_| {});
    eprint!("the reference:\n{s}");
}

#[test]
fn requester_campaign_passes_on_todays_top_and_on_the_reference() {
    let s = sim::campaign::requester_on(sim::campaign::rtl_dut(), false, 0x5EED1, 256, 6, MacFaults::campaign(), &dir("req"), None, &mut |_| {});
    eprint!("today's top:\n{s}");
    let reference = Box::new(sim::Clocked::<sim::vmodels::rnic_ref::RnicRef>::new(None));
    let s = sim::campaign::requester_on(reference, false, 0x5EED1, 256, 6, MacFaults::campaign(), &dir("req-ref"), None, &mut |_| {});
    eprint!("the reference:\n{s}");
}

/// What a run of [`every_verb`] left: our completions, both memories' areas it touches, and the frames our
/// RNIC sent, requests and responses (READ responses, ACKs, NAKs) apart, each in order.
#[derive(PartialEq, Debug)]
struct Seen {
    wcs: Vec<WorkCompletion>,
    ours: Vec<u8>,
    peer: Vec<u8>,
    requests: Vec<Vec<u8>>,
    responses: Vec<Vec<u8>>,
}

/// Every verb both ways at MTU 256, atomics and masked atomics executed by our Responder, a SEND to a QP with
/// no receive posted (RNR NAK and the retry), a WRITE with a wrong rkey (NAK remote access, the QP in error):
/// the same completions, memories and frames from today's top and from the reference.
#[test]
fn every_verb_both_ways_as_the_reference() {
    let now = every_verb(sim::Clocked::<sim::vmodels::rnic::Rnic>::new(None), "verbs");
    let reference = every_verb(sim::Clocked::<sim::vmodels::rnic_ref::RnicRef>::new(None), "verbs-ref");
    assert_eq!(now.wcs, reference.wcs, "our completions");
    assert!(now.ours == reference.ours, "our memory");
    assert!(now.peer == reference.peer, "the peer's memory");
    assert_eq!(now.requests.len(), reference.requests.len(), "request frames");
    assert_eq!(now.responses.len(), reference.responses.len(), "response frames");
    for (k, (a, b)) in now.requests.iter().zip(&reference.requests).enumerate() {
        assert!(a == b, "request frame {k}: today's {a:02x?}, the reference's {b:02x?}");
    }
    for (k, (a, b)) in now.responses.iter().zip(&reference.responses).enumerate() {
        assert!(a == b, "response frame {k}: today's {a:02x?}, the reference's {b:02x?}");
    }
    eprintln!("{} request and {} response frames, {} completions: the same from both tops", now.requests.len(), now.responses.len(), now.wcs.len());
}

fn every_verb<D: sim::system::RnicDut>(dut: D, name: &str) -> Seen {
    let mut r = rig_with(dut, 256, &dir(name));
    // our RNR NAK's timer code 1 (0.01 ms; code 0 would be 655 ms)
    r.drv.modify_qp(r.qpn, &QpAttr { min_rnr_timer: Some(1), ..Default::default() }).unwrap();
    let (lkey, prkey, src, pbuf) = (r.lkey, r.peer_rkey, r.src, r.peer_buf);
    let post = |r: &mut sim::system::Rig<D>, id: u64, op: WrOpcode, laddr: u64, len: u32, raddr: u64| {
        let mut w = SendWr::new(id, op, vec![Sge { addr: laddr, length: len, lkey }]);
        (w.remote_addr, w.rkey) = (raddr, prkey);
        r.drv.post_send(r.qpn, &w).unwrap();
    };
    // ours to the peer: WRITE, READ, SEND, WRITE_IMM, FETCH_ADD, CMP_SWAP
    {
        let mut s = r.sys.borrow_mut();
        let q = r.peer_qpn;
        for k in 0..2 {
            s.peer.post_recv(q, RecvWr { wr_id: 100 + k, sg_list: vec![Sge { addr: r.peer_buf + 0x8000, length: 4096, lkey: prkey }] }).unwrap();
        }
    }
    post(&mut r, 1, WrOpcode::RdmaWrite, src + 3, 1000, pbuf + 11);
    post(&mut r, 2, WrOpcode::RdmaRead, src + 0x2000, 700, pbuf + 5);
    post(&mut r, 3, WrOpcode::Send, src + 17, 600, 0);
    post(&mut r, 4, WrOpcode::RdmaWriteWithImm, src + 40, 300, pbuf + 0x3000);
    let mut f = SendWr::new(5, WrOpcode::AtomicFetchAndAdd, vec![Sge { addr: r.src + 0x4000, length: 8, lkey }]);
    (f.remote_addr, f.rkey, f.compare_add) = (r.peer_buf + 0x5000, prkey, 7);
    r.drv.post_send(r.qpn, &f).unwrap();
    let mut c = SendWr::new(6, WrOpcode::AtomicCmpAndSwp, vec![Sge { addr: r.src + 0x4008, length: 8, lkey }]);
    (c.remote_addr, c.rkey, c.compare_add, c.swap) = (r.peer_buf + 0x5000, prkey, 7, 99);
    r.drv.post_send(r.qpn, &c).unwrap();
    // the peer to us: a SEND before any receive is posted (RNR NAK, then the receive, then the retry), a
    // WRITE, a READ, FETCH_ADD and CMP_SWAP on our memory, masked FETCH_ADD and masked CMP_SWAP
    {
        let mut s = r.sys.borrow_mut();
        let q = r.peer_qpn;
        let pk = |id, op, len, addr: u64| {
            let mut w = SendWr::new(id, op, vec![Sge { addr, length: len, lkey: prkey }]);
            w.rkey = lkey;
            w
        };
        s.peer.post_send(q, pk(50, WrOpcode::Send, 500, r.peer_buf)).unwrap();
        let mut w = pk(51, WrOpcode::RdmaWrite, 2000, r.peer_buf + 0x100);
        w.remote_addr = r.src + 0x6000;
        s.peer.post_send(q, w).unwrap();
        let mut rd = pk(52, WrOpcode::RdmaRead, 900, r.peer_buf + 0x9000);
        rd.remote_addr = r.src + 0x100;
        s.peer.post_send(q, rd).unwrap();
        let mut fa = pk(53, WrOpcode::AtomicFetchAndAdd, 8, r.peer_buf + 0xA000);
        (fa.remote_addr, fa.compare_add) = (r.src + 0x7000, 5);
        s.peer.post_send(q, fa).unwrap();
        let mut cs = pk(54, WrOpcode::AtomicCmpAndSwp, 8, r.peer_buf + 0xA008);
        (cs.remote_addr, cs.compare_add, cs.swap) = (r.src + 0x7000, 5, 0x1234);
        s.peer.post_send(q, cs).unwrap();
        let mut mf = pk(55, WrOpcode::MaskedAtomicFetchAndAdd, 8, r.peer_buf + 0xA010);
        (mf.remote_addr, mf.compare_add, mf.compare_add_mask) = (r.src + 0x7008, 0x0101, 0x0100);
        s.peer.post_send(q, mf).unwrap();
        let mut mc = pk(56, WrOpcode::MaskedAtomicCmpAndSwp, 8, r.peer_buf + 0xA018);
        (mc.remote_addr, mc.compare_add, mc.compare_add_mask, mc.swap, mc.swap_mask) = (r.src + 0x7010, 0, 0xFF, 0xAB, 0xF0);
        s.peer.post_send(q, mc).unwrap();
    }
    for _ in 0..3000 {
        r.sys.borrow_mut().step();
    }
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 70, sg_list: vec![Sge { addr: r.src + 0x8000, length: 4096, lkey }] }).unwrap();
    let mut wcs = Vec::new();
    // the peer retries its SEND after the RNR NAK's wait (0.01 ms, 3,300 cycles)
    for _ in 0..2000 {
        wcs.extend(r.drv.poll_cq(Cq(0), 16).unwrap());
        if wcs.len() >= 7 {
            break;
        }
        let mut s = r.sys.borrow_mut();
        for _ in 0..200 {
            s.step();
        }
    }
    let ours: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert!(ours.iter().all(|w| w.1 == WcStatus::Success) && ours.len() >= 7, "{ours:?}");
    // then a WRITE with a wrong rkey: NAK remote access error, our QP in error
    let mut bad = SendWr::new(9, WrOpcode::RdmaWrite, vec![Sge { addr: r.src, length: 64, lkey }]);
    (bad.remote_addr, bad.rkey) = (r.peer_buf, prkey ^ 0x100);
    r.drv.post_send(r.qpn, &bad).unwrap();
    let mut got = Vec::new();
    for _ in 0..200 {
        got.extend(r.drv.poll_cq(Cq(0), 4).unwrap());
        if !got.is_empty() {
            break;
        }
        let mut s = r.sys.borrow_mut();
        for _ in 0..200 {
            s.step();
        }
    }
    assert_eq!(got.first().map(|w| (w.wr_id, w.status)), Some((9, WcStatus::RemAccessErr)), "{got:?}");
    wcs.extend(got);
    let s = r.sys.borrow();
    eprintln!("{name}: {} cycles; {} frames out, {} in", s.cycle, s.sent.len(), s.received.len());
    // (untagged IPv4: the BTH opcode at byte 42; RC responses are 0x0D ..= 0x12)
    let (responses, requests): (Vec<Vec<u8>>, Vec<Vec<u8>>) = s.sent.iter().cloned().partition(|f| (0x0D..=0x12).contains(&f[42]));
    let ours = r.mem.lock().unwrap().read(r.src, 0x9000).unwrap();
    let peer = s.peer.mem().read(r.peer_buf, 0xB000).unwrap();
    Seen { wcs, ours, peer, requests, responses }
}
