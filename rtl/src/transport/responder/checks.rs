//! The Responder's packet checks (rxe `rxe_resp.c`, in its order): `check_psn` by a [`PsnCheck`] (in order; a
//! duplicate; the first out-of-sequence packet, NAKed once, then silence until the gap closes), `check_op_seq` (a SEND
//! or WRITE continues the message in progress of its kind, and only a FIRST/ONLY starts one),
//! `check_op_valid` (the QP's REMOTE_READ / REMOTE_WRITE / REMOTE_ATOMIC access), the resource rules of
//! `check_resource` (a READ or atomic needs `max_dest_rd_atomic` > 0; SEND FIRST/ONLY and WRITE LAST/ONLY
//! WITH IMMEDIATE need a posted receive), `check_length` (ONLY <= PMTU, FIRST/MIDDLE == PMTU, LAST 1..PMTU, a
//! RETH length <= 2^31), and the WRITE length / PadCnt rule against the WRITE's residue (MIDDLE/LAST) and
//! against the RETH length (FIRST/ONLY): while more than a PMTU is left a packet must be a PMTU without pad
//! and not the last; the last must carry exactly the rest with the pad that rounds it to 4 bytes.
//!
//! Registered when `en` (the Responder's `Pre` state) from registers only; the verdicts hold until the next
//! `en`. `wr_big` / `wr_pad` (more than a PMTU of the WRITE left, and the pad of what is left) are also the
//! hot QP's expectation of its next packet (the Responder's fast path).

use rust_hdl::prelude::*;

use super::take::ReqRec;
use crate::common::consts::k;
use crate::transport::key_cache::{ACC_REMOTE_ATOMIC, ACC_REMOTE_READ, ACC_REMOTE_WRITE};
use crate::transport::psn_check::{PsnCheck, VERDICT_DUP_ACK, VERDICT_DUP_RESOURCE, VERDICT_IN_ORDER, VERDICT_NAK_SEQ};

/// Opcode info bits (`info[opcode]`, see `super::info_table`).
pub const I_SEND: usize = 0;
pub const I_WRITE: usize = 1;
pub const I_READ: usize = 2;
pub const I_ATOMIC: usize = 3;
pub const I_START: usize = 4;
pub const I_END: usize = 5;
pub const I_IMM: usize = 6;
pub const I_RETH: usize = 7;
/// Not an RC request opcode of the table: dropped as malformed.
pub const I_BAD: usize = 8;
/// An RC request of a kind not executed here (FLUSH, ATOMIC WRITE, RESYNC): NAK invalid request.
pub const I_OTHER: usize = 9;

