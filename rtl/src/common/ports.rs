//! Port bundles that several blocks share, as rust-hdl interfaces: a block declares one bundle instead of a
//! dozen single signals, and a parent joins a source to a sink in one line.
//!
//! * [`CqSource`] / [`CqSink`]: a work completion on its way to CQE Generation ([`Wc`]: every field of a CQE
//!   but the phase bit), with its valid/ready handshake. The Completer and the Responder (and their
//!   completion stages) are sources; CQE Generation is the sink.

use rust_hdl::prelude::*;

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
