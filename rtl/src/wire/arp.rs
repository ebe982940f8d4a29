//! ARP responder and resolver: answers ARP requests for our IPv4 address from the RX stream, as the golden
//! host does (`testbench::wire::frame::ArpFrame::reply_from`, the rule of `sim::rxe::HostStack`), and asks
//! the wire for a neighbour's MAC when the host wants one.
//!
//! - Watches the RX AXI4-Stream (`s_axis`) and never back-pressures it (`tready` is always 1). Only a frame's
//!   first beat is looked at; the rest of a multi-beat frame (padding, trailer) is skipped until `tlast`, and
//!   the frame is decided there: one the MAC flagged (`s_err` with the last beat: a bad FCS) is not answered
//!   nor counted here (RX Parse counts it as a MAC error).
//! - A frame is answered when its first beat holds a whole (>= 42 bytes) Ethernet/IPv4 ARP request: ethertype
//!   ARP, htype 1, ptype IPv4, hlen 6, plen 4, oper 1 (every such byte is one of a constant template) and a
//!   target IP equal to `my_ip`. The destination MAC is not checked (the golden host does not either).
//! - **VLAN: untagged only.** An ARP frame with one 802.1Q tag is ignored (counted): RX Parse does not take tagged
//!   RoCE frames yet, so answering on a VLAN would draw RoCE traffic that is then dropped. (The golden
//!   reply keeps the tag; when RX Parse takes VLANs this block should too.)
//! - The reply is one beat on `m_axis`: the golden reply frame padded to 60 bytes (`ETH_MIN_FRAME_LEN`, no
//!   FCS), `tkeep` 60 bytes, `tlast`. Its bytes come from a [`ByteMap`] whose table is found by probing the golden
//!   `reply_from(..).build()`: Ethernet destination = the requester's hardware address, source = `my_mac`,
//!   oper 2, sender = (`my_mac`, the requested IP), target = the requester.
//! - Pending replies wait in a 4-entry FIFO (requester MAC and IP, requested IP; the reply is formed at the
//!   output with the current `my_mac`). A request that finds it full is dropped and counted.
//! - Counters: `answered` (replies queued), `ignored` (ARP frames not answered: replies, other target IPs,
//!   other hardware/protocol types, tagged, truncated), `dropped` (requests for us lost to a full FIFO).
//!   Frames of other ethertypes are not counted here. Each frame counts at most once.
//!
//! Pipeline: S1 registers the request fields (a byte map from the first beat, big-endian numbers) and the
//! template matches in 64-bit slices, and holds them until the frame's last beat; S2 compares the target IP,
//! decides and pushes. One frame per cycle; a reply is on `m_axis` two cycles after its request's last beat
//! when the FIFO was empty. Bytes past `tkeep` are
//! never trusted: a request needs 42 kept bytes, an ignored frame its ethertype (and tag) within `tkeep`.
//!
//! **Resolution** (`q_*`, from the register slave's `ARP_QUERY`): a `q_go` pulse takes `q_ip`, clears the
//! answer and queues one broadcast ARP request (oper 1, sender our MAC and IP, target hardware address 0,
//! target `q_ip`; the golden `ArpFrame` builder's bytes, padded to 60). Replies to our own requests go out
//! first. The first whole, unflagged, untagged ARP request or reply whose sender IP is `q_ip` (a reply to
//! us, or the neighbour asking for us) sets `q_mac` to its sender MAC and `q_valid`; later ones change
//! nothing until the next query. Retries, timeouts and the neighbour cache are the driver's
//! (`rnic_driver::Driver::resolve`). `requests` counts the requests sent.
//!
//! `my_mac` is the 48-bit number whose most significant byte is the first on the wire; `my_ip` likewise
//! (`u32::from(Ipv4Addr)`), as RX Parse's `my_ip`.

use crate::common::axis::{AxisSink, AxisSource};
use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::consts::{k, keep_thermo};
use crate::common::counter::EventCounter;
use crate::common::fifo::Fifo;
use rust_hdl::prelude::*;
use std::net::Ipv4Addr;
use testbench::wire::frame::{
    ArpFrame, ArpPacket, Ethernet, MacAddr, ARP_LEN, ARP_OP_REPLY, ARP_OP_REQUEST, ETHERTYPE_ARP, ETH_HEADER_LEN,
    ETH_MIN_FRAME_LEN, VLAN_TAG_LEN,
};

/// Bytes of a whole untagged ARP request (Ethernet header + ARP packet).
pub const ARP_FRAME_BYTES: usize = ETH_HEADER_LEN + ARP_LEN;
/// 64-bit slices of the first beat that hold those bytes.
const SLICES: usize = 6;

/// The request fields a reply needs, as numbers (a field's first wire byte is its most significant).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ArpReq {
    /// requester's hardware and protocol address
    pub sha: Bits<48>,
    pub spa: Bits<32>,
    /// the requested protocol address
    pub tpa: Bits<32>,
}

/// What a reply is formed from.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ArpReplySrc {
    pub req: ArpReq,
    pub mac: Bits<48>,
}

/// What a request of ours is formed from: our addresses and the one asked for.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct ArpQuerySrc {
    pub mac: Bits<48>,
    pub ip: Bits<32>,
    pub tpa: Bits<32>,
}

const REQ_BITS: usize = <ArpReq as Synth>::BITS;
const SRC_BITS: usize = <ArpReplySrc as Synth>::BITS;
const QSRC_BITS: usize = <ArpQuerySrc as Synth>::BITS;

impl From<Bits<REQ_BITS>> for ArpReq {
    /// Unpack (the inverse of the derived packing; the byte map produces the packed form).
    fn from(b: Bits<REQ_BITS>) -> Self {
        let z = ArpReq::default();
        ArpReq {
            sha: b.get_bits::<48>(z.get_my_offset_sha()),
            spa: b.get_bits::<32>(z.get_my_offset_spa()),
            tpa: b.get_bits::<32>(z.get_my_offset_tpa()),
        }
    }
}

