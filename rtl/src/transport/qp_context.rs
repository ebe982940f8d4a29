//! QP Context: per-QP state of `N` QPs in three RAMs, one writer each:
//!
//! * static attributes ([`QpStatic`]), written by the driver (`attr_*` port), as set by `modify_qp`;
//! * responder state ([`QpResp`], rxe `qp->resp`), written back by the responder (`upd_*` port);
//! * requester state ([`QpReq`], rxe `qp->req`/`qp->comp`), written and read by the requester (`req_*` ports).
//!
//! Lookup (`lk_*`, one per cycle, latency 3): by BTH destination QPN, returns static + responder state and a
//! `drop` verdict with a reason (`testbench::model::DropReason` codes) following rxe `rxe_recv.c`:
//! `hdr_check` (QPN 0 → `Qp0`), the QP table lookup (QPN ≥ N → `UnknownQp`), `check_type_state` (opcode
//! transport class must match the QP type → `WrongTransport`; requests need the QP in RTR/RTS/SQD/SQE,
//! responses in RTS/SQD → `BadState`), `check_addr` (RC and UC: source IP must be the QP's remote IP →
//! `AddrMismatch`) and `check_keys` (P_Key must pkey-match the default 0xFFFF, i.e. its low 15 bits are 0x7FFF,
//! so 0xFFFF and 0x7FFF pass → `BadPkey`; UD: the DETH's Q_Key (`lk_qkey`) must be the QP's, QP1's the GSI
//! Q_Key 0x80010000 → `BadQkey`). A QP never written is in RESET and gives `BadState`.
//!
//! Read-modify-write hazard: a lookup presented in cycle c returns the responder state with every `upd_*`
//! write presented up to cycle c+2 applied (writes during the RAM read and the two pipeline cycles after are
//! forwarded), and the static attributes with every `attr_*` write up to cycle c+1. So a responder that writes
//! its update back in the cycle the lookup result is out (c+3) is seen by a lookup of the same QPN in the very
//! next cycle: back-to-back packets of one QP need no stall. A responder with P more cycles of processing
//! between result and update must forward its own last P updates (or keep same-QPN packets P cycles apart).
//!
//! Requester RAM: `req_rdata` is `mem[req_rd_qpn]` one cycle later, read-first (a write in the same cycle is
//! not seen). Writes to QPN 0 or QPN ≥ N on any port are ignored.

use crate::common::fifo::SdpRam;
use rust_hdl::prelude::*;
use testbench::model::{DropReason, QpState, QpType};
use testbench::wire::headers::DEFAULT_PKEY;
use testbench::wire::opcode::{
    transport_bits, OPCODE_OPERATION_MASK, RC_ATOMIC_ACKNOWLEDGE, RC_RDMA_READ_RESPONSE_FIRST, RC_SEND_ONLY,
    UC_SEND_ONLY, UD_SEND_ONLY,
};

/// Static QP attributes (driver-written). Encodings: `state` = `testbench::model::QpState as u8`, `qp_type` =
/// `testbench::model::QpType as u8`, `path_mtu` = IB MTU code (`enum ibv_mtu`: 1 = 256 ... 5 = 4096),
/// `access` = `testbench::model::AccessFlags` bits, `pd` = `Pd` (32 bits as in the model).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct QpStatic {
    pub state: Bits<3>,
    pub qp_type: Bits<2>,
    pub path_mtu: Bits<3>,
    pub access: Bits<8>,
    pub min_rnr_timer: Bits<5>,
    pub timeout: Bits<5>,
    pub retry_cnt: Bits<3>,
    pub rnr_retry: Bits<3>,
    pub max_rd_atomic: Bits<8>,
    pub max_dest_rd_atomic: Bits<8>,
    pub dest_qpn: Bits<24>,
    pub pd: Bits<32>,
    pub sport: Bits<16>,
    /// The path's remote address: IPv6, or IPv4-mapped (::ffff:a.b.c.d), as RX Parse hands sources on.
    pub remote_ip: Bits<128>,
    /// The path is RoCEv2 over IPv6.
    pub v6: Bit,
    pub remote_mac: Bits<48>,
    /// The QP's Q_Key (UD: a DETH must carry it; QP1 takes the GSI Q_Key whatever this says).
    pub qkey: Bits<32>,
}

/// Responder state (rxe `qp->resp`): ePSN, `ack_psn` (duplicates are re-ACKed with `ack_psn - 1`), MSN,
/// `sent_psn_nak`, receive-queue index, responder-resource ring head.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct QpResp {
    pub epsn: Bits<24>,
    pub ack_psn: Bits<24>,
    pub msn: Bits<24>,
    pub sent_psn_nak: Bit,
    pub rq_idx: Bits<16>,
    pub res_head: Bits<8>,
}

/// Requester/completer state (rxe `qp->req.psn`, `qp->comp.psn`, ...).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct QpReq {
    pub next_psn: Bits<24>,
    pub unacked_psn: Bits<24>,
    pub sq_idx: Bits<16>,
    pub retry_left: Bits<3>,
    pub rnr_left: Bits<3>,
}

/// Drop reason code (`testbench::model::DropReason as u8`).
pub fn reason_code(r: DropReason) -> u64 {
    r as u8 as u64
}

