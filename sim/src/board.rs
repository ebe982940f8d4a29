//! The board-level simulation: the U250 board shell (`fpga::board::shell::BoardShell`: the core, the BAR
//! and DMA crossings, the AXI4 master, the board registers, the CMAC bring-up) as a Verilator model, with
//! bus-functional models of the vendor IPs at its ports, in Rust, and its two clocks asynchronous:
//!
//! * **QDMA** (PCIe side, `pclk` 250 MHz): an AXI4-Lite master on BAR0 ([`Mmio`]: the host's MMIO, posted
//!   writes, reads ordered behind them, PCIe latency each way) and an AXI4 slave bridge into host memory
//!   ([`Bridge`]: read latency with jitter, in-order responses, at most 32 reads and 32 writes outstanding,
//!   random backpressure, the link's throughput after TLP overheads at the given MPS and completion size;
//!   every burst checked: 64-byte aligned, inside a 4 KiB page, `wlast` on its last beat, `wuser` the odd
//!   parity of each byte).
//! * **CMAC** (core clock, 322.265625 MHz): the bring-up (`stat_rx_aligned` some cycles after
//!   `ctl_rx_enable`, RS-FEC lock when on), TX taking beats only while `ctl_tx_enable`, a TX pause inside a
//!   frame counted as an error (the CMAC would underflow), RX without backpressure.
//!
//! [`BoardDut`] is an [`RnicDut`]: [`System`](crate::system::System) drives it like the bare core (its
//! register bus, its MAC ports), so every system scenario, the golden peer, the links with their faults and
//! pcaps, and the driver run unchanged through the board top. Its DMA goes through the bridge model into the
//! same host memory, so the system's own DMA host stays idle. The clocks: core edges every 3,103.03 ps,
//! `pclk` edges every 4,000 ps from a seeded phase (a non-integer ratio: every phase relation occurs).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::system::{bytes, words, RnicDut, RnicIn, RnicOut};
use crate::vmodels::board_shell::BoardShell as VShell;
use testbench::model::HostMemory;

/// Core clock period, femtoseconds (322.265625 MHz).
pub const CORE_FS: u64 = 3_103_030;
/// PCIe user clock period, femtoseconds (250 MHz).
pub const PCLK_FS: u64 = 4_000_000;
/// BAR0 offset of the board registers (`fpga::board::axil::BOARD_BASE`).
pub const BOARD_BASE: u32 = 1 << 20;
/// Most bursts of each kind the QDMA bridge keeps outstanding (PG302).
pub const BRIDGE_OUTSTANDING: usize = 32;
/// Max read request size: a read burst goes upstream as one request TLP per this many bytes.
pub const MRRS: u32 = 512;

/// The PCIe link and host as the bridge model sees them.
#[derive(Clone, Copy, Debug)]
pub struct PcieHost {
    /// Lanes and transfer rate (GT/s): Gen3 x16 is 16 at 8 (128b/130b coding).
    pub lanes: u32,
    pub gts: f64,
    /// Max payload size of a write TLP, and the size of the completions the root complex returns reads in.
    pub mps: u32,
    pub cpl: u32,
    /// Share of the link left after DLLPs (ACKs, flow-control updates) and SKP ordered sets.
    pub dllp_share: f64,
    /// Read: from the request on the bridge to its first data, ns, plus up to `jitter_ns` more.
    pub read_ns: f64,
    pub jitter_ns: f64,
    /// Write: from the last data beat to the response, ns (posted: the bridge answers when it sent the TLP).
    pub write_ns: f64,
    /// MMIO from the host to the BAR (each way), ns.
    pub mmio_ns: f64,
    /// 1 in `backpressure` cycles the bridge holds `arready`/`awready`/`wready` low (0: never).
    pub backpressure: u32,
    /// The bridge takes W beats only for a burst whose AW it has (else up to 16 beats ahead of their AW).
    pub w_after_aw: bool,
}

impl PcieHost {
    /// Gen3 x16, MPS 256, 64-byte completions (what many root complexes return), 500 ns reads.
    pub fn gen3_x16() -> Self {
        PcieHost {
            lanes: 16,
            gts: 8.0,
            mps: 256,
            cpl: 64,
            dllp_share: 0.95,
            read_ns: 500.0,
            jitter_ns: 200.0,
            write_ns: 100.0,
            mmio_ns: 300.0,
            backpressure: 8,
            w_after_aw: false,
        }
    }

