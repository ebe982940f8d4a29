//! Completer (rxe `rxe_comp.c` `rxe_completer`, as `testbench::model::completer` implements it): the WQEs
//! the requester is done with ([`ReqIssued`], `iss_*`) wait in a per-QP list until their responses
//! (`hdr_*` + `pay`: RC ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, RDMA READ RESPONSE FIRST/MIDDLE/LAST/ONLY) retire
//! them; completions go to CQE Generation (`cq`, formed as the golden `send_cqe`), read-response payload
//! to the Scatter Path (`s_cmd`, `s_pay`).
//!
//! **Stages** (each a block in this folder, with its unit test beside it), sequenced by the event machine here,
//! one event at a time (a response, a record from the Requester, a timer, a QP-table write):
//! * [`intake`]: the response taken and decoded, PSN + 1, the PSN compares (rxe `check_psn`'s inputs);
//! * [`read_place`]: where a READ response's payload lands, LOC_LEN_ERR, the hot QP's fast path;
//! * [`payload`]: the response payload forwarded to the Scatter Path through a FIFO, or dropped;
//! * [`timer`]: the retransmit and RNR timers of every QP (a scanner and the event's own check);
//! * [`cqe`]: the completion register to CQE Generation;
//! * [`feedback`]: rewinds, QP errors and the unacknowledged-PSN window to WQE Check.
//!
//! **State.** Per QP (256, index = QPN[7:0]): a ring of 64 ([`COMP_RING`]) pending records in block RAM (`ring`, address
//! {QPN, slot}), and one state word (`qst`: head, tail with wrap bits, `comp_psn`, bytes received of the
//! head READ, read-in-progress, error flag) plus the send CQ (`cqw_*`, CMD_WRITE_QP word 9). `comp_psn` is
//! the QP's sq_psn from CMD_WRITE_QP_REQ (`cqp_*`; rxe sets `comp.psn` to `sq_psn` at modify_qp to RTS, so
//! a NAK about the first WQE, even one whose PSNs wrap, is compared with the right PSN before that WQE's
//! record comes); it is set from the first PSN of a WQE pushed onto an empty list (all earlier PSNs are then
//! acknowledged, which is where the model's `comp.psn` stands too), or kept if an ACK
//! that found the list empty already covers part of that SEND/WRITE (the Requester reports a WQE after its
//! last packet, so the ACKs of its first packets can come first; rxe knows the WQE before it sends it). A
//! PSN-sequence NAK that finds the list empty (`NHint`) likewise sets `comp_psn` to its PSN and marks the
//! QP (`nak_hint`); the go-back-N it asks for starts when that WQE's record comes (`IHint`).
//! **A QP whose list holds 64 records back-pressures `iss_ready`** (the record waits; responses keep being
//! processed, alternating with `iss`, so the list drains).
//!
//! **Rules** (in the model's order): `check_psn` (a response PSN beyond the head WQE's last PSN completes a
//! pending SEND/WRITE, a coalesced ACK, and the next WQE is looked at; beyond a pending READ/atomic it is an
//! implied NAK: counted and dropped; older than `comp_psn` is stale and dropped, except an ACK equal to a
//! SEND/WRITE's last PSN, which completes it; a later response of a READ/atomic whose earlier one is missing
//! is dropped), `check_ack` (FIRST/ONLY/ACK/ATOMIC ACK start, MIDDLE/LAST/ACK continue a read; the AETH of
//! FIRST/LAST/ONLY must be ACK; read responses must match a READ), then: a READ response's payload goes to
//! `laddr + bytes received` (LOC_LEN_ERR when it runs past the WQE length), LAST/ONLY complete the READ; an
//! ACK advances `comp_psn` to PSN + 1 and completes a SEND/WRITE whose last PSN it is.
//! BAD_RESP / LOC_LEN_ERR complete the head WQE and put the QP in error (rxe `COMPST_ERROR`): every other
//! pending WQE, and every later record, completes with WR_FLUSH_ERR (or its own error status), responses are
//! dropped, until the next `cqw_we` (CMD_WRITE_QP) of the QP clears the flag.
//! A record with `status != 0` (failed its local checks, never sent) completes with that status when it
//! reaches the head of its list, in order; so does a local operation's record (LOCAL_INV, BIND_MW: WQE Check
//! did it, no packet was sent), with success and its WC opcode (rxe `get_wqe` on a `wqe_state_done` WQE), and
//! a response being processed then goes on to the WQE behind it. The head WQE's own record after a go-back-N
//! rewind is dropped (its record is already at the head), unless WQE Check failed it this time (its MR
//! deregistered since it was first sent): then it completes with that status and the QP goes to error, as rxe.
//! Only signaled WQEs and errors produce a completion.
//!
//! **ATOMIC ACKNOWLEDGE** (an ACK syndrome, for a pending atomic at its PSN): the original value (AtomicAckETH,
//! big-endian on the wire) goes to the WQE's local buffer in host byte order, one 8-byte Scatter command, then
//! the atomic completes with its WC opcode (COMP_SWAP / FETCH_ADD). NAKs, RNR NAKs, implied NAKs and the
//! retransmit timer: go-back-N, see `docs/architecture.md`.
//!
//! **Timing** (322 MHz, at most 6 LUT6 levels; the gate measures 5): one event at a time by a state machine.
//! PSN compares mod 2^24 as rxe `psn_compare` in two registered stages ([`PsnCmp`], as `psn_check.rs`: narrow
//! chunk compares, then the borrow); `PSN + 1` in two 12-bit halves; the 64-bit address and the 32-bit byte
//! counts by pipelined adders ([`PipeAdd64`], 3 cycles, which pass while the PSNs are compared).
//!
//! **Fast path**: the hot QP's in-order READ responses skip the general path (`read_place.rs`).
//! **Fast drop.** After a loss the peer may still send many MiB of responses that can only be dropped (the
//! rest of the READ with the gap, then every later READ's, until the responses to the go-back-N come). Such a
//! read response (the QP's head a READ/atomic, a go-back-N started and nothing progressed since, PSN other than
//! `comp_psn`) is dropped from RQst in 4 cycles (`FDrop`: the timer pushed back as the rules do), not 10, so
//! the Completer keeps up with MTU-256 responses at 100 Gb/s (one per 8.7 cycles) while it waits.
//! **Records** go into their QP's ring beside the event registers (`XRd`: the QP's state word is read, the
//! record written at its tail and the tail + 1 written back, one cycle), so the hot QP stays hot while the
//! Requester issues between the responses of its READs; every event reads its QP's state word again. Only a
//! rewind's marker, a record while a go-back-N is in progress and the first record of an empty list (the
//! timer starts, `comp_psn` is set) take the general path (`IRd`).
//! **Rate** (measured by `completer_keeps_up_with_read_responses_at_line_rate`, headers handed on as RX Parse
//! and the top do, sinks always ready): a MIDDLE read response takes its payload beats + 2 cycles: 6 / 18 / 66
//! cycles at path MTU 256 / 1024 / 4096 (the 100G wire brings one every 8.7 / 28.5 / 107.7 cycles; before
//! the fast path and the payload FIFO: 26 / 38 / 86); at least 5 cycles for a short one. On the general path an ACK or dropped
//! response takes about 10 cycles, plus 4 per WQE it completes, 3 when another record waits behind it
//! (`CqEmit` reads that record itself, `HeadRd` skipped) (plus the completion handshake); a FIRST,
//! ONLY or other general-path read response about 11 cycles before its payload starts to come in, once per
//! READ in a stream of responses; a record from `iss` 2 (`completer_keeps_up_with_short_reads_and_records`:
//! 3,000-byte READs at MTU 1024 on 2 QPs, a record between the responses of every READ).
//! In the system (`sim/tests/rnic_system.rs`, READs of 1 B .. 1 MiB from the golden peer at line rate): no RX
//! Parse drop at MTU 256, 1024 and 4096.
//!
//! Event counters (`counters[i]`): [`CNT_ACKS`] ACKs received (ACKNOWLEDGE with an ACK syndrome), [`CNT_NAKS`]
//! NAKs received (NAK syndrome), [`CNT_RNR_NAKS`] RNR NAKs received, [`CNT_DROPPED`] responses dropped for no
//! pending WQE or as stale (the model's `NoPendingWqe` + `StaleResponse`), [`CNT_BAD`] bad responses
//! (BAD_RESP completions), [`CNT_IMPLIED_NAKS`] implied NAKs (but one that comes while a go-back-N is started
//! and nothing has progressed, for a READ/atomic at the head, is a fast drop and counts as dropped), [`CNT_ATOMIC_ACKS`] atomic ACKs taken.