/// The QP context of `N` QPs (QPN 1..N-1 usable, 0 reserved); `AW` address bits, `N <= 2^AW`.
#[derive(LogicBlock)]
pub struct QpContext<const N: usize, const AW: usize> {
    pub clock: Signal<In, Clock>,
    // driver: static attributes
    pub attr_we: Signal<In, Bit>,
    pub attr_qpn: Signal<In, Bits<24>>,
    pub attr_data: Signal<In, QpStatic>,
    // lookup
    pub lk_valid: Signal<In, Bit>,
    pub lk_qpn: Signal<In, Bits<24>>,
    pub lk_opcode: Signal<In, Bits<8>>,
    pub lk_pkey: Signal<In, Bits<16>>,
    pub lk_src_ip: Signal<In, Bits<128>>,
    /// The DETH's Q_Key (looked at for a UD QP only).
    pub lk_qkey: Signal<In, Bits<32>>,
    // lookup result, 3 cycles later
    pub out_valid: Signal<Out, Bit>,
    pub out_qpn: Signal<Out, Bits<24>>,
    pub out_is_request: Signal<Out, Bit>,
    pub out_drop: Signal<Out, Bit>,
    pub out_reason: Signal<Out, Bits<8>>,
    pub out_static: Signal<Out, QpStatic>,
    pub out_resp: Signal<Out, QpResp>,
    // responder write-back
    pub upd_we: Signal<In, Bit>,
    pub upd_qpn: Signal<In, Bits<24>>,
    pub upd_data: Signal<In, QpResp>,
    // requester
    pub req_we: Signal<In, Bit>,
    pub req_qpn: Signal<In, Bits<24>>,
    pub req_wdata: Signal<In, QpReq>,
    pub req_rd_qpn: Signal<In, Bits<24>>,
    pub req_rdata: Signal<Out, QpReq>,
    // RAMs
    ram_st: SdpRam<QpStatic, AW>,
    ram_rs: SdpRam<QpResp, AW>,
    ram_rq: SdpRam<QpReq, AW>,
    // write history (the write of the previous cycle)
    a1_we: DFF<Bit>,
    a1_idx: DFF<Bits<AW>>,
    a1_data: DFF<QpStatic>,
    u1_we: DFF<Bit>,
    u1_idx: DFF<Bits<AW>>,
    u1_data: DFF<QpResp>,
    // stage 1
    s1_valid: DFF<Bit>,
    s1_qpn: DFF<Bits<24>>,
    s1_qp0: DFF<Bit>,
    s1_oor: DFF<Bit>,
    s1_tr: DFF<Bits<3>>,
    /// The opcodes whose transport (`transport_bits`, the golden opcode table) is not their bits 7:5 (the
    /// masked atomics: manufacturer range, RC requests), and that transport. A 256-entry table (`Lut8`)
    /// made the block 695 LUTs in Yosys against 596 with these two compares.
    tr_ex_op: [Constant<Bits<8>>; 2],
    tr_ex_tr: [Constant<Bits<3>>; 2],
    s1_req: DFF<Bit>,
    s1_pkey_ok: DFF<Bit>,
    s1_sip: DFF<Bits<128>>,
    s1_qkey: DFF<Bits<32>>,
    s1_qp1: DFF<Bit>,
    s1_gsi: DFF<Bit>,
    // stage 2
    s2_valid: DFF<Bit>,
    s2_qpn: DFF<Bits<24>>,
    s2_qp0: DFF<Bit>,
    s2_oor: DFF<Bit>,
    s2_tr: DFF<Bits<3>>,
    s2_req: DFF<Bit>,
    s2_pkey_ok: DFF<Bit>,
    s2_sip: DFF<Bits<128>>,
    s2_qkey: DFF<Bits<32>>,
    s2_qp1: DFF<Bit>,
    s2_gsi: DFF<Bit>,
    st_qkey: Signal<Local, Bits<32>>,
    qkey_ok: Signal<Local, Bit>,
    s2_static: DFF<QpStatic>,
    s2_resp: DFF<QpResp>,
    // stage 3 (outputs)
    o_valid: DFF<Bit>,
    o_qpn: DFF<Bits<24>>,
    o_req: DFF<Bit>,
    o_drop: DFF<Bit>,
    o_reason: DFF<Bits<8>>,
    o_static: DFF<QpStatic>,
    o_resp: DFF<QpResp>,
    // locals
    attr_ok: Signal<Local, Bit>,
    upd_ok: Signal<Local, Bit>,
    req_ok: Signal<Local, Bit>,
    attr_idx: Signal<Local, Bits<AW>>,
    upd_idx: Signal<Local, Bits<AW>>,
    s1_idx: Signal<Local, Bits<AW>>,
    s2_idx: Signal<Local, Bits<AW>>,
    lk_op: Signal<Local, Bits<5>>,
    st_state: Signal<Local, Bits<3>>,
    st_type: Signal<Local, Bits<2>>,
    st_ip: Signal<Local, Bits<128>>,
    type_ok: Signal<Local, Bit>,
    state_ok: Signal<Local, Bit>,
    // constants
    zero24: Constant<Bits<24>>,
    n_qps: Constant<Bits<24>>,
    op_resp_lo: Constant<Bits<5>>,
    op_resp_hi: Constant<Bits<5>>,
    pkey_low: Constant<Bits<15>>,
    tr_rc: Constant<Bits<3>>,
    tr_uc: Constant<Bits<3>>,
    tr_ud: Constant<Bits<3>>,
    ty_rc: Constant<Bits<2>>,
    ty_uc: Constant<Bits<2>>,
    ty_ud: Constant<Bits<2>>,
    st_rtr: Constant<Bits<3>>,
    st_rts: Constant<Bits<3>>,
    st_sqd: Constant<Bits<3>>,
    st_sqe: Constant<Bits<3>>,
    r_none: Constant<Bits<8>>,
    r_qp0: Constant<Bits<8>>,
    r_unknown: Constant<Bits<8>>,
    r_transport: Constant<Bits<8>>,
    r_state: Constant<Bits<8>>,
    r_addr: Constant<Bits<8>>,
    r_pkey: Constant<Bits<8>>,
    r_qkey: Constant<Bits<8>>,
    one24: Constant<Bits<24>>,
    gsi_qkey: Constant<Bits<32>>,
}

