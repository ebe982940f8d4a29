//! ICMP echo responder: answers IPv4 pings to our address from the RX stream, beside the ARP responder, by the
//! rules of the golden model (`testbench::wire::frame::icmp_echo_reply`), byte for byte.
//!
//! - Watches the RX AXI4-Stream (`s_axis`) and never back-pressures it. A frame's first beat decides whether
//!   it is ICMP to us (untagged IPv4, protocol 1, destination `my_ip`) and whether it may be an echo request
//!   we answer (header 0x45, not a fragment, type 8, IP total length 28..=9,000, 42 bytes kept); such a frame
//!   is stored whole (up to [`ICMP_MAX_BEATS`] beats) in a 512-beat block-RAM FIFO, if there is room for the
//!   longest, else dropped and counted as `overflow`.
//! - **Header pipeline** (from the first beat, seven stages): three [`Csum10`]s check the request's IPv4
//!   header checksum, form the reply's header checksum afresh (TOS 0, no flags, TTL 64, the addresses
//!   swapped) and update the ICMP checksum for type 8 → 0 (RFC 1624; the ICMP checksum itself is not
//!   verified, as the golden rules say); 14 + total length is split into 8-bit adds.
//! - **Verdict** at the frame's end, pairing the header record with the frame's end record (beats, last
//!   `tkeep`, the MAC's error flag `s_err`): answered when it is an echo request, the MAC did not flag it, the
//!   header checksum is right and the frame holds all of 14 + total length bytes. Counted: `replies`,
//!   `ignored` (ICMP to us not answered: other types, options, fragments, bad checksum, cut short, flagged,
//!   too long), `overflow`.
//! - **Reply**: the stored beats go out on `m_axis` with beat 0's bytes 0..38 replaced by the reply header (a
//!   [`ByteMap`] from [`IcmpReply`]), the last beat cut at 14 + total length (zeros up to 60 bytes for a short
//!   reply) and the beats past it (Ethernet padding, trailers) discarded. One reply beat per cycle, one idle
//!   cycle between replies.
//!
//! `my_mac` and `my_ip` are numbers whose most significant byte is the first on the wire (as ARP's).

use crate::common::axis::{AxisSink, AxisSource, KeepMask};
use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::consts::{k, keep_thermo};
use crate::common::counter::EventCounter;
use crate::common::fifo::{BramFifo, Fifo};
use crate::common::lut::Lut8;
use crate::wire::csum::{Csum10, CSUM10_LATENCY};
use rust_hdl::prelude::*;
use testbench::wire::frame::{
    ETHERTYPE_IPV4, ETH_HEADER_LEN, ETH_MIN_FRAME_LEN, ICMP_ECHO_MAX_IP_LEN, ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST,
    ICMP_REPLY_TTL, IPV4_HEADER_LEN, IP_PROTO_ICMP,
};

/// Beats of the longest frame answered (14 + 9,000 bytes).
pub const ICMP_MAX_BEATS: usize = (ETH_HEADER_LEN + ICMP_ECHO_MAX_IP_LEN).div_ceil(64);
/// Bits of [`IcmpReq`].
const REQ_BITS: usize = <IcmpReq as Synth>::BITS;
/// Bits of [`IcmpReply`].
const REPLY_BITS: usize = <IcmpReply as Synth>::BITS;

/// The request fields, as numbers (a field's first wire byte is its most significant).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct IcmpReq {
    pub src_mac: Bits<48>,
    pub ethertype: Bits<16>,
    pub vihl: Bits<8>,
    pub total: Bits<16>,
    pub id: Bits<16>,
    pub frag: Bits<16>,
    pub proto: Bits<8>,
    pub src_ip: Bits<32>,
    pub dst_ip: Bits<32>,
    pub itype: Bits<8>,
    pub code: Bits<8>,
    pub icmp_ck: Bits<16>,
}

impl From<Bits<REQ_BITS>> for IcmpReq {
    /// Unpack (the inverse of the derived packing; the byte map produces the packed form).
    fn from(b: Bits<REQ_BITS>) -> Self {
        let z = IcmpReq::default();
        IcmpReq {
            src_mac: b.get_bits::<48>(z.get_my_offset_src_mac()),
            ethertype: b.get_bits::<16>(z.get_my_offset_ethertype()),
            vihl: b.get_bits::<8>(z.get_my_offset_vihl()),
            total: b.get_bits::<16>(z.get_my_offset_total()),
            id: b.get_bits::<16>(z.get_my_offset_id()),
            frag: b.get_bits::<16>(z.get_my_offset_frag()),
            proto: b.get_bits::<8>(z.get_my_offset_proto()),
            src_ip: b.get_bits::<32>(z.get_my_offset_src_ip()),
            dst_ip: b.get_bits::<32>(z.get_my_offset_dst_ip()),
            itype: b.get_bits::<8>(z.get_my_offset_itype()),
            code: b.get_bits::<8>(z.get_my_offset_code()),
            icmp_ck: b.get_bits::<16>(z.get_my_offset_icmp_ck()),
        }
    }
}

/// What the reply header is formed from.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct IcmpReply {
    pub dst_mac: Bits<48>,
    pub src_mac: Bits<48>,
    pub total: Bits<16>,
    pub id: Bits<16>,
    pub ip_ck: Bits<16>,
    pub src_ip: Bits<32>,
    pub dst_ip: Bits<32>,
    pub code: Bits<8>,
    pub icmp_ck: Bits<16>,
}

