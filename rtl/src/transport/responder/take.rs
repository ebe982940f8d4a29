//! The Responder's first stage (rxe `get_req`, and the QP lookup of `rxe_recv.c`): a request header is taken
//! (`take`) into the request registers (opcode and its info bits, PSN, AckReq, pad, payload length, RETH,
//! immediate) and its QP is looked up in the Responder's [`QpContext`] (the static attributes CMD_WRITE_QP
//! writes, the responder state the Responder writes back: `upd_*`), with rxe's drop checks. When the lookup
//! answers (`found`), `load` latches the QP's attributes and responder state (ePSN, the last ACKed PSN, MSN,
//! whether a PSN-sequence NAK was sent) and the drop verdict; `look` decodes the path MTU into bytes and the
//! PSN check's kind of request. An atomic's write-back shrinks the Scatter command's length to 8 (`len8`).

use rust_hdl::prelude::*;

use super::checks::{I_ATOMIC, I_BAD, I_END, I_IMM, I_OTHER, I_READ, I_RETH, I_SEND, I_START, I_WRITE};
use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::consts::k;
use crate::common::lut::Lut8;
use crate::transport::psn_check::{KIND_ATOMIC, KIND_READ, KIND_SEND_WRITE};
use crate::transport::qp_context::{QpContext, QpResp, QpStatic};
use crate::wire::rx_parse::RxHeader;
use testbench::wire::opcode::*;
use testbench::wire::HeaderKind;

/// `info[opcode]` from the golden opcode table.
pub fn info_table() -> Vec<u64> {
    (0..256u32)
        .map(|c| match info(c as u8) {
            Some(i) if matches!(i.transport, Transport::Rc | Transport::Uc | Transport::Ud) && i.is_request() => {
                let mut v = 0u64;
                let mut set = |b: usize, on: bool| {
                    if on {
                        v |= 1 << b
                    }
                };
                set(I_SEND, i.kind == OpKind::Send);
                set(I_WRITE, i.kind == OpKind::Write);
                set(I_READ, i.kind == OpKind::ReadRequest);
                set(I_ATOMIC, matches!(i.kind, OpKind::Atomic | OpKind::MaskedAtomic));
                set(I_START, i.pos.is_start());
                set(I_END, i.pos.is_end());
                set(I_IMM, i.has(HeaderKind::ImmDt));
                set(I_RETH, i.has(HeaderKind::Reth));
                set(
                    I_OTHER,
                    !matches!(
                        i.kind,
                        OpKind::Send | OpKind::Write | OpKind::ReadRequest | OpKind::Atomic | OpKind::MaskedAtomic
                    ),
                );
                v
            }
            _ => 1 << I_BAD,
        })
        .collect()
}

/// The RETH of a request (extension bytes 0..16, big-endian) as numbers: va in 63:0, rkey in 95:64, DMA length
/// in 127:96.
fn reth_map() -> ByteMap<352, 128> {
    let mut m = Vec::new();
    for j in 0..8 {
        m.push(ByteSrc::In(8 * (7 - j)));
    }
    for j in 0..4 {
        m.push(ByteSrc::In(8 * (8 + 3 - j)));
    }
    for j in 0..4 {
        m.push(ByteSrc::In(8 * (12 + 3 - j)));
    }
    ByteMap::new(m)
}

/// The DETH of a UD request (extension bytes 0..8, big-endian) as numbers: Q_Key in 31:0, source QPN in 55:32.
fn deth_map() -> ByteMap<352, 56> {
    let mut m: Vec<ByteSrc> = (0..4).map(|j| ByteSrc::In(8 * (3 - j))).collect();
    m.extend((0..3).map(|j| ByteSrc::In(8 * (7 - j))));
    ByteMap::new(m)
}

