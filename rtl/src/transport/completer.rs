//! Completer (rxe `rxe_comp.c` `rxe_completer`, as `testbench::model::completer` implements it): the WQEs
//! the requester is done with ([`ReqIssued`], `iss_*`) wait in a per-QP list until their responses
//! (`hdr_*` + `pay`: RC ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, RDMA READ RESPONSE FIRST/MIDDLE/LAST/ONLY) retire
//! them; completions go to CQE Generation (`cq_*`, formed as the golden `send_cqe`), read-response payload
//! to the Scatter Path (`s_*`, `s_pay`).
//!
//! **State.** Per QP (256, index = QPN[7:0]): a ring of 16 ([`COMP_RING`]) pending records in block RAM (`ring`, address
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
//! **A QP whose list holds 16 records back-pressures `iss_ready`** (the record waits; responses keep being
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
//! reaches the head of its list, in order. The head WQE's own record after a go-back-N rewind is dropped (its
//! record is already at the head), unless WQE Check failed it this time (its MR deregistered since it was
//! first sent): then it completes with that status and the QP goes to error, as rxe. Only signaled WQEs and
//! errors produce a completion.
//!
//! **ATOMIC ACKNOWLEDGE** (an ACK syndrome, for a pending atomic at its PSN): the original value (AtomicAckETH,
//! big-endian on the wire) goes to the WQE's local buffer in host byte order, one 8-byte Scatter command, then
//! the atomic completes with its WC opcode (COMP_SWAP / FETCH_ADD). NAKs, RNR NAKs, implied NAKs and the
//! retransmit timer: go-back-N, see `docs/architecture.md`.
//!
//! **Retransmit timer** for every QP without a counter per QP: one free-running unit clock (`now`, 4.096 us
//! = [`TIMER_TICK`] cycles) and per QP a deadline (24 bits, compared modulo 2^24) and an armed bit in block
//! RAM, twice: a scanner reads one QP's copy per cycle and reports an expired one, and the event machine
//! checks its own copy again before acting. While the last report has not been taken the scanner scans again
//! from that QP, so it never passes an expired timer by. `timeout` t gives 2^t units (0: none; above
//! [`TIMEOUT_LOG2_MAX`] it acts as 22, 17 s); an RNR NAK sets the deadline to the NAK's wait instead.
//!
//! **Timing** (322 MHz, at most 6 LUT6 levels; the gate measures 5): one event at a time by a state machine.
//! PSN compares mod 2^24 as rxe `psn_compare` in two registered stages ([`PsnCmp`], as `psn_check.rs`: narrow
//! chunk compares, then the borrow); `PSN + 1` in two 12-bit halves; the 64-bit address and the 32-bit byte
//! counts by pipelined adders ([`PipeAdd64`], 3 cycles, which pass while the PSNs are compared).
//!
//! **Fast path.** After a read response that leaves its READ at the head unfinished, the QP is *hot*: its
//! state stays in the registers (head record, `comp_psn`, bytes received) together with the next response's
//! address (`nx_addr` = laddr + bytes received) and the room left (`room` = len - bytes received), and the
//! state is written back to `qst` after every event. The checks of the header on offer are registered while it
//! is taken: same QP, PSN = `comp_psn`, PSN ≠ the READ's next PSN, payload ≤ room. The cycle after, an
//! in-order MIDDLE, or LAST with an ACK AETH, with payload, whose checks all pass has the outcome the rules
//! give (a_read, no LOC_LEN_ERR), so its scatter command goes out at once; `nx_addr + len`, `room - len` and
//! `received + len` come from three pipelined adders ([`PipeAdd64`], 3 cycles) and `comp_psn` becomes PSN + 1
//! four cycles after the header was taken. Every other response (FIRST, ONLY, ACKs, stale, duplicates,
//! another QP, a timeout or a CMD_WRITE_QP in between) clears *hot* and takes the general path, which makes
//! the QP hot again after a MIDDLE (or FIRST) it accepts.
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
//! **Payload.** A taken header's payload goes into a 16-beat payload FIFO (forwarded) or is dropped, and the
//! FIFO feeds the Scatter Path, so the next header can be taken while the Scatter Path still plans (3 cycles)
//! and writes this one; a LAST or ONLY completes once its payload has left the FIFO. A header is taken only
//! when the previous header's payload has all come in (as the top hands them on anyway).
//! **Rate** (measured by `completer_keeps_up_with_read_responses_at_line_rate`, headers handed on as RX Parse
//! and the top do, sinks always ready): a MIDDLE read response takes its payload beats + 2 cycles: 6 / 18 / 66
//! cycles at path MTU 256 / 1024 / 4096 (the 100G wire brings one every 8.7 / 28.5 / 107.7 cycles; before
//! the fast path and the payload FIFO: 26 / 38 / 86); at least 5 cycles for a short one. On the general path an ACK or dropped
//! response takes about 10 cycles, plus 4 per WQE it completes (plus the completion handshake); a FIRST,
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
use crate::common::bytemap::ByteMap;
use crate::common::consts::k;
use crate::common::counter::EventCounter;
use crate::common::fifo::{Fifo, SdpRam};
use crate::transport::key_cache::PipeAdd64;
use crate::common::lut::Lut8;
use crate::host::req_front::ReqIssued;
use crate::wire::rx_parse::RxHeader;
use rnic_driver::host::{wc_opcode_code, wc_status_code, wr_opcode_of};
use testbench::model::{WcFlags, WcOpcode, WcStatus};
use testbench::wire::headers::{AETH_TYPE_ACK, AETH_TYPE_MASK, AETH_TYPE_NAK, AETH_TYPE_RESERVED, AETH_TYPE_RNR_NAK};
use testbench::wire::opcode::{
    RC_ACKNOWLEDGE, RC_ATOMIC_ACKNOWLEDGE, RC_RDMA_READ_RESPONSE_FIRST, RC_RDMA_READ_RESPONSE_LAST,
    RC_RDMA_READ_RESPONSE_MIDDLE, RC_RDMA_READ_RESPONSE_ONLY,
};

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

/// Core cycles per timer unit: 4.096 us at 322.265625 MHz (the IBA local ACK timeout's unit).
pub const TIMER_TICK: u64 = 1320;
/// Longest retransmit period, log2 of timer units: deadlines compare modulo 2^24 (rxe `psn_compare` style), so
/// a period must stay below 2^23 units; timeouts 23..31 (34 s and more) act as 22 (17 s).
pub const TIMEOUT_LOG2_MAX: u64 = 22;

/// `per[timeout]`: the retransmit period in timer units (0: no timer).
pub fn timeout_units_table() -> Vec<u64> {
    (0..32u64).map(|t| if t == 0 { 0 } else { 1 << t.min(TIMEOUT_LOG2_MAX) }).collect()
}

/// `rnr[code]`: the RNR NAK wait in timer units, rounded up (the IBA table, as rxe `rnrnak_usec`).
pub fn rnr_units_table() -> Vec<u64> {
    (0..32usize)
        .map(|c| {
            let us = u64::from(testbench::wire::headers::RNR_TIMER_USEC[c]);
            ((us * 1000).div_ceil(4096)).max(1)
        })
        .collect()
}

/// A QP's completer configuration (CMD_WRITE_QP): its send CQ and its retry attributes.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CompCfg {
    pub cqn: Bits<24>,
    pub timeout: Bits<5>,
    pub retry_cnt: Bits<3>,
    pub rnr_retry: Bits<3>,
}

/// A rewind on its way to WQE Check.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct RwCmd {
    pub qpn: Bits<8>,
    pub idx: Bits<16>,
    pub psn: Bits<24>,
    pub skip: Bits<24>,
}

/// A QP's timer: armed, waiting out an RNR NAK (else the retransmit timer), and its deadline in timer units.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CompTmr {
    pub armed: Bit,
    pub rnr: Bit,
    pub dl: Bits<24>,
}

/// Pending records per QP (ring slots).
pub const COMP_RING: usize = 16;

/// The WR opcode table: bits 7:0 the WC opcode (`WcOpcode::from_wr`), bit 8 WITH_IMM, bit 9 READ, bit 10
/// atomic, bit 11 READ or atomic.
pub fn wr_class_table() -> Vec<u64> {
    (0..256u32)
        .map(|c| match wr_opcode_of(c as u8) {
            Some(op) => {
                wc_opcode_code(WcOpcode::from_wr(op)) as u64
                    | (op.has_imm() as u64) << 8
                    | (op.is_read() as u64) << 9
                    | (op.is_atomic() as u64) << 10
                    | (op.is_read_or_atomic() as u64) << 11
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
    pub head: Bits<5>,
    pub tail: Bits<5>,
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

/// A payload beat in the Completer's payload FIFO.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct PayBeat {
    pub data: Bits<512>,
    pub keep: Bits<64>,
    pub last: Bit,
}

/// rxe `psn_compare(a, b)` in two registered stages: `neg` (< 0), `eq`, `gt` (> 0) two clocks after `a`, `b`.
#[derive(LogicBlock)]
pub struct PsnCmp {
    pub clock: Signal<In, Clock>,
    pub a: Signal<In, Bits<24>>,
    pub b: Signal<In, Bits<24>>,
    pub neg: Signal<Out, Bit>,
    pub eq: Signal<Out, Bit>,
    pub gt: Signal<Out, Bit>,
    s_eq: DFF<Bit>,
    s_x23: DFF<Bit>,
    s_lt0: DFF<Bit>,
    s_lt1: DFF<Bit>,
    s_eq1: DFF<Bit>,
    s_lt2: DFF<Bit>,
    s_eq2: DFF<Bit>,
    o_neg: DFF<Bit>,
    o_eq: DFF<Bit>,
    o_gt: DFF<Bit>,
    lt: Signal<Local, Bit>,
    sign: Signal<Local, Bit>,
}

impl Default for PsnCmp {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            a: Default::default(),
            b: Default::default(),
            neg: Default::default(),
            eq: Default::default(),
            gt: Default::default(),
            s_eq: Default::default(),
            s_x23: Default::default(),
            s_lt0: Default::default(),
            s_lt1: Default::default(),
            s_eq1: Default::default(),
            s_lt2: Default::default(),
            s_eq2: Default::default(),
            o_neg: Default::default(),
            o_eq: Default::default(),
            o_gt: Default::default(),
            lt: Default::default(),
            sign: Default::default(),
        }
    }
}

impl Logic for PsnCmp {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, s_eq, s_x23, s_lt0, s_lt1, s_eq1, s_lt2, s_eq2, o_neg, o_eq, o_gt);
        self.s_eq.d.next = self.a.val() == self.b.val();
        self.s_x23.d.next = self.a.val().get_bit(23) ^ self.b.val().get_bit(23);
        self.s_lt0.d.next = self.a.val().get_bits::<8>(0) < self.b.val().get_bits::<8>(0);
        self.s_lt1.d.next = self.a.val().get_bits::<8>(8) < self.b.val().get_bits::<8>(8);
        self.s_eq1.d.next = self.a.val().get_bits::<8>(8) == self.b.val().get_bits::<8>(8);
        self.s_lt2.d.next = self.a.val().get_bits::<7>(16) < self.b.val().get_bits::<7>(16);
        self.s_eq2.d.next = self.a.val().get_bits::<7>(16) == self.b.val().get_bits::<7>(16);
        // bit 23 of a - b: the top bits' xor and the borrow out of bits 22:0
        self.lt.next = self.s_lt2.q.val() | (self.s_eq2.q.val() & (self.s_lt1.q.val() | (self.s_eq1.q.val() & self.s_lt0.q.val())));
        self.sign.next = self.s_x23.q.val() ^ self.lt.val();
        self.o_neg.d.next = self.sign.val();
        self.o_eq.d.next = self.s_eq.q.val();
        self.o_gt.d.next = !self.sign.val() & !self.s_eq.q.val();
        self.neg.next = self.o_neg.q.val();
        self.eq.next = self.o_eq.q.val();
        self.gt.next = self.o_gt.q.val();
    }
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum CompState {
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

/// The Completer (see the module documentation).
#[derive(LogicBlock)]
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
    pub s_valid: Signal<Out, Bit>,
    pub s_ready: Signal<In, Bit>,
    pub s_addr: Signal<Out, Bits<64>>,
    pub s_len: Signal<Out, Bits<13>>,
    pub s_pay: AxisSource,
    /// Completions to CQE Generation.
    pub cq_valid: Signal<Out, Bit>,
    pub cq_ready: Signal<In, Bit>,
    pub cq_cqn: Signal<Out, Bits<24>>,
    pub cq_wr_id: Signal<Out, Bits<64>>,
    pub cq_byte_len: Signal<Out, Bits<32>>,
    pub cq_imm: Signal<Out, Bits<32>>,
    pub cq_qp_num: Signal<Out, Bits<24>>,
    pub cq_src_qp: Signal<Out, Bits<24>>,
    pub cq_status: Signal<Out, Bits<8>>,
    pub cq_opcode: Signal<Out, Bits<8>>,
    pub cq_wc_flags: Signal<Out, Bits<8>>,
    /// Event counters, indexed by the `CNT_*` constants.
    pub counters: [Signal<Out, Bits<32>>; COMP_COUNTERS],

    ring: SdpRam<Pend, 12>,
    qst: SdpRam<CompSt, 8>,
    cqn_ram: SdpRam<CompCfg, 8>,
    /// The timers, twice: one copy for the scanner, one for the event machine (same writes).
    tmr_a: SdpRam<CompTmr, 8>,
    tmr_b: SdpRam<CompTmr, 8>,
    per_lut: Lut8<24>,
    rnr_lut: Lut8<24>,
    pa_tm: PipeAdd64,
    cmp_scan: PsnCmp,
    cmp_tm: PsnCmp,
    /// Rewinds waiting for WQE Check: one place per QP (a QP has at most one rewind out, until its marker),
    /// so the Completer never waits for WQE Check, which may itself be waiting for the Completer to take a
    /// record.
    rwq: Fifo<RwCmd, 8, 9>,
    /// The QP-to-error pulse and its QPN (the QPN of the cycle it was raised in).
    qerr: DFF<Bit>,
    qerr_q: DFF<Bits<8>>,
    /// The window's end on its way to WQE Check: the state word written (1), then comp_psn + 128 (2).
    w1_v: DFF<Bit>,
    w1_q: DFF<Bits<8>>,
    w1_p: DFF<Bits<24>>,
    w1_b: DFF<Bit>,
    w2_b: DFF<Bit>,
    w2_v: DFF<Bit>,
    w2_q: DFF<Bits<8>>,
    w2_l: DFF<Bits<24>>,
    w1_f: DFF<Bits<8>>,
    w2_f: DFF<Bits<8>>,
    /// The QP's retired READ/atomic count, with the other `s_*` state; the CMD_WRITE_QP taken was to RESET.
    s_fin: DFF<Bits<8>>,
    s_hra: DFF<Bit>,
    /// A read response that can only be dropped (see `FDrop`).
    l_fdrop: Signal<Local, Bit>,
    c_rst: DFF<Bit>,
    /// the table write being applied is a CMD_WRITE_QP_REQ, with this sq_psn
    c_req: DFF<Bit>,
    c_psn: DFF<Bits<24>>,
    k100_34: Constant<Bits<34>>,
    k200_34: Constant<Bits<34>>,
    k128_24: Constant<Bits<24>>,
    /// QP-table writes in order: {sq_psn 33:10, CMD_WRITE_QP_REQ 9, to RESET 8, QPN 7:0}
    cqwq: Fifo<Bits<34>, 4, 5>,
    cls_lut: Lut8<12>,
    cmp_last: PsnCmp,
    cmp_comp: PsnCmp,
    cmp_next: PsnCmp,
    /// The QP's `comp_psn` against the first record's first PSN and its next PSN, as the record is read in
    /// (`IRd`; results in `IHint`): an ACK that came before the record may already cover part of the WQE.
    hint_lo: PsnCmp,
    hint_hi: PsnCmp,
    add_addr: PipeAdd64,
    add_room: PipeAdd64,
    add_rd: PipeAdd64,
    pa_addr: PipeAdd64,
    pa_room: PipeAdd64,
    pa_rd: PipeAdd64,
    pf: Fifo<PayBeat, 4, 5>,
    /// An ATOMIC_ACKNOWLEDGE's original value in host (little-endian) byte order: AtomicAckETH bytes reversed.
    h_orig: DFF<Bits<64>>,
    orig_map: ByteMap<64, 64>,
    cnt: [EventCounter; COMP_COUNTERS],

    state: DFF<CompState>,
    prio: DFF<Bit>,
    qpn: DFF<Bits<24>>,
    cqn: DFF<Bits<24>>,
    qc: DFF<CompCfg>,
    // timers: the unit clock, the scanner, the event's timer
    tick: DFF<Bits<11>>,
    now: DFF<Bits<24>>,
    sc_q: DFF<Bits<8>>,
    t1_v: DFF<Bit>,
    t1_q: DFF<Bits<8>>,
    t2_v: DFF<Bit>,
    t2_q: DFF<Bits<8>>,
    t3_v: DFF<Bit>,
    t3_q: DFF<Bits<8>>,
    to_v: DFF<Bit>,
    to_q: DFF<Bits<8>>,
    tmo: DFF<Bit>,
    t_armed: DFF<Bit>,
    t_rnr: DFF<Bit>,
    t_dl: DFF<Bits<24>>,
    tm_set: DFF<Bit>,
    tm_arm: DFF<Bit>,
    tm_rnr: DFF<Bit>,
    rnr_code: DFF<Bits<5>>,
    tw: DFF<Bits<2>>,
    // go-back-N
    rt_rnr: DFF<Bit>,
    sk_lo: DFF<Bits<13>>,
    skip: DFF<Bits<24>>,
    h_syn: DFF<Bits<8>>,
    s_retrying: DFF<Bit>,
    s_skip: DFF<Bit>,
    s_started: DFF<Bit>,
    s_rl: DFF<Bits<3>>,
    s_nl: DFF<Bits<3>>,
    s_head: DFF<Bits<5>>,
    s_tail: DFF<Bits<5>>,
    s_comp: DFF<Bits<24>>,
    s_rd: DFF<Bits<32>>,
    s_reading: DFF<Bit>,
    s_err: DFF<Bit>,
    rec: DFF<Pend>,
    i_first: DFF<Bits<24>>,
    /// The QP's `comp_psn` before the first record of an empty list replaced it (see `IHint`).
    i_hint: DFF<Bits<24>>,
    /// An ACK found the QP's list empty: Done writes its PSN + 1 as `comp_psn`.
    a_hint: DFF<Bit>,
    /// The QP's `nak_hint`.
    s_nakh: DFF<Bit>,
    cls: DFF<Bits<12>>,
    resp: DFF<Bit>,
    paypend: DFF<Bit>,
    cstat: DFF<Bits<8>>,
    act: DFF<Bits<4>>,
    over: DFF<Bit>,
    // header
    h_psn: DFF<Bits<24>>,
    h_plen: DFF<Bits<13>>,
    d_ackop: DFF<Bit>,
    d_first: DFF<Bit>,
    d_mid: DFF<Bit>,
    d_last: DFF<Bit>,
    d_only: DFF<Bit>,
    d_atack: DFF<Bit>,
    sy_ack: DFF<Bit>,
    sy_rnr: DFF<Bit>,
    sy_nak: DFF<Bit>,
    sy_res: DFF<Bit>,
    inc_lo: DFF<Bits<12>>,
    inc_c: DFF<Bit>,
    psn1: DFF<Bits<24>>,
    // completion out
    o_valid: DFF<Bit>,
    o_cqn: DFF<Bits<24>>,
    o_wr_id: DFF<Bits<64>>,
    o_len: DFF<Bits<32>>,
    o_imm: DFF<Bits<32>>,
    o_qpn: DFF<Bits<24>>,
    o_status: DFF<Bits<8>>,
    o_opcode: DFF<Bits<8>>,
    o_flags: DFF<Bits<8>>,
    // the fast path: the hot QP's next read response
    hot: DFF<Bit>,
    nx_addr: DFF<Bits<64>>,
    room: DFF<Bits<32>>,
    room_big: DFF<Bit>,
    fc: DFF<Bits<2>>,
    f_same: DFF<Bit>,
    f_psn: DFF<Bit>,
    f_end: DFF<Bit>,
    f_fit: DFF<Bit>,
    // the payload of the last header taken: forwarded into the payload FIFO, or dropped
    pin_fwd: DFF<Bit>,
    pin_drop: DFF<Bit>,

    l_fast: Signal<Local, Bit>,
    l_adv: Signal<Local, Bit>,
    l_pin: Signal<Local, Bit>,
    l_take: Signal<Local, Bit>,
    l_qpn8: Signal<Local, Bits<8>>,
    l_head: Signal<Local, Bits<5>>,
    l_tail: Signal<Local, Bits<5>>,
    l_xtail: Signal<Local, Bits<5>>,
    l_iqpn: Signal<Local, Bits<24>>,
    /// the record on offer (`iss`) as a ring entry
    l_irec: Signal<Local, Pend>,
    l_hqpn: Signal<Local, Bits<24>>,
    l_ext: Signal<Local, Bits<352>>,
    l_syn: Signal<Local, Bits<8>>,
    l_hop: Signal<Local, Bits<8>>,
    l_hpsn: Signal<Local, Bits<24>>,
    l_hi: Signal<Local, Bits<12>>,
    l_imm: Signal<Local, Bits<32>>,
    l_cls: Signal<Local, Bits<12>>,
    l_room: Signal<Local, Bits<64>>,
    l_rdsum: Signal<Local, Bits<64>>,
    l_full: Signal<Local, Bit>,
    l_rresp: Signal<Local, Bit>,
    l_badseq: Signal<Local, Bit>,
    c_rd_at: Signal<Local, Bit>,
    c_read: Signal<Local, Bit>,
    c_atomic: Signal<Local, Bit>,

    k0_2: Constant<Bits<2>>,
    k1_2: Constant<Bits<2>>,
    k3_2: Constant<Bits<2>>,
    k0_4: Constant<Bits<4>>,
    k1_5: Constant<Bits<5>>,
    k16_5: Constant<Bits<5>>,
    k0_8: Constant<Bits<8>>,
    k0_13: Constant<Bits<13>>,
    k8_13: Constant<Bits<13>>,
    kff_64: Constant<Bits<64>>,
    k0_19: Constant<Bits<19>>,
    k0_32: Constant<Bits<32>>,
    k0_3: Constant<Bits<3>>,
    k1_3: Constant<Bits<3>>,
    k7_3: Constant<Bits<3>>,
    k0_5: Constant<Bits<5>>,
    k1_8: Constant<Bits<8>>,
    k1_11: Constant<Bits<11>>,
    k0_11: Constant<Bits<11>>,
    k1_24: Constant<Bits<24>>,
    tick_last: Constant<Bits<11>>,
    syn_seq: Constant<Bits<8>>,
    syn_inv: Constant<Bits<8>>,
    syn_acc: Constant<Bits<8>>,
    st_retry: Constant<Bits<8>>,
    st_rnr: Constant<Bits<8>>,
    st_inv: Constant<Bits<8>>,
    st_acc: Constant<Bits<8>>,
    st_op: Constant<Bits<8>>,
    a_nak: Constant<Bits<4>>,
    a_rnr: Constant<Bits<4>>,
    k1_12: Constant<Bits<12>>,
    kfff_12: Constant<Bits<12>>,
    op_ack: Constant<Bits<8>>,
    op_atack: Constant<Bits<8>>,
    op_first: Constant<Bits<8>>,
    op_mid: Constant<Bits<8>>,
    op_last: Constant<Bits<8>>,
    op_only: Constant<Bits<8>>,
    sy_mask: Constant<Bits<8>>,
    sy_t_ack: Constant<Bits<8>>,
    sy_t_rnr: Constant<Bits<8>>,
    sy_t_nak: Constant<Bits<8>>,
    sy_t_res: Constant<Bits<8>>,
    st_flush: Constant<Bits<8>>,
    st_bad: Constant<Bits<8>>,
    st_len: Constant<Bits<8>>,
    f_imm: Constant<Bits<8>>,
    a_implied: Constant<Bits<4>>,
    a_coalesce: Constant<Bits<4>>,
    a_ack_last: Constant<Bits<4>>,
    a_stale: Constant<Bits<4>>,
    a_bad: Constant<Bits<4>>,
    a_read: Constant<Bits<4>>,
    a_atomic: Constant<Bits<4>>,
    a_ack_adv: Constant<Bits<4>>,
    a_ack_comp: Constant<Bits<4>>,
    a_ignore: Constant<Bits<4>>,
    l_tmr: Signal<Local, CompTmr>,
    l_tmr_armed: Signal<Local, Bit>,
    l_fpsn: Signal<Local, Bits<24>>,
    l_sk_lo: Signal<Local, Bits<13>>,
    l_sk_hi: Signal<Local, Bits<12>>,
    l_sk_b: Signal<Local, Bits<12>>,
}

