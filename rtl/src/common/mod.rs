//! Building blocks every data path uses: the AXI4-Stream bundles and the register slice, memories and FIFOs,
//! constant tables (GF(2) maps for the CRCs, byte maps for header formers, lookup tables), split counters,
//! ring-index distance, the PSN compare, and the constant builders through which numbers enter `#[hdl_gen]` code.
pub mod axis;
pub mod block;
pub mod axis_slice;
pub mod bytemap;
pub mod consts;
pub mod counter;
pub mod fifo;
pub mod gf2;
pub mod lut;
pub mod ports;
pub mod psn_cmp;
pub mod ring_dist;
