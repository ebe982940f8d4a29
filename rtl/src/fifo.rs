//! Memories and the small show-ahead FIFO: [`DistRam`] (asynchronous read, LUTRAM), [`SdpRam`] (registered
//! read, block RAM), and [`Fifo`] on distributed RAM (LUTRAM): the head is readable while `empty` is low, `pop`
//! removes it, `push` writes `din` unless `full`. Depth 2^AW.
//!
//! The storage is a hand-written leaf ([`DistRam`]: synchronous write, asynchronous read, so Vivado infers
//! RAM32M/RAM64M), because rust-hdl's `RAM` has a registered read port and its stock FIFO emits 32-bit
//! literals that the lint gate rejects. Pointer arithmetic is done at the pointers' own width.

use rust_hdl::prelude::*;

/// 2^AW words of T: `rdata = mem[raddr]` (combinational), `mem[waddr] <= wdata` at the clock edge when `we`.
#[derive(LogicBlock)]
pub struct DistRam<T: Synth, const AW: usize> {
    pub clock: Signal<In, Clock>,
    pub waddr: Signal<In, Bits<AW>>,
    pub wdata: Signal<In, T>,
    pub we: Signal<In, Bit>,
    pub raddr: Signal<In, Bits<AW>>,
    pub rdata: Signal<Out, T>,
    _mem: Vec<T>,
}

impl<T: Synth, const AW: usize> Default for DistRam<T, AW> {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            waddr: Default::default(),
            wdata: Default::default(),
            we: Default::default(),
            raddr: Default::default(),
            rdata: Default::default(),
            _mem: vec![T::default(); 1 << AW],
        }
    }
}

impl<T: Synth, const AW: usize> Logic for DistRam<T, AW> {
    fn update(&mut self) {
        if self.clock.pos_edge() && self.we.val() {
            self._mem[self.waddr.val().index()] = self.wdata.val();
        }
        self.rdata.next = self._mem[self.raddr.val().index()];
    }

    fn connect(&mut self) {
        self.rdata.connect();
    }

    fn hdl(&self) -> Verilog {
        let w = T::BITS;
        let d = 1usize << AW;
        Verilog::Custom(format!(
            "reg [{}:0] mem [0:{}];\n\
             integer i;\n\
             initial begin\n   for (i = 0; i < {d}; i = i + 1) mem[i] = {w}'d0;\nend\n\
             always @(posedge clock) begin\n   if (we) mem[waddr] <= wdata;\nend\n\
             always @(*) begin\n   rdata = mem[raddr];\nend\n",
            w - 1,
            d - 1
        ))
    }
}

/// Simple dual-port RAM of 2^AW words of T with a registered, read-first read port: one write port, one
/// read port, same clock. Written as `reg [W-1:0] mem [0:2^AW-1]` so that Yosys/Vivado map it to BRAM.
#[derive(LogicBlock)]
pub struct SdpRam<T: Synth, const AW: usize> {
    pub clock: Signal<In, Clock>,
    pub waddr: Signal<In, Bits<AW>>,
    pub wdata: Signal<In, T>,
    pub we: Signal<In, Bit>,
    pub raddr: Signal<In, Bits<AW>>,
    pub rdata: Signal<Out, T>,
    _mem: Vec<T>,
}

impl<T: Synth, const AW: usize> Default for SdpRam<T, AW> {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            waddr: Default::default(),
            wdata: Default::default(),
            we: Default::default(),
            raddr: Default::default(),
            rdata: Default::default(),
            _mem: vec![T::default(); 1 << AW],
        }
    }
}

impl<T: Synth, const AW: usize> Logic for SdpRam<T, AW> {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            // read-first, as the Verilog's nonblocking assignments
            self.rdata.next = self._mem[self.raddr.val().index()];
            if self.we.val() {
                self._mem[self.waddr.val().index()] = self.wdata.val();
            }
        }
    }

    fn connect(&mut self) {
        self.rdata.connect();
    }

    fn hdl(&self) -> Verilog {
        let w = T::BITS;
        let d = 1usize << AW;
        Verilog::Custom(format!(
            "reg [{}:0] mem [0:{}];\n\
             integer i;\n\
             initial begin\n   for (i = 0; i < {d}; i = i + 1) mem[i] = {w}'d0;\n   rdata = {w}'d0;\nend\n\
             always @(posedge clock) begin\n   if (we) mem[waddr] <= wdata;\n   rdata <= mem[raddr];\nend\n",
            w - 1,
            d - 1
        ))
    }
}

