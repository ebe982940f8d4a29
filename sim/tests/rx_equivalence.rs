//! RX Parse against the golden model, in rust-hdl's simulator and in the Verilator model of its emitted
//! Verilog, in lockstep; fed with frames that the RTL TX Packet Build produced (RTL against RTL on the wire),
//! some corrupted on the way.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtl::wire::rx_parse::DropReason;
use sim::rx_harness::{run_rx, run_rx_flagged, RustHdlRx, RxDut, VerilatorRx};
use sim::tx_harness::{run_tx, TxDut, VerilatorTx};
use testbench::wire::samples::{over_ipv6, rc_frames, ud_frames};
use testbench::wire::{IpHeader, RoceFrame};

const MY_IP: u32 = 0x0A00_0002;

/// RC frames of `lens`, with a UD SEND (random ID; TOS 0 and TTL 64, as TX Packet Build sends them) after every
/// third.
fn frames_for_us(rng: &mut SmallRng, lens: &[usize]) -> Vec<RoceFrame> {
    let rc = rc_frames(&mut || rng.gen(), lens);
    let ud = ud_frames(&mut || rng.gen(), &lens[..lens.len() / 3]);
    let mut all = Vec::new();
    for (i, f) in rc.into_iter().enumerate() {
        all.push(f);
        if i % 3 == 2 {
            let mut u = ud[i / 3].clone();
            if let IpHeader::V4(h) = &mut u.ip {
                h.tos = 0;
                h.ttl = 64;
            }
            all.push(u);
        }
    }
    all.into_iter()
        .map(|mut f| {
            if let IpHeader::V4(h) = &mut f.ip {
                h.dst = MY_IP.into();
            }
            f
        })
        .collect()
}

/// Every good frame's packet as RX Parse hands it on: a UD SEND's payload behind its GRH area (20 zero bytes, the
/// IPv4 header as it came).
fn check_packets(run: &sim::rx_harness::RxRun, good: &[&RoceFrame]) {
    assert_eq!(run.packets.len(), good.len());
    for (k, (p, f)) in run.packets.iter().zip(good).enumerate() {
        let mut want = Vec::new();
        if f.packet.deth().is_some() {
            let ip_len = if matches!(f.ip, IpHeader::V6(_)) { 40 } else { 20 };
            want.extend(testbench::wire::frame::ud_grh_area(&f.build().unwrap()[14..14 + ip_len]));
        }
        want.extend_from_slice(&f.packet.payload);
        assert_eq!(p.payload, want, "packet {k} payload");
        assert_eq!(p.pay_len as usize, want.len(), "packet {k}");
        let ext_len: usize = f.packet.ext.iter().map(|e| e.kind().len()).sum();
        assert_eq!(p.ext_words as usize * 4, ext_len, "packet {k}");
    }
}

#[test]
fn rx_parse_takes_tx_packet_build_frames_in_rust_hdl_and_verilator() {
    let mut rng = SmallRng::seed_from_u64(31);
    let lens: Vec<usize> = (0..120).map(|i| if i < 70 { i } else { rng.gen_range(0..3000) }).collect();
    let frames = frames_for_us(&mut rng, &lens);
    // the RTL TX Packet Build makes the wire frames
    let wire = run_tx(&mut [&mut VerilatorTx::new(None) as &mut dyn TxDut], &frames, 7, true).frames;
    let mut good = Vec::new();
    let mut inputs = Vec::new();
    let mut flagged = Vec::new();
    for (i, (mut bytes, f)) in wire.into_iter().zip(&frames).enumerate() {
        // the MAC's error flag (a bad FCS) on intact frames
        let flag = i % 6 == 2;
        flagged.push(flag);
        if i % 6 == 5 {
            // flip a bit the ICRC covers (not TOS, TTL, IP checksum, UDP checksum or BTH byte 4, which it masks;
            // RX Parse does not verify the IPv4 header checksum)
            let masked = [15, 22, 24, 25, 40, 41, 46];
            let at = loop {
                let at = rng.gen_range(14..14 + f.packet.wire_len() + 28);
                if !masked.contains(&at) {
                    break at;
                }
            };
            bytes[at] ^= 1 << rng.gen_range(0..8);
        } else if !flag {
            good.push(f);
        }
        inputs.push(bytes);
    }
    let mut hdl = RustHdlRx::default();
    let mut vl = VerilatorRx::new(std::env::var("RNIC_VCD").ok().as_deref());
    let run = run_rx_flagged(&mut [&mut hdl as &mut dyn RxDut, &mut vl], &inputs, &flagged, MY_IP, 8, true);
    check_packets(&run, &good);
    let n_flagged = flagged.iter().filter(|&&f| f).count() as u64;
    assert_eq!(run.counters[DropReason::MacError as usize], n_flagged, "the frames the MAC flagged: {:?}", run.counters);
    assert_eq!(run.counters[0] as usize, good.len(), "good frames: {:?}", run.counters);
    let dropped: u64 = run.counters[1..].iter().sum();
    assert_eq!(dropped as usize, inputs.len() - good.len(), "every corrupted frame dropped and counted: {:?}", run.counters);
    assert_eq!(run.counters[DropReason::Overflow as usize], 0);
    assert!(run.counters[DropReason::BadIcrc as usize] > 0);
}

