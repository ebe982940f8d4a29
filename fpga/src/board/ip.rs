//! The vendor IP of the U250 board top, as rust-hdl black boxes (`Verilog::Wrapper`): the glue code inside
//! each wrapper instantiates the IP with its real port names and ties off every input the board does not use;
//! the `cores` text is a port-exact stub of each IP for the gates here (Verilator lint, Yosys), removed for
//! Vivado (`fpga::for_vivado`), which brings the real IP from `create_ip` (`vivado::ip_tcl`).
//!
//! Port names and widths are checked against the product guides' port tables where those tables could be
//! read (cited at each stub below: PG203 v3.1 for `cmac_usplus`, PG302 v5.0 for `qdma`); the ports whose
//! table could not be found, and the tie-offs, come from the open designs that instantiate these IPs in the
//! same configuration, and say so. A Vivado `generate_target instantiation_template` of the two IPs is the
//! check to make on a Vivado machine (`docs/board-u250.md`). The open designs:
//!
//! * `cmac_usplus` 3.1, CAUI-4, AXIS, RS-FEC, no AXI4-Lite, no flow control: corundum/corundum @77bb4b9d
//!   `fpga/mqnic/AU250/fpga_100g/rtl/fpga.v` lines 1006-1261 (every port with the width of the IP's
//!   template) and `ip/cmac_usplus_0.tcl`; Xilinx/open-nic-shell @940907fc
//!   `src/cmac_subsystem/cmac_subsystem_cmac_wrapper.sv` (`rx_clk` from `gt_txusrclk2`).
//! * `qdma` 4.0/5.0, Gen3 x16, 512-bit, AXI4-Lite master BAR, AXI-MM bridge slave (`s_axib_*`): Xilinx/
//!   open-nic-shell @940907fc `src/qdma_subsystem/qdma_subsystem_qdma_wrapper.v` lines 278-460 (ports and
//!   tie-offs of the streaming side); Xilinx/RecoNIC @c8b78493 `patches/open-nic-shell/rdma_onic.patch`
//!   (the `s_axib_*` ports, user widths 12 and 64); a Vivado QDMA instantiation template (`.veo`, widths).
//!
//! Only the ports the board uses are stubbed and connected; the IPs' other outputs (statistics, stream and
//! bypass outputs the board does not use) are left open, which Verilog allows.

use rust_hdl::prelude::*;

/// The clock buffers: the PCIe reference clock through `IBUFDS_GTE4` (`O` to the QDMA's `sys_clk_gt`,
/// `ODIV2` to its `sys_clk`), and the board's free-running 300 MHz through `IBUFDS` and `BUFGCE_DIV` (/3) as
/// the CMAC's 100 MHz `init_clk`.
#[derive(LogicBlock, Default)]
pub struct ClockBuffers {
    pub pcie_refclk_p: Signal<In, Bit>,
    pub pcie_refclk_n: Signal<In, Bit>,
    pub sys_clk: Signal<Out, Clock>,
    pub sys_clk_gt: Signal<Out, Clock>,
    pub clk_300_p: Signal<In, Bit>,
    pub clk_300_n: Signal<In, Bit>,
    pub init_clk: Signal<Out, Clock>,
}

impl Logic for ClockBuffers {
    fn update(&mut self) {}

