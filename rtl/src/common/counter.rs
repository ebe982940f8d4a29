//! Event counter, 32 bits, split into two 16-bit halves with a registered carry so that no path has more than
//! a 16-bit increment (the 322 MHz depth budget). The high half catches up one cycle after the low half wraps;
//! the value is exact whenever the counter has been idle for a cycle.

use crate::common::consts::k;
use rust_hdl::prelude::*;

crate::logic_block! {
    pub struct EventCounter {
        pub clock: Signal<In, Clock>,
        /// Count one event this cycle.
        pub inc: Signal<In, Bit>,
        pub value: Signal<Out, Bits<32>>,
        lo: DFF<Bits<16>>,
        hi: DFF<Bits<16>>,
        carry: DFF<Bit>,
        one: Constant<Bits<16>> = k(1),
        all_ones: Constant<Bits<16>> = k(0xFFFF),
    }
}

impl Logic for EventCounter {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, lo, hi, carry);
        self.value.next = (bit_cast::<32, 16>(self.hi.q.val()) << 16) | bit_cast::<32, 16>(self.lo.q.val());
        self.carry.d.next = false;
        if self.inc.val() {
            self.lo.d.next = self.lo.q.val() + self.one.val();
            self.carry.d.next = self.lo.q.val() == self.all_ones.val();
        }
        if self.carry.q.val() {
            self.hi.d.next = self.hi.q.val() + self.one.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_across_the_half_boundary() {
        let mut c = EventCounter::default();
        c.connect_all();
        let mut n = 0u64;
        for cycle in 0..80_000u64 {
            let inc = cycle % 7 != 3;
            c.inc.next = inc;
            c.clock.next = false.into();
            assert!(simulate(&mut c, 10));
            c.clock.next = true.into();
            assert!(simulate(&mut c, 10));
            n += inc as u64;
        }
        c.inc.next = false;
        for _ in 0..2 {
            c.clock.next = false.into();
            assert!(simulate(&mut c, 10));
            c.clock.next = true.into();
            assert!(simulate(&mut c, 10));
        }
        assert!(n > 65_536);
        assert_eq!(c.value.val().to_u64(), n);
        yosys_validate("event_counter", &generate_verilog(&c)).unwrap();
    }
}