/// Show-ahead FIFO of 2^AW entries. `AW1` must be `AW + 1` (the pointers carry a wrap bit).
#[derive(LogicBlock)]
pub struct Fifo<T: Synth, const AW: usize, const AW1: usize> {
    pub clock: Signal<In, Clock>,
    pub din: Signal<In, T>,
    pub push: Signal<In, Bit>,
    pub full: Signal<Out, Bit>,
    pub dout: Signal<Out, T>,
    pub pop: Signal<In, Bit>,
    pub empty: Signal<Out, Bit>,
    /// Entries held.
    pub count: Signal<Out, Bits<AW1>>,
    ram: DistRam<T, AW>,
    wptr: DFF<Bits<AW1>>,
    rptr: DFF<Bits<AW1>>,
    one: Constant<Bits<AW1>>,
    wrap: Constant<Bits<AW1>>,
}

impl<T: Synth, const AW: usize, const AW1: usize> Default for Fifo<T, AW, AW1> {
    fn default() -> Self {
        assert_eq!(AW1, AW + 1);
        Self {
            clock: Default::default(),
            din: Default::default(),
            push: Default::default(),
            full: Default::default(),
            dout: Default::default(),
            pop: Default::default(),
            empty: Default::default(),
            count: Default::default(),
            ram: Default::default(),
            wptr: Default::default(),
            rptr: Default::default(),
            one: Constant::new(bits::<AW1>(1)),
            wrap: Constant::new(bits::<AW1>(1 << AW)),
        }
    }
}

impl<T: Synth, const AW: usize, const AW1: usize> Logic for Fifo<T, AW, AW1> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, wptr, rptr);
        clock!(self, clock, ram);
        self.empty.next = self.wptr.q.val() == self.rptr.q.val();
        self.count.next = self.wptr.q.val() - self.rptr.q.val();
        // full: same slot, other lap (the pointers differ in the wrap bit only)
        self.full.next = (self.wptr.q.val() ^ self.rptr.q.val()) == self.wrap.val();
        self.ram.waddr.next = self.wptr.q.val().get_bits::<AW>(0);
        self.ram.wdata.next = self.din.val();
        self.ram.we.next = self.push.val() & !self.full.val();
        self.ram.raddr.next = self.rptr.q.val().get_bits::<AW>(0);
        self.dout.next = self.ram.rdata.val();
        if self.push.val() & !self.full.val() {
            self.wptr.d.next = self.wptr.q.val() + self.one.val();
        }
        if self.pop.val() & !self.empty.val() {
            self.rptr.d.next = self.rptr.q.val() + self.one.val();
        }
    }
}

