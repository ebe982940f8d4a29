//! The hot QP's fast path: after an executed in-order WRITE FIRST or MIDDLE (`arm` when it finishes) the QP
//! stays *hot* at its write-back (`wb`), with the packet it expects next: a WRITE MIDDLE of PMTU bytes while
//! more than a PMTU of the WRITE is left, else the LAST of the rest with the pad that rounds it to 4 bytes (the
//! WRITE length rule, from the residue: `wr_big`, `wr`, `wr_pad`). The header on offer is `expected` when it is
//! that packet of that QP at its ePSN from the QP's remote address with the default P_Key (the checks the QP
//! lookup would make), and `fpay` when it has payload: the Responder then takes it straight to its payload.
//! Another packet taken (`take`), a command between packets or a QP attribute write (`kill`) cools the QP.

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::wire::rx_parse::RxHeader;
use testbench::wire::headers::DEFAULT_PKEY;
use testbench::wire::opcode::{RC_RDMA_WRITE_LAST, RC_RDMA_WRITE_MIDDLE};

crate::logic_block! {
    /// The hot QP's expectation and the match of the header on offer (see the module documentation).
    pub struct FastPath {
        pub clock: Signal<In, Clock>,
        /// The header on offer and its payload length.
        pub hdr: Signal<In, RxHeader>,
        pub hdr_pay_len: Signal<In, Bits<13>>,
        /// The packet's QP, its ePSN after the packet, its remote address.
        pub qpn: Signal<In, Bits<24>>,
        pub epsn: Signal<In, Bits<24>>,
        pub remote_ip: Signal<In, Bits<128>>,
        /// An executed packet finishes: the QP may be hot after it (`arm_in`).
        pub arm: Signal<In, Bit>,
        pub arm_in: Signal<In, Bit>,
        /// The write-back: hot if armed, expecting the next packet by the WRITE's residue and the path MTU.
        pub wb: Signal<In, Bit>,
        pub wr_big: Signal<In, Bit>,
        pub wr: Signal<In, Bits<13>>,
        pub wr_pad: Signal<In, Bits<2>>,
        pub mtu: Signal<In, Bits<13>>,
        /// A header taken, or a command or QP attribute write: no longer hot.
        pub take: Signal<In, Bit>,
        pub kill: Signal<In, Bit>,
        pub expected: Signal<Out, Bit>,
        pub fpay: Signal<Out, Bit>,
        /// The packet finishing now armed the QP (it will be hot after its write-back): its next header should
        /// be taken after the write-back, so that it may take the fast path.
        pub armed: Signal<Out, Bit>,

        hot: DFF<Bit>,
        f_arm: DFF<Bit>,
        f_op: DFF<Bits<8>>,
        f_plen: DFF<Bits<13>>,
        f_pad: DFF<Bits<2>>,
        l_bth1: Signal<Local, Bits<8>>,
        l_pkey: Signal<Local, Bits<16>>,
        zero2: Constant<Bits<2>> = k(0),
        zero13: Constant<Bits<13>> = k(0),
        op_wr_middle: Constant<Bits<8>> = k(RC_RDMA_WRITE_MIDDLE as u64),
        op_wr_last: Constant<Bits<8>> = k(RC_RDMA_WRITE_LAST as u64),
        pkey_low: Constant<Bits<15>> = k((DEFAULT_PKEY & 0x7FFF) as u64),
    }
}

