//! The responder (rxe `rxe_resp.c` `rxe_responder`): `check_psn` → `check_op_seq` → `check_op_valid` →
//! `check_resource` → `check_length` (`rxe_resp_check_length`) → `check_rkey` → `execute` → `do_complete` →
//! `acknowledge`, with `duplicate_request` for PSNs below the expected PSN, `read_reply` and
//! `atomic_reply`.

use crate::wire::frame::{ud_grh_area, IPV4_HEADER_LEN};
use crate::wire::headers::{Aeth, AtomicAckEth, NakCode, AETH_ACK_UNLIMITED, AETH_MSN_MASK};
use crate::wire::opcode::*;
use crate::wire::{Bth, ExtHeader, IpHeader, RoceFrame, RocePacket};

use super::device::{qp_error, Ctx, DropReason, RxOutcome};
use super::mr::AccessFlags;
use super::qp::{psn_add, psn_compare, Qp, QpType, Resource, WriteCtx};
use super::requester::{num_packets, scatter, ScatterError};
use super::verbs::{WcFlags, WcOpcode, WcStatus, WorkCompletion};

/// The responder's view of one request packet.
struct Req<'a> {
    f: &'a RoceFrame,
    info: &'static OpcodeInfo,
    op: u8,
    psn: u32,
}

/// Send an ACK or NAK (rxe `send_ack` / `prepare_ack_packet`): RC_ACKNOWLEDGE with AETH {syndrome, MSN}.
fn send_ack(ctx: &mut Ctx, qp: &Qp, syndrome: u8, psn: u32) {
    let bth = Bth::new(RC_ACKNOWLEDGE, qp.dest_qpn, psn);
    let aeth = Aeth {
        syndrome,
        msn: qp.resp.msn & AETH_MSN_MASK,
    };
    ctx.emit_qp(qp, RocePacket::new(bth, vec![ExtHeader::Aeth(aeth)], Vec::new()));
    if syndrome == AETH_ACK_UNLIMITED {
        ctx.counters.acks_sent += 1;
    } else {
        *ctx.counters.naks_sent.entry(syndrome).or_insert(0) += 1;
        if syndrome & 0xE0 == 0x20 {
            ctx.counters.rnr_naks_sent += 1;
        }
    }
}

/// Class C error (rxe `do_class_ac_error`): NAK with the packet's PSN, optionally complete the current receive
/// WQE with `recv_status`, then the QP goes to ERROR.
fn class_c_error(ctx: &mut Ctx, qp: &mut Qp, code: NakCode, psn: u32, recv_status: Option<WcStatus>) -> RxOutcome {
    let syn = Aeth::nak(code, 0).syndrome;
    send_ack(ctx, qp, syn, psn);
    if let Some(st) = recv_status {
        complete_recv(ctx, qp, st, WcOpcode::Recv, 0, None, None, 0);
    }
    qp_error(ctx, qp);
    RxOutcome::Nak(syn)
}

/// Receive completion (rxe `do_complete`): `IBV_WC_GRH` always, `WITH_IMM`/`WITH_INV` with their values.
#[allow(clippy::too_many_arguments)]
fn complete_recv(
    ctx: &mut Ctx,
    qp: &mut Qp,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u64,
    imm: Option<u32>,
    inv: Option<u32>,
    src_qp: u32,
) {
    let Some(r) = qp.rq.pop_front() else { return };
    let mut flags = WcFlags::GRH;
    if imm.is_some() {
        flags |= WcFlags::WITH_IMM;
    }
    if inv.is_some() {
        flags |= WcFlags::WITH_INV;
    }
    let wc = WorkCompletion {
        wr_id: r.wr.wr_id,
        status,
        opcode,
        byte_len: byte_len as u32,
        imm_data: imm.unwrap_or(0),
        invalidated_rkey: inv.unwrap_or(0),
        qp_num: qp.qpn,
        src_qp,
        wc_flags: WcFlags(flags),
    };
    ctx.push_cqe(qp.recv_cq, wc);
    qp.resp.recv_offset = 0;
}

