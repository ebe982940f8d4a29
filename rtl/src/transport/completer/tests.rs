use super::*;
use crate::common::ports::WcSeen;
use testbench::wire::headers::AETH_TYPE_ACK;
use testbench::wire::opcode::{
    RC_ACKNOWLEDGE, RC_ATOMIC_ACKNOWLEDGE, RC_RDMA_READ_RESPONSE_FIRST, RC_RDMA_READ_RESPONSE_LAST,
    RC_RDMA_READ_RESPONSE_MIDDLE, RC_RDMA_READ_RESPONSE_ONLY,
};
use crate::common::axis::beat_of;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use rnic_driver::host::{wc_status_code, wr_opcode_code};
use testbench::model::harness::{ConnOpts, Pair};
use testbench::model::*;
use testbench::wire::frame::{parse_ethernet, Frame};

/// A response as RX Parse hands it on: header, ext words, payload.
#[derive(Clone)]
struct Resp {
    h: RxHeader,
    ew: u64,
    pay: Vec<u8>,
}

fn resp_of(bytes: &[u8]) -> Resp {
    let (h, ew, pay) = crate::wire::rx_parse::rx_header_of(bytes);
    Resp { h, ew, pay }
}

struct Rig {
    u: Completer,
    rng: SmallRng,
    /// scattered bytes: address -> byte
    mem: BTreeMap<u64, u8>,
    cqs: Vec<WcSeen>,
    /// most records waiting at once while the QP was full (iss_ready low with iss_valid high)
    full_stalls: u64,
    /// read responses that took the fast path
    fast: u64,
    /// every record fed in (WQE Check's part: a rewind sends the marker, then these again from the index)
    issued: Vec<ReqIssued>,
    /// rewinds seen: (QPN, ring index, PSN, skip)
    rewinds: Vec<(u64, u64, u64, u64)>,
    /// QP-to-error pulses seen (QPN)
    qerrs: Vec<u64>,
    min_cycles: u64,
    /// WQE Check's verdict when it reads this WQE (QPN, ring index) again after a rewind: a failed
    /// local check (its MR gone since it was first sent), so its record comes back with this status
    fail_again: Option<(u64, u64, WcStatus)>,
    /// the window writes to WQE Check: (QPN, busy, limit)
    wins: Vec<(u64, bool, u64)>,
    /// the retired READ/atomic count per QP, as the last window write gave it
    fin: BTreeMap<u64, u64>,
}

impl Rig {
    fn new(seed: u64) -> Self {
        let mut u = Completer::default();
        u.connect_all();
        Rig {
            u,
            rng: SmallRng::seed_from_u64(seed),
            mem: BTreeMap::new(),
            cqs: Vec::new(),
            full_stalls: 0,
            fast: 0,
            issued: Vec::new(),
            rewinds: Vec::new(),
            qerrs: Vec::new(),
            min_cycles: 0,
            fail_again: None,
            wins: Vec::new(),
            fin: BTreeMap::new(),
        }
    }
    fn tick(&mut self) {
        self.u.clock.next = false.into();
        assert!(simulate(&mut self.u, 200));
        self.u.clock.next = true.into();
        assert!(simulate(&mut self.u, 200));
    }
    /// CMD_WRITE_QP with no retransmit timer and infinite retries.
    fn set_cq(&mut self, qpn: u32, cqn: u32) {
        self.set_qp(qpn, cqn, 0, 7, 7);
    }
    fn set_qp(&mut self, qpn: u32, cqn: u32, timeout: u64, retry: u64, rnr: u64) {
        self.set_qp_to(qpn, cqn, timeout, retry, rnr, false);
    }
    /// CMD_WRITE_QP_REQ: the QP's sq_psn.
    fn set_sq_psn(&mut self, qpn: u32, psn: u32) {
        self.u.cqp_we.next = true;
        self.u.cqp_qpn.next = bits(qpn as u64);
        self.u.cqp_psn.next = bits(psn as u64);
        self.tick();
        self.u.cqp_we.next = false;
        for _ in 0..10 {
            self.tick();
        }
    }
    /// CMD_WRITE_QP, `reset` when to RESET; the window write that follows is recorded.
    fn set_qp_to(&mut self, qpn: u32, cqn: u32, timeout: u64, retry: u64, rnr: u64, reset: bool) {
        self.u.cqw_reset.next = reset;
        self.u.cqw_we.next = true;
        self.u.cqw_qpn.next = bits(qpn as u64);
        self.u.cqw_cqn.next = bits(cqn as u64);
        self.u.cqw_timeout.next = bits(timeout);
        self.u.cqw_retry.next = bits(retry);
        self.u.cqw_rnr.next = bits(rnr);
        self.tick();
        self.u.cqw_we.next = false;
        for _ in 0..10 {
            self.u.clock.next = false.into();
            assert!(simulate(&mut self.u, 200));
            if self.u.win_we.val() {
                self.fin.insert(self.u.win_qpn.val().to_u64(), self.u.win_fin.val().to_u64());
            }
            self.u.clock.next = true.into();
            assert!(simulate(&mut self.u, 200));
        }
    }
    fn counter(&self, i: usize) -> u64 {
        self.u.counters[i].val().to_u64()
    }
    /// Feed the records (first alone, until all are in or the list is full) and then the responses, with
    /// random valid and ready everywhere; run until everything is consumed and the block is quiet.
    fn run(&mut self, iss: &[ReqIssued], resps: &[Resp]) {
        let mut iq: VecDeque<ReqIssued> = iss.iter().copied().collect();
        self.issued.extend_from_slice(iss);
        let mut hq: VecDeque<Resp> = resps.iter().cloned().collect();
        let mut beats: VecDeque<(Vec<u8>, bool)> = VecDeque::new();
        let mut cmds: VecDeque<(u64, u64)> = VecDeque::new();
        let mut cur: Option<(u64, u64, Vec<u8>)> = None;
        let mut stalled = 0;
        let mut quiet = 0;
        let mut cycles = 0u64;
        loop {
            cycles += 1;
            assert!(cycles < 400_000, "completer hung");
            let iv = !iq.is_empty();
            if let Some(r) = iq.front() {
                self.u.iss.next = *r;
            }
            self.u.iss_valid.next = iv;
            let hv = !hq.is_empty() && (iq.is_empty() || stalled > 40) && self.rng.gen_ratio(3, 4);
            if hv {
                let r = hq.front().unwrap();
                self.u.hdr.next = r.h;
                self.u.hdr_ext_words.next = bits(r.ew);
                self.u.hdr_pay_len.next = bits(r.pay.len() as u64);
            }
            self.u.hdr_valid.next = hv;
            let pv = !beats.is_empty() && self.rng.gen_ratio(3, 4);
            if pv {
                let (d, k) = beat_of(&beats[0].0);
                self.u.pay.tdata.next = d;
                self.u.pay.tkeep.next = k;
                self.u.pay.tlast.next = beats[0].1;
            }
            self.u.pay.tvalid.next = pv;
            let (sr, tr, cr) = (self.rng.gen_ratio(2, 3), self.rng.gen_ratio(2, 3), self.rng.gen_ratio(2, 3));
            self.u.s_cmd.ready.next = sr;
            self.u.s_pay.tready.next = tr;
            self.u.cq.ready.next = cr;
            let rwr = self.rng.gen_ratio(1, 2);
            self.u.rw_ready.next = rwr;
            self.u.clock.next = false.into();
            assert!(simulate(&mut self.u, 200));
            if self.u.qerr_valid.val() {
                self.qerrs.push(self.u.qerr_qpn.val().to_u64());
            }
            if self.u.win_we.val() {
                self.wins.push((self.u.win_qpn.val().to_u64(), self.u.win_busy.val(), self.u.win_lim.val().to_u64()));
                self.fin.insert(self.u.win_qpn.val().to_u64(), self.u.win_fin.val().to_u64());
            }
            if self.u.rw_valid.val() && rwr {
                // WQE Check: the marker, then the QP's WQEs from the ring index on, sent again
                let (q, i) = (self.u.rw_qpn.val().to_u64(), self.u.rw_idx.val().to_u64());
                self.rewinds.push((q, i, self.u.rw_psn.val().to_u64(), self.u.rw_skip.val().to_u64()));
                let again: Vec<ReqIssued> = self
                    .issued
                    .iter()
                    .filter(|r| r.qpn.to_u64() == q && r.idx.to_u64() >= i)
                    .map(|r| match self.fail_again {
                        Some((fq, fi, st)) if (fq, fi) == (q, r.idx.to_u64()) => {
                            ReqIssued { status: bits(wc_status_code(st) as u64), next_psn: r.first_psn, ..*r }
                        }
                        _ => *r,
                    })
                    .collect();
                for r in again.into_iter().rev() {
                    iq.push_front(r);
                }
                iq.push_front(ReqIssued { qpn: bits(q), idx: bits(i), rewind: true, ..Default::default() });
                quiet = 0;
            }
            if self.u.state.q.val() == CompState::FEnd && self.u.rp.sums.val() {
                self.fast += 1;
            }
            quiet += 1;
            if iv {
                if self.u.iss_ready.val() {
                    iq.pop_front();
                    stalled = 0;
                    quiet = 0;
                } else {
                    stalled += 1;
                    if stalled == 41 {
                        self.full_stalls += 1;
                    }
                }
            }
            if hv && self.u.hdr_ready.val() {
                let r = hq.pop_front().unwrap();
                let n = r.pay.len();
                if n > 0 {
                    let chunks: Vec<Vec<u8>> = r.pay.chunks(64).map(|c| c.to_vec()).collect();
                    let m = chunks.len();
                    for (i, c) in chunks.into_iter().enumerate() {
                        beats.push_back((c, i + 1 == m));
                    }
                }
                quiet = 0;
            }
            if pv && self.u.pay.tready.val() {
                beats.pop_front();
                quiet = 0;
            }
            if self.u.s_cmd.valid.val() && sr {
                cmds.push_back((self.u.s_cmd.addr.val().to_u64(), self.u.s_cmd.len.val().to_u64()));
                quiet = 0;
            }
            if self.u.s_pay.tvalid.val() && tr {
                if cur.is_none() {
                    let (a, l) = cmds.pop_front().expect("payload beat without a scatter command");
                    cur = Some((a, l, Vec::new()));
                }
                let c = cur.as_mut().unwrap();
                let keep = self.u.s_pay.tkeep.val();
                for i in 0..64 {
                    if keep.get_bit(i) {
                        c.2.push(self.u.s_pay.tdata.val().get_bits::<8>(8 * i).to_u8());
                    }
                }
                if self.u.s_pay.tlast.val() {
                    let (a, l, data) = cur.take().unwrap();
                    assert_eq!(data.len() as u64, l, "scatter payload length");
                    for (i, b) in data.iter().enumerate() {
                        self.mem.insert(a + i as u64, *b);
                    }
                }
                quiet = 0;
            }
            if self.u.cq.valid.val() && cr {
                self.cqs.push(WcSeen::of_port(&self.u.cq.wc.val()));
                quiet = 0;
            }
            self.u.clock.next = true.into();
            assert!(simulate(&mut self.u, 200));
            if iq.is_empty() && hq.is_empty() && beats.is_empty() && quiet > 60 && cycles > self.min_cycles {
                break;
            }
        }
        assert!(cmds.is_empty() && cur.is_none(), "scatter command without its payload");
    }
}

