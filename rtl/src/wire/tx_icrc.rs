//! ICRC append (the tail of TX Packet Build): frames without ICRC in, frames with the ICRC and the Ethernet
//! minimum-size padding out.
//!
//! The ICRC engine computes each frame's ICRC while its beats wait in a 32-beat FIFO (the engine's latency is
//! 8 cycles, so back-to-back short frames do not stall). A last beat leaves only together with its ICRC,
//! which is written right behind the last byte (least significant byte first); when fewer than four bytes
//! are free the ICRC spills into one more beat. A one-beat frame shorter than 60 bytes with its ICRC is padded
//! with zeros to 60 bytes (outside the IP/UDP lengths and the ICRC, as a NIC pads).
//!
//! Finished ICRCs wait in a queue of their own (32, one per frame), which the engine fills whenever it has
//! one: the engine's pipeline never waits for the output side, and the input's ready does not follow the
//! output's (the MAC's).
//!
//! Each beat's byte count and the two length flags that place the ICRC are worked out on the way into the
//! FIFO and stored with the beat, so the output register is fed from the FIFO's read data through the ICRC
//! shift alone (the whole top's worst path, 12 LUT levels, ran from the read data through the byte count).

use crate::common::axis::{AxisSink, AxisSource, KeepMask};
use crate::common::fifo::Fifo;
use crate::common::consts::{k, keep_count_map, keep_thermo};
use crate::common::gf2::Gf2Map;
use crate::wire::icrc::IcrcEngine;
use rust_hdl::prelude::*;
use testbench::wire::frame::ETH_MIN_FRAME_LEN;

/// One beat in the FIFO.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct Beat {
    pub data: Bits<512>,
    pub keep: Bits<64>,
    pub last: Bit,
    /// bytes in the beat (1..=64), counted from `keep` on the way in so the head's ICRC placement starts
    /// from a stored value
    pub n: Bits<7>,
    /// `n <= 60`: the ICRC fits behind the last byte
    pub fits: Bit,
    /// `n < 56`: a one-beat frame this short is padded to the Ethernet minimum
    pub short: Bit,
}

crate::logic_block! {
    pub struct TxIcrcAppend {
        pub clock: Signal<In, Clock>,
        pub s_axis: AxisSink,
        pub m_axis: AxisSource,

        engine: IcrcEngine,
        fifo: Fifo<Beat, 5, 6>,
        /// finished ICRCs, one per frame, taken by the engine whenever it has one (so its pipeline never waits
        /// for the output side, and the input's ready does not follow the output's); a frame's ICRC is done only
        /// after all its beats entered `fifo`, so no more are waiting than frames in `fifo` (32)
        crcq: Fifo<Bits<32>, 5, 6>,
        head_mask: KeepMask,
        nm1: Gf2Map<64, 6> = keep_count_map(),
        n: Signal<Local, Bits<7>>,
        n_in: Signal<Local, Bits<7>>,
        with_crc: Signal<Local, Bits<512>>,
        // output register
        o_data: DFF<Bits<512>>,
        o_keep: DFF<Bits<64>>,
        o_last: DFF<Bit>,
        o_valid: DFF<Bit>,
        spill: DFF<Bit>,
        spill_data: DFF<Bits<32>>,
        spill_keep: DFF<Bits<64>>,
        mid_frame: DFF<Bit>,
        adv: Signal<Local, Bit>,
        head_ok: Signal<Local, Bit>,
        kfull: Constant<Bits<64>> = keep_thermo(64),
        k1: Constant<Bits<7>> = k(1),
        k60: Constant<Bits<7>> = k(60),
        /// a one-beat frame shorter than this (before its 4 ICRC bytes) is padded to the minimum
        k56: Constant<Bits<7>> = k(ETH_MIN_FRAME_LEN as u64 - 4),
        k64: Constant<Bits<7>> = k(64),
        kmin_keep: Constant<Bits<64>> = keep_thermo(ETH_MIN_FRAME_LEN),
    }
}