/// Entry point for request-class packets.
pub fn rxe_responder(ctx: &mut Ctx, qp: &mut Qp, f: &RoceFrame) -> RxOutcome {
    let Some(info) = f.packet.info() else {
        return ctx.drop(DropReason::Malformed);
    };
    let req = Req {
        f,
        info,
        op: f.packet.bth.opcode,
        psn: f.packet.bth.psn,
    };
    match qp.qp_type {
        QpType::Ud => ud_receive(ctx, qp, &req),
        QpType::Rc | QpType::Uc => connected(ctx, qp, &req),
    }
}

fn is_send(info: &OpcodeInfo) -> bool {
    info.kind == OpKind::Send
}
fn is_write(info: &OpcodeInfo) -> bool {
    info.kind == OpKind::Write
}
fn is_atomic(info: &OpcodeInfo) -> bool {
    matches!(info.kind, OpKind::Atomic | OpKind::MaskedAtomic)
}
fn has_imm(info: &OpcodeInfo) -> bool {
    info.has(crate::wire::HeaderKind::ImmDt)
}

/// A UC error: drop the rest of the message.
fn uc_drop(ctx: &mut Ctx, qp: &mut Qp, r: DropReason) -> RxOutcome {
    qp.resp.drop_msg = true;
    qp.resp.opcode = None;
    qp.resp.write = None;
    ctx.drop(r)
}

/// What rxe's `check_psn` makes of an RC request (`rxe_resp.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnVerdict {
    /// The expected PSN: executed.
    InOrder,
    /// Ahead of the expected PSN, the first time: NAK PSN sequence error (with the expected PSN).
    NakSequence,
    /// Ahead again before an in-order packet came: dropped silently.
    DropOutOfSequence,
    /// Behind the expected PSN: a duplicate (re-ACKed, or answered from the responder resources).
    Duplicate,
}

/// rxe `check_psn` for RC: the verdict on a request of PSN `psn` at a QP expecting `epsn` whose
/// `sent_psn_nak` is as given, and `sent_psn_nak` after it. The model's responder decides with this, and so
/// is the oracle of the RTL's PSN Check.
pub fn rc_check_psn(psn: u32, epsn: u32, sent_psn_nak: bool) -> (PsnVerdict, bool) {
    let d = psn_compare(psn, epsn);
    if d > 0 {
        if sent_psn_nak {
            (PsnVerdict::DropOutOfSequence, true)
        } else {
            (PsnVerdict::NakSequence, true)
        }
    } else if d < 0 {
        (PsnVerdict::Duplicate, sent_psn_nak)
    } else {
        (PsnVerdict::InOrder, false)
    }
}