fn ops() -> [WrOpcode; 7] {
    [
        WrOpcode::Send,
        WrOpcode::SendWithImm,
        WrOpcode::RdmaWrite,
        WrOpcode::RdmaWriteWithImm,
        WrOpcode::RdmaRead,
        WrOpcode::AtomicFetchAndAdd,
        WrOpcode::AtomicCmpAndSwp,
    ]
}

/// Golden campaign: two model devices; the requester's WQEs as ReqIssued records (PSNs as the model assigned
/// them) and the responder's response frames (some ACKs dropped: coalesced ACKs; some responses duplicated:
/// stale) go to the RTL and to the model requester; every completion and scattered byte compared.
fn campaign(seed: u64, seqs: usize) -> (usize, usize, u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut rig = Rig::new(seed ^ 0x55);
    let (mut ncq, mut nbytes) = (0usize, 0usize);
    let mut coalesced = 0u64;
    for s in 0..seqs {
        let mtu = [256u32, 1024, 4096][s % 3];
        let m = mtu as u64;
        let mut p = Pair::new(LinkConfig::default(), seed + s as u64);
        let psn0 = if s % 2 == 0 { 0xFF_FFFF - rng.gen_range(0..30) } else { rng.gen_range(0..0x100_0000) };
        let o = ConnOpts { path_mtu: mtu, ..Default::default() };
        let (qa, qb) = p.connect(&o, psn0, rng.gen_range(0..0x100_0000));
        let cqn = 0x100 + s as u32;
        rig.set_cq(qa, cqn);
        let abuf = p.a.alloc(1 << 17);
        let bbuf = p.b.alloc(1 << 17);
        for i in 0..(1u64 << 17) / 8 {
            p.b.mem_mut().write_u64(bbuf + 8 * i, rng.gen()).unwrap();
        }
        let amr = p.a.reg_mr(p.pd_a, abuf, 1 << 17, AccessFlags::ALL).unwrap();
        let bmr = p.b.reg_mr(p.pd_b, bbuf, 1 << 17, AccessFlags::ALL).unwrap();
        for r in 0..256 {
            p.b.post_recv(qb, RecvWr { wr_id: r, sg_list: vec![Sge { addr: bbuf + (1 << 16), length: 1 << 16, lkey: bmr.lkey }] })
                .unwrap();
        }
        let drops0 = p.a.counters().drop_count(DropReason::NoPendingWqe) + p.a.counters().drop_count(DropReason::StaleResponse);
        let dropped0 = rig.counter(CNT_DROPPED);
        let acks0 = p.a.counters().acks_received;
        let racks0 = rig.counter(CNT_ACKS);
        let mut wid = 0u64;
        for _batch in 0..3 {
            let n = rng.gen_range(1..=COMP_RING + 4);
            let mut iss = Vec::new();
            let mut reads = Vec::new();
            // the whole batch goes out at once: at most max_rd_atomic READ/atomics and within the model's
            // 128 unacknowledged PSNs (less a margin of 8), so a long batch takes short WRITEs and SENDs
            // towards its end
            let (mut rd_n, mut psns) = (0usize, 0u64);
            let psn_room = u64::from(testbench::model::requester::RXE_MAX_UNACKED_PSNS) - 8;
            for k in 0..n {
                let mut op = ops()[rng.gen_range(0..7)];
                if op.is_read_or_atomic() && rd_n == usize::from(o.max_rd_atomic) {
                    op = WrOpcode::RdmaWrite;
                }
                let mut len = [0, 1, m - 1, m, m + 1, 3 * m + 17][rng.gen_range(0..6)];
                if psns + len.div_ceil(m).max(1) + (n - k - 1) as u64 > psn_room {
                    len = [0, 1, m - 1, m][rng.gen_range(0..4)];
                }
                if op.is_atomic() {
                    len = 8;
                }
                rd_n += op.is_read_or_atomic() as usize;
                psns += len.div_ceil(m).max(1);
                let off = rng.gen_range(0..(1u64 << 16) - len);
                let mut wr = SendWr::new(wid, op, vec![Sge { addr: abuf + off, length: len as u32, lkey: amr.lkey }]);
                wr.remote_addr = bbuf + rng.gen_range(0..(1u64 << 16) - len);
                if op.is_atomic() {
                    wr.remote_addr &= !7;
                    wr.compare_add = if rng.gen_bool(0.5) { p.b.mem().read_u64(wr.remote_addr).unwrap() } else { rng.gen() };
                    wr.swap = rng.gen();
                }
                wr.rkey = bmr.rkey;
                wr.imm_data = rng.gen();
                wr.flags.signaled = rng.gen_bool(0.7);
                p.a.post_send(qa, wr.clone()).unwrap();
                if op.is_read_or_atomic() {
                    reads.push((abuf + off, len));
                }
                iss.push((wr, off, len));
                wid += 1;
            }
            let reqs = p.a.poll(0);
            let q = p.a.qp(qa).unwrap();
            assert_eq!(q.sq.len(), n, "every WQE is sent and pending");
            let recs: Vec<ReqIssued> = iss
                .iter()
                .zip(q.sq.iter())
                .map(|((wr, off, len), w)| {
                    assert_eq!(w.wr.wr_id, wr.wr_id);
                    ReqIssued {
                        qpn: bits(qa as u64),
                        idx: bits(wr.wr_id & 0xFFFF),
                        wr_id: bits(wr.wr_id),
                        wr_op: bits(wr_opcode_code(wr.opcode) as u64),
                        signaled: wr.flags.signaled,
                        first_psn: bits(w.first_psn as u64),
                        next_psn: bits(psn_add(w.last_psn, 1) as u64),
                        status: bits(0),
                        laddr: bits(abuf + off),
                        len: bits(*len),
                        imm: bits(wr.imm_data as u64),
                        rewind: false,
                    }
                })
                .collect();
            let mut resp_frames: Vec<Vec<u8>> = Vec::new();
            for f in &reqs {
                resp_frames.extend(p.b.process(0, f));
            }
            // drop some ACKs (not the last response: the next one acknowledges them too), duplicate some
            let mut deliver: Vec<Vec<u8>> = Vec::new();
            let k = resp_frames.len();
            for (i, f) in resp_frames.iter().enumerate() {
                let Frame::Roce(rf) = parse_ethernet(f).unwrap() else { panic!() };
                if i + 1 < k && rf.packet.bth.opcode == RC_ACKNOWLEDGE && rng.gen_bool(0.4) {
                    coalesced += 1;
                    continue;
                }
                deliver.push(f.clone());
                if rng.gen_bool(0.12) {
                    deliver.push(f.clone());
                }
            }
            // and now and then a response after everything is complete: no pending WQE
            if rng.gen_bool(0.3) {
                deliver.push(deliver.last().unwrap().clone());
            }
            for f in &deliver {
                p.a.process(0, f);
            }
            let resps: Vec<Resp> = deliver.iter().map(|f| resp_of(f)).collect();
            rig.run(&recs, &resps);
            let want: Vec<WcSeen> = p.a.poll_cq(p.cq_a, 1000).iter().map(|wc| WcSeen::of_model(wc, cqn as u64)).collect();
            assert!(p.a.qp(qa).unwrap().sq.is_empty(), "the model completed the batch");
            let got: Vec<WcSeen> = std::mem::take(&mut rig.cqs);
            assert_eq!(got, want, "seq {s} mtu {mtu}: completions");
            ncq += got.len();
            for (a, len) in reads {
                let model = p.a.mem().read(a, len as usize).unwrap();
                let rtl: Vec<u8> = (0..len).map(|i| *rig.mem.get(&(a + i)).expect("read byte not scattered")).collect();
                assert_eq!(rtl, model, "seq {s}: READ of {len} bytes at {a:#x}");
            }
            for (a, b) in &rig.mem {
                assert_eq!(p.a.mem().read(*a, 1).unwrap()[0], *b, "scattered byte at {a:#x}");
            }
            nbytes += rig.mem.len();
            rig.mem.clear();
        }
        // a record that failed its local checks (here: a bad lkey), in order behind nothing
        let mut wr = SendWr::new(wid, WrOpcode::Send, vec![Sge { addr: abuf, length: 16, lkey: amr.lkey ^ 0x55 }]);
        wr.flags.signaled = false;
        let psn = p.a.qp(qa).unwrap().req.psn;
        p.a.post_send(qa, wr.clone()).unwrap();
        assert!(p.a.poll(0).is_empty());
        let want: Vec<WcSeen> = p.a.poll_cq(p.cq_a, 10).iter().map(|wc| WcSeen::of_model(wc, cqn as u64)).collect();
        assert_eq!(want.len(), 1);
        assert_eq!(want[0].status, wc_status_code(WcStatus::LocProtErr) as u64);
        let rec = ReqIssued {
            qpn: bits(qa as u64),
            wr_id: bits(wid),
            wr_op: bits(wr_opcode_code(WrOpcode::Send) as u64),
            signaled: false,
            first_psn: bits(psn as u64),
            next_psn: bits(psn as u64),
            status: bits(wc_status_code(WcStatus::LocProtErr) as u64),
            len: bits(16),
            ..Default::default()
        };
        rig.run(&[rec], &[]);
        assert_eq!(std::mem::take(&mut rig.cqs), want, "seq {s}: error record");
        let drops = p.a.counters().drop_count(DropReason::NoPendingWqe) + p.a.counters().drop_count(DropReason::StaleResponse) - drops0;
        assert_eq!(rig.counter(CNT_DROPPED) - dropped0, drops, "seq {s}: dropped responses");
        assert_eq!(rig.counter(CNT_ACKS) - racks0, p.a.counters().acks_received - acks0, "seq {s}: ACKs");
    }
    assert!(rig.full_stalls > 0, "no batch filled a QP's list");
    assert!(rig.fast > 20, "{} read responses took the fast path", rig.fast);
    assert_eq!(rig.counter(CNT_BAD), 0);
    assert_eq!(rig.counter(CNT_IMPLIED_NAKS), 0);
    assert!(rig.counter(CNT_ATOMIC_ACKS) > 10, "{} atomics", rig.counter(CNT_ATOMIC_ACKS));
    (ncq, nbytes, coalesced)
}

