//! Targeted transport-rule tests: frames between two model RNICs are intercepted, dropped, reordered or
//! forged by hand to hit one rxe rule at a time (`docs/rxe-rules.md` sections 3 and 4).

use testbench::model::harness::{ConnOpts, Pair};
use testbench::model::*;
use testbench::wire::headers::{AethKind, NakCode};
use testbench::wire::opcode::*;
use testbench::wire::{ExtHeader, RoceFrame};

fn parse(f: &[u8]) -> RoceFrame {
    RoceFrame::parse(f).expect("model frames parse")
}

fn ops(v: &[Vec<u8>]) -> Vec<(u8, u32)> {
    v.iter().map(|f| parse(f)).map(|f| (f.packet.bth.opcode, f.packet.bth.psn)).collect()
}

fn setup(o: ConnOpts) -> (Pair, u32, u32) {
    let mut p = Pair::new(LinkConfig::default(), 9);
    let (qa, qb) = p.connect(&o, 1000, 5000);
    (p, qa, qb)
}

fn buf(dev: &mut Device, pd: Pd, data: &[u8], access: AccessFlags) -> Mr {
    let va = dev.alloc(data.len().max(8));
    dev.mem_mut().write(va, data).unwrap();
    dev.reg_mr(pd, va, data.len().max(8) as u64, access).unwrap()
}

fn sg(m: &Mr, len: usize) -> Vec<Sge> {
    vec![Sge { addr: m.addr, length: len as u32, lkey: m.lkey }]
}

fn deliver_b(p: &mut Pair, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    for f in frames {
        p.b.receive(p.now, f);
    }
    p.b.poll(p.now)
}

fn deliver_a(p: &mut Pair, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    for f in frames {
        p.a.receive(p.now, f);
    }
    p.a.poll(p.now)
}

fn aeth_kind(f: &[u8]) -> AethKind {
    parse(f).packet.aeth().unwrap().kind()
}

fn post_write(p: &mut Pair, qa: u32, id: u64, src: &Mr, len: usize, dst: &Mr) {
    let mut wr = SendWr::new(id, WrOpcode::RdmaWrite, sg(src, len));
    wr.remote_addr = dst.addr;
    wr.rkey = dst.rkey;
    p.a.post_send(qa, wr).unwrap();
}

#[test]
fn psn_sequence_nak_once_then_silence_until_the_gap_closes() {
    let (mut p, qa, _qb) = setup(ConnOpts { path_mtu: 256, ..Default::default() });
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, &[7u8; 1024], AccessFlags::ALL);
    let dst = buf(&mut p.b, pd_b, &[0u8; 1024], AccessFlags::ALL);
    post_write(&mut p, qa, 1, &src, 1024, &dst);
    let out = p.a.poll(0);
    assert_eq!(ops(&out), vec![(RC_RDMA_WRITE_FIRST, 1000), (RC_RDMA_WRITE_MIDDLE, 1001), (RC_RDMA_WRITE_MIDDLE, 1002), (RC_RDMA_WRITE_LAST, 1003)]);
    // Lose packet 1001: 1002 draws one NAK-PSN-sequence-error carrying ePSN 1001, 1003 is dropped silently.
    let r0 = deliver_b(&mut p, &out[0..1]);
    assert!(r0.is_empty(), "no AckReq on FIRST: no ACK");
    let r = deliver_b(&mut p, &out[2..4]);
    assert_eq!(ops(&r), vec![(RC_ACKNOWLEDGE, 1001)]);
    assert_eq!(aeth_kind(&r[0]), AethKind::Nak(NakCode::PsnSequenceError));
    assert_eq!(p.b.counters().drop_count(DropReason::OutOfSequence), 1);
    // The requester goes back to 1001 and resumes mid-message with MIDDLE (no RETH).
    let re = deliver_a(&mut p, &r);
    assert_eq!(ops(&re), vec![(RC_RDMA_WRITE_MIDDLE, 1001), (RC_RDMA_WRITE_MIDDLE, 1002), (RC_RDMA_WRITE_LAST, 1003)]);
    let acks = deliver_b(&mut p, &re);
    assert_eq!(ops(&acks), vec![(RC_ACKNOWLEDGE, 1003)]);
    assert_eq!(aeth_kind(&acks[0]), AethKind::Ack { credit: 31 });
    assert_eq!(parse(&acks[0]).packet.aeth().unwrap().msn, 1);
    deliver_a(&mut p, &acks);
    assert_eq!(p.a.poll_cq(p.cq_a, 4)[0].status, WcStatus::Success);
    assert_eq!(p.b.mem().read(dst.addr, 1024).unwrap(), vec![7u8; 1024]);
}

