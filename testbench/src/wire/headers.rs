//! The InfiniBand transport headers: BTH and every extension header RoCEv2 can carry.
//!
//! Field layouts follow IBA vol. 1 section 9.2-9.3 and Linux `drivers/infiniband/sw/rxe/rxe_hdr.h`
//! (`struct rxe_bth`, `rxe_rdeth`, `rxe_deth`, `rxe_reth`, `rxe_aeth`, `rxe_atmeth`, `rxe_atmack`, `rxe_immdt`,
//! `rxe_ieth`, `rxe_feth` and their `*_MASK` constants). All fields are big-endian on the wire.
//!
//! Every header keeps every bit, reserved ones included, so `parse` followed by `build` gives back the same
//! bytes. `build` masks fields wider than their wire width (e.g. a QPN above 24 bits).

use super::error::{need, WireError};

/// Base Transport Header length.
pub const BTH_LEN: usize = 12;
/// Reliable Datagram Extended Transport Header length.
pub const RDETH_LEN: usize = 4;
/// Datagram Extended Transport Header length.
pub const DETH_LEN: usize = 8;
/// RDMA Extended Transport Header length.
pub const RETH_LEN: usize = 16;
/// ACK Extended Transport Header length.
pub const AETH_LEN: usize = 4;
/// Atomic Extended Transport Header length.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Atomic ACK Extended Transport Header length.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Immediate data length.
pub const IMMDT_LEN: usize = 4;
/// Invalidate Extended Transport Header length.
pub const IETH_LEN: usize = 4;
/// Flush Extended Transport Header length (IBA 1.5 / rxe `struct rxe_feth`).
pub const FETH_LEN: usize = 4;
/// Masked compare-and-swap extended header length (va, rkey, 4 x u64).
pub const MASKED_CMP_SWAP_ETH_LEN: usize = 44;
/// Masked fetch-and-add extended header length (va, rkey, 2 x u64).
pub const MASKED_FETCH_ADD_ETH_LEN: usize = 28;
/// Reserved bytes after the BTH of a RoCEv2 CNP (annex A17).
pub const CNP_RESERVED_LEN: usize = 16;
/// Invariant CRC length.
pub const ICRC_LEN: usize = 4;

/// BTH byte 1: solicited event.
pub const BTH_SE_MASK: u8 = 0x80;
/// BTH byte 1: migration request.
pub const BTH_MIG_MASK: u8 = 0x40;
/// BTH byte 1: pad count.
pub const BTH_PADCNT_MASK: u8 = 0x30;
/// BTH byte 1: pad count shift.
pub const BTH_PADCNT_SHIFT: u32 = 4;
/// BTH byte 1: transport header version.
pub const BTH_TVER_MASK: u8 = 0x0F;
/// The only transport version rxe accepts (`BTH_TVER`).
pub const BTH_TVER: u8 = 0;
/// BTH byte 4: FECN.
pub const BTH_FECN_MASK: u8 = 0x80;
/// BTH byte 4: BECN.
pub const BTH_BECN_MASK: u8 = 0x40;
/// BTH byte 4: the 6 reserved bits in front of the QPN.
pub const BTH_RESV6_MASK: u8 = 0x3F;
/// BTH byte 8: acknowledge request.
pub const BTH_ACK_MASK: u8 = 0x80;
/// BTH byte 8: the 7 reserved bits in front of the PSN.
pub const BTH_RESV7_MASK: u8 = 0x7F;
/// 24-bit QPN mask.
pub const BTH_QPN_MASK: u32 = 0x00FF_FFFF;
/// 24-bit PSN mask (`BTH_PSN_MASK`).
pub const BTH_PSN_MASK: u32 = 0x00FF_FFFF;
/// Default full-membership P_Key, always transmitted by rxe (`IB_DEFAULT_PKEY_FULL`).
pub const DEFAULT_PKEY: u16 = 0xFFFF;
/// The multicast QPN.
pub const MULTICAST_QPN: u32 = 0x00FF_FFFF;
/// GSI QPN (QP1), the CM's QP.
pub const GSI_QPN: u32 = 1;
/// Q_Key of QP1 (`IB_QP1_QKEY`; the driver's constant, which the host interface names).
pub const GSI_QKEY: u32 = rnic_driver::host::GSI_QKEY;