    fn connect(&mut self) {
        self.sys_clk.connect();
        self.sys_clk_gt.connect();
        self.init_clk.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Wrapper(Wrapper {
            code: r#"
wire clk_300_ibuf;
IBUFDS_GTE4 #(.REFCLK_HROW_CK_SEL(2'b00)) pcie_refclk_buf (
    .I(pcie_refclk_p), .IB(pcie_refclk_n), .CEB(1'b0), .O(sys_clk_gt), .ODIV2(sys_clk));
IBUFDS clk_300_buf (.I(clk_300_p), .IB(clk_300_n), .O(clk_300_ibuf));
BUFGCE_DIV #(.BUFGCE_DIVIDE(3)) init_clk_buf (.I(clk_300_ibuf), .CE(1'b1), .CLR(1'b0), .O(init_clk));
"#
            .into(),
            cores: r#"
(* blackbox *)
module IBUFDS_GTE4 #(parameter [1:0] REFCLK_HROW_CK_SEL = 2'b00) (input I, input IB, input CEB, output O, output ODIV2);
    assign O = I;
    assign ODIV2 = I;
endmodule
(* blackbox *)
module IBUFDS (input I, input IB, output O);
    assign O = I;
endmodule
(* blackbox *)
module BUFGCE_DIV #(parameter integer BUFGCE_DIVIDE = 1) (input I, input CE, input CLR, output O);
    assign O = I;
endmodule
"#
            .into(),
        })
    }
}

/// `cmac_usplus` (instance of the IP named `cmac0` by `vivado::ip_tcl`): QSFP0's four lanes, the 512-bit AXIS
/// user interface in `gt_txusrclk2` (the core clock, `clk_core` here; `rx_clk` is tied to it), the
/// bring-up controls and the status the board uses.
///
/// Against PG203 v3.1 (UltraScale+ Devices Integrated 100G Ethernet Subsystem), Port Descriptions:
/// * "CORE XCI Top-Level Port List" (Table 1 of that section): `sys_reset`, `gt_ref_clk_p`/`_n`, `init_clk`
///   and `gt_loopback_in` (12 bits in CAUI-4 mode) match; the part of the table that could be read here ends
///   before the GT serial lanes and the clock and reset outputs;
/// * the RS-FEC control and status ports table ("Common Ports"): `ctl_rx_rsfec_enable`,
///   `ctl_rx_rsfec_enable_correction`, `ctl_rx_rsfec_enable_indication`, `ctl_tx_rsfec_enable`,
///   `ctl_rsfec_ieee_error_indication_mode` and `stat_rx_rsfec_am_lock0..3`, one bit each, match;
/// * "Without AXI4-Lite Interface" (the bring-up sequence): `ctl_rx_enable`, `ctl_tx_send_rfi`,
///   `ctl_tx_enable` and RX aligned, as `CmacCtl` drives them.
///
/// Not found in the guide here, so from Corundum's instantiation only: the AXIS ports (`tx_axis_*`,
/// `rx_axis_*`, `tx_unfout`, `tx_preamblein`), `stat_rx_aligned` and `stat_rx_bad_fcs` (3 bits), the GT lanes,
/// `gt_txusrclk2`, `rx_clk`, `usr_rx_reset`/`usr_tx_reset`, `core_*_reset`, `gtwiz_reset_*`, the other `ctl_*`
/// inputs and `drp_*`.
#[derive(LogicBlock, Default)]
pub struct Cmac {
    pub gt_ref_clk_p: Signal<In, Bit>,
    pub gt_ref_clk_n: Signal<In, Bit>,
    pub gt_rxp_in: Signal<In, Bits<4>>,
    pub gt_rxn_in: Signal<In, Bits<4>>,
    pub gt_txp_out: Signal<Out, Bits<4>>,
    pub gt_txn_out: Signal<Out, Bits<4>>,
    pub init_clk: Signal<In, Clock>,
    pub sys_reset: Signal<In, Bit>,
    pub clk_core: Signal<Out, Clock>,
    pub usr_tx_reset: Signal<Out, Bit>,
    pub usr_rx_reset: Signal<Out, Bit>,
    pub tx_tdata: Signal<In, Bits<512>>,
    pub tx_tkeep: Signal<In, Bits<64>>,
    pub tx_tlast: Signal<In, Bit>,
    pub tx_tvalid: Signal<In, Bit>,
    pub tx_tready: Signal<Out, Bit>,
    pub rx_tdata: Signal<Out, Bits<512>>,
    pub rx_tkeep: Signal<Out, Bits<64>>,
    pub rx_tlast: Signal<Out, Bit>,
    pub rx_tvalid: Signal<Out, Bit>,
    pub rx_tuser: Signal<Out, Bit>,
    pub ctl_rx_enable: Signal<In, Bit>,
    pub ctl_tx_enable: Signal<In, Bit>,
    pub ctl_tx_send_rfi: Signal<In, Bit>,
    pub ctl_rsfec: Signal<In, Bit>,
    /// `gt_loopback_in`: 3 bits per lane (UG578, the GTY `LOOPBACK` port: 3'b010 near-end PMA loopback).
    pub gt_loopback: Signal<In, Bits<12>>,
    pub stat_rx_aligned: Signal<Out, Bit>,
    pub stat_rx_bad_fcs: Signal<Out, Bits<3>>,
    pub stat_rx_rsfec_am_lock: Signal<Out, Bits<4>>,
    pub tx_unfout: Signal<Out, Bit>,
}

impl Logic for Cmac {
    fn update(&mut self) {}

