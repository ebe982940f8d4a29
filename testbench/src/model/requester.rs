//! The requester (rxe `rxe_req.c`): segmentation at the path MTU, PSN assignment (`update_wqe_psn`), the
//! AckReq policy, the unacked-PSN window and go-back-N (`req_retry`). Retransmission keeps no payload: packets
//! are regenerated from the WQE, re-reading host memory.

use crate::wire::headers::{AtomicEth, Deth, Ieth, ImmDt, MaskedCmpSwapEth, MaskedFetchAddEth, Reth};
use crate::wire::opcode::*;
use crate::wire::{Bth, ExtHeader, RocePacket};

use super::device::{qp_error, send_cqe, Ctx};
use super::mr::AccessFlags;
use super::qp::{psn_add, psn_compare, psn_diff, roundup_pow2, Qp, QpState, QpType, SendWqe, WqeState};
use super::timers::retransmit_timeout_ns;
use super::verbs::{Sge, WcStatus, WrOpcode};

/// rxe `RXE_MAX_UNACKED_PSNS`: the requester stalls (`wait_psn`) beyond this many unacknowledged PSNs.
pub const RXE_MAX_UNACKED_PSNS: u32 = 128;
/// rxe `RXE_MAX_PKT_PER_ACK`: AckReq is forced after this many packets without one.
pub const RXE_MAX_PKT_PER_ACK: u32 = 64;

/// Gather `len` bytes at message offset `offset` from a send WQE's sg list (or inline data). Local reads
/// need no access flag; the lkey, PD and bounds are checked (rxe `copy_data` → `IB_WC_LOC_PROT_ERR`).
pub(crate) fn gather(ctx: &Ctx, qp: &Qp, wqe: &SendWqe, offset: u64, len: u64) -> Result<Vec<u8>, WcStatus> {
    if wqe.wr.flags.inline {
        let d = &wqe.wr.inline_data;
        let (s, e) = (offset as usize, (offset + len) as usize);
        return d.get(s..e).map(|x| x.to_vec()).ok_or(WcStatus::LocLenErr);
    }
    let mut out = Vec::with_capacity(len as usize);
    let mut skip = offset;
    for sge in &wqe.wr.sg_list {
        if out.len() as u64 == len {
            break;
        }
        let sl = u64::from(sge.length);
        if skip >= sl {
            skip -= sl;
            continue;
        }
        let take = (sl - skip).min(len - out.len() as u64);
        let addr = sge.addr.wrapping_add(skip);
        ctx.mrs
            .check(sge.lkey, qp.pd, addr, take, AccessFlags::NONE)
            .map_err(|_| WcStatus::LocProtErr)?;
        let bytes = ctx.mem.read(addr, take as usize).map_err(|_| WcStatus::LocProtErr)?;
        out.extend_from_slice(&bytes);
        skip = 0;
    }
    if (out.len() as u64) < len {
        return Err(WcStatus::LocLenErr);
    }
    Ok(out)
}

/// Why a scatter failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScatterError {
    /// The data does not fit the room left in the sg list (rxe `copy_data`'s `length > resid`: `-EINVAL`).
    Length,
    /// A key, PD, bounds or LOCAL_WRITE failure.
    Protection,
}

/// Scatter `data` at message offset `offset` into an sg list (needs LOCAL_WRITE on every MR). As rxe
/// `copy_data`: data longer than the room left in the list is refused before anything is written; a key or
/// bounds failure stops at that SGE, after the SGEs before it were written.
pub(crate) fn scatter(ctx: &mut Ctx, pd: super::mr::Pd, sgl: &[Sge], offset: u64, data: &[u8]) -> Result<(), ScatterError> {
    if data.len() as u64 > sgl_len(sgl).saturating_sub(offset) {
        return Err(ScatterError::Length);
    }
    let mut skip = offset;
    let mut done = 0usize;
    for sge in sgl {
        if done == data.len() {
            break;
        }
        let sl = u64::from(sge.length);
        if skip >= sl {
            skip -= sl;
            continue;
        }
        let take = ((sl - skip) as usize).min(data.len() - done);
        let addr = sge.addr.wrapping_add(skip);
        ctx.mrs
            .check(sge.lkey, pd, addr, take as u64, AccessFlags::LOCAL_WRITE)
            .map_err(|_| ScatterError::Protection)?;
        ctx.mem
            .write(addr, &data[done..done + take])
            .map_err(|_| ScatterError::Protection)?;
        done += take;
        skip = 0;
    }
    debug_assert_eq!(done, data.len(), "the room was checked first");
    Ok(())
}

