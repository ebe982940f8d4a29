//! Golden RoCEv2 wire model: the one source of truth for every wire constant and packet layout, wire-exact
//! with Linux soft-RoCE (rxe).
//!
//! * [`opcode`]: the IBA opcode table (names, extension headers, payload, position), one `pub const` per opcode.
//! * [`headers`]: BTH and every extension header, with parse/build and the field constants (masks, AETH
//!   syndromes, header lengths).
//! * [`packet`]: BTH + extension headers + payload + pad.
//! * [`frame`]: whole Ethernet frames (RoCEv2 over IPv4/IPv6 with optional VLAN, ARP, others), the ICRC, the
//!   Ethernet/IP/UDP constants, and the classifier [`parse_ethernet`].
//! * [`error`]: [`WireError`].
//!
//! Sources are named in each module: IBA vol. 1 chapter 9, the RoCEv2 annex A17, and Linux
//! `drivers/infiniband/sw/rxe/` (`rxe_hdr.h`, `rxe_opcode.c`, `rxe_icrc.c`, `rxe_net.c`), as summarised in the
//! project's `docs/rxe-rules.md`.

pub mod error;
pub mod frame;
pub mod headers;
/// The MAD and CM message codec is the host software's (the CM agent speaks it); the golden decoder reads it.
pub use rnic_driver::mad;
pub mod ndp;
pub mod opcode;
pub mod packet;
pub mod samples;

pub use error::WireError;
pub use frame::{
    check_icrc, icrc, parse_ethernet, port_vlan_view, ArpFrame, ArpPacket, Ethernet, Frame, IcrcCheck, IpHeader, IpSummary, Ipv4Header,
    Ipv6Header, MacAddr, OtherFrame, RoceFrame, UdpHeader, VlanTag,
};
pub use headers::{
    Aeth, AethKind, AtomicAckEth, AtomicEth, Bth, CnpReserved, Deth, ExtHeader, Feth, HeaderKind, Ieth, ImmDt,
    MaskedCmpSwapEth, MaskedFetchAddEth, NakCode, Rdeth, Reth, WireHeader,
};
pub use opcode::{Opcode, OpcodeInfo, OPCODE_TABLE};
pub use packet::{pad_count, RocePacket};
