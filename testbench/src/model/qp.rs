//! QP context: static attributes, requester/completer state (rxe `qp->req`, `qp->comp`), responder state
//! (`qp->resp`) and responder resources; 24-bit PSN arithmetic.

use std::collections::VecDeque;

use crate::wire::headers::BTH_PSN_MASK;

use super::mr::{AccessFlags, Pd};
use super::verbs::{AddressVector, Cq, QpCap, RecvWr, SendWr, WcStatus};

pub use rnic_driver::verbs::{QpState, QpType};

/// `(a + n) mod 2^24`.
pub fn psn_add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & BTH_PSN_MASK
}

/// rxe `psn_compare`: the 24-bit difference shifted left by 8 and read as signed, so the window is +-2^23.
pub fn psn_compare(a: u32, b: u32) -> i32 {
    (a.wrapping_sub(b) << 8) as i32
}

/// `a - b` as a non-negative distance mod 2^24.
pub fn psn_diff(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b) & BTH_PSN_MASK
}

/// rxe `__roundup_pow_of_two` of a QP resource count (0 stays 0).
pub fn roundup_pow2(n: u8) -> usize {
    if n == 0 {
        0
    } else {
        (n as usize).next_power_of_two()
    }
}

/// Send WQE state (rxe `enum wqe_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeState {
    /// Not (or no longer, after a retry) being transmitted.
    Posted,
    /// Some packets transmitted.
    Processing,
    /// Every packet transmitted, waiting for the ACK/response.
    Pending,
    Done,
    Error,
}

/// A send WQE with the requester's progress.
#[derive(Clone, Debug)]
pub struct SendWqe {
    pub wr: SendWr,
    pub length: u64,
    pub state: WqeState,
    /// PSN of the first packet of the current (re)transmission (rxe `update_wqe_psn`).
    pub first_psn: u32,
    /// PSN of the first packet of the original transmission (kept for the completer's read-retry check).
    pub orig_first_psn: u32,
    pub last_psn: u32,
    /// Byte offset into the message where the next packet starts (rxe `dma.length - dma.resid`).
    pub offset: u64,
    /// READ: bytes received so far (data is placed at this offset).
    pub read_received: u64,
    /// Atomic: payload copied at post for inline sends.
    pub status: WcStatus,
}

/// A receive WQE.
#[derive(Clone, Debug)]
pub struct RecvWqe {
    pub wr: RecvWr,
}

/// Requester state (rxe `qp->req`).
#[derive(Clone, Debug, Default)]
pub struct ReqState {
    /// Next PSN to send.
    pub psn: u32,
    /// Index into the send queue of the next WQE to transmit.
    pub idx: usize,
    /// Go-back-N requested by the completer (rxe `req.need_retry`).
    pub need_retry: bool,
    /// Packets sent since the last AckReq (rxe `noack_pkts`).
    pub noack_pkts: u32,
    /// RNR wait in progress until this time (rxe `rnr_nak_timer`).
    pub rnr_until: Option<u64>,
    /// PSN after the highest PSN ever transmitted (to count retransmissions).
    pub sent_high: u32,
    /// `sent_high` is valid.
    pub sent_any: bool,
}

/// Completer state (rxe `qp->comp`).
#[derive(Clone, Debug, Default)]
pub struct CompState {
    /// Oldest unacknowledged PSN.
    pub psn: u32,
    /// Opcode of the last read response of a read in progress (`None` = -1 in rxe).
    pub opcode: Option<u8>,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    /// A NAK- or implied-NAK-driven retry has been started and no progress seen since (rxe `started_retry`).
    pub started_retry: bool,
    /// Retransmit timer deadline (rxe `retrans_timer`).
    pub retrans_deadline: Option<u64>,
}

/// A responder resource (rxe `struct resp_res`): one slot of the read/atomic ring.
#[derive(Clone, Copy, Debug)]
pub enum Resource {
    Read {
        first_psn: u32,
        last_psn: u32,
        va_org: u64,
        rkey: u32,
        length: u64,
    },
    Atomic {
        psn: u32,
        orig: u64,
    },
}