/// Show-ahead FIFO of 2^AW entries in block RAM (an [`SdpRam`]): the same ports and behaviour as [`Fifo`]
/// (the head on `dout` while `empty` is low, a push and a pop in the same cycle, `count`), for queues too
/// deep or too wide for LUTRAM. `AW1` must be `AW + 1`.
///
/// The RAM's registered read port always reads the slot that will be the head after this cycle (`rptr`, or
/// `rptr + 1` on a pop, from a register so that `pop` only drives a 2:1 mux into the address), so `dout` is
/// that word one cycle later. A word pushed into the slot being read in the same cycle is not in the RAM yet
/// (read-first), so it is taken from a bypass register instead.
///
/// `empty` and `full` come straight from registers (updated from `push`/`pop` and pointer compares made on
/// registers), so a consumer's ready/valid logic does not start with a pointer compare: the FIFO sits on
/// RX Parse's payload stream, whose consumer's handshake feeds `pop` back in the same cycle.
#[derive(LogicBlock)]
pub struct BramFifo<T: Synth, const AW: usize, const AW1: usize> {
    pub clock: Signal<In, Clock>,
    pub din: Signal<In, T>,
    pub push: Signal<In, Bit>,
    pub full: Signal<Out, Bit>,
    pub dout: Signal<Out, T>,
    pub pop: Signal<In, Bit>,
    pub empty: Signal<Out, Bit>,
    /// Entries held.
    pub count: Signal<Out, Bits<AW1>>,
    ram: SdpRam<T, AW>,
    wptr: DFF<Bits<AW1>>,
    rptr: DFF<Bits<AW1>>,
    /// the word written to the slot the RAM read in the last cycle, and whether there was one
    byp: DFF<T>,
    byp_v: DFF<Bit>,
    raddr: Signal<Local, Bits<AW1>>,
    wr: Signal<Local, Bit>,
    rd: Signal<Local, Bit>,
    rnext: Signal<Local, Bits<AW1>>,
    wnext: Signal<Local, Bits<AW1>>,
    /// `wptr == rptr + 1`: one entry held
    eq_n: Signal<Local, Bit>,
    /// registered flags: not empty (0 after reset), full
    nempty: DFF<Bit>,
    full_r: DFF<Bit>,
    one: Constant<Bits<AW1>>,
    wrap: Constant<Bits<AW1>>,
}

impl<T: Synth, const AW: usize, const AW1: usize> Default for BramFifo<T, AW, AW1> {
    fn default() -> Self {
        assert_eq!(AW1, AW + 1);
        Self {
            clock: Default::default(),
            din: Default::default(),
            push: Default::default(),
            full: Default::default(),
            dout: Default::default(),
            pop: Default::default(),
            empty: Default::default(),
            count: Default::default(),
            ram: Default::default(),
            wptr: Default::default(),
            rptr: Default::default(),
            byp: Default::default(),
            byp_v: Default::default(),
            raddr: Default::default(),
            wr: Default::default(),
            rd: Default::default(),
            rnext: Default::default(),
            wnext: Default::default(),
            eq_n: Default::default(),
            nempty: Default::default(),
            full_r: Default::default(),
            one: Constant::new(bits::<AW1>(1)),
            wrap: Constant::new(bits::<AW1>(1 << AW)),
        }
    }
}

