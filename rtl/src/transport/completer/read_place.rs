//! Where a READ response's payload lands (rxe `read_reply` on the requester side: `laddr + bytes received`,
//! LOC_LEN_ERR past the WQE's length), and the hot QP's fast path for the next response.
//!
//! * **General path**: from the head record (`laddr`, `len`) and the bytes of it received (`rd`), three
//!   pipelined adders give the next address, the room left and the bytes after this response (`rd_next`, with
//!   the response's payload length `plen`), three cycles after their inputs settle; `too_long` when the payload
//!   runs past the room. `load` keeps the address and the room.
//! * **Fast path**: after a read response that leaves its READ at the head unfinished, the QP is *hot*
//!   (`heat`): its state stays in the Completer's registers with the next response's address and the room
//!   left. The checks of the header on offer are registered while it is taken: same QP, PSN = `comp_psn`, PSN
//!   ≠ the READ's next PSN, payload ≤ room; the cycle after, an in-order MIDDLE, or LAST with an ACK AETH, with
//!   payload, whose checks all pass is `fast`: the rules' outcome is known, its Scatter command goes out at once,
//!   and `address + len`, `room - len` and `received + len` (`rd_fast`) come from three more pipelined adders
//!   (`sums`, counted from `restart`); `adv` keeps them for the next response. Every other response, a timeout
//!   or a CMD_WRITE_QP in between cools the QP (`cool`).

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::transport::key_cache::PipeAdd64;

crate::logic_block! {
    /// The READ response placement (see the module documentation).
    pub struct ReadPlace {
        pub clock: Signal<In, Clock>,
        /// The head record's local address and length, the bytes of it received, the response's payload length.
        pub laddr: Signal<In, Bits<64>>,
        pub len: Signal<In, Bits<32>>,
        pub rd: Signal<In, Bits<32>>,
        pub plen: Signal<In, Bits<13>>,
        /// The header on offer (QPN, PSN, payload length); the event's QP, its `comp_psn`, the head's next PSN.
        pub hdr_qpn: Signal<In, Bits<24>>,
        pub hdr_psn: Signal<In, Bits<24>>,
        pub hdr_pay_len: Signal<In, Bits<13>>,
        pub qpn: Signal<In, Bits<24>>,
        pub comp_psn: Signal<In, Bits<24>>,
        pub next_psn: Signal<In, Bits<24>>,
        /// The response taken: payload still to come, a MIDDLE, a LAST, an ACK syndrome.
        pub paypend: Signal<In, Bit>,
        pub is_mid: Signal<In, Bit>,
        pub is_last: Signal<In, Bit>,
        pub sy_ack: Signal<In, Bit>,
        /// Keep the general path's address and room; restart the fast sums' count; keep the fast sums.
        pub load: Signal<In, Bit>,
        pub restart: Signal<In, Bit>,
        pub adv: Signal<In, Bit>,
        pub heat: Signal<In, Bit>,
        pub cool: Signal<In, Bit>,
        /// The response takes the fast path; the fast sums are out; the payload runs past the room.
        pub fast: Signal<Out, Bit>,
        pub sums: Signal<Out, Bit>,
        pub too_long: Signal<Out, Bit>,
        /// The next response's address, the bytes received after this one (general and fast path).
        pub addr: Signal<Out, Bits<64>>,
        pub rd_next: Signal<Out, Bits<32>>,
        pub rd_fast: Signal<Out, Bits<32>>,

        add_addr: PipeAdd64,
        add_room: PipeAdd64,
        add_rd: PipeAdd64,
        pa_addr: PipeAdd64,
        pa_room: PipeAdd64,
        pa_rd: PipeAdd64,
        hot: DFF<Bit>,
        nx_addr: DFF<Bits<64>>,
        room: DFF<Bits<32>>,
        room_big: DFF<Bit>,
        fc: DFF<Bits<2>>,
        f_same: DFF<Bit>,
        f_psn: DFF<Bit>,
        f_end: DFF<Bit>,
        f_fit: DFF<Bit>,
        l_room: Signal<Local, Bits<64>>,
        l_rdsum: Signal<Local, Bits<64>>,
        l_pasum: Signal<Local, Bits<64>>,
        l_roomf: Signal<Local, Bits<64>>,
        k0_2: Constant<Bits<2>> = k(0),
        k1_2: Constant<Bits<2>> = k(1),
        k3_2: Constant<Bits<2>> = k(3),
        k0_19: Constant<Bits<19>> = k(0),
    }
}

