//! Scatter Path: a byte-packed payload stream (a packet's payload: byte 0 in `tdata[7:0]` of the first beat,
//! every beat full but the last) written to host memory at a byte address, through a DMA write port of
//! 64-byte-aligned beats with byte strobes.
//!
//! - Command: host byte address and length (0..=4096). A command of length 0 is accepted and dropped: no
//!   write and no payload beat taken (a zero-length payload has no beats, as TX Packet Build and RX Parse
//!   treat it).
//! - Commands go through a three-stage plan pipeline (P1 capture; P2 shift, strobes of the first beat,
//!   payload beats, bytes missing from the last payload beat, the address high part's 17-bit chunks + 1;
//!   P3 the extra-beat flag, strobes of the last beat, high part + 1 by carry select), one command per
//!   cycle, so the next command's plan is ready when the current one's last beat leaves and the write
//!   stream has no gap between commands. The command port's ready comes from registers only, so the DMA
//!   write grant, which drives the output handshake, never reaches a producer's state through it.
//! - `idle`: no command in the plan pipeline or being written and no write beat waiting, so every beat of
//!   every command taken is out on the DMA write port. The Responder issues its READ responses' and atomics'
//!   reads only on it, so they read every byte written before them.
//! - Realignment: write beat j is the window {payload beat j, payload beat j-1} shifted up by s = address mod
//!   64 bytes: the previous beat is registered, the current one comes straight from the stream, and one
//!   1024-bit shift down by 8·(64 - s) (a 64:1 mux per output byte, 3 LUT6 levels) feeds the output register.
//! - Strobes are exactly [addr, addr + len): the first beat's from byte s, the last beat's up to the last
//!   byte, both precomputed per command; they come from the command's length, never from the stream, so no
//!   byte outside the range is ever strobed whatever the stream carries. Bytes without strobe carry garbage.
//! - When s + (bytes of the last payload beat) > 64 the command writes one beat more than it reads: that
//!   last write beat is the registered beat alone (the stream waits one cycle).
//! - The beat address is {high part, 7-bit beat counter}; a command spans at most 65 beats, so the counter
//!   wraps at most once and the high part is then the precomputed high part + 1 (no 58-bit adder per beat).
//! - The payload beats taken per command are counted from its length; `tkeep` is not used and `tlast` only
//!   checked: `pay_err` pulses when a taken beat's `tlast` disagrees with the count.

use crate::common::axis::AxisSink;
use crate::common::consts::{k, keep_thermo};
use crate::common::ports::{DmaWrite, ScatterCmdSink};
use rust_hdl::prelude::*;