fn mac_of(v: u64) -> MacAddr {
    let b = v.to_be_bytes();
    MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// A golden untagged ARP frame with every variable field given (numbers as in [`ArpReq`]).
pub fn golden_arp(oper: u16, dst: u64, src: u64, sha: u64, spa: u32, tha: u64, tpa: u32) -> ArpFrame {
    ArpFrame {
        eth: Ethernet { dst: mac_of(dst), src: mac_of(src), vlan: None },
        arp: ArpPacket { oper, sha: mac_of(sha), spa: Ipv4Addr::from(spa), tha: mac_of(tha), tpa: Ipv4Addr::from(tpa) },
        eth_trailer: None,
    }
}

/// The frame bytes that change when one byte of a numeric field changes: (field byte k, wire byte) pairs.
fn probe(nbytes: usize, build: &dyn Fn(u64) -> Vec<u8>) -> Vec<(usize, usize)> {
    let b0 = build(0);
    (0..nbytes)
        .map(|kb| {
            let b1 = build(0xFF << (8 * kb));
            let diff: Vec<usize> = (0..b0.len()).filter(|&j| b0[j] != b1[j]).collect();
            assert_eq!(diff.len(), 1, "one wire byte per field byte");
            assert!(b0[diff[0]] == 0 && b1[diff[0]] == 0xFF);
            (kb, diff[0])
        })
        .collect()
}

/// Layout of the request, all from the golden builder: the byte map beat -> [`ArpReq`], the bytes every
/// request for any addresses has (mask and values over the first [`ARP_FRAME_BYTES`]), and the fixed
/// header bytes of an ARP frame without and with an 802.1Q tag (for the `ignored` counter).
pub struct ArpLayout {
    pub parse: Vec<ByteSrc>,
    pub req_mask: [u8; 64],
    pub req_tmpl: [u8; 64],
    /// the same bytes of a reply (oper 2)
    pub rep_tmpl: [u8; 64],
    pub et_mask: [u8; 64],
    pub et_tmpl: [u8; 64],
    pub vet_mask: [u8; 64],
    pub vet_tmpl: [u8; 64],
}

/// The fixed bytes of an Ethernet header with ethertype ARP: the header bytes that change with neither
/// address nor the tag's TCI (the ethertype and, when tagged, the TPID), as (mask, values).
fn eth_arp_template(tagged: bool) -> ([u8; 64], [u8; 64]) {
    let build = |dst: u64, src: u64, tci: u16| {
        let vlan = tagged.then_some(testbench::wire::frame::VlanTag { tci });
        let mut out = Vec::new();
        Ethernet { dst: mac_of(dst), src: mac_of(src), vlan }.build(ETHERTYPE_ARP, &mut out);
        out
    };
    let base = build(0, 0, 0);
    let mut variable = vec![false; base.len()];
    for (_, w) in probe(6, &|v| build(v, 0, 0)).into_iter().chain(probe(6, &|v| build(0, v, 0))) {
        variable[w] = true;
    }
    if tagged {
        for (_, w) in probe(2, &|v| build(0, 0, v as u16)) {
            variable[w] = true;
        }
    }
    let (mut m, mut t) = ([0u8; 64], [0u8; 64]);
    for j in (0..base.len()).filter(|&j| !variable[j]) {
        m[j] = 0xFF;
        t[j] = base[j];
    }
    (m, t)
}

pub fn arp_layout() -> ArpLayout {
    let f = ArpReq::default();
    let req = |dst: u64, src: u64, sha: u64, spa: u64, tha: u64, tpa: u64| {
        golden_arp(ARP_OP_REQUEST, dst, src, sha, spa as u32, tha, tpa as u32).build()
    };
    let mut parse = vec![ByteSrc::Const(0); REQ_BITS / 8];
    let mut variable = [false; 64];
    let fields: [(usize, usize, Box<dyn Fn(u64) -> Vec<u8>>); 6] = [
        (usize::MAX, 6, Box::new(|v| req(v, 0, 0, 0, 0, 0))),
        (usize::MAX, 6, Box::new(|v| req(0, v, 0, 0, 0, 0))),
        (f.get_my_offset_sha(), 6, Box::new(|v| req(0, 0, v, 0, 0, 0))),
        (f.get_my_offset_spa(), 4, Box::new(|v| req(0, 0, 0, v, 0, 0))),
        (usize::MAX, 6, Box::new(|v| req(0, 0, 0, 0, v, 0))),
        (f.get_my_offset_tpa(), 4, Box::new(|v| req(0, 0, 0, 0, 0, v))),
    ];
    for (off, n, build) in fields.iter() {
        for (kb, wire) in probe(*n, build.as_ref()) {
            variable[wire] = true;
            if *off != usize::MAX {
                parse[off / 8 + kb] = ByteSrc::In(8 * wire);
            }
        }
    }
    let base = req(0, 0, 0, 0, 0, 0);
    let rbase = golden_arp(ARP_OP_REPLY, 0, 0, 0, 0, 0, 0).build();
    let (mut req_mask, mut req_tmpl, mut rep_tmpl) = ([0u8; 64], [0u8; 64], [0u8; 64]);
    for j in 0..ARP_FRAME_BYTES {
        if !variable[j] {
            req_mask[j] = 0xFF;
            req_tmpl[j] = base[j];
            rep_tmpl[j] = rbase[j];
        }
    }
    assert_eq!((0..64).filter(|&j| req_tmpl[j] != rep_tmpl[j]).count(), 1, "only the oper byte tells them apart");
    let (et_mask, et_tmpl) = eth_arp_template(false);
    let (vet_mask, vet_tmpl) = eth_arp_template(true);
    assert_eq!(et_mask.iter().filter(|&&m| m != 0).count(), 2, "the ethertype");
    assert_eq!(vet_mask.iter().filter(|&&m| m != 0).count(), 4, "TPID and the inner ethertype");
    assert!(ARP_FRAME_BYTES <= 8 * SLICES);
    ArpLayout { parse, req_mask, req_tmpl, rep_tmpl, et_mask, et_tmpl, vet_mask, vet_tmpl }
}

/// The byte map [`ArpReplySrc`] -> the 64-byte reply beat, probed from the golden `reply_from(..).build()`.
pub fn arp_reply_map() -> Vec<ByteSrc> {
    let s = ArpReplySrc::default();
    let reply = |x: &[u64; 4]| {
        let (sha, spa, tpa, mac) = (x[0], x[1] as u32, x[2] as u32, x[3]);
        let r = golden_arp(ARP_OP_REQUEST, 0, 0, sha, spa, 0, tpa).reply_from(mac_of(mac)).build();
        assert_eq!(r.len(), ETH_MIN_FRAME_LEN);
        r
    };
    let fields = [
        (s.get_my_offset_req() + ArpReq::default().get_my_offset_sha(), 6),
        (s.get_my_offset_req() + ArpReq::default().get_my_offset_spa(), 4),
        (s.get_my_offset_req() + ArpReq::default().get_my_offset_tpa(), 4),
        (s.get_my_offset_mac(), 6),
    ];
    let base = reply(&[0; 4]);
    let mut map: Vec<Option<ByteSrc>> = vec![None; 64];
    for (fi, (off, n)) in fields.iter().enumerate() {
        for kb in 0..*n {
            for v in [0xFFu64, 0x5A] {
                let mut x = [0u64; 4];
                x[fi] = v << (8 * kb);
                let r = reply(&x);
                for j in (0..r.len()).filter(|&j| r[j] != base[j]) {
                    assert_eq!((base[j], r[j] as u64), (0, v), "reply byte {j} is a copy of an input byte");
                    let src = ByteSrc::In(off + 8 * kb);
                    assert!(map[j].is_none() || map[j] == Some(src));
                    map[j] = Some(src);
                }
            }
        }
    }
    (0..64).map(|j| map[j].unwrap_or(ByteSrc::Const(if j < base.len() { base[j] } else { 0 }))).collect()
}

/// Our request for `tpa` from (`mac`, `ip`): the golden `ArpFrame::request` (broadcast, target hardware
/// address 0), padded to 60 bytes.
pub fn arp_query_frame(mac: u64, ip: u32, tpa: u32) -> Vec<u8> {
    let r = ArpFrame::request(mac_of(mac), Ipv4Addr::from(ip), Ipv4Addr::from(tpa)).build();
    assert_eq!(r.len(), ETH_MIN_FRAME_LEN);
    r
}

/// The byte map [`ArpQuerySrc`] -> the 64-byte request beat, probed from [`arp_query_frame`].
pub fn arp_query_map() -> Vec<ByteSrc> {
    let s = ArpQuerySrc::default();
    let fields = [(s.get_my_offset_mac(), 6), (s.get_my_offset_ip(), 4), (s.get_my_offset_tpa(), 4)];
    let build = |x: &[u64; 3]| arp_query_frame(x[0], x[1] as u32, x[2] as u32);
    let base = build(&[0; 3]);
    let mut map: Vec<Option<ByteSrc>> = vec![None; 64];
    for (fi, (off, n)) in fields.iter().enumerate() {
        for kb in 0..*n {
            for v in [0xFFu64, 0x5A] {
                let mut x = [0u64; 3];
                x[fi] = v << (8 * kb);
                let r = build(&x);
                for j in (0..r.len()).filter(|&j| r[j] != base[j]) {
                    assert_eq!((base[j], r[j] as u64), (0, v), "request byte {j} is a copy of an input byte");
                    let src = ByteSrc::In(off + 8 * kb);
                    assert!(map[j].is_none() || map[j] == Some(src));
                    map[j] = Some(src);
                }
            }
        }
    }
    (0..64).map(|j| map[j].unwrap_or(ByteSrc::Const(if j < base.len() { base[j] } else { 0 }))).collect()
}

fn slice_consts(bytes: &[u8; 64]) -> [Constant<Bits<64>>; SLICES] {
    std::array::from_fn(|i| k(u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap())))
}

