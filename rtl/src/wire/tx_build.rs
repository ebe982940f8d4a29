//! TX Packet Build: a header descriptor and its payload stream in, a complete RoCEv2 frame out
//! (Ethernet, IPv4 or IPv6, UDP, BTH, extension headers, payload, pad, ICRC, padding to the 60-byte minimum).
//!
//! - Header descriptors ([`TxHeader`]) flow through a nine-stage pipeline that fills in the computed fields
//!   (PadCnt, UDP length, IP total length, the IPv4 header checksum summed as two byte columns and folded in
//!   small steps, the beat plan) while earlier frames are being sent; descriptors are accepted back to back.
//!   A 32-entry header queue (LUTRAM) in front of the pipeline takes descriptors even while the pipeline
//!   waits for a frame's payload: the TX request arbiter hands a header's gather command to the Gather Path
//!   when this block takes the header, so the queue is what lets up to 32 payload reads run ahead of the
//!   frame being formed (without it, two: 64-byte WRITEs 3.87 -> 8.66 M/s on 16 QPs).
//!   No add is wider than 14 bits, so every stage fits the 6-LUT budget.
//! - The frame former writes the header bytes (four [`ByteMap`]s, IPv4 and IPv6, untagged and with an 802.1Q
//!   tag, whose tables come from the golden wire model) and shifts the payload behind them: the header is
//!   54 + 4·hw bytes, hw = ext_words, plus 5 over IPv6 (its header is 20 bytes longer), plus 1 with a VLAN
//!   tag, so the payload sits at one of fourteen byte offsets; each output beat is the two-beat window
//!   {previous payload beat, current one} shifted by a constant chosen by `hw` (a 14:1 mux per bit, no barrel
//!   shifter). Extension headers of 8 to 11 words (MaskedCmpSwapETH,
//!   44 bytes) come without payload: the shift is then irrelevant, so those need no mux input of their own; a
//!   descriptor must not pair them with payload.
//! - Each formed beat is registered before the ICRC append, [`crate::wire::tx_icrc::TxIcrcAppend`] (the ICRC engine
//!   beside a beat FIFO), so the shift-and-merge logic and the engine's frame-type detection sit in different
//!   cycles.
//!
//! The IP header's constant bytes (IPv4: version/IHL, TOS, flags, TTL, protocol, and their part of the
//! checksum; IPv6: version, traffic class and flow label 0, next header, hop limit 64, as rxe sends them) come
//! from the golden model's header built with every variable field zero ([`header_map`], [`ipv4_const_sum`]).
//! The UDP checksum is 0, as rxe sends it over both: over IPv6 rxe's tunnel socket accepts a zero checksum
//! (`rxe_setup_udp_tunnel` leaves `use_udp6_rx_checksums` 0, so the socket gets `no_check6_rx`).

use crate::common::axis::{AxisSink, AxisSource, KeepMask};
use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::consts::{byte_mask, k, keep_thermo};
use crate::common::fifo::Fifo;
use crate::wire::tx_icrc::TxIcrcAppend;
use rust_hdl::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use testbench::wire::frame::{
    Ipv4Header, Ipv6Header, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN, ETH_HEADER_LEN, IPV4_HEADER_LEN,
    IPV6_HEADER_LEN, ROCE_V2_UDP_DPORT, UDP_HEADER_LEN, VLAN_TAG_LEN,
};
use testbench::wire::headers::{BTH_LEN, DEFAULT_PKEY};

/// Bytes of the fixed part of the headers (Ethernet + IPv4 + UDP + BTH).
pub const FIXED_HDR: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN;
/// The same over IPv6: 20 bytes more, five words (the header-word index [`TxHeader::hw`] adds them).
pub const FIXED_HDR6: usize = ETH_HEADER_LEN + IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN;
/// Words an IPv6 header adds to an IPv4 one.
pub const V6_WORDS: usize = (IPV6_HEADER_LEN - IPV4_HEADER_LEN) / 4;
/// Words an 802.1Q tag adds.
pub const VLAN_WORDS: usize = VLAN_TAG_LEN / 4;
/// Header lengths are `FIXED_HDR + 4 * hw`, hw = ext_words (+ [`V6_WORDS`] over IPv6, + [`VLAN_WORDS`] with
/// a VLAN tag): 0..=17.
pub const HW_MAX: usize = 11 + V6_WORDS + VLAN_WORDS;
/// Longest extension-header run (MaskedCmpSwapETH, 44 bytes; AtomicETH and MaskedFetchAddETH are 28).
pub const MAX_EXT: usize = testbench::wire::headers::MASKED_CMP_SWAP_ETH_LEN;
/// [`TxHeader::ext`]'s width.
pub const EXT_BITS: usize = 8 * MAX_EXT;
/// Bytes the header maps produce: the longest header, 122 (a VLAN tag, IPv6 and MaskedCmpSwapETH).
pub const HDR_BYTES: usize = VLAN_TAG_LEN + FIXED_HDR6 + MAX_EXT;
/// Header-map bits in the second beat.
const HDR_BEAT1_BITS: usize = 8 * HDR_BYTES - 512;

/// One packet to send. Multi-byte fields hold numbers (sent big-endian); `ext` holds the extension headers
/// in wire order (byte 0 in bits 7:0), `ext_words` their length in 4-byte words. The fields from `ip_total`
/// on are computed here; leave them zero.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct TxHeader {
    pub dst_mac: Bits<48>,
    pub src_mac: Bits<48>,
    /// RoCEv2 over IPv6 (else IPv4).
    pub v6: Bit,
    /// An 802.1Q tag after the source MAC, with this tag control information (PCP, DEI, VID).
    pub vlan: Bit,
    pub vlan_tci: Bits<16>,
    /// Addresses: IPv6, or IPv4 in bits 31:0 (the RNIC puts IPv4-mapped addresses here, ::ffff:a.b.c.d, as it
    /// holds them everywhere; an IPv4 header takes bits 31:0).
    pub src_ip: Bits<128>,
    pub dst_ip: Bits<128>,
    pub ip_id: Bits<16>,
    pub udp_sport: Bits<16>,
    pub opcode: Bits<8>,
    pub solicited: Bit,
    pub ack_req: Bit,
    pub dest_qpn: Bits<24>,
    pub psn: Bits<24>,
    pub ext: Bits<EXT_BITS>,
    pub ext_words: Bits<4>,
    pub pay_len: Bits<13>,
    pub ip_total: Bits<16>,
    pub udp_len: Bits<16>,
    pub ip_csum: Bits<16>,
    pub bth1: Bits<8>,
    pub bth8: Bits<8>,
    /// Header words beyond [`FIXED_HDR`]: `ext_words`, plus [`V6_WORDS`] over IPv6, plus [`VLAN_WORDS`] with a
    /// tag (the header is `FIXED_HDR + 4 * hw` bytes).
    pub hw: Bits<5>,
    /// Beats of the frame before its ICRC is appended, payload beats, and `64 - (frame bytes mod 64)` (0 when
    /// the last beat is full): the frame former's plan.
    pub nbeats: Bits<7>,
    pub pbeats: Bits<7>,
    pub keep_shift: Bits<7>,
}

