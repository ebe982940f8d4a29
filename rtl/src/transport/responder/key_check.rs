//! The Responder's key checks, through its own copy of the Key Cache (the RX copy; the command dispatcher
//! writes it through `kc_wr` as it writes WQE Check's):
//!
//! * **check_rkey** (rxe `check_rkey`): a RETH's R_Key for [VA, VA + length) with REMOTE_WRITE or REMOTE_READ,
//!   an atomic's for its 8 bytes with REMOTE_ATOMIC, in the QP's PD (`rkey_load` with the request as the QP
//!   lookup answers; `issue` starts it beside the PSN check).
//! * **the receive buffer** of a SEND (rxe `send_data_in` / `copy_data`): the payload's place in the receive
//!   WQE, [addr + offset, addr + offset + payload), checked against the WQE's lkey with LOCAL_WRITE, and the
//!   room left (`len - (offset + payload)` without borrow: `room_ok`). A FIRST/ONLY starts at offset 0
//!   (`buf_first`, one step); a MIDDLE/LAST sums its address and end first (`buf_next`, then three cycles on
//!   `buf_next2`), the room summed while the Key Cache answers.
//!
//! The answer: `res_valid` for a cycle, latched by `take` into `ok` and `dma` (the DMA address of the first
//! byte); `end` is the offset after the SEND's payload (the receive's next offset).

use rust_hdl::prelude::*;

use super::take::ReqRec;
use crate::common::consts::k;
use crate::transport::key_cache::{
    KcWrite, KeyCache, PipeAdd64, ACC_LOCAL_WRITE, ACC_REMOTE_ATOMIC, ACC_REMOTE_READ, ACC_REMOTE_WRITE, PD_BITS,
};

crate::logic_block! {
    /// The key checks (see the module documentation).
    pub struct KeyCheck {
        pub clock: Signal<In, Clock>,
        pub kc_wr: KcWrite,
        /// The QP's protection domain.
        pub pd: Signal<In, Bits<PD_BITS>>,
        /// The request (the take stage's record): its R_Key, VA and DMA length, whether a READ or an atomic
        /// (else a WRITE), its payload length; `rkey_load` loads the R_Key check.
        pub req: Signal<In, ReqRec>,
        pub rkey_load: Signal<In, Bit>,
        /// A SEND_WITH_INV's IETH R_Key (in the record's `rkey`): may this QP's PD invalidate it (`inv_ok`)?
        pub inv_load: Signal<In, Bit>,
        /// A SEND's receive buffer: the WQE's address, length and lkey, the offset reached, the payload length.
        pub buf_first: Signal<In, Bit>,
        pub buf_next: Signal<In, Bit>,
        pub buf_next2: Signal<In, Bit>,
        pub r_addr: Signal<In, Bits<64>>,
        pub r_len: Signal<In, Bits<32>>,
        pub r_lkey: Signal<In, Bits<32>>,
        pub r_off: Signal<In, Bits<32>>,
        /// Start the loaded check; its answer (`res_valid`), latched by `take`.
        pub issue: Signal<In, Bit>,
        pub res_valid: Signal<Out, Bit>,
        pub take: Signal<In, Bit>,
        pub ok: Signal<Out, Bit>,
        pub dma: Signal<Out, Bits<64>>,
        pub room_ok: Signal<Out, Bit>,
        pub end_off: Signal<Out, Bits<32>>,
        pub inv_ok: Signal<Out, Bit>,

        kc: KeyCache<1024, 10>,
        kl_key: DFF<Bits<32>>,
        /// The lookup is an rkey's (the request's R_Key, a SEND_WITH_INV's key) or an lkey's (a receive
        /// buffer: a window's key is none), and for which QP (a type 2 window answers only its own).
        kl_rem: DFF<Bit>,
        kl_qpn: DFF<Bits<8>>,
        kl_va: DFF<Bits<64>>,
        kl_len: DFF<Bits<32>>,
        kl_acc: DFF<Bits<4>>,
        kc_ok: DFF<Bit>,
        kc_dma: DFF<Bits<64>>,
        kc_inv: DFF<Bit>,
        end_s: DFF<Bits<32>>,
        /// the receive buffer's sums: address (addr + offset), end (offset + payload), room (len - end)
        add_va: PipeAdd64,
        add_end: PipeAdd64,
        add_room: PipeAdd64,
        va_a: DFF<Bits<64>>,
        va_b: DFF<Bits<64>>,
        end_a: DFF<Bits<64>>,
        end_b: DFF<Bits<64>>,
        room_a: DFF<Bits<64>>,
        room_b: DFF<Bits<64>>,
        kacc_lw: Constant<Bits<4>> = k(ACC_LOCAL_WRITE),
        kacc_rr: Constant<Bits<4>> = k(ACC_REMOTE_READ),
        kacc_rw: Constant<Bits<4>> = k(ACC_REMOTE_WRITE),
        kacc_ra: Constant<Bits<4>> = k(ACC_REMOTE_ATOMIC),
        eight32: Constant<Bits<32>> = k(8),
        zero4: Constant<Bits<4>> = k(0),
        zero32: Constant<Bits<32>> = k(0),
        zero64: Constant<Bits<64>> = k(0),
        l_rkey: Signal<Local, Bits<32>>,
        /// The request's QPN (a Local: Verilog cannot slice a slice of the record).
        l_qpn: Signal<Local, Bits<24>>,
        l_va: Signal<Local, Bits<64>>,
        l_dlen: Signal<Local, Bits<32>>,
        l_plen: Signal<Local, Bits<13>>,
        l_info: Signal<Local, Bits<10>>,
        l_read: Signal<Local, Bit>,
        l_atomic: Signal<Local, Bit>,
    }
}