fn connected(ctx: &mut Ctx, qp: &mut Qp, r: &Req) -> RxOutcome {
    let rc = qp.qp_type == QpType::Rc;
    let pkt = &r.f.packet;
    let info = r.info;
    // ---- check_psn
    if rc {
        let (v, nak_sent) = rc_check_psn(r.psn, qp.resp.psn, qp.resp.sent_psn_nak);
        qp.resp.sent_psn_nak = nak_sent;
        match v {
            PsnVerdict::DropOutOfSequence => return ctx.drop(DropReason::OutOfSequence),
            PsnVerdict::NakSequence => {
                let psn = qp.resp.psn;
                send_ack(ctx, qp, Aeth::nak(NakCode::PsnSequenceError, 0).syndrome, psn);
                return RxOutcome::Nak(Aeth::nak(NakCode::PsnSequenceError, 0).syndrome);
            }
            PsnVerdict::Duplicate => return duplicate_request(ctx, qp, r),
            PsnVerdict::InOrder => {}
        }
    } else if qp.resp.drop_msg || r.psn != qp.resp.psn {
        if info.pos.is_start() {
            qp.resp.drop_msg = false;
            qp.resp.opcode = None;
            qp.resp.write = None;
            qp.resp.recv_offset = 0;
        } else {
            return uc_drop(ctx, qp, DropReason::UcDropped);
        }
    }
    // ---- check_op_seq
    let seq_ok = match qp.resp.opcode.and_then(info_of) {
        Some(prev) if matches!(prev.pos, Pos::First | Pos::Middle) => {
            prev.kind == info.kind && matches!(info.pos, Pos::Middle | Pos::Last)
        }
        _ => !(matches!(info.kind, OpKind::Send | OpKind::Write) && matches!(info.pos, Pos::Middle | Pos::Last)),
    };
    if !seq_ok {
        return if rc {
            class_c_error(ctx, qp, NakCode::InvalidRequest, r.psn, None)
        } else {
            uc_drop(ctx, qp, DropReason::UcDropped)
        };
    }
    // ---- check_op_valid
    let need = match info.kind {
        OpKind::ReadRequest => Some(AccessFlags::REMOTE_READ),
        OpKind::Write => Some(AccessFlags::REMOTE_WRITE),
        OpKind::Atomic | OpKind::MaskedAtomic => Some(AccessFlags::REMOTE_ATOMIC),
        OpKind::Send => None,
        // FLUSH / ATOMIC_WRITE / RESYNC are not modelled.
        _ => {
            return if rc {
                class_c_error(ctx, qp, NakCode::InvalidRequest, r.psn, None)
            } else {
                uc_drop(ctx, qp, DropReason::UcDropped)
            }
        }
    };
    if let Some(n) = need {
        if !qp.access.contains(n) {
            return if rc {
                class_c_error(ctx, qp, NakCode::InvalidRequest, r.psn, None)
            } else {
                uc_drop(ctx, qp, DropReason::UcDropped)
            };
        }
    }
    // ---- check_resource
    if info.kind == OpKind::ReadRequest || is_atomic(info) {
        if qp.resp.resources.is_empty() {
            return class_c_error(ctx, qp, NakCode::InvalidRequest, r.psn, None);
        }
    }
    let needs_rwqe = (is_send(info) && info.pos.is_start()) || (is_write(info) && has_imm(info) && info.pos.is_end());
    if needs_rwqe && qp.rq.is_empty() {
        if rc {
            let syn = Aeth::rnr_nak(qp.min_rnr_timer, 0).syndrome;
            send_ack(ctx, qp, syn, r.psn);
            return RxOutcome::Nak(syn);
        }
        return uc_drop(ctx, qp, DropReason::NoRecvWqe);
    }
    // ---- check_length (rxe_resp_check_length)
    let mtu = qp.path_mtu as usize;
    let plen = pkt.payload.len();
    let len_ok = match info.pos {
        _ if !matches!(info.kind, OpKind::Send | OpKind::Write) => true,
        Pos::Only => plen <= mtu,
        Pos::First | Pos::Middle => plen == mtu,
        Pos::Last => plen >= 1 && plen <= mtu,
    } && pkt.reth().map_or(true, |h| h.dma_len <= 1 << 31);
    if !len_ok {
        return if rc {
            class_c_error(ctx, qp, NakCode::InvalidRequest, r.psn, None)
        } else {
            uc_drop(ctx, qp, DropReason::LengthError)
        };
    }
    // ---- check_rkey
    if let Some(out) = check_rkey(ctx, qp, r) {
        return out;
    }
    // ---- execute
    execute(ctx, qp, r)
}

fn info_of(op: u8) -> Option<&'static OpcodeInfo> {
    crate::wire::opcode::info(op)
}

