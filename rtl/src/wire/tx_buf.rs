//! TX Frame Buffer: store and forward in front of the MAC.
//!
//! A 100G MAC (Xilinx CMAC) needs every beat of a packet back to back once its first beat is taken: a gap
//! inside a packet is a TX underflow, and the packet goes out corrupted. TX Packet Build starts a frame as
//! soon as its header is formed, while the payload may still be on its way from host memory (a DMA read is
//! about 160 cycles), so its output can pause mid-frame. This buffer holds beats until a frame's last beat
//! is in, then releases the whole frame at one beat per cycle.
//!
//! 128 beats of data, keep and last in three LUTRAM FIFOs side by side; `frames` counts the complete frames inside (+1 when a
//! last beat enters, −1 when one leaves); the output is valid while `frames` ≠ 0, which a register (`nz`)
//! holds, so the output `tvalid` comes from a flip-flop (a complete frame inside means the FIFOs are not
//! empty). A frame must fit: the
//! largest RoCEv2 frame at path MTU 4096 is 67 beats, so 128 beats hold it and the tail of the one before.
//! Input `tready` comes from a register too: a beat count (`fill`) beside the FIFOs, and `tready` high when
//! it was at most 126 a cycle before, so a beat pushed now always fits; no pointer arithmetic or compare
//! lies between the input handshake and a register. One beat per cycle in and out; a frame's latency is its length in beats
//! (plus one cycle).

use rust_hdl::prelude::*;

use crate::common::axis::{AxisSink, AxisSource};
use crate::common::fifo::Fifo;

/// Beats the buffer holds (2^7).
pub const TX_BUF_BEATS: usize = 128;

crate::logic_block! {
    pub struct TxFrameBuffer {
        pub clock: Signal<In, Clock>,
        pub s_axis: AxisSink,
        pub m_axis: AxisSource,
        dq: Fifo<Bits<512>, 7, 8>,
        kq: Fifo<Bits<64>, 7, 8>,
        lq: Fifo<Bit, 7, 8>,
        /// Complete frames inside.
        frames: DFF<Bits<8>>,
        /// `frames` ≠ 0
        nz: DFF<Bit>,
        /// Beats inside (kept beside the FIFOs' pointers so that `rdy` is a compare of one register).
        fill: DFF<Bits<8>>,
        /// Input `tready`: at most 126 beats were inside a cycle before, so at most 127 are now and a beat
        /// pushed now still fits.
        rdy: DFF<Bit>,
        push: Signal<Local, Bit>,
        pop: Signal<Local, Bit>,
        one: Constant<Bits<8>> = Constant::new(bits::<8>(1)),
        room: Constant<Bits<8>> = Constant::new(bits::<8>(TX_BUF_BEATS as u64 - 2)),
    }
}

