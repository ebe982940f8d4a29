//! `rnic bench`: two RTL RNICs (Verilator models of the emitted top) on one 100G link in lockstep
//! ([`crate::pair::PairRig`]), each with its own driver and host memory, measured in core cycles.
//!
//! * Goodput: A posts `messages` WQEs of one verb and size round robin over its QPs (reposting as the send
//!   queues drain, every WQE signaled), B posts the receives a SEND needs; the figure is payload bits over the
//!   cycles from A's first doorbell to A's last completion, at the core clock. The QPs retransmit after
//!   [`qp_timeout`] (at least 4.096 us x 2^6 = 262 us, more when the point can queue more data than that
//!   ahead of a QP's oldest request), so a frame dropped for lack of room (RX Parse overflow) costs a
//!   go-back-N, not the run: such a point completes slower and its note gives the drops and go-back-N
//!   counts; one that makes no progress for [`STALL_CYCLES`] or two timeouts, whichever is longer, is
//!   reported as stalled. Every message carries its own bytes ([`payload`]: of its index, QP and offset),
//!   written into its source slot just before it is posted, and is checked at its destination as soon as
//!   its completion is polled, before a later message may reuse its slot (slots are reused only past
//!   [`MAX_REGION`]); a message that differs gives the point a problem and no figure. The checks run on the
//!   host between simulated cycles: they cost the measured cycles nothing. With `inline`, SENDs and WRITEs
//!   of at most [`MAX_INLINE`] bytes go as inline WQEs (perftest's default for small messages).
//! * Latency of one 64-byte WRITE on an idle pair: doorbell (end of the CSR write) to A's first beat on the
//!   wire, for a WQE with its payload in a buffer (lkey) and for an inline WQE; last beat into B's MAC to B's
//!   first payload DMA write; last beat into B's MAC to B's first ACK beat.
//! * The wire limit: payload over wire bytes (Ethernet/IPv4/UDP/BTH/ICRC/FCS headers, RETH on a WRITE's first
//!   packet, 60-byte minimum frame, preamble and inter-packet gap).
//!
//! Output: a table, `bench.csv` and `bench.svg` (goodput against message size, the wire limit drawn in).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use rnic_driver::DriverError;
use rnic_driver::host::MAX_INLINE;
use testbench::model::{HostMemory, QpAttr, RecvWr, SendWr, Sge, VerbsError, WcStatus, WrOpcode};

use crate::pair::PairRig;
use crate::rxe::rtl_ep::read_counter_window;

/// A point with no completion for this many cycles (or two of its QP timeouts, if longer) has stalled.
pub const STALL_CYCLES: u64 = 300_000;
/// The shortest retransmit timeout exponent the bench gives its QPs (IBA: 4.096 us x 2^n): 262 us, 84,000
/// cycles at 322 MHz, inside [`STALL_CYCLES`].
pub const BENCH_QP_TIMEOUT: u8 = 6;

/// The retransmit timeout exponent for a point: the IBA asks for a Local ACK Timeout longer than the
/// round trip *including queueing*. A QP's oldest request can wait behind every request the other QPs have
/// in flight: up to [`rtl::transport::completer::COMP_RING`] WQEs each, and at most 128 unacknowledged PSNs
/// of at most an MTU each (16 QPs of 64 KiB READs at MTU 4096 queue 8 MiB at the responder, 671 us of wire
/// time, and a 262 us timer then fires on requests that are only waiting their turn, and their
/// retransmissions are more load). So: the smallest exponent >= [`BENCH_QP_TIMEOUT`] whose timeout is twice
/// the wire time of that data (perftest's default is 14, 67 ms, for any load).
pub fn qp_timeout(qps: usize, size: u64, mtu: u32) -> u8 {
    let window = u64::from(testbench::model::requester::RXE_MAX_UNACKED_PSNS);
    let per_qp = (rtl::transport::completer::COMP_RING as u64 * size).min(window * u64::from(mtu));
    let bytes = qps as f64 * per_qp as f64;
    let wire_s = bytes * 8.0 / 100e9;
    (BENCH_QP_TIMEOUT..=22).find(|&t| 4.096e-6 * f64::from(1u32 << t) >= 2.0 * wire_s).unwrap_or(22)
}