impl Logic for KeyCheck {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, kl_key, kl_rem, kl_qpn, kl_va, kl_len, kl_acc, kc_ok, kc_dma, kc_inv, end_s, va_a, va_b, end_a, end_b, room_a, room_b);
        clock!(self, clock, kc, add_va, add_end, add_room);
        self.l_rkey.next = self.req.val().rkey;
        self.l_qpn.next = self.req.val().qpn;
        self.l_va.next = self.req.val().va;
        self.l_dlen.next = self.req.val().dlen;
        self.l_plen.next = self.req.val().plen;
        self.l_info.next = self.req.val().info;
        // info bits I_READ (2) and I_ATOMIC (3): literal indices in HDL (the unit test checks the numbers)
        self.l_read.next = self.l_info.val().get_bit(2);
        self.l_atomic.next = self.l_info.val().get_bit(3);
        self.kc.wr_en.next = self.kc_wr.en.val();
        self.kc.inv_en.next = self.kc_wr.inv_en.val();
        self.kc.wr_index.next = self.kc_wr.index.val();
        self.kc.wr_valid.next = self.kc_wr.valid.val();
        self.kc.wr_tag.next = self.kc_wr.tag.val();
        self.kc.wr_pd.next = self.kc_wr.pd.val();
        self.kc.wr_access.next = self.kc_wr.access.val();
        self.kc.wr_va.next = self.kc_wr.va.val();
        self.kc.wr_len.next = self.kc_wr.len.val();
        self.kc.wr_base.next = self.kc_wr.base.val();
        self.kc.wr_fast.next = self.kc_wr.fast.val();
        self.kc.wr_mw.next = self.kc_wr.mw.val();
        self.kc.wr_mw2.next = self.kc_wr.mw2.val();
        self.kc.wr_qpn.next = self.kc_wr.qpn.val();
        self.kc.wr_bind.next = self.kc_wr.bind.val();
        self.kc.lk_valid.next = self.issue.val();
        self.kc.lk_key.next = self.kl_key.q.val();
        self.kc.lk_pd.next = self.pd.val();
        self.kc.lk_va.next = self.kl_va.q.val();
        self.kc.lk_len.next = self.kl_len.q.val();
        self.kc.lk_access.next = self.kl_acc.q.val();
        self.kc.lk_remote.next = self.kl_rem.q.val();
        self.kc.lk_qpn.next = self.kl_qpn.q.val();
        self.kc.lk_bind.next = false;
        self.res_valid.next = self.kc.res_valid.val();
        self.ok.next = self.kc_ok.q.val();
        self.dma.next = self.kc_dma.q.val();
        self.end_off.next = self.end_s.q.val();
        self.inv_ok.next = self.kc_inv.q.val();
        self.add_va.a.next = self.va_a.q.val();
        self.add_va.b.next = self.va_b.q.val();
        self.add_va.cin.next = false;
        self.add_end.a.next = self.end_a.q.val();
        self.add_end.b.next = self.end_b.q.val();
        self.add_end.cin.next = false;
        self.add_room.a.next = self.room_a.q.val();
        self.add_room.b.next = self.room_b.q.val();
        self.add_room.cin.next = true;
        self.room_ok.next = self.add_room.cout.val();
        if self.rkey_load.val() {
            // the R_Key check's inputs (issued beside the PSN check, once the QP's PD is known)
            self.kl_key.d.next = self.l_rkey.val();
            self.kl_rem.d.next = true;
            self.kl_qpn.d.next = self.l_qpn.val().get_bits::<8>(0);
            self.kl_va.d.next = self.l_va.val();
            self.kl_len.d.next = self.l_dlen.val();
            self.kl_acc.d.next = self.kacc_rw.val();
            if self.l_read.val() {
                self.kl_acc.d.next = self.kacc_rr.val();
            }
            if self.l_atomic.val() {
                self.kl_len.d.next = self.eight32.val();
                self.kl_acc.d.next = self.kacc_ra.val();
            }
        }
        if self.inv_load.val() {
            // rxe `rxe_invalidate_mr`: only the key, its PD and its kind decide (`res_inv`)
            self.kl_key.d.next = self.l_rkey.val();
            self.kl_rem.d.next = true;
            self.kl_va.d.next = self.zero64.val();
            self.kl_len.d.next = self.zero32.val();
            self.kl_acc.d.next = self.zero4.val();
        }
        if self.buf_first.val() {
            // a SEND FIRST/ONLY starts at offset 0 of the WQE just fetched: the lkey check for [addr, addr +
            // payload), and the room (len - payload, its carry) summed while it runs
            self.end_s.d.next = bit_cast::<32, 13>(self.l_plen.val());
            self.room_a.d.next = bit_cast::<64, 32>(self.r_len.val());
            self.room_b.d.next = !bit_cast::<64, 13>(self.l_plen.val());
            self.kl_key.d.next = self.r_lkey.val();
            self.kl_rem.d.next = false;
            self.kl_va.d.next = self.r_addr.val();
            self.kl_len.d.next = bit_cast::<32, 13>(self.l_plen.val());
            self.kl_acc.d.next = self.kacc_lw.val();
        }
        if self.buf_next.val() {
            // a SEND MIDDLE/LAST: va = buffer + offset, end = offset + payload
            self.va_a.d.next = self.r_addr.val();
            self.va_b.d.next = bit_cast::<64, 32>(self.r_off.val());
            self.end_a.d.next = bit_cast::<64, 32>(self.r_off.val());
            self.end_b.d.next = bit_cast::<64, 13>(self.l_plen.val());
        }
        if self.buf_next2.val() {
            // the carry of len - end: the buffer holds the payload (summed while the Key Cache checks the lkey)
            self.end_s.d.next = self.add_end.sum.val().get_bits::<32>(0);
            self.room_a.d.next = bit_cast::<64, 32>(self.r_len.val());
            self.room_b.d.next = !self.add_end.sum.val();
            self.kl_key.d.next = self.r_lkey.val();
            self.kl_rem.d.next = false;
            self.kl_va.d.next = self.add_va.sum.val();
            self.kl_len.d.next = bit_cast::<32, 13>(self.l_plen.val());
            self.kl_acc.d.next = self.kacc_lw.val();
        }
        if self.take.val() {
            self.kc_ok.d.next = self.kc.res_ok.val();
            self.kc_dma.d.next = self.kc.res_dma.val();
            self.kc_inv.d.next = self.kc.res_inv.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::responder::checks::{I_ATOMIC, I_READ};


    /// Register an MR: key (index << 8 | tag), PD 7, the access flags, [va, va + len) at DMA base `base`.
    fn mr(u: &mut KeyCheck, key: u64, access: u64, va: u64, len: u64, base: u64) {
        u.kc_wr.en.next = true;
        u.kc_wr.index.next = bits(key >> 8);
        u.kc_wr.valid.next = true;
        u.kc_wr.tag.next = bits(key & 0xFF);
        u.kc_wr.pd.next = bits(7);
        u.kc_wr.access.next = bits(access);
        u.kc_wr.va.next = bits(va);
        u.kc_wr.len.next = bits(len);
        u.kc_wr.base.next = bits(base);
        crate::tick!(u);
        u.kc_wr.en.next = false;
    }

    /// Issue the loaded check and wait for its answer: (ok, DMA address).
    fn answer(u: &mut KeyCheck) -> (bool, u64) {
        u.issue.next = true;
        crate::tick!(u);
        u.issue.next = false;
        for _ in 0..20 {
            simulate(u, 20);
            if u.res_valid.val() {
                u.take.next = true;
                crate::tick!(u);
                u.take.next = false;
                return (u.ok.val(), u.dma.val().to_u64());
            }
            crate::tick!(u);
        }
        panic!("no answer");
    }

    fn rkey(u: &mut KeyCheck, key: u64, va: u64, len: u64, read: bool, atomic: bool) -> (bool, u64) {
        u.rkey_load.next = true;
        u.req.next.rkey = bits(key);
        u.req.next.va = bits(va);
        u.req.next.dlen = bits(len);
        assert_eq!((I_READ, I_ATOMIC), (2, 3), "the info bits KeyCheck reads");
        u.req.next.info = bits((read as u64) << I_READ | (atomic as u64) << I_ATOMIC);
        crate::tick!(u);
        u.rkey_load.next = false;
        answer(u)
    }

    /// check_rkey: the access each request kind needs, the range, the PD; an atomic checks its 8 bytes only.
    #[test]
    fn rkeys_are_checked_for_the_access_each_request_needs() {
        let mut u = KeyCheck::default();
        u.connect_all();
        u.pd.next = bits(7);
        mr(&mut u, 0x0342, ACC_REMOTE_WRITE | ACC_REMOTE_ATOMIC, 0x1000, 0x1000, 0x8000_0000);
        mr(&mut u, 0x0455, ACC_REMOTE_READ, 0x1000, 0x1000, 0x9000_0000);
        assert_eq!(rkey(&mut u, 0x0342, 0x1100, 0x100, false, false), (true, 0x8000_0100), "WRITE");
        assert!(!rkey(&mut u, 0x0342, 0x1100, 0x100, true, false).0, "READ without REMOTE_READ");
        assert!(rkey(&mut u, 0x0455, 0x1100, 0x100, true, false).0, "READ");
        assert!(!rkey(&mut u, 0x0455, 0x1100, 0x100, false, false).0, "WRITE without REMOTE_WRITE");
        assert!(!rkey(&mut u, 0x0342, 0x1F00, 0x101, false, false).0, "past the MR's end");
        assert!(!rkey(&mut u, 0x0343, 0x1100, 0x100, false, false).0, "another key tag");
        assert_eq!(rkey(&mut u, 0x0342, 0x1FF8, 0x1000, false, true), (true, 0x8000_0FF8), "an atomic: 8 bytes");
        assert!(!rkey(&mut u, 0x0455, 0x1FF8, 8, false, true).0, "an atomic without REMOTE_ATOMIC");
        u.pd.next = bits(8);
        assert!(!rkey(&mut u, 0x0342, 0x1100, 0x100, false, false).0, "another PD");
    }

    /// A SEND_WITH_INV's R_Key may be invalidated only when it names a fast-registration MR of the QP's PD
    /// (rxe `rxe_invalidate_mr`, the golden model's `MrKind::FastReg` rule); an entry already invalid still
    /// may (rxe sets the state FREE again), its access and range do not matter.
    #[test]
    fn an_invalidate_needs_a_fast_registration_mr_of_the_pd() {
        let mut u = KeyCheck::default();
        u.connect_all();
        u.pd.next = bits(7);
        mr(&mut u, 0x0342, ACC_REMOTE_WRITE | ACC_LOCAL_WRITE, 0x1000, 0x1000, 0x8000_0000);
        u.kc_wr.fast.next = true;
        mr(&mut u, 0x0455, 0, 0x1000, 0x10, 0x9000_0000);
        u.kc_wr.fast.next = false;
        let inv = |u: &mut KeyCheck, key: u64| {
            u.inv_load.next = true;
            u.req.next.rkey = bits(key);
            crate::tick!(u);
            u.inv_load.next = false;
            answer(u);
            u.inv_ok.val()
        };
        assert!(inv(&mut u, 0x0455), "a fast-registration MR of the PD");
        assert!(!inv(&mut u, 0x0342), "a user MR (ibv_reg_mr)");
        assert!(!inv(&mut u, 0x0456), "another tag");
        assert!(!inv(&mut u, 0x40_0055), "an index past the table");
        u.kc_wr.inv_en.next = true;
        u.kc_wr.index.next = bits(4);
        crate::tick!(&mut u);
        u.kc_wr.inv_en.next = false;
        assert!(inv(&mut u, 0x0455), "already invalid: invalidated again");
        u.pd.next = bits(8);
        assert!(!inv(&mut u, 0x0455), "another PD");
    }

    /// The receive buffer of a SEND: FIRST at offset 0, MIDDLE/LAST at the offset reached; the lkey with
    /// LOCAL_WRITE over the payload's bytes; the room left.
    #[test]
    fn a_sends_receive_buffer_is_checked_for_room_and_its_lkey() {
        let mut u = KeyCheck::default();
        u.connect_all();
        u.pd.next = bits(7);
        mr(&mut u, 0x0120, ACC_LOCAL_WRITE, 0x4000, 0x1000, 0x7000_0000);
        mr(&mut u, 0x0221, ACC_REMOTE_WRITE, 0x4000, 0x1000, 0x7000_0000);
        u.r_addr.next = bits(0x4800);
        u.r_len.next = bits(1500);
        u.r_lkey.next = bits(0x0120);
        let first = |u: &mut KeyCheck, plen: u64| {
            u.req.next.plen = bits(plen);
            u.buf_first.next = true;
            crate::tick!(u);
            u.buf_first.next = false;
            let (ok, dma) = answer(u);
            (ok, dma, u.room_ok.val(), u.end_off.val().to_u64())
        };
        let next = |u: &mut KeyCheck, off: u64, plen: u64| {
            u.r_off.next = bits(off);
            u.req.next.plen = bits(plen);
            u.buf_next.next = true;
            crate::tick!(u);
            u.buf_next.next = false;
            for _ in 0..3 {
                crate::tick!(u);
            }
            u.buf_next2.next = true;
            crate::tick!(u);
            u.buf_next2.next = false;
            let (ok, dma) = answer(u);
            (ok, dma, u.room_ok.val(), u.end_off.val().to_u64())
        };
        assert_eq!(first(&mut u, 1024), (true, 0x7000_0800, true, 1024));
        assert!(!first(&mut u, 1501).2, "longer than the receive");
        assert_eq!(next(&mut u, 1024, 476), (true, 0x7000_0C00, true, 1500), "the rest fits exactly");
        assert!(!next(&mut u, 1024, 477).2, "one byte too many");
        u.r_lkey.next = bits(0x0221);
        assert!(!first(&mut u, 64).0, "an lkey without LOCAL_WRITE");
    }
}