/// Bits of a packed [`TxHeader`].
pub const TXH_BITS: usize = <TxHeader as Synth>::BITS;

/// The header byte map of IPv4 (`v6` false) or IPv6 frames, untagged or with an 802.1Q tag (`vlan`): each of
/// the [`HDR_BYTES`] (122) header bytes from the golden layout (bytes past the frame's header are 0 and never
/// sent).
pub fn header_map(v6: bool, vlan: bool) -> Vec<ByteSrc> {
    let h = TxHeader::default();
    let be = |off: usize, bytes: usize| (0..bytes).map(move |i| ByteSrc::In(off + 8 * (bytes - 1 - i)));
    let mut m: Vec<ByteSrc> = Vec::new();
    m.extend(be(h.get_my_offset_dst_mac(), 6));
    m.extend(be(h.get_my_offset_src_mac(), 6));
    if vlan {
        m.extend(ETHERTYPE_VLAN.to_be_bytes().map(ByteSrc::Const));
        m.extend(be(h.get_my_offset_vlan_tci(), 2));
    }
    m.extend(if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IPV4 }.to_be_bytes().map(ByteSrc::Const));
    // IP: the golden model's header with every variable field zero gives the constant bytes.
    let mut ip = Vec::new();
    if v6 {
        Ipv6Header::new(Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED).build(0, &mut ip);
    } else {
        Ipv4Header::new(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED).build(0, &mut ip);
    }
    let ip0 = m.len();
    m.extend(ip.iter().map(|b| ByteSrc::Const(*b)));
    let mut put = |at: usize, src: Vec<ByteSrc>| {
        for (i, s) in src.into_iter().enumerate() {
            m[at + i] = s;
        }
    };
    if v6 {
        // payload length = UDP length; addresses at 8 and 24
        put(ip0 + 4, be(h.get_my_offset_udp_len(), 2).collect());
        put(ip0 + 8, be(h.get_my_offset_src_ip(), 16).collect());
        put(ip0 + 24, be(h.get_my_offset_dst_ip(), 16).collect());
    } else {
        put(ip0 + 2, be(h.get_my_offset_ip_total(), 2).collect());
        put(ip0 + 4, be(h.get_my_offset_ip_id(), 2).collect());
        put(ip0 + 10, be(h.get_my_offset_ip_csum(), 2).collect());
        put(ip0 + 12, be(h.get_my_offset_src_ip(), 4).collect());
        put(ip0 + 16, be(h.get_my_offset_dst_ip(), 4).collect());
    }
    m.extend(be(h.get_my_offset_udp_sport(), 2));
    m.extend(ROCE_V2_UDP_DPORT.to_be_bytes().map(ByteSrc::Const));
    m.extend(be(h.get_my_offset_udp_len(), 2));
    m.extend([ByteSrc::Const(0), ByteSrc::Const(0)]); // UDP checksum: rxe sends 0 (and takes 0 over IPv6)
    m.push(ByteSrc::In(h.get_my_offset_opcode()));
    m.push(ByteSrc::In(h.get_my_offset_bth1()));
    m.extend(DEFAULT_PKEY.to_be_bytes().map(ByteSrc::Const));
    m.push(ByteSrc::Const(0)); // FECN, BECN, reserved
    m.extend(be(h.get_my_offset_dest_qpn(), 3));
    m.push(ByteSrc::In(h.get_my_offset_bth8()));
    m.extend(be(h.get_my_offset_psn(), 3));
    assert_eq!(m.len(), if v6 { FIXED_HDR6 } else { FIXED_HDR } + if vlan { VLAN_TAG_LEN } else { 0 });
    m.extend((0..MAX_EXT).map(|i| ByteSrc::In(h.get_my_offset_ext() + 8 * i)));
    m.resize(HDR_BYTES, ByteSrc::Const(0));
    m
}

/// Sum of the 16-bit words of the IPv4 header whose fields are constant (version/IHL/TOS, flags/fragment,
/// TTL/protocol), from the golden model's header.
pub fn ipv4_const_sum() -> u32 {
    let mut ip = Vec::new();
    Ipv4Header::new(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED).build(0, &mut ip);
    [0usize, 6, 8].iter().map(|&i| u16::from_be_bytes([ip[i], ip[i + 1]]) as u32).sum()
}

/// TX Packet Build (see the module documentation).
#[derive(LogicBlock)]
pub struct TxPacketBuild {
    pub clock: Signal<In, Clock>,
    /// Header descriptors.
    pub hdr: Signal<In, TxHeader>,
    pub hdr_valid: Signal<In, Bit>,
    pub hdr_ready: Signal<Out, Bit>,
    /// Payload: `pay_len` bytes from byte 0 of the first beat, tlast on the last beat (none when 0).
    pub pay: AxisSink,
    /// Frames out, ICRC included.
    pub m_axis: AxisSource,

