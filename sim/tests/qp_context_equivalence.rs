//! PSN Check and QP Context in rust-hdl's simulator and as Verilator models of their emitted Verilog, run in
//! lockstep (every output compared on every cycle), and checked against the golden model: PSN Check against
//! the model responder's `rc_check_psn` (`psn_check::reference` puts it in the block's codes), QP Context's
//! drop verdict against the model's receive-path checks (`testbench::model::device::rx_qp_check`, which
//! `Device::receive` decides with, through `qp_context::golden_verdict`) and its RAM
//! contents against a plain array model, with back-to-back lookups of the same QPN whose responder write-back
//! has to be forwarded.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtl::transport::psn_check::{self, PsnCheck};
use rtl::transport::qp_context::{golden_is_request, golden_verdict, reason_code, QpContext, QpReq, QpResp, QpStatic};
use rust_hdl::prelude::*;
use rtl::wire::rx_parse::v4_mapped;
use rtl::wire::tx_build::{bits128, u128_of};
use sim::vmodels::psn_check::PsnCheck as VPsn;
/// Bits and 32-bit words of a packed [`QpStatic`].
const QS_BITS: usize = <QpStatic as Synth>::BITS;
const QS_WORDS: usize = QS_BITS.div_ceil(32);
use sim::vmodels::qp_context::QpContext as VQp;
use std::collections::VecDeque;
use testbench::model::{psn_add, DropReason, QpState};
use testbench::wire::opcode::{RC_ACKNOWLEDGE, RC_RDMA_READ_REQUEST, RC_RDMA_WRITE_ONLY, UC_SEND_ONLY, UD_SEND_ONLY};

/// Bits<N> as little-endian 32-bit words.
fn words<const N: usize, const W: usize>(b: Bits<N>) -> [u32; W] {
    let mut w = [0u32; W];
    for i in 0..N {
        if b.get_bit(i) {
            w[i / 32] |= 1 << (i % 32);
        }
    }
    w
}

// ---------------------------------------------------------------- PSN Check

#[derive(Clone, Copy, Debug, PartialEq)]
struct PsnOut {
    valid: bool,
    verdict: u64,
    nak_psn: u64,
    nak: bool,
}

#[test]
fn psn_check_lockstep_rust_hdl_verilator_and_golden_on_12000_packets() {
    let mut h = PsnCheck::default();
    h.connect_all();
    let mut v = VPsn::new();
    let mut rng = SmallRng::seed_from_u64(0x2024);
    let deltas = [0u32, 1, 2, 0xFF_FFFF, 0xFF_FFFE, 0x7F_FFFF, 0x80_0000, 0x80_0001, 0x100, 0xFF_FF00, 0x1_0000];
    let mut pipe: VecDeque<Option<(u32, u32, u64, bool)>> = VecDeque::new();
    let (mut sent, mut checked, mut cycles) = (0usize, 0usize, 0usize);
    let mut hist = [0usize; 5];
    while checked < 12_000 {
        let x = (sent < 12_000 && rng.gen_ratio(9, 10)).then(|| {
            let epsn = if rng.gen_ratio(1, 4) { [0, 0xFF_FFFF, 0x7F_FFFF, 0x80_0000][rng.gen_range(0..4)] } else { rng.gen_range(0..1 << 24) };
            let psn = match rng.gen_range(0..4) {
                3 => epsn,
                0 => psn_add(epsn, deltas[rng.gen_range(0..deltas.len())]),
                1 => psn_add(epsn, rng.gen_range(0..64u32).wrapping_sub(32) & 0xFF_FFFF),
                _ => rng.gen_range(0..1 << 24),
            };
            (psn, epsn, rng.gen_range(0..3u64), rng.gen_bool(0.5))
        });
        sent += x.is_some() as usize;
        let (psn, epsn, kind, nak) = x.unwrap_or((0, 0, 0, false));
        // rust-hdl
        h.in_valid.next = x.is_some();
        h.psn.next = bits(psn as u64);
        h.epsn.next = bits(epsn as u64);
        h.kind.next = bits(kind);
        h.sent_psn_nak.next = nak;
        h.clock.next = false.into();
        assert!(simulate(&mut h, 20));
        let ho = PsnOut { valid: h.out_valid.val(), verdict: h.verdict.val().to_u64(), nak_psn: h.nak_psn.val().to_u64(), nak: h.sent_psn_nak_next.val() };
        // Verilator
        v.set_in_valid(x.is_some() as u64);
        v.set_psn(psn as u64);
        v.set_epsn(epsn as u64);
        v.set_kind(kind);
        v.set_sent_psn_nak(nak as u64);
        v.set_clock(0);
        v.eval();
        let vo = PsnOut { valid: v.out_valid() != 0, verdict: v.verdict(), nak_psn: v.nak_psn(), nak: v.sent_psn_nak_next() != 0 };
        assert_eq!(ho, vo, "cycle {cycles}: rust-hdl vs Verilator");
        if pipe.len() == 2 {
            let old = pipe.pop_front().unwrap();
            assert_eq!(ho.valid, old.is_some(), "cycle {cycles}");
            if let Some((psn, epsn, kind, nak)) = old {
                let (want, want_nak) = psn_check::reference(psn, epsn, kind, nak);
                assert_eq!((ho.verdict, ho.nak), (want, want_nak), "psn {psn:06x} epsn {epsn:06x} kind {kind} nak {nak}");
                if want == psn_check::VERDICT_NAK_SEQ {
                    assert_eq!(ho.nak_psn, epsn as u64);
                }
                hist[want as usize] += 1;
                checked += 1;
            }
        }
        pipe.push_back(x);
        h.clock.next = true.into();
        assert!(simulate(&mut h, 20));
        v.set_clock(1);
        v.eval();
        cycles += 1;
    }
    eprintln!("{checked} packets in {cycles} cycles, verdicts {hist:?}");
    assert!(hist.iter().all(|&c| c > 500), "{hist:?}");
}