/// RDMA WRITE in progress at the responder (rxe `qp->resp.va/rkey/resid/length`).
#[derive(Clone, Copy, Debug)]
pub struct WriteCtx {
    pub va: u64,
    pub rkey: u32,
    pub resid: u64,
    pub length: u64,
}

/// Responder state (rxe `qp->resp`).
#[derive(Clone, Debug, Default)]
pub struct RespState {
    /// Expected PSN.
    pub psn: u32,
    /// PSN after the last executed SEND/WRITE; duplicates are re-ACKed with `ack_psn - 1`.
    pub ack_psn: u32,
    pub msn: u32,
    pub sent_psn_nak: bool,
    /// Opcode of the last packet of a message in progress (rxe `resp.opcode`; `None` = -1).
    pub opcode: Option<u8>,
    /// Bytes placed in the current receive WQE.
    pub recv_offset: u64,
    pub write: Option<WriteCtx>,
    /// UC: drop the rest of the current message (rxe `resp.drop_msg`).
    pub drop_msg: bool,
    pub resources: Vec<Option<Resource>>,
    pub res_head: usize,
}

/// The QP context.
#[derive(Clone, Debug)]
pub struct Qp {
    pub qpn: u32,
    pub qp_type: QpType,
    pub state: QpState,
    pub pd: Pd,
    pub send_cq: Cq,
    pub recv_cq: Cq,
    pub cap: QpCap,
    pub sq_sig_all: bool,
    pub path_mtu: u32,
    pub dest_qpn: u32,
    pub qkey: u32,
    pub access: AccessFlags,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub av: Option<AddressVector>,
    /// UDP source port used on transmit.
    pub sport: u16,
    pub sq: VecDeque<SendWqe>,
    pub rq: VecDeque<RecvWqe>,
    pub req: ReqState,
    pub comp: CompState,
    pub resp: RespState,
}

impl Qp {
    pub fn new(qpn: u32, qp_type: QpType, pd: Pd, send_cq: Cq, recv_cq: Cq, cap: QpCap, sq_sig_all: bool) -> Self {
        Qp {
            qpn,
            qp_type,
            state: QpState::Reset,
            pd,
            send_cq,
            recv_cq,
            cap,
            sq_sig_all,
            path_mtu: 1024,
            dest_qpn: 0,
            qkey: 0,
            access: AccessFlags::NONE,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 0,
            timeout: 0,
            retry_cnt: 7,
            rnr_retry: 7,
            av: None,
            sport: rxe_init_sport(qpn),
            sq: VecDeque::new(),
            rq: VecDeque::new(),
            req: ReqState::default(),
            comp: CompState::default(),
            resp: RespState::default(),
        }
    }

    /// Requests are accepted in RTR and RTS (rxe `check_type_state`, the responder side READY).
    pub fn accepts_requests(&self) -> bool {
        matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe)
    }

    /// Responses are accepted while the requester side is READY..DRAINED.
    pub fn accepts_responses(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Sqd)
    }
}

/// rxe `rxe_qp_init_req`: the UDP source port at QP creation, 0xC000 plus a 14-bit hash of the QPN
/// (`hash_32(qpn, 14)`).
pub fn rxe_init_sport(qpn: u32) -> u16 {
    let h = qpn.wrapping_mul(0x61C8_8647) >> (32 - 14);
    0xC000 | h as u16
}

/// `rdma_get_udp_sport(0, lqpn, rqpn)` (rxe `rxe_modify_qp` since ~5.11): a zero flow label is derived
/// symmetrically from the two QPNs (`rdma_calc_flow_label`), then folded to 14 bits
/// (`rdma_flow_label_to_udp_sport`).
pub fn rdma_udp_sport(lqpn: u32, rqpn: u32) -> u16 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    let fl = (v & 0xF_FFFF) as u32;
    0xC000 | ((fl & 0x3FFF) ^ ((fl & 0xF_C000) >> 14)) as u16
}
