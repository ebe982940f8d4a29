//! The Completer's rate: read responses at line rate on the fast path, after a gap, and with records between.

use super::*;

/// A stream of `nreads` READs of `npk` packets (the last carrying `last` bytes) on `qps` QPs in turn, their
/// responses handed on as RX Parse and the top do (a header once the previous payload is all in), sinks
/// always ready. The records come as the Requester issues them: `window` at the start, then READ
/// `k + window`'s when READ `k`'s first response is taken, and a READ's responses only after its record.
/// Checks every byte placed and every completion; returns the cycle each header was taken and how many
/// of READ `window` and later took the fast path (before it, a record may be the first of its QP's empty
/// list, which takes the general path).
fn read_stream(mtu: u32, npk: u32, last: u32, qps: u32, nreads: usize, window: usize) -> (Vec<u64>, usize) {
    use rnic_driver::host::WR_RDMA_READ;
    let mut rig = Rig::new(11);
    for q in 0..qps {
        rig.set_cq(0x21 + q, 0x7);
    }
    let len = (npk as u64 - 1) * mtu as u64 + last as u64;
    let mut recs = Vec::new();
    let mut resps = Vec::new(); // (READ index, response)
    let mut want: BTreeMap<u64, u8> = BTreeMap::new();
    for k in 0..nreads {
        let q = 0x21 + k as u32 % qps;
        let psn0 = psn_add(0xFF_FFF0, (k as u32 / qps) * npk); // wraps inside the first READ
        let r = rec(q, k as u64, WR_RDMA_READ, psn0, npk, len, true, WcStatus::Success);
        for i in 0..npk {
            let op = if npk == 1 {
                RC_RDMA_READ_RESPONSE_ONLY
            } else if i == 0 {
                RC_RDMA_READ_RESPONSE_FIRST
            } else if i + 1 == npk {
                RC_RDMA_READ_RESPONSE_LAST
            } else {
                RC_RDMA_READ_RESPONSE_MIDDLE
            };
            let n = if i + 1 == npk { last as usize } else { mtu as usize };
            let pay: Vec<u8> = (0..n).map(|j| (j as u32 * 7 + i * 13 + k as u32 * 29) as u8).collect();
            for (j, b) in pay.iter().enumerate() {
                want.insert(r.laddr.to_u64() + (i * mtu) as u64 + j as u64, *b);
            }
            resps.push((k, read_resp(q, psn_add(psn0, i), op, pay)));
        }
        recs.push(r);
    }
    let u = &mut rig.u;
    u.s_cmd.ready.next = true;
    u.s_pay.tready.next = true;
    u.cq.ready.next = true;
    let mut iq: VecDeque<ReqIssued> = recs.iter().take(window).copied().collect();
    let mut offered = iq.len();
    let mut accepted = 0usize;
    let mut next = 0usize;
    let mut beats: VecDeque<(Vec<u8>, bool)> = VecDeque::new();
    let mut cmds: VecDeque<(u64, u64)> = VecDeque::new();
    let mut cur: Option<(u64, Vec<u8>)> = None;
    let mut hdr_ok = true; // the previous payload is all taken (and a cycle has passed)
    let mut pay_ok = false; // the payload of the header taken last cycle may flow
    let mut taken_at: Vec<u64> = Vec::new();
    let mut cqs = 0;
    let mut fast = 0;
    let mut mem: BTreeMap<u64, u8> = BTreeMap::new();
    let mut cycle = 0u64;
    while cqs < nreads {
        cycle += 1;
        assert!(cycle < 200_000, "hung");
        let iv = !iq.is_empty();
        if iv {
            u.iss.next = iq[0];
        }
        u.iss_valid.next = iv;
        let hv = hdr_ok && next < resps.len() && resps[next].0 < accepted;
        if hv {
            let r = &resps[next].1;
            u.hdr.next = r.h;
            u.hdr_ext_words.next = bits(r.ew);
            u.hdr_pay_len.next = bits(r.pay.len() as u64);
        }
        u.hdr_valid.next = hv;
        let pv = pay_ok && !beats.is_empty();
        if pv {
            let (d, k) = beat_of(&beats[0].0);
            u.pay.tdata.next = d;
            u.pay.tkeep.next = k;
            u.pay.tlast.next = beats[0].1;
        }
        u.pay.tvalid.next = pv;
        u.clock.next = false.into();
        assert!(simulate(u, 200));
        let (mut new_hdr, mut new_pay) = (hdr_ok, pay_ok);
        if u.state.q.val() == CompState::FEnd && u.rp.sums.val() && taken_at.len() > window * npk as usize {
            fast += 1;
        }
        if iv && u.iss_ready.val() {
            iq.pop_front();
            accepted += 1;
        }
        if hv && u.hdr_ready.val() {
            let (k, r) = &resps[next];
            for (i, c) in r.pay.chunks(64).enumerate() {
                beats.push_back((c.to_vec(), i + 1 == r.pay.len().div_ceil(64)));
            }
            if r.h.opcode.to_u64() as u8 != RC_RDMA_READ_RESPONSE_MIDDLE
                && r.h.opcode.to_u64() as u8 != RC_RDMA_READ_RESPONSE_LAST
                && k + window < nreads
            {
                assert_eq!(offered, k + window);
                iq.push_back(recs[k + window]);
                offered += 1;
            }
            next += 1;
            taken_at.push(cycle);
            new_hdr = false;
            new_pay = true;
        }
        if pv && u.pay.tready.val() {
            let (_, last) = beats.pop_front().unwrap();
            if last {
                new_hdr = true;
                new_pay = false;
            }
        }
        if u.s_cmd.valid.val() {
            cmds.push_back((u.s_cmd.addr.val().to_u64(), u.s_cmd.len.val().to_u64()));
        }
        if u.s_pay.tvalid.val() {
            let c = cur.get_or_insert_with(|| (cmds.pop_front().expect("payload before its command").0, Vec::new()));
            for i in 0..64 {
                if u.s_pay.tkeep.val().get_bit(i) {
                    c.1.push(u.s_pay.tdata.val().get_bits::<8>(8 * i).to_u8());
                }
            }
            if u.s_pay.tlast.val() {
                let (a, d) = cur.take().unwrap();
                for (i, b) in d.iter().enumerate() {
                    mem.insert(a + i as u64, *b);
                }
            }
        }
        if u.cq.valid.val() {
            let got = (u.cq.wc.val().wr_id.to_u64(), u.cq.wc.val().status.to_u64(), u.cq.wc.val().byte_len.to_u64());
            assert_eq!(got, (cqs as u64, 0, len), "completions in order, each READ's length, success");
            cqs += 1;
        }
        u.clock.next = true.into();
        assert!(simulate(u, 200));
        hdr_ok = new_hdr;
        pay_ok = new_pay;
    }
    assert_eq!(next, resps.len());
    assert!(mem == want, "READ data: every byte where it belongs, nothing else written");
    (taken_at, fast)
}

