//! VLAN Strip: the port's 802.1Q filter in front of everything that reads frames from the MAC (RX Parse, the
//! ARP, ICMP and neighbour-discovery responders), so that none of them parses tags.
//!
//! The port is either on no VLAN (`on` low, the reset state) or on one, `vid` (`CMD_SET_VLAN`), as a Linux
//! VLAN device `eth0.VID` is. Each frame is sorted by its first beat:
//!
//! * on a VLAN: a frame tagged (TPID 0x8100) with our VID loses its tag (bytes 12..15) and goes on as
//!   untagged; any other frame (untagged, another VID) is dropped and counted;
//! * on no VLAN: an untagged frame goes on unchanged, a priority-tagged one (VID 0, 802.1Q's "priority only")
//!   loses its tag, and a frame tagged with any other VID is dropped and counted.
//!
//! Removing four bytes moves every later byte of the frame four lanes down, so an output beat needs the first
//! four bytes of the next input beat: a beat is held (`r_*`) until its successor arrives or it is the frame's
//! last. The output is registered. Two cycles of latency; the MAC is never back-pressured and the readers
//! never back-pressure (`m_axis.tready` is not used): a stripped frame has at most as many beats as it came
//! with, and a held beat always leaves in the cycle the next beat arrives. A frame passed unchanged (untagged,
//! off a VLAN) takes exactly two cycles, beat for beat. The MAC's error flag travels with the frame's last beat
//! (`m_err`).

use rust_hdl::prelude::*;

use testbench::wire::frame::{ETHERTYPE_VLAN, ETH_HEADER_LEN, VLAN_TAG_LEN};

use crate::common::axis::{AxisSink, AxisSource};
use crate::common::counter::EventCounter;

/// Lane of the TPID (the untagged frame's ethertype lane).
const TPID_LANE: usize = ETH_HEADER_LEN - 2;
const _: () = assert!(TPID_LANE == 12 && VLAN_TAG_LEN == 4);

#[derive(LogicBlock)]
pub struct VlanStrip {
    pub clock: Signal<In, Clock>,
    /// Frames from the MAC (`tready` is always high).
    pub s_axis: AxisSink,
    /// The MAC's error flag, valid with a frame's last beat.
    pub s_err: Signal<In, Bit>,
    /// The port is on VLAN `vid`.
    pub on: Signal<In, Bit>,
    pub vid: Signal<In, Bits<12>>,
    /// Untagged frames (`tready` not used).
    pub m_axis: AxisSource,
    /// The MAC's error flag, with the last beat.
    pub m_err: Signal<Out, Bit>,
    /// Frames dropped for their tag (or for having none, on a VLAN).
    pub dropped: Signal<Out, Bits<32>>,

    /// inside a frame; its class (registered with its first beat)
    in_frame: DFF<Bit>,
    f_strip: DFF<Bit>,
    f_drop: DFF<Bit>,
    /// the held beat: data, keep, last, error, held, the frame's first, of a frame being stripped
    r_d: DFF<Bits<512>>,
    r_k: DFF<Bits<64>>,
    r_l: DFF<Bit>,
    r_err: DFF<Bit>,
    r_v: DFF<Bit>,
    r_first: DFF<Bit>,
    r_strip: DFF<Bit>,
    /// the output register
    o_d: DFF<Bits<512>>,
    o_k: DFF<Bits<64>>,
    o_l: DFF<Bit>,
    o_err: DFF<Bit>,
    o_v: DFF<Bit>,
    n_drop: EventCounter,

    has_tag: Signal<Local, Bit>,
    vid_ours: Signal<Local, Bit>,
    vid_zero: Signal<Local, Bit>,
    strip_now: Signal<Local, Bit>,
    drop_now: Signal<Local, Bit>,
    emit: Signal<Local, Bit>,
    take: Signal<Local, Bit>,
    /// the next beat's data and keep when it continues the held beat's frame, else 0
    nb_d: Signal<Local, Bits<512>>,
    nb_k: Signal<Local, Bits<64>>,
    sh_d: Signal<Local, Bits<512>>,
    sh_k: Signal<Local, Bits<64>>,