#[test]
fn duplicate_write_is_reacked_not_reexecuted() {
    let (mut p, qa, _qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, &[1u8; 64], AccessFlags::ALL);
    let dst = buf(&mut p.b, pd_b, &[0u8; 64], AccessFlags::ALL);
    post_write(&mut p, qa, 1, &src, 64, &dst);
    let w = p.a.poll(0);
    let ack = deliver_b(&mut p, &w);
    assert_eq!(ops(&ack), vec![(RC_ACKNOWLEDGE, 1000)]);
    // The application overwrites the target; a duplicate of the old WRITE must not write it again.
    p.b.mem_mut().write(dst.addr, &[9u8; 64]).unwrap();
    let again = deliver_b(&mut p, &w);
    assert_eq!(ops(&again), vec![(RC_ACKNOWLEDGE, 1000)], "re-ACK with ack_psn - 1");
    assert_eq!(p.b.mem().read(dst.addr, 64).unwrap(), vec![9u8; 64]);
    assert_eq!(p.b.counters().duplicate_requests, 1);
    // An old duplicate ACK is ignored by the completer after the first completed the WQE.
    deliver_a(&mut p, &ack);
    deliver_a(&mut p, &again);
    assert_eq!(p.a.poll_cq(p.cq_a, 4).len(), 1);
    assert_eq!(p.a.counters().drop_count(DropReason::NoPendingWqe), 1);
}

#[test]
fn mid_range_read_retry_is_answered_middle_to_last() {
    let (mut p, qa, _qb) = setup(ConnOpts { path_mtu: 256, ..Default::default() });
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let data: Vec<u8> = (0..1024u32).map(|i| i as u8).collect();
    let remote = buf(&mut p.b, pd_b, &data, AccessFlags::ALL);
    let local = buf(&mut p.a, pd_a, &[0u8; 1024], AccessFlags::ALL);
    let mut wr = SendWr::new(5, WrOpcode::RdmaRead, sg(&local, 1024));
    wr.remote_addr = remote.addr;
    wr.rkey = remote.rkey;
    p.a.post_send(qa, wr).unwrap();
    let req = p.a.poll(0);
    assert_eq!(ops(&req), vec![(RC_RDMA_READ_REQUEST, 1000)]);
    assert!(parse(&req[0]).packet.bth.ack_req);
    let resp = deliver_b(&mut p, &req);
    assert_eq!(ops(&resp), vec![(RC_RDMA_READ_RESPONSE_FIRST, 1000), (RC_RDMA_READ_RESPONSE_MIDDLE, 1001), (RC_RDMA_READ_RESPONSE_MIDDLE, 1002), (RC_RDMA_READ_RESPONSE_LAST, 1003)]);
    // AETH on FIRST and LAST only.
    let has_aeth: Vec<bool> = resp.iter().map(|f| parse(f).packet.aeth().is_some()).collect();
    assert_eq!(has_aeth, vec![true, false, false, true]);
    // FIRST and MIDDLE arrive, the rest is lost; the retransmit timer fires.
    deliver_a(&mut p, &resp[0..2]);
    let t = p.a.next_deadline().expect("retransmit timer armed");
    p.now = t;
    let retry = p.a.poll(t);
    assert_eq!(ops(&retry), vec![(RC_RDMA_READ_REQUEST, 1002)], "a new READ for the rest");
    let reth = *parse(&retry[0]).packet.reth().unwrap();
    assert_eq!((reth.va, reth.dma_len), (remote.addr + 512, 512), "VA advanced, length reduced");
    let replay = deliver_b(&mut p, &retry);
    assert_eq!(ops(&replay), vec![(RC_RDMA_READ_RESPONSE_MIDDLE, 1002), (RC_RDMA_READ_RESPONSE_LAST, 1003)], "never FIRST at a later PSN");
    assert_eq!(p.b.counters().read_replays, 1);
    deliver_a(&mut p, &replay);
    let wc = p.a.poll_cq(p.cq_a, 4);
    assert_eq!((wc[0].status, wc[0].byte_len), (WcStatus::Success, 1024));
    assert_eq!(p.a.mem().read(local.addr, 1024).unwrap(), data);
}

#[test]
fn read_response_first_at_a_later_psn_is_fatal_for_the_requester() {
    let (mut p, qa, _qb) = setup(ConnOpts { path_mtu: 256, ..Default::default() });
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let remote = buf(&mut p.b, pd_b, &[3u8; 1024], AccessFlags::ALL);
    let local = buf(&mut p.a, pd_a, &[0u8; 1024], AccessFlags::ALL);
    let mut wr = SendWr::new(5, WrOpcode::RdmaRead, sg(&local, 1024));
    wr.remote_addr = remote.addr;
    wr.rkey = remote.rkey;
    p.a.post_send(qa, wr).unwrap();
    let req = p.a.poll(0);
    let resp = deliver_b(&mut p, &req);
    deliver_a(&mut p, &resp[0..2]);
    // A spec-literal responder would answer the retried READ with FIRST at PSN 1002: rxe's completer rejects it.
    let mut bad = parse(&resp[0]);
    bad.packet.bth.psn = 1002;
    deliver_a(&mut p, &[bad.build().unwrap()]);
    assert_eq!(p.a.qp_state(qa), Some(QpState::Error));
    assert_ne!(p.a.poll_cq(p.cq_a, 4)[0].status, WcStatus::Success);
}