crate::logic_block! {
    /// The checks (see the module documentation).
    pub struct RespChecks {
        pub clock: Signal<In, Clock>,
        pub en: Signal<In, Bit>,
        /// The request (the take stage's record): its opcode's info bits, payload length, pad, RETH length, the
        /// path MTU in bytes; check_psn's inputs: the packet's PSN, the QP's ePSN, the kind of request, a
        /// PSN-sequence NAK sent.
        pub req: Signal<In, ReqRec>,
        /// The QP: access flags, `max_dest_rd_atomic`, the message in progress (and whether a WRITE), the WRITE
        /// context and its residue, the receive ring's producer and consumer index.
        pub access: Signal<In, Bits<8>>,
        pub mda: Signal<In, Bits<8>>,
        pub mip: Signal<In, Bit>,
        pub mip_write: Signal<In, Bit>,
        pub w_valid: Signal<In, Bit>,
        pub w_resid: Signal<In, Bits<32>>,
        pub pi: Signal<In, Bits<16>>,
        pub ci: Signal<In, Bits<16>>,
        /// check_psn's verdict, three cycles after `en`: in order; the first out-of-sequence packet (NAK); a
        /// duplicate SEND/WRITE (ACK again); a duplicate READ or atomic (its resource).
        pub in_order: Signal<Out, Bit>,
        pub nak_seq: Signal<Out, Bit>,
        pub dup_ack: Signal<Out, Bit>,
        pub dup_res: Signal<Out, Bit>,
        /// UC's check_psn (rxe: exactly the expected PSN, no duplicates, no NAK): PSN == ePSN, registered at `en`.
        pub psn_eq: Signal<Out, Bit>,
        /// Verdicts (true = passes, but for the resource needs and the WRITE length rules: true = fails).
        pub seq_ok: Signal<Out, Bit>,
        pub acc_ok: Signal<Out, Bit>,
        pub no_res: Signal<Out, Bit>,
        pub need_rwqe: Signal<Out, Bit>,
        pub rq_empty: Signal<Out, Bit>,
        pub len_ok: Signal<Out, Bit>,
        pub wl_resid: Signal<Out, Bit>,
        pub wl_dlen: Signal<Out, Bit>,
        /// More than a PMTU of the WRITE left, and the pad of what is left (combinational, from the inputs).
        pub wr_big: Signal<Out, Bit>,
        pub wr_pad: Signal<Out, Bits<2>>,

        psnc: PsnCheck,
        p_seq_ok: DFF<Bit>,
        p_psn_eq: DFF<Bit>,
        p_acc_ok: DFF<Bit>,
        p_no_res: DFF<Bit>,
        p_need_rwqe: DFF<Bit>,
        p_rq_empty: DFF<Bit>,
        p_len_ok: DFF<Bit>,
        p_wl_resid: DFF<Bit>,
        p_wl_dlen: DFF<Bit>,
        l_info: Signal<Local, Bits<10>>,
        l_plen: Signal<Local, Bits<13>>,
        l_pad: Signal<Local, Bits<2>>,
        l_dlen: Signal<Local, Bits<32>>,
        l_mtu: Signal<Local, Bits<13>>,
        l_send: Signal<Local, Bit>,
        l_write: Signal<Local, Bit>,
        l_read: Signal<Local, Bit>,
        l_atomic: Signal<Local, Bit>,
        l_start: Signal<Local, Bit>,
        l_end: Signal<Local, Bit>,
        l_imm: Signal<Local, Bit>,
        l_has_reth: Signal<Local, Bit>,
        l_sw: Signal<Local, Bit>,
        l_peq: Signal<Local, Bit>,
        l_ple: Signal<Local, Bit>,
        l_pnz: Signal<Local, Bit>,
        l_wd_big: Signal<Local, Bit>,
        l_wd_pad: Signal<Local, Bits<2>>,
        acc_rr: Constant<Bits<8>> = k(ACC_REMOTE_READ),
        acc_rw: Constant<Bits<8>> = k(ACC_REMOTE_WRITE),
        acc_ra: Constant<Bits<8>> = k(ACC_REMOTE_ATOMIC),
        zero2: Constant<Bits<2>> = k(0),
        zero8: Constant<Bits<8>> = k(0),
        zero13: Constant<Bits<13>> = k(0),
        zero19: Constant<Bits<19>> = k(0),
        zero31: Constant<Bits<31>> = k(0),
        v_in_order: Constant<Bits<3>> = k(VERDICT_IN_ORDER),
        v_dup_ack: Constant<Bits<3>> = k(VERDICT_DUP_ACK),
        v_dup_res: Constant<Bits<3>> = k(VERDICT_DUP_RESOURCE),
        v_nak_seq: Constant<Bits<3>> = k(VERDICT_NAK_SEQ),
    }
}