    k_tpid: Constant<Bits<16>>,
    k_z4: Constant<Bits<4>>,
    k_z8: Constant<Bits<8>>,
    k_z64: Constant<Bits<64>>,
    k_z512: Constant<Bits<512>>,
}

impl Default for VlanStrip {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            s_axis: Default::default(),
            s_err: Default::default(),
            on: Default::default(),
            vid: Default::default(),
            m_axis: Default::default(),
            m_err: Default::default(),
            dropped: Default::default(),
            in_frame: Default::default(),
            f_strip: Default::default(),
            f_drop: Default::default(),
            r_d: Default::default(),
            r_k: Default::default(),
            r_l: Default::default(),
            r_err: Default::default(),
            r_v: Default::default(),
            r_first: Default::default(),
            r_strip: Default::default(),
            o_d: Default::default(),
            o_k: Default::default(),
            o_l: Default::default(),
            o_err: Default::default(),
            o_v: Default::default(),
            n_drop: Default::default(),
            has_tag: Default::default(),
            vid_ours: Default::default(),
            vid_zero: Default::default(),
            strip_now: Default::default(),
            drop_now: Default::default(),
            emit: Default::default(),
            take: Default::default(),
            nb_d: Default::default(),
            nb_k: Default::default(),
            sh_d: Default::default(),
            sh_k: Default::default(),
            // the TPID as its two lanes hold it (byte 12 in the low bits)
            k_tpid: Constant::new(bits::<16>(ETHERTYPE_VLAN.swap_bytes() as u64)),
            k_z4: Constant::new(bits::<4>(0)),
            k_z8: Constant::new(bits::<8>(0)),
            k_z64: Constant::new(bits::<64>(0)),
            k_z512: Constant::new(0.into()),
        }
    }
}