/// AETH: syndrome type mask (bits 7-5 of the syndrome byte).
pub const AETH_TYPE_MASK: u8 = 0xE0;
/// AETH syndrome type: ACK (low 5 bits: credit count).
pub const AETH_TYPE_ACK: u8 = 0x00;
/// AETH syndrome type: RNR NAK (low 5 bits: timer).
pub const AETH_TYPE_RNR_NAK: u8 = 0x20;
/// AETH syndrome type 010: reserved.
pub const AETH_TYPE_RESERVED: u8 = 0x40;
/// AETH syndrome type: NAK (low 5 bits: NAK code).
pub const AETH_TYPE_NAK: u8 = 0x60;
/// AETH low 5 bits (credit, RNR timer or NAK code).
pub const AETH_VALUE_MASK: u8 = 0x1F;
/// ACK with "invalid credit count", i.e. unlimited: the only ACK syndrome rxe sends.
pub const AETH_ACK_UNLIMITED: u8 = 0x1F;
/// NAK: PSN sequence error.
pub const AETH_NAK_PSN_SEQ_ERROR: u8 = 0x60;
/// NAK: invalid request.
pub const AETH_NAK_INVALID_REQUEST: u8 = 0x61;
/// NAK: remote access error.
pub const AETH_NAK_REMOTE_ACCESS_ERROR: u8 = 0x62;
/// NAK: remote operational error.
pub const AETH_NAK_REMOTE_OP_ERROR: u8 = 0x63;
/// NAK: invalid RD request (never sent by rxe).
pub const AETH_NAK_INVALID_RD_REQUEST: u8 = 0x64;
/// 24-bit MSN mask.
pub const AETH_MSN_MASK: u32 = 0x00FF_FFFF;

/// RNR NAK timer encoding (IBA table "Encoding for RNR NAK Timer Field"; rxe `rxe_comp.c` `rnrnak_usec`):
/// microseconds to wait for each 5-bit timer value. rxe's copy has 61410 for value 25; the IBA value is 61440.
pub const RNR_TIMER_USEC: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840, 5_120, 7_680,
    10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
];

/// FETH: placement type bits (rxe_hdr.h `FETH_PLT_MASK`).
pub const FETH_PLT_MASK: u32 = 0x0000_000F;
/// FETH: selectivity level bits (rxe_hdr.h `FETH_SEL_MASK`).
pub const FETH_SEL_MASK: u32 = 0x0000_0030;
/// FETH: selectivity level shift.
pub const FETH_SEL_SHIFT: u32 = 4;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}
fn put24(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes()[1..]);
}

/// A fixed-length header with a parser and a builder.
pub trait WireHeader: Sized {
    /// Length on the wire.
    const LEN: usize;
    /// Name used in errors.
    const NAME: &'static str;
    /// Decode from exactly `LEN` bytes (the caller checked the length).
    fn decode(b: &[u8]) -> Self;
    /// Append the wire bytes to `out`.
    fn build(&self, out: &mut Vec<u8>);

    /// Parse from the front of `buf`; returns the header and the bytes consumed.
    fn parse(buf: &[u8]) -> Result<(Self, usize), WireError> {
        need(buf, Self::LEN, Self::NAME)?;
        Ok((Self::decode(&buf[..Self::LEN]), Self::LEN))
    }
    /// The wire bytes.
    fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        self.build(&mut v);
        v
    }
}

/// Base Transport Header (IBA 9.2; rxe `struct rxe_bth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Bth {
    /// Opcode byte (see [`crate::wire::opcode`]); kept raw so that unknown opcodes still parse at this level.
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// Migration request.
    pub mig_req: bool,
    /// Pad count, 2 bits.
    pub pad_cnt: u8,
    /// Transport header version, 4 bits.
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    /// The 6 reserved bits of byte 4 (kept exactly).
    pub resv6: u8,
    /// Destination QPN, 24 bits.
    pub dest_qpn: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// The 7 reserved bits of byte 8 (kept exactly).
    pub resv7: u8,
    /// Packet sequence number, 24 bits.
    pub psn: u32,
}