impl Logic for ReadPlace {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, hot, nx_addr, room, room_big, fc, f_same, f_psn, f_end, f_fit);
        clock!(self, clock, add_addr, add_room, add_rd, pa_addr, pa_room, pa_rd);
        // the general path's sums (inputs stable from HeadEval)
        self.add_addr.a.next = self.laddr.val();
        self.add_addr.b.next = bit_cast::<64, 32>(self.rd.val());
        self.add_addr.cin.next = false;
        self.add_room.a.next = bit_cast::<64, 32>(self.len.val());
        self.add_room.b.next = !bit_cast::<64, 32>(self.rd.val());
        self.add_room.cin.next = true;
        self.add_rd.a.next = bit_cast::<64, 32>(self.rd.val());
        self.add_rd.b.next = bit_cast::<64, 13>(self.plen.val());
        self.add_rd.cin.next = false;
        self.l_room.next = self.add_room.sum.val();
        self.l_rdsum.next = self.add_rd.sum.val();
        self.rd_next.next = self.l_rdsum.val().get_bits::<32>(0);
        // payload beyond the WQE length: pay_len > len - received
        self.too_long.next = (self.l_room.val().get_bits::<19>(13) == self.k0_19.val())
            & (self.plen.val() > self.l_room.val().get_bits::<13>(0));
        self.addr.next = self.nx_addr.q.val();
        // the fast path: checks of the header on offer, registered (used the cycle after it is taken)
        self.f_same.d.next = self.hot.q.val() & (self.hdr_qpn.val() == self.qpn.val());
        self.f_psn.d.next = self.hdr_psn.val() == self.comp_psn.val();
        self.f_end.d.next = self.hdr_psn.val() == self.next_psn.val();
        self.f_fit.d.next = self.room_big.q.val() | (self.hdr_pay_len.val() <= self.room.q.val().get_bits::<13>(0));
        self.fast.next = self.f_same.q.val()
            & self.f_psn.q.val()
            & !self.f_end.q.val()
            & self.f_fit.q.val()
            & self.paypend.val()
            & (self.is_mid.val() | (self.is_last.val() & self.sy_ack.val()));
        // the next response's address, the room left and the bytes received, 3 cycles after their inputs
        // settle (fc counts the cycles)
        self.pa_addr.a.next = self.nx_addr.q.val();
        self.pa_addr.b.next = bit_cast::<64, 13>(self.plen.val());
        self.pa_addr.cin.next = false;
        self.pa_room.a.next = bit_cast::<64, 32>(self.room.q.val());
        self.pa_room.b.next = !bit_cast::<64, 13>(self.plen.val());
        self.pa_room.cin.next = true;
        self.pa_rd.a.next = bit_cast::<64, 32>(self.rd.val());
        self.pa_rd.b.next = bit_cast::<64, 13>(self.plen.val());
        self.pa_rd.cin.next = false;
        self.l_pasum.next = self.pa_rd.sum.val();
        self.rd_fast.next = self.l_pasum.val().get_bits::<32>(0);
        self.l_roomf.next = self.pa_room.sum.val();
        if self.fc.q.val() != self.k3_2.val() {
            self.fc.d.next = self.fc.q.val() + self.k1_2.val();
        }
        self.sums.next = self.fc.q.val().get_bit(1);
        if self.restart.val() {
            self.fc.d.next = self.k0_2.val();
        }
        if self.load.val() {
            self.nx_addr.d.next = self.add_addr.sum.val();
            self.room.d.next = self.l_room.val().get_bits::<32>(0);
        }
        if self.cool.val() {
            self.hot.d.next = false;
        }
        if self.heat.val() {
            self.hot.d.next = true;
        }
        if self.adv.val() {
            self.nx_addr.d.next = self.pa_addr.sum.val();
            self.room.d.next = self.l_roomf.val().get_bits::<32>(0);
            self.room_big.d.next = self.l_roomf.val().get_bits::<19>(13) != self.k0_19.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// The general path places a response at laddr + received and finds one too long; the hot QP then takes
    /// in-order MIDDLEs that fit on the fast path, each advancing the address and the room, and refuses another
    /// QP, another PSN, the READ's last PSN with a MIDDLE, a payload past the room, and anything once cooled.
    #[test]
    fn responses_are_placed_and_the_hot_qp_takes_the_fast_path() {
        let mut u = ReadPlace::default();
        u.connect_all();
        u.laddr.next = bits(0x10_0000);
        u.len.next = bits(3000);
        u.rd.next = bits(1024);
        u.plen.next = bits(1024);
        for _ in 0..4 {
            crate::tick!(&mut u);
        }
        assert!(!u.too_long.val());
        assert_eq!(u.rd_next.val().to_u64(), 2048);
        u.plen.next = bits(1977);
        for _ in 0..4 {
            crate::tick!(&mut u);
        }
        assert!(u.too_long.val(), "1,977 bytes into 1,976 of room");
        u.plen.next = bits(1024);
        for _ in 0..4 {
            crate::tick!(&mut u);
        }
        u.load.next = true;
        u.heat.next = true;
        crate::tick!(&mut u);
        u.load.next = false;
        u.heat.next = false;
        assert_eq!(u.addr.val().to_u64(), 0x10_0400, "laddr + received");
        // the hot QP's next MIDDLE at comp_psn, taken: fast
        let offer = |u: &mut ReadPlace, qpn: u64, psn: u64, len: u64| {
            u.qpn.next = bits(5);
            u.comp_psn.next = bits(200);
            u.next_psn.next = bits(203);
            u.hdr_qpn.next = bits(qpn);
            u.hdr_psn.next = bits(psn);
            u.hdr_pay_len.next = bits(len);
            crate::tick!(u);
            u.paypend.next = true;
            u.is_mid.next = true;
            simulate(u, 20);
            u.fast.val()
        };
        assert!(offer(&mut u, 5, 200, 1024));
        assert!(!offer(&mut u, 6, 200, 1024), "another QP");
        assert!(!offer(&mut u, 5, 201, 1024), "not comp_psn");
        assert!(!offer(&mut u, 5, 203, 1024), "the READ's last PSN");
        assert!(!offer(&mut u, 5, 200, 1977), "past the room");
        // the fast sums: three cycles from the restart, then kept for the next response
        u.restart.next = true;
        crate::tick!(&mut u);
        u.restart.next = false;
        let mut n = 0;
        while !u.sums.val() {
            crate::tick!(&mut u);
            n += 1;
        }
        assert_eq!(n, 2);
        assert_eq!(u.rd_fast.val().to_u64(), 2048);
        u.adv.next = true;
        crate::tick!(&mut u);
        u.adv.next = false;
        assert_eq!(u.addr.val().to_u64(), 0x10_0800);
        assert!(offer(&mut u, 5, 200, 952), "the room left: 952");
        assert!(!offer(&mut u, 5, 200, 953));
        u.cool.next = true;
        crate::tick!(&mut u);
        u.cool.next = false;
        assert!(!offer(&mut u, 5, 200, 512), "cooled");
    }
}
