//! One targeted system test per reliability rule of `docs/rxe-rules.md` (3: rxe as responder, 4: as requester): the
//! whole RNIC (Verilator model of the emitted top, driven by the driver through its register slave) against
//! the golden model, with one chosen frame lost (`System::to_peer_filter` / `to_rnic_filter`) or one crafted
//! frame injected, and the frames on the wire checked field by field.
//!
//! | rule | test |
//! |---|---|
//! | 3a PSN > ePSN: one NAK 0x60 with ePSN, then silence until the gap closes | `psn_gap_gets_one_sequence_nak_then_silence` |
//! | 3a duplicate SEND/WRITE: ACK with `ack_psn - 1`, always, nothing re-executed | `duplicate_write_is_reacked_with_the_last_psn_and_not_executed` |
//! | 3a duplicate READ mid-range: replay MIDDLE..LAST from its PSN | `mid_range_read_retry_is_answered_middle_to_last` |
//! | 3a duplicate READ not a subset of its resource: dropped | `duplicate_read_outside_its_resource_is_dropped` |
//! | 3b ACK only on AckReq, syndrome 0x1F, MSN counting; READ responses F/M/L/ONLY at the request's PSNs | `acks_and_read_responses_carry_syndrome_1f_the_msn_and_the_request_psns` |
//! | 3c RNR NAK `0x20 | min_rnr_timer` with the packet's PSN, nothing executed, success once a receive is posted | `rnr_nak_carries_min_rnr_timer_and_the_packet_psn` |
//! | 3c opcode sequence: MIDDLE without FIRST: NAK 0x61, QP to error | `middle_without_first_is_naked_invalid_request_and_the_qp_errors` |
//! | 3c length: FIRST shorter than the PMTU: NAK 0x61, nothing written | `first_packet_shorter_than_the_pmtu_is_naked_and_writes_nothing` |
//! | 3c SEND larger than the receive buffer (rxe `copy_data` -EINVAL, a malformed WQE): NAK 0x63, receive completes LOC_QP_OP_ERR, nothing written | `send_larger_than_the_receive_is_naked_remote_operational` |
//! | 3c malformed receive WQE (bad lkey): NAK 0x63, receive completes LOC_QP_OP_ERR | `receive_with_a_bad_lkey_is_naked_remote_operational` |
//! | 3c R_Key / bounds / access rights: NAK 0x62 | `sim/tests/rnic_access.rs` (four tests) |
//! | 4 AckReq on the last packet and at least every 64; header fields (TVer, MigReq, P_Key, SE) | `ackreq_on_the_last_packet_and_every_64_and_the_header_fields` |
//! | 4 a READ takes ceil(len / PMTU) PSNs, at least 1 | `a_read_takes_one_psn_per_response_packet` |
//! | 4 retransmit timer: a lost ACK is recovered after 4.096 us x 2^timeout | `a_lost_ack_is_recovered_by_the_retransmit_timer` |
//! | 4 timeout 0: no timer | `timeout_zero_never_retransmits` |
//! | 4 retry_cnt exhausted: RETRY_EXC_ERR, QP to error, later WQEs flushed, other QPs untouched | `retry_exhaustion_errors_the_qp_flushes_the_rest_and_spares_other_qps` |
//! | 4 RNR NAK: wait the encoded time, retry, succeed once a receive is posted | `rnr_nak_wait_then_success` |
//! | 4 rnr_retry exhausted: RNR_RETRY_EXC_ERR | `rnr_retry_exhaustion` |
//! | 4 NAK 0x60 mid-message: resume at its PSN with MIDDLE/LAST, no RETH | `sequence_nak_mid_message_resumes_with_middle_and_no_reth` |
//! | 4 partial READ: retried as a new READ for the rest | `a_partial_read_is_retried_as_a_new_read_for_the_rest` |
//! | 4 implied NAK: an ACK beyond a pending READ retries the READ | `an_ack_beyond_a_pending_read_is_an_implied_nak` |
//! | 4 at most 128 unacknowledged PSNs (rxe `wait_psn`) | `requests_stay_within_128_psns_of_the_acknowledged_one` |
//! | 4 coalesced ACK completes every earlier WQE; a stale ACK is ignored | `a_coalesced_ack_completes_earlier_writes_and_a_stale_ack_is_ignored` |
//! | 4 NAK codes: 0x61 / 0x62 / 0x63 / other to REM_INV_REQ / REM_ACCESS / REM_OP / REM_OP | `nak_codes_map_to_completion_statuses` |
//!
//! The rig (`sim::system::rig`): our QP's send PSN starts at 0xFF_FFF0 (so our PSNs wrap within the first 16
//! packets), the peer's at 0x1234; both retransmit timers at 14 (67 ms) unless a test lowers them.

use std::cell::RefCell;
use std::rc::Rc;

use sim::rxe::rtl_ep::{counter, read_counter_window};
use sim::system::{rig, FrameFilter, Rig};
use testbench::model::*;
use testbench::wire::headers::{AethKind, NakCode};
use testbench::wire::opcode::*;
use testbench::wire::RoceFrame;

/// Core cycles per 4.096 us (the timer unit).
const TICK: u64 = rtl::transport::completer::TIMER_TICK;

fn new_rig(name: &str, mtu: u32) -> Rig {
    let dir = std::env::temp_dir().join(format!("rnic-rules-{name}-{}", std::process::id()));
    rig(mtu, &dir)
}

fn ctr(r: &mut Rig, name: &str) -> u64 {
    counter(&read_counter_window(&mut r.drv).unwrap(), name)
}

fn parse(f: &[u8]) -> Option<RoceFrame> {
    RoceFrame::parse(f).ok()
}

/// What the RNIC sent (before any loss), and what reached it.
fn sent(r: &Rig) -> Vec<RoceFrame> {
    r.sys.borrow().sent.iter().filter_map(|f| parse(f)).collect()
}
fn received(r: &Rig) -> Vec<RoceFrame> {
    r.sys.borrow().received.iter().filter_map(|f| parse(f)).collect()
}

fn op(f: &RoceFrame) -> u8 {
    f.packet.bth.opcode
}
fn psn(f: &RoceFrame) -> u32 {
    f.packet.bth.psn
}
fn is_ack(f: &RoceFrame) -> bool {
    op(f) == RC_ACKNOWLEDGE
}
fn syndrome(f: &RoceFrame) -> Option<u8> {
    f.packet.aeth().map(|a| a.syndrome)
}
fn is_request(f: &RoceFrame) -> bool {
    op(f) <= RC_RDMA_READ_REQUEST || op(f) == RC_COMPARE_SWAP || op(f) == RC_FETCH_ADD
}

