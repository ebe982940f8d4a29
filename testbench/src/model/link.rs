//! A seeded in-memory Ethernet link between two endpoints with per-direction drop, duplicate, reorder and
//! corrupt rates, a pcap (LINKTYPE_ETHERNET) of every delivered frame, and [`run_pair`], a driver loop that runs
//! two model devices against each other in virtual time.

use std::collections::BinaryHeap;
use std::cmp::Reverse;
use std::io::Write;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};

use super::device::Device;
use super::timers::earliest;

/// Direction of travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    AtoB,
    BtoA,
}

/// Fault rates and timing of one direction (probabilities per frame).
#[derive(Clone, Copy, Debug)]
pub struct LinkConfig {
    pub drop: f64,
    pub duplicate: f64,
    /// A reordered frame is held back by `reorder_delay_ns` so that later frames overtake it.
    pub reorder: f64,
    /// Flip one random bit of the frame.
    pub corrupt: f64,
    pub latency_ns: u64,
    pub reorder_delay_ns: u64,
    /// Serialisation time per byte (0 = infinitely fast).
    pub ns_per_byte: u64,
    /// Line rate in Gb/s, counting each frame's wire bits as an Ethernet MAC sends them (FCS, preamble and
    /// inter-frame gap, `crate::mac::wire_bits`) as the RTL's MAC links do; 0: `ns_per_byte` alone.
    pub gbps: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            drop: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            latency_ns: 1_000,
            reorder_delay_ns: 5_000,
            ns_per_byte: 0,
            gbps: 0.0,
        }
    }
}

/// What the link did.
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// Frames hit by a bit error on the wire, which the receiving MAC flags (bad FCS) and delivers.
    pub fcs_errors: u64,
}

/// SplitMix64: a tiny seeded generator (deterministic across platforms).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [0, n) (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

struct InFlight {
    at: u64,
    seq: u64,
    dir: Dir,
    frame: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// The link.
pub struct Link {
    pub a_to_b: LinkConfig,
    pub b_to_a: LinkConfig,
    rng: SplitMix64,
    queue: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    /// Per-direction time the wire is busy until (serialisation).
    busy: [u64; 2],
    pcap: Option<PcapWriter<Box<dyn Write>>>,
    pub stats: [LinkStats; 2],
}

impl Link {
    /// A link with the same configuration both ways.
    pub fn new(cfg: LinkConfig, seed: u64) -> Self {
        Self::asymmetric(cfg, cfg, seed)
    }

    pub fn asymmetric(a_to_b: LinkConfig, b_to_a: LinkConfig, seed: u64) -> Self {
        Link {
            a_to_b,
            b_to_a,
            rng: SplitMix64::new(seed),
            queue: BinaryHeap::new(),
            seq: 0,
            busy: [0; 2],
            pcap: None,
            stats: [LinkStats::default(), LinkStats::default()],
        }
    }

    /// Write every delivered frame to a pcap stream (LINKTYPE_ETHERNET, microsecond timestamps).
    pub fn with_pcap(mut self, w: Box<dyn Write>) -> std::io::Result<Self> {
        let writer = PcapWriter::new(w).map_err(|e| std::io::Error::other(e.to_string()))?;
        self.pcap = Some(writer);
        Ok(self)
    }

    /// Finish the pcap stream.
    pub fn finish_pcap(&mut self) -> Option<Box<dyn Write>> {
        self.pcap.take().map(|w| w.into_writer())
    }

    fn cfg(&self, dir: Dir) -> LinkConfig {
        match dir {
            Dir::AtoB => self.a_to_b,
            Dir::BtoA => self.b_to_a,
        }
    }

    fn di(dir: Dir) -> usize {
        match dir {
            Dir::AtoB => 0,
            Dir::BtoA => 1,
        }
    }

    /// Put a frame on the wire at `now`.
    pub fn send(&mut self, dir: Dir, now: u64, frame: Vec<u8>) {
        let cfg = self.cfg(dir);
        let i = Self::di(dir);
        self.stats[i].sent += 1;
        let start = now.max(self.busy[i]);
        let mut done = start + cfg.ns_per_byte * frame.len() as u64;
        if cfg.gbps > 0.0 {
            done += (crate::mac::wire_bits(frame.len() as u64) as f64 / cfg.gbps).round() as u64;
        }
        self.busy[i] = done;
        if self.rng.next_f64() < cfg.drop {
            self.stats[i].dropped += 1;
            return;
        }
        let copies = if self.rng.next_f64() < cfg.duplicate {
            self.stats[i].duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut f = frame.clone();
            if !f.is_empty() && self.rng.next_f64() < cfg.corrupt {
                let bit = self.rng.below(f.len() as u64 * 8);
                f[(bit / 8) as usize] ^= 1 << (bit % 8);
                self.stats[i].corrupted += 1;
            }
            let mut at = done + cfg.latency_ns;
            if self.rng.next_f64() < cfg.reorder {
                at += cfg.reorder_delay_ns;
                self.stats[i].reordered += 1;
            }
            self.seq += 1;
            self.queue.push(Reverse(InFlight {
                at,
                seq: self.seq,
                dir,
                frame: f,
            }));
        }
    }

    /// Time of the next delivery.
    pub fn next_delivery(&self) -> Option<u64> {
        self.queue.peek().map(|Reverse(f)| f.at)
    }

    /// Pop the next frame due at or before `now` (written to the pcap).
    pub fn deliver(&mut self, now: u64) -> Option<(Dir, u64, Vec<u8>)> {
        if self.queue.peek().map_or(true, |Reverse(f)| f.at > now) {
            return None;
        }
        let Reverse(f) = self.queue.pop()?;
        self.stats[Self::di(f.dir)].delivered += 1;
        if let Some(w) = &mut self.pcap {
            let ts = Duration::from_nanos(f.at);
            let _ = w.write_packet(&PcapPacket::new(ts, f.frame.len() as u32, &f.frame));
        }
        Some((f.dir, f.at, f.frame))
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// How a [`run_pair`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// Virtual time at the end.
    pub now_ns: u64,
    /// True when everything went quiet (no frame in flight, no timer pending); false when the time limit hit.
    pub idle: bool,
}

/// Run devices `a` and `b` against each other over `link` from `start_ns` until idle or `limit_ns`:
/// poll both (timers, requesters), deliver due frames, jump virtual time to the next event.
pub fn run_pair(a: &mut Device, b: &mut Device, link: &mut Link, start_ns: u64, limit_ns: u64) -> RunResult {
    let mut now = start_ns;
    loop {
        for f in a.poll(now) {
            link.send(Dir::AtoB, now, f);
        }
        for f in b.poll(now) {
            link.send(Dir::BtoA, now, f);
        }
        let mut delivered = false;
        while let Some((dir, at, frame)) = link.deliver(now) {
            delivered = true;
            match dir {
                Dir::AtoB => {
                    b.receive(at, &frame);
                }
                Dir::BtoA => {
                    a.receive(at, &frame);
                }
            }
            // Answers leave at the time of the frame that caused them.
            for f in a.poll(now) {
                link.send(Dir::AtoB, now, f);
            }
            for f in b.poll(now) {
                link.send(Dir::BtoA, now, f);
            }
        }
        if delivered {
            continue;
        }
        let next = earliest(link.next_delivery(), earliest(a.next_deadline(), b.next_deadline()));
        match next {
            None => return RunResult { now_ns: now, idle: true },
            Some(t) if t > limit_ns => return RunResult { now_ns: now, idle: false },
            Some(t) => now = now.max(t),
        }
    }
}