impl Default for Completer {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            iss: Default::default(),
            iss_valid: Default::default(),
            iss_ready: Default::default(),
            hdr: Default::default(),
            hdr_ext_words: Default::default(),
            hdr_pay_len: Default::default(),
            hdr_valid: Default::default(),
            hdr_ready: Default::default(),
            pay: Default::default(),
            cqw_we: Default::default(),
            cqw_qpn: Default::default(),
            cqw_cqn: Default::default(),
            cqw_timeout: Default::default(),
            cqw_retry: Default::default(),
            cqw_rnr: Default::default(),
            cqw_reset: Default::default(),
            cqp_we: Default::default(),
            cqp_qpn: Default::default(),
            cqp_psn: Default::default(),
            rw_valid: Default::default(),
            rw_ready: Default::default(),
            qerr_valid: Default::default(),
            win_we: Default::default(),
            win_qpn: Default::default(),
            win_busy: Default::default(),
            win_lim: Default::default(),
            win_fin: Default::default(),
            qerr_qpn: Default::default(),
            rw_qpn: Default::default(),
            rw_idx: Default::default(),
            rw_psn: Default::default(),
            rw_skip: Default::default(),
            s_valid: Default::default(),
            s_ready: Default::default(),
            s_addr: Default::default(),
            s_len: Default::default(),
            s_pay: Default::default(),
            cq_valid: Default::default(),
            cq_ready: Default::default(),
            cq_cqn: Default::default(),
            cq_wr_id: Default::default(),
            cq_byte_len: Default::default(),
            cq_imm: Default::default(),
            cq_qp_num: Default::default(),
            cq_src_qp: Default::default(),
            cq_status: Default::default(),
            cq_opcode: Default::default(),
            cq_wc_flags: Default::default(),
            counters: Default::default(),
            ring: Default::default(),
            qst: Default::default(),
            cqn_ram: Default::default(),
            tmr_a: Default::default(),
            tmr_b: Default::default(),
            per_lut: Lut8::new(timeout_units_table()),
            rnr_lut: Lut8::new(rnr_units_table()),
            pa_tm: Default::default(),
            cmp_scan: Default::default(),
            cmp_tm: Default::default(),
            rwq: Default::default(),
            qerr: Default::default(),
            qerr_q: Default::default(),
            w1_v: Default::default(),
            w1_q: Default::default(),
            w1_p: Default::default(),
            w1_b: Default::default(),
            w2_b: Default::default(),
            w2_v: Default::default(),
            w2_q: Default::default(),
            w2_l: Default::default(),
            w1_f: Default::default(),
            w2_f: Default::default(),
            s_fin: Default::default(),
            s_hra: Default::default(),
            l_fdrop: Default::default(),
            c_rst: Default::default(),
            c_req: Default::default(),
            c_psn: Default::default(),
            k100_34: k(0x100),
            k200_34: k(0x200),
            k128_24: k(testbench::model::requester::RXE_MAX_UNACKED_PSNS as u64),
            cqwq: Default::default(),
            cls_lut: Lut8::new(wr_class_table()),
            cmp_last: Default::default(),
            cmp_comp: Default::default(),
            cmp_next: Default::default(),
            hint_lo: Default::default(),
            hint_hi: Default::default(),
            add_addr: Default::default(),
            add_room: Default::default(),
            add_rd: Default::default(),
            pa_addr: Default::default(),
            pa_room: Default::default(),
            pa_rd: Default::default(),
            pf: Default::default(),
            h_orig: Default::default(),
            orig_map: crate::transport::responder::swap64_map(),
            cnt: Default::default(),
            state: Default::default(),
            prio: Default::default(),
            qpn: Default::default(),
            cqn: Default::default(),
            qc: Default::default(),
            tick: Default::default(),
            now: Default::default(),
            sc_q: Default::default(),
            t1_v: Default::default(),
            t1_q: Default::default(),
            t2_v: Default::default(),
            t2_q: Default::default(),
            t3_v: Default::default(),
            t3_q: Default::default(),
            to_v: Default::default(),
            to_q: Default::default(),
            tmo: Default::default(),
            t_armed: Default::default(),
            t_rnr: Default::default(),
            t_dl: Default::default(),
            tm_set: Default::default(),
            tm_arm: Default::default(),
            tm_rnr: Default::default(),
            rnr_code: Default::default(),
            tw: Default::default(),
            rt_rnr: Default::default(),
            sk_lo: Default::default(),
            skip: Default::default(),
            h_syn: Default::default(),
            s_retrying: Default::default(),
            s_skip: Default::default(),
            s_started: Default::default(),
            s_rl: Default::default(),
            s_nl: Default::default(),
            s_head: Default::default(),
            s_tail: Default::default(),
            s_comp: Default::default(),
            s_rd: Default::default(),
            s_reading: Default::default(),
            s_err: Default::default(),
            rec: Default::default(),
            i_first: Default::default(),
            i_hint: Default::default(),
            a_hint: Default::default(),
            s_nakh: Default::default(),
            cls: Default::default(),
            resp: Default::default(),
            paypend: Default::default(),
            cstat: Default::default(),
            act: Default::default(),
            over: Default::default(),
            h_psn: Default::default(),
            h_plen: Default::default(),
            d_ackop: Default::default(),
            d_first: Default::default(),
            d_mid: Default::default(),
            d_last: Default::default(),
            d_only: Default::default(),
            d_atack: Default::default(),
            sy_ack: Default::default(),
            sy_rnr: Default::default(),
            sy_nak: Default::default(),
            sy_res: Default::default(),
            inc_lo: Default::default(),
            inc_c: Default::default(),
            psn1: Default::default(),
            o_valid: Default::default(),
            o_cqn: Default::default(),
            o_wr_id: Default::default(),
            o_len: Default::default(),
            o_imm: Default::default(),
            o_qpn: Default::default(),
            o_status: Default::default(),
            o_opcode: Default::default(),
            o_flags: Default::default(),
            hot: Default::default(),
            nx_addr: Default::default(),
            room: Default::default(),
            room_big: Default::default(),
            fc: Default::default(),
            f_same: Default::default(),
            f_psn: Default::default(),
            f_end: Default::default(),
            f_fit: Default::default(),
            pin_fwd: Default::default(),
            pin_drop: Default::default(),
            l_fast: Default::default(),
            l_adv: Default::default(),
            l_pin: Default::default(),
            l_take: Default::default(),
            l_qpn8: Default::default(),
            l_head: Default::default(),
            l_tail: Default::default(),
            l_xtail: Default::default(),
            l_iqpn: Default::default(),
            l_irec: Default::default(),
            l_hqpn: Default::default(),
            l_ext: Default::default(),
            l_syn: Default::default(),
            l_hop: Default::default(),
            l_hpsn: Default::default(),
            l_hi: Default::default(),
            l_imm: Default::default(),
            l_cls: Default::default(),
            l_room: Default::default(),
            l_rdsum: Default::default(),
            l_full: Default::default(),
            l_rresp: Default::default(),
            l_badseq: Default::default(),
            c_rd_at: Default::default(),
            c_read: Default::default(),
            c_atomic: Default::default(),
            k0_2: k(0),
            k1_2: k(1),
            k3_2: k(3),
            k0_4: k(0),
            k1_5: k(1),
            k16_5: k(16),
            k0_8: k(0),
            k0_13: k(0),
            k8_13: k(8),
            kff_64: k(0xFF),
            k0_19: k(0),
            k0_32: k(0),
            k0_3: k(0),
            k1_3: k(1),
            k7_3: k(7),
            k0_5: k(0),
            k1_8: k(1),
            k1_11: k(1),
            k0_11: k(0),
            k1_24: k(1),
            tick_last: k(TIMER_TICK - 1),
            syn_seq: k(0x60),
            syn_inv: k(0x61),
            syn_acc: k(0x62),
            st_retry: k(wc_status_code(WcStatus::RetryExcErr) as u64),
            st_rnr: k(wc_status_code(WcStatus::RnrRetryExcErr) as u64),
            st_inv: k(wc_status_code(WcStatus::RemInvReqErr) as u64),
            st_acc: k(wc_status_code(WcStatus::RemAccessErr) as u64),
            st_op: k(wc_status_code(WcStatus::RemOpErr) as u64),
            a_nak: k(10),
            a_rnr: k(11),
            k1_12: k(1),
            kfff_12: k(0xFFF),
            op_ack: k(RC_ACKNOWLEDGE as u64),
            op_atack: k(RC_ATOMIC_ACKNOWLEDGE as u64),
            op_first: k(RC_RDMA_READ_RESPONSE_FIRST as u64),
            op_mid: k(RC_RDMA_READ_RESPONSE_MIDDLE as u64),
            op_last: k(RC_RDMA_READ_RESPONSE_LAST as u64),
            op_only: k(RC_RDMA_READ_RESPONSE_ONLY as u64),
            sy_mask: k(AETH_TYPE_MASK as u64),
            sy_t_ack: k(AETH_TYPE_ACK as u64),
            sy_t_rnr: k(AETH_TYPE_RNR_NAK as u64),
            sy_t_nak: k(AETH_TYPE_NAK as u64),
            sy_t_res: k(AETH_TYPE_RESERVED as u64),
            st_flush: k(wc_status_code(WcStatus::WrFlushErr) as u64),
            st_bad: k(wc_status_code(WcStatus::BadRespErr) as u64),
            st_len: k(wc_status_code(WcStatus::LocLenErr) as u64),
            f_imm: k(WcFlags::WITH_IMM as u64),
            a_implied: k(0),
            a_coalesce: k(1),
            a_ack_last: k(2),
            a_stale: k(3),
            a_bad: k(4),
            a_read: k(5),
            a_atomic: k(6),
            a_ack_adv: k(7),
            a_ack_comp: k(8),
            a_ignore: k(9),
            l_tmr: Default::default(),
            l_tmr_armed: Default::default(),
            l_fpsn: Default::default(),
            l_sk_lo: Default::default(),
            l_sk_hi: Default::default(),
            l_sk_b: Default::default(),
        }
    }
}

