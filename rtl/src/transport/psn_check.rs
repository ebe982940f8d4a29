//! PSN Check: the RC responder's `check_psn` stage (rxe `rxe_resp.c` `check_psn`), one request per cycle,
//! two cycles of latency.
//!
//! rxe compares the request PSN with the QP's expected PSN (`qp->resp.psn`, ePSN) by `psn_compare`: the 24-bit
//! difference shifted left by 8 and read as signed, i.e. a ±2^23 window, modulo 2^24:
//!
//! * `diff == 0`: in order; an in-order request clears `sent_psn_nak`.
//! * `diff < 0`: duplicate (`RESPST_DUPLICATE_REQUEST` → `duplicate_request`): SEND/WRITE are re-ACKed, READ and
//!   the atomics (ATOMIC, ATOMIC_WRITE, FLUSH) look up the responder resources. `sent_psn_nak` is unchanged.
//! * `diff > 0` and `sent_psn_nak` clear: one NAK PSN sequence error carrying PSN = ePSN
//!   (`RESPST_ERR_PSN_OUT_OF_SEQ`), and `sent_psn_nak` is set.
//! * `diff > 0` and `sent_psn_nak` set: dropped silently (`RESPST_CLEANUP`).
//!
//! How (6 LUT6 levels at most): the sign of the difference is bit 23 of `psn - epsn`, that is
//! `psn[23] ^ epsn[23] ^ (psn[22:0] < epsn[22:0])`. Stage 1 registers three narrow compares (bits 7:0, 15:8,
//! 22:16: `<` and `==` per chunk), the top-bit xor and the 24-bit equality; stage 2 combines the chunk compares
//! into the borrow and decides the verdict. No 24-bit carry chain is ever built.

use rust_hdl::prelude::*;

/// `kind` input: SEND or RDMA WRITE request (duplicates are re-ACKed).
pub const KIND_SEND_WRITE: u64 = 0;
/// `kind` input: RDMA READ request (duplicates look up the responder resources).
pub const KIND_READ: u64 = 1;
/// `kind` input: ATOMIC, ATOMIC_WRITE or FLUSH request (duplicates look up the responder resources).
pub const KIND_ATOMIC: u64 = 2;

/// Verdict: PSN = ePSN, process the request.
pub const VERDICT_IN_ORDER: u64 = 0;
/// Verdict: duplicate SEND/WRITE, re-send an ACK (rxe: PSN `ack_psn - 1`), nothing executed.
pub const VERDICT_DUP_ACK: u64 = 1;
/// Verdict: duplicate READ/atomic, look up the responder resources (replay or drop).
pub const VERDICT_DUP_RESOURCE: u64 = 2;
/// Verdict: first out-of-sequence request, send NAK PSN sequence error with PSN = `nak_psn` (the ePSN).
pub const VERDICT_NAK_SEQ: u64 = 3;
/// Verdict: out of sequence again after the NAK, drop silently.
pub const VERDICT_DROP_OOS: u64 = 4;

/// The golden model's verdict (`testbench::model::responder::rc_check_psn`, which the model's responder decides
/// with) in this block's codes: (verdict, `sent_psn_nak` after the packet). A duplicate is re-ACKed
/// (SEND/WRITE) or looked up in the responder resources (READ, atomic), as the model's `duplicate_request`.
/// The oracle of this block's unit test and of `sim/tests/qp_context_equivalence.rs`.
pub fn reference(psn: u32, epsn: u32, kind: u64, sent_psn_nak: bool) -> (u64, bool) {
    use testbench::model::responder::{rc_check_psn, PsnVerdict};
    let (v, nak) = rc_check_psn(psn, epsn, sent_psn_nak);
    let code = match v {
        PsnVerdict::InOrder => VERDICT_IN_ORDER,
        PsnVerdict::NakSequence => VERDICT_NAK_SEQ,
        PsnVerdict::DropOutOfSequence => VERDICT_DROP_OOS,
        PsnVerdict::Duplicate if kind == KIND_SEND_WRITE => VERDICT_DUP_ACK,
        PsnVerdict::Duplicate => VERDICT_DUP_RESOURCE,
    };
    (code, nak)
}