/// rxe `check_init_depth` needs the READ/atomic WQEs retired: the Completer counts them (`fin`, sent to
/// WQE Check with the window) once per WQE, whatever else happens. SENDs are not counted; a go-back-N,
/// whose records come again from WQE Check (the head's is dropped, the later ones are replaced), counts
/// nothing twice; a WQE that completes in error or flushed is counted; a CMD_WRITE_QP to RESET clears it.
#[test]
fn retired_reads_and_atomics_are_counted_once_each() {
    use rnic_driver::host::{WR_RDMA_READ, WR_SEND};
    let mut rig = Rig::new(13);
    let q = 0x24u32;
    // timeout 1: 2 units
    rig.set_qp(q, 0x53, 1, 7, 7);
    assert_eq!(rig.fin.get(&(q as u64)), Some(&0));
    let p = 0x300u32;
    let only = RC_RDMA_READ_RESPONSE_ONLY;
    let r1 = rec(q, 1, WR_RDMA_READ, p, 1, 64, true, WcStatus::Success);
    let r2 = rec(q, 2, WR_RDMA_READ, p + 1, 1, 64, true, WcStatus::Success);
    let s3 = rec(q, 3, WR_SEND, p + 2, 1, 8, true, WcStatus::Success);
    let r4 = rec(q, 4, WR_RDMA_READ, p + 3, 1, 64, true, WcStatus::Success);
    rig.run(&[r1, r2, s3, r4], &[read_resp(q, p, only, vec![1; 64])]);
    assert_eq!(rig.fin[&(q as u64)], 1, "the first READ retired");
    // silence: go-back-N to the second READ, its records come again (the rig plays WQE Check)
    rig.min_cycles = 12 * TIMER_TICK;
    rig.run(&[], &[]);
    rig.min_cycles = 0;
    assert_eq!(rig.rewinds.first().map(|r| (r.0, r.1)), Some((q as u64, 2)));
    assert_eq!(rig.fin[&(q as u64)], 1);
    rig.run(&[], &[read_resp(q, p + 1, only, vec![2; 64]), ack(q, p + 2, 0), read_resp(q, p + 3, only, vec![4; 64])]);
    let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, vec![(1, 0), (2, 0), (3, 0), (4, 0)]);
    assert_eq!(rig.fin[&(q as u64)], 3, "three READs, each counted once");
    // an error completion and a flush count too
    let r5 = rec(q, 5, WR_RDMA_READ, p + 4, 1, 64, true, WcStatus::Success);
    let r6 = rec(q, 6, WR_RDMA_READ, p + 5, 1, 64, true, WcStatus::Success);
    rig.run(&[r5, r6], &[ack(q, p + 4, 0x62)]);
    assert_eq!(rig.fin[&(q as u64)], 5);
    // RESET: from 0 again
    rig.set_qp_to(q, 0x53, 1, 7, 7, true);
    assert_eq!(rig.fin[&(q as u64)], 0);
}