// ---------------------------------------------------------------- QP Context

type Ctx = QpContext<256, 8>;

#[derive(Clone, Copy, Default)]
struct QpIn {
    attr_we: bool,
    attr_qpn: u32,
    attr_data: QpStatic,
    lk_valid: bool,
    lk_qpn: u32,
    lk_opcode: u8,
    lk_pkey: u16,
    lk_src_ip: u128,
    lk_qkey: u32,
    upd_we: bool,
    upd_qpn: u32,
    upd_data: QpResp,
    req_we: bool,
    req_qpn: u32,
    req_wdata: QpReq,
    req_rd_qpn: u32,
}

#[derive(Clone, Debug, PartialEq)]
struct QpOut {
    valid: bool,
    qpn: u64,
    is_request: bool,
    drop: bool,
    reason: u64,
    stat: [u32; QS_WORDS],
    resp: [u32; 4],
    req: [u32; 3],
}

fn drive_hdl(u: &mut Ctx, i: &QpIn) -> QpOut {
    u.attr_we.next = i.attr_we;
    u.attr_qpn.next = bits(i.attr_qpn as u64);
    u.attr_data.next = i.attr_data;
    u.lk_valid.next = i.lk_valid;
    u.lk_qpn.next = bits(i.lk_qpn as u64);
    u.lk_opcode.next = bits(i.lk_opcode as u64);
    u.lk_pkey.next = bits(i.lk_pkey as u64);
    u.lk_src_ip.next = bits128(i.lk_src_ip);
    u.lk_qkey.next = bits(i.lk_qkey as u64);
    u.upd_we.next = i.upd_we;
    u.upd_qpn.next = bits(i.upd_qpn as u64);
    u.upd_data.next = i.upd_data;
    u.req_we.next = i.req_we;
    u.req_qpn.next = bits(i.req_qpn as u64);
    u.req_wdata.next = i.req_wdata;
    u.req_rd_qpn.next = bits(i.req_rd_qpn as u64);
    u.clock.next = false.into();
    assert!(simulate(u, 50));
    QpOut {
        valid: u.out_valid.val(),
        qpn: u.out_qpn.val().to_u64(),
        is_request: u.out_is_request.val(),
        drop: u.out_drop.val(),
        reason: u.out_reason.val().to_u64(),
        stat: words(u.out_static.val().into()),
        resp: words(u.out_resp.val().into()),
        req: words(u.req_rdata.val().into()),
    }
}

