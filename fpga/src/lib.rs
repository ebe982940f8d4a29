//! Board tops and the Verilog emission of every block.
//!
//! `blocks()` is the one list of what gets emitted, linted, synthesised and built into Verilator models.

use rust_hdl::prelude::*;

/// One emitted block: its name (a Verilog-safe identifier, also the Verilator model's name) and its
/// Verilog, with the top module named `top` as rust-hdl writes it.
pub struct Emitted {
    pub name: &'static str,
    pub verilog: String,
    /// Register-to-register LUT6 levels the block must meet (the 322 MHz budget is 6). `None` would mark a
    /// block with no budget. Every block's gate checks it in CI; the whole top's (`gate_rnic`, tens of minutes
    /// of Yosys) is an ignored test and `rnic synth --block rnic`, and `docs/bench/depth-history.md` keeps its
    /// measurements.
    pub depth_budget: Option<u64>,
}

/// The current top of the RNIC (`rtl::rnic::Rnic`): every block wired behind the host interface.
pub const TOP: &str = "rnic";

/// A block's name, how to build its Verilog, and its depth budget.
type Entry = (&'static str, fn() -> String, Option<u64>);

/// The list: building the Verilog of a block is lazy, so a gate or a Verilator model needs only its own.
fn table() -> Vec<Entry> {
    vec![
        ("rnic", || rtl::verilog_of(&mut rtl::rnic::Rnic::default()), Some(6)),
        ("icrc_engine", || rtl::verilog_of(&mut rtl::wire::icrc::IcrcEngine::default()), Some(6)),
        ("tx_icrc_append", || rtl::verilog_of(&mut rtl::wire::tx_icrc::TxIcrcAppend::default()), Some(6)),
        ("rx_parse", || rtl::verilog_of(&mut rtl::wire::rx_parse::RxParse::default()), Some(6)),
        ("key_cache", || rtl::verilog_of(&mut rtl::transport::key_cache::KeyCache::<1024, 10>::default()), Some(6)),
        ("psn_check", || rtl::verilog_of(&mut rtl::transport::psn_check::PsnCheck::default()), Some(6)),
        ("qp_context", || rtl::verilog_of(&mut rtl::transport::qp_context::QpContext::<256, 8>::default()), Some(6)),
        ("dma_read_arb", || rtl::verilog_of(&mut rtl::host::dma_arb::DmaReadArb::default()), Some(6)),
        ("dma_write_arb", || rtl::verilog_of(&mut rtl::host::dma_warb::DmaWriteArb::default()), Some(6)),
        ("tx_req_arb", || rtl::verilog_of(&mut rtl::wire::tx_arb::TxReqArb::default()), Some(6)),
        ("tx_frame_mux", || rtl::verilog_of(&mut rtl::wire::tx_mux::TxFrameMux::default()), Some(6)),
        ("tx_frame_buffer", || rtl::verilog_of(&mut rtl::wire::tx_buf::TxFrameBuffer::default()), Some(6)),
        ("req_front", || rtl::verilog_of(&mut rtl::host::req_front::ReqFront::default()), Some(6)),
        ("requester", || rtl::verilog_of(&mut rtl::transport::requester::Requester::default()), Some(6)),
        ("tx_packet_build", || rtl::verilog_of(&mut rtl::wire::tx_build::TxPacketBuild::default()), Some(6)),
        ("gather_path", || rtl::verilog_of(&mut rtl::host::gather::GatherPath::default()), Some(6)),
        ("scatter_path", || rtl::verilog_of(&mut rtl::host::scatter::ScatterPath::default()), Some(6)),
        ("csr", || rtl::verilog_of(&mut rtl::host::csr::Csr::default()), Some(6)),
        ("completer", || rtl::verilog_of(&mut rtl::transport::completer::Completer::default()), Some(6)),
        // the Completer's stage blocks (their depth is measured in the Completer's gate)
        ("comp_intake", || rtl::verilog_of(&mut rtl::transport::completer::intake::RespIntake::default()), Some(6)),
        ("comp_read_place", || rtl::verilog_of(&mut rtl::transport::completer::read_place::ReadPlace::default()), Some(6)),
        ("comp_timer", || rtl::verilog_of(&mut rtl::transport::completer::timer::RetryTimer::default()), Some(6)),
        ("comp_payload", || rtl::verilog_of(&mut rtl::transport::completer::payload::RespPayload::default()), Some(6)),
        ("comp_cqe", || rtl::verilog_of(&mut rtl::transport::completer::cqe::CompCqe::default()), Some(6)),
        ("comp_feedback", || rtl::verilog_of(&mut rtl::transport::completer::feedback::ReqFeedback::default()), Some(6)),
        ("atomic_alu", || rtl::verilog_of(&mut rtl::transport::atomic_unit::AtomicAlu::default()), Some(6)),
        ("sq_ring", || rtl::verilog_of(&mut rtl::host::sq_ring::SqRing::<256, 8>::default()), Some(6)),
        ("cqe_gen", || rtl::verilog_of(&mut rtl::host::cqe_gen::CqeGen::<256, 8>::default()), Some(6)),
        ("arp_responder", || rtl::verilog_of(&mut rtl::wire::arp::ArpResponder::default()), Some(6)),
        ("icmp_echo", || rtl::verilog_of(&mut rtl::wire::icmp::IcmpEcho::default()), Some(6)),
        ("nd_responder", || rtl::verilog_of(&mut rtl::wire::ndp::NdResponder::default()), Some(6)),
        ("vlan_strip", || rtl::verilog_of(&mut rtl::wire::vlan_strip::VlanStrip::default()), Some(6)),
        ("vlan_insert", || rtl::verilog_of(&mut rtl::wire::vlan_insert::VlanInsert::default()), Some(6)),
        ("responder", || rtl::transport::responder::verilog(), Some(6)),
        // the Responder's stage blocks (their depth is measured in the Responder's gate)
        ("resp_recv_queue", || rtl::verilog_of(&mut rtl::transport::responder::recv_queue::RecvQueue::default()), Some(6)),
        ("resp_read_res", || rtl::verilog_of(&mut rtl::transport::responder::read_res::ReadResources::default()), Some(6)),
        ("resp_fast_path", || rtl::verilog_of(&mut rtl::transport::responder::fast_path::FastPath::default()), Some(6)),
        ("resp_take", || rtl::verilog_of(&mut rtl::transport::responder::take::ReqTake::default()), Some(6)),
        ("resp_key_check", || rtl::verilog_of(&mut rtl::transport::responder::key_check::KeyCheck::default()), Some(6)),
        ("resp_checks", || rtl::verilog_of(&mut rtl::transport::responder::checks::RespChecks::default()), Some(6)),
        ("resp_read_reply", || rtl::verilog_of(&mut rtl::transport::responder::read_reply::ReadReply::default()), Some(6)),
        ("resp_atomic", || rtl::verilog_of(&mut rtl::transport::responder::atomic::AtomicRmw::default()), Some(6)),
        ("resp_tx", || rtl::verilog_of(&mut rtl::transport::responder::acknowledge::RespTx::default()), Some(6)),
        ("resp_completion", || rtl::verilog_of(&mut rtl::transport::responder::completion::RecvCompletion::default()), Some(6)),
        ("axis_slice", || rtl::verilog_of(&mut rtl::common::axis_slice::AxisSlice::default()), Some(6)),
        // the board layer's glue (fpga/src/board): each clock domain's logic within the same budget
        ("async_fifo", || rtl::verilog_of(&mut board::cdc::AsyncFifo::<Bits<72>, 4, 5>::default()), Some(6)),
        ("axi_read_master", || rtl::verilog_of(&mut board::dma_axi::AxiReadMaster::default()), Some(6)),
        ("axi_write_master", || rtl::verilog_of(&mut board::dma_axi::AxiWriteMaster::default()), Some(6)),
        ("axil_split", || rtl::verilog_of(&mut board::axil::AxiLiteSplit::default()), Some(6)),
        ("board_regs", || rtl::verilog_of(&mut board::regs::BoardRegs::default()), Some(6)),
        ("cmac_ctl", || rtl::verilog_of(&mut board::cmac_ctl::CmacCtl::default()), Some(6)),
    ]
}

/// Every block with a unit test, emitted as its own top.
pub fn blocks() -> Vec<Emitted> {
    table().into_iter().map(|(name, build, depth_budget)| Emitted { name, verilog: build(), depth_budget }).collect()
}

/// The names of every block, without building any Verilog.
pub fn block_names() -> Vec<&'static str> {
    table().into_iter().map(|(n, _, _)| n).collect()
}

/// One block, built alone.
pub fn block(name: &str) -> Option<Emitted> {
    table().into_iter().find(|(n, _, _)| *n == name).map(|(name, build, depth_budget)| Emitted { name, verilog: build(), depth_budget })
}

/// Verilog for Vivado: rust-hdl's black-box stubs removed.
pub fn for_vivado(v: &str) -> String {
    filter_blackbox_directives(v)
}

pub mod board;
pub mod gates;
