//! RX Parse on both simulators in lockstep: frames in (with idle gaps), headers and payload out under random
//! back-pressure, every output compared on every cycle.

use crate::Clocked;
use crate::vmodels::rx_parse::RxParse as VRx;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtl::common::axis::{beat_of, beat_words, BEAT_BYTES};
use rtl::wire::rx_parse::{RxHeader, RxParse, RXH_BITS, RX_COUNTERS};
use rust_hdl::prelude::*;

/// One received packet: header words (packed [`RxHeader`]), ext words, payload length, payload.
#[derive(Clone, Debug, PartialEq)]
pub struct RxPacket {
    pub hdr: Vec<u32>,
    pub ext_words: u64,
    pub pay_len: u64,
    pub payload: Vec<u8>,
}

/// Outputs of one cycle, in a form both simulators produce.
#[derive(Clone, Debug, PartialEq)]
pub struct RxOut {
    pub in_ready: bool,
    pub hdr_valid: bool,
    pub hdr: Vec<u32>,
    pub ext_words: u64,
    pub pay_len: u64,
    pub pay_valid: bool,
    pub pay_last: bool,
    pub pay_keep: u64,
    pub pay_data: [u32; 16],
    pub counters: Vec<u64>,
}

pub trait RxDut {
    fn drive(&mut self, beat: &[u8], last: bool, err: bool, valid: bool, my_ip: u32, hdr_ready: bool, pay_ready: bool) -> RxOut;
    fn tick(&mut self);
    /// Our IPv6 address, or IPv6 off (the default).
    fn set_ipv6(&mut self, ip6: Option<u128>);
}

pub fn header_words(h: &RxHeader) -> Vec<u32> {
    let b: Bits<RXH_BITS> = (*h).into();
    (0..RXH_BITS.div_ceil(32))
        .map(|w| (0..32.min(RXH_BITS - 32 * w)).fold(0u32, |a, i| a | (b.get_bit(32 * w + i) as u32) << i))
        .collect()
}

pub struct RustHdlRx(Box<RxParse>);

impl Default for RustHdlRx {
    fn default() -> Self {
        let mut u = Box::<RxParse>::default();
        u.connect_all();
        Self(u)
    }
}

impl RxDut for RustHdlRx {
    fn drive(&mut self, beat: &[u8], last: bool, err: bool, valid: bool, my_ip: u32, hdr_ready: bool, pay_ready: bool) -> RxOut {
        let u = &mut self.0;
        let (d, k) = beat_of(beat);
        u.s_axis.tdata.next = d;
        u.s_axis.tkeep.next = k;
        u.s_axis.tlast.next = last;
        u.s_axis.tvalid.next = valid;
        u.s_err.next = err;
        u.my_ip.next = bits::<32>(my_ip as u64);
        u.hdr_ready.next = hdr_ready;
        u.pay.tready.next = pay_ready;
        u.clock.next = false.into();
        assert!(simulate(&mut **u, 50), "rust-hdl simulation did not settle");
        let data = u.pay.tdata.val();
        RxOut {
            in_ready: u.s_axis.tready.val(),
            hdr_valid: u.hdr_valid.val(),
            hdr: header_words(&u.hdr.val()),
            ext_words: u.hdr_ext_words.val().to_u64(),
            pay_len: u.hdr_pay_len.val().to_u64(),
            pay_valid: u.pay.tvalid.val(),
            pay_last: u.pay.tlast.val(),
            pay_keep: u.pay.tkeep.val().to_u64(),
            pay_data: std::array::from_fn(|w| data.get_bits::<32>(32 * w).to_u32()),
            counters: (0..RX_COUNTERS).map(|i| u.counters[i].val().to_u64()).collect(),
        }
    }

    fn tick(&mut self) {
        self.0.clock.next = true.into();
        assert!(simulate(&mut *self.0, 50), "rust-hdl simulation did not settle");
    }

    fn set_ipv6(&mut self, ip6: Option<u128>) {
        self.0.v6_on.next = ip6.is_some();
        self.0.my_ip6.next = rtl::wire::tx_build::bits128(ip6.unwrap_or(0));
    }
}

pub struct VerilatorRx(Clocked<VRx>);

impl VerilatorRx {
    pub fn new(vcd: Option<&str>) -> Self {
        Self(Clocked::new(vcd))
    }
}