    /// headers taken before the pipeline can: the TX request arbiter hands the Gather Path a header's gather
    /// command when this takes the header, so up to 32 payload reads run ahead of the frame being formed
    hdrq: Fifo<TxHeader, 5, 6>,
    // header pipeline
    hadv: Signal<Local, Bit>,
    h: [DFF<TxHeader>; 9],
    hv: [DFF<Bit>; 9],
    pad: DFF<Bits<2>>,
    padded: DFF<Bits<14>>,
    ew4: DFF<Bits<14>>,
    a1: DFF<Bits<9>>,
    a2: DFF<Bits<9>>,
    a3: DFF<Bits<9>>,
    b1: DFF<Bits<9>>,
    b2: DFF<Bits<9>>,
    b3: DFF<Bits<9>>,
    a12: DFF<Bits<10>>,
    b12: DFF<Bits<10>>,
    a3c: DFF<Bits<9>>,
    b3c: DFF<Bits<9>>,
    hi: DFF<Bits<12>>,
    lo: DFF<Bits<12>>,
    hi2: DFF<Bits<12>>,
    lo2: DFF<Bits<12>>,
    flen: DFF<Bits<14>>,
    pay63: DFF<Bits<14>>,
    hi3: DFF<Bits<12>>,
    lo8: DFF<Bits<8>>,
    flen63: DFF<Bits<14>>,
    lo9: DFF<Bits<9>>,
    hi8: DFF<Bits<8>>,
    hi9: DFF<Bits<9>>,
    lo8b: DFF<Bits<8>>,
    lo_f: Signal<Local, Bits<8>>,
    // frame former
    cur: DFF<TxHeader>,
    active: DFF<Bit>,
    beat: DFF<Bits<7>>,
    nbeats: DFF<Bits<7>>,
    last_keep: DFF<Bits<64>>,
    pbeats: DFF<Bits<7>>,
    pidx: DFF<Bits<7>>,
    /// `pidx < pbeats`: payload beats are still to come (a register, so that the payload take, the shift and
    /// the output beat do not start with a compare)
    pmore: DFF<Bit>,
    /// `pidx + 1 < pbeats`, from registers: `pmore` after the next payload beat
    pmore1: Signal<Local, Bit>,
    prev: DFF<Bits<512>>,
    hq: DFF<Bit>,
    hmask0: DFF<Bits<512>>,
    hmask1: DFF<Bits<512>>,
    hdr_map4: ByteMap<TXH_BITS, { 8 * HDR_BYTES }>,
    hdr_map6: ByteMap<TXH_BITS, { 8 * HDR_BYTES }>,
    hdr_map4v: ByteMap<TXH_BITS, { 8 * HDR_BYTES }>,
    hdr_map6v: ByteMap<TXH_BITS, { 8 * HDR_BYTES }>,
    /// the header bytes of the frame being formed (IPv4 or IPv6 map, untagged or tagged)
    l_hdr: Signal<Local, Bits<{ 8 * HDR_BYTES }>>,
    pay_mask: KeepMask,
    cur_pay: Signal<Local, Bits<512>>,
    hdr_sel: Signal<Local, Bits<512>>,
    load: Signal<Local, Bit>,
    f_last: Signal<Local, Bit>,
    f_valid: Signal<Local, Bit>,
    ob_ready: Signal<Local, Bit>,
    ob_data: DFF<Bits<512>>,
    ob_keep: DFF<Bits<64>>,
    ob_last: DFF<Bit>,
    ob_valid: DFF<Bit>,
    shifted: Signal<Local, Bits<512>>,
    hdr_beat: Signal<Local, Bits<512>>,
    need_pay: Signal<Local, Bit>,
    fire: Signal<Local, Bit>,
    in_len: Signal<Local, Bits<13>>,
    src0: Signal<Local, Bits<128>>,
    dst0: Signal<Local, Bits<128>>,
    id0: Signal<Local, Bits<16>>,
    ulen3: Signal<Local, Bits<16>>,
    ipt3: Signal<Local, Bits<16>>,
    len3: Signal<Local, Bits<13>>,
    ulen_sum: Signal<Local, Bits<14>>,
    // ICRC append
    icrc: TxIcrcAppend,

    // constants
    k0_2: Constant<Bits<2>>,
    k24: Constant<Bits<14>>,
    k20: Constant<Bits<16>>,
    /// IPv6: the "total length" (IP header and datagram) the beat plan counts from is the UDP length + 40
    k40: Constant<Bits<16>>,
    k_v6w: Constant<Bits<5>>,
    k_vw: Constant<Bits<5>>,
    k_v6vw: Constant<Bits<5>>,
    /// high and low bytes of the IPv4 header's constant words (plus the 20 of ip_total = udp_len + 20)
    khi: Constant<Bits<9>>,
    klo: Constant<Bits<9>>,
    /// frame bytes before the ICRC = IP total length + Ethernet header - 4 (the ICRC is appended later)
    k_eth_no_icrc: Constant<Bits<14>>,
    /// the same with a VLAN tag (4 bytes more)
    k_veth_no_icrc: Constant<Bits<14>>,
    k63: Constant<Bits<14>>,
    k1_8: Constant<Bits<8>>,
    k0_7: Constant<Bits<7>>,
    k0_512: Constant<Bits<512>>,
    k1_7: Constant<Bits<7>>,
    k64_7: Constant<Bits<7>>,
    k0_6: Constant<Bits<6>>,
    k3_5: Constant<Bits<5>>,
    kfull: Constant<Bits<64>>,
    /// byte masks of the header bytes in beats 0 and 1, per header-word index `hw`
    hm0_t: [Constant<Bits<512>>; HW_MAX + 1],
    hm1_t: [Constant<Bits<512>>; HW_MAX + 1],
}

