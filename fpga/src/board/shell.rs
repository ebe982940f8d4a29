//! The board shell: everything of the U250 board top between its vendor IPs (the core, the BAR and DMA
//! crossings, the AXI master, the board registers, the CMAC bring-up), with the IPs' user-side ports as its
//! own. [`super::top::U250Top`] is the IPs around it; the board-level simulation (`sim::board`) runs this
//! block as a Verilator model with bus-functional models of the IPs at exactly these ports.
//!
//! Two clocks: `clock` (the core's, the CMAC's user clock) and `pclk` (the QDMA's `axi_aclk`); every crossing
//! between them is a named block of `super::cdc` ([`AxiLiteCdc`] for the BAR, [`DmaAxi`]'s FIFOs for DMA,
//! [`ResetSync`] for the PCIe reset, [`SyncFlops`] for the QSFP module's status pins).
//!
//! **LEDs.** 0: Ethernet link up (TX enabled); 1: PCIe link up; 2: a 1.3 Hz heartbeat of the core clock.

use super::axil::{AxiLiteCdc, AxiLiteSplit};
use super::cdc::{ResetSync, SyncFlops};
use super::cmac_ctl::CmacCtl;
use super::dma_axi::DmaAxi;
use super::regs::BoardRegs;
use rtl::common::consts::k;
use rust_hdl::prelude::*;

#[derive(LogicBlock)]
pub struct BoardShell {
    /// The core clock: the CMAC's user clock (`gt_txusrclk2`, 322.265625 MHz).
    pub clock: Signal<In, Clock>,
    /// The PCIe side's clock: the QDMA's `axi_aclk` (250 MHz).
    pub pclk: Signal<In, Clock>,
    /// The PCIe reset (low until the link trains) and link state, from the QDMA.
    pub pcie_aresetn: Signal<In, Bit>,
    pub pcie_link_up: Signal<In, Bit>,
    /// BAR0: the QDMA's AXI4-Lite master (`m_axil_*`), in `pclk`.
    pub s_axil_awaddr: Signal<In, Bits<21>>,
    pub s_axil_awvalid: Signal<In, Bit>,
    pub s_axil_wdata: Signal<In, Bits<32>>,
    pub s_axil_wstrb: Signal<In, Bits<4>>,
    pub s_axil_wvalid: Signal<In, Bit>,
    pub s_axil_bready: Signal<In, Bit>,
    pub s_axil_araddr: Signal<In, Bits<21>>,
    pub s_axil_arvalid: Signal<In, Bit>,
    pub s_axil_rready: Signal<In, Bit>,
    pub s_axil_awready: Signal<Out, Bit>,
    pub s_axil_wready: Signal<Out, Bit>,
    pub s_axil_bresp: Signal<Out, Bits<2>>,
    pub s_axil_bvalid: Signal<Out, Bit>,
    pub s_axil_arready: Signal<Out, Bit>,
    pub s_axil_rdata: Signal<Out, Bits<32>>,
    pub s_axil_rresp: Signal<Out, Bits<2>>,
    pub s_axil_rvalid: Signal<Out, Bit>,
    /// DMA: the QDMA's AXI-MM bridge slave (`s_axib_*`), in `pclk`.
    pub m_axib_awready: Signal<In, Bit>,
    pub m_axib_wready: Signal<In, Bit>,
    pub m_axib_bresp: Signal<In, Bits<2>>,
    pub m_axib_bvalid: Signal<In, Bit>,
    pub m_axib_arready: Signal<In, Bit>,
    pub m_axib_rdata: Signal<In, Bits<512>>,
    pub m_axib_rresp: Signal<In, Bits<2>>,
    pub m_axib_rlast: Signal<In, Bit>,
    pub m_axib_rvalid: Signal<In, Bit>,
    pub m_axib_araddr: Signal<Out, Bits<64>>,
    pub m_axib_arlen: Signal<Out, Bits<8>>,
    pub m_axib_arvalid: Signal<Out, Bit>,
    pub m_axib_rready: Signal<Out, Bit>,
    pub m_axib_awaddr: Signal<Out, Bits<64>>,
    pub m_axib_awlen: Signal<Out, Bits<8>>,
    pub m_axib_awvalid: Signal<Out, Bit>,
    pub m_axib_wdata: Signal<Out, Bits<512>>,
    pub m_axib_wstrb: Signal<Out, Bits<64>>,
    pub m_axib_wlast: Signal<Out, Bit>,
    pub m_axib_wuser: Signal<Out, Bits<64>>,
    pub m_axib_wvalid: Signal<Out, Bit>,
    pub m_axib_bready: Signal<Out, Bit>,
    /// The CMAC's user side, in `clock`: AXIS TX and RX, control and status.
    pub cmac_tx_tready: Signal<In, Bit>,
    pub cmac_rx_tdata: Signal<In, Bits<512>>,
    pub cmac_rx_tkeep: Signal<In, Bits<64>>,
    pub cmac_rx_tlast: Signal<In, Bit>,
    pub cmac_rx_tvalid: Signal<In, Bit>,
    /// The CMAC's frame error flag with the last beat (bad FCS and the like): the core drops the frame.
    pub cmac_rx_tuser: Signal<In, Bit>,
    pub cmac_stat_rx_aligned: Signal<In, Bit>,
    pub cmac_stat_rx_bad_fcs: Signal<In, Bits<3>>,
    pub cmac_stat_rx_rsfec_am_lock: Signal<In, Bits<4>>,
    pub cmac_tx_unfout: Signal<In, Bit>,
    pub cmac_tx_tdata: Signal<Out, Bits<512>>,
    pub cmac_tx_tkeep: Signal<Out, Bits<64>>,
    pub cmac_tx_tlast: Signal<Out, Bit>,
    pub cmac_tx_tvalid: Signal<Out, Bit>,
    pub cmac_ctl_rx_enable: Signal<Out, Bit>,
    pub cmac_ctl_tx_enable: Signal<Out, Bit>,
    pub cmac_ctl_tx_send_rfi: Signal<Out, Bit>,
    pub cmac_ctl_rsfec: Signal<Out, Bit>,
    /// The CMAC's `gt_loopback_in`: near-end PMA loopback on all four lanes while `LINK_CTL` bit 7 is set.
    pub cmac_gt_loopback: Signal<Out, Bits<12>>,
    /// QSFP0 sideband and LEDs.
    pub qsfp0_intl: Signal<In, Bit>,
    pub qsfp0_modprsl: Signal<In, Bit>,
    pub qsfp0_modsell: Signal<Out, Bit>,
    pub qsfp0_resetl: Signal<Out, Bit>,
    pub qsfp0_lpmode: Signal<Out, Bit>,
    pub led: Signal<Out, Bits<3>>,
    pcie_rst: ResetSync,
    /// the QSFP module's status pins (no clock) into the core clock
    modprsl_sync: SyncFlops<1>,
    intl_sync: SyncFlops<1>,
    core: rtl::rnic::Rnic,
    axil_cdc: AxiLiteCdc,
    split: AxiLiteSplit,
    regs: BoardRegs,
    dma: DmaAxi,
    link: CmacCtl,
    beat: DFF<Bits<28>>,
    k_one28: Constant<Bits<28>>,
    /// `gt_loopback_in`: normal, and near-end PMA loopback (3'b010) on each of the four lanes
    k_noloop: Constant<Bits<12>>,
    k_pma_loop: Constant<Bits<12>>,
}

