//! Clock-domain crossings of the board layer. Nothing crosses between the board's clocks except through
//! these blocks (`board::cdc_check` verifies it on the emitted Verilog):
//!
//! * [`SyncFlops`]: two flip-flops in the destination domain, the only place where a bit is sampled from
//!   another clock. Used for gray-coded pointers and for levels that change rarely; never for a bus whose
//!   bits may change together.
//! * [`AsyncFifo`]: a show-ahead FIFO with its write side in one clock and its read side in another; the
//!   pointers cross as gray code through [`SyncFlops`], the data through a distributed RAM written in the
//!   write clock and read asynchronously (LUTRAM: Vivado's RAM32M/RAM64M).
//! * [`ResetSync`]: a reset asserted at once (asynchronously) and released in step with the destination
//!   clock, after two of its edges.
//!
//! Vivado constraints for each (`constraints/u250/cdc.xdc`): `ASYNC_REG` on the synchroniser flops, and
//! `set_max_delay -datapath_only` (source period) plus `set_bus_skew` on the gray pointers, as UG949 asks for
//! gray-coded buses; no `set_clock_groups`, which would override them.

use rust_hdl::prelude::*;
use rtl::common::fifo::DistRam;

/// Two flip-flops in the destination clock (`s1` samples the other domain, `s2` gives it a cycle to settle).
#[derive(LogicBlock, Default)]
pub struct SyncFlops<const W: usize> {
    pub clock: Signal<In, Clock>,
    pub d: Signal<In, Bits<W>>,
    pub q: Signal<Out, Bits<W>>,
    /// `cdc_s1` / `cdc_s2`: the names the XDC finds them by (`ASYNC_REG`).
    cdc_s1: DFF<Bits<W>>,
    cdc_s2: DFF<Bits<W>>,
}

impl<const W: usize> Logic for SyncFlops<W> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, cdc_s1, cdc_s2);
        self.cdc_s1.d.next = self.d.val();
        self.cdc_s2.d.next = self.cdc_s1.q.val();
        self.q.next = self.cdc_s2.q.val();
    }
}

/// Show-ahead FIFO of 2^AW entries across two clocks (`AW1 = AW + 1`: the pointers carry a wrap bit).
///
/// Write side (`wclk`): `din` is taken at the edge when `push` is high and `full` low. Read side (`rclk`): the
/// head is on `dout` while `empty` is low, `pop` removes it. Each side keeps its pointer in binary and in gray
/// code (the gray copy in a register, so only one bit of what crosses changes per step), and compares its own
/// gray pointer with the other side's, synchronised: `full` when they differ in exactly the two top bits (one
/// lap apart), `empty` when equal. The other side's moves are seen two or three edges late, so `full` and
/// `empty` are conservative, never optimistic. Each side also keeps its pointer + 1 (binary and gray) in
/// registers, so a push or pop only selects register values: the handshake to the next state is a compare and
/// a 2:1 mux.
#[derive(LogicBlock)]
pub struct AsyncFifo<T: Synth, const AW: usize, const AW1: usize> {
    pub wclk: Signal<In, Clock>,
    pub din: Signal<In, T>,
    pub push: Signal<In, Bit>,
    pub full: Signal<Out, Bit>,
    pub rclk: Signal<In, Clock>,
    pub dout: Signal<Out, T>,
    pub pop: Signal<In, Bit>,
    pub empty: Signal<Out, Bit>,
    ram: DistRam<T, AW>,
    wbin: DFF<Bits<AW1>>,
    wgray: DFF<Bits<AW1>>,
    wbin1: DFFWithInit<Bits<AW1>>,
    wgray1: DFFWithInit<Bits<AW1>>,
    rbin: DFF<Bits<AW1>>,
    rgray: DFF<Bits<AW1>>,
    rbin1: DFFWithInit<Bits<AW1>>,
    rgray1: DFFWithInit<Bits<AW1>>,
    /// the write pointer (gray) into the read clock, the read pointer into the write clock
    w2r: SyncFlops<AW1>,
    r2w: SyncFlops<AW1>,
    l_wr: Signal<Local, Bit>,
    l_rd: Signal<Local, Bit>,
    l_full: Signal<Local, Bit>,
    l_empty: Signal<Local, Bit>,
    l_wn: Signal<Local, Bits<AW1>>,
    l_rn: Signal<Local, Bits<AW1>>,
    one: Constant<Bits<AW1>>,
    /// the two top bits: a gray pointer one lap ahead differs from the other in exactly these
    lap: Constant<Bits<AW1>>,
}