/// A frame's header record, from its first beat to the verdict.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct IcmpRec {
    /// the frame is ICMP to us and tracked (a record is made)
    pub valid: Bit,
    /// it may be an echo request we answer (every first-beat rule holds)
    pub echo: Bit,
    /// its beats are being stored
    pub taken: Bit,
    pub src_mac: Bits<48>,
    pub src_ip: Bits<32>,
    pub total: Bits<16>,
    pub id: Bits<16>,
    pub code: Bits<8>,
    /// 13 + total = e_hi * 256 + e_lo (e_lo's bit 8 is the carry e_hi has taken)
    pub e_lo: Bits<9>,
    pub e_hi: Bits<8>,
    pub ip_ok: Bit,
    pub ip_ck: Bits<16>,
    pub icmp_ck: Bits<16>,
}

/// A frame's end record.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct IcmpEnd {
    /// beats - 1 (saturating)
    pub nb1: Bits<8>,
    pub keep: Bits<64>,
    pub err: Bit,
    /// beats stored
    pub pushed: Bits<8>,
}

/// A verdict for the reader.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct IcmpOut {
    pub ok: Bit,
    /// reply beats - 1
    pub eb: Bits<8>,
    /// stored beats to discard after the reply (all of them when not answered)
    pub drop: Bits<8>,
    /// `tkeep` of the reply's last beat, and the bytes of it that are the reply's (the rest zeroed)
    pub keep: Bits<64>,
    pub used: Bits<64>,
    pub rep: IcmpReply,
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
pub enum IcmpState {
    Idle,
    Send,
    Drop,
}

/// The byte map from a beat to [`IcmpReq`].
fn req_map() -> Vec<ByteSrc> {
    let r = IcmpReq::default();
    let mut m = vec![ByteSrc::Const(0); REQ_BITS / 8];
    let mut field = |off_bits: usize, at: usize, n: usize| {
        for kb in 0..n {
            m[off_bits / 8 + kb] = ByteSrc::In(8 * (at + n - 1 - kb));
        }
    };
    let ip = ETH_HEADER_LEN;
    let icmp = ip + IPV4_HEADER_LEN;
    field(r.get_my_offset_src_mac(), 6, 6);
    field(r.get_my_offset_ethertype(), 12, 2);
    field(r.get_my_offset_vihl(), ip, 1);
    field(r.get_my_offset_total(), ip + 2, 2);
    field(r.get_my_offset_id(), ip + 4, 2);
    field(r.get_my_offset_frag(), ip + 6, 2);
    field(r.get_my_offset_proto(), ip + 9, 1);
    field(r.get_my_offset_src_ip(), ip + 12, 4);
    field(r.get_my_offset_dst_ip(), ip + 16, 4);
    field(r.get_my_offset_itype(), icmp, 1);
    field(r.get_my_offset_code(), icmp + 1, 1);
    field(r.get_my_offset_icmp_ck(), icmp + 2, 2);
    m
}

/// The byte map from [`IcmpReply`] to beat 0 of the reply: bytes 0..38 (the rest 0, filled from the request).
fn reply_map() -> Vec<ByteSrc> {
    let r = IcmpReply::default();
    let mut m = vec![ByteSrc::Const(0); 64];
    let mut field = |off_bits: usize, at: usize, n: usize| {
        for kb in 0..n {
            m[at + n - 1 - kb] = ByteSrc::In(off_bits + 8 * kb);
        }
    };
    let ip = ETH_HEADER_LEN;
    let icmp = ip + IPV4_HEADER_LEN;
    field(r.get_my_offset_dst_mac(), 0, 6);
    field(r.get_my_offset_src_mac(), 6, 6);
    field(r.get_my_offset_total(), ip + 2, 2);
    field(r.get_my_offset_id(), ip + 4, 2);
    field(r.get_my_offset_ip_ck(), ip + 10, 2);
    field(r.get_my_offset_src_ip(), ip + 12, 4);
    field(r.get_my_offset_dst_ip(), ip + 16, 4);
    field(r.get_my_offset_code(), icmp + 1, 1);
    field(r.get_my_offset_icmp_ck(), icmp + 2, 2);
    let [e0, e1] = ETHERTYPE_IPV4.to_be_bytes();
    for (at, v) in [(12, e0), (13, e1), (ip, 0x45), (ip + 1, 0), (ip + 6, 0), (ip + 7, 0), (ip + 8, ICMP_REPLY_TTL), (ip + 9, IP_PROTO_ICMP), (icmp, ICMP_ECHO_REPLY)] {
        m[at] = ByteSrc::Const(v);
    }
    m
}

/// Reply header bytes of beat 0 (0..38).
const REPLY_HDR_BYTES: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN + 4;

/// `used[x]` for x = (13 + total) mod 64: the bytes 0..=x of the last beat.
fn used_table() -> Vec<u64> {
    (0..64u32).map(|x| if x == 63 { u64::MAX } else { (1u64 << (x + 1)) - 1 }).collect()
}

/// The ICMP echo responder (see the module documentation).
#[derive(LogicBlock)]
pub struct IcmpEcho {
    pub clock: Signal<In, Clock>,
    pub s_axis: AxisSink,
    /// The MAC's error flag with a frame's last beat.
    pub s_err: Signal<In, Bit>,
    pub my_mac: Signal<In, Bits<48>>,
    pub my_ip: Signal<In, Bits<32>>,
    pub m_axis: AxisSource,
    pub replies: Signal<Out, Bits<32>>,
    pub ignored: Signal<Out, Bits<32>>,
    pub overflow: Signal<Out, Bits<32>>,

