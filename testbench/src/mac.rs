//! Cycle-level models of what sits around the RNIC core in simulation: a 100G Ethernet link with MAC pacing
//! (preamble, IPG and FCS counted) that writes a pcap, and a host-memory DMA responder with PCIe-like latency
//! behind the RNIC's DMA ports (`docs/host-interface.md`).
//!
//! Both are driven once per core clock cycle by a system test, with the RNIC (rust-hdl or Verilator) between.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::TsResolution;

use rnic_driver::host::{dma_beats, DMA_BEAT_BYTES, DMA_MAX_BYTES};
use crate::model::link::{LinkStats, SplitMix64};
use crate::model::memory::HostMemory;

/// Seeded faults of one link direction, probabilities per frame (each decided independently, in this order:
/// drop; else duplicate, reorder, corrupt, FCS error). A reordered frame is held back by `reorder_cycles` so
/// that the frames sent after it overtake it; a duplicate arrives right behind the original; a corrupted frame
/// has one random bit flipped (anywhere in the frame) and a good FCS, as when a switch's memory flips a bit
/// and the switch computes the FCS again: only the ICRC can catch it; a frame with an FCS error had a bit
/// flipped on the wire, and the receiving MAC delivers it with its error flag on the last beat
/// ([`RxBeat::err`], the CMAC's `rx_axis_tuser`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MacFaults {
    pub drop: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    pub fcs: f64,
    pub reorder_cycles: u64,
}

impl MacFaults {
    /// The rates of the fault campaigns: 1 % drop, 0.5 % duplicate, 0.5 % reorder, 0.1 % corrupt.
    pub fn campaign() -> Self {
        MacFaults { drop: 0.01, duplicate: 0.005, reorder: 0.005, corrupt: 0.001, fcs: 0.0, reorder_cycles: 2_000 }
    }
    /// Drops only.
    pub fn drop(p: f64) -> Self {
        MacFaults { drop: p, duplicate: 0.0, reorder: 0.0, corrupt: 0.0, fcs: 0.0, reorder_cycles: 2_000 }
    }
}

/// Per-frame bytes the wire carries beyond the frame: preamble + SFD (8), FCS (4), inter-packet gap (12).
pub const WIRE_OVERHEAD_BYTES: u64 = 8 + 4 + 12;
/// Smallest frame without FCS.
pub const MIN_FRAME_BYTES: u64 = 60;
/// The default core clock, Hz (322.265625 MHz: the 100G MAC's 512-bit user clock).
pub const CORE_HZ: f64 = 322_265_625.0;

/// Wire time of one frame of `len` bytes (without FCS), in bits.
pub fn wire_bits(len: u64) -> u64 {
    (len.max(MIN_FRAME_BYTES) + WIRE_OVERHEAD_BYTES) * 8
}

/// One direction of a 100G link, beat by beat. The sender pushes 64-byte beats when [`MacLink::tx_ready`];
/// pacing holds `tready` low so that the frames leave at the wire rate; each frame reaches the receiver
/// `latency_cycles` after its last bit left, and comes out one beat per cycle.
pub struct MacLink {
    /// Wire bits the link can send per core cycle (100e9 / clock).
    bits_per_cycle: f64,
    /// Bits of wire time owed (> 0: the sender must wait).
    debt: f64,
    cur: Vec<u8>,
    /// (arrival cycle, frame, the MAC's error flag)
    in_flight: VecDeque<(u64, Vec<u8>, bool)>,
    rx_frame: Option<(Vec<u8>, usize, bool)>,
    pub latency_cycles: u64,
    pub clock_hz: f64,
    pcap: Option<PcapWriter<Box<dyn Write + Send>>>,
    pub frames: u64,
    pub bytes: u64,
    pub wire_bits_sent: u64,
    /// Cycles in which a frame was in progress, the MAC was ready and the sender gave no beat: a real 100G MAC
    /// (Xilinx CMAC) needs every beat of a packet back to back and would underflow.
    pub underruns: u64,
    beat_now: bool,
    faults: Option<(MacFaults, SplitMix64)>,
    /// What the faults did (`sent` counts every frame the sender finished, `delivered` what reached the far end).
    pub stats: LinkStats,
}

/// One beat on the RX side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxBeat {
    pub data: [u8; 64],
    /// Valid bytes (1..=64), contiguous from byte 0.
    pub len: usize,
    pub last: bool,
    /// With the last beat: the MAC's error flag (the frame's FCS was bad).
    pub err: bool,
}

