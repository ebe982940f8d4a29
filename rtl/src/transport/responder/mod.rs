//! Responder (rxe `rxe_resp.c` `rxe_responder`, as `testbench::model::responder` implements it), RC and UC:
//! request packets in (`hdr_*` + `pay` from RX Parse; the top routes request opcodes here), ACK / NAK / RNR NAK
//! / READ RESPONSE / ATOMIC ACKNOWLEDGE headers out (`tx_pkt`, with the gather commands for read-response
//! payload, issued with their header and in order), SEND/WRITE payload and an atomic's new value to the Scatter
//! Path (`s_cmd` + `s_pay`), receive completions to CQE Generation (`cq`), receive WQEs and atomic targets read
//! through a DMA read port (`dma`).
//!
//! **Stages** (each a block in this folder, with its unit test beside it), sequenced by the state machine here,
//! one packet at a time:
//! * [`take`]: the header take and QP lookup (rxe `get_req`, `rxe_recv.c`'s drops): the request registers, the
//!   QP's attributes and responder state, handed to the checks, the key checks and the READ responses as one
//!   registered record ([`take::ReqRec`]);
//! * [`checks`]: `check_psn`, `check_op_seq`, `check_op_valid`, `check_resource`, `check_length` and the WRITE
//!   length rule, registered in `Pre`;
//! * [`key_check`]: `check_rkey`, and a SEND's receive buffer (its lkey, the room left), through the RX copy of
//!   the Key Cache;
//! * execute: the payload mover and Scatter command (here), [`recv_queue`] (the receive rings and the WQE
//!   prefetch eight ahead, the doorbell engine), [`read_reply`] (READ responses, a duplicate READ's replay),
//!   [`read_res`] (the READ/atomic resource ring and its scan), [`atomic`] (the Atomic Unit's
//!   read-modify-write);
//! * [`acknowledge`]: the TX header and gather registers; [`completion`]: the held receive completion.
//!
//! **Tables it owns** (written by the top's command dispatcher, 256 QPs, index = QPN[7:0]): `attr_*`, the QP
//! attributes ([`QpStatic`], CMD_WRITE_QP) into the take stage's QP Context; `rp_*` (CMD_WRITE_QP_RESP): ePSN,
//! `ack_psn = ePSN`, MSN 0, no NAK sent, and the extended responder state ([`RespExt`]: message in progress,
//! current receive WQE, WRITE context, the READ resources, the QP's error flag) cleared; `rqs_*`
//! (CMD_WRITE_RQ): ring base, log2 entries, receive CQ, indices reset; `rqdb_*`: RQ doorbell; `kc_wr`: the RX
//! copy of the Key Cache. Commands are taken only between packets (in `Idle`), so they never race a packet's
//! write-back. A request header is taken in `Idle`, or already in the write-back's cycle (the ACK header's
//! cycle when the packet is ACKed) when no command waits, so back-to-back packets skip `Idle`, of the same QP
//! too (its state is read after the write-back: see the take below the state match), except after a packet
//! that armed the hot QP's fast path, whose next packet is taken in `Idle` to take that path.
//! **The lookup ahead** ([`take`]'s `peek`): while a packet executes, a waiting header of the same QP is
//! looked up without being taken (its drop verdict and the QP's attributes, held); taken in the write-back's
//! cycle, it loads that answer and the responder state just written back (`fwd`, and the registers of the
//! extended state and the receive ring, which are that QP's), so `LkWait` takes one cycle instead of three.
//!
//! **Rules** (the golden model's order): QP lookup drops (counted); a QP in error (after a class-C error)
//! drops everything until the next `rp_*` write; `check_psn` (duplicate SEND/WRITE re-ACKed with PSN
//! `ack_psn - 1`, nothing executed; a duplicate READ replayed from its resource, a duplicate atomic answered
//! from its saved value; first out-of-sequence packet: NAK PSN sequence error with ePSN, then silence until
//! the gap closes); the checks above (class C: NAK invalid request; no receive posted: RNR NAK `0x20 |
//! min_rnr_timer` with the packet's PSN); `check_rkey` (NAK remote access error); a SEND whose receive buffer
//! is too small or whose lkey fails (rxe `copy_data`'s -EINVAL: NAK remote operational error,
//! LOC_QP_OP_ERR, nothing written); execute; MSN + 1 at the end of a SEND/WRITE, on a READ and an atomic;
//! receive completions (RECV with `byte_len` = bytes received, RECV_RDMA_WITH_IMM with the whole write length,
//! GRH flag always, WITH_IMM and the immediate as its wire bytes); ACK (0x1F, MSN) when AckReq is set.
//! Class-C errors NAK with the packet's PSN and the current MSN, complete the receive in progress (if the rule
//! says so), flush every posted receive WQE with WR_FLUSH_ERR (rxe `qp_error`) and put the QP in error.
//! ATOMIC_WRITE and FLUSH: NAK invalid request, QP to error. An atomic's target must be 8-byte aligned.
//! **SEND_WITH_INV** (SEND_LAST/ONLY_WITH_INVALIDATE; rxe `invalidate_rkey`, the golden model's rule): once its
//! receive buffer passes, the IETH's R_Key is checked through the Key Cache (`res_inv`: a fast-registration
//! MR of the QP's PD); if it may be invalidated, the Responder asks the top's command dispatcher, the one
//! writer of both Key Cache copies (WQE Check's and its own), to invalidate it (`inv_valid` until
//! `inv_ready`) and waits, so that no later packet finds the key valid; the receive completes with WITH_INV
//! and the key. Otherwise class J as rxe 6.1 does it (`RESPST_ERR_INVALIDATE_RKEY`, seen in the lab): the
//! payload is placed and ACKed as for any SEND, the receive completes REM_INV_REQ_ERR with byte_len 0 and no
//! flags, the other receives are flushed and the QP goes to error.
//! **UC** (the QP's type; rxe `check_psn`'s UC branch and `drop_msg`): a request must carry exactly the expected
//! PSN outside a message being dropped; otherwise a FIRST/ONLY resynchronises (the message in progress
//! abandoned, its receive WQE kept and filled again from offset 0) and anything else is dropped. Every check
//! that would NAK on RC (sequence, access, length, R_Key, no receive posted) drops the packet and the rest of
//! its message instead, counted in [`CNT_DROP_UC`]; a receive too small still completes LOC_QP_OP_ERR and
//! flushes the receive queue (rxe `qp_error`). Nothing is ever ACKed, whatever AckReq says.
//!
//! **The payload mover**: a SEND/WRITE payload is handed in `PayFwd` to the mover (`mv_on`: `pay` to `s_pay`
//! until its last beat; the next is handed over once `mv_on` is clear, so the Scatter Path's ready never
//! reaches the state) and the state machine goes on with the ACK, the write-back and the next header. A
//! receive completion waits in its stage for the payload before it; a READ response's gather and an atomic's
//! read go out only with the mover done and the Scatter Path `idle` (`s_idle`: every byte written before them
//! is on the DMA write port).
//!
//! **Timing** (<= 6 LUT6 levels): every wide sum (PSN/MSN + 1, ack_psn - 1, addresses, residues) goes through
//! a [`PipeAdd64`] whose operands are registers; the checks are registered from registered inputs.
//! **The hot QP's fast path**: after an executed in-order WRITE FIRST/MIDDLE the QP stays *hot* (its state in
//! the registers) until another packet or a command comes; its next packet, if it is the expected WRITE
//! MIDDLE (PMTU bytes while more than PMTU is left) or LAST (the rest, its pad) at ePSN from the QP's remote
//! address with the default P_Key (matched as it is taken), goes from `LkWait` straight to its payload and
//! ends in `FastEnd`: one packet per payload beats + 1 cycles (16.9 for 1 KiB; the 100G wire brings one every
//! 28.5). Anything else takes the general path: about 15 cycles per WRITE MIDDLE/LAST, its payload
//! overlapping the next packet's checks; a 1 KiB WRITE ONLY 17 cycles (its 16 payload beats and one), a 1 KiB
//! SEND ONLY 25 (`send_only_rate`); a 64-byte WRITE ONLY of the same QP as the one before 15 (`Look` to
//! `TxAck` 14, `LkWait` 1 with the lookup ahead); a READ about 18 cycles plus 5 per response packet; a
//! duplicate READ about 30 more.
//!
//! **Counters** (`counters[i]`): see [`state`].

use rust_hdl::prelude::*;

use crate::common::ports::{DmaRead, TxPacket};

use crate::common::axis::{AxisSink, AxisSource};
use crate::common::consts::k;
use crate::common::counter::EventCounter;
use crate::common::fifo::SdpRam;
use crate::transport::key_cache::{KcWrite, PipeAdd64, PD_BITS};
use crate::transport::qp_context::QpStatic;
use crate::wire::rx_parse::RxHeader;
use crate::wire::tx_build::EXT_BITS;
use rnic_driver::host::{wc_opcode_code, wc_status_code};
use testbench::model::{QpType, WcFlags, WcOpcode, WcStatus};
use testbench::wire::headers::{Aeth, NakCode, AETH_ACK_UNLIMITED};
use testbench::wire::opcode::*;

pub mod recv_queue;
use recv_queue::RecvQueue;
pub use recv_queue::{PfEnt, RqCfg, PF_DEPTH};
pub mod read_res;
pub mod checks;
pub mod take;
pub mod fast_path;
use fast_path::FastPath;
use take::ReqTake;
pub use take::info_table;
pub mod read_reply;
pub mod atomic;
pub mod acknowledge;
use acknowledge::RespTx;
pub mod completion;
pub mod key_check;
use key_check::KeyCheck;
use crate::common::ports::{CqSource, ScatterCmd};
use completion::RecvCompletion;
use atomic::AtomicRmw;
use read_reply::ReadReply;
use checks::RespChecks;
use read_res::ReadResources;
pub use read_res::{ReadRes, READ_RESOURCES};

pub mod state;
use state::RespState;
pub use state::*;

