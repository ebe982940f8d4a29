//! The IBA BTH opcode table: one row per opcode with its name, the extension headers that follow the BTH (in
//! wire order), whether a payload follows, and its message position.
//!
//! Sources:
//! * InfiniBand Architecture Specification vol. 1, section 9.2 (BTH) and table "OpCode field" (opcode = 3-bit
//!   transport class << 5 | 5-bit operation), section 9.3 (which extension headers each packet carries).
//! * Linux `drivers/infiniband/sw/rxe/rxe_opcode.c`, array `rxe_opcode[]` (header masks and offsets per opcode),
//!   and `include/rdma/ib_pack.h` (`IB_OPCODE_*` values). In particular, as Linux rxe sends them:
//!   `IB_OPCODE_RC_FLUSH` (0x1C) carries FETH then RETH and no payload; `IB_OPCODE_RC_ATOMIC_WRITE` (0x1D) carries
//!   RETH and an 8-byte payload; `SEND_*_WITH_INVALIDATE` (0x16/0x17) carry IETH.
//! * RoCEv2 annex A17 (CNP, opcode 0x81: BTH followed by 16 reserved bytes).
//! * Masked atomics: see [`MASKED_COMPARE_SWAP`].
//!
//! The RTL reads its opcode constants from here.

use super::headers::HeaderKind;

/// Transport class: the top 3 bits of the opcode (IBA "OpCode field").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connection, 0x00-0x1F.
    Rc,
    /// Unreliable connection, 0x20-0x3F.
    Uc,
    /// Reliable datagram, 0x40-0x5F (parse/build only; rxe drops RD).
    Rd,
    /// Unreliable datagram, 0x60-0x7F.
    Ud,
    /// RoCEv2 congestion notification packet class, 0x80-0x9F.
    Cnp,
    /// Manufacturer-specific opcodes, 0xC0-0xFF.
    Vendor,
}

/// What kind of operation an opcode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Send,
    Write,
    ReadRequest,
    ReadResponse,
    Ack,
    AtomicAck,
    /// COMPARE_SWAP / FETCH_ADD (AtomicETH).
    Atomic,
    /// Masked (extended) atomics, see [`MASKED_COMPARE_SWAP`].
    MaskedAtomic,
    Flush,
    AtomicWrite,
    Resync,
    Cnp,
}

/// Position of the packet in its message (rxe `RXE_START_MASK` / `RXE_MIDDLE_MASK` / `RXE_END_MASK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pos {
    First,
    Middle,
    Last,
    Only,
}

impl Pos {
    /// First or only packet of a message.
    pub fn is_start(self) -> bool {
        matches!(self, Pos::First | Pos::Only)
    }
    /// Last or only packet of a message.
    pub fn is_end(self) -> bool {
        matches!(self, Pos::Last | Pos::Only)
    }
}

/// One row of [`OPCODE_TABLE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The typed opcode.
    pub opcode: Opcode,
    /// The BTH opcode byte.
    pub code: u8,
    /// Name, as in `ib_pack.h` without the `IB_OPCODE_` prefix (e.g. `RC_SEND_FIRST`).
    pub name: &'static str,
    pub transport: Transport,
    pub kind: OpKind,
    pub pos: Pos,
    /// Extension headers after the BTH, in wire order.
    pub headers: &'static [HeaderKind],
    /// Whether a payload (and pad) may follow the extension headers.
    pub payload: bool,
}

impl OpcodeInfo {
    /// Total length of BTH plus extension headers (rxe `rxe_opcode[].length`).
    pub const fn header_len(&self) -> usize {
        let mut n = super::headers::BTH_LEN;
        let mut i = 0;
        while i < self.headers.len() {
            n += self.headers[i].len();
            i += 1;
        }
        n
    }

    /// Byte offset of extension header `kind` from the start of the BTH (rxe `rxe_opcode[].offset`).
    pub fn offset_of(&self, kind: HeaderKind) -> Option<usize> {
        let mut off = super::headers::BTH_LEN;
        for &h in self.headers {
            if h == kind {
                return Some(off);
            }
            off += h.len();
        }
        None
    }

    /// Whether the opcode carries the given extension header.
    pub fn has(&self, kind: HeaderKind) -> bool {
        self.headers.contains(&kind)
    }

