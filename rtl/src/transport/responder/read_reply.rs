//! READ responses (rxe `read_reply`) and the replay of a duplicate READ (rxe `duplicate_request`).
//!
//! * **A new READ** (`start`): responses FIRST / MIDDLE / LAST / ONLY of PMTU bytes from the rkey-translated
//!   DMA address, PSN = request PSN + k, AETH (ACK, the MSN after the READ's increment) on FIRST / LAST / ONLY.
//! * **A duplicate READ** (`dup_go` with its resource `res`, rxe `duplicate_request`): the same rkey and
//!   [VA, VA + len) inside the saved range (`VA - va_org` without borrow, `VA + len` without carry, `va_org +
//!   length - (VA + len)` without borrow), summed in two rounds of three pipelined adders (9 cycles); then
//!   `dup_ok` and the responses are replayed from the request's PSN and VA (DMA address = the resource's +
//!   VA - va_org): FIRST / ONLY when the PSN is the READ's first, **MIDDLE .. LAST otherwise** (a mid-range
//!   retry never gets FIRST at a later PSN, which would put rxe's QP in error), the AETH with the QP's current
//!   MSN; else `dup_bad` (dropped and counted by the Responder). A replay changes no QP state (`replay`).
//!
//! Per response packet: `Prep` sizes it (the rest, or a PMTU), `Pkt` hands its header fields and gather
//! command to the Responder's output registers once they are free and every earlier payload byte is written
//! (`go_ok`: a READ reads host memory after the WRITEs before it), three cycles of sums (address + PMTU,
//! residue - PMTU, PSN + 1), `Next`; `done` in the last packet's `Next` (the Responder's `ReadEnd` follows
//! with `cur_psn` one past the last response's PSN). About 5 cycles per response packet.

use rust_hdl::prelude::*;

use super::read_res::ReadRes;
use super::take::ReqRec;
use crate::common::consts::k;
use crate::transport::key_cache::PipeAdd64;
use crate::wire::tx_build::EXT_BITS;
use testbench::wire::headers::AETH_ACK_UNLIMITED;
use testbench::wire::opcode::{RC_RDMA_READ_RESPONSE_FIRST, RC_RDMA_READ_RESPONSE_LAST, RC_RDMA_READ_RESPONSE_MIDDLE, RC_RDMA_READ_RESPONSE_ONLY};

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum RdState {
    Idle,
    Prep,
    Pkt,
    W1,
    W2,
    W3,
    Next,
    Sub,
    S1,
    S2,
    S3,
    Sub2,
    T1,
    T2,
    T3,
    Sub3,
}

