//! Neighbour discovery responder: answers an IPv6 Neighbor Solicitation for our address with a Neighbor
//! Advertisement, as the ARP responder answers ARP for IPv4, by the rules of the golden model
//! (`testbench::wire::ndp::neighbour_advertisement`), byte for byte.
//!
//! - Watches the RX AXI4-Stream (`s_axis`) and never back-pressures it. A frame whose first beat is IPv6,
//!   next header ICMPv6, hop limit 255, ICMPv6 type 135 code 0, and which ends with its second beat (a
//!   solicitation the rules answer is 78..126 bytes) with our address as the target, is kept: its two beats
//!   in two registers. One solicitation is worked on at a time; one that comes meanwhile (or is for another
//!   address, one beat, longer than two, or flagged by the MAC) is counted in `ignored`. (A neighbour asks
//!   again after a second when it gets no answer: Linux sends three solicitations.)
//! - **Checksum, serially.** The ICMPv6 checksum is checked over the pseudo-header and the message one 16-bit
//!   word per cycle (a shift register of frame bytes 22..128: source, destination, message), summed by byte
//!   column (the word's high bytes and low bytes apart, 14-bit sums: no add wider than 14 bits), then folded
//!   in four steps; a right checksum folds to 0xFFFF. The advertisement's checksum is summed alongside from its
//!   27 variable words (our address twice, the solicitation's source, our MAC) and the constants. The words
//!   the message does not have are not added, and each added word's bytes must be in the frame (else the
//!   solicitation is cut short). 53 cycles a solicitation; ND is rare.
//! - **Answer** when the checksum is right, the payload length is 24..=72 and a multiple of 8, the target is
//!   `my_ip6`, the source is unicast (not ::, not multicast) and IPv6 is on (`v6_on`): the advertisement's two
//!   beats (86 bytes, a [`ByteMap`] from the golden layout) leave on `m_axis`.
//!
//! `my_mac` and `my_ip6` are numbers whose most significant byte is the first on the wire.

use crate::common::axis::{AxisSink, AxisSource};
use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::consts::{k, keep_thermo};
use crate::common::counter::EventCounter;
use rust_hdl::prelude::*;
use std::net::Ipv6Addr;
use testbench::wire::frame::{MacAddr, ETHERTYPE_IPV6, ETH_HEADER_LEN, IPV6_HEADER_LEN};
use testbench::wire::ndp::{
    nd_frame, IP_PROTO_ICMPV6, ND_ADVERT, ND_ADVERT_FLAGS, ND_ADVERT_LEN, ND_HOP_LIMIT, ND_OPT_TLLA, ND_SOLICIT,
    ND_SOLICIT_LEN, ND_SOLICIT_MAX_LEN,
};

/// Bytes of our advertisement.
pub const ND_REPLY_BYTES: usize = ETH_HEADER_LEN + IPV6_HEADER_LEN + ND_ADVERT_LEN;
/// Cycles of the serial checksum: the longest solicitation's words (source, destination, message).
const SUM_WORDS: usize = 16 + ND_SOLICIT_MAX_LEN / 2;
/// Variable words of the advertisement's checksum (our address as source and target, the destination, our MAC).
const REP_WORDS: usize = 8 + 8 + 8 + 3;
/// Frame bytes 22..128 (source, destination, ICMPv6 message) in the checksum shift register.
const CHK_BYTES: usize = 128 - 22;
const CHK_BITS: usize = 8 * CHK_BYTES;

/// What the advertisement's variable bytes come from (numbers, the first wire byte most significant).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct NdRep {
    /// The solicitation's source MAC and IPv6 address: the advertisement's destination.
    pub dst_mac: Bits<48>,
    pub dst_ip: Bits<128>,
    pub my_mac: Bits<48>,
    pub my_ip: Bits<128>,
    pub csum: Bits<16>,
}
const REP_BITS: usize = <NdRep as Synth>::BITS;

/// Big-endian byte sources of a `bytes`-byte field at bit offset `off` of the input.
fn be(off: usize, bytes: usize) -> impl Iterator<Item = ByteSrc> {
    (0..bytes).map(move |i| ByteSrc::In(off + 8 * (bytes - 1 - i)))
}

