//! Memories and the small show-ahead FIFO: [`DistRam`] (asynchronous read, LUTRAM), [`SdpRam`] (registered
//! read, block RAM), and [`Fifo`] on distributed RAM (LUTRAM): the head is readable while `empty` is low, `pop`
//! removes it, `push` writes `din` unless `full`. Depth 2^AW. [`BramFifo`] is the same show-ahead FIFO on
//! [`SdpRam`] (block RAM) for queues too deep or too wide for LUTRAM: its RAM reads the next head a cycle
//! ahead, and a word pushed into the slot being read comes from a bypass register. Both FIFOs take their
//! pointers and flags from one block, [`FifoPtrs`].
//!
//! The storage is a hand-written leaf ([`DistRam`]: synchronous write, asynchronous read, so Vivado infers
//! RAM32M/RAM64M), because rust-hdl's `RAM` has a registered read port and its stock FIFO emits 32-bit
//! literals that the lint gate rejects. Pointer arithmetic is done at the pointers' own width. Both FIFOs
//! give `empty` and `full` from registers, so no handshake that feeds `push` or `pop` starts with a pointer
//! compare (the whole top's deepest paths ran through such compares).
//!
//! Both memories start all zero. The zeroing `initial` loop is for simulation only (`ifndef SYNTHESIS`: Yosys
//! and Vivado define `SYNTHESIS`): synthesis takes a memory without initial contents as all zeros, which is
//! what Xilinx block and distributed RAM and flip-flops power up to (INIT 0), and Yosys' frontend unrolls the
//! loop entry by entry (over 50 s for the Responder's 4,096 x 241-bit READ resource table).

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
             `ifndef SYNTHESIS\n\
             integer i;\n\
             initial begin\n   for (i = 0; i < {d}; i = i + 1) mem[i] = {w}'d0;\nend\n\
             `endif\n\
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
             `ifndef SYNTHESIS\n\
             integer i;\n\
             initial begin\n   for (i = 0; i < {d}; i = i + 1) mem[i] = {w}'d0;\n   rdata = {w}'d0;\nend\n\
             `endif\n\
             always @(posedge clock) begin\n   if (we) mem[waddr] <= wdata;\n   rdata <= mem[raddr];\nend\n",
            w - 1,
            d - 1
        ))
    }
}

/// The pointers and registered flags both FIFOs share (`AW1` = address bits + 1: the pointers carry a wrap
/// bit). `empty` and `full` come from registers, worked out from this cycle's push and pop: a push alone may
/// fill (same slot, other lap), a pop alone may empty (one entry held), both keep the count.
#[derive(LogicBlock)]
pub struct FifoPtrs<const AW1: usize> {
    pub clock: Signal<In, Clock>,
    pub push: Signal<In, Bit>,
    pub pop: Signal<In, Bit>,
    /// the push and the pop taken this cycle (a push unless full, a pop unless empty)
    pub wr: Signal<Out, Bit>,
    pub rd: Signal<Out, Bit>,
    pub empty: Signal<Out, Bit>,
    pub full: Signal<Out, Bit>,
    /// entries held
    pub count: Signal<Out, Bits<AW1>>,
    /// the write and read pointers, and the read pointer + 1
    pub wptr: Signal<Out, Bits<AW1>>,
    pub rptr: Signal<Out, Bits<AW1>>,
    pub rnext: Signal<Out, Bits<AW1>>,
    /// one entry held (`wptr == rptr + 1`)
    pub one_held: Signal<Out, Bit>,
    wp: DFF<Bits<AW1>>,
    rp: DFF<Bits<AW1>>,
    /// not empty (0 after reset), full
    nempty: DFF<Bit>,
    full_r: DFF<Bit>,
    l_wr: Signal<Local, Bit>,
    l_rd: Signal<Local, Bit>,
    l_wnext: Signal<Local, Bits<AW1>>,
    l_rnext: Signal<Local, Bits<AW1>>,
    l_one: Signal<Local, Bit>,
    one: Constant<Bits<AW1>>,
    wrap: Constant<Bits<AW1>>,
}