fn drive_vl(v: &mut VQp, i: &QpIn) -> QpOut {
    v.set_attr_we(i.attr_we as u64);
    v.set_attr_qpn(i.attr_qpn as u64);
    v.set_attr_data(&words(i.attr_data.into()));
    v.set_lk_valid(i.lk_valid as u64);
    v.set_lk_qpn(i.lk_qpn as u64);
    v.set_lk_opcode(i.lk_opcode as u64);
    v.set_lk_pkey(i.lk_pkey as u64);
    v.set_lk_src_ip(&rnic_driver::host::u128_words(i.lk_src_ip));
    v.set_lk_qkey(i.lk_qkey as u64);
    v.set_upd_we(i.upd_we as u64);
    v.set_upd_qpn(i.upd_qpn as u64);
    v.set_upd_data(&words(i.upd_data.into()));
    v.set_req_we(i.req_we as u64);
    v.set_req_qpn(i.req_qpn as u64);
    v.set_req_wdata(&words(i.req_wdata.into()));
    v.set_req_rd_qpn(i.req_rd_qpn as u64);
    v.set_clock(0);
    v.eval();
    QpOut {
        valid: v.out_valid() != 0,
        qpn: v.out_qpn(),
        is_request: v.out_is_request() != 0,
        drop: v.out_drop() != 0,
        reason: v.out_reason(),
        stat: v.out_static(),
        resp: v.out_resp(),
        req: v.req_rdata(),
    }
}

/// The IPv6 address of the IPv6 paths.
const TEST_IP6: u128 = 0xFD00_0000_0000_0000_0000_0000_0000_0002;

fn random_static(rng: &mut SmallRng) -> QpStatic {
    let remote = match rng.gen_range(0..16) {
        0 => v4_mapped(rng.gen()),
        1..=3 => TEST_IP6,
        _ => v4_mapped(0x0A00_0002),
    };
    QpStatic {
        state: bits(if rng.gen_ratio(2, 3) { QpState::Rts as u64 } else { rng.gen_range(0..7) }),
        qp_type: bits(if rng.gen_ratio(3, 4) { 0 } else { rng.gen_range(0..3) }),
        path_mtu: bits(rng.gen_range(1..6)),
        access: bits(rng.gen_range(0..256)),
        min_rnr_timer: bits(rng.gen_range(0..32)),
        timeout: bits(rng.gen_range(0..32)),
        retry_cnt: bits(rng.gen_range(0..8)),
        rnr_retry: bits(rng.gen_range(0..8)),
        max_rd_atomic: bits(rng.gen_range(0..256)),
        max_dest_rd_atomic: bits(rng.gen_range(0..256)),
        dest_qpn: bits(rng.gen_range(0..1 << 24)),
        pd: bits(rng.gen::<u32>() as u64),
        sport: bits(rng.gen_range(0..1 << 16)),
        remote_ip: bits128(remote),
        v6: std::net::Ipv6Addr::from(remote).to_ipv4_mapped().is_none(),
        remote_mac: bits(rng.gen::<u64>() & 0xFFFF_FFFF_FFFF),
        qkey: bits(random_qkey(rng) as u64),
    }
}

/// A Q_Key from a few, so that a lookup's often matches its QP's (QP1's: the GSI one).
fn random_qkey(rng: &mut SmallRng) -> u32 {
    [0x1111_1111, testbench::wire::headers::GSI_QKEY, 0x8000_1234, rng.gen()][rng.gen_range(0..4)]
}

fn random_resp(rng: &mut SmallRng) -> QpResp {
    QpResp {
        epsn: bits(rng.gen_range(0..1 << 24)),
        ack_psn: bits(rng.gen_range(0..1 << 24)),
        msn: bits(rng.gen_range(0..1 << 24)),
        sent_psn_nak: rng.gen(),
        rq_idx: bits(rng.gen_range(0..1 << 16)),
        res_head: bits(rng.gen_range(0..256)),
    }
}

fn random_req(rng: &mut SmallRng) -> QpReq {
    QpReq {
        next_psn: bits(rng.gen_range(0..1 << 24)),
        unacked_psn: bits(rng.gen_range(0..1 << 24)),
        sq_idx: bits(rng.gen_range(0..1 << 16)),
        retry_left: bits(rng.gen_range(0..8)),
        rnr_left: bits(rng.gen_range(0..8)),
    }
}