impl<const N: usize, const AW: usize> Default for QpContext<N, AW> {
    fn default() -> Self {
        assert!(N >= 2 && N <= 1 << AW && N < 1 << 24, "QpContext<N, AW>: need 2 <= N <= 2^AW");
        let tr = |op: u8| Constant::new(bits::<3>(u64::from(transport_bits(op))));
        let tr_ex: Vec<(u8, u8)> =
            (0..=255u8).filter(|&c| transport_bits(c) != c >> 5).map(|c| (c, transport_bits(c))).collect();
        assert_eq!(tr_ex.len(), 2, "QP Context handles two opcodes whose transport is not bits 7:5: {tr_ex:?}");
        let ty = |t: QpType| Constant::new(bits::<2>(t as u64));
        let st = |s: QpState| Constant::new(bits::<3>(s as u64));
        let r = |x: DropReason| Constant::new(bits::<8>(reason_code(x)));
        Self {
            clock: Default::default(),
            attr_we: Default::default(),
            attr_qpn: Default::default(),
            attr_data: Default::default(),
            lk_valid: Default::default(),
            lk_qpn: Default::default(),
            lk_opcode: Default::default(),
            lk_pkey: Default::default(),
            lk_src_ip: Default::default(),
            out_valid: Default::default(),
            out_qpn: Default::default(),
            out_is_request: Default::default(),
            out_drop: Default::default(),
            out_reason: Default::default(),
            out_static: Default::default(),
            out_resp: Default::default(),
            upd_we: Default::default(),
            upd_qpn: Default::default(),
            upd_data: Default::default(),
            req_we: Default::default(),
            req_qpn: Default::default(),
            req_wdata: Default::default(),
            req_rd_qpn: Default::default(),
            req_rdata: Default::default(),
            ram_st: Default::default(),
            ram_rs: Default::default(),
            ram_rq: Default::default(),
            a1_we: Default::default(),
            a1_idx: Default::default(),
            a1_data: Default::default(),
            u1_we: Default::default(),
            u1_idx: Default::default(),
            u1_data: Default::default(),
            s1_valid: Default::default(),
            s1_qpn: Default::default(),
            s1_qp0: Default::default(),
            s1_oor: Default::default(),
            s1_tr: Default::default(),
            tr_ex_op: [0, 1].map(|i| Constant::new(bits::<8>(u64::from(tr_ex[i].0)))),
            tr_ex_tr: [0, 1].map(|i| Constant::new(bits::<3>(u64::from(tr_ex[i].1)))),
            s1_req: Default::default(),
            s1_pkey_ok: Default::default(),
            s1_sip: Default::default(),
            s2_valid: Default::default(),
            s2_qpn: Default::default(),
            s2_qp0: Default::default(),
            s2_oor: Default::default(),
            s2_tr: Default::default(),
            s2_req: Default::default(),
            s2_pkey_ok: Default::default(),
            s2_sip: Default::default(),
            s2_qkey: Default::default(),
            s2_qp1: Default::default(),
            s2_gsi: Default::default(),
            st_qkey: Default::default(),
            qkey_ok: Default::default(),
            s1_qkey: Default::default(),
            s1_qp1: Default::default(),
            s1_gsi: Default::default(),
            lk_qkey: Default::default(),
            s2_static: Default::default(),
            s2_resp: Default::default(),
            o_valid: Default::default(),
            o_qpn: Default::default(),
            o_req: Default::default(),
            o_drop: Default::default(),
            o_reason: Default::default(),
            o_static: Default::default(),
            o_resp: Default::default(),
            attr_ok: Default::default(),
            upd_ok: Default::default(),
            req_ok: Default::default(),
            attr_idx: Default::default(),
            upd_idx: Default::default(),
            s1_idx: Default::default(),
            s2_idx: Default::default(),
            lk_op: Default::default(),
            st_state: Default::default(),
            st_type: Default::default(),
            st_ip: Default::default(),
            type_ok: Default::default(),
            state_ok: Default::default(),
            zero24: Constant::new(bits::<24>(0)),
            n_qps: Constant::new(bits::<24>(N as u64)),
            op_resp_lo: Constant::new(bits::<5>((RC_RDMA_READ_RESPONSE_FIRST & OPCODE_OPERATION_MASK) as u64)),
            op_resp_hi: Constant::new(bits::<5>((RC_ATOMIC_ACKNOWLEDGE & OPCODE_OPERATION_MASK) as u64)),
            pkey_low: Constant::new(bits::<15>((DEFAULT_PKEY & 0x7FFF) as u64)),
            tr_rc: tr(RC_SEND_ONLY),
            tr_uc: tr(UC_SEND_ONLY),
            tr_ud: tr(UD_SEND_ONLY),
            ty_rc: ty(QpType::Rc),
            ty_uc: ty(QpType::Uc),
            ty_ud: ty(QpType::Ud),
            st_rtr: st(QpState::Rtr),
            st_rts: st(QpState::Rts),
            st_sqd: st(QpState::Sqd),
            st_sqe: st(QpState::Sqe),
            r_none: Constant::new(bits::<8>(0)),
            r_qp0: r(DropReason::Qp0),
            r_unknown: r(DropReason::UnknownQp),
            r_transport: r(DropReason::WrongTransport),
            r_state: r(DropReason::BadState),
            r_addr: r(DropReason::AddrMismatch),
            r_pkey: r(DropReason::BadPkey),
            r_qkey: r(DropReason::BadQkey),
            one24: Constant::new(bits::<24>(1)),
            gsi_qkey: Constant::new(bits::<32>(u64::from(testbench::wire::headers::GSI_QKEY))),
        }
    }
}

