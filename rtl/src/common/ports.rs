//! Port bundles that several blocks share, as rust-hdl interfaces: a block declares one bundle instead of a
//! dozen single signals, and a parent joins a source to a sink in one line.
//!
//! * [`CqSource`] / [`CqSink`]: a work completion on its way to CQE Generation ([`Wc`]: every field of a CQE
//!   but the phase bit), with its valid/ready handshake. The Completer and the Responder (and their
//!   completion stages) are sources; CQE Generation is the sink.
//! * [`DmaRead`] / [`DmaReadTarget`]: a DMA read port, request and in-order response beats.
//! * [`DmaWrite`] / [`DmaWriteTarget`]: a DMA write port, 64-byte beats with byte strobes, a command's last
//!   beat marked.
//! * [`TxPacket`] / [`TxPacketSink`]: a packet to send, its header for TX Packet Build and its payload's
//!   gather command for the Gather Path, kept paired.
//! * [`ScatterCmd`] / [`ScatterCmdSink`]: a Scatter Path command (host byte address, length); its payload
//!   follows on an AXI stream.

use rust_hdl::prelude::*;

use crate::wire::tx_build::TxHeader;

/// A work completion: the CQ it goes to and the CQE's fields (`docs/host-interface.md`, CQE format).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct Wc {
    pub cqn: Bits<24>,
    pub wr_id: Bits<64>,
    pub byte_len: Bits<32>,
    pub imm: Bits<32>,
    pub qp_num: Bits<24>,
    pub src_qp: Bits<24>,
    pub status: Bits<8>,
    pub opcode: Bits<8>,
    pub wc_flags: Bits<8>,
}

/// A completion's fields as numbers, for the tests that check a completion port against the golden model's
/// work completions (the Completer's and the Responder's).
#[cfg(test)]
#[derive(Clone, Debug, PartialEq)]
pub struct WcSeen {
    pub cqn: u64,
    pub wr_id: u64,
    pub byte_len: u64,
    pub imm: u64,
    pub qp_num: u64,
    pub src_qp: u64,
    pub status: u64,
    pub opcode: u64,
    pub flags: u64,
}

#[cfg(test)]
impl WcSeen {
    /// What the golden model's completion `wc` on CQ `cqn` is on the port (the immediate in wire byte order,
    /// the flags' low byte).
    pub fn of_model(wc: &rnic_driver::verbs::WorkCompletion, cqn: u64) -> Self {
        use rnic_driver::host::{wc_opcode_code, wc_status_code};
        WcSeen {
            cqn,
            wr_id: wc.wr_id,
            byte_len: wc.byte_len as u64,
            // CQE bytes 12..15: the immediate in wire order, or the invalidated R_Key little-endian
            imm: if wc.wc_flags.has(rnic_driver::verbs::WcFlags::WITH_INV) {
                wc.invalidated_rkey as u64
            } else {
                wc.imm_data.swap_bytes() as u64
            },
            qp_num: wc.qp_num as u64,
            src_qp: wc.src_qp as u64,
            status: wc_status_code(wc.status) as u64,
            opcode: wc_opcode_code(wc.opcode) as u64,
            flags: (wc.wc_flags.0 & 0xFF) as u64,
        }
    }

    /// What a completion port carries.
    pub fn of_port(wc: &Wc) -> Self {
        WcSeen {
            cqn: wc.cqn.to_u64(),
            wr_id: wc.wr_id.to_u64(),
            byte_len: wc.byte_len.to_u64(),
            imm: wc.imm.to_u64(),
            qp_num: wc.qp_num.to_u64(),
            src_qp: wc.src_qp.to_u64(),
            status: wc.status.to_u64(),
            opcode: wc.opcode.to_u64(),
            flags: wc.wc_flags.to_u64(),
        }
    }
}

/// The sending side of a completion port.
#[derive(LogicInterface, Default)]
#[join = "CqSink"]
pub struct CqSource {
    pub valid: Signal<Out, Bit>,
    pub ready: Signal<In, Bit>,
    pub wc: Signal<Out, Wc>,
}

/// The receiving side of a completion port.
#[derive(LogicInterface, Default)]
#[join = "CqSource"]
pub struct CqSink {
    pub valid: Signal<In, Bit>,
    pub ready: Signal<Out, Bit>,
    pub wc: Signal<In, Wc>,
}

