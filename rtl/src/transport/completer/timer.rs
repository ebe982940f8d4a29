//! The Completer's retransmit and RNR timers for every QP without a counter per QP: one free-running unit
//! clock (`now`, 4.096 us = [`TIMER_TICK`] cycles) and per QP a deadline (24 bits, compared modulo 2^24) and
//! an armed bit in block RAM, twice. The scanner reads one QP's copy (`tmr_a`) per cycle and reports an
//! expired one (`expired`, `exp_qpn`) until the event machine takes it (`take`); while the last report has not
//! been taken it scans again from that QP, so it never passes an expired timer by. The event machine reads its
//! own copy (`tmr_b`, at `qpn`, or at `exp_qpn` when it takes a report) and checks it again before acting
//! (`load` its armed/RNR bits and deadline, `due` three cycles later: now >= deadline).
//!
//! A write (`we`) sets both copies of the event's QP: armed when `arm` and the QP has a timeout or is waiting
//! out an RNR NAK (`rnr`) and WQEs are pending (`pending`), deadline = now + 2^timeout units (the QP's
//! `timeout`, [`timeout_units_table`]) or the RNR NAK's wait ([`rnr_units_table`] of `rnr_code`); `we_fresh`
//! writes it armed whenever the QP has a timeout (progress: the timer starts over). The deadline's sum takes
//! three cycles after its inputs settle.

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::common::fifo::SdpRam;
use crate::common::lut::Lut8;
use crate::common::psn_cmp::PsnCmp;
use crate::transport::key_cache::PipeAdd64;

/// Core cycles per timer unit: 4.096 us at 322.265625 MHz (the IBA local ACK timeout's unit).
pub const TIMER_TICK: u64 = 1320;
/// Longest retransmit period, log2 of timer units: deadlines compare modulo 2^24 (rxe `psn_compare` style), so
/// a period must stay below 2^23 units; timeouts 23..31 (34 s and more) act as 22 (17 s).
pub const TIMEOUT_LOG2_MAX: u64 = 22;

/// `per[timeout]`: the retransmit period in timer units (0: no timer).
pub fn timeout_units_table() -> Vec<u64> {
    (0..32u64).map(|t| if t == 0 { 0 } else { 1 << t.min(TIMEOUT_LOG2_MAX) }).collect()
}

/// `rnr[code]`: the RNR NAK wait in timer units, rounded up (the IBA table, as rxe `rnrnak_usec`).
pub fn rnr_units_table() -> Vec<u64> {
    (0..32usize)
        .map(|c| {
            let us = u64::from(testbench::wire::headers::RNR_TIMER_USEC[c]);
            ((us * 1000).div_ceil(4096)).max(1)
        })
        .collect()
}

/// A QP's timer: armed, waiting out an RNR NAK (else the retransmit timer), and its deadline in timer units.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CompTmr {
    pub armed: Bit,
    pub rnr: Bit,
    pub dl: Bits<24>,
}

crate::logic_block! {
    /// The timers (see the module documentation).
    pub struct RetryTimer {
        pub clock: Signal<In, Clock>,
        /// The event's QP: its copy is read and written here.
        pub qpn: Signal<In, Bits<8>>,
        /// The QP's timeout exponent (0: none), and the RNR NAK code whose wait a write sets (with `rnr`).
        pub timeout: Signal<In, Bits<5>>,
        pub rnr_code: Signal<In, Bits<5>>,
        pub rnr: Signal<In, Bit>,
        pub arm: Signal<In, Bit>,
        pub pending: Signal<In, Bit>,
        pub we: Signal<In, Bit>,
        pub we_fresh: Signal<In, Bit>,
        /// A QP's timer expired (by the scanner's copy); `take`: the event machine takes the report (and reads
        /// its own copy at `exp_qpn`).
        pub expired: Signal<Out, Bit>,
        pub exp_qpn: Signal<Out, Bits<8>>,
        pub take: Signal<In, Bit>,
        /// The event machine's copy of the QP's timer as read (one cycle after its address).
        pub armed: Signal<Out, Bit>,
        pub is_rnr: Signal<Out, Bit>,
        /// Latch that copy (`t_armed`, `t_rnr`, its deadline); `due` three cycles later when now >= deadline.
        pub load: Signal<In, Bit>,
        pub t_armed: Signal<Out, Bit>,
        pub t_rnr: Signal<Out, Bit>,
        pub due: Signal<Out, Bit>,

        tmr_a: SdpRam<CompTmr, 8>,
        tmr_b: SdpRam<CompTmr, 8>,
        per_lut: Lut8<24> = Lut8::new(timeout_units_table()),
        rnr_lut: Lut8<24> = Lut8::new(rnr_units_table()),
        pa_tm: PipeAdd64,
        cmp_scan: PsnCmp,
        cmp_tm: PsnCmp,
        tick: DFF<Bits<11>>,
        now: DFF<Bits<24>>,
        sc_q: DFF<Bits<8>>,
        t1_v: DFF<Bit>,
        t1_q: DFF<Bits<8>>,
        t2_v: DFF<Bit>,
        t2_q: DFF<Bits<8>>,
        t3_v: DFF<Bit>,
        t3_q: DFF<Bits<8>>,
        to_v: DFF<Bit>,
        to_q: DFF<Bits<8>>,
        r_armed: DFF<Bit>,
        r_rnr: DFF<Bit>,
        t_dl: DFF<Bits<24>>,
        l_tmr: Signal<Local, CompTmr>,
        l_tmr_armed: Signal<Local, Bit>,
        k0_5: Constant<Bits<5>> = k(0),
        k1_8: Constant<Bits<8>> = k(1),
        k0_11: Constant<Bits<11>> = k(0),
        k1_11: Constant<Bits<11>> = k(1),
        k1_24: Constant<Bits<24>> = k(1),
        tick_last: Constant<Bits<11>> = k(TIMER_TICK - 1),
    }
}

