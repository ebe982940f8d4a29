//! READ and atomic responder resources (rxe `struct resp_res`, `rxe_prepare_res`, `find_resource`): per QP a
//! ring of [`READ_RESOURCES`] records in block RAM (address {QPN[7:0], slot}), each a READ's PSN range, RETH
//! and DMA address, or an atomic's PSN and the original value it returned. The Responder writes one at the
//! ring head when a new READ or atomic has executed (`we`, the record `w`, at `res_head`; the oldest is
//! overwritten) and asks for the resource of a duplicate READ or atomic (`scan_start`, then `scan` while it
//! waits): every slot is read, one per cycle, and the first valid one (`res_valid`) whose range holds the PSN is
//! found. The PSN range is compared by two pipelined [`PsnCmp`]s (a slot read at t is compared at t + 1, the
//! verdict is out at t + 3), so the scan takes 20 cycles; `scan_done` marks its last, then `pick` reads the
//! slot found (`rdata` the cycle after).

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::common::fifo::SdpRam;
use crate::common::psn_cmp::PsnCmp;

/// Read responder resources per QP (rxe `max_dest_rd_atomic` rounded up to a power of two; rxe's and
/// perftest's usual 16): the ring of the last [`READ_RESOURCES`] READs, each replayable from any PSN of its
/// range.
pub const READ_RESOURCES: usize = 16;

/// One READ responder resource (rxe `struct resp_res`, read part): its PSN range `first .. end` (end
/// exclusive), the RETH (VA, rkey, length) and the DMA address the Key Cache translated the VA to.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ReadRes {
    pub first: Bits<24>,
    pub end: Bits<24>,
    pub va: Bits<64>,
    pub rkey: Bits<32>,
    pub len: Bits<32>,
    pub dma: Bits<64>,
    /// An atomic's saved result: `first` its PSN, `va` the original value it returned.
    pub atomic: Bit,
}

crate::logic_block! {
    /// The resource ring and its scan (see the module documentation).
    pub struct ReadResources {
        pub clock: Signal<In, Clock>,
        /// The packet's QP and PSN, and the QP's ring head and valid slots (its responder state).
        pub qpn: Signal<In, Bits<24>>,
        pub psn: Signal<In, Bits<24>>,
        pub res_head: Signal<In, Bits<4>>,
        pub res_valid: Signal<In, Bits<16>>,
        /// Write `w` at the ring head.
        pub we: Signal<In, Bit>,
        pub w: Signal<In, ReadRes>,
        /// Start a scan for the PSN; `scan`: the Responder waits for it (the scan runs while it is set).
        pub scan_start: Signal<In, Bit>,
        pub scan: Signal<In, Bit>,
        /// The scan's last cycle, and whether a resource was found.
        pub scan_done: Signal<Out, Bit>,
        pub found: Signal<Out, Bit>,
        /// Read the slot found (its record is `rdata` in the next cycle).
        pub pick: Signal<In, Bit>,
        pub rdata: Signal<Out, ReadRes>,

        res_ram: SdpRam<ReadRes, 12>,
        pc_lo: PsnCmp,
        pc_hi: PsnCmp,
        sc_i: DFF<Bits<5>>,
        d1_v: DFF<Bit>,
        d1_s: DFF<Bits<4>>,
        d2_v: DFF<Bit>,
        d2_s: DFF<Bits<4>>,
        d3_v: DFF<Bit>,
        d3_s: DFF<Bits<4>>,
        r_found: DFF<Bit>,
        fslot: DFF<Bits<4>>,
        l_resa: Signal<Local, Bits<12>>,
        l_vsh: Signal<Local, Bits<16>>,
        zero5: Constant<Bits<5>> = k(0),
        one5: Constant<Bits<5>> = k(1),
        scan_end: Constant<Bits<5>> = k(READ_RESOURCES as u64 + 3),
    }
}