#[test]
fn implied_nak_retries_a_read_whose_response_was_lost() {
    let (mut p, qa, qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let remote = buf(&mut p.b, pd_b, &[5u8; 100], AccessFlags::ALL);
    let local = buf(&mut p.a, pd_a, &[0u8; 100], AccessFlags::ALL);
    let rbuf = buf(&mut p.b, pd_b, &[0u8; 100], AccessFlags::ALL);
    p.b.post_recv(qb, RecvWr { wr_id: 1, sg_list: sg(&rbuf, 100) }).unwrap();
    let mut rd = SendWr::new(1, WrOpcode::RdmaRead, sg(&local, 100));
    rd.remote_addr = remote.addr;
    rd.rkey = remote.rkey;
    p.a.post_send(qa, rd).unwrap();
    p.a.post_send(qa, SendWr::new(2, WrOpcode::Send, sg(&local, 10))).unwrap();
    let out = p.a.poll(0);
    assert_eq!(ops(&out), vec![(RC_RDMA_READ_REQUEST, 1000), (RC_SEND_ONLY, 1001)]);
    let resp = deliver_b(&mut p, &out);
    assert_eq!(ops(&resp), vec![(RC_RDMA_READ_RESPONSE_ONLY, 1000), (RC_ACKNOWLEDGE, 1001)]);
    // The read response is lost; the ACK of 1001 is beyond the READ's last PSN: implied NAK, go back to 1000.
    let retry = deliver_a(&mut p, &resp[1..]);
    assert_eq!(p.a.counters().implied_naks, 1);
    assert_eq!(ops(&retry), vec![(RC_RDMA_READ_REQUEST, 1000), (RC_SEND_ONLY, 1001)]);
    let resp2 = deliver_b(&mut p, &retry);
    assert_eq!(ops(&resp2), vec![(RC_RDMA_READ_RESPONSE_ONLY, 1000), (RC_ACKNOWLEDGE, 1001)], "replay, then re-ACK");
    deliver_a(&mut p, &resp2);
    let wcs = p.a.poll_cq(p.cq_a, 4);
    assert_eq!(wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(p.b.poll_cq(p.cq_b, 4).len(), 1, "the SEND was delivered once");
    assert_eq!(p.a.mem().read(local.addr, 100).unwrap(), vec![5u8; 100]);
}

#[test]
fn rnr_nak_then_success_after_post_recv() {
    let (mut p, qa, qb) = setup(ConnOpts { min_rnr_timer: 12, ..Default::default() });
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, b"hello rnr", AccessFlags::ALL);
    p.a.post_send(qa, SendWr::new(1, WrOpcode::Send, sg(&src, 9))).unwrap();
    let out = p.a.poll(0);
    let nak = deliver_b(&mut p, &out);
    assert_eq!(ops(&nak), vec![(RC_ACKNOWLEDGE, 1000)]);
    assert_eq!(aeth_kind(&nak[0]), AethKind::RnrNak { timer: 12 });
    deliver_a(&mut p, &nak);
    assert_eq!(p.a.next_deadline(), Some(640_000), "RNR timer 12 = 0.64 ms");
    assert!(p.a.poll(639_999).is_empty(), "nothing before the RNR wait is over");
    let rbuf = buf(&mut p.b, pd_b, &[0u8; 16], AccessFlags::ALL);
    p.b.post_recv(qb, RecvWr { wr_id: 3, sg_list: sg(&rbuf, 16) }).unwrap();
    assert!(p.run().idle);
    assert_eq!(p.a.poll_cq(p.cq_a, 4)[0].status, WcStatus::Success);
    assert_eq!(p.b.poll_cq(p.cq_b, 4)[0].byte_len, 9);
    assert_eq!(p.b.mem().read(rbuf.addr, 9).unwrap(), b"hello rnr");
}

/// rxe `send_data_in` / `copy_data`: a SEND packet longer than the room left in the receive is refused with
/// -EINVAL before any byte of it is written: a malformed WQE (class A), NAK remote operational error with that
/// packet's PSN, the receive completes LOC_QP_OP_ERR and the QP errs. The packets before it stay written.
#[test]
fn send_longer_than_the_receive_is_a_malformed_wqe() {
    let (mut p, qa, qb) = setup(ConnOpts { path_mtu: 256, ..Default::default() });
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let data: Vec<u8> = (0..1100u32).map(|i| (i * 7 + 1) as u8).collect();
    let src = buf(&mut p.a, pd_a, &data, AccessFlags::ALL);
    let rbuf = buf(&mut p.b, pd_b, &[0u8; 1000], AccessFlags::ALL);
    p.b.post_recv(qb, RecvWr { wr_id: 3, sg_list: sg(&rbuf, 1000) }).unwrap();
    p.b.post_recv(qb, RecvWr { wr_id: 4, sg_list: sg(&rbuf, 1000) }).unwrap();
    p.a.post_send(qa, SendWr::new(1, WrOpcode::Send, sg(&src, 1100))).unwrap();
    let out = p.a.poll(0);
    assert_eq!(out.len(), 5, "five packets of at most 256 bytes");
    let nak = deliver_b(&mut p, &out);
    assert_eq!(ops(&nak), vec![(RC_ACKNOWLEDGE, 1003)], "one NAK, the fourth packet's PSN");
    assert_eq!(aeth_kind(&nak[0]), AethKind::Nak(NakCode::RemoteOperationalError));
    assert_eq!(p.b.qp_state(qb), Some(QpState::Error));
    let wcs: Vec<_> = p.b.poll_cq(p.cq_b, 4).iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(wcs, vec![(3, WcStatus::LocQpOpErr), (4, WcStatus::WrFlushErr)]);
    let got = p.b.mem().read(rbuf.addr, 1000).unwrap();
    assert_eq!(&got[..768], &data[..768], "the first three packets written");
    assert!(got[768..].iter().all(|&b| b == 0), "nothing of the fourth");
    deliver_a(&mut p, &nak);
    assert_eq!(p.a.poll_cq(p.cq_a, 4)[0].status, WcStatus::RemOpErr);
}

#[test]
fn rnr_retry_exhaustion_completes_with_rnr_retry_exc_err() {
    let (mut p, qa, _qb) = setup(ConnOpts { rnr_retry: 2, min_rnr_timer: 1, ..Default::default() });
    let pd_a = p.pd_a;
    let src = buf(&mut p.a, pd_a, &[1u8; 8], AccessFlags::ALL);
    p.a.post_send(qa, SendWr::new(1, WrOpcode::Send, sg(&src, 8))).unwrap();
    p.a.post_send(qa, SendWr::new(2, WrOpcode::Send, sg(&src, 8))).unwrap();
    assert!(p.run().idle);
    let wcs = p.a.poll_cq(p.cq_a, 4);
    assert_eq!(wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]);
    assert_eq!(p.b.counters().rnr_naks_sent, 3, "first try + 2 retries");
    assert_eq!(p.a.qp_state(qa), Some(QpState::Error));
}