impl Default for TxPacketBuild {
    fn default() -> Self {
        let h = |hw: usize| FIXED_HDR + 4 * hw;
        // one's-complement sum of the constant words, folded to 16 bits
        let c = ipv4_const_sum() + IPV4_HEADER_LEN as u32;
        let const_words = ((c & 0xFFFF) + (c >> 16)) as u64;
        Self {
            clock: Default::default(),
            hdr: Default::default(),
            hdr_valid: Default::default(),
            hdr_ready: Default::default(),
            pay: Default::default(),
            m_axis: Default::default(),
            hdrq: Default::default(),
            hadv: Default::default(),
            h: Default::default(),
            hv: Default::default(),
            pad: Default::default(),
            padded: Default::default(),
            ew4: Default::default(),
            a1: Default::default(),
            a2: Default::default(),
            a3: Default::default(),
            b1: Default::default(),
            b2: Default::default(),
            b3: Default::default(),
            a12: Default::default(),
            b12: Default::default(),
            a3c: Default::default(),
            b3c: Default::default(),
            hi: Default::default(),
            lo: Default::default(),
            hi2: Default::default(),
            lo2: Default::default(),
            flen: Default::default(),
            pay63: Default::default(),
            hi3: Default::default(),
            lo8: Default::default(),
            flen63: Default::default(),
            lo9: Default::default(),
            hi8: Default::default(),
            hi9: Default::default(),
            lo8b: Default::default(),
            lo_f: Default::default(),
            cur: Default::default(),
            active: Default::default(),
            beat: Default::default(),
            nbeats: Default::default(),
            last_keep: Default::default(),
            pbeats: Default::default(),
            pidx: Default::default(),
            pmore: Default::default(),
            pmore1: Default::default(),
            prev: Default::default(),
            hq: Default::default(),
            hmask0: Default::default(),
            hmask1: Default::default(),
            hdr_map4: ByteMap::new(header_map(false, false)),
            hdr_map6: ByteMap::new(header_map(true, false)),
            hdr_map4v: ByteMap::new(header_map(false, true)),
            hdr_map6v: ByteMap::new(header_map(true, true)),
            l_hdr: Default::default(),
            pay_mask: Default::default(),
            cur_pay: Default::default(),
            hdr_sel: Default::default(),
            load: Default::default(),
            f_last: Default::default(),
            f_valid: Default::default(),
            ob_ready: Default::default(),
            ob_data: Default::default(),
            ob_keep: Default::default(),
            ob_last: Default::default(),
            ob_valid: Default::default(),
            shifted: Default::default(),
            hdr_beat: Default::default(),
            need_pay: Default::default(),
            fire: Default::default(),
            in_len: Default::default(),
            src0: Default::default(),
            dst0: Default::default(),
            id0: Default::default(),
            ulen3: Default::default(),
            ipt3: Default::default(),
            len3: Default::default(),
            ulen_sum: Default::default(),
            icrc: Default::default(),
            k0_2: k(0),
            k24: k((UDP_HEADER_LEN + BTH_LEN + 4) as u64),
            k20: k(IPV4_HEADER_LEN as u64),
            k40: k(IPV6_HEADER_LEN as u64),
            k_v6w: k(V6_WORDS as u64),
            k_vw: k(VLAN_WORDS as u64),
            k_v6vw: k((V6_WORDS + VLAN_WORDS) as u64),
            khi: k(const_words >> 8),
            klo: k(const_words & 0xFF),
            k_eth_no_icrc: k((ETH_HEADER_LEN - 4) as u64),
            k_veth_no_icrc: k((ETH_HEADER_LEN + VLAN_TAG_LEN - 4) as u64),
            k63: k(63),
            k1_8: k(1),
            k0_7: k(0),
            k0_512: byte_mask(0),
            k1_7: k(1),
            k64_7: k(64),
            k0_6: k(0),
            k3_5: k(3),
            kfull: keep_thermo(64),
            hm0_t: std::array::from_fn(|e| byte_mask(h(e).min(64))),
            hm1_t: std::array::from_fn(|e| byte_mask(h(e).saturating_sub(64))),
        }
    }
}

