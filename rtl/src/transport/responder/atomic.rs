//! The Atomic Unit's read-modify-write (rxe `atomic_reply`): the 64-byte block holding an atomic's 8-byte
//! target is read through the Responder's DMA read port (`Rd`, issued only once no receive-WQE read is on its
//! way and every payload byte before it is written: `rd_ok`), the original value taken from the block at the
//! target's offset (host byte order, `Resp`), the [`AtomicAlu`] computes the new value (`Alu`, `Wait`), and
//! the new value goes back through the Scatter Path as one 8-byte command (`sc_set` raises the Responder's
//! Scatter command, `Cmd` waits until it is taken) and its beat (`Pay`); `done` when both are taken. The
//! Responder takes one packet at a time and issues the next operation's read after this write, so an atomic
//! is indivisible for every other operation of this RNIC on those bytes (other QPs included).
//!
//! The operands are latched from the request's extension header as it is taken (`take`, AtomicETH /
//! MaskedCmpSwapETH / MaskedFetchAddETH, big-endian on the wire): COMPARE_SWAP compares with `compare`
//! (bytes 20..28) and swaps in `swap` (12..20); FETCH_ADD adds bytes 12..20; the masked forms add the masks
//! (28..36 the swap mask, 36..44 the compare mask; the masked FETCH_ADD's field boundaries at 20..28).
//! `orig` is the original value (a duplicate atomic's comes from its saved resource: `orig_we`), `orig_be` the
//! same big-endian for the ATOMIC ACKNOWLEDGE's AtomicAckETH.

use rust_hdl::prelude::*;

use crate::common::bytemap::{swap64_map, ByteMap, ByteSrc};
use crate::common::consts::k;
use crate::transport::atomic_unit::{AtomicAlu, ALU_CAS, ALU_FAA, ALU_MCAS, ALU_MFAA};
use testbench::wire::opcode::{MASKED_COMPARE_SWAP, MASKED_FETCH_ADD, RC_COMPARE_SWAP, RC_FETCH_ADD};