#[test]
fn retry_exhaustion_flushes_later_wqes_and_spares_other_qps() {
    let mut p = Pair::new(LinkConfig::default(), 11);
    let o = ConnOpts { retry_cnt: 2, timeout: 4, ..Default::default() };
    let (qa, _qb) = p.connect(&o, 1, 1);
    let (qa2, qb2) = p.connect(&o, 7, 7);
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, &[4u8; 32], AccessFlags::ALL);
    let dst = buf(&mut p.b, pd_b, &[0u8; 32], AccessFlags::ALL);
    // The peer's QP is destroyed: every request to it is dropped (UnknownQp), so the requester times out.
    p.b.destroy_qp(_qb).unwrap();
    for id in 1..=3 {
        post_write(&mut p, qa, id, &src, 32, &dst);
    }
    post_write(&mut p, qa2, 10, &src, 32, &dst);
    let _ = qb2;
    assert!(p.run().idle);
    let wcs = p.a.poll_cq(p.cq_a, 8);
    let of = |q: u32| wcs.iter().filter(|w| w.qp_num == q).map(|w| (w.wr_id, w.status)).collect::<Vec<_>>();
    assert_eq!(of(qa), vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr), (3, WcStatus::WrFlushErr)]);
    assert_eq!(of(qa2), vec![(10, WcStatus::Success)]);
    assert_eq!(p.a.qp_state(qa), Some(QpState::Error));
    assert_eq!(p.a.qp_state(qa2), Some(QpState::Rts));
    assert_eq!(p.a.counters().timeouts, 3, "first timeout + 2 retries");
    assert_eq!(p.b.counters().drop_count(DropReason::UnknownQp), 9, "3 WRITEs sent 3 times");
    // Posting on an errored QP flushes at once.
    post_write(&mut p, qa, 4, &src, 32, &dst);
    assert_eq!(p.a.poll_cq(p.cq_a, 4)[0].status, WcStatus::WrFlushErr);
}

fn access_error_case(mutate: impl Fn(&mut SendWr, &Mr), qp_access: AccessFlags, mr_access: AccessFlags, op: WrOpcode) {
    let (mut p, qa, qb) = setup(ConnOpts { access: qp_access, ..Default::default() });
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, &[0xEEu8; 64], AccessFlags::ALL);
    let dst = buf(&mut p.b, pd_b, &[0x11u8; 64], mr_access | AccessFlags::LOCAL_WRITE);
    let snapshot = p.b.mem().read(dst.addr, 64).unwrap();
    let mut wr = SendWr::new(1, op, sg(&src, if op.is_atomic() { 8 } else { 64 }));
    wr.remote_addr = dst.addr;
    wr.rkey = dst.rkey;
    mutate(&mut wr, &dst);
    p.a.post_send(qa, wr).unwrap();
    let out = p.a.poll(0);
    let nak = deliver_b(&mut p, &out);
    assert_eq!(ops(&nak), vec![(RC_ACKNOWLEDGE, 1000)]);
    let want = if qp_access.contains(AccessFlags::REMOTE_WRITE) && qp_access.contains(AccessFlags::REMOTE_READ) && qp_access.contains(AccessFlags::REMOTE_ATOMIC) {
        NakCode::RemoteAccessError
    } else {
        NakCode::InvalidRequest
    };
    assert_eq!(aeth_kind(&nak[0]), AethKind::Nak(want));
    assert_eq!(p.b.qp_state(qb), Some(QpState::Error), "responder QP to ERROR");
    deliver_a(&mut p, &nak);
    let st = if want == NakCode::RemoteAccessError { WcStatus::RemAccessErr } else { WcStatus::RemInvReqErr };
    assert_eq!(p.a.poll_cq(p.cq_a, 4)[0].status, st);
    assert_eq!(p.a.qp_state(qa), Some(QpState::Error));
    assert_eq!(p.b.mem().read(dst.addr, 64).unwrap(), snapshot, "host memory unchanged");
}

#[test]
fn wrong_rkey_is_a_remote_access_error_and_writes_nothing() {
    access_error_case(|wr, _| wr.rkey ^= 0x1, AccessFlags::ALL, AccessFlags::ALL, WrOpcode::RdmaWrite);
    access_error_case(|wr, _| wr.rkey = wr.rkey.wrapping_add(0x100), AccessFlags::ALL, AccessFlags::ALL, WrOpcode::RdmaRead);
}

