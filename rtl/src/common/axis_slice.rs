//! AXIS register slice (a two-entry skid buffer) for the 512-bit datapath: every output and the input's
//! `tready` come from flip-flops, so a ready chain ends here instead of running through the block upstream.
//! One beat per cycle when the sink takes one per cycle; one cycle of latency. The output register holds the
//! beat on offer; when the sink stalls, the beat taken in that cycle goes to the skid register and `s.tready`
//! falls in the next cycle (`tready = !skid_valid`).
//!
//! Used in the top between RX Parse's payload output and the Completer/Responder payload dispatch: the
//! Scatter Path's DMA-write handshake no longer reaches RX Parse's ICRC queue in one cycle. [`HoldReg`] does
//! the same for RX Parse's header stream.

use rust_hdl::prelude::*;

use crate::common::axis::{AxisSink, AxisSource};

#[derive(LogicBlock, Default)]
pub struct AxisSlice {
    pub clock: Signal<In, Clock>,
    pub s: AxisSink,
    pub m: AxisSource,
    o_v: DFF<Bit>,
    o_d: DFF<Bits<512>>,
    o_k: DFF<Bits<64>>,
    o_l: DFF<Bit>,
    k_v: DFF<Bit>,
    k_d: DFF<Bits<512>>,
    k_k: DFF<Bits<64>>,
    k_l: DFF<Bit>,
}

impl Logic for AxisSlice {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, o_v, o_d, o_k, o_l, k_v, k_d, k_k, k_l);
        self.s.tready.next = !self.k_v.q.val();
        self.m.tvalid.next = self.o_v.q.val();
        self.m.tdata.next = self.o_d.q.val();
        self.m.tkeep.next = self.o_k.q.val();
        self.m.tlast.next = self.o_l.q.val();
        if self.m.tready.val() | !self.o_v.q.val() {
            // the output register is free after this cycle: the skid beat first, else the input's
            if self.k_v.q.val() {
                self.o_v.d.next = true;
                self.o_d.d.next = self.k_d.q.val();
                self.o_k.d.next = self.k_k.q.val();
                self.o_l.d.next = self.k_l.q.val();
                self.k_v.d.next = false;
            } else {
                self.o_v.d.next = self.s.tvalid.val();
                self.o_d.d.next = self.s.tdata.val();
                self.o_k.d.next = self.s.tkeep.val();
                self.o_l.d.next = self.s.tlast.val();
            }
        } else if self.s.tvalid.val() & !self.k_v.q.val() {
            // the sink stalls: the beat taken now waits in the skid register
            self.k_v.d.next = true;
            self.k_d.d.next = self.s.tdata.val();
            self.k_k.d.next = self.s.tkeep.val();
            self.k_l.d.next = self.s.tlast.val();
        }
    }
}

/// A one-entry register stage for a valid/ready stream of any word `T`: `m_valid`, `m_data` and `s_ready`
/// all come from flip-flops (`s_ready = !valid`), and `m_ready` reaches only the valid flag, so neither
/// side's handshake logic reaches the other's in a cycle. It takes a word every other cycle at most (a word
/// taken in cycle t frees the register at t + 1, the next word is loaded then): half the flip-flops of a
/// skid buffer, for streams that cannot go faster anyway. Used in the top for RX Parse's header stream (one
/// header per frame; the shortest frame takes more than 2 core cycles on the wire).
#[derive(LogicBlock, Default)]
pub struct HoldReg<T: Synth> {
    pub clock: Signal<In, Clock>,
    pub s_valid: Signal<In, Bit>,
    pub s_ready: Signal<Out, Bit>,
    pub s_data: Signal<In, T>,
    pub m_valid: Signal<Out, Bit>,
    pub m_ready: Signal<In, Bit>,
    pub m_data: Signal<Out, T>,
    v: DFF<Bit>,
    w: DFF<T>,
}