/// RoCEv2 over IPv6 (from the RTL TX Packet Build, two frames in three, the rest IPv4): every header shape, UD
/// SENDs behind their GRH area (the IPv6 header), some frames with a flipped bit the ICRC covers.
#[test]
fn rx_parse_takes_ipv6_frames_in_rust_hdl_and_verilator() {
    const MY_IP6: u128 = 0xFD00_0000_0000_0000_0000_0000_0000_0002;
    let mut rng = SmallRng::seed_from_u64(33);
    let lens: Vec<usize> = (0..90).map(|i| if i < 50 { i } else { rng.gen_range(0..=4096) }).collect();
    let frames: Vec<RoceFrame> = frames_for_us(&mut rng, &lens)
        .into_iter()
        .map(|f| {
            if rng.gen_ratio(1, 3) {
                return f;
            }
            let mut f = over_ipv6(&mut || rng.gen(), vec![f], false).remove(0);
            if let IpHeader::V6(h) = &mut f.ip {
                h.dst = MY_IP6.into();
            }
            f
        })
        .collect();
    let wire = run_tx(&mut [&mut VerilatorTx::new(None) as &mut dyn TxDut], &frames, 9, true).frames;
    let mut good = Vec::new();
    let mut inputs = Vec::new();
    for (i, (mut bytes, f)) in wire.into_iter().zip(&frames).enumerate() {
        assert_eq!(bytes, f.build().unwrap(), "frame {i} from TX Packet Build");
        if i % 7 == 3 {
            // a bit the ICRC covers, within the datagram (not Ethernet padding): not the IPv6 class, flow label
            // and hop limit, or the IPv4 TOS, TTL and checksum (RX Parse does not verify the IPv4 header
            // checksum); not the UDP checksum or BTH byte 4
            let v6 = matches!(f.ip, IpHeader::V6(_));
            let (from, end, masked): (usize, usize, &[usize]) = if v6 {
                (22, 14 + 48 + f.packet.wire_len(), &[60, 61, 66])
            } else {
                (14, 14 + 28 + f.packet.wire_len(), &[15, 22, 24, 25, 40, 41, 46])
            };
            let at = loop {
                let at = rng.gen_range(from..end);
                if !masked.contains(&at) {
                    break at;
                }
            };
            bytes[at] ^= 1 << rng.gen_range(0..8);
        } else {
            good.push(f);
        }
        inputs.push(bytes);
    }
    let mut hdl = RustHdlRx::default();
    let mut vl = VerilatorRx::new(std::env::var("RNIC_VCD").ok().as_deref());
    hdl.set_ipv6(Some(MY_IP6));
    vl.set_ipv6(Some(MY_IP6));
    let run = run_rx(&mut [&mut hdl as &mut dyn RxDut, &mut vl], &inputs, MY_IP, 10, true);
    check_packets(&run, &good);
    assert_eq!(run.counters[0] as usize, good.len(), "good frames: {:?}", run.counters);
    let dropped: u64 = run.counters[1..].iter().sum();
    assert_eq!(dropped as usize, inputs.len() - good.len(), "every corrupted frame dropped and counted: {:?}", run.counters);
    assert!(good.iter().filter(|f| matches!(f.ip, IpHeader::V6(_)) && f.packet.deth().is_some()).count() >= 5);
}

#[test]
fn rx_parse_verilator_20000_frames_flat_out() {
    let mut rng = SmallRng::seed_from_u64(32);
    let lens: Vec<usize> = (0..20_000).map(|_| rng.gen_range(0..=4096)).collect();
    let frames = frames_for_us(&mut rng, &lens);
    let inputs: Vec<Vec<u8>> = frames.iter().map(|f| f.build().unwrap()).collect();
    let run = run_rx(&mut [&mut VerilatorRx::new(None) as &mut dyn RxDut], &inputs, MY_IP, 9, false);
    let good: Vec<&RoceFrame> = frames.iter().collect();
    eprintln!("counters {:?}, {} cycles", run.counters, run.cycles);
    check_packets(&run, &good);
    assert_eq!(run.counters[0], frames.len() as u64, "{:?}", run.counters);
    assert_eq!(run.counters[1..].iter().sum::<u64>(), 0, "{:?}", run.counters);
}
