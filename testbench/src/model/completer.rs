//! The completer (rxe `rxe_comp.c` `rxe_completer`): `check_psn` → `check_ack` → read/atomic data placement →
//! `do_complete`, the retry paths (`COMPST_ERROR_RETRY`, `COMPST_RNR_RETRY`) and the retransmit timer.
//!
//! Deviations/choices, kept small and named:
//! * A plain ACK whose PSN falls inside a pending READ/atomic WQE is ignored (rxe's `COMPST_WRITE_SEND`
//!   could complete such a WQE without its data).
//! * The read-retry check accepts READ_RESPONSE_FIRST only at the WQE's *original* first PSN (`docs/rxe-rules.md`
//!   section 4; rxe's `update_wqe_psn` rewrites `first_psn` on the retried request, so recheck on the peer).
//! * Retry counters are reloaded and `started_retry` cleared on any forward progress.
//! * A response-sequence violation completes the WQE with `BadRespErr` (rxe leaves the status unset).

use crate::wire::headers::{AethKind, NakCode};
use crate::wire::opcode::*;
use crate::wire::RoceFrame;

use super::device::{qp_error, send_cqe, Ctx, DropReason, RxOutcome};
use super::qp::{psn_add, psn_compare, Qp, WqeState};
use super::requester::scatter;
use super::timers::{retransmit_timeout_ns, rnr_timeout_ns};
use super::verbs::WcStatus;

/// rxe `reset_retry_counters` plus the bookkeeping of forward progress: the retry counters are reloaded, a
/// started retry is over, and the retransmit timer is rearmed (or stopped when nothing is outstanding).
fn progress(ctx: &Ctx, qp: &mut Qp) {
    qp.comp.retry_cnt = qp.retry_cnt;
    qp.comp.rnr_retry = qp.rnr_retry;
    qp.comp.started_retry = false;
    rearm(ctx, qp);
}

fn outstanding(qp: &Qp) -> bool {
    psn_compare(qp.req.psn, qp.comp.psn) > 0 || qp.sq.front().map_or(false, |w| w.state != WqeState::Posted)
}

fn rearm(ctx: &Ctx, qp: &mut Qp) {
    qp.comp.retrans_deadline = if outstanding(qp) && qp.req.rnr_until.is_none() {
        retransmit_timeout_ns(qp.timeout).map(|t| ctx.now + t)
    } else {
        None
    };
}

/// `do_complete`: retire the oldest WQE; a CQE for errors always, for success only when signaled.
fn do_complete(ctx: &mut Ctx, qp: &mut Qp, status: WcStatus) {
    if let Some(w) = qp.sq.pop_front() {
        if status != WcStatus::Success || w.wr.flags.signaled || qp.sq_sig_all {
            let wc = send_cqe(qp, &w, status);
            ctx.push_cqe(qp.send_cq, wc);
        }
        qp.req.idx = qp.req.idx.saturating_sub(1);
    }
}

/// rxe `get_wqe` finding a WQE in `wqe_state_done` at the head (a local operation, LOCAL_INV or BIND_MW): it completes
/// without a response, and so does each such WQE behind it.
pub(crate) fn complete_local(ctx: &mut Ctx, qp: &mut Qp) {
    let mut any = false;
    while qp.sq.front().map_or(false, |w| w.state == WqeState::Done) {
        do_complete(ctx, qp, WcStatus::Success);
        any = true;
    }
    if any {
        rearm(ctx, qp);
    }
}

/// `COMPST_ERROR`: complete the oldest WQE with `status`, move the QP to ERROR, flush the rest.
fn comp_error(ctx: &mut Ctx, qp: &mut Qp, status: WcStatus) {
    do_complete(ctx, qp, status);
    qp_error(ctx, qp);
}