/// rxe `check_rkey`: R_Key, PD, bounds and access for WRITE (first/only), READ and atomics; a zero-length READ
/// or WRITE skips it; atomics must be 8-byte aligned (NAK Invalid Request). Also the WRITE length/PadCnt rule.
/// Returns `Some` when the packet ends here.
fn check_rkey(ctx: &mut Ctx, qp: &mut Qp, r: &Req) -> Option<RxOutcome> {
    let rc = qp.qp_type == QpType::Rc;
    let pkt = &r.f.packet;
    let info = r.info;
    let (va, rkey, len, need) = if let Some(reth) = pkt.reth() {
        let need = if info.kind == OpKind::ReadRequest {
            AccessFlags::REMOTE_READ
        } else {
            AccessFlags::REMOTE_WRITE
        };
        (reth.va, reth.rkey, u64::from(reth.dma_len), need)
    } else if let Some(a) = pkt.atomic_eth() {
        (a.va, a.rkey, 8, AccessFlags::REMOTE_ATOMIC)
    } else if let Some(a) = pkt.masked_cmp_swap_eth() {
        (a.va, a.rkey, 8, AccessFlags::REMOTE_ATOMIC)
    } else if let Some(a) = pkt.masked_fetch_add_eth() {
        (a.va, a.rkey, 8, AccessFlags::REMOTE_ATOMIC)
    } else {
        // WRITE MIDDLE/LAST: the length rules against the stored write context.
        if is_write(info) {
            let Some(w) = qp.resp.write else {
                return Some(class_c_or_drop(ctx, qp, NakCode::InvalidRequest, r.psn));
            };
            let plen = pkt.payload.len() as u64;
            let mtu = u64::from(qp.path_mtu);
            let bad = if w.resid > mtu {
                plen != mtu || pkt.bth.pad_cnt != 0 || info.pos.is_end()
            } else {
                plen != w.resid || pkt.bth.pad_cnt != crate::wire::pad_count(w.resid as usize) || !info.pos.is_end()
            };
            if bad {
                return Some(class_c_or_drop(ctx, qp, NakCode::InvalidRequest, r.psn));
            }
        }
        return None;
    };
    if is_atomic(info) && va & 7 != 0 {
        return Some(class_c_error(ctx, qp, NakCode::InvalidRequest, r.psn, None));
    }
    if len > 0 && ctx.mrs.check_rkey(rkey, qp.pd, qp.qpn, va, len, need).is_err() {
        return Some(if rc {
            class_c_error(ctx, qp, NakCode::RemoteAccessError, r.psn, None)
        } else {
            uc_drop(ctx, qp, DropReason::UcDropped)
        });
    }
    if is_write(info) {
        let plen = pkt.payload.len() as u64;
        let mtu = u64::from(qp.path_mtu);
        let bad = if len > mtu {
            plen != mtu || pkt.bth.pad_cnt != 0 || info.pos.is_end()
        } else {
            plen != len || pkt.bth.pad_cnt != crate::wire::pad_count(len as usize) || !info.pos.is_end()
        };
        if bad {
            return Some(class_c_or_drop(ctx, qp, NakCode::InvalidRequest, r.psn));
        }
        qp.resp.write = Some(WriteCtx {
            va,
            rkey,
            resid: len,
            length: len,
        });
    }
    None
}

fn class_c_or_drop(ctx: &mut Ctx, qp: &mut Qp, code: NakCode, psn: u32) -> RxOutcome {
    if qp.qp_type == QpType::Rc {
        class_c_error(ctx, qp, code, psn, None)
    } else {
        uc_drop(ctx, qp, DropReason::LengthError)
    }
}