/// Total length of an sg list.
pub(crate) fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().map(|s| u64::from(s.length)).sum()
}

fn check_local_sgl(ctx: &Ctx, qp: &Qp, wqe: &SendWqe) -> Result<(), WcStatus> {
    if wqe.wr.flags.inline {
        return Ok(());
    }
    let need = if wqe.wr.opcode.is_read_or_atomic() {
        AccessFlags::LOCAL_WRITE
    } else {
        AccessFlags::NONE
    };
    for sge in &wqe.wr.sg_list {
        if sge.length > 0 {
            ctx.mrs
                .check(sge.lkey, qp.pd, sge.addr, u64::from(sge.length), need)
                .map_err(|_| WcStatus::LocProtErr)?;
        }
    }
    Ok(())
}

/// Number of packets (= PSNs) of a message of `len` bytes: ceil(len / mtu), minimum 1.
pub fn num_packets(len: u64, mtu: u32) -> u32 {
    (len.div_ceil(u64::from(mtu))).max(1) as u32
}

/// rxe `req_retry`: go back to the oldest incomplete WQE and the first unacknowledged PSN. The first WQE
/// resumes mid-message (SEND/WRITE: at `comp.psn`, so MIDDLE/LAST opcodes; READ: a new READ request for the
/// part not yet received, VA advanced and length reduced); later WQEs restart from their beginning.
pub fn req_retry(ctx: &mut Ctx, qp: &mut Qp) {
    ctx.counters.retries += 1;
    qp.req.need_retry = false;
    qp.req.psn = qp.comp.psn;
    qp.req.noack_pkts = 0;
    let mtu = u64::from(qp.path_mtu);
    let comp_psn = qp.comp.psn;
    let mut first = true;
    for wqe in qp.sq.iter_mut() {
        if matches!(wqe.state, WqeState::Posted) {
            break;
        }
        if matches!(wqe.state, WqeState::Done | WqeState::Error) {
            continue;
        }
        if first {
            first = false;
            let op = wqe.wr.opcode;
            wqe.offset = if op.is_read() {
                wqe.read_received
            } else if op.is_atomic() {
                0
            } else if psn_compare(comp_psn, wqe.first_psn) > 0 && psn_compare(comp_psn, wqe.last_psn) <= 0 {
                (u64::from(psn_diff(comp_psn, wqe.first_psn)) * mtu).min(wqe.length)
            } else {
                0
            };
        } else {
            wqe.offset = 0;
            wqe.read_received = 0;
        }
        wqe.state = WqeState::Posted;
    }
    qp.req.idx = 0;
}

/// The requester loop for one QP (rxe `rxe_requester`): transmit what the window and the read/atomic limit
/// allow.
pub fn rxe_requester(ctx: &mut Ctx, qp: &mut Qp) {
    if !matches!(qp.state, QpState::Rts) || qp.req.rnr_until.is_some() {
        return;
    }
    if qp.req.need_retry {
        req_retry(ctx, qp);
    }
    loop {
        if qp.state != QpState::Rts {
            return;
        }
        let Some(wqe) = qp.sq.get(qp.req.idx) else { return };
        if matches!(wqe.state, WqeState::Pending | WqeState::Done | WqeState::Error) {
            qp.req.idx += 1;
            continue;
        }
        let op = wqe.wr.opcode;
        if op.is_local() {
            // rxe `rxe_do_local_ops`, before the window and depth checks: done now, completed in order (it is
            // at the head once every WQE before it has completed); a key it may not invalidate is a local
            // error, LOC_QP_OP_ERR
            let done = match op {
                WrOpcode::BindMw => bind_mw2(ctx, qp, &wqe.wr).map_err(|_| WcStatus::MwBindErr),
                _ => ctx.mrs.invalidate(wqe.wr.invalidate_rkey, qp.pd).then_some(()).ok_or(WcStatus::LocQpOpErr),
            };
            let done = if qp.qp_type == QpType::Ud { Err(WcStatus::LocQpOpErr) } else { done };
            if let Err(st) = done {
                local_error(ctx, qp, st);
                return;
            }
            qp.sq[qp.req.idx].state = WqeState::Done;
            qp.req.idx += 1;
            super::completer::complete_local(ctx, qp);
            continue;
        }
        if qp.qp_type == QpType::Rc {
            // wait_psn: at most RXE_MAX_UNACKED_PSNS outstanding.
            if psn_compare(qp.req.psn, psn_add(qp.comp.psn, RXE_MAX_UNACKED_PSNS)) > 0 {
                return;
            }
            // check_init_depth: at most max_rd_atomic (rounded up to 2^n) reads/atomics outstanding.
            if op.is_read_or_atomic() {
                let limit = roundup_pow2(qp.max_rd_atomic).max(1);
                let outstanding = qp
                    .sq
                    .iter()
                    .take(qp.req.idx)
                    .filter(|w| w.wr.opcode.is_read_or_atomic() && w.state != WqeState::Done)
                    .count();
                if outstanding >= limit {
                    return;
                }
            }
            // Fence: wait for earlier reads/atomics.
            if wqe.wr.flags.fence
                && qp
                    .sq
                    .iter()
                    .take(qp.req.idx)
                    .any(|w| w.wr.opcode.is_read_or_atomic() && w.state != WqeState::Done)
            {
                return;
            }
        }
        if wqe.state == WqeState::Posted && wqe.offset == 0 {
            if let Err(st) = check_local_sgl(ctx, qp, wqe) {
                local_error(ctx, qp, st);
                return;
            }
        }
        if let Err(st) = send_next_packet(ctx, qp) {
            local_error(ctx, qp, st);
            return;
        }
    }
}