/// `COMPST_ERROR_RETRY`: start a go-back-N unless one is already started (NAK-driven retries only; timeouts
/// always retry), counting down `retry_cnt` (7 = infinite in rxe); exhausted → `RETRY_EXC_ERR`.
fn error_retry(ctx: &mut Ctx, qp: &mut Qp, timeout: bool) {
    if qp.comp.started_retry && !timeout {
        return;
    }
    if qp.comp.retry_cnt > 0 {
        if qp.comp.retry_cnt != 7 {
            qp.comp.retry_cnt -= 1;
        }
        if psn_compare(qp.req.psn, qp.comp.psn) > 0 || qp.req.idx > 0 {
            qp.req.need_retry = true;
            qp.comp.started_retry = true;
        }
    } else {
        comp_error(ctx, qp, WcStatus::RetryExcErr);
    }
}

/// Fire due timers of a QP: the retransmit timer (rxe `retransmit_timer` → completer with `comp.timeout`) and
/// the end of an RNR wait (rxe `rnr_nak_timer` → requester retry).
pub fn fire_timers(ctx: &mut Ctx, qp: &mut Qp) {
    let now = ctx.now;
    if qp.req.rnr_until.map_or(false, |t| t <= now) {
        qp.req.rnr_until = None;
        qp.req.need_retry = true;
    }
    if qp.comp.retrans_deadline.map_or(false, |t| t <= now) {
        qp.comp.retrans_deadline = None;
        let waiting = qp.sq.front().map_or(false, |w| w.state != WqeState::Posted);
        if waiting && qp.req.rnr_until.is_none() {
            ctx.counters.timeouts += 1;
            error_retry(ctx, qp, true);
            if qp.state == super::qp::QpState::Rts {
                rearm(ctx, qp);
            }
        }
    }
}

fn aeth_is_ack(f: &RoceFrame) -> bool {
    f.packet.aeth().map_or(false, |a| matches!(a.kind(), AethKind::Ack { .. }))
}

/// Process one response-class packet (ACK, NAK, read response, atomic ACK) on an RC QP.
///
/// Whatever the packet did, the retransmit timer is then pushed back while PSNs are outstanding and no RNR
/// wait runs: rxe's completer ends every run over its received packets in `COMPST_EXIT`, which does
/// `mod_timer(&qp->retrans_timer, jiffies + qp->qp_timeout_jiffies)` when `psn_compare(req.psn, comp.psn) > 0`,
/// also after packets it dropped as stale. So the timer measures the time since the last response of any
/// kind, and a requester busy taking (even stale) responses does not time out.
pub fn rxe_completer(ctx: &mut Ctx, qp: &mut Qp, f: &RoceFrame) -> RxOutcome {
    let out = completer_packet(ctx, qp, f);
    if qp.state == super::qp::QpState::Rts {
        complete_local(ctx, qp);
    }
    if qp.state == super::qp::QpState::Rts && qp.req.rnr_until.is_none() && qp.comp.retrans_deadline.is_some() {
        rearm(ctx, qp);
    }
    out
}