impl<const N: usize, const AW: usize> Logic for QpContext<N, AW> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, a1_we, a1_idx, a1_data, u1_we, u1_idx, u1_data, s1_valid, s1_qpn, s1_qp0, s1_oor, s1_tr,
            s1_req, s1_pkey_ok, s1_sip, s2_valid, s2_qpn, s2_qp0, s2_oor, s2_tr, s2_req, s2_pkey_ok, s2_sip, s2_qkey, s2_qp1, s2_gsi, s1_qkey, s1_qp1, s1_gsi,
            s2_static, s2_resp, o_valid, o_qpn, o_req, o_drop, o_reason, o_static, o_resp
        );
        clock!(self, clock, ram_st, ram_rs, ram_rq);
        // ---- write ports (QPN 0 and QPN >= N ignored)
        self.attr_idx.next = self.attr_qpn.val().get_bits::<AW>(0);
        self.upd_idx.next = self.upd_qpn.val().get_bits::<AW>(0);
        self.attr_ok.next =
            self.attr_we.val() & (self.attr_qpn.val() != self.zero24.val()) & (self.attr_qpn.val() < self.n_qps.val());
        self.upd_ok.next =
            self.upd_we.val() & (self.upd_qpn.val() != self.zero24.val()) & (self.upd_qpn.val() < self.n_qps.val());
        self.req_ok.next =
            self.req_we.val() & (self.req_qpn.val() != self.zero24.val()) & (self.req_qpn.val() < self.n_qps.val());
        self.ram_st.we.next = self.attr_ok.val();
        self.ram_st.waddr.next = self.attr_idx.val();
        self.ram_st.wdata.next = self.attr_data.val();
        self.ram_rs.we.next = self.upd_ok.val();
        self.ram_rs.waddr.next = self.upd_idx.val();
        self.ram_rs.wdata.next = self.upd_data.val();
        self.ram_rq.we.next = self.req_ok.val();
        self.ram_rq.waddr.next = self.req_qpn.val().get_bits::<AW>(0);
        self.ram_rq.wdata.next = self.req_wdata.val();
        self.ram_rq.raddr.next = self.req_rd_qpn.val().get_bits::<AW>(0);
        self.req_rdata.next = self.ram_rq.rdata.val();
        self.a1_we.d.next = self.attr_ok.val();
        self.a1_idx.d.next = self.attr_idx.val();
        self.a1_data.d.next = self.attr_data.val();
        self.u1_we.d.next = self.upd_ok.val();
        self.u1_idx.d.next = self.upd_idx.val();
        self.u1_data.d.next = self.upd_data.val();
        // ---- stage 0: RAM read address, header checks that need no QP state
        self.ram_st.raddr.next = self.lk_qpn.val().get_bits::<AW>(0);
        self.ram_rs.raddr.next = self.lk_qpn.val().get_bits::<AW>(0);
        self.lk_op.next = self.lk_opcode.val().get_bits::<5>(0);
        self.s1_valid.d.next = self.lk_valid.val();
        self.s1_qpn.d.next = self.lk_qpn.val();
        self.s1_qp0.d.next = self.lk_qpn.val() == self.zero24.val();
        self.s1_oor.d.next = self.lk_qpn.val() >= self.n_qps.val();
        // the transport class: bits 7:5 but for the golden opcode table's exceptions (the masked atomics)
        self.s1_tr.d.next = self.lk_opcode.val().get_bits::<3>(5);
        if self.lk_opcode.val() == self.tr_ex_op[0].val() {
            self.s1_tr.d.next = self.tr_ex_tr[0].val();
        }
        if self.lk_opcode.val() == self.tr_ex_op[1].val() {
            self.s1_tr.d.next = self.tr_ex_tr[1].val();
        }
        self.s1_req.d.next = !((self.lk_op.val() >= self.op_resp_lo.val()) & (self.lk_op.val() <= self.op_resp_hi.val()));
        self.s1_pkey_ok.d.next = self.lk_pkey.val().get_bits::<15>(0) == self.pkey_low.val();
        self.s1_sip.d.next = self.lk_src_ip.val();
        self.s1_qkey.d.next = self.lk_qkey.val();
        self.s1_qp1.d.next = self.lk_qpn.val() == self.one24.val();
        self.s1_gsi.d.next = self.lk_qkey.val() == self.gsi_qkey.val();
        // ---- stage 1: RAM data (writes up to cycle c-1) + forward the writes of cycles c and c+1
        self.s1_idx.next = self.s1_qpn.q.val().get_bits::<AW>(0);
        self.s2_static.d.next = self.ram_st.rdata.val();
        if self.a1_we.q.val() & (self.a1_idx.q.val() == self.s1_idx.val()) {
            self.s2_static.d.next = self.a1_data.q.val();
        }
        if self.attr_ok.val() & (self.attr_idx.val() == self.s1_idx.val()) {
            self.s2_static.d.next = self.attr_data.val();
        }
        self.s2_resp.d.next = self.ram_rs.rdata.val();
        if self.u1_we.q.val() & (self.u1_idx.q.val() == self.s1_idx.val()) {
            self.s2_resp.d.next = self.u1_data.q.val();
        }
        if self.upd_ok.val() & (self.upd_idx.val() == self.s1_idx.val()) {
            self.s2_resp.d.next = self.upd_data.val();
        }
        self.s2_valid.d.next = self.s1_valid.q.val();
        self.s2_qpn.d.next = self.s1_qpn.q.val();
        self.s2_qp0.d.next = self.s1_qp0.q.val();
        self.s2_oor.d.next = self.s1_oor.q.val();
        self.s2_tr.d.next = self.s1_tr.q.val();
        self.s2_req.d.next = self.s1_req.q.val();
        self.s2_pkey_ok.d.next = self.s1_pkey_ok.q.val();
        self.s2_sip.d.next = self.s1_sip.q.val();
        self.s2_qkey.d.next = self.s1_qkey.q.val();
        self.s2_qp1.d.next = self.s1_qp1.q.val();
        self.s2_gsi.d.next = self.s1_gsi.q.val();
        // ---- stage 2: forward the update of cycle c+2; rxe_recv.c checks
        self.s2_idx.next = self.s2_qpn.q.val().get_bits::<AW>(0);
        self.o_resp.d.next = self.s2_resp.q.val();
        if self.upd_ok.val() & (self.upd_idx.val() == self.s2_idx.val()) {
            self.o_resp.d.next = self.upd_data.val();
        }
        self.o_static.d.next = self.s2_static.q.val();
        self.o_valid.d.next = self.s2_valid.q.val();
        self.o_qpn.d.next = self.s2_qpn.q.val();
        self.o_req.d.next = self.s2_req.q.val();
        self.st_state.next = self.s2_static.q.val().state;
        self.st_type.next = self.s2_static.q.val().qp_type;
        self.st_ip.next = self.s2_static.q.val().remote_ip;
        self.st_qkey.next = self.s2_static.q.val().qkey;
        self.qkey_ok.next = self.s2_qkey.q.val() == self.st_qkey.val();
        if self.s2_qp1.q.val() {
            self.qkey_ok.next = self.s2_gsi.q.val();
        }
        // check_type_state: transport class of the opcode must be the QP's type
        self.type_ok.next = ((self.st_type.val() == self.ty_rc.val()) & (self.s2_tr.q.val() == self.tr_rc.val()))
            | ((self.st_type.val() == self.ty_uc.val()) & (self.s2_tr.q.val() == self.tr_uc.val()))
            | ((self.st_type.val() == self.ty_ud.val()) & (self.s2_tr.q.val() == self.tr_ud.val()));
        // requests: resp.state READY (RTR..SQE); responses: req.state READY..DRAINED (RTS, SQD)
        self.state_ok.next = (self.st_state.val() == self.st_rts.val()) | (self.st_state.val() == self.st_sqd.val());
        if self.s2_req.q.val() {
            self.state_ok.next = (self.st_state.val() == self.st_rtr.val())
                | (self.st_state.val() == self.st_rts.val())
                | (self.st_state.val() == self.st_sqd.val())
                | (self.st_state.val() == self.st_sqe.val());
        }
        self.o_drop.d.next = true;
        self.o_reason.d.next = self.r_none.val();
        if self.s2_qp0.q.val() {
            self.o_reason.d.next = self.r_qp0.val();
        } else if self.s2_oor.q.val() {
            self.o_reason.d.next = self.r_unknown.val();
        } else if !self.type_ok.val() {
            self.o_reason.d.next = self.r_transport.val();
        } else if !self.state_ok.val() {
            self.o_reason.d.next = self.r_state.val();
        } else if (self.s2_sip.q.val() != self.st_ip.val()) & (self.st_type.val() != self.ty_ud.val()) {
            // check_addr: RC and UC only (a UD QP takes datagrams from anyone)
            self.o_reason.d.next = self.r_addr.val();
        } else if !self.s2_pkey_ok.q.val() {
            self.o_reason.d.next = self.r_pkey.val();
        } else if !self.qkey_ok.val() & (self.st_type.val() == self.ty_ud.val()) {
            // check_keys, UD: the DETH's Q_Key must be the QP's (QP1: the GSI Q_Key)
            self.o_reason.d.next = self.r_qkey.val();
        } else {
            self.o_drop.d.next = false;
        }
        // ---- stage 3: outputs
        self.out_valid.next = self.o_valid.q.val();
        self.out_qpn.next = self.o_qpn.q.val();
        self.out_is_request.next = self.o_req.q.val();
        self.out_drop.next = self.o_drop.q.val();
        self.out_reason.next = self.o_reason.q.val();
        self.out_static.next = self.o_static.q.val();
        self.out_resp.next = self.o_resp.q.val();
    }
}

