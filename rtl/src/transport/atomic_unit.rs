//! Atomic Unit, the part that computes: the **Atomic ALU**, the new value of an 8-byte target
//! from its original value and the request's operands, for the four atomics the RNIC answers:
//!
//! | `op` | verb | new value |
//! |---|---|---|
//! | [`ALU_CAS`] | COMPARE_SWAP (0x13) | `orig == a ? b : orig` |
//! | [`ALU_FAA`] | FETCH_ADD (0x14) | `orig + a` (mod 2^64) |
//! | [`ALU_MCAS`] | masked compare-and-swap | `((orig ^ a) & am) == 0 ? (orig & !bm) | (b & bm) : orig` |
//! | [`ALU_MFAA`] | masked fetch-and-add | per-field `orig + a`, no carry out of a bit set in `am` (a field's MSB) |
//!
//! `a` is the compare (CAS) or add (FAA) operand, `b` the swap operand, `am` the compare mask (MCAS) or the
//! field-boundary mask (MFAA), `bm` the swap mask (MCAS); the plain forms ignore the masks. Semantics as the
//! golden model's `testbench::model::responder::{masked_cmp_swap, masked_fetch_add}` (the Linux masked-atomics
//! patch, Mellanox MskCmpSwap / MFetchAdd).
//!
//! **One adder for both adds.** A field-bounded add is a plain add of the operands with the boundary bits
//! cleared, corrected on those bits: `((orig & !M) + (a & !M)) ^ ((orig ^ a) & M)`; a carry into a boundary
//! bit lands there (both operand bits are 0) and goes no further, and the boundary bit's sum is its two operand
//! bits and that carry. FETCH_ADD is the same with `M = 0`. So the ALU is one [`PipeAdd64`], a 64-bit masked
//! compare and muxes.
//!
//! **Pipeline** (<= 6 LUT6 levels, one operation per cycle, fixed latency [`ALU_LATENCY`]): the inputs are
//! registered; then the masked add operands, the boundary correction, the compare (xor-and-mask, a 64-input
//! NOR: 4 levels) and the compare-and-swap result are registered; the adder takes 3 cycles while the rest
//! waits beside it; the last stage picks the add or the swap result. `out_valid` follows `in_valid`, in order.
//!
//! The rest of the Atomic Unit is in the Responder (`responder.rs`, states `AtRd`..`AtAck`): the 64-byte
//! block holding the target read through its DMA read port, one 8-byte Scatter write-back, one packet at a
//! time (so an atomic is indivisible for every other operation of this RNIC), and the original value saved
//! in the QP's READ resource ring, from which a duplicate is answered. As a requester, the Completer writes an
//! ATOMIC ACKNOWLEDGE's original value to the WQE's local buffer.

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::transport::key_cache::PipeAdd64;

/// `op` codes of the [`AtomicAlu`].
pub const ALU_CAS: u64 = 0;
pub const ALU_FAA: u64 = 1;
pub const ALU_MCAS: u64 = 2;
pub const ALU_MFAA: u64 = 3;
/// Cycles from `in_valid` to its `out_valid`.
pub const ALU_LATENCY: usize = 6;

/// The ALU's result stage inputs, waiting beside the adder.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct AluWait {
    pub valid: Bit,
    pub add: Bit,
    pub orig: Bits<64>,
    /// The add's boundary correction `(orig ^ a) & M`.
    pub fix: Bits<64>,
    /// The compare-and-swap result.
    pub swapped: Bits<64>,
}

crate::logic_block! {
    pub struct AtomicAlu {
        pub clock: Signal<In, Clock>,
        pub in_valid: Signal<In, Bit>,
        pub op: Signal<In, Bits<2>>,
        pub orig: Signal<In, Bits<64>>,
        pub a: Signal<In, Bits<64>>,
        pub b: Signal<In, Bits<64>>,
        pub am: Signal<In, Bits<64>>,
        pub bm: Signal<In, Bits<64>>,
        pub out_valid: Signal<Out, Bit>,
        /// `result`: the value to write back; `out_orig`: the original (the ATOMIC_ACKNOWLEDGE's payload), of one operation.
        pub result: Signal<Out, Bits<64>>,
        pub out_orig: Signal<Out, Bits<64>>,
        // stage 1: the inputs
        r_v: DFF<Bit>,
        r_op: DFF<Bits<2>>,
        r_orig: DFF<Bits<64>>,
        r_a: DFF<Bits<64>>,
        r_b: DFF<Bits<64>>,
        r_am: DFF<Bits<64>>,
        r_bm: DFF<Bits<64>>,
        // stage 2: adder operands and the rest
        x: DFF<Bits<64>>,
        y: DFF<Bits<64>>,
        w0: DFF<AluWait>,
        // beside the adder
        w1: DFF<AluWait>,
        w2: DFF<AluWait>,
        w3: DFF<AluWait>,
        // result
        o_v: DFF<Bit>,
        o_new: DFF<Bits<64>>,
        o_orig: DFF<Bits<64>>,
        add: PipeAdd64,
        l_m: Signal<Local, Bits<64>>,
        l_c: Signal<Local, Bits<64>>,
        l_eq: Signal<Local, Bit>,
        k_faa: Constant<Bits<2>> = k(ALU_FAA),
        k_mcas: Constant<Bits<2>> = k(ALU_MCAS),
        k_mfaa: Constant<Bits<2>> = k(ALU_MFAA),
        k0: Constant<Bits<64>> = k(0),
    }
}

