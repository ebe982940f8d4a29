//! 100,000 random and mutated frames into the model's receive path: it never panics, and every frame is
//! processed, dropped with a named reason, or NAKed. Forged frames carry a valid ICRC and the QP's own IP pair,
//! so they reach the responder and completer state machines, not just the header checks.

use testbench::model::harness::{ConnOpts, Pair};
use testbench::model::link::SplitMix64;
use testbench::model::*;
use testbench::wire::opcode::OPCODE_TABLE;
use testbench::wire::{Aeth, AtomicAckEth, AtomicEth, Bth, Deth, ExtHeader, HeaderKind, Ieth, ImmDt, MaskedCmpSwapEth, MaskedFetchAddEth, Reth, RoceFrame, RocePacket};

fn ext_for(kind: HeaderKind, rng: &mut SplitMix64, va: u64, rkey: u32) -> ExtHeader {
    let pick_va = |rng: &mut SplitMix64| if rng.below(2) == 0 { va + rng.below(64) } else { rng.next_u64() };
    let pick_key = |rng: &mut SplitMix64| if rng.below(2) == 0 { rkey } else { rng.next_u64() as u32 };
    match kind {
        HeaderKind::Reth => ExtHeader::Reth(Reth { va: pick_va(rng), rkey: pick_key(rng), dma_len: rng.below(5000) as u32 }),
        HeaderKind::Aeth => ExtHeader::Aeth(Aeth { syndrome: rng.next_u64() as u8, msn: rng.next_u64() as u32 & 0xFF_FFFF }),
        HeaderKind::AtomicEth => ExtHeader::AtomicEth(AtomicEth { va: pick_va(rng), rkey: pick_key(rng), swap_add: rng.next_u64(), compare: rng.next_u64() }),
        HeaderKind::AtomicAckEth => ExtHeader::AtomicAckEth(AtomicAckEth { orig: rng.next_u64() }),
        HeaderKind::ImmDt => ExtHeader::ImmDt(ImmDt { imm: rng.next_u64() as u32 }),
        HeaderKind::Ieth => ExtHeader::Ieth(Ieth { rkey: pick_key(rng) }),
        HeaderKind::Deth => ExtHeader::Deth(Deth { qkey: rng.next_u64() as u32, resv: 0, src_qp: rng.next_u64() as u32 & 0xFF_FFFF }),
        HeaderKind::MaskedCmpSwapEth => ExtHeader::MaskedCmpSwapEth(MaskedCmpSwapEth { va: pick_va(rng), rkey: pick_key(rng), swap: rng.next_u64(), compare: rng.next_u64(), swap_mask: rng.next_u64(), compare_mask: rng.next_u64() }),
        HeaderKind::MaskedFetchAddEth => ExtHeader::MaskedFetchAddEth(MaskedFetchAddEth { va: pick_va(rng), rkey: pick_key(rng), add: rng.next_u64(), field_boundary: rng.next_u64() }),
        other => {
            let mut b = vec![0u8; other.len()];
            b.iter_mut().for_each(|x| *x = rng.next_u64() as u8);
            ExtHeader::parse(other, &b).unwrap().0
        }
    }
}