impl Logic for Completer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, state, prio, qpn, cqn, s_head, s_tail, s_comp, s_rd, s_reading, s_err, rec, i_first, i_hint, a_hint, s_nakh, cls,
            resp, paypend, cstat, act, over, h_psn, h_plen, d_ackop, d_first, d_mid, d_last, d_only, d_atack, sy_ack,
            sy_rnr, sy_nak, sy_res, inc_lo, inc_c, psn1, o_valid, o_cqn, o_wr_id, o_len, o_imm, o_qpn,
            o_status, o_opcode, o_flags, hot, nx_addr, room, room_big, fc, f_same, f_psn, f_end, f_fit, pin_fwd,
            pin_drop, qc, tick, now, sc_q, t1_v, t1_q, t2_v, t2_q, t3_v, t3_q, to_v, to_q, tmo, t_armed, t_rnr, t_dl,
            tm_set, tm_arm, tm_rnr, rnr_code, tw, rt_rnr, sk_lo, skip, h_syn, s_retrying, s_skip, s_started, s_rl,
            s_nl, qerr, qerr_q, h_orig, w1_v, w1_q, w1_p, w1_b, w2_b, w2_v, w2_q, w2_l, w1_f, w2_f, s_fin, c_rst, c_req, c_psn, s_hra
        );
        clock!(
            self, clock, ring, qst, cqn_ram, cqwq, cmp_last, cmp_comp, cmp_next, hint_lo, hint_hi, add_addr, add_room, add_rd, pa_addr,
            pa_room, pa_rd, pf, tmr_a, tmr_b, pa_tm, cmp_scan, cmp_tm, rwq
        );
        for i in 0..9 {
            self.cnt[i].clock.next = self.clock.val();
            self.cnt[i].inc.next = false;
            self.counters[i].next = self.cnt[i].value.val();
        }

        // ---- defaults ----
        self.iss_ready.next = false;
        self.hdr_ready.next = false;
        self.s_valid.next = false;
        self.s_addr.next = self.nx_addr.q.val();
        self.s_len.next = self.h_plen.q.val();

        // ---- payload: the last header's payload into the payload FIFO (or dropped); the FIFO to the Scatter
        // Path, so that the next header is taken while the Scatter Path still plans and writes this one ----
        self.l_pin.next = self.pin_fwd.q.val() | self.pin_drop.q.val();
        self.pay.tready.next = (self.pin_fwd.q.val() & !self.pf.full.val()) | self.pin_drop.q.val();
        self.l_take.next = self.pay.tvalid.val() & ((self.pin_fwd.q.val() & !self.pf.full.val()) | self.pin_drop.q.val());
        self.pf.din.next.data = self.pay.tdata.val();
        self.pf.din.next.keep = self.pay.tkeep.val();
        self.pf.din.next.last = self.pay.tlast.val();
        self.pf.push.next = self.pin_fwd.q.val() & self.pay.tvalid.val();
        if self.l_take.val() & self.pay.tlast.val() {
            self.pin_fwd.d.next = false;
            self.pin_drop.d.next = false;
        }
        self.s_pay.tdata.next = self.pf.dout.val().data;
        self.s_pay.tkeep.next = self.pf.dout.val().keep;
        self.s_pay.tlast.next = self.pf.dout.val().last;
        self.s_pay.tvalid.next = !self.pf.empty.val();
        self.pf.pop.next = self.s_pay.tready.val();
        self.cq_valid.next = self.o_valid.q.val();
        self.cq_cqn.next = self.o_cqn.q.val();
        self.cq_wr_id.next = self.o_wr_id.q.val();
        self.cq_byte_len.next = self.o_len.q.val();
        self.cq_imm.next = self.o_imm.q.val();
        self.cq_qp_num.next = self.o_qpn.q.val();
        self.cq_src_qp.next = bit_cast::<24, 8>(self.k0_8.val());
        self.cq_status.next = self.o_status.q.val();
        self.cq_opcode.next = self.o_opcode.q.val();
        self.cq_wc_flags.next = self.o_flags.q.val();

        // QP table writes; a write also queues the clearing of the QP's error flag
        self.cqn_ram.we.next = self.cqw_we.val();
        self.cqn_ram.waddr.next = self.cqw_qpn.val().get_bits::<8>(0);
        self.cqn_ram.wdata.next.cqn = self.cqw_cqn.val();
        self.cqn_ram.wdata.next.timeout = self.cqw_timeout.val();
        self.cqn_ram.wdata.next.retry_cnt = self.cqw_retry.val();
        self.cqn_ram.wdata.next.rnr_retry = self.cqw_rnr.val();

        // ---- timers: `now` counts 4.096 us units; a scanner reads one QP's timer per cycle and reports an
        // expired one (the event machine checks it again against its own copy before acting) ----
        self.tick.d.next = self.tick.q.val() + self.k1_11.val();
        if self.tick.q.val() == self.tick_last.val() {
            self.tick.d.next = self.k0_11.val();
            self.now.d.next = self.now.q.val() + self.k1_24.val();
        }
        self.sc_q.d.next = self.sc_q.q.val() + self.k1_8.val();
        self.tmr_a.raddr.next = self.sc_q.q.val();
        self.t1_v.d.next = true;
        self.t1_q.d.next = self.sc_q.q.val();
        self.cmp_scan.a.next = self.now.q.val();
        self.cmp_scan.b.next = self.tmr_a.rdata.val().dl;
        self.t2_v.d.next = self.t1_v.q.val() & self.tmr_a.rdata.val().armed;
        self.t2_q.d.next = self.t1_q.q.val();
        self.t3_v.d.next = self.t2_v.q.val();
        self.t3_q.d.next = self.t2_q.q.val();
        if self.t3_v.q.val() & !self.cmp_scan.neg.val() {
            if !self.to_v.q.val() {
                self.to_v.d.next = true;
                self.to_q.d.next = self.t3_q.q.val();
            } else {
                // the event machine has not taken the last one: scan again from this QP (never skip an
                // expired timer: a scan locked in step with the event machine's busy cycles would pass the
                // same QPs by for ever, and their lost ACKs would never be retried)
                self.sc_q.d.next = self.t3_q.q.val();
                self.t1_v.d.next = false;
                self.t2_v.d.next = false;
                self.t3_v.d.next = false;
            }
        }
        // the event's own check: now >= deadline
        self.cmp_tm.a.next = self.now.q.val();
        self.cmp_tm.b.next = self.t_dl.q.val();
        // a new deadline: now + the QP's period (or the RNR wait), 3 cycles after the inputs settle
        self.per_lut.x.next = bit_cast::<8, 5>(self.qc.q.val().timeout);
        self.rnr_lut.x.next = bit_cast::<8, 5>(self.rnr_code.q.val());
        self.pa_tm.a.next = bit_cast::<64, 24>(self.now.q.val());
        self.pa_tm.b.next = bit_cast::<64, 24>(self.per_lut.y.val());
        if self.tm_rnr.q.val() {
            self.pa_tm.b.next = bit_cast::<64, 24>(self.rnr_lut.y.val());
        }
        self.pa_tm.cin.next = false;
        self.l_tmr_armed.next = (self.tm_rnr.q.val() | (self.qc.q.val().timeout != self.k0_5.val()))
            & (self.s_head.q.val() != self.s_tail.q.val());
        self.l_tmr.next.armed = self.tm_arm.q.val() & self.l_tmr_armed.val();
        self.l_tmr.next.rnr = self.tm_rnr.q.val();
        self.l_tmr.next.dl = self.pa_tm.sum.val().get_bits::<24>(0);
        self.tmr_a.we.next = false;
        self.tmr_a.waddr.next = self.qpn.q.val().get_bits::<8>(0);
        self.tmr_a.wdata.next = self.l_tmr.val();
        self.tmr_b.we.next = false;
        self.tmr_b.waddr.next = self.qpn.q.val().get_bits::<8>(0);
        self.tmr_b.wdata.next = self.l_tmr.val();
        self.tmr_b.raddr.next = self.qpn.q.val().get_bits::<8>(0);
        // go-back-N's skip = comp_psn - the head's first PSN, in two 12-bit halves (13-bit low with its borrow)
        self.l_fpsn.next = self.rec.q.val().first_psn;
        self.l_sk_lo.next = bit_cast::<13, 12>(self.s_comp.q.val().get_bits::<12>(0))
            - bit_cast::<13, 12>(self.l_fpsn.val().get_bits::<12>(0));
        self.l_sk_b.next = bit_cast::<12, 1>(self.sk_lo.q.val().get_bits::<1>(12));
        self.l_sk_hi.next = self.s_comp.q.val().get_bits::<12>(12) - self.l_fpsn.val().get_bits::<12>(12) - self.l_sk_b.val();
        // QP to error: a pulse to WQE Check
        self.qerr.d.next = false;
        self.qerr_q.d.next = self.qpn.q.val().get_bits::<8>(0);
        self.qerr_valid.next = self.qerr.q.val();
        self.qerr_qpn.next = self.qerr_q.q.val();
        self.w2_v.d.next = self.w1_v.q.val();
        self.w2_q.d.next = self.w1_q.q.val();
        self.w2_l.d.next = self.w1_p.q.val() + self.k128_24.val();
        self.w2_b.d.next = self.w1_b.q.val();
        self.win_busy.next = self.w2_b.q.val();
        self.win_we.next = self.w2_v.q.val();
        self.win_qpn.next = self.w2_q.q.val();
        self.win_lim.next = self.w2_l.q.val();
        self.w2_f.d.next = self.w1_f.q.val();
        self.win_fin.next = self.w2_f.q.val();
        // the rewinds out, through their queue
        self.rw_valid.next = !self.rwq.empty.val();
        self.rw_qpn.next = bit_cast::<24, 8>(self.rwq.dout.val().qpn);
        self.rw_idx.next = self.rwq.dout.val().idx;
        self.rw_psn.next = self.rwq.dout.val().psn;
        self.rw_skip.next = self.rwq.dout.val().skip;
        self.rwq.pop.next = self.rw_ready.val() & !self.rwq.empty.val();
        self.rwq.push.next = false;
        self.rwq.din.next.qpn = self.qpn.q.val().get_bits::<8>(0);
        self.rwq.din.next.idx = self.rec.q.val().idx;
        self.rwq.din.next.psn = self.s_comp.q.val();
        self.rwq.din.next.skip = self.skip.q.val();
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
        self.l_head.next = self.s_head.q.val();
        self.l_tail.next = self.s_tail.q.val();
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
        self.qst.wdata.next.head = self.s_head.q.val();
        self.qst.wdata.next.tail = self.s_tail.q.val();
        self.qst.wdata.next.comp_psn = self.s_comp.q.val();
        self.qst.wdata.next.rd = self.s_rd.q.val();
        self.qst.wdata.next.reading = self.s_reading.q.val();
        self.qst.wdata.next.err = self.s_err.q.val();
        self.qst.wdata.next.retrying = self.s_retrying.q.val();
        self.qst.wdata.next.skip_head = self.s_skip.q.val();
        self.qst.wdata.next.started = self.s_started.q.val();
        self.qst.wdata.next.nak_hint = self.s_nakh.q.val();
        self.qst.wdata.next.rl = self.s_rl.q.val();
        self.qst.wdata.next.nl = self.s_nl.q.val();
        self.qst.wdata.next.fin = self.s_fin.q.val();
        self.qst.wdata.next.hra = self.s_hra.q.val();
        self.ring.raddr.next = (bit_cast::<12, 8>(self.l_qpn8.val()) << 4) | bit_cast::<12, 4>(self.l_head.val().get_bits::<4>(0));
        self.ring.waddr.next = (bit_cast::<12, 8>(self.l_qpn8.val()) << 4) | bit_cast::<12, 4>(self.l_tail.val().get_bits::<4>(0));
        self.ring.wdata.next = self.rec.q.val();
        self.ring.we.next = false;
        self.l_full.next = (self.qst.rdata.val().head ^ self.qst.rdata.val().tail) == self.k16_5.val();

        // ---- PSN + 1 of the header, in two 12-bit halves ----
        self.l_hpsn.next = self.h_psn.q.val();
        self.inc_lo.d.next = self.l_hpsn.val().get_bits::<12>(0) + self.k1_12.val();
        self.inc_c.d.next = self.l_hpsn.val().get_bits::<12>(0) == self.kfff_12.val();
        self.l_hi.next = self.l_hpsn.val().get_bits::<12>(12);
        if self.inc_c.q.val() {
            self.l_hi.next = self.l_hpsn.val().get_bits::<12>(12) + self.k1_12.val();
        }
        self.psn1.d.next = (bit_cast::<24, 12>(self.l_hi.val()) << 12) | bit_cast::<24, 12>(self.inc_lo.q.val());

        // ---- the head record's class, registered ----
        self.cls_lut.x.next = self.rec.q.val().wr_op;
        self.l_cls.next = self.cls_lut.y.val();
        self.cls.d.next = self.l_cls.val();
        self.c_read.next = self.cls.q.val().get_bit(9);
        self.c_atomic.next = self.cls.q.val().get_bit(10);
        self.c_rd_at.next = self.cls.q.val().get_bit(11);

        // ---- PSN compares (inputs stable from HeadEval; results in Eval) ----
        self.cmp_last.a.next = self.psn1.q.val();
        self.cmp_last.b.next = self.rec.q.val().next_psn;
        self.cmp_comp.a.next = self.h_psn.q.val();
        self.cmp_comp.b.next = self.s_comp.q.val();
        self.cmp_next.a.next = self.rec.q.val().next_psn;
        self.cmp_next.b.next = self.s_comp.q.val();
        // (inputs from the state word and the record on offer in IRd; results in IHint)
        self.hint_lo.a.next = self.qst.rdata.val().comp_psn;
        self.hint_lo.b.next = self.iss.val().first_psn;
        self.hint_hi.a.next = self.qst.rdata.val().comp_psn;
        self.hint_hi.b.next = self.iss.val().next_psn;

        // ---- the read path's sums (pipelined: 3 cycles, inputs stable from HeadEval) ----
        self.add_addr.a.next = self.rec.q.val().laddr;
        self.add_addr.b.next = bit_cast::<64, 32>(self.s_rd.q.val());
        self.add_addr.cin.next = false;
        self.add_room.a.next = bit_cast::<64, 32>(self.rec.q.val().len);
        self.add_room.b.next = !bit_cast::<64, 32>(self.s_rd.q.val());
        self.add_room.cin.next = true;
        self.add_rd.a.next = bit_cast::<64, 32>(self.s_rd.q.val());
        self.add_rd.b.next = bit_cast::<64, 13>(self.h_plen.q.val());
        self.add_rd.cin.next = false;
        self.l_room.next = self.add_room.sum.val();
        self.l_rdsum.next = self.add_rd.sum.val();

        // ---- the fast path: the hot QP (its state in the registers, its head a READ being read, in order) ----
        // checks of the header on offer, registered (used in RQst, the cycle after it is taken)
        self.f_same.d.next = self.hot.q.val() & (self.l_hqpn.val() == self.qpn.q.val());
        self.f_psn.d.next = self.hdr.val().psn == self.s_comp.q.val();
        self.f_end.d.next = self.hdr.val().psn == self.rec.q.val().next_psn;
        self.f_fit.d.next = self.room_big.q.val() | (self.hdr_pay_len.val() <= self.room.q.val().get_bits::<13>(0));
        self.l_fast.next = self.f_same.q.val()
            & self.f_psn.q.val()
            & !self.f_end.q.val()
            & self.f_fit.q.val()
            & self.paypend.q.val()
            & (self.d_mid.q.val() | (self.d_last.q.val() & self.sy_ack.q.val()));
        // the next response's address, the room left and the bytes received, 3 cycles after their inputs
        // settle (fc counts the cycles; inputs: nx_addr, room, s_rd and h_plen)
        self.pa_addr.a.next = self.nx_addr.q.val();
        self.pa_addr.b.next = bit_cast::<64, 13>(self.h_plen.q.val());
        self.pa_addr.cin.next = false;
        self.pa_room.a.next = bit_cast::<64, 32>(self.room.q.val());
        self.pa_room.b.next = !bit_cast::<64, 13>(self.h_plen.q.val());
        self.pa_room.cin.next = true;
        self.pa_rd.a.next = bit_cast::<64, 32>(self.s_rd.q.val());
        self.pa_rd.b.next = bit_cast::<64, 13>(self.h_plen.q.val());
        self.pa_rd.cin.next = false;
        if self.fc.q.val() != self.k3_2.val() {
            self.fc.d.next = self.fc.q.val() + self.k1_2.val();
        }
        self.l_adv.next = false;

        // ---- header decode ----
        self.l_ext.next = self.hdr.val().ext;
        // AtomicAckETH's original value: ext bytes 4..12, big-endian
        self.orig_map.x.next = self.l_ext.val().get_bits::<64>(32);
        self.l_syn.next = self.l_ext.val().get_bits::<8>(0) & self.sy_mask.val();
        self.l_hop.next = self.hdr.val().opcode;
        self.l_rresp.next = self.d_first.q.val() | self.d_mid.q.val() | self.d_last.q.val() | self.d_only.q.val();
        // (RQst) a read response while a go-back-N is started and nothing has progressed, for a QP whose head
        // is a READ/atomic, at a PSN other than comp_psn: the rules can only drop it (older: stale; inside the
        // head: a gap; beyond: an implied NAK, which does not go back again before progress)
        self.l_fdrop.next = self.l_rresp.val()
            & self.qst.rdata.val().started
            & self.qst.rdata.val().hra
            & !self.qst.rdata.val().err
            & (self.qst.rdata.val().head != self.qst.rdata.val().tail)
            & (self.h_psn.q.val() != self.qst.rdata.val().comp_psn);
        self.l_badseq.next = (!self.s_reading.q.val() & (self.d_mid.q.val() | self.d_last.q.val()))
            | (self.s_reading.q.val() & (self.d_first.q.val() | self.d_only.q.val() | self.d_atack.q.val()));
        self.l_imm.next = self.rec.q.val().imm;

        match self.state.q.val() {
            CompState::Idle => {
                if !self.cqwq.empty.val() {
                    self.hot.d.next = false;
                    self.cqwq.pop.next = true;
                    self.qpn.d.next = bit_cast::<24, 8>(self.cqwq.dout.val().get_bits::<8>(0));
                    self.c_rst.d.next = self.cqwq.dout.val().get_bit(8);
                    self.c_req.d.next = self.cqwq.dout.val().get_bit(9);
                    self.c_psn.d.next = self.cqwq.dout.val().get_bits::<24>(10);
                    self.qst.raddr.next = self.cqwq.dout.val().get_bits::<8>(0);
                    self.cqn_ram.raddr.next = self.cqwq.dout.val().get_bits::<8>(0);
                    self.state.d.next = CompState::CRd;
                } else if self.to_v.q.val() {
                    // a timer the scanner saw expire
                    self.to_v.d.next = false;
                    self.hot.d.next = false;
                    self.tmo.d.next = true;
                    self.resp.d.next = false;
                    self.qpn.d.next = bit_cast::<24, 8>(self.to_q.q.val());
                    self.qst.raddr.next = self.to_q.q.val();
                    self.cqn_ram.raddr.next = self.to_q.q.val();
                    self.tmr_b.raddr.next = self.to_q.q.val();
                    self.state.d.next = CompState::TRd;
                } else if self.hdr_valid.val() & !self.l_pin.val() & (!self.iss_valid.val() | self.prio.q.val()) {
                    self.hdr_ready.next = true;
                    self.prio.d.next = false;
                    self.qpn.d.next = self.l_hqpn.val();
                    self.qst.raddr.next = self.l_hqpn.val().get_bits::<8>(0);
                    self.cqn_ram.raddr.next = self.l_hqpn.val().get_bits::<8>(0);
                    self.h_psn.d.next = self.hdr.val().psn;
                    self.h_syn.d.next = self.l_ext.val().get_bits::<8>(0);
                    // AETH (bytes 0..4), then AtomicAckETH's big-endian original value (bytes 4..12)
                    self.h_orig.d.next = self.orig_map.y.val();
                    self.h_plen.d.next = self.hdr_pay_len.val();
                    self.paypend.d.next = self.hdr_pay_len.val() != self.k0_13.val();
                    self.d_ackop.d.next = self.l_hop.val() == self.op_ack.val();
                    self.d_atack.d.next = self.l_hop.val() == self.op_atack.val();
                    self.d_first.d.next = self.l_hop.val() == self.op_first.val();
                    self.d_mid.d.next = self.l_hop.val() == self.op_mid.val();
                    self.d_last.d.next = self.l_hop.val() == self.op_last.val();
                    self.d_only.d.next = self.l_hop.val() == self.op_only.val();
                    self.sy_ack.d.next = self.l_syn.val() == self.sy_t_ack.val();
                    self.sy_rnr.d.next = self.l_syn.val() == self.sy_t_rnr.val();
                    self.sy_nak.d.next = self.l_syn.val() == self.sy_t_nak.val();
                    self.sy_res.d.next = self.l_syn.val() == self.sy_t_res.val();
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
                self.ring.waddr.next = (bit_cast::<12, 8>(self.l_iqpn.val().get_bits::<8>(0)) << 4)
                    | bit_cast::<12, 4>(self.l_xtail.val().get_bits::<4>(0));
                self.ring.wdata.next = self.l_irec.val();
                self.qst.waddr.next = self.l_iqpn.val().get_bits::<8>(0);
                self.qst.wdata.next = self.qst.rdata.val();
                self.qst.wdata.next.tail = self.qst.rdata.val().tail + self.k1_5.val();
                self.state.d.next = CompState::Idle;
                if self.iss.val().rewind
                    | self.qst.rdata.val().retrying
                    | self.qst.rdata.val().skip_head
                    | (self.qst.rdata.val().head == self.qst.rdata.val().tail)
                {
                    // a rewind's marker, a go-back-N in progress, or the first record of an empty list (the
                    // timer starts, comp_psn is set): the general path, in the event registers
                    self.hot.d.next = false;
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
                self.s_head.d.next = self.qst.rdata.val().head;
                self.s_tail.d.next = self.qst.rdata.val().tail;
                self.s_comp.d.next = self.qst.rdata.val().comp_psn;
                self.s_rd.d.next = self.qst.rdata.val().rd;
                self.s_reading.d.next = self.qst.rdata.val().reading;
                if self.c_req.q.val() {
                    // CMD_WRITE_QP_REQ: only comp_psn moves (to sq_psn) and a NAK hint is forgotten; a PSN
                    // compare against a comp_psn left from before (0 on a new QP) would take a NAK or an ACK
                    // of the first WQE for stale, or for already covering it (rxe: comp.psn = sq_psn)
                    self.s_comp.d.next = self.c_psn.q.val();
                    self.s_err.d.next = self.qst.rdata.val().err;
                    self.s_retrying.d.next = self.qst.rdata.val().retrying;
                    self.s_skip.d.next = self.qst.rdata.val().skip_head;
                    self.s_started.d.next = self.qst.rdata.val().started;
                    self.s_nakh.d.next = false;
                    self.s_rl.d.next = self.qst.rdata.val().rl;
                    self.s_nl.d.next = self.qst.rdata.val().nl;
                    self.s_fin.d.next = self.qst.rdata.val().fin;
                    self.s_hra.d.next = self.qst.rdata.val().hra;
                    self.qc.d.next = self.cqn_ram.rdata.val();
                    self.state.d.next = CompState::Done;
                } else {
                self.s_err.d.next = false;
                // (re)configured: retry counters full, no go-back-N in progress, timer off
                self.s_retrying.d.next = false;
                self.s_skip.d.next = false;
                self.s_started.d.next = false;
                self.s_nakh.d.next = false;
                self.s_rl.d.next = self.cqn_ram.rdata.val().retry_cnt;
                self.s_nl.d.next = self.cqn_ram.rdata.val().rnr_retry;
                // (to RESET: nothing is outstanding, the READ/atomic count starts again)
                self.s_fin.d.next = self.qst.rdata.val().fin;
                self.s_hra.d.next = self.qst.rdata.val().hra;
                if self.c_rst.q.val() {
                    self.s_fin.d.next = self.k0_8.val();
                }
                self.qc.d.next = self.cqn_ram.rdata.val();
                self.tm_set.d.next = true;
                self.tm_arm.d.next = false;
                self.state.d.next = CompState::Done;
                }
            }
            CompState::IRd => {
                self.s_head.d.next = self.qst.rdata.val().head;
                self.s_tail.d.next = self.qst.rdata.val().tail;
                self.s_comp.d.next = self.qst.rdata.val().comp_psn;
                self.s_rd.d.next = self.qst.rdata.val().rd;
                self.s_reading.d.next = self.qst.rdata.val().reading;
                self.s_err.d.next = self.qst.rdata.val().err;
                self.s_retrying.d.next = self.qst.rdata.val().retrying;
                self.s_skip.d.next = self.qst.rdata.val().skip_head;
                self.s_started.d.next = self.qst.rdata.val().started;
                self.s_nakh.d.next = self.qst.rdata.val().nak_hint;
                self.s_rl.d.next = self.qst.rdata.val().rl;
                self.s_nl.d.next = self.qst.rdata.val().nl;
                self.s_fin.d.next = self.qst.rdata.val().fin;
                self.s_hra.d.next = self.qst.rdata.val().hra;
                self.cqn.d.next = self.cqn_ram.rdata.val().cqn;
                self.qc.d.next = self.cqn_ram.rdata.val();
                // the record, for the ring or an error completion (the QP is not hot: nothing else is in `rec`)
                self.rec.d.next = self.l_irec.val();
                if self.iss.val().rewind {
                    // the rewind's marker: the records after it are the WQEs sent again from the head on; the
                    // head's own record stays (its READ progress with it), the later ones are dropped
                    self.iss_ready.next = true;
                    if self.qst.rdata.val().retrying {
                        self.s_retrying.d.next = false;
                        self.s_skip.d.next = true;
                        self.s_tail.d.next = self.qst.rdata.val().head + self.k1_5.val();
                    }
                    self.state.d.next = CompState::Done;
                } else if self.qst.rdata.val().retrying {
                    // issued before the rewind (sent again after it)
                    self.iss_ready.next = true;
                    self.state.d.next = CompState::Done;
                } else if self.qst.rdata.val().skip_head {
                    // the head WQE sent again: its record is already at the head
                    self.iss_ready.next = true;
                    self.s_skip.d.next = false;
                    self.state.d.next = CompState::Done;
                    if self.iss.val().status != self.k0_8.val() {
                        // ... unless it failed its local checks when read again (its MR deregistered since it
                        // was first sent): nothing of it is on its way any more, so it completes now with that
                        // status and the QP goes to error (rxe COMPST_ERROR), rather than waiting for
                        // responses that cannot come
                        self.s_err.d.next = true;
                        self.qerr.d.next = true;
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
                self.s_tail.d.next = self.s_tail.q.val() + self.k1_5.val();
                self.resp.d.next = false;
                if self.s_head.q.val() == self.s_tail.q.val() {
                    // first record of an empty list: everything before it is acknowledged; the timer starts
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.i_hint.d.next = self.s_comp.q.val();
                    self.s_comp.d.next = self.i_first.q.val();
                    self.s_reading.d.next = false;
                    self.s_rd.d.next = self.k0_32.val();
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
                    self.s_comp.d.next = self.i_hint.q.val();
                }
                self.state.d.next = CompState::HeadRd;
                // A PSN-sequence NAK came before this record (NHint): the go-back-N it asked for starts now,
                // from its PSN inside this WQE (or the WQE's first PSN), as rxe's completer would have started
                // it on the NAK. Not for a record that failed its local checks, nor a QP in error.
                self.s_nakh.d.next = false;
                if self.s_nakh.q.val() & (self.rec.q.val().status == self.k0_8.val()) & !self.s_err.q.val() {
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
                if self.cmp_comp.neg.val() {
                    self.cnt[3].inc.next = true;
                } else {
                    self.s_comp.d.next = self.h_psn.q.val();
                    self.s_nakh.d.next = true;
                }
                self.resp.d.next = false;
                self.state.d.next = CompState::Done;
            }
            CompState::RQst => {
                self.s_head.d.next = self.qst.rdata.val().head;
                self.s_tail.d.next = self.qst.rdata.val().tail;
                self.s_comp.d.next = self.qst.rdata.val().comp_psn;
                self.s_rd.d.next = self.qst.rdata.val().rd;
                self.s_reading.d.next = self.qst.rdata.val().reading;
                self.s_err.d.next = self.qst.rdata.val().err;
                self.s_retrying.d.next = self.qst.rdata.val().retrying;
                self.s_skip.d.next = self.qst.rdata.val().skip_head;
                self.s_started.d.next = self.qst.rdata.val().started;
                self.s_nakh.d.next = self.qst.rdata.val().nak_hint;
                self.s_rl.d.next = self.qst.rdata.val().rl;
                self.s_nl.d.next = self.qst.rdata.val().nl;
                self.s_fin.d.next = self.qst.rdata.val().fin;
                self.s_hra.d.next = self.qst.rdata.val().hra;
                self.cqn.d.next = self.cqn_ram.rdata.val().cqn;
                self.qc.d.next = self.cqn_ram.rdata.val();
                if self.d_ackop.q.val() {
                    self.cnt[0].inc.next = self.sy_ack.q.val();
                    self.cnt[1].inc.next = self.sy_nak.q.val();
                    self.cnt[2].inc.next = self.sy_rnr.q.val();
                }
                self.fc.d.next = self.k0_2.val();
                if self.l_fast.val() {
                    // an in-order MIDDLE or LAST of the hot QP's READ that fits: the outcome is known
                    self.s_valid.next = true;
                    if self.s_ready.val() {
                        self.pin_fwd.d.next = true;
                        self.paypend.d.next = false;
                        self.state.d.next = CompState::FEnd;
                    } else {
                        self.state.d.next = CompState::FCmd;
                    }
                } else if self.qst.rdata.val().retrying {
                    // a rewind is on its way: the responses of what is sent again will tell
                    self.hot.d.next = false;
                    self.cnt[3].inc.next = true;
                    self.state.d.next = CompState::Done;
                } else if self.l_fdrop.val() {
                    // dropped in 4 cycles instead of the rules' 10: after a loss the peer may still be sending
                    // many MiB of responses that can only be dropped, at a line-rate pace the general path
                    // cannot keep (one MTU-256 response every 8.7 cycles at 100 Gb/s)
                    self.hot.d.next = false;
                    self.cnt[3].inc.next = true;
                    self.state.d.next = CompState::FDrop;
                } else {
                    self.hot.d.next = false;
                    self.state.d.next = CompState::HeadRd;
                }
            }
            CompState::TRd => {
                self.s_head.d.next = self.qst.rdata.val().head;
                self.s_tail.d.next = self.qst.rdata.val().tail;
                self.s_comp.d.next = self.qst.rdata.val().comp_psn;
                self.s_rd.d.next = self.qst.rdata.val().rd;
                self.s_reading.d.next = self.qst.rdata.val().reading;
                self.s_err.d.next = self.qst.rdata.val().err;
                self.s_retrying.d.next = self.qst.rdata.val().retrying;
                self.s_skip.d.next = self.qst.rdata.val().skip_head;
                self.s_started.d.next = self.qst.rdata.val().started;
                self.s_nakh.d.next = self.qst.rdata.val().nak_hint;
                self.s_rl.d.next = self.qst.rdata.val().rl;
                self.s_nl.d.next = self.qst.rdata.val().nl;
                self.s_fin.d.next = self.qst.rdata.val().fin;
                self.s_hra.d.next = self.qst.rdata.val().hra;
                self.cqn.d.next = self.cqn_ram.rdata.val().cqn;
                self.qc.d.next = self.cqn_ram.rdata.val();
                self.t_armed.d.next = self.tmr_b.rdata.val().armed;
                self.t_rnr.d.next = self.tmr_b.rdata.val().rnr;
                self.t_dl.d.next = self.tmr_b.rdata.val().dl;
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
                if !self.t_armed.q.val() | self.s_retrying.q.val() | self.s_err.q.val() {
                    self.state.d.next = CompState::Done;
                } else if self.s_head.q.val() == self.s_tail.q.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = false;
                } else if !self.cmp_tm.neg.val() {
                    self.rt_rnr.d.next = self.t_rnr.q.val();
                    self.state.d.next = CompState::HeadRd;
                }
            }
            CompState::Rt0 => {
                // go-back-N from comp_psn: the head WQE is resumed after comp_psn - first_psn packets
                self.sk_lo.d.next = self.l_sk_lo.val();
                self.hot.d.next = false;
                if !self.rt_rnr.q.val() & (self.s_rl.q.val() == self.k0_3.val()) {
                    // retry_cnt exhausted
                    self.cstat.d.next = self.st_retry.val();
                    self.s_err.d.next = true;
                    self.qerr.d.next = true;
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else {
                    if !self.rt_rnr.q.val() & (self.s_rl.q.val() != self.k7_3.val()) {
                        self.s_rl.d.next = self.s_rl.q.val() - self.k1_3.val();
                    }
                    self.cnt[7].inc.next = true;
                    self.cnt[8].inc.next = self.tmo.q.val() & !self.rt_rnr.q.val();
                    self.s_retrying.d.next = true;
                    self.s_started.d.next = true;
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
                self.rwq.push.next = !self.rwq.full.val();
                if !self.rwq.full.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.state.d.next = CompState::Done;
                }
            }
            CompState::FDrop => {
                // as Act does for a stale response or an implied NAK: an armed retransmit timer is pushed back
                // (rxe COMPST_EXIT), an RNR wait keeps its deadline (tmr_b was read for this QP in RQst)
                if self.tmr_b.rdata.val().armed & !self.tmr_b.rdata.val().rnr {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                }
                self.state.d.next = CompState::Done;
            }
            CompState::AtCmd => {
                // one 8-byte Scatter command at the WQE's (translated) local address; its beat in the next
                // state (the Scatter Path's ready, which the DMA write grant drives, moves only the state)
                self.s_addr.next = self.rec.q.val().laddr;
                self.s_len.next = self.k8_13.val();
                self.s_valid.next = true;
                if self.s_ready.val() {
                    self.state.d.next = CompState::AtPush;
                }
            }
            CompState::AtPush => {
                if !self.pf.full.val() {
                    self.pf.push.next = true;
                    self.pf.din.next.data = bit_cast::<512, 64>(self.h_orig.q.val());
                    self.pf.din.next.keep = self.kff_64.val();
                    self.pf.din.next.last = true;
                    self.state.d.next = CompState::AtEnd;
                }
            }
            CompState::AtEnd => {
                // complete once the value has gone to the Scatter Path
                if self.pf.empty.val() {
                    self.s_comp.d.next = self.psn1.q.val();
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
                self.s_valid.next = true;
                if self.s_ready.val() {
                    self.pin_fwd.d.next = true;
                    self.paypend.d.next = false;
                    self.state.d.next = CompState::FEnd;
                }
            }
            CompState::FEnd => {
                // the sums are there: the response's effect on the QP state (as RdDec, RdEnd and Done)
                if self.fc.q.val().get_bit(1) {
                    self.l_adv.next = true;
                    self.s_comp.d.next = self.psn1.q.val();
                    self.s_rd.d.next = self.pa_rd.sum.val().get_bits::<32>(0);
                    // progress: the timer starts over
                    self.tmr_a.we.next = true;
                    self.tmr_b.we.next = true;
                    self.tmr_a.wdata.next.armed = self.qc.q.val().timeout != self.k0_5.val();
                    self.tmr_b.wdata.next.armed = self.qc.q.val().timeout != self.k0_5.val();
                    self.qst.wdata.next.started = false;
                    self.s_started.d.next = false;
                    if self.d_last.q.val() {
                        self.hot.d.next = false;
                        self.state.d.next = CompState::RdEnd;
                    } else {
                        self.qst.we.next = true;
                        self.qst.wdata.next.comp_psn = self.psn1.q.val();
                        self.qst.wdata.next.rd = self.pa_rd.sum.val().get_bits::<32>(0);
                        self.state.d.next = CompState::Idle;
                    }
                }
            }
            CompState::HeadRd => {
                if (self.s_head.q.val() == self.s_tail.q.val())
                    & self.resp.q.val()
                    & self.d_ackop.q.val()
                    & self.sy_nak.q.val()
                    & (self.h_syn.q.val() == self.syn_seq.val())
                    & !self.s_err.q.val()
                {
                    self.state.d.next = CompState::NWait;
                } else if self.s_head.q.val() == self.s_tail.q.val() {
                    if self.resp.q.val() {
                        // no pending WQE
                        self.cnt[3].inc.next = true;
                        // an ACK with nothing pending here: its PSN + 1 is kept as comp_psn (Done: PSN + 1 is
                        // there a cycle later) for the record of the WQE it acknowledges a part of, which comes
                        // after that WQE's last packet (IHint)
                        self.a_hint.d.next = self.d_ackop.q.val() & self.sy_ack.q.val();
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
                self.s_hra.d.next = self.l_cls.val().get_bit(11);
                if self.s_err.q.val() | (self.rec.q.val().status != self.k0_8.val()) {
                    // a record that was never sent, or a QP in error: complete it now
                    self.cstat.d.next = self.rec.q.val().status;
                    if self.rec.q.val().status == self.k0_8.val() {
                        self.cstat.d.next = self.st_flush.val();
                    }
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
                if self.cmp_last.gt.val() {
                    if self.c_rd_at.val() {
                        self.act.d.next = self.a_implied.val();
                    } else {
                        self.act.d.next = self.a_coalesce.val();
                    }
                } else if self.cmp_comp.neg.val() {
                    if self.cmp_last.eq.val() & self.d_ackop.q.val() & self.sy_ack.q.val() & !self.c_rd_at.val() {
                        self.act.d.next = self.a_ack_last.val();
                    } else {
                        self.act.d.next = self.a_stale.val();
                    }
                } else if self.cmp_comp.gt.val() & self.c_rd_at.val() {
                    self.act.d.next = self.a_stale.val();
                } else if self.l_badseq.val() {
                    self.act.d.next = self.a_bad.val();
                } else if self.l_rresp.val() {
                    if !self.c_read.val() | (!self.d_mid.q.val() & !self.sy_ack.q.val()) {
                        self.act.d.next = self.a_bad.val();
                    } else {
                        self.act.d.next = self.a_read.val();
                    }
                } else if self.d_atack.q.val() {
                    if !self.c_atomic.val() | !self.sy_ack.q.val() {
                        self.act.d.next = self.a_bad.val();
                    } else {
                        self.act.d.next = self.a_atomic.val();
                    }
                } else if self.d_ackop.q.val() {
                    if self.sy_ack.q.val() {
                        if self.c_rd_at.val() {
                            self.act.d.next = self.a_stale.val();
                        } else if self.cmp_last.eq.val() {
                            self.act.d.next = self.a_ack_comp.val();
                        } else {
                            self.act.d.next = self.a_ack_adv.val();
                        }
                    } else if self.sy_res.q.val() {
                        self.act.d.next = self.a_bad.val();
                    } else if self.sy_nak.q.val() {
                        self.act.d.next = self.a_nak.val();
                    } else if self.sy_rnr.q.val() {
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
                    & self.tmr_b.rdata.val().armed
                    & !self.tmr_b.rdata.val().rnr
                {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                }
                if self.act.q.val() == self.a_implied.val() {
                    // a response beyond a pending READ/atomic: its response was lost; go back (once)
                    self.cnt[5].inc.next = true;
                    if !self.s_started.q.val() {
                        self.rt_rnr.d.next = false;
                        self.state.d.next = CompState::Rt0;
                    }
                } else if self.act.q.val() == self.a_nak.val() {
                    if self.h_syn.q.val() == self.syn_seq.val() {
                        // PSN sequence error: everything before its PSN is acknowledged; go back from there
                        if self.cmp_comp.gt.val() {
                            self.s_comp.d.next = self.h_psn.q.val();
                        }
                        if self.cmp_comp.gt.val() | !self.s_started.q.val() {
                            self.rt_rnr.d.next = false;
                            self.state.d.next = CompState::Rt0;
                        }
                    } else {
                        // NAK invalid request / remote access / remote operational (any other code): the head
                        // completes with its status and the QP goes to error
                        self.cstat.d.next = self.st_op.val();
                        if self.h_syn.q.val() == self.syn_inv.val() {
                            self.cstat.d.next = self.st_inv.val();
                        }
                        if self.h_syn.q.val() == self.syn_acc.val() {
                            self.cstat.d.next = self.st_acc.val();
                        }
                        self.s_err.d.next = true;
                        self.qerr.d.next = true;
                        self.resp.d.next = false;
                        self.state.d.next = CompState::CqLoad;
                    }
                } else if self.act.q.val() == self.a_rnr.val() {
                    if self.s_nl.q.val() == self.k0_3.val() {
                        self.cstat.d.next = self.st_rnr.val();
                        self.s_err.d.next = true;
                        self.qerr.d.next = true;
                        self.resp.d.next = false;
                        self.state.d.next = CompState::CqLoad;
                    } else {
                        // wait the NAK's RNR time, then go back (rnr_retry counts down, 7 = infinite)
                        if self.s_nl.q.val() != self.k7_3.val() {
                            self.s_nl.d.next = self.s_nl.q.val() - self.k1_3.val();
                        }
                        self.tm_rnr.d.next = true;
                        // a PSN-sequence NAK for the packets behind the one RNR NAKed (rxe sends one) must not
                        // cut the wait short: counts as a go-back-N already started (rxe `wait_for_rnr_timer`)
                        self.s_started.d.next = true;
                        self.rnr_code.d.next = self.h_syn.q.val().get_bits::<5>(0);
                        self.tw.d.next = self.k0_2.val();
                        self.state.d.next = CompState::RnrW;
                    }
                } else if self.act.q.val() == self.a_coalesce.val() {
                    if self.cmp_next.gt.val() {
                        self.s_comp.d.next = self.rec.q.val().next_psn;
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
                    self.s_err.d.next = true;
                    self.qerr.d.next = true;
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else if self.act.q.val() == self.a_read.val() {
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.s_started.d.next = false;
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
                    self.s_started.d.next = false;
                    self.s_comp.d.next = self.psn1.q.val();
                } else if self.act.q.val() == self.a_ack_comp.val() {
                    self.s_comp.d.next = self.psn1.q.val();
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                }
            }
            CompState::RdChk => {
                // payload beyond the WQE length: pay_len > len - received
                self.over.d.next = (self.l_room.val().get_bits::<19>(13) == self.k0_19.val())
                    & (self.h_plen.q.val() > self.l_room.val().get_bits::<13>(0));
                self.nx_addr.d.next = self.add_addr.sum.val();
                self.room.d.next = self.l_room.val().get_bits::<32>(0);
                self.state.d.next = CompState::RdDec;
            }
            CompState::RdDec => {
                self.fc.d.next = self.k0_2.val();
                if self.over.q.val() {
                    self.cstat.d.next = self.st_len.val();
                    self.s_err.d.next = true;
                    self.qerr.d.next = true;
                    self.resp.d.next = false;
                    self.state.d.next = CompState::CqLoad;
                } else {
                    self.s_rd.d.next = self.l_rdsum.val().get_bits::<32>(0);
                    self.s_comp.d.next = self.psn1.q.val();
                    if self.paypend.q.val() {
                        self.state.d.next = CompState::SCmd;
                    } else {
                        self.state.d.next = CompState::RdEnd;
                    }
                }
            }
            CompState::SCmd => {
                self.s_valid.next = true;
                if self.s_ready.val() {
                    self.pin_fwd.d.next = true;
                    self.paypend.d.next = false;
                    self.state.d.next = CompState::RdEnd;
                }
            }
            CompState::RdEnd => {
                if self.d_last.q.val() | self.d_only.q.val() {
                    // complete once the payload has gone to the Scatter Path
                    if !self.pin_fwd.q.val() & self.pf.empty.val() {
                        self.s_reading.d.next = false;
                        self.cstat.d.next = self.k0_8.val();
                        self.resp.d.next = false;
                        self.state.d.next = CompState::CqLoad;
                    }
                } else if self.fc.q.val().get_bit(1) {
                    // the QP is hot now: its next response may take the fast path
                    self.s_reading.d.next = true;
                    self.l_adv.next = true;
                    self.hot.d.next = true;
                    self.state.d.next = CompState::Done;
                }
            }
            CompState::CqLoad => {
                self.o_valid.d.next = (self.cstat.q.val() != self.k0_8.val()) | self.rec.q.val().signaled;
                self.o_cqn.d.next = self.cqn.q.val();
                self.o_wr_id.d.next = self.rec.q.val().wr_id;
                self.o_len.d.next = self.rec.q.val().len;
                self.o_qpn.d.next = self.qpn.q.val();
                self.o_status.d.next = self.cstat.q.val();
                self.o_opcode.d.next = self.l_cls.val().get_bits::<8>(0);
                self.o_imm.d.next = self.k0_32.val();
                self.o_flags.d.next = self.k0_8.val();
                if self.l_cls.val().get_bit(8) {
                    // immediate data in wire byte order (CQE bytes 12..15)
                    self.o_imm.d.next = (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(0)) << 24)
                        | (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(8)) << 16)
                        | (bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(16)) << 8)
                        | bit_cast::<32, 8>(self.l_imm.val().get_bits::<8>(24));
                    self.o_flags.d.next = self.f_imm.val();
                }
                self.state.d.next = CompState::CqEmit;
            }
            CompState::CqEmit => {
                if !self.o_valid.q.val() | self.cq_ready.val() {
                    self.o_valid.d.next = false;
                    // retire the head; progress restarts the timer (and a success the retry counters)
                    self.tm_set.d.next = true;
                    self.tm_arm.d.next = true;
                    self.s_started.d.next = false;
                    if self.cstat.q.val() == self.k0_8.val() {
                        self.s_rl.d.next = self.qc.q.val().retry_cnt;
                        self.s_nl.d.next = self.qc.q.val().rnr_retry;
                    }
                    self.s_head.d.next = self.s_head.q.val() + self.k1_5.val();
                    if self.c_rd_at.val() {
                        // a READ/atomic retired: WQE Check may send another
                        self.s_fin.d.next = self.s_fin.q.val() + self.k1_8.val();
                    }
                    self.s_rd.d.next = self.k0_32.val();
                    self.s_reading.d.next = false;
                    self.state.d.next = CompState::HeadRd;
                }
            }
            CompState::Done => {
                self.qst.we.next = true;
                if self.a_hint.q.val() {
                    self.qst.wdata.next.comp_psn = self.psn1.q.val();
                }
                self.a_hint.d.next = false;
                if self.tm_set.q.val() {
                    self.tmr_a.we.next = true;
                    self.tmr_b.we.next = true;
                }
                self.tm_set.d.next = false;
                self.tm_rnr.d.next = false;
                self.tmo.d.next = false;
                if self.paypend.q.val() {
                    self.pin_drop.d.next = true;
                    self.paypend.d.next = false;
                }
                self.state.d.next = CompState::Idle;
            }
        }
        // every state word write, as the RAM takes it (comp_psn may change with any of them)
        self.w1_v.d.next = self.qst.we.val();
        self.w1_q.d.next = self.qst.waddr.val();
        self.w1_p.d.next = self.qst.wdata.val().comp_psn;
        self.w1_b.d.next = self.qst.wdata.val().head != self.qst.wdata.val().tail;
        self.w1_f.d.next = self.qst.wdata.val().fin;
        if self.l_adv.val() {
            self.nx_addr.d.next = self.pa_addr.sum.val();
            self.room.d.next = self.pa_room.sum.val().get_bits::<32>(0);
            self.room_big.d.next = self.pa_room.sum.val().get_bits::<19>(13) != self.k0_19.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::beat_of;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, VecDeque};
    use rnic_driver::host::{wc_opcode_code, wc_status_code, wr_opcode_code};
    use testbench::model::harness::{ConnOpts, Pair};
    use testbench::model::*;
    use testbench::wire::frame::{parse_ethernet, Frame};

    /// A response as RX Parse hands it on: header, ext words, payload.
    #[derive(Clone)]
    struct Resp {
        h: RxHeader,
        ew: u64,
        pay: Vec<u8>,
    }

    fn resp_of(bytes: &[u8]) -> Resp {
        let (h, ew, pay) = crate::wire::rx_parse::rx_header_of(bytes);
        Resp { h, ew, pay }
    }

    /// A completion as the RTL gave it.
    #[derive(Clone, Debug, PartialEq)]
    struct Cq {
        cqn: u64,
        wr_id: u64,
        byte_len: u64,
        imm: u64,
        qp_num: u64,
        src_qp: u64,
        status: u64,
        opcode: u64,
        flags: u64,
    }

    fn cq_of_wc(wc: &WorkCompletion, cqn: u64) -> Cq {
        Cq {
            cqn,
            wr_id: wc.wr_id,
            byte_len: wc.byte_len as u64,
            imm: wc.imm_data.swap_bytes() as u64,
            qp_num: wc.qp_num as u64,
            src_qp: wc.src_qp as u64,
            status: wc_status_code(wc.status) as u64,
            opcode: wc_opcode_code(wc.opcode) as u64,
            flags: (wc.wc_flags.0 & 0xFF) as u64,
        }
    }

    struct Rig {
        u: Completer,
        rng: SmallRng,
        /// scattered bytes: address -> byte
        mem: BTreeMap<u64, u8>,
        cqs: Vec<Cq>,
        /// most records waiting at once while the QP was full (iss_ready low with iss_valid high)
        full_stalls: u64,
        /// read responses that took the fast path
        fast: u64,
        /// every record fed in (WQE Check's part: a rewind sends the marker, then these again from the index)
        issued: Vec<ReqIssued>,
        /// rewinds seen: (QPN, ring index, PSN, skip)
        rewinds: Vec<(u64, u64, u64, u64)>,
        /// QP-to-error pulses seen (QPN)
        qerrs: Vec<u64>,
        min_cycles: u64,
        /// WQE Check's verdict when it reads this WQE (QPN, ring index) again after a rewind: a failed
        /// local check (its MR gone since it was first sent), so its record comes back with this status
        fail_again: Option<(u64, u64, WcStatus)>,
        /// the window writes to WQE Check: (QPN, busy, limit)
        wins: Vec<(u64, bool, u64)>,
        /// the retired READ/atomic count per QP, as the last window write gave it
        fin: BTreeMap<u64, u64>,
    }

    impl Rig {
        fn new(seed: u64) -> Self {
            let mut u = Completer::default();
            u.connect_all();
            Rig {
                u,
                rng: SmallRng::seed_from_u64(seed),
                mem: BTreeMap::new(),
                cqs: Vec::new(),
                full_stalls: 0,
                fast: 0,
                issued: Vec::new(),
                rewinds: Vec::new(),
                qerrs: Vec::new(),
                min_cycles: 0,
                fail_again: None,
                wins: Vec::new(),
                fin: BTreeMap::new(),
            }
        }
        fn tick(&mut self) {
            self.u.clock.next = false.into();
            assert!(simulate(&mut self.u, 200));
            self.u.clock.next = true.into();
            assert!(simulate(&mut self.u, 200));
        }
        /// CMD_WRITE_QP with no retransmit timer and infinite retries.
        fn set_cq(&mut self, qpn: u32, cqn: u32) {
            self.set_qp(qpn, cqn, 0, 7, 7);
        }
        fn set_qp(&mut self, qpn: u32, cqn: u32, timeout: u64, retry: u64, rnr: u64) {
            self.set_qp_to(qpn, cqn, timeout, retry, rnr, false);
        }
        /// CMD_WRITE_QP_REQ: the QP's sq_psn.
        fn set_sq_psn(&mut self, qpn: u32, psn: u32) {
            self.u.cqp_we.next = true;
            self.u.cqp_qpn.next = bits(qpn as u64);
            self.u.cqp_psn.next = bits(psn as u64);
            self.tick();
            self.u.cqp_we.next = false;
            for _ in 0..10 {
                self.tick();
            }
        }
        /// CMD_WRITE_QP, `reset` when to RESET; the window write that follows is recorded.
        fn set_qp_to(&mut self, qpn: u32, cqn: u32, timeout: u64, retry: u64, rnr: u64, reset: bool) {
            self.u.cqw_reset.next = reset;
            self.u.cqw_we.next = true;
            self.u.cqw_qpn.next = bits(qpn as u64);
            self.u.cqw_cqn.next = bits(cqn as u64);
            self.u.cqw_timeout.next = bits(timeout);
            self.u.cqw_retry.next = bits(retry);
            self.u.cqw_rnr.next = bits(rnr);
            self.tick();
            self.u.cqw_we.next = false;
            for _ in 0..10 {
                self.u.clock.next = false.into();
                assert!(simulate(&mut self.u, 200));
                if self.u.win_we.val() {
                    self.fin.insert(self.u.win_qpn.val().to_u64(), self.u.win_fin.val().to_u64());
                }
                self.u.clock.next = true.into();
                assert!(simulate(&mut self.u, 200));
            }
        }
        fn counter(&self, i: usize) -> u64 {
            self.u.counters[i].val().to_u64()
        }
        /// Feed the records (first alone, until all are in or the list is full) and then the responses, with
        /// random valid and ready everywhere; run until everything is consumed and the block is quiet.
        fn run(&mut self, iss: &[ReqIssued], resps: &[Resp]) {
            let mut iq: VecDeque<ReqIssued> = iss.iter().copied().collect();
            self.issued.extend_from_slice(iss);
            let mut hq: VecDeque<Resp> = resps.iter().cloned().collect();
            let mut beats: VecDeque<(Vec<u8>, bool)> = VecDeque::new();
            let mut cmds: VecDeque<(u64, u64)> = VecDeque::new();
            let mut cur: Option<(u64, u64, Vec<u8>)> = None;
            let mut stalled = 0;
            let mut quiet = 0;
            let mut cycles = 0u64;
            loop {
                cycles += 1;
                assert!(cycles < 400_000, "completer hung");
                let iv = !iq.is_empty();
                if let Some(r) = iq.front() {
                    self.u.iss.next = *r;
                }
                self.u.iss_valid.next = iv;
                let hv = !hq.is_empty() && (iq.is_empty() || stalled > 40) && self.rng.gen_ratio(3, 4);
                if hv {
                    let r = hq.front().unwrap();
                    self.u.hdr.next = r.h;
                    self.u.hdr_ext_words.next = bits(r.ew);
                    self.u.hdr_pay_len.next = bits(r.pay.len() as u64);
                }
                self.u.hdr_valid.next = hv;
                let pv = !beats.is_empty() && self.rng.gen_ratio(3, 4);
                if pv {
                    let (d, k) = beat_of(&beats[0].0);
                    self.u.pay.tdata.next = d;
                    self.u.pay.tkeep.next = k;
                    self.u.pay.tlast.next = beats[0].1;
                }
                self.u.pay.tvalid.next = pv;
                let (sr, tr, cr) = (self.rng.gen_ratio(2, 3), self.rng.gen_ratio(2, 3), self.rng.gen_ratio(2, 3));
                self.u.s_ready.next = sr;
                self.u.s_pay.tready.next = tr;
                self.u.cq_ready.next = cr;
                let rwr = self.rng.gen_ratio(1, 2);
                self.u.rw_ready.next = rwr;
                self.u.clock.next = false.into();
                assert!(simulate(&mut self.u, 200));
                if self.u.qerr_valid.val() {
                    self.qerrs.push(self.u.qerr_qpn.val().to_u64());
                }
                if self.u.win_we.val() {
                    self.wins.push((self.u.win_qpn.val().to_u64(), self.u.win_busy.val(), self.u.win_lim.val().to_u64()));
                    self.fin.insert(self.u.win_qpn.val().to_u64(), self.u.win_fin.val().to_u64());
                }
                if self.u.rw_valid.val() && rwr {
                    // WQE Check: the marker, then the QP's WQEs from the ring index on, sent again
                    let (q, i) = (self.u.rw_qpn.val().to_u64(), self.u.rw_idx.val().to_u64());
                    self.rewinds.push((q, i, self.u.rw_psn.val().to_u64(), self.u.rw_skip.val().to_u64()));
                    let again: Vec<ReqIssued> = self
                        .issued
                        .iter()
                        .filter(|r| r.qpn.to_u64() == q && r.idx.to_u64() >= i)
                        .map(|r| match self.fail_again {
                            Some((fq, fi, st)) if (fq, fi) == (q, r.idx.to_u64()) => {
                                ReqIssued { status: bits(wc_status_code(st) as u64), next_psn: r.first_psn, ..*r }
                            }
                            _ => *r,
                        })
                        .collect();
                    for r in again.into_iter().rev() {
                        iq.push_front(r);
                    }
                    iq.push_front(ReqIssued { qpn: bits(q), idx: bits(i), rewind: true, ..Default::default() });
                    quiet = 0;
                }
                if self.u.state.q.val() == CompState::FEnd && self.u.fc.q.val().get_bit(1) {
                    self.fast += 1;
                }
                quiet += 1;
                if iv {
                    if self.u.iss_ready.val() {
                        iq.pop_front();
                        stalled = 0;
                        quiet = 0;
                    } else {
                        stalled += 1;
                        if stalled == 41 {
                            self.full_stalls += 1;
                        }
                    }
                }
                if hv && self.u.hdr_ready.val() {
                    let r = hq.pop_front().unwrap();
                    let n = r.pay.len();
                    if n > 0 {
                        let chunks: Vec<Vec<u8>> = r.pay.chunks(64).map(|c| c.to_vec()).collect();
                        let m = chunks.len();
                        for (i, c) in chunks.into_iter().enumerate() {
                            beats.push_back((c, i + 1 == m));
                        }
                    }
                    quiet = 0;
                }
                if pv && self.u.pay.tready.val() {
                    beats.pop_front();
                    quiet = 0;
                }
                if self.u.s_valid.val() && sr {
                    cmds.push_back((self.u.s_addr.val().to_u64(), self.u.s_len.val().to_u64()));
                    quiet = 0;
                }
                if self.u.s_pay.tvalid.val() && tr {
                    if cur.is_none() {
                        let (a, l) = cmds.pop_front().expect("payload beat without a scatter command");
                        cur = Some((a, l, Vec::new()));
                    }
                    let c = cur.as_mut().unwrap();
                    let keep = self.u.s_pay.tkeep.val();
                    for i in 0..64 {
                        if keep.get_bit(i) {
                            c.2.push(self.u.s_pay.tdata.val().get_bits::<8>(8 * i).to_u8());
                        }
                    }
                    if self.u.s_pay.tlast.val() {
                        let (a, l, data) = cur.take().unwrap();
                        assert_eq!(data.len() as u64, l, "scatter payload length");
                        for (i, b) in data.iter().enumerate() {
                            self.mem.insert(a + i as u64, *b);
                        }
                    }
                    quiet = 0;
                }
                if self.u.cq_valid.val() && cr {
                    let u = &self.u;
                    self.cqs.push(Cq {
                        cqn: u.cq_cqn.val().to_u64(),
                        wr_id: u.cq_wr_id.val().to_u64(),
                        byte_len: u.cq_byte_len.val().to_u64(),
                        imm: u.cq_imm.val().to_u64(),
                        qp_num: u.cq_qp_num.val().to_u64(),
                        src_qp: u.cq_src_qp.val().to_u64(),
                        status: u.cq_status.val().to_u64(),
                        opcode: u.cq_opcode.val().to_u64(),
                        flags: u.cq_wc_flags.val().to_u64(),
                    });
                    quiet = 0;
                }
                self.u.clock.next = true.into();
                assert!(simulate(&mut self.u, 200));
                if iq.is_empty() && hq.is_empty() && beats.is_empty() && quiet > 60 && cycles > self.min_cycles {
                    break;
                }
            }
            assert!(cmds.is_empty() && cur.is_none(), "scatter command without its payload");
        }
    }

    fn ops() -> [WrOpcode; 7] {
        [
            WrOpcode::Send,
            WrOpcode::SendWithImm,
            WrOpcode::RdmaWrite,
            WrOpcode::RdmaWriteWithImm,
            WrOpcode::RdmaRead,
            WrOpcode::AtomicFetchAndAdd,
            WrOpcode::AtomicCmpAndSwp,
        ]
    }

    /// Golden campaign: two model devices; the requester's WQEs as ReqIssued records (PSNs as the model assigned
    /// them) and the responder's response frames (some ACKs dropped: coalesced ACKs; some responses duplicated:
    /// stale) go to the RTL and to the model requester; every completion and scattered byte compared.
    fn campaign(seed: u64, seqs: usize) -> (usize, usize, u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut rig = Rig::new(seed ^ 0x55);
        let (mut ncq, mut nbytes) = (0usize, 0usize);
        let mut coalesced = 0u64;
        for s in 0..seqs {
            let mtu = [256u32, 1024, 4096][s % 3];
            let m = mtu as u64;
            let mut p = Pair::new(LinkConfig::default(), seed + s as u64);
            let psn0 = if s % 2 == 0 { 0xFF_FFFF - rng.gen_range(0..30) } else { rng.gen_range(0..0x100_0000) };
            let o = ConnOpts { path_mtu: mtu, ..Default::default() };
            let (qa, qb) = p.connect(&o, psn0, rng.gen_range(0..0x100_0000));
            let cqn = 0x100 + s as u32;
            rig.set_cq(qa, cqn);
            let abuf = p.a.alloc(1 << 17);
            let bbuf = p.b.alloc(1 << 17);
            for i in 0..(1u64 << 17) / 8 {
                p.b.mem_mut().write_u64(bbuf + 8 * i, rng.gen()).unwrap();
            }
            let amr = p.a.reg_mr(p.pd_a, abuf, 1 << 17, AccessFlags::ALL).unwrap();
            let bmr = p.b.reg_mr(p.pd_b, bbuf, 1 << 17, AccessFlags::ALL).unwrap();
            for r in 0..64 {
                p.b.post_recv(qb, RecvWr { wr_id: r, sg_list: vec![Sge { addr: bbuf + (1 << 16), length: 1 << 16, lkey: bmr.lkey }] })
                    .unwrap();
            }
            let drops0 = p.a.counters().drop_count(DropReason::NoPendingWqe) + p.a.counters().drop_count(DropReason::StaleResponse);
            let dropped0 = rig.counter(CNT_DROPPED);
            let acks0 = p.a.counters().acks_received;
            let racks0 = rig.counter(CNT_ACKS);
            let mut wid = 0u64;
            for _batch in 0..3 {
                let n = rng.gen_range(1..=COMP_RING + 4);
                let mut iss = Vec::new();
                let mut reads = Vec::new();
                for _ in 0..n {
                    let op = ops()[rng.gen_range(0..7)];
                    let mut len = [0, 1, m - 1, m, m + 1, 3 * m + 17][rng.gen_range(0..6)];
                    if op.is_atomic() {
                        len = 8;
                    }
                    let off = rng.gen_range(0..(1u64 << 16) - len);
                    let mut wr = SendWr::new(wid, op, vec![Sge { addr: abuf + off, length: len as u32, lkey: amr.lkey }]);
                    wr.remote_addr = bbuf + rng.gen_range(0..(1u64 << 16) - len);
                    if op.is_atomic() {
                        wr.remote_addr &= !7;
                        wr.compare_add = if rng.gen_bool(0.5) { p.b.mem().read_u64(wr.remote_addr).unwrap() } else { rng.gen() };
                        wr.swap = rng.gen();
                    }
                    wr.rkey = bmr.rkey;
                    wr.imm_data = rng.gen();
                    wr.flags.signaled = rng.gen_bool(0.7);
                    p.a.post_send(qa, wr.clone()).unwrap();
                    if op.is_read_or_atomic() {
                        reads.push((abuf + off, len));
                    }
                    iss.push((wr, off, len));
                    wid += 1;
                }
                let reqs = p.a.poll(0);
                let q = p.a.qp(qa).unwrap();
                assert_eq!(q.sq.len(), n, "every WQE is sent and pending");
                let recs: Vec<ReqIssued> = iss
                    .iter()
                    .zip(q.sq.iter())
                    .map(|((wr, off, len), w)| {
                        assert_eq!(w.wr.wr_id, wr.wr_id);
                        ReqIssued {
                            qpn: bits(qa as u64),
                            idx: bits(wr.wr_id & 0xFFFF),
                            wr_id: bits(wr.wr_id),
                            wr_op: bits(wr_opcode_code(wr.opcode) as u64),
                            signaled: wr.flags.signaled,
                            first_psn: bits(w.first_psn as u64),
                            next_psn: bits(psn_add(w.last_psn, 1) as u64),
                            status: bits(0),
                            laddr: bits(abuf + off),
                            len: bits(*len),
                            imm: bits(wr.imm_data as u64),
                            rewind: false,
                        }
                    })
                    .collect();
                let mut resp_frames: Vec<Vec<u8>> = Vec::new();
                for f in &reqs {
                    resp_frames.extend(p.b.process(0, f));
                }
                // drop some ACKs (not the last response: the next one acknowledges them too), duplicate some
                let mut deliver: Vec<Vec<u8>> = Vec::new();
                let k = resp_frames.len();
                for (i, f) in resp_frames.iter().enumerate() {
                    let Frame::Roce(rf) = parse_ethernet(f).unwrap() else { panic!() };
                    if i + 1 < k && rf.packet.bth.opcode == RC_ACKNOWLEDGE && rng.gen_bool(0.4) {
                        coalesced += 1;
                        continue;
                    }
                    deliver.push(f.clone());
                    if rng.gen_bool(0.12) {
                        deliver.push(f.clone());
                    }
                }
                // and now and then a response after everything is complete: no pending WQE
                if rng.gen_bool(0.3) {
                    deliver.push(deliver.last().unwrap().clone());
                }
                for f in &deliver {
                    p.a.process(0, f);
                }
                let resps: Vec<Resp> = deliver.iter().map(|f| resp_of(f)).collect();
                rig.run(&recs, &resps);
                let want: Vec<Cq> = p.a.poll_cq(p.cq_a, 1000).iter().map(|wc| cq_of_wc(wc, cqn as u64)).collect();
                assert!(p.a.qp(qa).unwrap().sq.is_empty(), "the model completed the batch");
                let got: Vec<Cq> = std::mem::take(&mut rig.cqs);
                assert_eq!(got, want, "seq {s} mtu {mtu}: completions");
                ncq += got.len();
                for (a, len) in reads {
                    let model = p.a.mem().read(a, len as usize).unwrap();
                    let rtl: Vec<u8> = (0..len).map(|i| *rig.mem.get(&(a + i)).expect("read byte not scattered")).collect();
                    assert_eq!(rtl, model, "seq {s}: READ of {len} bytes at {a:#x}");
                }
                for (a, b) in &rig.mem {
                    assert_eq!(p.a.mem().read(*a, 1).unwrap()[0], *b, "scattered byte at {a:#x}");
                }
                nbytes += rig.mem.len();
                rig.mem.clear();
            }
            // a record that failed its local checks (here: a bad lkey), in order behind nothing
            let mut wr = SendWr::new(wid, WrOpcode::Send, vec![Sge { addr: abuf, length: 16, lkey: amr.lkey ^ 0x55 }]);
            wr.flags.signaled = false;
            let psn = p.a.qp(qa).unwrap().req.psn;
            p.a.post_send(qa, wr.clone()).unwrap();
            assert!(p.a.poll(0).is_empty());
            let want: Vec<Cq> = p.a.poll_cq(p.cq_a, 10).iter().map(|wc| cq_of_wc(wc, cqn as u64)).collect();
            assert_eq!(want.len(), 1);
            assert_eq!(want[0].status, wc_status_code(WcStatus::LocProtErr) as u64);
            let rec = ReqIssued {
                qpn: bits(qa as u64),
                wr_id: bits(wid),
                wr_op: bits(wr_opcode_code(WrOpcode::Send) as u64),
                signaled: false,
                first_psn: bits(psn as u64),
                next_psn: bits(psn as u64),
                status: bits(wc_status_code(WcStatus::LocProtErr) as u64),
                len: bits(16),
                ..Default::default()
            };
            rig.run(&[rec], &[]);
            assert_eq!(std::mem::take(&mut rig.cqs), want, "seq {s}: error record");
            let drops = p.a.counters().drop_count(DropReason::NoPendingWqe) + p.a.counters().drop_count(DropReason::StaleResponse) - drops0;
            assert_eq!(rig.counter(CNT_DROPPED) - dropped0, drops, "seq {s}: dropped responses");
            assert_eq!(rig.counter(CNT_ACKS) - racks0, p.a.counters().acks_received - acks0, "seq {s}: ACKs");
        }
        assert!(rig.full_stalls > 0, "no batch filled a QP's list");
        assert!(rig.fast > 20, "{} read responses took the fast path", rig.fast);
        assert_eq!(rig.counter(CNT_BAD), 0);
        assert_eq!(rig.counter(CNT_IMPLIED_NAKS), 0);
        assert!(rig.counter(CNT_ATOMIC_ACKS) > 10, "{} atomics", rig.counter(CNT_ATOMIC_ACKS));
        (ncq, nbytes, coalesced)
    }

    /// rxe `check_init_depth` needs the READ/atomic WQEs retired: the Completer counts them (`fin`, sent to
    /// WQE Check with the window) once per WQE, whatever else happens. SENDs are not counted; a go-back-N,
    /// whose records come again from WQE Check (the head's is dropped, the later ones are replaced), counts
    /// nothing twice; a WQE that completes in error or flushed is counted; a CMD_WRITE_QP to RESET clears it.
    #[test]
    fn retired_reads_and_atomics_are_counted_once_each() {
        use rnic_driver::host::{WR_RDMA_READ, WR_SEND};
        let mut rig = Rig::new(13);
        let q = 0x24u32;
        // timeout 1: 2 units
        rig.set_qp(q, 0x53, 1, 7, 7);
        assert_eq!(rig.fin.get(&(q as u64)), Some(&0));
        let p = 0x300u32;
        let only = RC_RDMA_READ_RESPONSE_ONLY;
        let r1 = rec(q, 1, WR_RDMA_READ, p, 1, 64, true, WcStatus::Success);
        let r2 = rec(q, 2, WR_RDMA_READ, p + 1, 1, 64, true, WcStatus::Success);
        let s3 = rec(q, 3, WR_SEND, p + 2, 1, 8, true, WcStatus::Success);
        let r4 = rec(q, 4, WR_RDMA_READ, p + 3, 1, 64, true, WcStatus::Success);
        rig.run(&[r1, r2, s3, r4], &[read_resp(q, p, only, vec![1; 64])]);
        assert_eq!(rig.fin[&(q as u64)], 1, "the first READ retired");
        // silence: go-back-N to the second READ, its records come again (the rig plays WQE Check)
        rig.min_cycles = 12 * TIMER_TICK;
        rig.run(&[], &[]);
        rig.min_cycles = 0;
        assert_eq!(rig.rewinds.first().map(|r| (r.0, r.1)), Some((q as u64, 2)));
        assert_eq!(rig.fin[&(q as u64)], 1);
        rig.run(&[], &[read_resp(q, p + 1, only, vec![2; 64]), ack(q, p + 2, 0), read_resp(q, p + 3, only, vec![4; 64])]);
        let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got, vec![(1, 0), (2, 0), (3, 0), (4, 0)]);
        assert_eq!(rig.fin[&(q as u64)], 3, "three READs, each counted once");
        // an error completion and a flush count too
        let r5 = rec(q, 5, WR_RDMA_READ, p + 4, 1, 64, true, WcStatus::Success);
        let r6 = rec(q, 6, WR_RDMA_READ, p + 5, 1, 64, true, WcStatus::Success);
        rig.run(&[r5, r6], &[ack(q, p + 4, 0x62)]);
        assert_eq!(rig.fin[&(q as u64)], 5);
        // RESET: from 0 again
        rig.set_qp_to(q, 0x53, 1, 7, 7, true);
        assert_eq!(rig.fin[&(q as u64)], 0);
    }

    #[test]
    fn completer_matches_the_golden_requester() {
        let (ncq, nbytes, coalesced) = campaign(7, 12);
        assert!(ncq > 100, "{ncq} completions");
        assert!(nbytes > 10_000, "{nbytes} bytes scattered");
        assert!(coalesced > 10, "{coalesced} ACKs coalesced");
    }

    fn ack(qpn: u32, psn: u32, syndrome: u8) -> Resp {
        let mut h = RxHeader::default();
        h.opcode = bits(RC_ACKNOWLEDGE as u64);
        h.dest_qpn = bits(qpn as u64);
        h.psn = bits(psn as u64);
        h.ext = bits::<352>(syndrome as u64);
        Resp { h, ew: 1, pay: Vec::new() }
    }

    fn read_resp(qpn: u32, psn: u32, op: u8, pay: Vec<u8>) -> Resp {
        let mut r = ack(qpn, psn, AETH_TYPE_ACK | 0x1F);
        r.h.opcode = bits(op as u64);
        if op == RC_RDMA_READ_RESPONSE_MIDDLE {
            r.ew = 0;
            r.h.ext = bits::<352>(0xEE); // no AETH: whatever follows
        }
        r.pay = pay;
        r
    }

    fn rec(qpn: u32, wr_id: u64, op: u8, psn: u32, npkts: u32, len: u64, signaled: bool, status: WcStatus) -> ReqIssued {
        ReqIssued {
            qpn: bits(qpn as u64),
            wr_id: bits(wr_id),
            wr_op: bits(op as u64),
            signaled,
            idx: bits(wr_id & 0xFFFF),
            first_psn: bits(psn as u64),
            next_psn: bits(psn_add(psn, npkts) as u64),
            status: bits(wc_status_code(status) as u64),
            laddr: bits(0x1000 * (wr_id + 1)),
            len: bits(len),
            ..Default::default()
        }
    }

    /// Go-back-N (`docs/rxe-rules.md` section 4): a PSN-sequence NAK acknowledges everything before its PSN and rewinds
    /// to the oldest incomplete WQE, resumed after the packets acknowledged; a repeat of it before progress
    /// does not rewind again; the retransmit timer (4.096 us x 2^timeout) rewinds when nothing comes back;
    /// retry_cnt counts both down and its end is RETRY_EXC_ERR with the later WQEs flushed; an RNR NAK waits
    /// its encoded time before the rewind, and the end of rnr_retry is RNR_RETRY_EXC_ERR; NAK 0x61/0x62/0x63
    /// complete the head WQE with their own status.
    #[test]
    fn go_back_n_on_nak_timeout_and_rnr() {
        use rnic_driver::host::{WR_RDMA_WRITE, WR_SEND};
        let st = |w: WcStatus| wc_status_code(w) as u64;
        let mut rig = Rig::new(5);
        let q = 0x21u32;
        // timeout 1: 2 units (2,640 cycles); retry_cnt 2
        rig.set_qp(q, 0x50, 1, 2, 7);
        let p = 0x100u32;
        let w1 = rec(q, 1, WR_SEND, p, 3, 3000, true, WcStatus::Success);
        let w2 = rec(q, 2, WR_RDMA_WRITE, p + 3, 1, 100, true, WcStatus::Success);
        rig.run(&[w1, w2], &[ack(q, p, 0), ack(q, p + 2, 0x60)]);
        assert_eq!(rig.rewinds, vec![(q as u64, 1, (p + 2) as u64, 2)], "back to W1 after its 2 acknowledged packets");
        assert!(rig.cqs.is_empty());
        rig.run(&[], &[ack(q, p + 2, 0x60)]);
        assert_eq!(rig.rewinds.len(), 1, "no second go-back-N for the same NAK before progress");
        // silence: one timeout (retry_cnt 1 -> 0), then the next one ends it
        rig.min_cycles = 12 * TIMER_TICK;
        rig.run(&[], &[]);
        assert_eq!(rig.rewinds.len(), 2);
        assert_eq!(rig.rewinds[1], (q as u64, 1, (p + 2) as u64, 2));
        assert_eq!((rig.counter(CNT_RETRIES), rig.counter(CNT_TIMEOUTS)), (2, 1));
        let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got, vec![(1, st(WcStatus::RetryExcErr)), (2, st(WcStatus::WrFlushErr))]);
        assert_eq!(rig.qerrs, vec![q as u64], "WQE Check is told the QP is in error, once");
        rig.cqs.clear();
        rig.min_cycles = 0;

        // RNR: no retransmit timer (timeout 0), rnr_retry 1; RNR NAK timer code 1 (0.01 ms: 3 units)
        let q2 = 0x22u32;
        rig.set_qp(q2, 0x51, 0, 7, 1);
        let w3 = rec(q2, 3, WR_SEND, 0x500, 1, 10, true, WcStatus::Success);
        // the RNR NAK, then a PSN-sequence NAK for the packet behind it (as rxe sends): it must not cut the wait
        rig.run(&[w3], &[ack(q2, 0x500, 0x21), ack(q2, 0x500, 0x60)]);
        assert_eq!(rig.rewinds.len(), 2, "the RNR wait has not passed yet");
        rig.min_cycles = 6 * TIMER_TICK;
        rig.run(&[], &[]);
        assert_eq!(rig.rewinds[2..], [(q2 as u64, 3, 0x500, 0)], "after the RNR wait: back to W3");
        rig.min_cycles = 0;
        rig.run(&[], &[ack(q2, 0x500, 0x21)]);
        let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got, vec![(3, st(WcStatus::RnrRetryExcErr))]);
        assert_eq!(rig.qerrs, vec![q as u64, q2 as u64]);
        rig.cqs.clear();

        // NAK codes: invalid request, remote access error, remote operational error (and an unknown code)
        for (i, (syn, want)) in [(0x61u8, WcStatus::RemInvReqErr), (0x62, WcStatus::RemAccessErr), (0x63, WcStatus::RemOpErr), (0x67, WcStatus::RemOpErr)]
            .into_iter()
            .enumerate()
        {
            let qn = 0x30 + i as u32;
            rig.set_cq(qn, 0x52);
            let a = rec(qn, 10, WR_RDMA_WRITE, 0x900, 1, 64, false, WcStatus::Success);
            let b = rec(qn, 11, WR_SEND, 0x901, 1, 64, false, WcStatus::Success);
            rig.run(&[a, b], &[ack(qn, 0x900, syn)]);
            let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
            assert_eq!(got, vec![(10, st(want)), (11, st(WcStatus::WrFlushErr))], "NAK {syn:#x}");
            assert_eq!(rig.qerrs.last(), Some(&(qn as u64)), "NAK {syn:#x}");
            rig.cqs.clear();
        }
        assert_eq!(rig.rewinds.len(), 3);
        assert_eq!(rig.qerrs.len(), 6);
    }

    /// rxe `COMPST_EXIT`: every response, even one dropped as stale, pushes the retransmit timer back while
    /// PSNs are outstanding. A READ whose first response was lost, followed by its later responses one every
    /// 2,000 cycles for four timeout periods: no timeout (each is dropped, none is progress); then silence:
    /// exactly one timeout, from the first missing PSN. Fails with the push-back removed (a timeout after
    /// the first 5,280 cycles, with the responses still coming).
    #[test]
    fn stale_responses_push_the_retransmit_timer_back() {
        use rnic_driver::host::WR_RDMA_READ;
        let mut rig = Rig::new(11);
        let q = 0x23u32;
        // timeout 2: 4 units (5,280 cycles)
        rig.set_qp(q, 0x53, 2, 7, 7);
        let p = 0x300u32;
        // a READ of 24 packets at MTU 256
        let w = rec(q, 1, WR_RDMA_READ, p, 24, 24 * 256, true, WcStatus::Success);
        rig.run(&[w], &[]);
        for i in 0..12u32 {
            rig.min_cycles = 2_000;
            rig.run(&[], &[read_resp(q, p + 1 + i, RC_RDMA_READ_RESPONSE_MIDDLE, vec![0xA5; 256])]);
        }
        rig.min_cycles = 0;
        assert_eq!(rig.counter(CNT_DROPPED), 12, "each later response is dropped (its first is missing)");
        assert!(rig.rewinds.is_empty(), "no go-back-N while responses keep coming: {:?}", rig.rewinds);
        assert_eq!(rig.counter(CNT_TIMEOUTS), 0);
        // (one period and a quarter: the rewind re-arms the timer, whose next expiry is after this)
        rig.min_cycles = 5 * TIMER_TICK;
        rig.run(&[], &[]);
        assert_eq!(rig.rewinds, vec![(q as u64, 1, p as u64, 0)], "silence: back to the READ's first PSN");
        assert_eq!(rig.counter(CNT_TIMEOUTS), 1);
    }

    /// The Requester reports a WQE after its last packet, so an ACK of the WQE's first packets can come while
    /// the QP has nothing pending here. It counts once the record comes (rxe's completer knew the WQE before it
    /// was sent): the QP's window starts from it (a 1 MiB WRITE otherwise waited for its last ACK before the
    /// next WQE could start). Not an ACK behind the WQE, nor one inside a READ's PSNs (its responses start at
    /// its first PSN).
    #[test]
    fn an_ack_before_its_wqes_record_counts_for_the_window() {
        use rnic_driver::host::{WR_RDMA_READ, WR_RDMA_WRITE};
        let mut rig = Rig::new(23);
        let q = 0x31u32;
        rig.set_cq(q, 0x41);
        let win = |rig: &Rig| *rig.wins.iter().rev().find(|w| w.0 == q as u64).expect("a window write");
        // a 200-packet WRITE across the PSN wrap; the ACK of its first 40 packets comes before its record
        let p = 0xFF_FFC0u32;
        rig.run(&[], &[ack(q, psn_add(p, 39), 0x1F)]);
        assert_eq!(rig.counter(CNT_DROPPED), 1, "nothing pending: counted as dropped");
        rig.run(&[rec(q, 1, WR_RDMA_WRITE, p, 200, 200 * 256, true, WcStatus::Success)], &[]);
        assert_eq!(win(&rig), (q as u64, true, psn_add(p, 40 + 128) as u64), "the window starts after the ACKed 40");
        // an ACK below the one taken is stale; the last one completes the WRITE
        rig.run(&[], &[ack(q, psn_add(p, 20), 0x1F), ack(q, psn_add(p, 199), 0x1F)]);
        assert_eq!(rig.counter(CNT_DROPPED), 2, "the older ACK is stale");
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0)]);
        assert_eq!(win(&rig), (q as u64, false, psn_add(p, 200 + 128) as u64));
        // an ACK behind the next WRITE (a late duplicate): its window starts at its first PSN
        let p2 = psn_add(p, 200);
        rig.run(&[], &[ack(q, psn_add(p, 150), 0x1F)]);
        rig.run(&[rec(q, 2, WR_RDMA_WRITE, p2, 10, 10 * 256, true, WcStatus::Success)], &[]);
        assert_eq!(win(&rig), (q as u64, true, psn_add(p2, 128) as u64), "a stale ACK does not count");
        rig.run(&[], &[ack(q, psn_add(p2, 9), 0x1F)]);
        // an ACK inside a READ's PSNs before its record: the READ's responses still count from its first PSN
        let p3 = psn_add(p2, 10);
        rig.run(&[], &[ack(q, psn_add(p3, 1), 0x1F)]);
        rig.run(&[rec(q, 3, WR_RDMA_READ, p3, 4, 4 * 256, true, WcStatus::Success)], &[]);
        assert_eq!(win(&rig), (q as u64, true, psn_add(p3, 128) as u64), "not for a READ");
        rig.run(
            &[],
            &[
                read_resp(q, p3, RC_RDMA_READ_RESPONSE_FIRST, vec![1; 256]),
                read_resp(q, psn_add(p3, 1), RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
                read_resp(q, psn_add(p3, 2), RC_RDMA_READ_RESPONSE_MIDDLE, vec![3; 256]),
                read_resp(q, psn_add(p3, 3), RC_RDMA_READ_RESPONSE_LAST, vec![4; 256]),
            ],
        );
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0), (2, 0), (3, 0)]);
        let a = 0x1000 * 4;
        assert!((0..1024u64).all(|i| rig.mem.get(&(a + i)) == Some(&(1 + (i / 256) as u8))), "the READ's data");
    }

    /// A PSN-sequence NAK for a WQE that is still being sent (its record comes after its last packet) finds the
    /// QP's list empty. It acknowledges what is before its PSN at once (the window moves on), and the go-back-N
    /// it asks for starts when the WQE's record comes, from the NAK's PSN inside the WQE, without waiting for
    /// the retransmit timer (before, the NAK was dropped as "nothing pending" and only a timeout recovered:
    /// against rxe, 88 timeouts where the golden model had 6, `ib_write_bw` at 2 % loss). A NAK older than
    /// `comp_psn` with nothing pending stays a stale response.
    #[test]
    fn a_nak_before_its_wqes_record_goes_back_when_the_record_comes() {
        use rnic_driver::host::WR_RDMA_WRITE;
        let mut rig = Rig::new(29);
        let q = 0x32u32;
        // no retransmit timer: only the NAK can start the go-back-N
        rig.set_qp(q, 0x52, 0, 7, 7);
        let win = |rig: &Rig| *rig.wins.iter().rev().find(|w| w.0 == q as u64).expect("a window write");
        let p = 0xFF_FFF0u32;
        rig.run(&[], &[ack(q, psn_add(p, 16), 0x60)]);
        assert_eq!(rig.counter(CNT_DROPPED), 0, "the NAK is not dropped");
        assert_eq!(win(&rig), (q as u64, false, psn_add(p, 16 + 128) as u64), "acknowledged up to the NAK's PSN");
        assert!(rig.rewinds.is_empty(), "nothing to rewind to before the record");
        rig.run(&[rec(q, 1, WR_RDMA_WRITE, p, 64, 64 * 256, true, WcStatus::Success)], &[]);
        assert_eq!(rig.rewinds, vec![(q as u64, 1, psn_add(p, 16) as u64, 16)], "back to the NAK's PSN inside the WRITE");
        assert_eq!((rig.counter(CNT_RETRIES), rig.counter(CNT_TIMEOUTS)), (1, 0));
        rig.run(&[], &[ack(q, psn_add(p, 63), 0x1F)]);
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0)]);
        // a stale NAK with nothing pending: dropped, no go-back-N for the next WRITE
        rig.run(&[], &[ack(q, psn_add(p, 20), 0x60)]);
        assert_eq!(rig.counter(CNT_DROPPED), 1);
        rig.run(&[rec(q, 2, WR_RDMA_WRITE, psn_add(p, 64), 2, 512, true, WcStatus::Success)], &[ack(q, psn_add(p, 65), 0x1F)]);
        assert_eq!(rig.rewinds.len(), 1);
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0), (2, 0)]);
    }

    /// A QP's first WQE starting high in the PSN space (sq_psn 0xFFFFF0, its 40 packets across the wrap), a NAK
    /// at 0xFFFFFB before the WQE's record. The QP's comp_psn is its sq_psn from CMD_WRITE_QP_REQ (rxe: comp.psn
    /// = sq_psn at RTS), so the NAK is taken and the go-back-N starts at 0xFFFFFB (skip 11). Before, comp_psn
    /// was 0: the NAK looked stale, the record then took 0 for an ACK already covering 16 packets, and every
    /// retransmission resumed at PSN 0 while the peer waited for 0xFFFFFB (a requester campaign at MTU 256 hung).
    #[test]
    fn a_first_wqe_across_the_psn_wrap_goes_back_to_the_naks_psn() {
        use rnic_driver::host::WR_RDMA_WRITE;
        let mut rig = Rig::new(31);
        let q = 0x33u32;
        rig.set_qp(q, 0x53, 0, 7, 7);
        let p = 0xFF_FFF0u32;
        rig.set_sq_psn(q, p);
        rig.run(&[], &[ack(q, psn_add(p, 11), 0x60)]);
        assert_eq!(rig.counter(CNT_DROPPED), 0, "the NAK is not stale");
        rig.run(&[rec(q, 1, WR_RDMA_WRITE, p, 40, 40 * 256, true, WcStatus::Success)], &[]);
        assert_eq!(rig.rewinds, vec![(q as u64, 1, psn_add(p, 11) as u64, 11)], "back to the NAK's PSN");
        rig.run(&[], &[ack(q, psn_add(p, 39), 0x1F)]);
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, 0)]);
        // without the sq_psn, the same NAK finds comp_psn 0 ahead of it: the failure this guards against
        let mut old = Rig::new(31);
        old.set_qp(q, 0x53, 0, 7, 7);
        old.run(&[], &[ack(q, psn_add(p, 11), 0x60)]);
        assert_eq!(old.counter(CNT_DROPPED), 1, "stale against comp_psn 0");
    }

    /// ATOMIC_ACKNOWLEDGE: the original value (big-endian in AtomicAckETH) lands in the WQE's local buffer in
    /// host byte order, 8 bytes and no more, and the atomic completes with its own WC opcode after the WRITE
    /// before it; an atomic ACK for a WRITE is a bad response.
    #[test]
    fn an_atomic_ack_writes_the_original_value_and_completes_the_atomic() {
        use rnic_driver::host::{WC_COMP_SWAP, WC_FETCH_ADD, WC_RDMA_WRITE, WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD, WR_RDMA_WRITE};
        let atomic_ack = |qpn: u32, psn: u32, orig: u64| {
            let mut r = ack(qpn, psn, AETH_TYPE_ACK | 0x1F);
            r.h.opcode = bits(RC_ATOMIC_ACKNOWLEDGE as u64);
            let mut ext = bits::<352>(u64::from(AETH_TYPE_ACK | 0x1F));
            for (j, b) in orig.to_be_bytes().iter().enumerate() {
                ext.set_bits::<8>(8 * (4 + j), bits::<8>(*b as u64));
            }
            r.h.ext = ext;
            r.ew = 3;
            r
        };
        let mut rig = Rig::new(9);
        let q = 0x44u32;
        rig.set_cq(q, 0x60);
        let p = 0xFF_FFFE;
        let w = rec(q, 1, WR_RDMA_WRITE, p, 1, 64, true, WcStatus::Success);
        let f = rec(q, 2, WR_ATOMIC_FETCH_AND_ADD, psn_add(p, 1), 1, 8, true, WcStatus::Success);
        let c = rec(q, 3, WR_ATOMIC_CMP_AND_SWP, psn_add(p, 2), 1, 8, true, WcStatus::Success);
        let orig_f = 0x0102_0304_0506_0708u64;
        let orig_c = 0xF0E0_D0C0_B0A0_9080u64;
        rig.run(&[w, f, c], &[ack(q, p, 0x1F), atomic_ack(q, psn_add(p, 1), orig_f), atomic_ack(q, psn_add(p, 2), orig_c)]);
        let got: Vec<(u64, u64, u64, u64)> = rig.cqs.iter().map(|x| (x.wr_id, x.status, x.opcode, x.byte_len)).collect();
        assert_eq!(got, vec![(1, 0, WC_RDMA_WRITE as u64, 64), (2, 0, WC_FETCH_ADD as u64, 8), (3, 0, WC_COMP_SWAP as u64, 8)]);
        for (wr, orig) in [(2u64, orig_f), (3, orig_c)] {
            let a = 0x1000 * (wr + 1);
            let m: Vec<u8> = (0..8).map(|i| *rig.mem.get(&(a + i)).expect("scattered")).collect();
            assert_eq!(m, orig.to_le_bytes(), "WQE {wr}: the original value in host byte order");
            assert!(!rig.mem.contains_key(&(a + 8)) && !rig.mem.contains_key(&(a - 1)), "8 bytes, no more");
        }
        assert_eq!(rig.counter(CNT_ATOMIC_ACKS), 2);
        // an ATOMIC_ACKNOWLEDGE for a WRITE: BAD_RESP
        rig.cqs.clear();
        let q2 = 0x45u32;
        rig.set_cq(q2, 0x61);
        rig.run(&[rec(q2, 7, WR_RDMA_WRITE, 0x10, 1, 64, true, WcStatus::Success)], &[atomic_ack(q2, 0x10, 5)]);
        assert_eq!(rig.cqs.iter().map(|x| (x.wr_id, x.status)).collect::<Vec<_>>(), vec![(7, wc_status_code(WcStatus::BadRespErr) as u64)]);
    }

    /// The timer scan never passes an expired timer by: 16 QPs with consecutive QPNs, each with an
    /// unacknowledged WQE and no response ever, all time out and go back (the event machine is busy for a few
    /// cycles after each report; a scan that skipped QPs while it was busy fell into step with it and never
    /// reported some of them: found by `rnic campaign --role atomics`, QPs hung with lost ACKs).
    #[test]
    fn every_expired_timer_is_served() {
        use rnic_driver::host::WR_RDMA_WRITE;
        let mut rig = Rig::new(17);
        let qs: Vec<u32> = (0x40..0x50).collect();
        for &q in &qs {
            rig.set_qp(q, 0x70, 1, 7, 7);
        }
        let recs: Vec<ReqIssued> = qs.iter().map(|&q| rec(q, q as u64, WR_RDMA_WRITE, 0x100, 1, 64, true, WcStatus::Success)).collect();
        rig.min_cycles = 40 * TIMER_TICK;
        rig.run(&recs, &[]);
        let mut back: Vec<u64> = rig.rewinds.iter().map(|r| r.0).collect();
        back.sort_unstable();
        back.dedup();
        assert_eq!(back, qs.iter().map(|&q| q as u64).collect::<Vec<_>>(), "every QP went back after its timeout");
        assert!(rig.counter(CNT_TIMEOUTS) >= 32, "{} timeouts", rig.counter(CNT_TIMEOUTS));
    }

    /// The head WQE fails its local checks when WQE Check reads it again after a rewind (its MR deregistered
    /// since it was first sent): it completes with that status, the QP goes to error and the WQE behind it is
    /// flushed, instead of the QP waiting for responses that cannot come (a hang before the fix: the record
    /// was dropped as "the head sent again").
    #[test]
    fn a_head_wqe_that_fails_when_sent_again_completes_with_its_error() {
        use rnic_driver::host::{WR_RDMA_WRITE, WR_SEND};
        let mut rig = Rig::new(5);
        let q = 0x21;
        rig.set_qp(q, 0x44, 1, 7, 7);
        rig.fail_again = Some((q as u64, 1, WcStatus::LocProtErr));
        let w1 = ReqIssued { idx: bits(1), ..rec(q, 1, WR_RDMA_WRITE, 0x10, 2, 2000, true, WcStatus::Success) };
        let w2 = ReqIssued { idx: bits(2), ..rec(q, 2, WR_SEND, 0x12, 1, 10, false, WcStatus::Success) };
        // no response ever: the retransmit timer sends the QP back to W1, which fails this time
        rig.min_cycles = 40 * TIMER_TICK;
        rig.run(&[w1, w2], &[]);
        assert_eq!(rig.rewinds.first().map(|r| (r.0, r.1)), Some((q as u64, 1)), "back to W1 after the timeout");
        let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
        let st = |w: WcStatus| wc_status_code(w) as u64;
        assert_eq!(got, vec![(1, st(WcStatus::LocProtErr)), (2, st(WcStatus::WrFlushErr))]);
        assert_eq!(rig.qerrs, vec![q as u64], "the QP goes to error");
        assert_eq!(rig.rewinds.len(), 1, "no more go-back-N on a QP in error");
    }

    #[test]
    fn stale_unmatched_errors_in_order_and_bad_responses() {
        use rnic_driver::host::{WC_RDMA_READ, WC_SEND, WR_RDMA_READ, WR_SEND};
        let mut rig = Rig::new(3);
        let q = 0x15;
        rig.set_cq(q, 0x42);
        let p0 = 0xFF_FFFE;
        // a response for a QP with nothing pending
        rig.run(&[], &[ack(q, p0, 0)]);
        assert_eq!(rig.counter(CNT_DROPPED), 1);
        assert_eq!(rig.counter(CNT_ACKS), 1);
        assert!(rig.cqs.is_empty());
        // W1 SEND (psn p0), E2 failed locally (unsignaled), W3 SEND 2 packets (p0+1, p0+2; wraps)
        let w1 = rec(q, 1, WR_SEND, p0, 1, 10, true, WcStatus::Success);
        let e2 = rec(q, 2, WR_SEND, psn_add(p0, 1), 0, 20, false, WcStatus::LocProtErr);
        let w3 = rec(q, 3, WR_SEND, psn_add(p0, 1), 2, 3000, false, WcStatus::Success);
        rig.run(&[w1, e2, w3], &[]);
        assert!(rig.cqs.is_empty(), "E2 waits behind W1");
        // a PSN-sequence NAK at W1's PSN: go back to W1 (the WQEs are sent again: nothing completes); an RNR
        // NAK: a wait (655 ms: longer than this test) before the next go-back-N
        // NAK (the RNR NAK once the rewind is through WQE Check: while a rewind is on its way, responses are
        // dropped)
        rig.run(&[], &[ack(q, p0, 0x60)]);
        rig.run(&[], &[ack(q, p0, 0x20)]);
        assert_eq!((rig.counter(CNT_NAKS), rig.counter(CNT_RNR_NAKS)), (1, 1));
        assert_eq!(rig.counter(CNT_DROPPED), 1);
        assert_eq!(rig.rewinds, vec![(q as u64, 1, p0 as u64, 0)]);
        assert!(rig.cqs.is_empty());
        // ACK of W1's PSN: W1 completes, E2 follows in order; a duplicate of it is stale
        rig.run(&[], &[ack(q, p0, 0), ack(q, p0, 0)]);
        let got: Vec<(u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got, vec![(1, 0), (2, wc_status_code(WcStatus::LocProtErr) as u64)]);
        assert_eq!(rig.cqs[1].byte_len, 20);
        assert_eq!(rig.cqs[1].opcode, WC_SEND as u64);
        assert_eq!(rig.cqs[0].cqn, 0x42);
        rig.cqs.clear();
        assert_eq!(rig.counter(CNT_DROPPED), 2);
        // a mid-message ACK of W3 advances comp_psn; an ACK below it is stale; the last ACK completes W3
        // silently (unsignaled)
        rig.run(&[], &[ack(q, psn_add(p0, 1), 0), ack(q, p0, 0), ack(q, psn_add(p0, 2), 0)]);
        assert!(rig.cqs.is_empty());
        assert_eq!(rig.counter(CNT_DROPPED), 3);
        // R4 READ of 300 bytes (2 packets at MTU 256), then W5: a MIDDLE before FIRST is a bad response: R4
        // BAD_RESP, W5 flushed, later responses and records of the QP flushed/dropped
        let p4 = psn_add(p0, 3);
        let r4 = rec(q, 4, WR_RDMA_READ, p4, 2, 300, true, WcStatus::Success);
        let w5 = rec(q, 5, WR_SEND, psn_add(p4, 2), 1, 8, false, WcStatus::Success);
        // first a later response of the READ whose FIRST is missing: dropped; an ACK beyond it: implied NAK
        rig.run(&[r4, w5], &[read_resp(q, psn_add(p4, 1), RC_RDMA_READ_RESPONSE_LAST, vec![7; 44])]);
        rig.run(&[], &[ack(q, psn_add(p4, 2), 0)]);
        assert_eq!(rig.counter(CNT_DROPPED), 4);
        assert_eq!(rig.counter(CNT_IMPLIED_NAKS), 1);
        assert!(rig.mem.is_empty(), "nothing scattered from a dropped response");
        rig.run(&[], &[read_resp(q, p4, RC_RDMA_READ_RESPONSE_MIDDLE, vec![9; 256])]);
        let got: Vec<(u64, u64, u64)> = rig.cqs.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
        assert_eq!(
            got,
            vec![
                (4, wc_status_code(WcStatus::BadRespErr) as u64, WC_RDMA_READ as u64),
                (5, wc_status_code(WcStatus::WrFlushErr) as u64, WC_SEND as u64)
            ]
        );
        assert_eq!(rig.counter(CNT_BAD), 1);
        rig.cqs.clear();
        let w6 = rec(q, 6, WR_SEND, psn_add(p4, 3), 1, 8, true, WcStatus::Success);
        rig.run(&[w6], &[ack(q, psn_add(p4, 3), 0)]);
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(6, wc_status_code(WcStatus::WrFlushErr) as u64)]);
        rig.cqs.clear();
        assert_eq!(rig.counter(CNT_DROPPED), 5);
        // CMD_WRITE_QP clears the error: a READ works again; a payload beyond its length is LOC_LEN_ERR
        rig.set_cq(q, 0x43);
        let p7 = 0x1234;
        let r7 = rec(q, 7, WR_RDMA_READ, p7, 2, 300, true, WcStatus::Success);
        rig.run(
            &[r7],
            &[
                read_resp(q, p7, RC_RDMA_READ_RESPONSE_FIRST, (0..=255).collect()),
                read_resp(q, psn_add(p7, 1), RC_RDMA_READ_RESPONSE_LAST, (0..44).map(|i| 100 + i).collect()),
            ],
        );
        assert_eq!(rig.cqs.len(), 1);
        assert_eq!((rig.cqs[0].wr_id, rig.cqs[0].status, rig.cqs[0].byte_len, rig.cqs[0].cqn), (7, 0, 300, 0x43));
        let want: Vec<u8> = (0..=255u8).chain((0..44).map(|i| 100 + i)).collect();
        let got: Vec<u8> = (0..300).map(|i| rig.mem[&(0x8000 + i)]).collect();
        assert_eq!(got, want);
        assert_eq!(rig.mem.len(), 300);
        rig.cqs.clear();
        let r8 = rec(q, 8, WR_RDMA_READ, 0x2000, 1, 100, false, WcStatus::Success);
        rig.run(&[r8], &[read_resp(q, 0x2000, RC_RDMA_READ_RESPONSE_ONLY, vec![1; 101])]);
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(8, wc_status_code(WcStatus::LocLenErr) as u64)]);
        assert_eq!(rig.mem.len(), 300, "nothing placed from the over-long response");
    }

    /// The fast path's edges: a LAST longer than the room left (LOC_LEN_ERR), a MIDDLE past the READ's last
    /// PSN (implied NAK), a duplicate (stale), and another QP's response in between (the QP is reloaded).
    #[test]
    fn fast_path_edges_fall_back_to_the_rules() {
        use rnic_driver::host::WR_RDMA_READ;
        let mut rig = Rig::new(5);
        let (q, q2) = (0x31, 0x32);
        rig.set_cq(q, 0x9);
        let p = 0xFF_FFFF;
        // R1: 3 packets, 600 bytes; FIRST and MIDDLE land, the LAST carries 100 > 88 bytes left
        let r1 = rec(q, 1, WR_RDMA_READ, p, 3, 600, true, WcStatus::Success);
        rig.run(
            &[r1],
            &[
                read_resp(q, p, RC_RDMA_READ_RESPONSE_FIRST, vec![1; 256]),
                read_resp(q, psn_add(p, 1), RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
                read_resp(q, psn_add(p, 2), RC_RDMA_READ_RESPONSE_LAST, vec![3; 100]),
            ],
        );
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, wc_status_code(WcStatus::LocLenErr) as u64)]);
        assert_eq!(rig.mem.len(), 512);
        assert!((0..512).all(|i| rig.mem[&(0x2000 + i)] == 1 + (i / 256) as u8));
        assert_eq!(rig.fast, 1, "the MIDDLE took the fast path");
        rig.cqs.clear();
        rig.mem.clear();
        // R2 (after CMD_WRITE_QP): 3 packets, 1000 bytes; FIRST, another QP's ACK (no pending WQE), MIDDLE (slow:
        // the QP was reloaded), LAST (fast), the LAST again (no pending WQE)
        rig.set_cq(q, 0x9);
        let p2 = 0x100;
        let r2 = rec(q, 2, WR_RDMA_READ, p2, 3, 1000, true, WcStatus::Success);
        let dropped = rig.counter(CNT_DROPPED);
        rig.run(
            &[r2],
            &[
                read_resp(q, p2, RC_RDMA_READ_RESPONSE_FIRST, vec![4; 256]),
                ack(q2, 7, 0),
                read_resp(q, p2 + 1, RC_RDMA_READ_RESPONSE_MIDDLE, vec![5; 256]),
                read_resp(q, p2 + 2, RC_RDMA_READ_RESPONSE_LAST, vec![9; 488]),
                read_resp(q, p2 + 2, RC_RDMA_READ_RESPONSE_LAST, vec![9; 488]),
            ],
        );
        assert_eq!(rig.cqs.iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect::<Vec<_>>(), vec![(2, 0, 1000)]);
        let want: Vec<u8> = [4u8, 5].iter().flat_map(|&b| vec![b; 256]).chain(vec![9; 488]).collect();
        assert_eq!((0..1000).map(|i| rig.mem[&(0x3000 + i)]).collect::<Vec<u8>>(), want);
        assert_eq!(rig.counter(CNT_DROPPED) - dropped, 2, "no pending WQE: q2's ACK, the LAST again");
        assert_eq!(rig.fast, 2, "the LAST took the fast path");
        rig.cqs.clear();
        rig.mem.clear();
        // R3: 2 packets, 1000 bytes; FIRST, a MIDDLE at its last PSN (fast), a MIDDLE past it (implied NAK), the
        // MIDDLE again (stale)
        let p3 = 0x200;
        let r3 = rec(q, 3, WR_RDMA_READ, p3, 2, 1000, true, WcStatus::Success);
        rig.run(
            &[r3],
            &[
                read_resp(q, p3, RC_RDMA_READ_RESPONSE_FIRST, vec![1; 256]),
                read_resp(q, p3 + 1, RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
                read_resp(q, p3 + 2, RC_RDMA_READ_RESPONSE_MIDDLE, vec![3; 256]),
                read_resp(q, p3 + 1, RC_RDMA_READ_RESPONSE_MIDDLE, vec![2; 256]),
            ],
        );
        assert!(rig.cqs.is_empty());
        assert_eq!(rig.counter(CNT_IMPLIED_NAKS), 1);
        assert_eq!(rig.counter(CNT_DROPPED) - dropped, 3, "and the stale MIDDLE");
        assert_eq!(rig.fast, 3, "the in-order MIDDLE took the fast path");
        assert_eq!(rig.mem.len(), 512);
    }

    /// A stream of `nreads` READs of `npk` packets (the last carrying `last` bytes) on `qps` QPs in turn, their
    /// responses handed on as RX Parse and the top do (a header once the previous payload is all in), sinks
    /// always ready. The records come as the Requester issues them: `window` at the start, then READ
    /// `k + window`'s when READ `k`'s first response is taken, and a READ's responses only after its record.
    /// Checks every byte placed and every completion; returns the cycle each header was taken and how many
    /// of READ `window` and later took the fast path (before it, a record may be the first of its QP's empty
    /// list, which takes the general path).
    fn read_stream(mtu: u32, npk: u32, last: u32, qps: u32, nreads: usize, window: usize) -> (Vec<u64>, usize) {
        use rnic_driver::host::WR_RDMA_READ;
        let mut rig = Rig::new(11);
        for q in 0..qps {
            rig.set_cq(0x21 + q, 0x7);
        }
        let len = (npk as u64 - 1) * mtu as u64 + last as u64;
        let mut recs = Vec::new();
        let mut resps = Vec::new(); // (READ index, response)
        let mut want: BTreeMap<u64, u8> = BTreeMap::new();
        for k in 0..nreads {
            let q = 0x21 + k as u32 % qps;
            let psn0 = psn_add(0xFF_FFF0, (k as u32 / qps) * npk); // wraps inside the first READ
            let r = rec(q, k as u64, WR_RDMA_READ, psn0, npk, len, true, WcStatus::Success);
            for i in 0..npk {
                let op = if npk == 1 {
                    RC_RDMA_READ_RESPONSE_ONLY
                } else if i == 0 {
                    RC_RDMA_READ_RESPONSE_FIRST
                } else if i + 1 == npk {
                    RC_RDMA_READ_RESPONSE_LAST
                } else {
                    RC_RDMA_READ_RESPONSE_MIDDLE
                };
                let n = if i + 1 == npk { last as usize } else { mtu as usize };
                let pay: Vec<u8> = (0..n).map(|j| (j as u32 * 7 + i * 13 + k as u32 * 29) as u8).collect();
                for (j, b) in pay.iter().enumerate() {
                    want.insert(r.laddr.to_u64() + (i * mtu) as u64 + j as u64, *b);
                }
                resps.push((k, read_resp(q, psn_add(psn0, i), op, pay)));
            }
            recs.push(r);
        }
        let u = &mut rig.u;
        u.s_ready.next = true;
        u.s_pay.tready.next = true;
        u.cq_ready.next = true;
        let mut iq: VecDeque<ReqIssued> = recs.iter().take(window).copied().collect();
        let mut offered = iq.len();
        let mut accepted = 0usize;
        let mut next = 0usize;
        let mut beats: VecDeque<(Vec<u8>, bool)> = VecDeque::new();
        let mut cmds: VecDeque<(u64, u64)> = VecDeque::new();
        let mut cur: Option<(u64, Vec<u8>)> = None;
        let mut hdr_ok = true; // the previous payload is all taken (and a cycle has passed)
        let mut pay_ok = false; // the payload of the header taken last cycle may flow
        let mut taken_at: Vec<u64> = Vec::new();
        let mut cqs = 0;
        let mut fast = 0;
        let mut mem: BTreeMap<u64, u8> = BTreeMap::new();
        let mut cycle = 0u64;
        while cqs < nreads {
            cycle += 1;
            assert!(cycle < 200_000, "hung");
            let iv = !iq.is_empty();
            if iv {
                u.iss.next = iq[0];
            }
            u.iss_valid.next = iv;
            let hv = hdr_ok && next < resps.len() && resps[next].0 < accepted;
            if hv {
                let r = &resps[next].1;
                u.hdr.next = r.h;
                u.hdr_ext_words.next = bits(r.ew);
                u.hdr_pay_len.next = bits(r.pay.len() as u64);
            }
            u.hdr_valid.next = hv;
            let pv = pay_ok && !beats.is_empty();
            if pv {
                let (d, k) = beat_of(&beats[0].0);
                u.pay.tdata.next = d;
                u.pay.tkeep.next = k;
                u.pay.tlast.next = beats[0].1;
            }
            u.pay.tvalid.next = pv;
            u.clock.next = false.into();
            assert!(simulate(u, 200));
            let (mut new_hdr, mut new_pay) = (hdr_ok, pay_ok);
            if u.state.q.val() == CompState::FEnd && u.fc.q.val().get_bit(1) && taken_at.len() > window * npk as usize {
                fast += 1;
            }
            if iv && u.iss_ready.val() {
                iq.pop_front();
                accepted += 1;
            }
            if hv && u.hdr_ready.val() {
                let (k, r) = &resps[next];
                for (i, c) in r.pay.chunks(64).enumerate() {
                    beats.push_back((c.to_vec(), i + 1 == r.pay.len().div_ceil(64)));
                }
                if r.h.opcode.to_u64() as u8 != RC_RDMA_READ_RESPONSE_MIDDLE
                    && r.h.opcode.to_u64() as u8 != RC_RDMA_READ_RESPONSE_LAST
                    && k + window < nreads
                {
                    assert_eq!(offered, k + window);
                    iq.push_back(recs[k + window]);
                    offered += 1;
                }
                next += 1;
                taken_at.push(cycle);
                new_hdr = false;
                new_pay = true;
            }
            if pv && u.pay.tready.val() {
                let (_, last) = beats.pop_front().unwrap();
                if last {
                    new_hdr = true;
                    new_pay = false;
                }
            }
            if u.s_valid.val() {
                cmds.push_back((u.s_addr.val().to_u64(), u.s_len.val().to_u64()));
            }
            if u.s_pay.tvalid.val() {
                let c = cur.get_or_insert_with(|| (cmds.pop_front().expect("payload before its command").0, Vec::new()));
                for i in 0..64 {
                    if u.s_pay.tkeep.val().get_bit(i) {
                        c.1.push(u.s_pay.tdata.val().get_bits::<8>(8 * i).to_u8());
                    }
                }
                if u.s_pay.tlast.val() {
                    let (a, d) = cur.take().unwrap();
                    for (i, b) in d.iter().enumerate() {
                        mem.insert(a + i as u64, *b);
                    }
                }
            }
            if u.cq_valid.val() {
                let got = (u.cq_wr_id.val().to_u64(), u.cq_status.val().to_u64(), u.cq_byte_len.val().to_u64());
                assert_eq!(got, (cqs as u64, 0, len), "completions in order, each READ's length, success");
                cqs += 1;
            }
            u.clock.next = true.into();
            assert!(simulate(u, 200));
            hdr_ok = new_hdr;
            pay_ok = new_pay;
        }
        assert_eq!(next, resps.len());
        assert!(mem == want, "READ data: every byte where it belongs, nothing else written");
        (taken_at, fast)
    }

    /// Cycles per read response at the RTL's best: one READ of `npk` packets at `mtu` (a header from the cycle
    /// after the previous payload's last beat, its payload from the cycle after the header). Returns the mean
    /// cycles between header hand-overs of the MIDDLE responses (steady state); `read_stream` checks that the
    /// READ completed and every byte landed.
    fn read_rate(mtu: u32, npk: u32) -> f64 {
        let (taken_at, _) = read_stream(mtu, npk, 100, 1, 1, 1);
        // MIDDLE headers: taken_at[1] .. taken_at[npk - 1] (the LAST's hand-over ends the last MIDDLE)
        (taken_at[npk as usize - 1] - taken_at[1]) as f64 / (npk - 2) as f64
    }

    /// Wire cycles per MIDDLE read response of `mtu` bytes at 100 Gb/s and the core clock: Ethernet + IPv4 +
    /// UDP + BTH + payload + ICRC + FCS, preamble and inter-packet gap.
    fn wire_cycles(mtu: u32) -> f64 {
        frame_cycles(mtu, 0)
    }

    /// Wire cycles of a response with `pay` bytes of payload and `ext` bytes of extension header (AETH: 4).
    fn frame_cycles(pay: u32, ext: u32) -> f64 {
        (14 + 20 + 8 + 12 + ext as u64 + pay as u64 + 4 + 4 + 8 + 12) as f64 * 8.0 / (100e9 / testbench::mac::CORE_HZ)
    }

    #[test]
    fn completer_keeps_up_with_read_responses_at_line_rate() {
        let rates: Vec<(u32, f64)> = [(256u32, 40u32), (1024, 24), (4096, 10)].iter().map(|&(m, k)| (m, read_rate(m, k))).collect();
        for &(mtu, c) in &rates {
            println!("MTU {mtu}: {c:.2} cycles per MIDDLE read response ({} payload beats; wire {:.2})", mtu / 64, wire_cycles(mtu));
        }
        for &(mtu, c) in &rates {
            let n = mtu / 64;
            assert!(c <= wire_cycles(mtu), "MTU {mtu}: {c} cycles per response, the wire brings one every {}", wire_cycles(mtu));
            assert!(c <= (n + 2) as f64, "MTU {mtu}: {c} cycles per response, more than the payload beats + 2");
        }
    }

    /// After a loss inside a READ, the peer may still send the rest of that READ's responses (and every later
    /// READ's) before the responses to the go-back-N come: each can only be dropped, and at MTU 256 they come
    /// one every 8.7 cycles at 100 Gb/s. The Completer must drop them at that pace (fast drop) or RX Parse's
    /// buffer overflows and the responses to the go-back-N are lost with them (the reads campaign at MTU 256
    /// hung with 19,031 overflow drops before). Back-to-back MIDDLE responses after the gap: every one dropped,
    /// no second go-back-N, nothing scattered, at most the wire's cycles each. Fails without `FDrop` (the rules'
    /// path takes more than 10 cycles per response).
    #[test]
    fn responses_after_a_gap_are_dropped_at_line_rate() {
        use rnic_driver::host::WR_RDMA_READ;
        let mut rig = Rig::new(31);
        let q = 0x27u32;
        rig.set_cq(q, 0x54);
        let (p, n) = (0x500u32, 32u32);
        // two READs of n packets; A's FIRST, then (its second response lost) B's FIRST: an implied NAK, the
        // go-back-N to p + 1 starts
        let a = rec(q, 1, WR_RDMA_READ, p, n, n as u64 * 256, true, WcStatus::Success);
        let b = rec(q, 2, WR_RDMA_READ, p + n, n, n as u64 * 256, true, WcStatus::Success);
        rig.run(
            &[a, b],
            &[read_resp(q, p, RC_RDMA_READ_RESPONSE_FIRST, vec![0x11; 256]), read_resp(q, p + n, RC_RDMA_READ_RESPONSE_FIRST, vec![0x22; 256])],
        );
        assert_eq!(rig.rewinds, vec![(q as u64, 1, (p + 1) as u64, 1)], "the implied NAK goes back to p + 1");
        let dropped0 = rig.counter(CNT_DROPPED) + rig.counter(CNT_IMPLIED_NAKS);
        let mem0 = rig.mem.clone();
        // the rest of both READs as the peer sent them before the go-back-N reached it, back to back (A's: a
        // gap, B's: implied NAKs before progress), everything ready
        let u = &mut rig.u;
        u.s_ready.next = true;
        u.s_pay.tready.next = true;
        u.cq_ready.next = true;
        u.rw_ready.next = true;
        u.iss_valid.next = false;
        let resps: Vec<Resp> =
            (p + 2..p + n).chain(p + n + 1..p + 2 * n - 1).map(|x| read_resp(q, x, RC_RDMA_READ_RESPONSE_MIDDLE, vec![0x33; 256])).collect();
        let (mut next, mut beats, mut hdr_ok, mut pay_ok) = (0usize, 0usize, true, false);
        let mut taken_at = Vec::new();
        let mut cycle = 0u64;
        while next < resps.len() || beats > 0 || cycle < taken_at.last().copied().unwrap_or(0) + 40 {
            cycle += 1;
            assert!(cycle < 20_000, "hung");
            let hv = hdr_ok && next < resps.len();
            if hv {
                u.hdr.next = resps[next].h;
                u.hdr_ext_words.next = bits(resps[next].ew);
                u.hdr_pay_len.next = bits(256);
            }
            u.hdr_valid.next = hv;
            let pv = pay_ok && beats > 0;
            if pv {
                let (d, k) = beat_of(&[0x33; 64]);
                u.pay.tdata.next = d;
                u.pay.tkeep.next = k;
                u.pay.tlast.next = beats == 1;
            }
            u.pay.tvalid.next = pv;
            u.clock.next = false.into();
            assert!(simulate(u, 200));
            assert!(!u.rw_valid.val(), "no second go-back-N before progress");
            assert!(!u.s_valid.val() && !u.cq_valid.val(), "a dropped response scatters and completes nothing");
            let (mut nh, mut np) = (hdr_ok, pay_ok);
            if hv && u.hdr_ready.val() {
                next += 1;
                beats = 4;
                taken_at.push(cycle);
                nh = false;
                np = true;
            }
            if pv && u.pay.tready.val() {
                beats -= 1;
                if beats == 0 {
                    nh = true;
                    np = false;
                }
            }
            u.clock.next = true.into();
            assert!(simulate(u, 200));
            hdr_ok = nh;
            pay_ok = np;
        }
        let per = (taken_at[taken_at.len() - 1] - taken_at[0]) as f64 / (taken_at.len() - 1) as f64;
        println!("{} responses after a gap at MTU 256: {per:.2} cycles each (wire {:.2})", resps.len(), wire_cycles(256));
        assert_eq!(rig.counter(CNT_DROPPED) + rig.counter(CNT_IMPLIED_NAKS) - dropped0, resps.len() as u64, "every one dropped");
        assert!(rig.mem == mem0, "nothing written");
        assert!(per <= wire_cycles(256), "{per} cycles per dropped response, the wire brings one every {}", wire_cycles(256));
    }

    /// Short READs with the Requester's records between their responses (the bench's 3,000-byte READs at MTU
    /// 1024): a record must not cost the next response the fast path, so a READ takes no longer than the wire
    /// brings its three responses in.
    #[test]
    fn completer_keeps_up_with_short_reads_and_records() {
        let (mtu, npk, last, n) = (1024u32, 3u32, 952u32, 24usize);
        let (taken_at, fast) = read_stream(mtu, npk, last, 2, n, 4);
        assert_eq!(fast, (n - 4) * (npk as usize - 1), "every MIDDLE and LAST on the fast path, records between them or not");
        let per_read = (taken_at[(n - 4) * npk as usize] - taken_at[4 * npk as usize]) as f64 / (n - 8) as f64;
        let wire = frame_cycles(mtu, 4) + (npk - 2) as f64 * frame_cycles(mtu, 0) + frame_cycles(last, 4);
        println!("{n} READs of {} bytes, MTU {mtu}, 2 QPs: {per_read:.2} cycles per READ (wire {wire:.2})", (npk - 1) * mtu + last);
        assert!(per_read <= wire, "{per_read} cycles per READ, the wire brings one every {wire}");
    }

    #[test]
    fn completer_emits_verilog() {
        let mut u = Completer::default();
        u.connect_all();
        let v = generate_verilog(&u);
        assert!(v.contains("module top"));
    }
}
