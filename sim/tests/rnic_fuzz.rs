//! Fuzz of the RNIC's RX port, `sim::fuzz`: seeded random, malformed and mutated frames into the
//! Verilator RNIC: no hang, no write outside a registered MR, every drop accounted for exactly (each RX Parse
//! and Responder counter equal to the reference's count in every chunk: the fuzzer's flow control leaves RX
//! Parse no overflow drop but those of its overflow probe, whose frames are all of one verdict). CI runs
//! 50,000 frames; the 1,000,000-frame run is `#[ignore]`d (`cargo test --release -p rnic-sim --test
//! rnic_fuzz -- --ignored`, or `rnic fuzz --frames 1000000`).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sim::fuzz::{icrc_extent, predict_rx, recrc_at_rx_extent, run, FuzzOpts, Kind};
use sim::system::OUR_IP;
use testbench::wire::samples::rc_frames;
use testbench::wire::{check_icrc, IpHeader};

/// The reference RX Parse verdict agrees with the golden model where both apply: a well-formed frame for us is
/// good (also when padded to 60 bytes), one flipped ICRC-covered bit makes it a bad ICRC, putting the ICRC back
/// where RX Parse looks for it makes it good again; a frame for another IP is not for us, whatever its ICRC.
#[test]
fn reference_verdict_agrees_with_the_golden_model() {
    let mut rng = SmallRng::seed_from_u64(1);
    let lens: Vec<usize> = (0..700).map(|i| if i < 100 { i } else { rng.gen_range(0..=4096) }).collect();
    let mut seen = [0u32; 8];
    for mut f in rc_frames(&mut || rng.gen(), &lens) {
        let other = f.clone().build().unwrap();
        assert_eq!(predict_rx(&other, OUR_IP).reason, 3, "a random destination IP is not ours");
        if let IpHeader::V4(h) = &mut f.ip {
            h.dst = OUR_IP.into();
        }
        let mut b = f.build().unwrap();
        assert!(check_icrc(&b).unwrap().ok());
        let v = predict_rx(&b, OUR_IP);
        assert_eq!((v.reason, v.pay_len as usize, v.short), (0, f.packet.payload.len(), false), "{}", f.packet.bth.opcode);
        assert_eq!(icrc_extent(&b), 14 + 20 + 8 + f.packet.wire_len() + 4, "the ICRC engine stops at the ICRC, before any padding");
        seen[0] += 1;
        // a bit the ICRC covers (not TOS/TTL/IP checksum/UDP checksum/BTH byte 4, which it masks)
        let masked = [15, 22, 24, 25, 40, 41, 46];
        let at = loop {
            let at = rng.gen_range(54..b.len() - 4);
            if !masked.contains(&at) {
                break at;
            }
        };
        b[at] ^= 1 << rng.gen_range(0..8);
        assert_eq!(predict_rx(&b, OUR_IP).reason, 7, "a flipped bit at {at} of {}", b.len());
        recrc_at_rx_extent(&mut b);
        assert_eq!(predict_rx(&b, OUR_IP).reason, 0);
        seen[7] += 1;
    }
    assert!(seen[0] == 700 && seen[7] == 700);
}