/// rxe `execute` (+ `send_data_in`, `write_data_in`, `read_reply`, `atomic_reply`, `do_complete`,
/// `acknowledge`).
fn execute(ctx: &mut Ctx, qp: &mut Qp, r: &Req) -> RxOutcome {
    let rc = qp.qp_type == QpType::Rc;
    let pkt = &r.f.packet;
    let info = r.info;
    match info.kind {
        OpKind::Send => {
            let sgl = qp.rq.front().map(|w| w.wr.sg_list.clone()).unwrap_or_default();
            // rxe `send_data_in`: `copy_data` fails with -EINVAL both when the payload is longer than the
            // room left in the receive (checked before anything is written) and on a key, PD, bounds or
            // LOCAL_WRITE failure: RESPST_ERR_MALFORMED_WQE, class A (RC: NAK remote operational error), the
            // receive completes LOC_QP_OP_ERR and the QP goes to error (UC too, without a NAK). Its -ENOSPC
            // branch (RESPST_ERR_LENGTH, NAK invalid request) needs the SGEs to run out before the checked
            // room does, which a receive WQE's `resid` (the sum of its SGE lengths) rules out.
            if let Err(ScatterError::Length | ScatterError::Protection) = scatter(ctx, qp.pd, &sgl, qp.resp.recv_offset, &pkt.payload) {
                return if rc {
                    class_c_error(ctx, qp, NakCode::RemoteOperationalError, r.psn, Some(WcStatus::LocQpOpErr))
                } else {
                    complete_recv(ctx, qp, WcStatus::LocQpOpErr, WcOpcode::Recv, 0, None, None, 0);
                    qp_error(ctx, qp);
                    uc_drop(ctx, qp, DropReason::UcDropped)
                };
            }
            qp.resp.recv_offset += pkt.payload.len() as u64;
        }
        OpKind::Write => {
            let Some(mut w) = qp.resp.write else {
                return class_c_or_drop(ctx, qp, NakCode::InvalidRequest, r.psn);
            };
            let off = w.length - w.resid;
            if !pkt.payload.is_empty() && ctx.mem.write(w.va.wrapping_add(off), &pkt.payload).is_err() {
                return class_c_or_drop(ctx, qp, NakCode::RemoteAccessError, r.psn);
            }
            w.resid -= pkt.payload.len() as u64;
            qp.resp.write = Some(w);
        }
        OpKind::ReadRequest => {
            let reth = pkt.reth().copied().unwrap_or_default_reth();
            let len = u64::from(reth.dma_len);
            let n = num_packets(len, qp.path_mtu);
            let last = psn_add(r.psn, n - 1);
            insert_resource(
                qp,
                Resource::Read {
                    first_psn: r.psn,
                    last_psn: last,
                    va_org: reth.va,
                    rkey: reth.rkey,
                    length: len,
                },
            );
            // C9-148: the MSN counts a READ when the request is received.
            qp.resp.msn = (qp.resp.msn + 1) & AETH_MSN_MASK;
            qp.resp.psn = psn_add(r.psn, n);
            qp.resp.opcode = None;
            read_reply(ctx, qp, r.psn, reth.va, len, true);
            return RxOutcome::Accepted;
        }
        OpKind::Atomic | OpKind::MaskedAtomic => {
            return atomic_reply(ctx, qp, r);
        }
        _ => return class_c_or_drop(ctx, qp, NakCode::InvalidRequest, r.psn),
    }
    // SEND / WRITE bookkeeping.
    qp.resp.psn = psn_add(r.psn, 1);
    qp.resp.ack_psn = qp.resp.psn;
    let end = info.pos.is_end();
    qp.resp.opcode = if end { None } else { Some(r.op) };
    if end {
        qp.resp.msn = (qp.resp.msn + 1) & AETH_MSN_MASK;
        let imm = pkt.immdt().map(|i| i.imm);
        if is_send(info) {
            let inv = pkt.ieth().map(|i| i.rkey);
            if let Some(rkey) = inv {
                // rxe `invalidate_rkey`: only a fast-registration MR of this PD can be invalidated; failure is
                // class J, as rxe 6.1 does it (seen against it, docs/rxe-rules.md 5c): the SEND is ACKed as any
                // other, the receive completes REM_INV_REQ_ERR with byte_len 0 and no flags (rxe fills neither
                // in an error completion), and the QP goes to ERROR.
                if !ctx.mrs.invalidate(rkey, qp.pd) {
                    if let Some(rw) = qp.rq.pop_front() {
                        let wc = WorkCompletion { status: WcStatus::RemInvReqErr, ..super::device::flush_recv_cqe(qp, &rw) };
                        ctx.push_cqe(qp.recv_cq, wc);
                    }
                    qp.resp.recv_offset = 0;
                    if rc && pkt.bth.ack_req {
                        send_ack(ctx, qp, AETH_ACK_UNLIMITED, r.psn);
                    }
                    qp_error(ctx, qp);
                    return RxOutcome::Accepted;
                }
            }
            let len = qp.resp.recv_offset;
            complete_recv(ctx, qp, WcStatus::Success, WcOpcode::Recv, len, imm, inv, 0);
        } else {
            let w = qp.resp.write.take();
            if imm.is_some() {
                // RECV_RDMA_WITH_IMM: byte_len is the whole write length (qp->resp.length).
                let len = w.map_or(0, |w| w.length);
                complete_recv(ctx, qp, WcStatus::Success, WcOpcode::RecvRdmaWithImm, len, imm, None, 0);
            }
        }
    }
    // acknowledge: only when AckReq is set (RC).
    if rc && pkt.bth.ack_req {
        send_ack(ctx, qp, AETH_ACK_UNLIMITED, r.psn);
    }
    RxOutcome::Accepted
}

