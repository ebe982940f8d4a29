//! The board's registers: BAR0 from 1 MiB (`axil::BOARD_BASE`), 32-bit words, in the core clock. The
//! host reads `BOARD_ID` first to know it found this design; the rest is the link's control and status,
//! the QSFP sideband and the DMA adapter's state. Word offsets (`docs/board-u250.md` has the same table):
//!
//! | word | name | |
//! |---|---|---|
//! | 0 | `BOARD_ID` | [`BOARD_ID_VALUE`] ("RNIB") |
//! | 1 | `BOARD_VERSION` | [`BOARD_VERSION_VALUE`] (major 31:16, minor 15:0) |
//! | 2 | `BOARD_KIND` | the card (`0x0250`: Alveo U250) |
//! | 3 | `CORE_KHZ` | the core clock, kHz (322,266: the CMAC's user clock) |
//! | 4 | `LINK_CTL` (rw) | 0 link enable (1 after configuration), 1 RS-FEC (1), 4 QSFP RESETL (1), 5 QSFP LPMODE (0), 6 QSFP MODSELL (0), 7 near-end loopback (0: the GTs loop TX to RX, for `rnic board selftest`) |
//! | 5 | `LINK_STATUS` | 0 link up (TX enabled), 1 RX aligned, 7:4 RS-FEC lane lock, 8 QSFP MODPRSL (0: module present), 9 QSFP INTL, 10 PCIe in reset |
//! | 6, 7 | `LINK_UPS`, `LINK_DOWNS` | link-up and link-down events |
//! | 8 | `RX_BAD_FCS` | frames received with a bad FCS |
//! | 9, 10 | `TX_UNDERFLOWS`, `TX_GAPS` | the MAC's TX underflows; cycles the core's TX paused inside a frame (both must stay 0) |
//! | 11 | `DMA_RD` | read bursts outstanding 5:0, error responses 31:16 |
//! | 12 | `DMA_WR` | write bursts outstanding 5:0, idle 8, error responses 31:16 |
//!
//! Other words read 0; writes to them and to read-only words change nothing. Reads answer
//! [`READ_LATENCY`] cycles after `reg_rd`.

use rtl::common::consts::k;
use rust_hdl::prelude::*;

pub const BOARD_ID_VALUE: u64 = 0x524E_4942;
pub const BOARD_VERSION_VALUE: u64 = 0x0001_0000;
/// `LINK_CTL` after configuration: link enabled, RS-FEC on, QSFP out of reset, high power, selected.
pub const LINK_CTL_INIT: u64 = 0x13;
/// Cycles from `reg_rd` to the cycle in which `reg_rdata` holds the word (and keeps holding it).
pub const READ_LATENCY: usize = 2;

#[derive(LogicBlock)]
pub struct BoardRegs {
    pub clock: Signal<In, Clock>,
    pub reg_addr: Signal<In, Bits<6>>,
    pub reg_wr: Signal<In, Bit>,
    pub reg_wdata: Signal<In, Bits<32>>,
    pub reg_rd: Signal<In, Bit>,
    pub reg_rdata: Signal<Out, Bits<32>>,
    /// controls
    pub link_enable: Signal<Out, Bit>,
    pub link_fec: Signal<Out, Bit>,
    pub qsfp_resetl: Signal<Out, Bit>,
    pub qsfp_lpmode: Signal<Out, Bit>,
    pub qsfp_modsell: Signal<Out, Bit>,
    /// LINK_CTL bit 7: the MAC's transceivers in near-end PMA loopback.
    pub link_loopback: Signal<Out, Bit>,
    /// status
    pub link_up: Signal<In, Bit>,
    pub rx_aligned: Signal<In, Bit>,
    pub fec_lock: Signal<In, Bits<4>>,
    pub qsfp_modprsl: Signal<In, Bit>,
    pub qsfp_intl: Signal<In, Bit>,
    pub pcie_reset: Signal<In, Bit>,
    pub link_ups: Signal<In, Bits<16>>,
    pub link_downs: Signal<In, Bits<16>>,
    pub rx_bad_fcs: Signal<In, Bits<32>>,
    pub tx_underflows: Signal<In, Bits<16>>,
    pub tx_gaps: Signal<In, Bits<16>>,
    pub dma_rd_outstanding: Signal<In, Bits<6>>,
    pub dma_rd_errors: Signal<In, Bits<16>>,
    pub dma_wr_outstanding: Signal<In, Bits<6>>,
    pub dma_wr_errors: Signal<In, Bits<16>>,
    pub dma_wr_idle: Signal<In, Bit>,
    ctl: DFFWithInit<Bits<32>>,
    ra: DFF<Bits<6>>,
    rd: DFF<Bits<32>>,
    k_id: Constant<Bits<32>>,
    k_version: Constant<Bits<32>>,
    k_kind: Constant<Bits<32>>,
    k_khz: Constant<Bits<32>>,
    k_ctl_mask: Constant<Bits<32>>,
    k_ctl_word: Constant<Bits<6>>,
    k_zero: Constant<Bits<32>>,
}