impl Logic for TxIcrcAppend {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, o_data, o_keep, o_last, o_valid, spill, spill_data, spill_keep, mid_frame);
        clock!(self, clock, engine, fifo, crcq);

        // In: a beat enters the engine and the FIFO together.
        self.s_axis.tready.next = self.engine.s_axis.tready.val() & !self.fifo.full.val();
        self.engine.s_axis.tdata.next = self.s_axis.tdata.val();
        self.engine.s_axis.tkeep.next = self.s_axis.tkeep.val();
        self.engine.s_axis.tlast.next = self.s_axis.tlast.val();
        self.engine.s_axis.tvalid.next = self.s_axis.tvalid.val() & !self.fifo.full.val();
        self.fifo.din.next.data = self.s_axis.tdata.val();
        self.fifo.din.next.keep = self.s_axis.tkeep.val();
        self.fifo.din.next.last = self.s_axis.tlast.val();
        self.fifo.push.next = self.s_axis.tvalid.val() & self.engine.s_axis.tready.val();
        self.nm1.x.next = self.s_axis.tkeep.val();
        self.n_in.next = bit_cast::<7, 6>(self.nm1.y.val()) + self.k1.val();
        self.fifo.din.next.n = self.n_in.val();
        self.fifo.din.next.fits = self.n_in.val() <= self.k60.val();
        self.fifo.din.next.short = self.n_in.val() < self.k56.val();

        // Out: the head beat, with the ICRC behind its last byte when it is a frame's last beat.
        self.m_axis.tdata.next = self.o_data.q.val();
        self.m_axis.tkeep.next = self.o_keep.q.val();
        self.m_axis.tlast.next = self.o_last.q.val();
        self.m_axis.tvalid.next = self.o_valid.q.val();
        self.adv.next = !self.o_valid.q.val() | self.m_axis.tready.val();
        self.engine.crc_ready.next = !self.crcq.full.val();
        self.crcq.push.next = self.engine.crc_valid.val() & !self.crcq.full.val();
        self.crcq.din.next = self.engine.crc.val();
        self.crcq.pop.next = false;
        self.head_ok.next = !self.fifo.empty.val() & (!self.fifo.dout.val().last | !self.crcq.empty.val());
        self.head_mask.keep.next = self.fifo.dout.val().keep;
        self.n.next = self.fifo.dout.val().n;
        self.with_crc.next = (self.fifo.dout.val().data & self.head_mask.mask.val())
            | (bit_cast::<512, 32>(self.crcq.dout.val()) << (bit_cast::<10, 7>(self.n.val()) << 3));
        self.fifo.pop.next = false;
        if self.adv.val() {
            self.o_valid.d.next = false;
            if self.spill.q.val() {
                self.o_data.d.next = bit_cast::<512, 32>(self.spill_data.q.val());
                self.o_keep.d.next = self.spill_keep.q.val();
                self.o_last.d.next = true;
                self.o_valid.d.next = true;
                self.spill.d.next = false;
                self.mid_frame.d.next = false;
            } else if self.head_ok.val() {
                self.fifo.pop.next = true;
                self.o_valid.d.next = true;
                if !self.fifo.dout.val().last {
                    self.o_data.d.next = self.fifo.dout.val().data;
                    self.o_keep.d.next = self.fifo.dout.val().keep;
                    self.o_last.d.next = false;
                    self.mid_frame.d.next = true;
                } else {
                    self.crcq.pop.next = true;
                    self.o_data.d.next = self.with_crc.val();
                    if self.fifo.dout.val().fits {
                        self.o_last.d.next = true;
                        self.o_keep.d.next = self.kfull.val() >> (self.k60.val() - self.n.val());
                        self.mid_frame.d.next = false;
                        if !self.mid_frame.q.val() & self.fifo.dout.val().short {
                            self.o_keep.d.next = self.kmin_keep.val();
                        }
                    } else {
                        self.o_last.d.next = false;
                        self.o_keep.d.next = self.kfull.val();
                        self.spill.d.next = true;
                        self.spill_data.d.next =
                            self.crcq.dout.val() >> (bit_cast::<5, 7>(self.k64.val() - self.n.val()) << 3);
                        self.spill_keep.d.next = self.kfull.val() >> (self.k64.val() + self.k60.val() - self.n.val());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::{beat_of, BEAT_BYTES};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// Frames without their ICRC in (random gaps), frames out (random backpressure); every output frame must be
    /// the golden model's frame with its ICRC and padding, byte for byte.
    fn run(frames: &[Vec<u8>], seed: u64) -> Vec<Vec<u8>> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut u = TxIcrcAppend::default();
        u.connect_all();
        let beats: Vec<(Vec<u8>, bool)> = frames
            .iter()
            .flat_map(|f| {
                let n = f.len().div_ceil(BEAT_BYTES);
                f.chunks(BEAT_BYTES).enumerate().map(move |(i, c)| (c.to_vec(), i + 1 == n)).collect::<Vec<_>>()
            })
            .collect();
        let (mut bi, mut idle) = (0, 0);
        let (mut out, mut cur) = (Vec::new(), Vec::new());
        while out.len() < frames.len() {
            let v = bi < beats.len() && rng.gen_ratio(4, 5);
            u.s_axis.tvalid.next = v;
            if bi < beats.len() {
                let (d, k) = beat_of(&beats[bi].0);
                u.s_axis.tdata.next = d;
                u.s_axis.tkeep.next = k;
                u.s_axis.tlast.next = beats[bi].1;
            }
            u.m_axis.tready.next = rng.gen_ratio(3, 4);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            if v && u.s_axis.tready.val() {
                bi += 1;
            }
            if u.m_axis.tvalid.val() && u.m_axis.tready.val() {
                let keep = u.m_axis.tkeep.val().to_u64();
                assert_eq!(keep & keep.wrapping_add(1), 0, "tkeep contiguous from bit 0: {keep:#x}");
                let n = 64 - keep.leading_zeros() as usize;
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
            assert!(idle < 500, "ICRC append stopped sending");
        }
        out
    }

    /// Payload lengths put the last beat's bytes everywhere from 1 to 64, so the ICRC fits behind the last
    /// byte, spills into one more beat, or (one-beat frames) is followed by padding to 60 bytes.
    #[test]
    fn frames_get_the_golden_icrc_and_padding() {
        let mut rng = SmallRng::seed_from_u64(31);
        let lens: Vec<usize> = (0..70).chain([100, 255, 256, 1000, 1024, 4096]).collect();
        let frames = testbench::wire::samples::rc_frames(&mut || rng.gen(), &lens);
        let want: Vec<Vec<u8>> = frames.iter().map(|f| f.build().unwrap()).collect();
        // in: the frame up to its ICRC (14 + the IP total length, which counts the ICRC, - 4)
        let ins: Vec<Vec<u8>> = want
            .iter()
            .map(|w| {
                let ip_len = u16::from_be_bytes([w[16], w[17]]) as usize;
                w[..14 + ip_len - 4].to_vec()
            })
            .collect();
        let spill = ins.iter().filter(|f| (f.len() - 1) % 64 + 1 > 60).count();
        let padded = want.iter().zip(&ins).filter(|(w, i)| w.len() > i.len() + 4).count();
        assert!(spill > 0 && padded > 0, "{spill} spilling, {padded} padded");
        let got = run(&ins, 7);
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "frame {i}: {} bytes in", ins[i].len());
        }
    }
}