/// The request as this stage holds it, one registered record for the stages after it (rxe's packet info and
/// the QP's responder state as `get_req` leaves them): the header's fields (`info`: the opcode's bits, `I_*`),
/// the QP's ePSN, last ACKed PSN, MSN and PSN-sequence-NAK flag, the path MTU in bytes and the PSN check's kind.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ReqRec {
    pub qpn: Bits<24>,
    pub op: Bits<8>,
    pub info: Bits<10>,
    pub psn: Bits<24>,
    pub ack_req: Bit,
    pub pad: Bits<2>,
    pub plen: Bits<13>,
    pub va: Bits<64>,
    pub rkey: Bits<32>,
    pub dlen: Bits<32>,
    pub imm: Bits<32>,
    /// SEND_LAST/ONLY_WITH_INVALIDATE: the IETH's R_Key is in `rkey` (a SEND has no RETH).
    pub inv: Bit,
    /// UD: the DETH's source QPN.
    pub sqpn: Bits<24>,
    pub epsn: Bits<24>,
    pub ack_psn: Bits<24>,
    pub msn: Bits<24>,
    pub sent_nak: Bit,
    pub mtu: Bits<13>,
    pub kind: Bits<2>,
}

crate::logic_block! {
    /// The header take and QP lookup (see the module documentation).
    pub struct ReqTake {
        pub clock: Signal<In, Clock>,
        /// The request header on offer and its payload length; `take` takes it.
        pub hdr: Signal<In, RxHeader>,
        pub hdr_pay_len: Signal<In, Bits<13>>,
        pub take: Signal<In, Bit>,
        /// CMD_WRITE_QP's static attributes, and the responder state written back.
        pub attr_we: Signal<In, Bit>,
        pub attr_qpn: Signal<In, Bits<24>>,
        pub attr_data: Signal<In, QpStatic>,
        pub upd_we: Signal<In, Bit>,
        pub upd_qpn: Signal<In, Bits<24>>,
        pub upd_data: Signal<In, QpResp>,
        /// The lookup answers; `load` latches its answer, `look` decodes it.
        pub found: Signal<Out, Bit>,
        pub load: Signal<In, Bit>,
        /// The lookup ahead: `peek` looks the header on offer up without taking it (never in a take's cycle);
        /// its answer is held (`pk_ok`) until a take, or a QP attribute write, voids it. `found` never answers
        /// for a peek. With `ahead`, `load` latches the held answer's attributes and drop verdict and the
        /// responder state `fwd` (the write-back of the packet before, of the same QP) instead of the lookup's.
        pub peek: Signal<In, Bit>,
        pub pk_ok: Signal<Out, Bit>,
        pub pk_busy: Signal<Out, Bit>,
        pub ahead: Signal<In, Bit>,
        pub fwd: Signal<In, QpResp>,
        pub look: Signal<In, Bit>,
        /// An atomic's write-back: the payload length (the Scatter command's) becomes 8.
        pub len8: Signal<In, Bit>,
        /// The fields of `req` the Responder's sequencer reads by name: QPN, opcode, PSN, AckReq, payload length,
        /// RETH, immediate (the info bits and pad only in `req`).
        pub qpn: Signal<Out, Bits<24>>,
        pub op: Signal<Out, Bits<8>>,
        pub psn: Signal<Out, Bits<24>>,
        pub ack_req: Signal<Out, Bit>,
        pub plen: Signal<Out, Bits<13>>,
        pub va: Signal<Out, Bits<64>>,
        pub rkey: Signal<Out, Bits<32>>,
        pub dlen: Signal<Out, Bits<32>>,
        pub imm: Signal<Out, Bits<32>>,
        /// UD: the sender's QPN (the DETH's).
        pub sqpn: Signal<Out, Bits<24>>,
        /// The request and the QP's responder state as one record, for the check, key-check and READ-response
        /// stages.
        pub req: Signal<Out, ReqRec>,
        /// The info bits by name.
        pub is_send: Signal<Out, Bit>,
        pub is_write: Signal<Out, Bit>,
        pub is_read: Signal<Out, Bit>,
        pub is_atomic: Signal<Out, Bit>,
        pub is_start: Signal<Out, Bit>,
        pub is_end: Signal<Out, Bit>,
        pub is_imm: Signal<Out, Bit>,
        pub has_reth: Signal<Out, Bit>,
        pub is_bad: Signal<Out, Bit>,
        pub is_other: Signal<Out, Bit>,
        /// The QP: its attributes; ePSN, the last ACKed PSN, MSN; the lookup's drop and its reason; the path MTU in
        /// bytes (the PSN-sequence-NAK flag and the PSN check's kind only in `req`).
        pub st: Signal<Out, QpStatic>,
        pub epsn: Signal<Out, Bits<24>>,
        pub ack_psn: Signal<Out, Bits<24>>,
        pub msn: Signal<Out, Bits<24>>,
        pub drop: Signal<Out, Bit>,
        pub reason: Signal<Out, Bits<8>>,
        pub mtu: Signal<Out, Bits<13>>,

        qpc: QpContext<256, 8>,
        info_lut: Lut8<10> = Lut8::new(info_table()),
        reth: ByteMap<352, 128> = reth_map(),
        deth: ByteMap<352, 56> = deth_map(),
        l_deth: Signal<Local, Bits<56>>,
        l_ud: Signal<Local, Bit>,
        /// the header is a SEND_LAST/ONLY_WITH_INVALIDATE (its IETH is the first extension word)
        l_inv: Signal<Local, Bit>,
        l_opc: Signal<Local, Bits<8>>,
        /// The request and the QP's responder state (the `req` output).
        r: DFF<ReqRec>,
        lk_drop: DFF<Bit>,
        lk_reason: DFF<Bits<8>>,
        r_st: DFF<QpStatic>,
        /// the lookups in flight that are peeks (bit i: presented i + 1 cycles ago), and those still wanted
        pk_tag: DFF<Bits<3>>,
        pk_live: DFF<Bits<3>>,
        /// a peek's answer, held
        pk_valid: DFF<Bit>,
        pk_drop: DFF<Bit>,
        pk_reason: DFF<Bits<8>>,
        pk_st: DFF<QpStatic>,
        zero3: Constant<Bits<3>> = k(0),
        one3: Constant<Bits<3>> = k(1),
        l_info: Signal<Local, Bits<10>>,
        l_ext: Signal<Local, Bits<352>>,
        l_reth: Signal<Local, Bits<128>>,
        l_bth1: Signal<Local, Bits<8>>,
        l_bth8: Signal<Local, Bits<8>>,
        l_pm: Signal<Local, Bits<3>>,
        zero24: Constant<Bits<24>> = k(0),
        eight13: Constant<Bits<13>> = k(8),
        mtu256: Constant<Bits<13>> = k(256),
        mtu512: Constant<Bits<13>> = k(512),
        mtu1024: Constant<Bits<13>> = k(1024),
        mtu2048: Constant<Bits<13>> = k(2048),
        mtu4096: Constant<Bits<13>> = k(4096),
        pm2: Constant<Bits<3>> = k(2),
        pm3: Constant<Bits<3>> = k(3),
        pm4: Constant<Bits<3>> = k(4),
        pm5: Constant<Bits<3>> = k(5),
        /// A UD QP's receive: a payload of up to the largest MTU behind the 40-byte GRH area (the length check
        /// passes every datagram RX Parse took; the receive buffer's room decides).
        mtu_ud: Constant<Bits<13>> = k(4096 + 40),
        ty_ud: Constant<Bits<2>> = k(testbench::model::QpType::Ud as u64),
        tr_ud: Constant<Bits<3>> = k(u64::from(UD_SEND_ONLY >> 5)),
        k_send_write: Constant<Bits<2>> = k(KIND_SEND_WRITE),
        op_sli: Constant<Bits<8>> = k(u64::from(RC_SEND_LAST_WITH_INVALIDATE)),
        op_soi: Constant<Bits<8>> = k(u64::from(RC_SEND_ONLY_WITH_INVALIDATE)),
        k_read: Constant<Bits<2>> = k(KIND_READ),
        k_atomic: Constant<Bits<2>> = k(KIND_ATOMIC),
    }
}