/// The ARP responder (see the module documentation).
#[derive(LogicBlock)]
pub struct ArpResponder {
    pub clock: Signal<In, Clock>,
    /// RX frames (never back-pressured).
    pub s_axis: AxisSink,
    /// The MAC's error flag, valid with a frame's last beat (CMAC `rx_axis_tuser`).
    pub s_err: Signal<In, Bit>,
    pub my_mac: Signal<In, Bits<48>>,
    pub my_ip: Signal<In, Bits<32>>,
    /// ARP replies and our requests, one beat each.
    pub m_axis: AxisSource,
    pub answered: Signal<Out, Bits<32>>,
    pub ignored: Signal<Out, Bits<32>>,
    pub dropped: Signal<Out, Bits<32>>,
    /// resolution: the address to ask for, taken at a `q_go` pulse; the answer
    pub q_ip: Signal<In, Bits<32>>,
    pub q_go: Signal<In, Bit>,
    pub q_mac: Signal<Out, Bits<48>>,
    pub q_valid: Signal<Out, Bit>,
    pub requests: Signal<Out, Bits<32>>,

    in_frame: DFF<Bit>,
    parse: ByteMap<512, REQ_BITS>,
    /// a frame's first beat (S1 takes it)
    first: Signal<Local, Bit>,
    // S1 (held from a frame's first beat to its last; a1_v: a frame ended this cycle, unflagged)
    hold: DFF<Bit>,
    a1_v: DFF<Bit>,
    a1_req: DFF<ArpReq>,
    a1_mreq: [DFF<Bit>; SLICES],
    a1_mrep: [DFF<Bit>; SLICES],
    a1_marp: [DFF<Bit>; SLICES],
    a1_mvarp: [DFF<Bit>; SLICES],
    a1_keep: DFF<Bit>,
    a1_k_eth: DFF<Bit>,
    a1_k_veth: DFF<Bit>,
    // S2
    is_req: Signal<Local, Bit>,
    is_rep: Signal<Local, Bit>,
    heard: Signal<Local, Bit>,
    // resolution
    q_addr: DFF<Bits<32>>,
    q_armed: DFF<Bit>,
    q_mac_r: DFF<Bits<48>>,
    q_val: DFF<Bit>,
    q_send: DFF<Bit>,
    cnt_requests: EventCounter,
    qsrc: Signal<Local, ArpQuerySrc>,
    qform: ByteMap<QSRC_BITS, 512>,
    is_arp: Signal<Local, Bit>,
    answer: Signal<Local, Bit>,
    pend: Fifo<ArpReq, 2, 3>,
    cnt_answered: EventCounter,
    cnt_ignored: EventCounter,
    cnt_dropped: EventCounter,
    // output
    rsrc: Signal<Local, ArpReplySrc>,
    form: ByteMap<SRC_BITS, 512>,
    // constants from the golden model
    k_rmask: [Constant<Bits<64>>; SLICES],
    k_rtmpl: [Constant<Bits<64>>; SLICES],
    k_ptmpl: [Constant<Bits<64>>; SLICES],
    k_emask: [Constant<Bits<64>>; SLICES],
    k_etmpl: [Constant<Bits<64>>; SLICES],
    k_vmask: [Constant<Bits<64>>; SLICES],
    k_vtmpl: [Constant<Bits<64>>; SLICES],
    k_keep_need: Constant<Bits<64>>,
    k_keep_eth: Constant<Bits<64>>,
    k_keep_veth: Constant<Bits<64>>,
    k_keep_reply: Constant<Bits<64>>,
    k_src0: Constant<ArpReplySrc>,
}