fn completer_packet(ctx: &mut Ctx, qp: &mut Qp, f: &RoceFrame) -> RxOutcome {
    let pkt = &f.packet;
    let psn = pkt.bth.psn;
    let opcode = pkt.bth.opcode;
    let Some(info) = pkt.info() else {
        return ctx.drop(DropReason::Malformed);
    };
    if opcode == RC_ACKNOWLEDGE {
        match pkt.aeth().map(|a| a.kind()) {
            Some(AethKind::Ack { .. }) => ctx.counters.acks_received += 1,
            Some(AethKind::RnrNak { .. }) => ctx.counters.rnr_naks_received += 1,
            _ => {}
        }
        if let Some(a) = pkt.aeth() {
            if !matches!(a.kind(), AethKind::Ack { .. }) {
                *ctx.counters.naks_received.entry(a.syndrome).or_insert(0) += 1;
            }
        }
    }
    loop {
        // get_wqe
        let Some(wqe) = qp.sq.front() else {
            return ctx.drop(DropReason::NoPendingWqe);
        };
        if wqe.state == WqeState::Posted {
            return ctx.drop(DropReason::NoPendingWqe);
        }
        let is_rd_atomic = wqe.wr.opcode.is_read_or_atomic();
        // check_psn
        if psn_compare(psn, wqe.last_psn) > 0 {
            if wqe.state == WqeState::Pending {
                if is_rd_atomic {
                    // Implied NAK: a response beyond a pending READ/atomic means its response was lost.
                    ctx.counters.implied_naks += 1;
                    error_retry(ctx, qp, false);
                    return RxOutcome::Accepted;
                }
                // COMPST_COMP_WQE: a coalesced ACK completes this WQE; look at the next one.
                let last = wqe.last_psn;
                if psn_compare(psn_add(last, 1), qp.comp.psn) > 0 {
                    qp.comp.psn = psn_add(last, 1);
                }
                do_complete(ctx, qp, WcStatus::Success);
                progress(ctx, qp);
                continue;
            }
            return ctx.drop(DropReason::StaleResponse);
        }
        let d = psn_compare(psn, qp.comp.psn);
        if d < 0 {
            // Old or duplicate: ignored, except an ACK for the WQE's last PSN.
            if psn == wqe.last_psn && opcode == RC_ACKNOWLEDGE && aeth_is_ack(f) && !is_rd_atomic && wqe.state == WqeState::Pending {
                do_complete(ctx, qp, WcStatus::Success);
                progress(ctx, qp);
                return RxOutcome::Accepted;
            }
            return ctx.drop(DropReason::StaleResponse);
        }
        if d > 0 && is_rd_atomic {
            // A later response of a read/atomic whose earlier response is missing: wait for the retry.
            return ctx.drop(DropReason::StaleResponse);
        }
        break;
    }
    let wqe = qp.sq.front().expect("checked above");
    let op = wqe.wr.opcode;
    // check_ack: response sequence of a read in progress.
    match qp.comp.opcode {
        None => {
            if !info.pos.is_start() {
                comp_error(ctx, qp, WcStatus::BadRespErr);
                return RxOutcome::Accepted;
            }
        }
        Some(_) => {
            if opcode != RC_ACKNOWLEDGE
                && opcode != RC_RDMA_READ_RESPONSE_MIDDLE
                && opcode != RC_RDMA_READ_RESPONSE_LAST
            {
                // Read retries of partial data may restart only with FIRST at the WQE's first PSN, or ONLY
                // for a single-packet read; anything else (FIRST at a later PSN) is a fatal error.
                let ok = (psn == wqe.orig_first_psn && opcode == RC_RDMA_READ_RESPONSE_FIRST)
                    || (wqe.first_psn == wqe.last_psn && opcode == RC_RDMA_READ_RESPONSE_ONLY);
                if !ok {
                    comp_error(ctx, qp, WcStatus::BadRespErr);
                    return RxOutcome::Accepted;
                }
            }
        }
    }
    match opcode {
        RC_RDMA_READ_RESPONSE_FIRST | RC_RDMA_READ_RESPONSE_MIDDLE | RC_RDMA_READ_RESPONSE_LAST
        | RC_RDMA_READ_RESPONSE_ONLY => {
            if !op.is_read() {
                comp_error(ctx, qp, WcStatus::BadRespErr);
                return RxOutcome::Accepted;
            }
            if opcode != RC_RDMA_READ_RESPONSE_MIDDLE && !aeth_is_ack(f) {
                comp_error(ctx, qp, WcStatus::BadRespErr);
                return RxOutcome::Accepted;
            }
            // COMPST_READ: place the data.
            let off = wqe.read_received;
            let room = wqe.length.saturating_sub(off);
            if pkt.payload.len() as u64 > room {
                comp_error(ctx, qp, WcStatus::LocLenErr);
                return RxOutcome::Accepted;
            }
            let sgl = wqe.wr.sg_list.clone();
            if scatter(ctx, qp.pd, &sgl, off, &pkt.payload).is_err() {
                comp_error(ctx, qp, WcStatus::LocProtErr);
                return RxOutcome::Accepted;
            }
            let w = qp.sq.front_mut().expect("front");
            w.read_received += pkt.payload.len() as u64;
            qp.comp.psn = psn_add(psn, 1);
            if info.pos.is_end() {
                qp.comp.opcode = None;
                do_complete(ctx, qp, WcStatus::Success);
            } else {
                qp.comp.opcode = Some(opcode);
            }
            progress(ctx, qp);
            RxOutcome::Accepted
        }
        RC_ATOMIC_ACKNOWLEDGE => {
            if !op.is_atomic() || !aeth_is_ack(f) {
                comp_error(ctx, qp, WcStatus::BadRespErr);
                return RxOutcome::Accepted;
            }
            let orig = pkt.atomic_ack_eth().map_or(0, |a| a.orig);
            let sgl = wqe.wr.sg_list.clone();
            if scatter(ctx, qp.pd, &sgl, 0, &orig.to_le_bytes()).is_err() {
                comp_error(ctx, qp, WcStatus::LocProtErr);
                return RxOutcome::Accepted;
            }
            qp.comp.psn = psn_add(psn, 1);
            qp.comp.opcode = None;
            do_complete(ctx, qp, WcStatus::Success);
            progress(ctx, qp);
            RxOutcome::Accepted
        }
        RC_ACKNOWLEDGE => {
            let Some(aeth) = pkt.aeth() else {
                return ctx.drop(DropReason::Malformed);
            };
            match aeth.kind() {
                AethKind::Ack { .. } => {
                    if op.is_read_or_atomic() {
                        // Defensive (see module docs of `completer`): a plain ACK inside a pending READ/atomic's
                        // PSN range must not complete it without its data.
                        return ctx.drop(DropReason::StaleResponse);
                    }
                    // COMPST_WRITE_SEND
                    let w = qp.sq.front().expect("front");
                    if w.state == WqeState::Pending && w.last_psn == psn {
                        qp.comp.psn = psn_add(psn, 1);
                        do_complete(ctx, qp, WcStatus::Success);
                    } else {
                        qp.comp.psn = psn_add(psn, 1);
                    }
                    progress(ctx, qp);
                    RxOutcome::Accepted
                }
                AethKind::RnrNak { timer } => {
                    // COMPST_RNR_RETRY
                    if qp.comp.rnr_retry > 0 {
                        if qp.comp.rnr_retry != 7 {
                            qp.comp.rnr_retry -= 1;
                        }
                        qp.req.rnr_until = Some(ctx.now + rnr_timeout_ns(timer));
                        qp.comp.retrans_deadline = None;
                    } else {
                        comp_error(ctx, qp, WcStatus::RnrRetryExcErr);
                    }
                    RxOutcome::Accepted
                }
                AethKind::Nak(code) => {
                    match code {
                        NakCode::PsnSequenceError => {
                            if psn_compare(psn, qp.comp.psn) > 0 {
                                qp.comp.psn = psn;
                                qp.comp.started_retry = false;
                            }
                            error_retry(ctx, qp, false);
                        }
                        NakCode::InvalidRequest => comp_error(ctx, qp, WcStatus::RemInvReqErr),
                        NakCode::RemoteAccessError => comp_error(ctx, qp, WcStatus::RemAccessErr),
                        _ => comp_error(ctx, qp, WcStatus::RemOpErr),
                    }
                    RxOutcome::Accepted
                }
                AethKind::Reserved { .. } => {
                    comp_error(ctx, qp, WcStatus::BadRespErr);
                    RxOutcome::Accepted
                }
            }
        }
        _ => ctx.drop(DropReason::Malformed),
    }
}
