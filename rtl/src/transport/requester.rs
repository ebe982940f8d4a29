//! Requester: turns one checked send WQE into its request packets (rxe `rxe_req.c`: `init_req_packet`,
//! `next_opcode`, `update_wqe_psn`), as TX Packet Build header descriptors plus Gather Path commands.
//!
//! Input: a [`ReqDesc`]: the WQE's fields (opcode, flags, immediate, addresses, keys, atomic operands), the local
//! payload's DMA address (the Key Cache has already checked lkey and range and translated the VA), and what the
//! QP Context holds for the requester (next PSN, packets since the last AckReq, path MTU, destination QPN and the
//! path: MACs, IPs, UDP source port). Output, per packet: a [`TxHeader`] (opcode FIRST/MIDDLE/LAST/ONLY by
//! position, PSN, AckReq, SE, the RETH / ImmDt / AtomicETH extension bytes) and, when the packet carries
//! payload, a gather command (DMA address, length); per WQE, a [`ReqDone`] record for the QP Context write-back
//! (next PSN, AckReq counter) and the completer (first PSN, next PSN).
//!
//! Rules, as the golden model (`testbench::model::requester`) and rxe:
//! * SEND and RDMA WRITE are cut into path-MTU packets; WRITE carries the RETH (remote VA, rkey, total length)
//!   in its first packet, the `_WITH_IMMEDIATE` forms carry ImmDt in the last, SEND_WITH_INV its IETH (the rkey
//!   to invalidate, from the descriptor's `imm`) in the last (SEND_LAST/ONLY_WITH_INVALIDATE); SE on the last
//!   packet of a solicited SEND / SEND_WITH_IMM / SEND_WITH_INV / WRITE_WITH_IMM.
//! * RDMA READ is one request packet with the RETH; it consumes one PSN per response packet
//!   (max(1, ceil(len / MTU))). CAS and FAA are one packet with the AtomicETH (CAS: swap, compare; FAA: add, 0);
//!   their masked forms one packet with MaskedCmpSwapETH (swap, compare, swap mask, compare mask: 44 bytes) or
//!   MaskedFetchAddETH (add, field-boundary mask: 28 bytes), the masks from the WQE's mask slot.
//! * AckReq on the last packet of a message, on every READ and atomic request, and on any packet sent when 64
//!   (`RXE_MAX_PKT_PER_ACK`) packets of the QP have gone without one (RC; a UC QP never sets AckReq).
//! * UC (`uc`): SEND and RDMA WRITE only, the same packets with the UC opcodes (RC + 0x20).
//! * UD (`ud`): SEND and SEND_WITH_IMM only, one packet (UD_SEND_ONLY, RC + 0x60) with the DETH (Q_Key, source
//!   QPN) before the ImmDt; a message longer than the path MTU sends nothing and completes without error,
//!   its PSN unused (rxe `rxe_requester`'s `qp_type == IB_QPT_UD && length > mtu` test).
//! * An opcode this requester does not implement (unknown codes) sends nothing and
//!   completes with `err` set (the completer reports it as a local QP operation error).
//!
//! Timing (<= 6 LUT6 levels): every wide sum (packet DMA address + MTU, PSN + 1 or + packets, packets left - 1)
//! goes through a [`PipeAdd64`] (3 cycles), so a packet takes 4 cycles and a one-packet WQE 9 cycles from
//! descriptor to done. A path-MTU packet is at least 4 beats on the wire, so the 4-cycle packet step keeps pace
//! with the wire at every MTU.

use rust_hdl::prelude::*;

use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::consts::k;
use crate::transport::key_cache::PipeAdd64;
use crate::common::lut::Lut8;
use crate::common::ports::TxPacket;
use crate::wire::tx_build::{TxHeader, EXT_BITS, MAX_EXT};
use rnic_driver::host::{
    WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD, WR_MASKED_ATOMIC_CMP_AND_SWP, WR_MASKED_ATOMIC_FETCH_AND_ADD,
    WR_RDMA_READ, WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND, WR_SEND_WITH_IMM, WR_SEND_WITH_INV,
};
use testbench::model::requester::RXE_MAX_PKT_PER_ACK;
use testbench::wire::opcode::*;

/// One WQE for the requester.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ReqDesc {
    /// Passed through to [`ReqDone`].
    pub qpn: Bits<24>,
    pub slot: Bits<16>,
    /// `rnic_driver::host::WR_*`.
    pub wr_op: Bits<8>,
    pub solicited: Bit,
    /// Immediate data as the 4 wire bytes read big-endian.
    pub imm: Bits<32>,
    /// DMA address of the first payload byte.
    pub laddr: Bits<64>,
    pub len: Bits<32>,
    pub raddr: Bits<64>,
    pub rkey: Bits<32>,
    pub compare_add: Bits<64>,
    pub swap: Bits<64>,
    /// Masked atomics: compare (CAS) or field-boundary (FAA) mask, and swap mask (the WQE's mask slot).
    pub cmp_mask: Bits<64>,
    pub swap_mask: Bits<64>,
    /// The QP's next PSN and packets since its last AckReq.
    pub psn: Bits<24>,
    pub noack: Bits<7>,
    /// log2 of the path MTU (8..=12).
    pub mtu_log2: Bits<4>,
    pub dest_qpn: Bits<24>,
    pub dst_mac: Bits<48>,
    pub src_mac: Bits<48>,
    /// RoCEv2 over IPv6; the addresses (IPv4 in bits 31:0).
    pub v6: Bit,
    pub src_ip: Bits<128>,
    pub dst_ip: Bits<128>,
    pub sport: Bits<16>,
    /// Go-back-N resumed this SEND/WRITE mid-message (`laddr`, `len` already advanced past the acknowledged
    /// packets): its first packet is a MIDDLE or LAST, without the RETH (rxe `retry_first_write_send`).
    pub cont: Bit,
    /// Inline WQE: the payload is in WQE Check's inline data stream, not at `laddr` (one packet, as inline
    /// data fits the smallest path MTU); its gather command says so (`g_inl`).
    pub inl: Bit,
    /// A UC QP: the UC opcode of each packet (the RC one + 0x20, SEND and WRITE only).
    pub uc: Bit,
    /// A UD QP: SEND and SEND_WITH_IMM as one SEND_ONLY packet with the DETH (`qkey`, `qpn` as the source
    /// QP); a message longer than the path MTU sends nothing and completes (rxe, C10-93.1.1).
    pub ud: Bit,
    /// UD: the DETH's Q_Key (WQE Check has applied the high-bit rule).
    pub qkey: Bits<32>,
}

/// What a WQE left behind.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ReqDone {
    pub qpn: Bits<24>,
    pub slot: Bits<16>,
    /// PSN of the first request packet; `next_psn` is one past the last PSN the WQE consumed.
    pub first_psn: Bits<24>,
    pub next_psn: Bits<24>,
    /// Packets since the last AckReq after this WQE (the QP's new count).
    pub noack: Bits<7>,
    /// Nothing was sent: the opcode is not implemented here.
    pub err: Bit,
}