crate::logic_block! {
    pub struct PsnCheck {
        pub clock: Signal<In, Clock>,
        /// A request is presented this cycle.
        pub in_valid: Signal<In, Bit>,
        /// BTH PSN of the request.
        pub psn: Signal<In, Bits<24>>,
        /// The QP's expected PSN (`qp->resp.psn`).
        pub epsn: Signal<In, Bits<24>>,
        /// Request class: `KIND_SEND_WRITE`, `KIND_READ` or `KIND_ATOMIC`.
        pub kind: Signal<In, Bits<2>>,
        /// The QP's `qp->resp.sent_psn_nak`.
        pub sent_psn_nak: Signal<In, Bit>,
        /// Two cycles after `in_valid`.
        pub out_valid: Signal<Out, Bit>,
        /// One of the `VERDICT_*` codes.
        pub verdict: Signal<Out, Bits<3>>,
        /// PSN to put in the NAK (the ePSN), meaningful with `VERDICT_NAK_SEQ`.
        pub nak_psn: Signal<Out, Bits<24>>,
        /// `sent_psn_nak` to write back to the QP.
        pub sent_psn_nak_next: Signal<Out, Bit>,
        // stage 1
        s1_valid: DFF<Bit>,
        s1_eq: DFF<Bit>,
        s1_x23: DFF<Bit>,
        s1_lt0: DFF<Bit>,
        s1_lt1: DFF<Bit>,
        s1_eq1: DFF<Bit>,
        s1_lt2: DFF<Bit>,
        s1_eq2: DFF<Bit>,
        s1_kind: DFF<Bits<2>>,
        s1_nak: DFF<Bit>,
        s1_epsn: DFF<Bits<24>>,
        // stage 2 (outputs)
        o_valid: DFF<Bit>,
        o_verdict: DFF<Bits<3>>,
        o_nak_psn: DFF<Bits<24>>,
        o_nak: DFF<Bit>,
        // locals
        lt: Signal<Local, Bit>,
        neg: Signal<Local, Bit>,
        // constants
        k_send_write: Constant<Bits<2>> = Constant::new(bits::<2>(KIND_SEND_WRITE)),
        v_in_order: Constant<Bits<3>> = Constant::new(bits::<3>(VERDICT_IN_ORDER)),
        v_dup_ack: Constant<Bits<3>> = Constant::new(bits::<3>(VERDICT_DUP_ACK)),
        v_dup_resource: Constant<Bits<3>> = Constant::new(bits::<3>(VERDICT_DUP_RESOURCE)),
        v_nak_seq: Constant<Bits<3>> = Constant::new(bits::<3>(VERDICT_NAK_SEQ)),
        v_drop_oos: Constant<Bits<3>> = Constant::new(bits::<3>(VERDICT_DROP_OOS)),
    }
}

