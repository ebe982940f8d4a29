//! The Completer's records and counters: a QP's completer configuration ([`CompCfg`]) and state
//! ([`CompSt`]), a pending WQE's record in the per-QP ring ([`Pend`]), the WR opcode table, the counter
//! indices, and the sequencer's states ([`CompState`]).

use rust_hdl::prelude::*;

use rnic_driver::host::{wc_opcode_code, wr_opcode_of};
use testbench::model::WcOpcode;

pub const CNT_ACKS: usize = 0;
pub const CNT_NAKS: usize = 1;
pub const CNT_RNR_NAKS: usize = 2;
pub const CNT_DROPPED: usize = 3;
pub const CNT_BAD: usize = 4;
pub const CNT_IMPLIED_NAKS: usize = 5;
pub const CNT_ATOMIC_ACKS: usize = 6;
/// Go-back-N passes started (rewinds sent to WQE Check).
pub const CNT_RETRIES: usize = 7;
/// Retransmit-timer expiries that started one.
pub const CNT_TIMEOUTS: usize = 8;
pub const COMP_COUNTERS: usize = 9;

/// A QP's completer configuration (CMD_WRITE_QP): its send CQ, its retry attributes, its service type.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CompCfg {
    pub cqn: Bits<24>,
    pub timeout: Bits<5>,
    pub retry_cnt: Bits<3>,
    pub rnr_retry: Bits<3>,
    /// A UC QP: its WQEs complete as their record comes (rxe completes UC and UD WQEs on transmit).
    pub uc: Bit,
}

/// Pending records per QP (ring slots): what one QP can have in flight. A 64-byte WRITE's round trip from
/// its record to its ACK is about 500 cycles in `rnic bench`, so 16 slots held one QP to one message per 31
/// cycles; 64 cover that round trip at one message per 8 cycles. The ring address is {QPN[7:0], slot[5:0]}.
pub const COMP_RING: usize = 64;
// The ring's address widths (`ring: SdpRam<Pend, 14>`, slot bits 5:0) and the head/tail width (7) in
// `mod.rs` and `CompSt` follow from this size.
const _: () = assert!(COMP_RING == 1 << 6);

/// The WR opcode table: bits 7:0 the WC opcode (`WcOpcode::from_wr`), bit 8 WITH_IMM, bit 9 READ, bit 10
/// atomic, bit 11 READ or atomic, bit 12 a local operation (LOCAL_INV: no packets, completed at the head).
pub fn wr_class_table() -> Vec<u64> {
    (0..256u32)
        .map(|c| match wr_opcode_of(c as u8) {
            Some(op) => {
                wc_opcode_code(WcOpcode::from_wr(op)) as u64
                    | (op.has_imm() as u64) << 8
                    | (op.is_read() as u64) << 9
                    | (op.is_atomic() as u64) << 10
                    | (op.is_read_or_atomic() as u64) << 11
                    | (op.is_local() as u64) << 12
            }
            None => 0,
        })
        .collect()
}

/// A pending WQE in the ring.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct Pend {
    /// The WQE's ring index (a go-back-N rewinds the SQ Ring to it) and first PSN.
    pub idx: Bits<16>,
    pub first_psn: Bits<24>,
    pub wr_id: Bits<64>,
    pub wr_op: Bits<8>,
    pub signaled: Bit,
    /// One past the WQE's last PSN.
    pub next_psn: Bits<24>,
    pub status: Bits<8>,
    pub laddr: Bits<64>,
    pub len: Bits<32>,
    pub imm: Bits<32>,
}

/// The completer state of a QP.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CompSt {
    pub head: Bits<7>,
    pub tail: Bits<7>,
    pub comp_psn: Bits<24>,
    /// Bytes received of the head READ.
    pub rd: Bits<32>,
    pub reading: Bit,
    pub err: Bit,
    /// A rewind is on its way through WQE Check: responses are dropped, records dropped until its marker.
    pub retrying: Bit,
    /// After the marker: the next record is the head WQE sent again (its record is already here): dropped.
    pub skip_head: Bit,
    /// A go-back-N was started and nothing progressed since (a NAK or implied NAK does not start another).
    pub started: Bit,
    /// A PSN-sequence NAK came while the list was empty (for the WQE being sent, not reported yet): its PSN is
    /// `comp_psn`, and the go-back-N starts when that WQE's record comes (`IHint`).
    pub nak_hint: Bit,
    /// retry_cnt and rnr_retry left (7 = infinite, never counted down).
    pub rl: Bits<3>,
    pub nl: Bits<3>,
    /// READ/atomic WQEs retired (modulo 256): WQE Check's count of those sent, minus this, is how many are
    /// outstanding (rxe `rd_atomic`, `check_init_depth`). Cleared by a CMD_WRITE_QP to RESET.
    pub fin: Bits<8>,
    /// The head WQE is a READ or an atomic (as the last event that read it found; for `FDrop`).
    pub hra: Bit,
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
pub(super) enum CompState {
    Idle,
    XRd,
    IRd,
    IWr,
    IHint,
    NWait,
    NHint,
    CRd,
    RQst,
    HeadRd,
    HeadWait,
    HeadEval,
    Cmp0,
    Eval,
    Act,
    RdChk,
    RdDec,
    SCmd,
    RdEnd,
    CqLoad,
    CqEmit,
    Done,
    FCmd,
    FEnd,
    TRd,
    TmChk,
    TmChk2,
    TmChk3,
    Rt0,
    Rt1,
    Rt2,
    RtOut,
    RnrW,
    AtCmd,
    AtPush,
    AtEnd,
    FDrop,
}