/// Cycles per read response at the RTL's best: one READ of `npk` packets at `mtu` (a header from the cycle
/// after the previous payload's last beat, its payload from the cycle after the header). Returns the mean
/// cycles between header hand-overs of the MIDDLE responses (steady state); `read_stream` checks that the
/// READ completed and every byte landed.
fn read_rate(mtu: u32, npk: u32) -> f64 {
    let (taken_at, _) = read_stream(mtu, npk, 100, 1, 1, 1);
    // MIDDLE headers: taken_at[1] .. taken_at[npk - 1] (the LAST's hand-over ends the last MIDDLE)
    (taken_at[npk as usize - 1] - taken_at[1]) as f64 / (npk - 2) as f64
}

/// Wire cycles per MIDDLE read response of `mtu` bytes at 100 Gb/s and the core clock: Ethernet + IPv4 +
/// UDP + BTH + payload + ICRC + FCS, preamble and inter-packet gap.
fn wire_cycles(mtu: u32) -> f64 {
    frame_cycles(mtu, 0)
}

/// Wire cycles of a response with `pay` bytes of payload and `ext` bytes of extension header (AETH: 4).
fn frame_cycles(pay: u32, ext: u32) -> f64 {
    (14 + 20 + 8 + 12 + ext as u64 + pay as u64 + 4 + 4 + 8 + 12) as f64 * 8.0 / (100e9 / testbench::mac::CORE_HZ)
}