impl Logic for PsnCheck {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, s1_valid, s1_eq, s1_x23, s1_lt0, s1_lt1, s1_eq1, s1_lt2, s1_eq2, s1_kind, s1_nak, s1_epsn,
            o_valid, o_verdict, o_nak_psn, o_nak
        );
        // stage 1: narrow compares
        self.s1_valid.d.next = self.in_valid.val();
        self.s1_eq.d.next = self.psn.val() == self.epsn.val();
        self.s1_x23.d.next = self.psn.val().get_bit(23) ^ self.epsn.val().get_bit(23);
        self.s1_lt0.d.next = self.psn.val().get_bits::<8>(0) < self.epsn.val().get_bits::<8>(0);
        self.s1_lt1.d.next = self.psn.val().get_bits::<8>(8) < self.epsn.val().get_bits::<8>(8);
        self.s1_eq1.d.next = self.psn.val().get_bits::<8>(8) == self.epsn.val().get_bits::<8>(8);
        self.s1_lt2.d.next = self.psn.val().get_bits::<7>(16) < self.epsn.val().get_bits::<7>(16);
        self.s1_eq2.d.next = self.psn.val().get_bits::<7>(16) == self.epsn.val().get_bits::<7>(16);
        self.s1_kind.d.next = self.kind.val();
        self.s1_nak.d.next = self.sent_psn_nak.val();
        self.s1_epsn.d.next = self.epsn.val();
        // stage 2: borrow into bit 23 = psn[22:0] < epsn[22:0]; sign of psn - epsn
        self.lt.next = self.s1_lt2.q.val()
            | (self.s1_eq2.q.val() & (self.s1_lt1.q.val() | (self.s1_eq1.q.val() & self.s1_lt0.q.val())));
        self.neg.next = self.s1_x23.q.val() ^ self.lt.val();
        self.o_valid.d.next = self.s1_valid.q.val();
        self.o_nak_psn.d.next = self.s1_epsn.q.val();
        self.o_verdict.d.next = self.v_in_order.val();
        self.o_nak.d.next = self.s1_nak.q.val();
        if self.s1_eq.q.val() {
            self.o_verdict.d.next = self.v_in_order.val();
            self.o_nak.d.next = false;
        } else if self.neg.val() {
            if self.s1_kind.q.val() == self.k_send_write.val() {
                self.o_verdict.d.next = self.v_dup_ack.val();
            } else {
                self.o_verdict.d.next = self.v_dup_resource.val();
            }
        } else {
            if self.s1_nak.q.val() {
                self.o_verdict.d.next = self.v_drop_oos.val();
            } else {
                self.o_verdict.d.next = self.v_nak_seq.val();
            }
            self.o_nak.d.next = true;
        }
        self.out_valid.next = self.o_valid.q.val();
        self.verdict.next = self.o_verdict.q.val();
        self.nak_psn.next = self.o_nak_psn.q.val();
        self.sent_psn_nak_next.next = self.o_nak.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;
    use testbench::model::{psn_add, psn_compare};

    /// Pairs that hit every edge: equal, ±1, ±(2^23 - 1), ±2^23, ±(2^23 + 1), 0/0xFFFFFF wrap, chunk
    /// boundaries (the borrow has to ripple across the 8-bit chunks), and plain random ones.
    fn stimulus(n: usize, seed: u64) -> Vec<(u32, u32, u64, bool)> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let deltas: [u32; 14] = [
            0,
            1,
            0xFF_FFFF,
            (1 << 23) - 1,
            1 << 23,
            (1 << 23) + 1,
            0x80_0002,
            0x7F_FFFE,
            0x100,
            0xFF_FF00,
            0x1_0000,
            0xFF_0000,
            0xFF,
            0xFF_FF01,
        ];
        let bases: [u32; 8] = [0, 0xFF_FFFF, 0x7F_FFFF, 0x80_0000, 0xFF, 0xFFFF, 0x1_0000, 0x80_00FF];
        let mut v = Vec::new();
        for i in 0..n {
            let epsn = if i % 3 == 0 { bases[rng.gen_range(0..bases.len())] } else { rng.gen_range(0..1 << 24) };
            let psn = if i % 2 == 0 {
                psn_add(epsn, deltas[rng.gen_range(0..deltas.len())])
            } else if i % 5 == 1 {
                psn_add(epsn, rng.gen_range(0..0x400)) // near, either side after wrap
            } else if i % 5 == 3 {
                psn_add(epsn, rng.gen_range(0xFF_FC00..0x100_0000))
            } else {
                rng.gen_range(0..1 << 24)
            };
            v.push((psn, epsn, rng.gen_range(0..3u64), rng.gen_bool(0.5)));
        }
        v
    }

    #[test]
    fn psn_check_matches_psn_compare_and_check_psn() {
        let mut u = PsnCheck::default();
        u.connect_all();
        let stim = stimulus(40_000, 0x95C);
        let mut pipe: VecDeque<Option<(u32, u32, u64, bool)>> = VecDeque::new();
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut seen, mut i) = (0usize, 0usize);
        let mut classes = [0usize; 5];
        while seen < stim.len() {
            let x = if i < stim.len() && rng.gen_ratio(7, 8) {
                i += 1;
                Some(stim[i - 1])
            } else {
                None
            };
            let (psn, epsn, kind, nak) = x.unwrap_or((0, 0, 0, false));
            u.in_valid.next = x.is_some();
            u.psn.next = bits::<24>(psn as u64);
            u.epsn.next = bits::<24>(epsn as u64);
            u.kind.next = bits::<2>(kind);
            u.sent_psn_nak.next = nak;
            u.clock.next = false.into();
            assert!(simulate(&mut u, 20));
            if pipe.len() == 2 {
                let old = pipe.pop_front().unwrap();
                assert_eq!(u.out_valid.val(), old.is_some());
                if let Some((psn, epsn, kind, nak)) = old {
                    let (v, n) = reference(psn, epsn, kind, nak);
                    let d = psn_compare(psn, epsn);
                    assert_eq!(
                        (u.verdict.val().to_u64(), u.sent_psn_nak_next.val()),
                        (v, n),
                        "psn {psn:06x} epsn {epsn:06x} kind {kind} nak {nak} (psn_compare {d})"
                    );
                    if v == VERDICT_NAK_SEQ {
                        assert_eq!(u.nak_psn.val().to_u64(), epsn as u64);
                    }
                    classes[v as usize] += 1;
                    seen += 1;
                }
            }
            pipe.push_back(x);
            u.clock.next = true.into();
            assert!(simulate(&mut u, 20));
        }
        assert!(classes.iter().all(|&c| c > 1000), "verdict classes {classes:?}");
    }

    #[test]
    fn window_edges_of_psn_compare() {
        // The model's comparison at the exact window edges, as the RTL sees it (diff bit 23 is the sign).
        assert!(psn_compare(psn_add(5, (1 << 23) - 1), 5) > 0);
        assert!(psn_compare(psn_add(5, 1 << 23), 5) < 0);
        assert!(psn_compare(0, 0xFF_FFFF) > 0);
        assert!(psn_compare(0xFF_FFFF, 0) < 0);
        for (psn, epsn, want) in [
            (0x80_0005u32, 5u32, VERDICT_DUP_ACK),
            (0x80_0004, 5, VERDICT_NAK_SEQ),
            (0, 0xFF_FFFF, VERDICT_NAK_SEQ),
            (0xFF_FFFF, 0, VERDICT_DUP_ACK),
            (0x12_3456, 0x12_3456, VERDICT_IN_ORDER),
        ] {
            assert_eq!(reference(psn, epsn, KIND_SEND_WRITE, false).0, want, "{psn:x} {epsn:x}");
        }
    }
}