#[derive(Clone, Debug)]
pub struct BenchOpts {
    pub clock_mhz: f64,
    pub host_latency_ns: f64,
    pub mtus: Vec<u32>,
    pub qps: Vec<usize>,
    pub sizes: Vec<u64>,
    pub verbs: Vec<WrOpcode>,
    /// Payload per point (at least 16 messages per QP, at most 4,096 messages).
    pub bytes_per_point: u64,
    /// VCDs of both RNICs for the first [`VCD_CYCLES`] of every point and for the latency runs, into this
    /// directory
    /// (`VERB-MTU-QPS-SIZE.a.vcd`, `.b.vcd`).
    pub vcd: Option<std::path::PathBuf>,
    /// SENDs and WRITEs of at most [`MAX_INLINE`] bytes go as inline WQEs (perftest's default for small
    /// messages).
    pub inline: bool,
    /// Goodput points with each RNIC inside the U250 board shell and its host memory behind this PCIe
    /// bridge model (`crate::board`) instead of the ideal host (`host_latency_ns` away, a 64-byte beat every
    /// cycle each way, writes never held back). The latency runs stay on the bare core.
    pub host: Option<crate::board::PcieHost>,
}

/// Cycles of each point a `--vcd` bench traces (about 2.7 MB per 1,000 cycles per RNIC).
pub const VCD_CYCLES: u64 = 20_000;

impl BenchOpts {
    /// A point of this verb and size posts inline WQEs.
    pub fn inlines(&self, verb: WrOpcode, size: u64) -> bool {
        self.inline && verb.may_be_inline() && size <= MAX_INLINE as u64
    }

    /// The full sweep: WRITE, READ, SEND; 64 B .. 1 MiB; MTU 1024 and 4096; 1 and 16 QPs.
    pub fn full(clock_mhz: f64) -> Self {
        BenchOpts {
            clock_mhz,
            host_latency_ns: 500.0,
            mtus: vec![1024, 4096],
            qps: vec![1, 16],
            sizes: (6..=20).step_by(2).map(|k| 1u64 << k).collect(),
            verbs: vec![WrOpcode::RdmaWrite, WrOpcode::RdmaRead, WrOpcode::Send],
            bytes_per_point: 2 << 20,
            vcd: None,
            inline: false,
            host: None,
        }
    }

    /// A small sweep (a few seconds): WRITE and READ at MTU 4096, 1 QP, 4 KiB and 64 KiB.
    pub fn quick(clock_mhz: f64) -> Self {
        BenchOpts {
            mtus: vec![4096],
            qps: vec![1],
            sizes: vec![4096, 65536],
            verbs: vec![WrOpcode::RdmaWrite, WrOpcode::RdmaRead],
            bytes_per_point: 256 << 10,
            ..Self::full(clock_mhz)
        }
    }
}

/// One measured point.
#[derive(Clone, Debug)]
pub struct Point {
    pub verb: WrOpcode,
    pub mtu: u32,
    pub qps: usize,
    pub size: u64,
    /// The WQEs were inline.
    pub inline: bool,
    pub messages: u64,
    pub cycles: u64,
    pub gbps: f64,
    pub mpps: f64,
    pub wire_limit_gbps: f64,
    /// Messages whose bytes at their destination differed from their own payload when they completed.
    pub bad_messages: u64,
    /// Empty when every message completed with success and arrived intact.
    pub problem: String,
    /// RX drops and go-back-N during the point (empty when none).
    pub note: String,
}

