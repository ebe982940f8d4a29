//! The host's register path on the board: BAR0 (AXI4-Lite from the PCIe IP's `m_axil` master, in the PCIe
//! clock) crosses into the core clock ([`AxiLiteCdc`]: one [`AsyncFifo`] per channel) and is split there
//! ([`AxiLiteSplit`]) between the core's register slave (BAR0 offsets below 1 MiB, `docs/host-interface.md`)
//! and the board's own registers (from 1 MiB, [`super::regs::BoardRegs`], `docs/board-u250.md`).
//!
//! The split serves one write and one read at a time (register accesses are single PCIe MMIO transactions):
//! a write waits for both its AW and W, goes to the selected slave, and its B comes back; a read likewise.

use super::cdc::AsyncFifo;
use rtl::common::consts::k;
use rust_hdl::prelude::*;

/// BAR0 bits the board decodes (2 MiB).
pub const BAR0_BITS: usize = 21;
/// First byte of the board's register page in BAR0.
pub const BOARD_BASE: u64 = 1 << 20;

/// AXI4-Lite from the PCIe clock (`s_*`, `pclk`) to the core clock (`m_*`, `cclk`).
#[derive(LogicBlock, Default)]
pub struct AxiLiteCdc {
    pub pclk: Signal<In, Clock>,
    pub cclk: Signal<In, Clock>,
    pub s_awvalid: Signal<In, Bit>,
    pub s_awready: Signal<Out, Bit>,
    pub s_awaddr: Signal<In, Bits<BAR0_BITS>>,
    pub s_wvalid: Signal<In, Bit>,
    pub s_wready: Signal<Out, Bit>,
    pub s_wdata: Signal<In, Bits<32>>,
    pub s_wstrb: Signal<In, Bits<4>>,
    pub s_bvalid: Signal<Out, Bit>,
    pub s_bready: Signal<In, Bit>,
    pub s_bresp: Signal<Out, Bits<2>>,
    pub s_arvalid: Signal<In, Bit>,
    pub s_arready: Signal<Out, Bit>,
    pub s_araddr: Signal<In, Bits<BAR0_BITS>>,
    pub s_rvalid: Signal<Out, Bit>,
    pub s_rready: Signal<In, Bit>,
    pub s_rdata: Signal<Out, Bits<32>>,
    pub s_rresp: Signal<Out, Bits<2>>,
    pub m_awvalid: Signal<Out, Bit>,
    pub m_awready: Signal<In, Bit>,
    pub m_awaddr: Signal<Out, Bits<BAR0_BITS>>,
    pub m_wvalid: Signal<Out, Bit>,
    pub m_wready: Signal<In, Bit>,
    pub m_wdata: Signal<Out, Bits<32>>,
    pub m_wstrb: Signal<Out, Bits<4>>,
    pub m_bvalid: Signal<In, Bit>,
    pub m_bready: Signal<Out, Bit>,
    pub m_bresp: Signal<In, Bits<2>>,
    pub m_arvalid: Signal<Out, Bit>,
    pub m_arready: Signal<In, Bit>,
    pub m_araddr: Signal<Out, Bits<BAR0_BITS>>,
    pub m_rvalid: Signal<In, Bit>,
    pub m_rready: Signal<Out, Bit>,
    pub m_rdata: Signal<In, Bits<32>>,
    pub m_rresp: Signal<In, Bits<2>>,
    aw: AsyncFifo<Bits<BAR0_BITS>, 2, 3>,
    w: AsyncFifo<Bits<36>, 2, 3>,
    b: AsyncFifo<Bits<2>, 2, 3>,
    ar: AsyncFifo<Bits<BAR0_BITS>, 2, 3>,
    r: AsyncFifo<Bits<34>, 2, 3>,
}