crate::logic_block! {
    /// Scatter Path (see the module documentation).
    pub struct ScatterPath {
        pub clock: Signal<In, Clock>,
        /// Commands: host byte address, length in bytes (0..=4096).
        pub cmd: ScatterCmdSink,
        /// The payload: ceil(len / 64) beats per command of length len.
        pub s_axis: AxisSink,
        /// DMA writes: 64-byte-aligned beat address, data, byte strobes, `last` on a command's last beat.
        pub dma: DmaWrite,
        /// One-cycle pulse: a payload beat's `tlast` disagreed with its command's length.
        pub pay_err: Signal<Out, Bit>,
        /// No command in the plan pipeline or being written and no write beat waiting: every beat of every
        /// command taken is out on the DMA write port.
        pub idle: Signal<Out, Bit>,

        // plan pipeline
        adv: Signal<Local, Bit>,
        nonzero: Signal<Local, Bit>,
        p1_v: DFF<Bit>,
        p1_addr: DFF<Bits<64>>,
        p1_len: DFF<Bits<13>>,
        len6: Signal<Local, Bits<6>>,
        s1: Signal<Local, Bits<6>>,
        hi_in: Signal<Local, Bits<51>>,
        sel1: Signal<Local, Bits<17>>,
        sel2: Signal<Local, Bits<17>>,
        p2_v: DFF<Bit>,
        p2_lo: DFF<Bits<7>>,
        p2_hi: DFF<Bits<51>>,
        /// the high part's three 17-bit chunks + 1, and whether the lower two are all ones (carry-select)
        p2_inc0: DFF<Bits<17>>,
        p2_inc1: DFF<Bits<17>>,
        p2_inc2: DFF<Bits<17>>,
        p2_ones0: DFF<Bit>,
        p2_ones1: DFF<Bit>,
        p2_s: DFF<Bits<6>>,
        p2_nk: DFF<Bits<6>>,
        p2_nin: DFF<Bits<7>>,
        p2_fm: DFF<Bits<64>>,
        p3_v: DFF<Bit>,
        p3_lo: DFF<Bits<7>>,
        p3_hi: DFF<Bits<51>>,
        p3_hi1: DFF<Bits<51>>,
        /// 63 - s: the window shift in bytes, after the constant shift of one byte
        p3_ns: DFF<Bits<6>>,
        p3_extra: DFF<Bit>,
        p3_nin: DFF<Bits<7>>,
        p3_fm: DFF<Bits<64>>,
        p3_lm: DFF<Bits<64>>,
        // the command being written
        act: DFF<Bit>,
        a_lo: DFF<Bits<7>>,
        a_hi: DFF<Bits<51>>,
        a_hi1: DFF<Bits<51>>,
        a_wrap: DFF<Bit>,
        a_ns: DFF<Bits<6>>,
        a_extra: DFF<Bit>,
        a_rem: DFF<Bits<7>>,
        a_fm: DFF<Bits<64>>,
        a_lm: DFF<Bits<64>>,
        a_first: DFF<Bit>,
        /// The last payload beat is taken; the write beat holding its tail is still owed.
        a_owe: DFF<Bit>,
        prev: DFF<Bits<512>>,
        load: Signal<Local, Bit>,
        can_out: Signal<Local, Bit>,
        last_in: Signal<Local, Bit>,
        out_last: Signal<Local, Bit>,
        fire: Signal<Local, Bit>,
        consume: Signal<Local, Bit>,
        sbits: Signal<Local, Bits<10>>,
        win: Signal<Local, Bits<1024>>,
        wsh: Signal<Local, Bits<1024>>,
        strb_f: Signal<Local, Bits<64>>,
        strb_l: Signal<Local, Bits<64>>,
        hi_sel: Signal<Local, Bits<51>>,
        // output register
        w_valid: DFF<Bit>,
        w_addr: DFF<Bits<64>>,
        w_data: DFF<Bits<512>>,
        w_strb: DFF<Bits<64>>,
        w_last: DFF<Bit>,
        err: DFF<Bit>,

        k0_6: Constant<Bits<6>> = k(0),
        k0_13: Constant<Bits<13>> = k(0),
        k1_7: Constant<Bits<7>> = k(1),
        k127_7: Constant<Bits<7>> = k(127),
        k1_17: Constant<Bits<17>> = k(1),
        kones_17: Constant<Bits<17>> = k(0x1_FFFF),
        kfull: Constant<Bits<64>> = keep_thermo(64),
    }
}