impl Logic for VlanStrip {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, in_frame, f_strip, f_drop, r_d, r_k, r_l, r_err, r_v, r_first, r_strip, o_d, o_k, o_l, o_err,
            o_v
        );
        self.n_drop.clock.next = self.clock.val();
        self.n_drop.inc.next = false;
        self.s_axis.tready.next = true;
        // ---- the input beat's class, were it a first beat: TPID in lanes 12..13, VID in lanes 14 (low
        // nibble) and 15
        self.has_tag.next = (self.s_axis.tdata.val().get_bits::<16>(96) == self.k_tpid.val())
            & self.s_axis.tkeep.val().get_bit(15);
        self.vid_ours.next = (self.s_axis.tdata.val().get_bits::<4>(112) == self.vid.val().get_bits::<4>(8))
            & (self.s_axis.tdata.val().get_bits::<8>(120) == self.vid.val().get_bits::<8>(0));
        self.vid_zero.next = (self.s_axis.tdata.val().get_bits::<4>(112) == self.k_z4.val())
            & (self.s_axis.tdata.val().get_bits::<8>(120) == self.k_z8.val());
        self.strip_now.next = self.f_strip.q.val();
        self.drop_now.next = self.f_drop.q.val();
        if !self.in_frame.q.val() {
            self.strip_now.next = self.has_tag.val()
                & ((self.on.val() & self.vid_ours.val()) | (!self.on.val() & self.vid_zero.val()));
            self.drop_now.next = !self.strip_now.val() & (self.on.val() | self.has_tag.val());
        }
        if self.s_axis.tvalid.val() {
            self.in_frame.d.next = !self.s_axis.tlast.val();
            if !self.in_frame.q.val() {
                self.f_strip.d.next = self.strip_now.val();
                self.f_drop.d.next = self.drop_now.val();
                self.n_drop.inc.next = self.drop_now.val();
            }
        }

        // ---- the held beat leaves when it is its frame's last or its successor is here (a beat that is not
        // its frame's last is always followed by one of the same frame); a beat passed unchanged leaves at
        // once, so that frames off a VLAN take exactly two cycles
        self.emit.next = self.r_v.q.val() & (self.r_l.q.val() | self.s_axis.tvalid.val() | !self.r_strip.q.val());
        self.nb_d.next = self.s_axis.tdata.val();
        self.nb_k.next = self.s_axis.tkeep.val();
        if self.r_l.q.val() | !self.s_axis.tvalid.val() {
            self.nb_d.next = self.k_z512.val();
            self.nb_k.next = self.k_z64.val();
        }
        // four lanes down, the successor's first four bytes on top; a first beat keeps lanes 0..11 (the MACs)
        self.sh_d.next = (self.r_d.q.val() >> 32) | (self.nb_d.val() << 480);
        if self.r_first.q.val() {
            self.sh_d.next = ((self.r_d.q.val() << 416) >> 416)
                | ((self.r_d.q.val() >> 128) << 96)
                | (self.nb_d.val() << 480);
        }
        self.sh_k.next = (self.r_k.q.val() >> 4) | (self.nb_k.val() << 60);
        self.o_v.d.next = false;
        if self.emit.val() {
            self.o_v.d.next = true;
            self.r_v.d.next = false;
            self.o_d.d.next = self.r_d.q.val();
            self.o_k.d.next = self.r_k.q.val();
            self.o_l.d.next = self.r_l.q.val();
            self.o_err.d.next = self.r_err.q.val();
            if self.r_strip.q.val() {
                self.o_d.d.next = self.sh_d.val();
                self.o_k.d.next = self.sh_k.val();
                // the successor is the frame's last and has no byte beyond its first four: all of it goes now
                if !self.r_l.q.val() & self.s_axis.tlast.val() & !self.s_axis.tkeep.val().get_bit(4) {
                    self.o_l.d.next = true;
                    self.o_err.d.next = self.s_err.val();
                }
            }
        }
        // ---- the input beat is held, unless its frame is dropped or all its bytes just left
        self.take.next = self.s_axis.tvalid.val() & !self.drop_now.val();
        if self.r_v.q.val() & self.r_strip.q.val() & !self.r_l.q.val() & !self.s_axis.tkeep.val().get_bit(4) {
            self.take.next = false;
        }
        if self.take.val() {
            self.r_d.d.next = self.s_axis.tdata.val();
            self.r_k.d.next = self.s_axis.tkeep.val();
            self.r_l.d.next = self.s_axis.tlast.val();
            self.r_err.d.next = self.s_err.val();
            self.r_v.d.next = true;
            self.r_first.d.next = !self.in_frame.q.val();
            self.r_strip.d.next = self.strip_now.val();
        }
        self.m_axis.tdata.next = self.o_d.q.val();
        self.m_axis.tkeep.next = self.o_k.q.val();
        self.m_axis.tlast.next = self.o_l.q.val();
        self.m_axis.tvalid.next = self.o_v.q.val();
        self.m_err.next = self.o_err.q.val() & self.o_l.q.val();
        self.dropped.next = self.n_drop.value.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::{beat_of, bytes_of_beat};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use testbench::wire::{port_vlan_view, Ethernet, MacAddr, VlanTag};

    /// A frame of `len` bytes after the Ethernet header, tagged with `tci` or untagged.
    fn frame(rng: &mut SmallRng, tci: Option<u16>, len: usize) -> Vec<u8> {
        let eth = Ethernet {
            dst: MacAddr(rng.gen()),
            src: MacAddr(rng.gen()),
            vlan: tci.map(|tci| VlanTag { tci }),
        };
        let mut f = Vec::new();
        eth.build(rng.gen::<u16>() | 1, &mut f); // never 0x8100 inside
        f.extend((0..len).map(|_| rng.gen::<u8>()));
        f
    }

    /// Random frames (ours, another VID, priority-tagged, untagged; 0..300 bytes after the header; some
    /// flagged by the MAC), back to back or with gaps, the port on no VLAN and then on one: every frame comes
    /// out as the golden port filter (`port_vlan_view`) says, byte for byte, with its error flag, the rest
    /// counted as dropped.
    #[test]
    fn frames_lose_our_tag_and_the_rest_are_dropped_and_counted() {
        let mut u = VlanStrip::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(0x8100);
        for (on, vid) in [(false, 0u16), (true, 0x123), (true, 0xFFE)] {
            let mut sent: Vec<(Vec<u8>, bool)> = Vec::new();
            for _ in 0..400 {
                let tci = match rng.gen_range(0..5) {
                    0 => None,
                    1 => Some(rng.gen::<u16>() & 0xE000 | vid),
                    2 => Some(rng.gen::<u16>() & 0xE000),
                    3 => Some(rng.gen::<u16>() & 0xF000 | rng.gen_range(1..0xFFF)),
                    _ => Some(rng.gen::<u16>() & 0xF000 | vid),
                };
                // lengths that end on every lane near a beat boundary
                let len = if rng.gen_bool(0.5) { rng.gen_range(0..300) } else { 64 * rng.gen_range(0..4) + 44 + rng.gen_range(0..8) };
                sent.push((frame(&mut rng, tci, len), rng.gen_bool(0.1)));
            }
            let want: Vec<(Vec<u8>, bool)> =
                sent.iter().filter_map(|(f, e)| port_vlan_view(f, on.then_some(vid)).map(|x| (x, *e))).collect();
            let drops = (sent.len() - want.len()) as u64;
            let before = u.dropped.val().to_u64();
            let mut got: Vec<(Vec<u8>, bool)> = Vec::new();
            let mut cur: Vec<u8> = Vec::new();
            let beats: Vec<(Bits<512>, Bits<64>, bool, bool)> = sent
                .iter()
                .flat_map(|(f, e)| {
                    let n = f.len().div_ceil(64);
                    f.chunks(64).enumerate().map(move |(b, c)| {
                        let (d, k) = beat_of(c);
                        (d, k, b + 1 == n, *e && b + 1 == n)
                    })
                })
                .collect();
            let mut i = 0;
            let mut idle = 0;
            u.on.next = on;
            u.vid.next = bits::<12>(vid as u64);
            while idle < 4 {
                let send = i < beats.len() && rng.gen_bool(0.8);
                if send {
                    let (d, k, l, e) = beats[i];
                    u.s_axis.tdata.next = d;
                    u.s_axis.tkeep.next = k;
                    u.s_axis.tlast.next = l;
                    u.s_err.next = e;
                    i += 1;
                }
                u.s_axis.tvalid.next = send;
                // the readers never back-pressure; tready is not used
                u.m_axis.tready.next = rng.gen_bool(0.5);
                u.clock.next = false.into();
                simulate(&mut u, 100);
                assert!(u.s_axis.tready.val());
                if u.m_axis.tvalid.val() {
                    let b = bytes_of_beat(u.m_axis.tdata.val(), u.m_axis.tkeep.val());
                    assert!(u.m_axis.tlast.val() || b.len() == 64, "a beat before the last is full");
                    cur.extend(b);
                    if u.m_axis.tlast.val() {
                        got.push((std::mem::take(&mut cur), u.m_err.val()));
                    } else {
                        assert!(!u.m_err.val(), "the error flag only with the last beat");
                    }
                }
                idle = if i == beats.len() && !u.m_axis.tvalid.val() { idle + 1 } else { 0 };
                u.clock.next = true.into();
                simulate(&mut u, 100);
            }
            assert_eq!(got.len(), want.len(), "on {on} vid {vid:#x}");
            for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "frame {n}, on {on} vid {vid:#x}");
            }
            assert_eq!(u.dropped.val().to_u64() - before, drops, "drops counted, on {on} vid {vid:#x}");
            assert!(drops > 50 && want.len() > 50, "both kinds exercised: {drops} dropped, {} passed", want.len());
        }
    }
}
