//! The Completer's response payload: a taken header's payload goes into a 16-beat payload FIFO (`fwd`: its
//! Scatter command was taken) or is dropped (`drop`), and the FIFO feeds the Scatter Path, so the next header
//! can be taken while the Scatter Path still plans (3 cycles) and writes this one. `pin` while the last
//! header's payload is still coming in (no header is taken then: the top hands them on in order anyway). An
//! ATOMIC ACKNOWLEDGE's original value enters the same FIFO as one 8-byte beat (`at_push`).

use rust_hdl::prelude::*;

use crate::common::axis::{AxisSink, AxisSource};
use crate::common::consts::k;
use crate::common::fifo::Fifo;

/// A payload beat in the Completer's payload FIFO.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct PayBeat {
    pub data: Bits<512>,
    pub keep: Bits<64>,
    pub last: Bit,
}

crate::logic_block! {
    /// The response payload path (see the module documentation).
    pub struct RespPayload {
        pub clock: Signal<In, Clock>,
        /// The last header's payload: forward it, or drop it.
        pub fwd: Signal<In, Bit>,
        pub drop: Signal<In, Bit>,
        /// An atomic's original value (host byte order) as one 8-byte beat.
        pub at_push: Signal<In, Bit>,
        pub at_data: Signal<In, Bits<64>>,
        /// The last header's payload is still coming; it is being forwarded; the FIFO is full; empty.
        pub pin: Signal<Out, Bit>,
        pub fwd_on: Signal<Out, Bit>,
        pub full: Signal<Out, Bit>,
        pub empty: Signal<Out, Bit>,
        pub pay: AxisSink,
        pub s_pay: AxisSource,

        pf: Fifo<PayBeat, 4, 5>,
        pin_fwd: DFF<Bit>,
        pin_drop: DFF<Bit>,
        l_take: Signal<Local, Bit>,
        kff_64: Constant<Bits<64>> = k(0xFF),
    }
}

impl Logic for RespPayload {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, pin_fwd, pin_drop);
        clock!(self, clock, pf);
        self.pin.next = self.pin_fwd.q.val() | self.pin_drop.q.val();
        self.fwd_on.next = self.pin_fwd.q.val();
        self.full.next = self.pf.full.val();
        self.empty.next = self.pf.empty.val();
        self.pay.tready.next = (self.pin_fwd.q.val() & !self.pf.full.val()) | self.pin_drop.q.val();
        self.l_take.next = self.pay.tvalid.val() & ((self.pin_fwd.q.val() & !self.pf.full.val()) | self.pin_drop.q.val());
        self.pf.din.next.data = self.pay.tdata.val();
        self.pf.din.next.keep = self.pay.tkeep.val();
        self.pf.din.next.last = self.pay.tlast.val();
        self.pf.push.next = self.pin_fwd.q.val() & self.pay.tvalid.val();
        if self.l_take.val() & self.pay.tlast.val() {
            self.pin_fwd.d.next = false;
            self.pin_drop.d.next = false;
        }
        self.s_pay.tdata.next = self.pf.dout.val().data;
        self.s_pay.tkeep.next = self.pf.dout.val().keep;
        self.s_pay.tlast.next = self.pf.dout.val().last;
        self.s_pay.tvalid.next = !self.pf.empty.val();
        self.pf.pop.next = self.s_pay.tready.val();
        if self.at_push.val() {
            self.pf.push.next = true;
            self.pf.din.next.data = bit_cast::<512, 64>(self.at_data.val());
            self.pf.din.next.keep = self.kff_64.val();
            self.pf.din.next.last = true;
        }
        if self.fwd.val() {
            self.pin_fwd.d.next = true;
        }
        if self.drop.val() {
            self.pin_drop.d.next = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// A forwarded payload comes out to the Scatter Path beat for beat (the FIFO takes 16 while the Scatter
    /// Path waits); a dropped one is taken and vanishes; `pin` until a payload's last beat is in.
    #[test]
    fn payloads_are_forwarded_or_dropped_whole() {
        let mut u = RespPayload::default();
        u.connect_all();
        let beat = |u: &mut RespPayload, i: u64, last: bool| {
            u.pay.tvalid.next = true;
            u.pay.tdata.next = bits::<512>(i);
            u.pay.tkeep.next = bits(u64::MAX);
            u.pay.tlast.next = last;
        };
        // forward 20 beats with the Scatter Path stalled: 16 go in, then it waits
        u.fwd.next = true;
        crate::tick!(&mut u);
        u.fwd.next = false;
        let mut taken = 0;
        for _ in 0..30 {
            beat(&mut u, taken, taken == 19);
            simulate(&mut u, 20);
            assert!(u.pin.val());
            if u.pay.tready.val() {
                taken += 1;
            }
            crate::tick!(&mut u);
        }
        assert_eq!(taken, 16, "the FIFO holds 16 while the Scatter Path waits");
        u.s_pay.tready.next = true;
        let mut out = Vec::new();
        for _ in 0..40 {
            if taken < 20 {
                beat(&mut u, taken, taken == 19);
            } else {
                u.pay.tvalid.next = false;
            }
            simulate(&mut u, 20);
            if u.pay.tready.val() && u.pay.tvalid.val() {
                taken += 1;
            }
            if u.s_pay.tvalid.val() {
                out.push(u.s_pay.tdata.val().get_bits::<64>(0).to_u64());
            }
            crate::tick!(&mut u);
        }
        assert_eq!(out, (0..20).collect::<Vec<_>>());
        assert!(!u.pin.val() && u.empty.val());
        // a dropped payload: taken at once, nothing out
        u.drop.next = true;
        crate::tick!(&mut u);
        u.drop.next = false;
        for i in 0..3 {
            beat(&mut u, 100 + i, i == 2);
            simulate(&mut u, 20);
            assert!(u.pay.tready.val() && !u.s_pay.tvalid.val());
            crate::tick!(&mut u);
        }
        u.pay.tvalid.next = false;
        simulate(&mut u, 20);
        assert!(!u.pin.val() && u.empty.val());
        // an atomic's value: one 8-byte beat
        u.at_push.next = true;
        u.at_data.next = bits(0xABCD);
        crate::tick!(&mut u);
        u.at_push.next = false;
        assert!(u.s_pay.tvalid.val() && u.s_pay.tlast.val());
        assert_eq!((u.s_pay.tdata.val().get_bits::<64>(0).to_u64(), u.s_pay.tkeep.val().get_bits::<64>(0).to_u64()), (0xABCD, 0xFF));
    }
}
