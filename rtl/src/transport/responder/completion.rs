//! The Responder's receive completions (rxe `do_complete` for the receive queue): a completion raised for a
//! SEND LAST/ONLY, a WRITE WITH IMMEDIATE, a class-C error's receive in progress or a flushed receive is held
//! in registers (`raise` with its fields; its CQ and QP latched too, since the Responder goes on to the next
//! packet meanwhile) and offered to CQE Generation only once the payload in the payload mover when it was
//! raised is through (`hold`, cleared by `mv_done`): it lands after every payload byte handed on before it.
//! `busy` while one is held: a packet that raises the next completion waits for it to go.

use rust_hdl::prelude::*;

use crate::common::consts::k;

/// The held receive completion (see the module documentation).
#[derive(LogicBlock)]
pub struct RecvCompletion {
    pub clock: Signal<In, Clock>,
    /// Raise a completion with these fields.
    pub raise: Signal<In, Bit>,
    pub wr_id: Signal<In, Bits<64>>,
    pub cqn: Signal<In, Bits<24>>,
    pub qpn: Signal<In, Bits<24>>,
    pub byte_len: Signal<In, Bits<32>>,
    pub imm: Signal<In, Bits<32>>,
    pub status: Signal<In, Bits<8>>,
    pub opcode: Signal<In, Bits<8>>,
    pub flags: Signal<In, Bits<8>>,
    /// The payload mover runs, and its last beat is taken this cycle.
    pub mv_on: Signal<In, Bit>,
    pub mv_done: Signal<In, Bit>,
    pub busy: Signal<Out, Bit>,
    /// To CQE Generation.
    pub cq_valid: Signal<Out, Bit>,
    pub cq_ready: Signal<In, Bit>,
    pub cq_cqn: Signal<Out, Bits<24>>,
    pub cq_wr_id: Signal<Out, Bits<64>>,
    pub cq_byte_len: Signal<Out, Bits<32>>,
    pub cq_imm: Signal<Out, Bits<32>>,
    pub cq_qp_num: Signal<Out, Bits<24>>,
    pub cq_src_qp: Signal<Out, Bits<24>>,
    pub cq_status: Signal<Out, Bits<8>>,
    pub cq_opcode: Signal<Out, Bits<8>>,
    pub cq_wc_flags: Signal<Out, Bits<8>>,

    o_cv: DFF<Bit>,
    o_cwr: DFF<Bits<64>>,
    o_clen: DFF<Bits<32>>,
    o_cimm: DFF<Bits<32>>,
    o_cstatus: DFF<Bits<8>>,
    o_cop: DFF<Bits<8>>,
    o_cflags: DFF<Bits<8>>,
    o_ccqn: DFF<Bits<24>>,
    o_cqpn: DFF<Bits<24>>,
    /// the completion waits for the payload in the mover when it was raised
    cq_hold: DFF<Bit>,
    zero24: Constant<Bits<24>>,
}

impl Default for RecvCompletion {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            raise: Default::default(),
            wr_id: Default::default(),
            cqn: Default::default(),
            qpn: Default::default(),
            byte_len: Default::default(),
            imm: Default::default(),
            status: Default::default(),
            opcode: Default::default(),
            flags: Default::default(),
            mv_on: Default::default(),
            mv_done: Default::default(),
            busy: Default::default(),
            cq_valid: Default::default(),
            cq_ready: Default::default(),
            cq_cqn: Default::default(),
            cq_wr_id: Default::default(),
            cq_byte_len: Default::default(),
            cq_imm: Default::default(),
            cq_qp_num: Default::default(),
            cq_src_qp: Default::default(),
            cq_status: Default::default(),
            cq_opcode: Default::default(),
            cq_wc_flags: Default::default(),
            o_cv: Default::default(),
            o_cwr: Default::default(),
            o_clen: Default::default(),
            o_cimm: Default::default(),
            o_cstatus: Default::default(),
            o_cop: Default::default(),
            o_cflags: Default::default(),
            o_ccqn: Default::default(),
            o_cqpn: Default::default(),
            cq_hold: Default::default(),
            zero24: k(0),
        }
    }
}

impl Logic for RecvCompletion {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, o_cv, o_cwr, o_clen, o_cimm, o_cstatus, o_cop, o_cflags, o_ccqn, o_cqpn, cq_hold);
        self.busy.next = self.o_cv.q.val();
        self.cq_valid.next = self.o_cv.q.val() & !self.cq_hold.q.val();
        if self.mv_done.val() {
            self.cq_hold.d.next = false;
        }
        if self.o_cv.q.val() & !self.cq_hold.q.val() & self.cq_ready.val() {
            self.o_cv.d.next = false;
        }
        self.cq_cqn.next = self.o_ccqn.q.val();
        self.cq_wr_id.next = self.o_cwr.q.val();
        self.cq_byte_len.next = self.o_clen.q.val();
        self.cq_imm.next = self.o_cimm.q.val();
        self.cq_qp_num.next = self.o_cqpn.q.val();
        // an RC receive completion's src_qp is 0, as rxe gives it (filled from a DETH only)
        self.cq_src_qp.next = self.zero24.val();
        self.cq_status.next = self.o_cstatus.q.val();
        self.cq_opcode.next = self.o_cop.q.val();
        self.cq_wc_flags.next = self.o_cflags.q.val();
        if self.raise.val() {
            self.o_cv.d.next = true;
            self.o_cwr.d.next = self.wr_id.val();
            self.o_ccqn.d.next = self.cqn.val();
            self.o_cqpn.d.next = self.qpn.val();
            self.o_clen.d.next = self.byte_len.val();
            self.o_cimm.d.next = self.imm.val();
            self.o_cstatus.d.next = self.status.val();
            self.o_cop.d.next = self.opcode.val();
            self.o_cflags.d.next = self.flags.val();
            self.cq_hold.d.next = self.mv_on.val() & !self.mv_done.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(u: &mut RecvCompletion) {
        u.clock.next = false.into();
        simulate(u, 20);
        u.clock.next = true.into();
        simulate(u, 20);
    }

    /// A completion raised while payload is still in the mover is offered only after the mover's last beat; one
    /// raised with the mover idle (or in its last beat's cycle) at once; held until CQE Generation takes it.
    #[test]
    fn a_completion_waits_for_the_payload_before_it() {
        let mut u = RecvCompletion::default();
        u.connect_all();
        u.raise.next = true;
        u.wr_id.next = bits(77);
        u.byte_len.next = bits(600);
        u.mv_on.next = true;
        tick(&mut u);
        u.raise.next = false;
        for _ in 0..5 {
            assert!(u.busy.val() && !u.cq_valid.val(), "held behind the payload");
            tick(&mut u);
        }
        u.mv_done.next = true;
        tick(&mut u);
        u.mv_done.next = false;
        u.mv_on.next = false;
        assert!(u.cq_valid.val());
        assert_eq!((u.cq_wr_id.val().to_u64(), u.cq_byte_len.val().to_u64()), (77, 600));
        tick(&mut u);
        assert!(u.cq_valid.val(), "held until taken");
        u.cq_ready.next = true;
        tick(&mut u);
        u.cq_ready.next = false;
        assert!(!u.cq_valid.val() && !u.busy.val());
        // raised in the cycle of the mover's last beat: not held
        u.raise.next = true;
        u.mv_on.next = true;
        u.mv_done.next = true;
        tick(&mut u);
        u.raise.next = false;
        u.mv_on.next = false;
        u.mv_done.next = false;
        assert!(u.cq_valid.val());
    }
}