impl Bth {
    /// A BTH as rxe sends it: P_Key 0xFFFF, everything else zero except the given fields.
    pub fn new(opcode: u8, dest_qpn: u32, psn: u32) -> Self {
        Bth {
            opcode,
            pkey: DEFAULT_PKEY,
            dest_qpn,
            psn,
            ..Default::default()
        }
    }
}

impl WireHeader for Bth {
    const LEN: usize = BTH_LEN;
    const NAME: &'static str = "BTH";
    fn decode(b: &[u8]) -> Self {
        Bth {
            opcode: b[0],
            se: b[1] & BTH_SE_MASK != 0,
            mig_req: b[1] & BTH_MIG_MASK != 0,
            pad_cnt: (b[1] & BTH_PADCNT_MASK) >> BTH_PADCNT_SHIFT,
            tver: b[1] & BTH_TVER_MASK,
            pkey: be16(&b[2..]),
            fecn: b[4] & BTH_FECN_MASK != 0,
            becn: b[4] & BTH_BECN_MASK != 0,
            resv6: b[4] & BTH_RESV6_MASK,
            dest_qpn: be24(&b[5..]),
            ack_req: b[8] & BTH_ACK_MASK != 0,
            resv7: b[8] & BTH_RESV7_MASK,
            psn: be24(&b[9..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.push(self.opcode);
        out.push(
            (self.se as u8) << 7
                | (self.mig_req as u8) << 6
                | (self.pad_cnt << BTH_PADCNT_SHIFT) & BTH_PADCNT_MASK
                | self.tver & BTH_TVER_MASK,
        );
        out.extend_from_slice(&self.pkey.to_be_bytes());
        out.push((self.fecn as u8) << 7 | (self.becn as u8) << 6 | self.resv6 & BTH_RESV6_MASK);
        put24(out, self.dest_qpn);
        out.push((self.ack_req as u8) << 7 | self.resv7 & BTH_RESV7_MASK);
        put24(out, self.psn);
    }
}

/// Reliable Datagram ETH (IBA 9.3.1; rxe `struct rxe_rdeth`): 8 reserved bits and the 24-bit EE context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Rdeth {
    pub resv: u8,
    pub een: u32,
}

impl WireHeader for Rdeth {
    const LEN: usize = RDETH_LEN;
    const NAME: &'static str = "RDETH";
    fn decode(b: &[u8]) -> Self {
        Rdeth {
            resv: b[0],
            een: be24(&b[1..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.push(self.resv);
        put24(out, self.een);
    }
}

/// Datagram ETH (IBA 9.3.2; rxe `struct rxe_deth`): Q_Key, 8 reserved bits, 24-bit source QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Deth {
    pub qkey: u32,
    pub resv: u8,
    pub src_qp: u32,
}

impl WireHeader for Deth {
    const LEN: usize = DETH_LEN;
    const NAME: &'static str = "DETH";
    fn decode(b: &[u8]) -> Self {
        Deth {
            qkey: be32(b),
            resv: b[4],
            src_qp: be24(&b[5..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.qkey.to_be_bytes());
        out.push(self.resv);
        put24(out, self.src_qp);
    }
}

/// RDMA ETH (IBA 9.3.3; rxe `struct rxe_reth`): virtual address, R_Key, DMA length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl WireHeader for Reth {
    const LEN: usize = RETH_LEN;
    const NAME: &'static str = "RETH";
    fn decode(b: &[u8]) -> Self {
        Reth {
            va: be64(b),
            rkey: be32(&b[8..]),
            dma_len: be32(&b[12..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.dma_len.to_be_bytes());
    }
}

/// NAK codes (AETH syndrome type 011, low 5 bits; IBA table "AETH Syndrome field").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NakCode {
    PsnSequenceError,
    InvalidRequest,
    RemoteAccessError,
    RemoteOperationalError,
    InvalidRdRequest,
    /// Codes 5-31 are reserved.
    Reserved(u8),
}

impl NakCode {
    pub fn from_code(code: u8) -> Self {
        match code & AETH_VALUE_MASK {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            c => NakCode::Reserved(c),
        }
    }
    pub fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & AETH_VALUE_MASK,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "PSN sequence error",
            NakCode::InvalidRequest => "invalid request",
            NakCode::RemoteAccessError => "remote access error",
            NakCode::RemoteOperationalError => "remote operational error",
            NakCode::InvalidRdRequest => "invalid RD request",
            NakCode::Reserved(_) => "reserved NAK code",
        }
    }
}

/// The decoded meaning of an AETH syndrome byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AethKind {
    /// Type 000: ACK with a credit count (0x1F = invalid/unlimited).
    Ack { credit: u8 },
    /// Type 001: RNR NAK with a 5-bit timer (see [`RNR_TIMER_USEC`]).
    RnrNak { timer: u8 },
    /// Type 011: NAK.
    Nak(NakCode),
    /// Types 010, 100-111: reserved.
    Reserved { syndrome: u8 },
}

/// ACK ETH (IBA 9.3.5; rxe `struct rxe_aeth`, `AETH_SYN_MASK`/`AETH_MSN_MASK`): syndrome byte and 24-bit MSN.
/// The syndrome is kept raw; [`Aeth::kind`] decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Aeth {
    pub syndrome: u8,
    pub msn: u32,
}

impl Aeth {
    /// An ACK with the given credit field (rxe always uses [`AETH_ACK_UNLIMITED`]).
    pub fn ack(credit: u8, msn: u32) -> Self {
        Aeth {
            syndrome: AETH_TYPE_ACK | credit & AETH_VALUE_MASK,
            msn,
        }
    }
    /// An RNR NAK with the given 5-bit timer.
    pub fn rnr_nak(timer: u8, msn: u32) -> Self {
        Aeth {
            syndrome: AETH_TYPE_RNR_NAK | timer & AETH_VALUE_MASK,
            msn,
        }
    }
    /// A NAK.
    pub fn nak(code: NakCode, msn: u32) -> Self {
        Aeth {
            syndrome: AETH_TYPE_NAK | code.code(),
            msn,
        }
    }
    /// Decode the syndrome.
    pub fn kind(&self) -> AethKind {
        let v = self.syndrome & AETH_VALUE_MASK;
        match self.syndrome & AETH_TYPE_MASK {
            AETH_TYPE_ACK => AethKind::Ack { credit: v },
            AETH_TYPE_RNR_NAK => AethKind::RnrNak { timer: v },
            AETH_TYPE_NAK => AethKind::Nak(NakCode::from_code(v)),
            _ => AethKind::Reserved {
                syndrome: self.syndrome,
            },
        }
    }
}

impl std::fmt::Display for AethKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            AethKind::Ack {
                credit: AETH_VALUE_MASK,
            } => write!(f, "ACK credit 31 (unlimited)"),
            AethKind::Ack { credit } => write!(f, "ACK credit {credit}"),
            AethKind::RnrNak { timer } => {
                let us = RNR_TIMER_USEC[timer as usize & 31];
                write!(f, "RNR NAK timer {timer} ({}.{:02} ms)", us / 1000, us % 1000 / 10)
            }
            AethKind::Nak(code) => write!(f, "NAK {} ({})", code.code(), code.name()),
            AethKind::Reserved { syndrome } => write!(f, "reserved syndrome 0x{syndrome:02x}"),
        }
    }
}

