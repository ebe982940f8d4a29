//! Synthesizable blocks of the RoCEv2 RNIC, in rust-hdl. One file per block, its unit test beside it.
pub mod common;
pub mod host;
pub mod rnic;
pub mod transport;
pub mod wire;

use rust_hdl::prelude::*;

/// Verilog of a block, with every port connected as a top.
pub fn verilog_of<B: Block>(block: &mut B) -> String {
    block.connect_all();
    generate_verilog(block)
}