/// Latencies in core cycles.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    pub doorbell_to_wire: u64,
    pub rx_to_dma_write: u64,
    pub request_to_ack: u64,
    /// The same WRITE as an inline WQE (its data in the send ring: one host round trip fewer).
    pub inline_doorbell_to_wire: u64,
    /// The host-memory round trip in cycles (the bench's `--host-latency-ns`).
    pub host_round_trip: u64,
}

/// Payload Gb/s the 100G wire carries for messages of `size` at path MTU `mtu` (WRITE: RETH on the first
/// packet; READ responses: AETH on FIRST/LAST/ONLY; SEND: none), with 20 bytes of preamble + IPG per frame.
pub fn wire_limit_gbps(verb: WrOpcode, size: u64, mtu: u32) -> f64 {
    let packets = size.div_ceil(u64::from(mtu)).max(1);
    let mut wire = 0u64;
    for p in 0..packets {
        let pay = if p + 1 == packets { size - p * u64::from(mtu) } else { u64::from(mtu) };
        let ext = match verb {
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm if p == 0 => 16,
            WrOpcode::RdmaRead if p == 0 || p + 1 == packets => 4,
            _ => 0,
        };
        let pad = (4 - pay % 4) % 4;
        // Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ext + payload + pad + ICRC 4, at least 60, + FCS 4
        let frame = (14 + 20 + 8 + 12 + ext + pay + pad + 4).max(60) + 4;
        wire += frame + 20;
    }
    100.0 * size as f64 / wire as f64
}

/// The nonzero RX drop and go-back-N counters of both sides.
fn counters(r: &mut PairRig) -> String {
    let mut out = String::new();
    for (tag, side) in [("A", &mut r.a), ("B", &mut r.b)] {
        for (n, v) in read_counter_window(&mut side.drv).unwrap_or_default() {
            if v != 0 && (n.starts_with("rx_drop") || n == "comp_retries") {
                let _ = write!(out, "{tag} {n}={v} ");
            }
        }
    }
    out.trim_end().to_string()
}

/// The largest source and destination region a point uses (each; both RNICs hold one of each). A point whose
/// messages need more reuses its slots: message `i` goes to slot `i mod slots`, and is posted only once the
/// message before it in that slot has completed and been checked (with 64 MiB: at least 4 messages of 1 MiB
/// per QP at 16 QPs; only 16 QPs of 1 MiB in the default sweep reuse slots at all).
pub const MAX_REGION: u64 = 64 << 20;

