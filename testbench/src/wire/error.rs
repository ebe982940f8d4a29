//! Typed errors of the wire model. Parsing never panics: every malformed input maps to one of these.

use thiserror::Error;

use super::headers::HeaderKind;

/// Everything that can go wrong when parsing or building a frame.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    /// The input ends before a header or field is complete.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// The BTH opcode is not in [`crate::wire::opcode::OPCODE_TABLE`].
    #[error("unknown BTH opcode 0x{0:02x}")]
    UnknownOpcode(u8),
    /// The IP version nibble does not match the ethertype (or is neither 4 nor 6).
    #[error("bad IP version {0}")]
    BadIpVersion(u8),
    /// The frame is well formed but is not RoCEv2 (wrong ethertype, protocol or UDP port).
    #[error("not RoCEv2: {0}")]
    NotRoce(&'static str),
    /// The ICRC on the wire differs from the one computed over the frame (values are CRC-32 values, the wire
    /// carries them least-significant byte first).
    #[error("bad ICRC: wire 0x{got:08x}, computed 0x{want:08x}")]
    BadIcrc { got: u32, want: u32 },
    /// The IPv4 header checksum is wrong.
    #[error("bad IPv4 header checksum: 0x{got:04x}, want 0x{want:04x}")]
    BadIpChecksum { got: u16, want: u16 },
    /// A length field disagrees with the bytes present or with another length field.
    #[error("bad length: {what} is {got}, expected {want}")]
    BadLength {
        what: &'static str,
        got: usize,
        want: usize,
    },
    /// IPv4 header with options (IHL != 5): RoCEv2 (rxe `prepare_ipv4_hdr`) never sends options.
    #[error("IPv4 header with options (IHL {0}) is not RoCEv2")]
    Ipv4Options(u8),
    /// An IPv4 fragment (MF set or non-zero offset): rxe sets DF and never fragments.
    #[error("IPv4 fragment (flags 0x{flags:x}, offset {offset})")]
    Fragmented { flags: u8, offset: u16 },
    /// The pad bytes do not match the BTH PadCnt.
    #[error("BTH PadCnt {pad_cnt} but {pad_len} pad bytes given")]
    BadPadCnt { pad_cnt: u8, pad_len: usize },
    /// The extension headers given do not match what the opcode requires.
    #[error("opcode 0x{opcode:02x} needs extension headers {want:?}, got {got:?}")]
    HeaderMismatch {
        opcode: u8,
        want: Vec<HeaderKind>,
        got: Vec<HeaderKind>,
    },
    /// A payload was given (or found) for an opcode without payload.
    #[error("opcode 0x{opcode:02x} carries no payload, got {len} bytes")]
    UnexpectedPayload { opcode: u8, len: usize },
    /// The datagram would not fit the 16-bit IP/UDP length fields.
    #[error("datagram too long: {0} bytes")]
    TooLong(usize),
    /// The frame's ethertype is not the one the parser expects.
    #[error("wrong ethertype 0x{got:04x}, expected 0x{want:04x}")]
    WrongEthertype { got: u16, want: u16 },
    /// ARP for something other than Ethernet/IPv4.
    #[error("unsupported ARP (htype {htype}, ptype 0x{ptype:04x}, hlen {hlen}, plen {plen})")]
    UnsupportedArp { htype: u16, ptype: u16, hlen: u8, plen: u8 },
}

impl WireError {
    /// True for the "input ended too early" family.
    pub fn is_truncated(&self) -> bool {
        matches!(self, WireError::Truncated { .. })
    }
}

/// Return `Truncated` unless `buf` holds at least `need` bytes.
pub(crate) fn need(buf: &[u8], need: usize, what: &'static str) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::Truncated {
            what,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}