    /// Requests flow requester -> responder; everything else (read responses, ACKs, atomic ACKs) flows back.
    pub fn is_request(&self) -> bool {
        !matches!(
            self.kind,
            OpKind::ReadResponse | OpKind::Ack | OpKind::AtomicAck | OpKind::Cnp
        )
    }
}

macro_rules! opcode_table {
    ($( $variant:ident = $konst:ident = $code:literal, $tr:ident, $kind:ident, $pos:ident, [$($h:ident),*], $payload:literal; )*) => {
        $(
            #[doc = concat!("BTH opcode `", stringify!($konst), "`.")]
            pub const $konst: u8 = $code;
        )*

        /// Every opcode of [`OPCODE_TABLE`] as a typed value; `as u8` gives the BTH opcode byte.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $( $variant = $code, )*
        }

        /// The whole opcode table, ordered by opcode value.
        pub static OPCODE_TABLE: &[OpcodeInfo] = &[
            $( OpcodeInfo {
                opcode: Opcode::$variant,
                code: $code,
                name: stringify!($konst),
                transport: Transport::$tr,
                kind: OpKind::$kind,
                pos: Pos::$pos,
                headers: &[$(HeaderKind::$h),*],
                payload: $payload,
            }, )*
        ];

        impl Opcode {
            /// The typed opcode for a BTH opcode byte, `None` if the byte is not in the table.
            pub const fn from_u8(v: u8) -> Option<Self> {
                match v {
                    $( $code => Some(Opcode::$variant), )*
                    _ => None,
                }
            }
        }
    };
}