/// Message `i`'s payload (QP index `qp`, `size` bytes): every 8-byte word a 64-bit mix of (QP, message, word
/// offset), so no two messages, QPs or offsets of a point carry the same bytes.
pub fn payload(i: u64, qp: usize, size: u64) -> Vec<u8> {
    let key = ((qp as u64) << 56) ^ (i << 24);
    let mut v = Vec::with_capacity(size as usize + 8);
    for w in 0..size.div_ceil(8) {
        // splitmix64's finalizer: a bijection, so distinct keys give distinct words
        let mut z = (key ^ w).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        v.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    v.truncate(size as usize);
    v
}

/// One goodput point.
pub fn goodput(o: &BenchOpts, verb: WrOpcode, mtu: u32, qps: usize, size: u64, dir: &Path) -> Result<Point> {
    goodput_with(o, verb, mtu, qps, size, dir, MAX_REGION, &mut |_, _, _| {})
}

/// [`goodput`] with its region capped at `max_region` bytes, and `before_check(message, destination memory,
/// address)` called between each message's completion and the check of its bytes (the unit tests corrupt a
/// message there).
fn goodput_with(
    o: &BenchOpts,
    verb: WrOpcode,
    mtu: u32,
    qps: usize,
    size: u64,
    dir: &Path,
    max_region: u64,
    before_check: &mut dyn FnMut(u64, &Mutex<HostMemory>, u64),
) -> Result<Point> {
    let per_qp_max = if verb == WrOpcode::Send { 256 } else { u64::MAX };
    let messages = (o.bytes_per_point / size.max(1)).clamp(16 * qps as u64, 4096).min(per_qp_max.saturating_mul(qps as u64));
    let stride = size.max(64);
    let half = (messages * stride).next_power_of_two().max(2 << 20).min(max_region.max(stride));
    let mut r = PairRig::with_qps_on(mtu, 2 * half, qps, dir, o.host)?;
    let timeout = qp_timeout(qps, size, mtu);
    let stall = STALL_CYCLES.max(2 * (rtl::transport::completer::TIMER_TICK << timeout));
    let lat = host_latency_cycles(o);
    r.a.sys.borrow_mut().dma.latency_cycles = lat;
    r.b.sys.borrow_mut().dma.latency_cycles = lat;
    for side in [&mut r.a, &mut r.b] {
        for q in side.qps.clone() {
            side.drv.modify_qp(q, &QpAttr { timeout: Some(timeout), ..Default::default() }).map_err(|e| anyhow!("modify_qp: {e}"))?;
        }
    }
    let slots = (half / stride).max(1);
    let at = |i: u64| (i % slots) * stride;
    // message i's buffers at A (local) and B (remote) are these + at(i); a READ's data flows from B's first
    // half into A's second half, everything else from A's first half into B's second half
    let read = verb == WrOpcode::RdmaRead;
    let (local_base, remote_base) = if read { (r.a.buf + half, r.b.buf) } else { (r.a.buf, r.b.buf + half) };
    let (src_mem, src_base, dst_mem, dst_base) =
        if read { (r.b.mem.clone(), remote_base, r.a.mem.clone(), local_base) } else { (r.a.mem.clone(), local_base, r.b.mem.clone(), remote_base) };
    if verb == WrOpcode::Send {
        for i in 0..messages {
            let q = r.b.qps[i as usize % qps];
            let sge = Sge { addr: remote_base + at(i), length: size as u32, lkey: r.b.key };
            r.b.drv.post_recv(q, &RecvWr { wr_id: i, sg_list: vec![sge] }).map_err(|e| anyhow!("post_recv: {e}"))?;
        }
    }
    let inline = o.inlines(verb, size);
    let mut tracing = trace(&mut r, o, &point_name(o, verb, mtu, qps, size), true)?;
    let c0 = r.cycle();
    // QP q posts messages q, q + qps, q + 2 qps, ..; next[q] is its next one. A message is posted once the
    // one before it in its slot has been checked; the QPs take turns, one message each.
    let mut next: Vec<u64> = (0..qps as u64).collect();
    let mut checked = vec![false; messages as usize];
    let (mut done, mut last_progress) = (0u64, c0);
    let (mut bad, mut first_bad) = (0u64, None::<(u64, usize)>);
    let mut problem = String::new();
    'run: while done < messages {
        let mut full = vec![false; qps];
        loop {
            let mut posted_any = false;
            for q in 0..qps {
                let j = next[q];
                if full[q] || j >= messages || (j >= slots && !checked[(j - slots) as usize]) {
                    continue;
                }
                // the slot is free: message j's own bytes into its source
                let data = payload(j, q, size);
                src_mem.lock().unwrap().write(src_base + at(j), &data).map_err(|e| anyhow!("{e}"))?;
                let mut wr = SendWr::new(j, verb, vec![Sge { addr: local_base + at(j), length: size as u32, lkey: r.a.key }]);
                wr.remote_addr = remote_base + at(j);
                wr.rkey = r.b.key;
                if inline {
                    wr.set_inline(data);
                }
                match r.a.drv.post_send(r.a.qps[q], &wr) {
                    Ok(()) => {
                        next[q] += qps as u64;
                        posted_any = true;
                    }
                    Err(DriverError::Verbs(VerbsError::QueueFull)) => full[q] = true,
                    Err(e) => return Err(anyhow!("post_send: {e}")),
                }
            }
            if !posted_any {
                break;
            }
        }
        if tracing && r.cycle() - c0 > VCD_CYCLES {
            tracing = trace(&mut r, o, "", false)?;
        }
        let wcs = r.a.drv.poll_cq(r.a.cq, 256).map_err(|e| anyhow!("poll_cq: {e}"))?;
        if wcs.is_empty() {
            r.run(32);
            if r.cycle() - last_progress > stall {
                problem = format!("stalled after {done} of {messages} ({})", counters(&mut r));
                break;
            }
            continue;
        }
        last_progress = r.cycle();
        // each message's bytes at its destination, as it completes (host-side, between simulated cycles: the
        // check costs no simulated time), before anything can reuse its slot
        for w in &wcs {
            if w.status != WcStatus::Success {
                problem = format!("completion {:?}", w.status);
                break 'run;
            }
            let j = w.wr_id;
            if j >= messages || checked[j as usize] {
                problem = format!("an unexpected completion (wr_id {j})");
                break 'run;
            }
            let addr = dst_base + at(j);
            before_check(j, &dst_mem, addr);
            let got = dst_mem.lock().unwrap().read(addr, size as usize).map_err(|e| anyhow!("{e}"))?;
            let want = payload(j, j as usize % qps, size);
            if let Some(k) = got.iter().zip(&want).position(|(g, w)| g != w) {
                bad += 1;
                first_bad.get_or_insert((j, k));
            }
            checked[j as usize] = true;
            done += 1;
        }
    }
    let cycles = r.cycle() - c0;
    let mut problems: Vec<String> = Vec::new();
    if bad != 0 {
        let (j, k) = first_bad.unwrap_or_default();
        problems.push(format!("{bad} of {messages} messages differ at their destination (first: message {j} at byte {k})"));
    }
    if !problem.is_empty() {
        problems.push(problem);
    }
    let under = r.a.sys.borrow().out.underruns + r.b.sys.borrow().out.underruns;
    if under != 0 {
        problems.push(format!("{under} MAC TX underrun cycles"));
    }
    let problem = problems.join("; ");
    // (a stall's problem already names the counters)
    let note = if problem.contains("stalled") { String::new() } else { counters(&mut r) };
    let secs = cycles as f64 / (o.clock_mhz * 1e6);
    let ok = problem.is_empty();
    Ok(Point {
        verb,
        mtu,
        qps,
        size,
        inline,
        messages,
        cycles,
        gbps: if ok { (messages * size) as f64 * 8.0 / secs / 1e9 } else { 0.0 },
        mpps: if ok { messages as f64 / secs / 1e6 } else { 0.0 },
        wire_limit_gbps: wire_limit_gbps(verb, size, mtu),
        bad_messages: bad,
        problem,
        note,
    })
}

