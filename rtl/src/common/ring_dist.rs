//! Ring Distance: whether the distance `a - b` of two 16-bit ring indices (mod 2^16) is below a constant `K`,
//! one cycle after `a` and `b`, and the distance's low four bits. The subtract is two 8-bit ones in registers
//! (the low byte with its borrow, the high byte without and with that borrow), because a full-width subtract
//! maps to 7 LUT6 levels in the generic flow, past the 322 MHz budget of 6; the output picks the high byte by
//! the borrow. The Responder uses it for "the ring holds the index PF_DEPTH past the consumer index" (`pi - ci`)
//! and for a doorbell's offset in its QP's prefetch window.

use crate::common::consts::k;
use rust_hdl::prelude::*;

#[derive(LogicBlock)]
pub struct RingDist {
    pub clock: Signal<In, Clock>,
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    /// (a - b) mod 2^16 < K, for the a and b of the cycle before
    pub below: Signal<Out, Bit>,
    /// (a - b) mod 16, for the a and b of the cycle before
    pub lo4: Signal<Out, Bits<4>>,
    lo: DFF<Bits<9>>,
    h0: DFF<Bits<8>>,
    h1: DFF<Bits<8>>,
    k: Constant<Bits<8>>,
    zero8: Constant<Bits<8>>,
}

impl RingDist {
    /// `k` is at most 255.
    pub fn new(k_below: u8) -> Self {
        Self {
            clock: Default::default(),
            a: Default::default(),
            b: Default::default(),
            below: Default::default(),
            lo4: Default::default(),
            lo: Default::default(),
            h0: Default::default(),
            h1: Default::default(),
            k: k(k_below as u64),
            zero8: k(0),
        }
    }
}

impl Logic for RingDist {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, lo, h0, h1);
        // low byte with the borrow out in bit 8; high byte as if no borrow (h0) and with one (h1 = h0 - 1)
        self.lo.d.next = bit_cast::<9, 8>(self.a.val().get_bits::<8>(0)) - bit_cast::<9, 8>(self.b.val().get_bits::<8>(0));
        self.h0.d.next = self.a.val().get_bits::<8>(8) - self.b.val().get_bits::<8>(8);
        self.h1.d.next = self.a.val().get_bits::<8>(8) + !self.b.val().get_bits::<8>(8);
        self.below.next = (self.lo.q.val().get_bits::<8>(0) < self.k.val())
            & ((!self.lo.q.val().get_bit(8) & (self.h0.q.val() == self.zero8.val()))
                | (self.lo.q.val().get_bit(8) & (self.h1.q.val() == self.zero8.val())));
        self.lo4.next = self.lo.q.val().get_bits::<4>(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against Rust's wrapping subtract: random index pairs, and pairs near every byte and ring wrap (the
    /// borrow cases), for the two constants the Responder uses.
    #[test]
    fn distance_below_matches_a_wrapping_subtract() {
        for kb in [8u8, 9] {
            let mut d = RingDist::new(kb);
            d.connect_all();
            let mut s = 0x2545_f491_4f6c_dd1du64;
            let (mut near, mut far) = (0, 0);
            for i in 0..6000u32 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let b = match i % 3 {
                    0 => s as u16,
                    // around a byte boundary of b
                    1 => ((s as u16) & 0xFF00).wrapping_add((s >> 16) as u16 % 24).wrapping_sub(12),
                    _ => 0xFFF4u16.wrapping_add((s >> 16) as u16 % 24),
                };
                // a within 20 or 300 of b on either side, or anywhere
                let a = match i % 5 {
                    0 | 1 => b.wrapping_add(((s >> 40) as u16) % 40).wrapping_sub(20),
                    2 | 3 => b.wrapping_add(((s >> 40) as u16) % 600).wrapping_sub(300),
                    _ => (s >> 32) as u16,
                };
                d.a.next = a.to_bits();
                d.b.next = b.to_bits();
                d.clock.next = false.into();
                assert!(simulate(&mut d, 10));
                d.clock.next = true.into();
                assert!(simulate(&mut d, 10));
                // (the edge just simulated registered this a and b)
                let dist = a.wrapping_sub(b);
                assert_eq!(d.below.val(), dist < kb as u16, "a {a:#x} b {b:#x} K {kb}");
                assert_eq!(d.lo4.val().to_u64(), (dist & 15) as u64, "a {a:#x} b {b:#x}");
                if dist < kb as u16 {
                    near += 1
                } else {
                    far += 1
                }
                // and nothing of the next a and b shows before its edge
                if i == 0 {
                    d.a.next = b.wrapping_add(3).to_bits();
                    assert!(simulate(&mut d, 10));
                    assert_eq!(d.below.val(), dist < kb as u16, "the outputs are registered");
                }
            }
            assert!(near > 50 && far > 50, "both answers exercised: {near} below, {far} not");
        }
        let mut v = RingDist::new(8);
        v.connect_all();
        yosys_validate("ring_dist", &generate_verilog(&v)).unwrap();
    }
}