use rust_hdl::prelude::*;

use crate::common::axis::{AxisSink, AxisSource};
use crate::common::psn_cmp::PsnCmp;

pub mod intake;
use intake::RespIntake;
pub mod read_place;
use read_place::ReadPlace;
pub mod timer;
use timer::RetryTimer;
pub use timer::{rnr_units_table, timeout_units_table, CompTmr, TIMEOUT_LOG2_MAX, TIMER_TICK};
pub mod payload;
use payload::RespPayload;
pub mod cqe;
use crate::common::ports::{CqSource, ScatterCmd};
use cqe::CompCqe;
pub mod feedback;
use feedback::ReqFeedback;
use crate::common::consts::k;
use crate::common::counter::EventCounter;
use crate::common::fifo::{Fifo, SdpRam};
use crate::common::lut::Lut8;
use crate::host::req_front::ReqIssued;
use crate::wire::rx_parse::RxHeader;
use rnic_driver::host::wc_status_code;
use testbench::model::WcStatus;

pub mod state;
use state::CompState;
pub use state::*;

crate::logic_block! {
    /// The Completer (see the module documentation).
    pub struct Completer {
        pub clock: Signal<In, Clock>,
        /// WQEs the requester is done with, in per-QP order.
        pub iss: Signal<In, ReqIssued>,
        pub iss_valid: Signal<In, Bit>,
        pub iss_ready: Signal<Out, Bit>,
        /// Response headers (response opcodes only) and their payload (`hdr_pay_len` bytes, none when 0).
        pub hdr: Signal<In, RxHeader>,
        pub hdr_ext_words: Signal<In, Bits<4>>,
        pub hdr_pay_len: Signal<In, Bits<13>>,
        pub hdr_valid: Signal<In, Bit>,
        pub hdr_ready: Signal<Out, Bit>,
        pub pay: AxisSink,
        /// QP table: the send CQ of a QP (CMD_WRITE_QP word 9); also clears the QP's error flag.
        pub cqw_we: Signal<In, Bit>,
        pub cqw_qpn: Signal<In, Bits<24>>,
        pub cqw_cqn: Signal<In, Bits<24>>,
        /// ... and its retry attributes (`timeout`, `retry_cnt`, `rnr_retry`), which reset the retry counters.
        pub cqw_timeout: Signal<In, Bits<5>>,
        pub cqw_retry: Signal<In, Bits<3>>,
        pub cqw_rnr: Signal<In, Bits<3>>,
        /// ... and whether it is a UC QP (no responses: each WQE completes when its record comes).
        pub cqw_uc: Signal<In, Bit>,
        /// The CMD_WRITE_QP puts the QP in RESET: its retired READ/atomic count starts again from 0.
        pub cqw_reset: Signal<In, Bit>,
        /// CMD_WRITE_QP_REQ: the QP's sq_psn, where its `comp_psn` stands from now on (rxe sets `comp.psn` to
        /// `sq_psn` at modify_qp to RTS): everything before it counts as acknowledged.
        pub cqp_we: Signal<In, Bit>,
        pub cqp_qpn: Signal<In, Bits<24>>,
        pub cqp_psn: Signal<In, Bits<24>>,
        /// Go-back-N: send QP `rw_qpn` again from its ring index `rw_idx` and PSN `rw_psn`, the first WQE resumed
        /// after `rw_skip` packets (to WQE Check).
        pub rw_valid: Signal<Out, Bit>,
        pub rw_ready: Signal<In, Bit>,
        pub rw_qpn: Signal<Out, Bits<24>>,
        pub rw_idx: Signal<Out, Bits<16>>,
        pub rw_psn: Signal<Out, Bits<24>>,
        pub rw_skip: Signal<Out, Bits<24>>,
        /// QP `qerr_qpn` went to error here (retry or RNR retry exhausted, a NAK 0x61-0x63, a bad response): one
        /// cycle, to WQE Check, which from then on completes its WQEs with WR_FLUSH_ERR without sending them.
        pub qerr_valid: Signal<Out, Bit>,
        pub qerr_qpn: Signal<Out, Bits<8>>,
        /// The unacked-PSN window of QP `win_qpn` (rxe `RXE_MAX_UNACKED_PSNS`), written to WQE Check whenever
        /// the QP's state word is, two cycles later: `win_busy` (WQEs are pending here) and `win_lim` = `comp_psn`
        /// + 128. WQE Check starts a WQE of a busy QP only at a PSN at or below `win_lim`.
        pub win_we: Signal<Out, Bit>,
        pub win_qpn: Signal<Out, Bits<8>>,
        pub win_busy: Signal<Out, Bit>,
        pub win_lim: Signal<Out, Bits<24>>,
        /// And the QP's READ/atomic WQEs retired (`fin`), with the window.
        pub win_fin: Signal<Out, Bits<8>>,
        /// Scatter commands (read-response payload placement) and their payload.
        pub s_cmd: ScatterCmd,
        pub s_pay: AxisSource,
        /// Completions to CQE Generation.
        pub cq: CqSource,
        /// Event counters, indexed by the `CNT_*` constants.
        pub counters: [Signal<Out, Bits<32>>; COMP_COUNTERS],

        ring: SdpRam<Pend, 14>,
        /// The retransmit and RNR timers (timer.rs).
        /// Response intake and PSN compares (intake.rs).
        ri: RespIntake,
        /// Where a READ response lands, and the hot QP's fast path (read_place.rs).
        rp: ReadPlace,
        tm: RetryTimer,
        /// The response payload: forwarded into a 16-beat FIFO to the Scatter Path, or dropped (payload.rs).
        pl: RespPayload,
        /// The completion register (cqe.rs).
        cqe: CompCqe,
        /// Rewinds, QP errors and windows to WQE Check (feedback.rs).
        fb: ReqFeedback,
        qst: SdpRam<CompSt, 8>,
        cqn_ram: SdpRam<CompCfg, 8>,
        /// The event's QP's state word, as read and as it will be written back.
        s: DFF<CompSt>,
        l_comp: Signal<Local, Bits<24>>,
        /// A read response that can only be dropped (see `FDrop`).
        l_fdrop: Signal<Local, Bit>,
        c_rst: DFF<Bit>,
        /// the table write being applied is a CMD_WRITE_QP_REQ, with this sq_psn
        c_req: DFF<Bit>,
        c_psn: DFF<Bits<24>>,
        k100_34: Constant<Bits<34>> = k(0x100),
        k200_34: Constant<Bits<34>> = k(0x200),
        /// QP-table writes in order: {sq_psn 33:10, CMD_WRITE_QP_REQ 9, to RESET 8, QPN 7:0}
        cqwq: Fifo<Bits<34>, 4, 5>,
        cls_lut: Lut8<13> = Lut8::new(wr_class_table()),
        /// The QP's `comp_psn` against the first record's first PSN and its next PSN, as the record is read in
        /// (`IRd`; results in `IHint`): an ACK that came before the record may already cover part of the WQE.
        hint_lo: PsnCmp,
        hint_hi: PsnCmp,
        cnt: [EventCounter; COMP_COUNTERS],

        state: DFF<CompState>,
        prio: DFF<Bit>,
        qpn: DFF<Bits<24>>,
        cqn: DFF<Bits<24>>,
        qc: DFF<CompCfg>,
        tmo: DFF<Bit>,
        tm_set: DFF<Bit>,
        tm_arm: DFF<Bit>,
        tm_rnr: DFF<Bit>,
        rnr_code: DFF<Bits<5>>,
        tw: DFF<Bits<2>>,
        // go-back-N
        rt_rnr: DFF<Bit>,
        sk_lo: DFF<Bits<13>>,
        skip: DFF<Bits<24>>,
        rec: DFF<Pend>,
        i_first: DFF<Bits<24>>,
        /// The QP's `comp_psn` before the first record of an empty list replaced it (see `IHint`).
        i_hint: DFF<Bits<24>>,
        /// An ACK found the QP's list empty: Done writes its PSN + 1 as `comp_psn`.
        a_hint: DFF<Bit>,
        cls: DFF<Bits<13>>,
        resp: DFF<Bit>,
        paypend: DFF<Bit>,
        cstat: DFF<Bits<8>>,
        act: DFF<Bits<4>>,
        over: DFF<Bit>,
        /// The head + 1 and whether a record is left behind it (from the state word; valid in CqEmit, which
        /// then reads the next record itself: HeadRd is skipped).
        hn: DFF<Bits<7>>,
        more: DFF<Bit>,

        l_qpn8: Signal<Local, Bits<8>>,
        l_head: Signal<Local, Bits<7>>,
        l_tail: Signal<Local, Bits<7>>,
        l_xtail: Signal<Local, Bits<7>>,
        l_iqpn: Signal<Local, Bits<24>>,
        /// the record on offer (`iss`) as a ring entry
        l_irec: Signal<Local, Pend>,
        l_hqpn: Signal<Local, Bits<24>>,
        l_cls: Signal<Local, Bits<13>>,
        l_full: Signal<Local, Bit>,
        l_rresp: Signal<Local, Bit>,
        l_badseq: Signal<Local, Bit>,
        c_rd_at: Signal<Local, Bit>,
        c_read: Signal<Local, Bit>,
        c_atomic: Signal<Local, Bit>,

        k0_2: Constant<Bits<2>> = k(0),
        k1_2: Constant<Bits<2>> = k(1),
        k3_2: Constant<Bits<2>> = k(3),
        k1_7: Constant<Bits<7>> = k(1),
        k_ring: Constant<Bits<7>> = k(COMP_RING as u64),
        k0_8: Constant<Bits<8>> = k(0),
        k0_13: Constant<Bits<13>> = k(0),
        k8_13: Constant<Bits<13>> = k(8),
        k0_32: Constant<Bits<32>> = k(0),
        k0_3: Constant<Bits<3>> = k(0),
        k1_3: Constant<Bits<3>> = k(1),
        k7_3: Constant<Bits<3>> = k(7),
        k1_8: Constant<Bits<8>> = k(1),
        syn_seq: Constant<Bits<8>> = k(0x60),
        syn_inv: Constant<Bits<8>> = k(0x61),
        syn_acc: Constant<Bits<8>> = k(0x62),
        st_retry: Constant<Bits<8>> = k(wc_status_code(WcStatus::RetryExcErr) as u64),
        st_rnr: Constant<Bits<8>> = k(wc_status_code(WcStatus::RnrRetryExcErr) as u64),
        st_inv: Constant<Bits<8>> = k(wc_status_code(WcStatus::RemInvReqErr) as u64),
        st_acc: Constant<Bits<8>> = k(wc_status_code(WcStatus::RemAccessErr) as u64),
        st_op: Constant<Bits<8>> = k(wc_status_code(WcStatus::RemOpErr) as u64),
        a_nak: Constant<Bits<4>> = k(10),
        a_rnr: Constant<Bits<4>> = k(11),
        st_flush: Constant<Bits<8>> = k(wc_status_code(WcStatus::WrFlushErr) as u64),
        st_bad: Constant<Bits<8>> = k(wc_status_code(WcStatus::BadRespErr) as u64),
        st_len: Constant<Bits<8>> = k(wc_status_code(WcStatus::LocLenErr) as u64),
        a_implied: Constant<Bits<4>> = k(0),
        a_coalesce: Constant<Bits<4>> = k(1),
        a_ack_last: Constant<Bits<4>> = k(2),
        a_stale: Constant<Bits<4>> = k(3),
        a_bad: Constant<Bits<4>> = k(4),
        a_read: Constant<Bits<4>> = k(5),
        a_atomic: Constant<Bits<4>> = k(6),
        a_ack_adv: Constant<Bits<4>> = k(7),
        a_ack_comp: Constant<Bits<4>> = k(8),
        a_ignore: Constant<Bits<4>> = k(9),
        l_fpsn: Signal<Local, Bits<24>>,
        l_sk_lo: Signal<Local, Bits<13>>,
        l_sk_hi: Signal<Local, Bits<12>>,
        l_sk_b: Signal<Local, Bits<12>>,
    }
}

