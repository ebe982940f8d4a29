//! Synthesizable blocks of the RoCEv2 RNIC, in rust-hdl. One file per block, its unit test beside it.
pub mod common;
pub mod host;
pub mod rnic;
pub mod transport;
pub mod wire;

// Short paths (`rtl::responder`) for the harnesses and tools outside this crate.
pub use common::{axis, axis_slice, bytemap, consts, counter, fifo, gf2, lut, ring_dist};
pub use wire::{arp, icrc, rx_parse, tx_arb, tx_buf, tx_build, tx_icrc, tx_mux};
pub use host::{cqe_gen, csr, dma_arb, dma_warb, gather, req_front, scatter, sq_ring};
pub use transport::{atomic_unit, completer, key_cache, psn_check, qp_context, requester, responder};

use rust_hdl::prelude::*;

/// Verilog of a block, with every port connected as a top.
pub fn verilog_of<B: Block>(block: &mut B) -> String {
    block.connect_all();
    generate_verilog(block)
}