/// Request classes (the class table's output).
pub const CLASS_SEND: u64 = 0;
pub const CLASS_SEND_IMM: u64 = 1;
pub const CLASS_WRITE: u64 = 2;
pub const CLASS_WRITE_IMM: u64 = 3;
pub const CLASS_READ: u64 = 4;
pub const CLASS_CAS: u64 = 5;
pub const CLASS_FAA: u64 = 6;
pub const CLASS_MCAS: u64 = 7;
pub const CLASS_MFAA: u64 = 8;
pub const CLASS_SEND_INV: u64 = 9;
pub const CLASS_INVALID: u64 = 15;
/// Classes with a request (0 .. CLASSES).
const CLASSES: u64 = 10;

/// Extension-header kinds (the ext table's bits 2:0).
const EXT_NONE: u64 = 0;
const EXT_RETH: u64 = 1;
const EXT_RETH_IMM: u64 = 2;
const EXT_IMM: u64 = 3;
const EXT_CAS: u64 = 4;
const EXT_FAA: u64 = 5;
const EXT_MCAS: u64 = 6;
const EXT_MFAA: u64 = 7;

/// `class[wr_op]`.
pub fn class_table() -> Vec<u64> {
    let mut t = vec![CLASS_INVALID; 256];
    t[WR_SEND as usize] = CLASS_SEND;
    t[WR_SEND_WITH_IMM as usize] = CLASS_SEND_IMM;
    t[WR_SEND_WITH_INV as usize] = CLASS_SEND_INV;
    t[WR_RDMA_WRITE as usize] = CLASS_WRITE;
    t[WR_RDMA_WRITE_WITH_IMM as usize] = CLASS_WRITE_IMM;
    t[WR_RDMA_READ as usize] = CLASS_READ;
    t[WR_ATOMIC_CMP_AND_SWP as usize] = CLASS_CAS;
    t[WR_ATOMIC_FETCH_AND_ADD as usize] = CLASS_FAA;
    t[WR_MASKED_ATOMIC_CMP_AND_SWP as usize] = CLASS_MCAS;
    t[WR_MASKED_ATOMIC_FETCH_AND_ADD as usize] = CLASS_MFAA;
    t
}

/// Index of the per-packet tables: class in 3:0, first in 4, last in 5.
fn pkt_index(class: u64, first: bool, last: bool) -> usize {
    (class | u64::from(first) << 4 | u64::from(last) << 5) as usize
}

/// `opcode[class, first, last]`: the BTH opcode (RC), as the golden model's `opcode_for`.
pub fn opcode_table() -> Vec<u64> {
    let mut t = vec![0u64; 256];
    for class in 0..CLASSES {
        for (first, last) in [(true, true), (true, false), (false, false), (false, true)] {
            let op = match (class, first, last) {
                (CLASS_SEND | CLASS_SEND_IMM | CLASS_SEND_INV, true, false) => RC_SEND_FIRST,
                (CLASS_SEND | CLASS_SEND_IMM | CLASS_SEND_INV, false, false) => RC_SEND_MIDDLE,
                (CLASS_SEND, false, true) => RC_SEND_LAST,
                (CLASS_SEND_IMM, false, true) => RC_SEND_LAST_WITH_IMMEDIATE,
                (CLASS_SEND_INV, false, true) => RC_SEND_LAST_WITH_INVALIDATE,
                (CLASS_SEND, true, true) => RC_SEND_ONLY,
                (CLASS_SEND_IMM, true, true) => RC_SEND_ONLY_WITH_IMMEDIATE,
                (CLASS_SEND_INV, true, true) => RC_SEND_ONLY_WITH_INVALIDATE,
                (CLASS_WRITE | CLASS_WRITE_IMM, true, false) => RC_RDMA_WRITE_FIRST,
                (CLASS_WRITE | CLASS_WRITE_IMM, false, false) => RC_RDMA_WRITE_MIDDLE,
                (CLASS_WRITE, false, true) => RC_RDMA_WRITE_LAST,
                (CLASS_WRITE_IMM, false, true) => RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
                (CLASS_WRITE, true, true) => RC_RDMA_WRITE_ONLY,
                (CLASS_WRITE_IMM, true, true) => RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
                (CLASS_READ, _, _) => RC_RDMA_READ_REQUEST,
                (CLASS_CAS, _, _) => RC_COMPARE_SWAP,
                (CLASS_MCAS, _, _) => MASKED_COMPARE_SWAP,
                (CLASS_MFAA, _, _) => MASKED_FETCH_ADD,
                _ => RC_FETCH_ADD,
            };
            t[pkt_index(class, first, last)] = u64::from(op);
        }
    }
    t
}

/// `ext[class, first, last]`: kind in 2:0, 32-bit words in 6:3, SE allowed in 7, one-packet request in 8.
pub fn ext_table() -> Vec<u64> {
    let mut t = vec![0u64; 256];
    for class in 0..CLASSES {
        for (first, last) in [(true, true), (true, false), (false, false), (false, true)] {
            let (kind, words) = match class {
                // the IETH is, like the ImmDt, one 32-bit word after the BTH
                CLASS_SEND_IMM | CLASS_SEND_INV if last => (EXT_IMM, 1),
                CLASS_WRITE | CLASS_WRITE_IMM if first && last && class == CLASS_WRITE_IMM => (EXT_RETH_IMM, 5),
                CLASS_WRITE | CLASS_WRITE_IMM if first => (EXT_RETH, 4),
                CLASS_WRITE_IMM if last => (EXT_IMM, 1),
                CLASS_READ => (EXT_RETH, 4),
                CLASS_CAS => (EXT_CAS, 7),
                CLASS_FAA => (EXT_FAA, 7),
                CLASS_MCAS => (EXT_MCAS, 11),
                CLASS_MFAA => (EXT_MFAA, 7),
                _ => (EXT_NONE, 0),
            };
            let se = matches!(class, CLASS_SEND | CLASS_SEND_IMM | CLASS_SEND_INV | CLASS_WRITE_IMM) && last;
            let one = matches!(class, CLASS_READ | CLASS_CAS | CLASS_FAA | CLASS_MCAS | CLASS_MFAA);
            t[pkt_index(class, first, last)] = kind | words << 3 | u64::from(se) << 7 | u64::from(one) << 8;
        }
    }
    t
}

/// The packed operand vector the extension headers are cut from (bit offsets).
const SRC_RADDR: usize = 0;
const SRC_RKEY: usize = 64;
const SRC_LEN: usize = 96;
const SRC_IMM: usize = 128;
const SRC_SWAP: usize = 160;
const SRC_CMP: usize = 224;
const SRC_SMASK: usize = 288;
const SRC_CMASK: usize = 352;
const SRC_QKEY: usize = 416;
const SRC_SQPN: usize = 448;
const SRC_BITS: usize = 472;

fn be(off: usize, bytes: usize) -> impl Iterator<Item = ByteSrc> {
    (0..bytes).map(move |i| ByteSrc::In(off + 8 * (bytes - 1 - i)))
}