#[test]
fn out_of_bounds_is_a_remote_access_error_and_writes_nothing() {
    access_error_case(|wr, m| wr.remote_addr = m.addr + 32, AccessFlags::ALL, AccessFlags::ALL, WrOpcode::RdmaWrite);
    access_error_case(|wr, m| wr.remote_addr = m.addr + 64, AccessFlags::ALL, AccessFlags::ALL, WrOpcode::AtomicFetchAndAdd);
}

#[test]
fn missing_mr_access_is_a_remote_access_error() {
    access_error_case(|_, _| {}, AccessFlags::ALL, AccessFlags::REMOTE_READ, WrOpcode::RdmaWrite);
    access_error_case(|_, _| {}, AccessFlags::ALL, AccessFlags::REMOTE_WRITE, WrOpcode::AtomicCmpAndSwp);
}

#[test]
fn missing_qp_access_is_an_invalid_request() {
    // rxe check_op_valid: ibv_rc_pingpong's qp_access_flags = 0 allows SEND only.
    access_error_case(|_, _| {}, AccessFlags::LOCAL_WRITE, AccessFlags::ALL, WrOpcode::RdmaWrite);
}

#[test]
fn misaligned_atomic_is_nak_invalid_request() {
    let (mut p, qa, qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, &[0u8; 8], AccessFlags::ALL);
    let dst = buf(&mut p.b, pd_b, &[0x22u8; 64], AccessFlags::ALL);
    // rxe refuses to post a misaligned atomic (validate_send_wr), so forge it from an aligned one.
    let mut wr = SendWr::new(1, WrOpcode::AtomicFetchAndAdd, sg(&src, 8));
    wr.remote_addr = dst.addr + 8;
    wr.rkey = dst.rkey;
    wr.compare_add = 1;
    let mut bad = wr.clone();
    bad.remote_addr = dst.addr + 4;
    assert!(p.a.post_send(qa, bad).is_err());
    p.a.post_send(qa, wr).unwrap();
    let mut f = parse(&p.a.poll(0)[0]);
    if let ExtHeader::AtomicEth(a) = &mut f.packet.ext[0] {
        a.va = dst.addr + 4;
    }
    let nak = deliver_b(&mut p, &[f.build().unwrap()]);
    assert_eq!(aeth_kind(&nak[0]), AethKind::Nak(NakCode::InvalidRequest));
    assert_eq!(p.b.qp_state(qb), Some(QpState::Error));
    assert_eq!(p.b.mem().read(dst.addr, 64).unwrap(), vec![0x22u8; 64]);
}

#[test]
fn duplicate_atomic_is_answered_from_the_saved_value() {
    let (mut p, qa, _qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let res = buf(&mut p.a, pd_a, &[0u8; 8], AccessFlags::ALL);
    let ctr = buf(&mut p.b, pd_b, &40u64.to_le_bytes(), AccessFlags::ALL);
    let mut wr = SendWr::new(1, WrOpcode::AtomicFetchAndAdd, sg(&res, 8));
    wr.remote_addr = ctr.addr;
    wr.rkey = ctr.rkey;
    wr.compare_add = 2;
    p.a.post_send(qa, wr).unwrap();
    let req = p.a.poll(0);
    let a1 = deliver_b(&mut p, &req);
    let a2 = deliver_b(&mut p, &req);
    assert_eq!(ops(&a2), vec![(RC_ATOMIC_ACKNOWLEDGE, 1000)]);
    assert_eq!(parse(&a1[0]).packet.atomic_ack_eth().unwrap().orig, 40);
    assert_eq!(parse(&a2[0]).packet.atomic_ack_eth().unwrap().orig, 40, "saved original, not re-executed");
    assert_eq!(p.b.mem().read_u64(ctr.addr).unwrap(), 42);
    assert_eq!(p.b.counters().atomic_replays, 1);
}

#[test]
fn coalesced_ack_completes_all_earlier_wqes() {
    let (mut p, qa, _qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, &[1u8; 16], AccessFlags::ALL);
    let dst = buf(&mut p.b, pd_b, &[0u8; 16], AccessFlags::ALL);
    for id in 1..=3 {
        post_write(&mut p, qa, id, &src, 16, &dst);
    }
    let out = p.a.poll(0);
    let acks = deliver_b(&mut p, &out);
    assert_eq!(ops(&acks), vec![(RC_ACKNOWLEDGE, 1000), (RC_ACKNOWLEDGE, 1001), (RC_ACKNOWLEDGE, 1002)]);
    deliver_a(&mut p, &acks[2..]);
    let wcs = p.a.poll_cq(p.cq_a, 8);
    assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![1, 2, 3]);
    deliver_a(&mut p, &acks[..2]);
    assert!(p.a.poll_cq(p.cq_a, 8).is_empty(), "old ACKs ignored");
}