crate::logic_block! {
    /// The Responder (see the module documentation).
    pub struct Responder {
        pub clock: Signal<In, Clock>,
        /// Our MAC and IPv4 address (the source of every response).
        pub my_mac: Signal<In, Bits<48>>,
        pub my_ip: Signal<In, Bits<32>>,
        /// Our IPv6 address (the source of responses on an IPv6 path).
        pub my_ip6: Signal<In, Bits<128>>,
        /// Request headers (request opcodes) from RX Parse and their payload (`hdr_pay_len` bytes, no beat when 0).
        pub hdr: Signal<In, RxHeader>,
        pub hdr_ext_words: Signal<In, Bits<4>>,
        pub hdr_pay_len: Signal<In, Bits<13>>,
        pub hdr_valid: Signal<In, Bit>,
        pub hdr_ready: Signal<Out, Bit>,
        pub pay: AxisSink,
        /// CMD_WRITE_QP: the static attributes.
        pub attr_we: Signal<In, Bit>,
        pub attr_qpn: Signal<In, Bits<24>>,
        pub attr_data: Signal<In, QpStatic>,
        /// CMD_WRITE_QP_RESP: the responder's ePSN (resets the responder state).
        pub rp_valid: Signal<In, Bit>,
        pub rp_ready: Signal<Out, Bit>,
        pub rp_qpn: Signal<In, Bits<24>>,
        pub rp_epsn: Signal<In, Bits<24>>,
        /// CMD_WRITE_RQ: receive ring base (64-byte aligned), log2 entries (<= 15), receive CQ.
        pub rqs_valid: Signal<In, Bit>,
        pub rqs_ready: Signal<Out, Bit>,
        pub rqs_qpn: Signal<In, Bits<24>>,
        pub rqs_base: Signal<In, Bits<64>>,
        pub rqs_log2: Signal<In, Bits<4>>,
        pub rqs_cqn: Signal<In, Bits<24>>,
        /// RQ doorbell: new producer index.
        pub rqdb_valid: Signal<In, Bit>,
        pub rqdb_ready: Signal<Out, Bit>,
        pub rqdb_qpn: Signal<In, Bits<24>>,
        pub rqdb_pi: Signal<In, Bits<16>>,
        /// Key Cache write port (RX copy).
        pub kc_wr: KcWrite,
        /// A SEND_WITH_INV invalidates the MR at `inv_index`: held until the command dispatcher, the one writer
        /// of both Key Cache copies, takes it (`inv_ready`, the cycle it invalidates both).
        pub inv_valid: Signal<Out, Bit>,
        pub inv_index: Signal<Out, Bits<10>>,
        pub inv_ready: Signal<In, Bit>,
        /// Receive WQE fetch (one 64-byte beat per request).
        pub dma: DmaRead,
        /// Scatter commands (SEND / WRITE payload placement) and the payload.
        pub s_cmd: ScatterCmd,
        pub s_pay: AxisSource,
        /// The Scatter Path has no command and no beat left to write (every beat it was given is out on the DMA
        /// write port): a READ response or an atomic's read is issued only then, after the payload mover is done.
        pub s_idle: Signal<In, Bit>,
        /// Response headers (ACK, NAK, RNR NAK, READ RESPONSE, ATOMIC ACKNOWLEDGE) to TX Packet Build, with the
        /// gather commands for read-response payload (issued with their header, in order).
        pub tx_pkt: TxPacket,
        /// Receive completions to CQE Generation.
        pub cq: CqSource,
        /// Event counters (`CNT_*`) and the reason of the last QP lookup drop.
        pub counters: [Signal<Out, Bits<32>>; RESP_COUNTERS],
        pub last_drop_reason: Signal<Out, Bits<8>>,

        /// Receive Queue and WQE Prefetch: the receive rings, the WQE reads eight ahead, the doorbell engine.
        /// The header take and QP lookup: the request registers, the QP's attributes and responder state.
        tk: ReqTake,
        /// The hot QP's fast path: its next packet expected, the header on offer matched.
        fp: FastPath,
        rq: RecvQueue,
        /// The checks that need no lookup (check_op_seq, check_op_valid, check_resource, check_length).
        chk: RespChecks,
        /// READ and atomic resources: the per-QP ring and the duplicate scan.
        rr: ReadResources,
        /// The R_Key and receive-buffer checks through the RX copy of the Key Cache.
        kck: KeyCheck,
        /// READ responses and the replay of a duplicate READ.
        rd: ReadReply,
        /// The Atomic Unit's read-modify-write (its ALU inside).
        at: AtomicRmw,
        /// The TX header and gather command registers (ACK/NAK, READ responses, ATOMIC ACKNOWLEDGE).
        tx: RespTx,
        /// The receive completion held until the payload before it is through.
        cqe: RecvCompletion,
        x_ram: SdpRam<RespExt, 8>,
        add_a: PipeAdd64,
        add_b: PipeAdd64,
        add_c: PipeAdd64,
        add_d: PipeAdd64,
        /// A WRITE MIDDLE/LAST's next write pointer and residue (`w_ptr + len`, `w_resid - len`), summed from Pre on
        /// with the checks, so an in-order continuation goes from Check straight to its Scatter command.
        add_e: PipeAdd64,
        add_f: PipeAdd64,
        /// the packet's write-back happens this cycle (WriteBack, or TxAck as its ACK header goes out when the
        /// write-back comes next: the write-back reads only registers TxAck leaves alone)
        l_wb: Signal<Local, Bit>,
        /// `l_wb` as the next header's take sees it: in TxAck without the TX side's ready (the take there also needs
        /// the output registers empty, when the ACK header goes out anyway), so `hdr_ready` never depends on it
        l_wbq: Signal<Local, Bit>,
        /// a request header is taken this cycle (Idle, or the write-back's cycle: see below the state match)
        l_take: Signal<Local, Bit>,
        /// the header on offer in the last cycle was another QP's than the packet's (per-QP RAM index)
        hq_diff: DFF<Bit>,
        /// a header was on offer in the last cycle
        hq_v: DFF<Bit>,
        /// the header taken in the write-back's cycle had its lookup ahead (its QP the packet's before): `LkWait`
        /// loads the held answer and the state written back, in one cycle
        ahead: DFF<Bit>,
        cnt: [EventCounter; RESP_COUNTERS],
        inc: [Signal<Local, Bit>; RESP_COUNTERS],

        state: DFF<RespState>,
        /// The header taken in `Idle` matched the hot QP's expectation (fast path).
        h_fast: DFF<Bit>,
        /// Cycles until the fast path's sums (started in `Idle`) are out: `FastEnd` waits for 0.
        f_wait: DFF<Bits<2>>,
        /// A WRITE FIRST went to its Scatter command straight from the R_Key check: its pointer and residue sums
        /// (started there) are taken in Finish.
        w_late: DFF<Bit>,
        ret: DFF<RespState>,
        fret: DFF<RespState>,
        kret: DFF<RespState>,
        ack_nxt: DFF<RespState>,
        wait_n: DFF<Bits<2>>,
        // adder operands
        aa_a: DFF<Bits<64>>,
        aa_b: DFF<Bits<64>>,
        aa_c: DFF<Bit>,
        ab_a: DFF<Bits<64>>,
        ab_b: DFF<Bits<64>>,
        ab_c: DFF<Bit>,
        ac_a: DFF<Bits<64>>,
        ac_b: DFF<Bits<64>>,
        ae_a: DFF<Bits<64>>,
        ae_b: DFF<Bits<64>>,
        af_a: DFF<Bits<64>>,
        af_b: DFF<Bits<64>>,
        ac_c: DFF<Bit>,
        ad_a: DFF<Bits<64>>,
        ad_b: DFF<Bits<64>>,
        pay_pend: DFF<Bit>,
        /// The payload mover: a WRITE's (or a SEND FIRST/MIDDLE's) payload, handed on in `PayFwd`, flows from
        /// `pay` to `s_pay` while the state machine goes on with the ACK, the write-back and the next header.
        mv_on: DFF<Bit>,
        /// the mover's last beat is taken this cycle
        l_mv_done: Signal<Local, Bit>,
        /// no payload in the mover and the Scatter Path idle: memory holds every byte written so far
        l_quiet: Signal<Local, Bit>,
        /// the packet ends a SEND or a WRITE WITH IMMEDIATE (Finish raises a receive completion)
        l_sync: Signal<Local, Bit>,
        /// a WRITE FIRST's pointer and residue sums (taken in Finish) are ready, or not needed
        l_fin_ok: Signal<Local, Bit>,
        x: DFF<RespExt>,
        // sums
        msn1: DFF<Bits<24>>,
        psn1: DFF<Bits<24>>,
        wqe_addr: DFF<Bits<64>>,
        // write-back values
        n_epsn: DFF<Bits<24>>,
        n_ack: DFF<Bits<24>>,
        n_msn: DFF<Bits<24>>,
        n_sent: DFF<Bit>,
        // ACK / NAK
        syn: DFF<Bits<8>>,
        apsn: DFF<Bits<24>>,
        amsn: DFF<Bits<24>>,
        cc_cq: DFF<Bit>,
        cc_status: DFF<Bits<8>>,
        /// this SEND_WITH_INV invalidated its R_Key (`iv_ok`: the completion says so) or may not (`iv_bad`:
        /// class J, REM_INV_REQ_ERR); the invalidate request is held for the dispatcher in `InvWait`
        iv_ok: DFF<Bit>,
        iv_bad: DFF<Bit>,
        /// UC: this packet (a FIRST/ONLY) resynchronised the QP (out of sequence or after a drop): the message in
        /// progress is abandoned, so check_op_seq's verdict (taken with it in progress) does not apply
        ucr: DFF<Bit>,
        /// the packet's QP is UC or UD: no ACKs, every check failure a silent drop of the message (rxe `drop_msg`)
        l_uc: Signal<Local, Bit>,
        o_sv: DFF<Bit>,
        o_saddr: DFF<Bits<64>>,
        o_reason: DFF<Bits<8>>,
        // locals
        l_ext: Signal<Local, Bits<352>>,
        l_rqpn: Signal<Local, Bits<24>>,
        /// the WRITE's residue (the hot QP's next packet length)
        l_wr: Signal<Local, Bits<32>>,
        l_access: Signal<Local, Bits<8>>,
        l_mda: Signal<Local, Bits<8>>,
        l_pd: Signal<Local, Bits<32>>,
        l_aeth_ack: Signal<Local, Bits<32>>,
        // constants
        zero2: Constant<Bits<2>> = k(0),
        zero4: Constant<Bits<4>> = k(0),
        one4: Constant<Bits<4>> = k(1),
        zero8: Constant<Bits<8>> = k(0),
        zero13: Constant<Bits<13>> = k(0),
        zero16: Constant<Bits<16>> = k(0),
        zero24: Constant<Bits<24>> = k(0),
        zero32: Constant<Bits<32>> = k(0),
        zero64: Constant<Bits<64>> = k(0),
        ones64: Constant<Bits<64>> = k(u64::MAX),
        one16: Constant<Bits<16>> = k(1),
        two2: Constant<Bits<2>> = k(2),
        three2: Constant<Bits<2>> = k(3),
        one2: Constant<Bits<2>> = k(1),
        zero3: Constant<Bits<3>> = k(0),
        len64: Constant<Bits<13>> = k(64),
        op_atack: Constant<Bits<8>> = k(RC_ATOMIC_ACKNOWLEDGE as u64),
        three4: Constant<Bits<4>> = k(3),
        syn_ack: Constant<Bits<8>> = k(AETH_ACK_UNLIMITED as u64),
        syn_seq: Constant<Bits<8>> = k(Aeth::nak(NakCode::PsnSequenceError, 0).syndrome as u64),
        syn_inv: Constant<Bits<8>> = k(Aeth::nak(NakCode::InvalidRequest, 0).syndrome as u64),
        syn_acc: Constant<Bits<8>> = k(Aeth::nak(NakCode::RemoteAccessError, 0).syndrome as u64),
        syn_op: Constant<Bits<8>> = k(Aeth::nak(NakCode::RemoteOperationalError, 0).syndrome as u64),
        syn_rnr: Constant<Bits<8>> = k(Aeth::rnr_nak(0, 0).syndrome as u64),
        op_ack: Constant<Bits<8>> = k(RC_ACKNOWLEDGE as u64),
        wc_recv: Constant<Bits<8>> = k(wc_opcode_code(WcOpcode::Recv) as u64),
        wc_recv_imm: Constant<Bits<8>> = k(wc_opcode_code(WcOpcode::RecvRdmaWithImm) as u64),
        wcf_grh: Constant<Bits<8>> = k(WcFlags::GRH as u64),
        wcf_grh_imm: Constant<Bits<8>> = k((WcFlags::GRH | WcFlags::WITH_IMM) as u64),
        wcf_grh_inv: Constant<Bits<8>> = k((WcFlags::GRH | WcFlags::WITH_INV) as u64),
        st_rem_inv: Constant<Bits<8>> = k(wc_status_code(WcStatus::RemInvReqErr) as u64),
        st_ok: Constant<Bits<8>> = k(wc_status_code(WcStatus::Success) as u64),
        st_qp_op: Constant<Bits<8>> = k(wc_status_code(WcStatus::LocQpOpErr) as u64),
        st_flush: Constant<Bits<8>> = k(wc_status_code(WcStatus::WrFlushErr) as u64),
        ty_uc: Constant<Bits<2>> = k(QpType::Uc as u64),
        ty_ud: Constant<Bits<2>> = k(QpType::Ud as u64),
        /// the packet's QP is UD (its packets are UD SEND ONLYs: no PSN order, the UC rules otherwise)
        l_ud: Signal<Local, Bit>,
    }
}

