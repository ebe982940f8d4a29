//! The RNIC top: the blocks wired together behind the host interface of `docs/host-interface.md`, both
//! data paths end to end (requests out and their responses back; requests in and their ACKs/responses out):
//!
//! ```text
//!  AXI4-Lite ─ Register/Doorbell slave ─┬─ command dispatcher ─ Key Cache copies, QP contexts, SQ/RQ rings, CQs
//!                                       └─ SQ doorbells ─ Send Queue Ring / WQE Prefetch ─┐
//!  DMA read port ─ DMA read arbiter ─┬───────────────────────────────────────────────────┘
//!                                    └─ Gather Path ◄─ TX request arbiter ◄─┬─ Requester ◄─ WQE Check ◄─ WQE slots
//!                                                                           └─ Responder (ACK/NAK, READ responses)
//!  MAC TX ◄─ TX frame mux ◄─┬─ TX Frame Buffer ◄─ TX Packet Build + ICRC append ◄─ headers, Gather payload
//!                           └─ ARP responder ◄─┐
//!  MAC RX ─────────────────────────────────────┴─ RX Parse ─┬─ responses: Completer ─ Scatter Path, CQE Generation
//!                                                           └─ requests: Responder ─ Scatter Path, CQE Generation
//!  DMA write port ◄─ DMA write arbiters ◄─ Scatter Paths, CQE Generation
//! ```
//!
//! Responses (ACK, READ RESPONSE, ATOMIC ACKNOWLEDGE) go to the Completer, which scatters read data through
//! its Scatter Path, completes WQEs through CQE Generation, drives go-back-N (rewinds to WQE Check and the
//! Send Queue Ring) and gives WQE Check each QP's unacknowledged-PSN window. Requests go to the Responder
//! (its own QP Context, PSN Check and Key Cache copy, the Atomic Unit; receive WQEs fetched from the RQ
//! rings), whose ACKs and read responses share TX Packet Build and the Gather Path with the Requester (TX
//! request arbiter), whose writes go through a second Scatter Path, and whose receive completions share CQE
//! Generation with the Completer. RX Parse's payload reaches the two through a register slice
//! ([`AxisSlice`]), so the Scatter Paths' ready (from the DMA write arbiters' grants) ends there instead of
//! running on into RX Parse.
//! RX Parse's headers go through a hold register ([`HoldReg`]) and are routed on their way in (response
//! opcodes to the Completer, requests to the Responder). A header is handed on once the payloads of the
//! headers before it have gone, except that a request may go to the Responder while the payload of the
//! request before it still flows (its payload mover; the Responder checks the next header meanwhile): the
//! payload stream holds the payloads of at most the last two headers taken, in order, both the Responder's
//! when there are two. The Completer's and the Responder's completions share CQE Generation round robin.
//! `CAPS`: RC, atomics, masked atomics, inline WQEs. The counter window (`COUNTER[i]`) shows RX Parse's nine
//! counters, the ARP responder's, the Responder's twelve and the Completer's nine (order in
//! `docs/host-interface.md`).

use rust_hdl::prelude::*;

use crate::wire::arp::ArpResponder;
use crate::wire::icmp::IcmpEcho;
use crate::wire::ndp::NdResponder;
use crate::common::axis::{AxisSink, AxisSource};
use crate::common::ports::{DmaRead, DmaWrite, ScatterCmd, TxPacket};
use crate::transport::completer::Completer;
use crate::common::consts::k;
use crate::common::axis_slice::{AxisSlice, HoldReg};
use crate::host::cqe_gen::CqeGen;
use crate::host::csr::Csr;
use crate::host::dma_arb::DmaReadArb;
use crate::host::dma_warb::DmaWriteArb;
use crate::host::gather::GatherPath;
use crate::host::req_front::{rd_atomic_limit, ReqFront};
use crate::transport::requester::Requester;
use crate::transport::responder::Responder;
use crate::wire::rx_parse::{RxHeader, RxParse};
use crate::host::scatter::ScatterPath;
use crate::host::sq_ring::SqRing;
use crate::wire::tx_build::TxPacketBuild;
use crate::wire::tx_arb::TxReqArb;
use crate::wire::tx_buf::TxFrameBuffer;
use crate::wire::tx_mux::TxFrameMux;
use crate::wire::vlan_insert::VlanInsert;
use crate::wire::vlan_strip::VlanStrip;
use rnic_driver::host::*;
use testbench::wire::opcode::{RC_ATOMIC_ACKNOWLEDGE, RC_RDMA_READ_RESPONSE_FIRST};

/// QPs and MR entries of this build.
pub const LOG2_QPS: u32 = 8;
pub const LOG2_MRS: u32 = 10;
pub const LOG2_CQS: u32 = 8;

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum CmdState {
    Idle,
    Exec,
    Finish,
}

/// A received header on its way from RX Parse to the Completer or the Responder (see `rx_hold`), with its
/// route: `resp` a response opcode (to the Completer), `has_pay` a payload follows.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct RxHdrWord {
    pub hdr: RxHeader,
    pub ext_words: Bits<4>,
    pub pay_len: Bits<13>,
    pub resp: Bit,
    pub has_pay: Bit,
}

#[derive(LogicBlock)]
pub struct Rnic {
    pub clock: Signal<In, Clock>,
    // register slave (AXI4-Lite)
    pub awvalid: Signal<In, Bit>,
    pub awready: Signal<Out, Bit>,
    pub awaddr: Signal<In, Bits<20>>,
    pub wvalid: Signal<In, Bit>,
    pub wready: Signal<Out, Bit>,
    pub wdata: Signal<In, Bits<32>>,
    pub wstrb: Signal<In, Bits<4>>,
    pub bvalid: Signal<Out, Bit>,
    pub bready: Signal<In, Bit>,
    pub bresp: Signal<Out, Bits<2>>,
    pub arvalid: Signal<In, Bit>,
    pub arready: Signal<Out, Bit>,
    pub araddr: Signal<In, Bits<20>>,
    pub rvalid: Signal<Out, Bit>,
    pub rready: Signal<In, Bit>,
    pub rdata: Signal<Out, Bits<32>>,
    pub rresp: Signal<Out, Bits<2>>,
    // DMA read port
    pub rd_req_valid: Signal<Out, Bit>,
    pub rd_req_ready: Signal<In, Bit>,
    pub rd_req_addr: Signal<Out, Bits<64>>,
    pub rd_req_len: Signal<Out, Bits<13>>,
    pub rd_req_tag: Signal<Out, Bits<8>>,
    pub rd_resp_valid: Signal<In, Bit>,
    pub rd_resp_ready: Signal<Out, Bit>,
    pub rd_resp_data: Signal<In, Bits<512>>,
    pub rd_resp_tag: Signal<In, Bits<8>>,
    pub rd_resp_last: Signal<In, Bit>,
    // DMA write port
    pub wr_valid: Signal<Out, Bit>,
    pub wr_ready: Signal<In, Bit>,
    pub wr_addr: Signal<Out, Bits<64>>,
    pub wr_data: Signal<Out, Bits<512>>,
    pub wr_strb: Signal<Out, Bits<64>>,
    pub wr_last: Signal<Out, Bit>,
    // MAC
    pub m_axis: AxisSource,
    pub s_axis: AxisSink,
    /// The MAC's error flag with a frame's last beat (CMAC `rx_axis_tuser`: bad FCS and the like): the frame is
    /// dropped by RX Parse (`rx_drop_mac_error`) and ignored by the ARP responder.
    pub s_axis_tuser: Signal<In, Bit>,