    in_frame: DFF<Bit>,
    // stage R: the input registered
    r_v: DFF<Bit>,
    r_first: DFF<Bit>,
    r_last: DFF<Bit>,
    r_err: DFF<Bit>,
    r_data: DFF<Bits<512>>,
    r_keep: DFF<Bits<64>>,
    parse: ByteMap<512, REQ_BITS>,
    req: Signal<Local, IcmpReq>,
    // stage M: the first-beat rules registered, the beat one stage on
    m_us: DFF<Bit>,
    m_vihl: DFF<Bit>,
    m_frag: DFF<Bit>,
    m_type: DFF<Bit>,
    m_keep: DFF<Bit>,
    m_tmin: DFF<Bit>,
    m_tmax: DFF<Bit>,
    m_v: DFF<Bit>,
    m_first: DFF<Bit>,
    m_last: DFF<Bit>,
    m_err: DFF<Bit>,
    m_data: DFF<Bits<512>>,
    m_keepv: DFF<Bits<64>>,
    room: DFF<Bit>,
    echo: Signal<Local, Bit>,
    tk: Signal<Local, Bit>,
    tr: Signal<Local, Bit>,
    push: Signal<Local, Bit>,
    taking: DFF<Bit>,
    tracking: DFF<Bit>,
    /// beats of the frame so far (saturating) and beats stored
    nb: DFF<Bits<8>>,
    pc: DFF<Bits<8>>,
    nb1: Signal<Local, Bits<8>>,
    pc0: Signal<Local, Bits<8>>,
    pc1: Signal<Local, Bits<8>>,
    // header pipeline
    rec: [DFF<IcmpRec>; 7],
    cs_ver: Csum10,
    cs_rep: Csum10,
    cs_icmp: Csum10,
    hdrq: Fifo<IcmpRec, 5, 6>,
    endq: Fifo<IcmpEnd, 5, 6>,
    beats: BramFifo<Bits<512>, 9, 10>,
    // verdict, two stages
    v1_v: DFF<Bit>,
    v1_h: DFF<IcmpRec>,
    v1_e: DFF<IcmpEnd>,
    v1_eb: Signal<Local, Bits<8>>,
    used: Lut8<64>,
    v2_v: DFF<Bit>,
    v2_h: DFF<IcmpRec>,
    v2_e: DFF<IcmpEnd>,
    v2_eb: DFF<Bits<8>>,
    v2_gt: DFF<Bit>,
    v2_eq: DFF<Bit>,
    v2_kb: DFF<Bit>,
    v2_used: DFF<Bits<64>>,
    ok: Signal<Local, Bit>,
    // fields through plain signals before slicing (Verilog has no slice of a slice)
    l_total: Signal<Local, Bits<16>>,
    l_sip: Signal<Local, Bits<32>>,
    l_r1total: Signal<Local, Bits<16>>,
    l_r1elo: Signal<Local, Bits<9>>,
    l_ehi: Signal<Local, Bits<8>>,
    l_elo: Signal<Local, Bits<9>>,
    l_rep: Signal<Local, IcmpReply>,
    outq: Fifo<IcmpOut, 4, 5>,
    // reader
    state: DFF<IcmpState>,
    cur: DFF<IcmpOut>,
    left: DFF<Bits<8>>,
    at0: DFF<Bit>,
    form: ByteMap<REPLY_BITS, 512>,
    umask: KeepMask,
    l_data: Signal<Local, Bits<512>>,
    cnt_replies: EventCounter,
    cnt_ignored: EventCounter,
    cnt_overflow: EventCounter,
    // constants from the golden model
    k_et: Constant<Bits<16>>,
    k_vihl: Constant<Bits<8>>,
    k_proto: Constant<Bits<8>>,
    k_type: Constant<Bits<8>>,
    k_frag_mask: Constant<Bits<16>>,
    k_tmin: Constant<Bits<16>>,
    k_tmax: Constant<Bits<16>>,
    k_room: Constant<Bits<10>>,
    k_qroom: Constant<Bits<6>>,
    k_oroom: Constant<Bits<5>>,
    k_maxb: Constant<Bits<8>>,
    k_w4500: Constant<Bits<16>>,
    k_wttl: Constant<Bits<16>>,
    k_wtype: Constant<Bits<16>>,
    k0_16: Constant<Bits<16>>,
    k_ffff: Constant<Bits<16>>,
    k13: Constant<Bits<9>>,
    k0_8: Constant<Bits<8>>,
    k1_8: Constant<Bits<8>>,
    k_full: Constant<Bits<64>>,
    k_ff8: Constant<Bits<8>>,
    k_min_keep: Constant<Bits<64>>,
    k_hdr_mask: Constant<Bits<512>>,
    k_rec0: Constant<IcmpRec>,
}