#[test]
fn completer_matches_the_golden_requester() {
    let (ncq, nbytes, coalesced) = campaign(7, 12);
    assert!(ncq > 100, "{ncq} completions");
    assert!(nbytes > 10_000, "{nbytes} bytes scattered");
    assert!(coalesced > 10, "{coalesced} ACKs coalesced");
}

fn ack(qpn: u32, psn: u32, syndrome: u8) -> Resp {
    let mut h = RxHeader::default();
    h.opcode = bits(RC_ACKNOWLEDGE as u64);
    h.dest_qpn = bits(qpn as u64);
    h.psn = bits(psn as u64);
    h.ext = bits::<352>(syndrome as u64);
    Resp { h, ew: 1, pay: Vec::new() }
}

fn read_resp(qpn: u32, psn: u32, op: u8, pay: Vec<u8>) -> Resp {
    let mut r = ack(qpn, psn, AETH_TYPE_ACK | 0x1F);
    r.h.opcode = bits(op as u64);
    if op == RC_RDMA_READ_RESPONSE_MIDDLE {
        r.ew = 0;
        r.h.ext = bits::<352>(0xEE); // no AETH: whatever follows
    }
    r.pay = pay;
    r
}

fn rec(qpn: u32, wr_id: u64, op: u8, psn: u32, npkts: u32, len: u64, signaled: bool, status: WcStatus) -> ReqIssued {
    ReqIssued {
        qpn: bits(qpn as u64),
        wr_id: bits(wr_id),
        wr_op: bits(op as u64),
        signaled,
        idx: bits(wr_id & 0xFFFF),
        first_psn: bits(psn as u64),
        next_psn: bits(psn_add(psn, npkts) as u64),
        status: bits(wc_status_code(status) as u64),
        laddr: bits(0x1000 * (wr_id + 1)),
        len: bits(len),
        ..Default::default()
    }
}

/// Go-back-N (`docs/rxe-rules.md` section 4): a PSN-sequence NAK acknowledges everything before its PSN and rewinds
/// to the oldest incomplete WQE, resumed after the packets acknowledged; a repeat of it before progress
/// does not rewind again; the retransmit timer (4.096 us x 2^timeout) rewinds when nothing comes back;
/// retry_cnt counts both down and its end is RETRY_EXC_ERR with the later WQEs flushed; an RNR NAK waits
/// its encoded time before the rewind, and the end of rnr_retry is RNR_RETRY_EXC_ERR; NAK 0x61/0x62/0x63
/// complete the head WQE with their own status.
#[test]
fn go_back_n_on_nak_timeout_and_rnr() {
    use rnic_driver::host::{WR_RDMA_WRITE, WR_SEND};
    let st = |w: WcStatus| wc_status_code(w) as u64;
    let mut rig = Rig::new(5);
    let q = 0x21u32;
    // timeout 1: 2 units (2,640 cycles); retry_cnt 2
    rig.set_qp(q, 0x50, 1, 2, 7);
    let p = 0x100u32;
    let w1 = rec(q, 1, WR_SEND, p, 3, 3000, true, WcStatus::Success);
    let w2 = rec(q, 2, WR_RDMA_WRITE, p + 3, 1, 100, true, WcStatus::Success);
    rig.run(&[w1, w2], &[ack(q, p, 0), ack(q, p + 2, 0x60)]);
    assert_eq!(rig.rewinds, vec![(q as u64, 1, (p + 2) as u64, 2)], "back to W1 after its 2 acknowledged packets");
    assert!(rig.cqs.is_empty());
    rig.run(&[], &[ack(q, p + 2, 0x60)]);
    assert_eq!(rig.rewinds.len(), 1, "no second go-back-N for the same NAK before progress");
    // silence: one timeout (retry_cnt 1 -> 0), then the next one ends it
    rig.min_cycles = 12 * TIMER_TICK;
    rig.run(&[], &[]);
    assert_eq!(rig.rewinds.len(), 2);
    assert_eq!(rig.rewinds[1], (q as u64, 1, (p + 2) as u64, 2));
    assert_eq!((rig.counter(CNT_RETRIES), rig.counter(CNT_TIMEOUTS)), (2, 1));
    let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, vec![(1, st(WcStatus::RetryExcErr)), (2, st(WcStatus::WrFlushErr))]);
    assert_eq!(rig.qerrs, vec![q as u64], "WQE Check is told the QP is in error, once");
    rig.cqs.clear();
    rig.min_cycles = 0;

    // RNR: no retransmit timer (timeout 0), rnr_retry 1; RNR NAK timer code 1 (0.01 ms: 3 units)
    let q2 = 0x22u32;
    rig.set_qp(q2, 0x51, 0, 7, 1);
    let w3 = rec(q2, 3, WR_SEND, 0x500, 1, 10, true, WcStatus::Success);
    // the RNR NAK, then a PSN-sequence NAK for the packet behind it (as rxe sends): it must not cut the wait
    rig.run(&[w3], &[ack(q2, 0x500, 0x21), ack(q2, 0x500, 0x60)]);
    assert_eq!(rig.rewinds.len(), 2, "the RNR wait has not passed yet");
    rig.min_cycles = 6 * TIMER_TICK;
    rig.run(&[], &[]);
    assert_eq!(rig.rewinds[2..], [(q2 as u64, 3, 0x500, 0)], "after the RNR wait: back to W3");
    rig.min_cycles = 0;
    rig.run(&[], &[ack(q2, 0x500, 0x21)]);
    let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, vec![(3, st(WcStatus::RnrRetryExcErr))]);
    assert_eq!(rig.qerrs, vec![q as u64, q2 as u64]);
    rig.cqs.clear();

    // NAK codes: invalid request, remote access error, remote operational error (and an unknown code)
    for (i, (syn, want)) in [(0x61u8, WcStatus::RemInvReqErr), (0x62, WcStatus::RemAccessErr), (0x63, WcStatus::RemOpErr), (0x67, WcStatus::RemOpErr)]
        .into_iter()
        .enumerate()
    {
        let qn = 0x30 + i as u32;
        rig.set_cq(qn, 0x52);
        let a = rec(qn, 10, WR_RDMA_WRITE, 0x900, 1, 64, false, WcStatus::Success);
        let b = rec(qn, 11, WR_SEND, 0x901, 1, 64, false, WcStatus::Success);
        rig.run(&[a, b], &[ack(qn, 0x900, syn)]);
        let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got, vec![(10, st(want)), (11, st(WcStatus::WrFlushErr))], "NAK {syn:#x}");
        assert_eq!(rig.qerrs.last(), Some(&(qn as u64)), "NAK {syn:#x}");
        rig.cqs.clear();
    }
    assert_eq!(rig.rewinds.len(), 3);
    assert_eq!(rig.qerrs.len(), 6);
}

