//! The Responder's transmit side (rxe `send_ack`, `send_atomic_ack`, and the hand-off of `read_reply`'s
//! packets): one header register for TX Packet Build (ACK, NAK and RNR NAK with their AETH; ATOMIC ACKNOWLEDGE
//! with AETH and AtomicAckETH; READ RESPONSE FIRST / MIDDLE / LAST / ONLY) and one gather command register
//! for a READ response's payload, loaded together so that the TX request arbiter issues them in order.
//!
//! `go` loads a header: the addresses come from the QP (`st`: the peer's MAC and IPv4 address, the UDP source
//! port, the destination QP) and our MAC and IPv4 address, the rest from the inputs; `g_go` with it loads the
//! gather command. A register is freed when the TX side takes it; `free` (both free, or being taken now) is
//! when the next may be loaded. `busy` (either register still full) keeps the next request header's take in the
//! write-back cycle from waiting on the TX side's ready.

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::common::ports::TxPacket;
use crate::transport::qp_context::QpStatic;
use crate::wire::tx_build::{TxHeader, EXT_BITS};

crate::logic_block! {
    /// The Responder's output registers (see the module documentation).
    pub struct RespTx {
        pub clock: Signal<In, Clock>,
        pub my_mac: Signal<In, Bits<48>>,
        pub my_ip: Signal<In, Bits<32>>,
        pub my_ip6: Signal<In, Bits<128>>,
        pub st: Signal<In, QpStatic>,
        /// Load a header: opcode, PSN, extension headers (`ext`, `ext_words` 32-bit words), payload length.
        pub go: Signal<In, Bit>,
        pub opcode: Signal<In, Bits<8>>,
        pub psn: Signal<In, Bits<24>>,
        pub ext: Signal<In, Bits<EXT_BITS>>,
        pub ext_words: Signal<In, Bits<4>>,
        pub pay_len: Signal<In, Bits<13>>,
        /// With it, a gather command for its payload.
        pub g_go: Signal<In, Bit>,
        pub g_in_addr: Signal<In, Bits<64>>,
        pub g_in_len: Signal<In, Bits<13>>,
        pub free: Signal<Out, Bit>,
        pub busy: Signal<Out, Bit>,
        /// To TX Packet Build (through the TX request arbiter) and to the Gather Path.
        pub out: TxPacket,

        o_hdr: DFF<TxHeader>,
        o_hv: DFF<Bit>,
        o_gv: DFF<Bit>,
        o_gaddr: DFF<Bits<64>>,
        o_glen: DFF<Bits<13>>,
        zero16: Constant<Bits<16>> = k(0),
        /// the IPv4-mapped prefix (::ffff:0:0)
        k_mapped: Constant<Bits<128>> = Constant::new(crate::wire::tx_build::v4_bits(0)),
    }
}