/// The Verilog of a default [`Responder`], built in a frame of its own and on the heap: the block is large and
/// `fpga::blocks()` builds every block in one stack frame (a test thread has 2 MiB).
#[inline(never)]
pub fn verilog() -> String {
    let mut b = Box::new(Responder::default());
    crate::verilog_of(&mut *b)
}

impl Logic for Responder {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, state, h_fast, f_wait, w_late, ret, fret, kret, ack_nxt, wait_n, aa_a, aa_b, aa_c, ab_a,
            ab_b, ab_c, ac_a, ac_b, ac_c, ad_a, ad_b, ae_a, ae_b, af_a, af_b, pay_pend, mv_on, x, msn1, psn1,
            wqe_addr, n_epsn, n_ack, n_msn, n_sent, syn, apsn, amsn, cc_cq, cc_status, iv_ok, iv_bad, o_sv, o_saddr, o_reason,
            hq_diff, hq_v, ahead, ucr
        );
        clock!(self, clock, tk, fp, x_ram, add_a, add_b, add_c, add_d, add_e, add_f, rq, rr, chk, rd, at, tx, cqe, kck);
        for i in 0..13 {
            self.cnt[i].clock.next = self.clock.val();
            self.cnt[i].inc.next = self.inc[i].val();
            self.counters[i].next = self.cnt[i].value.val();
            self.inc[i].next = false;
        }
        self.last_drop_reason.next = self.o_reason.q.val();

        // ---- adders: operands are registers
        self.add_a.a.next = self.aa_a.q.val();
        self.add_a.b.next = self.aa_b.q.val();
        self.add_a.cin.next = self.aa_c.q.val();
        self.add_b.a.next = self.ab_a.q.val();
        self.add_b.b.next = self.ab_b.q.val();
        self.add_b.cin.next = self.ab_c.q.val();
        self.add_c.a.next = self.ac_a.q.val();
        self.add_c.b.next = self.ac_b.q.val();
        self.add_c.cin.next = self.ac_c.q.val();
        self.add_d.a.next = self.ad_a.q.val();
        self.add_d.b.next = self.ad_b.q.val();
        self.add_d.cin.next = false;
        self.add_e.a.next = self.ae_a.q.val();
        self.add_e.b.next = self.ae_b.q.val();
        self.add_e.cin.next = false;
        self.add_f.a.next = self.af_a.q.val();
        self.add_f.b.next = self.af_b.q.val();
        self.add_f.cin.next = true;

        // ---- the header on offer (the fast path's match), the request taken (take.rs)
        self.l_ext.next = self.hdr.val().ext;
        self.l_rqpn.next = self.hdr.val().dest_qpn;
        self.tk.hdr.next = self.hdr.val();
        self.tk.hdr_pay_len.next = self.hdr_pay_len.val();
        self.tk.take.next = false;
        // the lookup ahead: the header on offer (since the cycle before) is the packet's QP's, and no take can
        // come in this state; the take in the write-back's cycle then loads the held answer (`ahead`), with
        // the responder state this packet writes back (`fwd`)
        self.tk.peek.next = self.hq_v.q.val() & !self.hq_diff.q.val() & !self.tk.pk_ok.val() & !self.tk.pk_busy.val()
            & (self.state.q.val() != RespState::Idle)
            & (self.state.q.val() != RespState::LkWait)
            & (self.state.q.val() != RespState::TxAck)
            & (self.state.q.val() != RespState::WriteBack);
        self.tk.ahead.next = false;
        self.tk.fwd.next.epsn = self.n_epsn.q.val();
        self.tk.fwd.next.ack_psn = self.n_ack.q.val();
        self.tk.fwd.next.msn = self.n_msn.q.val();
        self.tk.fwd.next.sent_psn_nak = self.n_sent.q.val();
        self.tk.fwd.next.rq_idx = self.rq.ci.val();
        self.tk.fwd.next.res_head = self.zero8.val();
        self.tk.attr_we.next = self.attr_we.val();
        self.tk.attr_qpn.next = self.attr_qpn.val();
        self.tk.attr_data.next = self.attr_data.val();
        self.tk.upd_we.next = false;
        self.tk.upd_qpn.next = self.tk.qpn.val();
        self.tk.upd_data.next.epsn = self.n_epsn.q.val();
        self.tk.upd_data.next.ack_psn = self.n_ack.q.val();
        self.tk.upd_data.next.msn = self.n_msn.q.val();
        self.tk.upd_data.next.sent_psn_nak = self.n_sent.q.val();
        self.tk.upd_data.next.rq_idx = self.rq.ci.val();
        self.tk.upd_data.next.res_head = self.zero8.val();
        self.tk.load.next = false;
        self.tk.look.next = false;
        self.tk.len8.next = false;
        self.l_sync.next = self.tk.is_end.val() & (self.tk.is_send.val() | self.tk.is_imm.val());
        self.l_ud.next = self.tk.st.val().qp_type == self.ty_ud.val();
        self.l_uc.next = (self.tk.st.val().qp_type == self.ty_uc.val()) | self.l_ud.val();
        // the Atomic Unit's read-modify-write (atomic.rs): operands latched at the take, started by RkeyRes
        self.at.take.next = false;
        self.at.ext.next = self.l_ext.val();
        self.at.op.next = self.tk.op.val();
        self.at.dma.next = self.kck.dma.val();
        self.at.start.next = false;
        self.at.rd_req_ready.next = self.dma.req_ready.val();
        self.at.rd_resp_valid.next = self.dma.resp_valid.val();
        self.at.rd_resp_data.next = self.dma.resp_data.val();
        self.at.rd_resp_last.next = self.dma.resp_last.val();
        self.at.sv.next = self.o_sv.q.val();
        self.at.s_tready.next = self.s_pay.tready.val();
        self.at.orig_we.next = false;
        self.at.orig_in.next = self.rr.rdata.val().va;

        // ---- QP state decode
        self.l_wr.next = self.x.q.val().w_resid;
        self.l_access.next = self.tk.st.val().access;
        self.l_mda.next = self.tk.st.val().max_dest_rd_atomic;
        self.l_pd.next = self.tk.st.val().pd;

        // ---- the checks (Pre registers them; inputs are registers)
        self.chk.en.next = false;
        self.chk.req.next = self.tk.req.val();
        self.chk.access.next = self.l_access.val();
        self.chk.mda.next = self.l_mda.val();
        self.chk.mip.next = self.x.q.val().mip;
        self.chk.mip_write.next = self.x.q.val().mip_write;
        self.chk.w_valid.next = self.x.q.val().w_valid;
        self.chk.w_resid.next = self.x.q.val().w_resid;
        self.chk.pi.next = self.rq.pi.val();
        self.chk.ci.next = self.rq.ci.val();

        // ---- AETH words: syndrome, then the MSN big-endian
        self.l_aeth_ack.next = bit_cast::<32, 8>(self.syn.q.val())
            | (bit_cast::<32, 8>(self.amsn.q.val().get_bits::<8>(16)) << 8)
            | (bit_cast::<32, 8>(self.amsn.q.val().get_bits::<8>(8)) << 16)
            | (bit_cast::<32, 8>(self.amsn.q.val().get_bits::<8>(0)) << 24);

        // ---- outputs are registers; a consumer taking one frees it
        // the TX header and gather command registers (acknowledge.rs): loaded by TxAck, Read and AtAck
        self.tx.my_mac.next = self.my_mac.val();
        self.tx.my_ip.next = self.my_ip.val();
        self.tx.my_ip6.next = self.my_ip6.val();
        self.tx.st.next = self.tk.st.val();
        self.tx.go.next = false;
        self.tx.opcode.next = self.op_ack.val();
        self.tx.psn.next = self.apsn.q.val();
        self.tx.ext.next = bit_cast::<EXT_BITS, 32>(self.l_aeth_ack.val());
        self.tx.ext_words.next = self.one4.val();
        self.tx.pay_len.next = self.zero13.val();
        self.tx.g_go.next = false;
        self.tx.g_in_addr.next = self.rd.g_addr.val();
        self.tx.g_in_len.next = self.rd.g_len.val();
        TxPacket::link(&mut self.tx_pkt, &mut self.tx.out);
        // the fast path (fast_path.rs): whether the header on offer is the hot QP's next WRITE MIDDLE/LAST; it
        // goes into a register (h_fast), never into the state choice of the same cycle
        self.fp.hdr.next = self.hdr.val();
        self.fp.hdr_pay_len.next = self.hdr_pay_len.val();
        self.fp.qpn.next = self.tk.qpn.val();
        self.fp.epsn.next = self.n_epsn.q.val();
        self.fp.remote_ip.next = self.tk.st.val().remote_ip;
        self.fp.arm.next = false;
        self.fp.arm_in.next = !self.tk.is_end.val();
        self.fp.wb.next = false;
        self.fp.wr_big.next = self.chk.wr_big.val();
        self.fp.wr.next = self.l_wr.val().get_bits::<13>(0);
        self.fp.wr_pad.next = self.chk.wr_pad.val();
        self.fp.mtu.next = self.tk.mtu.val();
        self.fp.take.next = false;
        self.fp.kill.next = self.attr_we.val();
        self.s_cmd.valid.next = self.o_sv.q.val();
        self.s_cmd.addr.next = self.o_saddr.q.val();
        self.s_cmd.len.next = self.tk.plen.val();
        // a receive completion (completion.rs) goes out once the payload in the mover when it was raised is
        // through: after every payload byte handed on before it; the state machine need not wait for it (a
        // SEND's or a WITH IMMEDIATE's goes on to the ACK and the next packet; a later completion waits for it)
        self.cqe.raise.next = false;
        self.cqe.wc.next.wr_id = self.x.q.val().wr_id;
        self.cqe.wc.next.cqn = self.rq.cfg.val().cqn;
        self.cqe.wc.next.qp_num = self.tk.qpn.val();
        self.cqe.wc.next.src_qp = self.zero24.val();
        self.cqe.wc.next.byte_len = self.zero32.val();
        self.cqe.wc.next.imm = self.zero32.val();
        self.cqe.wc.next.status = self.st_ok.val();
        self.cqe.wc.next.opcode = self.wc_recv.val();
        self.cqe.wc.next.wc_flags = self.wcf_grh.val();
        self.cqe.mv_on.next = self.mv_on.q.val();
        CqSource::link(&mut self.cq, &mut self.cqe.cq);
        self.s_pay.tdata.next = self.pay.tdata.val();
        self.s_pay.tkeep.next = self.pay.tkeep.val();
        self.s_pay.tlast.next = self.pay.tlast.val();
        self.s_pay.tvalid.next = false;
        self.pay.tready.next = false;
        // the payload mover (states that take `pay` or drive `s_pay` wait while it runs)
        self.l_mv_done.next = self.mv_on.q.val() & self.pay.tvalid.val() & self.s_pay.tready.val() & self.pay.tlast.val();
        self.cqe.mv_done.next = self.l_mv_done.val();
        self.l_quiet.next = !self.mv_on.q.val() & self.s_idle.val();
        self.l_fin_ok.next = !self.w_late.q.val() | (self.f_wait.q.val() == self.zero2.val());
        if self.mv_on.q.val() {
            self.s_pay.tvalid.next = self.pay.tvalid.val();
            self.pay.tready.next = self.s_pay.tready.val();
            if self.l_mv_done.val() {
                self.mv_on.d.next = false;
            }
        }
        self.dma.req_len.next = self.len64.val();
        self.dma.req_tag.next = self.zero8.val();

        // ---- sub-blocks
        // the key checks (key_check.rs): the R_Key of the request, a SEND's receive buffer
        KcWrite::link(&mut self.kc_wr, &mut self.kck.kc_wr);
        self.kck.inv_load.next = false;
        self.inv_valid.next = self.state.q.val() == RespState::InvWait;
        self.inv_index.next = self.tk.rkey.val().get_bits::<10>(8);
        self.kck.pd.next = self.l_pd.val().get_bits::<PD_BITS>(0);
        self.kck.rkey_load.next = false;
        self.kck.req.next = self.tk.req.val();
        self.kck.buf_first.next = false;
        self.kck.buf_next.next = false;
        self.kck.buf_next2.next = false;
        self.kck.r_addr.next = self.x.q.val().r_addr;
        self.kck.r_len.next = self.x.q.val().r_len;
        self.kck.r_lkey.next = self.x.q.val().r_lkey;
        self.kck.r_off.next = self.x.q.val().r_off;
        self.kck.issue.next = false;
        self.kck.take.next = false;
        // READ and atomic resources: a new READ's record (ReadEnd) or an atomic's (AtEnd) at the ring head
        self.rr.qpn.next = self.tk.qpn.val();
        self.rr.psn.next = self.tk.psn.val();
        self.rr.res_head.next = self.x.q.val().res_head;
        self.rr.res_valid.next = self.x.q.val().res_valid;
        self.rr.we.next = false;
        self.rr.w.next.first = self.tk.psn.val();
        self.rr.w.next.end = self.rd.cur_psn.val();
        self.rr.w.next.va = self.tk.va.val();
        self.rr.w.next.rkey = self.tk.rkey.val();
        self.rr.w.next.len = self.tk.dlen.val();
        self.rr.w.next.dma = self.kck.dma.val();
        self.rr.w.next.atomic = false;
        self.rr.scan_start.next = false;
        self.rr.scan.next = self.state.q.val() == RespState::DupScan;
        self.rr.pick.next = false;
        // READ responses: the request, its translated address and the MSNs; headers go out through the output
        // registers when they are free and the payload before the READ is written
        self.rd.req.next = self.tk.req.val();
        self.rd.dma.next = self.kck.dma.val();
        self.rd.msn1.next = self.msn1.q.val();
        self.rd.start.next = false;
        self.rd.dup_go.next = false;
        self.rd.res.next = self.rr.rdata.val();
        self.rd.go_ok.next = self.tx.free.val() & self.l_quiet.val();
        self.at.rd_ok.next = self.rq.idle.val() & self.l_quiet.val();
        // per-QP RAMs: read at the request's QPN (the header's while idle)
        self.x_ram.raddr.next = self.tk.qpn.val().get_bits::<8>(0);
        self.x_ram.we.next = false;
        self.x_ram.waddr.next = self.tk.qpn.val().get_bits::<8>(0);
        self.x_ram.wdata.next = self.x.q.val();
        // the Receive Queue: its ports from registers and from the state decode below (see recv_queue.rs)
        self.rq.qpn.next = self.tk.qpn.val();
        self.rq.rqs_go.next = false;
        self.rq.rqs_qpn.next = self.rqs_qpn.val();
        self.rq.rqs_base.next = self.rqs_base.val();
        self.rq.rqs_log2.next = self.rqs_log2.val();
        self.rq.rqs_cqn.next = self.rqs_cqn.val();
        self.rq.rqdb_go.next = false;
        self.rq.rqdb_qpn.next = self.rqdb_qpn.val();
        self.rq.rqdb_pi.next = self.rqdb_pi.val();
        self.rq.take.next = false;
        self.rq.take_qpn.next = self.l_rqpn.val();
        self.rq.load.next = false;
        self.rq.pre.next = false;
        self.rq.fetch.next = false;
        self.rq.fetch_pf.next = self.fret.q.val() != RespState::FlushCq;
        self.rq.wqe_addr.next = self.wqe_addr.q.val();
        self.rq.ci1_we.next = false;
        self.rq.ci1_in.next = self.add_c.sum.val().get_bits::<16>(0);
        self.rq.raise.next = false;
        self.rq.wb.next = false;
        self.rq.db_run.next = self.state.q.val() == RespState::Db;
        self.rq.have_wqe.next = self.x_ram.rdata.val().have_wqe;
        self.rq.rd_req_ready.next = self.dma.req_ready.val();
        self.rq.rd_resp_valid.next = self.dma.resp_valid.val();
        self.rq.rd_resp_data.next = self.dma.resp_data.val();
        self.dma.req_valid.next = self.rq.rd_req_valid.val();
        self.dma.req_addr.next = self.rq.rd_req_addr.val();
        self.dma.resp_ready.next = self.rq.rd_resp_ready.val() | self.at.rd_resp_ready.val();
        // (an atomic's block read goes out only when the Receive Queue has none on its way)
        if self.at.rd_req_valid.val() {
            self.dma.req_valid.next = true;
            self.dma.req_addr.next = self.at.rd_req_addr.val();
        }
        self.l_wb.next = false;
        self.l_wbq.next = false;
        self.l_take.next = false;

        self.hdr_ready.next = false;
        self.rp_ready.next = false;
        self.rqs_ready.next = false;
        self.rqdb_ready.next = false;

        if self.f_wait.q.val() != self.zero2.val() {
            self.f_wait.d.next = self.f_wait.q.val() - self.one2.val();
        }
        // a Scatter command or the atomic's beat taken: its valid drops, and the states move on by the register
        // (the Scatter Path's readies, which the DMA write grant drives, never reach the state)
        if self.o_sv.q.val() & self.s_cmd.ready.val() {
            self.o_sv.d.next = false;
        }
        match self.state.q.val() {
            RespState::Idle => {
                // (a header taken here reads its QP's RAM rows below the state match: l_take)
                if self.rqs_valid.val() & self.rq.idle.val() {
                    // CMD_WRITE_RQ: ring, CQ, indices reset; taken with no prefetch on its way (none can
                    // land in the new ring), the QP's prefetched WQEs dropped (the Receive Queue's Clr)
                    self.rqs_ready.next = true;
                    self.rq.rqs_go.next = true;
                    self.state.d.next = RespState::Db;
                    self.fp.kill.next = true;
                } else if self.rp_valid.val() {
                    // CMD_WRITE_QP_RESP: ePSN, ack_psn = ePSN, MSN 0; the extended state cleared
                    self.rp_ready.next = true;
                    self.fp.kill.next = true;
                    self.tk.upd_we.next = true;
                    self.tk.upd_qpn.next = self.rp_qpn.val();
                    self.tk.upd_data.next.epsn = self.rp_epsn.val();
                    self.tk.upd_data.next.ack_psn = self.rp_epsn.val();
                    self.tk.upd_data.next.msn = self.zero24.val();
                    self.tk.upd_data.next.sent_psn_nak = false;
                    self.tk.upd_data.next.rq_idx = self.zero16.val();
                    self.x_ram.we.next = true;
                    self.x_ram.waddr.next = self.rp_qpn.val().get_bits::<8>(0);
                    self.x_ram.wdata.next.err = false;
                    self.x_ram.wdata.next.mip = false;
                    self.x_ram.wdata.next.drop_msg = false;
                    self.x_ram.wdata.next.have_wqe = false;
                    self.x_ram.wdata.next.w_valid = false;
                    self.x_ram.wdata.next.res_valid = self.zero16.val();
                    self.x_ram.wdata.next.res_head = self.zero4.val();
                } else if self.rqdb_valid.val() {
                    // RQ doorbell: the producer index written; the QP's ring state read for the doorbell engine
                    self.rqdb_ready.next = true;
                    self.rq.rqdb_go.next = true;
                    self.x_ram.raddr.next = self.rqdb_qpn.val().get_bits::<8>(0);
                    self.state.d.next = RespState::Db;
                } else {
                    self.hdr_ready.next = true;
                    self.l_take.next = self.hdr_valid.val();
                }
            }
            RespState::LkWait => {
                if self.h_fast.q.val() {
                    // the hot QP's next WRITE MIDDLE/LAST: its state is in the registers (st, x, n_*, msn1,
                    // mtu), the checks are the match, the lookup's answer is not used; the Scatter command
                    // (raised in Idle) may be taken now; PayFwd waits for that
                    self.inc[0].next = true;
                    self.state.d.next = RespState::PayFwd;
                } else if self.tk.found.val() | self.ahead.q.val() {
                    // the R_Key check's inputs (issued in Look, once the QP's PD is in `st`)
                    self.kck.rkey_load.next = true;
                    self.tk.load.next = true;
                    self.tk.ahead.next = self.ahead.q.val();
                    // (ahead: the QP's extended state and receive ring are the registers just written back)
                    if !self.ahead.q.val() {
                        self.x.d.next = self.x_ram.rdata.val();
                        self.rq.load.next = true;
                    }
                    self.state.d.next = RespState::Look;
                }
            }
            RespState::Look => {
                // a RETH's or an atomic's R_Key check starts now, beside the PSN check: its answer comes 8 cycles
                // on, one cycle into KcWait, which Check enters after a fixed 6 (unused if the packet goes
                // another way)
                self.kck.issue.next = self.tk.has_reth.val() | self.tk.is_atomic.val();
                self.tk.look.next = true;
                if self.tk.is_bad.val() {
                    self.inc[9].next = true;
                    self.state.d.next = RespState::Drain;
                } else if self.tk.drop.val() {
                    self.inc[5].next = true;
                    self.o_reason.d.next = self.tk.reason.val();
                    self.state.d.next = RespState::Drain;
                } else if self.x.q.val().err {
                    self.inc[8].next = true;
                    self.state.d.next = RespState::Drain;
                } else {
                    self.inc[0].next = true;
                    self.state.d.next = RespState::Pre;
                }
            }
            RespState::Pre => {
                // sums: ack_psn - 1, MSN + 1, PSN + 1, the WQE slot address
                self.aa_a.d.next = bit_cast::<64, 24>(self.tk.ack_psn.val());
                self.aa_b.d.next = self.ones64.val();
                self.aa_c.d.next = false;
                self.ab_a.d.next = bit_cast::<64, 24>(self.tk.msn.val());
                self.ab_b.d.next = self.zero64.val();
                self.ab_c.d.next = true;
                self.ac_a.d.next = bit_cast::<64, 24>(self.tk.psn.val());
                self.ac_b.d.next = self.zero64.val();
                self.ac_c.d.next = true;
                self.ad_a.d.next = self.rq.cfg.val().base;
                self.ad_b.d.next = bit_cast::<64, 16>(self.rq.slot.val()) << 6;
                self.rq.pre.next = true;
                // a WRITE continuation's next pointer and residue (used by Check's fast path)
                self.ae_a.d.next = self.x.q.val().w_ptr;
                self.ae_b.d.next = bit_cast::<64, 13>(self.tk.plen.val());
                self.af_a.d.next = bit_cast::<64, 32>(self.x.q.val().w_resid);
                self.af_b.d.next = !bit_cast::<64, 13>(self.tk.plen.val());
                // check_op_seq, check_op_valid, check_resource, check_length, the WRITE length rule
                self.chk.en.next = true;
                self.ucr.d.next = false;
                self.wait_n.d.next = self.two2.val();
                self.ret.d.next = RespState::Verdict;
                self.state.d.next = RespState::Wait;
            }
            RespState::Wait => {
                self.wait_n.d.next = self.wait_n.q.val() - self.one2.val();
                if self.wait_n.q.val() == self.zero2.val() {
                    self.state.d.next = self.ret.q.val();
                }
            }
            RespState::Verdict => {
                self.msn1.d.next = self.add_b.sum.val().get_bits::<24>(0);
                self.psn1.d.next = self.add_c.sum.val().get_bits::<24>(0);
                self.wqe_addr.d.next = self.add_d.sum.val();
                self.n_epsn.d.next = self.tk.epsn.val();
                self.n_ack.d.next = self.tk.ack_psn.val();
                self.n_msn.d.next = self.tk.msn.val();
                self.n_sent.d.next = false;
                self.amsn.d.next = self.tk.msn.val();
                self.cc_cq.d.next = false;
                self.iv_ok.d.next = false;
                self.iv_bad.d.next = false;
                if self.l_uc.val() {
                    // UC check_psn (rxe): the expected PSN, outside a message being dropped, goes on; otherwise
                    // a FIRST/ONLY resynchronises (the message in progress abandoned, its receive WQE kept from
                    // offset 0) and anything else is dropped with the rest of its message; no NAK, no duplicate
                    self.state.d.next = RespState::Check;
                    if self.x.q.val().drop_msg | !self.chk.psn_eq.val() {
                        if self.tk.is_start.val() {
                            self.ucr.d.next = true;
                            self.x.d.next.drop_msg = false;
                            self.x.d.next.mip = false;
                            self.x.d.next.w_valid = false;
                            self.x.d.next.r_off = self.zero32.val();
                        } else {
                            self.state.d.next = RespState::ClassC;
                        }
                    }
                } else if self.chk.in_order.val() {
                    self.state.d.next = RespState::Check;
                } else if self.chk.nak_seq.val() {
                    self.inc[2].next = true;
                    self.n_sent.d.next = true;
                    self.syn.d.next = self.syn_seq.val();
                    self.apsn.d.next = self.tk.epsn.val();
                    self.ack_nxt.d.next = RespState::WriteBack;
                    self.state.d.next = RespState::TxAck;
                } else if self.chk.dup_ack.val() {
                    self.inc[1].next = true;
                    self.syn.d.next = self.syn_ack.val();
                    self.apsn.d.next = self.add_a.sum.val().get_bits::<24>(0);
                    self.ack_nxt.d.next = RespState::Drain;
                    self.state.d.next = RespState::TxAck;
                } else if self.chk.dup_res.val() {
                    // a duplicate READ (the PsnCheck gives this verdict to READs only): find its resource
                    self.inc[1].next = true;
                    self.rr.scan_start.next = true;
                    self.state.d.next = RespState::DupScan;
                } else {
                    self.inc[6].next = true;
                    self.state.d.next = RespState::Drain;
                }
            }
            RespState::Check => {
                self.syn.d.next = self.syn_inv.val();
                self.kret.d.next = RespState::RkeyRes;
                if (!self.chk.seq_ok.val() & !self.ucr.q.val())
                    | (self.tk.is_atomic.val() & !self.at.plain.val())
                    | self.tk.is_other.val()
                    | !self.chk.acc_ok.val() | self.chk.no_res.val()
                {
                    self.state.d.next = RespState::ClassC;
                } else if self.chk.need_rwqe.val() & self.chk.rq_empty.val() {
                    // RNR NAK with the packet's PSN
                    self.inc[3].next = true;
                    self.syn.d.next = self.syn_rnr.val() | bit_cast::<8, 5>(self.tk.st.val().min_rnr_timer);
                    self.apsn.d.next = self.tk.psn.val();
                    self.ack_nxt.d.next = RespState::WriteBack;
                    self.state.d.next = RespState::TxAck;
                    if self.l_uc.val() {
                        // UC: no RNR NAK, the message is dropped
                        self.inc[3].next = false;
                        self.state.d.next = RespState::ClassC;
                    }
                } else if !self.chk.len_ok.val() {
                    self.state.d.next = RespState::ClassC;
                } else if self.tk.is_atomic.val() {
                    // an atomic's target must be 8-byte aligned (NAK invalid request), then its R_Key (check
                    // issued in Look)
                    self.state.d.next = RespState::KcWait;
                    if self.tk.va.val().get_bits::<3>(0) != self.zero3.val() {
                        self.state.d.next = RespState::ClassC;
                    }
                } else if self.tk.has_reth.val() {
                    self.state.d.next = RespState::KcWait;
                } else if self.tk.is_write.val() {
                    if self.chk.wl_resid.val() {
                        self.state.d.next = RespState::ClassC;
                    } else if self.chk.need_rwqe.val() {
                        self.fret.d.next = RespState::WExec;
                        self.state.d.next = RespState::Fetch;
                    } else {
                        // an in-order MIDDLE/LAST: WExec's sums are ready (started in Pre); the Scatter command
                        // is raised now
                        self.o_saddr.d.next = self.x.q.val().w_ptr;
                        self.x.d.next.w_ptr = self.add_e.sum.val();
                        self.x.d.next.w_resid = self.add_f.sum.val().get_bits::<32>(0);
                        self.o_sv.d.next = self.pay_pend.q.val();
                        self.state.d.next = RespState::SCmd;
                    }
                } else if self.tk.is_start.val() {
                    self.fret.d.next = RespState::SendFirst;
                    self.state.d.next = RespState::Fetch;
                } else {
                    self.state.d.next = RespState::SendChk;
                }
            }
            RespState::Kc => {
                self.kck.issue.next = true;
                self.state.d.next = RespState::KcWait;
            }
            RespState::KcWait => {
                if self.kck.res_valid.val() {
                    self.kck.take.next = true;
                    self.state.d.next = self.kret.q.val();
                }
            }
            RespState::RkeyRes => {
                if !self.kck.ok.val() {
                    self.syn.d.next = self.syn_acc.val();
                    self.state.d.next = RespState::ClassC;
                } else if self.tk.is_atomic.val() {
                    // the Atomic Unit: read the 8 bytes (their 64-byte block), compute, write back, answer
                    self.n_msn.d.next = self.msn1.q.val();
                    self.amsn.d.next = self.msn1.q.val();
                    self.o_saddr.d.next = self.kck.dma.val();
                    self.at.start.next = true;
                    self.state.d.next = RespState::AtRmw;
                } else if self.tk.is_write.val() {
                    if self.chk.wl_dlen.val() {
                        self.state.d.next = RespState::ClassC;
                    } else {
                        self.x.d.next.w_valid = true;
                        self.x.d.next.w_ptr = self.kck.dma.val();
                        self.x.d.next.w_resid = self.tk.dlen.val();
                        self.x.d.next.w_len = self.tk.dlen.val();
                        // the Scatter command now; a FIRST's pointer and residue after its payload are summed
                        // meanwhile (ready 4 cycles on; its PMTU payload takes longer) and taken in Finish, an
                        // ONLY ends the WRITE and needs neither
                        self.o_saddr.d.next = self.kck.dma.val();
                        self.o_sv.d.next = self.pay_pend.q.val();
                        self.ae_a.d.next = self.kck.dma.val();
                        self.ae_b.d.next = bit_cast::<64, 13>(self.tk.plen.val());
                        self.af_a.d.next = bit_cast::<64, 32>(self.tk.dlen.val());
                        self.af_b.d.next = !bit_cast::<64, 13>(self.tk.plen.val());
                        self.w_late.d.next = !self.tk.is_end.val();
                        self.f_wait.d.next = self.three2.val();
                        self.state.d.next = RespState::SCmd;
                        if self.chk.need_rwqe.val() {
                            self.o_sv.d.next = false;
                            self.w_late.d.next = false;
                            self.fret.d.next = RespState::WExec;
                            self.state.d.next = RespState::Fetch;
                        }
                    }
                } else {
                    // READ: MSN + 1 (C9-148), the responses; its resource is saved at ReadEnd
                    self.x.d.next.mip = false;
                    self.n_msn.d.next = self.msn1.q.val();
                    self.rd.start.next = true;
                    self.state.d.next = RespState::Read;
                }
            }
            RespState::Fetch => {
                // the WQE at the consumer index: taken from its prefetch entry, or its read queued (the Receive
                // Queue does both; a take also queues the prefetch of the index PF_DEPTH on)
                self.rq.fetch.next = true;
                if self.l_uc.val() & self.x.q.val().have_wqe {
                    // UC: the receive WQE of a SEND dropped part-way is still held (the consumer index moves
                    // only with its completion); the message that resynchronised takes it again from offset 0
                    self.rq.fetch.next = false;
                    self.state.d.next = self.fret.q.val();
                } else if self.rq.hit.val() {
                    self.x.d.next.wr_id = self.rq.ent.val().wr_id;
                    self.x.d.next.r_addr = self.rq.ent.val().addr;
                    self.x.d.next.r_len = self.rq.ent.val().len;
                    self.x.d.next.r_lkey = self.rq.ent.val().lkey;
                    self.x.d.next.r_off = self.zero32.val();
                    self.x.d.next.have_wqe = true;
                    self.state.d.next = self.fret.q.val();
                }
            }
            RespState::SendFirst => {
                // a SEND FIRST/ONLY starts at offset 0 of the WQE just fetched: its receive buffer's check
                self.kck.buf_first.next = true;
                self.kret.d.next = RespState::SendKc;
                self.state.d.next = RespState::Kc;
            }
            RespState::SendChk => {
                // a SEND MIDDLE/LAST: its place in the receive buffer (address and end) summed first
                self.kck.buf_next.next = true;
                self.wait_n.d.next = self.two2.val();
                self.ret.d.next = RespState::SendChk2;
                self.state.d.next = RespState::Wait;
            }
            RespState::SendChk2 => {
                self.kck.buf_next2.next = true;
                self.kret.d.next = RespState::SendKc;
                self.state.d.next = RespState::Kc;
            }
            RespState::SendKc => {
                if !self.kck.room_ok.val() | !self.kck.ok.val() {
                    // rxe send_data_in: copy_data fails with -EINVAL on a payload longer than the room left
                    // in the receive (before writing anything) and on a bad lkey alike: malformed WQE, NAK
                    // remote operational error, the receive completes LOC_QP_OP_ERR
                    self.syn.d.next = self.syn_op.val();
                    self.cc_cq.d.next = true;
                    self.cc_status.d.next = self.st_qp_op.val();
                    self.state.d.next = RespState::ClassC;
                } else {
                    self.o_saddr.d.next = self.kck.dma.val();
                    self.x.d.next.r_off = self.kck.end_off.val();
                    self.state.d.next = RespState::SCmd;
                    if self.tk.req.val().inv {
                        self.state.d.next = RespState::InvChk;
                    }
                }
            }
            RespState::InvChk => {
                // a SEND_WITH_INV (its receive buffer checked): may the QP's PD invalidate the IETH's R_Key?
                self.kck.inv_load.next = true;
                self.kret.d.next = RespState::InvRes;
                self.state.d.next = RespState::Kc;
            }
            RespState::InvRes => {
                // rxe `invalidate_rkey`: a fast-registration MR of the PD is invalidated in both Key Cache
                // copies before the packet goes on (a later request with the key finds it invalid); any other
                // key is class J, found at the completion (the payload is placed first, as rxe places it)
                self.state.d.next = RespState::SCmd;
                if self.kck.inv_ok.val() {
                    self.iv_ok.d.next = true;
                    self.state.d.next = RespState::InvWait;
                } else {
                    self.iv_bad.d.next = true;
                }
            }
            RespState::InvWait => {
                if self.inv_ready.val() {
                    self.state.d.next = RespState::SCmd;
                }
            }
            RespState::WExec => {
                self.o_saddr.d.next = self.x.q.val().w_ptr;
                self.aa_a.d.next = self.x.q.val().w_ptr;
                self.aa_b.d.next = bit_cast::<64, 13>(self.tk.plen.val());
                self.aa_c.d.next = false;
                self.ab_a.d.next = bit_cast::<64, 32>(self.x.q.val().w_resid);
                self.ab_b.d.next = !bit_cast::<64, 13>(self.tk.plen.val());
                self.ab_c.d.next = true;
                self.wait_n.d.next = self.two2.val();
                self.ret.d.next = RespState::WExec2;
                self.state.d.next = RespState::Wait;
            }
            RespState::WExec2 => {
                self.x.d.next.w_ptr = self.add_a.sum.val();
                self.x.d.next.w_resid = self.add_b.sum.val().get_bits::<32>(0);
                self.state.d.next = RespState::SCmd;
            }
            RespState::SCmd => {
                // the Scatter command: raised here unless raised in the cycle before (Check, RkeyRes: o_sv is
                // still set, taken at the earliest in this cycle); PayFwd waits until it is taken
                if !self.pay_pend.q.val() {
                    self.state.d.next = RespState::Finish;
                } else {
                    if !self.o_sv.q.val() {
                        self.o_sv.d.next = true;
                    }
                    self.state.d.next = RespState::PayFwd;
                }
            }
            RespState::PayFwd => {
                // the payload goes to the mover once the one before it is through (by the register: the Scatter
                // Path's ready, which the DMA write grant drives, stays out of the state's logic), and the state
                // machine goes on (a receive completion raised in Finish waits for the mover itself,
                // `cq_hold`); `l_fin_ok`: a WRITE FIRST's sums, started in RkeyRes, are ready for Finish
                if self.pay_pend.q.val() {
                    if !self.mv_on.q.val() & !self.o_sv.q.val() {
                        self.mv_on.d.next = true;
                        self.pay_pend.d.next = false;
                        if self.l_fin_ok.val() {
                            self.state.d.next = RespState::Finish;
                            if self.h_fast.q.val() {
                                self.state.d.next = RespState::FastEnd;
                            }
                        }
                    }
                } else if self.l_fin_ok.val() {
                    self.state.d.next = RespState::Finish;
                    if self.h_fast.q.val() {
                        self.state.d.next = RespState::FastEnd;
                    }
                }
            }
            RespState::Finish => {
                // a packet that raises a completion waits for the one raised before it to go
                if !(self.cqe.busy.val() & self.l_sync.val()) {
                    // an executed WRITE FIRST/MIDDLE makes its QP hot (see `hot`)
                    self.fp.arm.next = true;
                    self.fp.arm_in.next = self.tk.is_write.val() & !self.tk.is_end.val();
                    if self.w_late.q.val() {
                        self.x.d.next.w_ptr = self.add_e.sum.val();
                        self.x.d.next.w_resid = self.add_f.sum.val().get_bits::<32>(0);
                    }
                    self.n_epsn.d.next = self.psn1.q.val();
                    self.n_ack.d.next = self.psn1.q.val();
                    self.x.d.next.mip = !self.tk.is_end.val();
                    self.x.d.next.mip_write = self.tk.is_write.val();
                    // the ACK (AckReq) or straight to the write-back; after the completion when one goes first
                    self.syn.d.next = self.syn_ack.val();
                    self.apsn.d.next = self.tk.psn.val();
                    self.amsn.d.next = self.n_msn.q.val();
                    self.ack_nxt.d.next = RespState::WriteBack;
                    self.state.d.next = RespState::WriteBack;
                    // (UC: never an ACK, though a 6.1 rxe sets AckReq on a UC message's last packet)
                    if self.tk.ack_req.val() & !self.l_uc.val() {
                        self.state.d.next = RespState::TxAck;
                    }
                    // (the completion's fields only with a completion: one raised before may still be waiting)
                    if self.l_sync.val() {
                        self.cqe.raise.next = true;
                        self.cqe.wc.next.status = self.st_ok.val();
                        if self.l_ud.val() {
                            self.cqe.wc.next.src_qp = self.tk.sqpn.val();
                        }
                        self.cqe.wc.next.imm = self.zero32.val();
                        self.cqe.wc.next.wc_flags = self.wcf_grh.val();
                        if self.tk.is_imm.val() {
                            self.cqe.wc.next.imm = self.tk.imm.val();
                            self.cqe.wc.next.wc_flags = self.wcf_grh_imm.val();
                        }
                        // SEND_WITH_INV: the invalidated R_Key as a number (CQE bytes 12..15 little-endian)
                        if self.iv_ok.q.val() {
                            self.cqe.wc.next.imm = self.tk.rkey.val();
                            self.cqe.wc.next.wc_flags = self.wcf_grh_inv.val();
                        }
                    }
                    if self.tk.is_end.val() {
                        self.n_msn.d.next = self.msn1.q.val();
                        self.amsn.d.next = self.msn1.q.val();
                        if self.tk.is_send.val() {
                            self.cqe.wc.next.byte_len = self.x.q.val().r_off;
                            self.cqe.wc.next.opcode = self.wc_recv.val();
                            self.x.d.next.have_wqe = false;
                            self.x.d.next.r_off = self.zero32.val();
                        } else {
                            self.x.d.next.w_valid = false;
                            if self.tk.is_imm.val() {
                                self.cqe.wc.next.byte_len = self.x.q.val().w_len;
                                self.cqe.wc.next.opcode = self.wc_recv_imm.val();
                                self.x.d.next.have_wqe = false;
                            }
                        }
                    }
                    if self.iv_bad.q.val() {
                        // class J as rxe 6.1 does it (RESPST_ERR_INVALIDATE_RKEY): the ACK as for any SEND; the
                        // receive completes REM_INV_REQ_ERR, byte_len 0, no flags; then the other receives
                        // are flushed and the QP errs
                        self.cqe.wc.next.status = self.st_rem_inv.val();
                        self.cqe.wc.next.byte_len = self.zero32.val();
                        self.cqe.wc.next.wc_flags = self.zero8.val();
                        self.ack_nxt.d.next = RespState::CqOut;
                        self.state.d.next = RespState::CqOut;
                        if self.tk.ack_req.val() {
                            self.state.d.next = RespState::TxAck;
                        }
                    }
                }
            }
            RespState::CqOut => {
                // (a class-C or flush completion: o_cv is cleared above when it goes)
                if self.cq.valid.val() & self.cq.ready.val() {
                    self.state.d.next = RespState::Flush;
                }
            }
            RespState::TxAck => {
                self.l_wbq.next = self.ack_nxt.q.val() == RespState::WriteBack;
                if self.tx.free.val() {
                    // ACK / NAK / RNR NAK: AETH (syndrome, MSN), no payload (the inputs' defaults above)
                    self.tx.go.next = true;
                    if self.syn.q.val() == self.syn_ack.val() {
                        self.inc[10].next = true;
                    }
                    self.state.d.next = self.ack_nxt.q.val();
                    self.l_wb.next = self.ack_nxt.q.val() == RespState::WriteBack;
                }
            }
            RespState::Read => {
                // the READ's responses (read_reply.rs): each header and gather command into the output registers
                if self.rd.hdr_go.val() {
                    self.inc[11].next = true;
                    self.tx.go.next = true;
                    self.tx.opcode.next = self.rd.opcode.val();
                    self.tx.psn.next = self.rd.hdr_psn.val();
                    self.tx.ext.next = self.rd.ext.val();
                    self.tx.ext_words.next = self.rd.ext_words.val();
                    self.tx.pay_len.next = self.rd.pay_len.val();
                    self.tx.g_go.next = self.rd.g_go.val();
                }
                if self.rd.done.val() {
                    self.state.d.next = RespState::ReadEnd;
                }
            }
            RespState::ReadEnd => {
                // a new READ: ePSN = PSN + packets (ack_psn unchanged), its resource [PSN, ePSN) at the ring
                // head (overwriting the oldest); a replay changes nothing
                self.n_epsn.d.next = self.rd.cur_psn.val();
                self.state.d.next = RespState::WriteBack;
                if self.rd.replay.val() {
                    self.state.d.next = RespState::Drain;
                } else {
                    self.rr.we.next = true;
                    self.x.d.next.res_head = self.x.q.val().res_head + self.one4.val();
                    self.x.d.next.res_valid =
                        self.x.q.val().res_valid | (self.one16.val() << bit_cast::<16, 4>(self.x.q.val().res_head));
                }
            }
            RespState::DupScan => {
                // the resource scan runs (read_res.rs)
                if self.rr.scan_done.val() {
                    self.state.d.next = RespState::DupRead;
                }
            }
            RespState::DupRead => {
                self.rr.pick.next = true;
                self.state.d.next = RespState::DupGot;
                if !self.rr.found.val() {
                    self.inc[7].next = true;
                    self.state.d.next = RespState::Drain;
                }
            }
            RespState::DupGot => {
                // a READ's resource: the subset check, then the replay (read_reply.rs)
                self.rd.dup_go.next = !(self.tk.is_atomic.val() | self.rr.rdata.val().atomic);
                self.state.d.next = RespState::DupSub;
                if self.tk.is_atomic.val() | self.rr.rdata.val().atomic {
                    // a duplicate atomic is answered from its saved original value, never executed again (rxe);
                    // anything else that lands on an atomic's resource is dropped
                    self.inc[7].next = true;
                    self.state.d.next = RespState::Drain;
                    if self.tk.is_atomic.val()
                        & self.rr.rdata.val().atomic
                        & (self.rr.rdata.val().first == self.tk.psn.val())
                    {
                        self.inc[7].next = false;
                        self.at.orig_we.next = true;
                        self.syn.d.next = self.syn_ack.val();
                        self.amsn.d.next = self.tk.msn.val();
                        self.ack_nxt.d.next = RespState::Drain;
                        self.state.d.next = RespState::AtAck;
                    }
                }
            }
            RespState::DupSub => {
                // rxe duplicate_request: same rkey, [VA, VA + len) inside the original (read_reply.rs)
                if self.rd.dup_ok.val() {
                    self.state.d.next = RespState::Read;
                }
                if self.rd.dup_bad.val() {
                    self.inc[7].next = true;
                    self.state.d.next = RespState::Drain;
                }
            }
            RespState::ClassC => {
                if self.l_uc.val() {
                    // UC (rxe `drop_msg`): no NAK; the rest of the message is dropped, counted; a receive
                    // buffer that cannot take the SEND still completes LOC_QP_OP_ERR and flushes (rxe qp_error)
                    self.inc[12].next = true;
                    self.x.d.next.drop_msg = true;
                    self.x.d.next.mip = false;
                    self.x.d.next.w_valid = false;
                    self.state.d.next = RespState::WriteBack;
                    if self.cc_cq.q.val() {
                        self.state.d.next = RespState::CcCq;
                    }
                } else {
                    // NAK with the packet's PSN and the current MSN; then the receive in progress, the flush
                    self.inc[4].next = true;
                    self.apsn.d.next = self.tk.psn.val();
                    self.amsn.d.next = self.tk.msn.val();
                    self.n_msn.d.next = self.tk.msn.val();
                    self.ack_nxt.d.next = RespState::CcCq;
                    self.state.d.next = RespState::TxAck;
                }
            }
            RespState::CcCq => {
                self.state.d.next = RespState::Flush;
                if self.cc_cq.q.val() & self.cqe.busy.val() {
                    // the completion raised before this one has not gone yet
                    self.state.d.next = RespState::CcCq;
                } else if self.cc_cq.q.val() {
                    self.cqe.raise.next = true;
                    self.cqe.wc.next.byte_len = self.zero32.val();
                    self.cqe.wc.next.imm = self.zero32.val();
                    self.cqe.wc.next.status = self.cc_status.q.val();
                    self.cqe.wc.next.opcode = self.wc_recv.val();
                    self.cqe.wc.next.wc_flags = self.wcf_grh.val();
                    self.state.d.next = RespState::CqOut;
                }
            }
            RespState::Flush => {
                // rxe qp_error: every posted receive completes WR_FLUSH_ERR
                self.x.d.next.err = true;
                self.x.d.next.have_wqe = false;
                self.x.d.next.mip = false;
                self.x.d.next.w_valid = false;
                self.x.d.next.res_valid = self.zero16.val();
                self.state.d.next = RespState::WriteBack;
                if self.rq.ci.val() != self.rq.pi.val() {
                    self.ad_a.d.next = self.rq.cfg.val().base;
                    self.ad_b.d.next = bit_cast::<64, 16>(self.rq.slot.val()) << 6;
                    self.ac_a.d.next = bit_cast::<64, 16>(self.rq.ci.val());
                    self.ac_b.d.next = self.zero64.val();
                    self.ac_c.d.next = true;
                    self.wait_n.d.next = self.two2.val();
                    self.ret.d.next = RespState::FlushF;
                    self.state.d.next = RespState::Wait;
                }
            }
            RespState::FlushF => {
                self.wqe_addr.d.next = self.add_d.sum.val();
                self.rq.ci1_we.next = true;
                self.fret.d.next = RespState::FlushCq;
                self.state.d.next = RespState::Fetch;
            }
            RespState::FlushCq => {
                // (once the completion raised before it has gone)
                if !self.cqe.busy.val() {
                    self.cqe.raise.next = true;
                    self.cqe.wc.next.byte_len = self.zero32.val();
                    self.cqe.wc.next.imm = self.zero32.val();
                    self.cqe.wc.next.status = self.st_flush.val();
                    self.cqe.wc.next.opcode = self.wc_recv.val();
                    self.cqe.wc.next.wc_flags = self.zero8.val();
                    self.state.d.next = RespState::CqOut;
                }
            }
            RespState::AtRmw => {
                // the target's block read, the new value computed and written back (atomic.rs): its 8-byte
                // Scatter command and beat go out here
                if self.at.len8.val() {
                    self.tk.len8.next = true;
                }
                if self.at.sc_set.val() {
                    self.o_sv.d.next = true;
                }
                if self.at.pay.val() {
                    self.s_pay.tvalid.next = self.at.s_tvalid.val();
                    self.s_pay.tdata.next = self.at.s_tdata.val();
                    self.s_pay.tkeep.next = self.at.s_tkeep.val();
                    self.s_pay.tlast.next = true;
                }
                if self.at.done.val() {
                    self.state.d.next = RespState::AtEnd;
                }
            }
            RespState::AtEnd => {
                // executed: ePSN + 1, MSN + 1 (set at RkeyRes), the original value saved at the resource ring's
                // head for a duplicate
                self.n_epsn.d.next = self.psn1.q.val();
                self.n_ack.d.next = self.psn1.q.val();
                self.x.d.next.mip = false;
                self.rr.we.next = true;
                self.rr.w.next.end = self.psn1.q.val();
                self.rr.w.next.va = self.at.orig.val();
                self.rr.w.next.len = self.zero32.val();
                self.rr.w.next.atomic = true;
                self.x.d.next.res_head = self.x.q.val().res_head + self.one4.val();
                self.x.d.next.res_valid =
                    self.x.q.val().res_valid | (self.one16.val() << bit_cast::<16, 4>(self.x.q.val().res_head));
                self.syn.d.next = self.syn_ack.val();
                self.ack_nxt.d.next = RespState::WriteBack;
                self.state.d.next = RespState::AtAck;
            }
            RespState::AtAck => {
                // ATOMIC_ACKNOWLEDGE: AETH (ACK, MSN), then the original value big-endian (AtomicAckETH)
                if self.tx.free.val() {
                    self.tx.go.next = true;
                    self.tx.opcode.next = self.op_atack.val();
                    self.tx.psn.next = self.tk.psn.val();
                    self.tx.ext.next = bit_cast::<EXT_BITS, 32>(self.l_aeth_ack.val())
                        | (bit_cast::<EXT_BITS, 64>(self.at.orig_be.val()) << 32);
                    self.tx.ext_words.next = self.three4.val();
                    self.state.d.next = self.ack_nxt.q.val();
                }
            }
            RespState::WriteBack => {
                // (below the match: l_wb)
                self.l_wb.next = true;
                self.l_wbq.next = true;
            }
            RespState::Db => {
                // the Receive Queue's doorbell engine works; Idle again once it has finished, by its register
                if self.rq.db_done.val() {
                    self.state.d.next = RespState::Idle;
                }
            }
            RespState::FastEnd => {
                // (a payload of one beat gets here before the sums: wait for them)
                if self.f_wait.q.val() == self.zero2.val() {
                    // the fast path's Finish: PSN + 1, the WRITE pointer and residue (sums started in Idle); a LAST
                    // ends the WRITE (MSN + 1, msn1 from the FIRST's Verdict); ACK when AckReq
                    self.n_epsn.d.next = self.add_c.sum.val().get_bits::<24>(0);
                    self.n_ack.d.next = self.add_c.sum.val().get_bits::<24>(0);
                    self.x.d.next.w_ptr = self.add_e.sum.val();
                    self.x.d.next.w_resid = self.add_f.sum.val().get_bits::<32>(0);
                    self.fp.arm.next = true;
                    self.syn.d.next = self.syn_ack.val();
                    self.apsn.d.next = self.tk.psn.val();
                    self.amsn.d.next = self.n_msn.q.val();
                    if self.tk.is_end.val() {
                        self.n_msn.d.next = self.msn1.q.val();
                        self.amsn.d.next = self.msn1.q.val();
                        self.x.d.next.mip = false;
                        self.x.d.next.w_valid = false;
                    }
                    self.ack_nxt.d.next = RespState::WriteBack;
                    self.state.d.next = RespState::WriteBack;
                    if self.tk.ack_req.val() {
                        self.state.d.next = RespState::TxAck;
                    }
                }
            }
            RespState::Drain => {
                if self.pay_pend.q.val() {
                    // (behind the mover's payload)
                    if !self.mv_on.q.val() {
                        self.pay.tready.next = true;
                        if self.pay.tvalid.val() & self.pay.tlast.val() {
                            self.pay_pend.d.next = false;
                            self.state.d.next = RespState::Idle;
                        }
                    }
                } else {
                    self.state.d.next = RespState::Idle;
                }
            }
            _ => {
                self.state.d.next = RespState::Idle;
            }
        }
        // A receive completion raised (Finish, CcCq, FlushCq): its WQE's wr_id, CQ and QP, held until the
        // payload in the mover now is through; the receive ring's consumer index moves on
        if self.cqe.raise.val() {
            self.rq.raise.next = true;
        }
        // The write-back of the packet's QP state, then Idle (WriteBack, or TxAck's last cycle, l_wb).
        if self.l_wb.val() {
            self.tk.upd_we.next = true;
            self.x_ram.we.next = true;
            self.rq.wb.next = true;
            // the hot QP's next packet: MIDDLE of PMTU bytes while more than PMTU is left, else LAST of
            // the rest (the WRITE length rule)
            self.fp.wb.next = true;
            self.state.d.next = RespState::Idle;
            if self.pay_pend.q.val() {
                self.state.d.next = RespState::Drain;
            }
        }
        // The next request's header is taken in Idle, or already in the write-back's cycle when no command
        // waits for Idle and no payload is left to drain (in TxAck only while the output is free by its
        // registers, so `hdr_ready` never waits on the TX side's ready), and the header was on offer in the
        // cycle before (`hq_v`, `hq_diff`: registered). A header of the same QP is taken there too, unless the
        // packet armed the fast path (then Idle takes it, the QP hot): every per-QP state it loads is read
        // after the write-back. The QP Context forwards the responder-state write to a lookup presented in its
        // cycle; `x_ram` and the Receive Queue's rings are read at the packet's QPN in the cycles after the
        // take (their read-first answer in the take's cycle is not used: `load` comes 3 cycles on).
        self.hq_diff.d.next = self.hdr_valid.val() & (self.l_rqpn.val().get_bits::<8>(0) != self.tk.qpn.val().get_bits::<8>(0));
        self.hq_v.d.next = self.hdr_valid.val();
        if self.l_wbq.val() & (self.hq_diff.q.val() | (self.hq_v.q.val() & !self.fp.armed.val())) & !self.pay_pend.q.val()
            & !self.rqs_valid.val() & !self.rp_valid.val()
            & !self.rqdb_valid.val() & !self.tx.busy.val()
        {
            self.hdr_ready.next = true;
            self.l_take.next = self.hdr_valid.val();
        }
        if self.l_take.val() {
            self.ahead.d.next = self.l_wbq.val() & self.tk.pk_ok.val();
            self.x_ram.raddr.next = self.l_rqpn.val().get_bits::<8>(0);
            self.rq.take.next = true;
            self.tk.take.next = true;
            self.at.take.next = true;
            self.pay_pend.d.next = self.hdr_pay_len.val() != self.zero13.val();
            // the fast path's sums start now (PSN + 1, the WRITE pointer and residue after this
            // payload; ready 4 cycles on, by FastEnd); the general path sets these again in Pre
            self.h_fast.d.next = self.fp.fpay.val();
            // the fast path's Scatter command goes out in the next cycle (the Scatter Path's plan
            // pipeline starts while LkWait decides)
            if self.fp.fpay.val() {
                self.o_sv.d.next = true;
                self.o_saddr.d.next = self.x.q.val().w_ptr;
            }
            self.f_wait.d.next = self.three2.val();
            self.fp.take.next = true;
            self.w_late.d.next = false;
            self.ac_a.d.next = bit_cast::<64, 24>(self.hdr.val().psn);
            self.ac_b.d.next = self.zero64.val();
            self.ac_c.d.next = true;
            self.ae_a.d.next = self.x.q.val().w_ptr;
            self.ae_b.d.next = bit_cast::<64, 13>(self.hdr_pay_len.val());
            self.af_a.d.next = bit_cast::<64, 32>(self.x.q.val().w_resid);
            self.af_b.d.next = !bit_cast::<64, 13>(self.hdr_pay_len.val());
            self.state.d.next = RespState::LkWait;
        }
    }
}

#[cfg(test)]
mod tests;
