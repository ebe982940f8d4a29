//! The host-memory model is the driver's simulated DMA memory ([`rnic_driver::memory::HostMemory`]).

pub use rnic_driver::memory::HostMemory;