impl Logic for ReqTake {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, r, lk_drop, lk_reason, r_st, pk_tag, pk_live, pk_valid, pk_drop, pk_reason, pk_st);
        clock!(self, clock, qpc);
        self.l_ext.next = self.hdr.val().ext;
        self.l_bth1.next = self.hdr.val().bth1;
        self.l_bth8.next = self.hdr.val().bth8;
        self.reth.x.next = self.l_ext.val();
        self.l_reth.next = self.reth.y.val();
        self.deth.x.next = self.l_ext.val();
        self.l_deth.next = self.deth.y.val();
        // (through a local: Verilog has no slice of a field's slice)
        self.l_opc.next = self.hdr.val().opcode;
        self.l_ud.next = self.l_opc.val().get_bits::<3>(5) == self.tr_ud.val();
        self.l_inv.next = (self.l_opc.val() == self.op_sli.val()) | (self.l_opc.val() == self.op_soi.val());
        self.info_lut.x.next = self.hdr.val().opcode;
        self.l_info.next = self.r.q.val().info;
        self.qpn.next = self.r.q.val().qpn;
        self.op.next = self.r.q.val().op;
        self.psn.next = self.r.q.val().psn;
        self.ack_req.next = self.r.q.val().ack_req;
        self.plen.next = self.r.q.val().plen;
        self.va.next = self.r.q.val().va;
        self.rkey.next = self.r.q.val().rkey;
        self.dlen.next = self.r.q.val().dlen;
        self.imm.next = self.r.q.val().imm;
        self.sqpn.next = self.r.q.val().sqpn;
        self.is_send.next = self.l_info.val().get_bit(0);
        self.is_write.next = self.l_info.val().get_bit(1);
        self.is_read.next = self.l_info.val().get_bit(2);
        self.is_atomic.next = self.l_info.val().get_bit(3);
        self.is_start.next = self.l_info.val().get_bit(4);
        self.is_end.next = self.l_info.val().get_bit(5);
        self.is_imm.next = self.l_info.val().get_bit(6);
        self.has_reth.next = self.l_info.val().get_bit(7);
        self.is_bad.next = self.l_info.val().get_bit(8);
        self.is_other.next = self.l_info.val().get_bit(9);
        self.st.next = self.r_st.q.val();
        self.epsn.next = self.r.q.val().epsn;
        self.ack_psn.next = self.r.q.val().ack_psn;
        self.msn.next = self.r.q.val().msn;
        self.drop.next = self.lk_drop.q.val();
        self.reason.next = self.lk_reason.q.val();
        self.mtu.next = self.r.q.val().mtu;
        self.l_pm.next = self.r_st.q.val().path_mtu;
        self.req.next = self.r.q.val();
        // the QP lookup (rxe_recv.c's checks) of the header on offer; the responder state written back
        self.qpc.attr_we.next = self.attr_we.val();
        self.qpc.attr_qpn.next = self.attr_qpn.val();
        self.qpc.attr_data.next = self.attr_data.val();
        self.qpc.lk_valid.next = self.take.val() | self.peek.val();
        self.qpc.lk_qpn.next = self.hdr.val().dest_qpn;
        self.qpc.lk_opcode.next = self.hdr.val().opcode;
        self.qpc.lk_pkey.next = self.hdr.val().pkey;
        self.qpc.lk_src_ip.next = self.hdr.val().src_ip;
        self.qpc.lk_qkey.next = self.l_deth.val().get_bits::<32>(0);
        self.qpc.upd_we.next = self.upd_we.val();
        self.qpc.upd_qpn.next = self.upd_qpn.val();
        self.qpc.upd_data.next = self.upd_data.val();
        self.qpc.req_we.next = false;
        self.qpc.req_qpn.next = self.zero24.val();
        self.qpc.req_wdata.next = self.qpc.req_rdata.val();
        self.qpc.req_rd_qpn.next = self.zero24.val();
        // the lookup ahead: a peek's answer comes 3 cycles on (the tag's bit 2), held if still wanted
        self.found.next = self.qpc.out_valid.val() & !self.pk_tag.q.val().get_bit(2);
        self.pk_ok.next = self.pk_valid.q.val();
        self.pk_busy.next = self.pk_tag.q.val() != self.zero3.val();
        self.pk_tag.d.next = self.pk_tag.q.val() << 1;
        self.pk_live.d.next = self.pk_live.q.val() << 1;
        if self.peek.val() {
            self.pk_tag.d.next = (self.pk_tag.q.val() << 1) | self.one3.val();
            self.pk_live.d.next = (self.pk_live.q.val() << 1) | self.one3.val();
        }
        if self.pk_live.q.val().get_bit(2) {
            self.pk_valid.d.next = true;
            self.pk_drop.d.next = self.qpc.out_drop.val();
            self.pk_reason.d.next = self.qpc.out_reason.val();
            self.pk_st.d.next = self.qpc.out_static.val();
        }
        if self.take.val() | self.attr_we.val() {
            self.pk_valid.d.next = false;
            self.pk_live.d.next = self.zero3.val();
        }
        if self.load.val() {
            self.lk_drop.d.next = self.qpc.out_drop.val();
            self.lk_reason.d.next = self.qpc.out_reason.val();
            self.r_st.d.next = self.qpc.out_static.val();
            self.r.d.next.epsn = self.qpc.out_resp.val().epsn;
            self.r.d.next.ack_psn = self.qpc.out_resp.val().ack_psn;
            self.r.d.next.msn = self.qpc.out_resp.val().msn;
            self.r.d.next.sent_nak = self.qpc.out_resp.val().sent_psn_nak;
            if self.ahead.val() {
                self.lk_drop.d.next = self.pk_drop.q.val();
                self.lk_reason.d.next = self.pk_reason.q.val();
                self.r_st.d.next = self.pk_st.q.val();
                self.r.d.next.epsn = self.fwd.val().epsn;
                self.r.d.next.ack_psn = self.fwd.val().ack_psn;
                self.r.d.next.msn = self.fwd.val().msn;
                self.r.d.next.sent_nak = self.fwd.val().sent_psn_nak;
            }
        }
        if self.look.val() {
            self.r.d.next.mtu = self.mtu256.val();
            if self.l_pm.val() == self.pm2.val() {
                self.r.d.next.mtu = self.mtu512.val();
            }
            if self.l_pm.val() == self.pm3.val() {
                self.r.d.next.mtu = self.mtu1024.val();
            }
            if self.l_pm.val() == self.pm4.val() {
                self.r.d.next.mtu = self.mtu2048.val();
            }
            if self.l_pm.val() == self.pm5.val() {
                self.r.d.next.mtu = self.mtu4096.val();
            }
            if self.r_st.q.val().qp_type == self.ty_ud.val() {
                self.r.d.next.mtu = self.mtu_ud.val();
            }
            self.r.d.next.kind = self.k_send_write.val();
            if self.l_info.val().get_bit(2) {
                self.r.d.next.kind = self.k_read.val();
            }
            if self.l_info.val().get_bit(3) | self.l_info.val().get_bit(9) {
                self.r.d.next.kind = self.k_atomic.val();
            }
        }
        if self.len8.val() {
            self.r.d.next.plen = self.eight13.val();
        }
        if self.take.val() {
            self.r.d.next.qpn = self.hdr.val().dest_qpn;
            self.r.d.next.op = self.hdr.val().opcode;
            self.r.d.next.info = self.info_lut.y.val();
            self.r.d.next.psn = self.hdr.val().psn;
            self.r.d.next.ack_req = self.l_bth8.val().get_bit(7);
            self.r.d.next.pad = self.l_bth1.val().get_bits::<2>(4);
            self.r.d.next.plen = self.hdr_pay_len.val();
            self.r.d.next.va = self.l_reth.val().get_bits::<64>(0);
            self.r.d.next.rkey = self.l_reth.val().get_bits::<32>(64);
            self.r.d.next.dlen = self.l_reth.val().get_bits::<32>(96);
            self.r.d.next.imm = self.l_ext.val().get_bits::<32>(0);
            // the IETH, like a DETH's first word, is the first extension word (big-endian)
            self.r.d.next.inv = self.l_inv.val();
            if self.l_inv.val() {
                self.r.d.next.rkey = self.l_deth.val().get_bits::<32>(0);
            }
            if self.info_lut.y.val().get_bit(7) {
                self.r.d.next.imm = self.l_ext.val().get_bits::<32>(128);
            }
            // UD: the ImmDt after the DETH; the source QPN
            self.r.d.next.sqpn = self.l_deth.val().get_bits::<24>(32);
            if self.l_ud.val() {
                self.r.d.next.imm = self.l_ext.val().get_bits::<32>(64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testbench::model::{QpState, QpType};
    use testbench::wire::headers::DEFAULT_PKEY;


    /// A WRITE ONLY WITH IMMEDIATE to QP `qpn` (RETH: VA, rkey, length; then the immediate), as RX Parse hands it on.
    fn write_imm(qpn: u64, psn: u64, ack_req: bool, pad: u64, pkey: u64) -> RxHeader {
        let mut h = RxHeader::default();
        h.opcode = bits(RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE as u64);
        h.dest_qpn = bits(qpn);
        h.psn = bits(psn);
        h.bth1 = bits(pad << 4);
        h.bth8 = bits(if ack_req { 0x80 } else { 0 });
        h.pkey = bits(pkey);
        h.src_ip = crate::wire::tx_build::v4_bits(0x0A00_0001);
        let mut ext = [0u8; 44];
        ext[0..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        ext[8..12].copy_from_slice(&0xAABB_CCDDu32.to_be_bytes());
        ext[12..16].copy_from_slice(&1000u32.to_be_bytes());
        ext[16..20].copy_from_slice(&0xDEAD_BEEFu32.to_be_bytes());
        for (i, b) in ext.iter().enumerate() {
            h.ext.set_bits::<8>(8 * i, bits(*b as u64));
        }
        h
    }

    /// QP `qpn`'s attributes (CMD_WRITE_QP) and responder state (a write-back), one cycle each.
    fn set_qp(u: &mut ReqTake, qpn: u64, st: QpStatic, rs: QpResp) {
        u.attr_we.next = true;
        u.attr_qpn.next = bits(qpn);
        u.attr_data.next = st;
        crate::tick!(u);
        u.attr_we.next = false;
        u.upd_we.next = true;
        u.upd_qpn.next = bits(qpn);
        u.upd_data.next = rs;
        crate::tick!(u);
        u.upd_we.next = false;
    }

    /// The request registers hold the header's fields (the immediate after the RETH, AckReq, pad), the QP's
    /// lookup answers with its attributes and responder state, the path MTU in bytes; a header of a QP not
    /// in a state to receive is dropped by the lookup; an atomic's write-back makes the length 8.
    #[test]
    fn a_taken_request_and_its_qp() {
        let mut u = ReqTake::default();
        u.connect_all();
        let mut st = QpStatic::default();
        st.state = bits(QpState::Rts as u64);
        st.qp_type = bits(QpType::Rc as u64);
        st.path_mtu = bits(3);
        st.remote_ip = crate::wire::tx_build::v4_bits(0x0A00_0001);
        st.dest_qpn = bits(0x99);
        let mut rs = QpResp::default();
        rs.epsn = bits(0x77);
        rs.msn = bits(5);
        set_qp(&mut u, 0x12, st, rs);
        let take = |u: &mut ReqTake, h: RxHeader| {
            u.hdr.next = h;
            u.hdr_pay_len.next = bits(1000);
            u.take.next = true;
            crate::tick!(u);
            u.take.next = false;
            let mut n = 0;
            while !u.found.val() {
                crate::tick!(u);
                n += 1;
                assert!(n < 10);
            }
            u.load.next = true;
            crate::tick!(u);
            u.load.next = false;
            u.look.next = true;
            crate::tick!(u);
            u.look.next = false;
        };
        take(&mut u, write_imm(0x12, 0x77, true, 0, DEFAULT_PKEY as u64));
        assert_eq!((u.qpn.val().to_u64(), u.psn.val().to_u64(), u.plen.val().to_u64(), u.req.val().pad.to_u64()), (0x12, 0x77, 1000, 0));
        assert_eq!((u.va.val().to_u64(), u.rkey.val().to_u64(), u.dlen.val().to_u64()), (0x1122_3344_5566_7788, 0xAABB_CCDD, 1000));
        assert_eq!(u.imm.val().to_u64(), 0xEFBE_ADDE, "the immediate after the RETH, as its wire bytes");
        assert!(u.ack_req.val() && u.is_write.val() && u.is_imm.val() && u.is_start.val() && u.is_end.val() && u.has_reth.val());
        assert!(!u.is_send.val() && !u.is_read.val() && !u.is_atomic.val() && !u.is_bad.val() && !u.is_other.val());
        assert!(!u.drop.val());
        assert_eq!((u.epsn.val().to_u64(), u.msn.val().to_u64(), u.mtu.val().to_u64(), u.req.val().kind.to_u64()), (0x77, 5, 1024, KIND_SEND_WRITE));
        assert_eq!(u.st.val().dest_qpn.to_u64(), 0x99);
        u.len8.next = true;
        crate::tick!(&mut u);
        u.len8.next = false;
        assert_eq!(u.plen.val().to_u64(), 8);
        // another P_Key: dropped by the lookup, with its reason
        take(&mut u, write_imm(0x12, 0x77, false, 2, 0x1234));
        assert!(u.drop.val() && u.reason.val().to_u64() != 0 && u.req.val().pad.to_u64() == 2 && !u.ack_req.val());
    }

    /// The lookup ahead: a peek's answer is held (`pk_ok`) and never answers as `found`; a take or a QP
    /// attribute write voids it, also one still on its way; a take with `ahead` loads the held attributes and
    /// drop verdict with the forwarded responder state (`fwd`), not the RAM's.
    #[test]
    fn a_lookup_ahead_is_held_and_voided() {
        let mut u = ReqTake::default();
        u.connect_all();
        let mut st = QpStatic::default();
        st.state = bits(QpState::Rts as u64);
        st.qp_type = bits(QpType::Rc as u64);
        st.path_mtu = bits(5);
        st.remote_ip = crate::wire::tx_build::v4_bits(0x0A00_0001);
        st.dest_qpn = bits(0x55);
        let mut rs = QpResp::default();
        rs.epsn = bits(0x10);
        set_qp(&mut u, 0x12, st, rs);
        let peek = |u: &mut ReqTake, h: RxHeader| {
            u.hdr.next = h;
            u.hdr_pay_len.next = bits(0);
            u.peek.next = true;
            crate::tick!(u);
            u.peek.next = false;
            for _ in 0..5 {
                assert!(!u.found.val(), "a peek never answers as found");
                crate::tick!(u);
            }
        };
        // held, then a take with `ahead`: the held answer and the forwarded state
        peek(&mut u, write_imm(0x12, 0x20, true, 0, DEFAULT_PKEY as u64));
        assert!(u.pk_ok.val() && !u.pk_busy.val());
        let mut fwd = QpResp::default();
        fwd.epsn = bits(0x20);
        fwd.ack_psn = bits(0x1F);
        fwd.msn = bits(9);
        fwd.sent_psn_nak = true;
        u.fwd.next = fwd;
        u.take.next = true;
        crate::tick!(&mut u);
        u.take.next = false;
        assert!(!u.pk_ok.val(), "a take voids the held answer");
        u.load.next = true;
        u.ahead.next = true;
        crate::tick!(&mut u);
        u.load.next = false;
        u.ahead.next = false;
        u.look.next = true;
        crate::tick!(&mut u);
        u.look.next = false;
        assert_eq!((u.epsn.val().to_u64(), u.ack_psn.val().to_u64(), u.msn.val().to_u64()), (0x20, 0x1F, 9), "the forwarded state, not the RAM's ePSN 0x10");
        assert!(u.req.val().sent_nak && !u.drop.val());
        assert_eq!((u.st.val().dest_qpn.to_u64(), u.mtu.val().to_u64(), u.psn.val().to_u64()), (0x55, 4096, 0x20));
        // a drop verdict (another P_Key) comes through the held answer too
        peek(&mut u, write_imm(0x12, 0x21, true, 0, 0x1234));
        u.take.next = true;
        crate::tick!(&mut u);
        u.take.next = false;
        u.load.next = true;
        u.ahead.next = true;
        crate::tick!(&mut u);
        u.load.next = false;
        u.ahead.next = false;
        assert!(u.drop.val() && u.reason.val().to_u64() != 0);
        // the lookup's own answer after a take is `found` (3 cycles on), even with a peek's still on its way,
        // which the take voids
        u.hdr.next = write_imm(0x12, 0x22, true, 0, DEFAULT_PKEY as u64);
        u.peek.next = true;
        crate::tick!(&mut u);
        u.peek.next = false;
        u.take.next = true;
        crate::tick!(&mut u);
        u.take.next = false;
        let mut n = 1;
        while !u.found.val() {
            crate::tick!(&mut u);
            n += 1;
            assert!(n < 10);
        }
        assert_eq!(n, 3, "the take's answer, not the peek's one cycle before");
        for _ in 0..4 {
            crate::tick!(&mut u);
        }
        assert!(!u.pk_ok.val(), "the peek before the take is void");
        // a QP attribute write voids a held answer and one on its way
        peek(&mut u, write_imm(0x12, 0x22, true, 0, DEFAULT_PKEY as u64));
        assert!(u.pk_ok.val());
        u.attr_we.next = true;
        u.attr_qpn.next = bits(0x40);
        crate::tick!(&mut u);
        u.attr_we.next = false;
        assert!(!u.pk_ok.val());
        u.peek.next = true;
        crate::tick!(&mut u);
        u.peek.next = false;
        u.attr_we.next = true;
        crate::tick!(&mut u);
        u.attr_we.next = false;
        for _ in 0..4 {
            crate::tick!(&mut u);
        }
        assert!(!u.pk_ok.val(), "voided on its way");
    }
}
