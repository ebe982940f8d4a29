//! Synthesizable blocks of the RoCEv2 RNIC, in rust-hdl. One file per block, its unit test beside it.
pub mod arp;
pub mod atomic_unit;
pub mod axis;
pub mod axis_slice;
pub mod bytemap;
pub mod consts;
pub mod completer;
pub mod counter;
pub mod dma_arb;
pub mod dma_warb;
pub mod cqe_gen;
pub mod csr;
pub mod fifo;
pub mod gather;
pub mod gf2;
pub mod icrc;
pub mod key_cache;
pub mod lut;
pub mod psn_check;
pub mod qp_context;
pub mod req_front;
pub mod requester;
pub mod responder;
pub mod ring_dist;
pub mod rnic;
pub mod rx_parse;
pub mod scatter;
pub mod sq_ring;
pub mod tx_build;
pub mod tx_arb;
pub mod tx_icrc;
pub mod tx_buf;
pub mod tx_mux;

use rust_hdl::prelude::*;

/// Verilog of a block, with every port connected as a top.
pub fn verilog_of<B: Block>(block: &mut B) -> String {
    block.connect_all();
    generate_verilog(block)
}