/// Drops the `nth` (from 0) frame for which `pred` holds, once; the dropped frame is kept.
fn drop_nth(pred: impl Fn(&RoceFrame) -> bool + 'static, nth: usize) -> (FrameFilter, Rc<RefCell<Option<RoceFrame>>>) {
    let seen = Rc::new(RefCell::new(0usize));
    let got = Rc::new(RefCell::new(None));
    let g = got.clone();
    let f: FrameFilter = Box::new(move |b: &[u8]| {
        let Some(f) = parse(b) else { return true };
        if !pred(&f) {
            return true;
        }
        let k = *seen.borrow();
        *seen.borrow_mut() += 1;
        if k == nth {
            *g.borrow_mut() = Some(f);
            false
        } else {
            true
        }
    });
    (f, got)
}

fn step(r: &Rig, n: u64) {
    let mut s = r.sys.borrow_mut();
    for _ in 0..n {
        s.step();
    }
}

/// Frames in both directions with the cycle each was first seen (polled every 8 cycles) while stepping
/// until `done` or `max` cycles.
struct Log {
    /// (cycle, frame, true = RNIC to peer)
    frames: Vec<(u64, RoceFrame, bool)>,
    n_sent: usize,
    n_recv: usize,
}

impl Log {
    fn new(r: &Rig) -> Self {
        let s = r.sys.borrow();
        Log { frames: Vec::new(), n_sent: s.sent.len(), n_recv: s.received.len() }
    }
    fn run(&mut self, r: &Rig, max: u64, mut done: impl FnMut(&Log) -> bool) -> bool {
        for _ in 0..max / 8 {
            {
                let mut s = r.sys.borrow_mut();
                for _ in 0..8 {
                    s.step();
                }
                let c = s.cycle;
                for f in &s.sent[self.n_sent..] {
                    if let Some(p) = parse(f) {
                        self.frames.push((c, p, true));
                    }
                }
                for f in &s.received[self.n_recv..] {
                    if let Some(p) = parse(f) {
                        self.frames.push((c, p, false));
                    }
                }
                self.n_sent = s.sent.len();
                self.n_recv = s.received.len();
            }
            if done(self) {
                return true;
            }
        }
        false
    }
    fn out(&self) -> impl Iterator<Item = &(u64, RoceFrame, bool)> {
        self.frames.iter().filter(|x| x.2)
    }
}

/// Our completions, polled through the driver while the system runs.
fn our_wcs(r: &mut Rig, n: usize, max_cycles: u64) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    for _ in 0..max_cycles / 512 {
        got.extend(r.drv.poll_cq(Cq(0), 64).expect("poll_cq"));
        if got.len() >= n {
            break;
        }
        step(r, 512);
    }
    got
}

fn write_wr(r: &Rig, id: u64, off: u64, len: u32) -> SendWr {
    let mut w = SendWr::new(id, WrOpcode::RdmaWrite, vec![Sge { addr: r.src + off, length: len, lkey: r.lkey }]);
    w.remote_addr = r.peer_buf + off;
    w.rkey = r.peer_rkey;
    w.flags.signaled = true;
    w
}
fn read_wr(r: &Rig, id: u64, off: u64, len: u32) -> SendWr {
    // READ the peer's [off, off + len) into our src + 1 MiB + off
    let mut w = SendWr::new(id, WrOpcode::RdmaRead, vec![Sge { addr: r.src + (1 << 20) + off, length: len, lkey: r.lkey }]);
    w.remote_addr = r.peer_buf + off;
    w.rkey = r.peer_rkey;
    w.flags.signaled = true;
    w
}
/// The peer's WRITE of its buffer [off, off + len) into our src + off.
fn peer_write(r: &Rig, id: u64, off: u64, len: u32) -> SendWr {
    let mut w = SendWr::new(id, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf + off, length: len, lkey: r.peer_rkey }]);
    w.remote_addr = r.src + off;
    w.rkey = r.lkey;
    w
}
fn peer_read(r: &Rig, id: u64, off: u64, len: u32) -> SendWr {
    let mut w = SendWr::new(id, WrOpcode::RdmaRead, vec![Sge { addr: r.peer_buf + off, length: len, lkey: r.peer_rkey }]);
    w.remote_addr = r.src + off;
    w.rkey = r.lkey;
    w
}
fn fill_peer(r: &Rig, seed: u8) {
    let pat: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 ^ seed).collect();
    r.sys.borrow_mut().peer.mem_mut().write(r.peer_buf, &pat).unwrap();
}
fn peer_bytes(r: &Rig, off: u64, len: usize) -> Vec<u8> {
    r.sys.borrow().peer.mem().read(r.peer_buf + off, len).unwrap()
}
fn set_peer(r: &Rig, a: QpAttr) {
    let q = r.peer_qpn;
    r.sys.borrow_mut().peer.modify_qp(q, &a).unwrap();
}
fn peer_post(r: &Rig, w: SendWr) {
    let q = r.peer_qpn;
    r.sys.borrow_mut().peer.post_send(q, w).unwrap();
}
/// Rebuild a parsed frame with a good ICRC.
fn build(mut f: RoceFrame) -> Vec<u8> {
    f.icrc_override = None;
    f.build().unwrap()
}

// ============================== section 3: the RTL as responder ==============================

#[test]
fn psn_gap_gets_one_sequence_nak_then_silence() {
    let mut r = new_rig("gap", 256);
    fill_peer(&r, 1);
    // the peer's 8-packet WRITE loses its third packet once
    let (f, lost) = drop_nth(|f| op(f) == RC_RDMA_WRITE_MIDDLE, 1);
    r.sys.borrow_mut().to_rnic_filter = Some(f);
    peer_post(&r, peer_write(&r, 1, 0, 2048));
    let wcs = r.wait_peer_completions(1, 400_000);
    assert_eq!(wcs.len(), 1);
    assert_eq!(wcs[0].status, WcStatus::Success, "{wcs:?}");
    let gap = psn(lost.borrow().as_ref().expect("a packet was lost"));
    assert_eq!(gap, 0x1236);
    let out = sent(&r);
    let naks: Vec<_> = out.iter().filter(|f| is_ack(f) && syndrome(f).unwrap() & 0xE0 == 0x60).collect();
    assert_eq!(naks.len(), 1, "exactly one NAK: {naks:?}");
    assert_eq!((syndrome(naks[0]), psn(naks[0])), (Some(0x60), gap), "NAK PSN sequence error carrying the ePSN");
    // the first packet behind the gap drew the NAK, the four after it were dropped without a word; the
    // retransmission was ACKed once
    assert_eq!(ctr(&mut r, "resp_drop_out_of_seq"), 4);
    let acks: Vec<_> = out.iter().filter(|f| is_ack(f) && syndrome(f) == Some(0x1F)).map(psn).collect();
    assert_eq!(acks, vec![0x1234 + 7], "one ACK, for the last packet");
    assert!(r.src_bytes(0, 2048) == peer_bytes(&r, 0, 2048), "the WRITE landed whole");
}