/// BIND_MW of a type 2 window (rxe `rxe_bind_mw`, `rxe_check_bind_mw`; IBA C10-72..75, o10-37.2.30/40): the
/// window at the index of the WR's `rkey` is a free type 2 window of the QP's PD; the SGE names a valid MR of
/// that PD (lkey) with MW_BIND, and LOCAL_WRITE if the window gives REMOTE_WRITE or REMOTE_ATOMIC; the range is
/// inside the MR and not empty. The window then has that range, the remote rights, the WR's `rkey` as its key,
/// and serves this QP only.
fn bind_mw2(ctx: &mut Ctx, qp: &Qp, wr: &super::verbs::SendWr) -> Result<(), ()> {
    let sge = wr.sg_list.first().copied().ok_or(())?;
    let w = ctx.mrs.at_index_mut(wr.rkey).ok_or(())?;
    if w.kind != super::mr::MrKind::Window2 || w.valid || w.mr.pd != qp.pd || sge.length == 0 {
        return Err(());
    }
    let acc = wr.mw_access;
    let mut need = AccessFlags::MW_BIND;
    if acc.contains(AccessFlags::REMOTE_WRITE) || acc.contains(AccessFlags::REMOTE_ATOMIC) {
        need = need | AccessFlags::LOCAL_WRITE;
    }
    let mr = ctx.mrs.check(sge.lkey, qp.pd, sge.addr, u64::from(sge.length), need).map_err(|_| ())?;
    let remote = AccessFlags(acc.0 & AccessFlags::REMOTE.0);
    let w = ctx.mrs.at_index_mut(wr.rkey).expect("looked up above");
    (w.mr.addr, w.mr.length, w.mr.access, w.mr.lkey, w.mr.rkey) = (sge.addr, u64::from(sge.length), remote, wr.rkey, wr.rkey);
    (w.valid, w.bound_to, w.bound_qp) = (true, Some(mr.lkey), Some(qp.qpn));
    Ok(())
}

/// A local error on the WQE at `req.idx`: earlier WQEs flush, this one completes with `st`, the QP goes to
/// ERROR and the rest flush.
fn local_error(ctx: &mut Ctx, qp: &mut Qp, st: WcStatus) {
    for _ in 0..qp.req.idx {
        if let Some(w) = qp.sq.pop_front() {
            let wc = send_cqe(qp, &w, WcStatus::WrFlushErr);
            ctx.push_cqe(qp.send_cq, wc);
        }
    }
    if let Some(w) = qp.sq.pop_front() {
        let wc = send_cqe(qp, &w, st);
        ctx.push_cqe(qp.send_cq, wc);
    }
    qp.req.idx = 0;
    qp_error(ctx, qp);
}

