//! The U250 board top: the RNIC core between the 100G MAC of QSFP0 and the PCIe DMA bridge.
//!
//! ```text
//!  PCIe x16 ── qdma0 ──┬─ m_axil (BAR, 250 MHz) ── AxiLiteCdc ── AxiLiteSplit ─┬─ core CSR (offsets < 1 MiB)
//!                      │                                                      └─ BoardRegs (from 1 MiB)
//!                      └─ s_axib (250 MHz) ── DmaAxi (5 AsyncFifos, AXI master) ── core DMA ports
//!  QSFP0 ── cmac0 ── 512-bit AXIS in gt_txusrclk2 (322.27 MHz) = the core clock ── core MAC ports
//!                 └─ ctl/stat ── CmacCtl (bring-up sequence, link status, counters) ── BoardRegs
//! ```
//!
//! **Clocks.** The core runs in the CMAC's user clock (`gt_txusrclk2`, 322.265625 MHz), the clock every
//! simulation, figure and depth budget of the core assumes; the MAC's RX (which has no ready) and TX (which
//! must never pause inside a frame) therefore meet the core with no crossing. The crossing sits on the PCIe
//! side, where AXI's own handshakes absorb it: the register path (a handful of words per access) and the DMA
//! path (AXI channels through LUTRAM FIFOs; 512 bits at 250 MHz carry 128 Gb/s, above Gen3 x16). The open
//! 100G designs run their cores at 250 MHz instead and cross at the MAC; if the 512-bit core does not close
//! 322 MHz across the U250's dies, that is the fallback (`docs/board-u250.md`). The CMAC's `init_clk` is the
//! board's 300 MHz oscillator divided by 3.
//!
//! **Resets.** The core and the CDC FIFOs have no reset (FPGA registers start at their initial values after
//! configuration). The CMAC's `sys_reset` is held for 4,096 cycles of `init_clk` after configuration
//! ([`PowerOnReset`]). The PCIe reset (`axi_aresetn`, low until the link trains) reaches the core clock
//! through a [`ResetSync`]; it is shown in `LINK_STATUS` (bit 10) and LED 1 with the link state.
//!
//! **LEDs.** 0: Ethernet link up (TX enabled); 1: PCIe link up; 2: a 1.3 Hz heartbeat of the core clock.

use super::ip::{ClockBuffers, Cmac, Qdma};
use super::shell::BoardShell;
use rtl::common::consts::k;
use rust_hdl::prelude::*;

/// `sys_reset` of the CMAC held for 2^12 cycles of its init clock after configuration.
#[derive(LogicBlock)]
pub struct PowerOnReset {
    pub clock: Signal<In, Clock>,
    pub rst: Signal<Out, Bit>,
    cnt: DFF<Bits<13>>,
    k_one: Constant<Bits<13>>,
}

impl Default for PowerOnReset {
    fn default() -> Self {
        Self { clock: Default::default(), rst: Default::default(), cnt: Default::default(), k_one: k(1) }
    }
}

impl Logic for PowerOnReset {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, cnt);
        if !self.cnt.q.val().get_bit(12) {
            self.cnt.d.next = self.cnt.q.val() + self.k_one.val();
        }
        self.rst.next = !self.cnt.q.val().get_bit(12);
    }
}

#[derive(LogicBlock)]
pub struct U250Top {
    pub pcie_refclk_p: Signal<In, Bit>,
    pub pcie_refclk_n: Signal<In, Bit>,
    pub pcie_perstn: Signal<In, Bit>,
    pub pcie_rx_p: Signal<In, Bits<16>>,
    pub pcie_rx_n: Signal<In, Bits<16>>,
    pub pcie_tx_p: Signal<Out, Bits<16>>,
    pub pcie_tx_n: Signal<Out, Bits<16>>,
    pub qsfp0_refclk_p: Signal<In, Bit>,
    pub qsfp0_refclk_n: Signal<In, Bit>,
    pub qsfp0_rx_p: Signal<In, Bits<4>>,
    pub qsfp0_rx_n: Signal<In, Bits<4>>,
    pub qsfp0_tx_p: Signal<Out, Bits<4>>,
    pub qsfp0_tx_n: Signal<Out, Bits<4>>,
    pub qsfp0_modsell: Signal<Out, Bit>,
    pub qsfp0_resetl: Signal<Out, Bit>,
    pub qsfp0_lpmode: Signal<Out, Bit>,
    pub qsfp0_modprsl: Signal<In, Bit>,
    pub qsfp0_intl: Signal<In, Bit>,
    pub clk_300_p: Signal<In, Bit>,
    pub clk_300_n: Signal<In, Bit>,
    pub led: Signal<Out, Bits<3>>,
    clocks: ClockBuffers,
    qdma: Qdma,
    cmac: Cmac,
    por: PowerOnReset,
    shell: BoardShell,
}