impl Logic for AtomicAlu {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, r_v, r_op, r_orig, r_a, r_b, r_am, r_bm, x, y, w0, w1, w2, w3, o_v, o_new, o_orig);
        clock!(self, clock, add);
        // stage 1: the inputs
        self.r_v.d.next = self.in_valid.val();
        self.r_op.d.next = self.op.val();
        self.r_orig.d.next = self.orig.val();
        self.r_a.d.next = self.a.val();
        self.r_b.d.next = self.b.val();
        self.r_am.d.next = self.am.val();
        self.r_bm.d.next = self.bm.val();
        // stage 2: the boundary mask (MFAA) and the compare mask (MCAS; CAS compares every bit)
        self.l_m.next = self.k0.val();
        if self.r_op.q.val() == self.k_mfaa.val() {
            self.l_m.next = self.r_am.q.val();
        }
        self.l_c.next = !self.k0.val();
        if self.r_op.q.val() == self.k_mcas.val() {
            self.l_c.next = self.r_am.q.val();
        }
        self.l_eq.next = ((self.r_orig.q.val() ^ self.r_a.q.val()) & self.l_c.val()) == self.k0.val();
        self.x.d.next = self.r_orig.q.val() & !self.l_m.val();
        self.y.d.next = self.r_a.q.val() & !self.l_m.val();
        self.w0.d.next.valid = self.r_v.q.val();
        self.w0.d.next.add = (self.r_op.q.val() == self.k_faa.val()) | (self.r_op.q.val() == self.k_mfaa.val());
        self.w0.d.next.orig = self.r_orig.q.val();
        self.w0.d.next.fix = (self.r_orig.q.val() ^ self.r_a.q.val()) & self.l_m.val();
        // CAS swaps every bit, MCAS the bits of its swap mask
        self.w0.d.next.swapped = self.r_orig.q.val();
        if self.l_eq.val() {
            if self.r_op.q.val() == self.k_mcas.val() {
                self.w0.d.next.swapped =
                    (self.r_orig.q.val() & !self.r_bm.q.val()) | (self.r_b.q.val() & self.r_bm.q.val());
            } else {
                self.w0.d.next.swapped = self.r_b.q.val();
            }
        }
        // the adder (3 cycles), the rest waits beside it
        self.add.a.next = self.x.q.val();
        self.add.b.next = self.y.q.val();
        self.add.cin.next = false;
        self.w1.d.next = self.w0.q.val();
        self.w2.d.next = self.w1.q.val();
        self.w3.d.next = self.w2.q.val();
        // result
        self.o_v.d.next = self.w3.q.val().valid;
        self.o_orig.d.next = self.w3.q.val().orig;
        self.o_new.d.next = self.w3.q.val().swapped;
        if self.w3.q.val().add {
            self.o_new.d.next = self.add.sum.val() ^ self.w3.q.val().fix;
        }
        self.out_valid.next = self.o_v.q.val();
        self.result.next = self.o_new.q.val();
        self.out_orig.next = self.o_orig.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use testbench::model::responder::{masked_cmp_swap, masked_fetch_add};

    /// The golden model's result for one operation.
    fn golden(op: u64, orig: u64, a: u64, b: u64, am: u64, bm: u64) -> u64 {
        match op {
            ALU_CAS => {
                if orig == a {
                    b
                } else {
                    orig
                }
            }
            ALU_FAA => orig.wrapping_add(a),
            ALU_MCAS => masked_cmp_swap(orig, a, am, b, bm),
            _ => masked_fetch_add(orig, a, am),
        }
    }

    /// Operands that reach the corners: all ones, all zeros, equal (CAS hits), near-equal under the mask,
    /// carries through whole fields, boundaries at bit 63 and bit 0, random fields.
    fn operand(rng: &mut SmallRng, like: u64) -> u64 {
        match rng.gen_range(0..8) {
            0 => 0,
            1 => u64::MAX,
            2 => like,
            3 => like ^ (1 << rng.gen_range(0..64)),
            4 => u64::MAX >> rng.gen_range(0..64),
            5 => 1 << rng.gen_range(0..64),
            _ => rng.gen(),
        }
    }

    /// 100,000 random operand sets (a quarter of each op, one per cycle, back to back) against the golden
    /// model's `masked_cmp_swap` / `masked_fetch_add` and plain CAS / FAA; every result in order, exactly
    /// ALU_LATENCY cycles after its input.
    #[test]
    fn atomic_alu_matches_the_golden_model_on_100k_operand_sets() {
        let mut u = AtomicAlu::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(0xA70);
        let mut want: std::collections::VecDeque<(usize, u64, u64, u64)> = Default::default();
        let n = 100_000usize;
        let (mut got, mut cyc, mut issued) = (0usize, 0usize, 0usize);
        let mut per_op = [0usize; 4];
        while got < n {
            let go = issued < n && rng.gen_ratio(7, 8);
            if go {
                let op = rng.gen_range(0..4u64);
                let orig: u64 = operand(&mut rng, 0);
                let a = operand(&mut rng, orig);
                let b: u64 = operand(&mut rng, orig);
                let am = operand(&mut rng, 0);
                let bm = operand(&mut rng, 0);
                u.op.next = bits(op);
                u.orig.next = bits(orig);
                u.a.next = bits(a);
                u.b.next = bits(b);
                u.am.next = bits(am);
                u.bm.next = bits(bm);
                want.push_back((cyc, op, orig, golden(op, orig, a, b, am, bm)));
                per_op[op as usize] += 1;
                issued += 1;
            }
            u.in_valid.next = go;
            u.clock.next = false.into();
            simulate(&mut u, 200);
            u.clock.next = true.into();
            simulate(&mut u, 200);
            cyc += 1;
            if u.out_valid.val() {
                let (at, op, orig, new) = want.pop_front().expect("a result nobody asked for");
                assert_eq!(cyc - at, ALU_LATENCY, "latency");
                assert_eq!(u.result.val().to_u64(), new, "op {op}, orig {orig:#x} (result {got})");
                assert_eq!(u.out_orig.val().to_u64(), orig);
                got += 1;
            }
            assert!(cyc < 2 * n + 100, "results stopped");
        }
        assert!(want.is_empty());
        assert!(per_op.iter().all(|&c| c > 20_000), "{per_op:?}");
    }

    /// The corner cases of the ALU, by hand: masks all ones / all zeros, a carry stopped at a field boundary.
    #[test]
    fn atomic_alu_corner_cases() {
        let mut u = AtomicAlu::default();
        u.connect_all();
        let cases: [(u64, u64, u64, u64, u64, u64, u64); 8] = [
            // op, orig, a, b, am, bm, want
            (ALU_CAS, 5, 5, 9, 0, 0, 9),
            (ALU_CAS, 5, 6, 9, 0, 0, 5),
            (ALU_FAA, u64::MAX, 1, 0, 0, 0, 0),
            // masked CAS, compare mask 0: always equal; swap mask 0: nothing swapped
            (ALU_MCAS, 0x1234, 0xFFFF, 0xABCD, 0, u64::MAX, 0xABCD),
            (ALU_MCAS, 0x1234, 0x1234, 0xABCD, u64::MAX, 0, 0x1234),
            // two 32-bit fields (boundaries at bits 31 and 63): the low field wraps without touching the high
            (ALU_MFAA, 0x0000_0001_FFFF_FFFF, 1, 0, 0x8000_0000_8000_0000, 0, 0x0000_0001_0000_0000),
            // all-ones boundary mask: every bit its own field (an XOR)
            (ALU_MFAA, 0b1011, 0b0110, 0, u64::MAX, 0, 0b1101),
            // all-zeros boundary mask: a plain 64-bit add
            (ALU_MFAA, u64::MAX, 2, 0, 0, 0, 1),
        ];
        for (i, &(op, orig, a, b, am, bm, want)) in cases.iter().enumerate() {
            u.in_valid.next = true;
            u.op.next = bits(op);
            u.orig.next = bits(orig);
            u.a.next = bits(a);
            u.b.next = bits(b);
            u.am.next = bits(am);
            u.bm.next = bits(bm);
            for c in 0..ALU_LATENCY {
                u.clock.next = false.into();
                simulate(&mut u, 200);
                u.clock.next = true.into();
                simulate(&mut u, 200);
                u.in_valid.next = false;
                assert_eq!(u.out_valid.val(), c + 1 == ALU_LATENCY);
            }
            assert_eq!(u.result.val().to_u64(), want, "case {i}");
        }
    }

    #[test]
    fn atomic_alu_emits_verilog() {
        let v = crate::verilog_of(&mut AtomicAlu::default());
        assert!(v.contains("module top"));
    }
}
