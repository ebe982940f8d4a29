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

use super::axil::{AxiLiteCdc, AxiLiteSplit};
use super::cdc::ResetSync;
use super::cmac_ctl::CmacCtl;
use super::dma_axi::DmaAxi;
use super::ip::{ClockBuffers, Cmac, Qdma};
use super::regs::BoardRegs;
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
    pcie_rst: ResetSync,
    core: rtl::rnic::Rnic,
    axil_cdc: AxiLiteCdc,
    split: AxiLiteSplit,
    regs: BoardRegs,
    dma: DmaAxi,
    link: CmacCtl,
    beat: DFF<Bits<28>>,
    k_one28: Constant<Bits<28>>,
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
            pcie_rst: Default::default(),
            core: Default::default(),
            axil_cdc: Default::default(),
            split: Default::default(),
            regs: BoardRegs::new(super::u250::KIND, 322_266),
            dma: Default::default(),
            link: Default::default(),
            beat: Default::default(),
            k_one28: k(1),
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
        self.core.clock.next = self.cmac.clk_core.val();
        self.split.clock.next = self.cmac.clk_core.val();
        self.regs.clock.next = self.cmac.clk_core.val();
        self.link.clock.next = self.cmac.clk_core.val();
        self.pcie_rst.clock.next = self.cmac.clk_core.val();
        self.beat.clock.next = self.cmac.clk_core.val();
        self.axil_cdc.pclk.next = self.qdma.axi_aclk.val();
        self.axil_cdc.cclk.next = self.cmac.clk_core.val();
        self.dma.pclk.next = self.qdma.axi_aclk.val();
        self.dma.cclk.next = self.cmac.clk_core.val();
        self.beat.d.next = self.beat.q.val() + self.k_one28.val();
        // PCIe
        self.qdma.sys_clk.next = self.clocks.sys_clk.val();
        self.qdma.sys_clk_gt.next = self.clocks.sys_clk_gt.val();
        self.qdma.sys_rst_n.next = self.pcie_perstn.val();
        self.qdma.pci_exp_rxp.next = self.pcie_rx_p.val();
        self.qdma.pci_exp_rxn.next = self.pcie_rx_n.val();
        self.pcie_tx_p.next = self.qdma.pci_exp_txp.val();
        self.pcie_tx_n.next = self.qdma.pci_exp_txn.val();
        self.pcie_rst.arst.next = !self.qdma.axi_aresetn.val();
        // BAR: QDMA AXI4-Lite master -> crossing -> split -> core CSR / board registers
        self.axil_cdc.s_awvalid.next = self.qdma.m_axil_awvalid.val();
        self.qdma.m_axil_awready.next = self.axil_cdc.s_awready.val();
        self.axil_cdc.s_awaddr.next = self.qdma.m_axil_awaddr.val();
        self.axil_cdc.s_wvalid.next = self.qdma.m_axil_wvalid.val();
        self.qdma.m_axil_wready.next = self.axil_cdc.s_wready.val();
        self.axil_cdc.s_wdata.next = self.qdma.m_axil_wdata.val();
        self.axil_cdc.s_wstrb.next = self.qdma.m_axil_wstrb.val();
        self.qdma.m_axil_bvalid.next = self.axil_cdc.s_bvalid.val();
        self.axil_cdc.s_bready.next = self.qdma.m_axil_bready.val();
        self.qdma.m_axil_bresp.next = self.axil_cdc.s_bresp.val();
        self.axil_cdc.s_arvalid.next = self.qdma.m_axil_arvalid.val();
        self.qdma.m_axil_arready.next = self.axil_cdc.s_arready.val();
        self.axil_cdc.s_araddr.next = self.qdma.m_axil_araddr.val();
        self.qdma.m_axil_rvalid.next = self.axil_cdc.s_rvalid.val();
        self.axil_cdc.s_rready.next = self.qdma.m_axil_rready.val();
        self.qdma.m_axil_rdata.next = self.axil_cdc.s_rdata.val();
        self.qdma.m_axil_rresp.next = self.axil_cdc.s_rresp.val();
        self.split.s_awvalid.next = self.axil_cdc.m_awvalid.val();
        self.axil_cdc.m_awready.next = self.split.s_awready.val();
        self.split.s_awaddr.next = self.axil_cdc.m_awaddr.val();
        self.split.s_wvalid.next = self.axil_cdc.m_wvalid.val();
        self.axil_cdc.m_wready.next = self.split.s_wready.val();
        self.split.s_wdata.next = self.axil_cdc.m_wdata.val();
        self.split.s_wstrb.next = self.axil_cdc.m_wstrb.val();
        self.axil_cdc.m_bvalid.next = self.split.s_bvalid.val();
        self.split.s_bready.next = self.axil_cdc.m_bready.val();
        self.axil_cdc.m_bresp.next = self.split.s_bresp.val();
        self.split.s_arvalid.next = self.axil_cdc.m_arvalid.val();
        self.axil_cdc.m_arready.next = self.split.s_arready.val();
        self.split.s_araddr.next = self.axil_cdc.m_araddr.val();
        self.axil_cdc.m_rvalid.next = self.split.s_rvalid.val();
        self.split.s_rready.next = self.axil_cdc.m_rready.val();
        self.axil_cdc.m_rdata.next = self.split.s_rdata.val();
        self.axil_cdc.m_rresp.next = self.split.s_rresp.val();
        self.core.awvalid.next = self.split.c_awvalid.val();
        self.split.c_awready.next = self.core.awready.val();
        self.core.awaddr.next = self.split.c_awaddr.val();
        self.core.wvalid.next = self.split.c_wvalid.val();
        self.split.c_wready.next = self.core.wready.val();
        self.core.wdata.next = self.split.c_wdata.val();
        self.core.wstrb.next = self.split.c_wstrb.val();
        self.split.c_bvalid.next = self.core.bvalid.val();
        self.core.bready.next = self.split.c_bready.val();
        self.split.c_bresp.next = self.core.bresp.val();
        self.core.arvalid.next = self.split.c_arvalid.val();
        self.split.c_arready.next = self.core.arready.val();
        self.core.araddr.next = self.split.c_araddr.val();
        self.split.c_rvalid.next = self.core.rvalid.val();
        self.core.rready.next = self.split.c_rready.val();
        self.split.c_rdata.next = self.core.rdata.val();
        self.split.c_rresp.next = self.core.rresp.val();
        self.regs.reg_addr.next = self.split.reg_addr.val();
        self.regs.reg_wr.next = self.split.reg_wr.val();
        self.regs.reg_wdata.next = self.split.reg_wdata.val();
        self.regs.reg_rd.next = self.split.reg_rd.val();
        self.split.reg_rdata.next = self.regs.reg_rdata.val();
        // DMA: core ports -> AXI master -> crossing -> QDMA bridge slave
        self.dma.rd_req_valid.next = self.core.rd_req_valid.val();
        self.core.rd_req_ready.next = self.dma.rd_req_ready.val();
        self.dma.rd_req_addr.next = self.core.rd_req_addr.val();
        self.dma.rd_req_len.next = self.core.rd_req_len.val();
        self.dma.rd_req_tag.next = self.core.rd_req_tag.val();
        self.core.rd_resp_valid.next = self.dma.rd_resp_valid.val();
        self.dma.rd_resp_ready.next = self.core.rd_resp_ready.val();
        self.core.rd_resp_data.next = self.dma.rd_resp_data.val();
        self.core.rd_resp_tag.next = self.dma.rd_resp_tag.val();
        self.core.rd_resp_last.next = self.dma.rd_resp_last.val();
        self.dma.wr_valid.next = self.core.wr_valid.val();
        self.core.wr_ready.next = self.dma.wr_ready.val();
        self.dma.wr_addr.next = self.core.wr_addr.val();
        self.dma.wr_data.next = self.core.wr_data.val();
        self.dma.wr_strb.next = self.core.wr_strb.val();
        self.dma.wr_last.next = self.core.wr_last.val();
        self.qdma.s_axib_arvalid.next = self.dma.m_axi_arvalid.val();
        self.dma.m_axi_arready.next = self.qdma.s_axib_arready.val();
        self.qdma.s_axib_araddr.next = self.dma.m_axi_araddr.val();
        self.qdma.s_axib_arlen.next = self.dma.m_axi_arlen.val();
        self.dma.m_axi_rvalid.next = self.qdma.s_axib_rvalid.val();
        self.qdma.s_axib_rready.next = self.dma.m_axi_rready.val();
        self.dma.m_axi_rdata.next = self.qdma.s_axib_rdata.val();
        self.dma.m_axi_rlast.next = self.qdma.s_axib_rlast.val();
        self.dma.m_axi_rresp.next = self.qdma.s_axib_rresp.val();
        self.qdma.s_axib_awvalid.next = self.dma.m_axi_awvalid.val();
        self.dma.m_axi_awready.next = self.qdma.s_axib_awready.val();
        self.qdma.s_axib_awaddr.next = self.dma.m_axi_awaddr.val();
        self.qdma.s_axib_awlen.next = self.dma.m_axi_awlen.val();
        self.qdma.s_axib_wvalid.next = self.dma.m_axi_wvalid.val();
        self.dma.m_axi_wready.next = self.qdma.s_axib_wready.val();
        self.qdma.s_axib_wdata.next = self.dma.m_axi_wdata.val();
        self.qdma.s_axib_wstrb.next = self.dma.m_axi_wstrb.val();
        self.qdma.s_axib_wlast.next = self.dma.m_axi_wlast.val();
        self.qdma.s_axib_wuser.next = self.dma.m_axi_wuser.val();
        self.dma.m_axi_bvalid.next = self.qdma.s_axib_bvalid.val();
        self.qdma.s_axib_bready.next = self.dma.m_axi_bready.val();
        self.dma.m_axi_bresp.next = self.qdma.s_axib_bresp.val();
        // Ethernet: the core's MAC ports straight onto the CMAC's AXIS (same clock); the CMAC's RX has no
        // ready (the core's RX never holds it back: RX Parse drops and counts what it cannot take)
        self.cmac.gt_ref_clk_p.next = self.qsfp0_refclk_p.val();
        self.cmac.gt_ref_clk_n.next = self.qsfp0_refclk_n.val();
        self.cmac.gt_rxp_in.next = self.qsfp0_rx_p.val();
        self.cmac.gt_rxn_in.next = self.qsfp0_rx_n.val();
        self.qsfp0_tx_p.next = self.cmac.gt_txp_out.val();
        self.qsfp0_tx_n.next = self.cmac.gt_txn_out.val();
        self.cmac.tx_tdata.next = self.core.m_axis.tdata.val();
        self.cmac.tx_tkeep.next = self.core.m_axis.tkeep.val();
        self.cmac.tx_tlast.next = self.core.m_axis.tlast.val();
        self.cmac.tx_tvalid.next = self.core.m_axis.tvalid.val();
        self.core.m_axis.tready.next = self.cmac.tx_tready.val();
        self.core.s_axis.tdata.next = self.cmac.rx_tdata.val();
        self.core.s_axis.tkeep.next = self.cmac.rx_tkeep.val();
        self.core.s_axis.tlast.next = self.cmac.rx_tlast.val();
        self.core.s_axis.tvalid.next = self.cmac.rx_tvalid.val();
        // bring-up and status
        self.link.enable.next = self.regs.link_enable.val();
        self.link.fec.next = self.regs.link_fec.val();
        self.cmac.ctl_rx_enable.next = self.link.ctl_rx_enable.val();
        self.cmac.ctl_tx_enable.next = self.link.ctl_tx_enable.val();
        self.cmac.ctl_tx_send_rfi.next = self.link.ctl_tx_send_rfi.val();
        self.cmac.ctl_rsfec.next = self.link.ctl_rsfec.val();
        self.link.stat_rx_aligned.next = self.cmac.stat_rx_aligned.val();
        self.link.stat_rx_bad_fcs.next = self.cmac.stat_rx_bad_fcs.val();
        self.link.tx_unfout.next = self.cmac.tx_unfout.val();
        self.link.tx_tvalid.next = self.core.m_axis.tvalid.val();
        self.link.tx_tready.next = self.cmac.tx_tready.val();
        self.link.tx_tlast.next = self.core.m_axis.tlast.val();
        self.regs.link_up.next = self.link.link_up.val();
        self.regs.rx_aligned.next = self.cmac.stat_rx_aligned.val();
        self.regs.fec_lock.next = self.cmac.stat_rx_rsfec_am_lock.val();
        self.regs.qsfp_modprsl.next = self.qsfp0_modprsl.val();
        self.regs.qsfp_intl.next = self.qsfp0_intl.val();
        self.regs.pcie_reset.next = self.pcie_rst.rst.val();
        self.regs.link_ups.next = self.link.ups.val();
        self.regs.link_downs.next = self.link.downs.val();
        self.regs.rx_bad_fcs.next = self.link.bad_fcs.val();
        self.regs.tx_underflows.next = self.link.underflows.val();
        self.regs.tx_gaps.next = self.link.tx_gaps.val();
        self.regs.dma_rd_outstanding.next = self.dma.rd_outstanding.val();
        self.regs.dma_rd_errors.next = self.dma.rd_errors.val();
        self.regs.dma_wr_outstanding.next = self.dma.wr_outstanding.val();
        self.regs.dma_wr_errors.next = self.dma.wr_errors.val();
        self.regs.dma_wr_idle.next = self.dma.wr_idle.val();
        self.qsfp0_modsell.next = self.regs.qsfp_modsell.val();
        self.qsfp0_resetl.next = self.regs.qsfp_resetl.val();
        self.qsfp0_lpmode.next = self.regs.qsfp_lpmode.val();
        self.led.next = bit_cast::<3, 1>(self.link.link_up.val().into())
            | (bit_cast::<3, 1>(self.qdma.user_lnk_up.val().into()) << 1)
            | (bit_cast::<3, 1>(self.beat.q.val().get_bit(27).into()) << 2);
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