impl WireHeader for Aeth {
    const LEN: usize = AETH_LEN;
    const NAME: &'static str = "AETH";
    fn decode(b: &[u8]) -> Self {
        Aeth {
            syndrome: b[0],
            msn: be24(&b[1..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.push(self.syndrome);
        put24(out, self.msn);
    }
}

/// Atomic ETH (IBA 9.3.4; rxe `struct rxe_atmeth`): va, R_Key, swap (CMP_SWAP) or add (FETCH_ADD) data, compare
/// data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AtomicEth {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

impl WireHeader for AtomicEth {
    const LEN: usize = ATOMIC_ETH_LEN;
    const NAME: &'static str = "AtomicETH";
    fn decode(b: &[u8]) -> Self {
        AtomicEth {
            va: be64(b),
            rkey: be32(&b[8..]),
            swap_add: be64(&b[12..]),
            compare: be64(&b[20..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.swap_add.to_be_bytes());
        out.extend_from_slice(&self.compare.to_be_bytes());
    }
}

/// Atomic ACK ETH (IBA 9.3.6; rxe `struct rxe_atmack`): the original remote value, big-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AtomicAckEth {
    pub orig: u64,
}

impl WireHeader for AtomicAckEth {
    const LEN: usize = ATOMIC_ACK_ETH_LEN;
    const NAME: &'static str = "AtomicAckETH";
    fn decode(b: &[u8]) -> Self {
        AtomicAckEth { orig: be64(b) }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.orig.to_be_bytes());
    }
}

/// Immediate data (IBA 9.3.7; rxe `struct rxe_immdt`). `imm` is the 4 wire bytes read big-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ImmDt {
    pub imm: u32,
}

impl WireHeader for ImmDt {
    const LEN: usize = IMMDT_LEN;
    const NAME: &'static str = "ImmDt";
    fn decode(b: &[u8]) -> Self {
        ImmDt { imm: be32(b) }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.imm.to_be_bytes());
    }
}

/// Invalidate ETH (IBA 9.3.8; rxe `struct rxe_ieth`): the R_Key to invalidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Ieth {
    pub rkey: u32,
}