/// The device address the verdict helpers below assume: the destination of every looked-up packet (RX Parse
/// has dropped the others, rxe `rxe_chk_dgid`).
pub const GOLDEN_LOCAL_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 0, 1);

/// The golden model's QP for QP Context entry `st` of QPN `qpn`, by [`QpStatic`]'s encodings: the fields the
/// receive-path checks read (type, state, PD, the address vector to `remote_ip`, the Q_Key). Panics on a type
/// or state code with no model value.
pub fn golden_qp(qpn: u32, st: &QpStatic) -> testbench::model::qp::Qp {
    use testbench::model::{AddressVector, Cq, Pd, QpCap};
    let (t, s) = (st.qp_type.to_u64(), st.state.to_u64());
    let ty = [QpType::Rc, QpType::Uc, QpType::Ud].into_iter().find(|&x| x as u64 == t);
    let state = [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Error]
        .into_iter()
        .find(|&x| x as u64 == s);
    let (Some(ty), Some(state)) = (ty, state) else { panic!("qp_type {t} / state {s}: no model value") };
    let mut qp = testbench::model::qp::Qp::new(qpn, ty, Pd(st.pd.to_u64() as u32), Cq(0), Cq(0), QpCap::default(), false);
    qp.state = state;
    let mac = st.remote_mac.to_u64().to_be_bytes();
    let a = crate::wire::tx_build::u128_of(st.remote_ip);
    let dip = if st.v6 { std::net::IpAddr::V6(a.into()) } else { std::net::IpAddr::V4((a as u32).into()) };
    qp.av = Some(AddressVector::new(testbench::wire::MacAddr([mac[2], mac[3], mac[4], mac[5], mac[6], mac[7]]), dip));
    qp.qkey = st.qkey.to_u64() as u32;
    qp
}

