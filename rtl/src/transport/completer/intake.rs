//! The Completer's response intake and PSN compares (rxe `rxe_comp.c` `check_psn`'s inputs): a response
//! header taken (`take`) is decoded into registers: its PSN and payload length, its kind (ACKNOWLEDGE, ATOMIC
//! ACKNOWLEDGE, READ RESPONSE FIRST / MIDDLE / LAST / ONLY), its AETH syndrome (whole, and its type: ACK, RNR
//! NAK, NAK, reserved) and an ATOMIC ACKNOWLEDGE's original value (AtomicAckETH, big-endian on the wire, in
//! host byte order). `psn1` = PSN + 1 is summed in two 12-bit halves (two cycles). Three [`PsnCmp`]s compare,
//! two cycles after their inputs settle, as rxe `psn_compare`: PSN + 1 against the head WQE's next PSN
//! (`last_*`), the PSN against `comp_psn` (`comp_*`), and the head WQE's next PSN against `comp_psn`
//! (`next_gt`).

use rust_hdl::prelude::*;

use crate::common::bytemap::{swap64_map, ByteMap};
use crate::common::consts::k;
use crate::common::psn_cmp::PsnCmp;
use crate::wire::rx_parse::RxHeader;
use testbench::wire::headers::{AETH_TYPE_ACK, AETH_TYPE_MASK, AETH_TYPE_NAK, AETH_TYPE_RESERVED, AETH_TYPE_RNR_NAK};
use testbench::wire::opcode::{
    RC_ACKNOWLEDGE, RC_ATOMIC_ACKNOWLEDGE, RC_RDMA_READ_RESPONSE_FIRST, RC_RDMA_READ_RESPONSE_LAST,
    RC_RDMA_READ_RESPONSE_MIDDLE, RC_RDMA_READ_RESPONSE_ONLY,
};

crate::logic_block! {
    /// The response intake (see the module documentation).
    pub struct RespIntake {
        pub clock: Signal<In, Clock>,
        /// The header on offer and its payload length; `take` takes it.
        pub hdr: Signal<In, RxHeader>,
        pub hdr_pay_len: Signal<In, Bits<13>>,
        pub take: Signal<In, Bit>,
        /// The head WQE's next PSN and the QP's `comp_psn`, for the compares.
        pub next_psn: Signal<In, Bits<24>>,
        pub comp_psn: Signal<In, Bits<24>>,
        /// The response: PSN, payload length, AETH syndrome, the atomic's original value (host order), PSN + 1.
        pub psn: Signal<Out, Bits<24>>,
        pub plen: Signal<Out, Bits<13>>,
        pub syn: Signal<Out, Bits<8>>,
        pub orig: Signal<Out, Bits<64>>,
        pub psn1: Signal<Out, Bits<24>>,
        /// Its kind and its syndrome's type.
        pub is_ack: Signal<Out, Bit>,
        pub is_atack: Signal<Out, Bit>,
        pub is_first: Signal<Out, Bit>,
        pub is_mid: Signal<Out, Bit>,
        pub is_last: Signal<Out, Bit>,
        pub is_only: Signal<Out, Bit>,
        pub sy_ack: Signal<Out, Bit>,
        pub sy_rnr: Signal<Out, Bit>,
        pub sy_nak: Signal<Out, Bit>,
        pub sy_res: Signal<Out, Bit>,
        /// psn_compare(PSN + 1, next PSN), psn_compare(PSN, comp_psn), next PSN > comp_psn.
        pub last_gt: Signal<Out, Bit>,
        pub last_eq: Signal<Out, Bit>,
        pub comp_neg: Signal<Out, Bit>,
        pub comp_gt: Signal<Out, Bit>,
        pub next_gt: Signal<Out, Bit>,

        cmp_last: PsnCmp,
        cmp_comp: PsnCmp,
        cmp_next: PsnCmp,
        orig_map: ByteMap<64, 64> = swap64_map(),
        h_psn: DFF<Bits<24>>,
        h_plen: DFF<Bits<13>>,
        h_syn: DFF<Bits<8>>,
        /// an ATOMIC_ACKNOWLEDGE's original value in host (little-endian) byte order
        h_orig: DFF<Bits<64>>,
        d_ackop: DFF<Bit>,
        d_atack: DFF<Bit>,
        d_first: DFF<Bit>,
        d_mid: DFF<Bit>,
        d_last: DFF<Bit>,
        d_only: DFF<Bit>,
        t_ack: DFF<Bit>,
        t_rnr: DFF<Bit>,
        t_nak: DFF<Bit>,
        t_res: DFF<Bit>,
        inc_lo: DFF<Bits<12>>,
        inc_c: DFF<Bit>,
        r_psn1: DFF<Bits<24>>,
        l_ext: Signal<Local, Bits<352>>,
        l_syn: Signal<Local, Bits<8>>,
        l_hop: Signal<Local, Bits<8>>,
        l_hpsn: Signal<Local, Bits<24>>,
        l_hi: Signal<Local, Bits<12>>,
        k1_12: Constant<Bits<12>> = k(1),
        kfff_12: Constant<Bits<12>> = k(0xFFF),
        op_ack: Constant<Bits<8>> = k(RC_ACKNOWLEDGE as u64),
        op_atack: Constant<Bits<8>> = k(RC_ATOMIC_ACKNOWLEDGE as u64),
        op_first: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_FIRST as u64),
        op_mid: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_MIDDLE as u64),
        op_last: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_LAST as u64),
        op_only: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_ONLY as u64),
        sy_mask: Constant<Bits<8>> = k(AETH_TYPE_MASK as u64),
        sy_t_ack: Constant<Bits<8>> = k(AETH_TYPE_ACK as u64),
        sy_t_rnr: Constant<Bits<8>> = k(AETH_TYPE_RNR_NAK as u64),
        sy_t_nak: Constant<Bits<8>> = k(AETH_TYPE_NAK as u64),
        sy_t_res: Constant<Bits<8>> = k(AETH_TYPE_RESERVED as u64),
    }
}

