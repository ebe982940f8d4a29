//! Board tops and the Verilog emission of every block.
//!
//! `blocks()` is the one list of what gets emitted, linted, synthesised and built into Verilator models.

use rust_hdl::prelude::*;

/// One emitted block: its name (a Verilog-safe identifier, also the Verilator model's name) and its
/// Verilog, with the top module named `top` as rust-hdl writes it.
pub struct Emitted {
    pub name: &'static str,
    pub verilog: String,
    /// Register-to-register LUT6 levels the block must meet (the 322 MHz budget is 6). `None` while a
    /// block is known not to meet it yet; README and docs/architecture.md say where its levels go.
    pub depth_budget: Option<u64>,
}

/// The current top of the RNIC (`rtl::rnic::Rnic`): every block wired behind the host interface.
pub const TOP: &str = "rnic";

/// Every block with a unit test, emitted as its own top.
pub fn blocks() -> Vec<Emitted> {
    vec![
        Emitted {
            name: "rnic",
            verilog: rtl::verilog_of(&mut rtl::rnic::Rnic::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "icrc_engine",
            verilog: rtl::verilog_of(&mut rtl::icrc::IcrcEngine::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "tx_icrc_append",
            verilog: rtl::verilog_of(&mut rtl::tx_icrc::TxIcrcAppend::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "rx_parse",
            verilog: rtl::verilog_of(&mut rtl::rx_parse::RxParse::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "key_cache",
            verilog: rtl::verilog_of(&mut rtl::key_cache::KeyCache::<1024, 10>::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "psn_check",
            verilog: rtl::verilog_of(&mut rtl::psn_check::PsnCheck::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "qp_context",
            verilog: rtl::verilog_of(&mut rtl::qp_context::QpContext::<256, 8>::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "dma_read_arb",
            verilog: rtl::verilog_of(&mut rtl::dma_arb::DmaReadArb::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "dma_write_arb",
            verilog: rtl::verilog_of(&mut rtl::dma_warb::DmaWriteArb::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "tx_req_arb",
            verilog: rtl::verilog_of(&mut rtl::tx_arb::TxReqArb::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "tx_frame_mux",
            verilog: rtl::verilog_of(&mut rtl::tx_mux::TxFrameMux::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "req_front",
            verilog: rtl::verilog_of(&mut rtl::req_front::ReqFront::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "requester",
            verilog: rtl::verilog_of(&mut rtl::requester::Requester::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "tx_packet_build",
            verilog: rtl::verilog_of(&mut rtl::tx_build::TxPacketBuild::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "gather_path",
            verilog: rtl::verilog_of(&mut rtl::gather::GatherPath::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "scatter_path",
            verilog: rtl::verilog_of(&mut rtl::scatter::ScatterPath::default()),
            depth_budget: Some(6),
        },
        Emitted { name: "csr", verilog: rtl::verilog_of(&mut rtl::csr::Csr::default()), depth_budget: Some(6) },
        Emitted { name: "completer", verilog: rtl::verilog_of(&mut rtl::completer::Completer::default()), depth_budget: Some(6) },
        Emitted {
            name: "sq_ring",
            verilog: rtl::verilog_of(&mut rtl::sq_ring::SqRing::<256, 8>::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "cqe_gen",
            verilog: rtl::verilog_of(&mut rtl::cqe_gen::CqeGen::<256, 8>::default()),
            depth_budget: Some(6),
        },
        Emitted {
            name: "arp_responder",
            verilog: rtl::verilog_of(&mut rtl::arp::ArpResponder::default()),
            depth_budget: Some(6),
        },
        // built in its own frame (`rtl::responder::verilog`): the Responder is large
        Emitted { name: "responder", verilog: rtl::responder::verilog(), depth_budget: Some(6) },
    ]
}

/// Verilog for Vivado: rust-hdl's black-box stubs removed.
pub fn for_vivado(v: &str) -> String {
    filter_blackbox_directives(v)
}

pub mod gates;