impl Default for IcmpEcho {
    fn default() -> Self {
        assert_eq!(CSUM10_LATENCY, 7, "the header pipeline (rec) is as long as Csum10");
        assert!(ICMP_MAX_BEATS < 256);
        let mut hdr = Bits::<512>::default();
        for j in REPLY_HDR_BYTES..64 {
            hdr.set_bits::<8>(8 * j, bits(0xFF));
        }
        let rec0 = IcmpRec::default();
        Self {
            clock: Default::default(),
            s_axis: Default::default(),
            s_err: Default::default(),
            my_mac: Default::default(),
            my_ip: Default::default(),
            m_axis: Default::default(),
            replies: Default::default(),
            ignored: Default::default(),
            overflow: Default::default(),
            in_frame: Default::default(),
            r_v: Default::default(),
            r_first: Default::default(),
            r_last: Default::default(),
            r_err: Default::default(),
            r_data: Default::default(),
            r_keep: Default::default(),
            parse: ByteMap::new(req_map()),
            req: Default::default(),
            m_us: Default::default(),
            m_vihl: Default::default(),
            m_frag: Default::default(),
            m_type: Default::default(),
            m_keep: Default::default(),
            m_tmin: Default::default(),
            m_tmax: Default::default(),
            m_v: Default::default(),
            m_first: Default::default(),
            m_last: Default::default(),
            m_err: Default::default(),
            m_data: Default::default(),
            m_keepv: Default::default(),
            room: Default::default(),
            echo: Default::default(),
            tk: Default::default(),
            tr: Default::default(),
            push: Default::default(),
            taking: Default::default(),
            tracking: Default::default(),
            nb: Default::default(),
            pc: Default::default(),
            nb1: Default::default(),
            pc0: Default::default(),
            pc1: Default::default(),
            rec: Default::default(),
            cs_ver: Default::default(),
            cs_rep: Default::default(),
            cs_icmp: Default::default(),
            hdrq: Default::default(),
            endq: Default::default(),
            beats: Default::default(),
            v1_v: Default::default(),
            v1_h: Default::default(),
            v1_e: Default::default(),
            v1_eb: Default::default(),
            used: Lut8::new(used_table()),
            v2_v: Default::default(),
            v2_h: Default::default(),
            v2_e: Default::default(),
            v2_eb: Default::default(),
            v2_gt: Default::default(),
            v2_eq: Default::default(),
            v2_kb: Default::default(),
            v2_used: Default::default(),
            ok: Default::default(),
            l_total: Default::default(),
            l_sip: Default::default(),
            l_r1total: Default::default(),
            l_r1elo: Default::default(),
            l_ehi: Default::default(),
            l_elo: Default::default(),
            l_rep: Default::default(),
            outq: Default::default(),
            state: Default::default(),
            cur: Default::default(),
            left: Default::default(),
            at0: Default::default(),
            form: ByteMap::new(reply_map()),
            umask: Default::default(),
            l_data: Default::default(),
            cnt_replies: Default::default(),
            cnt_ignored: Default::default(),
            cnt_overflow: Default::default(),
            k_et: k(u64::from(ETHERTYPE_IPV4)),
            k_vihl: k(0x45),
            k_proto: k(u64::from(IP_PROTO_ICMP)),
            k_type: k(u64::from(ICMP_ECHO_REQUEST)),
            k_frag_mask: k(0x3FFF),
            k_tmin: k((IPV4_HEADER_LEN + 8) as u64),
            k_tmax: k(ICMP_ECHO_MAX_IP_LEN as u64),
            // room for the longest frame, with a margin for the pushes the registered count has not seen
            k_room: k((512 - ICMP_MAX_BEATS - 4) as u64),
            // records: the header pipeline holds up to 7 beyond what the queues count
            k_qroom: k(16),
            k_oroom: k(12),
            k_maxb: k(ICMP_MAX_BEATS as u64),
            k_w4500: k(0x4500),
            k_wttl: k((u64::from(ICMP_REPLY_TTL) << 8) | u64::from(IP_PROTO_ICMP)),
            // ~0x0800: the type word's change, 8 -> 0
            k_wtype: k(u64::from(!(u16::from(ICMP_ECHO_REQUEST) << 8))),
            k0_16: k(0),
            k_ffff: k(0xFFFF),
            k13: k((ETH_HEADER_LEN - 1) as u64),
            k0_8: k(0),
            k1_8: k(1),
            k_full: k(u64::MAX),
            k_ff8: k(0xFF),
            k_min_keep: keep_thermo(ETH_MIN_FRAME_LEN),
            k_hdr_mask: Constant::new(hdr),
            k_rec0: Constant::new(rec0),
        }
    }
}