impl RxDut for VerilatorRx {
    fn drive(&mut self, beat: &[u8], last: bool, err: bool, valid: bool, my_ip: u32, hdr_ready: bool, pay_ready: bool) -> RxOut {
        let keep = if beat.len() >= 64 { u64::MAX } else { (1u64 << beat.len()) - 1 };
        let m = &mut self.0.m;
        m.set_s_axis_tdata(&beat_words(beat));
        m.set_s_axis_tkeep(keep);
        m.set_s_axis_tlast(last as u64);
        m.set_s_axis_tvalid(valid as u64);
        m.set_s_err(err as u64);
        m.set_my_ip(my_ip as u64);
        m.set_hdr_ready(hdr_ready as u64);
        m.set_pay_tready(pay_ready as u64);
        self.0.settle();
        let m = &self.0.m;
        RxOut {
            in_ready: m.s_axis_tready() != 0,
            hdr_valid: m.hdr_valid() != 0,
            hdr: m.hdr().to_vec(),
            ext_words: m.hdr_ext_words(),
            pay_len: m.hdr_pay_len(),
            pay_valid: m.pay_tvalid() != 0,
            pay_last: m.pay_tlast() != 0,
            pay_keep: m.pay_tkeep(),
            pay_data: m.pay_tdata(),
            counters: vec![
                m.counters_0(),
                m.counters_1(),
                m.counters_2(),
                m.counters_3(),
                m.counters_4(),
                m.counters_5(),
                m.counters_6(),
                m.counters_7(),
                m.counters_8(),
                m.counters_9(),
            ],
        }
    }

    fn tick(&mut self) {
        self.0.tick();
    }

    fn set_ipv6(&mut self, ip6: Option<u128>) {
        let x = ip6.unwrap_or(0);
        self.0.m.set_v6_on(ip6.is_some() as u64);
        self.0.m.set_my_ip6(&rnic_driver::host::u128_words(x));
    }
}

/// What a run produced: the packets handed on, the final counters, cycles.
#[derive(Debug, Default)]
pub struct RxRun {
    pub packets: Vec<RxPacket>,
    pub counters: Vec<u64>,
    pub cycles: u64,
}

/// Feed `frames` to every DUT at once (1 idle cycle in 4 when `gaps`; the consumer stalls 1 in 8 when
/// `gaps`), until everything has drained. Panics where two DUTs differ.
pub fn run_rx(duts: &mut [&mut dyn RxDut], frames: &[Vec<u8>], my_ip: u32, seed: u64, gaps: bool) -> RxRun {
    run_rx_flagged(duts, frames, &vec![false; frames.len()], my_ip, seed, gaps)
}

/// [`run_rx`] with the MAC's error flag on the last beat of the frames `flagged` marks (and random on the
/// other beats and between frames, where it means nothing).
pub fn run_rx_flagged(
    duts: &mut [&mut dyn RxDut],
    frames: &[Vec<u8>],
    flagged: &[bool],
    my_ip: u32,
    seed: u64,
    gaps: bool,
) -> RxRun {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut garbage = SmallRng::seed_from_u64(seed ^ 0xE11);
    let beats: Vec<(&[u8], bool, bool)> = frames
        .iter()
        .zip(flagged)
        .flat_map(|(f, &e)| {
            let n = f.len().div_ceil(BEAT_BYTES);
            f.chunks(BEAT_BYTES).enumerate().map(move |(i, c)| (c, i + 1 == n, e))
        })
        .collect();
    let mut run = RxRun::default();
    let mut waiting = std::collections::VecDeque::new(); // packets whose payload is still coming
    let (mut next, mut quiet) = (0, 0);
    loop {
        let valid = next < beats.len() && (!gaps || rng.gen_ratio(3, 4));
        let hr = !gaps || rng.gen_ratio(7, 8);
        let pr = !gaps || rng.gen_ratio(7, 8);
        let (b, l, e) = if next < beats.len() { beats[next] } else { (&[][..], false, false) };
        let err = if valid && l { e } else { garbage.gen() };
        let mut seen: Option<RxOut> = None;
        for (k, d) in duts.iter_mut().enumerate() {
            let o = d.drive(b, l, err, valid, my_ip, hr, pr);
            match &seen {
                None => seen = Some(o),
                Some(s) => assert_eq!(s, &o, "DUT {k} differs from DUT 0 at cycle {}", run.cycles),
            }
        }
        let o = seen.unwrap();
        assert!(o.in_ready, "RX Parse must never back-pressure the MAC");
        quiet += 1;
        if valid {
            next += 1;
            quiet = 0;
        }
        if o.pay_valid && pr {
            let at = *waiting.front().expect("payload without a header");
            let p: &mut RxPacket = &mut run.packets[at];
            let n = 64 - o.pay_keep.leading_zeros() as usize;
            for i in 0..n {
                p.payload.push((o.pay_data[i / 4] >> (8 * (i % 4))) as u8);
            }
            if o.pay_last {
                waiting.pop_front();
            }
            quiet = 0;
        }
        if o.hdr_valid && hr {
            run.packets.push(RxPacket { hdr: o.hdr.clone(), ext_words: o.ext_words, pay_len: o.pay_len, payload: Vec::new() });
            if o.pay_len > 0 {
                waiting.push_back(run.packets.len() - 1);
            }
            quiet = 0;
        }
        run.counters = o.counters;
        for d in duts.iter_mut() {
            d.tick();
        }
        run.cycles += 1;
        if next >= beats.len() && quiet > 300 {
            break;
        }
    }
    run
}