impl WireHeader for Ieth {
    const LEN: usize = IETH_LEN;
    const NAME: &'static str = "IETH";
    fn decode(b: &[u8]) -> Self {
        Ieth { rkey: be32(b) }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rkey.to_be_bytes());
    }
}

/// Flush ETH (IBA 1.5 FLUSH; rxe `struct rxe_feth`, `FETH_PLT_MASK`, `FETH_SEL_MASK`). Kept as the raw 32-bit
/// word; the accessors decode placement type and selectivity level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Feth {
    pub raw: u32,
}

impl Feth {
    pub fn new(selectivity: u8, placement_type: u8) -> Self {
        Feth {
            raw: (selectivity as u32) << FETH_SEL_SHIFT & FETH_SEL_MASK | placement_type as u32 & FETH_PLT_MASK,
        }
    }
    /// Placement type (bit 0: global visibility, bit 1: persistence).
    pub fn placement_type(&self) -> u8 {
        (self.raw & FETH_PLT_MASK) as u8
    }
    /// Selectivity level (0: memory region range, 1: whole memory region).
    pub fn selectivity(&self) -> u8 {
        ((self.raw & FETH_SEL_MASK) >> FETH_SEL_SHIFT) as u8
    }
}

impl WireHeader for Feth {
    const LEN: usize = FETH_LEN;
    const NAME: &'static str = "FETH";
    fn decode(b: &[u8]) -> Self {
        Feth { raw: be32(b) }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.raw.to_be_bytes());
    }
}

/// Masked compare-and-swap extended header (Mellanox "MskCmpSwap"; opcode [`crate::wire::opcode::MASKED_COMPARE_SWAP`]):
/// va and R_Key as in AtomicETH, then swap, compare, swap mask, compare mask. The target becomes
/// `(*va & !swap_mask) | (swap & swap_mask)` if `((compare ^ *va) & compare_mask) == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct MaskedCmpSwapEth {
    pub va: u64,
    pub rkey: u32,
    pub swap: u64,
    pub compare: u64,
    pub swap_mask: u64,
    pub compare_mask: u64,
}

impl WireHeader for MaskedCmpSwapEth {
    const LEN: usize = MASKED_CMP_SWAP_ETH_LEN;
    const NAME: &'static str = "MaskedCmpSwapETH";
    fn decode(b: &[u8]) -> Self {
        MaskedCmpSwapEth {
            va: be64(b),
            rkey: be32(&b[8..]),
            swap: be64(&b[12..]),
            compare: be64(&b[20..]),
            swap_mask: be64(&b[28..]),
            compare_mask: be64(&b[36..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        for v in [self.swap, self.compare, self.swap_mask, self.compare_mask] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// Masked fetch-and-add extended header (Mellanox "MFetchAdd"; opcode [`crate::wire::opcode::MASKED_FETCH_ADD`]):
/// va and R_Key as in AtomicETH, then the add value and the field-boundary mask (a set bit ends a field: no
/// carry out of that bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct MaskedFetchAddEth {
    pub va: u64,
    pub rkey: u32,
    pub add: u64,
    pub field_boundary: u64,
}

impl WireHeader for MaskedFetchAddEth {
    const LEN: usize = MASKED_FETCH_ADD_ETH_LEN;
    const NAME: &'static str = "MaskedFetchAddETH";
    fn decode(b: &[u8]) -> Self {
        MaskedFetchAddEth {
            va: be64(b),
            rkey: be32(&b[8..]),
            add: be64(&b[12..]),
            field_boundary: be64(&b[20..]),
        }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.add.to_be_bytes());
        out.extend_from_slice(&self.field_boundary.to_be_bytes());
    }
}

/// The 16 reserved bytes that follow the BTH of a RoCEv2 CNP (annex A17), kept exactly (zero on transmit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CnpReserved {
    pub bytes: [u8; CNP_RESERVED_LEN],
}

impl WireHeader for CnpReserved {
    const LEN: usize = CNP_RESERVED_LEN;
    const NAME: &'static str = "CNP reserved";
    fn decode(b: &[u8]) -> Self {
        let mut bytes = [0u8; CNP_RESERVED_LEN];
        bytes.copy_from_slice(&b[..CNP_RESERVED_LEN]);
        CnpReserved { bytes }
    }
    fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bytes);
    }
}