#[test]
fn duplicate_write_is_reacked_with_the_last_psn_and_not_executed() {
    let mut r = new_rig("dupwrite", 256);
    fill_peer(&r, 2);
    peer_post(&r, peer_write(&r, 1, 0, 512));
    assert_eq!(r.wait_peer_completions(1, 200_000)[0].status, WcStatus::Success);
    let first = received(&r).into_iter().find(|f| op(f) == RC_RDMA_WRITE_FIRST).expect("the WRITE FIRST");
    assert!(!first.packet.bth.ack_req, "the FIRST packet asks for no ACK");
    // clear the target, then replay the FIRST packet: re-ACKed, not written again
    r.mem.lock().unwrap().write(r.src, &[0u8; 512]).unwrap();
    let n0 = r.sys.borrow().sent.len();
    let dups0 = ctr(&mut r, "resp_duplicates");
    r.sys.borrow_mut().inject(build(first));
    step(&r, 20_000);
    let out: Vec<_> = r.sys.borrow().sent[n0..].iter().filter_map(|f| parse(f)).collect();
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(is_ack(&out[0]) && syndrome(&out[0]) == Some(0x1F), "{:?}", out[0]);
    assert_eq!(psn(&out[0]), 0x1235, "the ACK carries ack_psn - 1, the WRITE's last PSN");
    assert_eq!(ctr(&mut r, "resp_duplicates"), dups0 + 1);
    assert_eq!(r.src_bytes(0, 512), vec![0u8; 512], "a duplicate is not executed");
}

#[test]
fn mid_range_read_retry_is_answered_middle_to_last() {
    let mut r = new_rig("midread", 256);
    set_peer(&r, QpAttr { timeout: Some(3), ..Default::default() });
    // the second of four responses is lost once: the peer retries with a READ for the rest
    let (f, lost) = drop_nth(|f| op(f) == RC_RDMA_READ_RESPONSE_MIDDLE, 0);
    r.sys.borrow_mut().to_peer_filter = Some(f);
    peer_post(&r, peer_read(&r, 1, 0x4000, 1024));
    let wcs = r.wait_peer_completions(1, 600_000);
    assert_eq!(wcs.len(), 1);
    assert_eq!(wcs[0].status, WcStatus::Success, "{wcs:?}");
    assert_eq!(psn(lost.borrow().as_ref().unwrap()), 0x1235);
    // the retried READ: PSN 0x1235, VA + 256, 768 bytes
    let reqs: Vec<_> = received(&r).into_iter().filter(|f| op(f) == RC_RDMA_READ_REQUEST).collect();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let reth = *reqs[1].packet.reth().unwrap();
    assert_eq!((psn(&reqs[1]), reth.va, reth.dma_len), (0x1235, r.src + 0x4000 + 256, 768));
    // our answer to it: MIDDLE, MIDDLE, LAST from 0x1235, never FIRST at a later PSN
    let resp: Vec<(u8, u32)> =
        sent(&r).iter().filter(|f| (RC_RDMA_READ_RESPONSE_FIRST..=RC_RDMA_READ_RESPONSE_ONLY).contains(&op(f))).map(|f| (op(f), psn(f))).collect();
    assert_eq!(
        resp,
        vec![
            (RC_RDMA_READ_RESPONSE_FIRST, 0x1234),
            (RC_RDMA_READ_RESPONSE_MIDDLE, 0x1235),
            (RC_RDMA_READ_RESPONSE_MIDDLE, 0x1236),
            (RC_RDMA_READ_RESPONSE_LAST, 0x1237),
            (RC_RDMA_READ_RESPONSE_MIDDLE, 0x1235),
            (RC_RDMA_READ_RESPONSE_MIDDLE, 0x1236),
            (RC_RDMA_READ_RESPONSE_LAST, 0x1237),
        ]
    );
    assert!(peer_bytes(&r, 0x4000, 1024) == r.src_bytes(0x4000, 1024), "the READ's data");
}

#[test]
fn duplicate_read_outside_its_resource_is_dropped() {
    let mut r = new_rig("dupread", 256);
    peer_post(&r, peer_read(&r, 1, 0x4000, 512));
    assert_eq!(r.wait_peer_completions(1, 200_000)[0].status, WcStatus::Success);
    let req = received(&r).into_iter().find(|f| op(f) == RC_RDMA_READ_REQUEST).unwrap();
    let base = ctr(&mut r, "resp_drop_dup_no_resource");
    // (a) a wrong rkey, (b) a range past the original's end: dropped without a word. (c) the same READ: replayed.
    let mut a = req.clone();
    a.packet.ext.iter_mut().for_each(|h| if let testbench::wire::headers::ExtHeader::Reth(x) = h { x.rkey ^= 0x100 });
    let mut b = req.clone();
    b.packet.ext.iter_mut().for_each(|h| if let testbench::wire::headers::ExtHeader::Reth(x) = h { x.dma_len += 256 });
    for (k, f) in [a, b].into_iter().enumerate() {
        let n0 = r.sys.borrow().sent.len();
        r.sys.borrow_mut().inject(build(f));
        step(&r, 20_000);
        assert_eq!(r.sys.borrow().sent.len(), n0, "case {k}: nothing answered");
        assert_eq!(ctr(&mut r, "resp_drop_dup_no_resource"), base + k as u64 + 1, "case {k}");
    }
    let n0 = r.sys.borrow().sent.len();
    r.sys.borrow_mut().inject(build(req));
    step(&r, 20_000);
    let out: Vec<_> = r.sys.borrow().sent[n0..].iter().filter_map(|f| parse(f)).map(|f| (op(&f), psn(&f))).collect();
    assert_eq!(out, vec![(RC_RDMA_READ_RESPONSE_FIRST, 0x1234), (RC_RDMA_READ_RESPONSE_LAST, 0x1235)]);
}