impl Default for U250Top {
    fn default() -> Self {
        Self {
            pcie_refclk_p: Default::default(),
            pcie_refclk_n: Default::default(),
            pcie_perstn: Default::default(),
            pcie_rx_p: Default::default(),
            pcie_rx_n: Default::default(),
            pcie_tx_p: Default::default(),
            pcie_tx_n: Default::default(),
            qsfp0_refclk_p: Default::default(),
            qsfp0_refclk_n: Default::default(),
            qsfp0_rx_p: Default::default(),
            qsfp0_rx_n: Default::default(),
            qsfp0_tx_p: Default::default(),
            qsfp0_tx_n: Default::default(),
            qsfp0_modsell: Default::default(),
            qsfp0_resetl: Default::default(),
            qsfp0_lpmode: Default::default(),
            qsfp0_modprsl: Default::default(),
            qsfp0_intl: Default::default(),
            clk_300_p: Default::default(),
            clk_300_n: Default::default(),
            led: Default::default(),
            clocks: Default::default(),
            qdma: Default::default(),
            cmac: Default::default(),
            por: Default::default(),
            shell: Default::default(),
        }
    }
}

impl Logic for U250Top {
    #[hdl_gen]
    fn update(&mut self) {
        // clocks: pclk = qdma.axi_aclk, core clock = cmac.clk_core
        self.clocks.pcie_refclk_p.next = self.pcie_refclk_p.val();
        self.clocks.pcie_refclk_n.next = self.pcie_refclk_n.val();
        self.clocks.clk_300_p.next = self.clk_300_p.val();
        self.clocks.clk_300_n.next = self.clk_300_n.val();
        self.por.clock.next = self.clocks.init_clk.val();
        self.cmac.init_clk.next = self.clocks.init_clk.val();
        self.cmac.sys_reset.next = self.por.rst.val();
        self.shell.clock.next = self.cmac.clk_core.val();
        self.shell.pclk.next = self.qdma.axi_aclk.val();
        // PCIe
        self.qdma.sys_clk.next = self.clocks.sys_clk.val();
        self.qdma.sys_clk_gt.next = self.clocks.sys_clk_gt.val();
        self.qdma.sys_rst_n.next = self.pcie_perstn.val();
        self.qdma.pci_exp_rxp.next = self.pcie_rx_p.val();
        self.qdma.pci_exp_rxn.next = self.pcie_rx_n.val();
        self.pcie_tx_p.next = self.qdma.pci_exp_txp.val();
        self.pcie_tx_n.next = self.qdma.pci_exp_txn.val();
        // Ethernet
        self.cmac.gt_ref_clk_p.next = self.qsfp0_refclk_p.val();
        self.cmac.gt_ref_clk_n.next = self.qsfp0_refclk_n.val();
        self.cmac.gt_rxp_in.next = self.qsfp0_rx_p.val();
        self.cmac.gt_rxn_in.next = self.qsfp0_rx_n.val();
        self.qsfp0_tx_p.next = self.cmac.gt_txp_out.val();
        self.qsfp0_tx_n.next = self.cmac.gt_txn_out.val();
        // the shell's ports: the IPs' user sides, the QSFP sideband and the LEDs
        self.shell.pcie_aresetn.next = self.qdma.axi_aresetn.val();
        self.shell.pcie_link_up.next = self.qdma.user_lnk_up.val();
        self.shell.s_axil_awaddr.next = self.qdma.m_axil_awaddr.val();
        self.shell.s_axil_awvalid.next = self.qdma.m_axil_awvalid.val();
        self.shell.s_axil_wdata.next = self.qdma.m_axil_wdata.val();
        self.shell.s_axil_wstrb.next = self.qdma.m_axil_wstrb.val();
        self.shell.s_axil_wvalid.next = self.qdma.m_axil_wvalid.val();
        self.shell.s_axil_bready.next = self.qdma.m_axil_bready.val();
        self.shell.s_axil_araddr.next = self.qdma.m_axil_araddr.val();
        self.shell.s_axil_arvalid.next = self.qdma.m_axil_arvalid.val();
        self.shell.s_axil_rready.next = self.qdma.m_axil_rready.val();
        self.qdma.m_axil_awready.next = self.shell.s_axil_awready.val();
        self.qdma.m_axil_wready.next = self.shell.s_axil_wready.val();
        self.qdma.m_axil_bresp.next = self.shell.s_axil_bresp.val();
        self.qdma.m_axil_bvalid.next = self.shell.s_axil_bvalid.val();
        self.qdma.m_axil_arready.next = self.shell.s_axil_arready.val();
        self.qdma.m_axil_rdata.next = self.shell.s_axil_rdata.val();
        self.qdma.m_axil_rresp.next = self.shell.s_axil_rresp.val();
        self.qdma.m_axil_rvalid.next = self.shell.s_axil_rvalid.val();
        self.shell.m_axib_awready.next = self.qdma.s_axib_awready.val();
        self.shell.m_axib_wready.next = self.qdma.s_axib_wready.val();
        self.shell.m_axib_bresp.next = self.qdma.s_axib_bresp.val();
        self.shell.m_axib_bvalid.next = self.qdma.s_axib_bvalid.val();
        self.shell.m_axib_arready.next = self.qdma.s_axib_arready.val();
        self.shell.m_axib_rdata.next = self.qdma.s_axib_rdata.val();
        self.shell.m_axib_rresp.next = self.qdma.s_axib_rresp.val();
        self.shell.m_axib_rlast.next = self.qdma.s_axib_rlast.val();
        self.shell.m_axib_rvalid.next = self.qdma.s_axib_rvalid.val();
        self.qdma.s_axib_araddr.next = self.shell.m_axib_araddr.val();
        self.qdma.s_axib_arlen.next = self.shell.m_axib_arlen.val();
        self.qdma.s_axib_arvalid.next = self.shell.m_axib_arvalid.val();
        self.qdma.s_axib_rready.next = self.shell.m_axib_rready.val();
        self.qdma.s_axib_awaddr.next = self.shell.m_axib_awaddr.val();
        self.qdma.s_axib_awlen.next = self.shell.m_axib_awlen.val();
        self.qdma.s_axib_awvalid.next = self.shell.m_axib_awvalid.val();
        self.qdma.s_axib_wdata.next = self.shell.m_axib_wdata.val();
        self.qdma.s_axib_wstrb.next = self.shell.m_axib_wstrb.val();
        self.qdma.s_axib_wlast.next = self.shell.m_axib_wlast.val();
        self.qdma.s_axib_wuser.next = self.shell.m_axib_wuser.val();
        self.qdma.s_axib_wvalid.next = self.shell.m_axib_wvalid.val();
        self.qdma.s_axib_bready.next = self.shell.m_axib_bready.val();
        self.shell.cmac_tx_tready.next = self.cmac.tx_tready.val();
        self.shell.cmac_rx_tdata.next = self.cmac.rx_tdata.val();
        self.shell.cmac_rx_tkeep.next = self.cmac.rx_tkeep.val();
        self.shell.cmac_rx_tlast.next = self.cmac.rx_tlast.val();
        self.shell.cmac_rx_tvalid.next = self.cmac.rx_tvalid.val();
        self.shell.cmac_rx_tuser.next = self.cmac.rx_tuser.val();
        self.shell.cmac_stat_rx_aligned.next = self.cmac.stat_rx_aligned.val();
        self.shell.cmac_stat_rx_bad_fcs.next = self.cmac.stat_rx_bad_fcs.val();
        self.shell.cmac_stat_rx_rsfec_am_lock.next = self.cmac.stat_rx_rsfec_am_lock.val();
        self.shell.cmac_tx_unfout.next = self.cmac.tx_unfout.val();
        self.cmac.tx_tdata.next = self.shell.cmac_tx_tdata.val();
        self.cmac.tx_tkeep.next = self.shell.cmac_tx_tkeep.val();
        self.cmac.tx_tlast.next = self.shell.cmac_tx_tlast.val();
        self.cmac.tx_tvalid.next = self.shell.cmac_tx_tvalid.val();
        self.cmac.ctl_rx_enable.next = self.shell.cmac_ctl_rx_enable.val();
        self.cmac.ctl_tx_enable.next = self.shell.cmac_ctl_tx_enable.val();
        self.cmac.ctl_tx_send_rfi.next = self.shell.cmac_ctl_tx_send_rfi.val();
        self.cmac.ctl_rsfec.next = self.shell.cmac_ctl_rsfec.val();
        self.cmac.gt_loopback.next = self.shell.cmac_gt_loopback.val();
        self.shell.qsfp0_intl.next = self.qsfp0_intl.val();
        self.shell.qsfp0_modprsl.next = self.qsfp0_modprsl.val();
        self.qsfp0_modsell.next = self.shell.qsfp0_modsell.val();
        self.qsfp0_resetl.next = self.shell.qsfp0_resetl.val();
        self.qsfp0_lpmode.next = self.shell.qsfp0_lpmode.val();
        self.led.next = self.shell.led.val();
    }
}

