//! The Completer's completion register (rxe `do_complete`, formed as the golden model's `send_cqe`): the head
//! WQE's completion is loaded (`load`) from its record, its status and its WR class, and offered to CQE
//! Generation until taken; only a signaled WQE or an error produces one (`cq_valid` stays low otherwise).
//! The opcode is the WR's WC opcode; a WITH_IMM WR's immediate is given in wire byte order with the
//! WITH_IMM flag. `valid` while one waits: the next may be loaded once it has gone (`clear`).

use rust_hdl::prelude::*;

use super::Pend;
use crate::common::consts::k;
use crate::common::ports::{CqSource, Wc};
use testbench::model::WcFlags;

crate::logic_block! {
    /// The completion register (see the module documentation).
    pub struct CompCqe {
        pub clock: Signal<In, Clock>,
        /// Load the completion of `rec` with `status` (its WR class `cls`: WC opcode in 7:0, WITH_IMM in 8), for
        /// QP `qpn` into CQ `cqn`; `clear` drops the one offered.
        pub load: Signal<In, Bit>,
        pub clear: Signal<In, Bit>,
        pub rec: Signal<In, Pend>,
        pub status: Signal<In, Bits<8>>,
        pub cls: Signal<In, Bits<13>>,
        pub cqn: Signal<In, Bits<24>>,
        pub qpn: Signal<In, Bits<24>>,
        pub valid: Signal<Out, Bit>,
        /// To CQE Generation.
        pub cq: CqSource,

        o_valid: DFF<Bit>,
        o_wc: DFF<Wc>,
        l_imm: Signal<Local, Bits<32>>,
        k0_8: Constant<Bits<8>> = k(0),
        k0_24: Constant<Bits<24>> = k(0),
        k0_32: Constant<Bits<32>> = k(0),
        f_imm: Constant<Bits<8>> = k(WcFlags::WITH_IMM as u64),
    }
}

impl Logic for CompCqe {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, o_valid, o_wc);
        self.valid.next = self.o_valid.q.val();
        self.cq.valid.next = self.o_valid.q.val();
        self.cq.wc.next = self.o_wc.q.val();
        self.l_imm.next = self.rec.val().imm;
        if self.load.val() {
            self.o_valid.d.next = (self.status.val() != self.k0_8.val()) | self.rec.val().signaled;
            self.o_wc.d.next.cqn = self.cqn.val();
            self.o_wc.d.next.wr_id = self.rec.val().wr_id;
            self.o_wc.d.next.byte_len = self.rec.val().len;
            self.o_wc.d.next.qp_num = self.qpn.val();
            self.o_wc.d.next.src_qp = self.k0_24.val();
            self.o_wc.d.next.status = self.status.val();
            self.o_wc.d.next.opcode = self.cls.val().get_bits::<8>(0);
            self.o_wc.d.next.imm = self.k0_32.val();
            self.o_wc.d.next.wc_flags = self.k0_8.val();
            if self.cls.val().get_bit(8) {
                // immediate data in wire byte order (CQE bytes 12..15)
                self.o_wc.d.next.imm = (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(0)) << 24)
                    | (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(8)) << 16)
                    | (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(16)) << 8)
                    | bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(24));
                self.o_wc.d.next.wc_flags = self.f_imm.val();
            }
        }
        if self.clear.val() {
            self.o_valid.d.next = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    fn load(u: &mut CompCqe, signaled: bool, status: u64, cls: u64) {
        let mut rec = Pend::default();
        rec.wr_id = bits(0x1234);
        rec.len = bits(4096);
        rec.imm = bits(0x1122_3344);
        rec.signaled = signaled;
        u.rec.next = rec;
        u.status.next = bits(status);
        u.cls.next = bits(cls);
        u.cqn.next = bits(5);
        u.qpn.next = bits(0x11);
        u.load.next = true;
        crate::tick!(u);
        u.load.next = false;
    }

    /// A signaled WQE's completion with its WC opcode; an unsignaled success gives none, an unsignaled error
    /// does; a WITH_IMM WR's immediate in wire byte order with its flag; held until cleared.
    #[test]
    fn completions_of_signaled_wqes_and_errors() {
        let mut u = CompCqe::default();
        u.connect_all();
        load(&mut u, true, 0, 0x001);
        assert!(u.cq.valid.val());
        assert_eq!((u.cq.wc.val().wr_id.to_u64(), u.cq.wc.val().byte_len.to_u64(), u.cq.wc.val().opcode.to_u64(), u.cq.wc.val().wc_flags.to_u64()), (0x1234, 4096, 1, 0));
        crate::tick!(&mut u);
        assert!(u.cq.valid.val(), "held");
        u.clear.next = true;
        crate::tick!(&mut u);
        u.clear.next = false;
        assert!(!u.cq.valid.val());
        load(&mut u, false, 0, 0x001);
        assert!(!u.cq.valid.val(), "unsignaled success: no completion");
        load(&mut u, false, 5, 0x001);
        assert!(u.cq.valid.val() && u.cq.wc.val().status.to_u64() == 5, "unsignaled error: completed");
        load(&mut u, true, 0, 0x100);
        assert_eq!((u.cq.wc.val().imm.to_u64(), u.cq.wc.val().wc_flags.to_u64()), (0x4433_2211, WcFlags::WITH_IMM as u64));
    }
}