#[test]
fn acks_and_read_responses_carry_syndrome_1f_the_msn_and_the_request_psns() {
    let mut r = new_rig("acks", 256);
    fill_peer(&r, 3);
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 1, sg_list: vec![Sge { addr: r.src + 0x8000, length: 4096, lkey: r.lkey }] }).unwrap();
    let q = r.peer_qpn;
    {
        let mut s = r.sys.borrow_mut();
        s.peer.post_send(q, peer_write(&r, 1, 0, 100)).unwrap();
        s.peer.post_send(q, SendWr::new(2, WrOpcode::Send, vec![Sge { addr: r.peer_buf + 0x1000, length: 200, lkey: r.peer_rkey }])).unwrap();
        s.peer.post_send(q, peer_read(&r, 3, 0x2000, 700)).unwrap();
        s.peer.post_send(q, peer_read(&r, 4, 0x3000, 0)).unwrap();
        s.peer.post_send(q, peer_write(&r, 5, 0x4000, 700)).unwrap();
    }
    let wcs = r_wait(&r, 5);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let out = sent(&r);
    // W1 at 0x1234, SEND 0x1235, READ 0x1236..0x1238, empty READ 0x1239, W3 0x123A..0x123C
    let got: Vec<(u8, u32, Option<u8>, Option<u32>, usize)> =
        out.iter().map(|f| (op(f), psn(f), syndrome(f), f.packet.aeth().map(|a| a.msn), f.packet.payload.len())).collect();
    assert_eq!(
        got,
        vec![
            (RC_ACKNOWLEDGE, 0x1234, Some(0x1F), Some(1), 0),
            (RC_ACKNOWLEDGE, 0x1235, Some(0x1F), Some(2), 0),
            (RC_RDMA_READ_RESPONSE_FIRST, 0x1236, Some(0x1F), Some(3), 256),
            (RC_RDMA_READ_RESPONSE_MIDDLE, 0x1237, None, None, 256),
            (RC_RDMA_READ_RESPONSE_LAST, 0x1238, Some(0x1F), Some(3), 188),
            (RC_RDMA_READ_RESPONSE_ONLY, 0x1239, Some(0x1F), Some(4), 0),
            // W3: three packets, AckReq on the last only, so one ACK
            (RC_ACKNOWLEDGE, 0x123C, Some(0x1F), Some(5), 0),
        ]
    );
}

fn r_wait(r: &Rig, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    let cq = r.peer_cq;
    for _ in 0..2_000 {
        got.extend(r.sys.borrow_mut().peer.poll_cq(cq, 64));
        if got.len() >= n {
            break;
        }
        step(r, 256);
    }
    got
}

#[test]
fn rnr_nak_carries_min_rnr_timer_and_the_packet_psn() {
    let mut r = new_rig("rnr-resp", 256);
    fill_peer(&r, 4);
    r.drv.modify_qp(r.qpn, &QpAttr { min_rnr_timer: Some(1), ..Default::default() }).unwrap();
    peer_post(&r, SendWr::new(1, WrOpcode::Send, vec![Sge { addr: r.peer_buf, length: 300, lkey: r.peer_rkey }]));
    let mut log = Log::new(&r);
    assert!(log.run(&r, 100_000, |l| l.out().any(|x| is_ack(&x.1))), "no answer");
    let (_, nak, _) = log.out().next().unwrap().clone();
    assert_eq!((syndrome(&nak), psn(&nak)), (Some(0x21), 0x1234), "RNR NAK 0x20 | min_rnr_timer, the SEND's PSN");
    assert!(matches!(nak.packet.aeth().unwrap().kind(), AethKind::RnrNak { timer: 1 }));
    assert_eq!(ctr(&mut r, "resp_rnr_naks"), 1);
    assert!(r.drv.poll_cq(Cq(0), 8).unwrap().is_empty(), "nothing executed");
    // a receive posted now: the peer's retry succeeds
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 77, sg_list: vec![Sge { addr: r.src + 0x8000, length: 4096, lkey: r.lkey }] }).unwrap();
    let pw = r.wait_peer_completions(1, 400_000);
    assert_eq!(pw.len(), 1);
    assert_eq!(pw[0].status, WcStatus::Success);
    let ours = our_wcs(&mut r, 1, 100_000);
    assert_eq!((ours[0].wr_id, ours[0].opcode, ours[0].byte_len, ours[0].status), (77, WcOpcode::Recv, 300, WcStatus::Success));
    assert!(r.src_bytes(0x8000, 300) == peer_bytes(&r, 0, 300));
    assert!(r.sys.borrow().peer.counters().rnr_naks_received >= 1);
}

/// Inject a crafted request at our ePSN (`0x1234` on a fresh rig); returns what we answered.
fn inject_request(r: &mut Rig, opcode: u8, payload: Vec<u8>, reth: Option<(u64, u32, u32)>) -> Vec<RoceFrame> {
    use testbench::wire::headers::{Bth, ExtHeader, Reth};
    use testbench::wire::RocePacket;
    // a template from the peer: a real frame of this QP gives the addresses and ports
    peer_post(r, peer_write(r, 99, 0, 0));
    assert_eq!(r.wait_peer_completions(1, 200_000).len(), 1);
    let mut t = received(r).into_iter().find(|f| op(f) == RC_RDMA_WRITE_ONLY).unwrap();
    let mut bth = Bth::new(opcode, t.packet.bth.dest_qpn, 0x1235);
    bth.ack_req = true;
    let ext = reth.map(|(va, rkey, len)| vec![ExtHeader::Reth(Reth { va, rkey, dma_len: len })]).unwrap_or_default();
    t.packet = RocePacket::new(bth, ext, payload);
    let n0 = r.sys.borrow().sent.len();
    r.sys.borrow_mut().inject(build(t));
    step(r, 20_000);
    let out = r.sys.borrow().sent[n0..].iter().filter_map(|f| parse(f)).collect();
    out
}

#[test]
fn middle_without_first_is_naked_invalid_request_and_the_qp_errors() {
    let mut r = new_rig("opseq", 256);
    let shadow = r.mem.lock().unwrap().clone();
    let out = inject_request(&mut r, RC_RDMA_WRITE_MIDDLE, vec![0xAB; 256], None);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((op(&out[0]), syndrome(&out[0]), psn(&out[0])), (RC_ACKNOWLEDGE, Some(0x61), 0x1235), "NAK invalid request, its PSN");
    assert_eq!(ctr(&mut r, "resp_class_c_naks"), 1);
    // our QP is in error now: a good request behind it is dropped and counted
    let mut good = inject_request_raw_next(&mut r);
    good.retain(|f| is_ack(f));
    assert!(good.is_empty(), "{good:?}");
    assert!(ctr(&mut r, "resp_drop_qp_error") >= 1);
    assert!(r.mem.lock().unwrap().read(r.src, 1 << 21).unwrap() == shadow.read(r.src, 1 << 21).unwrap(), "nothing written");
}

/// The peer's next WRITE (it goes out at the peer's next PSN); our answers within 20,000 cycles.
fn inject_request_raw_next(r: &mut Rig) -> Vec<RoceFrame> {
    let n0 = r.sys.borrow().sent.len();
    peer_post(r, peer_write(r, 98, 0x100, 64));
    step(r, 20_000);
    let out = r.sys.borrow().sent[n0..].iter().filter_map(|f| parse(f)).collect();
    out
}

#[test]
fn first_packet_shorter_than_the_pmtu_is_naked_and_writes_nothing() {
    let mut r = new_rig("short-first", 256);
    let shadow = r.mem.lock().unwrap().clone();
    let reth = Some((r.src + 0x2000, r.lkey, 1000));
    let out = inject_request(&mut r, RC_RDMA_WRITE_FIRST, vec![0xCD; 100], reth);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((op(&out[0]), syndrome(&out[0]), psn(&out[0])), (RC_ACKNOWLEDGE, Some(0x61), 0x1235));
    assert!(r.mem.lock().unwrap().read(r.src, 1 << 21).unwrap() == shadow.read(r.src, 1 << 21).unwrap(), "nothing written");
}