/// Which extension header (the opcode table lists these per opcode, rxe `enum rxe_hdr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HeaderKind {
    Rdeth,
    Deth,
    Reth,
    Aeth,
    AtomicEth,
    AtomicAckEth,
    ImmDt,
    Ieth,
    Feth,
    MaskedCmpSwapEth,
    MaskedFetchAddEth,
    CnpReserved,
}

impl HeaderKind {
    /// Length on the wire.
    pub const fn len(self) -> usize {
        match self {
            HeaderKind::Rdeth => RDETH_LEN,
            HeaderKind::Deth => DETH_LEN,
            HeaderKind::Reth => RETH_LEN,
            HeaderKind::Aeth => AETH_LEN,
            HeaderKind::AtomicEth => ATOMIC_ETH_LEN,
            HeaderKind::AtomicAckEth => ATOMIC_ACK_ETH_LEN,
            HeaderKind::ImmDt => IMMDT_LEN,
            HeaderKind::Ieth => IETH_LEN,
            HeaderKind::Feth => FETH_LEN,
            HeaderKind::MaskedCmpSwapEth => MASKED_CMP_SWAP_ETH_LEN,
            HeaderKind::MaskedFetchAddEth => MASKED_FETCH_ADD_ETH_LEN,
            HeaderKind::CnpReserved => CNP_RESERVED_LEN,
        }
    }
}

/// One extension header with its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    Rdeth(Rdeth),
    Deth(Deth),
    Reth(Reth),
    Aeth(Aeth),
    AtomicEth(AtomicEth),
    AtomicAckEth(AtomicAckEth),
    ImmDt(ImmDt),
    Ieth(Ieth),
    Feth(Feth),
    MaskedCmpSwapEth(MaskedCmpSwapEth),
    MaskedFetchAddEth(MaskedFetchAddEth),
    CnpReserved(CnpReserved),
}

impl ExtHeader {
    pub fn kind(&self) -> HeaderKind {
        match self {
            ExtHeader::Rdeth(_) => HeaderKind::Rdeth,
            ExtHeader::Deth(_) => HeaderKind::Deth,
            ExtHeader::Reth(_) => HeaderKind::Reth,
            ExtHeader::Aeth(_) => HeaderKind::Aeth,
            ExtHeader::AtomicEth(_) => HeaderKind::AtomicEth,
            ExtHeader::AtomicAckEth(_) => HeaderKind::AtomicAckEth,
            ExtHeader::ImmDt(_) => HeaderKind::ImmDt,
            ExtHeader::Ieth(_) => HeaderKind::Ieth,
            ExtHeader::Feth(_) => HeaderKind::Feth,
            ExtHeader::MaskedCmpSwapEth(_) => HeaderKind::MaskedCmpSwapEth,
            ExtHeader::MaskedFetchAddEth(_) => HeaderKind::MaskedFetchAddEth,
            ExtHeader::CnpReserved(_) => HeaderKind::CnpReserved,
        }
    }

