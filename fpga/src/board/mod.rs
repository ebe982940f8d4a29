//! The board layer: what sits between the RNIC core and a card's vendor IP (the 100G MAC, the PCIe DMA
//! bridge), in rust-hdl, each block with its unit test.

pub mod cdc;
pub mod cdc_check;
pub mod dma_axi;
pub mod cmac_ctl;
pub mod axil;
pub mod regs;
pub mod u250;
pub mod ip;
pub mod shell;
pub mod top;
pub mod vivado;