impl<const AW1: usize> Default for FifoPtrs<AW1> {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            push: Default::default(),
            pop: Default::default(),
            wr: Default::default(),
            rd: Default::default(),
            empty: Default::default(),
            full: Default::default(),
            count: Default::default(),
            wptr: Default::default(),
            rptr: Default::default(),
            rnext: Default::default(),
            one_held: Default::default(),
            wp: Default::default(),
            rp: Default::default(),
            nempty: Default::default(),
            full_r: Default::default(),
            l_wr: Default::default(),
            l_rd: Default::default(),
            l_wnext: Default::default(),
            l_rnext: Default::default(),
            l_one: Default::default(),
            one: Constant::new(bits::<AW1>(1)),
            wrap: Constant::new(bits::<AW1>(1 << (AW1 - 1))),
        }
    }
}

impl<const AW1: usize> Logic for FifoPtrs<AW1> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, wp, rp, nempty, full_r);
        self.l_wr.next = self.push.val() & !self.full_r.q.val();
        self.l_rd.next = self.pop.val() & self.nempty.q.val();
        self.l_wnext.next = self.wp.q.val() + self.one.val();
        self.l_rnext.next = self.rp.q.val() + self.one.val();
        self.l_one.next = self.wp.q.val() == self.l_rnext.val();
        self.wr.next = self.l_wr.val();
        self.rd.next = self.l_rd.val();
        self.empty.next = !self.nempty.q.val();
        self.full.next = self.full_r.q.val();
        self.count.next = self.wp.q.val() - self.rp.q.val();
        self.wptr.next = self.wp.q.val();
        self.rptr.next = self.rp.q.val();
        self.rnext.next = self.l_rnext.val();
        self.one_held.next = self.l_one.val();
        if self.l_wr.val() {
            self.wp.d.next = self.l_wnext.val();
        }
        if self.l_rd.val() {
            self.rp.d.next = self.l_rnext.val();
        }
        if self.l_wr.val() {
            self.nempty.d.next = true;
            if !self.l_rd.val() {
                self.full_r.d.next = (self.l_wnext.val() ^ self.rp.q.val()) == self.wrap.val();
            }
        } else if self.l_rd.val() {
            self.nempty.d.next = !self.l_one.val();
            self.full_r.d.next = false;
        }
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
    ptrs: FifoPtrs<AW1>,
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
            ptrs: Default::default(),
        }
    }
}

impl<T: Synth, const AW: usize, const AW1: usize> Logic for Fifo<T, AW, AW1> {
    #[hdl_gen]
    fn update(&mut self) {
        clock!(self, clock, ram, ptrs);
        // empty and full from registers (FifoPtrs): a consumer's or producer's handshake never starts with a
        // pointer compare
        self.ptrs.push.next = self.push.val();
        self.ptrs.pop.next = self.pop.val();
        self.empty.next = self.ptrs.empty.val();
        self.full.next = self.ptrs.full.val();
        self.count.next = self.ptrs.count.val();
        self.ram.waddr.next = self.ptrs.wptr.val().get_bits::<AW>(0);
        self.ram.wdata.next = self.din.val();
        self.ram.we.next = self.ptrs.wr.val();
        self.ram.raddr.next = self.ptrs.rptr.val().get_bits::<AW>(0);
        self.dout.next = self.ram.rdata.val();
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
    ptrs: FifoPtrs<AW1>,
    /// the word written to the slot the RAM read in the last cycle, and whether there was one
    byp: DFF<T>,
    byp_v: DFF<Bit>,
    raddr: Signal<Local, Bits<AW1>>,
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
            ptrs: Default::default(),
            byp: Default::default(),
            byp_v: Default::default(),
            raddr: Default::default(),
        }
    }
}