impl Logic for ScatterPath {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, p1_v, p1_addr, p1_len, p2_v, p2_lo, p2_hi, p2_inc0, p2_inc1, p2_inc2, p2_ones0, p2_ones1,
            p2_s, p2_nk, p2_nin, p2_fm, p3_v, p3_lo, p3_hi, p3_hi1, p3_ns, p3_extra, p3_nin, p3_fm, p3_lm, act, a_lo,
            a_hi, a_hi1, a_wrap, a_ns, a_extra, a_rem, a_fm, a_lm, a_first, a_owe, prev, w_valid, w_addr, w_data,
            w_strb, w_last, err
        );

        // ---- the write beat: {current payload beat, previous one} shifted up by s ----
        self.can_out.next = !self.w_valid.q.val() | self.dma.ready.val();
        self.last_in.next = self.a_rem.q.val() == self.k1_7.val();
        self.out_last.next = self.a_owe.q.val() | (self.last_in.val() & !self.a_extra.q.val());
        self.fire.next = self.act.q.val() & self.can_out.val() & (self.a_owe.q.val() | self.s_axis.tvalid.val());
        self.consume.next = self.fire.val() & !self.a_owe.q.val();
        self.s_axis.tready.next = self.act.q.val() & !self.a_owe.q.val() & self.can_out.val();

        // write byte b = window byte b + 64 - s = (window >> 8) byte b + (63 - s)
        self.sbits.next = bit_cast::<10, 6>(self.a_ns.q.val()) << 3;
        self.win.next =
            (bit_cast::<1024, 512>(self.prev.q.val()) | (bit_cast::<1024, 512>(self.s_axis.tdata.val()) << 512)) >> 8;
        self.wsh.next = self.win.val() >> self.sbits.val();
        self.strb_f.next = self.kfull.val();
        if self.a_first.q.val() {
            self.strb_f.next = self.a_fm.q.val();
        }
        self.strb_l.next = self.kfull.val();
        if self.out_last.val() {
            self.strb_l.next = self.a_lm.q.val();
        }
        self.hi_sel.next = self.a_hi.q.val();
        if self.a_wrap.q.val() {
            self.hi_sel.next = self.a_hi1.q.val();
        }
        if self.can_out.val() {
            self.w_valid.d.next = self.fire.val();
            self.w_data.d.next = self.wsh.val().get_bits::<512>(0);
            self.w_strb.d.next = self.strb_f.val() & self.strb_l.val();
            self.w_last.d.next = self.out_last.val();
            self.w_addr.d.next = (bit_cast::<64, 51>(self.hi_sel.val()) << 13) | (bit_cast::<64, 7>(self.a_lo.q.val()) << 6);
        }
        self.err.d.next = self.consume.val() & (self.s_axis.tlast.val() != self.last_in.val());
        if self.fire.val() {
            self.a_first.d.next = false;
            self.a_lo.d.next = self.a_lo.q.val() + self.k1_7.val();
            if self.a_lo.q.val() == self.k127_7.val() {
                self.a_wrap.d.next = true;
            }
            if self.a_owe.q.val() {
                self.a_owe.d.next = false;
            }
            if self.out_last.val() {
                self.act.d.next = false;
            }
        }
        if self.consume.val() {
            self.prev.d.next = self.s_axis.tdata.val();
            self.a_rem.d.next = self.a_rem.q.val() - self.k1_7.val();
            if self.last_in.val() & self.a_extra.q.val() {
                self.a_owe.d.next = true;
            }
        }
        self.dma.valid.next = self.w_valid.q.val();
        self.dma.addr.next = self.w_addr.q.val();
        self.dma.data.next = self.w_data.q.val();
        self.dma.strb.next = self.w_strb.q.val();
        self.dma.last.next = self.w_last.q.val();
        self.pay_err.next = self.err.q.val();
        self.idle.next = !self.p1_v.q.val() & !self.p2_v.q.val() & !self.p3_v.q.val() & !self.act.q.val() & !self.w_valid.q.val();

        // ---- the plan pipeline: a stage takes the one before it when the pipeline advances ----
        // the next command is loaded when none is active or in the cycle the active one's last beat leaves
        self.load.next = self.p3_v.q.val() & (!self.act.q.val() | (self.fire.val() & self.out_last.val()));
        self.adv.next = !self.p3_v.q.val() | self.load.val();
        // the command port's ready from registers only, so the DMA write grant, which drives the output
        // handshake, never reaches a producer's state through it: P1 takes a command when it is empty (even
        // while the stages after it wait) or when the pipeline advances with its last stage free or nothing
        // active; a command offered with P1 and P3 full and a command active waits a cycle past the one
        // whose last beat frees the pipeline
        self.cmd.ready.next = !self.p1_v.q.val() | !self.p3_v.q.val() | !self.act.q.val();
        self.nonzero.next = self.cmd.len.val() != self.k0_13.val();
        self.len6.next = self.p1_len.q.val().get_bits::<6>(0);
        self.s1.next = self.p1_addr.q.val().get_bits::<6>(0);
        self.hi_in.next = self.p1_addr.q.val().get_bits::<51>(13);
        // high part + 1 by carry-select over 17-bit chunks (a 51-bit increment would be 10 LUT levels)
        self.sel1.next = self.p2_hi.q.val().get_bits::<17>(17);
        if self.p2_ones0.q.val() {
            self.sel1.next = self.p2_inc1.q.val();
        }
        self.sel2.next = self.p2_hi.q.val().get_bits::<17>(34);
        if self.p2_ones0.q.val() & self.p2_ones1.q.val() {
            self.sel2.next = self.p2_inc2.q.val();
        }
        if self.adv.val() | !self.p1_v.q.val() {
            // P1: capture (a command of length 0 leaves no trace)
            self.p1_v.d.next = self.cmd.valid.val() & self.cmd.ready.val() & self.nonzero.val();
            self.p1_addr.d.next = self.cmd.addr.val();
            self.p1_len.d.next = self.cmd.len.val();
        }
        if self.adv.val() {
            // P2: shift, first strobes, payload beats, bytes missing from the last payload beat, high part + 1
            self.p2_v.d.next = self.p1_v.q.val();
            self.p2_lo.d.next = self.p1_addr.q.val().get_bits::<7>(6);
            self.p2_hi.d.next = self.hi_in.val();
            self.p2_inc0.d.next = self.hi_in.val().get_bits::<17>(0) + self.k1_17.val();
            self.p2_inc1.d.next = self.hi_in.val().get_bits::<17>(17) + self.k1_17.val();
            self.p2_inc2.d.next = self.hi_in.val().get_bits::<17>(34) + self.k1_17.val();
            self.p2_ones0.d.next = self.hi_in.val().get_bits::<17>(0) == self.kones_17.val();
            self.p2_ones1.d.next = self.hi_in.val().get_bits::<17>(17) == self.kones_17.val();
            self.p2_s.d.next = self.s1.val();
            self.p2_nk.d.next = self.k0_6.val() - self.len6.val();
            self.p2_nin.d.next = self.p1_len.q.val().get_bits::<7>(6);
            if self.len6.val() != self.k0_6.val() {
                self.p2_nin.d.next = self.p1_len.q.val().get_bits::<7>(6) + self.k1_7.val();
            }
            self.p2_fm.d.next = self.kfull.val() << self.s1.val();
            // P3: one write beat more than payload beats when s + last-beat bytes > 64; last strobes up to the
            // last byte, (nk - s) mod 64 bytes short of a full beat
            self.p3_v.d.next = self.p2_v.q.val();
            self.p3_lo.d.next = self.p2_lo.q.val();
            self.p3_hi.d.next = self.p2_hi.q.val();
            self.p3_hi1.d.next = bit_cast::<51, 17>(self.p2_inc0.q.val())
                | (bit_cast::<51, 17>(self.sel1.val()) << 17)
                | (bit_cast::<51, 17>(self.sel2.val()) << 34);
            self.p3_ns.d.next = !self.p2_s.q.val();
            self.p3_extra.d.next = self.p2_s.q.val() > self.p2_nk.q.val();
            self.p3_nin.d.next = self.p2_nin.q.val();
            self.p3_fm.d.next = self.p2_fm.q.val();
            self.p3_lm.d.next = self.kfull.val() >> (self.p2_nk.q.val() - self.p2_s.q.val());
        }
        if self.load.val() {
            self.act.d.next = true;
            self.a_lo.d.next = self.p3_lo.q.val();
            self.a_hi.d.next = self.p3_hi.q.val();
            self.a_hi1.d.next = self.p3_hi1.q.val();
            self.a_wrap.d.next = false;
            self.a_ns.d.next = self.p3_ns.q.val();
            self.a_extra.d.next = self.p3_extra.q.val();
            self.a_rem.d.next = self.p3_nin.q.val();
            self.a_fm.d.next = self.p3_fm.q.val();
            self.a_lm.d.next = self.p3_lm.q.val();
            self.a_first.d.next = true;
            self.a_owe.d.next = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::axis::beat_of;
    use crate::host::gather::tests::{bytes_of, edge_segs, keep_u64, random_mem, DmaReader, Pace, Seg, FLAT_OUT, HOST, RANDOM};
    use crate::host::gather::GatherPath;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use rnic_driver::host::{dma_beats, DMA_MAX_BYTES};

    /// The host memory's write side: checks every write beat against the commands in order (beat address,
    /// `wr_last`, strobes only inside [addr, addr + len), each such byte strobed exactly once) and applies it.
    struct DmaWriter {
        cmds: Vec<Seg>,
        next: usize,
        beat: u32,
        hits: Vec<u8>,
        stalled: Option<(u64, [u8; 64], u64, bool)>,
        pub done: usize,
    }

    impl DmaWriter {
        fn new(segs: &[Seg]) -> Self {
            let cmds: Vec<Seg> = segs.iter().copied().filter(|s| s.len > 0).collect();
            DmaWriter { cmds, next: 0, beat: 0, hits: Vec::new(), stalled: None, done: 0 }
        }

        fn all_done(&self) -> bool {
            self.next == self.cmds.len()
        }

        /// After the settle: the write beat that moved this cycle, if any.
        fn sample(&mut self, u: &ScatterPath, mem: &mut [u8], cycle: u64) {
            if !u.dma.valid.val() {
                assert!(self.stalled.is_none(), "cycle {cycle}: wr_valid dropped while stalled");
                return;
            }
            let b = (u.dma.addr.val().to_u64().wrapping_sub(HOST), bytes_of(&u.dma.data.val()), keep_u64(&u.dma.strb.val()), u.dma.last.val());
            if let Some(s) = self.stalled {
                // the strobed bytes and the rest of the beat must hold
                assert_eq!(s, b, "cycle {cycle}: the write beat changed while stalled");
            }
            self.stalled = None;
            if !u.dma.ready.val() {
                self.stalled = Some(b);
                return;
            }
            let (addr, data, strb, last) = b;
            let c = *self.cmds.get(self.next).unwrap_or_else(|| panic!("cycle {cycle}: a write beat with no command: {addr:#x}"));
            if self.beat == 0 {
                self.hits = vec![0; c.len];
            }
            let nb = dma_beats(c.addr, c.len as u32);
            assert_eq!(addr, (c.addr / 64 + self.beat as u64) * 64, "command {} {c:?} beat {}: address", self.next, self.beat);
            assert_eq!(last, self.beat + 1 == nb, "command {} {c:?} beat {}: wr_last", self.next, self.beat);
            for i in 0..64 {
                if strb >> i & 1 == 1 {
                    let a = addr + i;
                    assert!(
                        a >= c.addr && a < c.addr + c.len as u64,
                        "command {} {c:?} beat {}: byte {a:#x} strobed outside the command",
                        self.next,
                        self.beat
                    );
                    self.hits[(a - c.addr) as usize] += 1;
                    mem[a as usize] = data[i as usize];
                }
            }
            self.beat += 1;
            if last {
                assert!(self.hits.iter().all(|&h| h == 1), "command {} {c:?}: a byte not strobed exactly once", self.next);
                self.next += 1;
                self.beat = 0;
                self.done += 1;
            }
        }
    }

    /// Scatter the payloads `pays[i]` to `segs[i]` into `mem`; returns the cycle of every write beat.
    fn run_scatter(mem: &mut [u8], segs: &[Seg], pays: &[Vec<u8>], pace: Pace, seed: u64) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut u = ScatterPath::default();
        u.connect_all();
        let stream: Vec<(Vec<u8>, bool)> = pays
            .iter()
            .flat_map(|p| {
                let n = p.len().div_ceil(64);
                p.chunks(64).enumerate().map(move |(i, c)| (c.to_vec(), i + 1 == n)).collect::<Vec<_>>()
            })
            .collect();
        let mut wr = DmaWriter::new(segs);
        let (mut ci, mut pi) = (0, 0);
        let mut cycles = Vec::new();
        let (mut cycle, mut progress, mut after) = (0u64, 0u64, 0);
        loop {
            let sv = ci < segs.len() && rng.gen_ratio(pace.cmd, 1000);
            u.cmd.valid.next = sv;
            let s = segs[ci.min(segs.len() - 1)];
            u.cmd.addr.next = bits::<64>(HOST.wrapping_add(s.addr));
            u.cmd.len.next = bits::<13>(s.len as u64);
            let pv = pi < stream.len() && rng.gen_ratio(pace.resp_valid, 1000);
            u.s_axis.tvalid.next = pv;
            if pv {
                let (d, k) = beat_of(&stream[pi].0);
                u.s_axis.tdata.next = d;
                u.s_axis.tkeep.next = k;
                u.s_axis.tlast.next = stream[pi].1;
            } else {
                u.s_axis.tdata.next = beat_of(&[0xEE; 64]).0;
                u.s_axis.tlast.next = rng.gen();
            }
            u.dma.ready.next = rng.gen_ratio(pace.out_ready, 1000);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            // `idle` (the Responder issues its READ and atomic reads on it): every command taken so far is
            // written out
            if u.idle.val() {
                let taken = segs[..ci].iter().filter(|s| s.len > 0).count();
                assert_eq!(wr.next, taken, "cycle {cycle}: idle with a command taken and not written");
            }
            if sv && u.cmd.ready.val() {
                ci += 1;
            }
            if pv && u.s_axis.tready.val() {
                pi += 1;
            }
            assert!(!u.pay_err.val(), "cycle {cycle}: pay_err on a consistent stream");
            let moved = u.dma.valid.val() && u.dma.ready.val();
            wr.sample(&u, mem, cycle);
            if moved {
                cycles.push(cycle);
                progress = cycle;
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 50));
            cycle += 1;
            assert!(cycle - progress < 2_000, "scatter stopped: {} of {} commands written", wr.next, wr.cmds.len());
            if wr.all_done() && ci == segs.len() {
                assert_eq!(pi, stream.len(), "payload beats left over");
                after += 1;
                if after == 20 {
                    assert!(u.idle.val(), "not idle after every command is written");
                    break;
                }
            }
        }
        cycles
    }

    fn expected(mem: &[u8], segs: &[Seg], pays: &[Vec<u8>]) -> Vec<u8> {
        let mut m = mem.to_vec();
        for (s, p) in segs.iter().zip(pays) {
            m[s.addr as usize..s.addr as usize + s.len].copy_from_slice(p);
        }
        m
    }

    fn random_pays(rng: &mut SmallRng, segs: &[Seg]) -> Vec<Vec<u8>> {
        segs.iter().map(|s| (0..s.len).map(|_| rng.gen()).collect()).collect()
    }

    #[test]
    fn scatter_every_alignment_and_edge_length_under_backpressure() {
        let mut rng = SmallRng::seed_from_u64(17);
        let mut mem = random_mem(&mut rng, 1 << 16);
        let mut segs = edge_segs(&mut rng, mem.len(), 130, DMA_MAX_BYTES);
        assert!(segs.iter().any(|s| s.len == 4096) && segs.iter().any(|s| s.len == 0));
        // across 2^60 (memory index 0x8000): the beat counter wraps and the high part carries through 47 bits
        segs.insert(5, Seg { addr: 0x8000 - 64 * 20 - 13, len: 4096, tag: 0 });
        segs.insert(9, Seg { addr: 0x8000 - 1, len: 2, tag: 0 });
        segs.insert(12, Seg { addr: 0x8000 - 64, len: 64, tag: 0 });
        let pays = random_pays(&mut rng, &segs);
        let want = expected(&mem, &segs, &pays);
        run_scatter(&mut mem, &segs, &pays, RANDOM, 1);
        assert!(mem == want, "memory after the writes");
    }

    #[test]
    fn scatter_short_commands_back_to_back() {
        let mut rng = SmallRng::seed_from_u64(18);
        let mem0 = random_mem(&mut rng, 1 << 14);
        let segs = edge_segs(&mut rng, mem0.len(), 400, 200);
        let pays = random_pays(&mut rng, &segs);
        let want = expected(&mem0, &segs, &pays);
        for (pace, seed) in [(RANDOM, 2), (FLAT_OUT, 3)] {
            let mut mem = mem0.clone();
            run_scatter(&mut mem, &segs, &pays, pace, seed);
            assert!(mem == want, "memory after the writes");
        }
    }

    #[test]
    fn scatter_writes_one_beat_per_cycle() {
        let mut rng = SmallRng::seed_from_u64(19);
        let mem0 = random_mem(&mut rng, 1 << 16);
        let segs: Vec<Seg> = (0..40)
            .map(|i| Seg { addr: 64 * rng.gen_range(0..900) + [0, rng.gen_range(0..64)][i % 2], len: rng.gen_range(1..=1500), tag: 0 })
            .collect();
        let pays = random_pays(&mut rng, &segs);
        let mut mem = mem0.clone();
        let cycles = run_scatter(&mut mem, &segs, &pays, FLAT_OUT, 4);
        assert!(mem == expected(&mem0, &segs, &pays));
        let writes: u64 = segs.iter().map(|s| dma_beats(s.addr, s.len as u32) as u64).sum();
        assert_eq!(cycles.len() as u64, writes);
        // flat out, a command's write beats leave back to back, and the next command's follow with at most one
        // cycle between (the command port's ready comes from registers: a command offered while the pipeline
        // is full is taken a cycle after the active one's last beat frees it)
        let mut i = 0usize;
        let mut bubbles = 0;
        for (k, sg) in segs.iter().enumerate() {
            let n = dma_beats(sg.addr, sg.len as u32) as usize;
            for j in i..i + n {
                if j == 0 {
                    continue;
                }
                let gap = cycles[j] - cycles[j - 1];
                if j == i {
                    assert!(gap <= 2, "command {k}: {gap} cycles after the one before");
                    bubbles += gap - 1;
                } else {
                    assert_eq!(gap, 1, "command {k}: a bubble inside it");
                }
            }
            i += n;
        }
        println!("{bubbles} one-cycle bubbles at {} command boundaries", segs.len() - 1);
    }

    #[test]
    fn scatter_never_strobes_outside_the_command_even_on_a_bad_stream() {
        // the stream's tlast is wrong (every beat marked last): strobes still come from the command's length
        let mut rng = SmallRng::seed_from_u64(20);
        let mut mem = random_mem(&mut rng, 1 << 14);
        let segs = edge_segs(&mut rng, mem.len(), 64, 300);
        let pays = random_pays(&mut rng, &segs);
        let want = expected(&mem, &segs, &pays);
        let mut u = ScatterPath::default();
        u.connect_all();
        let beats: Vec<Vec<u8>> = pays.iter().flat_map(|p| p.chunks(64).map(|c| c.to_vec()).collect::<Vec<_>>()).collect();
        let mut wr = DmaWriter::new(&segs);
        let (mut ci, mut pi, mut errs) = (0, 0, 0);
        for cycle in 0..20_000u64 {
            u.cmd.valid.next = ci < segs.len();
            let s = segs[ci.min(segs.len() - 1)];
            u.cmd.addr.next = bits::<64>(HOST.wrapping_add(s.addr));
            u.cmd.len.next = bits::<13>(s.len as u64);
            u.s_axis.tvalid.next = pi < beats.len();
            u.s_axis.tdata.next = beat_of(&beats[pi.min(beats.len() - 1)]).0;
            u.s_axis.tlast.next = true;
            u.dma.ready.next = rng.gen_ratio(3, 4);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            if u.cmd.valid.val() && u.cmd.ready.val() {
                ci += 1;
            }
            if u.s_axis.tvalid.val() && u.s_axis.tready.val() {
                pi += 1;
            }
            errs += u.pay_err.val() as usize;
            wr.sample(&u, &mut mem, cycle);
            u.clock.next = true.into();
            assert!(simulate(&mut u, 50));
            if wr.all_done() {
                break;
            }
        }
        assert!(wr.all_done());
        assert!(mem == want);
        // every payload beat that is not its command's last was flagged
        let not_last: usize = segs.iter().map(|s| s.len.div_ceil(64).saturating_sub(1)).sum();
        assert!(not_last > 0);
        assert_eq!(errs, not_last, "pay_err pulses");
    }

    /// Gather from `src` into Scatter to `dst`: the stream between them is the one TX Packet Build would see.
    #[test]
    fn scatter_of_gather_round_trips() {
        let mut rng = SmallRng::seed_from_u64(21);
        let src = random_mem(&mut rng, 1 << 16);
        let dst0 = random_mem(&mut rng, 1 << 16);
        let from = edge_segs(&mut rng, src.len(), 120, DMA_MAX_BYTES);
        let to: Vec<Seg> = from
            .iter()
            .map(|s| Seg { addr: 64 * rng.gen_range(0..(dst0.len() - s.len - 64) as u64 / 64) + rng.gen_range(0..64), ..*s })
            .collect();
        let pays: Vec<Vec<u8>> = from.iter().map(|s| src[s.addr as usize..s.addr as usize + s.len].to_vec()).collect();
        let want = expected(&dst0, &to, &pays);
        let mut dst = dst0.clone();
        let pace = RANDOM;
        let mut g = GatherPath::default();
        let mut sc = ScatterPath::default();
        g.connect_all();
        sc.connect_all();
        let mut dma = DmaReader::new();
        let mut reqs = from.iter().copied().filter(|s| s.len > 0);
        let mut next_req = move || reqs.next();
        let mut wr = DmaWriter::new(&to);
        let (mut gi, mut si) = (0, 0);
        let (mut cycle, mut progress) = (0u64, 0u64);
        while !wr.all_done() {
            let gv = gi < from.len() && rng.gen_ratio(pace.cmd, 1000);
            g.g_valid.next = gv;
            let f = from[gi.min(from.len() - 1)];
            g.g_addr.next = bits::<64>(HOST.wrapping_add(f.addr));
            g.g_len.next = bits::<13>(f.len as u64);
            g.g_tag.next = bits::<8>(f.tag as u64);
            dma.drive(&mut g, &src, cycle, &pace, &mut rng);
            let sv = si < to.len() && rng.gen_ratio(pace.cmd, 1000);
            sc.cmd.valid.next = sv;
            let t = to[si.min(to.len() - 1)];
            sc.cmd.addr.next = bits::<64>(HOST.wrapping_add(t.addr));
            sc.cmd.len.next = bits::<13>(t.len as u64);
            sc.dma.ready.next = rng.gen_ratio(pace.out_ready, 1000);
            g.clock.next = false.into();
            sc.clock.next = false.into();
            assert!(simulate(&mut g, 50));
            // the Gather's stream is registered: hand it over, then its ready back
            sc.s_axis.tvalid.next = g.m_axis.tvalid.val();
            sc.s_axis.tdata.next = g.m_axis.tdata.val();
            sc.s_axis.tkeep.next = g.m_axis.tkeep.val();
            sc.s_axis.tlast.next = g.m_axis.tlast.val();
            assert!(simulate(&mut sc, 50));
            g.m_axis.tready.next = sc.s_axis.tready.val();
            assert!(simulate(&mut g, 50));
            if gv && g.g_ready.val() {
                gi += 1;
            }
            if sv && sc.cmd.ready.val() {
                si += 1;
            }
            dma.sample(&g, cycle, &pace, &mut next_req);
            assert!(!sc.pay_err.val(), "cycle {cycle}: the Gather's tlast disagrees with the length");
            if sc.dma.valid.val() && sc.dma.ready.val() {
                progress = cycle;
            }
            wr.sample(&sc, &mut dst, cycle);
            g.clock.next = true.into();
            sc.clock.next = true.into();
            assert!(simulate(&mut g, 50));
            assert!(simulate(&mut sc, 50));
            cycle += 1;
            assert!(cycle - progress < 2_000, "round trip stopped after {} commands", wr.done);
        }
        assert!(next_req().is_none());
        assert!(dst == want, "destination memory after the round trip");
    }
}