impl Logic for RetryTimer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, tick, now, sc_q, t1_v, t1_q, t2_v, t2_q, t3_v, t3_q, to_v, to_q, r_armed, r_rnr, t_dl);
        clock!(self, clock, tmr_a, tmr_b, pa_tm, cmp_scan, cmp_tm);
        self.expired.next = self.to_v.q.val();
        self.exp_qpn.next = self.to_q.q.val();
        self.armed.next = self.tmr_b.rdata.val().armed;
        self.is_rnr.next = self.tmr_b.rdata.val().rnr;
        self.t_armed.next = self.r_armed.q.val();
        self.t_rnr.next = self.r_rnr.q.val();
        // `now` counts 4.096 us units; the scanner reads one QP's timer per cycle
        self.tick.d.next = self.tick.q.val() + self.k1_11.val();
        if self.tick.q.val() == self.tick_last.val() {
            self.tick.d.next = self.k0_11.val();
            self.now.d.next = self.now.q.val() + self.k1_24.val();
        }
        self.sc_q.d.next = self.sc_q.q.val() + self.k1_8.val();
        self.tmr_a.raddr.next = self.sc_q.q.val();
        self.t1_v.d.next = true;
        self.t1_q.d.next = self.sc_q.q.val();
        self.cmp_scan.a.next = self.now.q.val();
        self.cmp_scan.b.next = self.tmr_a.rdata.val().dl;
        self.t2_v.d.next = self.t1_v.q.val() & self.tmr_a.rdata.val().armed;
        self.t2_q.d.next = self.t1_q.q.val();
        self.t3_v.d.next = self.t2_v.q.val();
        self.t3_q.d.next = self.t2_q.q.val();
        if self.t3_v.q.val() & !self.cmp_scan.neg.val() {
            if !self.to_v.q.val() {
                self.to_v.d.next = true;
                self.to_q.d.next = self.t3_q.q.val();
            } else {
                // the event machine has not taken the last one: scan again from this QP (never skip an
                // expired timer: a scan locked in step with the event machine's busy cycles would pass the
                // same QPs by for ever, and their lost ACKs would never be retried)
                self.sc_q.d.next = self.t3_q.q.val();
                self.t1_v.d.next = false;
                self.t2_v.d.next = false;
                self.t3_v.d.next = false;
            }
        }
        // the event's own check: now >= deadline
        self.cmp_tm.a.next = self.now.q.val();
        self.cmp_tm.b.next = self.t_dl.q.val();
        self.due.next = !self.cmp_tm.neg.val();
        // a new deadline: now + the QP's period (or the RNR wait), 3 cycles after the inputs settle
        self.per_lut.x.next = bit_cast::<8, 5>(self.timeout.val());
        self.rnr_lut.x.next = bit_cast::<8, 5>(self.rnr_code.val());
        self.pa_tm.a.next = bit_cast::<64, 24>(self.now.q.val());
        self.pa_tm.b.next = bit_cast::<64, 24>(self.per_lut.y.val());
        if self.rnr.val() {
            self.pa_tm.b.next = bit_cast::<64, 24>(self.rnr_lut.y.val());
        }
        self.pa_tm.cin.next = false;
        self.l_tmr_armed.next = (self.rnr.val() | (self.timeout.val() != self.k0_5.val())) & self.pending.val();
        self.l_tmr.next.armed = self.arm.val() & self.l_tmr_armed.val();
        self.l_tmr.next.rnr = self.rnr.val();
        self.l_tmr.next.dl = self.pa_tm.sum.val().get_bits::<24>(0);
        self.tmr_a.we.next = self.we.val() | self.we_fresh.val();
        self.tmr_a.waddr.next = self.qpn.val();
        self.tmr_a.wdata.next = self.l_tmr.val();
        self.tmr_b.we.next = self.we.val() | self.we_fresh.val();
        self.tmr_b.waddr.next = self.qpn.val();
        self.tmr_b.wdata.next = self.l_tmr.val();
        self.tmr_b.raddr.next = self.qpn.val();
        if self.we_fresh.val() {
            self.tmr_a.wdata.next.armed = self.timeout.val() != self.k0_5.val();
            self.tmr_b.wdata.next.armed = self.timeout.val() != self.k0_5.val();
        }
        if self.take.val() {
            self.to_v.d.next = false;
            self.tmr_b.raddr.next = self.to_q.q.val();
        }
        if self.load.val() {
            self.r_armed.d.next = self.tmr_b.rdata.val().armed;
            self.r_rnr.d.next = self.tmr_b.rdata.val().rnr;
            self.t_dl.d.next = self.tmr_b.rdata.val().dl;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    /// Arm QP `q` with timeout `t` (or the RNR wait of `code`) now, with WQEs pending or not.
    fn arm_with(u: &mut RetryTimer, q: u64, t: u64, rnr: Option<u64>, pending: bool) {
        u.qpn.next = bits(q);
        u.timeout.next = bits(t);
        u.rnr.next = rnr.is_some();
        u.rnr_code.next = bits(rnr.unwrap_or(0));
        u.arm.next = true;
        u.pending.next = pending;
        for _ in 0..4 {
            crate::tick!(u);
        }
        u.we.next = true;
        crate::tick!(u);
        u.we.next = false;
        u.rnr.next = false;
    }

    fn arm(u: &mut RetryTimer, q: u64, t: u64, rnr: Option<u64>) {
        arm_with(u, q, t, rnr, true)
    }

    /// Cycles until the scanner reports QP `q` expired (taking every other report it sees on the way).
    fn cycles_to_expiry(u: &mut RetryTimer, q: u64, limit: u64) -> Option<u64> {
        for n in 0..limit {
            simulate(u, 20);
            if u.expired.val() {
                let e = u.exp_qpn.val().to_u64();
                u.take.next = true;
                crate::tick!(u);
                u.take.next = false;
                if e == q {
                    return Some(n);
                }
                continue;
            }
            crate::tick!(u);
        }
        None
    }

    /// A timeout of 2^t units expires after 2^t to 2^t + 1 units (plus the scan of at most 256 QPs); an RNR NAK's
    /// wait is its table's; a QP without a timeout, or whose WQEs are all retired, never expires; a report not
    /// taken is never lost, and the event machine's copy says the same (due).
    #[test]
    fn timers_expire_after_their_period_and_are_never_passed_by() {
        let unit = TIMER_TICK;
        let mut u = RetryTimer::default();
        u.connect_all();
        arm(&mut u, 3, 2, None);
        let n = cycles_to_expiry(&mut u, 3, 8 * unit).expect("timeout 2 expires");
        assert!(n + 5 >= 3 * unit && n <= 5 * unit + 300, "{n} cycles for 4 units");
        // the event machine's copy: armed, not RNR, due
        u.qpn.next = bits(3);
        crate::tick!(&mut u);
        u.load.next = true;
        crate::tick!(&mut u);
        u.load.next = false;
        for _ in 0..3 {
            crate::tick!(&mut u);
        }
        assert!(u.t_armed.val() && !u.t_rnr.val() && u.due.val());
        // (the event machine disarms it: nothing pending)
        arm_with(&mut u, 3, 2, None, false);
        // an RNR NAK's wait (code 1: 0.01 ms, 3 units)
        let want = rnr_units_table()[1];
        arm(&mut u, 7, 0, Some(1));
        let n = cycles_to_expiry(&mut u, 7, 8 * unit).expect("the RNR wait ends");
        assert!(n + 5 >= (want - 1) * unit && n <= (want + 1) * unit + 300, "{n} cycles for {want} units");
        arm_with(&mut u, 7, 0, None, false);
        // no timeout, or nothing pending: never armed
        arm(&mut u, 9, 0, None);
        assert_eq!(cycles_to_expiry(&mut u, 9, 6 * unit), None);
        arm_with(&mut u, 10, 1, None, false);
        assert_eq!(cycles_to_expiry(&mut u, 10, 6 * unit), None);
        // two QPs expiring together, the first report left untaken for a while: both are reported
        arm(&mut u, 20, 1, None);
        arm(&mut u, 21, 1, None);
        let mut seen = Vec::new();
        for _ in 0..6 * unit {
            simulate(&mut u, 20);
            if u.expired.val() && seen.len() < 2 {
                // hold the report 500 cycles before taking it
                for _ in 0..500 {
                    crate::tick!(&mut u);
                }
                seen.push(u.exp_qpn.val().to_u64());
                u.take.next = true;
                crate::tick!(&mut u);
                u.take.next = false;
            }
            crate::tick!(&mut u);
        }
        seen.sort();
        assert_eq!(seen, vec![20, 21]);
    }
}