/// LOCAL_INV (rxe `rxe_do_local_ops`): nothing goes on the wire; the WQE is done at once but completes in order,
/// after the WRITE before it is acknowledged, with WC opcode LOCAL_INV; the key is then invalid for the peer (NAK
/// remote access error, nothing written) and for our own WQEs (LOC_PROT_ERR). A key that may not be invalidated
/// (a user MR, a fast-registration MR of another PD, a key whose tag does not match) completes LOC_QP_OP_ERR and
/// puts the QP in error, the WQEs behind it flushed, the MR untouched.
#[test]
fn local_invalidate_completes_in_order_and_the_key_is_refused_after() {
    let (mut p, qa, qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let src = buf(&mut p.a, pd_a, &[0x5Au8; 256], AccessFlags::ALL);
    let dst = buf(&mut p.b, pd_b, &[0u8; 256], AccessFlags::ALL);
    let fva = p.a.alloc(4096);
    let fast = p.a.reg_mr_fast(pd_a, fva, 4096, AccessFlags::ALL).unwrap();
    let mut w = SendWr::new(1, WrOpcode::RdmaWrite, sg(&src, 256));
    w.remote_addr = dst.addr;
    w.rkey = dst.rkey;
    w.flags.signaled = true;
    p.a.post_send(qa, w).unwrap();
    let mut inv = SendWr::new(2, WrOpcode::LocalInv, vec![]);
    inv.invalidate_rkey = fast.rkey;
    inv.flags.signaled = true;
    p.a.post_send(qa, inv).unwrap();
    let out = p.a.poll(0);
    assert_eq!(ops(&out), vec![(RC_RDMA_WRITE_ONLY, 1000)], "LOCAL_INV sends nothing");
    assert!(p.a.poll_cq(p.cq_a, 4).is_empty(), "LOCAL_INV completes after the WRITE before it");
    let ack = deliver_b(&mut p, &out);
    deliver_a(&mut p, &ack);
    let wcs = p.a.poll_cq(p.cq_a, 4);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success, WcOpcode::RdmaWrite), (2, WcStatus::Success, WcOpcode::LocalInv)]
    );
    // the peer's WRITE through the invalidated key: NAK remote access error, nothing written
    let before = p.a.mem().read(fva, 4096).unwrap();
    let peer_src = buf(&mut p.b, pd_b, &[0xC3u8; 64], AccessFlags::ALL);
    let mut w = SendWr::new(3, WrOpcode::RdmaWrite, sg(&peer_src, 64));
    w.remote_addr = fva;
    w.rkey = fast.rkey;
    p.b.post_send(qb, w).unwrap();
    let out = p.b.poll(p.now);
    let nak = deliver_a(&mut p, &out);
    assert_eq!(aeth_kind(&nak[0]), AethKind::Nak(NakCode::RemoteAccessError));
    assert_eq!(p.a.mem().read(fva, 4096).unwrap(), before, "nothing written through the invalidated key");

    // our own SEND gathering from it (a fresh QP pair): LOC_PROT_ERR
    let (q2, _) = p.connect(&ConnOpts::default(), 2000, 6000);
    let s = SendWr::new(4, WrOpcode::Send, vec![Sge { addr: fva, length: 64, lkey: fast.lkey }]);
    p.a.post_send(q2, s).unwrap();
    assert!(p.a.poll(p.now).is_empty());
    assert_eq!(p.a.poll_cq(p.cq_a, 4).iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(4, WcStatus::LocProtErr)]);

    // keys that may not be invalidated: LOC_QP_OP_ERR, the QP in error, the WQE behind flushed, the MR untouched
    let other_pd = p.a.alloc_pd();
    let fva2 = p.a.alloc(4096);
    let foreign = p.a.reg_mr_fast(other_pd, fva2, 4096, AccessFlags::ALL).unwrap();
    let fva3 = p.a.alloc(4096);
    let fast3 = p.a.reg_mr_fast(pd_a, fva3, 4096, AccessFlags::ALL).unwrap();
    for (i, key) in [src.rkey, foreign.rkey, fast3.rkey ^ 1].into_iter().enumerate() {
        let (q, _) = p.connect(&ConnOpts::default(), 3000 + i as u32, 7000);
        let mut inv = SendWr::new(10, WrOpcode::LocalInv, vec![]);
        inv.invalidate_rkey = key;
        p.a.post_send(q, inv).unwrap();
        let mut w = SendWr::new(11, WrOpcode::RdmaWrite, sg(&src, 16));
        w.remote_addr = dst.addr;
        w.rkey = dst.rkey;
        p.a.post_send(q, w).unwrap();
        assert!(p.a.poll(p.now).is_empty(), "key {key:#x}: nothing sent");
        let wcs = p.a.poll_cq(p.cq_a, 4);
        assert_eq!(
            wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            vec![(10, WcStatus::LocQpOpErr), (11, WcStatus::WrFlushErr)],
            "key {key:#x}"
        );
        assert_eq!(p.a.qp_state(q), Some(QpState::Error));
    }
    let s = SendWr::new(12, WrOpcode::Send, vec![Sge { addr: fva3, length: 64, lkey: fast3.lkey }]);
    let (q5, _) = p.connect(&ConnOpts::default(), 4000, 8000);
    p.a.post_send(q5, s).unwrap();
    assert_eq!(ops(&p.a.poll(p.now)), vec![(RC_SEND_ONLY, 4000)], "a key whose tag did not match invalidated nothing");
}