impl Logic for ReadResources {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, sc_i, d1_v, d1_s, d2_v, d2_s, d3_v, d3_s, r_found, fslot);
        clock!(self, clock, res_ram, pc_lo, pc_hi);
        self.found.next = self.r_found.q.val();
        self.rdata.next = self.res_ram.rdata.val();
        self.scan_done.next = self.sc_i.q.val() == self.scan_end.val();
        // {QPN[7:0], slot}: written at the ring head, read by the scan's index (or the slot found)
        self.l_resa.next = bit_cast::<12, 8>(self.qpn.val().get_bits::<8>(0)) << 4;
        self.res_ram.raddr.next = self.l_resa.val() | bit_cast::<12, 4>(self.sc_i.q.val().get_bits::<4>(0));
        self.res_ram.we.next = self.we.val();
        self.res_ram.waddr.next = self.l_resa.val() | bit_cast::<12, 4>(self.res_head.val());
        self.res_ram.wdata.next = self.w.val();
        // the scan: a slot read at t is compared at t+1 (PsnCmp inputs), the verdict is out at t+3
        self.pc_lo.a.next = self.psn.val();
        self.pc_lo.b.next = self.res_ram.rdata.val().first;
        self.pc_hi.a.next = self.psn.val();
        self.pc_hi.b.next = self.res_ram.rdata.val().end;
        self.d1_v.d.next = false;
        self.d1_s.d.next = self.sc_i.q.val().get_bits::<4>(0);
        self.l_vsh.next = self.res_valid.val() >> bit_cast::<16, 4>(self.d1_s.q.val());
        self.d2_v.d.next = self.d1_v.q.val() & self.l_vsh.val().get_bit(0);
        self.d2_s.d.next = self.d1_s.q.val();
        self.d3_v.d.next = self.d2_v.q.val();
        self.d3_s.d.next = self.d2_s.q.val();
        if self.scan_start.val() {
            self.sc_i.d.next = self.zero5.val();
            self.r_found.d.next = false;
        }
        if self.scan.val() {
            // read every slot (one per cycle); the first valid one whose range holds the PSN is the resource
            if !self.sc_i.q.val().get_bit(4) {
                self.d1_v.d.next = true;
            }
            self.sc_i.d.next = self.sc_i.q.val() + self.one5.val();
            if self.d3_v.q.val() & !self.pc_lo.neg.val() & self.pc_hi.neg.val() & !self.r_found.q.val() {
                self.r_found.d.next = true;
                self.fslot.d.next = self.d3_s.q.val();
            }
        }
        if self.pick.val() {
            self.res_ram.raddr.next = self.l_resa.val() | bit_cast::<12, 4>(self.fslot.q.val());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    fn res(first: u32, end: u32, atomic: bool) -> ReadRes {
        ReadRes { first: bits(first as u64), end: bits(end as u64), va: bits(0x1000 + first as u64), atomic, ..Default::default() }
    }

    /// Scan for `psn` on QP `qpn` with the valid slots `valid`: Some(the record found), None if none.
    fn scan(u: &mut ReadResources, qpn: u32, psn: u32, valid: u16) -> Option<ReadRes> {
        u.qpn.next = bits(qpn as u64);
        u.psn.next = bits(psn as u64);
        u.res_valid.next = bits(valid as u64);
        u.scan_start.next = true;
        crate::tick!(u);
        u.scan_start.next = false;
        u.scan.next = true;
        let mut n = 0;
        while !u.scan_done.val() {
            crate::tick!(u);
            n += 1;
            assert!(n < 40, "the scan ends");
        }
        assert_eq!(n, READ_RESOURCES + 3, "cycles to the scan's last");
        crate::tick!(u);
        u.scan.next = false;
        if !u.found.val() {
            return None;
        }
        u.pick.next = true;
        crate::tick!(u);
        u.pick.next = false;
        Some(u.rdata.val())
    }

    /// The ring head takes each new record (the oldest overwritten); a scan finds the first valid slot whose
    /// PSN range holds the PSN (across the 2^24 wrap), ignores invalid slots and other QPs' rings, and finds
    /// nothing for a PSN outside every range.
    #[test]
    fn a_scan_finds_the_first_valid_resource_holding_the_psn() {
        let mut u = ReadResources::default();
        u.connect_all();
        // QP 5: slot i holds [100 i, 100 i + 50); slot 3 an atomic at 300; slot 7 across the wrap
        for i in 0..READ_RESOURCES as u32 {
            u.qpn.next = bits(5);
            u.res_head.next = bits(i as u64);
            u.we.next = true;
            u.w.next = match i {
                3 => res(300, 301, true),
                7 => res(0xFF_FFF0, 0x10, false),
                _ => res(100 * i, 100 * i + 50, false),
            };
            crate::tick!(&mut u);
        }
        // QP 6's slot 2 holds the same range as QP 5's: never seen by QP 5's scan
        u.qpn.next = bits(6);
        u.res_head.next = bits(2);
        u.w.next = res(200, 250, false);
        crate::tick!(&mut u);
        u.we.next = false;
        let all = 0xFFFF;
        assert_eq!(scan(&mut u, 5, 210, all).map(|r| r.first.to_u64()), Some(200));
        assert_eq!(scan(&mut u, 5, 249, all).map(|r| r.first.to_u64()), Some(200));
        assert_eq!(scan(&mut u, 5, 250, all), None, "end is exclusive");
        assert_eq!(scan(&mut u, 5, 300, all).map(|r| r.atomic), Some(true));
        assert_eq!(scan(&mut u, 5, 0xFF_FFFA, all).map(|r| r.first.to_u64()), Some(0xFF_FFF0), "across the wrap");
        assert_eq!(scan(&mut u, 5, 5, all).map(|r| r.first.to_u64()), Some(0), "slot 0 before slot 7's wrap");
        assert_eq!(scan(&mut u, 5, 5, all & !1).map(|r| r.first.to_u64()), Some(0xFF_FFF0), "slot 0 not valid");
        assert_eq!(scan(&mut u, 5, 210, all & !(1 << 2)), None, "slot 2 not valid");
        assert_eq!(scan(&mut u, 6, 210, 1 << 2).map(|r| r.first.to_u64()), Some(200));
        assert_eq!(scan(&mut u, 6, 210, 1 << 3), None);
        // the head overwrites the oldest
        u.qpn.next = bits(5);
        u.res_head.next = bits(2);
        u.we.next = true;
        u.w.next = res(5000, 5010, false);
        crate::tick!(&mut u);
        u.we.next = false;
        assert_eq!(scan(&mut u, 5, 210, all), None);
        assert_eq!(scan(&mut u, 5, 5005, all).map(|r| r.va.to_u64()), Some(0x1000 + 5000));
    }
}