impl MacLink {
    pub fn new(gbps: f64, clock_hz: f64, latency_cycles: u64) -> Self {
        MacLink {
            bits_per_cycle: gbps * 1e9 / clock_hz,
            debt: 0.0,
            cur: Vec::new(),
            in_flight: VecDeque::new(),
            underruns: 0,
            beat_now: false,
            faults: None,
            stats: LinkStats::default(),
            rx_frame: None,
            latency_cycles,
            clock_hz,
            pcap: None,
            frames: 0,
            bytes: 0,
            wire_bits_sent: 0,
        }
    }

    /// Write every frame to a pcap (LINKTYPE_ETHERNET, nanosecond timestamps from the cycle count: the time
    /// the frame's last bit left).
    pub fn with_pcap(mut self, w: Box<dyn Write + Send>) -> std::io::Result<Self> {
        let h = PcapHeader { ts_resolution: TsResolution::NanoSecond, ..Default::default() };
        self.pcap = Some(PcapWriter::with_header(w, h).map_err(|e| std::io::Error::other(e.to_string()))?);
        Ok(self)
    }

    /// Inject seeded faults from now on (the pcap still shows every frame as the sender sent it).
    pub fn set_faults(&mut self, f: MacFaults, seed: u64) {
        self.faults = Some((f, SplitMix64::new(seed)));
    }

    /// Queue a frame for the receiver at cycle `at`, keeping the queue in arrival order.
    fn deliver(&mut self, at: u64, f: Vec<u8>, err: bool) {
        let pos = self.in_flight.iter().rposition(|(t, _, _)| *t <= at).map_or(0, |p| p + 1);
        self.in_flight.insert(pos, (at, f, err));
        self.stats.delivered += 1;
    }

    /// The sender may present a beat this cycle.
    pub fn tx_ready(&self) -> bool {
        self.debt <= 0.0
    }

    /// Accept one beat (only when [`tx_ready`](Self::tx_ready)): `bytes` are the beat's valid bytes.
    pub fn tx_beat(&mut self, cycle: u64, bytes: &[u8], last: bool) -> std::io::Result<()> {
        assert!(self.tx_ready(), "beat presented while the MAC is pacing");
        self.beat_now = true;
        assert!(!bytes.is_empty() && bytes.len() <= 64, "a beat carries 1..=64 bytes");
        self.cur.extend_from_slice(bytes);
        self.debt += 8.0 * bytes.len() as f64;
        if last {
            let f = std::mem::take(&mut self.cur);
            let wb = wire_bits(f.len() as u64);
            self.debt += (wb - 8 * f.len() as u64) as f64;
            self.frames += 1;
            self.bytes += f.len() as u64;
            self.wire_bits_sent += wb;
            // the last bit leaves when the debt is paid
            let leaves = cycle + (self.debt / self.bits_per_cycle).ceil() as u64;
            if let Some(p) = self.pcap.as_mut() {
                let ns = (leaves as f64 * 1e9 / self.clock_hz) as u64;
                let ts = std::time::Duration::from_nanos(ns);
                p.write_packet(&PcapPacket::new(ts, f.len() as u32, &f))
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            let at = leaves + self.latency_cycles;
            self.stats.sent += 1;
            match self.faults.as_mut() {
                None => self.deliver(at, f, false),
                Some((cfg, rng)) => {
                    let cfg = *cfg;
                    if rng.next_f64() < cfg.drop {
                        self.stats.dropped += 1;
                        return Ok(());
                    }
                    let dup = rng.next_f64() < cfg.duplicate;
                    let late = rng.next_f64() < cfg.reorder;
                    let flip = (rng.next_f64() < cfg.corrupt).then(|| rng.below(8 * f.len() as u64) as usize);
                    let mut f = f;
                    if let Some(b) = flip {
                        f[b / 8] ^= 1 << (b % 8);
                        self.stats.corrupted += 1;
                    }
                    // (drawn only when asked for, so that the other faults' draws stay as they were)
                    let fcs = cfg.fcs > 0.0 && rng.next_f64() < cfg.fcs;
                    if fcs {
                        let b = rng.below(8 * f.len() as u64) as usize;
                        f[b / 8] ^= 1 << (b % 8);
                        self.stats.fcs_errors += 1;
                    }
                    let at = if late {
                        self.stats.reordered += 1;
                        at + cfg.reorder_cycles
                    } else {
                        at
                    };
                    if dup {
                        self.stats.duplicated += 1;
                        self.deliver(at, f.clone(), fcs);
                    }
                    self.deliver(at, f, fcs);
                }
            }
        }
        Ok(())
    }

    /// Call once per cycle after the sender's beat: the wire drains.
    pub fn tick(&mut self) {
        // a frame in progress, the MAC ready for its next beat, and no beat: a real MAC (CMAC) underflows
        if !self.cur.is_empty() && !self.beat_now && self.debt <= 0.0 {
            self.underruns += 1;
        }
        self.beat_now = false;
        self.debt = (self.debt - self.bits_per_cycle).max(-self.bits_per_cycle);
    }

    /// The receiver's beat this cycle, if a frame has arrived (one beat per cycle, never back-pressured:
    /// a MAC cannot stop the wire).
    pub fn rx_beat(&mut self, cycle: u64) -> Option<RxBeat> {
        if self.rx_frame.is_none() {
            if self.in_flight.front().is_some_and(|(t, _, _)| *t <= cycle) {
                let (_, f, err) = self.in_flight.pop_front().unwrap();
                self.rx_frame = Some((f, 0, err));
            } else {
                return None;
            }
        }
        let (f, off, err) = self.rx_frame.as_mut().unwrap();
        let err = *err;
        let n = (f.len() - *off).min(64);
        let mut data = [0u8; 64];
        data[..n].copy_from_slice(&f[*off..*off + n]);
        *off += n;
        let last = *off == f.len();
        if last {
            self.rx_frame = None;
        }
        Some(RxBeat { data, len: n, last, err: last && err })
    }

    /// Nothing queued, nothing in flight.
    pub fn idle(&self) -> bool {
        self.cur.is_empty() && self.in_flight.is_empty() && self.rx_frame.is_none()
    }
}

/// A DMA read request at the RNIC's read port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRead {
    pub addr: u64,
    pub len: u32,
    pub tag: u8,
}