#[test]
fn completer_keeps_up_with_read_responses_at_line_rate() {
    let rates: Vec<(u32, f64)> = [(256u32, 40u32), (1024, 24), (4096, 10)].iter().map(|&(m, k)| (m, read_rate(m, k))).collect();
    for &(mtu, c) in &rates {
        println!("MTU {mtu}: {c:.2} cycles per MIDDLE read response ({} payload beats; wire {:.2})", mtu / 64, wire_cycles(mtu));
    }
    for &(mtu, c) in &rates {
        let n = mtu / 64;
        assert!(c <= wire_cycles(mtu), "MTU {mtu}: {c} cycles per response, the wire brings one every {}", wire_cycles(mtu));
        assert!(c <= (n + 2) as f64, "MTU {mtu}: {c} cycles per response, more than the payload beats + 2");
    }
}

/// After a loss inside a READ, the peer may still send the rest of that READ's responses (and every later
/// READ's) before the responses to the go-back-N come: each can only be dropped, and at MTU 256 they come
/// one every 8.7 cycles at 100 Gb/s. The Completer must drop them at that pace (fast drop) or RX Parse's
/// buffer overflows and the responses to the go-back-N are lost with them (the reads campaign at MTU 256
/// hung with 19,031 overflow drops before). Back-to-back MIDDLE responses after the gap: every one dropped,
/// no second go-back-N, nothing scattered, at most the wire's cycles each. Fails without `FDrop` (the rules'
/// path takes more than 10 cycles per response).
#[test]
fn responses_after_a_gap_are_dropped_at_line_rate() {
    use rnic_driver::host::WR_RDMA_READ;
    let mut rig = Rig::new(31);
    let q = 0x27u32;
    rig.set_cq(q, 0x54);
    let (p, n) = (0x500u32, 32u32);
    // two READs of n packets; A's FIRST, then (its second response lost) B's FIRST: an implied NAK, the
    // go-back-N to p + 1 starts
    let a = rec(q, 1, WR_RDMA_READ, p, n, n as u64 * 256, true, WcStatus::Success);
    let b = rec(q, 2, WR_RDMA_READ, p + n, n, n as u64 * 256, true, WcStatus::Success);
    rig.run(
        &[a, b],
        &[read_resp(q, p, RC_RDMA_READ_RESPONSE_FIRST, vec![0x11; 256]), read_resp(q, p + n, RC_RDMA_READ_RESPONSE_FIRST, vec![0x22; 256])],
    );
    assert_eq!(rig.rewinds, vec![(q as u64, 1, (p + 1) as u64, 1)], "the implied NAK goes back to p + 1");
    let dropped0 = rig.counter(CNT_DROPPED) + rig.counter(CNT_IMPLIED_NAKS);
    let mem0 = rig.mem.clone();
    // the rest of both READs as the peer sent them before the go-back-N reached it, back to back (A's: a
    // gap, B's: implied NAKs before progress), everything ready
    let u = &mut rig.u;
    u.s_cmd.ready.next = true;
    u.s_pay.tready.next = true;
    u.cq.ready.next = true;
    u.rw_ready.next = true;
    u.iss_valid.next = false;
    let resps: Vec<Resp> =
        (p + 2..p + n).chain(p + n + 1..p + 2 * n - 1).map(|x| read_resp(q, x, RC_RDMA_READ_RESPONSE_MIDDLE, vec![0x33; 256])).collect();
    let (mut next, mut beats, mut hdr_ok, mut pay_ok) = (0usize, 0usize, true, false);
    let mut taken_at = Vec::new();
    let mut cycle = 0u64;
    while next < resps.len() || beats > 0 || cycle < taken_at.last().copied().unwrap_or(0) + 40 {
        cycle += 1;
        assert!(cycle < 20_000, "hung");
        let hv = hdr_ok && next < resps.len();
        if hv {
            u.hdr.next = resps[next].h;
            u.hdr_ext_words.next = bits(resps[next].ew);
            u.hdr_pay_len.next = bits(256);
        }
        u.hdr_valid.next = hv;
        let pv = pay_ok && beats > 0;
        if pv {
            let (d, k) = beat_of(&[0x33; 64]);
            u.pay.tdata.next = d;
            u.pay.tkeep.next = k;
            u.pay.tlast.next = beats == 1;
        }
        u.pay.tvalid.next = pv;
        u.clock.next = false.into();
        assert!(simulate(u, 200));
        assert!(!u.rw_valid.val(), "no second go-back-N before progress");
        assert!(!u.s_cmd.valid.val() && !u.cq.valid.val(), "a dropped response scatters and completes nothing");
        let (mut nh, mut np) = (hdr_ok, pay_ok);
        if hv && u.hdr_ready.val() {
            next += 1;
            beats = 4;
            taken_at.push(cycle);
            nh = false;
            np = true;
        }
        if pv && u.pay.tready.val() {
            beats -= 1;
            if beats == 0 {
                nh = true;
                np = false;
            }
        }
        u.clock.next = true.into();
        assert!(simulate(u, 200));
        hdr_ok = nh;
        pay_ok = np;
    }
    let per = (taken_at[taken_at.len() - 1] - taken_at[0]) as f64 / (taken_at.len() - 1) as f64;
    println!("{} responses after a gap at MTU 256: {per:.2} cycles each (wire {:.2})", resps.len(), wire_cycles(256));
    assert_eq!(rig.counter(CNT_DROPPED) + rig.counter(CNT_IMPLIED_NAKS) - dropped0, resps.len() as u64, "every one dropped");
    assert!(rig.mem == mem0, "nothing written");
    assert!(per <= wire_cycles(256), "{per} cycles per dropped response, the wire brings one every {}", wire_cycles(256));
}

