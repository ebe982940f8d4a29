//! VLAN Insert: the port's 802.1Q tag on the frames the ARP, ICMP and neighbour-discovery responders form
//! (untagged, as they parse them after VLAN Strip). RoCE frames get theirs from TX Packet Build, as it forms
//! their headers.
//!
//! While the port is on a VLAN (`on`, sampled at each frame's first beat), the tag (TPID 0x8100, then `tci`)
//! goes in after the source MAC (lanes 12..15) and every later byte moves four lanes up: each output beat is
//! the input beat shifted, under the last four bytes of the beat before (`carry`). A frame whose last beat
//! fills lanes 60..63 needs one beat more, for which the input waits a cycle. Off a VLAN frames pass
//! unchanged. Combinational from input to output (no added latency); `s_axis.tready` is `m_axis.tready`
//! except during the added beat.

use rust_hdl::prelude::*;

use testbench::wire::frame::{ETHERTYPE_VLAN, ETH_HEADER_LEN, VLAN_TAG_LEN};

use crate::common::axis::{AxisSink, AxisSource};

const _: () = assert!(ETH_HEADER_LEN - 2 == 12 && VLAN_TAG_LEN == 4);

#[derive(LogicBlock)]
pub struct VlanInsert {
    pub clock: Signal<In, Clock>,
    pub s_axis: AxisSink,
    pub m_axis: AxisSource,
    /// The port is on a VLAN; the tag's control information (PCP 15:13, DEI 12, VID 11:0).
    pub on: Signal<In, Bit>,
    pub tci: Signal<In, Bits<16>>,

    in_frame: DFF<Bit>,
    /// the frame in progress is tagged
    f_on: DFF<Bit>,
    /// the last four bytes of the beat before, and their keep
    carry: DFF<Bits<32>>,
    carry_k: DFF<Bits<4>>,
    /// the frame's added last beat (the carry alone) is due
    extra: DFF<Bit>,
    tag_now: Signal<Local, Bit>,
    /// the tag as lanes 12..15 hold it
    tag32: Signal<Local, Bits<32>>,
    tag_w: Signal<Local, Bits<512>>,
    k_tpid: Constant<Bits<32>>,
    k_keep16: Constant<Bits<64>>,
}

impl Default for VlanInsert {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            s_axis: Default::default(),
            m_axis: Default::default(),
            on: Default::default(),
            tci: Default::default(),
            in_frame: Default::default(),
            f_on: Default::default(),
            carry: Default::default(),
            carry_k: Default::default(),
            extra: Default::default(),
            tag_now: Default::default(),
            tag32: Default::default(),
            tag_w: Default::default(),
            k_tpid: Constant::new(bits::<32>(ETHERTYPE_VLAN.swap_bytes() as u64)),
            k_keep16: Constant::new(bits::<64>(0xFFFF)),
        }
    }
}