    csr: Csr,
    sq: SqRing<256, 8>,
    front: ReqFront,
    req: Requester,
    gather: GatherPath,
    txb: TxPacketBuild,
    arb: DmaReadArb,
    rx: RxParse,
    /// RX Parse's payload output through a register slice: the payload's ready from the Scatter Paths ends here.
    rx_slice: AxisSlice,
    /// RX Parse's header stream through a hold register, routed on its way in: the Completer's and the
    /// Responder's header handshakes end here instead of reaching RX Parse's verdict queues.
    rx_hold: HoldReg<RxHdrWord>,
    txfb: TxFrameBuffer,
    mux: TxFrameMux,
    /// ARP replies and ICMP echo replies onto the mux's second input
    mux_ctl: TxFrameMux,
    arp: ArpResponder,
    icmp: IcmpEcho,
    /// IPv6 neighbour discovery: solicitations for our IPv6 address answered
    nd: NdResponder,
    /// the port's VLAN: the tag off every frame from the MAC, onto the responders' frames
    vstrip: VlanStrip,
    vins: VlanInsert,
    /// the control frames (ARP, ICMP echo) and the advertisements onto one stream
    mux_nd: TxFrameMux,
    zero3: Constant<Bits<3>>,
    one3: Constant<Bits<3>>,
    resp: Responder,
    txarb: TxReqArb,
    arb2: DmaReadArb,
    scat2: ScatterPath,
    warb2: DmaWriteArb,
    /// CQE arbiter: the completer's (a) and the responder's (b) completions, round robin.
    cq_last_b: DFF<Bit>,
    cq_use_b: Signal<Local, Bit>,
    comp: Completer,
    cq_gen: CqeGen<256, 8>,
    scat: ScatterPath,
    warb: DmaWriteArb,
    // RX dispatch: the payload at the stream's head belongs to the completer or to the responder (see update)
    pay_busy: DFF<Bit>,
    pay_comp: DFF<Bit>,
    /// a second request payload, of the header the responder took last, waits behind the one at the head
    pay_next: DFF<Bit>,
    /// a header may be handed on: no payload in the stream, or a request behind a request payload
    l_hand: Signal<Local, Bit>,
    l_pay_done: Signal<Local, Bit>,
    l_resp: Signal<Local, Bit>,
    l_has_pay: Signal<Local, Bit>,
    op_resp_lo: Constant<Bits<8>>,
    op_resp_hi: Constant<Bits<8>>,
    zero13: Constant<Bits<13>>,
    zero128: Constant<Bits<128>>,
    kind_cq: Constant<Bits<2>>,
    kind_rq: Constant<Bits<2>>,

    // command dispatcher
    cst: DFF<CmdState>,
    c_op: DFF<Bits<8>>,
    c_index: DFF<Bits<24>>,
    c_data: DFF<Bits<512>>,
    c_err: DFF<Bits<8>>,
    l_data: Signal<Local, Bits<512>>,
    l_w0: Signal<Local, Bits<32>>,
    /// CMD_WRITE_QP's max_rd_atomic (word 2, 7:0).
    l_mra: Signal<Local, Bits<8>>,
    ctr_g: [DFF<Bits<32>>; 6],
    ctr_hi: DFF<Bits<3>>,
    ctr_v: DFF<Bits<32>>,
    zero32: Constant<Bits<32>>,

    op_mr: Constant<Bits<8>>,
    op_inv: Constant<Bits<8>>,
    op_qp: Constant<Bits<8>>,
    op_req: Constant<Bits<8>>,
    op_resp: Constant<Bits<8>>,
    op_sq: Constant<Bits<8>>,
    op_rq: Constant<Bits<8>>,
    op_cq: Constant<Bits<8>>,
    op_ip6: Constant<Bits<8>>,
    /// our IPv6 address (CMD_SET_IPV6), and RoCEv2 over IPv6 on (the address is not 0)
    my_ip6: DFF<Bits<128>>,
    v6_on: DFF<Bit>,
    /// the port's VLAN (CMD_SET_VLAN): on, and the tag's control information
    op_vlan: Constant<Bits<8>>,
    vlan_on: DFF<Bit>,
    vlan_tci: DFF<Bits<16>>,
    two3: Constant<Bits<3>>,
    /// CMD_WRITE_QP's remote address: w12-15 for an IPv6 path (w0 bit 6), else w6 IPv4-mapped
    l_rip: Signal<Local, Bits<128>>,
    /// the command in execution writes the Key Cache copies this cycle (a Responder invalidate waits)
    l_kcw: Signal<Local, Bit>,
    l_v6: Signal<Local, Bit>,
    k_mapped: Constant<Bits<128>>,
    zero24: Constant<Bits<24>>,
    err_none: Constant<Bits<8>>,
    err_index: Constant<Bits<8>>,
    n_mrs: Constant<Bits<24>>,
    n_qps: Constant<Bits<24>>,
    n_cqs: Constant<Bits<24>>,
    mtu_bias: Constant<Bits<4>>,
    st_reset: Constant<Bits<3>>,
    ty_uc: Constant<Bits<2>>,
    /// CMD_WRITE_QP names a UC QP
    l_uc: Signal<Local, Bit>,
    ty_ud: Constant<Bits<2>>,
    l_ud: Signal<Local, Bit>,
    /// max_rd_atomic thresholds (8-bit) and limits (7-bit) for WQE Check's `max_rd` (`rd_atomic_limit`).
    mra_t8: Constant<Bits<8>>,
    mra_t4: Constant<Bits<8>>,
    mra_t2: Constant<Bits<8>>,
    mra_t1: Constant<Bits<8>>,
    mra_v16: Constant<Bits<7>>,
    mra_v8: Constant<Bits<7>>,
    mra_v4: Constant<Bits<7>>,
    mra_v2: Constant<Bits<7>>,
    mra_v1: Constant<Bits<7>>,
    kind_sq: Constant<Bits<2>>,
    zero8: Constant<Bits<8>>,
    zero64: Constant<Bits<64>>,
    zero512: Constant<Bits<512>>,
}

impl Default for Rnic {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            awvalid: Default::default(),
            awready: Default::default(),
            awaddr: Default::default(),
            wvalid: Default::default(),
            wready: Default::default(),
            wdata: Default::default(),
            wstrb: Default::default(),
            bvalid: Default::default(),
            bready: Default::default(),
            bresp: Default::default(),
            arvalid: Default::default(),
            arready: Default::default(),
            araddr: Default::default(),
            rvalid: Default::default(),
            rready: Default::default(),
            rdata: Default::default(),
            rresp: Default::default(),
            rd_req_valid: Default::default(),
            rd_req_ready: Default::default(),
            rd_req_addr: Default::default(),
            rd_req_len: Default::default(),
            rd_req_tag: Default::default(),
            rd_resp_valid: Default::default(),
            rd_resp_ready: Default::default(),
            rd_resp_data: Default::default(),
            rd_resp_tag: Default::default(),
            rd_resp_last: Default::default(),
            wr_valid: Default::default(),
            wr_ready: Default::default(),
            wr_addr: Default::default(),
            wr_data: Default::default(),
            wr_strb: Default::default(),
            wr_last: Default::default(),
            m_axis: Default::default(),
            s_axis: Default::default(),
            s_axis_tuser: Default::default(),
            csr: Csr::new(CAP_RC | CAP_UC | CAP_UD | CAP_ATOMIC | CAP_MASKED_ATOMIC | CAP_INLINE | CAP_IPV6 | CAP_VLAN, LOG2_QPS, LOG2_MRS, LOG2_CQS, 5),
            sq: Default::default(),
            front: Default::default(),
            req: Default::default(),
            gather: Default::default(),
            txb: Default::default(),
            arb: Default::default(),
            rx: Default::default(),
            rx_slice: Default::default(),
            rx_hold: Default::default(),
            txfb: Default::default(),
            mux: Default::default(),
            mux_ctl: Default::default(),
            arp: Default::default(),
            icmp: Default::default(),
            nd: Default::default(),
            vstrip: Default::default(),
            vins: Default::default(),
            mux_nd: Default::default(),
            zero3: k(0),
            one3: k(1),
            resp: Default::default(),
            txarb: Default::default(),
            arb2: Default::default(),
            scat2: Default::default(),
            warb2: Default::default(),
            cq_last_b: Default::default(),
            cq_use_b: Default::default(),
            comp: Default::default(),
            cq_gen: Default::default(),
            scat: Default::default(),
            warb: Default::default(),
            pay_busy: Default::default(),
            pay_comp: Default::default(),
            pay_next: Default::default(),
            l_hand: Default::default(),
            l_pay_done: Default::default(),
            l_resp: Default::default(),
            l_has_pay: Default::default(),
            op_resp_lo: k(u64::from(RC_RDMA_READ_RESPONSE_FIRST)),
            op_resp_hi: k(u64::from(RC_ATOMIC_ACKNOWLEDGE)),
            zero13: k(0),
            zero128: Constant::new(Bits::<128>::default()),
            kind_cq: k(2),
            kind_rq: k(1),
            cst: Default::default(),
            c_op: Default::default(),
            c_index: Default::default(),
            c_data: Default::default(),
            c_err: Default::default(),
            l_data: Default::default(),
            l_w0: Default::default(),
            l_mra: Default::default(),
            ctr_g: Default::default(),
            ctr_hi: Default::default(),
            ctr_v: Default::default(),
            zero32: k(0),
            op_mr: k(u64::from(CMD_WRITE_MR)),
            op_inv: k(u64::from(CMD_INVALIDATE_MR)),
            op_qp: k(u64::from(CMD_WRITE_QP)),
            op_req: k(u64::from(CMD_WRITE_QP_REQ)),
            op_resp: k(u64::from(CMD_WRITE_QP_RESP)),
            op_sq: k(u64::from(CMD_WRITE_SQ)),
            op_rq: k(u64::from(CMD_WRITE_RQ)),
            op_cq: k(u64::from(CMD_WRITE_CQ)),
            op_ip6: k(u64::from(CMD_SET_IPV6)),
            my_ip6: Default::default(),
            v6_on: Default::default(),
            op_vlan: k(u64::from(CMD_SET_VLAN)),
            vlan_on: Default::default(),
            vlan_tci: Default::default(),
            two3: k(2),
            l_rip: Default::default(),
            l_kcw: Default::default(),
            l_v6: Default::default(),
            k_mapped: Constant::new(crate::wire::tx_build::v4_bits(0)),
            zero24: k(0),
            err_none: k(u64::from(CMD_ERR_NONE)),
            err_index: k(u64::from(CMD_ERR_BAD_INDEX)),
            n_mrs: k(1 << LOG2_MRS),
            n_qps: k(1 << LOG2_QPS),
            n_cqs: k(1 << LOG2_CQS),
            // IB MTU code (1 = 256 .. 5 = 4096) + 7 = log2 bytes
            mtu_bias: k(7),
            st_reset: k(testbench::model::QpState::Reset as u64),
            ty_uc: k(testbench::model::QpType::Uc as u64),
            l_uc: Default::default(),
            ty_ud: k(testbench::model::QpType::Ud as u64),
            l_ud: Default::default(),
            mra_t8: k(8),
            mra_t4: k(4),
            mra_t2: k(2),
            mra_t1: k(1),
            mra_v16: k(rd_atomic_limit(9)),
            mra_v8: k(rd_atomic_limit(8)),
            mra_v4: k(rd_atomic_limit(4)),
            mra_v2: k(rd_atomic_limit(2)),
            mra_v1: k(rd_atomic_limit(1)),
            kind_sq: k(0),
            zero8: k(0),
            zero64: k(0),
            zero512: Constant::new(Bits::<512>::default()),
        }
    }
}