trait RethDefault {
    fn unwrap_or_default_reth(self) -> crate::wire::Reth;
}
impl RethDefault for Option<crate::wire::Reth> {
    fn unwrap_or_default_reth(self) -> crate::wire::Reth {
        self.unwrap_or(crate::wire::Reth {
            va: 0,
            rkey: 0,
            dma_len: 0,
        })
    }
}

/// rxe `rxe_prepare_res`: take the next slot of the ring, overwriting the oldest.
fn insert_resource(qp: &mut Qp, res: Resource) {
    let n = qp.resp.resources.len();
    if n == 0 {
        return;
    }
    qp.resp.resources[qp.resp.res_head] = Some(res);
    qp.resp.res_head = (qp.resp.res_head + 1) % n;
}

/// rxe `read_reply`: PMTU-sized responses from `psn` on. A new read starts with FIRST (or ONLY); a replay
/// from the middle of the original range starts with MIDDLE (or LAST). AETH (0x1F, MSN) on FIRST/LAST/ONLY.
fn read_reply(ctx: &mut Ctx, qp: &Qp, psn: u32, va: u64, len: u64, new: bool) {
    let mtu = u64::from(qp.path_mtu);
    let mut resid = len;
    let mut psn = psn;
    let mut va = va;
    let mut first = new;
    loop {
        let chunk = resid.min(mtu);
        let opcode = match (first, resid <= mtu) {
            (true, true) => RC_RDMA_READ_RESPONSE_ONLY,
            (true, false) => RC_RDMA_READ_RESPONSE_FIRST,
            (false, true) => RC_RDMA_READ_RESPONSE_LAST,
            (false, false) => RC_RDMA_READ_RESPONSE_MIDDLE,
        };
        let payload = if chunk == 0 {
            Vec::new()
        } else {
            ctx.mem.read(va, chunk as usize).unwrap_or_else(|_| vec![0; chunk as usize])
        };
        let ext = if opcode == RC_RDMA_READ_RESPONSE_MIDDLE {
            vec![]
        } else {
            vec![ExtHeader::Aeth(Aeth::ack(AETH_ACK_UNLIMITED, qp.resp.msn))]
        };
        ctx.emit_qp(qp, RocePacket::new(Bth::new(opcode, qp.dest_qpn, psn), ext, payload));
        ctx.counters.read_responses_sent += 1;
        resid -= chunk;
        va = va.wrapping_add(chunk);
        psn = psn_add(psn, 1);
        first = false;
        if resid == 0 {
            break;
        }
    }
}

/// Masked fetch-and-add: per-field add where a set bit of `boundary` marks the MSB of a field, so no carry
/// crosses it (semantics of the Linux masked-atomics patch / Mellanox MFetchAdd).
pub fn masked_fetch_add(orig: u64, add: u64, boundary: u64) -> u64 {
    let mut res = 0u64;
    let mut carry = 0u64;
    for i in 0..64 {
        let a = (orig >> i) & 1;
        let b = (add >> i) & 1;
        res |= (a ^ b ^ carry) << i;
        carry = (a & b) | (a & carry) | (b & carry);
        if (boundary >> i) & 1 == 1 {
            carry = 0;
        }
    }
    res
}

