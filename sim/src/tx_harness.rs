//! TX Packet Build on both simulators in lockstep: descriptors and payload in, frames out, every output
//! compared on every cycle, and the frames compared with the golden model's.

use crate::Clocked;
use crate::vmodels::tx_packet_build::TxPacketBuild as VTx;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtl::common::axis::{beat_of, beat_words, BEAT_BYTES};
use rtl::wire::tx_build::{tx_header_of, TxHeader, TxPacketBuild, TXH_BITS};
use rust_hdl::prelude::*;
use testbench::wire::RoceFrame;

/// Inputs of one cycle.
#[derive(Clone, Copy)]
pub struct TxIn<'a> {
    pub hdr: &'a TxHeader,
    pub hdr_valid: bool,
    pub pay: &'a [u8],
    pub pay_last: bool,
    pub pay_valid: bool,
    pub out_ready: bool,
}

/// Outputs of one cycle: (hdr_ready, pay_ready, out_valid, out_last, out_keep, out_data words).
pub type TxOut = (bool, bool, bool, bool, u64, [u32; 16]);

pub trait TxDut {
    fn drive(&mut self, i: TxIn) -> TxOut;
    fn tick(&mut self);
}

pub struct RustHdlTx(Box<TxPacketBuild>);

impl Default for RustHdlTx {
    fn default() -> Self {
        let mut u = Box::<TxPacketBuild>::default();
        u.connect_all();
        Self(u)
    }
}

impl TxDut for RustHdlTx {
    fn drive(&mut self, i: TxIn) -> TxOut {
        let u = &mut self.0;
        u.hdr.next = *i.hdr;
        u.hdr_valid.next = i.hdr_valid;
        let (d, k) = beat_of(i.pay);
        u.pay.tdata.next = d;
        u.pay.tkeep.next = k;
        u.pay.tlast.next = i.pay_last;
        u.pay.tvalid.next = i.pay_valid;
        u.m_axis.tready.next = i.out_ready;
        u.clock.next = false.into();
        assert!(simulate(&mut **u, 50), "rust-hdl simulation did not settle");
        let data = u.m_axis.tdata.val();
        let words = std::array::from_fn(|w| data.get_bits::<32>(32 * w).to_u32());
        (
            u.hdr_ready.val(),
            u.pay.tready.val(),
            u.m_axis.tvalid.val(),
            u.m_axis.tlast.val(),
            u.m_axis.tkeep.val().to_u64(),
            words,
        )
    }

    fn tick(&mut self) {
        self.0.clock.next = true.into();
        assert!(simulate(&mut *self.0, 50), "rust-hdl simulation did not settle");
    }
}

pub struct VerilatorTx(Clocked<VTx>);

impl VerilatorTx {
    pub fn new(vcd: Option<&str>) -> Self {
        Self(Clocked::new(vcd))
    }
}

/// A descriptor as the 32-bit words of its packed bits.
pub fn header_words(h: &TxHeader) -> [u32; TXH_BITS.div_ceil(32)] {
    let b: Bits<TXH_BITS> = (*h).into();
    std::array::from_fn(|w| {
        let lo = 32 * w;
        if lo + 32 <= TXH_BITS {
            b.get_bits::<32>(lo).to_u32()
        } else {
            (0..TXH_BITS - lo).fold(0u32, |a, i| a | (b.get_bit(lo + i) as u32) << i)
        }
    })
}

impl TxDut for VerilatorTx {
    fn drive(&mut self, i: TxIn) -> TxOut {
        let keep = if i.pay.len() >= 64 { u64::MAX } else { (1u64 << i.pay.len()) - 1 };
        self.0.m.set_hdr(&header_words(i.hdr));
        self.0.m.set_hdr_valid(i.hdr_valid as u64);
        self.0.m.set_pay_tdata(&beat_words(i.pay));
        self.0.m.set_pay_tkeep(keep);
        self.0.m.set_pay_tlast(i.pay_last as u64);
        self.0.m.set_pay_tvalid(i.pay_valid as u64);
        self.0.m.set_m_axis_tready(i.out_ready as u64);
        self.0.settle();
        (
            self.0.m.hdr_ready() != 0,
            self.0.m.pay_tready() != 0,
            self.0.m.m_axis_tvalid() != 0,
            self.0.m.m_axis_tlast() != 0,
            self.0.m.m_axis_tkeep(),
            self.0.m.m_axis_tdata(),
        )
    }

    fn tick(&mut self) {
        self.0.tick();
    }
}

/// What a run produced.
#[derive(Debug, Default)]
pub struct TxRun {
    pub frames: Vec<Vec<u8>>,
    pub cycles: u64,
    pub out_beats: u64,
}

/// Send `frames` (as descriptors plus payload) through every DUT at once. `gaps`: the payload source idles
/// 1 cycle in 6 and the sink stalls 1 in 8; without, both run flat out. Panics where two DUTs differ or when
/// output stops.
pub fn run_tx(duts: &mut [&mut dyn TxDut], frames: &[RoceFrame], seed: u64, gaps: bool) -> TxRun {
    let mut rng = SmallRng::seed_from_u64(seed);
    let descs: Vec<(TxHeader, Vec<u8>)> = frames.iter().map(tx_header_of).collect();
    let pay: Vec<(&[u8], bool)> = descs
        .iter()
        .flat_map(|(_, p)| {
            let n = p.len().div_ceil(BEAT_BYTES);
            p.chunks(BEAT_BYTES).enumerate().map(move |(i, c)| (c, i + 1 == n))
        })
        .collect();
    let idle_hdr = TxHeader::default();
    let (mut hi, mut pi) = (0, 0);
    let mut run = TxRun::default();
    let mut cur = Vec::new();
    let mut quiet = 0;
    while run.frames.len() < frames.len() {
        let pay_valid = pi < pay.len() && (!gaps || rng.gen_ratio(5, 6));
        let out_ready = !gaps || rng.gen_ratio(7, 8);
        let input = TxIn {
            hdr: if hi < descs.len() { &descs[hi].0 } else { &idle_hdr },
            hdr_valid: hi < descs.len(),
            pay: if pi < pay.len() { pay[pi].0 } else { &[] },
            pay_last: pi < pay.len() && pay[pi].1,
            pay_valid,
            out_ready,
        };
        let mut seen: Option<TxOut> = None;
        for (k, d) in duts.iter_mut().enumerate() {
            let o = d.drive(input);
            match &seen {
                None => seen = Some(o),
                Some(s) => assert_eq!(*s, o, "DUT {k} differs from DUT 0 at cycle {}", run.cycles),
            }
        }
        let (hrdy, prdy, ov, olast, okeep, odata) = seen.unwrap();
        if input.hdr_valid && hrdy {
            hi += 1;
        }
        if pay_valid && prdy {
            pi += 1;
        }
        if ov && out_ready {
            let n = 64 - okeep.leading_zeros() as usize;
            for b in 0..n {
                cur.push((odata[b / 4] >> (8 * (b % 4))) as u8);
            }
            run.out_beats += 1;
            if olast {
                run.frames.push(std::mem::take(&mut cur));
            }
            quiet = 0;
        }
        for d in duts.iter_mut() {
            d.tick();
        }
        run.cycles += 1;
        quiet += 1;
        assert!(quiet < 2_000, "TX Packet Build stopped sending at cycle {}", run.cycles);
    }
    run
}