opcode_table! {
    // RC (IBA 9.2; rxe_opcode.c)
    RcSendFirst = RC_SEND_FIRST = 0x00, Rc, Send, First, [], true;
    RcSendMiddle = RC_SEND_MIDDLE = 0x01, Rc, Send, Middle, [], true;
    RcSendLast = RC_SEND_LAST = 0x02, Rc, Send, Last, [], true;
    RcSendLastWithImmediate = RC_SEND_LAST_WITH_IMMEDIATE = 0x03, Rc, Send, Last, [ImmDt], true;
    RcSendOnly = RC_SEND_ONLY = 0x04, Rc, Send, Only, [], true;
    RcSendOnlyWithImmediate = RC_SEND_ONLY_WITH_IMMEDIATE = 0x05, Rc, Send, Only, [ImmDt], true;
    RcRdmaWriteFirst = RC_RDMA_WRITE_FIRST = 0x06, Rc, Write, First, [Reth], true;
    RcRdmaWriteMiddle = RC_RDMA_WRITE_MIDDLE = 0x07, Rc, Write, Middle, [], true;
    RcRdmaWriteLast = RC_RDMA_WRITE_LAST = 0x08, Rc, Write, Last, [], true;
    RcRdmaWriteLastWithImmediate = RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, Rc, Write, Last, [ImmDt], true;
    RcRdmaWriteOnly = RC_RDMA_WRITE_ONLY = 0x0A, Rc, Write, Only, [Reth], true;
    RcRdmaWriteOnlyWithImmediate = RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B, Rc, Write, Only, [Reth, ImmDt], true;
    RcRdmaReadRequest = RC_RDMA_READ_REQUEST = 0x0C, Rc, ReadRequest, Only, [Reth], false;
    RcRdmaReadResponseFirst = RC_RDMA_READ_RESPONSE_FIRST = 0x0D, Rc, ReadResponse, First, [Aeth], true;
    RcRdmaReadResponseMiddle = RC_RDMA_READ_RESPONSE_MIDDLE = 0x0E, Rc, ReadResponse, Middle, [], true;
    RcRdmaReadResponseLast = RC_RDMA_READ_RESPONSE_LAST = 0x0F, Rc, ReadResponse, Last, [Aeth], true;
    RcRdmaReadResponseOnly = RC_RDMA_READ_RESPONSE_ONLY = 0x10, Rc, ReadResponse, Only, [Aeth], true;
    RcAcknowledge = RC_ACKNOWLEDGE = 0x11, Rc, Ack, Only, [Aeth], false;
    RcAtomicAcknowledge = RC_ATOMIC_ACKNOWLEDGE = 0x12, Rc, AtomicAck, Only, [Aeth, AtomicAckEth], false;
    RcCompareSwap = RC_COMPARE_SWAP = 0x13, Rc, Atomic, Only, [AtomicEth], false;
    RcFetchAdd = RC_FETCH_ADD = 0x14, Rc, Atomic, Only, [AtomicEth], false;
    RcSendLastWithInvalidate = RC_SEND_LAST_WITH_INVALIDATE = 0x16, Rc, Send, Last, [Ieth], true;
    RcSendOnlyWithInvalidate = RC_SEND_ONLY_WITH_INVALIDATE = 0x17, Rc, Send, Only, [Ieth], true;
    RcFlush = RC_FLUSH = 0x1C, Rc, Flush, Only, [Feth, Reth], false;
    RcAtomicWrite = RC_ATOMIC_WRITE = 0x1D, Rc, AtomicWrite, Only, [Reth], true;
    // UC (IBA 9.2; rxe_opcode.c): sends and writes only.
    UcSendFirst = UC_SEND_FIRST = 0x20, Uc, Send, First, [], true;
    UcSendMiddle = UC_SEND_MIDDLE = 0x21, Uc, Send, Middle, [], true;
    UcSendLast = UC_SEND_LAST = 0x22, Uc, Send, Last, [], true;
    UcSendLastWithImmediate = UC_SEND_LAST_WITH_IMMEDIATE = 0x23, Uc, Send, Last, [ImmDt], true;
    UcSendOnly = UC_SEND_ONLY = 0x24, Uc, Send, Only, [], true;
    UcSendOnlyWithImmediate = UC_SEND_ONLY_WITH_IMMEDIATE = 0x25, Uc, Send, Only, [ImmDt], true;
    UcRdmaWriteFirst = UC_RDMA_WRITE_FIRST = 0x26, Uc, Write, First, [Reth], true;
    UcRdmaWriteMiddle = UC_RDMA_WRITE_MIDDLE = 0x27, Uc, Write, Middle, [], true;
    UcRdmaWriteLast = UC_RDMA_WRITE_LAST = 0x28, Uc, Write, Last, [], true;
    UcRdmaWriteLastWithImmediate = UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29, Uc, Write, Last, [ImmDt], true;
    UcRdmaWriteOnly = UC_RDMA_WRITE_ONLY = 0x2A, Uc, Write, Only, [Reth], true;
    UcRdmaWriteOnlyWithImmediate = UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2B, Uc, Write, Only, [Reth, ImmDt], true;
    // RD (IBA 9.2; rxe_opcode.c): every packet has RDETH, requests also DETH. Parse/build only.
    RdSendFirst = RD_SEND_FIRST = 0x40, Rd, Send, First, [Rdeth, Deth], true;
    RdSendMiddle = RD_SEND_MIDDLE = 0x41, Rd, Send, Middle, [Rdeth, Deth], true;
    RdSendLast = RD_SEND_LAST = 0x42, Rd, Send, Last, [Rdeth, Deth], true;
    RdSendLastWithImmediate = RD_SEND_LAST_WITH_IMMEDIATE = 0x43, Rd, Send, Last, [Rdeth, Deth, ImmDt], true;
    RdSendOnly = RD_SEND_ONLY = 0x44, Rd, Send, Only, [Rdeth, Deth], true;
    RdSendOnlyWithImmediate = RD_SEND_ONLY_WITH_IMMEDIATE = 0x45, Rd, Send, Only, [Rdeth, Deth, ImmDt], true;
    RdRdmaWriteFirst = RD_RDMA_WRITE_FIRST = 0x46, Rd, Write, First, [Rdeth, Deth, Reth], true;
    RdRdmaWriteMiddle = RD_RDMA_WRITE_MIDDLE = 0x47, Rd, Write, Middle, [Rdeth, Deth], true;
    RdRdmaWriteLast = RD_RDMA_WRITE_LAST = 0x48, Rd, Write, Last, [Rdeth, Deth], true;
    RdRdmaWriteLastWithImmediate = RD_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x49, Rd, Write, Last, [Rdeth, Deth, ImmDt], true;
    RdRdmaWriteOnly = RD_RDMA_WRITE_ONLY = 0x4A, Rd, Write, Only, [Rdeth, Deth, Reth], true;
    RdRdmaWriteOnlyWithImmediate = RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x4B, Rd, Write, Only, [Rdeth, Deth, Reth, ImmDt], true;
    RdRdmaReadRequest = RD_RDMA_READ_REQUEST = 0x4C, Rd, ReadRequest, Only, [Rdeth, Deth, Reth], false;
    RdRdmaReadResponseFirst = RD_RDMA_READ_RESPONSE_FIRST = 0x4D, Rd, ReadResponse, First, [Rdeth, Aeth], true;
    RdRdmaReadResponseMiddle = RD_RDMA_READ_RESPONSE_MIDDLE = 0x4E, Rd, ReadResponse, Middle, [Rdeth], true;
    RdRdmaReadResponseLast = RD_RDMA_READ_RESPONSE_LAST = 0x4F, Rd, ReadResponse, Last, [Rdeth, Aeth], true;
    RdRdmaReadResponseOnly = RD_RDMA_READ_RESPONSE_ONLY = 0x50, Rd, ReadResponse, Only, [Rdeth, Aeth], true;
    RdAcknowledge = RD_ACKNOWLEDGE = 0x51, Rd, Ack, Only, [Rdeth, Aeth], false;
    RdAtomicAcknowledge = RD_ATOMIC_ACKNOWLEDGE = 0x52, Rd, AtomicAck, Only, [Rdeth, Aeth, AtomicAckEth], false;
    RdCompareSwap = RD_COMPARE_SWAP = 0x53, Rd, Atomic, Only, [Rdeth, Deth, AtomicEth], false;
    RdFetchAdd = RD_FETCH_ADD = 0x54, Rd, Atomic, Only, [Rdeth, Deth, AtomicEth], false;
    RdResync = RD_RESYNC = 0x55, Rd, Resync, Only, [Rdeth, Deth], false;
    // UD (IBA 9.2; rxe_opcode.c)
    UdSendOnly = UD_SEND_ONLY = 0x64, Ud, Send, Only, [Deth], true;
    UdSendOnlyWithImmediate = UD_SEND_ONLY_WITH_IMMEDIATE = 0x65, Ud, Send, Only, [Deth, ImmDt], true;
    // RoCEv2 CNP (annex A17): 16 reserved bytes after the BTH.
    Cnp = CNP = 0x81, Cnp, Cnp, Only, [CnpReserved], false;
    // Masked (extended) atomics: project-chosen manufacturer-specific opcodes, see MASKED_COMPARE_SWAP.
    MaskedCompareSwap = MASKED_COMPARE_SWAP = 0xD3, Rc, MaskedAtomic, Only, [MaskedCmpSwapEth], false;
    MaskedFetchAdd = MASKED_FETCH_ADD = 0xD4, Rc, MaskedAtomic, Only, [MaskedFetchAddEth], false;
}