/// rxe `send_data_in`: `copy_data` refuses a payload longer than the room left in the receive with -EINVAL
/// before writing anything, which `send_data_in` maps to a malformed WQE (class A), not to its -ENOSPC length
/// error: NAK remote operational error (0x63), the receive completes LOC_QP_OP_ERR, the QP errs.
#[test]
fn send_larger_than_the_receive_is_naked_remote_operational() {
    let mut r = new_rig("send-big", 256);
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 5, sg_list: vec![Sge { addr: r.src + 0x8000, length: 100, lkey: r.lkey }] }).unwrap();
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 6, sg_list: vec![Sge { addr: r.src + 0x9000, length: 100, lkey: r.lkey }] }).unwrap();
    let shadow = r.mem.lock().unwrap().clone();
    peer_post(&r, SendWr::new(1, WrOpcode::Send, vec![Sge { addr: r.peer_buf, length: 200, lkey: r.peer_rkey }]));
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!(pw[0].status, WcStatus::RemOpErr, "{pw:?}");
    let naks: Vec<_> = sent(&r).into_iter().filter(|f| is_ack(f)).map(|f| (syndrome(&f), psn(&f))).collect();
    assert_eq!(naks, vec![(Some(0x63), 0x1234)]);
    let ours = our_wcs(&mut r, 2, 100_000);
    assert_eq!((ours[0].wr_id, ours[0].status), (5, WcStatus::LocQpOpErr), "{ours:?}");
    assert_eq!((ours[1].wr_id, ours[1].status), (6, WcStatus::WrFlushErr), "the QP errs, later receives flushed: {ours:?}");
    let now = r.mem.lock().unwrap().clone();
    assert!(now.read(r.src, 1 << 21).unwrap() == shadow.read(r.src, 1 << 21).unwrap(), "nothing written to our buffer");
}

#[test]
fn receive_with_a_bad_lkey_is_naked_remote_operational() {
    let mut r = new_rig("bad-lkey", 256);
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 5, sg_list: vec![Sge { addr: r.src + 0x8000, length: 1000, lkey: r.lkey ^ 0x100 }] }).unwrap();
    let shadow = r.mem.lock().unwrap().clone();
    peer_post(&r, SendWr::new(1, WrOpcode::Send, vec![Sge { addr: r.peer_buf, length: 200, lkey: r.peer_rkey }]));
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!(pw[0].status, WcStatus::RemOpErr, "{pw:?}");
    let naks: Vec<_> = sent(&r).into_iter().filter(|f| is_ack(f)).map(|f| (syndrome(&f), psn(&f))).collect();
    assert_eq!(naks, vec![(Some(0x63), 0x1234)]);
    let ours = our_wcs(&mut r, 1, 100_000);
    assert_eq!((ours[0].wr_id, ours[0].status), (5, WcStatus::LocQpOpErr), "{ours:?}");
    let now = r.mem.lock().unwrap().clone();
    assert!(now.read(r.src, 1 << 21).unwrap() == shadow.read(r.src, 1 << 21).unwrap(), "nothing written to our buffer");
}

// ============================== section 4: the RTL as requester ==============================