/// One beat of a DMA read response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmaBeat {
    pub data: [u8; 64],
    pub tag: u8,
    pub last: bool,
}

/// Why a DMA access failed. The RNIC must never cause one: a test fails on the first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DmaFault {
    /// A read or write of bytes that are not host memory.
    OutOfMemory { addr: u64, len: u64 },
    /// A request longer than `DMA_MAX_BYTES` or of length 0.
    BadLength { addr: u64, len: u32 },
    /// A write beat whose address is not 64-byte aligned.
    Unaligned { addr: u64 },
}

/// Host memory behind the DMA ports: reads answered in request order after `latency_cycles`, at one beat
/// per cycle; writes applied at once under their strobes. Memory is shared with the driver.
pub struct DmaHost {
    pub mem: Arc<Mutex<HostMemory>>,
    pub latency_cycles: u64,
    /// Outstanding reads the port accepts before it holds `rd_req_ready` low.
    pub max_outstanding: usize,
    reads: VecDeque<(u64, DmaRead)>,
    beat: u32,
    pub faults: Vec<DmaFault>,
    pub reads_done: u64,
    pub read_beats: u64,
    pub write_beats: u64,
    pub bytes_written: u64,
}

impl DmaHost {
    /// Default latency: 500 ns (a PCIe round trip) at `clock_hz`.
    pub fn new(mem: Arc<Mutex<HostMemory>>, clock_hz: f64) -> Self {
        DmaHost {
            mem,
            latency_cycles: (500e-9 * clock_hz).round() as u64,
            max_outstanding: 64,
            reads: VecDeque::new(),
            beat: 0,
            faults: Vec::new(),
            reads_done: 0,
            read_beats: 0,
            write_beats: 0,
            bytes_written: 0,
        }
    }

    pub fn rd_req_ready(&self) -> bool {
        self.reads.len() < self.max_outstanding
    }

    /// Accept a read request (when [`rd_req_ready`](Self::rd_req_ready)).
    pub fn rd_req(&mut self, cycle: u64, r: DmaRead) {
        if r.len == 0 || r.len as usize > DMA_MAX_BYTES {
            self.faults.push(DmaFault::BadLength { addr: r.addr, len: r.len });
            return;
        }
        self.reads.push_back((cycle + self.latency_cycles, r));
    }