    /// Link bytes per `pclk` cycle, each direction (after coding and DLLPs).
    pub fn bytes_per_pclk(&self) -> f64 {
        self.gts * 1e9 * f64::from(self.lanes) * 128.0 / 130.0 / 8.0 * self.dllp_share / (1e15 / PCLK_FS as f64)
    }

    /// Link bytes a 64-byte data beat costs: its share of a TLP's 24 bytes of framing, sequence number,
    /// header and LCRC (3DW header with 64-bit addresses: 4DW; 4 + 2 + 16 + 4 = 26, rounded to 24 for 3DW
    /// completions).
    fn beat_cost(&self, tlp_payload: u32) -> f64 {
        64.0 * (1.0 + 24.0 / f64::from(tlp_payload))
    }

    /// Payload bytes per second the link carries each way (writes at MPS, read data in completions).
    pub fn write_gbps(&self) -> f64 {
        self.bytes_per_pclk() * 64.0 / self.beat_cost(self.mps) * 8.0 * 250e6 / 1e9
    }
    pub fn read_gbps(&self) -> f64 {
        self.bytes_per_pclk() * 64.0 / self.beat_cost(self.cpl) * 8.0 * 250e6 / 1e9
    }
}

/// What the IP models saw.
#[derive(Clone, Debug, Default)]
pub struct BoardStats {
    pub pclk_cycles: u64,
    pub ar_bursts: u64,
    pub aw_bursts: u64,
    pub r_beats: u64,
    pub w_beats: u64,
    /// Most bursts of each kind the bridge held at once (at most [`BRIDGE_OUTSTANDING`]).
    pub most_reads_outstanding: usize,
    pub most_writes_outstanding: usize,
    /// Broken rules: a burst crossing 4 KiB or unaligned, `wlast` wrong, parity wrong, TX paused inside a
    /// frame, an MMIO error, a DMA access outside host memory. Each line says which.
    pub violations: Vec<String>,
    /// Core beats the CMAC sent and received.
    pub tx_beats: u64,
    pub rx_beats: u64,
    /// Frames that came while the CMAC's RX was not yet enabled and aligned (dropped, as the MAC does).
    pub rx_dropped_link_down: u64,
    /// Beats looped from TX to RX in near-end loopback (`LINK_CTL` bit 7), and frames from the wire ignored
    /// meanwhile.
    pub loopback_beats: u64,
    pub rx_ignored_in_loopback: u64,
}

enum MmioOp {
    Write { addr: u32, data: u32 },
    Read { addr: u32 },
}

/// The host's MMIO through the QDMA's AXI4-Lite master: one access at a time, in order.
struct Mmio {
    /// (when it may start, fs; the access)
    queue: VecDeque<(u64, MmioOp)>,
    /// 0 idle; 1 AW/W (or AR) offered; 2 waiting for B (or R)
    phase: u8,
    aw_done: bool,
    w_done: bool,
    is_read: bool,
    addr: u32,
    /// Read answers for the core-side adapter: (deliver at fs, data, rresp).
    answers: VecDeque<(u64, u32, u8)>,
}

/// One read burst at the bridge.
struct RdBurst {
    addr: u64,
    beats: u32,
    sent: u32,
    ready_at: u64,
}

/// One write burst at the bridge.
struct WrBurst {
    addr: u64,
    beats: u32,
    got: u32,
    err: bool,
}

struct Bridge {
    rd: VecDeque<RdBurst>,
    /// The R beat on offer: (data, last, resp).
    r_out: Option<([u32; 16], bool, u8)>,
    wr: VecDeque<WrBurst>,
    /// W beats taken ahead of their AW.
    w_early: VecDeque<([u8; 64], u64, bool)>,
    /// Write responses: (due at pclk cycle, bresp).
    b: VecDeque<(u64, u8)>,
    b_out: Option<u8>,
    up_credit: f64,
    down_credit: f64,
    ar_ready: bool,
    aw_ready: bool,
    w_ready: bool,
}