/// The advertisement's bytes (two beats, 128): the golden advertisement's constant bytes, the variable ones
/// from [`NdRep`], zeros past its 86 bytes.
pub fn reply_map() -> Vec<ByteSrc> {
    let r = NdRep::default();
    let mut msg = vec![ND_ADVERT, 0, 0, 0, ND_ADVERT_FLAGS, 0, 0, 0];
    msg.extend_from_slice(&[0; 16]);
    msg.extend_from_slice(&[ND_OPT_TLLA, 1, 0, 0, 0, 0, 0, 0]);
    let golden = nd_frame(MacAddr([0; 6]), MacAddr([0; 6]), Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED, &mut msg);
    assert_eq!(golden.len(), ND_REPLY_BYTES);
    let mut m: Vec<ByteSrc> = golden.iter().map(|b| ByteSrc::Const(*b)).collect();
    let mut put = |at: usize, src: Vec<ByteSrc>| {
        for (i, s) in src.into_iter().enumerate() {
            m[at + i] = s;
        }
    };
    let icmp = ETH_HEADER_LEN + IPV6_HEADER_LEN;
    put(0, be(r.get_my_offset_dst_mac(), 6).collect());
    put(6, be(r.get_my_offset_my_mac(), 6).collect());
    put(ETH_HEADER_LEN + 8, be(r.get_my_offset_my_ip(), 16).collect());
    put(ETH_HEADER_LEN + 24, be(r.get_my_offset_dst_ip(), 16).collect());
    put(icmp + 2, be(r.get_my_offset_csum(), 2).collect());
    put(icmp + 8, be(r.get_my_offset_my_ip(), 16).collect());
    put(icmp + 26, be(r.get_my_offset_my_mac(), 6).collect());
    m.resize(128, ByteSrc::Const(0));
    m
}

/// The advertisement's variable checksum words in wire order (our address, the destination, our address as
/// the target, our MAC): byte j of the shift register is the j-th byte on the wire.
pub fn rep_words_map() -> Vec<ByteSrc> {
    let r = NdRep::default();
    let mut m: Vec<ByteSrc> = Vec::new();
    m.extend(be(r.get_my_offset_my_ip(), 16));
    m.extend(be(r.get_my_offset_dst_ip(), 16));
    m.extend(be(r.get_my_offset_my_ip(), 16));
    m.extend(be(r.get_my_offset_my_mac(), 6));
    assert_eq!(m.len(), 2 * REP_WORDS);
    m
}

/// A big-endian field of the solicitation's two beats: `bytes` bytes from frame byte `at`.
pub fn sol_field(at: usize, bytes: usize) -> Vec<ByteSrc> {
    be(8 * at, bytes).collect()
}