    /// Parse a header of the given kind from the front of `buf`.
    pub fn parse(kind: HeaderKind, buf: &[u8]) -> Result<(Self, usize), WireError> {
        fn p<H: WireHeader>(buf: &[u8], f: fn(H) -> ExtHeader) -> Result<(ExtHeader, usize), WireError> {
            H::parse(buf).map(|(h, n)| (f(h), n))
        }
        match kind {
            HeaderKind::Rdeth => p(buf, ExtHeader::Rdeth),
            HeaderKind::Deth => p(buf, ExtHeader::Deth),
            HeaderKind::Reth => p(buf, ExtHeader::Reth),
            HeaderKind::Aeth => p(buf, ExtHeader::Aeth),
            HeaderKind::AtomicEth => p(buf, ExtHeader::AtomicEth),
            HeaderKind::AtomicAckEth => p(buf, ExtHeader::AtomicAckEth),
            HeaderKind::ImmDt => p(buf, ExtHeader::ImmDt),
            HeaderKind::Ieth => p(buf, ExtHeader::Ieth),
            HeaderKind::Feth => p(buf, ExtHeader::Feth),
            HeaderKind::MaskedCmpSwapEth => p(buf, ExtHeader::MaskedCmpSwapEth),
            HeaderKind::MaskedFetchAddEth => p(buf, ExtHeader::MaskedFetchAddEth),
            HeaderKind::CnpReserved => p(buf, ExtHeader::CnpReserved),
        }
    }

    /// Append the wire bytes.
    pub fn build(&self, out: &mut Vec<u8>) {
        match self {
            ExtHeader::Rdeth(h) => h.build(out),
            ExtHeader::Deth(h) => h.build(out),
            ExtHeader::Reth(h) => h.build(out),
            ExtHeader::Aeth(h) => h.build(out),
            ExtHeader::AtomicEth(h) => h.build(out),
            ExtHeader::AtomicAckEth(h) => h.build(out),
            ExtHeader::ImmDt(h) => h.build(out),
            ExtHeader::Ieth(h) => h.build(out),
            ExtHeader::Feth(h) => h.build(out),
            ExtHeader::MaskedCmpSwapEth(h) => h.build(out),
            ExtHeader::MaskedFetchAddEth(h) => h.build(out),
            ExtHeader::CnpReserved(h) => h.build(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bth_keeps_every_bit() {
        let bytes = [0x04, 0xBF, 0x12, 0x34, 0xFF, 0xAB, 0xCD, 0xEF, 0xFF, 0x12, 0x34, 0x56];
        let (b, n) = Bth::parse(&bytes).unwrap();
        assert_eq!(n, 12);
        assert!(b.se && !b.mig_req && b.fecn && b.becn && b.ack_req);
        assert_eq!(
            (b.pad_cnt, b.tver, b.pkey, b.resv6, b.resv7),
            (3, 0xF, 0x1234, 0x3F, 0x7F)
        );
        assert_eq!((b.dest_qpn, b.psn), (0xABCDEF, 0x123456));
        assert_eq!(b.to_bytes(), bytes);
    }

    #[test]
    fn aeth_kinds() {
        assert_eq!(Aeth { syndrome: 0x1F, msn: 1 }.kind(), AethKind::Ack { credit: 31 });
        assert_eq!(Aeth { syndrome: 0x2C, msn: 1 }.kind(), AethKind::RnrNak { timer: 12 });
        assert_eq!(
            Aeth { syndrome: 0x60, msn: 1 }.kind(),
            AethKind::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Aeth { syndrome: 0x63, msn: 1 }.kind(),
            AethKind::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            Aeth { syndrome: 0x45, msn: 1 }.kind(),
            AethKind::Reserved { syndrome: 0x45 }
        );
        assert_eq!(Aeth::nak(NakCode::InvalidRequest, 0).syndrome, AETH_NAK_INVALID_REQUEST);
        assert_eq!(Aeth::rnr_nak(12, 0).kind().to_string(), "RNR NAK timer 12 (0.64 ms)");
        let a = Aeth {
            syndrome: 0x61,
            msn: 0xABCDEF,
        };
        assert_eq!(Aeth::parse(&a.to_bytes()).unwrap().0, a);
    }

    #[test]
    fn truncated_header_is_typed() {
        assert_eq!(
            Reth::parse(&[0; 15]),
            Err(WireError::Truncated {
                what: "RETH",
                need: 16,
                have: 15
            })
        );
    }
}