impl Logic for AxiLiteCdc {
    #[hdl_gen]
    fn update(&mut self) {
        // requests: written in the PCIe clock, read in the core clock
        self.aw.wclk.next = self.pclk.val();
        self.w.wclk.next = self.pclk.val();
        self.ar.wclk.next = self.pclk.val();
        self.aw.rclk.next = self.cclk.val();
        self.w.rclk.next = self.cclk.val();
        self.ar.rclk.next = self.cclk.val();
        // responses: the other way
        self.b.wclk.next = self.cclk.val();
        self.r.wclk.next = self.cclk.val();
        self.b.rclk.next = self.pclk.val();
        self.r.rclk.next = self.pclk.val();
        self.s_awready.next = !self.aw.full.val();
        self.aw.push.next = self.s_awvalid.val();
        self.aw.din.next = self.s_awaddr.val();
        self.s_wready.next = !self.w.full.val();
        self.w.push.next = self.s_wvalid.val();
        self.w.din.next = bit_cast::<36, 32>(self.s_wdata.val()) | (bit_cast::<36, 4>(self.s_wstrb.val()) << 32);
        self.s_arready.next = !self.ar.full.val();
        self.ar.push.next = self.s_arvalid.val();
        self.ar.din.next = self.s_araddr.val();
        self.m_awvalid.next = !self.aw.empty.val();
        self.m_awaddr.next = self.aw.dout.val();
        self.aw.pop.next = self.m_awready.val();
        self.m_wvalid.next = !self.w.empty.val();
        self.m_wdata.next = self.w.dout.val().get_bits::<32>(0);
        self.m_wstrb.next = self.w.dout.val().get_bits::<4>(32);
        self.w.pop.next = self.m_wready.val();
        self.m_arvalid.next = !self.ar.empty.val();
        self.m_araddr.next = self.ar.dout.val();
        self.ar.pop.next = self.m_arready.val();
        self.m_bready.next = !self.b.full.val();
        self.b.push.next = self.m_bvalid.val();
        self.b.din.next = self.m_bresp.val();
        self.m_rready.next = !self.r.full.val();
        self.r.push.next = self.m_rvalid.val();
        self.r.din.next = bit_cast::<34, 32>(self.m_rdata.val()) | (bit_cast::<34, 2>(self.m_rresp.val()) << 32);
        self.s_bvalid.next = !self.b.empty.val();
        self.s_bresp.next = self.b.dout.val();
        self.b.pop.next = self.s_bready.val();
        self.s_rvalid.next = !self.r.empty.val();
        self.s_rdata.next = self.r.dout.val().get_bits::<32>(0);
        self.s_rresp.next = self.r.dout.val().get_bits::<2>(32);
        self.r.pop.next = self.s_rready.val();
    }
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum WrState {
    Idle,
    Req,
    Resp,
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum RdState {
    Idle,
    Req,
    Resp,
    BoardWait,
    BoardData,
}

/// BAR0 between the core's register slave (`c_*`, offsets below [`BOARD_BASE`]) and the board registers'
/// local bus (`reg_*`: a write strobe, or a read answered [`super::regs::READ_LATENCY`] cycles later).
#[derive(LogicBlock)]
pub struct AxiLiteSplit {
    pub clock: Signal<In, Clock>,
    pub s_awvalid: Signal<In, Bit>,
    pub s_awready: Signal<Out, Bit>,
    pub s_awaddr: Signal<In, Bits<BAR0_BITS>>,
    pub s_wvalid: Signal<In, Bit>,
    pub s_wready: Signal<Out, Bit>,
    pub s_wdata: Signal<In, Bits<32>>,
    pub s_wstrb: Signal<In, Bits<4>>,
    pub s_bvalid: Signal<Out, Bit>,
    pub s_bready: Signal<In, Bit>,
    pub s_bresp: Signal<Out, Bits<2>>,
    pub s_arvalid: Signal<In, Bit>,
    pub s_arready: Signal<Out, Bit>,
    pub s_araddr: Signal<In, Bits<BAR0_BITS>>,
    pub s_rvalid: Signal<Out, Bit>,
    pub s_rready: Signal<In, Bit>,
    pub s_rdata: Signal<Out, Bits<32>>,
    pub s_rresp: Signal<Out, Bits<2>>,
    pub c_awvalid: Signal<Out, Bit>,
    pub c_awready: Signal<In, Bit>,
    pub c_awaddr: Signal<Out, Bits<20>>,
    pub c_wvalid: Signal<Out, Bit>,
    pub c_wready: Signal<In, Bit>,
    pub c_wdata: Signal<Out, Bits<32>>,
    pub c_wstrb: Signal<Out, Bits<4>>,
    pub c_bvalid: Signal<In, Bit>,
    pub c_bready: Signal<Out, Bit>,
    pub c_bresp: Signal<In, Bits<2>>,
    pub c_arvalid: Signal<Out, Bit>,
    pub c_arready: Signal<In, Bit>,
    pub c_araddr: Signal<Out, Bits<20>>,
    pub c_rvalid: Signal<In, Bit>,
    pub c_rready: Signal<Out, Bit>,
    pub c_rdata: Signal<In, Bits<32>>,
    pub c_rresp: Signal<In, Bits<2>>,
    /// the board registers: word index in the 1 MiB page (bits 7:2 of the offset: 64 words; the rest of
    /// the page reads 0), write strobe and data, read strobe and the data it returns
    pub reg_addr: Signal<Out, Bits<6>>,
    pub reg_wr: Signal<Out, Bit>,
    pub reg_wdata: Signal<Out, Bits<32>>,
    pub reg_rd: Signal<Out, Bit>,
    pub reg_rdata: Signal<In, Bits<32>>,
    ws: DFF<WrState>,
    rs: DFF<RdState>,
    waddr: DFF<Bits<BAR0_BITS>>,
    wdata: DFF<Bits<32>>,
    wstrb: DFF<Bits<4>>,
    aw_done: DFF<Bit>,
    w_done: DFF<Bit>,
    bresp: DFF<Bits<2>>,
    raddr: DFF<Bits<BAR0_BITS>>,
    rdata: DFF<Bits<32>>,
    rresp: DFF<Bits<2>>,
    rw1: DFF<Bit>,
    rw2: DFF<Bit>,
    /// zero (a `Constant`'s default)
    k_zero2: Constant<Bits<2>>,
}

impl Default for AxiLiteSplit {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            s_awvalid: Default::default(),
            s_awready: Default::default(),
            s_awaddr: Default::default(),
            s_wvalid: Default::default(),
            s_wready: Default::default(),
            s_wdata: Default::default(),
            s_wstrb: Default::default(),
            s_bvalid: Default::default(),
            s_bready: Default::default(),
            s_bresp: Default::default(),
            s_arvalid: Default::default(),
            s_arready: Default::default(),
            s_araddr: Default::default(),
            s_rvalid: Default::default(),
            s_rready: Default::default(),
            s_rdata: Default::default(),
            s_rresp: Default::default(),
            c_awvalid: Default::default(),
            c_awready: Default::default(),
            c_awaddr: Default::default(),
            c_wvalid: Default::default(),
            c_wready: Default::default(),
            c_wdata: Default::default(),
            c_wstrb: Default::default(),
            c_bvalid: Default::default(),
            c_bready: Default::default(),
            c_bresp: Default::default(),
            c_arvalid: Default::default(),
            c_arready: Default::default(),
            c_araddr: Default::default(),
            c_rvalid: Default::default(),
            c_rready: Default::default(),
            c_rdata: Default::default(),
            c_rresp: Default::default(),
            reg_addr: Default::default(),
            reg_wr: Default::default(),
            reg_wdata: Default::default(),
            reg_rd: Default::default(),
            reg_rdata: Default::default(),
            ws: Default::default(),
            rs: Default::default(),
            waddr: Default::default(),
            wdata: Default::default(),
            wstrb: Default::default(),
            aw_done: Default::default(),
            w_done: Default::default(),
            bresp: Default::default(),
            raddr: Default::default(),
            rdata: Default::default(),
            rresp: Default::default(),
            rw1: Default::default(),
            rw2: Default::default(),
            k_zero2: k(0),
        }
    }
}

