//! WQE Check: the requester's front end between WQE Prefetch and the Requester. One send WQE at a time:
//! decode the 64-byte slot (`rnic_driver::host::SendWqe` layout), read the QP's send context (state, path MTU,
//! destination QPN and path, PD) and send PSN, check the lkey, range and access of the local buffer in the
//! Key Cache (translating its VA to a DMA address), hand a [`ReqDesc`] to the Requester, write the Requester's
//! next PSN and AckReq counter back, and report the WQE to the completer as a [`ReqIssued`] record.
//!
//! Errors complete the WQE without sending anything (status in the record, `ibv_wc_status` codes): QP not in
//! RTS/SQD (ERROR: WR_FLUSH_ERR, else LOC_QP_OP_ERR), lkey/PD/access/bounds failure (LOC_PROT_ERR, as rxe's
//! `copy_data` failing in `rxe_req.c`), an opcode the QP's transport has no packets for (UC: READ, atomics,
//! SEND_WITH_INV; UD: anything but SEND and SEND_WITH_IMM) or this build does not send (an inline
//! SEND_WITH_INV): LOC_QP_OP_ERR, a malformed inline WQE (below: LOC_QP_OP_ERR). Such a local error puts the QP in
//! error here, as rxe's requester does: the WQEs behind it complete with WR_FLUSH_ERR without being sent,
//! until the next CMD_WRITE_QP_REQ (modify_qp to RTS); the WQEs before it complete as their responses say.
//!
//! Masked atomics: a mask slot (opcode byte `WR_MASK_SLOT`, `rnic_driver::host::mask_slot`) goes before its WQE.
//! It is taken in two cycles without a record: its masks and ring index go into the QP's entry of the mask RAM
//! (one entry per QP, so other QPs' slots may come between the two). The masked WQE (flag `ext`) takes the
//! entry if it holds the slot just before its own (`idx - 1`), else it completes with LOC_QP_OP_ERR (a WQE
//! with `ext` and no mask slot, or `ext` on another opcode). Its record carries the mask slot's index, so a
//! go-back-N rewind to it reads the mask slot again before the WQE.
//!
//! **LOCAL_INV** (rxe `rxe_do_local_ops`): its key (bytes 12..16, where SEND_WITH_INV carries its IETH key) is
//! looked up in place of the lkey, for the Key Cache's `res_inv` (a fast-registration MR of the QP's PD, index
//! and tag matching). If it may be invalidated the invalidate goes to the command dispatcher (`inv_*`, `LInv`),
//! which clears the valid bit in both Key Cache copies, then the record goes to the Completer with no PSNs
//! (first = next PSN) and completes there in order with WC opcode LOCAL_INV; nothing goes to the Requester, and
//! the QP's window does not hold it back (rxe does local operations before `wait_psn`). Otherwise it completes
//! with LOC_QP_OP_ERR and the QP goes to error (rxe's requester `goto err`). On UD it is LOC_QP_OP_ERR, as every
//! opcode but SEND. A local operation (LOCAL_INV, BIND_MW) done moves its QP's high-water mark, as a READ
//! does; read again after a go-back-N to a WQE before it (below the mark) it is not done again (rxe `req_retry`
//! skips a WQE in `wqe_state_done`) and its record goes with success.
//!
//! **BIND_MW** (a type 2 window, rxe `rxe_bind_mw`): the SGE (lkey, address, length) is looked up as a local
//! buffer, with `lk_bind` (the MR was registered with MW_BIND) and LOCAL_WRITE when the window's rights (bytes
//! 12..16) include REMOTE_WRITE or REMOTE_ATOMIC; an empty range fails. Then the window at the index of its new
//! rkey (bytes 40..44) is looked up for `res_free` (a type 2 window of the QP's PD, not valid). Then its entry
//! (the range, the remote rights, the new key's tag, the DMA address of its first byte from the MR's lookup,
//! the QP that binds it) goes to the command dispatcher (`bw_*`), which writes both Key Cache copies, and the
//! record follows as LOCAL_INV's does (WC opcode BIND_MW). A failed check completes MW_BIND_ERR and the QP
//! goes to error (rxe's requester `goto err`).
//!
//! Inline WQEs (flag `inline`, SEND/WRITE with or without immediate, up to `MAX_INLINE` = 256 bytes): the
//! payload is in the ceil(length / 64) slots after the WQE (`docs/host-interface.md`). The SQ Ring never splits
//! a read group and the driver keeps an inline WQE inside one, so its data slots come right behind it. After the
//! checks (no lkey check and no Key Cache lookup: there is no local buffer) the WQE's slot is taken, then each
//! data slot (`Inl`, one per cycle), checked to be the same QP's next slot of its generation, into the inline
//! buffer (8 slots of LUTRAM, read by the Gather Path in WQE order, `inl_*`). The buffer's reader sees a WQE's slots only once all are in
//! (a committed write pointer), then the descriptor (`inl`, one packet: inline data fits the smallest MTU) goes
//! to the Requester, whose gather command says `g_inl`. A WQE that completes unsent has its data slots taken
//! and dropped; one whose next slot is not its data (another QP's slot: the driver broke the group rule)
//! completes with LOC_QP_OP_ERR, its written slots are dropped (write pointer back to the committed one) and
//! that slot is left for the next WQE. `inline` on another opcode or with more than 256 bytes: LOC_QP_OP_ERR.
//! Padding slots (opcode byte `WR_NOP_SLOT`) are taken and dropped without a record. While it waits for a
//! data slot WQE Check takes nothing else (rewinds included), so a producer index that stops inside an inline
//! WQE's slots (a driver bug) holds it until more slots come.
//!
//! Local access needed: READ and the atomics write the local buffer (LOCAL_WRITE); SEND and WRITE only read it
//! (no flag, as rxe: a gather needs none). A zero-length buffer is not checked (C9-88, as the Key Cache).
//!
//! The QP's send context lives in two RAMs here, written by the command dispatcher (`ctx_*`: CMD_WRITE_QP;
//! `psn_*`: CMD_WRITE_QP_REQ, which also clears the AckReq counter), and its own Key Cache copy (the RX side
//! has another; both take every MR write), so the TX and RX pipelines never contend for a lookup port.
//!
//! **Go-back-N** (`rw_*`, from the Completer: QP, ring index of its oldest incomplete WQE, PSN, skip): the
//! QP's PSN state (PSN, skip) is written, the rewind goes on to the SQ Ring (`sq_rw_*`: fetch index back,
//! rewind generation + 1), then a marker record goes to the completer. A slot of an older generation was read
//! before the rewind and is dropped without a record; the slot at the rewound index is resumed after `skip`
//! packets (addresses + skip x MTU, length - skip x MTU; a SEND/WRITE continues with MIDDLE/LAST, `cont`, a
//! READ becomes a new READ for the rest). A rewind is taken even while a record waits for the completer
//! (which may be waiting to hand over that rewind). A QP the Completer puts in error (`qerr_*`) has its WQEs
//! completed with WR_FLUSH_ERR without being sent, until its send PSN is written again (CMD_WRITE_QP_REQ).
//!
//! **At most 128 unacknowledged PSNs** (rxe `RXE_MAX_UNACKED_PSNS`, `wait_psn`): the Completer keeps each
//! QP's window (`win_*`: WQEs pending, and the acknowledged PSN + 128) in a RAM here, read with the slot like
//! its PSN; a WQE that would start beyond it is not taken (the slot stays on offer and is read again from
//! Idle, where a rewind goes first).
//!
//! One WQE in flight keeps the PSN read-modify-write free of hazards; a WQE takes about 12 cycles plus the
//! Requester's time (`docs/bench/2026-11-30-where-the-cycles-go.md` measured where the cycles go and what
//! pipelining it would take).
//!
//! **Early records.** An RC RDMA WRITE (inline or not) of at most 256 bytes (the smallest path MTU, so one
//! packet at any MTU) and not resumed mid-message needs nothing from the Requester: its next PSN is its
//! PSN + 1 and its AckReq counter 0 (its one packet is its last, which asks for an ACK).
//! Its record goes to the Completer right after the hand-over, and the PSN is written back, without waiting
//! for the Requester's done, which is dropped when it comes (`fpend`). The next slot is taken once the
//! descriptor register is free, so the Requester cuts one WQE while this block checks the next. The record
//! may reach the Completer before the packet leaves: an RC WQE completes only on its ACK, which comes after
//! the packet. (A flush completes it WR_FLUSH_ERR, as any pending WQE; if the QP goes to error in the few
//! cycles its descriptor is still with the Requester, its packet is sent after that completion, as the
//! packets of a WQE the Requester is cutting are.) A rewind waits until the Requester is done with such a
//! WQE, so its packet never follows a rewind's marker. UC and UD WQEs complete when their
//! record comes, so theirs still wait for the done (the local buffer is read by then); so do READs, atomics
//! and longer messages, whose PSN count and errors stay with the Requester. SENDs and WRITE_WITH_IMM wait too:
//! each takes a receive at the peer, whose Responder spends about 29 cycles on one (its general path), and
//! with early records 16 QPs of 64-byte inline SENDs overran an RTL peer (`rnic bench`: 2,556 RX Parse
//! overflow drops, 193 go-back-N, 8.90 M msg/s against 11.54 without), while one QP gained nothing (10.47
//! against 10.51: the peer's Responder is the bound). They join once the Responder overlaps its stages.

use rust_hdl::prelude::*;

use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::psn_cmp::PsnCmp;
use crate::common::consts::k;
use crate::common::fifo::{DistRam, SdpRam};
use crate::transport::key_cache::{
    KcWrite, KeyCache, MrEntry, PipeAdd64, ACC_LOCAL_WRITE, ACC_REMOTE_ATOMIC, ACC_REMOTE_READ, ACC_REMOTE_WRITE, PD_BITS,
};
use crate::transport::requester::{ReqDesc, ReqDone};
use rnic_driver::host::{
    MAX_INLINE, WQE_EXT, WQE_INLINE, WQE_SIGNALED, WQE_SOLICITED, WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD,
    WR_MASK_SLOT, WR_MASKED_ATOMIC_CMP_AND_SWP, WR_MASKED_ATOMIC_FETCH_AND_ADD, WR_NOP_SLOT, WR_RDMA_READ,
    WR_BIND_MW, WR_LOCAL_INV, WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND, WR_SEND_WITH_IMM, WR_SEND_WITH_INV,
};
use testbench::model::{QpState, WcStatus};

/// The QP's send context (CMD_WRITE_QP).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct SqCtx {
    /// `QpState as u8`.
    pub state: Bits<3>,
    /// log2 of the path MTU (8..=12).
    pub mtu_log2: Bits<4>,
    pub dest_qpn: Bits<24>,
    pub dst_mac: Bits<48>,
    /// The path's remote address (IPv4-mapped for IPv4) and whether it is RoCEv2 over IPv6.
    pub dst_ip: Bits<128>,
    pub v6: Bit,
    pub sport: Bits<16>,
    pub pd: Bits<PD_BITS>,
    /// Every WQE completes (`sq_sig_all`).
    pub sig_all: Bit,
    /// READ and atomic WQEs that may be outstanding (rxe `check_init_depth`): `max_rd_atomic` rounded up to a
    /// power of two, at least 1, at most [`RD_ATOMIC_MAX`].
    pub max_rd: Bits<7>,
    /// A UC QP: its requests take the UC opcodes; a READ or an atomic on it is a local QP operation error.
    pub uc: Bit,
    /// A UD QP: SEND and SEND_WITH_IMM only (anything else is a local QP operation error), each to the address
    /// handle in its WQE.
    pub ud: Bit,
    /// The QP's Q_Key (a UD WQE's remote Q_Key with bit 31 set stands for it).
    pub qkey: Bits<32>,
}

/// The most READ/atomic WQEs a QP may have outstanding, whatever its `max_rd_atomic` (rxe's
/// `max_rd_atomic` is at most 128; ours at most 16, which RX Parse's header queue is sized for: 16 QPs of 16
/// READs each). The Completer's record ring per QP ([`crate::transport::completer::COMP_RING`]) is larger.
pub const RD_ATOMIC_MAX: u64 = 16;

/// The limit a QP's `max_rd_atomic` gives (as rxe `rxe_qp_from_attr` and the golden requester: rounded up to a
/// power of two, at least 1), capped at [`RD_ATOMIC_MAX`].
pub fn rd_atomic_limit(max_rd_atomic: u8) -> u64 {
    u64::from(max_rd_atomic).max(1).next_power_of_two().min(RD_ATOMIC_MAX)
}

/// The QP's send PSN state.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct SqPsn {
    pub psn: Bits<24>,
    pub noack: Bits<7>,
    /// Go-back-N resumes the next WQE after this many packets (0: from its start).
    pub skip: Bits<24>,
}

/// A QP's unacked-PSN window, as the Completer last wrote it.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct WinEnt {
    /// WQEs are pending at the Completer (none: the window is open).
    pub busy: Bit,
    /// The highest PSN a WQE may start at: the acknowledged PSN + 128.
    pub lim: Bits<24>,
    /// READ/atomic WQEs the Completer has retired (modulo 256).
    pub fin: Bits<8>,
}

/// A QP's READ/atomic count: one past the ring index of the last READ/atomic WQE sent for the first time, and
/// how many were (modulo 256).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct RdEnt {
    pub hw: Bits<16>,
    pub sent: Bits<8>,
}

/// A QP's last mask slot: its ring index and masks.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct MaskEnt {
    pub idx: Bits<16>,
    pub cmp: Bits<64>,
    pub swp: Bits<64>,
}

/// A WQE the requester is done with, for the completer.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ReqIssued {
    pub qpn: Bits<24>,
    pub idx: Bits<16>,
    pub wr_id: Bits<64>,
    pub wr_op: Bits<8>,
    pub signaled: Bit,
    /// The WQE's PSNs: `first_psn .. next_psn` (empty when nothing was sent).
    pub first_psn: Bits<24>,
    pub next_psn: Bits<24>,
    /// `ibv_wc_status`: 0 when sent; an error code when the WQE completes without being sent.
    pub status: Bits<8>,
    /// Local buffer for READ / atomic responses (DMA address after translation) and its length.
    pub laddr: Bits<64>,
    pub len: Bits<32>,
    /// Immediate data (wire bytes read big-endian): rxe reports it in the sender's completion too.
    pub imm: Bits<32>,
    /// Not a WQE: the marker of a rewind (go-back-N) of QP `qpn` to ring index `idx`. Every record of the QP
    /// before it was issued before the rewind; every record after it comes from the slots read again.
    pub rewind: Bit,
}

/// One data slot of an inline WQE in the inline buffer.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct InlBeat {
    pub data: Bits<512>,
    /// The WQE's last data slot.
    pub last: Bit,
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum FrontState {
    Idle,
    Read,
    Key,
    Check,
    Skip,
    Run,
    Emit,
    RwRead,
    RwSq,
    RwMark,
    Inl,
    LInv,
    BKey,
    BChk,
    BWr,
}

#[derive(LogicBlock)]
pub struct ReqFront {
    pub clock: Signal<In, Clock>,
    /// WQE slots from WQE Prefetch.
    pub wqe_valid: Signal<In, Bit>,
    pub wqe_ready: Signal<Out, Bit>,
    pub wqe_qpn: Signal<In, Bits<24>>,
    pub wqe_idx: Signal<In, Bits<16>>,
    pub wqe_gen: Signal<In, Bits<4>>,
    pub wqe_data: Signal<In, Bits<512>>,
    /// Send context writes (CMD_WRITE_QP), one per cycle.
    pub ctx_we: Signal<In, Bit>,
    pub ctx_qpn: Signal<In, Bits<24>>,
    pub ctx_data: Signal<In, SqCtx>,
    /// PSN writes (CMD_WRITE_QP_REQ); `psn_ready` low while the Requester's write-back has the port.
    pub psn_we: Signal<In, Bit>,
    pub psn_ready: Signal<Out, Bit>,
    pub psn_qpn: Signal<In, Bits<24>>,
    pub psn_value: Signal<In, Bits<24>>,
    /// The Completer put QP `qerr_qpn` in error: from now on its WQEs complete with WR_FLUSH_ERR without being
    /// sent (rxe: a QP in ERROR sends nothing), until its send PSN is written again (CMD_WRITE_QP_REQ, as
    /// modify_qp to RTS does). Taken every cycle; a PSN command write waits for it.
    pub qerr_valid: Signal<In, Bit>,
    pub qerr_qpn: Signal<In, Bits<8>>,
    /// Key Cache write port (every MR write goes to both copies).
    pub kc_wr: KcWrite,
    /// Our addresses (from the register slave).
    pub src_mac: Signal<In, Bits<48>>,
    pub src_ip: Signal<In, Bits<32>>,
    pub src_ip6: Signal<In, Bits<128>>,
    /// To and from the Requester.
    pub desc: Signal<Out, ReqDesc>,
    pub desc_valid: Signal<Out, Bit>,
    pub desc_ready: Signal<In, Bit>,
    pub done: Signal<In, ReqDone>,
    pub done_valid: Signal<In, Bit>,
    pub done_ready: Signal<Out, Bit>,
    /// To the completer.
    pub issued: Signal<Out, ReqIssued>,
    pub issued_valid: Signal<Out, Bit>,
    pub issued_ready: Signal<In, Bit>,
    /// Go-back-N from the completer: send QP `rw_qpn` again from ring index `rw_idx` (its oldest incomplete
    /// WQE) and PSN `rw_psn`, that WQE resumed after `rw_skip` packets.
    pub rw_valid: Signal<In, Bit>,
    pub rw_ready: Signal<Out, Bit>,
    pub rw_qpn: Signal<In, Bits<24>>,
    pub rw_idx: Signal<In, Bits<16>>,
    pub rw_psn: Signal<In, Bits<24>>,
    pub rw_skip: Signal<In, Bits<24>>,
    /// The unacked-PSN window of a QP from the Completer (rxe `RXE_MAX_UNACKED_PSNS`): WQEs pending there
    /// (`win_busy`) and the highest PSN a WQE may start at (`win_lim` = the acknowledged PSN + 128).
    pub win_we: Signal<In, Bit>,
    pub win_qpn: Signal<In, Bits<8>>,
    pub win_busy: Signal<In, Bit>,
    pub win_lim: Signal<In, Bits<24>>,
    /// READ/atomic WQEs of QP `win_qpn` the Completer has retired (modulo 256), with the window.
    pub win_fin: Signal<In, Bits<8>>,
    /// The rewind, on to the SQ Ring.
    pub sq_rw_valid: Signal<Out, Bit>,
    pub sq_rw_ready: Signal<In, Bit>,
    pub sq_rw_qpn: Signal<Out, Bits<24>>,
    pub sq_rw_idx: Signal<Out, Bits<16>>,
    /// Inline data for the Gather Path: the data slots of the inline WQEs handed to the Requester, in the
    /// order of the WQEs, `inl_last` on each WQE's last slot.
    pub inl_valid: Signal<Out, Bit>,
    pub inl_ready: Signal<In, Bit>,
    pub inl_data: Signal<Out, Bits<512>>,
    pub inl_last: Signal<Out, Bit>,
    /// A LOCAL_INV invalidates the MR at `inv_index`: held until the command dispatcher (the one writer of both
    /// Key Cache copies) takes it (`inv_ready`), before the WQE's record goes and the next WQE is read.
    pub inv_valid: Signal<Out, Bit>,
    pub inv_index: Signal<Out, Bits<10>>,
    pub inv_ready: Signal<In, Bit>,
    /// A BIND_MW writes the type 2 window's entry at `bw_index` (both Key Cache copies, through the command
    /// dispatcher): held until taken (`bw_ready`), before the WQE's record goes.
    pub bw_valid: Signal<Out, Bit>,
    pub bw_index: Signal<Out, Bits<10>>,
    pub bw_entry: Signal<Out, MrEntry>,
    pub bw_ready: Signal<In, Bit>,