/// An extension-header byte map: the given fields big-endian, in order, then zeros to [`MAX_EXT`] bytes.
fn ext_map(fields: &[(usize, usize)]) -> ByteMap<SRC_BITS, EXT_BITS> {
    let mut m: Vec<ByteSrc> = fields.iter().flat_map(|&(o, n)| be(o, n)).collect();
    m.resize(MAX_EXT, ByteSrc::Const(0));
    ByteMap::new(m)
}

/// The DETH (Q_Key, a reserved byte, source QPN), then the ImmDt when `imm`.
fn deth_map(imm: bool) -> ByteMap<SRC_BITS, EXT_BITS> {
    let mut m: Vec<ByteSrc> = be(SRC_QKEY, 4).chain([ByteSrc::Const(0)]).chain(be(SRC_SQPN, 3)).collect();
    if imm {
        m.extend(be(SRC_IMM, 4));
    }
    m.resize(MAX_EXT, ByteSrc::Const(0));
    ByteMap::new(m)
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum ReqState {
    Idle,
    Plan,
    PlanAdd,
    Wait,
    Packet,
    Finish,
}

/// The Requester (see the module documentation).
#[derive(LogicBlock)]
pub struct Requester {
    pub clock: Signal<In, Clock>,
    pub desc: Signal<In, ReqDesc>,
    pub desc_valid: Signal<In, Bit>,
    pub desc_ready: Signal<Out, Bit>,
    /// Packets out: the header, and the Gather Path command for its payload (`g_len` bytes at DMA address
    /// `g_addr`, or from the inline data stream when `g_inl`).
    pub tx: TxPacket,
    pub done: Signal<Out, ReqDone>,
    pub done_valid: Signal<Out, Bit>,
    pub done_ready: Signal<In, Bit>,

    state: DFF<ReqState>,
    /// Where `Wait` goes when the adders are done: `Packet` (false) or `Done` (true).
    wait_to_done: DFF<Bit>,
    wait_n: DFF<Bits<2>>,
    wqe: DFF<ReqDesc>,
    cls: DFF<Bits<4>>,
    addr: DFF<Bits<64>>,
    psn: DFF<Bits<24>>,
    left: DFF<Bits<24>>,
    first: DFF<Bit>,
    /// A packet has been sent: the next one steps the address and PSN.
    sent: DFF<Bit>,
    noack: DFF<Bits<7>>,
    mtu: DFF<Bits<13>>,
    last_len: DFF<Bits<13>>,
    nq: DFF<Bits<24>>,
    low_nz: DFF<Bit>,
    len_zero: DFF<Bit>,
    first_psn: DFF<Bits<24>>,
    o_hdr: DFF<TxHeader>,
    o_hv: DFF<Bit>,
    o_gaddr: DFF<Bits<64>>,
    o_glen: DFF<Bits<13>>,
    o_ginl: DFF<Bit>,
    o_gv: DFF<Bit>,
    o_done: DFF<ReqDone>,
    o_dv: DFF<Bit>,

    add_addr: PipeAdd64,
    add_psn: PipeAdd64,
    add_left: PipeAdd64,
    class_lut: Lut8<4>,
    op_lut: Lut8<8>,
    ext_lut: Lut8<9>,
    m_reth: ByteMap<SRC_BITS, EXT_BITS>,
    m_reth_imm: ByteMap<SRC_BITS, EXT_BITS>,
    m_imm: ByteMap<SRC_BITS, EXT_BITS>,
    m_cas: ByteMap<SRC_BITS, EXT_BITS>,
    m_faa: ByteMap<SRC_BITS, EXT_BITS>,
    m_mcas: ByteMap<SRC_BITS, EXT_BITS>,
    m_mfaa: ByteMap<SRC_BITS, EXT_BITS>,
    m_deth: ByteMap<SRC_BITS, EXT_BITS>,
    m_deth_imm: ByteMap<SRC_BITS, EXT_BITS>,
    /// UD: the message is longer than the path MTU, nothing is sent.
    nosend: DFF<Bit>,

    l_len: Signal<Local, Bits<32>>,
    l_mtu_log2: Signal<Local, Bits<4>>,
    l_low: Signal<Local, Bits<13>>,
    l_mask: Signal<Local, Bits<13>>,
    l_mtu: Signal<Local, Bits<13>>,
    l_shifted: Signal<Local, Bits<32>>,
    l_last: Signal<Local, Bit>,
    l_ext: Signal<Local, Bits<9>>,
    l_idx: Signal<Local, Bits<8>>,
    l_kind: Signal<Local, Bits<3>>,
    l_ack: Signal<Local, Bit>,
    l_pay: Signal<Local, Bits<13>>,
    l_out_free: Signal<Local, Bit>,
    l_src: Signal<Local, Bits<SRC_BITS>>,

    one13: Constant<Bits<13>>,
    idx_first: Constant<Bits<8>>,
    idx_last: Constant<Bits<8>>,
    zero16: Constant<Bits<16>>,
    zero_ext: Constant<Bits<EXT_BITS>>,
    one2: Constant<Bits<2>>,
    zero13: Constant<Bits<13>>,
    zero24: Constant<Bits<24>>,
    one24: Constant<Bits<24>>,
    zero32: Constant<Bits<32>>,
    zero64: Constant<Bits<64>>,
    ones64: Constant<Bits<64>>,
    two2: Constant<Bits<2>>,
    zero2: Constant<Bits<2>>,
    one7: Constant<Bits<7>>,
    zero7: Constant<Bits<7>>,
    max_noack: Constant<Bits<7>>,
    c_invalid: Constant<Bits<4>>,
    /// RC opcode + this = the UC opcode (IBA: the transport in bits 7:5, RC 000, UC 001).
    uc_op: Constant<Bits<8>>,
    /// RC SEND opcode + this = the UD one (transport 011).
    ud_op: Constant<Bits<8>>,
    two4: Constant<Bits<4>>,
    c_read: Constant<Bits<4>>,
    k_none: Constant<Bits<3>>,
    k_reth: Constant<Bits<3>>,
    k_reth_imm: Constant<Bits<3>>,
    k_imm: Constant<Bits<3>>,
    k_cas: Constant<Bits<3>>,
    k_mcas: Constant<Bits<3>>,
    k_mfaa: Constant<Bits<3>>,
}

impl Default for Requester {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            desc: Default::default(),
            desc_valid: Default::default(),
            desc_ready: Default::default(),
            tx: Default::default(),
            done: Default::default(),
            done_valid: Default::default(),
            done_ready: Default::default(),
            state: Default::default(),
            wait_to_done: Default::default(),
            wait_n: Default::default(),
            wqe: Default::default(),
            cls: Default::default(),
            addr: Default::default(),
            psn: Default::default(),
            left: Default::default(),
            first: Default::default(),
            sent: Default::default(),
            noack: Default::default(),
            mtu: Default::default(),
            last_len: Default::default(),
            nq: Default::default(),
            low_nz: Default::default(),
            len_zero: Default::default(),
            first_psn: Default::default(),
            o_hdr: Default::default(),
            o_hv: Default::default(),
            o_gaddr: Default::default(),
            o_glen: Default::default(),
            o_ginl: Default::default(),
            o_gv: Default::default(),
            o_done: Default::default(),
            o_dv: Default::default(),
            add_addr: Default::default(),
            add_psn: Default::default(),
            add_left: Default::default(),
            class_lut: Lut8::new(class_table()),
            op_lut: Lut8::new(opcode_table()),
            ext_lut: Lut8::new(ext_table()),
            m_reth: ext_map(&[(SRC_RADDR, 8), (SRC_RKEY, 4), (SRC_LEN, 4)]),
            m_reth_imm: ext_map(&[(SRC_RADDR, 8), (SRC_RKEY, 4), (SRC_LEN, 4), (SRC_IMM, 4)]),
            m_imm: ext_map(&[(SRC_IMM, 4)]),
            m_cas: ext_map(&[(SRC_RADDR, 8), (SRC_RKEY, 4), (SRC_SWAP, 8), (SRC_CMP, 8)]),
            // FAA: the add operand is the WQE's compare_add; the compare field is 0 (SRC bits above 288 do
            // not exist, so the map takes the zero bytes from constants)
            m_faa: {
                let mut m: Vec<ByteSrc> = be(SRC_RADDR, 8).chain(be(SRC_RKEY, 4)).chain(be(SRC_CMP, 8)).collect();
                m.resize(MAX_EXT, ByteSrc::Const(0));
                ByteMap::new(m)
            },
            // MaskedCmpSwapETH: swap, compare, swap mask, compare mask
            m_mcas: ext_map(&[(SRC_RADDR, 8), (SRC_RKEY, 4), (SRC_SWAP, 8), (SRC_CMP, 8), (SRC_SMASK, 8), (SRC_CMASK, 8)]),
            // MaskedFetchAddETH: add, field-boundary mask
            m_mfaa: ext_map(&[(SRC_RADDR, 8), (SRC_RKEY, 4), (SRC_CMP, 8), (SRC_CMASK, 8)]),
            m_deth: deth_map(false),
            m_deth_imm: deth_map(true),
            nosend: Default::default(),
            l_len: Default::default(),
            l_mtu_log2: Default::default(),
            l_low: Default::default(),
            l_mask: Default::default(),
            l_mtu: Default::default(),
            l_shifted: Default::default(),
            l_last: Default::default(),
            l_ext: Default::default(),
            l_idx: Default::default(),
            l_kind: Default::default(),
            l_ack: Default::default(),
            l_pay: Default::default(),
            l_out_free: Default::default(),
            l_src: Default::default(),
            one13: k(1),
            idx_first: k(1 << 4),
            idx_last: k(1 << 5),
            zero16: k(0),
            zero_ext: Constant::new(Bits::<EXT_BITS>::default()),
            one2: k(1),
            zero13: k(0),
            zero24: k(0),
            one24: k(1),
            zero32: k(0),
            zero64: k(0),
            ones64: k(u64::MAX),
            two2: k(2),
            zero2: k(0),
            one7: k(1),
            zero7: k(0),
            max_noack: k(u64::from(RXE_MAX_PKT_PER_ACK)),
            c_invalid: k(CLASS_INVALID),
            uc_op: k(u64::from(UC_SEND_FIRST - RC_SEND_FIRST)),
            ud_op: k(u64::from(UD_SEND_ONLY - RC_SEND_ONLY)),
            two4: k(2),
            c_read: k(CLASS_READ),
            k_none: k(EXT_NONE),
            k_reth: k(EXT_RETH),
            k_reth_imm: k(EXT_RETH_IMM),
            k_imm: k(EXT_IMM),
            k_cas: k(EXT_CAS),
            k_mcas: k(EXT_MCAS),
            k_mfaa: k(EXT_MFAA),
        }
    }
}