impl Logic for RespTx {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, o_hdr, o_hv, o_gv, o_gaddr, o_glen);
        self.out.hdr.next = self.o_hdr.q.val();
        self.out.hdr_valid.next = self.o_hv.q.val();
        self.out.g_valid.next = self.o_gv.q.val();
        self.out.g_addr.next = self.o_gaddr.q.val();
        self.out.g_len.next = self.o_glen.q.val();
        self.out.g_inl.next = false;
        self.busy.next = self.o_hv.q.val() | self.o_gv.q.val();
        if self.out.hdr_ready.val() {
            self.o_hv.d.next = false;
        }
        if self.out.g_ready.val() {
            self.o_gv.d.next = false;
        }
        self.free.next = (!self.o_hv.q.val() | self.out.hdr_ready.val()) & (!self.o_gv.q.val() | self.out.g_ready.val());
        if self.go.val() {
            self.o_hv.d.next = true;
            self.o_hdr.d.next.dst_mac = self.st.val().remote_mac;
            self.o_hdr.d.next.src_mac = self.my_mac.val();
            self.o_hdr.d.next.v6 = self.st.val().v6;
            self.o_hdr.d.next.src_ip = bit_cast::<128, 32>(self.my_ip.val()) | self.k_mapped.val();
            if self.st.val().v6 {
                self.o_hdr.d.next.src_ip = self.my_ip6.val();
            }
            self.o_hdr.d.next.dst_ip = self.st.val().remote_ip;
            self.o_hdr.d.next.ip_id = self.zero16.val();
            self.o_hdr.d.next.udp_sport = self.st.val().sport;
            self.o_hdr.d.next.opcode = self.opcode.val();
            self.o_hdr.d.next.solicited = false;
            self.o_hdr.d.next.ack_req = false;
            self.o_hdr.d.next.dest_qpn = self.st.val().dest_qpn;
            self.o_hdr.d.next.psn = self.psn.val();
            self.o_hdr.d.next.ext = self.ext.val();
            self.o_hdr.d.next.ext_words = self.ext_words.val();
            self.o_hdr.d.next.pay_len = self.pay_len.val();
            if self.g_go.val() {
                self.o_gv.d.next = true;
                self.o_gaddr.d.next = self.g_in_addr.val();
                self.o_glen.d.next = self.g_in_len.val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// A header and its gather command are loaded together with the QP's addresses, held until each is taken,
    /// and the next is loadable (`free`) in the cycle the last one is taken; `busy` by the registers alone.
    #[test]
    fn headers_and_gather_commands_are_held_until_taken() {
        let mut u = RespTx::default();
        u.connect_all();
        let mut st = QpStatic::default();
        st.remote_mac = bits(0x0200_0000_0002);
        st.remote_ip = crate::wire::tx_build::v4_bits(0x0A00_0001);
        st.sport = bits(0xC000);
        st.dest_qpn = bits(0x11);
        u.st.next = st;
        u.my_mac.next = bits(0x0200_0000_0001);
        u.my_ip.next = bits(0x0A00_0002);
        simulate(&mut u, 20);
        assert!(u.free.val() && !u.busy.val());
        u.go.next = true;
        u.opcode.next = bits(0x0D);
        u.psn.next = bits(0x123);
        u.pay_len.next = bits(1024);
        u.ext_words.next = bits(1);
        u.g_go.next = true;
        u.g_in_addr.next = bits(0x8000);
        u.g_in_len.next = bits(1024);
        crate::tick!(&mut u);
        u.go.next = false;
        u.g_go.next = false;
        let h = u.out.hdr.val();
        assert!(u.out.hdr_valid.val() && u.out.g_valid.val() && u.busy.val() && !u.free.val());
        assert_eq!((h.dst_mac.to_u64(), crate::wire::tx_build::u128_of(h.src_ip), h.udp_sport.to_u64(), h.dest_qpn.to_u64()), (0x0200_0000_0002, 0xFFFF_0A00_0002, 0xC000, 0x11));
        assert_eq!((h.opcode.to_u64(), h.psn.to_u64(), h.pay_len.to_u64()), (0x0D, 0x123, 1024));
        assert_eq!((u.out.g_addr.val().to_u64(), u.out.g_len.val().to_u64()), (0x8000, 1024));
        // the header taken first: still not free while the gather command waits
        u.out.hdr_ready.next = true;
        crate::tick!(&mut u);
        u.out.hdr_ready.next = false;
        simulate(&mut u, 20);
        assert!(!u.out.hdr_valid.val() && u.out.g_valid.val() && !u.free.val() && u.busy.val());
        u.out.g_ready.next = true;
        simulate(&mut u, 20);
        assert!(u.free.val() && u.busy.val(), "free as it is taken, busy by the register");
        crate::tick!(&mut u);
        u.out.g_ready.next = false;
        simulate(&mut u, 20);
        assert!(!u.out.g_valid.val() && u.free.val() && !u.busy.val());
        // an ACK: no gather command
        u.go.next = true;
        u.pay_len.next = bits(0);
        crate::tick!(&mut u);
        u.go.next = false;
        assert!(u.out.hdr_valid.val() && !u.out.g_valid.val());
    }
}