/// Masked compare-and-swap: if `((orig ^ compare) & compare_mask) == 0` the new value is
/// `(orig & !swap_mask) | (swap & swap_mask)`.
pub fn masked_cmp_swap(orig: u64, compare: u64, compare_mask: u64, swap: u64, swap_mask: u64) -> u64 {
    if (orig ^ compare) & compare_mask == 0 {
        (orig & !swap_mask) | (swap & swap_mask)
    } else {
        orig
    }
}

/// rxe `atomic_reply`: execute once (serialised), save the original value in a responder resource, MSN++,
/// answer ATOMIC_ACKNOWLEDGE with the original value.
fn atomic_reply(ctx: &mut Ctx, qp: &mut Qp, r: &Req) -> RxOutcome {
    let pkt = &r.f.packet;
    let va = pkt
        .atomic_eth()
        .map(|a| a.va)
        .or(pkt.masked_cmp_swap_eth().map(|a| a.va))
        .or(pkt.masked_fetch_add_eth().map(|a| a.va))
        .unwrap_or(0);
    let Ok(orig) = ctx.mem.read_u64(va) else {
        return class_c_error(ctx, qp, NakCode::RemoteAccessError, r.psn, None);
    };
    let new = match r.op {
        RC_COMPARE_SWAP => {
            let a = pkt.atomic_eth().expect("opcode has AtomicETH");
            if orig == a.compare {
                a.swap_add
            } else {
                orig
            }
        }
        RC_FETCH_ADD => orig.wrapping_add(pkt.atomic_eth().expect("opcode has AtomicETH").swap_add),
        MASKED_COMPARE_SWAP => {
            let a = pkt.masked_cmp_swap_eth().expect("opcode has the header");
            masked_cmp_swap(orig, a.compare, a.compare_mask, a.swap, a.swap_mask)
        }
        _ => {
            let a = pkt.masked_fetch_add_eth().expect("opcode has the header");
            masked_fetch_add(orig, a.add, a.field_boundary)
        }
    };
    let _ = ctx.mem.write_u64(va, new);
    insert_resource(qp, Resource::Atomic { psn: r.psn, orig });
    qp.resp.msn = (qp.resp.msn + 1) & AETH_MSN_MASK;
    qp.resp.psn = psn_add(r.psn, 1);
    qp.resp.opcode = None;
    send_atomic_ack(ctx, qp, r.psn, orig);
    RxOutcome::Accepted
}

fn send_atomic_ack(ctx: &mut Ctx, qp: &Qp, psn: u32, orig: u64) {
    let ext = vec![
        ExtHeader::Aeth(Aeth::ack(AETH_ACK_UNLIMITED, qp.resp.msn)),
        ExtHeader::AtomicAckEth(AtomicAckEth { orig }),
    ];
    ctx.emit_qp(qp, RocePacket::new(Bth::new(RC_ATOMIC_ACKNOWLEDGE, qp.dest_qpn, psn), ext, Vec::new()));
    ctx.counters.atomic_acks_sent += 1;
}