    kc: KeyCache<1024, 10>,
    /// Per QP: the window (read with the slot, like the PSN) and the compare of the slot's PSN with its end,
    /// valid two cycles after Read (`wv`), with its busy flag beside it (`wb1`, `wb2`).
    win_ram: SdpRam<WinEnt, 8>,
    wcmp: PsnCmp,
    wb1: DFF<Bit>,
    wb2: DFF<Bit>,
    wv: DFF<Bit>,
    /// The WQE would start beyond its QP's window: it waits (not taken; tried again from Idle).
    l_win: Signal<Local, Bit>,
    /// Per QP: its READ/atomic count (read with the slot, like the PSN); the slot's ring index against the
    /// high-water mark (`ncmp`: not below it = sent for the first time), and the count outstanding (`r_out` =
    /// sent - retired) at or above the QP's limit (`r_blk`), both valid in Check.
    rd_ram: SdpRam<RdEnt, 8>,
    ncmp: PsnCmp,
    r_out: DFF<Bits<8>>,
    r_blk: DFF<Bit>,
    /// Taken in Check for Emit (the slot may have left the SQ Ring's output by then): the WQE is counted, and
    /// its QP's count as read.
    r_cnt: DFF<Bit>,
    /// Taken in Check: the WQE moves its QP's high-water mark (a READ/atomic counted, or a local operation done
    /// for the first time); a local operation read again after a go-back-N (below the mark) is not done again
    /// (rxe `req_retry` skips a WQE in `wqe_state_done`): its record goes with success.
    r_hw: DFF<Bit>,
    l_again: Signal<Local, Bit>,
    r_sent: DFF<Bits<8>>,
    /// The slot is a READ or an atomic (masked or not); one sent for the first time (counted in Emit); one that
    /// must wait for the Completer to retire an earlier one (rxe `check_init_depth`).
    l_ra: Signal<Local, Bit>,
    l_cnt: Signal<Local, Bit>,
    l_rdw: Signal<Local, Bit>,
    /// The QP may send (RTS or SQD, not put in error).
    l_live: Signal<Local, Bit>,
    /// A CMD_WRITE_QP to RESET: the QP's READ/atomic count starts again (its port: a count in Emit waits).
    l_rst: Signal<Local, Bit>,
    l_nidx: Signal<Local, Bits<24>>,
    l_nhw: Signal<Local, Bits<24>>,
    /// Check has what it decides on: the Key Cache's answer, or (inline, no lookup) the window compare.
    l_chk: Signal<Local, Bit>,
    ctx_ram: SdpRam<SqCtx, 8>,
    psn_ram: SdpRam<SqPsn, 8>,
    /// The rewind generation each QP's slots must carry (the SQ Ring's, kept in step: both go up by one per
    /// rewind); a slot of an older generation was read before a rewind and is dropped.
    gen_ram: SdpRam<Bits<4>, 8>,
    /// Per QP: the Completer put it in error (read with the slot, like the PSN).
    err_ram: SdpRam<Bit, 8>,
    q_err: DFF<Bit>,
    /// Per QP: its last mask slot (read with the slot, like the PSN).
    mask_ram: SdpRam<MaskEnt, 8>,
    mk: DFF<MaskEnt>,
    /// The QP's mask entry is the slot just before this one (registered in Read).
    mok: DFF<Bit>,
    /// Last cycle's QP-to-error pulse: its `err_ram` write lands after a read in that same cycle.
    qe_v: DFF<Bit>,
    qe_q: DFF<Bits<8>>,
    add_la: PipeAdd64,
    add_ra: PipeAdd64,
    add_ln: PipeAdd64,
    imm_map: ByteMap<512, 32>,
    /// A UD WQE's destination MAC (bytes 40..46) and IPv4 address (bytes 60..64 of the GID), wire order to
    /// numbers.
    ah_map: ByteMap<512, 176>,
    /// a UD address handle's GID is not IPv4-mapped: RoCEv2 over IPv6
    l_ah_v6: Signal<Local, Bit>,
    k_mapped_hi: Constant<Bits<96>>,
    /// the IPv4-mapped prefix (::ffff:0:0)
    k_mapped: Constant<Bits<128>>,
    l_ah_mac: Signal<Local, Bits<48>>,
    l_ah_ip: Signal<Local, Bits<128>>,
    l_ah_sport: Signal<Local, Bits<16>>,
    l_ah_qkey: Signal<Local, Bits<32>>,
    state: DFF<FrontState>,
    slot: DFF<Bits<512>>,
    qpn: DFF<Bits<24>>,
    idx: DFF<Bits<16>>,
    ctx: DFF<SqCtx>,
    sp: DFF<SqPsn>,
    key_ok: DFF<Bit>,
    dma: DFF<Bits<64>>,
    status: DFF<Bits<8>>,
    next_psn: DFF<Bits<24>>,
    next_noack: DFF<Bits<7>>,
    gen: DFF<Bits<4>>,
    soff: DFF<Bits<32>>,
    swait: DFF<Bits<2>>,
    rw_psn_r: DFF<Bits<24>>,
    rw_skip_r: DFF<Bits<24>>,
    o_desc: DFF<ReqDesc>,
    o_dv: DFF<Bit>,
    /// Early record (see the module documentation): the WQE is an RC RDMA WRITE of one packet (at most 256
    /// bytes, the smallest path MTU), so its next PSN is its PSN + 1 (`psn1`, from `sp`) and its AckReq counter
    /// 0 (its one packet is its last, which asks for an ACK): its record goes in Emit right after the hand-over,
    /// without waiting for the Requester's done (`fast`, taken in Check); `o_fast`: the descriptor in `o_desc`
    /// is such a WQE; `fpend`: the Requester has taken one and its done is still to come (dropped when it does).
    fast: DFF<Bit>,
    psn1: DFF<Bits<24>>,
    o_fast: DFF<Bit>,
    fpend: DFF<Bit>,
    l_fast: Signal<Local, Bit>,
    o_iss: DFF<ReqIssued>,
    o_iv: DFF<Bit>,
    /// The inline buffer (8 slots, LUTRAM): written at `ib_w`, visible to the reader up to `ib_c` (a WQE's
    /// slots are committed together, once all have come in order, so a WQE that fails half way leaves nothing),
    /// read at `ib_r`.
    ib_ram: DistRam<InlBeat, 3>,
    ib_w: DFF<Bits<4>>,
    ib_c: DFF<Bits<4>>,
    ib_r: DFF<Bits<4>>,
    /// Inline WQE: data slots still to take, the ring index of the next, whether they go into the buffer (the
    /// WQE goes to the Requester) or are dropped, and whether the WQE's own slot has been taken already.
    ndat: DFF<Bits<3>>,
    nidx: DFF<Bits<16>>,
    isent: DFF<Bit>,
    popped: DFF<Bit>,

    l_op: Signal<Local, Bits<8>>,
    l_flags: Signal<Local, Bits<8>>,
    l_len: Signal<Local, Bits<32>>,
    l_slot: Signal<Local, Bits<512>>,
    l_st: Signal<Local, Bits<3>>,
    l_send: Signal<Local, Bit>,
    /// The slot is a masked atomic (by opcode); its mask slot is the one before it; `ext` is set without
    /// a masked opcode or a masked opcode has no mask slot.
    l_masked: Signal<Local, Bit>,
    l_mok: Signal<Local, Bit>,
    l_bad_ext: Signal<Local, Bit>,
    l_unsup: Signal<Local, Bit>,
    /// Inline flag; an inline WQE this build sends (SEND or WRITE, with or without immediate, at most
    /// MAX_INLINE bytes); its data slots (ceil(length / 64), 0 when too long).
    l_inl: Signal<Local, Bit>,
    l_inl_ok: Signal<Local, Bit>,
    l_ndat: Signal<Local, Bits<3>>,
    l_ib_full: Signal<Local, Bit>,
    /// The WQE failed a local check (its status is set and is not WR_FLUSH_ERR).
    l_lerr: Signal<Local, Bit>,
    /// The slot is a LOCAL_INV: its key (bytes 12..16, as SEND_WITH_INV's) is looked up for `res_inv` instead of
    /// the lkey, and it is done here (`LInv`), never handed to the Requester.
    l_linv: Signal<Local, Bit>,
    op_linv: Constant<Bits<8>>,
    /// The slot is a BIND_MW (a type 2 window): its MR (lkey, address, length) is looked up as a WQE's local
    /// buffer is, with MW_BIND (`lk_bind`) and LOCAL_WRITE if the window gives REMOTE_WRITE/ATOMIC; then the
    /// window at its new rkey's index (`res_free`: a free type 2 window of the QP's PD, `BKey`/`BChk`); then its
    /// entry is written (`BWr`). A local operation (LOCAL_INV, BIND_MW): done here, a record without PSNs.
    l_bind: Signal<Local, Bit>,
    l_local: Signal<Local, Bit>,
    /// The window's rights (bytes 12..16 of a BIND_MW, `ibv_access_flags`).
    l_wacc: Signal<Local, Bits<4>>,
    op_bind: Constant<Bits<8>>,
    s_bind: Constant<Bits<8>>,
    acc_rwa: Constant<Bits<4>>,
    acc_rem: Constant<Bits<4>>,
    zero32: Constant<Bits<32>>,

    zero7: Constant<Bits<7>>,
    zero24: Constant<Bits<24>>,
    one24: Constant<Bits<24>>,
    zero2: Constant<Bits<2>>,
    one2: Constant<Bits<2>>,
    three2: Constant<Bits<2>>,
    one4: Constant<Bits<4>>,
    one16: Constant<Bits<16>>,
    one3: Constant<Bits<3>>,
    one4b: Constant<Bits<4>>,
    zero3: Constant<Bits<3>>,
    zero6: Constant<Bits<6>>,
    zero64: Constant<Bits<64>>,
    max_inl: Constant<Bits<32>>,
    op_nop: Constant<Bits<8>>,
    op_send: Constant<Bits<8>>,
    op_send_imm: Constant<Bits<8>>,
    op_send_inv: Constant<Bits<8>>,
    op_write: Constant<Bits<8>>,
    op_write_imm: Constant<Bits<8>>,
    zero8: Constant<Bits<8>>,
    st_rts: Constant<Bits<3>>,
    st_reset: Constant<Bits<3>>,
    one8: Constant<Bits<8>>,
    zero16: Constant<Bits<16>>,
    st_sqd: Constant<Bits<3>>,
    st_err: Constant<Bits<3>>,
    op_read: Constant<Bits<8>>,
    op_cas: Constant<Bits<8>>,
    op_faa: Constant<Bits<8>>,
    op_mcas: Constant<Bits<8>>,
    op_mfaa: Constant<Bits<8>>,
    op_mask: Constant<Bits<8>>,
    f_ext: Constant<Bits<8>>,
    acc_lw: Constant<Bits<4>>,
    acc_none: Constant<Bits<4>>,
    f_sig: Constant<Bits<8>>,
    f_sol: Constant<Bits<8>>,
    f_inl: Constant<Bits<8>>,
    s_flush: Constant<Bits<8>>,
    s_qp_op: Constant<Bits<8>>,
    s_prot: Constant<Bits<8>>,
}

impl Default for ReqFront {
    fn default() -> Self {
        // imm_data: bytes 12..16 of the slot in wire order, read big-endian
        let imm = ByteMap::new(vec![ByteSrc::In(15 * 8), ByteSrc::In(14 * 8), ByteSrc::In(13 * 8), ByteSrc::In(12 * 8)]);
        Self {
            clock: Default::default(),
            wqe_valid: Default::default(),
            wqe_ready: Default::default(),
            wqe_qpn: Default::default(),
            wqe_idx: Default::default(),
            wqe_gen: Default::default(),
            wqe_data: Default::default(),
            ctx_we: Default::default(),
            ctx_qpn: Default::default(),
            ctx_data: Default::default(),
            psn_we: Default::default(),
            psn_ready: Default::default(),
            psn_qpn: Default::default(),
            psn_value: Default::default(),
            qerr_valid: Default::default(),
            qerr_qpn: Default::default(),
            kc_wr: Default::default(),
            src_mac: Default::default(),
            src_ip: Default::default(),
            src_ip6: Default::default(),
            desc: Default::default(),
            desc_valid: Default::default(),
            desc_ready: Default::default(),
            done: Default::default(),
            done_valid: Default::default(),
            done_ready: Default::default(),
            issued: Default::default(),
            issued_valid: Default::default(),
            issued_ready: Default::default(),
            rw_valid: Default::default(),
            rw_ready: Default::default(),
            rw_qpn: Default::default(),
            rw_idx: Default::default(),
            rw_psn: Default::default(),
            rw_skip: Default::default(),
            sq_rw_valid: Default::default(),
            sq_rw_ready: Default::default(),
            sq_rw_qpn: Default::default(),
            sq_rw_idx: Default::default(),
            inl_valid: Default::default(),
            inl_ready: Default::default(),
            inl_data: Default::default(),
            inl_last: Default::default(),
            inv_valid: Default::default(),
            inv_index: Default::default(),
            inv_ready: Default::default(),
            bw_valid: Default::default(),
            bw_index: Default::default(),
            bw_entry: Default::default(),
            bw_ready: Default::default(),
            l_bind: Default::default(),
            l_local: Default::default(),
            l_wacc: Default::default(),
            op_bind: k(u64::from(WR_BIND_MW)),
            s_bind: k(WcStatus::MwBindErr as u64),
            acc_rwa: k(ACC_REMOTE_WRITE | ACC_REMOTE_ATOMIC),
            acc_rem: k(ACC_REMOTE_WRITE | ACC_REMOTE_READ | ACC_REMOTE_ATOMIC),
            zero32: k(0),
            l_linv: Default::default(),
            op_linv: k(u64::from(WR_LOCAL_INV)),
            win_we: Default::default(),
            win_qpn: Default::default(),
            win_busy: Default::default(),
            win_lim: Default::default(),
            win_fin: Default::default(),
            rd_ram: Default::default(),
            ncmp: Default::default(),
            r_out: Default::default(),
            r_blk: Default::default(),
            r_cnt: Default::default(),
            r_hw: Default::default(),
            l_again: Default::default(),
            r_sent: Default::default(),
            zero16: k(0),
            l_ra: Default::default(),
            l_cnt: Default::default(),
            l_rdw: Default::default(),
            l_live: Default::default(),
            l_rst: Default::default(),
            l_nidx: Default::default(),
            l_nhw: Default::default(),
            kc: Default::default(),
            win_ram: Default::default(),
            wcmp: Default::default(),
            wb1: Default::default(),
            wb2: Default::default(),
            wv: Default::default(),
            l_win: Default::default(),
            l_chk: Default::default(),
            ctx_ram: Default::default(),
            psn_ram: Default::default(),
            gen_ram: Default::default(),
            err_ram: Default::default(),
            q_err: Default::default(),
            mask_ram: Default::default(),
            mk: Default::default(),
            mok: Default::default(),
            qe_v: Default::default(),
            qe_q: Default::default(),
            add_la: Default::default(),
            add_ra: Default::default(),
            add_ln: Default::default(),
            imm_map: imm,
            ah_map: ByteMap::new(
                (0..6).map(|i| ByteSrc::In(8 * (45 - i))).chain((0..16).map(|i| ByteSrc::In(8 * (63 - i)))).collect(),
            ),
            l_ah_v6: Default::default(),
            k_mapped_hi: Constant::new(bits::<96>(0xFFFF)),
            k_mapped: Constant::new(crate::wire::tx_build::v4_bits(0)),
            l_ah_mac: Default::default(),
            l_ah_ip: Default::default(),
            l_ah_sport: Default::default(),
            l_ah_qkey: Default::default(),
            state: Default::default(),
            slot: Default::default(),
            qpn: Default::default(),
            idx: Default::default(),
            ctx: Default::default(),
            sp: Default::default(),
            key_ok: Default::default(),
            dma: Default::default(),
            status: Default::default(),
            next_psn: Default::default(),
            next_noack: Default::default(),
            gen: Default::default(),
            soff: Default::default(),
            swait: Default::default(),
            rw_psn_r: Default::default(),
            rw_skip_r: Default::default(),
            o_desc: Default::default(),
            o_dv: Default::default(),
            fast: Default::default(),
            psn1: Default::default(),
            o_fast: Default::default(),
            fpend: Default::default(),
            l_fast: Default::default(),
            o_iss: Default::default(),
            o_iv: Default::default(),
            ib_ram: Default::default(),
            ib_w: Default::default(),
            ib_c: Default::default(),
            ib_r: Default::default(),
            ndat: Default::default(),
            nidx: Default::default(),
            isent: Default::default(),
            popped: Default::default(),
            l_op: Default::default(),
            l_flags: Default::default(),
            l_len: Default::default(),
            l_slot: Default::default(),
            l_st: Default::default(),
            l_send: Default::default(),
            l_masked: Default::default(),
            l_mok: Default::default(),
            l_bad_ext: Default::default(),
            l_unsup: Default::default(),
            l_inl: Default::default(),
            l_inl_ok: Default::default(),
            l_ndat: Default::default(),
            l_ib_full: Default::default(),
            l_lerr: Default::default(),
            zero7: k(0),
            zero24: k(0),
            one24: k(1),
            zero2: k(0),
            one2: k(1),
            three2: k(3),
            one4: k(1),
            one16: k(1),
            one3: k(1),
            one4b: k(1),
            zero3: k(0),
            zero6: k(0),
            zero64: k(0),
            max_inl: k(MAX_INLINE as u64),
            op_nop: k(u64::from(WR_NOP_SLOT)),
            op_send: k(u64::from(WR_SEND)),
            op_send_imm: k(u64::from(WR_SEND_WITH_IMM)),
            op_send_inv: k(u64::from(WR_SEND_WITH_INV)),
            op_write: k(u64::from(WR_RDMA_WRITE)),
            op_write_imm: k(u64::from(WR_RDMA_WRITE_WITH_IMM)),
            zero8: k(0),
            st_rts: k(QpState::Rts as u64),
            st_reset: k(QpState::Reset as u64),
            one8: k(1),
            st_sqd: k(QpState::Sqd as u64),
            st_err: k(QpState::Error as u64),
            op_read: k(u64::from(WR_RDMA_READ)),
            op_cas: k(u64::from(WR_ATOMIC_CMP_AND_SWP)),
            op_faa: k(u64::from(WR_ATOMIC_FETCH_AND_ADD)),
            op_mcas: k(u64::from(WR_MASKED_ATOMIC_CMP_AND_SWP)),
            op_mfaa: k(u64::from(WR_MASKED_ATOMIC_FETCH_AND_ADD)),
            op_mask: k(u64::from(WR_MASK_SLOT)),
            f_ext: k(u64::from(WQE_EXT)),
            acc_lw: k(ACC_LOCAL_WRITE),
            acc_none: k(0),
            f_sig: k(u64::from(WQE_SIGNALED)),
            f_sol: k(u64::from(WQE_SOLICITED)),
            f_inl: k(u64::from(WQE_INLINE)),
            s_flush: k(WcStatus::WrFlushErr as u64),
            s_qp_op: k(WcStatus::LocQpOpErr as u64),
            s_prot: k(WcStatus::LocProtErr as u64),
        }
    }
}