/// A point's name for its pcap directory and VCDs: `VERB-MTU-QPS-SIZE`, `-inline` when its WQEs are.
pub fn point_name(o: &BenchOpts, verb: WrOpcode, mtu: u32, qps: usize, size: u64) -> String {
    let inline = o.inlines(verb, size);
    format!("{verb:?}-{mtu}-{qps}-{size}{}", if inline { "-inline" } else { "" })
}

/// With `--vcd`: starts both RNICs' traces as `DIR/NAME.a.vcd` and `.b.vcd` (`on`) or stops them; returns
/// whether they are running.
fn trace(r: &mut PairRig, o: &BenchOpts, name: &str, on: bool) -> Result<bool> {
    let Some(d) = &o.vcd else { return Ok(false) };
    for (side, s) in [("a", &r.a.sys), ("b", &r.b.sys)] {
        if on {
            std::fs::create_dir_all(d)?;
            s.borrow_mut().rnic.start_trace(d.join(format!("{name}.{side}.vcd")).to_str().unwrap());
        } else {
            s.borrow_mut().rnic.stop_trace();
        }
    }
    Ok(on)
}

/// Latencies of one 64-byte WRITE at MTU 4096 on an idle pair, from a buffer (lkey) and inline.
pub fn latency(o: &BenchOpts, dir: &Path) -> Result<Latency> {
    let (doorbell_to_wire, rx_to_dma_write, request_to_ack) = one_write(o, &dir.join("lkey"), false)?;
    let (inline_doorbell_to_wire, _, _) = one_write(o, &dir.join("inline"), true)?;
    Ok(Latency {
        doorbell_to_wire,
        rx_to_dma_write,
        request_to_ack,
        inline_doorbell_to_wire,
        host_round_trip: host_latency_cycles(o),
    })
}