impl Logic for RespIntake {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, h_psn, h_plen, h_syn, h_orig, d_ackop, d_atack, d_first, d_mid, d_last, d_only, t_ack, t_rnr, t_nak, t_res,
            inc_lo, inc_c, r_psn1
        );
        clock!(self, clock, cmp_last, cmp_comp, cmp_next);
        self.psn.next = self.h_psn.q.val();
        self.plen.next = self.h_plen.q.val();
        self.syn.next = self.h_syn.q.val();
        self.orig.next = self.h_orig.q.val();
        self.psn1.next = self.r_psn1.q.val();
        self.is_ack.next = self.d_ackop.q.val();
        self.is_atack.next = self.d_atack.q.val();
        self.is_first.next = self.d_first.q.val();
        self.is_mid.next = self.d_mid.q.val();
        self.is_last.next = self.d_last.q.val();
        self.is_only.next = self.d_only.q.val();
        self.sy_ack.next = self.t_ack.q.val();
        self.sy_rnr.next = self.t_rnr.q.val();
        self.sy_nak.next = self.t_nak.q.val();
        self.sy_res.next = self.t_res.q.val();
        // PSN + 1 of the header, in two 12-bit halves
        self.l_hpsn.next = self.h_psn.q.val();
        self.inc_lo.d.next = self.l_hpsn.val().get_bits::<12>(0) + self.k1_12.val();
        self.inc_c.d.next = self.l_hpsn.val().get_bits::<12>(0) == self.kfff_12.val();
        self.l_hi.next = self.l_hpsn.val().get_bits::<12>(12);
        if self.inc_c.q.val() {
            self.l_hi.next = self.l_hpsn.val().get_bits::<12>(12) + self.k1_12.val();
        }
        self.r_psn1.d.next = (bit_cast::<24, 12>(self.l_hi.val()) << 12) | bit_cast::<24, 12>(self.inc_lo.q.val());
        // the PSN compares
        self.cmp_last.a.next = self.r_psn1.q.val();
        self.cmp_last.b.next = self.next_psn.val();
        self.cmp_comp.a.next = self.h_psn.q.val();
        self.cmp_comp.b.next = self.comp_psn.val();
        self.cmp_next.a.next = self.next_psn.val();
        self.cmp_next.b.next = self.comp_psn.val();
        self.last_gt.next = self.cmp_last.gt.val();
        self.last_eq.next = self.cmp_last.eq.val();
        self.comp_neg.next = self.cmp_comp.neg.val();
        self.comp_gt.next = self.cmp_comp.gt.val();
        self.next_gt.next = self.cmp_next.gt.val();
        // the header on offer: AETH (ext bytes 0..4), then AtomicAckETH's big-endian original value (4..12)
        self.l_ext.next = self.hdr.val().ext;
        self.orig_map.x.next = self.l_ext.val().get_bits::<64>(32);
        self.l_syn.next = self.l_ext.val().get_bits::<8>(0) & self.sy_mask.val();
        self.l_hop.next = self.hdr.val().opcode;
        if self.take.val() {
            self.h_psn.d.next = self.hdr.val().psn;
            self.h_syn.d.next = self.l_ext.val().get_bits::<8>(0);
            self.h_orig.d.next = self.orig_map.y.val();
            self.h_plen.d.next = self.hdr_pay_len.val();
            self.d_ackop.d.next = self.l_hop.val() == self.op_ack.val();
            self.d_atack.d.next = self.l_hop.val() == self.op_atack.val();
            self.d_first.d.next = self.l_hop.val() == self.op_first.val();
            self.d_mid.d.next = self.l_hop.val() == self.op_mid.val();
            self.d_last.d.next = self.l_hop.val() == self.op_last.val();
            self.d_only.d.next = self.l_hop.val() == self.op_only.val();
            self.t_ack.d.next = self.l_syn.val() == self.sy_t_ack.val();
            self.t_rnr.d.next = self.l_syn.val() == self.sy_t_rnr.val();
            self.t_nak.d.next = self.l_syn.val() == self.sy_t_nak.val();
            self.t_res.d.next = self.l_syn.val() == self.sy_t_res.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    fn take(u: &mut RespIntake, op: u8, psn: u64, syn: u8, orig: u64) {
        let mut h = RxHeader::default();
        h.opcode = bits(op as u64);
        h.psn = bits(psn);
        let mut ext = [0u8; 12];
        ext[0] = syn;
        ext[4..12].copy_from_slice(&orig.to_be_bytes());
        for (i, b) in ext.iter().enumerate() {
            h.ext.set_bits::<8>(8 * i, bits(*b as u64));
        }
        u.hdr.next = h;
        u.hdr_pay_len.next = bits(256);
        u.take.next = true;
        crate::tick!(u);
        u.take.next = false;
        for _ in 0..4 {
            crate::tick!(u);
        }
    }

    /// Each response kind and syndrome type decoded, an atomic's original value in host order, PSN + 1 across
    /// the 12-bit carry and the 2^24 wrap, and the three compares as psn_compare gives them.
    #[test]
    fn responses_are_decoded_and_compared() {
        let mut u = RespIntake::default();
        u.connect_all();
        take(&mut u, RC_ATOMIC_ACKNOWLEDGE, 0xABC, 0x00, 0x0102_0304_0506_0708);
        assert!(u.is_atack.val() && u.sy_ack.val() && !u.is_ack.val());
        assert_eq!(u.orig.val().to_u64(), 0x0102_0304_0506_0708);
        take(&mut u, RC_ACKNOWLEDGE, 0xFFF, 0x60, 0);
        assert!(u.is_ack.val() && u.sy_nak.val() && u.syn.val().to_u64() == 0x60);
        assert_eq!(u.psn1.val().to_u64(), 0x1000, "the carry into the high half");
        take(&mut u, RC_ACKNOWLEDGE, 0xFF_FFFF, 0x2E, 0);
        assert!(u.sy_rnr.val());
        assert_eq!(u.psn1.val().to_u64(), 0, "across the wrap");
        take(&mut u, RC_ACKNOWLEDGE, 7, 0x40, 0);
        assert!(u.sy_res.val());
        for (op, f) in [(RC_RDMA_READ_RESPONSE_FIRST, 0), (RC_RDMA_READ_RESPONSE_MIDDLE, 1), (RC_RDMA_READ_RESPONSE_LAST, 2), (RC_RDMA_READ_RESPONSE_ONLY, 3)] {
            take(&mut u, op, 100, 0, 0);
            assert_eq!([u.is_first.val(), u.is_mid.val(), u.is_last.val(), u.is_only.val()], [f == 0, f == 1, f == 2, f == 3]);
        }
        // PSN 100, PSN + 1 = 101: against next PSN 101 (eq), 100 (gt); comp_psn 103 (behind), 99 (ahead)
        u.next_psn.next = bits(101);
        u.comp_psn.next = bits(103);
        for _ in 0..3 {
            crate::tick!(&mut u);
        }
        assert!(u.last_eq.val() && !u.last_gt.val() && u.comp_neg.val() && !u.comp_gt.val() && !u.next_gt.val());
        u.next_psn.next = bits(100);
        u.comp_psn.next = bits(99);
        for _ in 0..3 {
            crate::tick!(&mut u);
        }
        assert!(u.last_gt.val() && !u.comp_neg.val() && u.comp_gt.val() && u.next_gt.val());
    }
}