impl Logic for AxiLiteSplit {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, ws, rs, waddr, wdata, wstrb, aw_done, w_done, bresp, raddr, rdata, rresp, rw1, rw2);
        self.s_awready.next = false;
        self.s_wready.next = false;
        self.s_bvalid.next = false;
        self.s_bresp.next = self.bresp.q.val();
        self.s_arready.next = false;
        self.s_rvalid.next = false;
        self.s_rdata.next = self.rdata.q.val();
        self.s_rresp.next = self.rresp.q.val();
        self.c_awvalid.next = false;
        self.c_wvalid.next = false;
        self.c_awaddr.next = self.waddr.q.val().get_bits::<20>(0);
        self.c_wdata.next = self.wdata.q.val();
        self.c_wstrb.next = self.wstrb.q.val();
        self.c_bready.next = false;
        self.c_arvalid.next = false;
        self.c_araddr.next = self.raddr.q.val().get_bits::<20>(0);
        self.c_rready.next = false;
        self.reg_wr.next = false;
        self.reg_rd.next = false;
        self.reg_wdata.next = self.wdata.q.val();
        self.reg_addr.next = self.waddr.q.val().get_bits::<6>(2);
        match self.ws.q.val() {
            WrState::Idle => {
                // both halves of a write, taken together
                self.s_awready.next = self.s_wvalid.val();
                self.s_wready.next = self.s_awvalid.val();
                if self.s_awvalid.val() & self.s_wvalid.val() {
                    self.waddr.d.next = self.s_awaddr.val();
                    self.wdata.d.next = self.s_wdata.val();
                    self.wstrb.d.next = self.s_wstrb.val();
                    self.aw_done.d.next = false;
                    self.w_done.d.next = false;
                    self.ws.d.next = WrState::Req;
                }
            }
            WrState::Req => {
                if self.waddr.q.val().get_bit(20) {
                    // board registers: written at once (full words; byte strobes are not honoured there)
                    self.reg_wr.next = true;
                    self.bresp.d.next = self.k_zero2.val();
                    self.ws.d.next = WrState::Resp;
                } else {
                    self.c_awvalid.next = !self.aw_done.q.val();
                    self.c_wvalid.next = !self.w_done.q.val();
                    if self.c_awready.val() {
                        self.aw_done.d.next = true;
                    }
                    if self.c_wready.val() {
                        self.w_done.d.next = true;
                    }
                    self.c_bready.next = true;
                    if self.c_bvalid.val() {
                        self.bresp.d.next = self.c_bresp.val();
                        self.ws.d.next = WrState::Resp;
                    }
                }
            }
            WrState::Resp => {
                self.s_bvalid.next = true;
                if self.s_bready.val() {
                    self.ws.d.next = WrState::Idle;
                }
            }
            _ => {
                self.ws.d.next = WrState::Idle;
            }
        }
        match self.rs.q.val() {
            RdState::Idle => {
                self.s_arready.next = true;
                if self.s_arvalid.val() {
                    self.raddr.d.next = self.s_araddr.val();
                    self.rs.d.next = RdState::Req;
                }
            }
            RdState::Req => {
                if self.raddr.q.val().get_bit(20) {
                    self.rs.d.next = RdState::BoardWait;
                    self.rw1.d.next = false;
                    self.rw2.d.next = false;
                } else {
                    self.c_arvalid.next = true;
                    if self.c_arready.val() {
                        self.rs.d.next = RdState::Resp;
                    }
                }
            }
            RdState::Resp => {
                self.c_rready.next = true;
                if self.c_rvalid.val() {
                    self.rdata.d.next = self.c_rdata.val();
                    self.rresp.d.next = self.c_rresp.val();
                    self.rs.d.next = RdState::BoardData;
                }
            }
            RdState::BoardWait => {
                // the board registers' read: the strobe, then their registered answer
                self.reg_rd.next = !self.rw1.q.val() & !self.rw2.q.val();
                self.reg_addr.next = self.raddr.q.val().get_bits::<6>(2);
                self.rw1.d.next = true;
                self.rw2.d.next = self.rw1.q.val();
                if self.rw2.q.val() {
                    self.rdata.d.next = self.reg_rdata.val();
                    self.rresp.d.next = self.k_zero2.val();
                    self.rs.d.next = RdState::BoardData;
                }
            }
            RdState::BoardData => {
                self.s_rvalid.next = true;
                if self.s_rready.val() {
                    self.rs.d.next = RdState::Idle;
                }
            }
            _ => {
                self.rs.d.next = RdState::Idle;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::regs::{BoardRegs, BOARD_ID_VALUE, LINK_CTL_INIT};
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    /// BAR0 as the board has it: the crossing, the split, the board registers; the core's slave is the
    /// test's (`c_*` left open).
    #[derive(LogicBlock, Default)]
    struct Bar0 {
        pclk: Signal<In, Clock>,
        cclk: Signal<In, Clock>,
        cdc: AxiLiteCdc,
        split: AxiLiteSplit,
        regs: BoardRegs,
    }

    impl Logic for Bar0 {
        #[hdl_gen]
        fn update(&mut self) {
            self.cdc.pclk.next = self.pclk.val();
            self.cdc.cclk.next = self.cclk.val();
            self.split.clock.next = self.cclk.val();
            self.regs.clock.next = self.cclk.val();
            self.split.s_awvalid.next = self.cdc.m_awvalid.val();
            self.cdc.m_awready.next = self.split.s_awready.val();
            self.split.s_awaddr.next = self.cdc.m_awaddr.val();
            self.split.s_wvalid.next = self.cdc.m_wvalid.val();
            self.cdc.m_wready.next = self.split.s_wready.val();
            self.split.s_wdata.next = self.cdc.m_wdata.val();
            self.split.s_wstrb.next = self.cdc.m_wstrb.val();
            self.cdc.m_bvalid.next = self.split.s_bvalid.val();
            self.split.s_bready.next = self.cdc.m_bready.val();
            self.cdc.m_bresp.next = self.split.s_bresp.val();
            self.split.s_arvalid.next = self.cdc.m_arvalid.val();
            self.cdc.m_arready.next = self.split.s_arready.val();
            self.split.s_araddr.next = self.cdc.m_araddr.val();
            self.cdc.m_rvalid.next = self.split.s_rvalid.val();
            self.split.s_rready.next = self.cdc.m_rready.val();
            self.cdc.m_rdata.next = self.split.s_rdata.val();
            self.cdc.m_rresp.next = self.split.s_rresp.val();
            self.regs.reg_addr.next = self.split.reg_addr.val();
            self.regs.reg_wr.next = self.split.reg_wr.val();
            self.regs.reg_wdata.next = self.split.reg_wdata.val();
            self.regs.reg_rd.next = self.split.reg_rd.val();
            self.split.reg_rdata.next = self.regs.reg_rdata.val();
        }
    }

    /// Random register writes and reads from the PCIe clock (250 MHz) to a core clock of random period, with
    /// a core slave that answers after random delays: every access to the core's half reaches it once with its
    /// address, data and strobes, every answer comes back to the host with its data and response, and accesses
    /// from 1 MiB go to the board registers (`BOARD_ID`, `LINK_CTL` written and read back, read-only words
    /// unchanged by writes).
    #[test]
    fn bar0_reaches_the_core_and_the_board_registers_across_the_clocks() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut b = Bar0::default();
        b.connect_all();
        let (hp, hc) = (2000u64, rng.gen_range(1200..2600u64));
        let (mut tp, mut tc) = (0u64, rng.gen_range(0..hc));
        let (mut lp, mut lc) = (false, false);
        let mut core: HashMap<u64, u64> = HashMap::new();
        // host side state: the access in progress
        #[derive(Clone, Copy, Debug)]
        enum Acc {
            Write(u64, u64, u64),
            Read(u64),
        }
        let mut cur: Option<(Acc, bool, bool)> = None; // access, aw/ar taken, w taken
        let mut shadow_ctl = LINK_CTL_INIT;
        let mut done = (0u32, 0u32, 0u32); // core accesses, board accesses, reads checked
        // the core slave: one write and one read in flight, answered after a delay
        let mut c_w: Option<(u64, u64, u64)> = None;
        let mut c_aw: Option<u64> = None;
        let mut c_b: Option<u64> = None;
        let mut c_r: Option<(u64, u64)> = None;
        let mut accesses = 0u32;
        let mut edges = 0u64;
        while accesses < 600 {
            edges += 1;
            assert!(edges < 400_000, "stuck after {accesses} accesses: {cur:?}, core slave aw {c_aw:?} w {c_w:?} b {c_b:?} r {c_r:?}");
            let pclk_edge = tp <= tc;
            let rise_p = pclk_edge && !lp;
            let rise_c = !pclk_edge && !lc;
            // handshakes are what the coming rising edge samples
            if rise_p {
                if let Some((acc, mut a_t, mut w_t)) = cur {
                    match acc {
                        Acc::Write(addr, data, _) => {
                            if b.cdc.s_awvalid.val() && b.cdc.s_awready.val() {
                                a_t = true;
                            }
                            if b.cdc.s_wvalid.val() && b.cdc.s_wready.val() {
                                w_t = true;
                            }
                            if b.cdc.s_bvalid.val() && b.cdc.s_bready.val() {
                                assert_eq!(b.cdc.s_bresp.val().to_u64(), 0);
                                if addr >= BOARD_BASE {
                                    if (addr >> 2) & 63 == 4 {
                                        shadow_ctl = data & 0xF3;
                                    }
                                    done.1 += 1;
                                }
                                cur = None;
                                accesses += 1;
                            } else {
                                cur = Some((acc, a_t, w_t));
                            }
                        }
                        Acc::Read(addr) => {
                            if b.cdc.s_arvalid.val() && b.cdc.s_arready.val() {
                                a_t = true;
                            }
                            if b.cdc.s_rvalid.val() && b.cdc.s_rready.val() {
                                let got = b.cdc.s_rdata.val().to_u64();
                                let want = if addr >= BOARD_BASE {
                                    done.1 += 1;
                                    match (addr >> 2) & 63 {
                                        0 => BOARD_ID_VALUE,
                                        4 => shadow_ctl,
                                        _ => got,
                                    }
                                } else {
                                    *core.get(&(addr & !3)).unwrap_or(&0)
                                };
                                assert_eq!(got, want, "read {addr:#x}");
                                done.2 += 1;
                                cur = None;
                                accesses += 1;
                            } else {
                                cur = Some((acc, a_t, w_t));
                            }
                        }
                    }
                }
            }
            if rise_c {
                let s = &b.split;
                if s.c_awvalid.val() && s.c_awready.val() {
                    c_aw = Some(s.c_awaddr.val().to_u64());
                }
                if s.c_wvalid.val() && s.c_wready.val() {
                    c_w = Some((s.c_wdata.val().to_u64(), s.c_wstrb.val().to_u64(), 0));
                }
                if s.c_bvalid.val() && s.c_bready.val() {
                    c_b = None;
                    done.0 += 1;
                }
                if s.c_arvalid.val() && s.c_arready.val() {
                    let a = s.c_araddr.val().to_u64();
                    c_r = Some((*core.get(&(a & !3)).unwrap_or(&0), 0));
                }
                if s.c_rvalid.val() && s.c_rready.val() {
                    c_r = None;
                    done.0 += 1;
                }
                if let (Some(a), Some((d, st, _))) = (c_aw, c_w) {
                    assert_eq!(st, 0xF);
                    core.insert(a & !3, d);
                    c_aw = None;
                    c_w = None;
                    c_b = Some(0);
                }
            }
            if pclk_edge {
                tp += hp;
                lp = !lp;
                b.pclk.next = lp.into();
            } else {
                tc += hc;
                lc = !lc;
                b.cclk.next = lc.into();
            }
            assert!(simulate(&mut b, 100));
            if rise_p {
                if cur.is_none() && rng.gen_bool(0.3) {
                    let board = rng.gen_bool(0.3);
                    let addr = if board { BOARD_BASE + 4 * [0u64, 4, 4, 2, 9][rng.gen_range(0..5)] } else { 4 * rng.gen_range(0..16u64) };
                    cur = Some((if rng.gen_bool(0.5) { Acc::Write(addr, rng.gen::<u32>() as u64, 0xF) } else { Acc::Read(addr) }, false, false));
                }
                b.cdc.s_awvalid.next = false;
                b.cdc.s_wvalid.next = false;
                b.cdc.s_arvalid.next = false;
                b.cdc.s_bready.next = rng.gen_bool(0.7);
                b.cdc.s_rready.next = rng.gen_bool(0.7);
                if let Some((acc, a_t, w_t)) = cur {
                    match acc {
                        Acc::Write(addr, data, strb) => {
                            b.cdc.s_awvalid.next = !a_t;
                            b.cdc.s_awaddr.next = bits(addr);
                            b.cdc.s_wvalid.next = !w_t && rng.gen_bool(0.7);
                            b.cdc.s_wdata.next = bits(data);
                            b.cdc.s_wstrb.next = bits(strb);
                        }
                        Acc::Read(addr) => {
                            b.cdc.s_arvalid.next = !a_t;
                            b.cdc.s_araddr.next = bits(addr);
                        }
                    }
                }
                assert!(simulate(&mut b, 100));
            }
            if rise_c {
                let s = &mut b.split;
                s.c_awready.next = c_aw.is_none() && c_b.is_none() && rng.gen_bool(0.6);
                s.c_wready.next = c_w.is_none() && c_b.is_none() && rng.gen_bool(0.6);
                s.c_bvalid.next = c_b.is_some() && rng.gen_bool(0.5);
                s.c_bresp.next = bits(0);
                s.c_arready.next = c_r.is_none() && rng.gen_bool(0.6);
                s.c_rvalid.next = c_r.is_some() && rng.gen_bool(0.5);
                s.c_rdata.next = bits(c_r.map_or(0, |r| r.0));
                s.c_rresp.next = bits(0);
                assert!(simulate(&mut b, 100));
            }
        }
        assert!(done.0 > 200 && done.1 > 100 && done.2 > 200, "core {}, board {}, reads {}", done.0, done.1, done.2);
        assert_eq!(b.regs.link_enable.val(), shadow_ctl & 1 == 1);
        let mut c = AxiLiteCdc::default();
        c.connect_all();
        yosys_validate("axil_cdc", &generate_verilog(&c)).unwrap();
    }
}