impl Logic for ReqFront {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, state, slot, qpn, idx, ctx, sp, key_ok, dma, status, next_psn, next_noack, gen, soff,
            swait, rw_psn_r, rw_skip_r, o_desc, o_dv, o_iss, o_iv, q_err, mk, mok, qe_v, qe_q, ib_w, ib_c, ib_r, ndat,
            nidx, isent, popped, wb1, wb2, wv, r_out, r_blk, r_cnt, r_hw, r_sent, fast, psn1, o_fast, fpend
        );
        clock!(self, clock, gen_ram, err_ram, mask_ram, add_la, add_ra, add_ln, ib_ram, win_ram, wcmp, rd_ram, ncmp);
        self.kc.clock.next = self.clock.val();
        self.ctx_ram.clock.next = self.clock.val();
        self.psn_ram.clock.next = self.clock.val();

        // Key Cache write port straight through
        self.kc.wr_en.next = self.kc_wr.en.val();
        self.kc.inv_en.next = self.kc_wr.inv_en.val();
        self.kc.wr_index.next = self.kc_wr.index.val();
        self.kc.wr_valid.next = self.kc_wr.valid.val();
        self.kc.wr_tag.next = self.kc_wr.tag.val();
        self.kc.wr_pd.next = self.kc_wr.pd.val();
        self.kc.wr_access.next = self.kc_wr.access.val();
        self.kc.wr_va.next = self.kc_wr.va.val();
        self.kc.wr_len.next = self.kc_wr.len.val();
        self.kc.wr_base.next = self.kc_wr.base.val();
        self.kc.wr_fast.next = self.kc_wr.fast.val();
        self.kc.wr_mw.next = self.kc_wr.mw.val();
        self.kc.wr_mw2.next = self.kc_wr.mw2.val();
        self.kc.wr_qpn.next = self.kc_wr.qpn.val();
        self.kc.wr_bind.next = self.kc_wr.bind.val();

        // context RAM: written by the dispatcher, read by qpn
        self.ctx_ram.we.next = self.ctx_we.val();
        self.ctx_ram.waddr.next = self.ctx_qpn.val().get_bits::<8>(0);
        self.ctx_ram.wdata.next = self.ctx_data.val();
        self.ctx_ram.raddr.next = self.wqe_qpn.val().get_bits::<8>(0);
        self.psn_ram.raddr.next = self.wqe_qpn.val().get_bits::<8>(0);
        // the window: written by the Completer, read with the slot; the slot's PSN against its end (rxe
        // `wait_psn`: psn_compare(psn, comp_psn + 128) > 0), continuously: the slot stays on offer until taken
        self.win_ram.raddr.next = self.wqe_qpn.val().get_bits::<8>(0);
        self.win_ram.we.next = self.win_we.val();
        self.win_ram.waddr.next = self.win_qpn.val();
        self.win_ram.wdata.next.busy = self.win_busy.val();
        self.win_ram.wdata.next.lim = self.win_lim.val();
        self.win_ram.wdata.next.fin = self.win_fin.val();
        // READ/atomic WQEs outstanding (rxe `check_init_depth`): the slot's index against the QP's high-water
        // mark ((idx - hw) mod 2^16 not negative: sent for the first time; a resend after a go-back-N is not
        // counted again), and the count sent minus retired against the QP's limit (a "negative" count, which
        // only a RESET of a busy QP could leave, never blocks)
        self.rd_ram.raddr.next = self.wqe_qpn.val().get_bits::<8>(0);
        self.l_nidx.next = bit_cast::<24, 16>(self.idx.q.val()) << 8;
        self.l_nhw.next = bit_cast::<24, 16>(self.rd_ram.rdata.val().hw) << 8;
        self.ncmp.a.next = self.l_nidx.val();
        self.ncmp.b.next = self.l_nhw.val();
        self.r_out.d.next = self.rd_ram.rdata.val().sent - self.win_ram.rdata.val().fin;
        self.r_blk.d.next = !self.r_out.q.val().get_bit(7) & (self.r_out.q.val().get_bits::<7>(0) >= self.ctx.q.val().max_rd);
        // a CMD_WRITE_QP to RESET clears the count (the QP has nothing outstanding then)
        self.l_rst.next = self.ctx_we.val() & (self.ctx_data.val().state == self.st_reset.val());
        self.rd_ram.we.next = self.l_rst.val();
        self.rd_ram.waddr.next = self.ctx_qpn.val().get_bits::<8>(0);
        self.rd_ram.wdata.next.hw = self.zero16.val();
        self.rd_ram.wdata.next.sent = self.zero8.val();
        self.wcmp.a.next = self.psn_ram.rdata.val().psn;
        self.wcmp.b.next = self.win_ram.rdata.val().lim;
        self.wb1.d.next = self.win_ram.rdata.val().busy;
        self.wb2.d.next = self.wb1.q.val();
        self.wv.d.next = self.state.q.val() != FrontState::Read;
        self.gen_ram.raddr.next = self.wqe_qpn.val().get_bits::<8>(0);
        self.mask_ram.raddr.next = self.wqe_qpn.val().get_bits::<8>(0);
        self.mask_ram.we.next = false;
        self.mask_ram.waddr.next = self.qpn.q.val().get_bits::<8>(0);
        self.mask_ram.wdata.next.idx = self.idx.q.val();
        self.mask_ram.wdata.next.cmp = self.slot.q.val().get_bits::<64>(128);
        self.mask_ram.wdata.next.swp = self.slot.q.val().get_bits::<64>(192);
        self.gen_ram.we.next = false;
        self.gen_ram.waddr.next = self.qpn.q.val().get_bits::<8>(0);
        self.gen_ram.wdata.next = self.gen.q.val() + self.one4.val();
        // PSN RAM: the write-back (Emit) and a rewind (RwSq) win; a command write waits (psn_ready low)
        self.psn_ready.next = (self.state.q.val() != FrontState::Emit)
            & (self.state.q.val() != FrontState::RwSq)
            & !self.qerr_valid.val();
        // error flags: set by the Completer, cleared by a PSN command write
        self.err_ram.raddr.next = self.wqe_qpn.val().get_bits::<8>(0);
        self.err_ram.we.next = self.qerr_valid.val() | (self.psn_we.val() & self.psn_ready.val());
        self.err_ram.waddr.next = self.psn_qpn.val().get_bits::<8>(0);
        if self.qerr_valid.val() {
            self.err_ram.waddr.next = self.qerr_qpn.val();
        }
        self.err_ram.wdata.next = self.qerr_valid.val();
        self.psn_ram.we.next = self.psn_we.val() & self.psn_ready.val();
        self.psn_ram.waddr.next = self.psn_qpn.val().get_bits::<8>(0);
        self.psn_ram.wdata.next.psn = self.psn_value.val();
        self.psn_ram.wdata.next.noack = self.zero7.val();
        self.psn_ram.wdata.next.skip = self.zero24.val();
        // the rewind port on to the SQ Ring
        self.rw_ready.next = false;
        self.sq_rw_valid.next = false;
        self.sq_rw_qpn.next = self.qpn.q.val();
        self.sq_rw_idx.next = self.idx.q.val();
        // a resumed WQE: its addresses and length advanced by skip packets (operands are registers)
        self.add_la.a.next = self.o_desc.q.val().laddr;
        self.add_la.b.next = bit_cast::<64, 32>(self.soff.q.val());
        self.add_la.cin.next = false;
        self.add_ra.a.next = self.o_desc.q.val().raddr;
        self.add_ra.b.next = bit_cast::<64, 32>(self.soff.q.val());
        self.add_ra.cin.next = false;
        self.add_ln.a.next = bit_cast::<64, 32>(self.o_desc.q.val().len);
        self.add_ln.b.next = !bit_cast::<64, 32>(self.soff.q.val());
        self.add_ln.cin.next = true;

        // decode of the latched slot
        self.l_slot.next = self.slot.q.val();
        self.l_op.next = self.l_slot.val().get_bits::<8>(64);
        self.l_flags.next = self.l_slot.val().get_bits::<8>(72);
        self.l_len.next = self.l_slot.val().get_bits::<32>(192);
        self.imm_map.x.next = self.l_slot.val();
        // a UD WQE's address handle (docs/host-interface.md): remote QPN 32..36, Q_Key 36..40 (bit 31: the QP's
        // own), MAC 40..46, UDP source port 46..48 (0: the QP's own), GID 48..64
        self.ah_map.x.next = self.l_slot.val();
        self.l_ah_mac.next = self.ah_map.y.val().get_bits::<48>(0);
        self.l_ah_ip.next = self.ah_map.y.val().get_bits::<128>(48);
        self.l_ah_v6.next = self.l_ah_ip.val().get_bits::<96>(32) != self.k_mapped_hi.val();
        self.l_ah_sport.next = self.l_slot.val().get_bits::<16>(368);
        if self.l_ah_sport.val() == self.zero16.val() {
            self.l_ah_sport.next = self.ctx.q.val().sport;
        }
        self.l_ah_qkey.next = self.l_slot.val().get_bits::<32>(288);
        if self.l_slot.val().get_bit(319) {
            self.l_ah_qkey.next = self.ctx.q.val().qkey;
        }
        self.l_st.next = self.ctx.q.val().state;
        // SEND and WRITE (with or without immediate) resume mid-message; a READ is asked again for the rest
        self.l_send.next = (self.l_op.val() != self.op_read.val())
            & (self.l_op.val() != self.op_cas.val())
            & (self.l_op.val() != self.op_faa.val());
        self.l_masked.next = (self.l_op.val() == self.op_mcas.val()) | (self.l_op.val() == self.op_mfaa.val());
        self.l_linv.next = self.l_op.val() == self.op_linv.val();
        self.l_bind.next = self.l_op.val() == self.op_bind.val();
        self.l_local.next = self.l_linv.val() | self.l_bind.val();
        self.l_wacc.next = self.imm_map.y.val().get_bits::<4>(0);
        // the window's entry, as BIND_MW writes it (the DMA address of its first byte from the MR's lookup)
        self.bw_valid.next = self.state.q.val() == FrontState::BWr;
        self.bw_index.next = self.l_slot.val().get_bits::<10>(328);
        self.bw_entry.next.tag = self.l_slot.val().get_bits::<8>(320);
        self.bw_entry.next.pd = self.ctx.q.val().pd;
        self.bw_entry.next.access = self.l_wacc.val() & self.acc_rem.val();
        self.bw_entry.next.va = self.l_slot.val().get_bits::<64>(128);
        self.bw_entry.next.len = bit_cast::<64, 32>(self.l_len.val());
        self.bw_entry.next.base = self.dma.q.val();
        self.bw_entry.next.fast = true;
        self.bw_entry.next.mw = true;
        self.bw_entry.next.mw2 = true;
        self.bw_entry.next.qpn = self.qpn.q.val().get_bits::<8>(0);
        self.bw_entry.next.bind = false;
        self.inv_valid.next = self.state.q.val() == FrontState::LInv;
        self.inv_index.next = self.imm_map.y.val().get_bits::<10>(8);
        self.l_mok.next = self.l_masked.val() & self.mok.q.val();
        self.qe_v.d.next = self.qerr_valid.val();
        self.qe_q.d.next = self.qerr_qpn.val();
        self.l_bad_ext.next = (((self.l_flags.val() & self.f_ext.val()) != self.zero8.val()) != self.l_masked.val())
            | (self.l_masked.val() & !self.l_mok.val());
        self.l_inl.next = (self.l_flags.val() & self.f_inl.val()) != self.zero8.val();
        self.l_inl_ok.next = ((self.l_op.val() == self.op_send.val())
            | (self.l_op.val() == self.op_send_imm.val())
            | (self.l_op.val() == self.op_write.val())
            | (self.l_op.val() == self.op_write_imm.val()))
            & (self.l_len.val() <= self.max_inl.val());
        // a WQE whose record need not wait for the Requester (an RC RDMA WRITE of one packet; see the module
        // documentation for why not the others)
        self.l_fast.next = (self.l_op.val() == self.op_write.val())
            & (self.l_len.val() <= self.max_inl.val())
            & !self.ctx.q.val().uc
            & !self.ctx.q.val().ud
            & (self.sp.q.val().skip == self.zero24.val());
        self.psn1.d.next = self.sp.q.val().psn + self.one24.val();
        self.l_ndat.next = self.zero3.val();
        if self.l_inl.val() & (self.l_len.val() <= self.max_inl.val()) {
            self.l_ndat.next = self.l_len.val().get_bits::<3>(6);
            if self.l_len.val().get_bits::<6>(0) != self.zero6.val() {
                self.l_ndat.next = self.l_len.val().get_bits::<3>(6) + self.one3.val();
            }
        }
        self.l_unsup.next = (self.l_inl.val() & !self.l_inl_ok.val())
            | self.l_bad_ext.val()
            | (self.ctx.q.val().uc & (!self.l_send.val() | self.l_masked.val() | (self.l_op.val() == self.op_send_inv.val())))
            | (self.ctx.q.val().ud & (self.l_op.val() != self.op_send.val()) & (self.l_op.val() != self.op_send_imm.val()));
        // the inline buffer: 8 slots; the reader sees the committed ones
        self.l_ib_full.next = (self.ib_w.q.val().get_bits::<3>(0) == self.ib_r.q.val().get_bits::<3>(0))
            & (self.ib_w.q.val().get_bit(3) != self.ib_r.q.val().get_bit(3));
        self.ib_ram.we.next = false;
        self.ib_ram.waddr.next = self.ib_w.q.val().get_bits::<3>(0);
        self.ib_ram.wdata.next.data = self.wqe_data.val();
        self.ib_ram.wdata.next.last = self.ndat.q.val() == self.one3.val();
        self.ib_ram.raddr.next = self.ib_r.q.val().get_bits::<3>(0);
        self.inl_valid.next = self.ib_r.q.val() != self.ib_c.q.val();
        self.inl_data.next = self.ib_ram.rdata.val().data;
        self.inl_last.next = self.ib_ram.rdata.val().last;
        if self.inl_ready.val() & (self.ib_r.q.val() != self.ib_c.q.val()) {
            self.ib_r.d.next = self.ib_r.q.val() + self.one4b.val();
        }
        self.l_lerr.next = (self.status.q.val() != self.zero8.val()) & (self.status.q.val() != self.s_flush.val());
        self.l_live.next = !self.q_err.q.val() & ((self.l_st.val() == self.st_rts.val()) | (self.l_st.val() == self.st_sqd.val()));
        // (rxe does a local operation before its `wait_psn` check: a LOCAL_INV never waits for the window)
        self.l_win.next = self.wb2.q.val() & self.wcmp.gt.val() & self.l_live.val() & !self.l_local.val();
        self.l_ra.next = !self.l_send.val() | self.l_masked.val();
        self.l_cnt.next = self.l_ra.val() & !self.ncmp.neg.val();
        self.l_again.next = self.l_local.val() & self.ncmp.neg.val();
        self.l_rdw.next = self.l_cnt.val() & self.r_blk.q.val() & self.l_live.val();
        self.l_chk.next = self.kc.res_valid.val() | (self.l_inl.val() & self.wv.q.val());

        // Key Cache lookup: held while in Key (only the first cycle's result is used)
        self.kc.lk_valid.next = false;
        self.kc.lk_key.next = self.l_slot.val().get_bits::<32>(224);
        if self.l_linv.val() {
            self.kc.lk_key.next = self.imm_map.y.val();
        }
        if self.state.q.val() == FrontState::BKey {
            // BIND_MW's second lookup: the window, at the index of its new rkey (bytes 40..44)
            self.kc.lk_key.next = self.l_slot.val().get_bits::<32>(320);
        }
        self.kc.lk_pd.next = self.ctx.q.val().pd;
        self.kc.lk_va.next = self.l_slot.val().get_bits::<64>(128);
        self.kc.lk_len.next = self.l_len.val();
        self.kc.lk_access.next = self.acc_none.val();
        if (self.l_op.val() == self.op_read.val())
            | (self.l_op.val() == self.op_cas.val())
            | (self.l_op.val() == self.op_faa.val())
            | self.l_masked.val()
            | (self.l_bind.val() & ((self.l_wacc.val() & self.acc_rwa.val()) != self.acc_none.val()))
        {
            self.kc.lk_access.next = self.acc_lw.val();
        }
        self.kc.lk_remote.next = false;
        self.kc.lk_qpn.next = self.qpn.q.val().get_bits::<8>(0);
        self.kc.lk_bind.next = self.l_bind.val();

        // outputs
        self.desc.next = self.o_desc.q.val();
        self.desc_valid.next = self.o_dv.q.val();
        self.issued.next = self.o_iss.q.val();
        self.issued_valid.next = self.o_iv.q.val();
        if self.desc_ready.val() {
            self.o_dv.d.next = false;
        }
        // an early-record WQE's done is dropped (its record went in Emit); the Requester takes its next
        // descriptor only after its done is taken, so the two never fall in one cycle
        if self.done_valid.val() & self.fpend.q.val() {
            self.fpend.d.next = false;
        }
        if self.o_dv.q.val() & self.desc_ready.val() & self.o_fast.q.val() {
            self.fpend.d.next = true;
        }
        if self.issued_ready.val() {
            self.o_iv.d.next = false;
        }
        self.wqe_ready.next = false;
        self.done_ready.next = self.fpend.q.val();

        match self.state.q.val() {
            FrontState::Idle => {
                if self.rw_valid.val() {
                    // a rewind (taken even while a record waits for the completer: the completer is waiting
                    // for this): its QP's generation is read now, written back + 1 in RwSq. Not while an early
                    // record's WQE is still with the Requester (its descriptor waiting, or its done to come:
                    // a few cycles), so that, as for every other WQE, its packet has left before the rewind
                    if !self.o_dv.q.val() & !self.fpend.q.val() {
                        self.rw_ready.next = true;
                        self.qpn.d.next = self.rw_qpn.val();
                        self.idx.d.next = self.rw_idx.val();
                        self.rw_psn_r.d.next = self.rw_psn.val();
                        self.rw_skip_r.d.next = self.rw_skip.val();
                        self.gen_ram.raddr.next = self.rw_qpn.val().get_bits::<8>(0);
                        self.state.d.next = FrontState::RwRead;
                    }
                } else if self.wqe_valid.val() & !self.o_iv.q.val() & !self.o_dv.q.val() {
                    // (with an early record the descriptor may still wait for the Requester)
                    self.popped.d.next = false;
                    self.slot.d.next = self.wqe_data.val();
                    self.qpn.d.next = self.wqe_qpn.val();
                    self.idx.d.next = self.wqe_idx.val();
                    self.state.d.next = FrontState::Read;
                }
            }
            FrontState::Read => {
                // the RAMs were read with the slot's QPN in Idle (the slot is still presented)
                self.ctx.d.next = self.ctx_ram.rdata.val();
                self.sp.d.next = self.psn_ram.rdata.val();
                self.gen.d.next = self.gen_ram.rdata.val();
                // the error flag as read, or set by the Completer in the cycle of the read or since (the
                // RAM's write of it comes after the read): a QP the Completer just put in error (e.g. its
                // head WQE failed when sent again) sends nothing more
                self.q_err.d.next = self.err_ram.rdata.val()
                    | (self.qe_v.q.val() & (self.qe_q.q.val() == self.qpn.q.val().get_bits::<8>(0)))
                    | (self.qerr_valid.val() & (self.qerr_qpn.val() == self.qpn.q.val().get_bits::<8>(0)));
                self.mk.d.next = self.mask_ram.rdata.val();
                self.mok.d.next = (self.mask_ram.rdata.val().idx + self.one16.val()) == self.idx.q.val();
                self.state.d.next = FrontState::Key;
                if self.gen_ram.rdata.val() != self.wqe_gen.val() {
                    // read before a rewind of its QP: it will come again; dropped
                    self.wqe_ready.next = true;
                    self.state.d.next = FrontState::Idle;
                } else if self.l_op.val() == self.op_mask.val() {
                    // a mask slot: kept for the QP's next WQE, no record
                    self.mask_ram.we.next = true;
                    self.wqe_ready.next = true;
                    self.state.d.next = FrontState::Idle;
                } else if self.l_op.val() == self.op_nop.val() {
                    // a padding slot: dropped, no record
                    self.wqe_ready.next = true;
                    self.state.d.next = FrontState::Idle;
                } else if self.l_inl.val() {
                    // inline: no local buffer, no Key Cache lookup (none is in flight, so no result can come
                    // in Check)
                    self.state.d.next = FrontState::Check;
                }
            }
            FrontState::Key => {
                self.kc.lk_valid.next = true;
                self.state.d.next = FrontState::Check;
            }
            FrontState::RwRead => {
                self.gen.d.next = self.gen_ram.rdata.val();
                self.state.d.next = FrontState::RwSq;
            }
            FrontState::RwSq => {
                // the QP's PSN state now (the resumed WQE's PSN and skip), then the SQ Ring's fetch index; the
                // marker record follows every record issued before
                self.psn_ram.we.next = true;
                self.psn_ram.waddr.next = self.qpn.q.val().get_bits::<8>(0);
                self.psn_ram.wdata.next.psn = self.rw_psn_r.q.val();
                self.psn_ram.wdata.next.noack = self.zero7.val();
                self.psn_ram.wdata.next.skip = self.rw_skip_r.q.val();
                self.sq_rw_valid.next = true;
                if self.sq_rw_ready.val() {
                    self.gen_ram.we.next = true;
                    self.state.d.next = FrontState::RwMark;
                }
            }
            FrontState::RwMark => {
                // the marker, once the record before it (if any) has gone to the completer
                if !self.o_iv.q.val() {
                    self.o_iv.d.next = true;
                    self.o_iss.d.next.qpn = self.qpn.q.val();
                    self.o_iss.d.next.idx = self.idx.q.val();
                    self.o_iss.d.next.rewind = true;
                    self.o_iss.d.next.status = self.zero8.val();
                    self.o_iss.d.next.first_psn = self.rw_psn_r.q.val();
                    self.o_iss.d.next.next_psn = self.rw_psn_r.q.val();
                    self.state.d.next = FrontState::Idle;
                }
            }
            FrontState::Skip => {
                // three cycles for the adders, then the resumed descriptor goes to the Requester
                self.swait.d.next = self.swait.q.val() + self.one2.val();
                if self.swait.q.val() == self.three2.val() {
                    self.o_desc.d.next.laddr = self.add_la.sum.val();
                    self.o_desc.d.next.raddr = self.add_ra.sum.val();
                    self.o_desc.d.next.len = self.add_ln.sum.val().get_bits::<32>(0);
                    self.o_desc.d.next.cont = self.l_send.val();
                    self.o_dv.d.next = true;
                    self.state.d.next = FrontState::Run;
                }
            }
            FrontState::Check => {
                if self.l_chk.val() & (self.l_win.val() | self.l_rdw.val()) {
                    // rxe `wait_psn`: the QP has 128 PSNs unacknowledged before this WQE's first; or rxe
                    // `check_init_depth`: a new READ/atomic while max_rd_atomic of them are outstanding. It is
                    // not taken (the slot stays on offer) and is read again from Idle, where a rewind goes first
                    self.state.d.next = FrontState::Idle;
                } else if self.l_chk.val() {
                    self.key_ok.d.next = self.kc.res_ok.val();
                    self.r_cnt.d.next = self.l_cnt.val();
                    self.r_hw.d.next = self.l_cnt.val() | (self.l_local.val() & !self.l_again.val());
                    self.r_sent.d.next = self.rd_ram.rdata.val().sent;
                    self.dma.d.next = self.kc.res_dma.val();
                    self.status.d.next = self.zero8.val();
                    self.fast.d.next = false;
                    // an inline WQE has no local buffer (its lkey is not looked at); a LOCAL_INV's key must be one
                    // it may invalidate (rxe `rxe_invalidate_mr` failing: LOC_QP_OP_ERR)
                    if !self.kc.res_ok.val() & !self.l_inl.val() & !self.l_local.val() {
                        self.status.d.next = self.s_prot.val();
                    }
                    if self.l_linv.val() & !self.kc.res_inv.val() & !self.l_again.val() {
                        self.status.d.next = self.s_qp_op.val();
                    }
                    // BIND_MW: the MR's check failed, or an empty range (o10-37.2.40): MW_BIND_ERR
                    if self.l_bind.val()
                        & (!self.kc.res_ok.val() | (self.l_len.val() == self.zero32.val()))
                        & !self.l_again.val()
                    {
                        self.status.d.next = self.s_bind.val();
                    }
                    if self.l_unsup.val() {
                        self.status.d.next = self.s_qp_op.val();
                    }
                    if (self.l_st.val() != self.st_rts.val()) & (self.l_st.val() != self.st_sqd.val()) {
                        self.status.d.next = self.s_qp_op.val();
                        if self.l_st.val() == self.st_err.val() {
                            self.status.d.next = self.s_flush.val();
                        }
                    }
                    if self.q_err.q.val() {
                        self.status.d.next = self.s_flush.val();
                    }
                    self.state.d.next = FrontState::Run;
                    self.next_psn.d.next = self.sp.q.val().psn;
                    self.next_noack.d.next = self.sp.q.val().noack;
                    self.soff.d.next = bit_cast::<32, 24>(self.sp.q.val().skip) << self.ctx.q.val().mtu_log2;
                    self.swait.d.next = self.zero2.val();
                    self.ndat.d.next = self.l_ndat.val();
                    self.isent.d.next = false;
                    if self.l_inl.val() {
                        // an inline WQE's own slot leaves the SQ Ring's output now, its data slots are next
                        self.wqe_ready.next = true;
                        self.popped.d.next = true;
                        self.nidx.d.next = self.idx.q.val() + self.one16.val();
                    }
                    // hand the WQE to the Requester unless it failed its checks
                    if (self.kc.res_ok.val() | self.l_inl.val())
                        & !self.l_local.val()
                        & !self.q_err.q.val()
                        & !self.l_unsup.val()
                        & ((self.l_st.val() == self.st_rts.val()) | (self.l_st.val() == self.st_sqd.val()))
                    {
                        self.o_dv.d.next = true;
                        self.o_fast.d.next = self.l_fast.val();
                        self.fast.d.next = self.l_fast.val();
                        self.o_desc.d.next.qpn = self.qpn.q.val();
                        self.o_desc.d.next.slot = self.idx.q.val();
                        self.o_desc.d.next.wr_op = self.l_op.val();
                        self.o_desc.d.next.solicited = (self.l_flags.val() & self.f_sol.val()) != self.zero8.val();
                        self.o_desc.d.next.imm = self.imm_map.y.val();
                        self.o_desc.d.next.laddr = self.kc.res_dma.val();
                        self.o_desc.d.next.len = self.l_len.val();
                        self.o_desc.d.next.raddr = self.l_slot.val().get_bits::<64>(256);
                        self.o_desc.d.next.rkey = self.l_slot.val().get_bits::<32>(320);
                        self.o_desc.d.next.compare_add = self.l_slot.val().get_bits::<64>(384);
                        self.o_desc.d.next.swap = self.l_slot.val().get_bits::<64>(448);
                        self.o_desc.d.next.cmp_mask = self.mk.q.val().cmp;
                        self.o_desc.d.next.swap_mask = self.mk.q.val().swp;
                        self.o_desc.d.next.psn = self.sp.q.val().psn;
                        self.o_desc.d.next.noack = self.sp.q.val().noack;
                        self.o_desc.d.next.mtu_log2 = self.ctx.q.val().mtu_log2;
                        self.o_desc.d.next.dest_qpn = self.ctx.q.val().dest_qpn;
                        self.o_desc.d.next.dst_mac = self.ctx.q.val().dst_mac;
                        self.o_desc.d.next.src_mac = self.src_mac.val();
                        self.o_desc.d.next.v6 = self.ctx.q.val().v6;
                        self.o_desc.d.next.src_ip = bit_cast::<128, 32>(self.src_ip.val()) | self.k_mapped.val();
                        if self.ctx.q.val().v6 {
                            self.o_desc.d.next.src_ip = self.src_ip6.val();
                        }
                        self.o_desc.d.next.dst_ip = self.ctx.q.val().dst_ip;
                        self.o_desc.d.next.sport = self.ctx.q.val().sport;
                        self.o_desc.d.next.cont = false;
                        self.o_desc.d.next.inl = self.l_inl.val();
                        self.o_desc.d.next.uc = self.ctx.q.val().uc;
                        self.o_desc.d.next.ud = self.ctx.q.val().ud;
                        self.o_desc.d.next.qkey = self.l_ah_qkey.val();
                        if self.ctx.q.val().ud {
                            self.o_desc.d.next.dest_qpn = self.l_slot.val().get_bits::<24>(256);
                            self.o_desc.d.next.dst_mac = self.l_ah_mac.val();
                            self.o_desc.d.next.dst_ip = self.l_ah_ip.val();
                            self.o_desc.d.next.v6 = self.l_ah_v6.val();
                            self.o_desc.d.next.src_ip = bit_cast::<128, 32>(self.src_ip.val()) | self.k_mapped.val();
                            if self.l_ah_v6.val() {
                                self.o_desc.d.next.src_ip = self.src_ip6.val();
                            }
                            self.o_desc.d.next.sport = self.l_ah_sport.val();
                        }
                        if self.l_inl.val() {
                            // its data slots into the inline buffer first (one packet: never resumed mid-way)
                            self.o_desc.d.next.laddr = self.zero64.val();
                            self.o_dv.d.next = false;
                            self.isent.d.next = true;
                            self.state.d.next = FrontState::Inl;
                        } else if self.sp.q.val().skip != self.zero24.val() {
                            // go-back-N resumes this WQE after `skip` packets: addresses and length first
                            self.o_dv.d.next = false;
                            self.state.d.next = FrontState::Skip;
                        } else if self.l_fast.val() {
                            // its record goes now, the Requester's done is dropped when it comes
                            self.state.d.next = FrontState::Emit;
                        }
                    } else if self.l_inl.val() {
                        // not sent: its data slots are taken and dropped
                        self.state.d.next = FrontState::Inl;
                    } else if self.l_again.val() {
                        // a local operation read again after a go-back-N: done already, its record goes
                        self.state.d.next = FrontState::Emit;
                    } else if self.l_linv.val() & self.kc.res_inv.val() & self.l_live.val() & !self.l_unsup.val() {
                        // LOCAL_INV (rxe `rxe_do_local_ops`): the invalidate first, then its record
                        self.state.d.next = FrontState::LInv;
                    } else if self.l_bind.val()
                        & self.kc.res_ok.val()
                        & (self.l_len.val() != self.zero32.val())
                        & self.l_live.val()
                        & !self.l_unsup.val()
                    {
                        // BIND_MW: the MR passed; now the window
                        self.state.d.next = FrontState::BKey;
                    } else {
                        self.state.d.next = FrontState::Emit;
                    }
                }
            }
            FrontState::Run => {
                self.done_ready.next = true;
                if self.done_valid.val() & !self.fpend.q.val() {
                    // the Requester's next PSN and AckReq counter (written back in Emit)
                    self.next_psn.d.next = self.done.val().next_psn;
                    self.next_noack.d.next = self.done.val().noack;
                    if self.done.val().err {
                        self.status.d.next = self.s_qp_op.val();
                    }
                    self.state.d.next = FrontState::Emit;
                }
            }
            FrontState::Emit => {
                // a local error (not a flush) puts the QP in error here, as rxe's requester does: the WQEs
                // behind it complete with WR_FLUSH_ERR unsent until the next CMD_WRITE_QP_REQ; its flag write
                // waits a cycle for the Completer's pulse, which has the port
                if !(self.l_lerr.val() & self.qerr_valid.val()) & !(self.r_hw.q.val() & self.l_rst.val()) {
                    if self.r_hw.q.val() {
                        // a READ/atomic sent for the first time (or completing unsent: the Completer retires
                        // every record, whatever its status) is counted, its index is the new high-water mark;
                        // so is a local operation's done the first time (not counted)
                        self.rd_ram.we.next = true;
                        self.rd_ram.waddr.next = self.qpn.q.val().get_bits::<8>(0);
                        self.rd_ram.wdata.next.hw = self.idx.q.val() + self.one16.val();
                        self.rd_ram.wdata.next.sent = self.r_sent.q.val();
                        if self.r_cnt.q.val() {
                            self.rd_ram.wdata.next.sent = self.r_sent.q.val() + self.one8.val();
                        }
                    }
                    if self.l_lerr.val() {
                        self.err_ram.we.next = true;
                        self.err_ram.waddr.next = self.qpn.q.val().get_bits::<8>(0);
                        self.err_ram.wdata.next = true;
                    }
                    // write-back: next PSN, AckReq counter, and the skip is used up
                    self.psn_ram.we.next = true;
                    self.psn_ram.waddr.next = self.qpn.q.val().get_bits::<8>(0);
                    self.psn_ram.wdata.next.psn = self.next_psn.q.val();
                    self.psn_ram.wdata.next.noack = self.next_noack.q.val();
                    if self.fast.q.val() {
                        self.psn_ram.wdata.next.psn = self.psn1.q.val();
                        self.psn_ram.wdata.next.noack = self.zero7.val();
                    }
                    self.psn_ram.wdata.next.skip = self.zero24.val();
                    self.o_iv.d.next = true;
                    self.o_iss.d.next.rewind = false;
                    self.o_iss.d.next.qpn = self.qpn.q.val();
                    self.o_iss.d.next.idx = self.idx.q.val();
                    if self.l_mok.val() {
                        // a rewind to this WQE starts at its mask slot
                        self.o_iss.d.next.idx = self.mk.q.val().idx;
                    }
                    self.o_iss.d.next.wr_id = self.l_slot.val().get_bits::<64>(0);
                    self.o_iss.d.next.wr_op = self.l_op.val();
                    self.o_iss.d.next.signaled =
                        ((self.l_flags.val() & self.f_sig.val()) != self.zero8.val()) | self.ctx.q.val().sig_all;
                    self.o_iss.d.next.first_psn = self.sp.q.val().psn;
                    self.o_iss.d.next.next_psn = self.next_psn.q.val();
                    if self.fast.q.val() {
                        self.o_iss.d.next.next_psn = self.psn1.q.val();
                    }
                    self.o_iss.d.next.status = self.status.q.val();
                    self.o_iss.d.next.laddr = self.dma.q.val();
                    self.o_iss.d.next.len = self.l_len.val();
                    if self.l_local.val() {
                        // a local operation's completion has byte_len 0 (rxe: its WQE has no data; a BIND_MW's
                        // SGE is the window's range)
                        self.o_iss.d.next.len = self.zero32.val();
                    }
                    self.o_iss.d.next.imm = self.imm_map.y.val();
                    // the slot is consumed (an inline WQE's was taken before its data slots)
                    self.wqe_ready.next = !self.popped.q.val();
                    self.state.d.next = FrontState::Idle;
                }
            }
            FrontState::Inl => {
                if self.ndat.q.val() == self.zero3.val() {
                    // all in: commit them and hand the WQE to the Requester (or complete it unsent)
                    self.ib_c.d.next = self.ib_w.q.val();
                    if self.isent.q.val() {
                        self.o_dv.d.next = true;
                        self.state.d.next = FrontState::Run;
                        if self.fast.q.val() {
                            self.state.d.next = FrontState::Emit;
                        }
                    } else {
                        self.state.d.next = FrontState::Emit;
                    }
                } else if self.wqe_valid.val() {
                    // (the QP's slots come in ring order, so its next slot of this generation is idx + k: the
                    // low bits of the index are checked, with the QPN's eight, to keep this compare short)
                    if (self.wqe_qpn.val().get_bits::<8>(0) == self.qpn.q.val().get_bits::<8>(0))
                        & (self.wqe_idx.val().get_bits::<3>(0) == self.nidx.q.val().get_bits::<3>(0))
                        & (self.wqe_gen.val() == self.gen.q.val())
                    {
                        if !self.isent.q.val() | !self.l_ib_full.val() {
                            self.wqe_ready.next = true;
                            self.nidx.d.next = self.nidx.q.val() + self.one16.val();
                            self.ndat.d.next = self.ndat.q.val() - self.one3.val();
                            if self.isent.q.val() {
                                self.ib_ram.we.next = true;
                                self.ib_w.d.next = self.ib_w.q.val() + self.one4b.val();
                            }
                            if self.ndat.q.val() == self.one3.val() {
                                // the last one: committed with it, the WQE goes on in the same cycle
                                self.ib_c.d.next = self.ib_w.q.val();
                                self.state.d.next = FrontState::Emit;
                                if self.isent.q.val() {
                                    self.ib_c.d.next = self.ib_w.q.val() + self.one4b.val();
                                    self.o_dv.d.next = true;
                                    self.state.d.next = FrontState::Run;
                                    if self.fast.q.val() {
                                        self.state.d.next = FrontState::Emit;
                                    }
                                }
                            }
                        }
                    } else {
                        // not its next data slot (the WQE crossed a read group: the driver broke the ring
                        // rule): the WQE completes with LOC_QP_OP_ERR, unsent, what it wrote is dropped
                        self.status.d.next = self.s_qp_op.val();
                        self.ib_w.d.next = self.ib_c.q.val();
                        self.isent.d.next = false;
                        // (unsent: its PSNs are not used, whatever it is)
                        self.fast.d.next = false;
                        self.state.d.next = FrontState::Emit;
                    }
                }
            }
            FrontState::BKey => {
                self.kc.lk_valid.next = true;
                self.state.d.next = FrontState::BChk;
            }
            FrontState::BChk => {
                // the window must be a free type 2 window of the QP's PD (rxe `rxe_check_bind_mw`: o10-37.2.30,
                // C10-72), else MW_BIND_ERR
                if self.kc.res_valid.val() {
                    self.state.d.next = FrontState::BWr;
                    if !self.kc.res_free.val() {
                        self.status.d.next = self.s_bind.val();
                        self.state.d.next = FrontState::Emit;
                    }
                }
            }
            FrontState::BWr => {
                if self.bw_ready.val() {
                    self.state.d.next = FrontState::Emit;
                }
            }
            FrontState::LInv => {
                // the dispatcher invalidates the MR in both Key Cache copies in the cycle it takes this; the
                // record goes after, so the WQEs behind it (read from Idle) see the key invalid
                if self.inv_ready.val() {
                    self.state.d.next = FrontState::Emit;
                }
            }
            _ => {
                self.state.d.next = FrontState::Idle;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnic_driver::host::{SendWqe, WR_LOCAL_INV, WR_RDMA_WRITE, WR_SEND, WR_SEND_WITH_IMM};
    use rnic_driver::host::{WR_MASKED_ATOMIC_CMP_AND_SWP, WR_MASKED_ATOMIC_FETCH_AND_ADD};

    struct Rig {
        u: ReqFront,
        /// The MR indexes the dispatcher invalidated for a LOCAL_INV (`inv_*`), in order.
        invs: Vec<u64>,
        /// The window entries a BIND_MW wrote (`bw_*`): (index, entry).
        binds: Vec<(u64, MrEntry)>,
        /// The mock Requester's done records still to be taken, in descriptor order (an early-record WQE's
        /// done may still be waiting when its record has come).
        dones: std::collections::VecDeque<(u64, u64, bool)>,
        /// The mock Requester holds its done records back.
        hold_dones: bool,
    }

    fn b512(bytes: &[u8; 64]) -> Bits<512> {
        let mut b = Bits::<512>::default();
        for (i, x) in bytes.iter().enumerate() {
            b.set_bits::<8>(8 * i, bits::<8>(*x as u64));
        }
        b
    }

    impl Rig {
        fn new() -> Self {
            let mut u = ReqFront::default();
            u.connect_all();
            Rig { u, invs: vec![], binds: vec![], dones: Default::default(), hold_dones: false }
        }
        fn clock(&mut self) {
            self.u.clock.next = false.into();
            simulate(&mut self.u, 200);
            self.u.clock.next = true.into();
            simulate(&mut self.u, 200);
            self.u.ctx_we.next = false;
            self.u.psn_we.next = false;
            self.u.kc_wr.en.next = false;
            self.u.kc_wr.inv_en.next = false;
            self.u.win_we.next = false;
        }
        /// The dispatcher's side of `bw_*` (always ready): the window entry written in the cycle it is taken.
        fn dispatch_bind(&mut self) {
            self.u.bw_ready.next = true;
            simulate(&mut self.u, 200);
            if self.u.bw_valid.val() {
                let e = self.u.bw_entry.val();
                let w = &mut self.u.kc_wr;
                (w.en.next, w.index.next, w.valid.next, w.tag.next, w.pd.next) = (true, self.u.bw_index.val(), true, e.tag, e.pd);
                (w.access.next, w.va.next, w.len.next, w.base.next) = (e.access, e.va, e.len, e.base);
                (w.fast.next, w.mw.next, w.mw2.next, w.qpn.next, w.bind.next) = (e.fast, e.mw, e.mw2, e.qpn, e.bind);
                self.binds.push((self.u.bw_index.val().to_u64(), e));
                simulate(&mut self.u, 200);
                // (the port's other fields back to an MR's for the rig's next `mr`)
                let w = &mut self.u.kc_wr;
                (w.fast.next, w.mw.next, w.mw2.next, w.qpn.next, w.bind.next) = (false, false, false, bits(0), false);
            }
        }
        /// The dispatcher's side of `inv_*` (always ready): the invalidate reaches the Key Cache copy in the
        /// cycle it is taken, as the top wires it.
        fn dispatch_inv(&mut self) {
            self.u.inv_ready.next = true;
            simulate(&mut self.u, 200);
            if self.u.inv_valid.val() {
                self.u.kc_wr.inv_en.next = true;
                self.u.kc_wr.index.next = self.u.inv_index.val();
                self.invs.push(self.u.inv_index.val().to_u64());
                simulate(&mut self.u, 200);
            }
        }
        /// The Completer's window write for a QP.
        fn win(&mut self, qpn: u64, busy: bool, lim: u64) {
            self.u.win_we.next = true;
            self.u.win_qpn.next = bits(qpn);
            self.u.win_busy.next = busy;
            self.u.win_lim.next = bits(lim);
            self.clock();
        }
        /// The Completer's window write with its count of retired READ/atomic WQEs.
        fn win_fin(&mut self, qpn: u64, busy: bool, lim: u64, fin: u64) {
            self.u.win_fin.next = bits(fin);
            self.win(qpn, busy, lim);
        }
        /// A go-back-N rewind of `qpn` to ring index `idx` (PSN, skip), taken with its marker.
        fn rewind(&mut self, qpn: u64, idx: u64, psn: u64, skip: u64) {
            let (mut taken, mut marker) = (false, false);
            for _ in 0..40 {
                self.u.rw_valid.next = !taken;
                self.u.rw_qpn.next = bits(qpn);
                self.u.rw_idx.next = bits(idx);
                self.u.rw_psn.next = bits(psn);
                self.u.rw_skip.next = bits(skip);
                self.u.wqe_valid.next = false;
                self.u.sq_rw_ready.next = true;
                self.u.issued_ready.next = true;
                simulate(&mut self.u, 200);
                taken |= self.u.rw_ready.val();
                marker |= self.u.issued_valid.val() && self.u.issued.val().rewind;
                self.clock();
            }
            self.u.rw_valid.next = false;
            assert!(taken && marker, "the rewind is taken and its marker issued");
        }
        /// Present a slot for `n` cycles: it must not be taken, nor make a descriptor or a record; a rewind
        /// offered meanwhile (when `rw`) must be taken.
        fn held(&mut self, qpn: u64, idx: u64, slot: &[u8; 64], n: usize, rw: bool) {
            let mut took_rw = false;
            for _ in 0..n {
                self.u.wqe_valid.next = true;
                self.u.wqe_qpn.next = bits(qpn);
                self.u.wqe_idx.next = bits(idx);
                self.u.wqe_data.next = b512(slot);
                self.u.rw_valid.next = rw && !took_rw;
                self.u.rw_qpn.next = bits(qpn + 1);
                self.u.sq_rw_ready.next = true;
                self.u.desc_ready.next = true;
                self.u.issued_ready.next = true;
                simulate(&mut self.u, 200);
                assert!(!self.u.wqe_ready.val() && !self.u.desc_valid.val(), "a WQE beyond its window is not taken");
                assert!(!self.u.issued_valid.val() || self.u.issued.val().rewind, "no record but a rewind's marker");
                took_rw |= self.u.rw_ready.val();
                self.clock();
            }
            self.u.rw_valid.next = false;
            assert_eq!(took_rw, rw, "a rewind is taken while a WQE waits for its window");
        }
        fn mr(&mut self, key: u32, pd: u64, va: u64, len: u64, base: u64, access: u64) {
            self.u.kc_wr.en.next = true;
            self.u.kc_wr.index.next = bits((key >> 8) as u64);
           self.u.kc_wr.valid.next = true;
            self.u.kc_wr.tag.next = bits((key & 0xFF) as u64);
            self.u.kc_wr.pd.next = bits(pd);
            self.u.kc_wr.access.next = bits(access);
            self.u.kc_wr.va.next = bits(va);
            self.u.kc_wr.len.next = bits(len);
            self.u.kc_wr.base.next = bits(base);
            self.clock();
        }
        /// A type 2 window of PD 7 at `index`, written unbound (not valid) as the driver's `alloc_mw2` does.
        fn free_window(&mut self, index: u64, tag: u64) {
            let w = &mut self.u.kc_wr;
            (w.en.next, w.index.next, w.valid.next, w.tag.next, w.pd.next) = (true, bits(index), false, bits(tag), bits(7));
            (w.fast.next, w.mw.next, w.mw2.next) = (true, true, true);
            self.clock();
            let w = &mut self.u.kc_wr;
            (w.fast.next, w.mw.next, w.mw2.next) = (false, false, false);
        }
        fn ctx(&mut self, qpn: u64, c: SqCtx) {
            self.u.ctx_we.next = true;
            self.u.ctx_qpn.next = bits(qpn);
            self.u.ctx_data.next = c;
            self.clock();
        }
        fn psn(&mut self, qpn: u64, psn: u64) {
            self.u.psn_we.next = true;
            self.u.psn_qpn.next = bits(qpn);
            self.u.psn_value.next = bits(psn);
            simulate(&mut self.u, 200);
            assert!(self.u.psn_ready.val());
            self.clock();
        }
        /// One WQE through; `done` answers a descriptor with (next_psn, noack, err).
        fn wqe(&mut self, qpn: u64, idx: u64, w: &SendWqe, done: impl Fn(&ReqDesc) -> (u64, u64, bool)) -> (Option<ReqDesc>, ReqIssued) {
            self.wqe_slot(qpn, idx, &w.encode(), done)
        }
        /// [`Rig::wqe`] for a slot given as its bytes.
        fn wqe_slot(&mut self, qpn: u64, idx: u64, slot: &[u8; 64], done: impl Fn(&ReqDesc) -> (u64, u64, bool)) -> (Option<ReqDesc>, ReqIssued) {
            let mut desc = None;
            let mut consumed = false;
            for _ in 0..200 {
                self.u.wqe_valid.next = !consumed;
                self.u.wqe_qpn.next = bits(qpn);
                self.u.wqe_idx.next = bits(idx);
                self.u.wqe_data.next = b512(slot);
                // (as the Requester: no descriptor taken while its done waits)
                self.u.desc_ready.next = self.dones.is_empty();
                self.u.issued_ready.next = true;
                let presented = !self.hold_dones && !self.dones.is_empty();
                self.u.done_valid.next = presented;
                if let Some(&(p, n, e)) = self.dones.front() {
                    self.u.done.next = ReqDone { next_psn: bits(p), noack: bits(n), err: e, ..Default::default() };
                }
                self.dispatch_inv();
                self.dispatch_bind();
                if self.u.desc_valid.val() && self.u.desc_ready.val() {
                    assert!(desc.is_none(), "one descriptor per WQE");
                    let d = self.u.desc.val();
                    self.dones.push_back(done(&d));
                    desc = Some(d);
                }
                if self.u.done_ready.val() && presented {
                    self.dones.pop_front();
                }
                if self.u.wqe_ready.val() {
                    consumed = true;
                }
                let iss = self.u.issued_valid.val().then(|| self.u.issued.val());
                self.clock();
                if let Some(i) = iss {
                    assert!(consumed, "the slot is consumed with its record");
                    return (desc, i);
                }
            }
            panic!("WQE Check hung");
        }
    }

    impl Rig {
        /// A slot that makes no record (a mask slot): presented until consumed; nothing may come out.
        fn quiet_slot(&mut self, qpn: u64, idx: u64, slot: &[u8; 64]) {
            for _ in 0..20 {
                self.u.wqe_valid.next = true;
                self.u.wqe_qpn.next = bits(qpn);
                self.u.wqe_idx.next = bits(idx);
                self.u.wqe_data.next = b512(slot);
                simulate(&mut self.u, 200);
                assert!(!self.u.desc_valid.val() && !self.u.issued_valid.val(), "a mask slot has no record");
                let taken = self.u.wqe_ready.val();
                self.clock();
                if taken {
                    self.u.wqe_valid.next = false;
                    return;
                }
            }
            panic!("the mask slot was not taken");
        }
    }

    /// What a slot stream made: descriptors, records, and the inline stream's beats (data, last).
    struct Out {
        descs: Vec<ReqDesc>,
        recs: Vec<ReqIssued>,
        inl: Vec<([u8; 64], bool)>,
    }

    fn bytes64(b: &Bits<512>) -> [u8; 64] {
        let mut o = [0u8; 64];
        for (i, x) in o.iter_mut().enumerate() {
            *x = b.get_bits::<8>(8 * i).to_u64() as u8;
        }
        o
    }

    impl Rig {
        /// Present `slots` (QPN, ring index, bytes) in order as the SQ Ring's output does (a slot stays until
        /// taken, the next one right behind it), with random gaps; every descriptor answered with PSN + 1; the
        /// inline stream taken when `inl_ready` says. Runs until all is taken and quiet.
        fn stream(&mut self, slots: &[(u64, u64, [u8; 64])], seed: u64, inl_ready: f64) -> Out {
            use rand::{rngs::SmallRng, Rng, SeedableRng};
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut out = Out { descs: vec![], recs: vec![], inl: vec![] };
            let (mut next, mut quiet) = (0, 0);
            let mut pend: Option<u64> = None;
            let mut v = false;
            for _ in 0..20_000 {
                // a presented slot stays until taken (the SQ Ring's output is a FIFO)
                v = next < slots.len() && (v || rng.gen_bool(0.5));
                self.u.wqe_valid.next = v;
                if let Some((q, i, d)) = slots.get(next) {
                    self.u.wqe_qpn.next = bits(*q);
                    self.u.wqe_idx.next = bits(*i);
                    self.u.wqe_data.next = b512(d);
                }
                // (as the Requester: no descriptor taken while its done waits)
                self.u.desc_ready.next = pend.is_none();
                self.u.issued_ready.next = true;
                let ir = rng.gen_bool(inl_ready);
                self.u.inl_ready.next = ir;
                self.u.done_valid.next = pend.is_some();
                self.u.done.next = ReqDone { next_psn: bits(pend.unwrap_or(0)), ..Default::default() };
                simulate(&mut self.u, 200);
                let mut busy = v;
                if self.u.desc_valid.val() && pend.is_none() {
                    let d = self.u.desc.val();
                    pend = Some(d.psn.to_u64() + 1);
                    out.descs.push(d);
                }
                if pend.is_some() && self.u.done_ready.val() && self.u.done_valid.val() {
                    pend = None;
                }
                if v && self.u.wqe_ready.val() {
                    next += 1;
                    v = false;
                }
                if self.u.issued_valid.val() {
                    out.recs.push(self.u.issued.val());
                    busy = true;
                }
                if self.u.inl_valid.val() && ir {
                    out.inl.push((bytes64(&self.u.inl_data.val()), self.u.inl_last.val()));
                    busy = true;
                }
                self.clock();
                quiet = if busy || pend.is_some() || next < slots.len() || self.u.inl_valid.val() { 0 } else { quiet + 1 };
                if quiet == 40 {
                    return out;
                }
            }
            panic!("WQE Check hung: {next} of {} slots taken", slots.len());
        }
    }

    /// The slots of an inline WQE: the WQE at `idx`, its data slots after it (bytes from `seed`).
    fn inline_slots(qpn: u64, idx: u64, op: u8, len: usize, seed: u8) -> Vec<(u64, u64, [u8; 64])> {
        let w = SendWqe { wr_id: 1000 + idx, opcode: op, flags: WQE_SIGNALED | WQE_INLINE, length: len as u32, lkey: 0xDEAD, ..Default::default() };
        let mut v = vec![(qpn, idx, w.encode())];
        for j in 0..len.div_ceil(64) {
            let mut b = [0u8; 64];
            for (k, x) in b.iter_mut().enumerate() {
                *x = seed.wrapping_mul(31).wrapping_add((64 * j + k) as u8);
            }
            v.push((qpn, idx + 1 + j as u64, b));
        }
        v
    }

    /// Inline WQEs: the WQE and its data slots are taken, the data slots come out on the inline stream in WQE
    /// order (`last` on each WQE's last), committed before the descriptor (flagged `inl`, no local address,
    /// its lkey never looked at) goes to the Requester; a padding slot is dropped without a record; the
    /// stream's back-pressure (8-slot buffer) holds WQE Check, nothing is lost. An inline READ completes with
    /// LOC_QP_OP_ERR and its data slots are dropped; an inline WQE whose data slots do not follow it (another
    /// QP's slot between: the driver broke the group rule) completes with LOC_QP_OP_ERR, and nothing of its
    /// data reaches the stream.
    #[test]
    fn inline_wqes_bring_their_data_slots_to_the_inline_stream() {
        use rnic_driver::host::nop_slot;
        let mut r = Rig::new();
        for q in [1, 2] {
            r.ctx(q, ctx(QpState::Rts));
            r.psn(q, 100 * q);
        }
        let mut slots = Vec::new();
        slots.extend(inline_slots(1, 0, WR_SEND, 200, 1));
        slots.extend(inline_slots(2, 0, WR_RDMA_WRITE, 64, 2));
        slots.push((1, 5, nop_slot()));
        slots.extend(inline_slots(1, 6, WR_SEND_WITH_IMM, 256, 3));
        slots.extend(inline_slots(1, 11, WR_SEND, 0, 4));
        slots.extend(inline_slots(2, 2, WR_RDMA_WRITE_WITH_IMM, 1, 5));
        slots.extend(inline_slots(2, 4, WR_SEND, 130, 6));
        for (seed, ready) in [(1, 1.0), (2, 0.1)] {
            let mut r = Rig::new();
            for q in [1, 2] {
                r.ctx(q, ctx(QpState::Rts));
                r.psn(q, 100 * q);
            }
            let o = r.stream(&slots, seed, ready);
            let want: Vec<(u64, u64, u64)> = vec![(1, 0, 200), (2, 0, 64), (1, 6, 256), (1, 11, 0), (2, 2, 1), (2, 4, 130)];
            let got: Vec<(u64, u64, u64)> = o.descs.iter().map(|d| (d.qpn.to_u64(), d.slot.to_u64(), d.len.to_u64())).collect();
            assert_eq!(got, want, "descriptors");
            assert!(o.descs.iter().all(|d| d.inl && d.laddr.to_u64() == 0));
            let recs: Vec<(u64, u64, u64)> = o.recs.iter().map(|i| (i.qpn.to_u64(), i.idx.to_u64(), i.status.to_u64())).collect();
            assert_eq!(recs, want.iter().map(|&(q, i, _)| (q, i, 0)).collect::<Vec<_>>(), "records (none for the padding slot)");
            // the data slots, in order, each WQE's last flagged
            let mut data = Vec::new();
            for (q, i, len) in &want {
                let s = slots.iter().position(|(a, b, _)| a == q && b == i).unwrap();
                let n = (*len as usize).div_ceil(64);
                for j in 0..n {
                    data.push((slots[s + 1 + j].2, j + 1 == n));
                }
            }
            assert_eq!(o.inl.len(), data.len(), "inline beats (ready {ready})");
            assert!(o.inl == data, "inline beats differ (ready {ready})");
        }
        // an inline READ: LOC_QP_OP_ERR, its data slot dropped; QP 2's inline SEND behind it goes
        let mut slots = inline_slots(1, 20, WR_RDMA_READ, 64, 7);
        slots.extend(inline_slots(2, 10, WR_SEND, 64, 8));
        let o = r.stream(&slots, 3, 0.5);
        let recs: Vec<(u64, u64)> = o.recs.iter().map(|i| (i.qpn.to_u64(), i.status.to_u64())).collect();
        assert_eq!(recs, vec![(1, WcStatus::LocQpOpErr as u64), (2, 0)]);
        assert_eq!(o.inl, vec![(slots[3].2, true)], "only QP 2's data");
        r.psn(1, 100);
        // QP 1's data slots behind QP 2's WQE: QP 1's WQE fails, none of its data goes out, QP 2's does;
        // QP 1's data slots then come as slots of a QP in error (flushed)
        let a = inline_slots(1, 30, WR_SEND, 128, 9);
        let b = inline_slots(2, 12, WR_SEND, 64, 10);
        let slots = vec![a[0], a[1], b[0], b[1], a[2]];
        let o = r.stream(&slots, 4, 0.5);
        let recs: Vec<(u64, u64, u64)> = o.recs.iter().map(|i| (i.qpn.to_u64(), i.idx.to_u64(), i.status.to_u64())).collect();
        let flush = WcStatus::WrFlushErr as u64;
        assert_eq!(recs, vec![(1, 30, WcStatus::LocQpOpErr as u64), (2, 12, 0), (1, 32, flush)]);
        assert_eq!(o.inl, vec![(b[1].2, true)], "only QP 2's data");
        assert_eq!(o.descs.len(), 1);        // the same with a one-packet inline RDMA WRITE (an early record): unsent, its record's next PSN is its
        // first (no PSN used)
        r.psn(1, 200);
        let a = inline_slots(1, 40, WR_RDMA_WRITE, 64, 11);
        let b = inline_slots(2, 20, WR_SEND, 64, 12);
        let slots = vec![a[0], b[0], b[1], a[1]];
        let o = r.stream(&slots, 5, 0.5);
        let recs: Vec<(u64, u64, u64)> = o.recs.iter().map(|i| (i.qpn.to_u64(), i.idx.to_u64(), i.status.to_u64())).collect();
        assert_eq!(recs, vec![(1, 40, WcStatus::LocQpOpErr as u64), (2, 20, 0), (1, 41, flush)]);
        assert_eq!((o.recs[0].first_psn.to_u64(), o.recs[0].next_psn.to_u64()), (200, 200));
        assert_eq!((o.recs[2].first_psn.to_u64(), o.recs[2].next_psn.to_u64()), (200, 200), "the PSN was not moved");
        assert_eq!(o.descs.len(), 1);
    }

    /// Masked atomics: the mask slot before the WQE gives the descriptor its masks (another QP's slots may
    /// come between them), the record carries the mask slot's index (a rewind reads it again), the local
    /// buffer needs LOCAL_WRITE; a masked WQE without its mask slot, or `ext` on another opcode, completes
    /// with LOC_QP_OP_ERR and sends nothing.
    #[test]
    fn a_masked_atomic_takes_the_masks_of_the_slot_before_it() {
        use rnic_driver::host::mask_slot;
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.mr(0x0402, 7, 0x7E00_0000_0000, 0x10000, 0x9_0000_0000, 0x0);
        for q in [1, 2] {
            r.ctx(q, ctx(QpState::Rts));
            r.psn(q, 100);
        }
        let w = SendWqe {
            wr_id: 77,
            opcode: WR_MASKED_ATOMIC_CMP_AND_SWP,
            flags: WQE_SIGNALED | WQE_EXT,
            local_addr: 0x7F00_0000_0040,
            length: 8,
            lkey: 0x0301,
            remote_addr: 0x5000,
            rkey: 0x99,
            compare_add: 0x1111,
            swap: 0x2222,
            ..Default::default()
        };
        r.quiet_slot(1, 9, &mask_slot(0xFFFF_0000_FFFF_0000, 0x0000_FFFF_0000_FFFF));
        // QP 2's own mask slot and WQE between QP 1's two slots
        r.quiet_slot(2, 3, &mask_slot(0xAAAA, 0x5555));
        let w2 = SendWqe { wr_id: 78, opcode: WR_MASKED_ATOMIC_FETCH_AND_ADD, ..w };
        let (d, i) = r.wqe(2, 4, &w2, |_| (101, 0, false));
        let d = d.expect("QP 2's masked FETCH_ADD");
        assert_eq!((d.cmp_mask.to_u64(), d.swap_mask.to_u64(), i.idx.to_u64()), (0xAAAA, 0x5555, 3));
        let (d, i) = r.wqe(1, 10, &w, |_| (101, 0, false));
        let d = d.expect("a descriptor");
        assert_eq!((d.cmp_mask.to_u64(), d.swap_mask.to_u64()), (0xFFFF_0000_FFFF_0000, 0x0000_FFFF_0000_FFFF));
        assert_eq!((d.compare_add.to_u64(), d.swap.to_u64(), d.wr_op.to_u64()), (0x1111, 0x2222, WR_MASKED_ATOMIC_CMP_AND_SWP as u64));
        assert_eq!((i.status.to_u64(), i.idx.to_u64(), i.wr_id.to_u64()), (0, 9, 77), "the record names the mask slot");
        // the next masked WQE of QP 1 without a mask slot of its own (the last one is at 9, not 10)
        let (d, i) = r.wqe(1, 11, &w, |_| panic!("nothing may be sent"));
        assert!(d.is_none());
        assert_eq!((i.status.to_u64(), i.idx.to_u64()), (WcStatus::LocQpOpErr as u64, 11));
        // (each local error puts the QP in error: back to RTS before the next case)
        r.psn(1, 100);
        // ext on a plain FETCH_ADD, and a masked opcode without ext, even right after a mask slot
        for (k, (op, fl)) in [(WR_ATOMIC_FETCH_AND_ADD, WQE_EXT), (WR_MASKED_ATOMIC_FETCH_AND_ADD, 0)].into_iter().enumerate() {
            let idx = 20 + 2 * k as u64;
            r.quiet_slot(1, idx, &mask_slot(1, 2));
            let (d, i) = r.wqe(1, idx + 1, &SendWqe { opcode: op, flags: fl, ..w }, |_| panic!("nothing may be sent"));
            assert!(d.is_none());
            assert_eq!(i.status.to_u64(), WcStatus::LocQpOpErr as u64, "op {op} flags {fl}");
            r.psn(1, 100);
        }
        // the result lands in the local buffer: an MR without LOCAL_WRITE fails the key check
        r.quiet_slot(1, 30, &mask_slot(1, 2));
        let (d, i) = r.wqe(1, 31, &SendWqe { lkey: 0x0402, local_addr: 0x7E00_0000_0000, ..w }, |_| panic!("nothing may be sent"));
        assert!(d.is_none());
        assert_eq!(i.status.to_u64(), WcStatus::LocProtErr as u64);
        r.psn(1, 100);
        // and a well-formed one still goes after all that
        r.quiet_slot(1, 40, &mask_slot(3, 4));
        let (d, i) = r.wqe(1, 41, &w, |_| (101, 0, false));
        assert_eq!((d.unwrap().cmp_mask.to_u64(), i.status.to_u64(), i.idx.to_u64()), (3, 0, 40));
    }

    fn ctx(state: QpState) -> SqCtx {
        SqCtx {
            state: bits(state as u64),
            mtu_log2: bits(10),
            dest_qpn: bits(0x33),
            dst_mac: bits(0x5254_0000_0001),
            dst_ip: crate::wire::tx_build::v4_bits(0x0A00_0001),
            v6: false,
            sport: bits(0xC012),
            pd: bits(7),
            sig_all: false,
            max_rd: bits(RD_ATOMIC_MAX),
            uc: false,
            ud: false,
            qkey: bits(0x1111_2222),
        }
    }

    /// A UD WQE goes to its address handle: remote QPN, MAC, IPv4 address (from the v4-mapped GID) and UDP
    /// source port from the slot, the QP's own port when the slot's is 0; the DETH Q_Key is the slot's, or
    /// the QP's own when the slot's has bit 31 set (IBA); anything but SEND and SEND_WITH_IMM on a UD QP is a
    /// local QP operation error with nothing sent.
    #[test]
    fn a_ud_wqe_goes_to_the_address_handle_in_its_slot() {
        use rnic_driver::host::{gid_of, UdAh};
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.ctx(0x12, SqCtx { ud: true, ..ctx(QpState::Rts) });
        r.psn(0x12, 40);
        let w = SendWqe {
            wr_id: 1,
            opcode: WR_SEND_WITH_IMM,
            flags: WQE_SIGNALED,
            imm_or_inv: 0x1122_3344,
            local_addr: 0x7F00_0000_0100,
            length: 200,
            lkey: 0x0301,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
        };
        let ah = UdAh {
            remote_qpn: 0xAB_CDEF,
            remote_qkey: 0x0765_4321,
            dmac: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
            sport: 0xC777,
            dgid: gid_of("10.1.2.3".parse().unwrap()),
            traffic_class: 0,
            hop_limit: 64,
        };
        let (d, i) = r.wqe_slot(0x12, 0, &ah.encode_with(&w), |_| (41, 0, false));
        let d = d.expect("a descriptor");
        assert!(d.ud && !d.uc);
        assert_eq!((d.dest_qpn.to_u64(), d.qkey.to_u64(), d.sport.to_u64()), (0xAB_CDEF, 0x0765_4321, 0xC777));
        assert_eq!((d.dst_mac.to_u64(), crate::wire::tx_build::u128_of(d.dst_ip)), (0x5254_0012_3456, 0xFFFF_0A01_0203));
        assert_eq!((d.len.to_u64(), d.imm.to_u64(), d.psn.to_u64()), (200, 0x1122_3344, 40));
        assert_eq!((i.status.to_u64(), i.next_psn.to_u64()), (0, 41));
        // bit 31 of the Q_Key: the QP's own; source port 0: the QP's own
        let ah2 = UdAh { remote_qkey: 0x8000_0000, sport: 0, ..ah };
        let (d, _) = r.wqe_slot(0x12, 1, &ah2.encode_with(&w), |_| (42, 0, false));
        let d = d.unwrap();
        assert_eq!((d.qkey.to_u64(), d.sport.to_u64()), (0x1111_2222, 0xC012));
        // WRITE, READ, an atomic on UD: LOC_QP_OP_ERR, nothing sent
        for (n, op) in [WR_RDMA_WRITE, WR_RDMA_READ, WR_ATOMIC_FETCH_AND_ADD].into_iter().enumerate() {
            r.psn(0x12, 50);
            let (d, i) = r.wqe_slot(0x12, 2 + n as u64, &ah.encode_with(&SendWqe { opcode: op, length: 8, ..w }), |_| panic!("sent"));
            assert!(d.is_none());
            assert_eq!(i.status.to_u64(), WcStatus::LocQpOpErr as u64, "op {op}");
        }
    }

    #[test]
    fn the_driver_s_max_rd_atomic_becomes_a_power_of_two_limit() {
        // rxe rxe_qp_from_attr: roundup_pow_of_two; 0 acts as 1 (the golden requester's `.max(1)`)
        let got: Vec<u64> = [0u8, 1, 2, 3, 4, 5, 8, 9, 16, 17, 128, 255].iter().map(|&v| rd_atomic_limit(v)).collect();
        assert_eq!(got, vec![1, 1, 2, 4, 4, 8, 8, 16, 16, 16, 16, 16]);
    }

    /// rxe `check_init_depth`: at most `max_rd_atomic` READ/atomic WQEs outstanding. A new one waits on offer
    /// (untaken, nothing sent) until the Completer has retired an earlier one; SEND/WRITE pass by the count;
    /// a WQE sent again after a go-back-N is not counted again; a QP in error flushes without waiting; a
    /// CMD_WRITE_QP to RESET starts the count again.
    #[test]
    fn reads_and_atomics_wait_while_max_rd_atomic_are_outstanding() {
        let mut r = Rig::new();
        let q = 0x21;
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.ctx(q, SqCtx { max_rd: bits(2), ..ctx(QpState::Rts) });
        r.psn(q, 100);
        let rd = SendWqe { wr_id: 1, opcode: WR_RDMA_READ, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0100, length: 64, lkey: 0x0301, ..Default::default() };
        let cas = SendWqe { wr_id: 2, opcode: WR_ATOMIC_CMP_AND_SWP, length: 8, ..rd };
        let snd = SendWqe { wr_id: 3, opcode: WR_SEND, ..rd };
        let go = |r: &mut Rig, idx: u64, w: &SendWqe| {
            let (d, i) = r.wqe(q, idx, w, |d| (d.psn.to_u64() + 1, 0, false));
            assert!(d.is_some() && i.status.to_u64() == 0, "WQE {idx} is sent");
        };
        go(&mut r, 0, &rd);
        go(&mut r, 1, &cas);
        go(&mut r, 2, &snd);
        // two outstanding: the next READ waits (a rewind of another QP is still taken meanwhile)
        r.held(q, 3, &rd.encode(), 40, false);
        r.held(q, 3, &rd.encode(), 20, true);
        // the Completer retires the first READ: it goes
        r.win_fin(q, true, 0x1000, 1);
        go(&mut r, 3, &rd);
        r.held(q, 4, &rd.encode(), 30, false);
        // go-back-N to index 1: the CAS, the SEND and the READ at 3 are sent again without waiting (already
        // counted), the READ at 4 is new and waits
        r.rewind(q, 1, 101, 0);
        r.u.wqe_gen.next = bits(1);
        go(&mut r, 1, &cas);
        go(&mut r, 2, &snd);
        go(&mut r, 3, &rd);
        r.held(q, 4, &rd.encode(), 30, false);
        r.win_fin(q, true, 0x1000, 2);
        go(&mut r, 4, &rd);
        r.held(q, 5, &cas.encode(), 30, false);
        // a QP in error flushes its WQEs without waiting
        r.ctx(q, SqCtx { max_rd: bits(2), ..ctx(QpState::Error) });
        let (d, i) = r.wqe(q, 5, &cas, |_| unreachable!());
        assert!(d.is_none());
        assert_eq!(i.status.to_u64(), WcStatus::WrFlushErr as u64);
        // RESET (the Completer's count starts again too), then a new life of the QP from ring index 0
        r.ctx(q, SqCtx { max_rd: bits(2), ..ctx(QpState::Reset) });
        r.win_fin(q, false, 0, 0);
        r.ctx(q, SqCtx { max_rd: bits(1), ..ctx(QpState::Rts) });
        r.psn(q, 500);
        r.u.wqe_gen.next = bits(1);
        go(&mut r, 0, &rd);
        r.held(q, 1, &rd.encode(), 30, false);
        r.win_fin(q, true, 0x1000, 1);
        go(&mut r, 1, &rd);
    }

    #[test]
    fn a_wqe_waits_for_its_qps_unacked_psn_window() {
        // rxe `wait_psn` (RXE_MAX_UNACKED_PSNS = 128): a WQE of a QP with WQEs pending at the Completer starts
        // only at a PSN at or below the acknowledged PSN + 128 (mod 2^24); it waits on offer, untaken, and a
        // rewind still goes first; a QP with nothing pending is never held
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.ctx(0x12, ctx(QpState::Rts));
        r.psn(0x12, 0xFF_FFF0);
        let w = SendWqe { wr_id: 1, opcode: WR_RDMA_WRITE, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0100, length: 64, lkey: 0x0301, ..Default::default() };
        // not busy: a stale limit is not looked at
        r.win(0x12, false, 0x10);
        let (d, _) = r.wqe(0x12, 1, &w, |_| (0xFF_FFF1, 1, false));
        assert!(d.is_some());
        // busy: a WQE starting at the window's last PSN goes; the next one, a PSN beyond it, waits
        r.win(0x12, true, 0xFF_FFF1);
        let (d, _) = r.wqe(0x12, 2, &w, |_| (0xFF_FFF2, 2, false));
        assert!(d.is_some(), "a WQE starting at the window's last PSN goes");
        r.held(0x12, 3, &w.encode(), 60, false);
        r.held(0x12, 3, &w.encode(), 30, true);
        // an inline WQE waits the same way (its data slot behind it is not taken either)
        let inl = SendWqe { wr_id: 9, opcode: WR_SEND, flags: WQE_SIGNALED | WQE_INLINE, length: 8, ..Default::default() };
        r.held(0x12, 3, &inl.encode(), 30, false);
        // the window moves (its end wraps past 2^24 - 1): the WQE goes
        r.win(0x12, true, 0x70);
        let (d, i) = r.wqe(0x12, 3, &w, |_| (0xFF_FFF3, 3, false));
        assert_eq!(d.expect("a descriptor").psn.to_u64(), 0xFF_FFF2);
        assert_eq!(i.first_psn.to_u64(), 0xFF_FFF2);
    }

    #[test]
    fn a_checked_wqe_becomes_a_descriptor_and_its_psn_is_written_back() {
        let mut r = Rig::new();
        r.u.src_mac.next = bits(0x0200_0000_0022);
        r.u.src_ip.next = bits(0x0A00_0002);
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.ctx(0x12, ctx(QpState::Rts));
        r.psn(0x12, 0xFF_FFFE);
        let w = SendWqe {
            wr_id: 0xDEAD_BEEF_0000_0001,
            opcode: WR_SEND_WITH_IMM,
            flags: WQE_SIGNALED | WQE_SOLICITED,
            imm_or_inv: 0x1122_3344,
            local_addr: 0x7F00_0000_0100,
            length: 3000,
            lkey: 0x0301,
            remote_addr: 0x1234,
            rkey: 0x5678,
            compare_add: 9,
            swap: 10,
        };
        let (d, i) = r.wqe(0x12, 5, &w, |d| {
            assert_eq!(d.psn.to_u64(), 0xFF_FFFE);
            (1, 3, false)
        });
        let d = d.expect("a descriptor");
        assert_eq!(d.laddr.to_u64(), 0x8_0000_0100, "VA translated to the MR's DMA address");
        assert_eq!((d.len.to_u64(), d.imm.to_u64(), d.wr_op.to_u64()), (3000, 0x1122_3344, WR_SEND_WITH_IMM as u64));
        assert!(d.solicited);
        assert_eq!((d.raddr.to_u64(), d.rkey.to_u64(), d.compare_add.to_u64(), d.swap.to_u64()), (0x1234, 0x5678, 9, 10));
        assert_eq!((d.mtu_log2.to_u64(), d.dest_qpn.to_u64(), d.sport.to_u64()), (10, 0x33, 0xC012));
        assert_eq!((d.dst_mac.to_u64(), d.src_mac.to_u64(), crate::wire::tx_build::u128_of(d.dst_ip), crate::wire::tx_build::u128_of(d.src_ip)), (0x5254_0000_0001, 0x0200_0000_0022, 0xFFFF_0A00_0001, 0xFFFF_0A00_0002));
        assert_eq!((d.qpn.to_u64(), d.slot.to_u64(), d.noack.to_u64()), (0x12, 5, 0));
        assert_eq!((i.status.to_u64(), i.first_psn.to_u64(), i.next_psn.to_u64()), (0, 0xFF_FFFE, 1));
        assert_eq!((i.wr_id.to_u64(), i.idx.to_u64(), i.signaled), (0xDEAD_BEEF_0000_0001, 5, true));
        assert_eq!((i.imm.to_u64(), i.laddr.to_u64(), i.len.to_u64()), (0x1122_3344, 0x8_0000_0100, 3000));
        // the next WQE starts where the Requester left off
        let w2 = SendWqe { wr_id: 2, opcode: WR_RDMA_WRITE, flags: 0, length: 0, ..w };
        let (d, i) = r.wqe(0x12, 6, &w2, |_| (2, 4, false));
        let d = d.unwrap();
        assert_eq!((d.psn.to_u64(), d.noack.to_u64()), (1, 3));
        assert_eq!((i.first_psn.to_u64(), i.next_psn.to_u64(), i.signaled), (1, 2, false));
        // a PSN command resets both
        r.psn(0x12, 100);
        let (d, _) = r.wqe(0x12, 7, &w2, |_| (101, 0, false));
        assert_eq!((d.unwrap().psn.to_u64(), 0), (100, 0));
        // the Requester's error becomes the WQE's status
        // (a WQE whose record waits for the Requester's done: a one-packet RC RDMA WRITE's does not)
        let (_, i) = r.wqe(0x12, 8, &w, |_| (101, 0, true));
        assert_eq!(i.status.to_u64(), WcStatus::LocQpOpErr as u64);
    }

    /// Early records: an RC RDMA WRITE of one packet (at most 256 bytes) has its record sent right after the
    /// hand-over, its next PSN computed here (PSN + 1, AckReq counter 0: its one packet asks for the ACK), not
    /// taken from the Requester, whose done for it is dropped when it comes (the next descriptor is taken
    /// only after it, as the Requester does); every other WQE (longer, a SEND, a READ, UC, ...) waits for its
    /// own done; early records back to back on one QP chain their PSNs.
    #[test]
    fn a_one_packet_rc_write_has_its_record_before_the_requesters_done() {
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.ctx(0x12, ctx(QpState::Rts));
        r.ctx(0x13, SqCtx { uc: true, ..ctx(QpState::Rts) });
        r.psn(0x12, 0xFF_FFFF);
        r.psn(0x13, 0x40);
        let w = SendWqe { wr_id: 1, opcode: WR_RDMA_WRITE, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0100, length: 256, lkey: 0x0301, rkey: 0x5678, ..Default::default() };
        // the mock's answer is wrong on purpose: the record must not wait for it or use it
        r.hold_dones = true;
        let (d, i) = r.wqe(0x12, 5, &w, |_| (0x777, 9, false));
        assert_eq!((d.unwrap().psn.to_u64(), i.first_psn.to_u64(), i.next_psn.to_u64()), (0xFF_FFFF, 0xFF_FFFF, 0), "PSN + 1, wrapped");
        assert_eq!(r.dones.len(), 1, "the record came while the Requester's done was still to come");
        // a 257-byte SEND waits for its own done (the held one comes first and is dropped)
        r.hold_dones = false;
        let w2 = SendWqe { wr_id: 2, opcode: WR_SEND, length: 257, ..w };
        let (d, i) = r.wqe(0x12, 6, &w2, |_| (0x20, 5, false));
        assert_eq!((d.unwrap().noack.to_u64(), i.first_psn.to_u64(), i.next_psn.to_u64()), (0, 0, 0x20));
        assert!(r.dones.is_empty());
        let (d, i) = r.wqe(0x12, 7, &SendWqe { length: 0, ..w }, |_| (0x999, 9, false));
        assert_eq!((d.unwrap().psn.to_u64(), d.unwrap().noack.to_u64()), (0x20, 5), "the SEND's own done was written back");
        assert_eq!(i.next_psn.to_u64(), 0x21);
        // one-packet SENDs and WRITE_WITH_IMMs wait for their done
        for (k, op) in [WR_SEND, WR_SEND_WITH_IMM, WR_RDMA_WRITE_WITH_IMM].into_iter().enumerate() {
            let (d, i) = r.wqe(0x12, 8 + k as u64, &SendWqe { opcode: op, length: 64, ..w }, |d| (d.psn.to_u64() + 1, 0, false));
            assert_eq!((d.unwrap().psn.to_u64(), d.unwrap().noack.to_u64(), i.next_psn.to_u64()), (0x21 + k as u64, 0, 0x22 + k as u64));
        }
        let (d, i) = r.wqe(0x12, 11, &SendWqe { opcode: WR_SEND, length: 64, ..w }, |_| (0x22, 0, false));
        assert_eq!((d.unwrap().psn.to_u64(), i.next_psn.to_u64()), (0x24, 0x22), "its own done, even a wrong one");
        // a one-packet READ waits for its done
        let (_, i) = r.wqe(0x12, 12, &SendWqe { opcode: WR_RDMA_READ, length: 64, ..w }, |_| (0x30, 0, false));
        assert_eq!((i.first_psn.to_u64(), i.next_psn.to_u64()), (0x22, 0x30));
        // UC: a one-packet WRITE completes when its record comes, so the record waits for its packet
        r.hold_dones = true;
        let mut done_at = None;
        for n in 0..30 {
            if n == 20 {
                r.hold_dones = false;
            }
            r.u.wqe_valid.next = done_at.is_none();
            r.u.wqe_qpn.next = bits(0x13);
            r.u.wqe_idx.next = bits(1);
            r.u.wqe_data.next = b512(&SendWqe { length: 64, ..w }.encode());
            r.u.desc_ready.next = true;
            r.u.issued_ready.next = true;
            r.u.done_valid.next = !r.hold_dones && !r.dones.is_empty();
            r.u.done.next = ReqDone { next_psn: bits(0x41), noack: bits(3), ..Default::default() };
            simulate(&mut r.u, 200);
            if r.u.desc_valid.val() {
                r.dones.push_back((0x41, 3, false));
            }
            if r.u.done_valid.val() && r.u.done_ready.val() {
                r.dones.pop_front();
            }
            if r.u.issued_valid.val() {
                assert!(n > 20, "a UC record waited for the done");
                assert_eq!(r.u.issued.val().next_psn.to_u64(), 0x41);
                done_at = Some(n);
            }
            r.clock();
        }
        assert!(done_at.is_some());
        // early records back to back on one QP: each next WQE starts at the PSN the one before computed
        for k in 0..3u64 {
            let (d, i) = r.wqe(0x12, 13 + k, &SendWqe { length: 64, ..w }, |_| (0x999, 9, false));
            assert_eq!((d.unwrap().psn.to_u64(), d.unwrap().noack.to_u64()), (0x30 + k, 0));
            assert_eq!((i.first_psn.to_u64(), i.next_psn.to_u64()), (0x30 + k, 0x31 + k));
        }
    }

    /// A rewind waits while an early record's WQE is still with the Requester (its done to come), so that its
    /// packet never follows the rewind's marker; it is taken once that done has come.
    #[test]
    fn a_rewind_waits_for_the_requester_to_finish_an_early_record() {
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.ctx(0x12, ctx(QpState::Rts));
        r.psn(0x12, 0x50);
        let w = SendWqe { wr_id: 1, opcode: WR_RDMA_WRITE, local_addr: 0x7F00_0000_0100, length: 64, lkey: 0x0301, ..Default::default() };
        r.hold_dones = true;
        let (_, i) = r.wqe(0x12, 5, &w, |_| (0x51, 0, false));
        assert_eq!(i.next_psn.to_u64(), 0x51);
        let mut taken_at = None;
        for n in 0..20 {
            r.u.wqe_valid.next = false;
            r.u.rw_valid.next = taken_at.is_none();
            (r.u.rw_qpn.next, r.u.rw_idx.next, r.u.rw_psn.next, r.u.rw_skip.next) = (bits(0x12), bits(5), bits(0x50), bits(0));
            r.u.sq_rw_ready.next = true;
            r.u.issued_ready.next = true;
            r.u.done_valid.next = n >= 10;
            r.u.done.next = ReqDone { next_psn: bits(0x51), ..Default::default() };
            simulate(&mut r.u, 200);
            if r.u.rw_ready.val() {
                assert!(n > 10, "cycle {n}: the rewind was taken while the Requester still had the WQE");
                taken_at = Some(n);
            }
            r.clock();
        }
        r.u.rw_valid.next = false;
        assert!(taken_at.is_some(), "the rewind is taken once the done has come");
    }

    /// Go-back-N: a rewind writes the QP's PSN state, is passed on to the SQ Ring, then its marker record goes
    /// to the completer; a slot read before the rewind (the old generation) is dropped without a record; the
    /// slot at the rewound index (new generation) is resumed after `skip` packets (addresses + skip x MTU,
    /// length - skip x MTU, `cont`); a resumed READ is a new READ request for the rest (no `cont`).
    #[test]
    fn a_rewind_resumes_the_oldest_wqe_mid_message() {
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x10000, 0x8_0000_0000, 0xF);
        r.ctx(1, ctx(QpState::Rts));
        r.psn(1, 10);
        let w = SendWqe { wr_id: 1, opcode: WR_SEND, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0100, length: 5000, lkey: 0x0301, ..Default::default() };
        let (d, _) = r.wqe(1, 0, &w, |_| (15, 0, false));
        assert!(!d.unwrap().cont);
        // the completer: back to ring index 0, PSN 12 (2 packets acknowledged)
        let mut sq = None;
        let mut marker = None;
        let mut taken = false;
        for _ in 0..50 {
            r.u.rw_valid.next = !taken;
            r.u.rw_qpn.next = bits(1);
            r.u.rw_idx.next = bits(0);
            r.u.rw_psn.next = bits(12);
            r.u.rw_skip.next = bits(2);
            r.u.wqe_valid.next = false;
            r.u.issued_ready.next = true;
            r.u.sq_rw_ready.next = sq.is_none();
            simulate(&mut r.u, 200);
            taken |= r.u.rw_ready.val();
            if r.u.sq_rw_valid.val() && sq.is_none() {
                sq = Some((r.u.sq_rw_qpn.val().to_u64(), r.u.sq_rw_idx.val().to_u64()));
            }
            if r.u.issued_valid.val() {
                marker = Some(r.u.issued.val());
            }
            r.clock();
            if marker.is_some() {
                break;
            }
        }
        r.u.rw_valid.next = false;
        assert_eq!(sq, Some((1, 0)), "the SQ Ring rewinds the QP to index 0");
        let m = marker.expect("the marker");
        assert!(m.rewind && m.qpn.to_u64() == 1 && m.idx.to_u64() == 0);
        // a slot read before the rewind (generation 0): consumed, dropped, nothing issued
        let mut consumed = false;
        for _ in 0..20 {
            r.u.wqe_valid.next = !consumed;
            r.u.wqe_qpn.next = bits(1);
            r.u.wqe_idx.next = bits(1);
            r.u.wqe_gen.next = bits(0);
            r.u.wqe_data.next = b512(&w.encode());
            simulate(&mut r.u, 200);
            assert!(!r.u.desc_valid.val() && !r.u.issued_valid.val(), "a stale slot sends nothing");
            consumed |= r.u.wqe_ready.val();
            r.clock();
        }
        assert!(consumed);
        // the slot read again (generation 1): resumed after 2 packets of 1 KiB
        r.u.wqe_gen.next = bits(1);
        let (d, i) = r.wqe(1, 0, &w, |d| {
            assert_eq!(d.psn.to_u64(), 12);
            (15, 1, false)
        });
        let d = d.unwrap();
        assert_eq!((d.laddr.to_u64(), d.len.to_u64()), (0x8_0000_0100 + 2048, 5000 - 2048));
        assert!(d.cont, "the first packet is a MIDDLE");
        assert_eq!((i.first_psn.to_u64(), i.next_psn.to_u64()), (12, 15));
        // the skip is used up: the next WQE starts at the Requester's next PSN, from its start
        let w2 = SendWqe { wr_id: 2, opcode: WR_RDMA_READ, length: 3000, remote_addr: 0x4000, ..w };
        let (d, _) = r.wqe(1, 1, &w2, |_| (18, 0, false));
        let d = d.unwrap();
        assert_eq!((d.psn.to_u64(), d.noack.to_u64(), d.len.to_u64(), d.cont), (15, 1, 3000, false));
        // a READ resumed after 1 packet: a new READ of the rest
        r.psn(1, 15);
        let mut taken = false;
        for _ in 0..30 {
            r.u.rw_valid.next = !taken;
            r.u.rw_idx.next = bits(1);
            r.u.rw_psn.next = bits(16);
            r.u.rw_skip.next = bits(1);
            r.u.sq_rw_ready.next = true;
            r.u.issued_ready.next = true;
            simulate(&mut r.u, 200);
            taken |= r.u.rw_ready.val();
            r.clock();
        }
        r.u.rw_valid.next = false;
        r.u.wqe_gen.next = bits(2);
        let (d, _) = r.wqe(1, 1, &w2, |_| (18, 0, false));
        let d = d.unwrap();
        assert_eq!((d.psn.to_u64(), d.len.to_u64(), d.raddr.to_u64(), d.cont), (16, 3000 - 1024, 0x4000 + 1024, false));
    }

    #[test]
    fn wqes_failing_their_checks_complete_with_the_right_status_and_send_nothing() {
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x1000, 0x8_0000_0000, 0x1);
        r.ctx(1, ctx(QpState::Rts));
        r.ctx(2, ctx(QpState::Error));
        r.ctx(3, ctx(QpState::Rtr));
        r.psn(1, 50);
        let w = SendWqe { wr_id: 1, opcode: WR_SEND, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0000, length: 64, lkey: 0x0301, ..Default::default() };
        let never = |_: &ReqDesc| -> (u64, u64, bool) { panic!("nothing may be sent") };
        let cases = [
            (1, SendWqe { lkey: 0x0302, ..w }, WcStatus::LocProtErr),      // tag mismatch
            (1, SendWqe { lkey: 0x0401, ..w }, WcStatus::LocProtErr),      // no such MR
            (1, SendWqe { length: 0x1001, ..w }, WcStatus::LocProtErr),    // beyond the MR
            (1, SendWqe { opcode: WR_RDMA_READ, ..w }, WcStatus::LocProtErr), // READ needs LOCAL_WRITE... which it has
            (1, SendWqe { flags: WQE_INLINE, length: 257, ..w }, WcStatus::LocQpOpErr), // inline, longer than MAX_INLINE
            (2, w, WcStatus::WrFlushErr),
            (3, w, WcStatus::LocQpOpErr),
        ];
        for (k, (qpn, w, st)) in cases.into_iter().enumerate() {
            // a local error put QP 1 in error: modify_qp to RTS (a PSN write) first
            r.psn(1, 50);
            if k == 3 {
                // READ with LOCAL_WRITE in the MR: accepted
                let (d, i) = r.wqe(qpn, k as u64, &w, |d| (d.psn.to_u64() + 1, 0, false));
                assert!(d.is_some() && i.status.to_u64() == 0);
                continue;
            }
            let (d, i) = r.wqe(qpn, k as u64, &w, never);
            assert!(d.is_none());
            assert_eq!(i.status.to_u64(), st as u64, "case {k}");
            assert_eq!(i.first_psn, i.next_psn, "no PSN consumed");
        }
        // a MR without LOCAL_WRITE refuses a READ's local buffer
        r.psn(1, 50);
        r.mr(0x0501, 7, 0x7F00_0000_0000, 0x1000, 0x8_0000_0000, 0x4);
        let (d, i) = r.wqe(1, 9, &SendWqe { opcode: WR_RDMA_READ, lkey: 0x0501, ..w }, never);
        assert!(d.is_none());
        assert_eq!(i.status.to_u64(), WcStatus::LocProtErr as u64);
        // and the QP is in error (rxe: a local error moves it there): a good WQE behind it flushes unsent,
        // until modify_qp to RTS writes the send PSN
        let (d, i) = r.wqe(1, 10, &w, never);
        assert_eq!((d, i.status.to_u64()), (None, WcStatus::WrFlushErr as u64));
        r.psn(1, 60);
        let (d, i) = r.wqe(1, 11, &w, |d| (d.psn.to_u64() + 1, 0, false));
        assert_eq!((d.map(|d| d.psn.to_u64()), i.status.to_u64()), (Some(60), 0));
        // SEND_WITH_INV: an RC QP sends it, the rkey to invalidate (wire order in the slot) in the descriptor's
        // imm; a UC QP has no such packets (LOC_QP_OP_ERR, nothing sent)
        let inv = SendWqe { opcode: WR_SEND_WITH_INV, imm_or_inv: 0x1234_5678, ..w };
        let (d, i) = r.wqe(1, 12, &inv, |d| (d.psn.to_u64() + 1, 0, false));
        assert_eq!((d.map(|d| d.imm.to_u64()), i.status.to_u64()), (Some(0x1234_5678), 0));
        r.ctx(4, SqCtx { uc: true, ..ctx(QpState::Rts) });
        r.psn(4, 5);
        let (d, i) = r.wqe(4, 13, &inv, never);
        assert_eq!((d.is_none(), i.status.to_u64()), (true, WcStatus::LocQpOpErr as u64));
        let (d, i) = r.wqe(4, 14, &SendWqe { opcode: WR_SEND, ..inv }, |d| (d.psn.to_u64() + 1, 0, false));
        assert_eq!((d.map(|d| d.uc), i.status.to_u64()), (None, WcStatus::WrFlushErr as u64), "the local error put the UC QP in error");
    }

    /// LOCAL_INV: the key in bytes 12..16 is looked up for `res_inv`; a fast-registration MR of the QP's PD is
    /// invalidated through the dispatcher before the record goes (success, no PSN, nothing to the Requester),
    /// and the next WQE using it fails LOC_PROT_ERR; a user MR, another PD's MR or a wrong tag completes
    /// LOC_QP_OP_ERR with nothing invalidated and the QP in error; the unacked-PSN window does not hold it.
    #[test]
    fn a_local_invalidate_invalidates_a_fast_mr_of_its_pd_and_nothing_else() {
        let mut r = Rig::new();
        let fast = |r: &mut Rig, key: u32, pd: u64| {
            r.u.kc_wr.fast.next = true;
            r.mr(key, pd, 0x7F00_0000_0000, 0x1000, 0x8_0000_0000, 0xF);
            r.u.kc_wr.fast.next = false;
        };
        fast(&mut r, 0x0301, 7);
        r.mr(0x0402, 7, 0x7F00_0000_0000, 0x1000, 0x8_0000_0000, 0xF); // a user MR
        fast(&mut r, 0x0503, 8); // another PD's
        fast(&mut r, 0x0604, 7);
        for q in 1..=5 {
            r.ctx(q, ctx(QpState::Rts));
            r.psn(q, 100 * q);
        }
        let sent = |d: &ReqDesc| (d.psn.to_u64() + 1, 0, false);
        let never = |_: &ReqDesc| -> (u64, u64, bool) { panic!("nothing may be sent") };
        let send = |key: u32| SendWqe { wr_id: 1, opcode: WR_SEND, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0000, length: 64, lkey: key, ..Default::default() };
        let linv = |key: u32| SendWqe { wr_id: 2, opcode: WR_LOCAL_INV, flags: WQE_SIGNALED, imm_or_inv: key, ..Default::default() };
        let (d, i) = r.wqe(1, 0, &send(0x0301), sent);
        assert!(d.is_some() && i.status.to_u64() == 0);
        let (d, i) = r.wqe(1, 1, &linv(0x0301), never);
        assert!(d.is_none());
        assert_eq!((i.status.to_u64(), i.wr_op.to_u64(), i.wr_id.to_u64()), (0, u64::from(WR_LOCAL_INV), 2));
        assert_eq!((i.first_psn.to_u64(), i.next_psn.to_u64()), (101, 101), "no PSN");
        assert_eq!(r.invs, vec![3], "MR 3 invalidated once");
        let (d, i) = r.wqe(1, 2, &send(0x0301), never);
        assert_eq!((d.is_none(), i.status.to_u64()), (true, WcStatus::LocProtErr as u64), "the key is invalid now");
        // keys it may not invalidate: LOC_QP_OP_ERR, nothing invalidated, the QP in error
        for (q, key) in [(2, 0x0402), (3, 0x0503), (4, 0x0605)] {
            let (d, i) = r.wqe(q, 0, &linv(key), never);
            assert_eq!((d.is_none(), i.status.to_u64()), (true, WcStatus::LocQpOpErr as u64), "key {key:#x}");
            let (_, i) = r.wqe(q, 1, &send(0x0604), never);
            assert_eq!(i.status.to_u64(), WcStatus::WrFlushErr as u64, "key {key:#x}: the QP is in error");
        }
        assert_eq!(r.invs, vec![3]);
        let (d, i) = r.wqe(5, 0, &send(0x0402), sent);
        assert!(d.is_some() && i.status.to_u64() == 0, "the user MR still serves");
        // QP 5's window is closed (128 PSNs unacknowledged): a SEND waits, a LOCAL_INV does not
        r.win(5, true, 400);
        r.held(5, 1, &send(0x0604).encode(), 20, false);
        let (d, i) = r.wqe(5, 1, &linv(0x0604), never);
        assert_eq!((d.is_none(), i.status.to_u64()), (true, 0));
        assert_eq!(r.invs, vec![3, 6]);
    }

    /// BIND_MW of a type 2 window: the MR (lkey, range) checked with MW_BIND, the window at the new rkey's index
    /// a free type 2 window of the QP's PD; its entry written through the dispatcher (range, remote rights, new
    /// tag, the DMA address of its first byte, the binding QP), then a record without PSNs. A window already
    /// bound, an MR without MW_BIND, an empty range, REMOTE_WRITE over an MR without LOCAL_WRITE: MW_BIND_ERR,
    /// nothing written.
    #[test]
    fn a_bind_writes_a_free_type_2_window_over_an_mr_that_allows_it() {
        use rnic_driver::host::WR_BIND_MW;
        let mut r = Rig::new();
        let mr = |r: &mut Rig, key: u32, access: u64, bind: bool| {
            r.u.kc_wr.bind.next = bind;
            r.mr(key, 7, 0x7F00_0000_0000, 0x1000, 0x8_0000_0000, access);
            r.u.kc_wr.bind.next = false;
        };
        mr(&mut r, 0x0301, 0xF, true);
        mr(&mut r, 0x0402, 0xF, false);
        mr(&mut r, 0x0603, 0x4, true); // remote read only, no LOCAL_WRITE
        r.free_window(5, 0xAA);
        for q in 1..=5 {
            r.ctx(q, ctx(QpState::Rts));
            r.psn(q, 100 * q);
        }
        let never = |_: &ReqDesc| -> (u64, u64, bool) { panic!("nothing may be sent") };
        let bind = |lkey: u32, len: u32, acc: u32| SendWqe {
            wr_id: 9,
            opcode: WR_BIND_MW,
            flags: WQE_SIGNALED,
            imm_or_inv: acc,
            local_addr: 0x7F00_0000_0100,
            length: len,
            lkey,
            rkey: 0x05AB,
            ..Default::default()
        };
        let (d, i) = r.wqe(1, 0, &bind(0x0301, 0x200, 0x6), never);
        assert!(d.is_none());
        assert_eq!((i.status.to_u64(), i.wr_op.to_u64(), i.first_psn.to_u64(), i.next_psn.to_u64()), (0, u64::from(WR_BIND_MW), 100, 100));
        assert_eq!(r.binds.len(), 1);
        let (ix, e) = r.binds[0];
        assert_eq!((ix, e.tag.to_u64(), e.pd.to_u64(), e.access.to_u64()), (5, 0xAB, 7, 0x6));
        assert_eq!((e.va.to_u64(), e.len.to_u64(), e.base.to_u64()), (0x7F00_0000_0100, 0x200, 0x8_0000_0100));
        assert_eq!((e.mw, e.mw2, e.fast, e.qpn.to_u64()), (true, true, true, 1));
        // the window is bound now (valid): not free for another bind; and the other refusals
        let cases = [(2, bind(0x0301, 0x200, 0x6)), (3, bind(0x0402, 0x200, 0x6)), (4, bind(0x0301, 0, 0x6)), (5, bind(0x0603, 0x200, 0x2))];
        for (q, w) in cases {
            let (d, i) = r.wqe(q, 0, &w, never);
            assert_eq!((d.is_none(), i.status.to_u64()), (true, WcStatus::MwBindErr as u64), "QP {q}");
        }
        assert_eq!(r.binds.len(), 1, "nothing written");
        // a go-back-N to a SEND before a bind done: the SEND goes again, the bind is not done again (the window
        // is bound: done again it would fail), its record goes with success
        r.mr(0x0701, 7, 0x7F00_0000_0000, 0x1000, 0x8_0000_0000, 0xF);
        r.free_window(8, 0x10);
        r.ctx(6, ctx(QpState::Rts));
        r.psn(6, 600);
        let send = SendWqe { wr_id: 1, opcode: WR_SEND, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0000, length: 64, lkey: 0x0701, ..Default::default() };
        let b8 = SendWqe { rkey: 0x0811, ..bind(0x0301, 0x200, 0x6) };
        let sent = |d: &ReqDesc| (d.psn.to_u64() + 1, 0, false);
        assert_eq!(r.wqe(6, 0, &send, sent).1.status.to_u64(), 0);
        assert_eq!(r.wqe(6, 1, &b8, never).1.status.to_u64(), 0);
        assert_eq!(r.binds.len(), 2);
        r.rewind(6, 0, 600, 0);
        r.u.wqe_gen.next = bits(1);
        let (d, _) = r.wqe(6, 0, &send, sent);
        assert_eq!(d.map(|d| d.psn.to_u64()), Some(600), "the SEND again");
        let (d, i) = r.wqe(6, 1, &b8, never);
        assert_eq!((d.is_none(), i.status.to_u64(), i.wr_op.to_u64()), (true, 0, u64::from(WR_BIND_MW)), "the bind's record");
        assert_eq!(r.binds.len(), 2, "not bound again");
    }

    /// The Completer put a QP in error (retry exhausted, a NAK): its WQEs are flushed without being sent, the
    /// other QPs go on, and a new send PSN (modify_qp to RTS) clears it. A PSN write waits for the pulse.
    #[test]
    fn a_qp_the_completer_put_in_error_sends_nothing_until_its_psn_is_written() {
        let mut r = Rig::new();
        r.mr(0x0301, 7, 0x7F00_0000_0000, 0x1000, 0x8_0000_0000, 0x1);
        for q in [1, 2] {
            r.ctx(q, ctx(QpState::Rts));
            r.psn(q, 50);
        }
        let w = SendWqe { wr_id: 1, opcode: WR_SEND, flags: WQE_SIGNALED, local_addr: 0x7F00_0000_0000, length: 64, lkey: 0x0301, ..Default::default() };
        let sent = |d: &ReqDesc| (d.psn.to_u64() + 1, 0, false);
        let never = |_: &ReqDesc| -> (u64, u64, bool) { panic!("nothing may be sent") };
        // QP 1 to error; a PSN command write in the same cycle waits
        r.u.qerr_valid.next = true;
        r.u.qerr_qpn.next = bits(1);
        r.u.psn_we.next = true;
        simulate(&mut r.u, 200);
        assert!(!r.u.psn_ready.val(), "the error pulse has the flag RAM's write port");
        r.u.psn_we.next = false;
        r.clock();
        r.u.qerr_valid.next = false;
        let (d, i) = r.wqe(1, 0, &w, never);
        assert!(d.is_none());
        assert_eq!((i.status.to_u64(), i.first_psn.to_u64(), i.next_psn.to_u64()), (WcStatus::WrFlushErr as u64, 50, 50));
        let (d, i) = r.wqe(2, 0, &w, sent);
        assert!(d.is_some() && i.status.to_u64() == 0, "QP 2 is untouched");
        // modify_qp to RTS writes the send PSN: QP 1 sends again
        r.psn(1, 90);
        let (d, i) = r.wqe(1, 1, &w, sent);
        assert_eq!(d.map(|d| d.psn.to_u64()), Some(90));
        assert_eq!(i.status.to_u64(), 0);
        // the error pulse in the very cycle a slot of the QP is taken (its flag RAM write lands after the
        // read), or in the next: the WQE is not sent either (the Completer raises it the cycle after it took
        // the record before, which is when WQE Check takes the next slot)
        for (k, q) in [(0, 1u64), (1, 2u64)] {
            for c in 0..2 {
                r.u.qerr_valid.next = c == k;
                r.u.qerr_qpn.next = bits(q);
                r.u.wqe_valid.next = true;
                r.u.wqe_qpn.next = bits(q);
                r.u.wqe_idx.next = bits(5);
                r.u.wqe_data.next = b512(&w.encode());
                r.u.issued_ready.next = true;
                simulate(&mut r.u, 200);
                r.clock();
            }
            r.u.qerr_valid.next = false;
            let (d, i) = r.wqe(q, 5, &w, never);
            assert!(d.is_none(), "pulse in cycle {k} of the slot");
            assert_eq!(i.status.to_u64(), WcStatus::WrFlushErr as u64);
        }
    }
}