fn opcode_for(qp_type: QpType, op: WrOpcode, first: bool, last: bool) -> u8 {
    let rc = match (op, first, last) {
        (WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv, true, false) => RC_SEND_FIRST,
        (WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv, false, false) => RC_SEND_MIDDLE,
        (WrOpcode::Send, false, true) => RC_SEND_LAST,
        (WrOpcode::SendWithImm, false, true) => RC_SEND_LAST_WITH_IMMEDIATE,
        (WrOpcode::SendWithInv, false, true) => RC_SEND_LAST_WITH_INVALIDATE,
        (WrOpcode::Send, true, true) => RC_SEND_ONLY,
        (WrOpcode::SendWithImm, true, true) => RC_SEND_ONLY_WITH_IMMEDIATE,
        (WrOpcode::SendWithInv, true, true) => RC_SEND_ONLY_WITH_INVALIDATE,
        (_, true, false) => RC_RDMA_WRITE_FIRST,
        (_, false, false) => RC_RDMA_WRITE_MIDDLE,
        (WrOpcode::RdmaWriteWithImm, false, true) => RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (_, false, true) => RC_RDMA_WRITE_LAST,
        (WrOpcode::RdmaWriteWithImm, true, true) => RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        (_, true, true) => RC_RDMA_WRITE_ONLY,
    };
    match qp_type {
        QpType::Rc => rc,
        QpType::Uc => rc | 0x20,
        QpType::Ud => {
            if op == WrOpcode::SendWithImm {
                UD_SEND_ONLY_WITH_IMMEDIATE
            } else {
                UD_SEND_ONLY
            }
        }
    }
}