impl Logic for FastPath {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, hot, f_arm, f_op, f_plen, f_pad);
        self.l_bth1.next = self.hdr.val().bth1;
        self.l_pkey.next = self.hdr.val().pkey;
        self.expected.next = self.hot.q.val()
            & (self.hdr.val().dest_qpn == self.qpn.val())
            & (self.hdr.val().opcode == self.f_op.q.val())
            & (self.hdr.val().psn == self.epsn.val())
            & (self.hdr_pay_len.val() == self.f_plen.q.val())
            & (self.l_bth1.val().get_bits::<2>(4) == self.f_pad.q.val())
            & (self.hdr.val().src_ip == self.remote_ip.val())
            & (self.l_pkey.val().get_bits::<15>(0) == self.pkey_low.val());
        self.fpay.next = self.expected.val() & (self.hdr_pay_len.val() != self.zero13.val());
        self.armed.next = self.f_arm.q.val();
        if self.arm.val() {
            self.f_arm.d.next = self.arm_in.val();
        }
        if self.wb.val() {
            // the hot QP's next packet: MIDDLE of PMTU bytes while more than PMTU is left, else LAST of the rest
            self.hot.d.next = self.f_arm.q.val();
            self.f_op.d.next = self.op_wr_last.val();
            self.f_plen.d.next = self.wr.val();
            self.f_pad.d.next = self.wr_pad.val();
            if self.wr_big.val() {
                self.f_op.d.next = self.op_wr_middle.val();
                self.f_plen.d.next = self.mtu.val();
                self.f_pad.d.next = self.zero2.val();
            }
        }
        if self.take.val() {
            self.hot.d.next = false;
            self.f_arm.d.next = false;
        }
        if self.kill.val() {
            self.hot.d.next = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testbench::wire::opcode::RC_SEND_MIDDLE;


    fn hdr(op: u8, qpn: u64, psn: u64, pad: u64, pkey: u64, ip: u64) -> RxHeader {
        let mut h = RxHeader::default();
        h.opcode = bits(op as u64);
        h.dest_qpn = bits(qpn);
        h.psn = bits(psn);
        h.bth1 = bits(pad << 4);
        h.pkey = bits(pkey);
        h.src_ip = crate::wire::tx_build::v4_bits(ip as u32);
        h
    }

    /// Armed by a WRITE FIRST, the QP expects a MIDDLE of a PMTU while more is left, then the LAST of the rest
    /// with its pad; anything else (QP, opcode, PSN, length, pad, address, P_Key) does not match; a take or a
    /// command cools it.
    #[test]
    fn the_hot_qp_expects_the_next_packet_of_its_write() {
        let mut u = FastPath::default();
        u.connect_all();
        u.qpn.next = bits(9);
        u.epsn.next = bits(101);
        u.remote_ip.next = crate::wire::tx_build::v4_bits(0x0A00_0001);
        u.mtu.next = bits(1024);
        let offer = |u: &mut FastPath, h: RxHeader, len: u64| {
            u.hdr.next = h;
            u.hdr_pay_len.next = bits(len);
            simulate(u, 20);
            (u.expected.val(), u.fpay.val())
        };
        let pk = DEFAULT_PKEY as u64;
        // armed, written back with 2,000 bytes left: a MIDDLE of 1,024
        u.arm.next = true;
        u.arm_in.next = true;
        crate::tick!(&mut u);
        u.arm.next = false;
        u.wb.next = true;
        u.wr_big.next = true;
        crate::tick!(&mut u);
        u.wb.next = false;
        assert_eq!(offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 101, 0, pk, 0x0A00_0001), 1024), (true, true));
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 8, 101, 0, pk, 0x0A00_0001), 1024).0, "another QP");
        assert!(!offer(&mut u, hdr(RC_SEND_MIDDLE, 9, 101, 0, pk, 0x0A00_0001), 1024).0, "another opcode");
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 102, 0, pk, 0x0A00_0001), 1024).0, "another PSN");
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 101, 0, pk, 0x0A00_0001), 1000).0, "another length");
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 101, 1, pk, 0x0A00_0001), 1024).0, "a pad");
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 101, 0, pk, 0x0A00_0002), 1024).0, "another address");
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 101, 0, 0x1234, 0x0A00_0001), 1024).0, "another P_Key");
        assert!(offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 101, 0, 0x7FFF, 0x0A00_0001), 1024).0, "the P_Key's membership bit aside");
        // the MIDDLE executed, 5 bytes left: the LAST of 5 with pad 3
        u.take.next = true;
        crate::tick!(&mut u);
        u.take.next = false;
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_MIDDLE, 9, 101, 0, pk, 0x0A00_0001), 1024).0, "cool once taken");
        u.arm.next = true;
        crate::tick!(&mut u);
        u.arm.next = false;
        u.wb.next = true;
        u.wr_big.next = false;
        u.wr.next = bits(5);
        u.wr_pad.next = bits(3);
        crate::tick!(&mut u);
        u.wb.next = false;
        assert_eq!(offer(&mut u, hdr(RC_RDMA_WRITE_LAST, 9, 101, 3, pk, 0x0A00_0001), 5), (true, true));
        u.kill.next = true;
        crate::tick!(&mut u);
        u.kill.next = false;
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_LAST, 9, 101, 3, pk, 0x0A00_0001), 5).0, "a command cools it");
        // not armed (a LAST executed): written back cold
        u.arm.next = true;
        u.arm_in.next = false;
        crate::tick!(&mut u);
        u.arm.next = false;
        u.wb.next = true;
        crate::tick!(&mut u);
        u.wb.next = false;
        assert!(!offer(&mut u, hdr(RC_RDMA_WRITE_LAST, 9, 101, 3, pk, 0x0A00_0001), 5).0);
    }
}