impl<T: Synth, const AW: usize, const AW1: usize> Logic for BramFifo<T, AW, AW1> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, byp, byp_v);
        clock!(self, clock, ram, ptrs);
        self.ptrs.push.next = self.push.val();
        self.ptrs.pop.next = self.pop.val();
        self.empty.next = self.ptrs.empty.val();
        self.full.next = self.ptrs.full.val();
        self.count.next = self.ptrs.count.val();
        self.raddr.next = self.ptrs.rptr.val();
        if self.ptrs.rd.val() {
            self.raddr.next = self.ptrs.rnext.val();
        }
        self.ram.waddr.next = self.ptrs.wptr.val().get_bits::<AW>(0);
        self.ram.wdata.next = self.din.val();
        self.ram.we.next = self.ptrs.wr.val();
        self.ram.raddr.next = self.raddr.val().get_bits::<AW>(0);
        self.byp.d.next = self.din.val();
        // the slot the RAM reads this cycle is `wptr`'s: `rptr + 1` on a pop (one entry held), else `rptr`
        // (empty)
        self.byp_v.d.next = self.ptrs.wr.val() & self.ptrs.rd.val() & self.ptrs.one_held.val();
        if !self.ptrs.rd.val() {
            self.byp_v.d.next = self.ptrs.wr.val() & self.ptrs.empty.val();
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

    /// Drives a FIFO of 8 12-bit words (either kind: the same ports) against a queue for `$cycles` cycles in
    /// phases that fill it (push-heavy), drain it (pop-heavy) and keep it in between; every cycle `empty`,
    /// `full`, `count` and the head must match the queue, and a push while full is refused even with a pop
    /// in the same cycle. Gives the cycles spent full, empty, and pushing into one entry or none (a
    /// BramFifo's bypass cases).
    macro_rules! against_a_queue {
        ($f:expr, $seed:expr, $cycles:expr) => {{
            let f = &mut $f;
            f.connect_all();
            let mut q = VecDeque::new();
            let mut rng = SmallRng::seed_from_u64($seed);
            let (mut fulls, mut empties, mut near_empty) = (0u32, 0u32, 0u32);
            for cycle in 0..$cycles {
                let (pp, pq) = match (cycle / 300) % 3 {
                    0 => (0.8, 0.3),
                    1 => (0.3, 0.8),
                    _ => (0.5, 0.45),
                };
                let push = rng.gen_bool(pp);
                let pop = rng.gen_bool(pq);
                let v = rng.gen_range(0..4096u64);
                f.din.next = bits::<12>(v);
                f.push.next = push;
                f.pop.next = pop;
                f.clock.next = false.into();
                assert!(simulate(f, 20));
                assert_eq!(f.empty.val(), q.is_empty(), "cycle {cycle}");
                assert_eq!(f.full.val(), q.len() == 8, "cycle {cycle}");
                assert_eq!(f.count.val().to_u64(), q.len() as u64, "cycle {cycle}");
                if !q.is_empty() {
                    assert_eq!(f.dout.val().to_u64(), *q.front().unwrap(), "cycle {cycle}");
                }
                let full = q.len() == 8;
                fulls += full as u32;
                empties += q.is_empty() as u32;
                near_empty += (push && q.len() <= 1) as u32;
                if pop && !q.is_empty() {
                    q.pop_front();
                }
                if push && !full {
                    q.push_back(v);
                }
                f.clock.next = true.into();
                assert!(simulate(f, 20));
            }
            (fulls, empties, near_empty)
        }};
    }

    /// The block-RAM FIFO against a queue (its bypass cases: a push into an empty or one-entry FIFO), then its
    /// Verilog through Yosys.
    #[test]
    fn bram_fifo_matches_a_queue_under_random_push_pop() {
        let mut f = BramFifo::<Bits<12>, 3, 4>::default();
        let (fulls, empties, bypass) = against_a_queue!(f, 5, 20_000);
        assert!(fulls > 100 && empties > 100 && bypass > 100, "full {fulls}, empty {empties}, pushed near empty {bypass} times");
        let v = generate_verilog(&f);
        yosys_validate("bram_fifo", &v).unwrap();
    }

    /// The LUTRAM FIFO against a queue (its registered flags at both ends), then its Verilog through Yosys.
    #[test]
    fn fifo_matches_a_queue_under_random_push_pop() {
        let mut f = Fifo::<Bits<12>, 3, 4>::default();
        let (fulls, empties, _) = against_a_queue!(f, 3, 6000);
        assert!(fulls > 100 && empties > 100, "the run reached full {fulls} and empty {empties} times");
        let v = generate_verilog(&f);
        yosys_validate("fifo", &v).unwrap();
    }
}