crate::logic_block! {
    /// The READ response engine (see the module documentation).
    pub struct ReadReply {
        pub clock: Signal<In, Clock>,
        /// The request (the take stage's record: PSN, VA, rkey, DMA length, the QP's current MSN, the path MTU
        /// in bytes); its DMA address (the Key Cache's translation); the MSN after the READ's increment.
        pub req: Signal<In, ReqRec>,
        pub dma: Signal<In, Bits<64>>,
        pub msn1: Signal<In, Bits<24>>,
        /// A new READ: respond from `dma`.
        pub start: Signal<In, Bit>,
        /// A duplicate READ with its resource `res`: check the subset, then replay (`dup_ok`) or not (`dup_bad`).
        pub dup_go: Signal<In, Bit>,
        pub res: Signal<In, ReadRes>,
        pub dup_ok: Signal<Out, Bit>,
        pub dup_bad: Signal<Out, Bit>,
        /// The output registers are free and every earlier payload byte is written.
        pub go_ok: Signal<In, Bit>,
        /// A response header goes out this cycle: opcode, PSN, AETH (`ext`, `ext_words`), payload length; and
        /// its gather command when it has payload (`g_go`, `g_addr`, `g_len`).
        pub hdr_go: Signal<Out, Bit>,
        pub opcode: Signal<Out, Bits<8>>,
        pub hdr_psn: Signal<Out, Bits<24>>,
        pub ext: Signal<Out, Bits<EXT_BITS>>,
        pub ext_words: Signal<Out, Bits<4>>,
        pub pay_len: Signal<Out, Bits<13>>,
        pub g_go: Signal<Out, Bit>,
        pub g_addr: Signal<Out, Bits<64>>,
        pub g_len: Signal<Out, Bits<13>>,
        /// The last response's sums are done; `cur_psn` is one past its PSN; `replay`: it was a replay.
        pub done: Signal<Out, Bit>,
        pub cur_psn: Signal<Out, Bits<24>>,
        pub replay: Signal<Out, Bit>,

        state: DFF<RdState>,
        add_a: PipeAdd64,
        add_b: PipeAdd64,
        add_c: PipeAdd64,
        aa_a: DFF<Bits<64>>,
        aa_b: DFF<Bits<64>>,
        aa_c: DFF<Bit>,
        ab_a: DFF<Bits<64>>,
        ab_b: DFF<Bits<64>>,
        ab_c: DFF<Bit>,
        ac_a: DFF<Bits<64>>,
        ac_b: DFF<Bits<64>>,
        ac_c: DFF<Bit>,
        g_ptr: DFF<Bits<64>>,
        resid: DFF<Bits<32>>,
        r_psn: DFF<Bits<24>>,
        rfirst: DFF<Bit>,
        rlast: DFF<Bit>,
        rchunk: DFF<Bits<13>>,
        rmsn: DFF<Bits<24>>,
        r_replay: DFF<Bit>,
        dr: DFF<ReadRes>,
        du_ge: DFF<Bit>,
        du_ovf: DFF<Bit>,
        du_key: DFF<Bit>,
        l_psn: Signal<Local, Bits<24>>,
        l_va: Signal<Local, Bits<64>>,
        l_rkey: Signal<Local, Bits<32>>,
        l_dlen: Signal<Local, Bits<32>>,
        l_msn: Signal<Local, Bits<24>>,
        l_mtu: Signal<Local, Bits<13>>,
        l_aeth: Signal<Local, Bits<32>>,
        l_fits: Signal<Local, Bit>,
        syn_ack: Constant<Bits<8>> = k(AETH_ACK_UNLIMITED as u64),
        op_first: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_FIRST as u64),
        op_middle: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_MIDDLE as u64),
        op_last: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_LAST as u64),
        op_only: Constant<Bits<8>> = k(RC_RDMA_READ_RESPONSE_ONLY as u64),
        zero4: Constant<Bits<4>> = k(0),
        one4: Constant<Bits<4>> = k(1),
        zero13: Constant<Bits<13>> = k(0),
        zero19: Constant<Bits<19>> = k(0),
        zero32: Constant<Bits<32>> = k(0),
        zero64: Constant<Bits<64>> = k(0),
    }
}