    fn connect(&mut self) {
        self.gt_txp_out.connect();
        self.gt_txn_out.connect();
        self.clk_core.connect();
        self.usr_tx_reset.connect();
        self.usr_rx_reset.connect();
        self.tx_tready.connect();
        self.rx_tdata.connect();
        self.rx_tkeep.connect();
        self.rx_tlast.connect();
        self.rx_tvalid.connect();
        self.rx_tuser.connect();
        self.stat_rx_aligned.connect();
        self.stat_rx_bad_fcs.connect();
        self.stat_rx_rsfec_am_lock.connect();
        self.tx_unfout.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Wrapper(Wrapper {
            code: r#"
wire txusrclk2;
assign clk_core = txusrclk2;
cmac0 cmac_inst (
    .gt_rxp_in(gt_rxp_in), .gt_rxn_in(gt_rxn_in), .gt_txp_out(gt_txp_out), .gt_txn_out(gt_txn_out),
    .gt_ref_clk_p(gt_ref_clk_p), .gt_ref_clk_n(gt_ref_clk_n),
    .gt_txusrclk2(txusrclk2), .rx_clk(txusrclk2), .gt_loopback_in(gt_loopback),
    .gtwiz_reset_tx_datapath(1'b0), .gtwiz_reset_rx_datapath(1'b0),
    .sys_reset(sys_reset), .init_clk(init_clk), .core_rx_reset(1'b0), .core_tx_reset(1'b0),
    .core_drp_reset(1'b0), .usr_rx_reset(usr_rx_reset), .usr_tx_reset(usr_tx_reset),
    .tx_axis_tready(tx_tready), .tx_axis_tvalid(tx_tvalid), .tx_axis_tdata(tx_tdata),
    .tx_axis_tlast(tx_tlast), .tx_axis_tkeep(tx_tkeep), .tx_axis_tuser(1'b0),
    .tx_unfout(tx_unfout), .tx_preamblein(56'd0),
    .rx_axis_tvalid(rx_tvalid), .rx_axis_tdata(rx_tdata), .rx_axis_tlast(rx_tlast),
    .rx_axis_tkeep(rx_tkeep), .rx_axis_tuser(rx_tuser),
    .ctl_rx_enable(ctl_rx_enable), .ctl_rx_force_resync(1'b0), .ctl_rx_test_pattern(1'b0),
    .ctl_tx_enable(ctl_tx_enable), .ctl_tx_test_pattern(1'b0), .ctl_tx_send_idle(1'b0),
    .ctl_tx_send_rfi(ctl_tx_send_rfi), .ctl_tx_send_lfi(1'b0),
    .ctl_rsfec_ieee_error_indication_mode(1'b0), .ctl_rx_rsfec_enable(ctl_rsfec),
    .ctl_rx_rsfec_enable_correction(ctl_rsfec), .ctl_rx_rsfec_enable_indication(ctl_rsfec),
    .ctl_tx_rsfec_enable(ctl_rsfec),
    .stat_rx_aligned(stat_rx_aligned), .stat_rx_bad_fcs(stat_rx_bad_fcs),
    .stat_rx_rsfec_am_lock0(stat_rx_rsfec_am_lock[0]), .stat_rx_rsfec_am_lock1(stat_rx_rsfec_am_lock[1]),
    .stat_rx_rsfec_am_lock2(stat_rx_rsfec_am_lock[2]), .stat_rx_rsfec_am_lock3(stat_rx_rsfec_am_lock[3]),
    .drp_clk(1'b0), .drp_addr(10'd0), .drp_di(16'd0), .drp_en(1'b0), .drp_we(1'b0)
);
"#
            .into(),
            cores: r#"
(* blackbox *)
module cmac0 (
    input [3:0] gt_rxp_in, input [3:0] gt_rxn_in, output [3:0] gt_txp_out, output [3:0] gt_txn_out,
    input gt_ref_clk_p, input gt_ref_clk_n, output gt_txusrclk2, input rx_clk, input [11:0] gt_loopback_in,
    input gtwiz_reset_tx_datapath, input gtwiz_reset_rx_datapath,
    input sys_reset, input init_clk, input core_rx_reset, input core_tx_reset, input core_drp_reset,
    output usr_rx_reset, output usr_tx_reset,
    output tx_axis_tready, input tx_axis_tvalid, input [511:0] tx_axis_tdata, input tx_axis_tlast,
    input [63:0] tx_axis_tkeep, input tx_axis_tuser, output tx_unfout, input [55:0] tx_preamblein,
    output rx_axis_tvalid, output [511:0] rx_axis_tdata, output rx_axis_tlast, output [63:0] rx_axis_tkeep,
    output rx_axis_tuser,
    input ctl_rx_enable, input ctl_rx_force_resync, input ctl_rx_test_pattern, input ctl_tx_enable,
    input ctl_tx_test_pattern, input ctl_tx_send_idle, input ctl_tx_send_rfi, input ctl_tx_send_lfi,
    input ctl_rsfec_ieee_error_indication_mode, input ctl_rx_rsfec_enable, input ctl_rx_rsfec_enable_correction,
    input ctl_rx_rsfec_enable_indication, input ctl_tx_rsfec_enable,
    output stat_rx_aligned, output [2:0] stat_rx_bad_fcs,
    output stat_rx_rsfec_am_lock0, output stat_rx_rsfec_am_lock1, output stat_rx_rsfec_am_lock2,
    output stat_rx_rsfec_am_lock3,
    input drp_clk, input [9:0] drp_addr, input [15:0] drp_di, input drp_en, input drp_we
);
    assign gt_txp_out = 4'd0;
    assign gt_txn_out = 4'd0;
    assign gt_txusrclk2 = init_clk;
    assign usr_rx_reset = sys_reset;
    assign usr_tx_reset = sys_reset;
    assign tx_axis_tready = 1'b0;
    assign tx_unfout = 1'b0;
    assign rx_axis_tvalid = 1'b0;
    assign rx_axis_tdata = 512'd0;
    assign rx_axis_tlast = 1'b0;
    assign rx_axis_tkeep = 64'd0;
    assign rx_axis_tuser = 1'b0;
    assign stat_rx_aligned = 1'b0;
    assign stat_rx_bad_fcs = 3'd0;
    assign stat_rx_rsfec_am_lock0 = 1'b0;
    assign stat_rx_rsfec_am_lock1 = 1'b0;
    assign stat_rx_rsfec_am_lock2 = 1'b0;
    assign stat_rx_rsfec_am_lock3 = 1'b0;
endmodule
"#
            .into(),
        })
    }
}

/// `qdma` (instance named `qdma0`): the PCIe Gen3 x16 endpoint, its user clock `axi_aclk` (250 MHz) and
/// reset, the AXI4-Lite master of the register BAR (`m_axil_*`, 32-bit address, of which the board decodes
/// 21 bits), and the AXI-MM bridge slave (`s_axib_*`) into host memory: ID 0, 64-byte beats, INCR, function
/// 0 in the user bits, byte parity on `s_axib_wuser`. The DMA engine's streaming, bypass, queue-status and
/// interrupt inputs are tied off as open-nic-shell ties them (readies of status outputs high, valids low).
///
/// Against PG302 v5.0 (QDMA Subsystem for PCI Express):
/// * "AXI Bridge Slave Ports", Table 1 (write address) and Table 2 (write data): `s_axib_awid`
///   (C_S_AXI_ID_WIDTH), `awaddr`, `awregion[3:0]`, `awlen[7:0]`, `awsize[2:0]`, `awburst[1:0]` (INCR only),
///   `awvalid`/`awready`, `wdata`, `wstrb` and `wuser` (data width / 8: odd parity per byte), `wlast`,
///   `wvalid`/`wready` match. `s_axib_awuser` differs: the table gives `[7:0]` (the function number), while
///   the QDMA instantiations that build in Vivado (open-nic-shell, RecoNIC) connect 12 bits; the stub keeps
///   12, and the port is tied to 0, which either width carries. The response and read tables of PG302 could
///   not be read here: `s_axib_b*`, `s_axib_ar*` (`aruser` as `awuser`) and `s_axib_r*` follow the same
///   section of the Versal QDMA guide (PG344 1.0, "AXI Bridge Slave Ports", the same names) and the open
///   designs.
/// * "AXI4-Lite Master Ports", Tables 1 and 2: `m_axil_awaddr[31:0]`, `wdata[31:0]`, `wstrb[3:0]`,
///   `bresp[1:0]`, `araddr[31:0]`, `rdata[31:0]`, `rresp[1:0]` and the handshakes match; the IP's
///   `m_axil_awprot`, `awuser[54:0]`, `arprot` and `aruser[54:0]` outputs are left open.
/// * The clock, reset and PCIe lane ports: PG302's table could not be read here; PG344's "QDMA Global Port
///   Descriptions" gives the same names (`sys_clk` from the reference buffer's `ODIV2`, `sys_clk_gt` from its
///   `O`, `sys_rst_n`, `pci_exp_*` of the link width, `user_lnk_up`, `axi_aclk`, `axi_aresetn`,
///   `soft_reset_n`), as wired here.
/// * The DMA engine's streaming, bypass, status and interrupt inputs tied off below: from open-nic-shell only.
#[derive(LogicBlock, Default)]
pub struct Qdma {
    pub sys_clk: Signal<In, Clock>,
    pub sys_clk_gt: Signal<In, Clock>,
    pub sys_rst_n: Signal<In, Bit>,
    pub pci_exp_rxp: Signal<In, Bits<16>>,
    pub pci_exp_rxn: Signal<In, Bits<16>>,
    pub pci_exp_txp: Signal<Out, Bits<16>>,
    pub pci_exp_txn: Signal<Out, Bits<16>>,
    pub user_lnk_up: Signal<Out, Bit>,
    pub axi_aclk: Signal<Out, Clock>,
    pub axi_aresetn: Signal<Out, Bit>,
    pub m_axil_awaddr: Signal<Out, Bits<21>>,
    pub m_axil_awvalid: Signal<Out, Bit>,
    pub m_axil_awready: Signal<In, Bit>,
    pub m_axil_wdata: Signal<Out, Bits<32>>,
    pub m_axil_wstrb: Signal<Out, Bits<4>>,
    pub m_axil_wvalid: Signal<Out, Bit>,
    pub m_axil_wready: Signal<In, Bit>,
    pub m_axil_bresp: Signal<In, Bits<2>>,
    pub m_axil_bvalid: Signal<In, Bit>,
    pub m_axil_bready: Signal<Out, Bit>,
    pub m_axil_araddr: Signal<Out, Bits<21>>,
    pub m_axil_arvalid: Signal<Out, Bit>,
    pub m_axil_arready: Signal<In, Bit>,
    pub m_axil_rdata: Signal<In, Bits<32>>,
    pub m_axil_rresp: Signal<In, Bits<2>>,
    pub m_axil_rvalid: Signal<In, Bit>,
    pub m_axil_rready: Signal<Out, Bit>,
    pub s_axib_awaddr: Signal<In, Bits<64>>,
    pub s_axib_awlen: Signal<In, Bits<8>>,
    pub s_axib_awvalid: Signal<In, Bit>,
    pub s_axib_awready: Signal<Out, Bit>,
    pub s_axib_wdata: Signal<In, Bits<512>>,
    pub s_axib_wstrb: Signal<In, Bits<64>>,
    pub s_axib_wlast: Signal<In, Bit>,
    pub s_axib_wuser: Signal<In, Bits<64>>,
    pub s_axib_wvalid: Signal<In, Bit>,
    pub s_axib_wready: Signal<Out, Bit>,
    pub s_axib_bresp: Signal<Out, Bits<2>>,
    pub s_axib_bvalid: Signal<Out, Bit>,
    pub s_axib_bready: Signal<In, Bit>,
    pub s_axib_araddr: Signal<In, Bits<64>>,
    pub s_axib_arlen: Signal<In, Bits<8>>,
    pub s_axib_arvalid: Signal<In, Bit>,
    pub s_axib_arready: Signal<Out, Bit>,
    pub s_axib_rdata: Signal<Out, Bits<512>>,
    pub s_axib_rresp: Signal<Out, Bits<2>>,
    pub s_axib_rlast: Signal<Out, Bit>,
    pub s_axib_rvalid: Signal<Out, Bit>,
    pub s_axib_rready: Signal<In, Bit>,
}

impl Logic for Qdma {
    fn update(&mut self) {}

    fn connect(&mut self) {
        self.pci_exp_txp.connect();
        self.pci_exp_txn.connect();
        self.user_lnk_up.connect();
        self.axi_aclk.connect();
        self.axi_aresetn.connect();
        self.m_axil_awaddr.connect();
        self.m_axil_awvalid.connect();
        self.m_axil_wdata.connect();
        self.m_axil_wstrb.connect();
        self.m_axil_wvalid.connect();
        self.m_axil_bready.connect();
        self.m_axil_araddr.connect();
        self.m_axil_arvalid.connect();
        self.m_axil_rready.connect();
        self.s_axib_awready.connect();
        self.s_axib_wready.connect();
        self.s_axib_bresp.connect();
        self.s_axib_bvalid.connect();
        self.s_axib_arready.connect();
        self.s_axib_rdata.connect();
        self.s_axib_rresp.connect();
        self.s_axib_rlast.connect();
        self.s_axib_rvalid.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Wrapper(Wrapper {
            code: r#"
wire [31:0] axil_awaddr;
wire [31:0] axil_araddr;
assign m_axil_awaddr = axil_awaddr[20:0];
assign m_axil_araddr = axil_araddr[20:0];
qdma0 qdma_inst (
    .sys_clk(sys_clk), .sys_clk_gt(sys_clk_gt), .sys_rst_n(sys_rst_n),
    .pci_exp_rxp(pci_exp_rxp), .pci_exp_rxn(pci_exp_rxn), .pci_exp_txp(pci_exp_txp), .pci_exp_txn(pci_exp_txn),
    .user_lnk_up(user_lnk_up), .axi_aclk(axi_aclk), .axi_aresetn(axi_aresetn), .soft_reset_n(1'b1),
    .m_axil_awaddr(axil_awaddr), .m_axil_awvalid(m_axil_awvalid), .m_axil_awready(m_axil_awready),
    .m_axil_wdata(m_axil_wdata), .m_axil_wstrb(m_axil_wstrb), .m_axil_wvalid(m_axil_wvalid),
    .m_axil_wready(m_axil_wready), .m_axil_bresp(m_axil_bresp), .m_axil_bvalid(m_axil_bvalid),
    .m_axil_bready(m_axil_bready), .m_axil_araddr(axil_araddr), .m_axil_arvalid(m_axil_arvalid),
    .m_axil_arready(m_axil_arready), .m_axil_rdata(m_axil_rdata), .m_axil_rresp(m_axil_rresp),
    .m_axil_rvalid(m_axil_rvalid), .m_axil_rready(m_axil_rready),
    .s_axib_awid(4'd0), .s_axib_awaddr(s_axib_awaddr), .s_axib_awregion(4'd0), .s_axib_awlen(s_axib_awlen),
    .s_axib_awsize(3'd6), .s_axib_awburst(2'b01), .s_axib_awuser(12'd0), .s_axib_awvalid(s_axib_awvalid),
    .s_axib_awready(s_axib_awready),
    .s_axib_wdata(s_axib_wdata), .s_axib_wstrb(s_axib_wstrb), .s_axib_wuser(s_axib_wuser),
    .s_axib_wlast(s_axib_wlast), .s_axib_wvalid(s_axib_wvalid), .s_axib_wready(s_axib_wready),
    .s_axib_bresp(s_axib_bresp), .s_axib_bvalid(s_axib_bvalid), .s_axib_bready(s_axib_bready),
    .s_axib_arid(4'd0), .s_axib_araddr(s_axib_araddr), .s_axib_arregion(4'd0), .s_axib_arlen(s_axib_arlen),
    .s_axib_arsize(3'd6), .s_axib_arburst(2'b01), .s_axib_aruser(12'd0), .s_axib_arvalid(s_axib_arvalid),
    .s_axib_arready(s_axib_arready),
    .s_axib_rdata(s_axib_rdata), .s_axib_rresp(s_axib_rresp), .s_axib_rlast(s_axib_rlast),
    .s_axib_rvalid(s_axib_rvalid), .s_axib_rready(s_axib_rready),
    .m_axis_h2c_tready(1'b1), .s_axis_c2h_tvalid(1'b0), .s_axis_c2h_tdata(512'd0), .s_axis_c2h_tlast(1'b0),
    .s_axis_c2h_cmpt_tvalid(1'b0), .s_axis_c2h_cmpt_tdata(512'd0),
    .h2c_byp_out_rdy(1'b1), .c2h_byp_out_rdy(1'b1), .h2c_byp_in_st_vld(1'b0), .c2h_byp_in_st_csh_vld(1'b0),
    .tm_dsc_sts_rdy(1'b1), .qsts_out_rdy(1'b1), .dsc_crdt_in_vld(1'b0), .usr_irq_in_vld(1'b0)
);
"#
            .into(),
            cores: r#"
(* blackbox *)
module qdma0 (
    input sys_clk, input sys_clk_gt, input sys_rst_n,
    input [15:0] pci_exp_rxp, input [15:0] pci_exp_rxn, output [15:0] pci_exp_txp, output [15:0] pci_exp_txn,
    output user_lnk_up, output axi_aclk, output axi_aresetn, input soft_reset_n,
    output [31:0] m_axil_awaddr, output m_axil_awvalid, input m_axil_awready,
    output [31:0] m_axil_wdata, output [3:0] m_axil_wstrb, output m_axil_wvalid, input m_axil_wready,
    input [1:0] m_axil_bresp, input m_axil_bvalid, output m_axil_bready,
    output [31:0] m_axil_araddr, output m_axil_arvalid, input m_axil_arready,
    input [31:0] m_axil_rdata, input [1:0] m_axil_rresp, input m_axil_rvalid, output m_axil_rready,
    input [3:0] s_axib_awid, input [63:0] s_axib_awaddr, input [3:0] s_axib_awregion, input [7:0] s_axib_awlen,
    input [2:0] s_axib_awsize, input [1:0] s_axib_awburst, input [11:0] s_axib_awuser, input s_axib_awvalid,
    output s_axib_awready,
    input [511:0] s_axib_wdata, input [63:0] s_axib_wstrb, input [63:0] s_axib_wuser, input s_axib_wlast,
    input s_axib_wvalid, output s_axib_wready,
    output [1:0] s_axib_bresp, output s_axib_bvalid, input s_axib_bready,
    input [3:0] s_axib_arid, input [63:0] s_axib_araddr, input [3:0] s_axib_arregion, input [7:0] s_axib_arlen,
    input [2:0] s_axib_arsize, input [1:0] s_axib_arburst, input [11:0] s_axib_aruser, input s_axib_arvalid,
    output s_axib_arready,
    output [511:0] s_axib_rdata, output [1:0] s_axib_rresp, output s_axib_rlast, output s_axib_rvalid,
    input s_axib_rready,
    input m_axis_h2c_tready, input s_axis_c2h_tvalid, input [511:0] s_axis_c2h_tdata, input s_axis_c2h_tlast,
    input s_axis_c2h_cmpt_tvalid, input [511:0] s_axis_c2h_cmpt_tdata,
    input h2c_byp_out_rdy, input c2h_byp_out_rdy, input h2c_byp_in_st_vld, input c2h_byp_in_st_csh_vld,
    input tm_dsc_sts_rdy, input qsts_out_rdy, input dsc_crdt_in_vld, input usr_irq_in_vld
);
    assign pci_exp_txp = 16'd0;
    assign pci_exp_txn = 16'd0;
    assign user_lnk_up = 1'b0;
    assign axi_aclk = sys_clk;
    assign axi_aresetn = sys_rst_n;
    assign m_axil_awaddr = 32'd0;
    assign m_axil_awvalid = 1'b0;
    assign m_axil_wdata = 32'd0;
    assign m_axil_wstrb = 4'd0;
    assign m_axil_wvalid = 1'b0;
    assign m_axil_bready = 1'b0;
    assign m_axil_araddr = 32'd0;
    assign m_axil_arvalid = 1'b0;
    assign m_axil_rready = 1'b0;
    assign s_axib_awready = 1'b0;
    assign s_axib_wready = 1'b0;
    assign s_axib_bresp = 2'd0;
    assign s_axib_bvalid = 1'b0;
    assign s_axib_arready = 1'b0;
    assign s_axib_rdata = 512'd0;
    assign s_axib_rresp = 2'd0;
    assign s_axib_rlast = 1'b0;
    assign s_axib_rvalid = 1'b0;
endmodule
"#
            .into(),
        })
    }
}
