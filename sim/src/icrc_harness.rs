//! One stimulus, two simulators: the ICRC engine in rust-hdl's simulator (direct drive) and as the
//! Verilator model of its emitted Verilog, run in lockstep and compared on every cycle.

use crate::Clocked;
use crate::vmodels::icrc_engine::IcrcEngine as VIcrc;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtl::common::axis::{beat_of, beat_words, BEAT_BYTES};
use rtl::wire::icrc::IcrcEngine;
use rust_hdl::prelude::*;

/// The ports of the ICRC engine, whatever simulates it.
pub trait IcrcDut {
    /// Drive the inputs for this cycle (clock low) and settle; returns (tready, crc_valid, crc).
    fn drive(&mut self, beat: &[u8], tlast: bool, tvalid: bool, crc_ready: bool) -> (bool, bool, u32);
    /// Rising clock edge.
    fn tick(&mut self);
}

/// rust-hdl's simulator, driven directly (no Simulation threads).
pub struct RustHdlIcrc(Box<IcrcEngine>);

impl Default for RustHdlIcrc {
    fn default() -> Self {
        let mut e = Box::<IcrcEngine>::default();
        e.connect_all();
        Self(e)
    }
}

impl IcrcDut for RustHdlIcrc {
    fn drive(&mut self, beat: &[u8], tlast: bool, tvalid: bool, crc_ready: bool) -> (bool, bool, u32) {
        let u = &mut self.0;
        let (d, k) = beat_of(beat);
        u.s_axis.tdata.next = d;
        u.s_axis.tkeep.next = k;
        u.s_axis.tlast.next = tlast;
        u.s_axis.tvalid.next = tvalid;
        u.crc_ready.next = crc_ready;
        u.clock.next = false.into();
        assert!(simulate(&mut **u, 20), "rust-hdl simulation did not settle");
        (u.s_axis.tready.val(), u.crc_valid.val(), u.crc.val().to_u32())
    }

    fn tick(&mut self) {
        self.0.clock.next = true.into();
        assert!(simulate(&mut *self.0, 20), "rust-hdl simulation did not settle");
    }
}

/// The Verilator model of the emitted Verilog.
pub struct VerilatorIcrc(Clocked<VIcrc>);

impl VerilatorIcrc {
    pub fn new(vcd: Option<&str>) -> Self {
        Self(Clocked::new(vcd))
    }
}

impl IcrcDut for VerilatorIcrc {
    fn drive(&mut self, beat: &[u8], tlast: bool, tvalid: bool, crc_ready: bool) -> (bool, bool, u32) {
        let keep = if beat.len() >= 64 { u64::MAX } else { (1u64 << beat.len()) - 1 };
        self.0.m.set_s_axis_tdata(&beat_words(beat));
        self.0.m.set_s_axis_tkeep(keep);
        self.0.m.set_s_axis_tlast(tlast as u64);
        self.0.m.set_s_axis_tvalid(tvalid as u64);
        self.0.m.set_crc_ready(crc_ready as u64);
        self.0.settle();
        (self.0.m.s_axis_tready() != 0, self.0.m.crc_valid() != 0, self.0.m.crc() as u32)
    }

    fn tick(&mut self) {
        self.0.tick();
    }
}

/// What a lockstep run saw.
#[derive(Debug, Default)]
pub struct IcrcRun {
    pub crcs: Vec<u32>,
    pub cycles: u64,
    pub beats: u64,
}

/// Feed `frames` (each without its ICRC) with random idle cycles (1 in 5) and random backpressure on the
/// result (1 in 8), on every DUT at once. Panics at the first cycle where two DUTs differ in tready,
/// crc_valid or crc, or if results stop coming.
pub fn run_lockstep(duts: &mut [&mut dyn IcrcDut], frames: &[Vec<u8>], seed: u64) -> IcrcRun {
    let mut rng = SmallRng::seed_from_u64(seed);
    let beats: Vec<(&[u8], bool)> = frames
        .iter()
        .flat_map(|f| {
            let n = f.len().div_ceil(BEAT_BYTES).max(1);
            f.chunks(BEAT_BYTES).enumerate().map(move |(i, c)| (c, i + 1 == n))
        })
        .collect();
    let mut run = IcrcRun::default();
    let mut next = 0;
    let mut since_result = 0u64;
    while run.crcs.len() < frames.len() {
        let tvalid = next < beats.len() && rng.gen_ratio(4, 5);
        let crc_ready = rng.gen_ratio(7, 8);
        let (beat, tlast) = if next < beats.len() { beats[next] } else { (&[][..], false) };
        let mut seen = None;
        for (i, d) in duts.iter_mut().enumerate() {
            let o = d.drive(beat, tlast, tvalid, crc_ready);
            match seen {
                None => seen = Some(o),
                Some(s) => assert_eq!(s, o, "DUT {i} differs from DUT 0 at cycle {}", run.cycles),
            }
        }
        let (tready, crc_valid, crc) = seen.expect("at least one DUT");
        if crc_valid && crc_ready {
            run.crcs.push(crc);
            since_result = 0;
        }
        if tvalid && tready {
            next += 1;
            run.beats += 1;
        }
        for d in duts.iter_mut() {
            d.tick();
        }
        run.cycles += 1;
        since_result += 1;
        assert!(since_result < 10_000, "no ICRC result for 10,000 cycles: the engine hangs");
    }
    run
}