/// The board shell with its IP models (see the module documentation).
pub struct BoardDut {
    m: VShell,
    pub host: PcieHost,
    mem: Arc<Mutex<HostMemory>>,
    rng: SmallRng,
    /// Time of the last core edge, and of the next `pclk` edge, fs.
    t_core: u64,
    t_p: u64,
    mmio: Mmio,
    bridge: Bridge,
    // the core-side register adapter: an access the system offers is taken at once
    b_pending: bool,
    ar_taken: bool,
    // CMAC
    rx_en_cycles: u64,
    tx_in_frame: bool,
    rx_in_frame_dropped: bool,
    rx_in_frame: bool,
    /// near-end loopback: TX beats on their way back to RX (data, keep, last), and whether a wire frame
    /// is being ignored
    loop_q: VecDeque<([u32; 16], u64, bool)>,
    wire_in_frame: bool,
    core_cycles: u64,
    pub stats: BoardStats,
    trace: bool,
    last_dump: u64,
}

/// Core cycles from `ctl_rx_enable` to `stat_rx_aligned` in the CMAC model.
pub const CMAC_ALIGN_CYCLES: u64 = 200;

impl BoardDut {
    /// The board shell on `mem` (the system's host memory), `seed` for the `pclk` phase and the bridge's
    /// jitter and backpressure; with `vcd`, every signal of the shell in that file (time in ps).
    pub fn new(mem: Arc<Mutex<HostMemory>>, host: PcieHost, seed: u64, vcd: Option<&str>) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut m = VShell::default();
        if let Some(p) = vcd {
            m.trace_open(p);
        }
        let t_p = rng.gen_range(1..PCLK_FS);
        let mut d = BoardDut {
            m,
            host,
            mem,
            rng,
            t_core: 0,
            t_p,
            mmio: Mmio { queue: VecDeque::new(), phase: 0, aw_done: false, w_done: false, is_read: false, addr: 0, answers: VecDeque::new() },
            bridge: Bridge {
                rd: VecDeque::new(),
                r_out: None,
                wr: VecDeque::new(),
                w_early: VecDeque::new(),
                b: VecDeque::new(),
                b_out: None,
                up_credit: 0.0,
                down_credit: 0.0,
                ar_ready: false,
                aw_ready: false,
                w_ready: false,
            },
            b_pending: false,
            ar_taken: false,
            rx_en_cycles: 0,
            tx_in_frame: false,
            rx_in_frame_dropped: false,
            rx_in_frame: false,
            loop_q: VecDeque::new(),
            wire_in_frame: false,
            core_cycles: 0,
            stats: BoardStats::default(),
            trace: vcd.is_some(),
            last_dump: 0,
        };
        // the PCIe link is up and out of reset; the QSFP module present
        d.m.set_pcie_aresetn(1);
        d.m.set_pcie_link_up(1);
        d.m.set_qsfp0_modprsl(0);
        d.m.set_qsfp0_intl(1);
        d.m.set_m_axib_rresp(0);
        d.m.set_m_axib_bresp(0);
        d
    }

    /// A VCD sample at `t_fs` (ps in the file; never before the last sample: the core's settle and the
    /// `pclk` edges between two core edges are evaluated out of time order).
    fn dump(&mut self, t_fs: u64) {
        if self.trace {
            let t = (t_fs / 1000).max(self.last_dump + 1);
            self.last_dump = t;
            self.m.trace_dump(t);
        }
    }

    /// Set the `pclk`-side inputs from the models' state.
    fn drive_pclk_inputs(&mut self) {
        let m = &mut self.m;
        // MMIO
        let (aw, w, ar) = match (self.mmio.phase, self.mmio.is_read) {
            (1, false) => (!self.mmio.aw_done, !self.mmio.w_done, false),
            (1, true) => (false, false, true),
            _ => (false, false, false),
        };
        m.set_s_axil_awvalid(aw as u64);
        m.set_s_axil_wvalid(w as u64);
        m.set_s_axil_arvalid(ar as u64);
        m.set_s_axil_awaddr(u64::from(self.mmio.addr));
        m.set_s_axil_araddr(u64::from(self.mmio.addr));
        m.set_s_axil_wstrb(0xF);
        m.set_s_axil_bready((self.mmio.phase == 2 && !self.mmio.is_read) as u64);
        m.set_s_axil_rready((self.mmio.phase == 2 && self.mmio.is_read) as u64);
        // bridge
        let b = &self.bridge;
        m.set_m_axib_arready(b.ar_ready as u64);
        m.set_m_axib_awready(b.aw_ready as u64);
        m.set_m_axib_wready(b.w_ready as u64);
        match &b.r_out {
            Some((d, last, resp)) => {
                m.set_m_axib_rvalid(1);
                m.set_m_axib_rdata(d);
                m.set_m_axib_rlast(*last as u64);
                m.set_m_axib_rresp(u64::from(*resp));
            }
            None => m.set_m_axib_rvalid(0),
        }
        match b.b_out {
            Some(r) => {
                m.set_m_axib_bvalid(1);
                m.set_m_axib_bresp(u64::from(r));
            }
            None => m.set_m_axib_bvalid(0),
        }
    }

    /// One `pclk` rising edge: sample the handshakes, clock the shell, advance the models.
    fn pclk_edge(&mut self) {
        self.m.set_pclk(0);
        self.m.eval();
        let t = self.t_p;
        self.dump(t.saturating_sub(PCLK_FS / 2));
        // ---- sample (valid and ready both high before the edge)
        let m = &self.m;
        let offer = self.mmio.phase == 1 && !self.mmio.is_read;
        let mmio_aw = offer && !self.mmio.aw_done && m.s_axil_awready() != 0;
        let mmio_w = offer && !self.mmio.w_done && m.s_axil_wready() != 0;
        let mmio_b = self.mmio.phase == 2 && !self.mmio.is_read && m.s_axil_bvalid() != 0;
        let mmio_ar = self.mmio.phase == 1 && self.mmio.is_read && m.s_axil_arready() != 0;
        let mmio_r = self.mmio.phase == 2 && self.mmio.is_read && m.s_axil_rvalid() != 0;
        let (bresp, rdata, rresp) = (m.s_axil_bresp() as u8, m.s_axil_rdata() as u32, m.s_axil_rresp() as u8);
        let ar = (m.m_axib_arvalid() != 0 && self.bridge.ar_ready).then(|| (m.m_axib_araddr(), m.m_axib_arlen() as u32 + 1));
        let aw = (m.m_axib_awvalid() != 0 && self.bridge.aw_ready).then(|| (m.m_axib_awaddr(), m.m_axib_awlen() as u32 + 1));
        let w = (m.m_axib_wvalid() != 0 && self.bridge.w_ready).then(|| (m.m_axib_wdata(), m.m_axib_wstrb(), m.m_axib_wlast() != 0, m.m_axib_wuser()));
        let r_taken = self.bridge.r_out.is_some() && m.m_axib_rready() != 0;
        let b_taken = self.bridge.b_out.is_some() && m.m_axib_bready() != 0;
        self.m.set_pclk(1);
        self.m.eval();
        self.dump(t);
        self.stats.pclk_cycles += 1;
        let pcyc = self.stats.pclk_cycles;
        // ---- MMIO
        let now_fs = t;
        if mmio_aw {
            self.mmio.aw_done = true;
        }
        if mmio_w {
            self.mmio.w_done = true;
        }
        if self.mmio.phase == 1 && !self.mmio.is_read && self.mmio.aw_done && self.mmio.w_done {
            self.mmio.phase = 2;
        }
        if mmio_ar {
            self.mmio.phase = 2;
        }
        if mmio_b {
            if bresp != 0 {
                self.stats.violations.push(format!("MMIO write to {:#x}: bresp {bresp}", self.mmio.addr));
            }
            self.mmio.phase = 0;
        }
        if mmio_r {
            let lat = (self.host.mmio_ns * 1e6) as u64;
            self.mmio.answers.push_back((now_fs + lat, rdata, rresp));
            self.mmio.phase = 0;
        }
        if self.mmio.phase == 0 {
            if let Some(&(at, _)) = self.mmio.queue.front() {
                if at <= now_fs {
                    let (_, op) = self.mmio.queue.pop_front().unwrap();
                    let (addr, data, read) = match op {
                        MmioOp::Write { addr, data } => (addr, data, false),
                        MmioOp::Read { addr } => (addr, 0, true),
                    };
                    self.mmio.addr = addr;
                    self.mmio.is_read = read;
                    self.mmio.aw_done = false;
                    self.mmio.w_done = false;
                    self.mmio.phase = 1;
                    self.m.set_s_axil_wdata(u64::from(data));
                }
            }
        }
        // ---- the bridge
        let cap = self.host.bytes_per_pclk();
        let br = &mut self.bridge;
        br.up_credit = (br.up_credit + cap).min(4.0 * cap);
        br.down_credit = (br.down_credit + cap).min(4.0 * cap);
        if let Some((addr, beats)) = ar {
            self.stats.ar_bursts += 1;
            check_burst(&mut self.stats.violations, "read", addr, beats);
            let jit = self.rng.gen_range(0.0..=self.host.jitter_ns);
            let due = pcyc + ((self.host.read_ns + jit) * 1e6 / PCLK_FS as f64) as u64;
            // one ID: in order
            let due = due.max(br.rd.back().map_or(0, |b| b.ready_at));
            br.rd.push_back(RdBurst { addr, beats, sent: 0, ready_at: due });
            // the read request TLPs go upstream
            br.up_credit -= 24.0 * f64::from((beats * 64).div_ceil(MRRS));
            self.stats.most_reads_outstanding = self.stats.most_reads_outstanding.max(br.rd.len());
        }
        if r_taken {
            let (_, last, _) = br.r_out.take().unwrap();
            self.stats.r_beats += 1;
            let head = br.rd.front_mut().unwrap();
            head.sent += 1;
            if last {
                br.rd.pop_front();
            }
        }
        if br.r_out.is_none() {
            let cost = self.host.beat_cost(self.host.cpl);
            if let Some(head) = br.rd.front() {
                if head.ready_at <= pcyc && br.down_credit >= cost {
                    br.down_credit -= cost;
                    let a = head.addr + 64 * u64::from(head.sent);
                    let last = head.sent + 1 == head.beats;
                    let (data, resp) = match self.mem.lock().unwrap().read(a, 64) {
                        Ok(v) => (words(v.as_slice().try_into().expect("64 bytes")), 0u8),
                        Err(_) => {
                            self.stats.violations.push(format!("DMA read of {a:#x}: outside host memory (SLVERR)"));
                            ([0u32; 16], 2u8)
                        }
                    };
                    br.r_out = Some((data, last, resp));
                }
            }
        }
        if let Some((addr, beats)) = aw {
            self.stats.aw_bursts += 1;
            check_burst(&mut self.stats.violations, "write", addr, beats);
            br.wr.push_back(WrBurst { addr, beats, got: 0, err: false });
        }
        if let Some((data, strb, last, user)) = w {
            let bytes = bytes(&data);
            for (i, b) in bytes.iter().enumerate() {
                if (b.count_ones() + (user >> i & 1) as u32) % 2 != 1 {
                    self.stats.violations.push(format!("W beat: wuser bit {i} is not the odd parity of its byte"));
                    break;
                }
            }
            self.stats.w_beats += 1;
            br.up_credit -= self.host.beat_cost(self.host.mps);
            br.w_early.push_back((bytes, strb, last));
        }
        // W beats meet their bursts
        while !br.w_early.is_empty() {
            let Some(k) = br.wr.iter().position(|b| b.got < b.beats) else { break };
            let (bytes, strb, last) = br.w_early.pop_front().unwrap();
            let head = &mut br.wr[k];
            let a = head.addr + 64 * u64::from(head.got);
            head.got += 1;
            if last != (head.got == head.beats) {
                self.stats.violations.push(format!("write burst at {:#x}: wlast {last} on beat {} of {}", head.addr, head.got, head.beats));
            }
            let mut mem = self.mem.lock().unwrap();
            for (i, &b) in bytes.iter().enumerate() {
                if strb >> i & 1 == 1 && mem.write(a + i as u64, &[b]).is_err() {
                    head.err = true;
                }
            }
            if head.got == head.beats {
                let due = pcyc + (self.host.write_ns * 1e6 / PCLK_FS as f64) as u64;
                if head.err {
                    self.stats.violations.push(format!("DMA write burst at {:#x}: outside host memory (SLVERR)", head.addr));
                }
                br.b.push_back((due, if head.err { 2 } else { 0 }));
            }
        }
        if b_taken {
            br.b_out = None;
        }
        if br.b_out.is_none() {
            if let Some(&(due, resp)) = br.b.front() {
                if due <= pcyc {
                    br.b.pop_front();
                    // the burst is done: it leaves the outstanding list
                    if let Some(i) = br.wr.iter().position(|b| b.got == b.beats) {
                        br.wr.remove(i);
                    }
                    br.b_out = Some(resp);
                }
            }
        }
        self.stats.most_writes_outstanding = self.stats.most_writes_outstanding.max(br.wr.len());
        let bp = self.host.backpressure;
        let hold = |rng: &mut SmallRng| bp > 0 && rng.gen_ratio(1, bp);
        br.ar_ready = br.rd.len() < BRIDGE_OUTSTANDING && br.up_credit > 0.0 && !hold(&mut self.rng);
        br.aw_ready = br.wr.len() < BRIDGE_OUTSTANDING && !hold(&mut self.rng);
        let room = if self.host.w_after_aw {
            br.wr.iter().map(|b| (b.beats - b.got) as usize).sum::<usize>() > br.w_early.len()
        } else {
            br.w_early.len() < 16
        };
        br.w_ready = room && br.up_credit >= 0.0 && !hold(&mut self.rng);
        self.drive_pclk_inputs();
    }

    /// A board register (BAR0 from 1 MiB), through the system's register bus: use `Driver::bus`.
    pub fn board_reg(word: u32) -> u32 {
        BOARD_BASE + 4 * word
    }
}