impl BoardRegs {
    /// `kind`: the card's number (`0x0250`); `core_khz`: the core clock.
    pub fn new(kind: u64, core_khz: u64) -> Self {
        Self {
            clock: Default::default(),
            reg_addr: Default::default(),
            reg_wr: Default::default(),
            reg_wdata: Default::default(),
            reg_rd: Default::default(),
            reg_rdata: Default::default(),
            link_enable: Default::default(),
            link_fec: Default::default(),
            qsfp_resetl: Default::default(),
            qsfp_lpmode: Default::default(),
            qsfp_modsell: Default::default(),
            link_loopback: Default::default(),
            link_up: Default::default(),
            rx_aligned: Default::default(),
            fec_lock: Default::default(),
            qsfp_modprsl: Default::default(),
            qsfp_intl: Default::default(),
            pcie_reset: Default::default(),
            link_ups: Default::default(),
            link_downs: Default::default(),
            rx_bad_fcs: Default::default(),
            tx_underflows: Default::default(),
            tx_gaps: Default::default(),
            dma_rd_outstanding: Default::default(),
            dma_rd_errors: Default::default(),
            dma_wr_outstanding: Default::default(),
            dma_wr_errors: Default::default(),
            dma_wr_idle: Default::default(),
            ctl: DFFWithInit::new(bits(LINK_CTL_INIT)),
            ra: Default::default(),
            rd: Default::default(),
            k_id: k(BOARD_ID_VALUE),
            k_version: k(BOARD_VERSION_VALUE),
            k_kind: k(kind),
            k_khz: k(core_khz),
            k_ctl_mask: k(0xF3),
            k_ctl_word: k(4),
            k_zero: k(0),
        }
    }
}

impl Default for BoardRegs {
    fn default() -> Self {
        Self::new(0x0250, 322_266)
    }
}

impl Logic for BoardRegs {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, ctl, ra, rd);
        if self.reg_wr.val() & (self.reg_addr.val() == self.k_ctl_word.val()) {
            self.ctl.d.next = self.reg_wdata.val() & self.k_ctl_mask.val();
        }
        self.link_enable.next = self.ctl.q.val().get_bit(0);
        self.link_fec.next = self.ctl.q.val().get_bit(1);
        self.qsfp_resetl.next = self.ctl.q.val().get_bit(4);
        self.qsfp_lpmode.next = self.ctl.q.val().get_bit(5);
        self.qsfp_modsell.next = self.ctl.q.val().get_bit(6);
        self.link_loopback.next = self.ctl.q.val().get_bit(7);
        if self.reg_rd.val() {
            self.ra.d.next = self.reg_addr.val();
        }
        match self.ra.q.val().index() {
            0 => self.rd.d.next = self.k_id.val(),
            1 => self.rd.d.next = self.k_version.val(),
            2 => self.rd.d.next = self.k_kind.val(),
            3 => self.rd.d.next = self.k_khz.val(),
            4 => self.rd.d.next = self.ctl.q.val(),
            5 => {
                self.rd.d.next = bit_cast::<32, 1>(self.link_up.val().into())
                    | (bit_cast::<32, 1>(self.rx_aligned.val().into()) << 1)
                    | (bit_cast::<32, 4>(self.fec_lock.val()) << 4)
                    | (bit_cast::<32, 1>(self.qsfp_modprsl.val().into()) << 8)
                    | (bit_cast::<32, 1>(self.qsfp_intl.val().into()) << 9)
                    | (bit_cast::<32, 1>(self.pcie_reset.val().into()) << 10)
            }
            6 => self.rd.d.next = bit_cast::<32, 16>(self.link_ups.val()),
            7 => self.rd.d.next = bit_cast::<32, 16>(self.link_downs.val()),
            8 => self.rd.d.next = self.rx_bad_fcs.val(),
            9 => self.rd.d.next = bit_cast::<32, 16>(self.tx_underflows.val()),
            10 => self.rd.d.next = bit_cast::<32, 16>(self.tx_gaps.val()),
            11 => {
                self.rd.d.next = bit_cast::<32, 6>(self.dma_rd_outstanding.val())
                    | (bit_cast::<32, 16>(self.dma_rd_errors.val()) << 16)
            }
            12 => {
                self.rd.d.next = bit_cast::<32, 6>(self.dma_wr_outstanding.val())
                    | (bit_cast::<32, 1>(self.dma_wr_idle.val().into()) << 8)
                    | (bit_cast::<32, 16>(self.dma_wr_errors.val()) << 16)
            }
            _ => self.rd.d.next = self.k_zero.val(),
        }
        self.reg_rdata.next = self.rd.q.val();
    }
}