/// Build and transmit the next packet of the WQE at `req.idx` (rxe `init_req_packet`, `finish_packet`,
/// `update_wqe_psn`, `update_state`).
fn send_next_packet(ctx: &mut Ctx, qp: &mut Qp) -> Result<(), WcStatus> {
    let idx = qp.req.idx;
    let psn = qp.req.psn;
    let mtu = if qp.qp_type == QpType::Ud {
        ctx.config.active_mtu
    } else {
        qp.path_mtu
    };
    let wqe = qp.sq[idx].clone();
    let op = wqe.wr.opcode;
    let mut bth = Bth::new(0, qp.dest_qpn, psn);
    let (packet, npsn, is_last);
    if op.is_read() {
        let len = wqe.length - wqe.offset;
        let n = num_packets(len, mtu);
        bth.opcode = RC_RDMA_READ_REQUEST;
        bth.ack_req = true;
        let reth = Reth {
            va: wqe.wr.remote_addr.wrapping_add(wqe.offset),
            rkey: wqe.wr.rkey,
            dma_len: len as u32,
        };
        packet = RocePacket::new(bth, vec![ExtHeader::Reth(reth)], Vec::new());
        npsn = n;
        is_last = true;
    } else if op.is_atomic() {
        bth.ack_req = true;
        let w = &wqe.wr;
        let ext = match op {
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                bth.opcode = if op == WrOpcode::AtomicCmpAndSwp {
                    RC_COMPARE_SWAP
                } else {
                    RC_FETCH_ADD
                };
                let (swap_add, compare) = if op == WrOpcode::AtomicCmpAndSwp {
                    (w.swap, w.compare_add)
                } else {
                    (w.compare_add, 0)
                };
                ExtHeader::AtomicEth(AtomicEth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    swap_add,
                    compare,
                })
            }
            WrOpcode::MaskedAtomicCmpAndSwp => {
                bth.opcode = MASKED_COMPARE_SWAP;
                ExtHeader::MaskedCmpSwapEth(MaskedCmpSwapEth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    swap: w.swap,
                    compare: w.compare_add,
                    swap_mask: w.swap_mask,
                    compare_mask: w.compare_add_mask,
                })
            }
            _ => {
                bth.opcode = MASKED_FETCH_ADD;
                ExtHeader::MaskedFetchAddEth(MaskedFetchAddEth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    add: w.compare_add,
                    field_boundary: w.compare_add_mask,
                })
            }
        };
        packet = RocePacket::new(bth, vec![ext], Vec::new());
        npsn = 1;
        is_last = true;
    } else {
        if qp.qp_type == QpType::Ud && wqe.length > u64::from(mtu) {
            // C10-93.1.1 as rxe implements it: nothing is sent, the WR completes with success.
            complete_on_transmit(ctx, qp, idx);
            return Ok(());
        }
        let remaining = wqe.length - wqe.offset;
        let chunk = remaining.min(u64::from(mtu));
        let first = wqe.offset == 0;
        let last = remaining <= u64::from(mtu);
        bth.opcode = opcode_for(qp.qp_type, op, first, last);
        let payload = gather(ctx, qp, &wqe, wqe.offset, chunk)?;
        let mut ext = Vec::new();
        if qp.qp_type == QpType::Ud {
            let ud = wqe.wr.ud.expect("validated at post");
            bth.dest_qpn = ud.remote_qpn;
            // IBA: a Q_Key with the high bit set means "use the QP's Q_Key".
            let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
                qp.qkey
            } else {
                ud.remote_qkey
            };
            ext.push(ExtHeader::Deth(Deth {
                qkey,
                resv: 0,
                src_qp: qp.qpn,
            }));
        }
        if op.is_write() && first {
            ext.push(ExtHeader::Reth(Reth {
                va: wqe.wr.remote_addr,
                rkey: wqe.wr.rkey,
                dma_len: wqe.length as u32,
            }));
        }
        if last && op.has_imm() {
            ext.push(ExtHeader::ImmDt(ImmDt { imm: wqe.wr.imm_data }));
        }
        if last && op == WrOpcode::SendWithInv {
            ext.push(ExtHeader::Ieth(Ieth {
                rkey: wqe.wr.invalidate_rkey,
            }));
        }
        // SE on the last packet of SEND/SEND_IMM/WRITE_IMM when solicited.
        bth.se = last && wqe.wr.flags.solicited && (op.is_send() || op == WrOpcode::RdmaWriteWithImm);
        // AckReq (RC only) on the last packet, and after RXE_MAX_PKT_PER_ACK packets without one. UC and UD
        // never set it ("RDMA/rxe: Don't set BTH_ACK_MASK for UC or UD QPs"): the test VM's 6.1 kernel
        // (Debian 6.1.0-57) sends every UC packet with AckReq clear, the last one too.
        bth.ack_req = qp.qp_type == QpType::Rc && (last || qp.req.noack_pkts >= RXE_MAX_PKT_PER_ACK);
        packet = RocePacket::new(bth, ext, payload);
        npsn = 1;
        is_last = last;
        let w = &mut qp.sq[idx];
        if first {
            w.first_psn = psn;
            w.last_psn = psn_add(psn, num_packets(w.length, mtu) - 1);
            w.orig_first_psn = psn;
        }
        w.offset += chunk;
    }
    if op.is_read_or_atomic() {
        let w = &mut qp.sq[idx];
        w.first_psn = psn;
        w.last_psn = psn_add(psn, npsn - 1);
        if w.read_received == 0 {
            w.orig_first_psn = psn;
        }
    }
    // (rxe counts packets without AckReq on RC only: the counter's increment is behind the RC test)
    if packet.bth.ack_req {
        qp.req.noack_pkts = 0;
    } else if qp.qp_type == QpType::Rc {
        qp.req.noack_pkts += 1;
    }
    ctx.counters.tx_request_packets += 1;
    if qp.req.sent_any && psn_compare(psn, qp.req.sent_high) < 0 {
        ctx.counters.tx_retransmitted_packets += 1;
    }
    let next = psn_add(psn, npsn);
    if !qp.req.sent_any || psn_compare(next, qp.req.sent_high) > 0 {
        qp.req.sent_high = next;
        qp.req.sent_any = true;
    }
    if qp.qp_type == QpType::Ud {
        let av = qp.sq[idx].wr.ud.expect("validated").av;
        ctx.emit(&av, qp.sport, packet);
    } else {
        ctx.emit_qp(qp, packet);
    }
    qp.req.psn = next;
    qp.sq[idx].state = if is_last {
        WqeState::Pending
    } else {
        WqeState::Processing
    };
    if qp.qp_type == QpType::Rc {
        if qp.comp.retrans_deadline.is_none() {
            qp.comp.retrans_deadline = retransmit_timeout_ns(qp.timeout).map(|t| ctx.now + t);
        }
        if is_last {
            qp.req.idx += 1;
        }
    } else if is_last {
        complete_on_transmit(ctx, qp, idx);
    }
    Ok(())
}

/// UC and UD complete on transmit (rxe: the completer completes them once sent).
fn complete_on_transmit(ctx: &mut Ctx, qp: &mut Qp, idx: usize) {
    if let Some(w) = qp.sq.remove(idx) {
        if w.wr.flags.signaled || qp.sq_sig_all {
            let wc = send_cqe(qp, &w, WcStatus::Success);
            ctx.push_cqe(qp.send_cq, wc);
        }
    }
}