impl Default for BoardShell {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            pclk: Default::default(),
            pcie_aresetn: Default::default(),
            pcie_link_up: Default::default(),
            s_axil_awaddr: Default::default(),
            s_axil_awvalid: Default::default(),
            s_axil_wdata: Default::default(),
            s_axil_wstrb: Default::default(),
            s_axil_wvalid: Default::default(),
            s_axil_bready: Default::default(),
            s_axil_araddr: Default::default(),
            s_axil_arvalid: Default::default(),
            s_axil_rready: Default::default(),
            s_axil_awready: Default::default(),
            s_axil_wready: Default::default(),
            s_axil_bresp: Default::default(),
            s_axil_bvalid: Default::default(),
            s_axil_arready: Default::default(),
            s_axil_rdata: Default::default(),
            s_axil_rresp: Default::default(),
            s_axil_rvalid: Default::default(),
            m_axib_awready: Default::default(),
            m_axib_wready: Default::default(),
            m_axib_bresp: Default::default(),
            m_axib_bvalid: Default::default(),
            m_axib_arready: Default::default(),
            m_axib_rdata: Default::default(),
            m_axib_rresp: Default::default(),
            m_axib_rlast: Default::default(),
            m_axib_rvalid: Default::default(),
            m_axib_araddr: Default::default(),
            m_axib_arlen: Default::default(),
            m_axib_arvalid: Default::default(),
            m_axib_rready: Default::default(),
            m_axib_awaddr: Default::default(),
            m_axib_awlen: Default::default(),
            m_axib_awvalid: Default::default(),
            m_axib_wdata: Default::default(),
            m_axib_wstrb: Default::default(),
            m_axib_wlast: Default::default(),
            m_axib_wuser: Default::default(),
            m_axib_wvalid: Default::default(),
            m_axib_bready: Default::default(),
            cmac_tx_tready: Default::default(),
            cmac_rx_tdata: Default::default(),
            cmac_rx_tkeep: Default::default(),
            cmac_rx_tlast: Default::default(),
            cmac_rx_tvalid: Default::default(),
            cmac_rx_tuser: Default::default(),
            cmac_stat_rx_aligned: Default::default(),
            cmac_stat_rx_bad_fcs: Default::default(),
            cmac_stat_rx_rsfec_am_lock: Default::default(),
            cmac_tx_unfout: Default::default(),
            cmac_tx_tdata: Default::default(),
            cmac_tx_tkeep: Default::default(),
            cmac_tx_tlast: Default::default(),
            cmac_tx_tvalid: Default::default(),
            cmac_ctl_rx_enable: Default::default(),
            cmac_ctl_tx_enable: Default::default(),
            cmac_ctl_tx_send_rfi: Default::default(),
            cmac_ctl_rsfec: Default::default(),
            cmac_gt_loopback: Default::default(),
            qsfp0_intl: Default::default(),
            qsfp0_modprsl: Default::default(),
            qsfp0_modsell: Default::default(),
            qsfp0_resetl: Default::default(),
            qsfp0_lpmode: Default::default(),
            led: Default::default(),
            pcie_rst: Default::default(),
            modprsl_sync: Default::default(),
            intl_sync: Default::default(),
            core: Default::default(),
            axil_cdc: Default::default(),
            split: Default::default(),
            regs: BoardRegs::new(super::u250::KIND, 322_266),
            dma: Default::default(),
            link: Default::default(),
            beat: Default::default(),
            k_one28: k(1),
            k_noloop: k(0),
            k_pma_loop: k(0b010_010_010_010),
        }
    }
}

