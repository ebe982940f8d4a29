//! Board tops and the Verilog emission of every block.
//!
//! `blocks()` is the one list of what gets emitted, linted, synthesised and built into Verilator models.

use rust_hdl::prelude::*;

/// One emitted block: its name (a Verilog-safe identifier, also the Verilator model's name) and its
/// Verilog, with the top module named `top` as rust-hdl writes it.
pub struct Emitted {
    pub name: &'static str,
    pub verilog: String,
}

/// The current top of the RNIC. Grows as blocks land; today it is the ICRC engine.
pub const TOP: &str = "icrc_engine";

/// Every block with a unit test, emitted as its own top.
pub fn blocks() -> Vec<Emitted> {
    vec![Emitted { name: "icrc_engine", verilog: rtl::verilog_of(&mut rtl::icrc::IcrcEngine::default()) }]
}

/// Verilog for Vivado: rust-hdl's black-box stubs removed.
pub fn for_vivado(v: &str) -> String {
    filter_blackbox_directives(v)
}

pub mod gates;