/// A burst must start on a 64-byte beat and stay inside its 4 KiB page (AXI; the PCIe bridge relies on it).
fn check_burst(v: &mut Vec<String>, what: &str, addr: u64, beats: u32) {
    if addr % 64 != 0 {
        v.push(format!("{what} burst at {addr:#x}: not 64-byte aligned"));
    }
    if addr % 4096 + 64 * u64::from(beats) > 4096 {
        v.push(format!("{what} burst at {addr:#x} of {beats} beats crosses a 4 KiB page"));
    }
}

impl RnicDut for BoardDut {
    fn drive(&mut self, i: &RnicIn) -> RnicOut {
        // near-end loopback (the GTs loop TX to RX after a few cycles): the wire's frames are ignored, the
        // core's own TX beats come back into its RX, and nothing goes out on the wire
        let looped = self.m.cmac_gt_loopback() != 0;
        let ext = *i;
        let mut i = *i;
        // (a looped frame is delivered whole after the loopback ends, and a wire frame ignored to its end)
        if looped || !self.loop_q.is_empty() || self.wire_in_frame {
            if ext.s_axis_tvalid {
                if !self.wire_in_frame {
                    self.stats.rx_ignored_in_loopback += 1;
                }
                self.wire_in_frame = !ext.s_axis_tlast;
            }
            i.s_axis_tvalid = false;
            i.s_axis_tuser = false;
            if let Some((d, k, l)) = self.loop_q.pop_front() {
                (i.s_axis_tvalid, i.s_axis_tdata, i.s_axis_tkeep, i.s_axis_tlast) = (true, d, k, l);
                self.stats.loopback_beats += 1;
            }
            i.m_axis_tready = true;
        }
        let i = &i;
        // the CMAC: TX beats only while enabled; RX only while enabled and aligned (else whole frames dropped)
        let tx_en = self.m.cmac_ctl_tx_enable() != 0;
        let aligned = self.m.cmac_ctl_rx_enable() != 0 && self.rx_en_cycles >= CMAC_ALIGN_CYCLES;
        let fec = self.m.cmac_ctl_rsfec() != 0;
        let rx_ok = if self.rx_in_frame { !self.rx_in_frame_dropped } else { aligned };
        let rx = i.s_axis_tvalid && rx_ok;
        {
            let m = &mut self.m;
            m.set_cmac_stat_rx_aligned(aligned as u64);
            m.set_cmac_stat_rx_rsfec_am_lock(if aligned && fec { 0xF } else { 0 });
            // a frame with a bad FCS: tuser with its last beat, and the statistics pulse in the same cycle
            let bad = rx && i.s_axis_tlast && i.s_axis_tuser;
            m.set_cmac_stat_rx_bad_fcs(bad as u64);
            m.set_cmac_rx_tuser(bad as u64);
            m.set_cmac_tx_unfout(0);
            m.set_cmac_tx_tready((tx_en && i.m_axis_tready) as u64);
            m.set_cmac_rx_tvalid(rx as u64);
            m.set_cmac_rx_tdata(&i.s_axis_tdata);
            m.set_cmac_rx_tkeep(i.s_axis_tkeep);
            m.set_cmac_rx_tlast(i.s_axis_tlast as u64);
            m.set_clock(0);
            m.eval();
        }
        let t = self.t_core;
        self.dump(t + CORE_FS / 2);
        if i.s_axis_tvalid {
            if !self.rx_in_frame {
                self.rx_in_frame_dropped = !rx_ok;
                if !rx_ok {
                    self.stats.rx_dropped_link_down += 1;
                }
            }
            self.rx_in_frame = !i.s_axis_tlast;
            if rx {
                self.stats.rx_beats += 1;
            }
        }
        let tvalid = self.m.cmac_tx_tvalid() != 0;
        if self.tx_in_frame && !tvalid {
            self.stats.violations.push(format!("core cycle {}: TX tvalid low inside a frame (the CMAC underflows)", self.core_cycles));
        }
        if tvalid && tx_en && i.m_axis_tready {
            self.tx_in_frame = self.m.cmac_tx_tlast() == 0;
            self.stats.tx_beats += 1;
            if looped {
                self.loop_q.push_back((self.m.cmac_tx_tdata(), self.m.cmac_tx_tkeep(), self.m.cmac_tx_tlast() != 0));
            }
        }
        // the register adapter: a write offered (AW and W together, as the driver's bus does) is taken at once,
        // queued for the PCIe side and answered the next cycle (a posted write); a read is answered when its
        // data is back. The handshakes happen at the coming edge: the state moves now.
        let now = self.t_core;
        let lat = (self.host.mmio_ns * 1e6) as u64;
        let bvalid = self.b_pending;
        let take_w = i.awvalid && i.wvalid && !self.b_pending;
        if take_w {
            self.mmio.queue.push_back((now + lat, MmioOp::Write { addr: i.awaddr, data: i.wdata }));
            self.b_pending = true;
        }
        if bvalid && i.bready {
            self.b_pending = false;
        }
        let take_r = i.arvalid && !self.ar_taken;
        if take_r {
            self.mmio.queue.push_back((now + lat, MmioOp::Read { addr: i.araddr }));
            self.ar_taken = true;
        }
        let r = self.mmio.answers.front().filter(|a| a.0 <= now).copied();
        if r.is_some() && i.rready {
            self.mmio.answers.pop_front();
            self.ar_taken = false;
        }
        let m = &self.m;
        RnicOut {
            awready: take_w,
            wready: take_w,
            bvalid,
            bresp: 0,
            arready: take_r,
            rvalid: r.is_some(),
            rdata: r.map_or(0, |a| a.1),
            rresp: r.map_or(0, |a| a.2),
            m_axis_tvalid: tvalid && tx_en && !looped,
            m_axis_tdata: m.cmac_tx_tdata(),
            m_axis_tkeep: m.cmac_tx_tkeep(),
            m_axis_tlast: m.cmac_tx_tlast() != 0,
            ..Default::default()
        }
    }