#[test]
fn hundred_thousand_random_and_mutated_frames() {
    let mut rng = SplitMix64::new(0xF00D);
    let mut total = 0u64;
    let mut accepted = 0u64;
    let mut naks = 0u64;
    let mut drops = 0u64;
    let mut round_drops = 0u64;
    let mut reasons = std::collections::BTreeMap::new();
    let target = 100_000u64;
    let per_round = 1000;
    let mut round = 0u64;
    while total < target {
        round += 1;
        let round_drops_before = round_drops;
        // A fresh pair per round, so that QPs knocked into ERROR by earlier frames come back.
        let mut p = Pair::new(LinkConfig::default(), round);
        let o = ConnOpts { path_mtu: 256, ..Default::default() };
        let (qa, qb) = p.connect(&o, 1000, 2000);
        let (pd_a, pd_b) = (p.pd_a, p.pd_b);
        let va = p.b.alloc(8192);
        let mr = p.b.reg_mr(pd_b, va, 8192, AccessFlags::ALL).unwrap();
        for i in 0..16 {
            p.b.post_recv(qb, RecvWr { wr_id: i, sg_list: vec![Sge { addr: va, length: 4096, lkey: mr.lkey }] }).unwrap();
        }
        let lva = p.a.alloc(8192);
        let lmr = p.a.reg_mr(pd_a, lva, 8192, AccessFlags::ALL).unwrap();
        // Some real traffic to mutate: a WRITE, a READ and a SEND from a, and b's answers.
        let mut wr = SendWr::new(1, WrOpcode::RdmaWrite, vec![Sge { addr: lva, length: 700, lkey: lmr.lkey }]);
        wr.remote_addr = va;
        wr.rkey = mr.rkey;
        p.a.post_send(qa, wr.clone()).unwrap();
        wr.opcode = WrOpcode::RdmaRead;
        p.a.post_send(qa, wr).unwrap();
        p.a.post_send(qa, SendWr::new(3, WrOpcode::Send, vec![Sge { addr: lva, length: 300, lkey: lmr.lkey }])).unwrap();
        let mut seeds = p.a.poll(0);
        let mut answers = Vec::new();
        for f in &seeds {
            p.b.receive(0, f);
        }
        answers.extend(p.b.poll(0));
        seeds.extend(answers.iter().cloned());
        let template = RoceFrame::parse(&seeds[0]).unwrap();
        let rtemplate = RoceFrame::parse(&answers[0]).unwrap();
        for n in 0..per_round {
            if total == target {
                break;
            }
            // A QP knocked into ERROR drops everything: start a fresh pair.
            if p.a.qp_state(qa) == Some(QpState::Error) || p.b.qp_state(qb) == Some(QpState::Error) {
                break;
            }
            let now = n as u64 * 1000;
            let choice = rng.below(10);
            let (to_b, frame): (bool, Vec<u8>) = match choice {
                // Pure noise.
                0 => (rng.below(2) == 0, (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect()),
                // A real frame with random byte flips / truncation / extension.
                1..=3 => {
                    let i = rng.below(seeds.len() as u64) as usize;
                    let mut f = seeds[i].clone();
                    match rng.below(3) {
                        0 => {
                            for _ in 0..1 + rng.below(4) {
                                let k = rng.below(f.len() as u64) as usize;
                                f[k] ^= 1 << rng.below(8);
                            }
                        }
                        1 => f.truncate(rng.below(f.len() as u64) as usize),
                        _ => f.extend((0..rng.below(64)).map(|_| rng.next_u64() as u8)),
                    }
                    (i < seeds.len() - answers.len(), f)
                }
                // Forged, valid-ICRC packets with random opcodes and fields, to the right QP and address.
                _ => {
                    let row = &OPCODE_TABLE[rng.below(OPCODE_TABLE.len() as u64) as usize];
                    let to_b = row.is_request() || rng.below(4) == 0;
                    let (mut f, dest) = if to_b { (template.clone(), qb) } else { (rtemplate.clone(), qa) };
                    let mut bth = Bth::new(row.code, if rng.below(20) == 0 { rng.next_u64() as u32 & 0xFF_FFFF } else { dest }, 0);
                    let base = if to_b { 2000 } else { 1000 };
                    bth.psn = (base + rng.below(40) as u32).wrapping_sub(10) & 0xFF_FFFF;
                    bth.ack_req = rng.below(2) == 0;
                    bth.se = rng.below(8) == 0;
                    if rng.below(30) == 0 {
                        bth.pkey = rng.next_u64() as u16;
                    }
                    if rng.below(50) == 0 {
                        bth.tver = rng.below(16) as u8;
                    }
                    let ext = row.headers.iter().map(|&k| ext_for(k, &mut rng, va, mr.rkey)).collect();
                    let plen = if row.payload { [0usize, 1, 255, 256, 257, 300][rng.below(6) as usize] } else { 0 };
                    let payload = (0..plen).map(|_| rng.next_u64() as u8).collect();
                    f.packet = RocePacket::new(bth, ext, payload);
                    if rng.below(40) == 0 {
                        f.icrc_override = Some(rng.next_u64() as u32);
                    }
                    (to_b, f.build().unwrap())
                }
            };
            let dev = if to_b { &mut p.b } else { &mut p.a };
            let out = dev.receive(now, &frame);
            // Whatever the model transmits in answer must itself be well-formed.
            for o in dev.poll(now) {
                assert!(RoceFrame::parse(&o).is_ok());
            }
            total += 1;
            match out {
                RxOutcome::Accepted => accepted += 1,
                RxOutcome::Nak(s) => {
                    assert!(s & 0xE0 == 0x60 || s & 0xE0 == 0x20, "a NAK syndrome, got 0x{s:02x}");
                    naks += 1;
                }
                RxOutcome::Dropped(r) => {
                    drops += 1;
                    *reasons.entry(r).or_insert(0u64) += 1;
                }
            }
        }
        // Every drop was counted under its name.
        round_drops = round_drops_before + p.a.counters().total_drops() + p.b.counters().total_drops();
        assert_eq!(round_drops, drops, "every drop counted under a named reason");
    }
    assert_eq!(total, target);
    assert_eq!(accepted + naks + drops, total);
    assert!(accepted > 1000 && naks > 100 && drops > 10_000, "accepted {accepted} naks {naks} drops {drops}");
    assert!(reasons.len() >= 10, "many distinct named drop reasons: {reasons:?}");
    eprintln!("{reasons:?}");
    eprintln!("{round} pairs: accepted {accepted} naks {naks} drops {drops}");
}