impl U250Top {
    /// Put a pin constraint on a port of the board top, by its name (the names of `u250::PINS`).
    pub fn constrain(&mut self, port: &str, bit: usize, constraint: Constraint) {
        let c = PinConstraint { index: bit, constraint };
        match port {
            "pcie_refclk_p" => self.pcie_refclk_p.add_constraint(c),
            "pcie_refclk_n" => self.pcie_refclk_n.add_constraint(c),
            "pcie_perstn" => self.pcie_perstn.add_constraint(c),
            "qsfp0_refclk_p" => self.qsfp0_refclk_p.add_constraint(c),
            "qsfp0_refclk_n" => self.qsfp0_refclk_n.add_constraint(c),
            "qsfp0_modsell" => self.qsfp0_modsell.add_constraint(c),
            "qsfp0_resetl" => self.qsfp0_resetl.add_constraint(c),
            "qsfp0_lpmode" => self.qsfp0_lpmode.add_constraint(c),
            "qsfp0_modprsl" => self.qsfp0_modprsl.add_constraint(c),
            "qsfp0_intl" => self.qsfp0_intl.add_constraint(c),
            "clk_300_p" => self.clk_300_p.add_constraint(c),
            "clk_300_n" => self.clk_300_n.add_constraint(c),
            "led" => self.led.add_constraint(c),
            _ => panic!("the board top has no port {port}"),
        }
    }
}