impl Default for ArpResponder {
    fn default() -> Self {
        assert_eq!(SLICES, 6, "the loops in update() run over 6 slices");
        let l = arp_layout();
        Self {
            clock: Default::default(),
            s_axis: Default::default(),
            s_err: Default::default(),
            my_mac: Default::default(),
            my_ip: Default::default(),
            m_axis: Default::default(),
            answered: Default::default(),
            ignored: Default::default(),
            dropped: Default::default(),
            q_ip: Default::default(),
            q_go: Default::default(),
            q_mac: Default::default(),
            q_valid: Default::default(),
            requests: Default::default(),
            in_frame: Default::default(),
            parse: ByteMap::new(l.parse.clone()),
            first: Default::default(),
            hold: Default::default(),
            a1_v: Default::default(),
            a1_req: Default::default(),
            a1_mreq: Default::default(),
            a1_mrep: Default::default(),
            a1_marp: Default::default(),
            a1_mvarp: Default::default(),
            a1_keep: Default::default(),
            a1_k_eth: Default::default(),
            a1_k_veth: Default::default(),
            is_req: Default::default(),
            is_rep: Default::default(),
            heard: Default::default(),
            q_addr: Default::default(),
            q_armed: Default::default(),
            q_mac_r: Default::default(),
            q_val: Default::default(),
            q_send: Default::default(),
            cnt_requests: Default::default(),
            qsrc: Default::default(),
            qform: ByteMap::new(arp_query_map()),
            is_arp: Default::default(),
            answer: Default::default(),
            pend: Default::default(),
            cnt_answered: Default::default(),
            cnt_ignored: Default::default(),
            cnt_dropped: Default::default(),
            rsrc: Default::default(),
            form: ByteMap::new(arp_reply_map()),
            k_rmask: slice_consts(&l.req_mask),
            k_rtmpl: slice_consts(&l.req_tmpl),
            k_ptmpl: slice_consts(&l.rep_tmpl),
            k_emask: slice_consts(&l.et_mask),
            k_etmpl: slice_consts(&l.et_tmpl),
            k_vmask: slice_consts(&l.vet_mask),
            k_vtmpl: slice_consts(&l.vet_tmpl),
            k_keep_need: keep_thermo(ARP_FRAME_BYTES),
            k_keep_eth: keep_thermo(ETH_HEADER_LEN),
            k_keep_veth: keep_thermo(ETH_HEADER_LEN + VLAN_TAG_LEN),
            k_keep_reply: keep_thermo(ETH_MIN_FRAME_LEN),
            k_src0: Constant::new(ArpReplySrc::default()),
        }
    }
}