impl Logic for TxFrameBuffer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, frames, nz, fill, rdy);
        clock!(self, clock, dq, kq, lq);
        // at most one beat enters per cycle: fill <= 126 now, so <= 127 in the next cycle, when rdy is
        // high, and <= 128 after a push then
        self.rdy.d.next = self.fill.q.val() <= self.room.val();
        self.s_axis.tready.next = self.rdy.q.val();
        self.push.next = self.s_axis.tvalid.val() & self.rdy.q.val();
        self.dq.din.next = self.s_axis.tdata.val();
        self.kq.din.next = self.s_axis.tkeep.val();
        self.lq.din.next = self.s_axis.tlast.val();
        self.dq.push.next = self.push.val();
        self.kq.push.next = self.push.val();
        self.lq.push.next = self.push.val();
        self.m_axis.tdata.next = self.dq.dout.val();
        self.m_axis.tkeep.next = self.kq.dout.val();
        self.m_axis.tlast.next = self.lq.dout.val();
        self.m_axis.tvalid.next = self.nz.q.val();
        self.pop.next = self.nz.q.val() & self.m_axis.tready.val();
        self.dq.pop.next = self.pop.val();
        self.kq.pop.next = self.pop.val();
        self.lq.pop.next = self.pop.val();
        if self.push.val() & !self.pop.val() {
            self.fill.d.next = self.fill.q.val() + self.one.val();
        }
        if !self.push.val() & self.pop.val() {
            self.fill.d.next = self.fill.q.val() - self.one.val();
        }
        // a last beat in, a last beat out, both, or neither
        if (self.push.val() & self.s_axis.tlast.val()) & !(self.pop.val() & self.lq.dout.val()) {
            self.frames.d.next = self.frames.q.val() + self.one.val();
            self.nz.d.next = true;
        }
        if !(self.push.val() & self.s_axis.tlast.val()) & (self.pop.val() & self.lq.dout.val()) {
            self.frames.d.next = self.frames.q.val() - self.one.val();
            self.nz.d.next = self.frames.q.val() != self.one.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::beat_of;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// Random frames (1..=67 beats) offered with random gaps inside them, the MAC side ready at random; every
    /// frame must come out unchanged and, once its first beat is taken, with no gap while the MAC is ready.
    /// The MAC pauses between frames for long stretches, so the buffer fills and its `tready` holds input.
    #[test]
    fn frames_leave_whole_and_back_to_back() {
        let mut rng = SmallRng::seed_from_u64(41);
        let frames: Vec<Vec<u8>> = (0..60)
            .map(|i| {
                let len = if i % 7 == 0 { rng.gen_range(4100..4289) } else { rng.gen_range(1..700) };
                (0..len).map(|_| rng.gen()).collect()
            })
            .collect();
        let mut u = TxFrameBuffer::default();
        u.connect_all();
        let (mut fi, mut off) = (0usize, 0usize);
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut cur: Vec<u8> = Vec::new();
        let mut in_frame = false;
        let mut gaps = 0;
        let mut held = 0;
        for cycle in 0..40_000 {
            let offer = fi < frames.len() && rng.gen_bool(0.6);
            if offer {
                let f = &frames[fi];
                let n = (f.len() - off).min(64);
                let (d, k) = beat_of(&f[off..off + n]);
                u.s_axis.tdata.next = d;
                u.s_axis.tkeep.next = k;
                u.s_axis.tlast.next = off + n == f.len();
            }
            u.s_axis.tvalid.next = offer;
            let ready = !in_frame || rng.gen_bool(0.97);
            // the MAC also stops between frames for long stretches, so the buffer fills and holds its input
            let ready = ready && (in_frame || (rng.gen_bool(0.8) && cycle % 1500 >= 600));
            u.m_axis.tready.next = ready;
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            if offer && !u.s_axis.tready.val() {
                held += 1;
            }
            if offer && u.s_axis.tready.val() {
                let n = (frames[fi].len() - off).min(64);
                off += n;
                if off == frames[fi].len() {
                    fi += 1;
                    off = 0;
                }
            }
            if ready && in_frame && !u.m_axis.tvalid.val() {
                gaps += 1;
            }
            if ready && u.m_axis.tvalid.val() {
                let keep = u.m_axis.tkeep.val();
                let n = (0..64).take_while(|&b| keep.get_bit(b)).count();
                let d = u.m_axis.tdata.val();
                for b in 0..n {
                    cur.push(d.get_bits::<8>(8 * b).to_u64() as u8);
                }
                in_frame = !u.m_axis.tlast.val();
                if u.m_axis.tlast.val() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 50));
            if out.len() == frames.len() {
                eprintln!("done at cycle {cycle}");
                break;
            }
        }
        assert_eq!(out.len(), frames.len(), "every frame out");
        for (i, (a, b)) in out.iter().zip(&frames).enumerate() {
            assert!(a == b, "frame {i} changed");
        }
        assert_eq!(gaps, 0, "a frame paused mid-way while the MAC was ready");
        assert!(held > 100, "the buffer never filled ({held} beats held back): the test does not reach full");
    }
}