impl Logic for TxPacketBuild {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, pad, padded, ew4, a1, a2, a3, b1, b2, b3, a12, b12, a3c, b3c, hi, lo, hi2, lo2, flen, pay63,
            hi3, lo8, flen63, lo9, hi8, hi9, lo8b, ob_data, ob_keep, ob_last, ob_valid, cur, active, beat, nbeats, last_keep, pbeats, pidx, pmore,
            prev, hq, hmask0, hmask1
        );
        for i in 0..9 {
            self.h[i].clock.next = self.clock.val();
            self.h[i].d.next = self.h[i].q.val();
            self.hv[i].clock.next = self.clock.val();
            self.hv[i].d.next = self.hv[i].q.val();
        }
        clock!(self, clock, icrc, hdrq);
        self.hdrq.din.next = self.hdr.val();
        self.hdrq.push.next = self.hdr_valid.val();
        self.hdr_ready.next = !self.hdrq.full.val();

        // ---- header pipeline: stage i+1 takes stage i when the pipeline advances ----
        // Every add is at most 14 bits wide (<= 6 LUT6 levels). The IPv4 checksum is summed as two byte columns
        // (high and low bytes of the 16-bit words), then folded with end-around carries in small steps.
        // (struct fields are copied to plain signals before slicing: Verilog has no slice of a slice)
        self.in_len.next = self.hdrq.dout.val().pay_len;
        self.src0.next = self.h[0].q.val().src_ip;
        self.dst0.next = self.h[0].q.val().dst_ip;
        self.id0.next = self.h[0].q.val().ip_id;
        self.ulen3.next = self.h[3].q.val().udp_len;
        self.ipt3.next = self.h[3].q.val().ip_total;
        self.len3.next = self.h[3].q.val().pay_len;
        self.ulen_sum.next = self.padded.q.val() + self.ew4.q.val();
        for i in 0..8 {
            if self.hadv.val() {
                self.h[i + 1].d.next = self.h[i].q.val();
                self.hv[i + 1].d.next = self.hv[i].q.val();
            }
        }
        if self.hadv.val() {
            // H0: capture; PadCnt
            self.h[0].d.next = self.hdrq.dout.val();
            self.hv[0].d.next = !self.hdrq.empty.val();
            self.pad.d.next = self.k0_2.val() - self.in_len.val().get_bits::<2>(0);
            // H1: padded payload, 24 + 4*ext_words, BTH flag bytes, byte-column pairs
            self.padded.d.next = bit_cast::<14, 13>(self.h[0].q.val().pay_len) + bit_cast::<14, 2>(self.pad.q.val());
            self.ew4.d.next = self.k24.val() + (bit_cast::<14, 4>(self.h[0].q.val().ext_words) << 2);
            self.h[1].d.next.bth1 = (bit_cast::<8, 1>(self.h[0].q.val().solicited.into()) << 7)
                | (bit_cast::<8, 2>(self.pad.q.val()) << 4);
            self.h[1].d.next.bth8 = bit_cast::<8, 1>(self.h[0].q.val().ack_req.into()) << 7;
            self.h[1].d.next.hw = bit_cast::<5, 4>(self.h[0].q.val().ext_words);
            if self.h[0].q.val().v6 {
                self.h[1].d.next.hw = bit_cast::<5, 4>(self.h[0].q.val().ext_words) + self.k_v6w.val();
            }
            if self.h[0].q.val().vlan {
                self.h[1].d.next.hw = bit_cast::<5, 4>(self.h[0].q.val().ext_words) + self.k_vw.val();
                if self.h[0].q.val().v6 {
                    self.h[1].d.next.hw = bit_cast::<5, 4>(self.h[0].q.val().ext_words) + self.k_v6vw.val();
                }
            }
            self.a1.d.next = bit_cast::<9, 8>(self.src0.val().get_bits::<8>(24)) + bit_cast::<9, 8>(self.src0.val().get_bits::<8>(8));
            self.a2.d.next = bit_cast::<9, 8>(self.dst0.val().get_bits::<8>(24)) + bit_cast::<9, 8>(self.dst0.val().get_bits::<8>(8));
            self.a3.d.next = bit_cast::<9, 8>(self.id0.val().get_bits::<8>(8)) + self.khi.val();
            self.b1.d.next = bit_cast::<9, 8>(self.src0.val().get_bits::<8>(16)) + bit_cast::<9, 8>(self.src0.val().get_bits::<8>(0));
            self.b2.d.next = bit_cast::<9, 8>(self.dst0.val().get_bits::<8>(16)) + bit_cast::<9, 8>(self.dst0.val().get_bits::<8>(0));
            self.b3.d.next = bit_cast::<9, 8>(self.id0.val().get_bits::<8>(0)) + self.klo.val();
            // H2: UDP length; column sums
            self.h[2].d.next.udp_len = bit_cast::<16, 14>(self.ulen_sum.val());
            self.a12.d.next = bit_cast::<10, 9>(self.a1.q.val()) + bit_cast::<10, 9>(self.a2.q.val());
            self.b12.d.next = bit_cast::<10, 9>(self.b1.q.val()) + bit_cast::<10, 9>(self.b2.q.val());
            self.a3c.d.next = self.a3.q.val();
            self.b3c.d.next = self.b3.q.val();
            // H3: IP total length; column sums
            self.h[3].d.next.ip_total = self.h[2].q.val().udp_len + self.k20.val();
            if self.h[2].q.val().v6 {
                self.h[3].d.next.ip_total = self.h[2].q.val().udp_len + self.k40.val();
            }
            self.hi.d.next = bit_cast::<12, 10>(self.a12.q.val()) + bit_cast::<12, 9>(self.a3c.q.val());
            self.lo.d.next = bit_cast::<12, 10>(self.b12.q.val()) + bit_cast::<12, 9>(self.b3c.q.val());
            // H4: the IP total length's bytes join the columns (ip_total = udp_len + 20, the 20 is in klo); frame
            // and payload lengths for the beat plan
            self.hi2.d.next = self.hi.q.val() + bit_cast::<12, 8>(self.ulen3.val().get_bits::<8>(8));
            self.lo2.d.next = self.lo.q.val() + bit_cast::<12, 8>(self.ulen3.val().get_bits::<8>(0));
            self.flen.d.next = self.ipt3.val().get_bits::<14>(0) + self.k_eth_no_icrc.val();
            if self.h[3].q.val().vlan {
                self.flen.d.next = self.ipt3.val().get_bits::<14>(0) + self.k_veth_no_icrc.val();
            }
            self.pay63.d.next = bit_cast::<14, 13>(self.len3.val()) + self.k63.val();
            // H5: low column carry into the high column; beat plan
            self.hi3.d.next = self.hi2.q.val() + bit_cast::<12, 4>(self.lo2.q.val().get_bits::<4>(8));
            self.lo8.d.next = self.lo2.q.val().get_bits::<8>(0);
            self.flen63.d.next = self.flen.q.val() + self.k63.val();
            self.h[5].d.next.pbeats = self.pay63.q.val().get_bits::<7>(6);
            self.h[5].d.next.keep_shift = self.k0_7.val();
            if self.flen.q.val().get_bits::<6>(0) != self.k0_6.val() {
                self.h[5].d.next.keep_shift = self.k64_7.val() - bit_cast::<7, 6>(self.flen.q.val().get_bits::<6>(0));
            }
            // H6: end-around carry of the bits above 16 into the low byte
            self.h[6].d.next.nbeats = self.flen63.q.val().get_bits::<7>(6);
            self.lo9.d.next = bit_cast::<9, 8>(self.lo8.q.val()) + bit_cast::<9, 4>(self.hi3.q.val().get_bits::<4>(8));
            self.hi8.d.next = self.hi3.q.val().get_bits::<8>(0);
            // H7: the low byte's carry into the high byte
            self.hi9.d.next = bit_cast::<9, 8>(self.hi8.q.val()) + bit_cast::<9, 1>(self.lo9.q.val().get_bits::<1>(8));
            self.lo8b.d.next = self.lo9.q.val().get_bits::<8>(0);
            // H8: a carry out of the high byte wraps into the low byte (which is then small: no further carry)
            self.lo_f.next = self.lo8b.q.val();
            if self.hi9.q.val().get_bit(8) {
                self.lo_f.next = self.lo8b.q.val() + self.k1_8.val();
            }
            self.h[8].d.next.ip_csum = !((bit_cast::<16, 8>(self.hi9.q.val().get_bits::<8>(0)) << 8) | bit_cast::<16, 8>(self.lo_f.val()));
        }
        // ---- frame former ----
        self.hdr_map4.x.next = self.cur.q.val().into();
        self.hdr_map6.x.next = self.cur.q.val().into();
        self.hdr_map4v.x.next = self.cur.q.val().into();
        self.hdr_map6v.x.next = self.cur.q.val().into();
        self.l_hdr.next = self.hdr_map4.y.val();
        if self.cur.q.val().v6 {
            self.l_hdr.next = self.hdr_map6.y.val();
        }
        if self.cur.q.val().vlan {
            self.l_hdr.next = self.hdr_map4v.y.val();
            if self.cur.q.val().v6 {
                self.l_hdr.next = self.hdr_map6v.y.val();
            }
        }
        self.pay_mask.keep.next = self.pay.tkeep.val();
        // output beat j takes payload beat j - q (q = 1 when the header fills beat 0)
        self.need_pay.next = self.active.q.val()
            & ((self.beat.q.val() != self.k0_7.val()) | !self.hq.q.val())
            & self.pmore.q.val();
        self.pmore1.next = (self.pidx.q.val() + self.k1_7.val()) < self.pbeats.q.val();
        self.cur_pay.next = self.k0_512.val();
        if self.need_pay.val() {
            self.cur_pay.next = self.pay.tdata.val() & self.pay_mask.mask.val();
        }
        // {prev, cur} shifted so that payload byte 0 lands at byte H mod 64
        match self.cur.q.val().hw.index() {
            0 => self.shifted.next = (self.prev.q.val() >> 80) | (self.cur_pay.val() << 432),
            1 => self.shifted.next = (self.prev.q.val() >> 48) | (self.cur_pay.val() << 464),
            2 => self.shifted.next = (self.prev.q.val() >> 16) | (self.cur_pay.val() << 496),
            3 => self.shifted.next = (self.prev.q.val() >> 496) | (self.cur_pay.val() << 16),
            4 => self.shifted.next = (self.prev.q.val() >> 464) | (self.cur_pay.val() << 48),
            5 => self.shifted.next = (self.prev.q.val() >> 432) | (self.cur_pay.val() << 80),
            6 => self.shifted.next = (self.prev.q.val() >> 400) | (self.cur_pay.val() << 112),
            7 => self.shifted.next = (self.prev.q.val() >> 368) | (self.cur_pay.val() << 144),
            8 => self.shifted.next = (self.prev.q.val() >> 336) | (self.cur_pay.val() << 176),
            9 => self.shifted.next = (self.prev.q.val() >> 304) | (self.cur_pay.val() << 208),
            10 => self.shifted.next = (self.prev.q.val() >> 272) | (self.cur_pay.val() << 240),
            11 => self.shifted.next = (self.prev.q.val() >> 240) | (self.cur_pay.val() << 272),
            12 => self.shifted.next = (self.prev.q.val() >> 208) | (self.cur_pay.val() << 304),
            // 13: a VLAN tag and IPv6 with AtomicETH-long headers; above: the masked atomics, which carry no
            // payload: any shift
            _ => self.shifted.next = (self.prev.q.val() >> 176) | (self.cur_pay.val() << 336),
        }
        // header bytes over the payload in beats 0 and 1
        self.hdr_beat.next = self.k0_512.val();
        self.hdr_sel.next = self.k0_512.val();
        if self.beat.q.val() == self.k0_7.val() {
            self.hdr_beat.next = self.l_hdr.val().get_bits::<512>(0);
            self.hdr_sel.next = self.hmask0.q.val();
        }
        if self.beat.q.val() == self.k1_7.val() {
            self.hdr_beat.next = bit_cast::<512, HDR_BEAT1_BITS>(self.l_hdr.val().get_bits::<HDR_BEAT1_BITS>(512));
            self.hdr_sel.next = self.hmask1.q.val();
        }
        // the formed beat, registered on its way to the ICRC append (a pipeline register with a ready path)
        self.f_last.next = (self.beat.q.val() + self.k1_7.val()) == self.nbeats.q.val();
        self.f_valid.next = self.active.q.val() & (!self.need_pay.val() | self.pay.tvalid.val());
        self.ob_ready.next = !self.ob_valid.q.val() | self.icrc.s_axis.tready.val();
        self.icrc.s_axis.tdata.next = self.ob_data.q.val();
        self.icrc.s_axis.tkeep.next = self.ob_keep.q.val();
        self.icrc.s_axis.tlast.next = self.ob_last.q.val();
        self.icrc.s_axis.tvalid.next = self.ob_valid.q.val();
        AxisSource::link(&mut self.m_axis, &mut self.icrc.m_axis);

        self.pay.tready.next = false;
        self.fire.next = self.f_valid.val() & self.ob_ready.val();
        if self.ob_ready.val() {
            self.ob_valid.d.next = self.f_valid.val();
            self.ob_data.d.next = (self.shifted.val() & !self.hdr_sel.val()) | (self.hdr_beat.val() & self.hdr_sel.val());
            self.ob_last.d.next = self.f_last.val();
            self.ob_keep.d.next = self.kfull.val();
            if self.f_last.val() {
                self.ob_keep.d.next = self.last_keep.q.val();
            }
        }
        if self.fire.val() {
            self.pay.tready.next = self.need_pay.val();
            self.beat.d.next = self.beat.q.val() + self.k1_7.val();
            if self.need_pay.val() {
                self.prev.d.next = self.cur_pay.val();
                self.pidx.d.next = self.pidx.q.val() + self.k1_7.val();
                self.pmore.d.next = self.pmore1.val();
            }
            if self.f_last.val() {
                self.active.d.next = false;
            }
        }
        // load the next frame (also in the cycle its predecessor's last beat leaves)
        self.load.next = self.hv[8].q.val() & (!self.active.q.val() | (self.fire.val() & self.f_last.val()));
        self.hadv.next = !self.hv[8].q.val() | self.load.val();
        self.hdrq.pop.next = self.hadv.val();
        if self.load.val() {
            self.active.d.next = true;
            self.cur.d.next = self.h[8].q.val();
            self.beat.d.next = self.k0_7.val();
            self.pidx.d.next = self.k0_7.val();
            self.pmore.d.next = self.h[8].q.val().pbeats != self.k0_7.val();
            self.prev.d.next = self.k0_512.val();
            self.hq.d.next = self.h[8].q.val().hw >= self.k3_5.val();
            self.nbeats.d.next = self.h[8].q.val().nbeats;
            self.pbeats.d.next = self.h[8].q.val().pbeats;
            self.last_keep.d.next = self.kfull.val() >> self.h[8].q.val().keep_shift;
            match self.h[8].q.val().hw.index() {
                0 => { self.hmask0.d.next = self.hm0_t[0].val(); self.hmask1.d.next = self.hm1_t[0].val(); }
                1 => { self.hmask0.d.next = self.hm0_t[1].val(); self.hmask1.d.next = self.hm1_t[1].val(); }
                2 => { self.hmask0.d.next = self.hm0_t[2].val(); self.hmask1.d.next = self.hm1_t[2].val(); }
                3 => { self.hmask0.d.next = self.hm0_t[3].val(); self.hmask1.d.next = self.hm1_t[3].val(); }
                4 => { self.hmask0.d.next = self.hm0_t[4].val(); self.hmask1.d.next = self.hm1_t[4].val(); }
                5 => { self.hmask0.d.next = self.hm0_t[5].val(); self.hmask1.d.next = self.hm1_t[5].val(); }
                6 => { self.hmask0.d.next = self.hm0_t[6].val(); self.hmask1.d.next = self.hm1_t[6].val(); }
                7 => { self.hmask0.d.next = self.hm0_t[7].val(); self.hmask1.d.next = self.hm1_t[7].val(); }
                8 => { self.hmask0.d.next = self.hm0_t[8].val(); self.hmask1.d.next = self.hm1_t[8].val(); }
                9 => { self.hmask0.d.next = self.hm0_t[9].val(); self.hmask1.d.next = self.hm1_t[9].val(); }
                10 => { self.hmask0.d.next = self.hm0_t[10].val(); self.hmask1.d.next = self.hm1_t[10].val(); }
                11 => { self.hmask0.d.next = self.hm0_t[11].val(); self.hmask1.d.next = self.hm1_t[11].val(); }
                12 => { self.hmask0.d.next = self.hm0_t[12].val(); self.hmask1.d.next = self.hm1_t[12].val(); }
                13 => { self.hmask0.d.next = self.hm0_t[13].val(); self.hmask1.d.next = self.hm1_t[13].val(); }
                14 => { self.hmask0.d.next = self.hm0_t[14].val(); self.hmask1.d.next = self.hm1_t[14].val(); }
                15 => { self.hmask0.d.next = self.hm0_t[15].val(); self.hmask1.d.next = self.hm1_t[15].val(); }
                16 => { self.hmask0.d.next = self.hm0_t[16].val(); self.hmask1.d.next = self.hm1_t[16].val(); }
                _ => { self.hmask0.d.next = self.hm0_t[17].val(); self.hmask1.d.next = self.hm1_t[17].val(); }
            }
        }
    }
}

