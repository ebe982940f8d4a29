//! The InfiniBand transport part of a RoCEv2 packet: BTH, the opcode's extension headers, payload and pad
//! (everything between the UDP header and the ICRC).
//!
//! Source: IBA vol. 1 section 9 (packet layout), rxe `rxe_hdr.h` (`payload_size`, `bth_pad`) and
//! `rxe_opcode.c` (`rxe_opcode[].offset`, which fixes the header order).

use super::error::WireError;
use super::headers::*;
use super::opcode::{self, Opcode, OpcodeInfo};

/// The BTH PadCnt for a payload of `len` bytes: `(-len) & 3` (rxe `init_req_packet`).
pub fn pad_count(len: usize) -> u8 {
    (len.wrapping_neg() & 3) as u8
}

/// BTH + extension headers + payload + pad.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RocePacket {
    pub bth: Bth,
    /// Extension headers in wire order; must be exactly the opcode's [`OpcodeInfo::headers`].
    pub ext: Vec<ExtHeader>,
    pub payload: Vec<u8>,
    /// Pad bytes; their count must equal `bth.pad_cnt` (zeros on transmit, kept as received on parse).
    pub pad: Vec<u8>,
}

macro_rules! accessor {
    ($name:ident, $variant:ident, $ty:ty) => {
        #[doc = concat!("The ", stringify!($variant), " header, if the packet has one.")]
        pub fn $name(&self) -> Option<&$ty> {
            self.ext.iter().find_map(|h| match h {
                ExtHeader::$variant(x) => Some(x),
                _ => None,
            })
        }
    };
}

impl RocePacket {
    /// A packet with `bth.pad_cnt` set from the payload length and zero pad bytes.
    pub fn new(mut bth: Bth, ext: Vec<ExtHeader>, payload: Vec<u8>) -> Self {
        bth.pad_cnt = pad_count(payload.len());
        let pad = vec![0; bth.pad_cnt as usize];
        RocePacket { bth, ext, payload, pad }
    }

    /// The opcode table row, `None` for an opcode outside the table.
    pub fn info(&self) -> Option<&'static OpcodeInfo> {
        opcode::info(self.bth.opcode)
    }

    /// The typed opcode.
    pub fn opcode(&self) -> Option<Opcode> {
        Opcode::from_u8(self.bth.opcode)
    }

    /// Length on the wire (no ICRC).
    pub fn wire_len(&self) -> usize {
        BTH_LEN + self.ext.iter().map(|h| h.kind().len()).sum::<usize>() + self.payload.len() + self.pad.len()
    }

    accessor!(rdeth, Rdeth, Rdeth);
    accessor!(deth, Deth, Deth);
    accessor!(reth, Reth, Reth);
    accessor!(aeth, Aeth, Aeth);
    accessor!(atomic_eth, AtomicEth, AtomicEth);
    accessor!(atomic_ack_eth, AtomicAckEth, AtomicAckEth);
    accessor!(immdt, ImmDt, ImmDt);
    accessor!(ieth, Ieth, Ieth);
    accessor!(feth, Feth, Feth);
    accessor!(masked_cmp_swap_eth, MaskedCmpSwapEth, MaskedCmpSwapEth);
    accessor!(masked_fetch_add_eth, MaskedFetchAddEth, MaskedFetchAddEth);
    accessor!(cnp_reserved, CnpReserved, CnpReserved);

    /// Parse `body`: the UDP payload without the 4 ICRC bytes. The payload length follows rxe `payload_size`:
    /// body length - header length - PadCnt.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        let (bth, mut off) = Bth::parse(body)?;
        let info = opcode::info(bth.opcode).ok_or(WireError::UnknownOpcode(bth.opcode))?;
        let mut ext = Vec::with_capacity(info.headers.len());
        for &kind in info.headers {
            let (h, n) = ExtHeader::parse(kind, &body[off..])?;
            ext.push(h);
            off += n;
        }
        let rest = &body[off..];
        let pad_len = bth.pad_cnt as usize;
        if rest.len() < pad_len {
            return Err(WireError::BadLength {
                what: "payload with pad",
                got: rest.len(),
                want: pad_len,
            });
        }
        let (payload, pad) = rest.split_at(rest.len() - pad_len);
        if !info.payload && !payload.is_empty() {
            return Err(WireError::UnexpectedPayload {
                opcode: bth.opcode,
                len: payload.len(),
            });
        }
        Ok(RocePacket {
            bth,
            ext,
            payload: payload.to_vec(),
            pad: pad.to_vec(),
        })
    }

    /// Check that the packet can be built: known opcode, the opcode's headers in order, PadCnt matching the pad
    /// bytes, no payload for payload-less opcodes.
    pub fn validate(&self) -> Result<&'static OpcodeInfo, WireError> {
        let info = self.info().ok_or(WireError::UnknownOpcode(self.bth.opcode))?;
        if !self.ext.iter().map(ExtHeader::kind).eq(info.headers.iter().copied()) {
            return Err(WireError::HeaderMismatch {
                opcode: self.bth.opcode,
                want: info.headers.to_vec(),
                got: self.ext.iter().map(ExtHeader::kind).collect(),
            });
        }
        if self.pad.len() != (self.bth.pad_cnt & 3) as usize || self.bth.pad_cnt > 3 {
            return Err(WireError::BadPadCnt {
                pad_cnt: self.bth.pad_cnt,
                pad_len: self.pad.len(),
            });
        }
        if !info.payload && !self.payload.is_empty() {
            return Err(WireError::UnexpectedPayload {
                opcode: self.bth.opcode,
                len: self.payload.len(),
            });
        }
        Ok(info)
    }

    /// Append the wire bytes (no ICRC) after [`RocePacket::validate`].
    pub fn build(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        self.validate()?;
        self.bth.build(out);
        for h in &self.ext {
            h.build(out);
        }
        out.extend_from_slice(&self.payload);
        out.extend_from_slice(&self.pad);
        Ok(())
    }
}