#[test]
fn ackreq_on_the_last_packet_and_every_64_and_the_header_fields() {
    let mut r = new_rig("ackreq", 256);
    r.sys.borrow_mut().peer.post_recv(r.peer_qpn, RecvWr { wr_id: 1, sg_list: vec![Sge { addr: r.peer_buf + 0x10_0000, length: 4096, lkey: r.peer_rkey }] }).unwrap();
    // a 150-packet WRITE, then a solicited SEND of 3 packets
    r.drv.post_send(r.qpn, &write_wr(&r, 1, 0, 150 * 256)).unwrap();
    let mut s = SendWr::new(2, WrOpcode::Send, vec![Sge { addr: r.src + 0x10_0000, length: 700, lkey: r.lkey }]);
    s.flags.signaled = true;
    s.flags.solicited = true;
    r.drv.post_send(r.qpn, &s).unwrap();
    let wcs = our_wcs(&mut r, 2, 600_000);
    assert!(wcs.len() == 2 && wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let out: Vec<_> = sent(&r).into_iter().filter(is_request).collect();
    assert_eq!(out.len(), 153);
    let mut run = 0;
    for (i, f) in out.iter().enumerate() {
        let b = &f.packet.bth;
        assert_eq!((b.tver, b.mig_req, b.pkey, b.fecn, b.becn), (0, false, 0xFFFF, false, false), "packet {i}");
        assert_eq!(b.psn, (0xFF_FFF0 + i as u32) & 0xFF_FFFF, "PSNs count up and wrap");
        run = if b.ack_req { 0 } else { run + 1 };
        assert!(run <= 64, "more than 64 packets without AckReq at {i}");
        assert_eq!(b.se, i == 152, "SE only on the last packet of the solicited SEND (packet {i})");
    }
    assert!(out[149].packet.bth.ack_req && out[152].packet.bth.ack_req, "AckReq on each message's last packet");
    assert!(!out[150].packet.bth.ack_req && !out[151].packet.bth.ack_req);
}

#[test]
fn a_read_takes_one_psn_per_response_packet() {
    let mut r = new_rig("readpsn", 256);
    fill_peer(&r, 5);
    for w in [read_wr(&r, 1, 0, 1000), read_wr(&r, 2, 0x1000, 0), read_wr(&r, 3, 0x2000, 256), write_wr(&r, 4, 0x3000, 10)] {
        r.drv.post_send(r.qpn, &w).unwrap();
    }
    let wcs = our_wcs(&mut r, 4, 400_000);
    assert!(wcs.len() == 4 && wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let reqs: Vec<(u8, u32)> = sent(&r).iter().filter(|f| is_request(f)).map(|f| (op(f), psn(f))).collect();
    // 1000 B: 4 PSNs; 0 B: 1; 256 B: 1; then the WRITE
    assert_eq!(
        reqs,
        vec![(RC_RDMA_READ_REQUEST, 0xFF_FFF0), (RC_RDMA_READ_REQUEST, 0xFF_FFF4), (RC_RDMA_READ_REQUEST, 0xFF_FFF5), (RC_RDMA_WRITE_ONLY, 0xFF_FFF6)]
    );
    assert!(r.src_bytes((1 << 20) as u64, 1000) == peer_bytes(&r, 0, 1000));
}

#[test]
fn a_lost_ack_is_recovered_by_the_retransmit_timer() {
    let mut r = new_rig("timer", 256);
    r.drv.modify_qp(r.qpn, &QpAttr { timeout: Some(3), ..Default::default() }).unwrap();
    let (f, lost) = drop_nth(is_ack, 0);
    r.sys.borrow_mut().to_rnic_filter = Some(f);
    r.drv.post_send(r.qpn, &write_wr(&r, 1, 0, 100)).unwrap();
    let mut log = Log::new(&r);
    assert!(log.run(&r, 100_000, |l| l.out().filter(|x| is_request(&x.1)).count() >= 2), "no retransmission");
    let reqs: Vec<_> = log.out().filter(|x| is_request(&x.1)).collect();
    assert_eq!((psn(&reqs[0].1), psn(&reqs[1].1)), (0xFF_FFF0, 0xFF_FFF0), "the same packet again");
    assert!(lost.borrow().is_some());
    // 4.096 us x 2^3 = 8 timer units; the unit clock's phase and the scanner allow one unit either way
    let gap = reqs[1].0 - reqs[0].0;
    assert!((7 * TICK..=10 * TICK).contains(&gap), "retransmitted after {gap} cycles, want about {}", 8 * TICK);
    let wcs = our_wcs(&mut r, 1, 100_000);
    assert_eq!(wcs[0].status, WcStatus::Success);
    assert_eq!((ctr(&mut r, "comp_timeouts"), ctr(&mut r, "comp_retries")), (1, 1));
    assert_eq!(r.sys.borrow().peer.counters().duplicate_requests, 1, "the peer re-ACKed a duplicate");
}

#[test]
fn timeout_zero_never_retransmits() {
    let mut r = new_rig("timeout0", 256);
    r.drv.modify_qp(r.qpn, &QpAttr { timeout: Some(0), ..Default::default() }).unwrap();
    let (f, _) = drop_nth(is_ack, 0);
    r.sys.borrow_mut().to_rnic_filter = Some(f);
    r.drv.post_send(r.qpn, &write_wr(&r, 1, 0, 100)).unwrap();
    // 2^22 units would be the longest timer; 400,000 cycles are 300 units: with timeout 0 nothing may happen
    let wcs = our_wcs(&mut r, 1, 400_000);
    assert!(wcs.is_empty(), "{wcs:?}");
    assert_eq!(sent(&r).iter().filter(|f| is_request(f)).count(), 1, "sent once, never again");
    assert_eq!(ctr(&mut r, "comp_timeouts"), 0);
}

#[test]
fn retry_exhaustion_errors_the_qp_flushes_the_rest_and_spares_other_qps() {
    let mut r = new_rig("retry-exc", 256);
    let (qp_b, peer_b) = r.add_qp_pair(256, 0x100, 0x200);
    r.drv.modify_qp(r.qpn, &QpAttr { timeout: Some(2), retry_cnt: Some(2), ..Default::default() }).unwrap();
    // everything of QP A's to the peer is lost
    let peer_a = r.peer_qpn;
    r.sys.borrow_mut().to_peer_filter = Some(Box::new(move |b: &[u8]| parse(b).map_or(true, |f| f.packet.bth.dest_qpn != peer_a)));
    for i in 0..3 {
        r.drv.post_send(r.qpn, &write_wr(&r, 10 + i, i * 0x1000, 300)).unwrap();
    }
    let wcs = our_wcs(&mut r, 3, 400_000);
    let got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, vec![(10, WcStatus::RetryExcErr), (11, WcStatus::WrFlushErr), (12, WcStatus::WrFlushErr)]);
    // first transmission + retry_cnt (2) go-back-N passes of the head WQE's two packets
    let firsts = sent(&r).iter().filter(|f| f.packet.bth.dest_qpn == peer_a && psn(f) == 0xFF_FFF0).count();
    assert_eq!(firsts, 3, "sent, then retried twice");
    assert_eq!(ctr(&mut r, "comp_timeouts"), 2);
    // QP B is untouched
    let mut w = write_wr(&r, 20, 0x8000, 1000);
    w.remote_addr = r.peer_buf + 0x8000;
    r.drv.post_send(qp_b, &w).unwrap();
    let wb = our_wcs(&mut r, 1, 200_000);
    assert_eq!((wb[0].wr_id, wb[0].qp_num, wb[0].status), (20, qp_b, WcStatus::Success));
    assert!(peer_bytes(&r, 0x8000, 1000) == r.src_bytes(0x8000, 1000));
    let _ = peer_b;
    // QP A stays in error: a new WQE is flushed without going out
    let n0 = sent(&r).len();
    r.drv.post_send(r.qpn, &write_wr(&r, 13, 0, 10)).unwrap();
    let wa = our_wcs(&mut r, 1, 100_000);
    assert_eq!((wa[0].wr_id, wa[0].status), (13, WcStatus::WrFlushErr));
    let after: Vec<_> = sent(&r)[n0..].iter().map(|f| (op(f), f.packet.bth.dest_qpn, psn(f))).collect();
    assert!(after.is_empty(), "sent by a QP in error: {after:x?}");
}

#[test]
fn rnr_nak_wait_then_success() {
    let mut r = new_rig("rnr-req", 256);
    set_peer(&r, QpAttr { min_rnr_timer: Some(2), ..Default::default() }); // 0.02 ms
    let mut s = SendWr::new(1, WrOpcode::Send, vec![Sge { addr: r.src, length: 300, lkey: r.lkey }]);
    s.flags.signaled = true;
    r.drv.post_send(r.qpn, &s).unwrap();
    let mut log = Log::new(&r);
    // two RNR NAKs (the SEND's LAST packet behind the FIRST that drew one gets a PSN-sequence NAK, as from
    // rxe; it must not cut the wait short), then a receive is posted
    let is_rnr = |f: &RoceFrame| is_ack(f) && syndrome(f).unwrap() & 0xE0 == 0x20;
    assert!(log.run(&r, 200_000, |l| l.frames.iter().filter(|x| !x.2 && is_rnr(&x.1)).count() >= 2));
    let rnr: Vec<_> = log.frames.iter().filter(|x| !x.2 && is_rnr(&x.1)).map(|x| (x.0, syndrome(&x.1), psn(&x.1))).collect();
    assert_eq!((rnr[0].1, rnr[0].2), (Some(0x22), 0xFF_FFF0), "RNR NAK, timer 2, the SEND's first PSN");
    // the retry waited the encoded 20 us (rounded up to 5 timer units; one unit of phase either way)
    let want = 20_000 * 322_265_625 / 1_000_000_000;
    // (the retry: the NAKed PSN sent again; the SEND's LAST may leave just after the NAK came in)
    let retry = log.out().filter(|x| is_request(&x.1) && psn(&x.1) == rnr[0].2 && x.0 > rnr[0].0).map(|x| x.0).next().unwrap();
    assert!(retry - rnr[0].0 >= want - TICK && retry - rnr[0].0 <= want + 2 * TICK, "retry after {} cycles, want ~{want}", retry - rnr[0].0);
    {
        let q = r.peer_qpn;
        let b = r.peer_buf;
        let k = r.peer_rkey;
        r.sys.borrow_mut().peer.post_recv(q, RecvWr { wr_id: 9, sg_list: vec![Sge { addr: b, length: 4096, lkey: k }] }).unwrap();
    }
    let wcs = our_wcs(&mut r, 1, 300_000);
    assert_eq!(wcs[0].status, WcStatus::Success, "{wcs:?}");
    assert!(peer_bytes(&r, 0, 300) == r.src_bytes(0, 300));
    assert!(ctr(&mut r, "comp_rnr_naks") >= 2);
}

#[test]
fn rnr_retry_exhaustion() {
    let mut r = new_rig("rnr-exc", 256);
    set_peer(&r, QpAttr { min_rnr_timer: Some(1), ..Default::default() });
    r.drv.modify_qp(r.qpn, &QpAttr { rnr_retry: Some(2), ..Default::default() }).unwrap();
    for i in 0..2 {
        let mut s = SendWr::new(1 + i, WrOpcode::Send, vec![Sge { addr: r.src, length: 300, lkey: r.lkey }]);
        s.flags.signaled = true;
        r.drv.post_send(r.qpn, &s).unwrap();
    }
    let wcs = our_wcs(&mut r, 2, 300_000);
    let got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, vec![(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]);
    assert_eq!(ctr(&mut r, "comp_rnr_naks"), 3, "sent, then retried twice, each answered RNR NAK");
}

#[test]
fn sequence_nak_mid_message_resumes_with_middle_and_no_reth() {
    let mut r = new_rig("nak-mid", 256);
    let (f, lost) = drop_nth(|f| op(f) == RC_RDMA_WRITE_MIDDLE, 1);
    r.sys.borrow_mut().to_peer_filter = Some(f);
    r.drv.post_send(r.qpn, &write_wr(&r, 1, 0, 8 * 256)).unwrap();
    let wcs = our_wcs(&mut r, 1, 300_000);
    assert_eq!(wcs[0].status, WcStatus::Success, "{wcs:?}");
    let gap = psn(lost.borrow().as_ref().unwrap());
    assert_eq!(gap, 0xFF_FFF2);
    let reqs: Vec<(u8, u32, bool)> = sent(&r).iter().filter(|f| is_request(f)).map(|f| (op(f), psn(f), f.packet.reth().is_some())).collect();
    let mut want: Vec<(u8, u32, bool)> = (0..8u32)
        .map(|i| (if i == 0 { RC_RDMA_WRITE_FIRST } else if i == 7 { RC_RDMA_WRITE_LAST } else { RC_RDMA_WRITE_MIDDLE }, (0xFF_FFF0 + i) & 0xFF_FFFF, i == 0))
        .collect();
    // the go-back-N from the NAKed PSN: MIDDLE..LAST, no RETH
    want.extend((2..8u32).map(|i| (if i == 7 { RC_RDMA_WRITE_LAST } else { RC_RDMA_WRITE_MIDDLE }, (0xFF_FFF0 + i) & 0xFF_FFFF, false)));
    assert_eq!(reqs, want);
    assert_eq!(r.sys.borrow().peer.counters().naks_sent.get(&0x60), Some(&1));
    assert!(peer_bytes(&r, 0, 2048) == r.src_bytes(0, 2048));
    assert_eq!((ctr(&mut r, "comp_naks"), ctr(&mut r, "comp_retries"), ctr(&mut r, "comp_timeouts")), (1, 1, 0));
}

#[test]
fn a_partial_read_is_retried_as_a_new_read_for_the_rest() {
    let mut r = new_rig("partial-read", 256);
    fill_peer(&r, 6);
    r.drv.modify_qp(r.qpn, &QpAttr { timeout: Some(3), ..Default::default() }).unwrap();
    let (f, _) = drop_nth(|f| op(f) == RC_RDMA_READ_RESPONSE_MIDDLE, 0);
    r.sys.borrow_mut().to_rnic_filter = Some(f);
    r.drv.post_send(r.qpn, &read_wr(&r, 1, 0x2000, 1000)).unwrap();
    let wcs = our_wcs(&mut r, 1, 300_000);
    assert_eq!(wcs[0].status, WcStatus::Success, "{wcs:?}");
    let reqs: Vec<_> = sent(&r).into_iter().filter(|f| op(f) == RC_RDMA_READ_REQUEST).collect();
    assert_eq!(reqs.len(), 2);
    let (a, b) = (*reqs[0].packet.reth().unwrap(), *reqs[1].packet.reth().unwrap());
    assert_eq!((psn(&reqs[0]), a.va, a.dma_len), (0xFF_FFF0, r.peer_buf + 0x2000, 1000));
    assert_eq!((psn(&reqs[1]), b.va, b.dma_len), (0xFF_FFF1, r.peer_buf + 0x2000 + 256, 744), "from the first missing PSN, for the rest");
    assert!(r.src_bytes((1 << 20) + 0x2000, 1000) == peer_bytes(&r, 0x2000, 1000), "every byte");
}

#[test]
fn an_ack_beyond_a_pending_read_is_an_implied_nak() {
    let mut r = new_rig("implied", 256);
    fill_peer(&r, 7);
    let (f, _) = drop_nth(|f| op(f) == RC_RDMA_READ_RESPONSE_ONLY, 0);
    r.sys.borrow_mut().to_rnic_filter = Some(f);
    r.drv.post_send(r.qpn, &read_wr(&r, 1, 0x100, 64)).unwrap();
    r.drv.post_send(r.qpn, &write_wr(&r, 2, 0x3000, 64)).unwrap();
    let wcs = our_wcs(&mut r, 2, 300_000);
    let got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, vec![(1, WcStatus::Success), (2, WcStatus::Success)], "in order, both");
    let reqs: Vec<(u8, u32)> = sent(&r).iter().filter(|f| is_request(f)).map(|f| (op(f), psn(f))).collect();
    // READ, WRITE; the WRITE's ACK implied the READ's response was lost: READ again (and the WRITE after it)
    assert_eq!(&reqs[..3], &[(RC_RDMA_READ_REQUEST, 0xFF_FFF0), (RC_RDMA_WRITE_ONLY, 0xFF_FFF1), (RC_RDMA_READ_REQUEST, 0xFF_FFF0)]);
    assert!(ctr(&mut r, "comp_implied_naks") >= 1);
    assert_eq!(ctr(&mut r, "comp_timeouts"), 0, "no timer needed");
    assert!(r.src_bytes((1 << 20) + 0x100, 64) == peer_bytes(&r, 0x100, 64));
}

