//! The host side: the register and doorbell slave, the Send Queue Ring and WQE Prefetch, WQE Check, the
//! Gather Path (host memory → payload) and Scatter Path (payload → host memory), the two DMA arbiters, and
//! CQE Generation.
pub mod cqe_gen;
pub mod csr;
pub mod dma_arb;
pub mod dma_warb;
pub mod gather;
pub mod req_front;
pub mod scatter;
pub mod sq_ring;