/// rxe `duplicate_request`: SEND/WRITE are re-ACKed with `ack_psn - 1` and not re-executed; a READ inside a
/// saved range whose rkey matches and whose VA/length are a subset is replayed from the request's PSN; an
/// atomic is answered from its saved original value; without a resource the packet is dropped.
fn duplicate_request(ctx: &mut Ctx, qp: &mut Qp, r: &Req) -> RxOutcome {
    ctx.counters.duplicate_requests += 1;
    let pkt = &r.f.packet;
    match r.info.kind {
        OpKind::Send | OpKind::Write => {
            let psn = psn_add(qp.resp.ack_psn, 0xFF_FFFF);
            send_ack(ctx, qp, AETH_ACK_UNLIMITED, psn);
            RxOutcome::Accepted
        }
        OpKind::ReadRequest => {
            let Some(reth) = pkt.reth() else {
                return ctx.drop(DropReason::Malformed);
            };
            let found = qp.resp.resources.iter().flatten().find_map(|res| match *res {
                Resource::Read {
                    first_psn,
                    last_psn,
                    va_org,
                    rkey,
                    length,
                } if psn_compare(r.psn, first_psn) >= 0 && psn_compare(r.psn, last_psn) <= 0 => {
                    Some((first_psn, va_org, rkey, length))
                }
                _ => None,
            });
            let Some((first_psn, va_org, rkey, length)) = found else {
                return ctx.drop(DropReason::DuplicateNoResource);
            };
            let len = u64::from(reth.dma_len);
            let subset = reth.rkey == rkey
                && reth.va >= va_org
                && len <= length
                && reth.va.checked_add(len).map_or(false, |e| e <= va_org + length);
            if !subset {
                return ctx.drop(DropReason::DuplicateNoResource);
            }
            ctx.counters.read_replays += 1;
            read_reply(ctx, qp, r.psn, reth.va, len, r.psn == first_psn);
            RxOutcome::Accepted
        }
        OpKind::Atomic | OpKind::MaskedAtomic => {
            let found = qp.resp.resources.iter().flatten().find_map(|res| match *res {
                Resource::Atomic { psn, orig } if psn == r.psn => Some(orig),
                _ => None,
            });
            match found {
                Some(orig) => {
                    ctx.counters.atomic_replays += 1;
                    send_atomic_ack(ctx, qp, r.psn, orig);
                    RxOutcome::Accepted
                }
                None => ctx.drop(DropReason::DuplicateNoResource),
            }
        }
        _ => ctx.drop(DropReason::DuplicateNoResource),
    }
}

/// UD receive (rxe `execute`, UD branch): needs a receive WQE; payload + 40 must fit; the first 40 bytes are
/// the GRH area (IPv4: 20 zero bytes then the IPv4 header; IPv6: the IPv6 header); `src_qp` from the DETH.
fn ud_receive(ctx: &mut Ctx, qp: &mut Qp, r: &Req) -> RxOutcome {
    let pkt = &r.f.packet;
    let Some(deth) = pkt.deth() else {
        return ctx.drop(DropReason::Malformed);
    };
    let Some(wqe) = qp.rq.front() else {
        return ctx.drop(DropReason::NoRecvWqe);
    };
    let sgl = wqe.wr.sg_list.clone();
    let total = pkt.payload.len() as u64 + 40;
    let ip_len = match &r.f.ip {
        IpHeader::V4(_) => IPV4_HEADER_LEN,
        IpHeader::V6(_) => 40,
    };
    let bytes = r.f.build().unwrap_or_default();
    let off = r.f.eth.header_len();
    let data = ud_grh_area(bytes.get(off..off + ip_len).unwrap_or(&[]));
    // rxe 6.1 `execute` → `send_data_in` → `copy_data`, the GRH area first, then the payload: a copy longer
    // than the room left in the receive, or one whose lkey fails, is -EINVAL → RESPST_ERR_MALFORMED_WQE
    // (`check_length` leaves UD alone): the receive completes LOC_QP_OP_ERR (byte_len 0, no src_qp: `do_complete`
    // fills those on success only) and the QP goes to error (`do_class_ac_error`; no NAK on UD). The GRH area,
    // when it fitted, stays written; nothing of the payload is.
    if scatter(ctx, qp.pd, &sgl, 0, &data).is_err() || scatter(ctx, qp.pd, &sgl, 40, &pkt.payload).is_err() {
        complete_recv(ctx, qp, WcStatus::LocQpOpErr, WcOpcode::Recv, 0, None, None, 0);
        qp_error(ctx, qp);
        return ctx.drop(DropReason::LengthError);
    }
    let imm = pkt.immdt().map(|i| i.imm);
    complete_recv(ctx, qp, WcStatus::Success, WcOpcode::Recv, total, imm, None, deth.src_qp);
    RxOutcome::Accepted
}