impl Logic for ReadReply {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, state, aa_a, aa_b, aa_c, ab_a, ab_b, ab_c, ac_a, ac_b, ac_c, g_ptr, resid, r_psn, rfirst, rlast, rchunk, rmsn,
            r_replay, dr, du_ge, du_ovf, du_key
        );
        clock!(self, clock, add_a, add_b, add_c);
        self.l_psn.next = self.req.val().psn;
        self.l_va.next = self.req.val().va;
        self.l_rkey.next = self.req.val().rkey;
        self.l_dlen.next = self.req.val().dlen;
        self.l_msn.next = self.req.val().msn;
        self.l_mtu.next = self.req.val().mtu;
        self.add_a.a.next = self.aa_a.q.val();
        self.add_a.b.next = self.aa_b.q.val();
        self.add_a.cin.next = self.aa_c.q.val();
        self.add_b.a.next = self.ab_a.q.val();
        self.add_b.b.next = self.ab_b.q.val();
        self.add_b.cin.next = self.ab_c.q.val();
        self.add_c.a.next = self.ac_a.q.val();
        self.add_c.b.next = self.ac_b.q.val();
        self.add_c.cin.next = self.ac_c.q.val();
        self.cur_psn.next = self.r_psn.q.val();
        self.replay.next = self.r_replay.q.val();
        // the AETH of FIRST / LAST / ONLY: ACK, then the MSN big-endian
        self.l_aeth.next = bit_cast::<32, 8>(self.syn_ack.val())
            | (bit_cast::<32, 8>(self.rmsn.q.val().get_bits::<8>(16)) << 8)
            | (bit_cast::<32, 8>(self.rmsn.q.val().get_bits::<8>(8)) << 16)
            | (bit_cast::<32, 8>(self.rmsn.q.val().get_bits::<8>(0)) << 24);
        self.hdr_go.next = false;
        self.opcode.next = self.op_middle.val();
        self.hdr_psn.next = self.r_psn.q.val();
        self.ext.next = bit_cast::<EXT_BITS, 32>(self.l_aeth.val());
        self.ext_words.next = self.one4.val();
        self.pay_len.next = self.rchunk.q.val();
        self.g_go.next = false;
        self.g_addr.next = self.g_ptr.q.val();
        self.g_len.next = self.rchunk.q.val();
        self.done.next = false;
        self.dup_ok.next = false;
        self.dup_bad.next = false;
        self.l_fits.next = (self.resid.q.val().get_bits::<19>(13) == self.zero19.val())
            & (self.resid.q.val().get_bits::<13>(0) <= self.l_mtu.val());
        match self.state.q.val() {
            RdState::Idle => {}
            RdState::Prep => {
                self.rlast.d.next = self.l_fits.val();
                self.rchunk.d.next = self.l_mtu.val();
                if self.l_fits.val() {
                    self.rchunk.d.next = self.resid.q.val().get_bits::<13>(0);
                }
                self.state.d.next = RdState::Pkt;
            }
            RdState::Pkt => {
                if self.go_ok.val() {
                    self.hdr_go.next = true;
                    if self.rfirst.q.val() {
                        if self.rlast.q.val() {
                            self.opcode.next = self.op_only.val();
                        } else {
                            self.opcode.next = self.op_first.val();
                        }
                    } else if self.rlast.q.val() {
                        self.opcode.next = self.op_last.val();
                    } else {
                        // MIDDLE: no AETH
                        self.ext.next = bit_cast::<EXT_BITS, 32>(self.zero32.val());
                        self.ext_words.next = self.zero4.val();
                    }
                    self.g_go.next = self.rchunk.q.val() != self.zero13.val();
                    // the next packet's address, residue and PSN
                    self.aa_a.d.next = self.g_ptr.q.val();
                    self.aa_b.d.next = bit_cast::<64, 13>(self.l_mtu.val());
                    self.aa_c.d.next = false;
                    self.ab_a.d.next = bit_cast::<64, 32>(self.resid.q.val());
                    self.ab_b.d.next = !bit_cast::<64, 13>(self.l_mtu.val());
                    self.ab_c.d.next = true;
                    self.ac_a.d.next = bit_cast::<64, 24>(self.r_psn.q.val());
                    self.ac_b.d.next = self.zero64.val();
                    self.ac_c.d.next = true;
                    self.rfirst.d.next = false;
                    self.state.d.next = RdState::W1;
                }
            }
            RdState::W1 => {
                self.state.d.next = RdState::W2;
            }
            RdState::W2 => {
                self.state.d.next = RdState::W3;
            }
            RdState::W3 => {
                self.state.d.next = RdState::Next;
            }
            RdState::Next => {
                self.g_ptr.d.next = self.add_a.sum.val();
                self.resid.d.next = self.add_b.sum.val().get_bits::<32>(0);
                self.r_psn.d.next = self.add_c.sum.val().get_bits::<24>(0);
                self.state.d.next = RdState::Prep;
                if self.rlast.q.val() {
                    self.done.next = true;
                    self.state.d.next = RdState::Idle;
                }
            }
            RdState::Sub => {
                // VA - va_org (no borrow: VA >= va_org), VA + len (carry: overflow), va_org + length
                self.aa_a.d.next = self.l_va.val();
                self.aa_b.d.next = !self.dr.q.val().va;
                self.aa_c.d.next = true;
                self.ab_a.d.next = self.l_va.val();
                self.ab_b.d.next = bit_cast::<64, 32>(self.l_dlen.val());
                self.ab_c.d.next = false;
                self.ac_a.d.next = self.dr.q.val().va;
                self.ac_b.d.next = bit_cast::<64, 32>(self.dr.q.val().len);
                self.ac_c.d.next = false;
                self.du_key.d.next = self.dr.q.val().rkey == self.l_rkey.val();
                self.state.d.next = RdState::S1;
            }
            RdState::S1 => {
                self.state.d.next = RdState::S2;
            }
            RdState::S2 => {
                self.state.d.next = RdState::S3;
            }
            RdState::S3 => {
                self.state.d.next = RdState::Sub2;
            }
            RdState::Sub2 => {
                self.du_ge.d.next = self.add_a.cout.val();
                self.du_ovf.d.next = self.add_b.cout.val();
                // (va_org + length) - (VA + len): no borrow when the request ends inside the resource; the
                // replay's DMA address = the resource's + (VA - va_org)
                self.aa_a.d.next = self.add_c.sum.val();
                self.aa_b.d.next = !self.add_b.sum.val();
                self.aa_c.d.next = true;
                self.ab_a.d.next = self.dr.q.val().dma;
                self.ab_b.d.next = self.add_a.sum.val();
                self.ab_c.d.next = false;
                self.state.d.next = RdState::T1;
            }
            RdState::T1 => {
                self.state.d.next = RdState::T2;
            }
            RdState::T2 => {
                self.state.d.next = RdState::T3;
            }
            RdState::T3 => {
                self.state.d.next = RdState::Sub3;
            }
            RdState::Sub3 => {
                // same rkey, [VA, VA + len) inside the original; the replay starts at the request's PSN, with
                // FIRST/ONLY only when that is the READ's first PSN (else MIDDLE/LAST)
                self.state.d.next = RdState::Idle;
                if self.du_key.q.val() & self.du_ge.q.val() & !self.du_ovf.q.val() & self.add_a.cout.val() {
                    self.dup_ok.next = true;
                    self.r_replay.d.next = true;
                    self.g_ptr.d.next = self.add_b.sum.val();
                    self.resid.d.next = self.l_dlen.val();
                    self.r_psn.d.next = self.l_psn.val();
                    self.rfirst.d.next = self.l_psn.val() == self.dr.q.val().first;
                    self.rmsn.d.next = self.l_msn.val();
                    self.state.d.next = RdState::Prep;
                } else {
                    self.dup_bad.next = true;
                }
            }
            _ => {
                self.state.d.next = RdState::Idle;
            }
        }
        if self.start.val() {
            // a new READ: MSN + 1 in its AETHs (C9-148), from the translated address
            self.r_replay.d.next = false;
            self.rmsn.d.next = self.msn1.val();
            self.g_ptr.d.next = self.dma.val();
            self.resid.d.next = self.l_dlen.val();
            self.r_psn.d.next = self.l_psn.val();
            self.rfirst.d.next = true;
            self.state.d.next = RdState::Prep;
        }
        if self.dup_go.val() {
            self.dr.d.next = self.res.val();
            self.state.d.next = RdState::Sub;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// (opcode, PSN, AETH MSN or None, payload length, gather address) per response, until `done`.
    fn responses(u: &mut ReadReply, stall: bool) -> Vec<(u8, u64, Option<u64>, u64, Option<u64>)> {
        let mut out = Vec::new();
        let mut n = 0u64;
        loop {
            // the output registers busy every other cycle when `stall`
            u.go_ok.next = !stall || n % 2 == 0;
            simulate(u, 20);
            if u.hdr_go.val() {
                let aeth = (u.ext_words.val().to_u64() == 1).then(|| u.ext.val().get_bits::<32>(0).to_u64() >> 8);
                let msn = aeth.map(|a| ((a & 0xFF) << 16) | (a & 0xFF00) | ((a >> 16) & 0xFF));
                let g = u.g_go.val().then(|| u.g_addr.val().to_u64());
                assert_eq!(u.g_go.val(), u.pay_len.val().to_u64() != 0);
                out.push((u.opcode.val().to_u64() as u8, u.hdr_psn.val().to_u64(), msn, u.pay_len.val().to_u64(), g));
            }
            if u.done.val() {
                crate::tick!(u);
                return out;
            }
            crate::tick!(u);
            n += 1;
            assert!(n < 1000, "the READ ends");
        }
    }

    fn new(mtu: u64) -> ReadReply {
        let mut u = ReadReply::default();
        u.connect_all();
        u.req.next.mtu = bits(mtu);
        u.req.next.msn = bits(41);
        u.msn1.next = bits(42);
        u
    }

    /// A READ of 2,500 bytes at PMTU 1024: FIRST, MIDDLE, LAST at consecutive PSNs (across the wrap), the AETH
    /// with the MSN after the READ on FIRST and LAST only, addresses a PMTU apart; one of 1,024 is an ONLY, one
    /// of 0 bytes an ONLY without payload; output stalls change nothing but the pace.
    #[test]
    fn a_read_is_cut_into_pmtu_responses() {
        for stall in [false, true] {
            let mut u = new(1024);
            u.start.next = true;
            u.req.next.psn = bits(0xFF_FFFF);
            u.req.next.dlen = bits(2500);
            u.dma.next = bits(0x10_0000);
            crate::tick!(&mut u);
            u.start.next = false;
            let r = responses(&mut u, stall);
            assert_eq!(
                r,
                vec![
                    (RC_RDMA_READ_RESPONSE_FIRST, 0xFF_FFFF, Some(42), 1024, Some(0x10_0000)),
                    (RC_RDMA_READ_RESPONSE_MIDDLE, 0, None, 1024, Some(0x10_0400)),
                    (RC_RDMA_READ_RESPONSE_LAST, 1, Some(42), 452, Some(0x10_0800)),
                ]
            );
            assert_eq!((u.cur_psn.val().to_u64(), u.replay.val()), (2, false), "one past the last response");
        }
        for (len, op) in [(1024, RC_RDMA_READ_RESPONSE_ONLY), (0, RC_RDMA_READ_RESPONSE_ONLY)] {
            let mut u = new(1024);
            u.start.next = true;
            u.req.next.psn = bits(7);
            u.req.next.dlen = bits(len);
            u.dma.next = bits(0x2000);
            crate::tick!(&mut u);
            u.start.next = false;
            assert_eq!(responses(&mut u, false), vec![(op, 7, Some(42), len, (len > 0).then_some(0x2000))]);
        }
    }

    /// The replay of a duplicate READ (rxe duplicate_request): inside the resource, it restarts at the request's
    /// PSN and VA with MIDDLE .. LAST when that is not the READ's first PSN, FIRST when it is, the QP's current
    /// MSN; a different rkey, a range reaching past the resource or starting before it is refused.
    #[test]
    fn a_duplicate_read_inside_its_resource_is_replayed_from_its_psn() {
        let res = ReadRes { first: bits(100), end: bits(104), va: bits(0x5000), rkey: bits(0x77), len: bits(4000), dma: bits(0x9_0000), atomic: false };
        let dup = |psn: u64, va: u64, len: u64, rkey: u64| {
            let mut u = new(1024);
            u.res.next = res;
            u.dup_go.next = true;
            u.req.next.psn = bits(psn);
            u.req.next.va = bits(va);
            u.req.next.dlen = bits(len);
            u.req.next.rkey = bits(rkey);
            crate::tick!(&mut u);
            u.dup_go.next = false;
            let mut n = 0;
            while !u.dup_ok.val() && !u.dup_bad.val() {
                crate::tick!(&mut u);
                n += 1;
                assert!(n < 20);
            }
            assert_eq!(n, 8, "cycles of the subset check");
            if u.dup_bad.val() {
                return None;
            }
            crate::tick!(&mut u);
            Some(responses(&mut u, false))
        };
        // the tail from PSN 102: VA 0x5000 + 2048, 1952 bytes
        assert_eq!(
            dup(102, 0x5800, 1952, 0x77),
            Some(vec![(RC_RDMA_READ_RESPONSE_MIDDLE, 102, None, 1024, Some(0x9_0800)), (RC_RDMA_READ_RESPONSE_LAST, 103, Some(41), 928, Some(0x9_0C00))])
        );
        assert_eq!(dup(100, 0x5000, 4000, 0x77).map(|r| r[0].0), Some(RC_RDMA_READ_RESPONSE_FIRST));
        assert_eq!(dup(102, 0x5800, 1952, 0x78), None, "another rkey");
        assert_eq!(dup(102, 0x5800, 1953, 0x77), None, "past the resource's end");
        assert_eq!(dup(102, 0x4FFF, 10, 0x77), None, "before the resource's start");
        assert_eq!(dup(102, u64::MAX - 4, 10, 0x77), None, "VA + len overflows");
    }
}