/// A type 1 memory window (`ibv_alloc_mw`, `ibv_bind_mw`): the peer WRITEs and READs through its rkey inside
/// it; a WRITE past its end (inside the MR), a READ through a window bound for remote write only, and an access
/// through the rkey it had before it was bound again are each NAKed remote access error with nothing written;
/// the window's key is no lkey (our own SEND from it: LOC_PROT_ERR); the bind rules refuse an MR without
/// MW_BIND, a range outside the MR, REMOTE_WRITE over an MR without LOCAL_WRITE; an MR with a window bound to it
/// is not deregistered; an unbound window refuses all access.
#[test]
fn a_type_1_window_grants_its_range_and_rights_only() {
    let (mut p, qa, qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let base = p.b.alloc(8192);
    let mr = p.b.reg_mr(pd_b, base, 8192, AccessFlags::ALL | AccessFlags::MW_BIND).unwrap();
    let plain = p.b.reg_mr(pd_b, base, 8192, AccessFlags::ALL).unwrap();
    let ro_mr = p.b.reg_mr(pd_b, base, 8192, AccessFlags(AccessFlags::REMOTE_READ.0 | AccessFlags::MW_BIND.0)).unwrap();
    let mw = p.b.alloc_mw(pd_b).unwrap();
    let rw = AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0);
    assert!(p.b.bind_mw(qb, mw, plain.lkey, base + 1024, 1024, rw).is_err(), "no MW_BIND");
    assert!(p.b.bind_mw(qb, mw, mr.lkey, base + 8000, 1024, rw).is_err(), "outside the MR");
    assert!(p.b.bind_mw(qb, mw, ro_mr.lkey, base + 1024, 1024, rw).is_err(), "REMOTE_WRITE without the MR's LOCAL_WRITE");
    let k1 = p.b.bind_mw(qb, mw, mr.lkey, base + 1024, 1024, rw).unwrap();
    assert_ne!(k1, mw);
    assert!(p.b.dereg_mr(mr.lkey).is_err(), "an MR with a window bound");
    let src = buf(&mut p.a, pd_a, &[0xA5u8; 2048], AccessFlags::ALL);
    let dst = buf(&mut p.a, pd_a, &[0u8; 64], AccessFlags::ALL);
    let go = |p: &mut Pair, op: WrOpcode, va: u64, key: u32, len: usize| -> WcStatus {
        let sgl = if op == WrOpcode::RdmaRead { sg(&dst, len) } else { sg(&src, len) };
        let mut w = SendWr::new(1, op, sgl);
        w.remote_addr = va;
        w.rkey = key;
        w.flags.signaled = true;
        p.a.post_send(qa, w).unwrap();
        p.run();
        p.a.poll_cq(p.cq_a, 4)[0].status
    };
    assert_eq!(go(&mut p, WrOpcode::RdmaWrite, base + 1024, k1, 1024), WcStatus::Success);
    assert_eq!(p.b.mem().read(base + 1024, 1024).unwrap(), vec![0xA5; 1024]);
    assert_eq!(go(&mut p, WrOpcode::RdmaRead, base + 2000, k1, 48), WcStatus::Success);
    // each on a fresh QP pair (a NAK puts both in error), the window bound again first (a type 1 window
    // serves any QP of its PD): (what, verb, address, use the key from before this bind, length, rights)
    let cases = [
        ("past the window's end, inside the MR", WrOpcode::RdmaWrite, base + 2048 - 32, false, 64, rw),
        ("the key before the last bind", WrOpcode::RdmaWrite, base + 1024, true, 64, rw),
        ("READ through a write-only window", WrOpcode::RdmaRead, base + 1024, false, 64, AccessFlags::REMOTE_WRITE),
    ];
    let mut cur = k1;
    for (i, (what, op, va, old, len, acc)) in cases.into_iter().enumerate() {
        let (q2a, q2b) = p.connect(&ConnOpts::default(), 3000 + i as u32, 7000 + i as u32);
        let before_key = cur;
        cur = p.b.bind_mw(q2b, cur, mr.lkey, base + 1024, 1024, acc).unwrap();
        let before = p.b.mem().read(base, 8192).unwrap();
        let sgl = if op == WrOpcode::RdmaRead { sg(&dst, len) } else { sg(&src, len) };
        let mut w = SendWr::new(2, op, sgl);
        w.remote_addr = va;
        w.rkey = if old { before_key } else { cur };
        p.a.post_send(q2a, w).unwrap();
        p.run();
        assert_eq!(p.a.poll_cq(p.cq_a, 4)[0].status, WcStatus::RemAccessErr, "{what}");
        assert_eq!(p.b.mem().read(base, 8192).unwrap(), before, "{what}: nothing written");
    }
    // the window's key as an lkey: none
    let (_, q4b) = p.connect(&ConnOpts::default(), 5000, 9000);
    let s = SendWr::new(3, WrOpcode::Send, vec![Sge { addr: base + 1024, length: 16, lkey: cur }]);
    p.b.post_send(q4b, s).unwrap();
    p.run();
    assert_eq!(p.b.poll_cq(p.cq_b, 8).last().unwrap().status, WcStatus::LocProtErr, "a window is no lkey");
    // unbound: no access at all; then the MR may go
    let (q5a, q5b) = p.connect(&ConnOpts::default(), 6000, 10000);
    let k0 = p.b.bind_mw(q5b, cur, 0, 0, 0, rw).unwrap();
    let mut w = SendWr::new(4, WrOpcode::RdmaWrite, sg(&src, 16));
    w.remote_addr = base + 1024;
    w.rkey = k0;
    p.a.post_send(q5a, w).unwrap();
    p.run();
    assert_eq!(p.a.poll_cq(p.cq_a, 4)[0].status, WcStatus::RemAccessErr, "an unbound window");
    p.b.dealloc_mw(k0).unwrap();
    p.b.dereg_mr(mr.lkey).unwrap();
}