impl Logic for Completer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, state, prio, qpn, cqn, rec, i_first, i_hint, a_hint, cls, resp, paypend, cstat, act, over,
            qc, tmo, tm_set, tm_arm, tm_rnr, rnr_code, tw, rt_rnr, sk_lo, skip, c_rst, c_req, c_psn, s, hn, more
        );
        clock!(
            self, clock, ri, rp, ring, qst, cqn_ram, cqwq, hint_lo, hint_hi, tm, pl, cqe, fb
        );
        for i in 0..9 {
            self.cnt[i].clock.next = self.clock.val();
            self.cnt[i].inc.next = false;
            self.counters[i].next = self.cnt[i].value.val();
        }

        // ---- defaults ----
        self.iss_ready.next = false;
        self.hdr_ready.next = false;
        self.s_cmd.valid.next = false;
        self.s_cmd.addr.next = self.rp.addr.val();
        self.s_cmd.len.next = self.ri.plen.val();

        // ---- payload (payload.rs): the last header's payload into the payload FIFO (or dropped); the FIFO to the
        // Scatter Path, so that the next header is taken while the Scatter Path still plans and writes this one ----
        self.pl.fwd.next = false;
        self.pl.drop.next = false;
        self.pl.at_push.next = false;
        self.pl.at_data.next = self.ri.orig.val();
        AxisSink::link(&mut self.pay, &mut self.pl.pay);
        AxisSource::link(&mut self.s_pay, &mut self.pl.s_pay);
        // ---- the completion register (cqe.rs): the head record's completion, loaded in CqLoad ----
        self.cqe.load.next = false;
        self.cqe.clear.next = false;
        self.cqe.rec.next = self.rec.q.val();
        self.cqe.status.next = self.cstat.q.val();
        self.cqe.cqn.next = self.cqn.q.val();
        self.cqe.qpn.next = self.qpn.q.val();
        CqSource::link(&mut self.cq, &mut self.cqe.cq);

        // QP table writes; a write also queues the clearing of the QP's error flag
        self.cqn_ram.we.next = self.cqw_we.val();
        self.cqn_ram.waddr.next = self.cqw_qpn.val().get_bits::<8>(0);
        self.cqn_ram.wdata.next.cqn = self.cqw_cqn.val();
        self.cqn_ram.wdata.next.timeout = self.cqw_timeout.val();
        self.cqn_ram.wdata.next.retry_cnt = self.cqw_retry.val();
        self.cqn_ram.wdata.next.rnr_retry = self.cqw_rnr.val();
        self.cqn_ram.wdata.next.uc = self.cqw_uc.val();

        // ---- the timers (timer.rs): the event's QP, its timeout, and the write the states ask for ----
        self.tm.qpn.next = self.qpn.q.val().get_bits::<8>(0);
        self.tm.timeout.next = self.qc.q.val().timeout;
        self.tm.rnr_code.next = self.rnr_code.q.val();
        self.tm.rnr.next = self.tm_rnr.q.val();
        self.tm.arm.next = self.tm_arm.q.val();
        self.tm.pending.next = self.s.q.val().head != self.s.q.val().tail;
        self.tm.we.next = false;
        self.tm.we_fresh.next = false;
        self.tm.take.next = false;
        self.tm.load.next = false;
        // go-back-N's skip = comp_psn - the head's first PSN, in two 12-bit halves (13-bit low with its borrow)
        self.l_fpsn.next = self.rec.q.val().first_psn;
        self.l_comp.next = self.s.q.val().comp_psn;
        self.l_sk_lo.next = bit_cast::<13, 12>(self.l_comp.val().get_bits::<12>(0))
            - bit_cast::<13, 12>(self.l_fpsn.val().get_bits::<12>(0));
        self.l_sk_b.next = bit_cast::<12, 1>(self.sk_lo.q.val().get_bits::<1>(12));
        self.l_sk_hi.next = self.l_comp.val().get_bits::<12>(12) - self.l_fpsn.val().get_bits::<12>(12) - self.l_sk_b.val();
        // ---- to WQE Check (feedback.rs): QP-to-error pulses, rewinds, and the window (wired below the states) ----
        self.fb.qpn.next = self.qpn.q.val().get_bits::<8>(0);
        self.fb.qerr_set.next = false;
        self.fb.rw_push.next = false;
        self.fb.rw_in.next.qpn = self.qpn.q.val().get_bits::<8>(0);
        self.fb.rw_in.next.idx = self.rec.q.val().idx;
        self.fb.rw_in.next.psn = self.s.q.val().comp_psn;
        self.fb.rw_in.next.skip = self.skip.q.val();
        self.fb.rw_ready.next = self.rw_ready.val();
        self.rw_valid.next = self.fb.rw_valid.val();
        self.rw_qpn.next = self.fb.rw_qpn.val();
        self.rw_idx.next = self.fb.rw_idx.val();
        self.rw_psn.next = self.fb.rw_psn.val();
        self.rw_skip.next = self.fb.rw_skip.val();
        self.qerr_valid.next = self.fb.qerr_valid.val();
        self.qerr_qpn.next = self.fb.qerr_qpn.val();
        self.win_we.next = self.fb.win_we.val();
        self.win_qpn.next = self.fb.win_qpn.val();
        self.win_busy.next = self.fb.win_busy.val();
        self.win_lim.next = self.fb.win_lim.val();
        self.win_fin.next = self.fb.win_fin.val();
        self.cqwq.push.next = self.cqw_we.val() | self.cqp_we.val();
        // {sq_psn, CMD_WRITE_QP_REQ, to RESET, QPN} (one command at a time: never both in a cycle)
        self.cqwq.din.next = bit_cast::<34, 8>(self.cqw_qpn.val().get_bits::<8>(0));
        if self.cqw_reset.val() {
            self.cqwq.din.next = bit_cast::<34, 8>(self.cqw_qpn.val().get_bits::<8>(0)) | self.k100_34.val();
        }
        if self.cqp_we.val() {
            self.cqwq.din.next = (bit_cast::<34, 24>(self.cqp_psn.val()) << 10)
                | self.k200_34.val()
                | bit_cast::<34, 8>(self.cqp_qpn.val().get_bits::<8>(0));
        }
        self.cqwq.pop.next = false;

        // ---- addresses ----
        self.l_qpn8.next = self.qpn.q.val().get_bits::<8>(0);
        self.l_head.next = self.s.q.val().head;
        self.l_tail.next = self.s.q.val().tail;
        self.l_xtail.next = self.qst.rdata.val().tail;
        self.l_iqpn.next = self.iss.val().qpn;
        self.l_irec.next.idx = self.iss.val().idx;
        self.l_irec.next.first_psn = self.iss.val().first_psn;
        self.l_irec.next.wr_id = self.iss.val().wr_id;
        self.l_irec.next.wr_op = self.iss.val().wr_op;
        self.l_irec.next.signaled = self.iss.val().signaled;
        self.l_irec.next.next_psn = self.iss.val().next_psn;
        self.l_irec.next.status = self.iss.val().status;
        self.l_irec.next.laddr = self.iss.val().laddr;
        self.l_irec.next.len = self.iss.val().len;
        self.l_irec.next.imm = self.iss.val().imm;
        self.l_hqpn.next = self.hdr.val().dest_qpn;
        self.qst.raddr.next = self.l_qpn8.val();
        self.cqn_ram.raddr.next = self.l_qpn8.val();
        self.qst.we.next = false;
        self.qst.waddr.next = self.l_qpn8.val();
        self.qst.wdata.next = self.s.q.val();
        self.ring.raddr.next = (bit_cast::<14, 8>(self.l_qpn8.val()) << 6) | bit_cast::<14, 6>(self.l_head.val().get_bits::<6>(0));
        self.ring.waddr.next = (bit_cast::<14, 8>(self.l_qpn8.val()) << 6) | bit_cast::<14, 6>(self.l_tail.val().get_bits::<6>(0));
        self.ring.wdata.next = self.rec.q.val();
        self.ring.we.next = false;
        self.hn.d.next = self.s.q.val().head + self.k1_7.val();
        self.more.d.next = (self.s.q.val().head + self.k1_7.val()) != self.s.q.val().tail;
        self.l_full.next = (self.qst.rdata.val().head ^ self.qst.rdata.val().tail) == self.k_ring.val();

        // ---- the response taken (intake.rs): its fields, PSN + 1, the PSN compares ----
        self.ri.hdr.next = self.hdr.val();
        self.ri.hdr_pay_len.next = self.hdr_pay_len.val();
        self.ri.take.next = false;
        self.ri.next_psn.next = self.rec.q.val().next_psn;
        self.ri.comp_psn.next = self.s.q.val().comp_psn;

        // ---- the head record's class, registered ----
        self.cls_lut.x.next = self.rec.q.val().wr_op;
        self.l_cls.next = self.cls_lut.y.val();
        self.cls.d.next = self.l_cls.val();
        self.cqe.cls.next = self.l_cls.val();
        self.c_read.next = self.cls.q.val().get_bit(9);
        self.c_atomic.next = self.cls.q.val().get_bit(10);
        self.c_rd_at.next = self.cls.q.val().get_bit(11);

        // (inputs from the state word and the record on offer in IRd; results in IHint)
        self.hint_lo.a.next = self.qst.rdata.val().comp_psn;
        self.hint_lo.b.next = self.iss.val().first_psn;
        self.hint_hi.a.next = self.qst.rdata.val().comp_psn;
        self.hint_hi.b.next = self.iss.val().next_psn;

        // ---- where a READ response lands, and the hot QP's fast path (read_place.rs) ----
        self.rp.laddr.next = self.rec.q.val().laddr;
        self.rp.len.next = self.rec.q.val().len;
        self.rp.rd.next = self.s.q.val().rd;
        self.rp.plen.next = self.ri.plen.val();
        self.rp.hdr_qpn.next = self.l_hqpn.val();
        self.rp.hdr_psn.next = self.hdr.val().psn;
        self.rp.hdr_pay_len.next = self.hdr_pay_len.val();
        self.rp.qpn.next = self.qpn.q.val();
        self.rp.comp_psn.next = self.s.q.val().comp_psn;
        self.rp.next_psn.next = self.rec.q.val().next_psn;
        self.rp.paypend.next = self.paypend.q.val();
        self.rp.is_mid.next = self.ri.is_mid.val();
        self.rp.is_last.next = self.ri.is_last.val();
        self.rp.sy_ack.next = self.ri.sy_ack.val();
        self.rp.load.next = false;
        self.rp.restart.next = false;
        self.rp.adv.next = false;
        self.rp.heat.next = false;
        self.rp.cool.next = false;

        // ---- header decode ----
        self.l_rresp.next = self.ri.is_first.val() | self.ri.is_mid.val() | self.ri.is_last.val() | self.ri.is_only.val();
        // (RQst) a read response while a go-back-N is started and nothing has progressed, for a QP whose head
        // is a READ/atomic, at a PSN other than comp_psn: the rules can only drop it (older: stale; inside the
        // head: a gap; beyond: an implied NAK, which does not go back again before progress)
        self.l_fdrop.next = self.l_rresp.val()
            & self.qst.rdata.val().started
            & self.qst.rdata.val().hra
            & !self.qst.rdata.val().err
            & (self.qst.rdata.val().head != self.qst.rdata.val().tail)
            & (self.ri.psn.val() != self.qst.rdata.val().comp_psn);
        self.l_badseq.next = (!self.s.q.val().reading & (self.ri.is_mid.val() | self.ri.is_last.val()))
            | (self.s.q.val().reading & (self.ri.is_first.val() | self.ri.is_only.val() | self.ri.is_atack.val()));

        match self.state.q.val() {
            CompState::Idle => {
                if !self.cqwq.empty.val() {
                    self.rp.cool.next = true;
                    self.cqwq.pop.next = true;
                    self.qpn.d.next = bit_cast::<24, 8>(self.cqwq.dout.val().get_bits::<8>(0));
                    self.c_rst.d.next = self.cqwq.dout.val().get_bit(8);
                    self.c_req.d.next = self.cqwq.dout.val().get_bit(9);
                    self.c_psn.d.next = self.cqwq.dout.val().get_bits::<24>(10);
                    self.qst.raddr.next = self.cqwq.dout.val().get_bits::<8>(0);
                    self.cqn_ram.raddr.next = self.cqwq.dout.val().get_bits::<8>(0);
                    self.state.d.next = CompState::CRd;
                } else if self.tm.expired.val() {
                    // a timer the scanner saw expire
                    self.tm.take.next = true;
                    self.rp.cool.next = true;
                    self.tmo.d.next = true;
                    self.resp.d.next = false;
                    self.qpn.d.next = bit_cast::<24, 8>(self.tm.exp_qpn.val());
                    self.qst.raddr.next = self.tm.exp_qpn.val();
                    self.cqn_ram.raddr.next = self.tm.exp_qpn.val();
                    self.state.d.next = CompState::TRd;
                } else if self.hdr_valid.val() & !self.pl.pin.val() & (!self.iss_valid.val() | self.prio.q.val()) {
                    self.hdr_ready.next = true;
                    self.prio.d.next = false;
                    self.qpn.d.next = self.l_hqpn.val();
                    self.qst.raddr.next = self.l_hqpn.val().get_bits::<8>(0);
                    self.cqn_ram.raddr.next = self.l_hqpn.val().get_bits::<8>(0);
                    self.ri.take.next = true;
                    self.paypend.d.next = self.hdr_pay_len.val() != self.k0_13.val();
                    self.resp.d.next = true;
                    self.state.d.next = CompState::RQst;
                } else if self.iss_valid.val() {
                    // a record: its QP's state word is read beside the event registers (the hot QP stays hot)
                    self.prio.d.next = true;
                    self.qst.raddr.next = self.l_iqpn.val().get_bits::<8>(0);
                    self.state.d.next = CompState::XRd;
                }
            }
            CompState::XRd => {
                // a record for a QP whose list is neither empty nor full, with no go-back-N in progress: into the
                // ring at the tail and the tail + 1 into the state word, in this cycle, without the event
                // registers (every event reads its QP's state word again, so the hot QP's registers stay right)
                self.ring.waddr.next = (bit_cast::<14, 8>(self.l_iqpn.val().get_bits::<8>(0)) << 6)
                    | bit_cast::<14, 6>(self.l_xtail.val().get_bits::<6>(0));
                self.ring.wdata.next = self.l_irec.val();
                self.qst.waddr.next = self.l_iqpn.val().get_bits::<8>(0);
                self.qst.wdata.next = self.qst.rdata.val();
                self.qst.wdata.next.tail = self.qst.rdata.val().tail + self.k1_7.val();
                self.state.d.next = CompState::Idle;
                if self.iss.val().rewind
                    | self.qst.rdata.val().retrying
                    | self.qst.rdata.val().skip_head
                    | (self.qst.rdata.val().head == self.qst.rdata.val().tail)
                {
                    // a rewind's marker, a go-back-N in progress, or the first record of an empty list (the
                    // timer starts, comp_psn is set): the general path, in the event registers
                    self.rp.cool.next = true;
                    self.qpn.d.next = self.l_iqpn.val();
                    self.qst.raddr.next = self.l_iqpn.val().get_bits::<8>(0);
                    self.cqn_ram.raddr.next = self.l_iqpn.val().get_bits::<8>(0);
                    self.state.d.next = CompState::IRd;
                } else if !self.l_full.val() {
                    self.ring.we.next = true;
                    self.qst.we.next = true;
                    self.iss_ready.next = true;
                }
                // (a full list: the record waits; a response goes first if one is there)
            }
            CompState::CRd => {
                self.s.d.next.head = self.qst.rdata.val().head;
                self.s.d.next.tail = self.qst.rdata.val().tail;
                self.s.d.next.comp_psn = self.qst.rdata.val().comp_psn;
                self.s.d.next.rd = self.qst.rdata.val().rd;
                self.s.d.next.reading = self.qst.rdata.val().reading;
                if self.c_req.q.val() {
                    // CMD_WRITE_QP_REQ: only comp_psn moves (to sq_psn) and a NAK hint is forgotten; a PSN
                    // compare against a comp_psn left from before (0 on a new QP) would take a NAK or an ACK
                    // of the first WQE for stale, or for already covering it (rxe: comp.psn = sq_psn)
                    self.s.d.next.comp_psn = self.c_psn.q.val();
                    self.s.d.next.err = self.qst.rdata.val().err;
                    self.s.d.next.retrying = self.qst.rdata.val().retrying;
                    self.s.d.next.skip_head = self.qst.rdata.val().skip_head;
                    self.s.d.next.started = self.qst.rdata.val().started;
                    self.s.d.next.nak_hint = false;
                    self.s.d.next.rl = self.qst.rdata.val().rl;
                    self.s.d.next.nl = self.qst.rdata.val().nl;
                    self.s.d.next.fin = self.qst.rdata.val().fin;
                    self.s.d.next.hra = self.qst.rdata.val().hra;
                    self.qc.d.next = self.cqn_ram.rdata.val();
                    self.state.d.next = CompState::Done;
                } else {
                self.s.d.next.err = false;
                // (re)configured: retry counters full, no go-back-N in progress, timer off
                self.s.d.next.retrying = false;
                self.s.d.next.skip_head = false;
                self.s.d.next.started = false;
                self.s.d.next.nak_hint = false;
                self.s.d.next.rl = self.cqn_ram.rdata.val().retry_cnt;
                self.s.d.next.nl = self.cqn_ram.rdata.val().rnr_retry;
                // (to RESET: nothing is outstanding, the READ/atomic count starts again)
                self.s.d.next.fin = self.qst.rdata.val().fin;
                self.s.d.next.hra = self.qst.rdata.val().hra;
                if self.c_rst.q.val() {
                    self.s.d.next.fin = self.k0_8.val();
                }
                self.qc.d.next = self.cqn_ram.rdata.val();
                self.tm_set.d.next = true;
                self.tm_arm.d.next = false;
                self.state.d.next = CompState::Done;
                }
            }
            CompState::IRd => {
                self.s.d.next = self.qst.rdata.val();
                self.cqn.d.next = self.cqn_ram.rdata.val().cqn;
                self.qc.d.next = self.cqn_ram.rdata.val();
                // the record, for the ring or an error completion (the QP is not hot: nothing else is in `rec`)
                self.rec.d.next = self.l_irec.val();
                if self.iss.val().rewind {
                    // the rewind's marker: the records after it are the WQEs sent again from the head on; the
                    // head's own record stays (its READ progress with it), the later ones are dropped
                    self.iss_ready.next = true;
                    if self.qst.rdata.val().retrying {
                        self.s.d.next.retrying = false;
                        self.s.d.next.skip_head = true;
                        self.s.d.next.tail = self.qst.rdata.val().head + self.k1_7.val();
                    }
                    self.state.d.next = CompState::Done;
                } else if self.qst.rdata.val().retrying {
                    // issued before the rewind (sent again after it)
                    self.iss_ready.next = true;
                    self.state.d.next = CompState::Done;
                } else if self.qst.rdata.val().skip_head {
                    // the head WQE sent again: its record is already at the head
                    self.iss_ready.next = true;
                    self.s.d.next.skip_head = false;
                    self.state.d.next = CompState::Done;
                    if self.iss.val().status != self.k0_8.val() {
                        // ... unless it failed its local checks when read again (its MR deregistered since it
                        // was first sent): nothing of it is on its way any more, so it completes now with that
                        // status and the QP goes to error (rxe COMPST_ERROR), rather than waiting for
                        // responses that cannot come
                        self.s.d.next.err = true;
                        self.fb.qerr_set.next = true;
                        self.resp.d.next = false;
                        self.state.d.next = CompState::HeadEval;
                    }
                } else if self.l_full.val() {
                    // the QP's list is full: the record waits; a response goes first if one is there
                    self.state.d.next = CompState::Idle;
                } else {
                    self.iss_ready.next = true;
                    self.i_first.d.next = self.iss.val().first_psn;
                    self.state.d.next = CompState::IWr;
                }
            }
            CompState::IWr => {
                self.ring.we.next = true;
                self.s.d.next.tail = self.s.q.val().tail + self.k1_7.val();
                self.resp.d.next = false;
                if self.s.q.val().head == self.s.q.val().tail {
                    // first record of an empty list: everything before it is acknowledged; the timer starts
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.i_hint.d.next = self.s.q.val().comp_psn;
                    self.s.d.next.comp_psn = self.i_first.q.val();
                    self.s.d.next.reading = false;
                    self.s.d.next.rd = self.k0_32.val();
                    self.state.d.next = CompState::IHint;
                } else {
                    self.state.d.next = CompState::Done;
                }
            }
            CompState::IHint => {
                // The Requester reports a WQE after its last packet, so the ACKs of its first packets can come
                // while its QP's list is empty: `comp_psn` keeps the latest such ACK (HeadRd). If that lies
                // inside this SEND/WRITE, its packets up to there are acknowledged (rxe's completer knows the
                // WQE before it is sent and would have advanced comp.psn): start from there, so the QP's
                // unacked-PSN window and a go-back-N's resume point count them. Not for a READ or atomic,
                // whose responses are still to come from its first PSN.
                if self.hint_lo.gt.val() & self.hint_hi.neg.val() & !self.c_rd_at.val() {
                    self.s.d.next.comp_psn = self.i_hint.q.val();
                }
                self.state.d.next = CompState::HeadRd;
                // A PSN-sequence NAK came before this record (NHint): the go-back-N it asked for starts now,
                // from its PSN inside this WQE (or the WQE's first PSN), as rxe's completer would have started
                // it on the NAK. Not for a record that failed its local checks, nor a QP in error.
                self.s.d.next.nak_hint = false;
                if self.s.q.val().nak_hint & (self.rec.q.val().status == self.k0_8.val()) & !self.s.q.val().err {
                    self.rt_rnr.d.next = false;
                    self.state.d.next = CompState::Rt0;
                }
            }
            CompState::NWait => {
                // the NAK's PSN against comp_psn (PsnCmp: two cycles after HeadRd)
                self.state.d.next = CompState::NHint;
            }
            CompState::NHint => {
                // A PSN-sequence NAK with nothing pending: the Requester is still sending the WQE it is about (its
                // record comes after its last packet). Everything before the NAK's PSN is acknowledged, so it
                // becomes comp_psn (the QP's window moves on), and the go-back-N waits for the record (IHint).
                // A NAK older than comp_psn is stale: dropped.
                if self.ri.comp_neg.val() {
                    self.cnt[3].inc.next = true;
                } else {
                    self.s.d.next.comp_psn = self.ri.psn.val();
                    self.s.d.next.nak_hint = true;
                }
                self.resp.d.next = false;
                self.state.d.next = CompState::Done;
            }
            CompState::RQst => {
                self.s.d.next = self.qst.rdata.val();
                self.cqn.d.next = self.cqn_ram.rdata.val().cqn;
                self.qc.d.next = self.cqn_ram.rdata.val();
                if self.ri.is_ack.val() {
                    self.cnt[0].inc.next = self.ri.sy_ack.val();
                    self.cnt[1].inc.next = self.ri.sy_nak.val();
                    self.cnt[2].inc.next = self.ri.sy_rnr.val();
                }
                self.rp.restart.next = true;
                if self.rp.fast.val() {
                    // an in-order MIDDLE or LAST of the hot QP's READ that fits: the outcome is known
                    self.s_cmd.valid.next = true;
                    if self.s_cmd.ready.val() {
                        self.pl.fwd.next = true;
                        self.paypend.d.next = false;
                        self.state.d.next = CompState::FEnd;
                    } else {
                        self.state.d.next = CompState::FCmd;
                    }
                } else if self.qst.rdata.val().retrying {
                    // a rewind is on its way: the responses of what is sent again will tell
                    self.rp.cool.next = true;
                    self.cnt[3].inc.next = true;
                    self.state.d.next = CompState::Done;
                } else if self.l_fdrop.val() {
                    // dropped in 4 cycles instead of the rules' 10: after a loss the peer may still be sending
                    // many MiB of responses that can only be dropped, at a line-rate pace the general path
                    // cannot keep (one MTU-256 response every 8.7 cycles at 100 Gb/s)
                    self.rp.cool.next = true;
                    self.cnt[3].inc.next = true;
                    self.state.d.next = CompState::FDrop;
                } else {
                    self.rp.cool.next = true;
                    self.state.d.next = CompState::HeadRd;
                }
            }
            CompState::TRd => {
                self.s.d.next = self.qst.rdata.val();
                self.cqn.d.next = self.cqn_ram.rdata.val().cqn;
                self.qc.d.next = self.cqn_ram.rdata.val();
                self.tm.load.next = true;
                self.state.d.next = CompState::TmChk;
            }
            CompState::TmChk => {
                self.state.d.next = CompState::TmChk2;
            }
            CompState::TmChk2 => {
                self.state.d.next = CompState::TmChk3;
            }
            CompState::TmChk3 => {
                // still armed and expired by this copy (the event machine may have re-armed it since the scan)
                self.state.d.next = CompState::Done;
                if !self.tm.t_armed.val() | self.s.q.val().retrying | self.s.q.val().err {
                    self.state.d.next = CompState::Done;
                } else if self.s.q.val().head == self.s.q.val().tail {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = false;
                } else if self.tm.due.val() {
                    self.rt_rnr.d.next = self.tm.t_rnr.val();
                    self.state.d.next = CompState::HeadRd;
                }
            }
            CompState::Rt0 => {
                // go-back-N from comp_psn: the head WQE is resumed after comp_psn - first_psn packets
                self.sk_lo.d.next = self.l_sk_lo.val();
                self.rp.cool.next = true;
                if !self.rt_rnr.q.val() & (self.s.q.val().rl == self.k0_3.val()) {
                    // retry_cnt exhausted
                    self.cstat.d.next = self.st_retry.val();
                    self.s.d.next.err = true;
                    self.fb.qerr_set.next = true;
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else {
                    if !self.rt_rnr.q.val() & (self.s.q.val().rl != self.k7_3.val()) {
                        self.s.d.next.rl = self.s.q.val().rl - self.k1_3.val();
                    }
                    self.cnt[7].inc.next = true;
                    self.cnt[8].inc.next = self.tmo.q.val() & !self.rt_rnr.q.val();
                    self.s.d.next.retrying = true;
                    self.s.d.next.started = true;
                    self.tm_rnr.d.next = false;
                    self.state.d.next = CompState::Rt1;
                }
            }
            CompState::Rt1 => {
                self.skip.d.next = (bit_cast::<24, 12>(self.l_sk_hi.val()) << 12)
                    | bit_cast::<24, 12>(self.sk_lo.q.val().get_bits::<12>(0));
                self.state.d.next = CompState::Rt2;
            }
            CompState::Rt2 => {
                self.state.d.next = CompState::RtOut;
            }
            CompState::RtOut => {
                self.fb.rw_push.next = !self.fb.rw_full.val();
                if !self.fb.rw_full.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.state.d.next = CompState::Done;
                }
            }
            CompState::FDrop => {
                // as Act does for a stale response or an implied NAK: an armed retransmit timer is pushed back
                // (rxe COMPST_EXIT), an RNR wait keeps its deadline (tmr_b was read for this QP in RQst)
                if self.tm.armed.val() & !self.tm.is_rnr.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                }
                self.state.d.next = CompState::Done;
            }
            CompState::AtCmd => {
                // one 8-byte Scatter command at the WQE's (translated) local address; its beat in the next
                // state (the Scatter Path's ready, which the DMA write grant drives, moves only the state)
                self.s_cmd.addr.next = self.rec.q.val().laddr;
                self.s_cmd.len.next = self.k8_13.val();
                self.s_cmd.valid.next = true;
                if self.s_cmd.ready.val() {
                    self.state.d.next = CompState::AtPush;
                }
            }
            CompState::AtPush => {
                if !self.pl.full.val() {
                    self.pl.at_push.next = true;
                    self.state.d.next = CompState::AtEnd;
                }
            }
            CompState::AtEnd => {
                // complete once the value has gone to the Scatter Path
                if self.pl.empty.val() {
                    self.s.d.next.comp_psn = self.ri.psn1.val();
                    self.cstat.d.next = self.k0_8.val();
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                }
            }
            CompState::RnrW => {
                // the RNR wait's deadline (3 cycles of the adder), then the timer
                self.tw.d.next = self.tw.q.val() + self.k1_2.val();
                if self.tw.q.val() == self.k3_2.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.state.d.next = CompState::Done;
                }
            }
            CompState::FCmd => {
                self.s_cmd.valid.next = true;
                if self.s_cmd.ready.val() {
                    self.pl.fwd.next = true;
                    self.paypend.d.next = false;
                    self.state.d.next = CompState::FEnd;
                }
            }
            CompState::FEnd => {
                // the sums are there: the response's effect on the QP state (as RdDec, RdEnd and Done)
                if self.rp.sums.val() {
                    self.rp.adv.next = true;
                    self.s.d.next.comp_psn = self.ri.psn1.val();
                    self.s.d.next.rd = self.rp.rd_fast.val();
                    // progress: the timer starts over
                    self.tm.we_fresh.next = true;
                    self.qst.wdata.next.started = false;
                    self.s.d.next.started = false;
                    if self.ri.is_last.val() {
                        self.rp.cool.next = true;
                        self.state.d.next = CompState::RdEnd;
                    } else {
                        self.qst.we.next = true;
                        self.qst.wdata.next.comp_psn = self.ri.psn1.val();
                        self.qst.wdata.next.rd = self.rp.rd_fast.val();
                        self.state.d.next = CompState::Idle;
                    }
                }
            }
            CompState::HeadRd => {
                if (self.s.q.val().head == self.s.q.val().tail)
                    & self.resp.q.val()
                    & self.ri.is_ack.val()
                    & self.ri.sy_nak.val()
                    & (self.ri.syn.val() == self.syn_seq.val())
                    & !self.s.q.val().err
                {
                    self.state.d.next = CompState::NWait;
                } else if self.s.q.val().head == self.s.q.val().tail {
                    if self.resp.q.val() {
                        // no pending WQE
                        self.cnt[3].inc.next = true;
                        // an ACK with nothing pending here: its PSN + 1 is kept as comp_psn (Done: PSN + 1 is
                        // there a cycle later) for the record of the WQE it acknowledges a part of, which comes
                        // after that WQE's last packet (IHint)
                        self.a_hint.d.next = self.ri.is_ack.val() & self.ri.sy_ack.val();
                    }
                    self.resp.d.next = false;
                    self.state.d.next = CompState::Done;
                } else {
                    self.state.d.next = CompState::HeadWait;
                }
            }
            CompState::HeadWait => {
                self.rec.d.next = self.ring.rdata.val();
                self.state.d.next = CompState::HeadEval;
            }
            CompState::HeadEval => {
                self.s.d.next.hra = self.l_cls.val().get_bit(11);
                if self.s.q.val().err | (self.rec.q.val().status != self.k0_8.val()) {
                    // a record that was never sent, or a QP in error: complete it now
                    self.cstat.d.next = self.rec.q.val().status;
                    if self.rec.q.val().status == self.k0_8.val() {
                        self.cstat.d.next = self.st_flush.val();
                    }
                    self.state.d.next = CompState::CqLoad;
                } else if self.l_cls.val().get_bit(12) {
                    // a local operation (LOCAL_INV, BIND_MW): done by WQE Check, nothing was sent, nothing answers; it
                    // completes at the head, in order (rxe `get_wqe`: `wqe_state_done`); a response being
                    // processed goes on to the next WQE
                    self.cstat.d.next = self.k0_8.val();
                    self.state.d.next = CompState::CqLoad;
                } else if self.qc.q.val().uc {
                    // UC: nothing answers; the WQE was sent whole, so it completes now (rxe: on transmit)
                    self.cstat.d.next = self.k0_8.val();
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else if self.tmo.q.val() {
                    self.state.d.next = CompState::Rt0;
                } else if self.resp.q.val() {
                    self.state.d.next = CompState::Cmp0;
                } else {
                    self.state.d.next = CompState::Done;
                }
            }
            CompState::Cmp0 => {
                self.state.d.next = CompState::Eval;
            }
            CompState::Eval => {
                self.state.d.next = CompState::Act;
                self.act.d.next = self.a_ignore.val();
                if self.ri.last_gt.val() {
                    if self.c_rd_at.val() {
                        self.act.d.next = self.a_implied.val();
                    } else {
                        self.act.d.next = self.a_coalesce.val();
                    }
                } else if self.ri.comp_neg.val() {
                    if self.ri.last_eq.val() & self.ri.is_ack.val() & self.ri.sy_ack.val() & !self.c_rd_at.val() {
                        self.act.d.next = self.a_ack_last.val();
                    } else {
                        self.act.d.next = self.a_stale.val();
                    }
                } else if self.ri.comp_gt.val() & self.c_rd_at.val() {
                    self.act.d.next = self.a_stale.val();
                } else if self.l_badseq.val() {
                    self.act.d.next = self.a_bad.val();
                } else if self.l_rresp.val() {
                    if !self.c_read.val() | (!self.ri.is_mid.val() & !self.ri.sy_ack.val()) {
                        self.act.d.next = self.a_bad.val();
                    } else {
                        self.act.d.next = self.a_read.val();
                    }
                } else if self.ri.is_atack.val() {
                    if !self.c_atomic.val() | !self.ri.sy_ack.val() {
                        self.act.d.next = self.a_bad.val();
                    } else {
                        self.act.d.next = self.a_atomic.val();
                    }
                } else if self.ri.is_ack.val() {
                    if self.ri.sy_ack.val() {
                        if self.c_rd_at.val() {
                            self.act.d.next = self.a_stale.val();
                        } else if self.ri.last_eq.val() {
                            self.act.d.next = self.a_ack_comp.val();
                        } else {
                            self.act.d.next = self.a_ack_adv.val();
                        }
                    } else if self.ri.sy_res.val() {
                        self.act.d.next = self.a_bad.val();
                    } else if self.ri.sy_nak.val() {
                        self.act.d.next = self.a_nak.val();
                    } else if self.ri.sy_rnr.val() {
                        self.act.d.next = self.a_rnr.val();
                    }
                }
            }
            CompState::Act => {
                self.state.d.next = CompState::Done;
                self.cstat.d.next = self.k0_8.val();
                // rxe COMPST_EXIT: after any response, even one it drops, rxe pushes the retransmit timer back
                // while PSNs are outstanding; a requester draining the stale responses of a window it has just
                // sent again must not time out and send it all a third time. A stale response and an implied
                // NAK push an armed timer back here (the others are progress or end in a go-back-N, which arm it
                // anyway); an RNR wait keeps its own deadline. (qc and now have been stable since RQst.)
                if ((self.act.q.val() == self.a_stale.val()) | (self.act.q.val() == self.a_implied.val()))
                    & self.tm.armed.val()
                    & !self.tm.is_rnr.val()
                {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                }
                if self.act.q.val() == self.a_implied.val() {
                    // a response beyond a pending READ/atomic: its response was lost; go back (once)
                    self.cnt[5].inc.next = true;
                    if !self.s.q.val().started {
                        self.rt_rnr.d.next = false;
                        self.state.d.next = CompState::Rt0;
                    }
                } else if self.act.q.val() == self.a_nak.val() {
                    if self.ri.syn.val() == self.syn_seq.val() {
                        // PSN sequence error: everything before its PSN is acknowledged; go back from there
                        if self.ri.comp_gt.val() {
                            self.s.d.next.comp_psn = self.ri.psn.val();
                        }
                        if self.ri.comp_gt.val() | !self.s.q.val().started {
                            self.rt_rnr.d.next = false;
                            self.state.d.next = CompState::Rt0;
                        }
                    } else {
                        // NAK invalid request / remote access / remote operational (any other code): the head
                        // completes with its status and the QP goes to error
                        self.cstat.d.next = self.st_op.val();
                        if self.ri.syn.val() == self.syn_inv.val() {
                            self.cstat.d.next = self.st_inv.val();
                        }
                        if self.ri.syn.val() == self.syn_acc.val() {
                            self.cstat.d.next = self.st_acc.val();
                        }
                        self.s.d.next.err = true;
                        self.fb.qerr_set.next = true;
                        self.resp.d.next = false;
                        self.state.d.next = CompState::CqLoad;
                    }
                } else if self.act.q.val() == self.a_rnr.val() {
                    if self.s.q.val().nl == self.k0_3.val() {
                        self.cstat.d.next = self.st_rnr.val();
                        self.s.d.next.err = true;
                        self.fb.qerr_set.next = true;
                        self.resp.d.next = false;
                        self.state.d.next = CompState::CqLoad;
                    } else {
                        // wait the NAK's RNR time, then go back (rnr_retry counts down, 7 = infinite)
                        if self.s.q.val().nl != self.k7_3.val() {
                            self.s.d.next.nl = self.s.q.val().nl - self.k1_3.val();
                        }
                        self.tm_rnr.d.next = true;
                        // a PSN-sequence NAK for the packets behind the one RNR NAKed (rxe sends one) must not
                        // cut the wait short: counts as a go-back-N already started (rxe `wait_for_rnr_timer`)
                        self.s.d.next.started = true;
                        self.rnr_code.d.next = self.ri.syn.val().get_bits::<5>(0);
                        self.tw.d.next = self.k0_2.val();
                        self.state.d.next = CompState::RnrW;
                    }
                } else if self.act.q.val() == self.a_coalesce.val() {
                    if self.ri.next_gt.val() {
                        self.s.d.next.comp_psn = self.rec.q.val().next_psn;
                    }
                    self.state.d.next = CompState::CqLoad;
                } else if self.act.q.val() == self.a_ack_last.val() {
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else if self.act.q.val() == self.a_stale.val() {
                    self.cnt[3].inc.next = true;
                } else if self.act.q.val() == self.a_bad.val() {
                    self.cnt[4].inc.next = true;
                    self.cstat.d.next = self.st_bad.val();
                    self.s.d.next.err = true;
                    self.fb.qerr_set.next = true;
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else if self.act.q.val() == self.a_read.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.s.d.next.started = false;
                    // the sums are there: their inputs (the head record, s_rd, h_plen) have been stable since
                    // HeadEval, three cycles ago
                    self.state.d.next = CompState::RdChk;
                } else if self.act.q.val() == self.a_atomic.val() {
                    // the original value goes to the local buffer, then the atomic completes
                    self.cnt[6].inc.next = true;
                    self.state.d.next = CompState::AtCmd;
                } else if self.act.q.val() == self.a_ack_adv.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.s.d.next.started = false;
                    self.s.d.next.comp_psn = self.ri.psn1.val();
                } else if self.act.q.val() == self.a_ack_comp.val() {
                    self.s.d.next.comp_psn = self.ri.psn1.val();
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                }
            }
            CompState::RdChk => {
                // payload beyond the WQE length: pay_len > len - received
                self.over.d.next = self.rp.too_long.val();
                self.rp.load.next = true;
                self.state.d.next = CompState::RdDec;
            }
            CompState::RdDec => {
                self.rp.restart.next = true;
                if self.over.q.val() {
                    self.cstat.d.next = self.st_len.val();
                    self.s.d.next.err = true;
                    self.fb.qerr_set.next = true;
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else {
                    self.s.d.next.rd = self.rp.rd_next.val();
                    self.s.d.next.comp_psn = self.ri.psn1.val();
                    if self.paypend.q.val() {
                        self.state.d.next = CompState::SCmd;
                    } else {
                        self.state.d.next = CompState::RdEnd;
                    }
                }
            }
            CompState::SCmd => {
                self.s_cmd.valid.next = true;
                if self.s_cmd.ready.val() {
                    self.pl.fwd.next = true;
                    self.paypend.d.next = false;
                    self.state.d.next = CompState::RdEnd;
                }
            }
            CompState::RdEnd => {
                if self.ri.is_last.val() | self.ri.is_only.val() {
                    // complete once the payload has gone to the Scatter Path
                    if !self.pl.fwd_on.val() & self.pl.empty.val() {
                        self.s.d.next.reading = false;
                        self.cstat.d.next = self.k0_8.val();
                        self.resp.d.next = false;
                        self.state.d.next = CompState::CqLoad;
                    }
                } else if self.rp.sums.val() {
                    // the QP is hot now: its next response may take the fast path
                    self.s.d.next.reading = true;
                    self.rp.adv.next = true;
                    self.rp.heat.next = true;
                    self.state.d.next = CompState::Done;
                }
            }
            CompState::CqLoad => {
                self.cqe.load.next = true;
                self.state.d.next = CompState::CqEmit;
            }
            CompState::CqEmit => {
                if !self.cqe.valid.val() | self.cq.ready.val() {
                    self.cqe.clear.next = true;
                    // retire the head; progress restarts the timer (and a success the retry counters)
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.s.d.next.started = false;
                    if self.cstat.q.val() == self.k0_8.val() {
                        self.s.d.next.rl = self.qc.q.val().retry_cnt;
                        self.s.d.next.nl = self.qc.q.val().rnr_retry;
                    }
                    self.s.d.next.head = self.s.q.val().head + self.k1_7.val();
                    if self.c_rd_at.val() {
                        // a READ/atomic retired: WQE Check may send another
                        self.s.d.next.fin = self.s.q.val().fin + self.k1_8.val();
                    }
                    self.s.d.next.rd = self.k0_32.val();
                    self.s.d.next.reading = false;
                    self.state.d.next = CompState::HeadRd;
                    if self.more.q.val() {
                        // (the state word has not changed since CqLoad) a record behind it: read it now, as
                        // HeadRd would with the new head
                        self.ring.raddr.next = (bit_cast::<14, 8>(self.l_qpn8.val()) << 6) | bit_cast::<14, 6>(self.hn.q.val().get_bits::<6>(0));
                        self.state.d.next = CompState::HeadWait;
                    }
                }
            }
            CompState::Done => {
                self.qst.we.next = true;
                if self.a_hint.q.val() {
                    self.qst.wdata.next.comp_psn = self.ri.psn1.val();
                }
                self.a_hint.d.next = false;
                if self.tm_set.q.val() {
                    self.tm.we.next = true;
                }
                self.tm_set.d.next = false;
                self.tm_rnr.d.next = false;
                self.tmo.d.next = false;
                if self.paypend.q.val() {
                    self.pl.drop.next = true;
                    self.paypend.d.next = false;
                }
                self.state.d.next = CompState::Idle;
            }
        }
        // every state word write, as the RAM takes it (comp_psn may change with any of them): the window
        self.fb.st_we.next = self.qst.we.val();
        self.fb.st_qpn.next = self.qst.waddr.val();
        self.fb.st_comp.next = self.qst.wdata.val().comp_psn;
        self.fb.st_busy.next = self.qst.wdata.val().head != self.qst.wdata.val().tail;
        self.fb.st_fin.next = self.qst.wdata.val().fin;
    }
}

#[cfg(test)]
mod tests;
