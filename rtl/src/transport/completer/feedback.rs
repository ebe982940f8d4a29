//! What the Completer tells WQE Check: go-back-N rewinds, QPs put in error, and each QP's unacknowledged-PSN
//! window with its retired READ/atomic count.
//!
//! * **Rewinds** wait in a queue with a place for every QP (a QP has at most one rewind out, until its
//!   marker), so the Completer never waits for WQE Check, which may itself be waiting for the Completer to take
//!   a record (`rw_push` with the rewind; `rw_full` never holds in practice but is honoured).
//! * **QP to error**: a one-cycle pulse with the QPN of the cycle it was raised in (`qerr_set`).
//! * **The window** (rxe `RXE_MAX_UNACKED_PSNS`): every write of a QP's state word (`st_we` and the word's
//!   `comp_psn`, whether WQEs are pending, the retired count), two cycles later as `comp_psn` + 128: WQE Check
//!   starts a WQE of a busy QP only at a PSN at or below `win_lim`.

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::common::fifo::Fifo;

/// A rewind on its way to WQE Check.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct RwCmd {
    pub qpn: Bits<8>,
    pub idx: Bits<16>,
    pub psn: Bits<24>,
    pub skip: Bits<24>,
}

crate::logic_block! {
    /// The Completer's feedback to WQE Check (see the module documentation).
    pub struct ReqFeedback {
        pub clock: Signal<In, Clock>,
        /// The event's QP (the QP-to-error pulse's QPN).
        pub qpn: Signal<In, Bits<8>>,
        pub qerr_set: Signal<In, Bit>,
        /// Queue a rewind.
        pub rw_push: Signal<In, Bit>,
        pub rw_in: Signal<In, RwCmd>,
        pub rw_full: Signal<Out, Bit>,
        /// A state word written: its QP, `comp_psn`, pending WQEs, retired READ/atomic count.
        pub st_we: Signal<In, Bit>,
        pub st_qpn: Signal<In, Bits<8>>,
        pub st_comp: Signal<In, Bits<24>>,
        pub st_busy: Signal<In, Bit>,
        pub st_fin: Signal<In, Bits<8>>,
        /// To WQE Check.
        pub rw_valid: Signal<Out, Bit>,
        pub rw_ready: Signal<In, Bit>,
        pub rw_qpn: Signal<Out, Bits<24>>,
        pub rw_idx: Signal<Out, Bits<16>>,
        pub rw_psn: Signal<Out, Bits<24>>,
        pub rw_skip: Signal<Out, Bits<24>>,
        pub qerr_valid: Signal<Out, Bit>,
        pub qerr_qpn: Signal<Out, Bits<8>>,
        pub win_we: Signal<Out, Bit>,
        pub win_qpn: Signal<Out, Bits<8>>,
        pub win_busy: Signal<Out, Bit>,
        pub win_lim: Signal<Out, Bits<24>>,
        pub win_fin: Signal<Out, Bits<8>>,

        rwq: Fifo<RwCmd, 8, 9>,
        qerr: DFF<Bit>,
        qerr_q: DFF<Bits<8>>,
        /// the state word written (1), then comp_psn + 128 (2)
        w1_v: DFF<Bit>,
        w1_q: DFF<Bits<8>>,
        w1_p: DFF<Bits<24>>,
        w1_b: DFF<Bit>,
        w1_f: DFF<Bits<8>>,
        w2_v: DFF<Bit>,
        w2_q: DFF<Bits<8>>,
        w2_l: DFF<Bits<24>>,
        w2_b: DFF<Bit>,
        w2_f: DFF<Bits<8>>,
        k128_24: Constant<Bits<24>> = k(testbench::model::requester::RXE_MAX_UNACKED_PSNS as u64),
    }
}