/// A random RoCEv2 frame built by the golden model, with `payload` bytes of RoCE payload: random addresses,
/// IPv4 or IPv6, with or without a VLAN tag, random IP/UDP/BTH field values (including the fields the ICRC
/// masks), SEND_ONLY or WRITE_ONLY (RETH). Returns the frame without its ICRC (what the engine is fed) and the
/// golden ICRC the model put on the wire.
///
/// Real RoCE frames are padded to 4 bytes, so their lengths cover only 16 of the 64 last-beat `tkeep`
/// patterns; with `ragged`, 1 to 3 extra bytes follow the pad and the golden ICRC is the model's `icrc()` over
/// the longer datagram, so every byte count of a last beat is exercised.
pub fn random_roce_frame(rng: &mut SmallRng, payload: usize, ragged: bool) -> (Vec<u8>, u32) {
    use std::net::{Ipv4Addr, Ipv6Addr};
    use testbench::wire::headers::{Bth, ExtHeader, Reth};
    use testbench::wire::opcode::{RC_RDMA_WRITE_ONLY, RC_SEND_ONLY};
    use testbench::wire::{IpHeader, MacAddr, RocePacket, RoceFrame, VlanTag};

    let write = rng.gen::<bool>();
    let mut bth = Bth::new(if write { RC_RDMA_WRITE_ONLY } else { RC_SEND_ONLY }, rng.gen::<u32>() & 0xFF_FFFF, rng.gen::<u32>() & 0xFF_FFFF);
    bth.se = rng.gen();
    bth.mig_req = rng.gen();
    bth.pkey = rng.gen();
    bth.fecn = rng.gen();
    bth.becn = rng.gen();
    bth.resv6 = rng.gen::<u8>() & 0x3F;
    bth.ack_req = rng.gen();
    bth.resv7 = rng.gen::<u8>() & 0x7F;
    let ext = if write { vec![ExtHeader::Reth(Reth { va: rng.gen(), rkey: rng.gen(), dma_len: payload as u32 })] } else { vec![] };
    let data: Vec<u8> = (0..payload).map(|_| rng.gen()).collect();
    let packet = RocePacket::new(bth, ext, data);
    let (smac, dmac) = (MacAddr(rng.gen()), MacAddr(rng.gen()));
    let sport = 0xC000 | rng.gen::<u16>();
    let mut f = if rng.gen() {
        RoceFrame::ipv6(smac, dmac, Ipv6Addr::from(rng.gen::<u128>()), Ipv6Addr::from(rng.gen::<u128>()), sport, packet)
    } else {
        RoceFrame::ipv4(smac, dmac, Ipv4Addr::from(rng.gen::<u32>()), Ipv4Addr::from(rng.gen::<u32>()), sport, packet)
    };
    match &mut f.ip {
        IpHeader::V4(h) => {
            h.tos = rng.gen();
            h.ttl = rng.gen();
            h.id = rng.gen();
        }
        IpHeader::V6(h) => {
            h.traffic_class = rng.gen();
            h.flow_label = rng.gen::<u32>() & 0xF_FFFF;
            h.hop_limit = rng.gen();
        }
    }
    f.udp.checksum = rng.gen();
    if rng.gen() {
        f.eth.vlan = Some(VlanTag { tci: rng.gen() });
    }
    f.eth_trailer = Some(Vec::new());
    let mut bytes = f.build().expect("golden model builds the frame");
    let mut icrc = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
    bytes.truncate(bytes.len() - 4);
    if ragged {
        let extra = rng.gen_range(1..=3);
        bytes.extend((0..extra).map(|_| rng.gen::<u8>()));
        icrc = testbench::wire::frame::icrc(&bytes[f.eth.header_len()..]);
    }
    (bytes, icrc)
}