    /// The response beat presented this cycle, if any (call [`rd_resp_taken`](Self::rd_resp_taken) when the
    /// RNIC accepts it).
    pub fn rd_resp(&mut self, cycle: u64) -> Option<DmaBeat> {
        let &(due, r) = self.reads.front()?;
        if due > cycle {
            return None;
        }
        let first = r.addr & !(DMA_BEAT_BYTES as u64 - 1);
        let addr = first + u64::from(self.beat) * DMA_BEAT_BYTES as u64;
        let mut data = [0u8; 64];
        // bytes of the window outside the request are not required to be memory (they are zero then)
        let mem = self.mem.lock().unwrap();
        for (i, d) in data.iter_mut().enumerate() {
            let a = addr + i as u64;
            if a >= r.addr && a < r.addr + u64::from(r.len) {
                match mem.read(a, 1) {
                    Ok(b) => *d = b[0],
                    Err(_) => {
                        drop(mem);
                        self.faults.push(DmaFault::OutOfMemory { addr: r.addr, len: u64::from(r.len) });
                        return self.rd_resp_fallback(r);
                    }
                }
            }
        }
        Some(DmaBeat { data, tag: r.tag, last: self.beat + 1 == dma_beats(r.addr, r.len) })
    }

    fn rd_resp_fallback(&mut self, r: DmaRead) -> Option<DmaBeat> {
        Some(DmaBeat { data: [0; 64], tag: r.tag, last: self.beat + 1 == dma_beats(r.addr, r.len) })
    }

    /// The RNIC took the beat [`rd_resp`](Self::rd_resp) presented.
    pub fn rd_resp_taken(&mut self) {
        let Some(&(_, r)) = self.reads.front() else { return };
        self.beat += 1;
        self.read_beats += 1;
        if self.beat == dma_beats(r.addr, r.len) {
            self.reads.pop_front();
            self.beat = 0;
            self.reads_done += 1;
        }
    }

    /// A write beat: `strb` bit i writes byte i at `addr + i`.
    pub fn wr_beat(&mut self, addr: u64, data: &[u8; 64], strb: u64) {
        if addr % DMA_BEAT_BYTES as u64 != 0 {
            self.faults.push(DmaFault::Unaligned { addr });
            return;
        }
        self.write_beats += 1;
        let mut mem = self.mem.lock().unwrap();
        for (i, &b) in data.iter().enumerate() {
            if strb >> i & 1 == 1 {
                if mem.write(addr + i as u64, &[b]).is_err() {
                    self.faults.push(DmaFault::OutOfMemory { addr: addr + i as u64, len: 1 });
                    return;
                }
                self.bytes_written += 1;
            }
        }
    }

