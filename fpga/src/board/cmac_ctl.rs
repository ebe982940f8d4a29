//! CMAC control: the bring-up sequence of the UltraScale+ 100G MAC (`cmac_usplus`, PG203 "Without AXI4-Lite
//! Interface") driven from its `ctl_*`/`stat_*` ports, in the MAC's own clock (the core's):
//!
//! 1. while the link is enabled (`enable`, a board register, on after configuration): RX on
//!    (`ctl_rx_enable`), RS-FEC on or off both ways as `fec` says, TX sending remote-fault indications
//!    (`ctl_tx_send_rfi`) and not enabled;
//! 2. once RX has been aligned (`stat_rx_aligned`) for `SETTLE` cycles: RFI off, TX on (`ctl_tx_enable`);
//! 3. if alignment is lost: back to 1 (TX off again, so the MAC holds `tx_axis_tready` low and the core's
//!    frames wait in its TX Frame Buffer; the receive side keeps running).
//!
//! It also keeps what bring-up needs to see: link up now, link-up and link-down events, and counts of frames
//! the MAC received with a bad FCS (`stat_rx_bad_fcs`, up to 2 per cycle on the 512-bit bus), of TX underflows
//! (`tx_unfout`: a frame paused mid-way, which the core's store-and-forward TX must never cause), and of
//! cycles in which the core's TX dropped `tvalid` inside a frame (the same fault, seen on our side).

use rtl::common::consts::k;
use rust_hdl::prelude::*;

/// Cycles `stat_rx_aligned` must hold before TX is enabled (about 100 us at 322 MHz).
pub const SETTLE: u64 = 32_768;

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum LinkState {
    Off,
    WaitAligned,
    Settle,
    Up,
}

#[derive(LogicBlock)]
pub struct CmacCtl {
    pub clock: Signal<In, Clock>,
    /// from the board registers
    pub enable: Signal<In, Bit>,
    pub fec: Signal<In, Bit>,
    /// to the CMAC
    pub ctl_rx_enable: Signal<Out, Bit>,
    pub ctl_tx_enable: Signal<Out, Bit>,
    pub ctl_tx_send_rfi: Signal<Out, Bit>,
    pub ctl_rsfec: Signal<Out, Bit>,
    /// from the CMAC
    pub stat_rx_aligned: Signal<In, Bit>,
    pub stat_rx_bad_fcs: Signal<In, Bits<3>>,
    pub tx_unfout: Signal<In, Bit>,
    /// the core's TX stream as the MAC sees it (for the mid-frame gap check)
    pub tx_tvalid: Signal<In, Bit>,
    pub tx_tready: Signal<In, Bit>,
    pub tx_tlast: Signal<In, Bit>,
    /// status
    pub link_up: Signal<Out, Bit>,
    pub ups: Signal<Out, Bits<16>>,
    pub downs: Signal<Out, Bits<16>>,
    pub bad_fcs: Signal<Out, Bits<32>>,
    pub underflows: Signal<Out, Bits<16>>,
    pub tx_gaps: Signal<Out, Bits<16>>,
    state: DFF<LinkState>,
    settle: DFF<Bits<16>>,
    ups_r: DFF<Bits<16>>,
    downs_r: DFF<Bits<16>>,
    /// the bad-FCS count in two halves, the low half's carry added to the high one a cycle later
    fcs_lo: DFF<Bits<17>>,
    fcs_hi: DFF<Bits<16>>,
    unf_r: DFF<Bits<16>>,
    gap_r: DFF<Bits<16>>,
    /// inside a frame on TX (a beat without tlast was taken)
    in_frame: DFF<Bit>,
    /// registered copies of the MAC's status (its ports are timed to the same clock, but a register keeps
    /// them off our logic's paths)
    aligned: DFF<Bit>,
    fcs_in: DFF<Bits<3>>,
    k_settle: Constant<Bits<16>>,
    k_one16: Constant<Bits<16>>,
    k_zero16: Constant<Bits<16>>,
}