// Documentation of the masked-atomic choice, attached to a doc-only item so that it shows in rustdoc.
/// # Masked atomics: where the opcode values come from
///
/// Linux knows masked atomics only as work-request opcodes (`IB_WR_MASKED_ATOMIC_CMP_AND_SWP`,
/// `IB_WR_MASKED_ATOMIC_FETCH_AND_ADD` in `include/rdma/ib_verbs.h`, added by the 2010 "masked atomics" patch;
/// mlx4/mlx5 map them to the WQE opcodes `MLX5_OPCODE_ATOMIC_MASKED_CS`/`_FA`). Mellanox documents the
/// operations (OFED manual, "Enhanced Atomic Operations": MskCmpSwap, MFetchAdd) and says only that "the
/// additional operands are carried in the Extended Transport Header" and that the response is a standard
/// ATOMIC_ACKNOWLEDGE. **No public source gives their BTH opcode values**, and rxe does not implement them
/// (`rxe_opcode.c` has no entry; rxe reports no `masked_atomic_cap`).
///
/// This project therefore uses **vendor-specific opcodes in the IBA manufacturer range 0xC0-0xFF**, chosen as
/// `0xC0 | RC opcode` of the unmasked operation: [`MASKED_COMPARE_SWAP`] = 0xD3 (0xC0 | 0x13) and
/// [`MASKED_FETCH_ADD`] = 0xD4 (0xC0 | 0x14). They have RC semantics (PSN, AckReq, answered with
/// [`RC_ATOMIC_ACKNOWLEDGE`]). Their extension headers are
/// [`crate::wire::headers::MaskedCmpSwapEth`] (va, rkey, swap, compare, swap mask, compare mask) and
/// [`crate::wire::headers::MaskedFetchAddEth`] (va, rkey, add, field boundary). Only peers of this project
/// understand them; never send them to rxe.
pub const MASKED_ATOMIC_OPCODES: [u8; 2] = [MASKED_COMPARE_SWAP, MASKED_FETCH_ADD];