/// A DMA read requester's port (`docs/host-interface.md`, DMA ports): a request (`req_addr`, `req_len` bytes,
/// `req_tag`), then its response beats in request order, the last marked. WQE Prefetch, the Responder and the
/// Gather Path are requesters; the DMA read arbiters serve them.
#[derive(LogicInterface, Default)]
#[join = "DmaReadTarget"]
pub struct DmaRead {
    pub req_valid: Signal<Out, Bit>,
    pub req_ready: Signal<In, Bit>,
    pub req_addr: Signal<Out, Bits<64>>,
    pub req_len: Signal<Out, Bits<13>>,
    pub req_tag: Signal<Out, Bits<8>>,
    pub resp_valid: Signal<In, Bit>,
    pub resp_ready: Signal<Out, Bit>,
    pub resp_data: Signal<In, Bits<512>>,
    pub resp_tag: Signal<In, Bits<8>>,
    pub resp_last: Signal<In, Bit>,
}

/// The serving side of [`DmaRead`].
#[derive(LogicInterface, Default)]
#[join = "DmaRead"]
pub struct DmaReadTarget {
    pub req_valid: Signal<In, Bit>,
    pub req_ready: Signal<Out, Bit>,
    pub req_addr: Signal<In, Bits<64>>,
    pub req_len: Signal<In, Bits<13>>,
    pub req_tag: Signal<In, Bits<8>>,
    pub resp_valid: Signal<Out, Bit>,
    pub resp_ready: Signal<In, Bit>,
    pub resp_data: Signal<Out, Bits<512>>,
    pub resp_tag: Signal<Out, Bits<8>>,
    pub resp_last: Signal<Out, Bit>,
}

/// A DMA write source's port (`docs/host-interface.md`, DMA ports): 64-byte-aligned beat address, data, byte
/// strobes, `last` on a command's last beat. The Scatter Paths and CQE Generation (single-beat commands,
/// `last` always high) are sources; the DMA write arbiters serve them.
#[derive(LogicInterface, Default)]
#[join = "DmaWriteTarget"]
pub struct DmaWrite {
    pub valid: Signal<Out, Bit>,
    pub ready: Signal<In, Bit>,
    pub addr: Signal<Out, Bits<64>>,
    pub data: Signal<Out, Bits<512>>,
    pub strb: Signal<Out, Bits<64>>,
    pub last: Signal<Out, Bit>,
}

/// The serving side of [`DmaWrite`].
#[derive(LogicInterface, Default)]
#[join = "DmaWrite"]
pub struct DmaWriteTarget {
    pub valid: Signal<In, Bit>,
    pub ready: Signal<Out, Bit>,
    pub addr: Signal<In, Bits<64>>,
    pub data: Signal<In, Bits<512>>,
    pub strb: Signal<In, Bits<64>>,
    pub last: Signal<In, Bit>,
}

/// A packet to send: its header for TX Packet Build and, when the header has payload, the gather command for
/// that payload (`g_inl`: from the inline data slots), issued with it and in header order. The Requester and the
/// Responder are sources; the TX request arbiter serves them and is one itself.
#[derive(LogicInterface, Default)]
#[join = "TxPacketSink"]
pub struct TxPacket {
    pub hdr: Signal<Out, TxHeader>,
    pub hdr_valid: Signal<Out, Bit>,
    pub hdr_ready: Signal<In, Bit>,
    pub g_valid: Signal<Out, Bit>,
    pub g_ready: Signal<In, Bit>,
    pub g_addr: Signal<Out, Bits<64>>,
    pub g_len: Signal<Out, Bits<13>>,
    pub g_inl: Signal<Out, Bit>,
}

/// The serving side of [`TxPacket`].
#[derive(LogicInterface, Default)]
#[join = "TxPacket"]
pub struct TxPacketSink {
    pub hdr: Signal<In, TxHeader>,
    pub hdr_valid: Signal<In, Bit>,
    pub hdr_ready: Signal<Out, Bit>,
    pub g_valid: Signal<In, Bit>,
    pub g_ready: Signal<Out, Bit>,
    pub g_addr: Signal<In, Bits<64>>,
    pub g_len: Signal<In, Bits<13>>,
    pub g_inl: Signal<In, Bit>,
}

/// A Scatter Path command: `len` bytes (0..=4096) to host byte address `addr`, the payload on the AXI stream
/// beside it. The Responder and the Completer are sources; their Scatter Paths are the sinks.
#[derive(LogicInterface, Default)]
#[join = "ScatterCmdSink"]
pub struct ScatterCmd {
    pub valid: Signal<Out, Bit>,
    pub ready: Signal<In, Bit>,
    pub addr: Signal<Out, Bits<64>>,
    pub len: Signal<Out, Bits<13>>,
}

/// The serving side of [`ScatterCmd`].
#[derive(LogicInterface, Default)]
#[join = "ScatterCmd"]
pub struct ScatterCmdSink {
    pub valid: Signal<In, Bit>,
    pub ready: Signal<Out, Bit>,
    pub addr: Signal<In, Bits<64>>,
    pub len: Signal<In, Bits<13>>,
}