impl Logic for IcmpEcho {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, in_frame, r_v, r_first, r_last, r_err, r_data, r_keep, m_us, m_vihl, m_frag, m_type, m_keep,
            m_tmin, m_tmax, m_v, m_first, m_last, m_err, m_data, m_keepv, room, taking, tracking, nb, pc, v1_v, v1_h,
            v1_e, v2_v, v2_h, v2_e, v2_eb, v2_gt, v2_eq, v2_kb, v2_used, state, cur, left, at0
        );
        clock!(self, clock, cs_ver, cs_rep, cs_icmp, hdrq, endq, beats, outq, cnt_replies, cnt_ignored, cnt_overflow);
        for i in 0..7 {
            self.rec[i].clock.next = self.clock.val();
        }
        self.s_axis.tready.next = true;

        // ---- stage R: the input registered ----
        if self.s_axis.tvalid.val() {
            self.in_frame.d.next = !self.s_axis.tlast.val();
        }
        self.r_v.d.next = self.s_axis.tvalid.val();
        self.r_first.d.next = !self.in_frame.q.val();
        self.r_last.d.next = self.s_axis.tlast.val();
        self.r_err.d.next = self.s_axis.tlast.val() & self.s_err.val();
        self.r_data.d.next = self.s_axis.tdata.val();
        self.r_keep.d.next = self.s_axis.tkeep.val();

        // the first-beat rules, compared from registers
        self.parse.x.next = self.r_data.q.val();
        self.req.next = self.parse.y.val().into();
        self.m_us.d.next = (self.req.val().ethertype == self.k_et.val())
            & (self.req.val().proto == self.k_proto.val())
            & (self.req.val().dst_ip == self.my_ip.val());
        self.m_vihl.d.next = self.req.val().vihl == self.k_vihl.val();
        self.m_frag.d.next = (self.req.val().frag & self.k_frag_mask.val()) == self.k0_16.val();
        self.m_type.d.next = self.req.val().itype == self.k_type.val();
        self.m_keep.d.next = self.r_keep.q.val().get_bit(41);
        self.m_tmin.d.next = self.req.val().total >= self.k_tmin.val();
        self.m_tmax.d.next = self.req.val().total <= self.k_tmax.val();
        self.m_v.d.next = self.r_v.q.val();
        self.m_first.d.next = self.r_first.q.val();
        self.m_last.d.next = self.r_last.q.val();
        self.m_err.d.next = self.r_err.q.val();
        self.m_data.d.next = self.r_data.q.val();
        self.m_keepv.d.next = self.r_keep.q.val();
        // the header pipeline's first record and its checksums, from the same registers
        self.rec[0].d.next = self.k_rec0.val();
        self.rec[0].d.next.src_mac = self.req.val().src_mac;
        self.rec[0].d.next.src_ip = self.req.val().src_ip;
        self.rec[0].d.next.total = self.req.val().total;
        self.rec[0].d.next.id = self.req.val().id;
        self.rec[0].d.next.code = self.req.val().code;
        self.l_total.next = self.req.val().total;
        self.l_sip.next = self.req.val().src_ip;
        self.rec[0].d.next.e_lo = bit_cast::<9, 8>(self.l_total.val().get_bits::<8>(0)) + self.k13.val();
        // the request's IPv4 header, ten words from byte 14
        self.cs_ver.w[0].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(112)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(120));
        self.cs_ver.w[1].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(128)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(136));
        self.cs_ver.w[2].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(144)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(152));
        self.cs_ver.w[3].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(160)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(168));
        self.cs_ver.w[4].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(176)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(184));
        self.cs_ver.w[5].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(192)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(200));
        self.cs_ver.w[6].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(208)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(216));
        self.cs_ver.w[7].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(224)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(232));
        self.cs_ver.w[8].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(240)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(248));
        self.cs_ver.w[9].next = (bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(256)) << 8) | bit_cast::<16, 8>(self.r_data.q.val().get_bits::<8>(264));
        self.cs_rep.w[0].next = self.k_w4500.val();
        self.cs_rep.w[1].next = self.req.val().total;
        self.cs_rep.w[2].next = self.req.val().id;
        self.cs_rep.w[3].next = self.k0_16.val();
        self.cs_rep.w[4].next = self.k_wttl.val();
        self.cs_rep.w[5].next = self.k0_16.val();
        self.cs_rep.w[6].next = self.my_ip.val().get_bits::<16>(16);
        self.cs_rep.w[7].next = self.my_ip.val().get_bits::<16>(0);
        self.cs_rep.w[8].next = self.l_sip.val().get_bits::<16>(16);
        self.cs_rep.w[9].next = self.l_sip.val().get_bits::<16>(0);
        self.cs_icmp.w[0].next = !self.req.val().icmp_ck;
        self.cs_icmp.w[1].next = self.k_wtype.val();
        for i in 2..10 {
            self.cs_icmp.w[i].next = self.k0_16.val();
        }

        // ---- stage M: take or not (a frame's first beat decides), store, count beats ----
        self.room.d.next = (self.beats.count.val() < self.k_room.val())
            & (self.hdrq.count.val() < self.k_qroom.val())
            & (self.endq.count.val() < self.k_qroom.val());
        self.echo.next = self.m_vihl.q.val() & self.m_frag.q.val() & self.m_type.q.val() & self.m_keep.q.val()
            & self.m_tmin.q.val() & self.m_tmax.q.val();
        self.tk.next = self.taking.q.val();
        self.tr.next = self.tracking.q.val();
        if self.m_first.q.val() {
            self.tk.next = self.m_us.q.val() & self.echo.val() & self.room.q.val();
            self.tr.next = self.m_us.q.val() & self.room.q.val();
        }
        self.nb1.next = self.nb.q.val();
        self.pc0.next = self.pc.q.val();
        if self.m_first.q.val() {
            self.nb1.next = self.k0_8.val();
            self.pc0.next = self.k0_8.val();
        }
        self.push.next = self.m_v.q.val() & self.tk.val() & (self.pc0.val() < self.k_maxb.val());
        self.pc1.next = self.pc0.val();
        if self.push.val() {
            self.pc1.next = self.pc0.val() + self.k1_8.val();
        }
        self.beats.din.next = self.m_data.q.val();
        self.beats.push.next = self.push.val();
        if self.m_v.q.val() {
            self.taking.d.next = self.tk.val();
            self.tracking.d.next = self.tr.val();
            self.nb.d.next = self.nb1.val();
            if self.nb1.val() != self.k_ff8.val() {
                self.nb.d.next = self.nb1.val() + self.k1_8.val();
            }
            self.pc.d.next = self.pc1.val();
        }
        self.cnt_overflow.inc.next = self.m_v.q.val() & self.m_first.q.val() & self.m_us.q.val() & !self.room.q.val();
        // the end record of a tracked frame
        self.endq.din.next.nb1 = self.nb1.val();
        self.endq.din.next.keep = self.m_keepv.q.val();
        self.endq.din.next.err = self.m_err.q.val();
        self.endq.din.next.pushed = self.pc1.val();
        self.endq.push.next = self.m_v.q.val() & self.m_last.q.val() & self.tr.val();

        // ---- header pipeline: rec[1] takes the decision, the checksums are out at rec[6] ----
        self.rec[1].d.next = self.rec[0].q.val();
        self.rec[1].d.next.valid = self.m_v.q.val() & self.m_first.q.val() & self.tr.val();
        self.rec[1].d.next.echo = self.echo.val();
        self.rec[1].d.next.taken = self.tk.val();
        self.rec[2].d.next = self.rec[1].q.val();
        self.l_r1total.next = self.rec[1].q.val().total;
        self.l_r1elo.next = self.rec[1].q.val().e_lo;
        self.rec[2].d.next.e_hi = self.l_r1total.val().get_bits::<8>(8) + bit_cast::<8, 1>(self.l_r1elo.val().get_bits::<1>(8));
        self.rec[3].d.next = self.rec[2].q.val();
        self.rec[4].d.next = self.rec[3].q.val();
        self.rec[5].d.next = self.rec[4].q.val();
        self.rec[6].d.next = self.rec[5].q.val();
        self.hdrq.din.next = self.rec[6].q.val();
        self.hdrq.din.next.ip_ok = self.cs_ver.sum.val() == self.k_ffff.val();
        self.hdrq.din.next.ip_ck = !self.cs_rep.sum.val();
        self.hdrq.din.next.icmp_ck = !self.cs_icmp.sum.val();
        self.hdrq.push.next = self.rec[6].q.val().valid;

        // ---- verdict: V1 pairs the records, V2 decides ----
        self.v1_v.d.next = false;
        self.hdrq.pop.next = false;
        self.endq.pop.next = false;
        if !self.hdrq.empty.val() & !self.endq.empty.val() & (self.outq.count.val() < self.k_oroom.val()) {
            self.hdrq.pop.next = true;
            self.endq.pop.next = true;
            self.v1_v.d.next = true;
            self.v1_h.d.next = self.hdrq.dout.val();
            self.v1_e.d.next = self.endq.dout.val();
        }
        // reply beats - 1 = (13 + total) / 64; the last beat's bytes 0..=(13 + total) % 64
        self.l_ehi.next = self.v1_h.q.val().e_hi;
        self.l_elo.next = self.v1_h.q.val().e_lo;
        self.v1_eb.next = (bit_cast::<8, 6>(self.l_ehi.val().get_bits::<6>(0)) << 2) | bit_cast::<8, 2>(self.l_elo.val().get_bits::<2>(6));
        self.used.x.next = bit_cast::<8, 6>(self.l_elo.val().get_bits::<6>(0));
        self.v2_v.d.next = self.v1_v.q.val();
        self.v2_h.d.next = self.v1_h.q.val();
        self.v2_e.d.next = self.v1_e.q.val();
        self.v2_eb.d.next = self.v1_eb.val();
        self.v2_gt.d.next = self.v1_e.q.val().nb1 > self.v1_eb.val();
        self.v2_eq.d.next = self.v1_e.q.val().nb1 == self.v1_eb.val();
        self.v2_kb.d.next = (self.v1_e.q.val().keep & self.used.y.val()) == self.used.y.val();
        self.v2_used.d.next = self.used.y.val();
        self.ok.next = self.v2_h.q.val().echo
            & self.v2_h.q.val().taken
            & self.v2_h.q.val().ip_ok
            & !self.v2_e.q.val().err
            & (self.v2_gt.q.val() | (self.v2_eq.q.val() & self.v2_kb.q.val()));
        self.outq.din.next.ok = self.ok.val();
        self.outq.din.next.eb = self.v2_eb.q.val();
        self.outq.din.next.drop = self.v2_e.q.val().pushed;
        if self.ok.val() {
            self.outq.din.next.drop = self.v2_e.q.val().pushed - self.v2_eb.q.val() - self.k1_8.val();
        }
        self.outq.din.next.used = self.v2_used.q.val();
        self.outq.din.next.keep = self.v2_used.q.val();
        if self.v2_eb.q.val() == self.k0_8.val() {
            // a short reply is padded to 60 bytes
            self.outq.din.next.keep = self.v2_used.q.val() | self.k_min_keep.val();
        }
        self.l_rep.next.dst_mac = self.v2_h.q.val().src_mac;
        self.l_rep.next.src_mac = self.my_mac.val();
        self.l_rep.next.total = self.v2_h.q.val().total;
        self.l_rep.next.id = self.v2_h.q.val().id;
        self.l_rep.next.ip_ck = self.v2_h.q.val().ip_ck;
        self.l_rep.next.src_ip = self.my_ip.val();
        self.l_rep.next.dst_ip = self.v2_h.q.val().src_ip;
        self.l_rep.next.code = self.v2_h.q.val().code;
        self.l_rep.next.icmp_ck = self.v2_h.q.val().icmp_ck;
        self.outq.din.next.rep = self.l_rep.val();
        self.outq.push.next = self.v2_v.q.val();
        self.cnt_replies.inc.next = self.v2_v.q.val() & self.ok.val();
        self.cnt_ignored.inc.next = self.v2_v.q.val() & !self.ok.val();

        // ---- reader: the reply out (beat 0 with the new header, the last cut), then the rest discarded ----
        self.form.x.next = self.cur.q.val().rep.into();
        self.umask.keep.next = self.cur.q.val().used;
        self.l_data.next = self.beats.dout.val();
        if self.at0.q.val() {
            self.l_data.next = (self.beats.dout.val() & self.k_hdr_mask.val()) | self.form.y.val();
        }
        self.m_axis.tdata.next = self.l_data.val();
        self.m_axis.tkeep.next = self.k_full.val();
        self.m_axis.tlast.next = false;
        self.m_axis.tvalid.next = false;
        self.beats.pop.next = false;
        self.outq.pop.next = false;
        match self.state.q.val() {
            IcmpState::Idle => {
                if !self.outq.empty.val() {
                    self.outq.pop.next = true;
                    self.cur.d.next = self.outq.dout.val();
                    self.at0.d.next = true;
                    if self.outq.dout.val().ok {
                        self.state.d.next = IcmpState::Send;
                        self.left.d.next = self.outq.dout.val().eb;
                    } else if self.outq.dout.val().drop != self.k0_8.val() {
                        self.state.d.next = IcmpState::Drop;
                        self.left.d.next = self.outq.dout.val().drop;
                    }
                }
            }
            IcmpState::Send => {
                self.m_axis.tvalid.next = !self.beats.empty.val();
                if self.left.q.val() == self.k0_8.val() {
                    self.m_axis.tlast.next = true;
                    self.m_axis.tkeep.next = self.cur.q.val().keep;
                    self.m_axis.tdata.next = self.l_data.val() & self.umask.mask.val();
                }
                if !self.beats.empty.val() & self.m_axis.tready.val() {
                    self.beats.pop.next = true;
                    self.at0.d.next = false;
                    self.left.d.next = self.left.q.val() - self.k1_8.val();
                    if self.left.q.val() == self.k0_8.val() {
                        self.state.d.next = IcmpState::Idle;
                        if self.cur.q.val().drop != self.k0_8.val() {
                            self.state.d.next = IcmpState::Drop;
                            self.left.d.next = self.cur.q.val().drop;
                        }
                    }
                }
            }
            _ => {
                if !self.beats.empty.val() {
                    self.beats.pop.next = true;
                    self.left.d.next = self.left.q.val() - self.k1_8.val();
                    if self.left.q.val() == self.k1_8.val() {
                        self.state.d.next = IcmpState::Idle;
                    }
                }
            }
        }
        self.replies.next = self.cnt_replies.value.val();
        self.ignored.next = self.cnt_ignored.value.val();
        self.overflow.next = self.cnt_overflow.value.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::beat_of;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::net::Ipv4Addr;
    use testbench::wire::frame::{icmp_echo_reply, icmp_echo_request, internet_checksum, MacAddr};

    const MY_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const MY_IP: [u8; 4] = [10, 0, 0, 2];

    fn fix_ip_ck(f: &mut [u8]) {
        f[24] = 0;
        f[25] = 0;
        let c = internet_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }

    /// One random frame: mostly echo requests for us (some padded, some with a trailer, some jumbo), and
    /// frames each breaking one rule, other traffic, runts.
    fn random_frame(rng: &mut SmallRng) -> Vec<u8> {
        let peer = MacAddr([0x52, 0x54, 0, rng.gen(), rng.gen(), rng.gen()]);
        let peer_ip = Ipv4Addr::from(rng.gen::<u32>() | 1);
        let n = match rng.gen_range(0..10) {
            0 => rng.gen_range(1400..=ICMP_ECHO_MAX_IP_LEN - 28),
            1..=3 => rng.gen_range(0..24),
            _ => rng.gen_range(0..1500),
        };
        let payload: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        let mut f = icmp_echo_request(peer, peer_ip, MacAddr(MY_MAC), Ipv4Addr::from(MY_IP), rng.gen(), rng.gen(), &payload);
        if rng.gen_ratio(1, 3) {
            let to = f.len().max(60) + [0, 0, 4, 70][rng.gen_range(0..4)];
            f.resize(to, 0);
            if rng.gen() {
                for b in f.iter_mut().skip(14 + 28 + n) {
                    *b = rng.gen();
                }
            }
        }
        match rng.gen_range(0..24) {
            0 => f[24] ^= 1 << rng.gen_range(0..8),           // header checksum
            1 => {
                f[14] = 0x46;                                   // options
                fix_ip_ck(&mut f);
            }
            2 => {
                f[20] |= 0x20;                                  // more fragments
                fix_ip_ck(&mut f);
            }
            3 => f[34] = 0,                                     // an echo reply to us
            4 => {
                f[33] ^= 0x10;                                  // another address
                fix_ip_ck(&mut f);
            }
            5 => {
                let cut = rng.gen_range(1..f.len().min(90));
                f.truncate(f.len() - cut);                      // cut short
            }
            6 => {
                f[16] = 0x23;                                   // total length 9,001 and more
                f[17] = rng.gen_range(0x29..=0xFF);
                fix_ip_ck(&mut f);
            }
            7 => f[36] ^= 0x04,                                 // ICMP checksum: answered all the same
            8 => f[23] = 17,                                    // UDP: not ICMP
            9 => (f[12], f[13]) = (0x08, 0x06),                 // not IPv4
            10 => f.truncate(rng.gen_range(1..42)),             // a runt
            _ => {}
        }
        f
    }

    /// ICMP to us (the counting rule), reading zeros past the end.
    fn to_us(f: &[u8]) -> bool {
        let b = |i: usize| f.get(i).copied().unwrap_or(0);
        (b(12), b(13), b(23)) == (8, 0, 1) && [b(30), b(31), b(32), b(33)] == MY_IP
    }

    struct Run {
        replies: Vec<Vec<u8>>,
        counters: [u64; 3],
    }

    /// Feed `frames` (with the MAC's error flag where `flagged`), gaps between beats when `gaps`, the reply
    /// port ready `ready` in 8 (and stalled for `stall` cycles at the start).
    fn run(frames: &[Vec<u8>], flagged: &[bool], seed: u64, gaps: bool, ready: u32, stall: u64) -> Run {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut u = IcmpEcho::default();
        u.connect_all();
        u.my_mac.next = bits(u64::from_be_bytes([0, 0, MY_MAC[0], MY_MAC[1], MY_MAC[2], MY_MAC[3], MY_MAC[4], MY_MAC[5]]));
        u.my_ip.next = bits(u64::from(u32::from_be_bytes(MY_IP)));
        let beats: Vec<(Vec<u8>, bool, bool)> = frames
            .iter()
            .zip(flagged)
            .flat_map(|(f, &e)| {
                let n = f.len().div_ceil(64);
                f.chunks(64).enumerate().map(move |(i, c)| (c.to_vec(), i + 1 == n, e)).collect::<Vec<_>>()
            })
            .collect();
        let (mut next, mut quiet, mut cycle) = (0, 0, 0u64);
        let mut out = Vec::new();
        let mut cur = Vec::new();
        loop {
            let valid = next < beats.len() && (!gaps || rng.gen_ratio(3, 4));
            if valid {
                let (d, k) = beat_of(&beats[next].0);
                u.s_axis.tdata.next = d;
                u.s_axis.tkeep.next = k;
                u.s_axis.tlast.next = beats[next].1;
                u.s_err.next = beats[next].2 && beats[next].1;
            } else {
                u.s_axis.tdata.next = bits(rng.gen());
                u.s_axis.tlast.next = rng.gen();
                u.s_err.next = rng.gen();
            }
            u.s_axis.tvalid.next = valid;
            let tready = cycle >= stall && rng.gen_ratio(ready, 8);
            u.m_axis.tready.next = tready;
            u.clock.next = false.into();
            assert!(simulate(&mut u, 100));
            assert!(u.s_axis.tready.val(), "never back-pressures");
            quiet += 1;
            if valid {
                next += 1;
                quiet = 0;
            }
            if u.m_axis.tvalid.val() && tready {
                let n = u.m_axis.tkeep.val().to_u64().trailing_ones() as usize;
                let d = u.m_axis.tdata.val();
                for j in 0..64 {
                    let b = d.get_bits::<8>(8 * j).to_u64() as u8;
                    if j < n {
                        cur.push(b);
                    } else {
                        assert_eq!(b, 0, "bytes past tkeep are zero");
                    }
                }
                if u.m_axis.tlast.val() {
                    out.push(std::mem::take(&mut cur));
                } else {
                    assert_eq!(n, 64, "only the last beat is partial");
                }
                quiet = 0;
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 100));
            cycle += 1;
            if next >= beats.len() && quiet > 300 && cycle > stall {
                break;
            }
        }
        assert!(cur.is_empty());
        Run { replies: out, counters: [u.replies.val().to_u64(), u.ignored.val().to_u64(), u.overflow.val().to_u64()] }
    }

    fn golden(frames: &[Vec<u8>], flagged: &[bool]) -> (Vec<Vec<u8>>, [u64; 2]) {
        let mut want = Vec::new();
        let mut n = [0u64; 2];
        for (f, &e) in frames.iter().zip(flagged) {
            match icmp_echo_reply(f, MacAddr(MY_MAC), Ipv4Addr::from(MY_IP)) {
                Some(r) if !e => {
                    want.push(r);
                    n[0] += 1;
                }
                _ if to_us(f) => n[1] += 1,
                _ => {}
            }
        }
        (want, n)
    }

    /// Random frames back to back and with gaps, some flagged by the MAC, the reply port ready 7 cycles in 8:
    /// every reply is the golden model's, byte for byte and in order; the counters are the golden counts.
    #[test]
    fn echo_replies_are_the_golden_models_byte_for_byte() {
        let mut rng = SmallRng::seed_from_u64(0x1C4);
        let frames: Vec<Vec<u8>> = (0..1000).map(|_| random_frame(&mut rng)).collect();
        let flagged: Vec<bool> = (0..frames.len()).map(|_| rng.gen_ratio(1, 25)).collect();
        let (want, n) = golden(&frames, &flagged);
        assert!(n[0] > 500 && n[1] > 150, "{n:?}");
        for (seed, gaps) in [(1, false), (2, true)] {
            let r = run(&frames, &flagged, seed, gaps, 7, 0);
            assert_eq!(r.replies.len(), want.len());
            for (i, (g, w)) in r.replies.iter().zip(&want).enumerate() {
                assert!(g == w, "reply {i}: got {} bytes {:02x?}\nwant {} bytes {:02x?}", g.len(), &g[..g.len().min(80)], w.len(), &w[..w.len().min(80)]);
            }
            assert_eq!(r.counters, [n[0], n[1], 0], "replies, ignored, overflow");
        }
    }

    /// The reply port stalled while pings keep coming: the store fills, the requests that find no room are
    /// counted as overflow, and what is answered is still right and in order.
    #[test]
    fn requests_that_find_no_room_are_counted() {
        let mut rng = SmallRng::seed_from_u64(0x1C5);
        let frames: Vec<Vec<u8>> = (0..400)
            .map(|_| {
                let p: Vec<u8> = (0..rng.gen_range(500..1400)).map(|_| rng.gen()).collect();
                icmp_echo_request(MacAddr([0x52, 0x54, 0, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 1), MacAddr(MY_MAC), Ipv4Addr::from(MY_IP), 7, rng.gen(), &p)
            })
            .collect();
        let flagged = vec![false; frames.len()];
        let (want, _) = golden(&frames, &flagged);
        let r = run(&frames, &flagged, 3, false, 8, 3000);
        assert!(r.counters[2] > 50, "{:?}", r.counters);
        assert_eq!(r.counters[0] + r.counters[2], 400, "{:?}", r.counters);
        assert_eq!(r.counters[1], 0);
        assert_eq!(r.replies.len() as u64, r.counters[0]);
        // the replies are a subsequence of the golden ones, in order
        let mut it = want.iter();
        for (i, g) in r.replies.iter().enumerate() {
            assert!(it.any(|w| w == g), "reply {i} is not one of the golden replies in order");
        }
    }
}
