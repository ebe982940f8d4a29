//! ibverbs-style API types: work requests, work completions, QP attributes and verbs errors.
//!
//! Names follow `libibverbs` (`ibv_wr_opcode`, `ibv_wc_status`, `ibv_wc_opcode`, `ibv_wc_flags`,
//! `ibv_qp_attr`) so that a test reads like an RDMA application.

use std::net::IpAddr;

use thiserror::Error;

/// An Ethernet MAC address, first byte first on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xFF; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);
}

impl std::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

/// Protection domain handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pd(pub u32);

/// MR / QP access flags (`enum ibv_access_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessFlags(pub u32);

impl AccessFlags {
    pub const LOCAL_WRITE: AccessFlags = AccessFlags(1 << 0);
    pub const REMOTE_WRITE: AccessFlags = AccessFlags(1 << 1);
    pub const REMOTE_READ: AccessFlags = AccessFlags(1 << 2);
    pub const REMOTE_ATOMIC: AccessFlags = AccessFlags(1 << 3);
    /// `IBV_ACCESS_MW_BIND`: memory windows may be bound to the MR (kept by the driver; the Key Cache has no
    /// bit for it).
    pub const MW_BIND: AccessFlags = AccessFlags(1 << 4);
    pub const NONE: AccessFlags = AccessFlags(0);
    /// The remote rights (REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC): all a memory window grants.
    pub const REMOTE: AccessFlags = AccessFlags(0xE);
    /// Every flag above.
    pub const ALL: AccessFlags = AccessFlags(0xF);
    pub fn contains(self, other: AccessFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for AccessFlags {
    type Output = AccessFlags;
    fn bitor(self, o: AccessFlags) -> AccessFlags {
        AccessFlags(self.0 | o.0)
    }
}

/// QP transport type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    Rc,
    Uc,
    Ud,
}

/// QP state (`enum ibv_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Error,
}

/// Completion queue handle (index into the device's CQ table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cq(pub u32);

/// One scatter/gather element (`struct ibv_sge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// Send work-request opcode (`enum ibv_wr_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WrOpcode {
    Send,
    SendWithImm,
    SendWithInv,
    RdmaWrite,
    RdmaWriteWithImm,
    RdmaRead,
    AtomicCmpAndSwp,
    AtomicFetchAndAdd,
    /// `IB_WR_MASKED_ATOMIC_CMP_AND_SWP` (project opcode 0xD3 on the wire, never sent to rxe).
    MaskedAtomicCmpAndSwp,
    /// `IB_WR_MASKED_ATOMIC_FETCH_AND_ADD` (project opcode 0xD4 on the wire, never sent to rxe).
    MaskedAtomicFetchAndAdd,
    /// `IBV_WR_LOCAL_INV`: invalidate `invalidate_rkey` (a fast-registration MR of the QP's PD) locally, in
    /// order with the QP's other WQEs; nothing goes on the wire.
    LocalInv,
    /// `IBV_WR_BIND_MW` of a type 2 window: the window whose next rkey is `rkey` is bound over the SGE's range
    /// of its MR (the SGE's lkey) with the remote rights `mw_access`; nothing goes on the wire.
    BindMw,
}

impl WrOpcode {
    /// rxe `WR_LOCAL_OP_MASK`: done by the requester without packets, completed in order without a response.
    pub fn is_local(self) -> bool {
        matches!(self, WrOpcode::LocalInv | WrOpcode::BindMw)
    }
    pub fn is_send(self) -> bool {
        matches!(self, WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv)
    }
    pub fn is_write(self) -> bool {
        matches!(self, WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm)
    }
    pub fn is_read(self) -> bool {
        self == WrOpcode::RdmaRead
    }
    /// May go as an inline WQE (its data in the send ring): SEND and RDMA WRITE, with or without immediate
    /// (the RTL's WQE Check says the same in `l_inl_ok`).
    pub fn may_be_inline(self) -> bool {
        matches!(self, WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm)
    }
    pub fn is_atomic(self) -> bool {
        matches!(
            self,
            WrOpcode::AtomicCmpAndSwp
                | WrOpcode::AtomicFetchAndAdd
                | WrOpcode::MaskedAtomicCmpAndSwp
                | WrOpcode::MaskedAtomicFetchAndAdd
        )
    }
    /// rxe `WR_ATOMIC_OR_READ_MASK`: the WQE completes only on a response, never on a plain ACK.
    pub fn is_read_or_atomic(self) -> bool {
        self.is_read() || self.is_atomic()
    }
    pub fn has_imm(self) -> bool {
        matches!(self, WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm)
    }
}