/// Random attribute writes, lookups (mostly of a few hot QPNs, so same-QPN back to back is common; also QPN 0,
/// QPNs >= N, wrong transports, responses, bad P_Keys and source IPs), a responder that writes `ePSN + 1` back
/// in the cycle each accepted result is out (forwarding needed for the next same-QPN lookup), random extra
/// updates, and requester-RAM traffic; both simulators, the golden model's drop verdict (`rtl::transport::qp_context::golden_verdict`) and
/// a plain array model of the three RAMs.
#[test]
fn qp_context_lockstep_rust_hdl_verilator_and_array_model() {
    let mut h = Box::<Ctx>::default();
    h.connect_all();
    let mut v = VQp::new();
    let mut rng = SmallRng::seed_from_u64(0x0C7);
    let hot: Vec<u32> = (0..4).map(|_| rng.gen_range(1..256)).collect();
    let pick = |rng: &mut SmallRng| -> u32 {
        match rng.gen_range(0..20) {
            0 => 0,
            1 => rng.gen_range(256..1 << 24),
            2 | 3 => rng.gen_range(1..256),
            _ => hot[rng.gen_range(0..hot.len())],
        }
    };
    let mut st = vec![QpStatic::default(); 256];
    let mut rs = vec![QpResp::default(); 256];
    let mut rq = vec![QpReq::default(); 256];
    let mut st_hist: VecDeque<Vec<QpStatic>> = VecDeque::new();
    let mut pipe: VecDeque<Option<(u32, u8, u16, u128, u32)>> = VecDeque::new();
    let mut req_want: Option<QpReq> = None;
    let (mut accepted, mut dropped, mut b2b, mut unjudged) = (0usize, 0usize, 0usize, 0usize);
    let mut reasons = std::collections::BTreeMap::new();
    let mut last_acc: Option<u32> = None;
    for cycle in 0..30_000 {
        let mut i = QpIn {
            attr_we: rng.gen_ratio(1, 6),
            attr_qpn: pick(&mut rng),
            attr_data: random_static(&mut rng),
            req_we: rng.gen_ratio(1, 3),
            req_qpn: pick(&mut rng),
            req_wdata: random_req(&mut rng),
            req_rd_qpn: rng.gen_range(0..256),
            ..Default::default()
        };
        if rng.gen_ratio(9, 10) {
            i.lk_valid = true;
            i.lk_qpn = pick(&mut rng);
            i.lk_opcode = match rng.gen_range(0..12) {
                0 => RC_ACKNOWLEDGE,
                1 => UC_SEND_ONLY,
                2 => rng.gen(),
                3 => RC_RDMA_READ_REQUEST,
                4 => UD_SEND_ONLY,
                _ => RC_RDMA_WRITE_ONLY,
            };
            i.lk_qkey = random_qkey(&mut rng);
            i.lk_pkey = if rng.gen_ratio(1, 12) { rng.gen() } else if rng.gen() { 0xFFFF } else { 0x7FFF };
            // IPv4 (mapped) and IPv6 sources, mostly those of the paths
            i.lk_src_ip = match rng.gen_range(0..24) {
                0 => v4_mapped(rng.gen()),
                1 => rng.gen(),
                2..=6 => TEST_IP6,
                _ => v4_mapped(0x0A00_0002),
            };
        }
        let mut ho = drive_hdl(&mut h, &i);
        let mut vo = drive_vl(&mut v, &i);
        assert_eq!(ho, vo, "cycle {cycle}: rust-hdl vs Verilator");
        // the lookup of cycle-3 is out: check it, and write back its responder state this cycle
        if pipe.len() == 3 {
            let old = pipe.pop_front().unwrap();
            assert_eq!(ho.valid, old.is_some(), "cycle {cycle}");
            let mut acc = None;
            if let Some((q, op, pkey, sip, qkey)) = old {
                let s = if (q as usize) < 256 { st_hist[0][q as usize] } else { QpStatic::default() };
                assert_eq!(ho.qpn, q as u64, "cycle {cycle}");
                let verdict = golden_verdict::<256>(q, op, pkey, sip, qkey, &s);
                let ctx = format!(
                    "cycle {cycle}: qpn {q} opcode {op:#04x} pkey {pkey:#06x} src {sip:#034x}, QP state {} type {} \
                     remote {:#034x}",
                    s.state.to_u64(),
                    s.qp_type.to_u64(),
                    u128_of(s.remote_ip)
                );
                // an opcode without a table row: the model drops it as Malformed before the QP lookup, and so
                // does the RNIC, in RX Parse (its opcode table); QP Context never sees one, its verdict is free
                let judged = verdict != Err(DropReason::Malformed);
                // request or response: read by the model once the transport matched (the state check, the
                // delivery to responder or completer)
                let routed = golden_is_request(op, verdict);
                if let Some(req) = routed {
                    assert_eq!(ho.is_request, req, "{ctx}: request/response vs the model");
                }
                if !judged {
                    unjudged += 1;
                } else if let Err(r) = verdict {
                    assert!(ho.drop, "{ctx}: the model drops it ({r:?}), QP Context accepts it");
                    assert_eq!(ho.reason, reason_code(r), "{ctx}: the model drops it as {r:?}");
                    dropped += 1;
                    *reasons.entry(format!("{r:?}")).or_insert(0usize) += 1;
                } else {
                    assert!(!ho.drop, "{ctx}: the model accepts it, QP Context drops it (reason {})", ho.reason);
                    accepted += 1;
                    assert_eq!(ho.stat, words::<QS_BITS, QS_WORDS>(s.into()), "cycle {cycle} qpn {q}: static");
                    assert_eq!(ho.resp, words::<97, 4>(rs[q as usize].into()), "cycle {cycle} qpn {q}: responder state");
                    b2b += (last_acc == Some(q)) as usize;
                    let mut n = rs[q as usize];
                    n.epsn = bits((n.epsn.to_u64() + 1) & 0xFF_FFFF);
                    n.msn = bits((n.msn.to_u64() + 1) & 0xFF_FFFF);
                    n.sent_psn_nak = false;
                    i.upd_we = true;
                    i.upd_qpn = q;
                    i.upd_data = n;
                    acc = Some(q);
                }
            }
            last_acc = acc;
        }
        if !i.upd_we && rng.gen_ratio(1, 8) {
            i.upd_we = true;
            i.upd_qpn = pick(&mut rng);
            i.upd_data = random_resp(&mut rng);
        }
        if let Some(w) = req_want {
            assert_eq!(ho.req, words::<70, 3>(w.into()), "cycle {cycle}: requester RAM");
        }
        if i.upd_we {
            ho = drive_hdl(&mut h, &i);
            vo = drive_vl(&mut v, &i);
            assert_eq!(ho, vo, "cycle {cycle} (after the write-back): rust-hdl vs Verilator");
        }
        pipe.push_back(i.lk_valid.then_some((i.lk_qpn, i.lk_opcode, i.lk_pkey, i.lk_src_ip, i.lk_qkey)));
        // the array model: requester read is read-first; then this cycle's writes (QPN 0 and >= N ignored)
        req_want = Some(rq[i.req_rd_qpn as usize]);
        let ok = |q: u32| q != 0 && q < 256;
        if i.attr_we && ok(i.attr_qpn) {
            st[i.attr_qpn as usize] = i.attr_data;
        }
        if i.upd_we && ok(i.upd_qpn) {
            rs[i.upd_qpn as usize] = i.upd_data;
        }
        if i.req_we && ok(i.req_qpn) {
            rq[i.req_qpn as usize] = i.req_wdata;
        }
        st_hist.push_back(st.clone());
        if st_hist.len() > 2 {
            st_hist.pop_front();
        }
        // rising edge
        h.clock.next = true.into();
        assert!(simulate(&mut *h, 50));
        v.set_clock(1);
        v.eval();
    }
    eprintln!(
        "accepted {accepted}, dropped {dropped} {reasons:?}, back-to-back same-QPN accepted {b2b}, \
         opcodes without a table row (not judged) {unjudged}"
    );
    assert!(accepted > 5000 && b2b > 500, "accepted {accepted}, b2b {b2b}");
    assert!(reasons.len() >= 6, "every drop reason occurs: {reasons:?}");
}