impl Logic for VlanInsert {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, in_frame, f_on, carry, carry_k, extra);
        self.tag_now.next = self.on.val();
        if self.in_frame.q.val() {
            self.tag_now.next = self.f_on.q.val();
        }
        self.tag32.next = self.k_tpid.val()
            | (bit_cast::<32, 8>(self.tci.val().get_bits::<8>(8)) << 16)
            | (bit_cast::<32, 8>(self.tci.val().get_bits::<8>(0)) << 24);
        self.tag_w.next = bit_cast::<512, 32>(self.tag32.val()) << 96;
        self.m_axis.tdata.next = self.s_axis.tdata.val();
        self.m_axis.tkeep.next = self.s_axis.tkeep.val();
        self.m_axis.tlast.next = self.s_axis.tlast.val();
        self.m_axis.tvalid.next = self.s_axis.tvalid.val();
        self.s_axis.tready.next = self.m_axis.tready.val();
        if self.tag_now.val() {
            // lanes 0..11 as they came, the tag, then input lanes 12..59; later beats four lanes up under
            // the carry
            self.m_axis.tdata.next = (self.s_axis.tdata.val() << 32) | bit_cast::<512, 32>(self.carry.q.val());
            self.m_axis.tkeep.next = (self.s_axis.tkeep.val() << 4) | bit_cast::<64, 4>(self.carry_k.q.val());
            if !self.in_frame.q.val() {
                self.m_axis.tdata.next = ((self.s_axis.tdata.val() << 416) >> 416)
                    | self.tag_w.val()
                    | ((self.s_axis.tdata.val() >> 96) << 128);
                self.m_axis.tkeep.next = (self.s_axis.tkeep.val() << 4) | self.k_keep16.val();
            }
            self.m_axis.tlast.next = self.s_axis.tlast.val() & !self.s_axis.tkeep.val().get_bit(60);
        }
        if self.extra.q.val() {
            self.m_axis.tdata.next = bit_cast::<512, 32>(self.carry.q.val());
            self.m_axis.tkeep.next = bit_cast::<64, 4>(self.carry_k.q.val());
            self.m_axis.tlast.next = true;
            self.m_axis.tvalid.next = true;
            self.s_axis.tready.next = false;
            if self.m_axis.tready.val() {
                self.extra.d.next = false;
            }
        }
        if self.s_axis.tvalid.val() & self.s_axis.tready.val() {
            self.in_frame.d.next = !self.s_axis.tlast.val();
            if !self.in_frame.q.val() {
                self.f_on.d.next = self.on.val();
            }
            self.carry.d.next = self.s_axis.tdata.val().get_bits::<32>(480);
            self.carry_k.d.next = self.s_axis.tkeep.val().get_bits::<4>(60);
            if self.tag_now.val() & self.s_axis.tlast.val() & self.s_axis.tkeep.val().get_bit(60) {
                self.extra.d.next = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::{beat_of, bytes_of_beat};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use testbench::wire::{Ethernet, MacAddr, VlanTag};

    /// Random untagged frames (14..314 bytes, every end lane near a beat boundary), the port on and off a
    /// VLAN in turn, random valid and ready: each comes out as the golden model builds it with the tag (or
    /// unchanged off a VLAN), byte for byte, whole, in order.
    #[test]
    fn frames_get_the_port_tag_after_the_source_mac() {
        let mut u = VlanInsert::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(0x8100);
        let mut frames: Vec<(Vec<u8>, Option<u16>)> = Vec::new();
        for n in 0..900 {
            let len = if rng.gen_bool(0.5) { rng.gen_range(0..300) } else { 64 * rng.gen_range(0..4) + 40 + rng.gen_range(0..12) };
            let eth = Ethernet { dst: MacAddr(rng.gen()), src: MacAddr(rng.gen()), vlan: None };
            let mut f = Vec::new();
            eth.build(rng.gen::<u16>() | 1, &mut f); // never 0x8100 inside
            f.extend((0..len).map(|_| rng.gen::<u8>()));
            // a third of the frames with the port off a VLAN
            frames.push((f, (n % 3 != 0).then(|| rng.gen())));
        }
        let want: Vec<Vec<u8>> = frames
            .iter()
            .map(|(f, tci)| {
                let (eth, et, off) = Ethernet::parse(f).unwrap();
                let mut out = Vec::new();
                Ethernet { vlan: tci.map(|tci| VlanTag { tci }), ..eth }.build(et, &mut out);
                out.extend_from_slice(&f[off..]);
                out
            })
            .collect();
        let (mut fi, mut bi) = (0usize, 0usize);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut cur: Vec<u8> = Vec::new();
        let mut cycles = 0;
        while got.len() < want.len() {
            cycles += 1;
            assert!(cycles < 100_000, "stuck after {} frames", got.len());
            let valid = fi < frames.len() && rng.gen_bool(0.7);
            if fi < frames.len() {
                let (f, tci) = &frames[fi];
                let (d, k) = beat_of(&f[64 * bi..f.len().min(64 * bi + 64)]);
                u.s_axis.tdata.next = d;
                u.s_axis.tkeep.next = k;
                u.s_axis.tlast.next = 64 * bi + 64 >= f.len();
                // the setting may change inside a frame: what counts is its value at the first beat
                u.on.next = if bi == 0 { tci.is_some() } else { rng.gen() };
                u.tci.next = bits::<16>(tci.unwrap_or(0) as u64);
            }
            u.s_axis.tvalid.next = valid;
            u.m_axis.tready.next = rng.gen_bool(0.7);
            u.clock.next = false.into();
            simulate(&mut u, 100);
            if u.m_axis.tvalid.val() && u.m_axis.tready.val() {
                let b = bytes_of_beat(u.m_axis.tdata.val(), u.m_axis.tkeep.val());
                assert!(u.m_axis.tlast.val() || b.len() == 64, "a beat before the last is full");
                cur.extend(b);
                if u.m_axis.tlast.val() {
                    let n = got.len();
                    assert_eq!(cur, want[n], "frame {n}");
                    got.push(std::mem::take(&mut cur));
                }
            }
            if valid && u.s_axis.tready.val() {
                if 64 * bi + 64 >= frames[fi].0.len() {
                    fi += 1;
                    bi = 0;
                } else {
                    bi += 1;
                }
            }
            u.clock.next = true.into();
            simulate(&mut u, 100);
        }
        assert!(want.iter().filter(|f| f.len() % 64 > 60 || f.len() % 64 == 0).count() > 20, "added beats exercised");
    }
}