fn host_latency_cycles(o: &BenchOpts) -> u64 {
    (o.host_latency_ns * 1e-9 * o.clock_mhz * 1e6).round() as u64
}

/// One 64-byte WRITE on a fresh idle pair: (doorbell to A's first beat, B's last beat in to its payload DMA
/// write, B's last beat in to its ACK's first beat out).
fn one_write(o: &BenchOpts, dir: &Path, inline: bool) -> Result<(u64, u64, u64)> {
    let mut r = PairRig::new(4096, 1 << 20, dir)?;
    let lat = host_latency_cycles(o);
    for s in [&r.a.sys, &r.b.sys] {
        let mut s = s.borrow_mut();
        s.dma.latency_cycles = lat;
        s.timing = true;
    }
    r.run(100);
    // the whole exchange is a few thousand cycles: traced to the end
    trace(&mut r, o, if inline { "latency-inline" } else { "latency" }, true)?;
    let mut wr = SendWr::new(1, WrOpcode::RdmaWrite, vec![Sge { addr: r.a.buf, length: 64, lkey: r.a.key }]);
    if inline {
        wr.set_inline((0..64u8).collect());
    }
    wr.remote_addr = r.b.buf + (512 << 10);
    wr.rkey = r.b.key;
    r.a.drv.post_send(r.a.qpn, &wr).map_err(|e| anyhow!("{e}"))?;
    let db = r.cycle();
    let wcs = r.a.wait(1, 100_000);
    if wcs.len() != 1 || wcs[0].status != WcStatus::Success {
        return Err(anyhow!("the 64-byte WRITE (inline {inline}) did not complete: {wcs:?}"));
    }
    trace(&mut r, o, "", false)?;
    let (a, b) = (r.a.sys.borrow(), r.b.sys.borrow());
    let first = |v: &[u64], after: u64| v.iter().copied().find(|&c| c >= after);
    let wire = first(&a.tx_first_beats, db).ok_or_else(|| anyhow!("no frame left A"))?;
    let rx = first(&b.rx_last_beats, wire).ok_or_else(|| anyhow!("no frame reached B"))?;
    let dma = first(&b.dma_write_starts, rx).ok_or_else(|| anyhow!("B wrote nothing"))?;
    let ack = first(&b.tx_first_beats, rx).ok_or_else(|| anyhow!("B sent no ACK"))?;
    if inline {
        let got = r.b.mem.lock().unwrap().read(wr.remote_addr, 64).map_err(|e| anyhow!("{e}"))?;
        if got != wr.inline_data {
            return Err(anyhow!("the inline WRITE's payload differs at B"));
        }
    }
    Ok((wire - db, dma - rx, ack - rx))
}

pub fn csv(points: &[Point]) -> String {
    let mut s = String::from("verb,mtu,qps,size,messages,cycles,gbps,mpps,wire_limit_gbps,problem,note,inline\n");
    for p in points {
        let _ = writeln!(
            s,
            "{:?},{},{},{},{},{},{:.2},{:.3},{:.2},{},{},{}",
            p.verb, p.mtu, p.qps, p.size, p.messages, p.cycles, p.gbps, p.mpps, p.wire_limit_gbps, p.problem.replace(',', ";"), p.note.replace(',', ";"), p.inline
        );
    }
    s
}