/// `ibv_inc_rkey`: a window's next rkey (the same index, the key byte + 1), which its next bind takes.
pub fn inc_rkey(rkey: u32) -> u32 {
    rkey & !0xFF | (rkey.wrapping_add(1) & 0xFF)
}

/// Send flags (`enum ibv_send_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags {
    pub signaled: bool,
    pub solicited: bool,
    /// The payload is copied at post time (the sg list is not referenced afterwards; lkeys are not checked).
    pub inline: bool,
    pub fence: bool,
}

impl SendFlags {
    pub const SIGNALED: SendFlags = SendFlags {
        signaled: true,
        solicited: false,
        inline: false,
        fence: false,
    };
}

/// Address vector (`struct ibv_ah_attr` with its GRH, resolved to Ethernet/IP as rxe `rxe_av` holds it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressVector {
    pub dmac: MacAddr,
    /// Source MAC; `None` = the device's MAC.
    pub smac: Option<MacAddr>,
    /// Source IP (the sgid); `None` = the device's IP.
    pub sip: Option<IpAddr>,
    /// Destination IP (the dgid).
    pub dip: IpAddr,
    /// UDP source port; `None` = rxe's `rdma_get_udp_sport(0, lqpn, rqpn)` for RC/UC, `0xC000 | hash(qpn)` for UD.
    pub sport: Option<u16>,
    pub traffic_class: u8,
    /// IPv4 TTL / IPv6 hop limit (ib_core puts the route's 64 there for RoCEv2).
    pub hop_limit: u8,
}

impl AddressVector {
    /// An address vector to `dmac`/`dip` with rxe's defaults (TTL 64, TC 0, derived source port).
    pub fn new(dmac: MacAddr, dip: IpAddr) -> Self {
        AddressVector {
            dmac,
            smac: None,
            sip: None,
            dip,
            sport: None,
            traffic_class: 0,
            hop_limit: 64,
        }
    }
}

/// UD destination of a send WR (`wr.ud`: ah, remote_qpn, remote_qkey).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdDest {
    pub av: AddressVector,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub opcode: WrOpcode,
    pub sg_list: Vec<Sge>,
    pub flags: SendFlags,
    /// Immediate data as it goes on the wire (network order value).
    pub imm_data: u32,
    /// SEND_WITH_INV: the rkey to invalidate at the responder; LOCAL_INV: the key to invalidate here.
    pub invalidate_rkey: u32,
    /// RDMA and atomic: remote address and rkey.
    pub remote_addr: u64,
    pub rkey: u32,
    /// Atomics: compare (CAS) and swap / add.
    pub compare_add: u64,
    pub swap: u64,
    /// Masked CAS: compare mask and swap mask; masked FAA: `compare_add_mask` is the field-boundary mask.
    pub compare_add_mask: u64,
    pub swap_mask: u64,
    pub ud: Option<UdDest>,
    /// Inline payload (used when `flags.inline`).
    pub inline_data: Vec<u8>,
    /// BIND_MW: the window's remote rights.
    pub mw_access: AccessFlags,
}

impl SendWr {
    /// The WR as an inline WQE carrying `data` instead of a scatter/gather list.
    pub fn set_inline(&mut self, data: Vec<u8>) {
        self.sg_list.clear();
        self.flags.inline = true;
        self.inline_data = data;
    }

    /// A WR with everything zero but the id, opcode and sg list.
    pub fn new(wr_id: u64, opcode: WrOpcode, sg_list: Vec<Sge>) -> Self {
        SendWr {
            wr_id,
            opcode,
            sg_list,
            flags: SendFlags::SIGNALED,
            imm_data: 0,
            invalidate_rkey: 0,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            compare_add_mask: 0,
            swap_mask: 0,
            ud: None,
            inline_data: Vec::new(),
            mw_access: AccessFlags::NONE,
        }
    }
    /// Total payload length: the sum of the sg lengths (or the inline length).
    pub fn total_len(&self) -> u64 {
        if self.flags.inline {
            self.inline_data.len() as u64
        } else {
            self.sg_list.iter().map(|s| u64::from(s.length)).sum()
        }
    }
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sg_list: Vec<Sge>,
}