impl<T: Synth, const AW: usize, const AW1: usize> Logic for BramFifo<T, AW, AW1> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, wptr, rptr, byp, byp_v, nempty, full_r);
        clock!(self, clock, ram);
        self.empty.next = !self.nempty.q.val();
        self.full.next = self.full_r.q.val();
        self.count.next = self.wptr.q.val() - self.rptr.q.val();
        self.wr.next = self.push.val() & !self.full_r.q.val();
        self.rd.next = self.pop.val() & self.nempty.q.val();
        self.rnext.next = self.rptr.q.val() + self.one.val();
        self.wnext.next = self.wptr.q.val() + self.one.val();
        self.eq_n.next = self.wptr.q.val() == self.rnext.val();
        self.raddr.next = self.rptr.q.val();
        if self.rd.val() {
            self.raddr.next = self.rnext.val();
            self.rptr.d.next = self.rnext.val();
        }
        if self.wr.val() {
            self.wptr.d.next = self.wnext.val();
        }
        // the flags after this cycle: a push alone may fill, a pop alone may empty, both keep the count
        if self.wr.val() {
            self.nempty.d.next = true;
            if !self.rd.val() {
                self.full_r.d.next = (self.wnext.val() ^ self.rptr.q.val()) == self.wrap.val();
            }
        } else if self.rd.val() {
            self.nempty.d.next = !self.eq_n.val();
            self.full_r.d.next = false;
        }
        self.ram.waddr.next = self.wptr.q.val().get_bits::<AW>(0);
        self.ram.wdata.next = self.din.val();
        self.ram.we.next = self.wr.val();
        self.ram.raddr.next = self.raddr.val().get_bits::<AW>(0);
        self.byp.d.next = self.din.val();
        // the slot the RAM reads this cycle is `wptr`'s: `rptr + 1` on a pop (one entry held), else `rptr`
        // (empty)
        self.byp_v.d.next = self.wr.val() & self.rd.val() & self.eq_n.val();
        if !self.rd.val() {
            self.byp_v.d.next = self.wr.val() & !self.nempty.q.val();
        }
        self.dout.next = self.ram.rdata.val();
        if self.byp_v.q.val() {
            self.dout.next = self.byp.q.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;

    /// The block-RAM FIFO against a queue, with bursts that fill it, drain it to empty and push into an empty
    /// one while popping (the bypass cases), then its Verilog through Yosys.
    #[test]
    fn bram_fifo_matches_a_queue_under_random_push_pop() {
        let mut f = BramFifo::<Bits<12>, 3, 4>::default();
        f.connect_all();
        let mut q = VecDeque::new();
        let mut rng = SmallRng::seed_from_u64(5);
        let (mut fulls, mut bypass) = (0, 0);
        for cycle in 0..20_000 {
            // phases: push-heavy (fills), pop-heavy (drains), balanced
            let (pp, pq) = match (cycle / 500) % 3 {
                0 => (0.8, 0.3),
                1 => (0.3, 0.8),
                _ => (0.5, 0.5),
            };
            let push = rng.gen_bool(pp);
            let pop = rng.gen_bool(pq);
            let v = rng.gen_range(0..4096u64);
            f.din.next = bits::<12>(v);
            f.push.next = push;
            f.pop.next = pop;
            f.clock.next = false.into();
            assert!(simulate(&mut f, 20));
            assert_eq!(f.empty.val(), q.is_empty(), "cycle {cycle}");
            assert_eq!(f.full.val(), q.len() == 8, "cycle {cycle}");
            assert_eq!(f.count.val().to_u64(), q.len() as u64, "cycle {cycle}");
            if !q.is_empty() {
                assert_eq!(f.dout.val().to_u64(), *q.front().unwrap(), "cycle {cycle}");
            }
            let full = q.len() == 8;
            fulls += full as u32;
            bypass += (push && q.len() <= 1) as u32;
            if pop && !q.is_empty() {
                q.pop_front();
            }
            if push && !full {
                q.push_back(v);
            }
            f.clock.next = true.into();
            assert!(simulate(&mut f, 20));
        }
        assert!(fulls > 100 && bypass > 100, "the run reached full {fulls} and pushed near empty {bypass} times");
        let v = generate_verilog(&f);
        yosys_validate("bram_fifo", &v).unwrap();
    }

    #[test]
    fn fifo_matches_a_queue_under_random_push_pop() {
        let mut f = Fifo::<Bits<12>, 3, 4>::default();
        f.connect_all();
        let mut q = VecDeque::new();
        let mut rng = SmallRng::seed_from_u64(3);
        for cycle in 0..3000 {
            let push = rng.gen_bool(0.5);
            let pop = rng.gen_bool(0.45);
            let v = rng.gen_range(0..4096u64);
            f.din.next = bits::<12>(v);
            f.push.next = push;
            f.pop.next = pop;
            f.clock.next = false.into();
            assert!(simulate(&mut f, 20));
            assert_eq!(f.empty.val(), q.is_empty(), "cycle {cycle}");
            assert_eq!(f.full.val(), q.len() == 8, "cycle {cycle}");
            assert_eq!(f.count.val().to_u64(), q.len() as u64, "cycle {cycle}");
            if !q.is_empty() {
                assert_eq!(f.dout.val().to_u64(), *q.front().unwrap(), "cycle {cycle}");
            }
            // a push while full is refused, even with a pop in the same cycle
            let full = q.len() == 8;
            if pop && !q.is_empty() {
                q.pop_front();
            }
            if push && !full {
                q.push_back(v);
            }
            f.clock.next = true.into();
            assert!(simulate(&mut f, 20));
        }
        let v = generate_verilog(&f);
        yosys_validate("fifo", &v).unwrap();
    }
}