impl Logic for BoardShell {
    #[hdl_gen]
    fn update(&mut self) {
        self.core.clock.next = self.clock.val();
        self.split.clock.next = self.clock.val();
        self.regs.clock.next = self.clock.val();
        self.link.clock.next = self.clock.val();
        self.pcie_rst.clock.next = self.clock.val();
        self.beat.clock.next = self.clock.val();
        self.axil_cdc.pclk.next = self.pclk.val();
        self.axil_cdc.cclk.next = self.clock.val();
        self.dma.pclk.next = self.pclk.val();
        self.dma.cclk.next = self.clock.val();
        self.beat.d.next = self.beat.q.val() + self.k_one28.val();
        // PCIe
        self.pcie_rst.arst.next = !self.pcie_aresetn.val();
        // BAR: QDMA AXI4-Lite master -> crossing -> split -> core CSR / board registers
        self.axil_cdc.s_awvalid.next = self.s_axil_awvalid.val();
        self.s_axil_awready.next = self.axil_cdc.s_awready.val();
        self.axil_cdc.s_awaddr.next = self.s_axil_awaddr.val();
        self.axil_cdc.s_wvalid.next = self.s_axil_wvalid.val();
        self.s_axil_wready.next = self.axil_cdc.s_wready.val();
        self.axil_cdc.s_wdata.next = self.s_axil_wdata.val();
        self.axil_cdc.s_wstrb.next = self.s_axil_wstrb.val();
        self.s_axil_bvalid.next = self.axil_cdc.s_bvalid.val();
        self.axil_cdc.s_bready.next = self.s_axil_bready.val();
        self.s_axil_bresp.next = self.axil_cdc.s_bresp.val();
        self.axil_cdc.s_arvalid.next = self.s_axil_arvalid.val();
        self.s_axil_arready.next = self.axil_cdc.s_arready.val();
        self.axil_cdc.s_araddr.next = self.s_axil_araddr.val();
        self.s_axil_rvalid.next = self.axil_cdc.s_rvalid.val();
        self.axil_cdc.s_rready.next = self.s_axil_rready.val();
        self.s_axil_rdata.next = self.axil_cdc.s_rdata.val();
        self.s_axil_rresp.next = self.axil_cdc.s_rresp.val();
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
        self.m_axib_arvalid.next = self.dma.m_axi_arvalid.val();
        self.dma.m_axi_arready.next = self.m_axib_arready.val();
        self.m_axib_araddr.next = self.dma.m_axi_araddr.val();
        self.m_axib_arlen.next = self.dma.m_axi_arlen.val();
        self.dma.m_axi_rvalid.next = self.m_axib_rvalid.val();
        self.m_axib_rready.next = self.dma.m_axi_rready.val();
        self.dma.m_axi_rdata.next = self.m_axib_rdata.val();
        self.dma.m_axi_rlast.next = self.m_axib_rlast.val();
        self.dma.m_axi_rresp.next = self.m_axib_rresp.val();
        self.m_axib_awvalid.next = self.dma.m_axi_awvalid.val();
        self.dma.m_axi_awready.next = self.m_axib_awready.val();
        self.m_axib_awaddr.next = self.dma.m_axi_awaddr.val();
        self.m_axib_awlen.next = self.dma.m_axi_awlen.val();
        self.m_axib_wvalid.next = self.dma.m_axi_wvalid.val();
        self.dma.m_axi_wready.next = self.m_axib_wready.val();
        self.m_axib_wdata.next = self.dma.m_axi_wdata.val();
        self.m_axib_wstrb.next = self.dma.m_axi_wstrb.val();
        self.m_axib_wlast.next = self.dma.m_axi_wlast.val();
        self.m_axib_wuser.next = self.dma.m_axi_wuser.val();
        self.dma.m_axi_bvalid.next = self.m_axib_bvalid.val();
        self.m_axib_bready.next = self.dma.m_axi_bready.val();
        self.dma.m_axi_bresp.next = self.m_axib_bresp.val();
        // Ethernet: the core's MAC ports straight onto the CMAC's AXIS (same clock); the CMAC's RX has no
        // ready (the core's RX never holds it back: RX Parse drops and counts what it cannot take)
        self.cmac_tx_tdata.next = self.core.m_axis.tdata.val();
        self.cmac_tx_tkeep.next = self.core.m_axis.tkeep.val();
        self.cmac_tx_tlast.next = self.core.m_axis.tlast.val();
        self.cmac_tx_tvalid.next = self.core.m_axis.tvalid.val();
        self.core.m_axis.tready.next = self.cmac_tx_tready.val();
        self.core.s_axis.tdata.next = self.cmac_rx_tdata.val();
        self.core.s_axis.tkeep.next = self.cmac_rx_tkeep.val();
        self.core.s_axis.tlast.next = self.cmac_rx_tlast.val();
        self.core.s_axis.tvalid.next = self.cmac_rx_tvalid.val();
        self.core.s_axis_tuser.next = self.cmac_rx_tuser.val();
        // bring-up and status
        self.link.enable.next = self.regs.link_enable.val();
        self.link.fec.next = self.regs.link_fec.val();
        self.cmac_ctl_rx_enable.next = self.link.ctl_rx_enable.val();
        self.cmac_ctl_tx_enable.next = self.link.ctl_tx_enable.val();
        self.cmac_ctl_tx_send_rfi.next = self.link.ctl_tx_send_rfi.val();
        self.cmac_ctl_rsfec.next = self.link.ctl_rsfec.val();
        self.cmac_gt_loopback.next = self.k_noloop.val();
        if self.regs.link_loopback.val() {
            self.cmac_gt_loopback.next = self.k_pma_loop.val();
        }
        self.link.stat_rx_aligned.next = self.cmac_stat_rx_aligned.val();
        self.link.stat_rx_bad_fcs.next = self.cmac_stat_rx_bad_fcs.val();
        self.link.tx_unfout.next = self.cmac_tx_unfout.val();
        self.link.tx_tvalid.next = self.core.m_axis.tvalid.val();
        self.link.tx_tready.next = self.cmac_tx_tready.val();
        self.link.tx_tlast.next = self.core.m_axis.tlast.val();
        self.regs.link_up.next = self.link.link_up.val();
        self.regs.rx_aligned.next = self.cmac_stat_rx_aligned.val();
        self.regs.fec_lock.next = self.cmac_stat_rx_rsfec_am_lock.val();
        self.modprsl_sync.clock.next = self.clock.val();
        self.modprsl_sync.d.next = self.qsfp0_modprsl.val().into();
        self.regs.qsfp_modprsl.next = self.modprsl_sync.q.val().any();
        self.intl_sync.clock.next = self.clock.val();
        self.intl_sync.d.next = self.qsfp0_intl.val().into();
        self.regs.qsfp_intl.next = self.intl_sync.q.val().any();
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
            | (bit_cast::<3, 1>(self.pcie_link_up.val().into()) << 1)
            | (bit_cast::<3, 1>(self.beat.q.val().get_bit(27).into()) << 2);
    }
}

/// The shell's Verilog (module `top`): what the board-level simulation verilates.
pub fn verilog() -> String {
    rtl::verilog_of(&mut BoardShell::default())
}