/// Work completion status (`enum ibv_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WcStatus {
    Success,
    LocLenErr,
    LocQpOpErr,
    LocEecOpErr,
    LocProtErr,
    WrFlushErr,
    MwBindErr,
    BadRespErr,
    LocAccessErr,
    RemInvReqErr,
    RemAccessErr,
    RemOpErr,
    RetryExcErr,
    RnrRetryExcErr,
    LocRddViolErr,
    RemInvRdReqErr,
    RemAbortErr,
    InvEecnErr,
    InvEecStateErr,
    FatalErr,
    RespTimeoutErr,
    GeneralErr,
}

/// Work completion opcode (`enum ibv_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    CompSwap,
    FetchAdd,
    MaskedCompSwap,
    MaskedFetchAdd,
    /// `IBV_WC_BIND_MW`.
    BindMw,
    /// `IBV_WC_LOCAL_INV`.
    LocalInv,
    Recv,
    RecvRdmaWithImm,
}

impl WcOpcode {
    /// The send-queue completion opcode of a WR (rxe `make_send_cqe`: WRITE_IMM completes as RDMA_WRITE).
    pub fn from_wr(op: WrOpcode) -> Self {
        match op {
            WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => WcOpcode::Send,
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            WrOpcode::RdmaRead => WcOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp => WcOpcode::CompSwap,
            WrOpcode::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            WrOpcode::MaskedAtomicCmpAndSwp => WcOpcode::MaskedCompSwap,
            WrOpcode::MaskedAtomicFetchAndAdd => WcOpcode::MaskedFetchAdd,
            WrOpcode::LocalInv => WcOpcode::LocalInv,
            WrOpcode::BindMw => WcOpcode::BindMw,
        }
    }
}

/// `ibv_wc_flags` bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WcFlags(pub u32);

impl WcFlags {
    pub const GRH: u32 = 1 << 0;
    pub const WITH_IMM: u32 = 1 << 1;
    pub const IP_CSUM_OK: u32 = 1 << 2;
    pub const WITH_INV: u32 = 1 << 3;
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
}

/// A work completion (`struct ibv_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub byte_len: u32,
    /// Immediate data (valid with `WcFlags::WITH_IMM`), the 4 wire bytes as a big-endian value.
    pub imm_data: u32,
    /// Invalidated rkey (valid with `WcFlags::WITH_INV`).
    pub invalidated_rkey: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: WcFlags,
}

/// QP capabilities (`struct ibv_qp_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        QpCap {
            max_send_wr: 16384,
            max_recv_wr: 16384,
            max_send_sge: 32,
            max_recv_sge: 32,
            max_inline_data: 256,
        }
    }
}

/// `struct ibv_qp_init_attr`.
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr {
    pub qp_type: QpType,
    pub send_cq: Cq,
    pub recv_cq: Cq,
    pub cap: QpCap,
    pub sq_sig_all: bool,
}

/// `struct ibv_qp_attr` with an implicit attribute mask: every `Some` field is applied.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpAttr {
    pub qp_state: Option<QpState>,
    /// 256, 512, 1024, 2048 or 4096.
    pub path_mtu: Option<u32>,
    pub dest_qp_num: Option<u32>,
    pub rq_psn: Option<u32>,
    pub sq_psn: Option<u32>,
    pub max_rd_atomic: Option<u8>,
    pub max_dest_rd_atomic: Option<u8>,
    /// 5-bit RNR timer code the responder puts in its RNR NAKs.
    pub min_rnr_timer: Option<u8>,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout; 0 = no retransmit timer.
    pub timeout: Option<u8>,
    /// 0..=7, 7 = infinite (rxe).
    pub retry_cnt: Option<u8>,
    /// 0..=7, 7 = infinite.
    pub rnr_retry: Option<u8>,
    pub qkey: Option<u32>,
    pub qp_access_flags: Option<AccessFlags>,
    pub av: Option<AddressVector>,
}

/// Errors returned by the verbs.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerbsError {
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    #[error("no such PD")]
    NoSuchPd,
    #[error("no such CQ")]
    NoSuchCq,
    #[error("no such QP 0x{0:x}")]
    NoSuchQp(u32),
    #[error("no such MR (key 0x{0:x})")]
    NoSuchMr(u32),
    #[error("address range 0x{addr:x}+{len} is not host memory")]
    BadAddress { addr: u64, len: u64 },
    #[error("invalid QP state transition {from:?} -> {to:?}")]
    BadTransition { from: QpState, to: QpState },
    #[error("missing QP attribute {0}")]
    MissingAttr(&'static str),
    #[error("queue full")]
    QueueFull,
    #[error("out of DMA memory: {0} bytes asked, {1} left")]
    OutOfMemory(usize, usize),
    #[error("operation not valid for this QP type or state: {0}")]
    NotSupported(&'static str),
}