    pub fn idle(&self) -> bool {
        self.reads.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Push back-to-back frames of `len` bytes through the link for `cycles`; frames per second.
    fn rate(len: usize, cycles: u64) -> (f64, MacLink) {
        let mut l = MacLink::new(100.0, CORE_HZ, 10);
        let f: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut off = 0;
        let mut got = Vec::new();
        let mut rx = Vec::new();
        for c in 0..cycles {
            if l.tx_ready() {
                let n = (len - off).min(64);
                l.tx_beat(c, &f[off..off + n], off + n == len).unwrap();
                off = (off + n) % len;
            }
            l.tick();
            if let Some(b) = l.rx_beat(c) {
                rx.extend_from_slice(&b.data[..b.len]);
                if b.last {
                    got.push(std::mem::take(&mut rx));
                }
            }
        }
        assert!(got.iter().all(|g| *g == f), "frames arrive intact");
        (got.len() as f64 / (cycles as f64 / CORE_HZ), l)
    }

    /// Frames numbered 0..n (the number in bytes 0..4, 200 bytes each) through a faulty link; what came out,
    /// each with the MAC's error flag.
    fn faulty(f: MacFaults, seed: u64, n: u32) -> (Vec<(Vec<u8>, bool)>, MacLink) {
        let mut l = MacLink::new(100.0, CORE_HZ, 10);
        l.set_faults(f, seed);
        let (mut i, mut off, mut rx, mut got) = (0u32, 0usize, Vec::new(), Vec::new());
        let mut c = 0;
        while i < n || !l.idle() {
            let mut fr = vec![0xA5u8; 200];
            fr[..4].copy_from_slice(&i.to_le_bytes());
            if i < n && l.tx_ready() {
                let k = (200 - off).min(64);
                l.tx_beat(c, &fr[off..off + k], off + k == 200).unwrap();
                off += k;
                if off == 200 {
                    off = 0;
                    i += 1;
                }
            }
            l.tick();
            if let Some(b) = l.rx_beat(c) {
                assert!(!b.err || b.last, "the error flag comes with the last beat");
                rx.extend_from_slice(&b.data[..b.len]);
                if b.last {
                    got.push((std::mem::take(&mut rx), b.err));
                }
            }
            c += 1;
        }
        (got, l)
    }

    #[test]
    fn seeded_faults_drop_duplicate_reorder_and_corrupt_at_their_rates() {
        let f = MacFaults { drop: 0.05, duplicate: 0.03, reorder: 0.02, corrupt: 0.01, fcs: 0.0, reorder_cycles: 500 };
        let (got, l) = faulty(f, 7, 10_000);
        let s = &l.stats;
        assert_eq!(s.sent, 10_000);
        assert_eq!(s.delivered, s.sent - s.dropped + s.duplicated);
        assert_eq!(got.len() as u64, s.delivered);
        // each rate within 4 sigma of its expectation
        for (k, p, n) in [(s.dropped, 0.05, 10_000.0), (s.duplicated, 0.03, 10_000.0 - s.dropped as f64),
            (s.reordered, 0.02, 10_000.0 - s.dropped as f64), (s.corrupted, 0.01, 10_000.0 - s.dropped as f64)]
        {
            let (m, sd) = (p * n, (p * (1.0 - p) * n).sqrt());
            assert!((k as f64 - m).abs() < 4.0 * sd, "{k} vs {m} +- {sd}");
        }
        // corrupted frames differ from their original in exactly one bit (anywhere); the rest are intact
        let mut flipped = 0;
        let mut seen = std::collections::HashMap::new();
        let mut out_of_order = 0;
        let mut last = None;
        assert!(got.iter().all(|(_, err)| !err), "no FCS errors asked for");
        for (g, _) in &got {
            let i = u32::from_le_bytes(g[..4].try_into().unwrap());
            let mut want = vec![0xA5u8; 200];
            want[..4].copy_from_slice(&i.to_le_bytes());
            let bits: u32 = g.iter().zip(&want).map(|(a, b)| (a ^ b).count_ones()).sum();
            if bits != 0 {
                flipped += 1;
                continue;
            }
            *seen.entry(i).or_insert(0) += 1;
            if last.is_some_and(|l| i < l) {
                out_of_order += 1;
            }
            last = Some(i);
        }
        // a flip in the 4 number bytes makes the frame look like another one: allowed, but rare
        assert!(flipped as u64 <= s.corrupted && flipped as u64 + 5 >= s.corrupted, "{flipped} vs {}", s.corrupted);
        assert!(seen.values().any(|&n| n == 2), "duplicates arrive twice");
        assert!(out_of_order as u64 >= s.reordered / 2, "reordered frames are overtaken: {out_of_order}");
        // the same seed gives the same run
        let (again, _) = faulty(f, 7, 10_000);
        assert!(again == got);
        let (other, _) = faulty(f, 8, 10_000);
        assert!(other != got);
    }

    /// FCS errors: a bit flipped on the wire, the frame delivered with the MAC's error flag; every flagged
    /// frame differs from its original in one bit, every other one is intact.
    #[test]
    fn fcs_errors_are_flagged_by_the_receiving_mac() {
        let base = MacFaults { drop: 0.05, duplicate: 0.0, reorder: 0.0, corrupt: 0.0, fcs: 0.0, reorder_cycles: 500 };
        let (got, l) = faulty(MacFaults { fcs: 0.03, ..base }, 11, 10_000);
        let s = &l.stats;
        let n = (s.sent - s.dropped) as f64;
        let (m, sd) = (0.03 * n, (0.03 * 0.97 * n).sqrt());
        assert!((s.fcs_errors as f64 - m).abs() < 4.0 * sd, "{} vs {m} +- {sd}", s.fcs_errors);
        assert_eq!(got.iter().filter(|(_, e)| *e).count() as u64, s.fcs_errors);
        let mut one_bit = 0;
        for (g, err) in &got {
            let i = u32::from_le_bytes(g[..4].try_into().unwrap());
            let mut want = vec![0xA5u8; 200];
            want[..4].copy_from_slice(&i.to_le_bytes());
            let bits: u32 = g.iter().zip(&want).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert!(*err || bits == 0, "frame {i}: {bits} bits flipped and not flagged");
            one_bit += (*err && bits == 1) as u64;
        }
        // (a flip in the 4 number bytes makes the frame look like another, intact one: rare)
        assert!(one_bit + 5 >= s.fcs_errors && s.fcs_errors > 200, "{one_bit} of {}", s.fcs_errors);
    }

    #[test]
    fn the_link_paces_at_100g_with_preamble_ipg_and_fcs() {
        // 1,024-byte frames: 100e9 / ((1024 + 24) * 8) = 11.93 M frames/s
        let (r, l) = rate(1024, 200_000);
        let want = 100e9 / ((1024.0 + 24.0) * 8.0);
        assert!((r / want - 1.0).abs() < 0.01, "{r} vs {want}");
        assert!(l.frames > 7_000);
        // minimum frames: 148.8 M frames/s (64 + 20 bytes each)
        let (r, _) = rate(60, 200_000);
        let want = 100e9 / (84.0 * 8.0);
        assert!((r / want - 1.0).abs() < 0.01, "{r} vs {want}");
    }

    #[test]
    fn the_link_writes_every_frame_to_its_pcap_with_rising_timestamps() {
        let buf = Arc::new(Mutex::new(Vec::new()));
        struct W(Arc<Mutex<Vec<u8>>>);
        impl Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut l = MacLink::new(100.0, CORE_HZ, 0).with_pcap(Box::new(W(buf.clone()))).unwrap();
        let mut c = 0;
        for n in [60usize, 61, 128, 1500] {
            let f = vec![n as u8; n];
            for (k, ch) in f.chunks(64).enumerate() {
                while !l.tx_ready() {
                    l.tick();
                    c += 1;
                }
                l.tx_beat(c, ch, (k + 1) * 64 >= n).unwrap();
                l.tick();
                c += 1;
            }
        }
        drop(l);
        let data = buf.lock().unwrap().clone();
        let mut r = pcap_file::pcap::PcapReader::new(&data[..]).unwrap();
        let mut last = std::time::Duration::ZERO;
        let mut lens = Vec::new();
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            assert!(p.timestamp > last);
            last = p.timestamp;
            lens.push(p.data.len());
        }
        assert_eq!(lens, vec![60, 61, 128, 1500]);
    }