impl Default for CmacCtl {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            enable: Default::default(),
            fec: Default::default(),
            ctl_rx_enable: Default::default(),
            ctl_tx_enable: Default::default(),
            ctl_tx_send_rfi: Default::default(),
            ctl_rsfec: Default::default(),
            stat_rx_aligned: Default::default(),
            stat_rx_bad_fcs: Default::default(),
            tx_unfout: Default::default(),
            tx_tvalid: Default::default(),
            tx_tready: Default::default(),
            tx_tlast: Default::default(),
            link_up: Default::default(),
            ups: Default::default(),
            downs: Default::default(),
            bad_fcs: Default::default(),
            underflows: Default::default(),
            tx_gaps: Default::default(),
            state: Default::default(),
            settle: Default::default(),
            ups_r: Default::default(),
            downs_r: Default::default(),
            fcs_lo: Default::default(),
            fcs_hi: Default::default(),
            unf_r: Default::default(),
            gap_r: Default::default(),
            in_frame: Default::default(),
            aligned: Default::default(),
            fcs_in: Default::default(),
            k_settle: k(SETTLE - 1),
            k_one16: k(1),
            k_zero16: k(0),
        }
    }
}

impl Logic for CmacCtl {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, state, settle, ups_r, downs_r, fcs_lo, fcs_hi, unf_r, gap_r, in_frame, aligned, fcs_in);
        self.aligned.d.next = self.stat_rx_aligned.val();
        self.fcs_in.d.next = self.stat_rx_bad_fcs.val();
        self.ctl_rx_enable.next = self.state.q.val() != LinkState::Off;
        self.ctl_rsfec.next = self.fec.val();
        self.ctl_tx_send_rfi.next = (self.state.q.val() == LinkState::WaitAligned) | (self.state.q.val() == LinkState::Settle);
        self.ctl_tx_enable.next = self.state.q.val() == LinkState::Up;
        self.link_up.next = self.state.q.val() == LinkState::Up;
        match self.state.q.val() {
            LinkState::Off => {
                if self.enable.val() {
                    self.state.d.next = LinkState::WaitAligned;
                }
            }
            LinkState::WaitAligned => {
                self.settle.d.next = self.k_zero16.val();
                if !self.enable.val() {
                    self.state.d.next = LinkState::Off;
                } else if self.aligned.q.val() {
                    self.state.d.next = LinkState::Settle;
                }
            }
            LinkState::Settle => {
                self.settle.d.next = self.settle.q.val() + self.k_one16.val();
                if !self.enable.val() {
                    self.state.d.next = LinkState::Off;
                } else if !self.aligned.q.val() {
                    self.state.d.next = LinkState::WaitAligned;
                } else if self.settle.q.val() == self.k_settle.val() {
                    self.state.d.next = LinkState::Up;
                    self.ups_r.d.next = self.ups_r.q.val() + self.k_one16.val();
                }
            }
            LinkState::Up => {
                if !self.enable.val() | !self.aligned.q.val() {
                    self.downs_r.d.next = self.downs_r.q.val() + self.k_one16.val();
                    if self.enable.val() {
                        self.state.d.next = LinkState::WaitAligned;
                    } else {
                        self.state.d.next = LinkState::Off;
                    }
                }
            }
            _ => {
                self.state.d.next = LinkState::Off;
            }
        }
        self.fcs_lo.d.next = bit_cast::<17, 16>(self.fcs_lo.q.val().get_bits::<16>(0)) + bit_cast::<17, 3>(self.fcs_in.q.val());
        self.fcs_hi.d.next = self.fcs_hi.q.val() + bit_cast::<16, 1>(self.fcs_lo.q.val().get_bits::<1>(16));
        if self.tx_unfout.val() {
            self.unf_r.d.next = self.unf_r.q.val() + self.k_one16.val();
        }
        if self.tx_tvalid.val() & self.tx_tready.val() {
            self.in_frame.d.next = !self.tx_tlast.val();
        }
        if self.in_frame.q.val() & !self.tx_tvalid.val() {
            self.gap_r.d.next = self.gap_r.q.val() + self.k_one16.val();
        }
        self.ups.next = self.ups_r.q.val();
        self.downs.next = self.downs_r.q.val();
        self.bad_fcs.next = (bit_cast::<32, 16>(self.fcs_hi.q.val()) << 16) | bit_cast::<32, 16>(self.fcs_lo.q.val().get_bits::<16>(0));
        self.underflows.next = self.unf_r.q.val();
        self.tx_gaps.next = self.gap_r.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rig {
        c: CmacCtl,
    }

    impl Rig {
        fn new() -> Self {
            let mut c = CmacCtl::default();
            c.connect_all();
            Rig { c }
        }
        fn run(&mut self, n: u64) {
            for _ in 0..n {
                self.c.clock.next = true.into();
                assert!(simulate(&mut self.c, 50));
                self.c.clock.next = false.into();
                assert!(simulate(&mut self.c, 50));
            }
        }
        fn ctl(&self) -> (bool, bool, bool) {
            (self.c.ctl_rx_enable.val(), self.c.ctl_tx_send_rfi.val(), self.c.ctl_tx_enable.val())
        }
    }

    /// PG203's order: RX on and RFI out while not aligned; TX on (RFI off) only after alignment has held
    /// `SETTLE` cycles; a loss of alignment takes TX off and RFI on again, and counts a link-down; disabling
    /// turns everything off.
    #[test]
    fn bring_up_follows_the_cmac_sequence() {
        let mut r = Rig::new();
        r.c.fec.next = true;
        r.run(3);
        assert_eq!(r.ctl(), (false, false, false), "off until enabled");
        r.c.enable.next = true;
        r.run(3);
        assert_eq!(r.ctl(), (true, true, false), "RX on, RFI, TX off");
        assert!(r.c.ctl_rsfec.val());
        r.c.stat_rx_aligned.next = true;
        r.run(1000);
        r.c.stat_rx_aligned.next = false;
        r.run(5);
        assert_eq!(r.ctl(), (true, true, false), "a short alignment does not enable TX");
        r.c.stat_rx_aligned.next = true;
        r.run(SETTLE - 10);
        assert_eq!(r.ctl(), (true, true, false));
        r.run(20);
        assert_eq!(r.ctl(), (true, false, true), "aligned for SETTLE cycles: TX on");
        assert!(r.c.link_up.val());
        assert_eq!((r.c.ups.val().to_u64(), r.c.downs.val().to_u64()), (1, 0));
        r.c.stat_rx_aligned.next = false;
        r.run(3);
        assert_eq!(r.ctl(), (true, true, false), "alignment lost: TX off, RFI again");
        assert_eq!(r.c.downs.val().to_u64(), 1);
        r.c.enable.next = false;
        r.run(3);
        assert_eq!(r.ctl(), (false, false, false));
        yosys_validate("cmac_ctl", &generate_verilog(&r.c)).unwrap();
    }

    /// The counters: bad-FCS frames by the MAC's per-cycle count, TX underflows, and gaps inside a TX frame
    /// (tvalid low after a beat without tlast, until tlast).
    #[test]
    fn counts_bad_fcs_underflows_and_mid_frame_gaps() {
        let mut r = Rig::new();
        r.c.stat_rx_bad_fcs.next = bits(2);
        r.run(10);
        r.c.stat_rx_bad_fcs.next = bits(0);
        r.run(3);
        assert_eq!(r.c.bad_fcs.val().to_u64(), 20);
        r.c.tx_unfout.next = true;
        r.run(1);
        r.c.tx_unfout.next = false;
        r.c.tx_tready.next = true;
        // a frame of three beats with one idle cycle after the first: one gap
        for (v, l) in [(true, false), (false, false), (true, false), (true, true), (false, false), (false, false)] {
            r.c.tx_tvalid.next = v;
            r.c.tx_tlast.next = l;
            r.run(1);
        }
        assert_eq!((r.c.underflows.val().to_u64(), r.c.tx_gaps.val().to_u64()), (1, 1));
    }
}