/// The advertisement's checksum columns before its variable words: the high and low bytes of the constant
/// words (ICMPv6 type, flags, the option's type and length; the pseudo-header's length and next header).
fn rep_const_columns() -> (u64, u64) {
    let words = [
        u16::from(ND_ADVERT) << 8,
        u16::from(ND_ADVERT_FLAGS) << 8,
        u16::from(ND_OPT_TLLA) << 8 | 1,
        ND_ADVERT_LEN as u16,
        u16::from(IP_PROTO_ICMPV6),
    ];
    (words.iter().map(|w| u64::from(w >> 8)).sum(), words.iter().map(|w| u64::from(w & 0xFF)).sum())
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum NdState {
    Idle,
    Load,
    Sum,
    Fold,
    Decide,
    Beat0,
    Beat1,
}

crate::logic_block! {
    /// Neighbour discovery responder (see the module documentation).
    pub struct NdResponder {
        pub clock: Signal<In, Clock>,
        pub s_axis: AxisSink,
        /// The MAC's error flag with a frame's last beat.
        pub s_err: Signal<In, Bit>,
        pub my_mac: Signal<In, Bits<48>>,
        pub my_ip6: Signal<In, Bits<128>>,
        pub v6_on: Signal<In, Bit>,
        pub m_axis: AxisSource,
        /// Advertisements sent, and solicitations (by their first beat) not answered.
        pub answered: Signal<Out, Bits<32>>,
        pub ignored: Signal<Out, Bits<32>>,

        // input: a candidate's two beats
        in_frame: DFF<Bit>,
        nb: DFF<Bits<2>>,
        /// the frame's first beat looked like a solicitation (`seen`), and was kept (`cand`: the responder was idle)
        seen: DFF<Bit>,
        cand: DFF<Bit>,
        fr0: DFF<Bits<512>>,
        fr1: DFF<Bits<512>>,
        kp1: DFF<Bits<64>>,
        look: Signal<Local, Bit>,
        go: Signal<Local, Bit>,
        /// the target of the solicitation whose second beat is on the input (so that one for another address
        /// does not keep the responder busy)
        l_in: Signal<Local, Bits<1024>>,
        f_tgt_in: ByteMap<1024, 128> = ByteMap::new(sol_field(ETH_HEADER_LEN + IPV6_HEADER_LEN + 8, 16)),
        // work
        state: DFF<NdState>,
        l_fr: Signal<Local, Bits<1024>>,
        /// the solicitation's source MAC and address, payload length, target
        f_mac: ByteMap<1024, 48> = ByteMap::new(sol_field(6, 6)),
        f_plen: ByteMap<1024, 16> = ByteMap::new(sol_field(ETH_HEADER_LEN + 4, 2)),
        f_src: ByteMap<1024, 128> = ByteMap::new(sol_field(ETH_HEADER_LEN + 8, 16)),
        f_tgt: ByteMap<1024, 128> = ByteMap::new(sol_field(ETH_HEADER_LEN + IPV6_HEADER_LEN + 8, 16)),
        l_plen: Signal<Local, Bits<16>>,
        l_src: Signal<Local, Bits<128>>,
        l_rep: Signal<Local, NdRep>,
        words: ByteMap<REP_BITS, { 16 * REP_WORDS }> = ByteMap::new(rep_words_map()),
        chk: DFF<Bits<CHK_BITS>>,
        kp: DFF<Bits<CHK_BYTES>>,
        rsh: DFF<Bits<{ 16 * REP_WORDS }>>,
        n: DFF<Bits<7>>,
        idx: DFF<Bits<7>>,
        fidx: DFF<Bits<3>>,
        hc: DFF<Bits<14>>,
        lc: DFF<Bits<14>>,
        rh: DFF<Bits<14>>,
        rl: DFF<Bits<14>>,
        short: DFF<Bit>,
        len_ok: DFF<Bit>,
        tgt_ok: DFF<Bit>,
        src_ok: DFF<Bit>,
        rep: DFF<NdRep>,
        rmap: ByteMap<REP_BITS, 1024> = ByteMap::new(reply_map()),
        l_out: Signal<Local, Bits<1024>>,
        n_ans: EventCounter,
        n_ign: EventCounter,
        /// refusals not yet counted: the input side and the checks may refuse one each in the same cycle, and
        /// the counter takes one a cycle
        ign_in: Signal<Local, Bit>,
        ign_dec: Signal<Local, Bit>,
        ign_q: DFF<Bits<3>>,
        l_ign_n: Signal<Local, Bits<3>>,
        // constants from the golden model
        k_type: Constant<Bits<16>> = k(ETHERTYPE_IPV6.swap_bytes() as u64),
        k_nh: Constant<Bits<8>> = k(IP_PROTO_ICMPV6 as u64),
        k_hl: Constant<Bits<8>> = k(ND_HOP_LIMIT as u64),
        k_ns: Constant<Bits<8>> = k(ND_SOLICIT as u64),
        k0_8: Constant<Bits<8>> = k(0),
        k0_6: Constant<Bits<6>> = k(0),
        k_ver: Constant<Bits<4>> = k(6),
        k0_3b: Constant<Bits<3>> = k(0),
        k1_3b: Constant<Bits<3>> = k(1),
        k0_128: Constant<Bits<128>> = Constant::new(Bits::<128>::default()),
        k_ff: Constant<Bits<8>> = k(0xFF),
        k_min_len: Constant<Bits<8>> = k(ND_SOLICIT_LEN as u64),
        k_max_len: Constant<Bits<8>> = k(ND_SOLICIT_MAX_LEN as u64),
        k0_3: Constant<Bits<3>> = k(0),
        k1_2: Constant<Bits<2>> = k(1),
        k3_2: Constant<Bits<2>> = k(3),
        k_nh14: Constant<Bits<14>> = k(IP_PROTO_ICMPV6 as u64),
        k16_7: Constant<Bits<7>> = k(16),
        k0_7: Constant<Bits<7>> = k(0),
        k1_7: Constant<Bits<7>> = k(1),
        k_last_word: Constant<Bits<7>> = k(SUM_WORDS as u64 - 1),
        k_rep_words: Constant<Bits<7>> = k(REP_WORDS as u64),
        k1_3: Constant<Bits<3>> = k(1),
        k_last_fold: Constant<Bits<3>> = k(3),
        k_rh0: Constant<Bits<14>> = k(rep_const_columns().0),
        k_rl0: Constant<Bits<14>> = k(rep_const_columns().1),
        k_head_kp: Constant<Bits<CHK_BYTES>> = {
            // bytes 22..64 of a two-beat frame are all there
            let mut b = Bits::<CHK_BYTES>::default();
            for i in 0..64 - 22 {
                b.set_bits::<1>(i, bits::<1>(1));
            }
            Constant::new(b)
        },
        k_full: Constant<Bits<64>> = keep_thermo(64),
        k_tail: Constant<Bits<64>> = keep_thermo(ND_REPLY_BYTES - 64),
    }
}

impl Logic for NdResponder {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, in_frame, nb, seen, cand, fr0, fr1, kp1, state, chk, kp, rsh, n, idx, fidx, hc, lc, rh, rl, short,
            len_ok, tgt_ok, src_ok, rep, ign_q
        );
        clock!(self, clock, n_ans, n_ign);
        self.n_ans.inc.next = false;
        self.ign_in.next = false;
        self.ign_dec.next = false;
        self.answered.next = self.n_ans.value.val();
        self.ignored.next = self.n_ign.value.val();
        self.s_axis.tready.next = true;

        // ---- input: a solicitation's first beat, then its second (the last) ----
        self.look.next = (self.s_axis.tdata.val().get_bits::<16>(96) == self.k_type.val())
            & (self.s_axis.tdata.val().get_bits::<4>(116) == self.k_ver.val())
            & (self.s_axis.tdata.val().get_bits::<8>(160) == self.k_nh.val())
            & (self.s_axis.tdata.val().get_bits::<8>(168) == self.k_hl.val())
            & (self.s_axis.tdata.val().get_bits::<8>(432) == self.k_ns.val())
            & (self.s_axis.tdata.val().get_bits::<8>(440) == self.k0_8.val());
        self.go.next = false;
        self.l_in.next = (bit_cast::<1024, 512>(self.s_axis.tdata.val()) << 512) | bit_cast::<1024, 512>(self.fr0.q.val());
        self.f_tgt_in.x.next = self.l_in.val();
        if self.s_axis.tvalid.val() {
            self.in_frame.d.next = !self.s_axis.tlast.val();
            if !self.in_frame.q.val() {
                self.seen.d.next = self.look.val();
                self.cand.d.next = self.look.val() & (self.state.q.val() == NdState::Idle);
                self.nb.d.next = self.k1_2.val();
                if self.state.q.val() == NdState::Idle {
                    self.fr0.d.next = self.s_axis.tdata.val();
                }
                // one beat: too short for a solicitation
                if self.s_axis.tlast.val() & self.look.val() {
                    self.ign_in.next = true;
                }
            } else {
                if self.nb.q.val() != self.k3_2.val() {
                    self.nb.d.next = self.nb.q.val() + self.k1_2.val();
                }
                if (self.nb.q.val() == self.k1_2.val()) & (self.state.q.val() == NdState::Idle) {
                    self.fr1.d.next = self.s_axis.tdata.val();
                    self.kp1.d.next = self.s_axis.tkeep.val();
                }
                if self.s_axis.tlast.val() & self.seen.q.val() {
                    if self.cand.q.val()
                        & (self.nb.q.val() == self.k1_2.val())
                        & (self.state.q.val() == NdState::Idle)
                        & !self.s_err.val()
                        & (self.f_tgt_in.y.val() == self.my_ip6.val())
                    {
                        self.go.next = true;
                    } else {
                        self.ign_in.next = true;
                    }
                }
            }
        }

        // ---- the kept solicitation ----
        self.l_fr.next = (bit_cast::<1024, 512>(self.fr1.q.val()) << 512) | bit_cast::<1024, 512>(self.fr0.q.val());
        self.f_mac.x.next = self.l_fr.val();
        self.f_plen.x.next = self.l_fr.val();
        self.f_src.x.next = self.l_fr.val();
        self.f_tgt.x.next = self.l_fr.val();
        self.l_plen.next = self.f_plen.y.val();
        self.l_src.next = self.f_src.y.val();
        self.l_rep.next.dst_mac = self.f_mac.y.val();
        self.l_rep.next.dst_ip = self.f_src.y.val();
        self.l_rep.next.my_mac = self.my_mac.val();
        self.l_rep.next.my_ip = self.my_ip6.val();
        self.l_rep.next.csum = self.rep.q.val().csum;
        self.words.x.next = self.l_rep.val().into();
        self.rmap.x.next = self.rep.q.val().into();
        self.l_out.next = self.rmap.y.val();

        self.m_axis.tvalid.next = false;
        self.m_axis.tlast.next = false;
        self.m_axis.tdata.next = self.l_out.val().get_bits::<512>(0);
        self.m_axis.tkeep.next = self.k_full.val();
        match self.state.q.val() {
            NdState::Idle => {
                if self.go.val() {
                    self.state.d.next = NdState::Load;
                }
            }
            NdState::Load => {
                self.chk.d.next = self.l_fr.val().get_bits::<CHK_BITS>(8 * 22);
                self.kp.d.next = (bit_cast::<CHK_BYTES, 64>(self.kp1.q.val()) << (64 - 22)) | self.k_head_kp.val();
                self.rsh.d.next = self.words.y.val();
                self.rep.d.next = self.l_rep.val();
                // words: source and destination, then the message (plen / 2; more than the longest is refused)
                self.n.d.next = self.k16_7.val() + bit_cast::<7, 6>(self.l_plen.val().get_bits::<6>(1));
                self.len_ok.d.next = (self.l_plen.val().get_bits::<8>(8) == self.k0_8.val())
                    & (self.l_plen.val().get_bits::<3>(0) == self.k0_3.val())
                    & (self.l_plen.val().get_bits::<8>(0) >= self.k_min_len.val())
                    & (self.l_plen.val().get_bits::<8>(0) <= self.k_max_len.val());
                self.tgt_ok.d.next = self.f_tgt.y.val() == self.my_ip6.val();
                self.src_ok.d.next = (self.l_src.val() != self.k0_128.val()) & (self.l_src.val().get_bits::<8>(120) != self.k_ff.val());
                // the pseudo-header's upper-layer length and next header
                self.hc.d.next = bit_cast::<14, 8>(self.l_plen.val().get_bits::<8>(8));
                self.lc.d.next = bit_cast::<14, 8>(self.l_plen.val().get_bits::<8>(0)) + self.k_nh14.val();
                self.rh.d.next = self.k_rh0.val();
                self.rl.d.next = self.k_rl0.val();
                self.idx.d.next = self.k0_7.val();
                self.short.d.next = false;
                self.state.d.next = NdState::Sum;
            }
            NdState::Sum => {
                if self.idx.q.val() < self.n.q.val() {
                    self.hc.d.next = self.hc.q.val() + bit_cast::<14, 8>(self.chk.q.val().get_bits::<8>(0));
                    self.lc.d.next = self.lc.q.val() + bit_cast::<14, 8>(self.chk.q.val().get_bits::<8>(8));
                    if self.kp.q.val().get_bits::<2>(0) != self.k3_2.val() {
                        self.short.d.next = true;
                    }
                }
                if self.idx.q.val() < self.k_rep_words.val() {
                    self.rh.d.next = self.rh.q.val() + bit_cast::<14, 8>(self.rsh.q.val().get_bits::<8>(0));
                    self.rl.d.next = self.rl.q.val() + bit_cast::<14, 8>(self.rsh.q.val().get_bits::<8>(8));
                }
                self.chk.d.next = self.chk.q.val() >> 16;
                self.kp.d.next = self.kp.q.val() >> 2;
                self.rsh.d.next = self.rsh.q.val() >> 16;
                self.idx.d.next = self.idx.q.val() + self.k1_7.val();
                if self.idx.q.val() == self.k_last_word.val() {
                    self.fidx.d.next = self.k0_3.val();
                    self.state.d.next = NdState::Fold;
                }
            }
            NdState::Fold => {
                // a column's bits above 8 go to the other column (2^16 = 1 in ones-complement arithmetic)
                self.hc.d.next = bit_cast::<14, 8>(self.hc.q.val().get_bits::<8>(0)) + bit_cast::<14, 6>(self.lc.q.val().get_bits::<6>(8));
                self.lc.d.next = bit_cast::<14, 8>(self.lc.q.val().get_bits::<8>(0)) + bit_cast::<14, 6>(self.hc.q.val().get_bits::<6>(8));
                self.rh.d.next = bit_cast::<14, 8>(self.rh.q.val().get_bits::<8>(0)) + bit_cast::<14, 6>(self.rl.q.val().get_bits::<6>(8));
                self.rl.d.next = bit_cast::<14, 8>(self.rl.q.val().get_bits::<8>(0)) + bit_cast::<14, 6>(self.rh.q.val().get_bits::<6>(8));
                self.fidx.d.next = self.fidx.q.val() + self.k1_3.val();
                if self.fidx.q.val() == self.k_last_fold.val() {
                    self.state.d.next = NdState::Decide;
                }
            }
            NdState::Decide => {
                self.rep.d.next.csum = !((bit_cast::<16, 8>(self.rh.q.val().get_bits::<8>(0)) << 8)
                    | bit_cast::<16, 8>(self.rl.q.val().get_bits::<8>(0)));
                self.state.d.next = NdState::Idle;
                if (self.hc.q.val().get_bits::<8>(0) == self.k_ff.val())
                    & (self.lc.q.val().get_bits::<8>(0) == self.k_ff.val())
                    & (self.hc.q.val().get_bits::<6>(8) == self.k0_6.val())
                    & (self.lc.q.val().get_bits::<6>(8) == self.k0_6.val())
                    & self.len_ok.q.val()
                    & self.tgt_ok.q.val()
                    & self.src_ok.q.val()
                    & !self.short.q.val()
                    & self.v6_on.val()
                {
                    self.state.d.next = NdState::Beat0;
                } else {
                    self.ign_dec.next = true;
                }
            }
            NdState::Beat0 => {
                self.m_axis.tvalid.next = true;
                if self.m_axis.tready.val() {
                    self.state.d.next = NdState::Beat1;
                }
            }
            _ => {
                self.m_axis.tvalid.next = true;
                self.m_axis.tlast.next = true;
                self.m_axis.tdata.next = self.l_out.val().get_bits::<512>(512);
                self.m_axis.tkeep.next = self.k_tail.val();
                if self.m_axis.tready.val() {
                    self.state.d.next = NdState::Idle;
                    self.n_ans.inc.next = true;
                }
            }
        }
        self.l_ign_n.next = bit_cast::<3, 1>(self.ign_in.val().into()) + bit_cast::<3, 1>(self.ign_dec.val().into());
        self.n_ign.inc.next = self.ign_q.q.val() != self.k0_3b.val();
        if self.ign_q.q.val() != self.k0_3b.val() {
            self.ign_q.d.next = self.ign_q.q.val() + self.l_ign_n.val() - self.k1_3b.val();
        } else {
            self.ign_q.d.next = self.l_ign_n.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::beat_of;
    use crate::wire::tx_build::bits128;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use testbench::wire::ndp::{neighbour_advertisement, neighbour_solicitation};

    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);


    /// Frames in (with gaps), what comes out on `m_axis` under random back-pressure, and the counters.
    fn run(frames: &[(Vec<u8>, bool)], my_ip: Ipv6Addr, on: bool, seed: u64) -> (Vec<Vec<u8>>, u64, u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut u = NdResponder::default();
        u.connect_all();
        u.my_mac.next = bits(ME.0.iter().fold(0u64, |a, b| a << 8 | u64::from(*b)));
        u.my_ip6.next = bits128(u128::from(my_ip));
        u.v6_on.next = on;
        // an empty frame stands for 80 idle cycles
        let beats: Vec<Option<(Vec<u8>, bool, bool)>> = frames
            .iter()
            .flat_map(|(f, e)| {
                let n = f.len().div_ceil(64);
                if n == 0 {
                    return vec![None; 80];
                }
                f.chunks(64).enumerate().map(move |(i, c)| Some((c.to_vec(), i + 1 == n, *e))).collect::<Vec<_>>()
            })
            .collect();
        let (mut next, mut quiet, mut out, mut cur) = (0, 0, Vec::new(), Vec::new());
        loop {
            let go = next < beats.len() && rng.gen_ratio(2, 3);
            let valid = go && beats[next].is_some();
            if let Some(Some((b, last, err))) = beats.get(next).filter(|_| valid) {
                let (d, k) = beat_of(b);
                u.s_axis.tdata.next = d;
                u.s_axis.tkeep.next = k;
                u.s_axis.tlast.next = *last;
                u.s_err.next = *err;
            }
            u.s_axis.tvalid.next = valid;
            u.m_axis.tready.next = rng.gen_ratio(3, 4);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            assert!(u.s_axis.tready.val());
            quiet += 1;
            if go {
                next += 1;
                quiet = 0;
            }
            if u.m_axis.tvalid.val() && u.m_axis.tready.val() {
                let n = 64 - u.m_axis.tkeep.val().to_u64().leading_zeros() as usize;
                cur.extend((0..n).map(|i| u.m_axis.tdata.val().get_bits::<8>(8 * i).to_u8()));
                if u.m_axis.tlast.val() {
                    out.push(std::mem::take(&mut cur));
                }
                quiet = 0;
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 50));
            if next >= beats.len() && quiet > 200 {
                break;
            }
        }
        (out, u.answered.val().to_u64(), u.ignored.val().to_u64())
    }

    /// Solicitations from random sources and MACs, for our address and for others, damaged in a random bit, of
    /// IP version 7, from :: and from a multicast source, cut short, flagged by the MAC, without option, with a
    /// trailer, among other frames, spaced so that each is worked on: every advertisement is the golden
    /// model's byte for byte, none comes where it sends none, and every solicitation is counted once.
    #[test]
    fn advertisements_are_the_golden_models() {
        let mut rng = SmallRng::seed_from_u64(5);
        let me: Ipv6Addr = "fd00::11".parse().unwrap();
        let mut frames = Vec::new();
        let mut want = Vec::new();
        for i in 0..44 {
            let mac = MacAddr([0x52, 0x54, rng.gen(), rng.gen(), rng.gen(), rng.gen()]);
            let src = Ipv6Addr::from((0xFD00u128 << 112) | rng.gen::<u64>() as u128);
            let target = if i % 5 == 4 { Ipv6Addr::from(rng.gen::<u128>()) } else { me };
            let mut f = neighbour_solicitation(mac, src, target);
            let mut err = false;
            match i % 11 {
                1 => {
                    let at = rng.gen_range(14..f.len());
                    f[at] ^= 1 << rng.gen_range(0..8);
                }
                2 => f[14] = 0x70, // IP version 7 (the checksum does not cover it)
                4 => f = neighbour_solicitation(mac, Ipv6Addr::UNSPECIFIED, target), // duplicate address detection
                6 => f = neighbour_solicitation(mac, "ff02::1".parse().unwrap(), target), // a multicast source
                3 => f.truncate(rng.gen_range(60..f.len())),
                5 => err = true,
                7 => {
                    // no option: 24 bytes of message (checksum fixed)
                    f.truncate(14 + 40 + 24);
                    f[18..20].copy_from_slice(&24u16.to_be_bytes());
                    let mut msg = f[54..].to_vec();
                    f = testbench::wire::ndp::nd_frame(
                        MacAddr(f[0..6].try_into().unwrap()),
                        mac,
                        src,
                        Ipv6Addr::from(<[u8; 16]>::try_from(&f[38..54]).unwrap()),
                        &mut msg,
                    );
                }
                9 => f.extend([0u8; 8]), // trailer bytes beyond the IPv6 payload
                _ => {}
            }
            if !err {
                if let Some(a) = neighbour_advertisement(&f, ME, me) {
                    want.push(a);
                }
            }
            frames.push((f, err));
            // some other frame in between: an IPv6 UDP frame, an ARP request
            if i % 4 == 0 {
                let mut o = vec![0u8; 90];
                o[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                o[20] = 17;
                frames.push((o, false));
            }
            // time for the responder to work on it (about 60 cycles)
            frames.push((Vec::new(), false));
        }
        let (out, answered, ignored) = run(&frames, me, true, 6);
        assert!(want.len() >= 14, "{} answered by the rules", want.len());
        assert_eq!(out.len(), want.len(), "advertisements");
        for (i, (o, w)) in out.iter().zip(&want).enumerate() {
            assert!(o == w, "advertisement {i}:\n{o:?}\n{w:?}");
        }
        assert_eq!(answered as usize, want.len());
        // every frame whose first beat is a solicitation's is counted once
        let looks = frames
            .iter()
            .filter(|(f, _)| {
                f.len() > 55 && f[12..14] == [0x86, 0xDD] && f[14] >> 4 == 6 && f[20] == 58 && f[21] == 255 && f[54] == 135 && f[55] == 0
            })
            .count();
        assert_eq!((answered + ignored) as usize, looks, "every solicitation counted once");
        // IPv6 off: nothing answered
        let (out, answered, _) = run(&frames[..12], me, false, 7);
        assert!(out.is_empty() && answered == 0);
    }
}