    #[test]
    fn dma_reads_come_back_in_order_after_the_latency_and_writes_obey_strobes() {
        let mem = Arc::new(Mutex::new(HostMemory::new()));
        let a = mem.lock().unwrap().alloc(8192);
        let pattern: Vec<u8> = (0..8192).map(|i| (i * 7 + 3) as u8).collect();
        mem.lock().unwrap().write(a, &pattern).unwrap();
        let mut d = DmaHost::new(mem.clone(), CORE_HZ);
        assert_eq!(d.latency_cycles, 161);
        d.rd_req(0, DmaRead { addr: a + 60, len: 10, tag: 1 });
        d.rd_req(1, DmaRead { addr: a + 128, len: 64, tag: 2 });
        let mut beats = Vec::new();
        for c in 0..400 {
            if let Some(b) = d.rd_resp(c) {
                assert!(c >= 161);
                beats.push(b);
                d.rd_resp_taken();
            }
        }
        assert_eq!(beats.len(), 3);
        assert_eq!((beats[0].tag, beats[0].last, beats[1].last, beats[2].tag), (1, false, true, 2));
        assert_eq!(&beats[0].data[60..], &pattern[60..64]);
        assert_eq!(&beats[1].data[..6], &pattern[64..70]);
        assert_eq!(&beats[2].data[..], &pattern[128..192]);
        d.wr_beat(a, &[0xEE; 64], 0b1010);
        let m = mem.lock().unwrap().read(a, 4).unwrap();
        assert_eq!(m, vec![pattern[0], 0xEE, pattern[2], 0xEE]);
        assert!(d.faults.is_empty());
        drop(m);
        d.wr_beat(a + 1, &[0; 64], 1);
        d.wr_beat(0x10, &[0; 64], 1);
        d.rd_req(500, DmaRead { addr: a, len: 0, tag: 0 });
        assert_eq!(d.faults.len(), 3, "{:?}", d.faults);
    }
}