/// rxe `COMPST_EXIT`: every response, even one dropped as stale, pushes the retransmit timer back while
/// PSNs are outstanding. A READ whose first response was lost, followed by its later responses one every
/// 2,000 cycles for four timeout periods: no timeout (each is dropped, none is progress); then silence:
/// exactly one timeout, from the first missing PSN. Fails with the push-back removed (a timeout after
/// the first 5,280 cycles, with the responses still coming).
#[test]
fn stale_responses_push_the_retransmit_timer_back() {
    use rnic_driver::host::WR_RDMA_READ;
    let mut rig = Rig::new(11);
    let q = 0x23u32;
    // timeout 2: 4 units (5,280 cycles)
    rig.set_qp(q, 0x53, 2, 7, 7);
    let p = 0x300u32;
    // a READ of 24 packets at MTU 256
    let w = rec(q, 1, WR_RDMA_READ, p, 24, 24 * 256, true, WcStatus::Success);
    rig.run(&[w], &[]);
    for i in 0..12u32 {
        rig.min_cycles = 2_000;
        rig.run(&[], &[read_resp(q, p + 1 + i, RC_RDMA_READ_RESPONSE_MIDDLE, vec![0xA5; 256])]);
    }
    rig.min_cycles = 0;
    assert_eq!(rig.counter(CNT_DROPPED), 12, "each later response is dropped (its first is missing)");
    assert!(rig.rewinds.is_empty(), "no go-back-N while responses keep coming: {:?}", rig.rewinds);
    assert_eq!(rig.counter(CNT_TIMEOUTS), 0);
    // (one period and a quarter: the rewind re-arms the timer, whose next expiry is after this)
    rig.min_cycles = 5 * TIMER_TICK;
    rig.run(&[], &[]);
    assert_eq!(rig.rewinds, vec![(q as u64, 1, p as u64, 0)], "silence: back to the READ's first PSN");
    assert_eq!(rig.counter(CNT_TIMEOUTS), 1);
}

/// The Requester reports a WQE after its last packet, so an ACK of the WQE's first packets can come while
/// the QP has nothing pending here. It counts once the record comes (rxe's completer knew the WQE before it
/// was sent): the QP's window starts from it (a 1 MiB WRITE otherwise waited for its last ACK before the
/// next WQE could start). Not an ACK behind the WQE, nor one inside a READ's PSNs (its responses start at
/// its first PSN).
#[test]
fn an_ack_before_its_wqes_record_counts_for_the_window() {
    use rnic_driver::host::{WR_RDMA_READ, WR_RDMA_WRITE};
    let mut rig = Rig::new(23);
    let q = 0x31u32;
    rig.set_cq(q, 0x41);
    let win = |rig: &Rig| *rig.wins.iter().rev().find(|w| w.0 == q as u64).expect("a window write");
    // a 200-packet WRITE across the PSN wrap; the ACK of its first 40 packets comes before its record
    let p = 0xFF_FFC0u32;
    rig.run(&[], &[ack(q, psn_add(p, 39), 0x1F)]);
    assert_eq!(rig.counter(CNT_DROPPED), 1, "nothing pending: counted as dropped");
    rig.run(&[rec(q, 1, WR_RDMA_WRITE, p, 200, 200 * 256, true, WcStatus::Success)], &[]);
    assert_eq!(win(&rig), (q as u64, true, psn_add(p, 40 + 128) as u64), "the window starts after the ACKed 40");
    // an ACK below the one taken is stale; the last one completes the WRITE
    rig.run(&[], &[ack(q, psn_add(p, 20), 0x1F), ack(q, psn_add(p, 199), 0x1F)]);
    assert_eq!(rig.counter(CNT_DROPPED), 2, "the older ACK is stale");
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0)]);
    assert_eq!(win(&rig), (q as u64, false, psn_add(p, 200 + 128) as u64));
    // an ACK behind the next WRITE (a late duplicate): its window starts at its first PSN
    let p2 = psn_add(p, 200);
    rig.run(&[], &[ack(q, psn_add(p, 150), 0x1F)]);
    rig.run(&[rec(q, 2, WR_RDMA_WRITE, p2, 10, 10 * 256, true, WcStatus::Success)], &[]);
    assert_eq!(win(&rig), (q as u64, true, psn_add(p2, 128) as u64), "a stale ACK does not count");
    rig.run(&[], &[ack(q, psn_add(p2, 9), 0x1F)]);
    // an ACK inside a READ's PSNs before its record: the READ's responses still count from its first PSN
    let p3 = psn_add(p2, 10);
    rig.run(&[], &[ack(q, psn_add(p3, 1), 0x1F)]);
    rig.run(&[rec(q, 3, WR_RDMA_READ, p3, 4, 4 * 256, true, WcStatus::Success)], &[]);
    assert_eq!(win(&rig), (q as u64, true, psn_add(p3, 128) as u64), "not for a READ");
    rig.run(
        &[],
        &[
            read_resp(q, p3, RC_RDMA_READ_RESPONSE_FIRST, vec![1; 256]),
            read_resp(q, psn_add(p3, 1), RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
            read_resp(q, psn_add(p3, 2), RC_RDMA_READ_RESPONSE_MIDDLE, vec![3; 256]),
            read_resp(q, psn_add(p3, 3), RC_RDMA_READ_RESPONSE_LAST, vec![4; 256]),
        ],
    );
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0), (2, 0), (3, 0)]);
    let a = 0x1000 * 4;
    assert!((0..1024u64).all(|i| rig.mem.get(&(a + i)) == Some(&(1 + (i / 256) as u8))), "the READ's data");
}

/// A PSN-sequence NAK for a WQE that is still being sent (its record comes after its last packet) finds the
/// QP's list empty. It acknowledges what is before its PSN at once (the window moves on), and the go-back-N
/// it asks for starts when the WQE's record comes, from the NAK's PSN inside the WQE, without waiting for
/// the retransmit timer (before, the NAK was dropped as "nothing pending" and only a timeout recovered:
/// against rxe, 88 timeouts where the golden model had 6, `ib_write_bw` at 2 % loss). A NAK older than
/// `comp_psn` with nothing pending stays a stale response.
#[test]
fn a_nak_before_its_wqes_record_goes_back_when_the_record_comes() {
    use rnic_driver::host::WR_RDMA_WRITE;
    let mut rig = Rig::new(29);
    let q = 0x32u32;
    // no retransmit timer: only the NAK can start the go-back-N
    rig.set_qp(q, 0x52, 0, 7, 7);
    let win = |rig: &Rig| *rig.wins.iter().rev().find(|w| w.0 == q as u64).expect("a window write");
    let p = 0xFF_FFF0u32;
    rig.run(&[], &[ack(q, psn_add(p, 16), 0x60)]);
    assert_eq!(rig.counter(CNT_DROPPED), 0, "the NAK is not dropped");
    assert_eq!(win(&rig), (q as u64, false, psn_add(p, 16 + 128) as u64), "acknowledged up to the NAK's PSN");
    assert!(rig.rewinds.is_empty(), "nothing to rewind to before the record");
    rig.run(&[rec(q, 1, WR_RDMA_WRITE, p, 64, 64 * 256, true, WcStatus::Success)], &[]);
    assert_eq!(rig.rewinds, vec![(q as u64, 1, psn_add(p, 16) as u64, 16)], "back to the NAK's PSN inside the WRITE");
    assert_eq!((rig.counter(CNT_RETRIES), rig.counter(CNT_TIMEOUTS)), (1, 0));
    rig.run(&[], &[ack(q, psn_add(p, 63), 0x1F)]);
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0)]);
    // a stale NAK with nothing pending: dropped, no go-back-N for the next WRITE
    rig.run(&[], &[ack(q, psn_add(p, 20), 0x60)]);
    assert_eq!(rig.counter(CNT_DROPPED), 1);
    rig.run(&[rec(q, 2, WR_RDMA_WRITE, psn_add(p, 64), 2, 512, true, WcStatus::Success)], &[ack(q, psn_add(p, 65), 0x1F)]);
    assert_eq!(rig.rewinds.len(), 1);
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0), (2, 0)]);
}