impl Logic for ArpResponder {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, in_frame, hold, a1_v, a1_req, a1_keep, a1_k_eth, a1_k_veth, q_addr, q_armed, q_mac_r, q_val, q_send);
        clock!(self, clock, pend, cnt_answered, cnt_ignored, cnt_dropped, cnt_requests);
        self.first.next = self.s_axis.tvalid.val() & !self.in_frame.q.val();
        for i in 0..6 {
            self.a1_mreq[i].clock.next = self.clock.val();
            self.a1_mrep[i].clock.next = self.clock.val();
            self.a1_mrep[i].d.next = self.a1_mrep[i].q.val();
            self.a1_marp[i].clock.next = self.clock.val();
            self.a1_mvarp[i].clock.next = self.clock.val();
            self.a1_mreq[i].d.next = self.a1_mreq[i].q.val();
            self.a1_marp[i].d.next = self.a1_marp[i].q.val();
            self.a1_mvarp[i].d.next = self.a1_mvarp[i].q.val();
            if self.first.val() {
                self.a1_mreq[i].d.next =
                    (self.s_axis.tdata.val().get_bits::<64>(64 * i) & self.k_rmask[i].val()) == self.k_rtmpl[i].val();
                self.a1_mrep[i].d.next =
                    (self.s_axis.tdata.val().get_bits::<64>(64 * i) & self.k_rmask[i].val()) == self.k_ptmpl[i].val();
                self.a1_marp[i].d.next =
                    (self.s_axis.tdata.val().get_bits::<64>(64 * i) & self.k_emask[i].val()) == self.k_etmpl[i].val();
                self.a1_mvarp[i].d.next =
                    (self.s_axis.tdata.val().get_bits::<64>(64 * i) & self.k_vmask[i].val()) == self.k_vtmpl[i].val();
            }
        }
        self.s_axis.tready.next = true;

        // ---- S1: the first beat of each frame, held until its last ----
        if self.s_axis.tvalid.val() {
            self.in_frame.d.next = !self.s_axis.tlast.val();
        }
        // the frame ends this cycle (its first beat now or held) and the MAC did not flag it
        self.a1_v.d.next = self.s_axis.tvalid.val()
            & self.s_axis.tlast.val()
            & !self.s_err.val()
            & (self.first.val() | self.hold.q.val());
        if self.s_axis.tvalid.val() & self.s_axis.tlast.val() {
            self.hold.d.next = false;
        }
        self.parse.x.next = self.s_axis.tdata.val();
        if self.first.val() {
            self.hold.d.next = !self.s_axis.tlast.val();
            self.a1_req.d.next = self.parse.y.val().into();
            self.a1_keep.d.next = (self.s_axis.tkeep.val() & self.k_keep_need.val()) == self.k_keep_need.val();
            self.a1_k_eth.d.next = (self.s_axis.tkeep.val() & self.k_keep_eth.val()) == self.k_keep_eth.val();
            self.a1_k_veth.d.next = (self.s_axis.tkeep.val() & self.k_keep_veth.val()) == self.k_keep_veth.val();
        }

        // ---- S2: decide, queue the reply ----
        self.is_req.next = self.a1_keep.q.val()
            & self.a1_mreq[0].q.val()
            & self.a1_mreq[1].q.val()
            & self.a1_mreq[2].q.val()
            & self.a1_mreq[3].q.val()
            & self.a1_mreq[4].q.val()
            & self.a1_mreq[5].q.val();
        self.is_rep.next = self.a1_keep.q.val()
            & self.a1_mrep[0].q.val()
            & self.a1_mrep[1].q.val()
            & self.a1_mrep[2].q.val()
            & self.a1_mrep[3].q.val()
            & self.a1_mrep[4].q.val()
            & self.a1_mrep[5].q.val();
        self.is_arp.next = (self.a1_k_eth.q.val()
            & self.a1_marp[0].q.val()
            & self.a1_marp[1].q.val()
            & self.a1_marp[2].q.val()
            & self.a1_marp[3].q.val()
            & self.a1_marp[4].q.val()
            & self.a1_marp[5].q.val())
            | (self.a1_k_veth.q.val()
                & self.a1_mvarp[0].q.val()
                & self.a1_mvarp[1].q.val()
                & self.a1_mvarp[2].q.val()
                & self.a1_mvarp[3].q.val()
                & self.a1_mvarp[4].q.val()
                & self.a1_mvarp[5].q.val());
        self.answer.next = self.a1_v.q.val() & self.is_req.val() & (self.a1_req.q.val().tpa == self.my_ip.val());
        self.pend.din.next = self.a1_req.q.val();
        self.pend.push.next = self.answer.val();
        self.cnt_answered.inc.next = self.answer.val() & !self.pend.full.val();
        self.cnt_dropped.inc.next = self.answer.val() & self.pend.full.val();
        self.cnt_ignored.inc.next = self.a1_v.q.val() & self.is_arp.val() & !self.answer.val();

        // ---- resolution: a query, and the first ARP frame from the address asked for ----
        self.heard.next = self.a1_v.q.val()
            & (self.is_req.val() | self.is_rep.val())
            & self.q_armed.q.val()
            & (self.a1_req.q.val().spa == self.q_addr.q.val());
        if self.heard.val() {
            self.q_mac_r.d.next = self.a1_req.q.val().sha;
            self.q_val.d.next = true;
            self.q_armed.d.next = false;
        }
        if self.q_go.val() {
            self.q_addr.d.next = self.q_ip.val();
            self.q_armed.d.next = true;
            self.q_val.d.next = false;
            self.q_send.d.next = true;
        }
        self.q_mac.next = self.q_mac_r.q.val();
        self.q_valid.next = self.q_val.q.val();

        // ---- output: the reply formed from the head of the queue and our MAC, else our request ----
        self.rsrc.next = self.k_src0.val();
        self.rsrc.next.req = self.pend.dout.val();
        self.rsrc.next.mac = self.my_mac.val();
        self.form.x.next = self.rsrc.val().into();
        self.qsrc.next.mac = self.my_mac.val();
        self.qsrc.next.ip = self.my_ip.val();
        self.qsrc.next.tpa = self.q_addr.q.val();
        self.qform.x.next = self.qsrc.val().into();
        self.m_axis.tkeep.next = self.k_keep_reply.val();
        self.m_axis.tlast.next = true;
        self.m_axis.tvalid.next = !self.pend.empty.val() | self.q_send.q.val();
        self.pend.pop.next = self.m_axis.tready.val() & !self.pend.empty.val();
        self.cnt_requests.inc.next = false;
        if self.pend.empty.val() {
            self.m_axis.tdata.next = self.qform.y.val();
            if self.m_axis.tready.val() & self.q_send.q.val() & !self.q_go.val() {
                self.q_send.d.next = false;
                self.cnt_requests.inc.next = true;
            }
        } else {
            self.m_axis.tdata.next = self.form.y.val();
        }
        self.answered.next = self.cnt_answered.value.val();
        self.ignored.next = self.cnt_ignored.value.val();
        self.dropped.next = self.cnt_dropped.value.val();
        self.requests.next = self.cnt_requests.value.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::keep_bits;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;
    use testbench::wire::frame::{
        parse_ethernet, Frame, VlanTag, ARP_OP_REPLY, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN,
    };

    const MY_MAC: u64 = 0x0200_5E10_2030;
    const MY_IP: u32 = 0x0A00_0002;

    /// What the golden model says about a frame: the reply bytes, ignored (an ARP frame not answered), or
    /// none of our business.
    #[derive(Clone, Debug, PartialEq)]
    enum Verdict {
        Answer(Vec<u8>),
        Ignore,
        Other,
    }

    fn golden_verdict(bytes: &[u8]) -> Verdict {
        match Ethernet::parse(bytes) {
            Ok((_, et, _)) if et == ETHERTYPE_ARP => {}
            _ => return Verdict::Other,
        }
        match parse_ethernet(bytes) {
            Ok(Frame::Arp(a))
                if a.eth.vlan.is_none() && a.arp.oper == ARP_OP_REQUEST && u32::from(a.arp.tpa) == MY_IP =>
            {
                Verdict::Answer(a.reply_from(mac_of(MY_MAC)).build())
            }
            _ => Verdict::Ignore,
        }
    }

    #[test]
    fn layout_and_reply_map_match_the_golden_model() {
        let l = arp_layout();
        assert_eq!(u16::from_be_bytes([l.req_tmpl[12], l.req_tmpl[13]]), ETHERTYPE_ARP);
        assert_eq!(u16::from_be_bytes([l.req_tmpl[16], l.req_tmpl[17]]), ETHERTYPE_IPV4);
        assert_eq!((l.req_tmpl[18], l.req_tmpl[19], l.req_tmpl[21]), (6, 4, ARP_OP_REQUEST as u8));
        assert_eq!(l.req_mask.iter().filter(|&&m| m != 0).count(), 10, "ethertype, htype, ptype, hlen, plen, oper");
        assert_eq!(u16::from_be_bytes([l.vet_tmpl[12], l.vet_tmpl[13]]), ETHERTYPE_VLAN);
        let map = arp_reply_map();
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..500 {
            let (sha, spa, tpa, mac) = (
                rng.gen::<u64>() & 0xFFFF_FFFF_FFFF,
                rng.gen::<u32>(),
                rng.gen::<u32>(),
                rng.gen::<u64>() & 0xFFFF_FFFF_FFFF,
            );
            let req = golden_arp(ARP_OP_REQUEST, rng.gen(), rng.gen(), sha, spa, rng.gen(), tpa);
            // the parse map picks the fields out of the request
            let bytes = req.build();
            let mut packed = Bits::<REQ_BITS>::default();
            for (i, s) in l.parse.iter().enumerate() {
                if let ByteSrc::In(off) = s {
                    packed.set_bits::<8>(8 * i, bits::<8>(bytes[off / 8] as u64));
                }
            }
            let r = ArpReq::from(packed);
            assert_eq!((r.sha.to_u64(), r.spa.to_u64(), r.tpa.to_u64()), (sha, spa as u64, tpa as u64));
            // the reply map forms the golden reply
            let src: Bits<SRC_BITS> = ArpReplySrc { req: r, mac: bits(mac) }.into();
            let want = req.reply_from(mac_of(mac)).build();
            for (j, s) in map.iter().enumerate().take(ETH_MIN_FRAME_LEN) {
                let got = match *s {
                    ByteSrc::Const(c) => c,
                    ByteSrc::In(off) => src.get_bits::<8>(off).to_u64() as u8,
                };
                assert_eq!(got, want[j], "reply byte {j}");
            }
        }
    }

    /// A beat of `bytes`; past tkeep the rest of `shadow` (what a MAC may leave there, e.g. the untruncated
    /// frame), then garbage.
    fn beat(bytes: &[u8], shadow: &[u8], garbage: &mut SmallRng) -> (Bits<512>, Bits<64>) {
        let mut d = Bits::<512>::default();
        for j in 0..64 {
            let v = if j < bytes.len() {
                bytes[j]
            } else if j < shadow.len() {
                shadow[j]
            } else {
                garbage.gen()
            };
            d.set_bits::<8>(8 * j, bits::<8>(v as u64));
        }
        let keep = if bytes.len() >= 64 { u64::MAX } else { (1u64 << bytes.len()) - 1 };
        (d, keep_bits(keep))
    }

    /// One random frame of a kind that exercises one rule, and the frame it was truncated from (the bytes a
    /// MAC may leave past tkeep).
    fn random_frame(rng: &mut SmallRng) -> (Vec<u8>, Vec<u8>) {
        let f = random_frame_whole(rng);
        if rng.gen_ratio(1, 8) {
            let mut t = f.clone();
            t.truncate(rng.gen_range(0..f.len().min(ARP_FRAME_BYTES + 4)));
            (t, f)
        } else {
            (f, Vec::new())
        }
    }

    fn random_frame_whole(rng: &mut SmallRng) -> Vec<u8> {
        let mac48 = |rng: &mut SmallRng| rng.gen::<u64>() & 0xFFFF_FFFF_FFFF;
        let other_ip = |rng: &mut SmallRng| loop {
            let ip = rng.gen::<u32>();
            if ip != MY_IP {
                break ip;
            }
        };
        let dst = |rng: &mut SmallRng| match rng.gen_range(0..3) {
            0 => 0xFFFF_FFFF_FFFF,
            1 => MY_MAC,
            _ => mac48(rng),
        };
        let mut req = golden_arp(ARP_OP_REQUEST, dst(rng), mac48(rng), mac48(rng), rng.gen(), mac48(rng), MY_IP);
        if rng.gen_ratio(1, 3) {
            // padding / trailer: a longer frame, possibly several beats
            req.eth_trailer = Some((0..rng.gen_range(0..200)).map(|_| rng.gen()).collect());
        }
        match rng.gen_range(0..20) {
            0..=6 => req.build(),
            7 => {
                req.arp.tpa = Ipv4Addr::from(other_ip(rng));
                req.build()
            }
            8 => {
                req.arp.oper = ARP_OP_REPLY;
                req.build()
            }
            9 => {
                req.eth.vlan = Some(VlanTag { tci: rng.gen() });
                req.build()
            }
            10 => {
                // a fixed header byte changed (htype, ptype, hlen, plen, oper, ethertype)
                let mut b = req.build();
                let j = [12, 13, 14, 15, 16, 17, 18, 19, 20, 21][rng.gen_range(0..10)];
                b[j] ^= 1 << rng.gen_range(0..8);
                b
            }
            11 => {
                // a request for us, tagged or not (any kind may also be truncated, see random_frame)
                req.eth.vlan = rng.gen_ratio(1, 2).then(|| VlanTag { tci: rng.gen() });
                req.build()
            }
            12 | 13 => {
                // not ARP, and the ARP request for us in the second beat must not count
                let mut b = vec![0u8; 64];
                rng.fill(&mut b[..]);
                let et = [ETHERTYPE_IPV4, ETHERTYPE_IPV6, rng.gen(), ETHERTYPE_VLAN][rng.gen_range(0..4)];
                b[12..14].copy_from_slice(&et.to_be_bytes());
                b.extend(golden_arp(ARP_OP_REQUEST, 0xFFFF_FFFF_FFFF, 1, 2, 3, 0, MY_IP).build());
                b.truncate(rng.gen_range(14..b.len() + 1));
                b
            }
            14 => {
                // a runt
                (0..rng.gen_range(1..14)).map(|_| rng.gen()).collect()
            }
            _ => {
                // ARP for us from many requesters, to fill the reply FIFO
                golden_arp(ARP_OP_REQUEST, 0xFFFF_FFFF_FFFF, mac48(rng), mac48(rng), rng.gen(), 0, MY_IP).build()
            }
        }
    }

    struct Bench {
        u: ArpResponder,
        garbage: SmallRng,
        cycle: u64,
        /// the verdict of the frame in progress (given with its first beat)
        cur: Option<Verdict>,
        /// decisions due one cycle after the last beat: (cycle of the last beat, verdict)
        due: VecDeque<(u64, Verdict)>,
        want: VecDeque<Vec<u8>>,
        count: usize,
        n: [u64; 4],
        replies: u64,
    }

    impl Bench {
        fn new() -> Self {
            let mut u = ArpResponder::default();
            u.connect_all();
            u.my_mac.next = bits(MY_MAC);
            u.my_ip.next = bits(MY_IP as u64);
            Bench {
                u,
                garbage: SmallRng::seed_from_u64(99),
                cycle: 0,
                cur: None,
                due: VecDeque::new(),
                want: VecDeque::new(),
                count: 0,
                n: [0; 4],
                replies: 0,
            }
        }

        /// One cycle with this input beat (bytes, what lies past tkeep, last, verdict of its frame if it is a
        /// first beat, the MAC's error flag if it is the last).
        fn step(&mut self, input: Option<(&[u8], &[u8], bool, Option<Verdict>, bool)>, tready: bool) {
            let t = self.cycle;
            let u = &mut self.u;
            match input {
                Some((bytes, shadow, last, _, err)) => {
                    let (d, k) = beat(bytes, shadow, &mut self.garbage);
                    u.s_axis.tdata.next = d;
                    u.s_axis.tkeep.next = k;
                    u.s_axis.tlast.next = last;
                    u.s_axis.tvalid.next = true;
                    // the flag means something with the last beat only
                    u.s_err.next = if last { err } else { self.garbage.gen() };
                }
                None => {
                    u.s_axis.tvalid.next = false;
                    u.s_axis.tdata.next = bits(self.garbage.gen());
                    u.s_axis.tlast.next = self.garbage.gen();
                    u.s_err.next = self.garbage.gen();
                }
            }
            u.m_axis.tready.next = tready;
            u.clock.next = false.into();
            assert!(simulate(u, 100));
            assert!(u.s_axis.tready.val(), "never back-pressures");
            assert_eq!(u.m_axis.tvalid.val(), self.count > 0, "cycle {t}");
            let full = self.count == 4;
            if u.m_axis.tvalid.val() && tready {
                let w = self.want.pop_front().unwrap();
                assert_eq!(u.m_axis.tkeep.val(), keep_bits((1 << ETH_MIN_FRAME_LEN) - 1), "cycle {t}");
                assert!(u.m_axis.tlast.val());
                let d = u.m_axis.tdata.val();
                let got: Vec<u8> = (0..ETH_MIN_FRAME_LEN).map(|j| d.get_bits::<8>(8 * j).to_u64() as u8).collect();
                assert_eq!(got, w, "cycle {t}: the reply, byte for byte");
                self.count -= 1;
                self.replies += 1;
            }
            // S1 registers the first beat, S2 decides in the cycle after the last
            if self.due.front().is_some_and(|d| d.0 + 1 == t) {
                match self.due.pop_front().unwrap().1 {
                    Verdict::Answer(r) if full => {
                        let _ = r;
                        self.n[2] += 1;
                    }
                    Verdict::Answer(r) => {
                        self.want.push_back(r);
                        self.count += 1;
                        self.n[0] += 1;
                    }
                    Verdict::Ignore => self.n[1] += 1,
                    Verdict::Other => self.n[3] += 1,
                }
            }
            if let Some((_, _, last, v, err)) = input {
                if v.is_some() {
                    self.cur = v;
                }
                if last {
                    // a frame the MAC flagged is none of ARP's business (RX Parse counts it)
                    let v = self.cur.take().expect("a last beat without a first");
                    self.due.push_back((t, if err { Verdict::Other } else { v }));
                }
            }
            u.clock.next = true.into();
            assert!(simulate(u, 100));
            self.cycle += 1;
        }

        fn check_counters(&mut self) {
            for _ in 0..4 {
                self.step(None, true);
            }
            let u = &self.u;
            assert_eq!(
                [u.answered.val().to_u64(), u.ignored.val().to_u64(), u.dropped.val().to_u64()],
                [self.n[0], self.n[1], self.n[2]]
            );
        }
    }

    /// A golden request for our IP: the reply is the golden model's, byte for byte; for another IP, nothing.
    #[test]
    fn answers_a_golden_request_byte_for_byte() {
        let mut b = Bench::new();
        let req = ArpFrame::request(mac_of(0x5254_0012_3456), Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::from(MY_IP));
        let bytes = req.build();
        let want = req.reply_from(mac_of(MY_MAC)).build();
        assert_eq!(golden_verdict(&bytes), Verdict::Answer(want.clone()));
        b.step(Some((&bytes, &[], true, Some(golden_verdict(&bytes)), false)), true);
        let other = ArpFrame::request(mac_of(0x5254_0012_3456), Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 3));
        let ob = other.build();
        b.step(Some((&ob, &[], true, Some(golden_verdict(&ob)), false)), true);
        // the same request with a bad FCS (the MAC's flag): not answered, not counted
        b.step(Some((&bytes, &[], true, Some(golden_verdict(&bytes)), true)), true);
        for _ in 0..6 {
            b.step(None, true);
        }
        assert_eq!(b.replies, 1);
        b.check_counters();
        assert_eq!(b.n, [1, 1, 0, 1]);
    }

    /// Random frames of every kind, several beats each or one, back to back (a frame every cycle) or with
    /// gaps, garbage past tkeep, the reply port with random backpressure and long stalls that overflow the
    /// reply FIFO. Every reply against the golden model, the FIFO occupancy cycle by cycle, the counters.
    #[test]
    fn random_frames_against_the_golden_model() {
        let mut rng = SmallRng::seed_from_u64(0xA59);
        let mut b = Bench::new();
        let mut multi_beat_answers = 0;
        let mut b2b_firsts = 0;
        let mut prev_first = false;
        let mut flagged_requests = 0;
        for f in 0..6000u64 {
            let (bytes, shadow) = random_frame(&mut rng);
            let v = golden_verdict(&bytes);
            // one frame in 10 with the MAC's error flag
            let err = rng.gen_ratio(1, 10);
            if matches!(v, Verdict::Answer(_)) && bytes.len() > 64 && !err {
                multi_beat_answers += 1;
            }
            if matches!(v, Verdict::Answer(_)) && err {
                flagged_requests += 1;
            }
            let back_to_back = (f / 300) % 2 == 0;
            let beats: Vec<&[u8]> = if bytes.is_empty() { vec![&bytes[..]] } else { bytes.chunks(64).collect() };
            // past tkeep of the last beat: the rest of the untruncated frame at the same beat offset
            let last_off = 64 * (beats.len() - 1);
            let shadow_last: &[u8] = if shadow.len() > last_off { &shadow[last_off..] } else { &[] };
            let nb = beats.len();
            for (i, chunk) in beats.into_iter().enumerate() {
                while !back_to_back && rng.gen_ratio(1, 3) {
                    let ready = rng.gen_ratio(1, 2) && b.cycle % 400 >= 60;
                    b.step(None, ready);
                    prev_first = false;
                }
                let ready = if b.cycle % 400 < 60 { false } else { rng.gen_ratio(3, 4) };
                let first = i == 0;
                if first && prev_first {
                    b2b_firsts += 1;
                }
                prev_first = first;
                let sh = if i + 1 == nb { shadow_last } else { &[] };
                b.step(Some((chunk, sh, i + 1 == nb, if first { Some(v.clone()) } else { None }, err)), ready);
            }
        }
        for _ in 0..20 {
            b.step(None, true);
        }
        assert!(b.want.is_empty());
        b.check_counters();
        eprintln!(
            "answered {}, ignored {}, dropped {}, other {}, multi-beat answered {multi_beat_answers}, first beats in consecutive cycles {b2b_firsts}, requests for us flagged by the MAC {flagged_requests}",
            b.n[0], b.n[1], b.n[2], b.n[3]
        );
        assert!(b.n.iter().all(|&x| x > 200) && multi_beat_answers > 100 && b2b_firsts > 1000 && flagged_requests > 100);
    }

    /// Resolution: a query sends the golden request (after a reply already queued, and held while the port
    /// stalls); the first whole, unflagged ARP frame from the address asked for gives its MAC, nothing else
    /// does, and a new query forgets the answer.
    #[test]
    fn resolves_a_neighbour_from_the_golden_frames() {
        let peer_ip = Ipv4Addr::new(10, 0, 0, 1);
        let peer_mac = 0x5254_0012_3456u64;
        let mut u = ArpResponder::default();
        u.connect_all();
        u.my_mac.next = bits(MY_MAC);
        u.my_ip.next = bits(MY_IP as u64);
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut cyc = |u: &mut ArpResponder, frame: Option<(&[u8], bool)>, go: Option<Ipv4Addr>, ready: bool, out: &mut Vec<Vec<u8>>| {
            u.s_axis.tvalid.next = frame.is_some();
            if let Some((f, err)) = frame {
                let mut d = Bits::<512>::default();
                for (j, &x) in f.iter().enumerate() {
                    d.set_bits::<8>(8 * j, bits::<8>(x as u64));
                }
                u.s_axis.tdata.next = d;
                u.s_axis.tkeep.next = keep_bits((1u64 << f.len()) - 1);
                u.s_axis.tlast.next = true;
                u.s_err.next = err;
            }
            u.q_go.next = go.is_some();
            u.q_ip.next = bits(go.map_or(0, |ip| u32::from(ip) as u64));
            u.m_axis.tready.next = ready;
            u.clock.next = false.into();
            assert!(simulate(u, 100));
            if u.m_axis.tvalid.val() && ready {
                let d = u.m_axis.tdata.val();
                out.push((0..ETH_MIN_FRAME_LEN).map(|j| d.get_bits::<8>(8 * j).to_u64() as u8).collect());
            }
            u.clock.next = true.into();
            assert!(simulate(u, 100));
        };
        let idle = |u: &mut ArpResponder, n: usize, ready: bool, out: &mut Vec<Vec<u8>>, cyc: &mut dyn FnMut(&mut ArpResponder, Option<(&[u8], bool)>, Option<Ipv4Addr>, bool, &mut Vec<Vec<u8>>)| {
            for _ in 0..n {
                cyc(u, None, None, ready, out);
            }
        };
        // a request for us arrives, then the query is written while the port stalls
        let asks_us = ArpFrame::request(mac_of(0x0200_0000_0099), Ipv4Addr::new(10, 0, 0, 9), Ipv4Addr::from(MY_IP));
        cyc(&mut u, Some((&asks_us.build(), false)), None, false, &mut out);
        cyc(&mut u, None, Some(peer_ip), false, &mut out);
        idle(&mut u, 5, false, &mut out, &mut cyc);
        assert!(out.is_empty() && u.m_axis.tvalid.val(), "held while the port stalls");
        idle(&mut u, 3, true, &mut out, &mut cyc);
        let ours = ArpFrame::request(mac_of(MY_MAC), Ipv4Addr::from(MY_IP), peer_ip).build();
        assert_eq!(out, vec![asks_us.reply_from(mac_of(MY_MAC)).build(), ours.clone()], "the reply first, then our request, byte for byte");
        assert_eq!(ours[..6], [0xFF; 6], "broadcast");
        assert_eq!(u.requests.val().to_u64(), 1);
        assert!(!u.q_valid.val());
        // replies that do not count: from another address, the right one flagged by the MAC
        let req = ArpFrame::request(mac_of(MY_MAC), Ipv4Addr::from(MY_IP), peer_ip);
        let other = ArpFrame::request(mac_of(MY_MAC), Ipv4Addr::from(MY_IP), Ipv4Addr::new(10, 0, 0, 3)).reply_from(mac_of(0x0200_0000_0003));
        cyc(&mut u, Some((&other.build(), false)), None, true, &mut out);
        cyc(&mut u, Some((&req.reply_from(mac_of(peer_mac)).build(), true)), None, true, &mut out);
        idle(&mut u, 3, true, &mut out, &mut cyc);
        assert!(!u.q_valid.val(), "no answer from another address or a flagged frame");
        // the reply: its MAC; a later one from the same address changes nothing
        cyc(&mut u, Some((&req.reply_from(mac_of(peer_mac)).build(), false)), None, true, &mut out);
        idle(&mut u, 3, true, &mut out, &mut cyc);
        assert!(u.q_valid.val() && u.q_mac.val().to_u64() == peer_mac);
        cyc(&mut u, Some((&req.reply_from(mac_of(0x0200_0000_00EE)).build(), false)), None, true, &mut out);
        idle(&mut u, 3, true, &mut out, &mut cyc);
        assert_eq!(u.q_mac.val().to_u64(), peer_mac);
        // a new query forgets it; the neighbour asking for us answers it too
        cyc(&mut u, None, Some(peer_ip), true, &mut out);
        idle(&mut u, 2, true, &mut out, &mut cyc);
        assert!(!u.q_valid.val() && u.requests.val().to_u64() == 2 && out.last() == Some(&ours));
        let from_peer = ArpFrame::request(mac_of(0x0200_0000_0042), peer_ip, Ipv4Addr::from(MY_IP));
        cyc(&mut u, Some((&from_peer.build(), false)), None, true, &mut out);
        idle(&mut u, 4, true, &mut out, &mut cyc);
        assert!(u.q_valid.val() && u.q_mac.val().to_u64() == 0x0200_0000_0042);
        assert_eq!(out.last(), Some(&from_peer.reply_from(mac_of(MY_MAC)).build()), "and is answered");
    }
}