#[test]
fn requests_stay_within_128_psns_of_the_acknowledged_one() {
    // rxe `wait_psn` (RXE_MAX_UNACKED_PSNS): six READs of 64 PSNs each at MTU 256 posted at once; a request
    // goes on the wire only at a PSN at most 128 past the acknowledged one (the response PSNs received before
    // it). Without the window all six leave together (a go-back-N would then resend up to 16 READs).
    let mut r = new_rig("window", 256);
    fill_peer(&r, 5);
    r.sys.borrow_mut().timing = true;
    for i in 0..6u64 {
        r.drv.post_send(r.qpn, &read_wr(&r, 1 + i, i * 0x4000, 0x4000)).unwrap();
    }
    let wcs = our_wcs(&mut r, 6, 400_000);
    assert!(wcs.len() == 6 && wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let s = r.sys.borrow();
    let (tx, rx) = (&s.tx_first_beats, &s.rx_last_beats);
    let sent: Vec<RoceFrame> = s.sent.iter().filter_map(|f| parse(f)).collect();
    let got: Vec<RoceFrame> = s.received.iter().filter_map(|f| parse(f)).collect();
    assert_eq!((tx.len(), rx.len()), (s.sent.len(), s.received.len()), "a beat time per frame");
    let mut reads = 0;
    for (f, &t) in sent.iter().zip(tx) {
        if op(f) != RC_RDMA_READ_REQUEST {
            continue;
        }
        reads += 1;
        // responses taken in order (none lost): the acknowledged PSN is the first plus those in before t
        let acked = got.iter().zip(rx).filter(|(g, &at)| at < t && !is_request(g)).count() as u32;
        let ahead = psn(f).wrapping_sub(0xFF_FFF0) & 0xFF_FFFF;
        assert!(ahead <= acked + 128, "READ at PSN {:#x}: {ahead} PSNs past the first, {acked} acknowledged", psn(f));
    }
    assert_eq!(reads, 6, "each READ once");
    drop(s);
    assert!(r.src_bytes(1 << 20, 6 * 0x4000) == peer_bytes(&r, 0, 6 * 0x4000));
}

#[test]
fn a_coalesced_ack_completes_earlier_writes_and_a_stale_ack_is_ignored() {
    let mut r = new_rig("coalesced", 256);
    let (f, lost) = drop_nth(is_ack, 0);
    r.sys.borrow_mut().to_rnic_filter = Some(f);
    for i in 0..3 {
        r.drv.post_send(r.qpn, &write_wr(&r, 1 + i, i * 0x100, 64)).unwrap();
    }
    let wcs = our_wcs(&mut r, 3, 200_000);
    assert!(wcs.len() == 3 && wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(sent(&r).iter().filter(|f| is_request(f)).count(), 3, "nothing retransmitted");
    // the lost ACK, delivered late: stale, ignored
    let stale = lost.borrow_mut().take().unwrap();
    let acks0 = ctr(&mut r, "comp_acks");
    r.sys.borrow_mut().inject(build(stale));
    step(&r, 10_000);
    assert!(r.drv.poll_cq(Cq(0), 8).unwrap().is_empty(), "no completion from a stale ACK");
    assert_eq!(ctr(&mut r, "comp_acks"), acks0 + 1, "counted");
    assert_eq!(ctr(&mut r, "comp_retries"), 0);
    // still working
    r.drv.post_send(r.qpn, &write_wr(&r, 9, 0x800, 64)).unwrap();
    assert_eq!(our_wcs(&mut r, 1, 100_000)[0].status, WcStatus::Success);
}

#[test]
fn nak_codes_map_to_completion_statuses() {
    let mut r = new_rig("nak-codes", 256);
    let (q2, p2) = r.add_qp_pair(256, 0x300, 0x400);
    let (q3, p3) = r.add_qp_pair(256, 0x500, 0x600);
    let (q4, _p4) = r.add_qp_pair(256, 0x700, 0x800);
    {
        let (b, k) = (r.peer_buf, r.peer_rkey);
        let mut s = r.sys.borrow_mut();
        // QP 2's peer: no REMOTE_WRITE, so our WRITE is NAKed 0x61 (rxe `check_op_valid`); QP 3's: a receive
        // with a bad lkey (0x63)
        s.peer.modify_qp(p2, &QpAttr { qp_access_flags: Some(AccessFlags::LOCAL_WRITE), ..Default::default() }).unwrap();
        s.peer.post_recv(p3, RecvWr { wr_id: 1, sg_list: vec![Sge { addr: b, length: 1000, lkey: k ^ 0x100 }] }).unwrap();
    }
    // QP 4: its ACK rewritten to NAK code 0x64 (invalid RD request; rxe never sends it): "any other code"
    let q4_peer_ack = Rc::new(RefCell::new(None::<RoceFrame>));
    let keep = q4_peer_ack.clone();
    r.sys.borrow_mut().to_rnic_filter = Some(Box::new(move |b: &[u8]| {
        let Some(f) = parse(b) else { return true };
        if is_ack(&f) && f.packet.bth.dest_qpn == q4 {
            *keep.borrow_mut() = Some(f);
            return false;
        }
        true
    }));
    let mut bad_rkey = write_wr(&r, 1, 0, 100);
    bad_rkey.rkey ^= 0x100;
    r.drv.post_send(r.qpn, &bad_rkey).unwrap();
    r.drv.post_send(q2, &write_wr(&r, 2, 0x2000, 100)).unwrap();
    let mut s = SendWr::new(3, WrOpcode::Send, vec![Sge { addr: r.src, length: 100, lkey: r.lkey }]);
    s.flags.signaled = true;
    r.drv.post_send(q3, &s).unwrap();
    r.drv.post_send(q4, &write_wr(&r, 4, 0x4000, 100)).unwrap();
    let mut log = Log::new(&r);
    assert!(log.run(&r, 100_000, |_| q4_peer_ack.borrow().is_some()));
    let mut nak = q4_peer_ack.borrow_mut().take().unwrap();
    nak.packet.ext.iter_mut().for_each(|h| if let testbench::wire::headers::ExtHeader::Aeth(a) = h { a.syndrome = 0x64 });
    assert!(matches!(nak.packet.aeth().unwrap().kind(), AethKind::Nak(NakCode::InvalidRdRequest)));
    r.sys.borrow_mut().inject(build(nak));
    let mut wcs = our_wcs(&mut r, 4, 200_000);
    wcs.sort_by_key(|w| w.wr_id);
    let got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        vec![(1, WcStatus::RemAccessErr), (2, WcStatus::RemInvReqErr), (3, WcStatus::RemOpErr), (4, WcStatus::RemOpErr)]
    );
    // each of those QPs is in error: a new WQE is flushed
    for (q, id) in [(r.qpn, 11u64), (q2, 12), (q3, 13), (q4, 14)] {
        r.drv.post_send(q, &write_wr(&r, id, 0, 10)).unwrap();
        let w = our_wcs(&mut r, 1, 50_000);
        assert_eq!((w[0].wr_id, w[0].status), (id, WcStatus::WrFlushErr));
    }
}
