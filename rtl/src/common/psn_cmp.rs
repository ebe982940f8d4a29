//! PSN compare: rxe `psn_compare(a, b)` (the sign of `a - b` mod 2^24) in two registered stages, so a 24-bit
//! compare costs no more LUT levels than its 8-bit chunks. The Responder (duplicate READ resources), the
//! Completer (response PSNs against the WQE records and `comp_psn`, the timer deadlines) and WQE Check use it.

use rust_hdl::prelude::*;

crate::logic_block! {
    /// rxe `psn_compare(a, b)` in two registered stages: `neg` (< 0), `eq`, `gt` (> 0) two clocks after `a`, `b`.
    pub struct PsnCmp {
        pub clock: Signal<In, Clock>,
        pub a: Signal<In, Bits<24>>,
        pub b: Signal<In, Bits<24>>,
        pub neg: Signal<Out, Bit>,
        pub eq: Signal<Out, Bit>,
        pub gt: Signal<Out, Bit>,
        s_eq: DFF<Bit>,
        s_x23: DFF<Bit>,
        s_lt0: DFF<Bit>,
        s_lt1: DFF<Bit>,
        s_eq1: DFF<Bit>,
        s_lt2: DFF<Bit>,
        s_eq2: DFF<Bit>,
        o_neg: DFF<Bit>,
        o_eq: DFF<Bit>,
        o_gt: DFF<Bit>,
        lt: Signal<Local, Bit>,
        sign: Signal<Local, Bit>,
    }
}

impl Logic for PsnCmp {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, s_eq, s_x23, s_lt0, s_lt1, s_eq1, s_lt2, s_eq2, o_neg, o_eq, o_gt);
        self.s_eq.d.next = self.a.val() == self.b.val();
        self.s_x23.d.next = self.a.val().get_bit(23) ^ self.b.val().get_bit(23);
        self.s_lt0.d.next = self.a.val().get_bits::<8>(0) < self.b.val().get_bits::<8>(0);
        self.s_lt1.d.next = self.a.val().get_bits::<8>(8) < self.b.val().get_bits::<8>(8);
        self.s_eq1.d.next = self.a.val().get_bits::<8>(8) == self.b.val().get_bits::<8>(8);
        self.s_lt2.d.next = self.a.val().get_bits::<7>(16) < self.b.val().get_bits::<7>(16);
        self.s_eq2.d.next = self.a.val().get_bits::<7>(16) == self.b.val().get_bits::<7>(16);
        // bit 23 of a - b: the top bits' xor and the borrow out of bits 22:0
        self.lt.next = self.s_lt2.q.val() | (self.s_eq2.q.val() & (self.s_lt1.q.val() | (self.s_eq1.q.val() & self.s_lt0.q.val())));
        self.sign.next = self.s_x23.q.val() ^ self.lt.val();
        self.o_neg.d.next = self.sign.val();
        self.o_eq.d.next = self.s_eq.q.val();
        self.o_gt.d.next = !self.sign.val() & !self.s_eq.q.val();
        self.neg.next = self.o_neg.q.val();
        self.eq.next = self.o_eq.q.val();
        self.gt.next = self.o_gt.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sign rxe's `psn_compare` gives, across the 2^24 wrap, two clocks after the operands.
    #[test]
    fn psn_cmp_is_rxe_psn_compare_two_clocks_later() {
        let mut u = PsnCmp::default();
        u.connect_all();
        let cases: Vec<(u32, u32)> = vec![
            (0, 0), (1, 0), (0, 1), (0xFF_FFFF, 0), (0, 0xFF_FFFF), (0x80_0000, 0), (0, 0x80_0000), (0x7F_FFFF, 0),
            (0x12_3456, 0x12_3455), (0x12_3400, 0x12_34FF), (0x00_0100, 0x00_00FF), (0xFF_0000, 0x00_FFFF),
        ];
        let mut x: u32 = 0x1234_5678;
        let mut all = cases.clone();
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            all.push((x & 0xFF_FFFF, (x >> 7) & 0xFF_FFFF));
        }
        for (a, b) in all {
            u.a.next = bits(a as u64);
            u.b.next = bits(b as u64);
            for _ in 0..2 {
                u.clock.next = false.into();
                simulate(&mut u, 10);
                u.clock.next = true.into();
                simulate(&mut u, 10);
            }
            let d = (a.wrapping_sub(b) << 8) as i32;
            assert_eq!((u.neg.val(), u.eq.val(), u.gt.val()), (d < 0, d == 0, d > 0), "psn_compare({a:#x}, {b:#x})");
        }
    }
}