/// A QP's first WQE starting high in the PSN space (sq_psn 0xFFFFF0, its 40 packets across the wrap), a NAK
/// at 0xFFFFFB before the WQE's record. The QP's comp_psn is its sq_psn from CMD_WRITE_QP_REQ (rxe: comp.psn
/// = sq_psn at RTS), so the NAK is taken and the go-back-N starts at 0xFFFFFB (skip 11). Before, comp_psn
/// was 0: the NAK looked stale, the record then took 0 for an ACK already covering 16 packets, and every
/// retransmission resumed at PSN 0 while the peer waited for 0xFFFFFB (a requester campaign at MTU 256 hung).
#[test]
fn a_first_wqe_across_the_psn_wrap_goes_back_to_the_naks_psn() {
    use rnic_driver::host::WR_RDMA_WRITE;
    let mut rig = Rig::new(31);
    let q = 0x33u32;
    rig.set_qp(q, 0x53, 0, 7, 7);
    let p = 0xFF_FFF0u32;
    rig.set_sq_psn(q, p);
    rig.run(&[], &[ack(q, psn_add(p, 11), 0x60)]);
    assert_eq!(rig.counter(CNT_DROPPED), 0, "the NAK is not stale");
    rig.run(&[rec(q, 1, WR_RDMA_WRITE, p, 40, 40 * 256, true, WcStatus::Success)], &[]);
    assert_eq!(rig.rewinds, vec![(q as u64, 1, psn_add(p, 11) as u64, 11)], "back to the NAK's PSN");
    rig.run(&[], &[ack(q, psn_add(p, 39), 0x1F)]);
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0)]);
    // without the sq_psn, the same NAK finds comp_psn 0 ahead of it: the failure this guards against
    let mut old = Rig::new(31);
    old.set_qp(q, 0x53, 0, 7, 7);
    old.run(&[], &[ack(q, psn_add(p, 11), 0x60)]);
    assert_eq!(old.counter(CNT_DROPPED), 1, "stale against comp_psn 0");
}

/// ATOMIC_ACKNOWLEDGE: the original value (big-endian in AtomicAckETH) lands in the WQE's local buffer in
/// host byte order, 8 bytes and no more, and the atomic completes with its own WC opcode after the WRITE
/// before it; an atomic ACK for a WRITE is a bad response.
#[test]
fn an_atomic_ack_writes_the_original_value_and_completes_the_atomic() {
    use rnic_driver::host::{WC_COMP_SWAP, WC_FETCH_ADD, WC_RDMA_WRITE, WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD, WR_RDMA_WRITE};
    let atomic_ack = |qpn: u32, psn: u32, orig: u64| {
        let mut r = ack(qpn, psn, AETH_TYPE_ACK | 0x1F);
        r.h.opcode = bits(RC_ATOMIC_ACKNOWLEDGE as u64);
        let mut ext = bits::<352>(u64::from(AETH_TYPE_ACK | 0x1F));
        for (j, b) in orig.to_be_bytes().iter().enumerate() {
            ext.set_bits::<8>(8 * (4 + j), bits::<8>(*b as u64));
        }
        r.h.ext = ext;
        r.ew = 3;
        r
    };
    let mut rig = Rig::new(9);
    let q = 0x44u32;
    rig.set_cq(q, 0x60);
    let p = 0xFF_FFFE;
    let w = rec(q, 1, WR_RDMA_WRITE, p, 1, 64, true, WcStatus::Success);
    let f = rec(q, 2, WR_ATOMIC_FETCH_AND_ADD, psn_add(p, 1), 1, 8, true, WcStatus::Success);
    let c = rec(q, 3, WR_ATOMIC_CMP_AND_SWP, psn_add(p, 2), 1, 8, true, WcStatus::Success);
    let orig_f = 0x0102_0304_0506_0708u64;
    let orig_c = 0xF0E0_D0C0_B0A0_9080u64;
    rig.run(&[w, f, c], &[ack(q, p, 0x1F), atomic_ack(q, psn_add(p, 1), orig_f), atomic_ack(q, psn_add(p, 2), orig_c)]);
    let got: Vec<(u64, u64, u64, u64)> = rig.cqs.iter().map(|x| (x.wr_id, x.status, x.opcode, x.byte_len)).collect();
    assert_eq!(got, vec![(1, 0, WC_RDMA_WRITE as u64, 64), (2, 0, WC_FETCH_ADD as u64, 8), (3, 0, WC_COMP_SWAP as u64, 8)]);
    for (wr, orig) in [(2u64, orig_f), (3, orig_c)] {
        let a = 0x1000 * (wr + 1);
        let m: Vec<u8> = (0..8).map(|i| *rig.mem.get(&(a + i)).expect("scattered")).collect();
        assert_eq!(m, orig.to_le_bytes(), "WQE {wr}: the original value in host byte order");
        assert!(!rig.mem.contains_key(&(a + 8)) && !rig.mem.contains_key(&(a - 1)), "8 bytes, no more");
    }
    assert_eq!(rig.counter(CNT_ATOMIC_ACKS), 2);
    // an ATOMIC_ACKNOWLEDGE for a WRITE: BAD_RESP
    rig.cqs.clear();
    let q2 = 0x45u32;
    rig.set_cq(q2, 0x61);
    rig.run(&[rec(q2, 7, WR_RDMA_WRITE, 0x10, 1, 64, true, WcStatus::Success)], &[atomic_ack(q2, 0x10, 5)]);
    assert_eq!(rig.cqs.iter().map(|x| (x.wr_id, x.status)).collect::<Vec<_>>(), vec![(7, wc_status_code(WcStatus::BadRespErr) as u64)]);
}

/// The timer scan never passes an expired timer by: 16 QPs with consecutive QPNs, each with an
/// unacknowledged WQE and no response ever, all time out and go back (the event machine is busy for a few
/// cycles after each report; a scan that skipped QPs while it was busy fell into step with it and never
/// reported some of them: found by `rnic campaign --role atomics`, QPs hung with lost ACKs).
#[test]
fn every_expired_timer_is_served() {
    use rnic_driver::host::WR_RDMA_WRITE;
    let mut rig = Rig::new(17);
    let qs: Vec<u32> = (0x40..0x50).collect();
    for &q in &qs {
        rig.set_qp(q, 0x70, 1, 7, 7);
    }
    let recs: Vec<ReqIssued> = qs.iter().map(|&q| rec(q, q as u64, WR_RDMA_WRITE, 0x100, 1, 64, true, WcStatus::Success)).collect();
    rig.min_cycles = 40 * TIMER_TICK;
    rig.run(&recs, &[]);
    let mut back: Vec<u64> = rig.rewinds.iter().map(|r| r.0).collect();
    back.sort_unstable();
    back.dedup();
    assert_eq!(back, qs.iter().map(|&q| q as u64).collect::<Vec<_>>(), "every QP went back after its timeout");
    assert!(rig.counter(CNT_TIMEOUTS) >= 32, "{} timeouts", rig.counter(CNT_TIMEOUTS));
}

/// The head WQE fails its local checks when WQE Check reads it again after a rewind (its MR deregistered
/// since it was first sent): it completes with that status, the QP goes to error and the WQE behind it is
/// flushed, instead of the QP waiting for responses that cannot come (a hang before the fix: the record
/// was dropped as "the head sent again").
#[test]
fn a_head_wqe_that_fails_when_sent_again_completes_with_its_error() {
    use rnic_driver::host::{WR_RDMA_WRITE, WR_SEND};
    let mut rig = Rig::new(5);
    let q = 0x21;
    rig.set_qp(q, 0x44, 1, 7, 7);
    rig.fail_again = Some((q as u64, 1, WcStatus::LocProtErr));
    let w1 = ReqIssued { idx: bits(1), ..rec(q, 1, WR_RDMA_WRITE, 0x10, 2, 2000, true, WcStatus::Success) };
    let w2 = ReqIssued { idx: bits(2), ..rec(q, 2, WR_SEND, 0x12, 1, 10, false, WcStatus::Success) };
    // no response ever: the retransmit timer sends the QP back to W1, which fails this time
    rig.min_cycles = 40 * TIMER_TICK;
    rig.run(&[w1, w2], &[]);
    assert_eq!(rig.rewinds.first().map(|r| (r.0, r.1)), Some((q as u64, 1)), "back to W1 after the timeout");
    let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
    let st = |w: WcStatus| wc_status_code(w) as u64;
    assert_eq!(got, vec![(1, st(WcStatus::LocProtErr)), (2, st(WcStatus::WrFlushErr))]);
    assert_eq!(rig.qerrs, vec![q as u64], "the QP goes to error");
    assert_eq!(rig.rewinds.len(), 1, "no more go-back-N on a QP in error");
}