impl<T: Synth, const AW: usize, const AW1: usize> Default for AsyncFifo<T, AW, AW1> {
    fn default() -> Self {
        assert_eq!(AW1, AW + 1);
        assert!(AW >= 1);
        Self {
            wclk: Default::default(),
            din: Default::default(),
            push: Default::default(),
            full: Default::default(),
            rclk: Default::default(),
            dout: Default::default(),
            pop: Default::default(),
            empty: Default::default(),
            ram: Default::default(),
            wbin: Default::default(),
            wgray: Default::default(),
            wbin1: DFFWithInit::new(bits::<AW1>(1)),
            wgray1: DFFWithInit::new(bits::<AW1>(1)),
            rbin: Default::default(),
            rgray: Default::default(),
            rbin1: DFFWithInit::new(bits::<AW1>(1)),
            rgray1: DFFWithInit::new(bits::<AW1>(1)),
            w2r: Default::default(),
            r2w: Default::default(),
            l_wr: Default::default(),
            l_rd: Default::default(),
            l_full: Default::default(),
            l_empty: Default::default(),
            l_wn: Default::default(),
            l_rn: Default::default(),
            one: Constant::new(bits::<AW1>(1)),
            lap: Constant::new(bits::<AW1>(3 << (AW1 - 2))),
        }
    }
}

impl<T: Synth, const AW: usize, const AW1: usize> Logic for AsyncFifo<T, AW, AW1> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, wclk, wbin, wgray, wbin1, wgray1);
        dff_setup!(self, rclk, rbin, rgray, rbin1, rgray1);
        self.ram.clock.next = self.wclk.val();
        self.w2r.clock.next = self.rclk.val();
        self.r2w.clock.next = self.wclk.val();
        self.w2r.d.next = self.wgray.q.val();
        self.r2w.d.next = self.rgray.q.val();
        // write side
        self.l_full.next = (self.wgray.q.val() ^ self.r2w.q.val()) == self.lap.val();
        self.l_wr.next = self.push.val() & !self.l_full.val();
        self.full.next = self.l_full.val();
        self.ram.waddr.next = self.wbin.q.val().get_bits::<AW>(0);
        self.ram.wdata.next = self.din.val();
        self.ram.we.next = self.l_wr.val();
        self.l_wn.next = self.wbin1.q.val() + self.one.val();
        if self.l_wr.val() {
            self.wbin.d.next = self.wbin1.q.val();
            self.wgray.d.next = self.wgray1.q.val();
            self.wbin1.d.next = self.l_wn.val();
            self.wgray1.d.next = self.l_wn.val() ^ (self.l_wn.val() >> 1);
        }
        // read side
        self.l_empty.next = self.rgray.q.val() == self.w2r.q.val();
        self.l_rd.next = self.pop.val() & !self.l_empty.val();
        self.empty.next = self.l_empty.val();
        self.ram.raddr.next = self.rbin.q.val().get_bits::<AW>(0);
        self.dout.next = self.ram.rdata.val();
        self.l_rn.next = self.rbin1.q.val() + self.one.val();
        if self.l_rd.val() {
            self.rbin.d.next = self.rbin1.q.val();
            self.rgray.d.next = self.rgray1.q.val();
            self.rbin1.d.next = self.l_rn.val();
            self.rgray1.d.next = self.l_rn.val() ^ (self.l_rn.val() >> 1);
        }
    }
}

/// A reset for the `clock` domain from a reset of another domain (or a pin): `rst` rises as soon as `arst`
/// does, and falls on the second edge of `clock` after `arst` has fallen. High after configuration until
/// then, so the domain starts in reset.
#[derive(LogicBlock, Default)]
pub struct ResetSync {
    pub clock: Signal<In, Clock>,
    pub arst: Signal<In, Bit>,
    pub rst: Signal<Out, Bit>,
    /// simulation state: the two flops (`cdc_rst_s1`, `cdc_rst_s2` in the Verilog), and whether the power-on
    /// value was set
    _s1: bool,
    _s2: bool,
    _started: bool,
}

impl Logic for ResetSync {
    fn update(&mut self) {
        if !self._started {
            self._s1 = true;
            self._s2 = true;
            self._started = true;
        }
        if self.arst.val() {
            self._s1 = true;
            self._s2 = true;
        } else if self.clock.pos_edge() {
            self._s2 = self._s1;
            self._s1 = false;
        }
        self.rst.next = self._s2;
    }