/// A type 2 memory window (`alloc_mw2`, a BIND_MW send WQE): the bind completes with WC opcode BIND_MW and
/// nothing on the wire; the peer WRITEs through the new rkey on the binding QP; from another QP it is NAKed
/// (rxe `rxe_lookup_mw`: `mw->qp != qp`); SEND_WITH_INV naming it invalidates it (the receive carries
/// WITH_INV), after which a WRITE is NAKed; free again, it is bound with its next key and LOCAL_INV invalidates
/// it; a bind of a window already bound completes MW_BIND_ERR and puts the QP in error.
#[test]
fn a_type_2_window_is_bound_by_a_wqe_used_by_its_qp_and_invalidated() {
    let (mut p, qa, qb) = setup(ConnOpts::default());
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    let base = p.b.alloc(8192);
    let mr = p.b.reg_mr(pd_b, base, 8192, AccessFlags::ALL | AccessFlags::MW_BIND).unwrap();
    let w0 = p.b.alloc_mw2(pd_b).unwrap();
    let rw = AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0);
    let next = rnic_driver::verbs::inc_rkey;
    let bind_wr = |id: u64, key: u32| {
        let mut w = SendWr::new(id, WrOpcode::BindMw, vec![Sge { addr: base + 4096, length: 2048, lkey: mr.lkey }]);
        (w.rkey, w.mw_access, w.flags.signaled) = (key, rw, true);
        w
    };
    let k1 = next(w0);
    p.b.post_send(qb, bind_wr(1, k1)).unwrap();
    assert!(p.b.poll(p.now).is_empty(), "nothing on the wire");
    let wc = p.b.poll_cq(p.cq_b, 4);
    assert_eq!(wc.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect::<Vec<_>>(), vec![(1, WcStatus::Success, WcOpcode::BindMw)]);
    let src = buf(&mut p.a, pd_a, &[0x3Cu8; 256], AccessFlags::ALL);
    let write = |p: &mut Pair, q: u32, key: u32| -> WcStatus {
        let mut w = SendWr::new(2, WrOpcode::RdmaWrite, sg(&src, 64));
        (w.remote_addr, w.rkey, w.flags.signaled) = (base + 4096 + 64, key, true);
        p.a.post_send(q, w).unwrap();
        p.run();
        p.a.poll_cq(p.cq_a, 4)[0].status
    };
    assert_eq!(write(&mut p, qa, k1), WcStatus::Success);
    assert_eq!(p.b.mem().read(base + 4096 + 64, 64).unwrap(), vec![0x3C; 64]);
    let (q2a, _) = p.connect(&ConnOpts::default(), 3000, 7000);
    assert_eq!(write(&mut p, q2a, k1), WcStatus::RemAccessErr, "from a QP that did not bind it");
    // SEND_WITH_INV naming the window, on the binding QP
    p.b.post_recv(qb, RecvWr { wr_id: 3, sg_list: vec![Sge { addr: base, length: 256, lkey: mr.lkey }] }).unwrap();
    let mut s = SendWr::new(4, WrOpcode::SendWithInv, sg(&src, 16));
    s.invalidate_rkey = k1;
    p.a.post_send(qa, s).unwrap();
    p.run();
    let _ = p.a.poll_cq(p.cq_a, 4);
    let rc = p.b.poll_cq(p.cq_b, 4);
    assert!(rc.iter().any(|w| w.wr_id == 3 && w.status == WcStatus::Success && w.invalidated_rkey == k1 && w.wc_flags.has(WcFlags::WITH_INV)), "{rc:?}");
    assert_eq!(write(&mut p, qa, k1), WcStatus::RemAccessErr, "after SEND_WITH_INV");
    // free again: bound with its next key on a new pair, then LOCAL_INV
    let (q3a, q3b) = p.connect(&ConnOpts::default(), 4000, 8000);
    let k2 = next(k1);
    p.b.post_send(q3b, bind_wr(5, k2)).unwrap();
    let mut inv = SendWr::new(6, WrOpcode::LocalInv, vec![]);
    (inv.invalidate_rkey, inv.flags.signaled) = (k2, true);
    assert_eq!(write(&mut p, q3a, k2), WcStatus::Success);
    p.b.post_send(q3b, inv).unwrap();
    p.run();
    let wc = p.b.poll_cq(p.cq_b, 8);
    assert_eq!(wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(5, WcStatus::Success), (6, WcStatus::Success)]);
    assert_eq!(write(&mut p, q3a, k2), WcStatus::RemAccessErr, "after LOCAL_INV");
    // a window already bound cannot be bound again
    let (_, q4b) = p.connect(&ConnOpts::default(), 5000, 9000);
    let k3 = next(k2);
    p.b.post_send(q4b, bind_wr(7, k3)).unwrap();
    p.b.post_send(q4b, bind_wr(8, next(k3))).unwrap();
    p.run();
    let wc = p.b.poll_cq(p.cq_b, 8);
    assert_eq!(wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(7, WcStatus::Success), (8, WcStatus::MwBindErr)]);
    assert_eq!(p.b.qp_state(q4b), Some(QpState::Error));
}