    fn start_trace(&mut self, path: &str) {
        if !self.trace {
            self.m.trace_open(path);
            self.trace = true;
        }
    }

    fn stop_trace(&mut self) {
        self.trace = false;
    }

    fn tick(&mut self) {
        let edge = self.t_core + CORE_FS;
        while self.t_p <= edge {
            self.pclk_edge();
            self.t_p += PCLK_FS;
        }
        self.m.set_clock(1);
        self.m.eval();
        self.dump(edge);
        self.t_core = edge;
        self.core_cycles += 1;
        if self.m.cmac_ctl_rx_enable() != 0 {
            self.rx_en_cycles += 1;
        } else {
            self.rx_en_cycles = 0;
        }
    }
}

/// Step the system until the board reports its Ethernet link up and RX aligned (`LINK_STATUS` bits 0 and 1:
/// the CMAC model aligns, `CmacCtl` enables TX after 32,768 cycles of alignment), through the driver's bus.
pub fn wait_link_up<D: RnicDut>(
    drv: &mut rnic_driver::Driver<crate::system::SimBus<D>>,
    sys: &std::rc::Rc<std::cell::RefCell<crate::system::System<D>>>,
) -> anyhow::Result<()> {
    use rnic_driver::CsrBus;
    for _ in 0..40 {
        let st = drv.bus().read32(BoardDut::board_reg(5)).map_err(|e| anyhow::anyhow!("LINK_STATUS: {e}"))?;
        if st & 3 == 3 {
            return Ok(());
        }
        let mut s = sys.borrow_mut();
        for _ in 0..2000 {
            s.step();
        }
    }
    anyhow::bail!("the board's link did not come up in 80,000 cycles")
}