impl Logic for Requester {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, state, wait_to_done, wait_n, wqe, cls, addr, psn, left, first, sent, noack, mtu, last_len, nq,
            low_nz, len_zero, first_psn, nosend, o_hdr, o_hv, o_gaddr, o_glen, o_ginl, o_gv, o_done, o_dv
        );
        self.add_addr.clock.next = self.clock.val();
        self.add_psn.clock.next = self.clock.val();
        self.add_left.clock.next = self.clock.val();

        // outputs are registers; a consumer taking one frees it
        self.tx.hdr.next = self.o_hdr.q.val();
        self.tx.hdr_valid.next = self.o_hv.q.val();
        self.tx.g_addr.next = self.o_gaddr.q.val();
        self.tx.g_len.next = self.o_glen.q.val();
        self.tx.g_inl.next = self.o_ginl.q.val();
        self.tx.g_valid.next = self.o_gv.q.val();
        self.done.next = self.o_done.q.val();
        self.done_valid.next = self.o_dv.q.val();
        if self.tx.hdr_ready.val() {
            self.o_hv.d.next = false;
        }
        if self.tx.g_ready.val() {
            self.o_gv.d.next = false;
        }
        if self.done_ready.val() {
            self.o_dv.d.next = false;
        }
        self.l_out_free.next = (!self.o_hv.q.val() | self.tx.hdr_ready.val()) & (!self.o_gv.q.val() | self.tx.g_ready.val());

        // ---- plan: packets, MTU, last packet's length
        self.l_len.next = self.wqe.q.val().len;
        self.l_mtu_log2.next = self.wqe.q.val().mtu_log2;
        self.l_mtu.next = self.one13.val() << self.l_mtu_log2.val();
        self.l_mask.next = self.l_mtu.val() - self.one13.val();
        self.l_low.next = self.l_len.val().get_bits::<13>(0) & self.l_mask.val();
        self.l_shifted.next = self.l_len.val() >> self.l_mtu_log2.val();
        self.class_lut.x.next = self.wqe.q.val().wr_op;

        // ---- per packet: tables by (class, first, last)
        self.l_last.next = self.left.q.val() == self.zero24.val();
        self.l_idx.next = bit_cast::<8, 4>(self.cls.q.val());
        if self.first.q.val() {
            self.l_idx.next = self.l_idx.val() | self.idx_first.val();
        }
        if self.l_last.val() {
            self.l_idx.next = self.l_idx.val() | self.idx_last.val();
        }
        self.op_lut.x.next = self.l_idx.val();
        self.ext_lut.x.next = self.op_lut.x.val();
        self.l_ext.next = self.ext_lut.y.val();
        self.l_kind.next = self.l_ext.val().get_bits::<3>(0);
        self.l_ack.next = (self.l_last.val() | self.l_ext.val().get_bit(8) | (self.noack.q.val() >= self.max_noack.val()))
            & !self.wqe.q.val().uc
            & !self.wqe.q.val().ud;
        self.l_pay.next = self.mtu.q.val();
        if self.l_last.val() {
            self.l_pay.next = self.last_len.q.val();
        }
        if self.l_ext.val().get_bit(8) {
            self.l_pay.next = self.zero13.val();
        }
        // extension-header operands
        self.l_src.next = bit_cast::<SRC_BITS, 64>(self.wqe.q.val().raddr)
            | (bit_cast::<SRC_BITS, 32>(self.wqe.q.val().rkey) << 64)
            | (bit_cast::<SRC_BITS, 32>(self.wqe.q.val().len) << 96)
            | (bit_cast::<SRC_BITS, 32>(self.wqe.q.val().imm) << 128)
            | (bit_cast::<SRC_BITS, 64>(self.wqe.q.val().swap) << 160)
            | (bit_cast::<SRC_BITS, 64>(self.wqe.q.val().compare_add) << 224)
            | (bit_cast::<SRC_BITS, 64>(self.wqe.q.val().swap_mask) << 288)
            | (bit_cast::<SRC_BITS, 64>(self.wqe.q.val().cmp_mask) << 352)
            | (bit_cast::<SRC_BITS, 32>(self.wqe.q.val().qkey) << 416)
            | (bit_cast::<SRC_BITS, 24>(self.wqe.q.val().qpn) << 448);
        self.m_reth.x.next = self.l_src.val();
        self.m_reth_imm.x.next = self.l_src.val();
        self.m_imm.x.next = self.l_src.val();
        self.m_cas.x.next = self.l_src.val();
        self.m_faa.x.next = self.l_src.val();
        self.m_mcas.x.next = self.l_src.val();
        self.m_mfaa.x.next = self.l_src.val();
        self.m_deth.x.next = self.l_src.val();
        self.m_deth_imm.x.next = self.l_src.val();

        // ---- adders: inputs default to the per-packet steps
        self.add_addr.a.next = self.addr.q.val();
        self.add_addr.b.next = bit_cast::<64, 13>(self.mtu.q.val());
        self.add_addr.cin.next = false;
        self.add_psn.a.next = bit_cast::<64, 24>(self.psn.q.val());
        self.add_psn.b.next = self.zero64.val();
        self.add_psn.cin.next = true;
        self.add_left.a.next = bit_cast::<64, 24>(self.left.q.val());
        self.add_left.b.next = self.ones64.val();
        self.add_left.cin.next = false;

        self.desc_ready.next = false;
        match self.state.q.val() {
            ReqState::Idle => {
                self.desc_ready.next = !self.o_dv.q.val();
                if self.desc_valid.val() & !self.o_dv.q.val() {
                    self.wqe.d.next = self.desc.val();
                    self.state.d.next = ReqState::Plan;
                }
            }
            ReqState::Plan => {
                self.cls.d.next = self.class_lut.y.val();
                self.mtu.d.next = self.l_mtu.val();
                self.nq.d.next = self.l_shifted.val().get_bits::<24>(0);
                self.low_nz.d.next = self.l_low.val() != self.zero13.val();
                self.len_zero.d.next = self.l_len.val() == self.zero32.val();
                self.last_len.d.next = self.l_mtu.val();
                if self.l_low.val() != self.zero13.val() {
                    self.last_len.d.next = self.l_low.val();
                }
                if self.l_len.val() == self.zero32.val() {
                    self.last_len.d.next = self.zero13.val();
                }
                self.addr.d.next = self.wqe.q.val().laddr;
                self.psn.d.next = self.wqe.q.val().psn;
                self.first_psn.d.next = self.wqe.q.val().psn;
                self.noack.d.next = self.wqe.q.val().noack;
                self.first.d.next = !self.wqe.q.val().cont;
                self.sent.d.next = false;
                self.nosend.d.next = false;
                self.state.d.next = ReqState::PlanAdd;
            }
            ReqState::PlanAdd => {
                // packets after the first: q - 1 when the length is a whole number of MTUs (and not 0), else q
                self.add_left.a.next = bit_cast::<64, 24>(self.nq.q.val());
                self.add_left.b.next = self.ones64.val();
                if self.low_nz.q.val() | self.len_zero.q.val() {
                    self.add_left.b.next = self.zero64.val();
                }
                self.wait_n.d.next = self.two2.val();
                self.wait_to_done.d.next = false;
                self.state.d.next = ReqState::Wait;
                if (self.nq.q.val() == self.zero24.val())
                    | ((self.nq.q.val() == self.one24.val()) & !self.low_nz.q.val())
                {
                    // one packet: none left after it, so the first packet need not wait for the sum
                    self.left.d.next = self.zero24.val();
                    self.state.d.next = ReqState::Packet;
                }
                if self.wqe.q.val().ud
                    & !((self.nq.q.val() == self.zero24.val())
                        | ((self.nq.q.val() == self.one24.val()) & !self.low_nz.q.val()))
                {
                    // UD longer than the path MTU: nothing sent, completes without error
                    self.nosend.d.next = true;
                    self.state.d.next = ReqState::Finish;
                }
                if self.cls.q.val() == self.c_invalid.val() {
                    self.state.d.next = ReqState::Finish;
                }
            }
            ReqState::Wait => {
                self.wait_n.d.next = self.wait_n.q.val() - self.one2.val();
                if self.wait_n.q.val() == self.zero2.val() {
                    if self.wait_to_done.q.val() {
                        self.o_dv.d.next = true;
                        self.o_done.d.next.qpn = self.wqe.q.val().qpn;
                        self.o_done.d.next.slot = self.wqe.q.val().slot;
                        self.o_done.d.next.first_psn = self.first_psn.q.val();
                        self.o_done.d.next.next_psn = self.add_psn.sum.val().get_bits::<24>(0);
                        self.o_done.d.next.noack = self.noack.q.val();
                        self.o_done.d.next.err = self.cls.q.val() == self.c_invalid.val();
                        if (self.cls.q.val() == self.c_invalid.val()) | self.nosend.q.val() {
                            self.o_done.d.next.next_psn = self.wqe.q.val().psn;
                        }
                        self.state.d.next = ReqState::Idle;
                    } else {
                        // the step's sums: the next packet's address and PSN, packets left
                        if self.sent.q.val() {
                            self.addr.d.next = self.add_addr.sum.val();
                            self.psn.d.next = self.add_psn.sum.val().get_bits::<24>(0);
                        }
                        self.left.d.next = self.add_left.sum.val().get_bits::<24>(0);
                        self.state.d.next = ReqState::Packet;
                    }
                }
            }
            ReqState::Packet => {
                if self.l_out_free.val() {
                    self.o_hv.d.next = true;
                    self.o_hdr.d.next.dst_mac = self.wqe.q.val().dst_mac;
                    self.o_hdr.d.next.src_mac = self.wqe.q.val().src_mac;
                    self.o_hdr.d.next.v6 = self.wqe.q.val().v6;
                    self.o_hdr.d.next.src_ip = self.wqe.q.val().src_ip;
                    self.o_hdr.d.next.dst_ip = self.wqe.q.val().dst_ip;
                    self.o_hdr.d.next.ip_id = self.zero16.val();
                    self.o_hdr.d.next.udp_sport = self.wqe.q.val().sport;
                    self.o_hdr.d.next.opcode = self.op_lut.y.val();
                    if self.wqe.q.val().uc {
                        self.o_hdr.d.next.opcode = self.op_lut.y.val() | self.uc_op.val();
                    }
                    if self.wqe.q.val().ud {
                        self.o_hdr.d.next.opcode = self.op_lut.y.val() | self.ud_op.val();
                    }
                    self.o_hdr.d.next.solicited = self.l_ext.val().get_bit(7) & self.wqe.q.val().solicited;
                    self.o_hdr.d.next.ack_req = self.l_ack.val();
                    self.o_hdr.d.next.dest_qpn = self.wqe.q.val().dest_qpn;
                    self.o_hdr.d.next.psn = self.psn.q.val();
                    self.o_hdr.d.next.ext_words = self.l_ext.val().get_bits::<4>(3);
                    self.o_hdr.d.next.pay_len = self.l_pay.val();
                    self.o_hdr.d.next.ext = self.m_faa.y.val();
                    if self.l_kind.val() == self.k_none.val() {
                        self.o_hdr.d.next.ext = self.zero_ext.val();
                    }
                    if self.l_kind.val() == self.k_reth.val() {
                        self.o_hdr.d.next.ext = self.m_reth.y.val();
                    }
                    if self.l_kind.val() == self.k_reth_imm.val() {
                        self.o_hdr.d.next.ext = self.m_reth_imm.y.val();
                    }
                    if self.l_kind.val() == self.k_imm.val() {
                        self.o_hdr.d.next.ext = self.m_imm.y.val();
                    }
                    if self.l_kind.val() == self.k_cas.val() {
                        self.o_hdr.d.next.ext = self.m_cas.y.val();
                    }
                    if self.l_kind.val() == self.k_mcas.val() {
                        self.o_hdr.d.next.ext = self.m_mcas.y.val();
                    }
                    if self.l_kind.val() == self.k_mfaa.val() {
                        self.o_hdr.d.next.ext = self.m_mfaa.y.val();
                    }
                    if self.wqe.q.val().ud {
                        // the DETH in front of the ImmDt (two words more)
                        self.o_hdr.d.next.ext_words = self.l_ext.val().get_bits::<4>(3) + self.two4.val();
                        self.o_hdr.d.next.ext = self.m_deth.y.val();
                        if self.l_kind.val() == self.k_imm.val() {
                            self.o_hdr.d.next.ext = self.m_deth_imm.y.val();
                        }
                    }
                    if self.l_pay.val() != self.zero13.val() {
                        self.o_gv.d.next = true;
                        self.o_gaddr.d.next = self.addr.q.val();
                        self.o_glen.d.next = self.l_pay.val();
                        self.o_ginl.d.next = self.wqe.q.val().inl;
                    }
                    // (UC, UD: no AckReq and no count, as rxe)
                    if !self.wqe.q.val().uc & !self.wqe.q.val().ud {
                        self.noack.d.next = self.noack.q.val() + self.one7.val();
                    }
                    if self.l_ack.val() {
                        self.noack.d.next = self.zero7.val();
                    }
                    self.first.d.next = false;
                    self.sent.d.next = true;
                    self.wait_n.d.next = self.two2.val();
                    self.wait_to_done.d.next = false;
                    self.state.d.next = ReqState::Wait;
                    if self.l_last.val() | self.l_ext.val().get_bit(8) {
                        self.state.d.next = ReqState::Finish;
                    }
                }
            }
            ReqState::Finish => {
                // next PSN: this packet's PSN + 1 + packets left (a READ's responses beyond the first)
                self.add_psn.b.next = bit_cast::<64, 24>(self.left.q.val());
                if self.cls.q.val() != self.c_read.val() {
                    self.add_psn.b.next = self.zero64.val();
                }
                self.wait_n.d.next = self.two2.val();
                self.wait_to_done.d.next = true;
                self.state.d.next = ReqState::Wait;
            }
            _ => {
                self.state.d.next = ReqState::Idle;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tx_build::tx_header_of;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use rnic_driver::host::wr_opcode_code;
    use testbench::model::*;
    use testbench::wire::frame::{parse_ethernet, Frame};

    /// One packet as the RTL produced it: header, and the gather command if any.
    type Pkt = (TxHeader, Option<(u64, u64)>);

    struct Rig {
        u: Requester,
        cycle: u64,
    }

    impl Rig {
        fn new() -> Self {
            let mut u = Requester::default();
            u.connect_all();
            Rig { u, cycle: 0 }
        }
        fn clock(&mut self) {
            self.u.clock.next = false.into();
            simulate(&mut self.u, 200);
            self.u.clock.next = true.into();
            simulate(&mut self.u, 200);
            self.cycle += 1;
        }
        /// Run one descriptor to its done record, with random output backpressure.
        fn run(&mut self, d: ReqDesc, rng: &mut SmallRng) -> (Vec<Pkt>, ReqDone) {
            let mut pkts: Vec<Pkt> = Vec::new();
            let mut pending_g: Vec<(u64, u64)> = Vec::new();
            let mut hdrs: Vec<TxHeader> = Vec::new();
            let mut sent = false;
            let mut got: Option<ReqDone> = None;
            for _ in 0..20_000 {
                self.u.desc.next = d;
                self.u.desc_valid.next = !sent;
                let (hr, gr, dr) = (rng.gen_bool(0.7), rng.gen_bool(0.7), rng.gen_bool(0.5));
                self.u.tx.hdr_ready.next = hr;
                self.u.tx.g_ready.next = gr;
                self.u.done_ready.next = dr;
                simulate(&mut self.u, 200);
                if !sent && self.u.desc_ready.val() {
                    sent = true;
                }
                if self.u.tx.hdr_valid.val() && hr {
                    hdrs.push(self.u.tx.hdr.val());
                }
                if self.u.tx.g_valid.val() && gr {
                    assert_eq!(self.u.tx.g_inl.val(), d.inl, "the gather command's inline flag is the WQE's");
                    pending_g.push((self.u.tx.g_addr.val().to_u64(), self.u.tx.g_len.val().to_u64()));
                }
                if self.u.done_valid.val() && dr {
                    assert!(got.is_none(), "two done records for one descriptor");
                    got = Some(self.u.done.val());
                }
                let drained = !self.u.tx.hdr_valid.val() && !self.u.tx.g_valid.val();
                self.clock();
                // the done record may overtake the last packet's outputs: wait for both
                if let (Some(done), true) = (got, drained) {
                    // pair each header with its gather command (commands are issued with their header, in order)
                    let mut g = pending_g.into_iter();
                    for h in hdrs {
                        let cmd = if h.pay_len.to_u64() > 0 { g.next() } else { None };
                        pkts.push((h, cmd));
                    }
                    assert!(g.next().is_none(), "a gather command without a header");
                    return (pkts, done);
                }
            }
            panic!("requester hung on {d:?}");
        }
    }

    fn mac_bits(m: [u8; 6]) -> Bits<48> {
        bits::<48>(m.iter().fold(0u64, |a, b| a << 8 | *b as u64))
    }

    /// Random message sequences on one QP (RC; UC with its SENDs and WRITEs; UD with its SENDs, some longer
    /// than the path MTU) of the golden model and of the RTL; every header, gather command and done record
    /// compared.
    fn campaign(seed: u64, wqes: usize, ty: QpType) -> usize {
        let (uc, ud) = (ty == QpType::Uc, ty == QpType::Ud);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut rig = Rig::new();
        let mut checked = 0;
        let mut w = 0;
        while w < wqes {
            let mtu = [256u32, 1024, 4096][rng.gen_range(0..3)];
            // (UD messages are cut at the port's active MTU, not a path MTU)
            let mut dev = Device::new(DeviceConfig { active_mtu: mtu, ..DeviceConfig::simple(1) });
            let peer = Device::new(DeviceConfig::simple(2));
            let buf = dev.alloc(1 << 16);
            for i in 0..(1 << 16) / 8 {
                dev.mem_mut().write_u64(buf + 8 * i, rng.gen()).unwrap();
            }
            let pd = dev.alloc_pd();
            let mr = dev.reg_mr(pd, buf, 1 << 16, AccessFlags::ALL).unwrap();
            let cq = dev.create_cq(256);
            let cap = QpCap { max_send_wr: 64, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
            let qpn = dev
                .create_qp(pd, QpInitAttr { qp_type: ty, send_cq: cq, recv_cq: cq, cap, sq_sig_all: true })
                .unwrap();
            let own_qkey: u32 = rng.gen::<u32>() & 0x7FFF_FFFF;
            let psn0 = if rng.gen_bool(0.3) { 0xFF_FFFF - rng.gen_range(0..40) } else { rng.gen_range(0..0x100_0000) };
            for attr in [
                QpAttr {
                    qp_state: Some(QpState::Init),
                    qp_access_flags: Some(AccessFlags::ALL),
                    qkey: Some(own_qkey),
                    ..Default::default()
                },
                QpAttr {
                    qp_state: Some(QpState::Rtr),
                    path_mtu: Some(mtu),
                    dest_qp_num: (!ud).then(|| 0x20 + rng.gen_range(0..100)),
                    rq_psn: (!ud).then_some(0),
                    max_dest_rd_atomic: Some(16),
                    av: (!ud).then(|| peer.av_to_me()),
                    ..Default::default()
                },
                QpAttr {
                    qp_state: Some(QpState::Rts),
                    sq_psn: Some(psn0),
                    max_rd_atomic: Some(16),
                    timeout: Some(14),
                    retry_cnt: Some(7),
                    rnr_retry: Some(7),
                    ..Default::default()
                },
            ] {
                dev.modify_qp(qpn, &attr).unwrap();
            }
            let qp = dev.qp(qpn).unwrap();
            let (sport, dest_qpn) = (qp.sport, qp.dest_qpn);
            let (mut psn, mut noack) = (psn0, 0u64);
            // up to 100 packets per sequence (the model's requester stops at 128 unacknowledged PSNs)
            let mut budget = 100u64;
            for _ in 0..8 {
                let op = [
                    WrOpcode::Send,
                    WrOpcode::SendWithImm,
                    WrOpcode::RdmaWrite,
                    WrOpcode::RdmaWriteWithImm,
                    WrOpcode::RdmaRead,
                    WrOpcode::AtomicCmpAndSwp,
                    WrOpcode::AtomicFetchAndAdd,
                    WrOpcode::MaskedAtomicCmpAndSwp,
                    WrOpcode::MaskedAtomicFetchAndAdd,
                    WrOpcode::SendWithInv,
                ][rng.gen_range(0..if ud { 2 } else if uc { 4 } else { 10 })];
                let m = mtu as u64;
                let len = if ud {
                    // one packet, or longer than the MTU (nothing sent)
                    [0, 1, m - 1, m, m + 1, rng.gen_range(0..=m), rng.gen_range(0..4 * m)][rng.gen_range(0..7)]
                } else if op.is_atomic() {
                    8
                } else {
                    // long messages too, so that the 64-packet AckReq rule fires inside and across messages
                    let long = rng.gen_range(0..=(budget * m).min(1 << 15));
                    [0, 1, m - 1, m, m + 1, 2 * m, rng.gen_range(0..(8 * m).min(1 << 15)), long][rng.gen_range(0..8)]
                };
                let pk = if op.is_read_or_atomic() || ud { 1 } else { len.div_ceil(m).max(1) };
                if pk > budget {
                    break;
                }
                budget -= pk;
                let off = if op.is_atomic() { 8 * rng.gen_range(0..16) } else { rng.gen_range(0..(1 << 15)) };
                let mut wr = SendWr::new(w as u64, op, vec![Sge { addr: buf + off, length: len as u32, lkey: mr.lkey }]);
                wr.remote_addr = rng.gen::<u64>() & !7;
                wr.rkey = rng.gen();
                wr.imm_data = rng.gen();
                wr.invalidate_rkey = rng.gen();
                wr.compare_add = rng.gen();
                wr.swap = rng.gen();
                wr.compare_add_mask = rng.gen();
                wr.swap_mask = rng.gen();
                wr.flags.solicited = rng.gen_bool(0.5);
                // UD: the address handle; a Q_Key with bit 31 set stands for the QP's own
                let ud_dest = UdDest {
                    av: peer.av_to_me(),
                    remote_qpn: rng.gen::<u32>() & 0xFF_FFFF,
                    remote_qkey: if rng.gen_bool(0.3) { rng.gen::<u32>() | 0x8000_0000 } else { rng.gen::<u32>() & 0x7FFF_FFFF },
                };
                if ud {
                    wr.ud = Some(ud_dest);
                }
                dev.post_send(qpn, wr.clone()).unwrap();
                let frames = dev.poll(0);
                let d = ReqDesc {
                    qpn: bits(qpn as u64),
                    slot: bits(w as u64 & 0xFFFF),
                    wr_op: bits(wr_opcode_code(op) as u64),
                    solicited: wr.flags.solicited,
                    imm: bits(if op == WrOpcode::SendWithInv { wr.invalidate_rkey } else { wr.imm_data } as u64),
                    laddr: bits(buf + off),
                    len: bits(len),
                    raddr: bits(wr.remote_addr),
                    rkey: bits(wr.rkey as u64),
                    compare_add: bits(wr.compare_add),
                    swap: bits(wr.swap),
                    cmp_mask: bits(wr.compare_add_mask),
                    swap_mask: bits(wr.swap_mask),
                    psn: bits(psn as u64),
                    noack: bits(noack),
                    mtu_log2: bits(mtu.trailing_zeros() as u64),
                    dest_qpn: bits(if ud { ud_dest.remote_qpn } else { dest_qpn } as u64),
                    dst_mac: mac_bits(peer.config().mac.0),
                    src_mac: mac_bits(dev.config().mac.0),
                    v6: false,
                    src_ip: crate::wire::tx_build::ip_bits(dev.config().ip),
                    dst_ip: crate::wire::tx_build::v4_bits(0x0A00_0002),
                    sport: bits(sport as u64),
                    cont: false,
                    // an inline WQE (payload from the inline stream): same packets, gather commands flagged
                    inl: !op.is_read_or_atomic() && len <= 256 && rng.gen_bool(0.5),
                    uc,
                    ud,
                    qkey: bits(if ud_dest.remote_qkey & 0x8000_0000 != 0 { own_qkey } else { ud_dest.remote_qkey } as u64),
                };
                let (pkts, done) = rig.run(d, &mut rng);
                assert_eq!(pkts.len(), frames.len(), "{op:?} len {len} mtu {mtu}: packet count");
                for (i, (f, (h, g))) in frames.iter().zip(&pkts).enumerate() {
                    let Frame::Roce(rf) = parse_ethernet(f).unwrap() else { panic!("not RoCE") };
                    let (mut want, payload) = tx_header_of(&rf);
                    want.ip_id = bits(0);
                    assert_eq!(*h, want, "{op:?} len {len} mtu {mtu} packet {i}");
                    match g {
                        Some((a, n)) => {
                            assert_eq!(*n as usize, payload.len());
                            assert_eq!(dev.mem().read(*a, *n as usize).unwrap(), payload, "gather of packet {i}");
                        }
                        None => assert!(payload.is_empty()),
                    }
                    checked += 1;
                }
                let q = dev.qp(qpn).unwrap();
                assert_eq!(done.next_psn.to_u64(), q.req.psn as u64, "{op:?} len {len}: next PSN");
                assert_eq!(done.noack.to_u64(), q.req.noack_pkts as u64, "{op:?}: AckReq counter");
                assert_eq!(done.first_psn.to_u64(), psn as u64);
                assert!(!done.err);
                psn = done.next_psn.to_u64() as u32;
                noack = done.noack.to_u64();
                w += 1;
            }
        }
        checked
    }

    #[test]
    fn requester_matches_the_golden_model_packet_for_packet() {
        let n = campaign(1, 400, QpType::Rc);
        assert!(n > 500, "{n} packets checked");
    }

    /// UC: the same packets with the UC opcodes (0x20..0x2A), AckReq never set, as the VM's rxe sends them.
    #[test]
    fn uc_requests_match_the_golden_model_packet_for_packet() {
        let n = campaign(2, 150, QpType::Uc);
        assert!(n > 150, "{n} packets checked");
    }

    /// UD: one SEND_ONLY (0x64/0x65) per message with the DETH (the WR's Q_Key, or the QP's own when the WR's
    /// has bit 31 set; our QPN), AckReq never set; a message above the path MTU sends nothing and leaves the
    /// PSN where it was, as the golden model and rxe.
    #[test]
    fn ud_requests_match_the_golden_model_packet_for_packet() {
        let n = campaign(3, 150, QpType::Ud);
        assert!(n > 80, "{n} packets checked");
    }

    /// Go-back-N resumes a SEND/WRITE mid-message (`cont`): the first packet is a MIDDLE (or the LAST), no
    /// RETH, the payload from the resumed address, the immediate on the LAST; a resumed READ is a new READ
    /// request (RETH with the remaining VA and length) as rxe retries a partly answered READ.
    #[test]
    fn a_resumed_message_starts_with_middle_or_last() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut rig = Rig::new();
        let base = ReqDesc { laddr: bits(0x1_0400), len: bits(1976), psn: bits(0x77), mtu_log2: bits(10), imm: bits(0xA1B2_C3D4), raddr: bits(0x9000), rkey: bits(0x1234), cont: true, ..Default::default() };
        let cases: [(u8, Vec<u8>, Vec<u64>); 4] = [
            (WR_RDMA_WRITE, vec![RC_RDMA_WRITE_MIDDLE, RC_RDMA_WRITE_LAST], vec![0, 0]),
            (WR_RDMA_WRITE_WITH_IMM, vec![RC_RDMA_WRITE_MIDDLE, RC_RDMA_WRITE_LAST_WITH_IMMEDIATE], vec![0, 1]),
            (WR_SEND, vec![RC_SEND_MIDDLE, RC_SEND_LAST], vec![0, 0]),
            (WR_SEND_WITH_IMM, vec![RC_SEND_MIDDLE, RC_SEND_LAST_WITH_IMMEDIATE], vec![0, 1]),
        ];
        for (op, want, ext) in cases {
            let (pkts, done) = rig.run(ReqDesc { wr_op: bits(op as u64), ..base }, &mut rng);
            let ops: Vec<u8> = pkts.iter().map(|p| p.0.opcode.to_u64() as u8).collect();
            assert_eq!(ops, want, "op {op}");
            let ew: Vec<u64> = pkts.iter().map(|p| p.0.ext_words.to_u64()).collect();
            assert_eq!(ew, ext, "op {op}: no RETH, ImmDt on the last");
            let g: Vec<Option<(u64, u64)>> = pkts.iter().map(|p| p.1).collect();
            assert_eq!(g, vec![Some((0x1_0400, 1024)), Some((0x1_0800, 952))], "op {op}: payload from the resumed address");
            let psns: Vec<u64> = pkts.iter().map(|p| p.0.psn.to_u64()).collect();
            assert_eq!(psns, vec![0x77, 0x78]);
            assert!(pkts[1].0.ack_req && !pkts[0].0.ack_req);
            assert_eq!((done.first_psn.to_u64(), done.next_psn.to_u64()), (0x77, 0x79));
        }
        // the rest fits one packet: just the LAST
        let (pkts, _) = rig.run(ReqDesc { wr_op: bits(WR_SEND as u64), len: bits(500), ..base }, &mut rng);
        assert_eq!(pkts.iter().map(|p| p.0.opcode.to_u64() as u8).collect::<Vec<_>>(), vec![RC_SEND_LAST]);
        // a resumed READ is a new READ request for the rest (not `cont`: the WQE Check clears it for READs)
        let (pkts, done) = rig.run(ReqDesc { wr_op: bits(WR_RDMA_READ as u64), cont: false, ..base }, &mut rng);
        assert_eq!(pkts.len(), 1);
        assert_eq!(pkts[0].0.opcode.to_u64() as u8, RC_RDMA_READ_REQUEST);
        assert_eq!(done.next_psn.to_u64(), 0x77 + 2, "one PSN per response packet of the rest");
    }

    #[test]
    fn an_unimplemented_opcode_sends_nothing_and_completes_with_an_error() {
        let mut rng = SmallRng::seed_from_u64(2);
        let mut rig = Rig::new();
        for op in [7, 77, 0xFF] {
            let d = ReqDesc { wr_op: bits(op as u64), len: bits(100), psn: bits(5), mtu_log2: bits(10), ..Default::default() };
            let (pkts, done) = rig.run(d, &mut rng);
            assert!(pkts.is_empty());
            assert!(done.err);
            assert_eq!(done.next_psn.to_u64(), 5, "the PSN is not consumed");
        }
        // and the requester still works afterwards
        let d = ReqDesc { wr_op: bits(WR_SEND as u64), len: bits(3000), psn: bits(0xFF_FFFF), mtu_log2: bits(10), ..Default::default() };
        let (pkts, done) = rig.run(d, &mut rng);
        let ops: Vec<u64> = pkts.iter().map(|p| p.0.opcode.to_u64()).collect();
        assert_eq!(ops, vec![RC_SEND_FIRST as u64, RC_SEND_MIDDLE as u64, RC_SEND_LAST as u64]);
        let psns: Vec<u64> = pkts.iter().map(|p| p.0.psn.to_u64()).collect();
        assert_eq!(psns, vec![0xFF_FFFF, 0, 1], "PSNs wrap at 2^24");
        assert_eq!(done.next_psn.to_u64(), 2);
    }
}