/// The fuzz's first find, as a plain test: a SEND_ONLY to our QP cut short after 400 of its 1078 bytes, its ICRC
/// put right over the bytes that came (where RX Parse looks for it), then 40 small frames RX Parse must drop
/// (not for our IP). RX Parse must drop the cut frame as a length error (its IP total length runs past the
/// frame) and count every frame; before the fix (commit 4cf028e) it passed it, its payload reader took the
/// missing beats from the frames behind, and RX Parse stopped for good with 24 frames stuck inside.
#[test]
fn a_frame_cut_short_with_a_right_icrc_is_a_length_error_and_rx_goes_on() {
    use sim::system::{rig, OUR_MAC};
    use rnic_driver::CsrBus;
    use rnic_driver::host::REG_COUNTERS;
    use testbench::wire::{opcode, Bth, MacAddr, RocePacket, RoceFrame};
    let dir = std::env::temp_dir().join(format!("rnic-fuzz-cut-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    r.sys.borrow_mut().detached = true;
    let peer = r.sys.borrow().peer.av_to_me();
    let std::net::IpAddr::V4(peer_ip) = peer.dip else { unreachable!() };
    let send = |len: usize, dst: std::net::Ipv4Addr| {
        let pkt = RocePacket::new(Bth::new(opcode::RC_SEND_ONLY, r.qpn, 0x1234), vec![], vec![0xA5; len]);
        RoceFrame::ipv4(peer.dmac, MacAddr(OUR_MAC), peer_ip, dst, 0xC011, pkt).build().unwrap()
    };
    let mut cut = send(1000, OUR_IP.into());
    cut.truncate(400);
    recrc_at_rx_extent(&mut cut);
    let v = predict_rx(&cut, OUR_IP);
    assert!(v.truncated && v.before_fix == 0 && v.desync && v.reason == 4, "{v:?}");
    r.sys.borrow_mut().inject(cut);
    for _ in 0..40 {
        r.sys.borrow_mut().inject(send(0, std::net::Ipv4Addr::new(10, 9, 9, 9)));
    }
    assert!(r.sys.borrow_mut().run_until(1_000_000, |s| s.cycle - s.last_activity > 1000));
    let c: Vec<u32> = (0..9).map(|i| r.drv.bus().read32(REG_COUNTERS + 4 * i).unwrap()).collect();
    assert_eq!(c.iter().sum::<u32>(), 41, "every frame counted by RX Parse (good, drops by reason, overflow): {c:?}");
    assert_eq!((c[0], c[3], c[4]), (0, 40, 1), "the cut frame is a length error, the rest not for us: {c:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn fuzz(frames: u64, seed: u64) {
    let dir = std::env::temp_dir().join(format!("rnic-fuzz-{frames}-{seed}-{}", std::process::id()));
    let rep = run(&FuzzOpts::new(frames, seed, &dir), &mut |_| {}).expect("the fuzz rig sets up");
    eprintln!("{rep}");
    assert!(rep.ok(), "{:#?} (pcaps in {})", rep.problems, dir.display());
    assert_eq!(rep.frames, frames);
    // the run reached everything it is meant to reach
    let c = |n: &str| rep.counters.iter().find(|(k, _)| k == n).map(|x| x.1).unwrap();
    for k in [
        Kind::Request,
        Kind::WildRequest,
        Kind::Response,
        Kind::NoQp,
        Kind::WrongField,
        Kind::MutatedRecrc,
        Kind::Mutated,
        Kind::Arp,
        Kind::Raw,
        Kind::Flood,
    ] {
        assert!(rep.kinds.get(&k).is_some_and(|s| s.frames > 0), "no frame of kind {k:?}");
    }
    for n in [
        "rx_good_frames",
        "rx_drop_not_ip",
        "rx_drop_not_roce_udp",
        "rx_drop_not_for_us",
        "rx_drop_bad_length",
        "rx_drop_bad_opcode",
        "rx_drop_bad_tver",
        "rx_drop_bad_icrc",
        "arp_answered",
        "arp_ignored",
        "resp_requests",
        "resp_class_c_naks",
        "resp_drop_qp_lookup",
        "resp_drop_qp_error",
        "resp_acks",
        "resp_read_responses",
        "rx_drop_vlan",
    ] {
        assert!(c(n) > 0, "counter {n} never moved");
    }
    // every chunk checked exactly (a counter off by one in any chunk fails `rep.ok()` above, and this)
    assert_eq!(rep.exact_chunks, rep.chunks, "chunks whose counters all equal the reference's");
    assert_eq!(rep.chunks, frames.div_ceil(1000));
    // the RNIC backed RX Parse up to its room (flow control held frames back with the link idle), and the
    // overflow probe made it drop frames as overflow (each chunk checked that only the probe's did)
    assert!(rep.backed_up > 0, "RX Parse never backed up to its room: {} frames held", rep.held_frames);
    assert!(rep.probes > 0 && c("rx_drop_overflow") > 0, "the overflow probe never overflowed RX Parse ({} probes)", rep.probes);
    assert!(rep.cqes.keys().any(|k| k.contains("Success")), "no receive completed: {:?}", rep.cqes);
    assert!(rep.ud_receives > 0, "no UD datagram received: {:?}", rep.cqes);
    assert!(c("resp_drop_uc") > 0, "no UC or UD drop");
    let _ = std::fs::remove_dir_all(&dir);
}

// 50,000 frames in two runs of 25,000 with their own seeds, so that the two halves run on two cores.
#[test]
fn fuzz_25k_frames_into_the_rx_port_seed_a() {
    fuzz(25_000, 0x0F22);
}

#[test]
fn fuzz_25k_frames_into_the_rx_port_seed_b() {
    fuzz(25_000, 0x0F23);
}

#[test]
#[ignore = "about ten times the CI run; `rnic fuzz --frames 1000000` does the same with a progress bar"]
fn fuzz_1m_frames_into_the_rx_port() {
    fuzz(1_000_000, 0x1F22);
}