impl Logic for RespChecks {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, p_seq_ok, p_psn_eq, p_acc_ok, p_no_res, p_need_rwqe, p_rq_empty, p_len_ok, p_wl_resid, p_wl_dlen);
        clock!(self, clock, psnc);
        self.l_info.next = self.req.val().info;
        self.l_plen.next = self.req.val().plen;
        self.l_pad.next = self.req.val().pad;
        self.l_dlen.next = self.req.val().dlen;
        self.l_mtu.next = self.req.val().mtu;
        // check_psn (PSN Check: in order, duplicate, one PSN-sequence NAK then silence)
        self.psnc.in_valid.next = self.en.val();
        self.psnc.psn.next = self.req.val().psn;
        self.psnc.epsn.next = self.req.val().epsn;
        self.psnc.kind.next = self.req.val().kind;
        self.psnc.sent_psn_nak.next = self.req.val().sent_nak;
        self.in_order.next = self.psnc.verdict.val() == self.v_in_order.val();
        self.nak_seq.next = self.psnc.verdict.val() == self.v_nak_seq.val();
        self.dup_ack.next = self.psnc.verdict.val() == self.v_dup_ack.val();
        self.dup_res.next = self.psnc.verdict.val() == self.v_dup_res.val();
        self.seq_ok.next = self.p_seq_ok.q.val();
        self.psn_eq.next = self.p_psn_eq.q.val();
        self.acc_ok.next = self.p_acc_ok.q.val();
        self.no_res.next = self.p_no_res.q.val();
        self.need_rwqe.next = self.p_need_rwqe.q.val();
        self.rq_empty.next = self.p_rq_empty.q.val();
        self.len_ok.next = self.p_len_ok.q.val();
        self.wl_resid.next = self.p_wl_resid.q.val();
        self.wl_dlen.next = self.p_wl_dlen.q.val();
        self.l_send.next = self.l_info.val().get_bit(0);
        self.l_write.next = self.l_info.val().get_bit(1);
        self.l_read.next = self.l_info.val().get_bit(2);
        self.l_atomic.next = self.l_info.val().get_bit(3);
        self.l_start.next = self.l_info.val().get_bit(4);
        self.l_end.next = self.l_info.val().get_bit(5);
        self.l_imm.next = self.l_info.val().get_bit(6);
        self.l_has_reth.next = self.l_info.val().get_bit(7);
        self.l_sw.next = self.l_send.val() | self.l_write.val();
        self.l_peq.next = self.l_plen.val() == self.l_mtu.val();
        self.l_ple.next = self.l_plen.val() <= self.l_mtu.val();
        self.l_pnz.next = self.l_plen.val() != self.zero13.val();
        // the WRITE length / PadCnt rule against the residue (MIDDLE/LAST) and the RETH length (FIRST/ONLY)
        self.wr_big.next = (self.w_resid.val().get_bits::<19>(13) != self.zero19.val())
            | (self.w_resid.val().get_bits::<13>(0) > self.l_mtu.val());
        self.wr_pad.next = self.zero2.val() - self.w_resid.val().get_bits::<2>(0);
        self.l_wd_big.next = (self.l_dlen.val().get_bits::<19>(13) != self.zero19.val())
            | (self.l_dlen.val().get_bits::<13>(0) > self.l_mtu.val());
        self.l_wd_pad.next = self.zero2.val() - self.l_dlen.val().get_bits::<2>(0);
        if self.en.val() {
            self.p_psn_eq.d.next = self.req.val().psn == self.req.val().epsn;
            // check_op_seq
            if self.mip.val() {
                self.p_seq_ok.d.next = ((self.l_write.val() & self.mip_write.val())
                    | (self.l_send.val() & !self.mip_write.val()))
                    & !self.l_start.val();
            } else {
                self.p_seq_ok.d.next = !(self.l_sw.val() & !self.l_start.val());
            }
            // check_op_valid
            self.p_acc_ok.d.next = !((self.l_read.val() & ((self.access.val() & self.acc_rr.val()) == self.zero8.val()))
                | (self.l_write.val() & ((self.access.val() & self.acc_rw.val()) == self.zero8.val()))
                | (self.l_atomic.val() & ((self.access.val() & self.acc_ra.val()) == self.zero8.val())));
            self.p_no_res.d.next = (self.l_read.val() | self.l_atomic.val()) & (self.mda.val() == self.zero8.val());
            // check_resource
            self.p_need_rwqe.d.next = (self.l_send.val() & self.l_start.val())
                | (self.l_write.val() & self.l_imm.val() & self.l_end.val());
            self.p_rq_empty.d.next = self.pi.val() == self.ci.val();
            // check_length
            self.p_len_ok.d.next = true;
            if self.l_sw.val() {
                if self.l_start.val() & self.l_end.val() {
                    self.p_len_ok.d.next = self.l_ple.val();
                } else if self.l_end.val() {
                    self.p_len_ok.d.next = self.l_ple.val() & self.l_pnz.val();
                } else {
                    self.p_len_ok.d.next = self.l_peq.val();
                }
            }
            if self.l_has_reth.val() & self.l_dlen.val().get_bit(31) & (self.l_dlen.val().get_bits::<31>(0) != self.zero31.val()) {
                self.p_len_ok.d.next = false;
            }
            // the WRITE length rule (true = bad)
            if self.wr_big.val() {
                self.p_wl_resid.d.next = !self.l_peq.val() | (self.l_pad.val() != self.zero2.val()) | self.l_end.val();
            } else {
                self.p_wl_resid.d.next = (self.l_plen.val() != self.w_resid.val().get_bits::<13>(0))
                    | (self.l_pad.val() != self.wr_pad.val())
                    | !self.l_end.val();
            }
            if !self.w_valid.val() {
                self.p_wl_resid.d.next = true;
            }
            if self.l_wd_big.val() {
                self.p_wl_dlen.d.next = !self.l_peq.val() | (self.l_pad.val() != self.zero2.val()) | self.l_end.val();
            } else {
                self.p_wl_dlen.d.next = (self.l_plen.val() != self.l_dlen.val().get_bits::<13>(0))
                    | (self.l_pad.val() != self.l_wd_pad.val())
                    | !self.l_end.val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testbench::wire::opcode::*;

    struct Pkt {
        op: u8,
        plen: u64,
        pad: u64,
        dlen: u64,
    }

    struct Qp {
        access: u64,
        mda: u64,
        mip: Option<bool>,
        w_resid: Option<u64>,
        pi: u64,
        ci: u64,
    }

    const QP: Qp = Qp { access: ACC_REMOTE_READ | ACC_REMOTE_WRITE | ACC_REMOTE_ATOMIC, mda: 16, mip: None, w_resid: None, pi: 3, ci: 1 };

    /// The verdicts for one packet at MTU 1024: (seq_ok, acc_ok, no_res, need_rwqe, rq_empty, len_ok,
    /// wl_resid, wl_dlen).
    fn run(p: Pkt, q: &Qp) -> [bool; 8] {
        let mut u = RespChecks::default();
        u.connect_all();
        let info = super::super::info_table()[p.op as usize];
        u.req.next.info = bits(info);
        u.req.next.plen = bits(p.plen);
        u.req.next.pad = bits(p.pad);
        u.req.next.dlen = bits(p.dlen);
        u.access.next = bits(q.access);
        u.mda.next = bits(q.mda);
        u.req.next.mtu = bits(1024);
        u.mip.next = q.mip.is_some();
        u.mip_write.next = q.mip == Some(true);
        u.w_valid.next = q.w_resid.is_some();
        u.w_resid.next = bits(q.w_resid.unwrap_or(0));
        u.pi.next = bits(q.pi);
        u.ci.next = bits(q.ci);
        u.en.next = true;
        u.clock.next = false.into();
        simulate(&mut u, 20);
        u.clock.next = true.into();
        simulate(&mut u, 20);
        [
            u.seq_ok.val(),
            u.acc_ok.val(),
            u.no_res.val(),
            u.need_rwqe.val(),
            u.rq_empty.val(),
            u.len_ok.val(),
            u.wl_resid.val(),
            u.wl_dlen.val(),
        ]
    }

    fn pkt(op: u8, plen: u64) -> Pkt {
        Pkt { op, plen, pad: 0, dlen: 0 }
    }

    /// One case per rule, each with the verdict that rule alone gives.
    #[test]
    fn each_rule_gives_rxes_verdict() {
        // check_op_seq: a MIDDLE with no message in progress, a SEND MIDDLE inside a WRITE, a FIRST inside one
        assert!(!run(pkt(RC_SEND_MIDDLE, 1024), &QP)[0]);
        assert!(run(pkt(RC_SEND_MIDDLE, 1024), &Qp { mip: Some(false), ..QP })[0]);
        assert!(!run(pkt(RC_SEND_MIDDLE, 1024), &Qp { mip: Some(true), ..QP })[0]);
        assert!(run(pkt(RC_RDMA_WRITE_LAST, 4), &Qp { mip: Some(true), ..QP })[0]);
        assert!(!run(pkt(RC_SEND_FIRST, 1024), &Qp { mip: Some(false), ..QP })[0]);
        assert!(run(pkt(RC_RDMA_READ_REQUEST, 0), &QP)[0]);
        // check_op_valid: each remote access flag
        assert!(!run(pkt(RC_RDMA_READ_REQUEST, 0), &Qp { access: ACC_REMOTE_WRITE | ACC_REMOTE_ATOMIC, ..QP })[1]);
        assert!(!run(pkt(RC_RDMA_WRITE_ONLY, 8), &Qp { access: ACC_REMOTE_READ | ACC_REMOTE_ATOMIC, ..QP })[1]);
        assert!(!run(pkt(RC_FETCH_ADD, 0), &Qp { access: ACC_REMOTE_READ | ACC_REMOTE_WRITE, ..QP })[1]);
        assert!(run(pkt(RC_SEND_ONLY, 8), &Qp { access: 0, ..QP })[1], "a SEND needs no remote access");
        // check_resource: max_dest_rd_atomic 0; receive needed; the ring empty
        assert!(run(pkt(RC_RDMA_READ_REQUEST, 0), &Qp { mda: 0, ..QP })[2]);
        assert!(run(pkt(RC_COMPARE_SWAP, 0), &Qp { mda: 0, ..QP })[2]);
        assert!(!run(pkt(RC_RDMA_WRITE_ONLY, 0), &Qp { mda: 0, ..QP })[2]);
        assert!(run(pkt(RC_SEND_FIRST, 1024), &QP)[3]);
        assert!(!run(pkt(RC_SEND_LAST, 4), &Qp { mip: Some(false), ..QP })[3]);
        assert!(run(pkt(RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 4), &Qp { mip: Some(true), ..QP })[3]);
        assert!(!run(pkt(RC_RDMA_WRITE_LAST, 4), &Qp { mip: Some(true), ..QP })[3]);
        assert!(run(pkt(RC_SEND_ONLY, 4), &Qp { pi: 7, ci: 7, ..QP })[4]);
        assert!(!run(pkt(RC_SEND_ONLY, 4), &QP)[4]);
        // check_length
        assert!(run(pkt(RC_SEND_ONLY, 1024), &QP)[5]);
        assert!(!run(pkt(RC_SEND_ONLY, 1025), &QP)[5]);
        assert!(!run(pkt(RC_SEND_FIRST, 1000), &QP)[5]);
        assert!(!run(pkt(RC_SEND_MIDDLE, 1023), &Qp { mip: Some(false), ..QP })[5]);
        assert!(!run(pkt(RC_SEND_LAST, 0), &Qp { mip: Some(false), ..QP })[5]);
        assert!(run(pkt(RC_SEND_LAST, 1), &Qp { mip: Some(false), ..QP })[5]);
        assert!(!run(Pkt { op: RC_RDMA_WRITE_ONLY, plen: 0, pad: 0, dlen: 0x8000_0001 }, &QP)[5], "RETH length over 2^31");
        assert!(run(Pkt { op: RC_RDMA_WRITE_ONLY, plen: 0, pad: 0, dlen: 0x8000_0000 }, &QP)[5]);
        // the WRITE length rule against the residue (MIDDLE/LAST)
        let w = |resid| Qp { mip: Some(true), w_resid: Some(resid), ..QP };
        assert!(!run(pkt(RC_RDMA_WRITE_MIDDLE, 1024), &w(3000))[6]);
        assert!(run(pkt(RC_RDMA_WRITE_LAST, 1024), &w(3000))[6], "more than a PMTU left: not the last");
        assert!(run(Pkt { op: RC_RDMA_WRITE_MIDDLE, plen: 1024, pad: 1, dlen: 0 }, &w(3000))[6], "no pad before the end");
        assert!(!run(Pkt { op: RC_RDMA_WRITE_LAST, plen: 5, pad: 3, dlen: 0 }, &w(5))[6]);
        assert!(run(Pkt { op: RC_RDMA_WRITE_LAST, plen: 5, pad: 0, dlen: 0 }, &w(5))[6], "the pad rounds the rest to 4");
        assert!(run(pkt(RC_RDMA_WRITE_LAST, 4), &w(8))[6], "exactly the rest");
        assert!(run(pkt(RC_RDMA_WRITE_MIDDLE, 1024), &w(1024))[6], "the rest fits: the last");
        assert!(run(pkt(RC_RDMA_WRITE_LAST, 4), &Qp { mip: Some(true), ..QP })[6], "no WRITE context");
        // ... and against the RETH length (FIRST/ONLY)
        assert!(!run(Pkt { op: RC_RDMA_WRITE_ONLY, plen: 6, pad: 2, dlen: 6 }, &QP)[7]);
        assert!(run(Pkt { op: RC_RDMA_WRITE_ONLY, plen: 6, pad: 0, dlen: 6 }, &QP)[7]);
        assert!(run(Pkt { op: RC_RDMA_WRITE_ONLY, plen: 6, pad: 2, dlen: 10 }, &QP)[7]);
        assert!(!run(Pkt { op: RC_RDMA_WRITE_FIRST, plen: 1024, pad: 0, dlen: 5000 }, &QP)[7]);
        assert!(run(Pkt { op: RC_RDMA_WRITE_ONLY, plen: 1024, pad: 0, dlen: 5000 }, &QP)[7], "an ONLY must be the end");
    }

    /// check_psn through the checks' PSN Check: in order, a duplicate SEND/WRITE (ACKed again) or READ (its
    /// resource), the first packet past a gap (NAK) and a later one (silence: none of the four), across the wrap.
    #[test]
    fn check_psn_verdicts() {
        let verdict = |psn: u64, epsn: u64, kind: u64, sent: bool| {
            let mut u = RespChecks::default();
            u.connect_all();
            u.req.next.psn = bits(psn);
            u.req.next.epsn = bits(epsn);
            u.req.next.kind = bits(kind);
            u.req.next.sent_nak = sent;
            u.en.next = true;
            for i in 0..4 {
                u.clock.next = false.into();
                simulate(&mut u, 20);
                u.clock.next = true.into();
                simulate(&mut u, 20);
                u.en.next = i > 0 && false;
            }
            [u.in_order.val(), u.nak_seq.val(), u.dup_ack.val(), u.dup_res.val()]
        };
        use crate::transport::psn_check::{KIND_READ, KIND_SEND_WRITE};
        assert_eq!(verdict(0x10, 0x10, KIND_SEND_WRITE, false), [true, false, false, false]);
        assert_eq!(verdict(0xFF_FFFF, 0x2, KIND_SEND_WRITE, false), [false, false, true, false], "behind, across the wrap");
        assert_eq!(verdict(0x5, 0x9, KIND_READ, false), [false, false, false, true]);
        assert_eq!(verdict(0x2, 0xFF_FFFE, KIND_SEND_WRITE, false), [false, true, false, false], "ahead, across the wrap");
        assert_eq!(verdict(0x12, 0x10, KIND_SEND_WRITE, true), [false, false, false, false], "after the NAK: silence");
    }
}