/// A 128-bit address field from its number.
pub fn bits128(x: u128) -> Bits<128> {
    let mut b = Bits::<128>::default();
    b.set_bits::<64>(0, bits::<64>(x as u64));
    b.set_bits::<64>(64, bits::<64>((x >> 64) as u64));
    b
}

/// An address as the QP paths and RX Parse hold it: IPv6, or IPv4-mapped.
pub fn ip_bits(ip: std::net::IpAddr) -> Bits<128> {
    match ip {
        std::net::IpAddr::V4(a) => v4_bits(a.into()),
        std::net::IpAddr::V6(a) => bits128(a.into()),
    }
}

/// An IPv4 address as the RNIC holds it: IPv4-mapped (`v4_bits(0)` is the prefix alone).
pub fn v4_bits(ip: u32) -> Bits<128> {
    bits128(crate::wire::rx_parse::v4_mapped(ip))
}

/// A 128-bit field's number.
pub fn u128_of(b: Bits<128>) -> u128 {
    (b.get_bits::<64>(64).to_u64() as u128) << 64 | b.get_bits::<64>(0).to_u64() as u128
}

/// The descriptor for a golden-model frame (IPv4 or IPv6, untagged or with a VLAN tag): what the requester or
/// responder would hand to TX Packet Build for it. Returns the descriptor and the payload bytes.
pub fn tx_header_of(f: &testbench::wire::RoceFrame) -> (TxHeader, Vec<u8>) {
    use testbench::wire::IpHeader;
    let (v6, src, dst, id) = match &f.ip {
        IpHeader::V4(ip) => (
            false,
            crate::wire::rx_parse::v4_mapped(ip.src.into()),
            crate::wire::rx_parse::v4_mapped(ip.dst.into()),
            ip.id,
        ),
        IpHeader::V6(ip) => (true, u128::from(ip.src), u128::from(ip.dst), 0),
    };
    let mac = |m: &testbench::wire::MacAddr| bits::<48>(m.0.iter().fold(0u64, |a, b| a << 8 | *b as u64));
    let mut ext_bytes = Vec::new();
    for h in &f.packet.ext {
        h.build(&mut ext_bytes);
    }
    assert!(ext_bytes.len() <= MAX_EXT && ext_bytes.len() % 4 == 0);
    let mut ext = Bits::<EXT_BITS>::default();
    for (i, b) in ext_bytes.iter().enumerate() {
        ext.set_bits::<8>(8 * i, bits::<8>(*b as u64));
    }
    let b = &f.packet.bth;
    let h = TxHeader {
        dst_mac: mac(&f.eth.dst),
        src_mac: mac(&f.eth.src),
        v6,
        vlan: f.eth.vlan.is_some(),
        vlan_tci: bits::<16>(f.eth.vlan.map_or(0, |t| t.tci) as u64),
        src_ip: bits128(src),
        dst_ip: bits128(dst),
        ip_id: bits::<16>(id as u64),
        udp_sport: bits::<16>(f.udp.sport as u64),
        opcode: bits::<8>(b.opcode as u64),
        solicited: b.se,
        ack_req: b.ack_req,
        dest_qpn: bits::<24>(b.dest_qpn as u64),
        psn: bits::<24>(b.psn as u64),
        ext,
        ext_words: bits::<4>((ext_bytes.len() / 4) as u64),
        pay_len: bits::<13>(f.packet.payload.len() as u64),
        ..Default::default()
    };
    (h, f.packet.payload.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::{beat_of, BEAT_BYTES};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use testbench::wire::RoceFrame;

    pub(crate) fn sample_frames(rng: &mut SmallRng, lens: &[usize]) -> Vec<RoceFrame> {
        testbench::wire::samples::rc_frames(&mut || rng.gen(), lens)
    }

    /// Direct drive: descriptors back to back, payload with random gaps, output with random backpressure.
    pub(crate) fn run(frames: &[RoceFrame], seed: u64) -> Vec<Vec<u8>> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut u = TxPacketBuild::default();
        u.connect_all();
        let descs: Vec<(TxHeader, Vec<u8>)> = frames.iter().map(tx_header_of).collect();
        let pay_beats: Vec<(Vec<u8>, bool)> = descs
            .iter()
            .flat_map(|(_, p)| {
                let n = p.len().div_ceil(BEAT_BYTES);
                p.chunks(BEAT_BYTES).enumerate().map(move |(i, c)| (c.to_vec(), i + 1 == n)).collect::<Vec<_>>()
            })
            .collect();
        let (mut hi, mut pi) = (0, 0);
        let mut out = Vec::new();
        let mut cur = Vec::new();
        let mut idle = 0;
        while out.len() < frames.len() {
            u.hdr_valid.next = hi < descs.len();
            if hi < descs.len() {
                u.hdr.next = descs[hi].0;
            }
            let pv = pi < pay_beats.len() && rng.gen_ratio(5, 6);
            u.pay.tvalid.next = pv;
            if pi < pay_beats.len() {
                let (d, k) = beat_of(&pay_beats[pi].0);
                u.pay.tdata.next = d;
                u.pay.tkeep.next = k;
                u.pay.tlast.next = pay_beats[pi].1;
            }
            u.m_axis.tready.next = rng.gen_ratio(7, 8);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            if u.hdr_valid.val() && u.hdr_ready.val() {
                hi += 1;
            }
            if pv && u.pay.tready.val() {
                pi += 1;
            }
            if u.m_axis.tvalid.val() && u.m_axis.tready.val() {
                let n = 64 - u.m_axis.tkeep.val().get_bits::<64>(0).to_u64().leading_zeros() as usize;
                for i in 0..n {
                    cur.push(u.m_axis.tdata.val().get_bits::<8>(8 * i).to_u8());
                }
                if u.m_axis.tlast.val() {
                    out.push(std::mem::take(&mut cur));
                }
                idle = 0;
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 50));
            idle += 1;
            assert!(idle < 500, "TX Packet Build stopped sending");
        }
        out
    }

    #[test]
    fn frames_equal_the_golden_model_byte_for_byte() {
        let mut rng = SmallRng::seed_from_u64(11);
        let lens = [0usize, 1, 2, 3, 4, 5, 9, 10, 11, 63, 64, 65, 127, 128, 129, 200, 255, 256, 300, 1024, 1025];
        let frames = sample_frames(&mut rng, &lens);
        let got = run(&frames, 4);
        for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
            let want = f.build().unwrap();
            assert_eq!(g, &want, "frame {i}: {:?} payload {}", f.packet.opcode(), f.packet.payload.len());
        }
    }

    /// The masked atomics' requests (44- and 28-byte extension headers: the longest header, 98 bytes, runs
    /// into the second beat), between frames with payload, back to back.
    #[test]
    fn masked_atomic_requests_equal_the_golden_model() {
        let mut rng = SmallRng::seed_from_u64(12);
        let lens = [0usize, 1, 63, 64, 65, 300, 0, 2, 1025, 7, 100, 3];
        let mut masked = testbench::wire::samples::masked_atomic_requests(&mut || rng.gen(), 8).into_iter();
        let mut frames = sample_frames(&mut rng, &lens);
        // masked requests between the others, two back to back
        for at in [0, 2, 3, 5, 8, 9, 11, 13] {
            frames.insert(at, masked.next().unwrap());
        }
        let got = run(&frames, 5);
        for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
            let want = f.build().unwrap();
            assert_eq!(g, &want, "frame {i}: {:?} payload {}", f.packet.opcode(), f.packet.payload.len());
        }
        assert_eq!(got.len(), frames.len());
    }

    /// Frames of every header shape with payloads across the beat boundaries, the masked atomics' and UD SENDs
    /// (as our Requester sends them: TOS 0, TTL 64), every other one over IPv6.
    fn every_shape_both_families(rng: &mut SmallRng) -> Vec<RoceFrame> {
        let lens: Vec<usize> = (0..70).chain([127, 128, 129, 1024, 1025, 4096]).collect();
        let mut frames = sample_frames(rng, &lens);
        frames.extend(testbench::wire::samples::masked_atomic_requests(&mut || rng.gen(), 4));
        let mut ud = testbench::wire::samples::ud_frames(&mut || rng.gen(), &[0, 1, 2, 3, 61, 62, 63, 64, 65, 1000]);
        for u in &mut ud {
            if let testbench::wire::IpHeader::V4(h) = &mut u.ip {
                (h.tos, h.ttl) = (0, 64);
            }
        }
        frames.extend(ud);
        testbench::wire::samples::over_ipv6(&mut || rng.gen(), frames, true)
    }

    /// IPv6 frames (74-byte fixed header: the payload at five more offsets, the header always into beat 1) of
    /// every header shape, the masked atomics' (118 bytes, the longest) and UD SENDs, every other one IPv4.
    #[test]
    fn ipv6_frames_equal_the_golden_model_byte_for_byte() {
        let mut rng = SmallRng::seed_from_u64(13);
        let frames = every_shape_both_families(&mut rng);
        let got = run(&frames, 6);
        assert_eq!(got.len(), frames.len());
        for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
            let want = f.build().unwrap();
            assert_eq!(g, &want, "frame {i}: {:?} over {:?}, payload {}", f.packet.opcode(), f.ip, f.packet.payload.len());
        }
    }

    /// 802.1Q-tagged frames (random PCP, DEI and VID) between untagged ones, over IPv4 and IPv6, with every
    /// header length (extension headers up to MaskedCmpSwapETH) and payloads across the beat boundaries: each
    /// the golden model's frame byte for byte, its ICRC included.
    #[test]
    fn vlan_tagged_frames_equal_the_golden_model_byte_for_byte() {
        let mut rng = SmallRng::seed_from_u64(17);
        let mut frames = every_shape_both_families(&mut rng);
        for (i, f) in frames.iter_mut().enumerate() {
            // two of three tagged, so tagged and untagged frames of both families meet back to back
            if i % 3 != 2 {
                f.eth.vlan = Some(testbench::wire::frame::VlanTag { tci: rng.gen() });
            }
        }
        // and the longest headers tagged whatever the pattern gave them: a tag, IPv6 and MaskedCmpSwapETH (122
        // bytes)
        let ext_len = |f: &RoceFrame| {
            let mut b = Vec::new();
            f.packet.ext.iter().for_each(|h| h.build(&mut b));
            b.len()
        };
        let v6 = |f: &RoceFrame| matches!(f.ip, testbench::wire::IpHeader::V6(_));
        let longest: Vec<RoceFrame> = frames.iter().filter(|f| ext_len(f) == MAX_EXT).cloned().collect();
        for mut f in testbench::wire::samples::over_ipv6(&mut || rng.gen(), longest, false) {
            f.eth.vlan = Some(testbench::wire::frame::VlanTag { tci: rng.gen() });
            frames.push(f);
        }
        assert!(frames.iter().any(|f| f.eth.vlan.is_some() && v6(f) && ext_len(f) == MAX_EXT));
        let n = frames.len();
        let got = run(&frames, 7);
        assert_eq!(got.len(), n);
        for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
            let want = f.build().unwrap();
            assert_eq!(g, &want, "frame {i}: {:?} over {:?}, VLAN {:?}, payload {}", f.packet.opcode(), f.ip, f.eth.vlan, f.packet.payload.len());
        }
    }
}