/// An atomic's operands as numbers (extension bytes, big-endian): AtomicETH / MaskedCmpSwapETH swap or add
/// (bytes 12..20) in 63:0, compare or field boundaries (20..28) in 127:64, swap mask (28..36) in 191:128,
/// compare mask (36..44) in 255:192.
fn atomic_map() -> ByteMap<352, 256> {
    ByteMap::new((0..4).flat_map(|k| (0..8).map(move |j| ByteSrc::In(8 * (12 + 8 * k + 7 - j)))).collect())
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum AtState {
    Idle,
    Rd,
    Resp,
    Alu,
    Wait,
    Sc,
    Cmd,
    Pay,
}

crate::logic_block! {
    /// The atomic read-modify-write (see the module documentation).
    pub struct AtomicRmw {
        pub clock: Signal<In, Clock>,
        /// A request header is taken: its operands (`ext`) are latched.
        pub take: Signal<In, Bit>,
        pub ext: Signal<In, Bits<352>>,
        /// The request's opcode and its target's DMA address.
        pub op: Signal<In, Bits<8>>,
        pub dma: Signal<In, Bits<64>>,
        /// The opcode is one of the four atomics executed here.
        pub plain: Signal<Out, Bit>,
        /// Execute (the Responder's R_Key check passed).
        pub start: Signal<In, Bit>,
        /// The block's read may go out.
        pub rd_ok: Signal<In, Bit>,
        pub rd_req_valid: Signal<Out, Bit>,
        pub rd_req_ready: Signal<In, Bit>,
        pub rd_req_addr: Signal<Out, Bits<64>>,
        pub rd_resp_valid: Signal<In, Bit>,
        pub rd_resp_ready: Signal<Out, Bit>,
        pub rd_resp_data: Signal<In, Bits<512>>,
        pub rd_resp_last: Signal<In, Bit>,
        /// The ALU's operands are summed: the Scatter command's length becomes 8 (`len8`), then the command is
        /// raised (`sc_set`); `sv`: the Responder's Scatter command is still waiting to be taken.
        pub len8: Signal<Out, Bit>,
        pub sc_set: Signal<Out, Bit>,
        pub sv: Signal<In, Bit>,
        /// The new value's beat for the Scatter Path (driven while `pay`).
        pub pay: Signal<Out, Bit>,
        pub s_tvalid: Signal<Out, Bit>,
        pub s_tready: Signal<In, Bit>,
        pub s_tdata: Signal<Out, Bits<512>>,
        pub s_tkeep: Signal<Out, Bits<64>>,
        /// The write-back is taken: the atomic has executed.
        pub done: Signal<Out, Bit>,
        /// The original value (and a duplicate's, saved in its resource: `orig_we`, `orig_in`), big-endian too.
        pub orig: Signal<Out, Bits<64>>,
        pub orig_be: Signal<Out, Bits<64>>,
        pub orig_we: Signal<In, Bit>,
        pub orig_in: Signal<In, Bits<64>>,

        state: DFF<AtState>,
        alu: AtomicAlu,
        atom: ByteMap<352, 256> = atomic_map(),
        be: ByteMap<64, 64> = swap64_map(),
        h_swap: DFF<Bits<64>>,
        h_cmp: DFF<Bits<64>>,
        /// MaskedCmpSwapETH's swap mask (bytes 28..36) and compare mask (36..44).
        h_sm: DFF<Bits<64>>,
        h_cm: DFF<Bits<64>>,
        at_orig: DFF<Bits<64>>,
        at_new: DFF<Bits<64>>,
        /// the write-back beat, valid until the Scatter Path takes it
        at_pv: DFF<Bit>,
        l_wqe: Signal<Local, Bits<512>>,
        op_cas: Constant<Bits<8>> = k(RC_COMPARE_SWAP as u64),
        op_faa: Constant<Bits<8>> = k(RC_FETCH_ADD as u64),
        op_mcas: Constant<Bits<8>> = k(MASKED_COMPARE_SWAP as u64),
        op_mfaa: Constant<Bits<8>> = k(MASKED_FETCH_ADD as u64),
        alu_cas: Constant<Bits<2>> = k(ALU_CAS),
        alu_faa: Constant<Bits<2>> = k(ALU_FAA),
        alu_mcas: Constant<Bits<2>> = k(ALU_MCAS),
        alu_mfaa: Constant<Bits<2>> = k(ALU_MFAA),
        zero64: Constant<Bits<64>> = k(0),
        /// the write-back beat's `tkeep`: 8 bytes
        kff64: Constant<Bits<64>> = k(0xFF),
        m63: Constant<Bits<64>> = k(63),
    }
}

impl Logic for AtomicRmw {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, state, h_swap, h_cmp, h_sm, h_cm, at_orig, at_new, at_pv);
        clock!(self, clock, alu);
        self.atom.x.next = self.ext.val();
        self.l_wqe.next = self.rd_resp_data.val();
        self.plain.next = (self.op.val() == self.op_cas.val())
            | (self.op.val() == self.op_faa.val())
            | (self.op.val() == self.op_mcas.val())
            | (self.op.val() == self.op_mfaa.val());
        // the ALU: the compare-and-swaps compare with `compare` and swap in `swap`, masked under the compare
        // mask and swap mask; the fetch-and-adds add `swap`'s bytes, the masked one with its field boundaries
        self.alu.in_valid.next = false;
        self.alu.op.next = self.alu_faa.val();
        self.alu.a.next = self.h_swap.q.val();
        self.alu.am.next = self.zero64.val();
        self.alu.bm.next = self.zero64.val();
        if self.op.val() == self.op_cas.val() {
            self.alu.op.next = self.alu_cas.val();
            self.alu.a.next = self.h_cmp.q.val();
        }
        if self.op.val() == self.op_mcas.val() {
            self.alu.op.next = self.alu_mcas.val();
            self.alu.a.next = self.h_cmp.q.val();
            self.alu.am.next = self.h_cm.q.val();
            self.alu.bm.next = self.h_sm.q.val();
        }
        if self.op.val() == self.op_mfaa.val() {
            self.alu.op.next = self.alu_mfaa.val();
            self.alu.am.next = self.h_cmp.q.val();
        }
        self.alu.orig.next = self.at_orig.q.val();
        self.alu.b.next = self.h_swap.q.val();
        self.orig.next = self.at_orig.q.val();
        self.be.x.next = self.at_orig.q.val();
        self.orig_be.next = self.be.y.val();
        self.rd_req_valid.next = false;
        self.rd_req_addr.next = self.dma.val() & !self.m63.val();
        self.rd_resp_ready.next = false;
        self.len8.next = false;
        self.sc_set.next = false;
        self.pay.next = false;
        self.s_tvalid.next = self.at_pv.q.val();
        self.s_tdata.next = bit_cast::<512, 64>(self.at_new.q.val());
        self.s_tkeep.next = self.kff64.val();
        self.done.next = false;
        if self.at_pv.q.val() & self.s_tready.val() {
            self.at_pv.d.next = false;
        }
        match self.state.q.val() {
            AtState::Idle => {}
            AtState::Rd => {
                // once no prefetch is on its way (its request holds the port's address until taken) and every
                // payload byte before it is written
                if self.rd_ok.val() {
                    self.rd_req_valid.next = true;
                    if self.rd_req_ready.val() {
                        self.state.d.next = AtState::Resp;
                    }
                }
            }
            AtState::Resp => {
                // the 8-byte word at the target's offset in the block (host byte order)
                self.rd_resp_ready.next = true;
                if self.rd_resp_valid.val() {
                    if self.dma.val().get_bit(5) {
                        if self.dma.val().get_bit(4) {
                            if self.dma.val().get_bit(3) {
                                self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(448);
                            } else {
                                self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(384);
                            }
                        } else if self.dma.val().get_bit(3) {
                            self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(320);
                        } else {
                            self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(256);
                        }
                    } else if self.dma.val().get_bit(4) {
                        if self.dma.val().get_bit(3) {
                            self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(192);
                        } else {
                            self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(128);
                        }
                    } else if self.dma.val().get_bit(3) {
                        self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(64);
                    } else {
                        self.at_orig.d.next = self.l_wqe.val().get_bits::<64>(0);
                    }
                    if self.rd_resp_last.val() {
                        self.state.d.next = AtState::Alu;
                    }
                }
            }
            AtState::Alu => {
                self.alu.in_valid.next = true;
                self.len8.next = true;
                self.state.d.next = AtState::Wait;
            }
            AtState::Wait => {
                if self.alu.out_valid.val() {
                    self.at_new.d.next = self.alu.result.val();
                    self.state.d.next = AtState::Sc;
                }
            }
            AtState::Sc => {
                // the new value back through the Scatter Path: one 8-byte command, then (Pay) its beat
                self.sc_set.next = true;
                self.state.d.next = AtState::Cmd;
            }
            AtState::Cmd => {
                if !self.sv.val() {
                    self.at_pv.d.next = true;
                    self.state.d.next = AtState::Pay;
                }
            }
            AtState::Pay => {
                self.pay.next = true;
                if !self.sv.val() & !self.at_pv.q.val() {
                    self.done.next = true;
                    self.state.d.next = AtState::Idle;
                }
            }
            _ => {
                self.state.d.next = AtState::Idle;
            }
        }
        if self.start.val() {
            self.state.d.next = AtState::Rd;
        }
        if self.orig_we.val() {
            self.at_orig.d.next = self.orig_in.val();
        }
        if self.take.val() {
            self.h_swap.d.next = self.atom.y.val().get_bits::<64>(0);
            self.h_cmp.d.next = self.atom.y.val().get_bits::<64>(64);
            self.h_sm.d.next = self.atom.y.val().get_bits::<64>(128);
            self.h_cm.d.next = self.atom.y.val().get_bits::<64>(192);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// The extension header of an atomic: swap/add at bytes 12..20, compare at 20..28, masks at 28..44.
    fn ext(swap_add: u64, cmp: u64, sm: u64, cm: u64) -> Bits<352> {
        let mut b = vec![0u8; 44];
        b[12..20].copy_from_slice(&swap_add.to_be_bytes());
        b[20..28].copy_from_slice(&cmp.to_be_bytes());
        b[28..36].copy_from_slice(&sm.to_be_bytes());
        b[36..44].copy_from_slice(&cm.to_be_bytes());
        let mut x = Bits::<352>::default();
        for (i, v) in b.iter().enumerate() {
            x.set_bits::<8>(8 * i, bits(*v as u64));
        }
        x
    }

    /// One atomic on a target at `dma` whose block holds `word` at every 8-byte offset but the target's, which
    /// holds `orig`: (the address read, the original value taken, the new value written, its big-endian form).
    fn run(op: u8, e: Bits<352>, dma: u64, orig: u64) -> (u64, u64, u64, u64) {
        let mut u = AtomicRmw::default();
        u.connect_all();
        u.take.next = true;
        u.ext.next = e;
        crate::tick!(&mut u);
        u.take.next = false;
        u.op.next = bits(op as u64);
        u.dma.next = bits(dma);
        simulate(&mut u, 20);
        assert!(u.plain.val());
        u.start.next = true;
        crate::tick!(&mut u);
        u.start.next = false;
        // the read waits for rd_ok, then for the port
        for _ in 0..3 {
            simulate(&mut u, 20);
            assert!(!u.rd_req_valid.val());
            crate::tick!(&mut u);
        }
        u.rd_ok.next = true;
        simulate(&mut u, 20);
        assert!(u.rd_req_valid.val());
        let addr = u.rd_req_addr.val().to_u64();
        u.rd_req_ready.next = true;
        crate::tick!(&mut u);
        u.rd_req_ready.next = false;
        let mut blk = Bits::<512>::default();
        for w in 0..8 {
            let v = if w == (dma as usize >> 3) & 7 { orig } else { 0x5A5A_5A5A_5A5A_5A5A };
            blk.set_bits::<64>(64 * w, bits(v));
        }
        u.rd_resp_valid.next = true;
        u.rd_resp_last.next = true;
        u.rd_resp_data.next = blk;
        crate::tick!(&mut u);
        u.rd_resp_valid.next = false;
        let mut n = 0;
        let mut sc = false;
        u.sv.next = false;
        while !u.pay.val() || !u.s_tvalid.val() {
            if u.sc_set.val() {
                sc = true;
            }
            crate::tick!(&mut u);
            n += 1;
            assert!(n < 30, "the write-back beat comes");
        }
        assert!(sc, "the Scatter command is raised before the beat");
        let new = u.s_tdata.val().get_bits::<64>(0).to_u64();
        assert_eq!(u.s_tkeep.val().get_bits::<64>(0).to_u64(), 0xFF, "8 bytes");
        u.s_tready.next = true;
        crate::tick!(&mut u);
        simulate(&mut u, 20);
        assert!(u.done.val());
        (addr, u.orig.val().to_u64(), new, u.orig_be.val().to_u64())
    }

    /// COMPARE_SWAP and FETCH_ADD and their masked forms on a target at every offset of its block: the block's
    /// address, the original value from the target's offset, the new value as the golden model computes it.
    #[test]
    fn atomics_read_their_block_compute_and_write_back() {
        let o = 0x0123_4567_89AB_CDEFu64;
        for off in 0..8u64 {
            let dma = 0x7_0000 + 8 * off;
            assert_eq!(run(RC_FETCH_ADD, ext(5, 0, 0, 0), dma, o), (0x7_0000, o, o + 5, o.swap_bytes()));
            assert_eq!(run(RC_COMPARE_SWAP, ext(99, o, 0, 0), dma, o).2, 99, "equal: swapped");
            assert_eq!(run(RC_COMPARE_SWAP, ext(99, o + 1, 0, 0), dma, o).2, o, "not equal: kept");
        }
        let (mcas, mfaa) = (MASKED_COMPARE_SWAP, MASKED_FETCH_ADD);
        let want = testbench::model::responder::masked_cmp_swap(o, 0xEF, 0xFF, 0xAB00, 0xFF00);
        assert_eq!(run(mcas, ext(0xAB00, 0xEF, 0xFF00, 0xFF), 0x7_0010, o).2, want);
        let want = testbench::model::responder::masked_fetch_add(o, 0x0101_0101_0101_0101, 0x8080_8080_8080_8080);
        assert_eq!(run(mfaa, ext(0x0101_0101_0101_0101, 0x8080_8080_8080_8080, 0, 0), 0x7_0018, o).2, want);
    }
}