impl<T: Synth> Logic for HoldReg<T> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, v, w);
        self.s_ready.next = !self.v.q.val();
        self.m_valid.next = self.v.q.val();
        self.m_data.next = self.w.q.val();
        if !self.v.q.val() {
            self.v.d.next = self.s_valid.val();
            self.w.d.next = self.s_data.val();
        } else if self.m_ready.val() {
            self.v.d.next = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::keep_bits;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn beat(i: u64) -> (Bits<512>, Bits<64>, bool) {
        let mut d = Bits::<512>::default();
        d.set_bits::<64>(0, bits::<64>(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        d.set_bits::<64>(448, bits::<64>(i));
        (d, keep_bits(if i % 5 == 4 { (1 << (i % 64)) - 1 | 1 } else { u64::MAX }), i % 5 == 4)
    }

    /// Run `n` beats through the slice with the given valid / ready probabilities (percent); returns the
    /// beats out in order and the cycles taken. Checks on the way that `s.tready` does not follow `m.tready`
    /// within a cycle.
    fn run(n: u64, pv: u32, pr: u32, seed: u64) -> (Vec<(Bits<512>, Bits<64>, bool)>, u64) {
        let mut u = AxisSlice::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(seed);
        let (mut sent, mut out, mut cycles) = (0u64, Vec::new(), 0u64);
        while (out.len() as u64) < n {
            assert!(cycles < 100 * n + 100, "slice hung");
            let v = sent < n && rng.gen_range(0..100) < pv;
            let r = rng.gen_range(0..100) < pr;
            let (d, k, l) = beat(sent);
            u.s.tvalid.next = v;
            u.s.tdata.next = d;
            u.s.tkeep.next = k;
            u.s.tlast.next = l;
            u.clock.next = false.into();
            u.m.tready.next = !r;
            assert!(simulate(&mut u, 100));
            let ready_other = u.s.tready.val();
            u.m.tready.next = r;
            assert!(simulate(&mut u, 100));
            assert_eq!(u.s.tready.val(), ready_other, "s.tready follows m.tready combinationally");
            if u.m.tvalid.val() && r {
                out.push((u.m.tdata.val(), u.m.tkeep.val(), u.m.tlast.val()));
            }
            if v && u.s.tready.val() {
                sent += 1;
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 100));
            cycles += 1;
        }
        (out, cycles)
    }

    #[test]
    fn slice_keeps_every_beat_in_order_under_backpressure() {
        for (seed, pv, pr) in [(1, 50, 50), (2, 90, 30), (3, 30, 90), (4, 100, 60), (5, 70, 100)] {
            let (out, _) = run(400, pv, pr, seed);
            let want: Vec<_> = (0..400).map(beat).collect();
            assert_eq!(out, want, "seed {seed}");
        }
    }

    /// The hold register against a queue: every word once, in order, under random valid and ready; no word
    /// taken while one is held; `s_ready` never follows `m_ready` within a cycle; back to back it passes a
    /// word every other cycle.
    #[test]
    fn hold_register_passes_every_word_in_order() {
        for (seed, pv, pr) in [(1u64, 50u32, 50u32), (2, 100, 100), (3, 90, 30), (4, 30, 90)] {
            let mut u = HoldReg::<Bits<40>>::default();
            u.connect_all();
            let mut rng = SmallRng::seed_from_u64(seed);
            let (mut sent, mut got, mut cycles) = (0u64, Vec::new(), 0u64);
            while got.len() < 300 {
                assert!(cycles < 100_000, "hold register hung");
                let v = sent < 300 && rng.gen_range(0..100) < pv;
                let r = rng.gen_range(0..100) < pr;
                u.s_valid.next = v;
                u.s_data.next = bits::<40>(sent * 0x1_0001 + 7);
                u.clock.next = false.into();
                u.m_ready.next = !r;
                assert!(simulate(&mut u, 100));
                let ready_other = u.s_ready.val();
                u.m_ready.next = r;
                assert!(simulate(&mut u, 100));
                assert_eq!(u.s_ready.val(), ready_other, "s_ready follows m_ready combinationally");
                assert!(!(u.s_ready.val() && u.m_valid.val()), "a word taken while one is held");
                if u.m_valid.val() && r {
                    got.push(u.m_data.val().to_u64());
                }
                if v && u.s_ready.val() {
                    sent += 1;
                }
                u.clock.next = true.into();
                assert!(simulate(&mut u, 100));
                cycles += 1;
            }
            let want: Vec<u64> = (0..300).map(|i| i * 0x1_0001 + 7).collect();
            assert_eq!(got, want, "seed {seed}");
            if pv == 100 && pr == 100 {
                assert_eq!(cycles, 600, "one word per two cycles back to back");
            }
        }
    }

    #[test]
    fn slice_passes_one_beat_per_cycle() {
        let (out, cycles) = run(1000, 100, 100, 9);
        assert_eq!(out.len(), 1000);
        // one cycle of latency, then a beat every cycle
        assert_eq!(cycles, 1001);
    }
}