impl Logic for Rnic {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, cst, c_op, c_index, c_data, my_ip6, v6_on, vlan_on, vlan_tci, c_err, pay_busy, pay_comp, pay_next, cq_last_b, ctr_hi, ctr_v);
        for i in 0..6 {
            self.ctr_g[i].clock.next = self.clock.val();
            self.ctr_g[i].d.next = self.ctr_g[i].q.val();
        }
        self.resp.clock.next = self.clock.val();
        self.txarb.clock.next = self.clock.val();
        self.arb2.clock.next = self.clock.val();
        self.scat2.clock.next = self.clock.val();
        self.warb2.clock.next = self.clock.val();
        self.comp.clock.next = self.clock.val();
        self.cq_gen.clock.next = self.clock.val();
        self.scat.clock.next = self.clock.val();
        self.warb.clock.next = self.clock.val();
        self.csr.clock.next = self.clock.val();
        self.sq.clock.next = self.clock.val();
        self.front.clock.next = self.clock.val();
        self.req.clock.next = self.clock.val();
        self.gather.clock.next = self.clock.val();
        self.txb.clock.next = self.clock.val();
        self.arb.clock.next = self.clock.val();
        self.rx.clock.next = self.clock.val();
        self.rx_slice.clock.next = self.clock.val();
        self.rx_hold.clock.next = self.clock.val();
        self.mux.clock.next = self.clock.val();
        self.mux_ctl.clock.next = self.clock.val();
        self.icmp.clock.next = self.clock.val();
        self.nd.clock.next = self.clock.val();
        self.vstrip.clock.next = self.clock.val();
        self.vins.clock.next = self.clock.val();
        self.mux_nd.clock.next = self.clock.val();
        self.txfb.clock.next = self.clock.val();
        self.arp.clock.next = self.clock.val();

        // ---- register slave
        self.csr.awvalid.next = self.awvalid.val();
        self.awready.next = self.csr.awready.val();
        self.csr.awaddr.next = self.awaddr.val();
        self.csr.wvalid.next = self.wvalid.val();
        self.wready.next = self.csr.wready.val();
        self.csr.wdata.next = self.wdata.val();
        self.csr.wstrb.next = self.wstrb.val();
        self.bvalid.next = self.csr.bvalid.val();
        self.csr.bready.next = self.bready.val();
        self.bresp.next = self.csr.bresp.val();
        self.csr.arvalid.next = self.arvalid.val();
        self.arready.next = self.csr.arready.val();
        self.csr.araddr.next = self.araddr.val();
        self.rvalid.next = self.csr.rvalid.val();
        self.csr.rready.next = self.rready.val();
        self.rdata.next = self.csr.rdata.val();
        self.rresp.next = self.csr.rresp.val();
        // counter window (RX Parse's counters, ARP's, the Responder's, the Completer's): the CSR samples
        // `ctr_value` two cycles after `ctr_index` changes, so the 32-way mux is two registered stages:
        // eight-way muxes into ctr_g[0..4] (and the group number into ctr_hi), then the group
        self.ctr_hi.d.next = self.csr.ctr_index.val().get_bits::<3>(3);
        match self.csr.ctr_index.val().get_bits::<3>(0).index() {
            0 => self.ctr_g[0].d.next = self.rx.counters[0].val(),
            1 => self.ctr_g[0].d.next = self.rx.counters[1].val(),
            2 => self.ctr_g[0].d.next = self.rx.counters[2].val(),
            3 => self.ctr_g[0].d.next = self.rx.counters[3].val(),
            4 => self.ctr_g[0].d.next = self.rx.counters[4].val(),
            5 => self.ctr_g[0].d.next = self.rx.counters[5].val(),
            6 => self.ctr_g[0].d.next = self.rx.counters[6].val(),
            _ => self.ctr_g[0].d.next = self.rx.counters[7].val(),
        }
        match self.csr.ctr_index.val().get_bits::<3>(0).index() {
            0 => self.ctr_g[1].d.next = self.rx.counters[8].val(),
            1 => self.ctr_g[1].d.next = self.arp.answered.val(),
            2 => self.ctr_g[1].d.next = self.resp.counters[0].val(),
            3 => self.ctr_g[1].d.next = self.resp.counters[1].val(),
            4 => self.ctr_g[1].d.next = self.resp.counters[2].val(),
            5 => self.ctr_g[1].d.next = self.resp.counters[3].val(),
            6 => self.ctr_g[1].d.next = self.resp.counters[4].val(),
            _ => self.ctr_g[1].d.next = self.resp.counters[5].val(),
        }
        match self.csr.ctr_index.val().get_bits::<3>(0).index() {
            0 => self.ctr_g[2].d.next = self.resp.counters[6].val(),
            1 => self.ctr_g[2].d.next = self.resp.counters[7].val(),
            2 => self.ctr_g[2].d.next = self.resp.counters[8].val(),
            3 => self.ctr_g[2].d.next = self.resp.counters[9].val(),
            4 => self.ctr_g[2].d.next = self.resp.counters[10].val(),
            5 => self.ctr_g[2].d.next = self.resp.counters[11].val(),
            6 => self.ctr_g[2].d.next = self.comp.counters[0].val(),
            _ => self.ctr_g[2].d.next = self.comp.counters[1].val(),
        }
        match self.csr.ctr_index.val().get_bits::<3>(0).index() {
            0 => self.ctr_g[3].d.next = self.comp.counters[2].val(),
            1 => self.ctr_g[3].d.next = self.comp.counters[3].val(),
            2 => self.ctr_g[3].d.next = self.comp.counters[4].val(),
            3 => self.ctr_g[3].d.next = self.comp.counters[5].val(),
            4 => self.ctr_g[3].d.next = self.comp.counters[6].val(),
            5 => self.ctr_g[3].d.next = self.comp.counters[7].val(),
            6 => self.ctr_g[3].d.next = self.comp.counters[8].val(),
            _ => self.ctr_g[3].d.next = self.rx.counters[9].val(),
        }
        match self.csr.ctr_index.val().get_bits::<3>(0).index() {
            0 => self.ctr_g[4].d.next = self.icmp.replies.val(),
            1 => self.ctr_g[4].d.next = self.icmp.ignored.val(),
            2 => self.ctr_g[4].d.next = self.icmp.overflow.val(),
            3 => self.ctr_g[4].d.next = self.arp.ignored.val(),
            4 => self.ctr_g[4].d.next = self.arp.dropped.val(),
            5 => self.ctr_g[4].d.next = self.arp.requests.val(),
            6 => self.ctr_g[4].d.next = self.resp.counters[12].val(),
            // CQE Generation: completions not written, their CQ full, in error or not set up (CQ overrun)
            _ => self.ctr_g[4].d.next = self.cq_gen.ovf_count.val(),
        }
        // neighbour discovery: advertisements sent, solicitations not answered
        self.ctr_g[5].d.next = self.zero32.val();
        if self.csr.ctr_index.val().get_bits::<3>(0) == self.zero3.val() {
            self.ctr_g[5].d.next = self.nd.answered.val();
        }
        if self.csr.ctr_index.val().get_bits::<3>(0) == self.one3.val() {
            self.ctr_g[5].d.next = self.nd.ignored.val();
        }
        // VLAN Strip: frames dropped for their tag
        if self.csr.ctr_index.val().get_bits::<3>(0) == self.two3.val() {
            self.ctr_g[5].d.next = self.vstrip.dropped.val();
        }
        match self.ctr_hi.q.val().index() {
            0 => self.ctr_v.d.next = self.ctr_g[0].q.val(),
            1 => self.ctr_v.d.next = self.ctr_g[1].q.val(),
            2 => self.ctr_v.d.next = self.ctr_g[2].q.val(),
            3 => self.ctr_v.d.next = self.ctr_g[3].q.val(),
            4 => self.ctr_v.d.next = self.ctr_g[4].q.val(),
            5 => self.ctr_v.d.next = self.ctr_g[5].q.val(),
            _ => self.ctr_v.d.next = self.zero32.val(),
        }
        self.csr.ctr_value.next = self.ctr_v.q.val();

        // ---- command dispatcher
        self.l_data.next = self.c_data.q.val();
        self.l_w0.next = self.l_data.val().get_bits::<32>(0);
        self.csr.cmd_ready.next = false;
        self.csr.cmd_done.next = false;
        self.csr.cmd_err.next = self.c_err.q.val();
        // Key Cache (TX copy) write port
        self.front.kc_wr.en.next = false;
        self.front.kc_wr.inv_en.next = false;
        self.front.kc_wr.index.next = self.c_index.q.val().get_bits::<10>(0);
        self.front.kc_wr.valid.next = !self.l_data.val().get_bit(267);
        self.front.kc_wr.va.next = self.l_data.val().get_bits::<64>(0);
        self.front.kc_wr.len.next = self.l_data.val().get_bits::<64>(64);
        self.front.kc_wr.base.next = self.l_data.val().get_bits::<64>(128);
        self.front.kc_wr.tag.next = self.l_data.val().get_bits::<8>(192);
        self.front.kc_wr.pd.next = self.l_data.val().get_bits::<24>(224);
        self.front.kc_wr.access.next = self.l_data.val().get_bits::<4>(256);
        self.front.kc_wr.fast.next = self.l_data.val().get_bit(264);
        self.front.kc_wr.mw.next = self.l_data.val().get_bit(265);
        self.front.kc_wr.mw2.next = self.l_data.val().get_bit(266);
        self.front.kc_wr.bind.next = self.l_data.val().get_bit(260);
        self.front.kc_wr.qpn.next = self.l_data.val().get_bits::<8>(272);
        // send context
        self.front.ctx_we.next = false;
        self.front.ctx_qpn.next = self.c_index.q.val();
        self.front.ctx_data.next.state = self.l_w0.val().get_bits::<3>(0);
        self.front.ctx_data.next.mtu_log2 = bit_cast::<4, 3>(self.l_w0.val().get_bits::<3>(8)) + self.mtu_bias.val();
        self.front.ctx_data.next.dest_qpn = self.l_data.val().get_bits::<24>(96);
        self.front.ctx_data.next.pd = self.l_data.val().get_bits::<24>(128);
        self.front.ctx_data.next.sport = self.l_data.val().get_bits::<16>(160);
        self.l_v6.next = self.l_w0.val().get_bit(6);
        self.l_rip.next = bit_cast::<128, 32>(self.l_data.val().get_bits::<32>(192)) | self.k_mapped.val();
        if self.l_v6.val() {
            self.l_rip.next = self.l_data.val().get_bits::<128>(384);
        }
        self.front.ctx_data.next.dst_ip = self.l_rip.val();
        self.front.ctx_data.next.v6 = self.l_v6.val();
        self.front.ctx_data.next.dst_mac = self.l_data.val().get_bits::<48>(224);
        self.front.ctx_data.next.sig_all = false;
        self.l_uc.next = self.l_w0.val().get_bits::<2>(4) == self.ty_uc.val();
        self.front.ctx_data.next.uc = self.l_uc.val();
        self.l_ud.next = self.l_w0.val().get_bits::<2>(4) == self.ty_ud.val();
        self.front.ctx_data.next.ud = self.l_ud.val();
        self.front.ctx_data.next.qkey = self.l_data.val().get_bits::<32>(352);
        // the READ/atomic limit: max_rd_atomic rounded up to a power of two, 1..=16 (rd_atomic_limit)
        self.l_mra.next = self.l_data.val().get_bits::<8>(64);
        self.front.ctx_data.next.max_rd = self.mra_v16.val();
        if self.l_mra.val() <= self.mra_t8.val() {
            self.front.ctx_data.next.max_rd = self.mra_v8.val();
        }
        if self.l_mra.val() <= self.mra_t4.val() {
            self.front.ctx_data.next.max_rd = self.mra_v4.val();
        }
        if self.l_mra.val() <= self.mra_t2.val() {
            self.front.ctx_data.next.max_rd = self.mra_v2.val();
        }
        if self.l_mra.val() <= self.mra_t1.val() {
            self.front.ctx_data.next.max_rd = self.mra_v1.val();
        }
        self.front.psn_we.next = false;
        self.front.psn_qpn.next = self.c_index.q.val();
        self.front.psn_value.next = self.l_w0.val().get_bits::<24>(0);
        // the QP's send CQ (CMD_WRITE_QP word 9) for the completer
        self.comp.cqw_we.next = false;
        self.comp.cqw_qpn.next = self.c_index.q.val();
        self.comp.cqw_cqn.next = self.l_data.val().get_bits::<24>(288);
        self.comp.cqw_timeout.next = self.l_data.val().get_bits::<5>(40);
        self.comp.cqw_retry.next = self.l_data.val().get_bits::<3>(48);
        self.comp.cqw_rnr.next = self.l_data.val().get_bits::<3>(56);
        // UC and UD WQEs complete as their records come (no ACKs)
        self.comp.cqw_uc.next = self.l_uc.val() | self.l_ud.val();
        self.comp.cqw_reset.next = self.l_w0.val().get_bits::<3>(0) == self.st_reset.val();
        // CMD_WRITE_QP_REQ's sq_psn for the completer too, in the cycle WQE Check takes it
        self.comp.cqp_we.next = false;
        self.comp.cqp_qpn.next = self.c_index.q.val();
        self.comp.cqp_psn.next = self.l_w0.val().get_bits::<24>(0);
        // CQ ring set-up
        self.cq_gen.setup_valid.next = false;
        self.cq_gen.setup_cqn.next = self.c_index.q.val();
        self.cq_gen.setup_base.next = self.l_data.val().get_bits::<64>(0);
        self.cq_gen.setup_log2.next = self.l_data.val().get_bits::<5>(64);
        // the responder's copies: Key Cache (RX), QP attributes, ePSN, receive rings
        self.resp.kc_wr.en.next = false;
        self.resp.kc_wr.inv_en.next = false;
        self.resp.kc_wr.index.next = self.c_index.q.val().get_bits::<10>(0);
        self.resp.kc_wr.valid.next = !self.l_data.val().get_bit(267);
        self.resp.kc_wr.va.next = self.l_data.val().get_bits::<64>(0);
        self.resp.kc_wr.len.next = self.l_data.val().get_bits::<64>(64);
        self.resp.kc_wr.base.next = self.l_data.val().get_bits::<64>(128);
        self.resp.kc_wr.tag.next = self.l_data.val().get_bits::<8>(192);
        self.resp.kc_wr.pd.next = self.l_data.val().get_bits::<24>(224);
        self.resp.kc_wr.access.next = self.l_data.val().get_bits::<4>(256);
        self.resp.kc_wr.fast.next = self.l_data.val().get_bit(264);
        self.resp.kc_wr.mw.next = self.l_data.val().get_bit(265);
        self.resp.kc_wr.mw2.next = self.l_data.val().get_bit(266);
        self.resp.kc_wr.bind.next = self.l_data.val().get_bit(260);
        self.resp.kc_wr.qpn.next = self.l_data.val().get_bits::<8>(272);
        self.resp.attr_we.next = false;
        self.resp.attr_qpn.next = self.c_index.q.val();
        self.resp.attr_data.next.state = self.l_data.val().get_bits::<3>(0);
        self.resp.attr_data.next.qp_type = self.l_data.val().get_bits::<2>(4);
        self.resp.attr_data.next.path_mtu = self.l_data.val().get_bits::<3>(8);
        self.resp.attr_data.next.access = self.l_data.val().get_bits::<8>(16);
        self.resp.attr_data.next.min_rnr_timer = self.l_data.val().get_bits::<5>(32);
        self.resp.attr_data.next.timeout = self.l_data.val().get_bits::<5>(40);
        self.resp.attr_data.next.retry_cnt = self.l_data.val().get_bits::<3>(48);
        self.resp.attr_data.next.rnr_retry = self.l_data.val().get_bits::<3>(56);
        self.resp.attr_data.next.max_rd_atomic = self.l_data.val().get_bits::<8>(64);
        self.resp.attr_data.next.max_dest_rd_atomic = self.l_data.val().get_bits::<8>(72);
        self.resp.attr_data.next.dest_qpn = self.l_data.val().get_bits::<24>(96);
        self.resp.attr_data.next.pd = self.l_data.val().get_bits::<32>(128);
        self.resp.attr_data.next.sport = self.l_data.val().get_bits::<16>(160);
        self.resp.attr_data.next.remote_ip = self.l_rip.val();
        self.resp.attr_data.next.v6 = self.l_v6.val();
        self.resp.attr_data.next.remote_mac = self.l_data.val().get_bits::<48>(224);
        self.resp.attr_data.next.qkey = self.l_data.val().get_bits::<32>(352);
        self.resp.rp_valid.next = false;
        self.resp.rp_qpn.next = self.c_index.q.val();
        self.resp.rp_epsn.next = self.l_w0.val().get_bits::<24>(0);
        self.resp.rqs_valid.next = false;
        self.resp.rqs_qpn.next = self.c_index.q.val();
        self.resp.rqs_base.next = self.l_data.val().get_bits::<64>(0);
        self.resp.rqs_log2.next = self.l_data.val().get_bits::<4>(64);
        self.resp.rqs_cqn.next = self.l_data.val().get_bits::<24>(96);
        // SQ ring set-up
        self.sq.setup_valid.next = false;
        self.sq.setup_qpn.next = self.c_index.q.val();
        self.sq.setup_base.next = self.l_data.val().get_bits::<64>(0);
        self.sq.setup_log2.next = self.l_data.val().get_bits::<4>(64);

        // An invalidate from the Responder (a SEND_WITH_INV) or from WQE Check (a LOCAL_INV): both Key Cache
        // copies (WQE Check's, the Responder's) in one cycle in which no command writes them; the Responder's
        // first when both ask (each waits in its own state until taken)
        self.l_kcw.next = (self.cst.q.val() == CmdState::Exec)
            & ((self.c_op.q.val() == self.op_mr.val()) | (self.c_op.q.val() == self.op_inv.val()));
        self.resp.inv_ready.next = false;
        self.front.inv_ready.next = false;
        if self.resp.inv_valid.val() & !self.l_kcw.val() {
            self.resp.inv_ready.next = true;
            self.front.kc_wr.inv_en.next = true;
            self.front.kc_wr.index.next = self.resp.inv_index.val();
            self.resp.kc_wr.inv_en.next = true;
            self.resp.kc_wr.index.next = self.resp.inv_index.val();
        } else if self.front.inv_valid.val() & !self.l_kcw.val() {
            self.front.inv_ready.next = true;
            self.front.kc_wr.inv_en.next = true;
            self.front.kc_wr.index.next = self.front.inv_index.val();
            self.resp.kc_wr.inv_en.next = true;
            self.resp.kc_wr.index.next = self.front.inv_index.val();
        }
        // A BIND_MW's window entry from WQE Check: both copies, in a cycle no command and no invalidate takes
        self.front.bw_ready.next = false;
        if self.front.bw_valid.val() & !self.l_kcw.val() & !self.resp.inv_valid.val() {
            self.front.bw_ready.next = true;
            self.front.kc_wr.en.next = true;
            self.front.kc_wr.index.next = self.front.bw_index.val();
            self.front.kc_wr.valid.next = true;
            self.front.kc_wr.tag.next = self.front.bw_entry.val().tag;
            self.front.kc_wr.pd.next = self.front.bw_entry.val().pd;
            self.front.kc_wr.access.next = self.front.bw_entry.val().access;
            self.front.kc_wr.va.next = self.front.bw_entry.val().va;
            self.front.kc_wr.len.next = self.front.bw_entry.val().len;
            self.front.kc_wr.base.next = self.front.bw_entry.val().base;
            self.front.kc_wr.fast.next = self.front.bw_entry.val().fast;
            self.front.kc_wr.mw.next = self.front.bw_entry.val().mw;
            self.front.kc_wr.mw2.next = self.front.bw_entry.val().mw2;
            self.front.kc_wr.qpn.next = self.front.bw_entry.val().qpn;
            self.front.kc_wr.bind.next = self.front.bw_entry.val().bind;
            self.resp.kc_wr.en.next = true;
            self.resp.kc_wr.index.next = self.front.bw_index.val();
            self.resp.kc_wr.valid.next = true;
            self.resp.kc_wr.tag.next = self.front.bw_entry.val().tag;
            self.resp.kc_wr.pd.next = self.front.bw_entry.val().pd;
            self.resp.kc_wr.access.next = self.front.bw_entry.val().access;
            self.resp.kc_wr.va.next = self.front.bw_entry.val().va;
            self.resp.kc_wr.len.next = self.front.bw_entry.val().len;
            self.resp.kc_wr.base.next = self.front.bw_entry.val().base;
            self.resp.kc_wr.fast.next = self.front.bw_entry.val().fast;
            self.resp.kc_wr.mw.next = self.front.bw_entry.val().mw;
            self.resp.kc_wr.mw2.next = self.front.bw_entry.val().mw2;
            self.resp.kc_wr.qpn.next = self.front.bw_entry.val().qpn;
            self.resp.kc_wr.bind.next = self.front.bw_entry.val().bind;
        }
        match self.cst.q.val() {
            CmdState::Idle => {
                self.csr.cmd_ready.next = true;
                if self.csr.cmd_valid.val() {
                    self.c_op.d.next = self.csr.cmd_op.val();
                    self.c_index.d.next = self.csr.cmd_index.val();
                    self.c_data.d.next = self.csr.cmd_data.val();
                    self.cst.d.next = CmdState::Exec;
                }
            }
            CmdState::Exec => {
                self.c_err.d.next = self.err_none.val();
                self.cst.d.next = CmdState::Finish;
                if (self.c_op.q.val() == self.op_mr.val()) | (self.c_op.q.val() == self.op_inv.val()) {
                    if self.c_index.q.val() < self.n_mrs.val() {
                        self.front.kc_wr.en.next = self.c_op.q.val() == self.op_mr.val();
                        self.front.kc_wr.inv_en.next = self.c_op.q.val() == self.op_inv.val();
                        self.resp.kc_wr.en.next = self.c_op.q.val() == self.op_mr.val();
                        self.resp.kc_wr.inv_en.next = self.c_op.q.val() == self.op_inv.val();
                    } else {
                        self.c_err.d.next = self.err_index.val();
                    }
                }
                if (self.c_op.q.val() == self.op_qp.val())
                    | (self.c_op.q.val() == self.op_req.val())
                    | (self.c_op.q.val() == self.op_resp.val())
                    | (self.c_op.q.val() == self.op_sq.val())
                    | (self.c_op.q.val() == self.op_rq.val())
                {
                    if self.c_index.q.val() >= self.n_qps.val() {
                        self.c_err.d.next = self.err_index.val();
                    } else {
                        self.front.ctx_we.next = self.c_op.q.val() == self.op_qp.val();
                        self.comp.cqw_we.next = self.c_op.q.val() == self.op_qp.val();
                        self.resp.attr_we.next = self.c_op.q.val() == self.op_qp.val();
                        if self.c_op.q.val() == self.op_resp.val() {
                            self.resp.rp_valid.next = true;
                            if !self.resp.rp_ready.val() {
                                self.cst.d.next = CmdState::Exec;
                            }
                        }
                        if self.c_op.q.val() == self.op_rq.val() {
                            self.resp.rqs_valid.next = true;
                            if !self.resp.rqs_ready.val() {
                                self.cst.d.next = CmdState::Exec;
                            }
                        }
                        if self.c_op.q.val() == self.op_req.val() {
                            self.front.psn_we.next = true;
                            self.comp.cqp_we.next = self.front.psn_ready.val();
                            if !self.front.psn_ready.val() {
                                self.cst.d.next = CmdState::Exec;
                            }
                        }
                        if self.c_op.q.val() == self.op_sq.val() {
                            self.sq.setup_valid.next = true;
                            if !self.sq.setup_ready.val() {
                                self.cst.d.next = CmdState::Exec;
                            }
                        }
                    }
                }
                if self.c_op.q.val() == self.op_ip6.val() {
                    if self.c_index.q.val() != self.zero24.val() {
                        self.c_err.d.next = self.err_index.val();
                    } else {
                        self.my_ip6.d.next = self.l_data.val().get_bits::<128>(0);
                        self.v6_on.d.next = self.l_data.val().get_bits::<128>(0) != self.zero128.val();
                    }
                }
                if self.c_op.q.val() == self.op_vlan.val() {
                    if self.c_index.q.val() != self.zero24.val() {
                        self.c_err.d.next = self.err_index.val();
                    } else {
                        self.vlan_on.d.next = self.l_data.val().get_bit(31);
                        self.vlan_tci.d.next = self.l_data.val().get_bits::<16>(0);
                    }
                }
                if self.c_op.q.val() == self.op_cq.val() {
                    if self.c_index.q.val() >= self.n_cqs.val() {
                        self.c_err.d.next = self.err_index.val();
                    } else {
                        self.cq_gen.setup_valid.next = true;
                    }
                }
            }
            CmdState::Finish => {
                self.csr.cmd_done.next = true;
                self.cst.d.next = CmdState::Idle;
            }
            _ => {
                self.cst.d.next = CmdState::Idle;
            }
        }

        // ---- doorbells: SQ to the ring, CQ consumer indices to CQE Generation; RQ doorbells are taken
        // (no responder yet)
        self.cq_gen.ci_valid.next = self.csr.db_valid.val() & (self.csr.db_kind.val() == self.kind_cq.val());
        self.cq_gen.ci_cqn.next = self.csr.db_index.val();
        self.cq_gen.ci_value.next = self.csr.db_value.val();
        self.sq.db_valid.next = self.csr.db_valid.val() & (self.csr.db_kind.val() == self.kind_sq.val());
        self.sq.db_qpn.next = self.csr.db_index.val();
        self.sq.db_pi.next = self.csr.db_value.val();
        self.resp.rqdb_valid.next = self.csr.db_valid.val() & (self.csr.db_kind.val() == self.kind_rq.val());
        self.resp.rqdb_qpn.next = self.csr.db_index.val();
        self.resp.rqdb_pi.next = self.csr.db_value.val();
        self.csr.db_ready.next = true;
        if self.csr.db_kind.val() == self.kind_sq.val() {
            self.csr.db_ready.next = self.sq.db_ready.val();
        }
        if self.csr.db_kind.val() == self.kind_rq.val() {
            self.csr.db_ready.next = self.resp.rqdb_ready.val();
        }

        // ---- DMA reads: WQE Prefetch and the Responder's receive-WQE fetch share arb2; arb2 and the Gather Path
        // share the port
        DmaRead::join(&mut self.sq.dma, &mut self.arb2.a);
        DmaRead::join(&mut self.resp.dma, &mut self.arb2.b);
        DmaRead::join(&mut self.arb2.port, &mut self.arb.a);
        DmaRead::join(&mut self.gather.dma, &mut self.arb.b);
        self.rd_req_valid.next = self.arb.port.req_valid.val();
        self.arb.port.req_ready.next = self.rd_req_ready.val();
        self.rd_req_addr.next = self.arb.port.req_addr.val();
        self.rd_req_len.next = self.arb.port.req_len.val();
        self.rd_req_tag.next = self.arb.port.req_tag.val();
        self.arb.port.resp_valid.next = self.rd_resp_valid.val();
        self.rd_resp_ready.next = self.arb.port.resp_ready.val();
        self.arb.port.resp_data.next = self.rd_resp_data.val();
        self.arb.port.resp_tag.next = self.rd_resp_tag.val();
        self.arb.port.resp_last.next = self.rd_resp_last.val();

        // ---- DMA writes: the Responder's (scat2) and the Completer's (scat) Scatter Paths share warb2; warb2 and
        // CQE Generation share the port
        DmaWrite::join(&mut self.scat2.dma, &mut self.warb2.a);
        DmaWrite::join(&mut self.scat.dma, &mut self.warb2.b);
        DmaWrite::join(&mut self.warb2.port, &mut self.warb.a);
        DmaWrite::join(&mut self.cq_gen.dma, &mut self.warb.b);
        self.wr_valid.next = self.warb.port.valid.val();
        self.warb.port.ready.next = self.wr_ready.val();
        self.wr_addr.next = self.warb.port.addr.val();
        self.wr_data.next = self.warb.port.data.val();
        self.wr_strb.next = self.warb.port.strb.val();
        self.wr_last.next = self.warb.port.last.val();

        // ---- requester: WQE Prefetch -> WQE Check -> Requester -> Gather + TX Packet Build
        self.front.wqe_valid.next = self.sq.wqe_valid.val();
        self.sq.wqe_ready.next = self.front.wqe_ready.val();
        self.front.wqe_qpn.next = self.sq.wqe_qpn.val();
        self.front.wqe_idx.next = self.sq.wqe_idx.val();
        self.front.wqe_gen.next = self.sq.wqe_gen.val();
        self.front.wqe_data.next = self.sq.wqe_data.val();
        self.front.src_mac.next = self.csr.mac.val();
        self.front.src_ip.next = self.csr.ipv4.val();
        self.front.src_ip6.next = self.my_ip6.q.val();
        self.req.desc.next = self.front.desc.val();
        self.req.desc_valid.next = self.front.desc_valid.val();
        self.front.desc_ready.next = self.req.desc_ready.val();
        self.front.done.next = self.req.done.val();
        self.front.done_valid.next = self.req.done_valid.val();
        self.req.done_ready.next = self.front.done_ready.val();
        // finished WQEs to the completer
        self.comp.iss.next = self.front.issued.val();
        self.comp.iss_valid.next = self.front.issued_valid.val();
        self.front.issued_ready.next = self.comp.iss_ready.val();
        // go-back-N: the completer rewinds WQE Check (PSN state), which rewinds the SQ Ring (fetch index)
        self.front.rw_valid.next = self.comp.rw_valid.val();
        self.comp.rw_ready.next = self.front.rw_ready.val();
        self.front.rw_qpn.next = self.comp.rw_qpn.val();
        self.front.rw_idx.next = self.comp.rw_idx.val();
        self.front.rw_psn.next = self.comp.rw_psn.val();
        self.front.rw_skip.next = self.comp.rw_skip.val();
        self.front.qerr_valid.next = self.comp.qerr_valid.val();
        self.front.qerr_qpn.next = self.comp.qerr_qpn.val();
        self.front.win_we.next = self.comp.win_we.val();
        self.front.win_qpn.next = self.comp.win_qpn.val();
        self.front.win_busy.next = self.comp.win_busy.val();
        self.front.win_lim.next = self.comp.win_lim.val();
        self.front.win_fin.next = self.comp.win_fin.val();
        self.sq.rw_valid.next = self.front.sq_rw_valid.val();
        self.front.sq_rw_ready.next = self.sq.rw_ready.val();
        self.sq.rw_qpn.next = self.front.sq_rw_qpn.val();
        self.sq.rw_idx.next = self.front.sq_rw_idx.val();
        // completer: read-response payload to the Scatter Path, completions to CQE Generation
        ScatterCmd::join(&mut self.comp.s_cmd, &mut self.scat.cmd);
        self.scat.s_axis.tdata.next = self.comp.s_pay.tdata.val();
        self.scat.s_axis.tkeep.next = self.comp.s_pay.tkeep.val();
        self.scat.s_axis.tlast.next = self.comp.s_pay.tlast.val();
        self.scat.s_axis.tvalid.next = self.comp.s_pay.tvalid.val();
        self.comp.s_pay.tready.next = self.scat.s_axis.tready.val();
        // completions: the Completer's send CQEs (a) and the Responder's receive CQEs (b), round robin
        self.cq_use_b.next = self.resp.cq.valid.val() & (!self.comp.cq.valid.val() | !self.cq_last_b.q.val());
        self.cq_gen.cq.valid.next = self.comp.cq.valid.val() | self.resp.cq.valid.val();
        self.comp.cq.ready.next = self.cq_gen.cq.ready.val() & !self.cq_use_b.val();
        self.resp.cq.ready.next = self.cq_gen.cq.ready.val() & self.cq_use_b.val();
        if self.cq_gen.cq.valid.val() & self.cq_gen.cq.ready.val() {
            self.cq_last_b.d.next = self.cq_use_b.val();
        }
        self.cq_gen.cq.wc.next = self.comp.cq.wc.val();
        if self.cq_use_b.val() {
            self.cq_gen.cq.wc.next = self.resp.cq.wc.val();
        }
        // TX: the Requester's (a) and the Responder's (b) packets, header and gather command kept paired
        TxPacket::join(&mut self.req.tx, &mut self.txarb.a);
        TxPacket::join(&mut self.resp.tx_pkt, &mut self.txarb.b);
        self.gather.g_valid.next = self.txarb.out.g_valid.val();
        self.txarb.out.g_ready.next = self.gather.g_ready.val();
        self.gather.g_addr.next = self.txarb.out.g_addr.val();
        self.gather.g_len.next = self.txarb.out.g_len.val();
        self.gather.g_tag.next = self.zero8.val();
        self.gather.g_inl.next = self.txarb.out.g_inl.val();
        // inline WQEs' data slots, from WQE Check to the Gather Path
        self.gather.i_valid.next = self.front.inl_valid.val();
        self.front.inl_ready.next = self.gather.i_ready.val();
        self.gather.i_data.next = self.front.inl_data.val();
        self.gather.i_last.next = self.front.inl_last.val();
        self.txb.hdr.next = self.txarb.out.hdr.val();
        self.txb.hdr.next.vlan = self.vlan_on.q.val();
        self.txb.hdr.next.vlan_tci = self.vlan_tci.q.val();
        self.txb.hdr_valid.next = self.txarb.out.hdr_valid.val();
        self.txarb.out.hdr_ready.next = self.txb.hdr_ready.val();
        // the Responder's scatter commands and payload
        ScatterCmd::join(&mut self.resp.s_cmd, &mut self.scat2.cmd);
        self.resp.s_idle.next = self.scat2.idle.val();
        self.scat2.s_axis.tdata.next = self.resp.s_pay.tdata.val();
        self.scat2.s_axis.tkeep.next = self.resp.s_pay.tkeep.val();
        self.scat2.s_axis.tlast.next = self.resp.s_pay.tlast.val();
        self.scat2.s_axis.tvalid.next = self.resp.s_pay.tvalid.val();
        self.resp.s_pay.tready.next = self.scat2.s_axis.tready.val();
        self.resp.my_mac.next = self.csr.mac.val();
        self.resp.my_ip.next = self.csr.ipv4.val();
        self.resp.my_ip6.next = self.my_ip6.q.val();
        self.txb.pay.tdata.next = self.gather.m_axis.tdata.val();
        self.txb.pay.tkeep.next = self.gather.m_axis.tkeep.val();
        self.txb.pay.tlast.next = self.gather.m_axis.tlast.val();
        self.txb.pay.tvalid.next = self.gather.m_axis.tvalid.val();
        self.gather.m_axis.tready.next = self.txb.pay.tready.val();

        // ---- MAC TX: frames from TX Packet Build (a) and ARP replies (b)
        // TX Packet Build -> TX Frame Buffer (whole frames only, so the MAC never underflows) -> mux
        self.txfb.s_axis.tdata.next = self.txb.m_axis.tdata.val();
        self.txfb.s_axis.tkeep.next = self.txb.m_axis.tkeep.val();
        self.txfb.s_axis.tlast.next = self.txb.m_axis.tlast.val();
        self.txfb.s_axis.tvalid.next = self.txb.m_axis.tvalid.val();
        self.txb.m_axis.tready.next = self.txfb.s_axis.tready.val();
        self.mux.a.tdata.next = self.txfb.m_axis.tdata.val();
        self.mux.a.tkeep.next = self.txfb.m_axis.tkeep.val();
        self.mux.a.tlast.next = self.txfb.m_axis.tlast.val();
        self.mux.a.tvalid.next = self.txfb.m_axis.tvalid.val();
        self.txfb.m_axis.tready.next = self.mux.a.tready.val();
        self.mux_ctl.a.tdata.next = self.arp.m_axis.tdata.val();
        self.mux_ctl.a.tkeep.next = self.arp.m_axis.tkeep.val();
        self.mux_ctl.a.tlast.next = self.arp.m_axis.tlast.val();
        self.mux_ctl.a.tvalid.next = self.arp.m_axis.tvalid.val();
        self.arp.m_axis.tready.next = self.mux_ctl.a.tready.val();
        self.mux_ctl.b.tdata.next = self.icmp.m_axis.tdata.val();
        self.mux_ctl.b.tkeep.next = self.icmp.m_axis.tkeep.val();
        self.mux_ctl.b.tlast.next = self.icmp.m_axis.tlast.val();
        self.mux_ctl.b.tvalid.next = self.icmp.m_axis.tvalid.val();
        self.icmp.m_axis.tready.next = self.mux_ctl.b.tready.val();
        self.mux_nd.a.tdata.next = self.mux_ctl.m_axis.tdata.val();
        self.mux_nd.a.tkeep.next = self.mux_ctl.m_axis.tkeep.val();
        self.mux_nd.a.tlast.next = self.mux_ctl.m_axis.tlast.val();
        self.mux_nd.a.tvalid.next = self.mux_ctl.m_axis.tvalid.val();
        self.mux_ctl.m_axis.tready.next = self.mux_nd.a.tready.val();
        self.mux_nd.b.tdata.next = self.nd.m_axis.tdata.val();
        self.mux_nd.b.tkeep.next = self.nd.m_axis.tkeep.val();
        self.mux_nd.b.tlast.next = self.nd.m_axis.tlast.val();
        self.mux_nd.b.tvalid.next = self.nd.m_axis.tvalid.val();
        self.nd.m_axis.tready.next = self.mux_nd.b.tready.val();
        self.vins.s_axis.tdata.next = self.mux_nd.m_axis.tdata.val();
        self.vins.s_axis.tkeep.next = self.mux_nd.m_axis.tkeep.val();
        self.vins.s_axis.tlast.next = self.mux_nd.m_axis.tlast.val();
        self.vins.s_axis.tvalid.next = self.mux_nd.m_axis.tvalid.val();
        self.mux_nd.m_axis.tready.next = self.vins.s_axis.tready.val();
        self.vins.on.next = self.vlan_on.q.val();
        self.vins.tci.next = self.vlan_tci.q.val();
        self.mux.b.tdata.next = self.vins.m_axis.tdata.val();
        self.mux.b.tkeep.next = self.vins.m_axis.tkeep.val();
        self.mux.b.tlast.next = self.vins.m_axis.tlast.val();
        self.mux.b.tvalid.next = self.vins.m_axis.tvalid.val();
        self.vins.m_axis.tready.next = self.mux.b.tready.val();
        self.m_axis.tdata.next = self.mux.m_axis.tdata.val();
        self.m_axis.tkeep.next = self.mux.m_axis.tkeep.val();
        self.m_axis.tlast.next = self.mux.m_axis.tlast.val();
        self.m_axis.tvalid.next = self.mux.m_axis.tvalid.val();
        self.mux.m_axis.tready.next = self.m_axis.tready.val();

        // ---- MAC RX: through VLAN Strip to RX Parse and the ARP, ICMP and ND responders (none back-pressures
        // the MAC)
        self.vstrip.s_axis.tdata.next = self.s_axis.tdata.val();
        self.vstrip.s_axis.tkeep.next = self.s_axis.tkeep.val();
        self.vstrip.s_axis.tlast.next = self.s_axis.tlast.val();
        self.vstrip.s_axis.tvalid.next = self.s_axis.tvalid.val();
        self.vstrip.s_err.next = self.s_axis_tuser.val();
        self.vstrip.on.next = self.vlan_on.q.val();
        self.vstrip.vid.next = self.vlan_tci.q.val().get_bits::<12>(0);
        self.vstrip.m_axis.tready.next = true;
        self.rx.s_axis.tdata.next = self.vstrip.m_axis.tdata.val();
        self.rx.s_axis.tkeep.next = self.vstrip.m_axis.tkeep.val();
        self.rx.s_axis.tlast.next = self.vstrip.m_axis.tlast.val();
        self.rx.s_axis.tvalid.next = self.vstrip.m_axis.tvalid.val();
        self.rx.s_err.next = self.vstrip.m_err.val();
        self.arp.s_err.next = self.vstrip.m_err.val();
        self.arp.s_axis.tdata.next = self.vstrip.m_axis.tdata.val();
        self.arp.s_axis.tkeep.next = self.vstrip.m_axis.tkeep.val();
        self.arp.s_axis.tlast.next = self.vstrip.m_axis.tlast.val();
        self.arp.s_axis.tvalid.next = self.vstrip.m_axis.tvalid.val();
        self.arp.my_mac.next = self.csr.mac.val();
        self.arp.my_ip.next = self.csr.ipv4.val();
        self.arp.q_ip.next = self.csr.arp_query.val();
        self.arp.q_go.next = self.csr.arp_go.val();
        self.csr.arp_mac.next = self.arp.q_mac.val();
        self.csr.arp_valid.next = self.arp.q_valid.val();
        self.icmp.s_axis.tdata.next = self.vstrip.m_axis.tdata.val();
        self.icmp.s_axis.tkeep.next = self.vstrip.m_axis.tkeep.val();
        self.icmp.s_axis.tlast.next = self.vstrip.m_axis.tlast.val();
        self.icmp.s_axis.tvalid.next = self.vstrip.m_axis.tvalid.val();
        self.icmp.s_err.next = self.vstrip.m_err.val();
        self.icmp.my_mac.next = self.csr.mac.val();
        self.icmp.my_ip.next = self.csr.ipv4.val();
        self.nd.s_axis.tdata.next = self.vstrip.m_axis.tdata.val();
        self.nd.s_axis.tkeep.next = self.vstrip.m_axis.tkeep.val();
        self.nd.s_axis.tlast.next = self.vstrip.m_axis.tlast.val();
        self.nd.s_axis.tvalid.next = self.vstrip.m_axis.tvalid.val();
        self.nd.s_err.next = self.vstrip.m_err.val();
        self.nd.my_mac.next = self.csr.mac.val();
        self.nd.my_ip6.next = self.my_ip6.q.val();
        self.nd.v6_on.next = self.v6_on.q.val();
        self.s_axis.tready.next = true;
        self.rx.my_ip.next = self.csr.ipv4.val();
        self.rx.my_ip6.next = self.my_ip6.q.val();
        self.rx.v6_on.next = self.v6_on.q.val();
        // ---- RX dispatch: responses (READ RESPONSE .. ATOMIC ACKNOWLEDGE) to the completer; requests to the
        // responder. A header is handed on when the payloads of the headers before it have gone, except that a
        // request may be handed to the responder while the payload of the request before it still flows (its
        // payload mover: the responder checks the next header meanwhile); so the stream holds the payloads of
        // at most the last two headers taken, in order, and both are the responder's when there are two.
        // a header is routed on its way into the hold register: responses (ACK, READ response, atomic ACK)
        // to the Completer, requests to the Responder
        self.rx_hold.s_data.next.hdr = self.rx.hdr.val();
        self.rx_hold.s_data.next.ext_words = self.rx.hdr_ext_words.val();
        self.rx_hold.s_data.next.pay_len = self.rx.hdr_pay_len.val();
        self.rx_hold.s_data.next.resp =
            (self.rx.hdr.val().opcode >= self.op_resp_lo.val()) & (self.rx.hdr.val().opcode <= self.op_resp_hi.val());
        self.rx_hold.s_data.next.has_pay = self.rx.hdr_pay_len.val() != self.zero13.val();
        self.rx_hold.s_valid.next = self.rx.hdr_valid.val();
        self.rx.hdr_ready.next = self.rx_hold.s_ready.val();
        self.l_resp.next = self.rx_hold.m_data.val().resp;
        self.l_has_pay.next = self.rx_hold.m_data.val().has_pay;
        self.comp.hdr.next = self.rx_hold.m_data.val().hdr;
        self.comp.hdr_ext_words.next = self.rx_hold.m_data.val().ext_words;
        self.comp.hdr_pay_len.next = self.rx_hold.m_data.val().pay_len;
        self.l_hand.next = !self.pay_busy.q.val() | (!self.pay_comp.q.val() & !self.pay_next.q.val() & !self.l_resp.val());
        self.comp.hdr_valid.next = self.rx_hold.m_valid.val() & self.l_resp.val() & !self.pay_busy.q.val();
        self.resp.hdr.next = self.rx_hold.m_data.val().hdr;
        self.resp.hdr_ext_words.next = self.rx_hold.m_data.val().ext_words;
        self.resp.hdr_pay_len.next = self.rx_hold.m_data.val().pay_len;
        self.resp.hdr_valid.next = self.rx_hold.m_valid.val() & !self.l_resp.val() & self.l_hand.val();
        self.rx_hold.m_ready.next = !self.pay_busy.q.val() & self.comp.hdr_ready.val();
        if !self.l_resp.val() {
            self.rx_hold.m_ready.next = self.l_hand.val() & self.resp.hdr_ready.val();
        }
        self.rx_slice.s.tdata.next = self.rx.pay.tdata.val();
        self.rx_slice.s.tkeep.next = self.rx.pay.tkeep.val();
        self.rx_slice.s.tlast.next = self.rx.pay.tlast.val();
        self.rx_slice.s.tvalid.next = self.rx.pay.tvalid.val();
        self.rx.pay.tready.next = self.rx_slice.s.tready.val();
        self.comp.pay.tdata.next = self.rx_slice.m.tdata.val();
        self.comp.pay.tkeep.next = self.rx_slice.m.tkeep.val();
        self.comp.pay.tlast.next = self.rx_slice.m.tlast.val();
        self.comp.pay.tvalid.next = self.rx_slice.m.tvalid.val() & self.pay_busy.q.val() & self.pay_comp.q.val();
        self.resp.pay.tdata.next = self.rx_slice.m.tdata.val();
        self.resp.pay.tkeep.next = self.rx_slice.m.tkeep.val();
        self.resp.pay.tlast.next = self.rx_slice.m.tlast.val();
        self.resp.pay.tvalid.next = self.rx_slice.m.tvalid.val() & self.pay_busy.q.val() & !self.pay_comp.q.val();
        self.rx_slice.m.tready.next = self.pay_busy.q.val() & self.resp.pay.tready.val();
        if self.pay_comp.q.val() {
            self.rx_slice.m.tready.next = self.pay_busy.q.val() & self.comp.pay.tready.val();
        }
        // the head payload's last beat: the next one (if any) is at the head now
        self.l_pay_done.next = self.rx_slice.m.tvalid.val() & self.rx_slice.m.tready.val() & self.rx_slice.m.tlast.val();
        if self.l_pay_done.val() {
            self.pay_busy.d.next = self.pay_next.q.val();
            self.pay_next.d.next = false;
        }
        if self.rx_hold.m_valid.val() & self.rx_hold.m_ready.val() & self.l_has_pay.val() {
            // (a request taken behind a request payload that is not ending now waits as the second)
            self.pay_busy.d.next = true;
            self.pay_comp.d.next = self.l_resp.val();
            if self.pay_busy.q.val() & !self.l_pay_done.val() {
                self.pay_next.d.next = true;
            }
        }
    }
}