/// Short READs with the Requester's records between their responses (the bench's 3,000-byte READs at MTU
/// 1024): a record must not cost the next response the fast path, so a READ takes no longer than the wire
/// brings its three responses in.
#[test]
fn completer_keeps_up_with_short_reads_and_records() {
    let (mtu, npk, last, n) = (1024u32, 3u32, 952u32, 24usize);
    let (taken_at, fast) = read_stream(mtu, npk, last, 2, n, 4);
    assert_eq!(fast, (n - 4) * (npk as usize - 1), "every MIDDLE and LAST on the fast path, records between them or not");
    let per_read = (taken_at[(n - 4) * npk as usize] - taken_at[4 * npk as usize]) as f64 / (n - 8) as f64;
    let wire = frame_cycles(mtu, 4) + (npk - 2) as f64 * frame_cycles(mtu, 0) + frame_cycles(last, 4);
    println!("{n} READs of {} bytes, MTU {mtu}, 2 QPs: {per_read:.2} cycles per READ (wire {wire:.2})", (npk - 1) * mtu + last);
    assert!(per_read <= wire, "{per_read} cycles per READ, the wire brings one every {wire}");
}

#[test]
fn completer_emits_verilog() {
    let mut u = Completer::default();
    u.connect_all();
    let v = generate_verilog(&u);
    assert!(v.contains("module top"));
}