/// Mask of the transport-class bits of the opcode byte.
pub const OPCODE_TRANSPORT_MASK: u8 = 0xE0;
/// Mask of the operation bits of the opcode byte.
pub const OPCODE_OPERATION_MASK: u8 = 0x1F;

/// The transport class of an opcode byte as the 3-bit code of the IBA opcode field (`code >> 5`: RC 0, UC 1,
/// RD 2, UD 3, CNP 4, manufacturer 6 and 7), taken from the opcode table where the byte has a row: the masked
/// atomics sit in the manufacturer range but are RC requests. The one source of this rule for the RTL's
/// transport check (QP Context derives its exception compares from it) and the Rust references.
pub fn transport_bits(code: u8) -> u8 {
    match info(code).map(|i| i.transport) {
        Some(Transport::Rc) => 0,
        Some(Transport::Uc) => 1,
        Some(Transport::Rd) => 2,
        Some(Transport::Ud) => 3,
        Some(Transport::Cnp) => 4,
        Some(Transport::Vendor) | None => code >> 5,
    }
}

/// The table row for a BTH opcode byte.
pub fn info(code: u8) -> Option<&'static OpcodeInfo> {
    Opcode::from_u8(code).map(|op| op.info())
}

impl Opcode {
    /// The table row of this opcode.
    pub fn info(self) -> &'static OpcodeInfo {
        // The table is sorted by code; binary search keeps this O(log n) and panic-free for table members.
        let i = OPCODE_TABLE
            .binary_search_by_key(&(self as u8), |r| r.code)
            .expect("every Opcode variant has a table row");
        &OPCODE_TABLE[i]
    }
    /// The BTH opcode byte.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// The name, e.g. `RC_SEND_FIRST`.
    pub fn name(self) -> &'static str {
        self.info().name
    }
}

impl std::fmt::Display for Opcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_consistent() {
        for w in OPCODE_TABLE.windows(2) {
            assert!(w[0].code < w[1].code, "{} / {}", w[0].name, w[1].name);
        }
        for row in OPCODE_TABLE {
            assert_eq!(row.opcode as u8, row.code);
            assert_eq!(Opcode::from_u8(row.code), Some(row.opcode));
            assert_eq!(info(row.code).unwrap(), row);
            let class = match row.code >> 5 {
                0 => Transport::Rc,
                1 => Transport::Uc,
                2 => Transport::Rd,
                3 => Transport::Ud,
                4 => Transport::Cnp,
                _ => Transport::Vendor,
            };
            if row.kind != OpKind::MaskedAtomic {
                assert_eq!(row.transport, class, "{}", row.name);
            }
        }
        assert_eq!(OPCODE_TABLE.len(), 25 + 12 + 22 + 2 + 1 + 2);
    }

    #[test]
    fn header_lengths_match_rxe() {
        // rxe_opcode.c lengths: BTH 12, RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8, FETH 4.
        assert_eq!(Opcode::RcSendOnly.info().header_len(), 12);
        assert_eq!(Opcode::RcRdmaWriteOnlyWithImmediate.info().header_len(), 12 + 16 + 4);
        assert_eq!(Opcode::RcAtomicAcknowledge.info().header_len(), 12 + 4 + 8);
        assert_eq!(Opcode::RcFetchAdd.info().header_len(), 12 + 28);
        assert_eq!(Opcode::RcFlush.info().header_len(), 12 + 4 + 16);
        assert_eq!(Opcode::RcFlush.info().offset_of(HeaderKind::Reth), Some(16));
        assert_eq!(Opcode::RdCompareSwap.info().header_len(), 12 + 4 + 8 + 28);
        assert_eq!(Opcode::UdSendOnlyWithImmediate.info().header_len(), 12 + 8 + 4);
        assert_eq!(Opcode::Cnp.info().header_len(), 12 + 16);
        assert_eq!(Opcode::MaskedCompareSwap.info().header_len(), 12 + 44);
        assert_eq!(Opcode::MaskedFetchAdd.info().header_len(), 12 + 28);
        assert_eq!(Opcode::RcAcknowledge.to_string(), "RC_ACKNOWLEDGE");
    }
}