/// An address as RX Parse hands it on (IPv4-mapped for IPv4) as the model's address.
pub fn ip_of(x: u128) -> std::net::IpAddr {
    let a = std::net::Ipv6Addr::from(x);
    match a.to_ipv4_mapped() {
        Some(v4) => std::net::IpAddr::V4(v4),
        None => std::net::IpAddr::V6(a),
    }
}

/// The golden model's verdict on a lookup (`qpn`, `opcode`, `pkey`, `src_ip`, the DETH's `qkey`) of a QP whose
/// entry is `st`:
/// `testbench::model::device::rx_qp_check`, the function the model's device receives with, over QP Context's
/// QP table (QPN 1..N-1 exist, an entry never written is a QP in RESET; QPN 0 and QPN >= N have none). The
/// oracle of this block's unit test and of `sim/tests/qp_context_equivalence.rs`. `Err(Malformed)`: an opcode
/// without a table row, which RX Parse drops before any lookup (this block's verdict on it is free).
pub fn golden_verdict<const N: usize>(
    qpn: u32,
    opcode: u8,
    pkey: u16,
    src_ip: u128,
    qkey: u32,
    st: &QpStatic,
) -> Result<&'static testbench::wire::OpcodeInfo, DropReason> {
    use std::net::IpAddr;
    let fields = testbench::model::device::RxQpFields {
        dest_qpn: qpn,
        opcode,
        pkey,
        src_ip: ip_of(src_ip),
        dst_ip: IpAddr::V4(GOLDEN_LOCAL_IP),
        qkey: Some(qkey),
    };
    let qp = (qpn != 0 && (qpn as usize) < N).then(|| golden_qp(qpn, st));
    testbench::model::device::rx_qp_check(&fields, qp.as_ref(), IpAddr::V4(GOLDEN_LOCAL_IP))
}

