//! Fault campaign: two model RNICs over a lossy link (1% drop, 0.5% duplicate, 0.5% reorder, 0.1% corrupt each
//! way), a few thousand mixed messages over several QPs. Everything completes with success, bytes match, the
//! counters show the recovery machinery at work, and fetch-and-add is exactly-once.

use testbench::model::harness::{ConnOpts, Pair};
use testbench::model::link::SplitMix64;
use testbench::model::*;

fn faulty() -> LinkConfig {
    LinkConfig {
        drop: 0.01,
        duplicate: 0.005,
        reorder: 0.005,
        corrupt: 0.001,
        latency_ns: 2_000,
        reorder_delay_ns: 6_000,
        ns_per_byte: 0,
        gbps: 0.0,
    }
}

struct Expect {
    qp: usize,
    wr_id: u64,
    op: WrOpcode,
    len: usize,
    /// Where the data must end up (device b for SEND/WRITE, device a for READ) and what it must be.
    dst_on_b: bool,
    dst: u64,
    data: Vec<u8>,
}

#[test]
fn mixed_traffic_over_a_lossy_link() {
    let mut p = Pair::new(faulty(), 0xC0FFEE);
    let mut rng = SplitMix64::new(42);
    let nqp = 4;
    let mut qps = Vec::new();
    for i in 0..nqp {
        let o = ConnOpts {
            path_mtu: [256, 1024, 4096, 1024][i],
            timeout: 6, // 262 us, well above the round trip
            retry_cnt: 7,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
            ..Default::default()
        };
        qps.push(p.connect(&o, 0xFFFF00 + i as u32 * 7, 100 * i as u32));
    }
    let (pd_a, pd_b) = (p.pd_a, p.pd_b);
    // The fetch-and-add counter lives on b.
    let counter_va = p.b.alloc(8);
    let counter = p.b.reg_mr(pd_b, counter_va, 8, AccessFlags::ALL).unwrap();
    let mut expects = Vec::new();
    let mut faa = Vec::new();
    let mut recv_expect: Vec<Vec<(u64, usize, bool)>> = vec![Vec::new(); nqp];
    let n_msgs = 2400;
    for m in 0..n_msgs {
        let qi = (rng.below(nqp as u64)) as usize;
        let (qa, qb) = qps[qi];
        let wr_id = m as u64 + 1;
        let kind = rng.below(100);
        let len = match rng.below(4) {
            0 => rng.below(64) as usize,
            1 => rng.below(2048) as usize,
            2 => rng.below(9000) as usize,
            _ => 1 + rng.below(300) as usize,
        };
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if kind < 12 {
            let res = p.a.alloc(8);
            let rmr = p.a.reg_mr(pd_a, res, 8, AccessFlags::ALL).unwrap();
            let mut wr = SendWr::new(wr_id, WrOpcode::AtomicFetchAndAdd, vec![Sge { addr: res, length: 8, lkey: rmr.lkey }]);
            wr.remote_addr = counter_va;
            wr.rkey = counter.rkey;
            wr.compare_add = 1;
            p.a.post_send(qa, wr).unwrap();
            faa.push(res);
            expects.push(Expect { qp: qi, wr_id, op: WrOpcode::AtomicFetchAndAdd, len: 8, dst_on_b: false, dst: 0, data: vec![] });
            continue;
        }
        let op = match kind {
            12..=40 => WrOpcode::Send,
            41..=50 => WrOpcode::SendWithImm,
            51..=70 => WrOpcode::RdmaWrite,
            71..=80 => WrOpcode::RdmaWriteWithImm,
            _ => WrOpcode::RdmaRead,
        };
        let is_read = op == WrOpcode::RdmaRead;
        let a_va = p.a.alloc(len.max(1));
        let b_va = p.b.alloc(len.max(1));
        if is_read {
            p.b.mem_mut().write(b_va, &data).unwrap();
        } else {
            p.a.mem_mut().write(a_va, &data).unwrap();
        }
        let amr = p.a.reg_mr(pd_a, a_va, len.max(1) as u64, AccessFlags::ALL).unwrap();
        let bmr = p.b.reg_mr(pd_b, b_va, len.max(1) as u64, AccessFlags::ALL).unwrap();
        let sg = if len == 0 { vec![] } else { vec![Sge { addr: a_va, length: len as u32, lkey: amr.lkey }] };
        if op.is_send() || op == WrOpcode::RdmaWriteWithImm {
            let rsg = if op.is_send() && len > 0 { vec![Sge { addr: b_va, length: len as u32, lkey: bmr.lkey }] } else { vec![] };
            p.b.post_recv(qb, RecvWr { wr_id, sg_list: rsg }).unwrap();
            recv_expect[qi].push((wr_id, len, op.has_imm()));
        }
        let mut wr = SendWr::new(wr_id, op, sg);
        wr.remote_addr = b_va;
        wr.rkey = bmr.rkey;
        wr.imm_data = wr_id as u32;
        wr.flags.signaled = true;
        p.a.post_send(qa, wr).unwrap();
        expects.push(Expect { qp: qi, wr_id, op, len, dst_on_b: !is_read, dst: if is_read { a_va } else { b_va }, data });
    }
    let r = p.run_for(60_000_000_000);
    assert!(r.idle, "did not finish: {:?}", p.a.counters());
    // Send-side CQEs: all success, per QP in posting order.
    let wcs = p.a.poll_cq(p.cq_a, usize::MAX);
    assert_eq!(wcs.len(), n_msgs, "one CQE per signaled WR");
    for w in &wcs {
        assert_eq!(w.status, WcStatus::Success, "{w:?}");
    }
    for qi in 0..nqp {
        let got: Vec<u64> = wcs.iter().filter(|w| w.qp_num == qps[qi].0).map(|w| w.wr_id).collect();
        let want: Vec<u64> = expects.iter().filter(|e| e.qp == qi).map(|e| e.wr_id).collect();
        assert_eq!(got, want, "QP {qi}: completions in order");
    }
    for e in &expects {
        if e.op.is_atomic() {
            continue;
        }
        let dev = if e.dst_on_b { &p.b } else { &p.a };
        assert_eq!(dev.mem().read(e.dst, e.len).unwrap(), e.data, "wr {} {:?} len {}", e.wr_id, e.op, e.len);
        let wc = wcs.iter().find(|w| w.wr_id == e.wr_id).unwrap();
        assert_eq!(wc.byte_len as usize, e.len);
    }
    // Receive-side CQEs: exactly one per SEND / WRITE_IMM, in order, right lengths.
    let rwcs = p.b.poll_cq(p.cq_b, usize::MAX);
    for qi in 0..nqp {
        let got: Vec<(u64, usize, bool)> = rwcs
            .iter()
            .filter(|w| w.qp_num == qps[qi].1)
            .map(|w| {
                assert_eq!(w.status, WcStatus::Success);
                if w.wc_flags.has(WcFlags::WITH_IMM) {
                    assert_eq!(w.imm_data, w.wr_id as u32);
                }
                (w.wr_id, w.byte_len as usize, w.wc_flags.has(WcFlags::WITH_IMM))
            })
            .collect();
        assert_eq!(got, recv_expect[qi], "QP {qi} receive completions");
    }
    // Fetch-and-add exactly once: the final value is the count, the returned values a permutation of 0..n.
    let n = faa.len() as u64;
    assert!(n > 100);
    assert_eq!(p.b.mem().read_u64(counter_va).unwrap(), n);
    let mut returned: Vec<u64> = faa.iter().map(|&va| p.a.mem().read_u64(va).unwrap()).collect();
    returned.sort_unstable();
    assert_eq!(returned, (0..n).collect::<Vec<_>>());
    // The faults really happened and were recovered from.
    let (ca, cb) = (p.a.counters(), p.b.counters());
    let ls = &p.link.stats;
    assert!(ls[0].dropped > 0 && ls[1].dropped > 0 && ls[0].duplicated > 0 && ls[0].reordered > 0);
    assert!(ls[0].corrupted + ls[1].corrupted > 0);
    assert!(ca.retries > 0, "go-back-N happened");
    assert!(ca.tx_retransmitted_packets > 0);
    assert!(cb.duplicate_requests > 0, "responder saw duplicates");
    assert!(cb.naks_sent.get(&0x60).copied().unwrap_or(0) > 0, "PSN sequence NAKs");
    assert!(cb.atomic_replays + cb.read_replays > 0, "replays from responder resources");
    assert!(ca.drop_count(DropReason::BadIcrc) + cb.drop_count(DropReason::BadIcrc) + ca.drop_count(DropReason::Malformed) + cb.drop_count(DropReason::Malformed) > 0);
    eprintln!("link {:?}\nA {:?}\nB {:?}\nvirtual time {} us", ls, ca, cb, r.now_ns / 1000);
}