#[test]
fn stale_unmatched_errors_in_order_and_bad_responses() {
    use rnic_driver::host::{WC_RDMA_READ, WC_SEND, WR_RDMA_READ, WR_SEND};
    let mut rig = Rig::new(3);
    let q = 0x15;
    rig.set_cq(q, 0x42);
    let p0 = 0xFF_FFFE;
    // a response for a QP with nothing pending
    rig.run(&[], &[ack(q, p0, 0)]);
    assert_eq!(rig.counter(CNT_DROPPED), 1);
    assert_eq!(rig.counter(CNT_ACKS), 1);
    assert!(rig.cqs.is_empty());
    // W1 SEND (psn p0), E2 failed locally (unsignaled), W3 SEND 2 packets (p0+1, p0+2; wraps)
    let w1 = rec(q, 1, WR_SEND, p0, 1, 10, true, WcStatus::Success);
    let e2 = rec(q, 2, WR_SEND, psn_add(p0, 1), 0, 20, false, WcStatus::LocProtErr);
    let w3 = rec(q, 3, WR_SEND, psn_add(p0, 1), 2, 3000, false, WcStatus::Success);
    rig.run(&[w1, e2, w3], &[]);
    assert!(rig.cqs.is_empty(), "E2 waits behind W1");
    // a PSN-sequence NAK at W1's PSN: go back to W1 (the WQEs are sent again: nothing completes); an RNR
    // NAK: a wait (655 ms: longer than this test) before the next go-back-N
    // NAK (the RNR NAK once the rewind is through WQE Check: while a rewind is on its way, responses are
    // dropped)
    rig.run(&[], &[ack(q, p0, 0x60)]);
    rig.run(&[], &[ack(q, p0, 0x20)]);
    assert_eq!((rig.counter(CNT_NAKS), rig.counter(CNT_RNR_NAKS)), (1, 1));
    assert_eq!(rig.counter(CNT_DROPPED), 1);
    assert_eq!(rig.rewinds, vec![(q as u64, 1, p0 as u64, 0)]);
    assert!(rig.cqs.is_empty());
    // ACK of W1's PSN: W1 completes, E2 follows in order; a duplicate of it is stale
    rig.run(&[], &[ack(q, p0, 0), ack(q, p0, 0)]);
    let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, vec![(1, 0), (2, wc_status_code(WcStatus::LocProtErr) as u64)]);
    assert_eq!(rig.cqs[1].byte_len, 20);
    assert_eq!(rig.cqs[1].opcode, WC_SEND as u64);
    assert_eq!(rig.cqs[0].cqn, 0x42);
    rig.cqs.clear();
    assert_eq!(rig.counter(CNT_DROPPED), 2);
    // a mid-message ACK of W3 advances comp_psn; an ACK below it is stale; the last ACK completes W3
    // silently (unsignaled)
    rig.run(&[], &[ack(q, psn_add(p0, 1), 0), ack(q, p0, 0), ack(q, psn_add(p0, 2), 0)]);
    assert!(rig.cqs.is_empty());
    assert_eq!(rig.counter(CNT_DROPPED), 3);
    // R4 READ of 300 bytes (2 packets at MTU 256), then W5: a MIDDLE before FIRST is a bad response: R4
    // BAD_RESP, W5 flushed, later responses and records of the QP flushed/dropped
    let p4 = psn_add(p0, 3);
    let r4 = rec(q, 4, WR_RDMA_READ, p4, 2, 300, true, WcStatus::Success);
    let w5 = rec(q, 5, WR_SEND, psn_add(p4, 2), 1, 8, false, WcStatus::Success);
    // first a later response of the READ whose FIRST is missing: dropped; an ACK beyond it: implied NAK
    rig.run(&[r4, w5], &[read_resp(q, psn_add(p4, 1), RC_RDMA_READ_RESPONSE_LAST, vec![7; 44])]);
    rig.run(&[], &[ack(q, psn_add(p4, 2), 0)]);
    assert_eq!(rig.counter(CNT_DROPPED), 4);
    assert_eq!(rig.counter(CNT_IMPLIED_NAKS), 1);
    assert!(rig.mem.is_empty(), "nothing scattered from a dropped response");
    rig.run(&[], &[read_resp(q, p4, RC_RDMA_READ_RESPONSE_MIDDLE, vec![9; 256])]);
    let got: Vec<(u64, u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
    assert_eq!(
        got,
        vec![
            (4, wc_status_code(WcStatus::BadRespErr) as u64, WC_RDMA_READ as u64),
            (5, wc_status_code(WcStatus::WrFlushErr) as u64, WC_SEND as u64)
        ]
    );
    assert_eq!(rig.counter(CNT_BAD), 1);
    rig.cqs.clear();
    let w6 = rec(q, 6, WR_SEND, psn_add(p4, 3), 1, 8, true, WcStatus::Success);
    rig.run(&[w6], &[ack(q, psn_add(p4, 3), 0)]);
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(6, wc_status_code(WcStatus::WrFlushErr) as u64)]);
    rig.cqs.clear();
    assert_eq!(rig.counter(CNT_DROPPED), 5);
    // CMD_WRITE_QP clears the error: a READ works again; a payload beyond its length is LOC_LEN_ERR
    rig.set_cq(q, 0x43);
    let p7 = 0x1234;
    let r7 = rec(q, 7, WR_RDMA_READ, p7, 2, 300, true, WcStatus::Success);
    rig.run(
        &[r7],
        &[
            read_resp(q, p7, RC_RDMA_READ_RESPONSE_FIRST, (0..=255).collect()),
            read_resp(q, psn_add(p7, 1), RC_RDMA_READ_RESPONSE_LAST, (0..44).map(|i| 100 + i).collect()),
        ],
    );
    assert_eq!(rig.cqs.len(), 1);
    assert_eq!((rig.cqs[0].wr_id, rig.cqs[0].status, rig.cqs[0].byte_len, rig.cqs[0].cqn), (7, 0, 300, 0x43));
    let want: Vec<u8> = (0..=255u8).chain((0..44).map(|i| 100 + i)).collect();
    let got: Vec<u8> = (0..300).map(|i| rig.mem[&(0x8000 + i)]).collect();
    assert_eq!(got, want);
    assert_eq!(rig.mem.len(), 300);
    rig.cqs.clear();
    let r8 = rec(q, 8, WR_RDMA_READ, 0x2000, 1, 100, false, WcStatus::Success);
    rig.run(&[r8], &[read_resp(q, 0x2000, RC_RDMA_READ_RESPONSE_ONLY, vec![1; 101])]);
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(8, wc_status_code(WcStatus::LocLenErr) as u64)]);
    assert_eq!(rig.mem.len(), 300, "nothing placed from the over-long response");
}

