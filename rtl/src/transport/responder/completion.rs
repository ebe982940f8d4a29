//! The Responder's receive completions (rxe `do_complete` for the receive queue): a completion raised for a
//! SEND LAST/ONLY, a WRITE WITH IMMEDIATE, a class-C error's receive in progress or a flushed receive is held
//! in registers (`raise` with its fields; its CQ and QP latched too, since the Responder goes on to the next
//! packet meanwhile) and offered to CQE Generation only once the payload in the payload mover when it was
//! raised is through (`hold`, cleared by `mv_done`): it lands after every payload byte handed on before it.
//! `busy` while one is held: a packet that raises the next completion waits for it to go.

use rust_hdl::prelude::*;

use crate::common::ports::{CqSource, Wc};

crate::logic_block! {
    /// The held receive completion (see the module documentation).
    pub struct RecvCompletion {
        pub clock: Signal<In, Clock>,
        /// Raise a completion (`wc`: its CQ, QP and fields).
        pub raise: Signal<In, Bit>,
        pub wc: Signal<In, Wc>,
        /// The payload mover runs, and its last beat is taken this cycle.
        pub mv_on: Signal<In, Bit>,
        pub mv_done: Signal<In, Bit>,
        pub busy: Signal<Out, Bit>,
        /// To CQE Generation.
        pub cq: CqSource,

        o_cv: DFF<Bit>,
        o_wc: DFF<Wc>,
        /// the completion waits for the payload in the mover when it was raised
        cq_hold: DFF<Bit>,
    }
}

impl Logic for RecvCompletion {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, o_cv, o_wc, cq_hold);
        self.busy.next = self.o_cv.q.val();
        self.cq.valid.next = self.o_cv.q.val() & !self.cq_hold.q.val();
        self.cq.wc.next = self.o_wc.q.val();
        if self.mv_done.val() {
            self.cq_hold.d.next = false;
        }
        if self.o_cv.q.val() & !self.cq_hold.q.val() & self.cq.ready.val() {
            self.o_cv.d.next = false;
        }
        if self.raise.val() {
            self.o_cv.d.next = true;
            self.o_wc.d.next = self.wc.val();
            self.cq_hold.d.next = self.mv_on.val() & !self.mv_done.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// A completion raised while payload is still in the mover is offered only after the mover's last beat; one
    /// raised with the mover idle (or in its last beat's cycle) at once; held until CQE Generation takes it.
    #[test]
    fn a_completion_waits_for_the_payload_before_it() {
        let mut u = RecvCompletion::default();
        u.connect_all();
        u.raise.next = true;
        u.wc.next.wr_id = bits(77);
        u.wc.next.byte_len = bits(600);
        u.mv_on.next = true;
        crate::tick!(&mut u);
        u.raise.next = false;
        for _ in 0..5 {
            assert!(u.busy.val() && !u.cq.valid.val(), "held behind the payload");
            crate::tick!(&mut u);
        }
        u.mv_done.next = true;
        crate::tick!(&mut u);
        u.mv_done.next = false;
        u.mv_on.next = false;
        assert!(u.cq.valid.val());
        assert_eq!((u.cq.wc.val().wr_id.to_u64(), u.cq.wc.val().byte_len.to_u64()), (77, 600));
        crate::tick!(&mut u);
        assert!(u.cq.valid.val(), "held until taken");
        u.cq.ready.next = true;
        crate::tick!(&mut u);
        u.cq.ready.next = false;
        assert!(!u.cq.valid.val() && !u.busy.val());
        // raised in the cycle of the mover's last beat: not held
        u.raise.next = true;
        u.mv_on.next = true;
        u.mv_done.next = true;
        crate::tick!(&mut u);
        u.raise.next = false;
        u.mv_on.next = false;
        u.mv_done.next = false;
        assert!(u.cq.valid.val());
    }
}