impl Logic for ReqFeedback {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, qerr, qerr_q, w1_v, w1_q, w1_p, w1_b, w1_f, w2_v, w2_q, w2_l, w2_b, w2_f);
        clock!(self, clock, rwq);
        // QP to error: a pulse to WQE Check
        self.qerr.d.next = self.qerr_set.val();
        self.qerr_q.d.next = self.qpn.val();
        self.qerr_valid.next = self.qerr.q.val();
        self.qerr_qpn.next = self.qerr_q.q.val();
        // every state word write, as the RAM takes it (comp_psn may change with any of them)
        self.w1_v.d.next = self.st_we.val();
        self.w1_q.d.next = self.st_qpn.val();
        self.w1_p.d.next = self.st_comp.val();
        self.w1_b.d.next = self.st_busy.val();
        self.w1_f.d.next = self.st_fin.val();
        self.w2_v.d.next = self.w1_v.q.val();
        self.w2_q.d.next = self.w1_q.q.val();
        self.w2_l.d.next = self.w1_p.q.val() + self.k128_24.val();
        self.w2_b.d.next = self.w1_b.q.val();
        self.w2_f.d.next = self.w1_f.q.val();
        self.win_busy.next = self.w2_b.q.val();
        self.win_we.next = self.w2_v.q.val();
        self.win_qpn.next = self.w2_q.q.val();
        self.win_lim.next = self.w2_l.q.val();
        self.win_fin.next = self.w2_f.q.val();
        // the rewinds out, through their queue
        self.rw_valid.next = !self.rwq.empty.val();
        self.rw_qpn.next = bit_cast::<24, 8>(self.rwq.dout.val().qpn);
        self.rw_idx.next = self.rwq.dout.val().idx;
        self.rw_psn.next = self.rwq.dout.val().psn;
        self.rw_skip.next = self.rwq.dout.val().skip;
        self.rwq.pop.next = self.rw_ready.val() & !self.rwq.empty.val();
        self.rwq.push.next = self.rw_push.val();
        self.rwq.din.next = self.rw_in.val();
        self.rw_full.next = self.rwq.full.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// The window two cycles after the state word's write, comp_psn + 128 across the 2^24 wrap; the error pulse
    /// one cycle long with its QPN; rewinds out in order, held while WQE Check is not ready.
    #[test]
    fn windows_errors_and_rewinds_reach_wqe_check() {
        let mut u = ReqFeedback::default();
        u.connect_all();
        u.st_we.next = true;
        u.st_qpn.next = bits(9);
        u.st_comp.next = bits(0xFF_FFC0);
        u.st_busy.next = true;
        u.st_fin.next = bits(3);
        crate::tick!(&mut u);
        u.st_we.next = false;
        assert!(!u.win_we.val());
        crate::tick!(&mut u);
        assert!(u.win_we.val() && u.win_busy.val());
        assert_eq!((u.win_qpn.val().to_u64(), u.win_lim.val().to_u64(), u.win_fin.val().to_u64()), (9, 0x40, 3));
        crate::tick!(&mut u);
        assert!(!u.win_we.val());
        u.qpn.next = bits(4);
        u.qerr_set.next = true;
        crate::tick!(&mut u);
        u.qerr_set.next = false;
        u.qpn.next = bits(5);
        assert!(u.qerr_valid.val() && u.qerr_qpn.val().to_u64() == 4);
        crate::tick!(&mut u);
        assert!(!u.qerr_valid.val());
        for q in [1u64, 2, 3] {
            let mut r = RwCmd::default();
            r.qpn = bits(q);
            r.psn = bits(100 * q);
            u.rw_in.next = r;
            u.rw_push.next = true;
            crate::tick!(&mut u);
        }
        u.rw_push.next = false;
        let mut out = Vec::new();
        for n in 0..10 {
            u.rw_ready.next = n % 3 == 2;
            simulate(&mut u, 20);
            if u.rw_valid.val() && u.rw_ready.val() {
                out.push((u.rw_qpn.val().to_u64(), u.rw_psn.val().to_u64()));
            }
            crate::tick!(&mut u);
        }
        assert_eq!(out, vec![(1, 100), (2, 200), (3, 300)]);
        assert!(!u.rw_valid.val());
    }
}
