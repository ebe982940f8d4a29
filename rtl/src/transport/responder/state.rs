//! The Responder's records and counters: the extended per-QP responder state ([`RespExt`], beside the QP
//! Context's [`crate::transport::qp_context::QpResp`]), the counter indices, and the sequencer's states
//! ([`RespState`]).
//!
//! **Counters** (`counters[i]`): [`CNT_REQUESTS`] requests past the QP lookup, [`CNT_DUPLICATES`],
//! [`CNT_NAK_SEQ`] PSN-sequence NAKs sent, [`CNT_RNR_NAKS`], [`CNT_CLASS_C`] class-C errors (NAK invalid
//! request / remote access / remote operational), [`CNT_DROP_LOOKUP`] QP lookup drops (last reason on
//! `last_drop_reason`, a `testbench::model::DropReason` code), [`CNT_DROP_OOS`] out-of-sequence drops after
//! the NAK, [`CNT_DROP_DUP`] duplicates without a resource, [`CNT_DROP_ERR`] packets of a QP in error,
//! [`CNT_DROP_MALFORMED`] opcodes that are not RC or UC requests, [`CNT_ACKS`] ACKs sent, [`CNT_READ_RESP`] read
//! responses sent, [`CNT_DROP_UC`] UC packets dropped by the checks.

use rust_hdl::prelude::*;

pub const CNT_REQUESTS: usize = 0;
pub const CNT_DUPLICATES: usize = 1;
pub const CNT_NAK_SEQ: usize = 2;
pub const CNT_RNR_NAKS: usize = 3;
pub const CNT_CLASS_C: usize = 4;
pub const CNT_DROP_LOOKUP: usize = 5;
pub const CNT_DROP_OOS: usize = 6;
pub const CNT_DROP_DUP: usize = 7;
pub const CNT_DROP_ERR: usize = 8;
pub const CNT_DROP_MALFORMED: usize = 9;
pub const CNT_ACKS: usize = 10;
pub const CNT_READ_RESP: usize = 11;
/// UC packets dropped by the checks (rxe `resp.drop_msg`): out of sequence or behind a drop until the next
/// FIRST/ONLY, no receive posted, a length, R_Key or sequence error, a receive buffer too small.
pub const CNT_DROP_UC: usize = 12;
pub const RESP_COUNTERS: usize = 13;

/// Extended per-QP responder state (beyond [`QpResp`]).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct RespExt {
    /// A class-C error put the QP in error: every packet is dropped.
    pub err: Bit,
    /// A SEND or WRITE message is in progress (the last packet was FIRST or MIDDLE) and which.
    pub mip: Bit,
    pub mip_write: Bit,
    /// UC: the rest of the message in progress is dropped, up to the next FIRST/ONLY (rxe `resp.drop_msg`).
    pub drop_msg: Bit,
    /// The receive WQE at the consumer index is loaded, and where the SEND stands in it.
    pub have_wqe: Bit,
    pub wr_id: Bits<64>,
    pub r_addr: Bits<64>,
    pub r_len: Bits<32>,
    pub r_lkey: Bits<32>,
    pub r_off: Bits<32>,
    /// WRITE context: DMA address of the next byte, bytes left, whole length.
    pub w_valid: Bit,
    pub w_ptr: Bits<64>,
    pub w_resid: Bits<32>,
    pub w_len: Bits<32>,
    /// The READ responder resources: the next slot of the ring to take and which slots hold a READ.
    pub res_head: Bits<4>,
    pub res_valid: Bits<16>,
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
pub(super) enum RespState {
    Idle,
    LkWait,
    Look,
    Pre,
    Wait,
    Verdict,
    Check,
    Kc,
    KcWait,
    RkeyRes,
    Fetch,
    SendFirst,
    SendChk,
    SendChk2,
    SendKc,
    InvChk,
    InvRes,
    InvWait,
    WExec,
    WExec2,
    SCmd,
    PayFwd,
    Finish,
    CqOut,
    TxAck,
    Read,
    ReadEnd,
    DupScan,
    DupRead,
    DupGot,
    DupSub,
    ClassC,
    CcCq,
    Flush,
    FlushF,
    FlushCq,
    WriteBack,
    Drain,
    AtRmw,
    AtEnd,
    AtAck,
    FastEnd,
    Db,
}