/// The fast path's edges: a LAST longer than the room left (LOC_LEN_ERR), a MIDDLE past the READ's last
/// PSN (implied NAK), a duplicate (stale), and another QP's response in between (the QP is reloaded).
#[test]
fn fast_path_edges_fall_back_to_the_rules() {
    use rnic_driver::host::WR_RDMA_READ;
    let mut rig = Rig::new(5);
    let (q, q2) = (0x31, 0x32);
    rig.set_cq(q, 0x9);
    let p = 0xFF_FFFF;
    // R1: 3 packets, 600 bytes; FIRST and MIDDLE land, the LAST carries 100 > 88 bytes left
    let r1 = rec(q, 1, WR_RDMA_READ, p, 3, 600, true, WcStatus::Success);
    rig.run(
        &[r1],
        &[
            read_resp(q, p, RC_RDMA_READ_RESPONSE_FIRST, vec![1; 256]),
            read_resp(q, psn_add(p, 1), RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
            read_resp(q, psn_add(p, 2), RC_RDMA_READ_RESPONSE_LAST, vec![3; 100]),
        ],
    );
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, wc_status_code(WcStatus::LocLenErr) as u64)]);
    assert_eq!(rig.mem.len(), 512);
    assert!((0..512).all(|i| rig.mem[&(0x2000 + i)] == 1 + (i / 256) as u8));
    assert_eq!(rig.fast, 1, "the MIDDLE took the fast path");
    rig.cqs.clear();
    rig.mem.clear();
    // R2 (after CMD_WRITE_QP): 3 packets, 1000 bytes; FIRST, another QP's ACK (no pending WQE), MIDDLE (slow:
    // the QP was reloaded), LAST (fast), the LAST again (no pending WQE)
    rig.set_cq(q, 0x9);
    let p2 = 0x100;
    let r2 = rec(q, 2, WR_RDMA_READ, p2, 3, 1000, true, WcStatus::Success);
    let dropped = rig.counter(CNT_DROPPED);
    rig.run(
        &[r2],
        &[
            read_resp(q, p2, RC_RDMA_READ_RESPONSE_FIRST, vec![4; 256]),
            ack(q2, 7, 0),
            read_resp(q, p2 + 1, RC_RDMA_READ_RESPONSE_MIDDLE, vec![5; 256]),
            read_resp(q, p2 + 2, RC_RDMA_READ_RESPONSE_LAST, vec![9; 488]),
            read_resp(q, p2 + 2, RC_RDMA_READ_RESPONSE_LAST, vec![9; 488]),
        ],
    );
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect::<Vec<_>>(), vec![(2, 0, 1000)]);
    let want: Vec<u8> = [4u8, 5].iter().flat_map(|&b| vec![b; 256]).chain(vec![9; 488]).collect();
    assert_eq!((0..1000).map(|i| rig.mem[&(0x3000 + i)]).collect::<Vec<u8>>(), want);
    assert_eq!(rig.counter(CNT_DROPPED) - dropped, 2, "no pending WQE: q2's ACK, the LAST again");
    assert_eq!(rig.fast, 2, "the LAST took the fast path");
    rig.cqs.clear();
    rig.mem.clear();
    // R3: 2 packets, 1000 bytes; FIRST, a MIDDLE at its last PSN (fast), a MIDDLE past it (implied NAK), the
    // MIDDLE again (stale)
    let p3 = 0x200;
    let r3 = rec(q, 3, WR_RDMA_READ, p3, 2, 1000, true, WcStatus::Success);
    rig.run(
        &[r3],
        &[
            read_resp(q, p3, RC_RDMA_READ_RESPONSE_FIRST, vec![1; 256]),
            read_resp(q, p3 + 1, RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
            read_resp(q, p3 + 2, RC_RDMA_READ_RESPONSE_MIDDLE, vec![3; 256]),
            read_resp(q, p3 + 1, RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
        ],
    );
    assert!(rig.cqs.is_empty());
    assert_eq!(rig.counter(CNT_IMPLIED_NAKS), 1);
    assert_eq!(rig.counter(CNT_DROPPED) - dropped, 3, "and the stale MIDDLE");
    assert_eq!(rig.fast, 3, "the in-order MIDDLE took the fast path");
    assert_eq!(rig.mem.len(), 512);
}

mod rate;

/// UC (rxe completes UC WQEs on transmit): each WQE completes as its record comes, signaled ones with
/// SUCCESS, a record that failed its local checks with its status; nothing waits for a response, no timer
/// ever rewinds the QP, however long the silence.
#[test]
fn uc_wqes_complete_as_their_records_come() {
    use rnic_driver::host::{WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND};
    let mut rig = Rig::new(17);
    let q = 0x31u32;
    rig.u.cqw_uc.next = true;
    rig.set_qp_to(q, 0x44, 1, 7, 7, false);
    rig.u.cqw_uc.next = false;
    let p = 0xFF_FFFEu32;
    let s1 = rec(q, 1, WR_SEND, p, 3, 700, true, WcStatus::Success);
    let w2 = rec(q, 2, WR_RDMA_WRITE, psn_add(p, 3), 1, 8, false, WcStatus::Success);
    let w3 = rec(q, 3, WR_RDMA_WRITE_WITH_IMM, psn_add(p, 4), 2, 300, true, WcStatus::Success);
    let e4 = rec(q, 4, WR_SEND, psn_add(p, 6), 0, 8, true, WcStatus::LocQpOpErr);
    rig.min_cycles = 12 * TIMER_TICK;
    rig.run(&[s1, w2, w3, e4], &[]);
    rig.min_cycles = 0;
    let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, vec![(1, 0), (3, 0), (4, wc_status_code(WcStatus::LocQpOpErr) as u64)]);
    assert!(rig.rewinds.is_empty(), "no go-back-N on UC: {:?}", rig.rewinds);
    assert_eq!((rig.counter(CNT_RETRIES), rig.counter(CNT_TIMEOUTS)), (0, 0));
}

/// A LOCAL_INV's record (no PSNs: WQE Check did the invalidate) completes at the head of its QP's list, in
/// order, with success and WC opcode LOCAL_INV, without a response: on an empty list at once (and it starts no
/// retransmit timer that could rewind), behind a WRITE when that WRITE's ACK retires it; the same ACK goes on
/// to retire the WRITE behind it (rxe `get_wqe`: a `wqe_state_done` WQE, then the next with the packet).
#[test]
fn a_local_invalidate_completes_in_order_without_a_response() {
    use rnic_driver::host::{WC_LOCAL_INV, WC_RDMA_WRITE, WR_LOCAL_INV, WR_RDMA_WRITE};
    let mut rig = Rig::new(31);
    let q = 0x21u32;
    rig.set_qp(q, 0x40, 1, 7, 7);
    let p = 0xFF_FFFEu32;
    rig.run(&[rec(q, 1, WR_LOCAL_INV, p, 0, 0, true, WcStatus::Success)], &[]);
    assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect::<Vec<_>>(), vec![(1, 0, WC_LOCAL_INV as u64)]);
    rig.run(
        &[
            rec(q, 2, WR_RDMA_WRITE, p, 1, 256, true, WcStatus::Success),
            rec(q, 3, WR_LOCAL_INV, psn_add(p, 1), 0, 0, true, WcStatus::Success),
            rec(q, 4, WR_LOCAL_INV, psn_add(p, 1), 0, 0, false, WcStatus::Success),
            rec(q, 5, WR_RDMA_WRITE, psn_add(p, 1), 2, 512, true, WcStatus::Success),
        ],
        &[],
    );
    assert_eq!(rig.cqs.len(), 1, "the LOCAL_INVs wait behind the WRITE: {:?}", rig.cqs);
    rig.run(&[], &[ack(q, psn_add(p, 2), 0x1F)]);
    assert_eq!(
        rig.cqs.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect::<Vec<_>>(),
        vec![(1, 0, WC_LOCAL_INV as u64), (2, 0, WC_RDMA_WRITE as u64), (3, 0, WC_LOCAL_INV as u64), (5, 0, WC_RDMA_WRITE as u64)],
        "one coalescing ACK retires the WRITE, the LOCAL_INVs (the unsignaled one silently) and the WRITE behind"
    );
    assert!(rig.rewinds.is_empty() && rig.counter(CNT_TIMEOUTS) == 0, "no retransmission for a local operation");
}
