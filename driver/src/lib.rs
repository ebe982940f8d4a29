//! The RNIC's host software, one crate for the simulator, the CLI and the card.
//!
//! * [`host`]: the host interface of `docs/host-interface.md` (register map, command words, WQE and CQE
//!   layouts): one source of truth, which the RTL's constants and the driver both take.
//! * [`verbs`]: the ibverbs vocabulary (work requests, completions, QP attributes, errors), which the golden
//!   model speaks too.
//! * [`driver`]: [`Driver`], the verbs over the host interface, generic over its two backends:
//!   - the register bus, [`CsrBus`]: the simulator's AXI4-Lite ports (`sim::system::SimBus`), or the card's
//!     register BAR mapped through VFIO ([`vfio::VfioBar`]);
//!   - the DMA memory, [`memory::DmaMemory`]: the simulator's host memory ([`memory::HostMemory`], shared with
//!     its DMA model), or memory pinned and mapped through the IOMMU ([`vfio::VfioDma`]).
//! * [`cm`]: the CM agent on QP1 (REQ/REP/RTU, REJ, MRA, DREQ/DREP and timewait, LAP, SIDR), over any device's
//!   verbs ([`cm::CmVerbs`]).
//! * [`mad`]: the management datagrams on QP1 and the eleven CM messages, built and parsed field for field.
//! * [`pci`]: finding the card in sysfs and checking what VFIO needs, each failure with its fix.
//! * [`vfio`]: the only code that runs on the card alone; its system calls go through a trait and are
//!   tested against a fake kernel.

pub mod cm;
pub mod driver;
pub mod host;
pub mod mad;
pub mod memory;
pub mod pci;
pub mod verbs;
pub mod vfio;

pub use driver::{mtu_code, CsrBus, DeviceInfo, Driver, DriverError};
pub use memory::{DmaMemory, HostMemory};