/// Whether the model routed the packet as a request (to the responder) or a response, where its verdict
/// depends on it: accepted, or dropped by a check after the transport matched (state, address, P_Key).
pub fn golden_is_request(opcode: u8, verdict: Result<&'static testbench::wire::OpcodeInfo, DropReason>) -> Option<bool> {
    match verdict {
        Ok(info) => Some(info.is_request()),
        Err(DropReason::BadState | DropReason::AddrMismatch | DropReason::BadPkey | DropReason::BadQkey) => {
            testbench::wire::opcode::info(opcode).map(|i| i.is_request())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use crate::wire::rx_parse::v4_mapped;
    use crate::wire::tx_build::bits128;
    use std::collections::VecDeque;
    use std::net::Ipv6Addr;
    use testbench::wire::opcode::{RC_ACKNOWLEDGE, RC_RDMA_WRITE_ONLY};
    use testbench::model::DropReason;

    type Ctx = QpContext<16, 4>;

    pub fn random_static(rng: &mut SmallRng) -> QpStatic {
        let remote = match rng.gen_range(0..16) {
            0 => v4_mapped(rng.gen()),
            1..=3 => TEST_IP6,
            _ => v4_mapped(0x0A00_0002),
        };
        QpStatic {
            state: bits(rng.gen_range(0..7)),
            qp_type: bits(if rng.gen_ratio(3, 4) { 0 } else { rng.gen_range(0..3) }),
            path_mtu: bits(rng.gen_range(1..6)),
            access: bits(rng.gen_range(0..256)),
            min_rnr_timer: bits(rng.gen_range(0..32)),
            timeout: bits(rng.gen_range(0..32)),
            retry_cnt: bits(rng.gen_range(0..8)),
            rnr_retry: bits(rng.gen_range(0..8)),
            max_rd_atomic: bits(rng.gen_range(0..256)),
            max_dest_rd_atomic: bits(rng.gen_range(0..256)),
            dest_qpn: bits(rng.gen_range(0..1 << 24)),
            pd: bits(rng.gen::<u32>() as u64),
            sport: bits(rng.gen_range(0..1 << 16)),
            remote_ip: bits128(remote),
            v6: Ipv6Addr::from(remote).to_ipv4_mapped().is_none(),
            remote_mac: bits(rng.gen::<u64>() & 0xFFFF_FFFF_FFFF),
            qkey: bits(random_qkey(rng) as u64),
        }
    }

    /// A lookup's source address, as RX Parse hands it on: mostly the address the QPs' paths mostly have (IPv4
    /// 10.0.0.2 or IPv6 fd00::2), sometimes another.
    pub fn random_src(rng: &mut SmallRng) -> u128 {
        match rng.gen_range(0..20) {
            0 => v4_mapped(rng.gen()),
            1 => rng.gen(),
            2..=5 => TEST_IP6,
            _ => v4_mapped(0x0A00_0002),
        }
    }

    /// The IPv6 address of [`random_static`]'s IPv6 paths.
    pub const TEST_IP6: u128 = 0xFD00_0000_0000_0000_0000_0000_0000_0002;

    /// A Q_Key from a few, so that a lookup's often matches its QP's.
    pub fn random_qkey(rng: &mut SmallRng) -> u32 {
        [0x1111_1111, testbench::wire::headers::GSI_QKEY, 0x8000_1234, rng.gen()][rng.gen_range(0..4)]
    }

    pub fn random_resp(rng: &mut SmallRng) -> QpResp {
        QpResp {
            epsn: bits(rng.gen_range(0..1 << 24)),
            ack_psn: bits(rng.gen_range(0..1 << 24)),
            msn: bits(rng.gen_range(0..1 << 24)),
            sent_psn_nak: rng.gen(),
            rq_idx: bits(rng.gen_range(0..1 << 16)),
            res_head: bits(rng.gen_range(0..256)),
        }
    }

    fn tick(u: &mut Ctx) {
        u.clock.next = true.into();
        assert!(simulate(u, 50));
        u.clock.next = false.into();
        assert!(simulate(u, 50));
    }

    /// Random attribute writes, lookups every cycle (mostly of 3 QPNs, so back to back same-QPN is common),
    /// and a responder that writes back `epsn + 1` for every accepted lookup in the cycle its result is out.
    #[test]
    fn qp_context_matches_an_array_model_with_back_to_back_same_qpn() {
        let mut u = Ctx::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(0x9C);
        let mut st = vec![QpStatic::default(); 16];
        let mut rs = vec![QpResp::default(); 16];
        // (qpn, opcode, pkey, sip, qkey) of lookups in flight, and the model's snapshot taken when due
        let mut pipe: VecDeque<Option<(u32, u8, u16, u128, u32)>> = VecDeque::new();
        let mut st_hist: VecDeque<Vec<QpStatic>> = VecDeque::new();
        let (mut b2b, mut accepted, mut dropped, mut qkey_drops) = (0, 0, 0, 0);
        let mut last_out: Option<u32> = None;
        for cycle in 0..6000 {
            // attribute write
            let aw = rng.gen_ratio(1, 6);
            let aq = if rng.gen_ratio(1, 20) { rng.gen_range(0..40) } else { rng.gen_range(1..4) };
            let mut ad = random_static(&mut rng);
            if rng.gen_ratio(2, 3) {
                ad.state = bits(QpState::Rts as u64);
            }
            u.attr_we.next = aw;
            u.attr_qpn.next = bits(aq as u64);
            u.attr_data.next = ad;
            // lookup
            let lk = rng.gen_ratio(9, 10).then(|| {
                let q = if rng.gen_ratio(1, 15) { rng.gen_range(0..40) } else { rng.gen_range(1..4) };
                let op = match rng.gen_range(0..11) {
                    0 => RC_ACKNOWLEDGE,
                    1 => UC_SEND_ONLY,
                    10 => UD_SEND_ONLY,
                    // any opcode with a table row (RX Parse drops the others before a lookup)
                    2 => loop {
                        let o: u8 = rng.gen();
                        if testbench::wire::opcode::info(o).is_some() {
                            break o;
                        }
                    },
                    _ => RC_RDMA_WRITE_ONLY,
                };
                let pkey = if rng.gen_ratio(1, 10) { rng.gen() } else if rng.gen() { 0xFFFF } else { 0x7FFF };
                // mostly the QP's own remote address (IPv4-mapped or IPv6), else another
                let sip = match st.get(q as usize) {
                    Some(x) if rng.gen_ratio(4, 5) => crate::wire::tx_build::u128_of(x.remote_ip),
                    _ => random_src(&mut rng),
                };
                (q, op, pkey, sip, random_qkey(&mut rng))
            });
            let (q, op, pkey, sip, qkey) = lk.unwrap_or((0, 0, 0, 0, 0));
            u.lk_valid.next = lk.is_some();
            u.lk_qpn.next = bits(q as u64);
            u.lk_opcode.next = bits(op as u64);
            u.lk_pkey.next = bits(pkey as u64);
            u.lk_src_ip.next = bits128(sip);
            u.lk_qkey.next = bits(qkey as u64);
            u.upd_we.next = false;
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            // the result of the lookup of cycle-3
            let mut upd = None;
            if pipe.len() == 3 {
                let old = pipe.pop_front().unwrap();
                let sts = st_hist[0].clone();
                assert_eq!(u.out_valid.val(), old.is_some(), "cycle {cycle}");
                if let Some((q, op, pkey, sip, qkey)) = old {
                    let idx = q as usize;
                    let s = if idx < 16 { sts[idx] } else { QpStatic::default() };
                    let verdict = golden_verdict::<16>(q, op, pkey, sip, qkey, &s);
                    if verdict == Err(DropReason::BadQkey) {
                        qkey_drops += 1;
                    }
                    assert_eq!(u.out_qpn.val().to_u64(), q as u64);
                    if let Some(req) = golden_is_request(op, verdict) {
                        assert_eq!(u.out_is_request.val(), req, "cycle {cycle}");
                    }
                    let reason = verdict.err();
                    assert_eq!(u.out_drop.val(), reason.is_some(), "cycle {cycle} q {q}: {reason:?}");
                    if let Some(r) = reason {
                        dropped += 1;
                        assert_eq!(u.out_reason.val().to_u64(), reason_code(r), "cycle {cycle}");
                    } else {
                        accepted += 1;
                        assert_eq!(u.out_static.val(), s, "cycle {cycle} q {q}");
                        assert_eq!(u.out_resp.val(), rs[idx], "cycle {cycle} q {q}");
                        if last_out == Some(q) {
                            b2b += 1;
                        }
                        let mut n = rs[idx];
                        n.epsn = bits((n.epsn.to_u64() + 1) & 0xFF_FFFF);
                        n.msn = bits((n.msn.to_u64() + 1) & 0xFF_FFFF);
                        n.sent_psn_nak = false;
                        upd = Some((q, n));
                    }
                }
                last_out = old.filter(|_| !u.out_drop.val()).map(|x| x.0);
            }
            // sometimes a random update of another QP (a second writer would be a bug; this is the same port)
            if upd.is_none() && rng.gen_ratio(1, 8) {
                upd = Some((rng.gen_range(0..20), random_resp(&mut rng)));
            }
            if let Some((q, n)) = upd {
                u.upd_we.next = true;
                u.upd_qpn.next = bits(q as u64);
                u.upd_data.next = n;
                assert!(simulate(&mut u, 50));
            }
            pipe.push_back(lk);
            if aw && aq != 0 && (aq as usize) < 16 {
                st[aq as usize] = ad;
            }
            if let Some((q, n)) = upd {
                if q != 0 && (q as usize) < 16 {
                    rs[q as usize] = n;
                }
            }
            // static seen by a lookup of cycle c: writes up to cycle c+1; at its output (cycle c+3) the
            // history holds the snapshots after cycles c+1 and c+2
            st_hist.push_back(st.clone());
            if st_hist.len() > 2 {
                st_hist.pop_front();
            }
            tick(&mut u);
        }
        eprintln!("accepted {accepted}, dropped {dropped} ({qkey_drops} for the Q_Key), back-to-back same QPN {b2b}");
        assert!(b2b > 300 && accepted > 1000 && dropped > 500 && qkey_drops > 10);
    }

    #[test]
    fn requester_ram_reads_back_writes() {
        let mut u = Ctx::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(4);
        let mut m = vec![QpReq::default(); 16];
        let mut prev: Option<QpReq> = None;
        for _ in 0..2000 {
            let w = rng.gen_bool(0.5);
            let wq = rng.gen_range(0..20usize);
            let d = QpReq {
                next_psn: bits(rng.gen_range(0..1 << 24)),
                unacked_psn: bits(rng.gen_range(0..1 << 24)),
                sq_idx: bits(rng.gen_range(0..1 << 16)),
                retry_left: bits(rng.gen_range(0..8)),
                rnr_left: bits(rng.gen_range(0..8)),
            };
            let rq = rng.gen_range(0..16usize);
            u.req_we.next = w;
            u.req_qpn.next = bits(wq as u64);
            u.req_wdata.next = d;
            u.req_rd_qpn.next = bits(rq as u64);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            if let Some(p) = prev {
                assert_eq!(u.req_rdata.val(), p, "held until the next edge");
            }
            // read-first: the value read is the one before this cycle's write
            let snapshot = m[rq];
            if w && wq != 0 && wq < 16 {
                m[wq] = d;
            }
            tick(&mut u);
            assert_eq!(u.req_rdata.val(), snapshot);
            prev = Some(snapshot);
        }
    }
}
