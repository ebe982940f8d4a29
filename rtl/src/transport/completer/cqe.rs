//! The Completer's completion register (rxe `do_complete`, formed as the golden model's `send_cqe`): the head
//! WQE's completion is loaded (`load`) from its record, its status and its WR class, and offered to CQE
//! Generation until taken; only a signaled WQE or an error produces one (`cq_valid` stays low otherwise).
//! The opcode is the WR's WC opcode; a WITH_IMM WR's immediate is given in wire byte order with the
//! WITH_IMM flag. `valid` while one waits: the next may be loaded once it has gone (`clear`).

use rust_hdl::prelude::*;

use super::Pend;
use crate::common::consts::k;
use testbench::model::WcFlags;

/// The completion register (see the module documentation).
#[derive(LogicBlock)]
pub struct CompCqe {
    pub clock: Signal<In, Clock>,
    /// Load the completion of `rec` with `status` (its WR class `cls`: WC opcode in 7:0, WITH_IMM in 8), for QP
    /// `qpn` into CQ `cqn`; `clear` drops the one offered.
    pub load: Signal<In, Bit>,
    pub clear: Signal<In, Bit>,
    pub rec: Signal<In, Pend>,
    pub status: Signal<In, Bits<8>>,
    pub cls: Signal<In, Bits<12>>,
    pub cqn: Signal<In, Bits<24>>,
    pub qpn: Signal<In, Bits<24>>,
    pub valid: Signal<Out, Bit>,
    /// To CQE Generation.
    pub cq_valid: Signal<Out, Bit>,
    pub cq_cqn: Signal<Out, Bits<24>>,
    pub cq_wr_id: Signal<Out, Bits<64>>,
    pub cq_byte_len: Signal<Out, Bits<32>>,
    pub cq_imm: Signal<Out, Bits<32>>,
    pub cq_qp_num: Signal<Out, Bits<24>>,
    pub cq_src_qp: Signal<Out, Bits<24>>,
    pub cq_status: Signal<Out, Bits<8>>,
    pub cq_opcode: Signal<Out, Bits<8>>,
    pub cq_wc_flags: Signal<Out, Bits<8>>,

    o_valid: DFF<Bit>,
    o_cqn: DFF<Bits<24>>,
    o_wr_id: DFF<Bits<64>>,
    o_len: DFF<Bits<32>>,
    o_imm: DFF<Bits<32>>,
    o_qpn: DFF<Bits<24>>,
    o_status: DFF<Bits<8>>,
    o_opcode: DFF<Bits<8>>,
    o_flags: DFF<Bits<8>>,
    l_imm: Signal<Local, Bits<32>>,
    k0_8: Constant<Bits<8>>,
    k0_32: Constant<Bits<32>>,
    f_imm: Constant<Bits<8>>,
}

impl Default for CompCqe {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            load: Default::default(),
            clear: Default::default(),
            rec: Default::default(),
            status: Default::default(),
            cls: Default::default(),
            cqn: Default::default(),
            qpn: Default::default(),
            valid: Default::default(),
            cq_valid: Default::default(),
            cq_cqn: Default::default(),
            cq_wr_id: Default::default(),
            cq_byte_len: Default::default(),
            cq_imm: Default::default(),
            cq_qp_num: Default::default(),
            cq_src_qp: Default::default(),
            cq_status: Default::default(),
            cq_opcode: Default::default(),
            cq_wc_flags: Default::default(),
            o_valid: Default::default(),
            o_cqn: Default::default(),
            o_wr_id: Default::default(),
            o_len: Default::default(),
            o_imm: Default::default(),
            o_qpn: Default::default(),
            o_status: Default::default(),
            o_opcode: Default::default(),
            o_flags: Default::default(),
            l_imm: Default::default(),
            k0_8: k(0),
            k0_32: k(0),
            f_imm: k(WcFlags::WITH_IMM as u64),
        }
    }
}

impl Logic for CompCqe {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, o_valid, o_cqn, o_wr_id, o_len, o_imm, o_qpn, o_status, o_opcode, o_flags);
        self.valid.next = self.o_valid.q.val();
        self.cq_valid.next = self.o_valid.q.val();
        self.cq_cqn.next = self.o_cqn.q.val();
        self.cq_wr_id.next = self.o_wr_id.q.val();
        self.cq_byte_len.next = self.o_len.q.val();
        self.cq_imm.next = self.o_imm.q.val();
        self.cq_qp_num.next = self.o_qpn.q.val();
        self.cq_src_qp.next = bit_cast::<24, 8>(self.k0_8.val());
        self.cq_status.next = self.o_status.q.val();
        self.cq_opcode.next = self.o_opcode.q.val();
        self.cq_wc_flags.next = self.o_flags.q.val();
        self.l_imm.next = self.rec.val().imm;
        if self.load.val() {
            self.o_valid.d.next = (self.status.val() != self.k0_8.val()) | self.rec.val().signaled;
            self.o_cqn.d.next = self.cqn.val();
            self.o_wr_id.d.next = self.rec.val().wr_id;
            self.o_len.d.next = self.rec.val().len;
            self.o_qpn.d.next = self.qpn.val();
            self.o_status.d.next = self.status.val();
            self.o_opcode.d.next = self.cls.val().get_bits::<8>(0);
            self.o_imm.d.next = self.k0_32.val();
            self.o_flags.d.next = self.k0_8.val();
            if self.cls.val().get_bit(8) {
                // immediate data in wire byte order (CQE bytes 12..15)
                self.o_imm.d.next = (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(0)) << 24)
                    | (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(8)) << 16)
                    | (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(16)) << 8)
                    | bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(24));
                self.o_flags.d.next = self.f_imm.val();
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

    fn tick(u: &mut CompCqe) {
        u.clock.next = false.into();
        simulate(u, 20);
        u.clock.next = true.into();
        simulate(u, 20);
    }

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
        tick(u);
        u.load.next = false;
    }

    /// A signaled WQE's completion with its WC opcode; an unsignaled success gives none, an unsignaled error
    /// does; a WITH_IMM WR's immediate in wire byte order with its flag; held until cleared.
    #[test]
    fn completions_of_signaled_wqes_and_errors() {
        let mut u = CompCqe::default();
        u.connect_all();
        load(&mut u, true, 0, 0x001);
        assert!(u.cq_valid.val());
        assert_eq!((u.cq_wr_id.val().to_u64(), u.cq_byte_len.val().to_u64(), u.cq_opcode.val().to_u64(), u.cq_wc_flags.val().to_u64()), (0x1234, 4096, 1, 0));
        tick(&mut u);
        assert!(u.cq_valid.val(), "held");
        u.clear.next = true;
        tick(&mut u);
        u.clear.next = false;
        assert!(!u.cq_valid.val());
        load(&mut u, false, 0, 0x001);
        assert!(!u.cq_valid.val(), "unsignaled success: no completion");
        load(&mut u, false, 5, 0x001);
        assert!(u.cq_valid.val() && u.cq_status.val().to_u64() == 5, "unsignaled error: completed");
        load(&mut u, true, 0, 0x100);
        assert_eq!((u.cq_imm.val().to_u64(), u.cq_wc_flags.val().to_u64()), (0x4433_2211, WcFlags::WITH_IMM as u64));
    }
}