    fn connect(&mut self) {
        self.rst.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Custom(
            "reg cdc_rst_s1 = 1'b1;\n\
             reg cdc_rst_s2 = 1'b1;\n\
             always @(posedge clock or posedge arst) begin\n   \
                if (arst) begin\n      cdc_rst_s1 <= 1'b1;\n      cdc_rst_s2 <= 1'b1;\n   end else begin\n      \
                cdc_rst_s1 <= 1'b0;\n      cdc_rst_s2 <= cdc_rst_s1;\n   end\nend\n\
             always @(*) rst = cdc_rst_s2;\n"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;

    /// Two free-running clocks with half periods `hw` and `hr` (ps) and a phase offset: the time and the domain
    /// (true: write clock) of each next edge.
    struct TwoClocks {
        tw: u64,
        tr: u64,
        hw: u64,
        hr: u64,
    }

    impl TwoClocks {
        fn next(&mut self) -> bool {
            if self.tw <= self.tr {
                self.tw += self.hw;
                true
            } else {
                self.tr += self.hr;
                false
            }
        }
    }

    /// The FIFO between two clocks of random periods (1.5 to 6 ns, so ratios from 1:4 to 4:1, never a simple
    /// fraction) and a random phase, the writer and the reader each busy or idle in random bursts: every word
    /// comes out once, in order, `dout` holds the head whenever `empty` is low, a push while `full` is refused,
    /// and both `full` and `empty` are reached. Then its Verilog through Yosys.
    #[test]
    fn async_fifo_delivers_every_word_in_order_between_unrelated_clocks() {
        for seed in 0..12u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut f = AsyncFifo::<Bits<16>, 3, 4>::default();
            f.connect_all();
            let mut clk = TwoClocks { tw: rng.gen_range(0..3000), tr: 0, hw: rng.gen_range(750..3000), hr: rng.gen_range(750..3000) };
            let (mut wlevel, mut rlevel) = (false, false);
            let mut q: VecDeque<u64> = VecDeque::new();
            let (mut next_in, mut next_out) = (0u64, 0u64);
            let (mut fulls, mut empties) = (0u32, 0u32);
            let (mut wbusy, mut rbusy) = (0.5f64, 0.5f64);
            // inputs for the coming rising edge of each clock
            let (mut push, mut pop) = (false, false);
            for edge in 0..40_000u32 {
                if edge % 2000 == 0 {
                    wbusy = [0.1, 0.5, 0.95][rng.gen_range(0..3)];
                    rbusy = [0.1, 0.5, 0.95][rng.gen_range(0..3)];
                }
                let w = clk.next();
                if w {
                    wlevel = !wlevel;
                    f.wclk.next = wlevel.into();
                } else {
                    rlevel = !rlevel;
                    f.rclk.next = rlevel.into();
                }
                assert!(simulate(&mut f, 50));
                if w && wlevel {
                    // this edge took a push if one was offered and the FIFO was not full before it
                    if push {
                        q.push_back(next_in);
                        next_in += 1;
                    }
                    let full = f.full.val();
                    fulls += full as u32;
                    push = !full && rng.gen_bool(wbusy);
                    f.push.next = push;
                    f.din.next = bits::<16>(next_in & 0xFFFF);
                    assert!(simulate(&mut f, 50));
                    assert!(q.len() <= 8, "seed {seed}: more than 8 words held");
                } else if !w && rlevel {
                    if pop {
                        assert_eq!(q.pop_front(), Some(next_out), "seed {seed}: popped a word never pushed");
                        next_out += 1;
                    }
                    let empty = f.empty.val();
                    empties += empty as u32;
                    if !empty {
                        assert!(!q.is_empty(), "seed {seed}: not empty, nothing pushed");
                        assert_eq!(f.dout.val().to_u64(), next_out & 0xFFFF, "seed {seed}: head");
                    }
                    pop = !empty && rng.gen_bool(rbusy);
                    f.pop.next = pop;
                    assert!(simulate(&mut f, 50));
                }
            }
            assert!(next_out > 1000, "seed {seed}: only {next_out} words through");
            assert!(fulls > 20 && empties > 20, "seed {seed}: full {fulls}, empty {empties} edges");
        }
        let mut f = AsyncFifo::<Bits<16>, 3, 4>::default();
        f.connect_all();
        yosys_validate("async_fifo", &generate_verilog(&f)).unwrap();
    }

    /// The reset synchroniser: high from power-on, rises with `arst` between clock edges, falls on the second
    /// clock edge after `arst` falls.
    #[test]
    fn reset_sync_asserts_at_once_and_releases_after_two_edges() {
        let mut r = ResetSync::default();
        r.connect_all();
        let edge = |r: &mut ResetSync| {
            r.clock.next = true.into();
            assert!(simulate(r, 20));
            let v = r.rst.val();
            r.clock.next = false.into();
            assert!(simulate(r, 20));
            v
        };
        r.arst.next = false;
        assert!(simulate(&mut r, 20));
        assert!(r.rst.val(), "in reset after configuration");
        assert!(edge(&mut r));
        assert!(!edge(&mut r), "released on the second edge");
        assert!(!edge(&mut r));
        r.arst.next = true;
        assert!(simulate(&mut r, 20));
        assert!(r.rst.val(), "asserted without a clock edge");
        assert!(edge(&mut r));
        r.arst.next = false;
        assert!(simulate(&mut r, 20));
        assert!(edge(&mut r));
        assert!(!edge(&mut r));
        yosys_validate("reset_sync", &generate_verilog(&r)).unwrap();
    }
}