/// Goodput against message size (log scale), one line per (verb, MTU, QPs), the wire limit per MTU dashed.
pub fn svg(points: &[Point], title: &str) -> String {
    let (w, h, l, b, t, rgt) = (900.0, 520.0, 70.0, 60.0, 40.0, 220.0);
    let sizes: Vec<u64> = {
        let mut v: Vec<u64> = points.iter().map(|p| p.size).collect();
        v.sort();
        v.dedup();
        v
    };
    if sizes.is_empty() {
        return String::new();
    }
    let (lx0, lx1) = ((sizes[0] as f64).log2(), (*sizes.last().unwrap() as f64).log2().max((sizes[0] as f64).log2() + 1.0));
    let x = |s: u64| l + ((s as f64).log2() - lx0) / (lx1 - lx0) * (w - l - rgt);
    let y = |g: f64| h - b - g / 100.0 * (h - b - t);
    let mut s = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n<text x='{l}' y='24' font-size='15'>{title}</text>\n"
    );
    for g in (0..=100).step_by(20) {
        let yy = y(g as f64);
        let _ = writeln!(s, "<line x1='{l}' y1='{yy}' x2='{}' y2='{yy}' stroke='#ddd'/><text x='{}' y='{}' text-anchor='end'>{g}</text>", w - rgt, l - 6.0, yy + 4.0);
    }
    for &z in &sizes {
        let xx = x(z);
        let lab = if !z.is_power_of_two() {
            format!("{z}")
        } else if z >= 1 << 20 {
            format!("{}M", z >> 20)
        } else if z >= 1024 {
            format!("{}K", z >> 10)
        } else {
            format!("{z}")
        };
        let _ = writeln!(s, "<line x1='{xx}' y1='{}' x2='{xx}' y2='{}' stroke='#eee'/><text x='{xx}' y='{}' text-anchor='middle'>{lab}</text>", t, h - b, h - b + 18.0);
    }
    let _ = writeln!(s, "<text x='{}' y='{}' text-anchor='middle'>message size (bytes)</text>", (l + w - rgt) / 2.0, h - 14.0);
    let _ = writeln!(s, "<text x='18' y='{}' transform='rotate(-90 18 {})' text-anchor='middle'>goodput (Gb/s)</text>", (h - b + t) / 2.0, (h - b + t) / 2.0);
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#637939"];
    let mut series: Vec<(WrOpcode, u32, usize)> = points.iter().map(|p| (p.verb, p.mtu, p.qps)).collect();
    series.dedup();
    let mut seen = std::collections::BTreeSet::new();
    series.retain(|k| seen.insert(format!("{k:?}")));
    let mut legend_y = t + 10.0;
    let mut mtus: Vec<u32> = points.iter().map(|p| p.mtu).collect();
    mtus.sort();
    mtus.dedup();
    for (k, &m) in mtus.iter().enumerate() {
        let pts: Vec<String> = sizes.iter().map(|&z| format!("{:.1},{:.1}", x(z), y(wire_limit_gbps(WrOpcode::RdmaWrite, z, m)))).collect();
        let dash = if k == 0 { "6,4" } else { "2,3" };
        let _ = writeln!(s, "<polyline points='{}' fill='none' stroke='black' stroke-dasharray='{dash}'/>", pts.join(" "));
        let _ = writeln!(s, "<line x1='{}' y1='{legend_y}' x2='{}' y2='{legend_y}' stroke='black' stroke-dasharray='{dash}'/><text x='{}' y='{}'>wire limit, MTU {m}</text>", w - rgt + 10.0, w - rgt + 40.0, w - rgt + 46.0, legend_y + 4.0);
        legend_y += 18.0;
    }
    for (i, &(verb, mtu, qps)) in series.iter().enumerate() {
        let c = colors[i % colors.len()];
        let pts: Vec<String> = points
            .iter()
            .filter(|p| (p.verb, p.mtu, p.qps) == (verb, mtu, qps) && p.problem.is_empty())
            .map(|p| format!("{:.1},{:.1}", x(p.size), y(p.gbps)))
            .collect();
        let _ = writeln!(s, "<polyline points='{}' fill='none' stroke='{c}' stroke-width='2'/>", pts.join(" "));
        for p in pts {
            let (px, py) = p.split_once(',').unwrap();
            let _ = writeln!(s, "<circle cx='{px}' cy='{py}' r='3' fill='{c}'/>");
        }
        let name = format!("{verb:?}").replace("Rdma", "");
        let _ = writeln!(s, "<line x1='{}' y1='{legend_y}' x2='{}' y2='{legend_y}' stroke='{c}' stroke-width='2'/><text x='{}' y='{}'>{name} MTU {mtu}, {qps} QP</text>", w - rgt + 10.0, w - rgt + 40.0, w - rgt + 46.0, legend_y + 4.0);
        legend_y += 18.0;
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(verb: WrOpcode) -> BenchOpts {
        BenchOpts { verbs: vec![verb], bytes_per_point: 16 * 4096, ..BenchOpts::quick(322.265625) }
    }

    fn dir(tag: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("rnic-bench-unit-{}-{tag}", std::process::id()))
    }

    #[test]
    fn payloads_differ_by_message_qp_and_offset() {
        let p = payload(3, 1, 4096);
        assert_eq!(p.len(), 4096);
        assert_ne!(p, payload(4, 1, 4096));
        assert_ne!(p, payload(3, 0, 4096));
        assert_ne!(p[..8], p[8..16]);
        assert_eq!(payload(3, 1, 13), p[..13]);
    }

    /// 32 messages of 4 KiB on 2 QPs through 4 slots (each used 8 times), WRITE, READ and SEND: every message
    /// checked intact, none bad.
    #[test]
    fn a_tiny_bench_with_reused_slots_checks_every_message() {
        for verb in [WrOpcode::RdmaWrite, WrOpcode::RdmaRead, WrOpcode::Send] {
            let o = tiny(verb);
            let p = goodput_with(&o, verb, 4096, 2, 4096, &dir(&format!("{verb:?}")), 4 * 4096, &mut |_, _, _| {}).unwrap();
            assert_eq!((p.messages, p.bad_messages), (32, 0), "{verb:?}: {p:?}");
            assert!(p.problem.is_empty() && p.gbps > 0.0, "{verb:?}: {p:?}");
        }
    }

    /// One byte of one message flipped at its destination between its completion and its check (6 later, good,
    /// messages reuse its slot, which would hide it from a check at the end): the point reports that message and has no figure.
    #[test]
    fn a_message_corrupted_at_its_destination_is_caught() {
        for verb in [WrOpcode::RdmaWrite, WrOpcode::RdmaRead] {
            let o = tiny(verb);
            let mut hit = 0;
            let mut corrupt = |j: u64, mem: &Mutex<HostMemory>, addr: u64| {
                if j == 5 {
                    let mut m = mem.lock().unwrap();
                    let b = m.read(addr + 100, 1).unwrap()[0];
                    m.write(addr + 100, &[b ^ 0x40]).unwrap();
                    hit += 1;
                }
            };
            let p = goodput_with(&o, verb, 4096, 2, 4096, &dir(&format!("bad-{verb:?}")), 4 * 4096, &mut corrupt).unwrap();
            assert_eq!(hit, 1);
            assert_eq!(p.bad_messages, 1, "{verb:?}: {p:?}");
            assert!(p.problem.contains("1 of 32 messages differ") && p.problem.contains("message 5 at byte 100"), "{verb:?}: {p:?}");
            assert_eq!(p.gbps, 0.0);
        }
    }
}
