//! TX Packet Build against the golden model, in rust-hdl's simulator and in the Verilator model of its
//! emitted Verilog, in lockstep (every output compared on every cycle): IPv4 and IPv6, untagged and
//! 802.1Q-tagged.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sim::tx_harness::{run_tx, RustHdlTx, TxDut, VerilatorTx};
use testbench::wire::samples::{masked_atomic_requests, over_ipv6, rc_frames, ud_frames};

#[test]
fn tx_packet_build_matches_golden_frames_in_rust_hdl_and_verilator() {
    let mut rng = SmallRng::seed_from_u64(21);
    // every payload length 0..=300 across the seven header shapes, then a few long ones, and masked atomics
    let mut lens: Vec<usize> = (0..=300).collect();
    lens.extend([1023, 1024, 1025, 4095, 4096]);
    let mut frames = rc_frames(&mut || rng.gen(), &lens);
    // the masked atomics' requests (the 98- and 82-byte headers) among them
    let masked = masked_atomic_requests(&mut || rng.gen(), 40);
    for (k, m) in masked.into_iter().enumerate() {
        frames.insert(7 * k + k % 3, m);
    }
    // UD SENDs (DETH, DETH + ImmDt: 62- and 66-byte headers) as our Requester sends them: TTL 64, TOS 0
    let ud_lens: Vec<usize> = (0..60).map(|i| if i < 30 { i } else { rng.gen_range(0..=4096) }).collect();
    for (k, mut u) in ud_frames(&mut || rng.gen(), &ud_lens).into_iter().enumerate() {
        if let testbench::wire::IpHeader::V4(h) = &mut u.ip {
            h.tos = 0;
            h.ttl = 64;
        }
        frames.insert(5 * k + 1, u);
    }
    // over IPv6 (74-byte fixed header): the seven shapes at 0..=140 bytes, masked atomics (118-byte headers) and
    // UD SENDs, interleaved with IPv4 frames
    let v6_lens: Vec<usize> = (0..=140).chain([1025, 4096]).collect();
    let mut v6 = rc_frames(&mut || rng.gen(), &v6_lens);
    v6.extend(masked_atomic_requests(&mut || rng.gen(), 10));
    v6.extend(ud_frames(&mut || rng.gen(), &[0, 1, 62, 63, 64, 1000]).into_iter().map(|mut u| {
        if let testbench::wire::IpHeader::V4(h) = &mut u.ip {
            (h.tos, h.ttl) = (0, 64);
        }
        u
    }));
    for (k, f) in over_ipv6(&mut || rng.gen(), v6, false).into_iter().enumerate() {
        frames.insert(3 * k + 2, f);
    }
    // every fourth frame 802.1Q-tagged (random PCP, DEI and VID; 4 bytes more in front of the IP header), among
    // the untagged ones of both families and every shape
    let mut tagged = 0;
    for (i, f) in frames.iter_mut().enumerate() {
        if i % 4 == 3 {
            f.eth.vlan = Some(testbench::wire::frame::VlanTag { tci: rng.gen() });
            tagged += 1;
        }
    }
    let mut hdl = RustHdlTx::default();
    let mut vl = VerilatorTx::new(std::env::var("RNIC_VCD").ok().as_deref());
    let run = run_tx(&mut [&mut hdl as &mut dyn TxDut, &mut vl], &frames, 5, true);
    assert!(tagged > 100);
    for (i, (got, f)) in run.frames.iter().zip(&frames).enumerate() {
        assert_eq!(got, &f.build().unwrap(), "frame {i}: {:?}, VLAN {:?}, payload {}", f.packet.opcode(), f.eth.vlan, f.packet.payload.len());
    }
}

#[test]
fn tx_packet_build_verilator_20000_frames_flat_out() {
    // Longer run on Verilator alone; also the throughput without gaps: beats out per cycle.
    let mut rng = SmallRng::seed_from_u64(22);
    let lens: Vec<usize> = (0..20_000).map(|_| rng.gen_range(0..=4096)).collect();
    let frames = rc_frames(&mut || rng.gen(), &lens);
    let mut vl = VerilatorTx::new(None);
    let run = run_tx(&mut [&mut vl as &mut dyn TxDut], &frames, 6, false);
    for (i, (got, f)) in run.frames.iter().zip(&frames).enumerate() {
        assert_eq!(got, &f.build().unwrap(), "frame {i}");
    }
    let util = run.out_beats as f64 / run.cycles as f64;
    eprintln!("{} frames, {} beats in {} cycles: {:.3} beats/cycle", frames.len(), run.out_beats, run.cycles, util);
    assert!(util > 0.9, "output beats per cycle {util:.3}");
}
