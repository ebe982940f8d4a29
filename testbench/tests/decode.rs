//! Acceptance tests of the pcap decoder on the real rxe capture and on damaged copies of it.

use std::path::Path;

use testbench::decode::{decode_bytes, decode_pcap, DecodeError, Problem};
use testbench::wire::frame::ETH_MIN_FRAME_LEN;
use testbench::wire::{ArpFrame, MacAddr};

const CAPTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/rxe-examples.pcap");

fn capture_bytes() -> Vec<u8> {
    std::fs::read(CAPTURE).unwrap()
}

/// Byte offsets of each record's data in a classic little-endian pcap.
fn record_offsets(pcap: &[u8]) -> Vec<(usize, usize)> {
    let mut off = 24;
    let mut v = Vec::new();
    while off + 16 <= pcap.len() {
        let incl = u32::from_le_bytes(pcap[off + 8..off + 12].try_into().unwrap()) as usize;
        v.push((off + 16, incl));
        off += 16 + incl;
    }
    v
}

/// Append one Ethernet frame as a pcap record.
fn push_record(pcap: &mut Vec<u8>, frame: &[u8]) {
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    pcap.extend_from_slice(frame);
}

#[test]
fn real_capture_decodes_cleanly() {
    let r = decode_pcap(Path::new(CAPTURE)).unwrap();
    assert!(r.ok(), "{r}");
    assert_eq!((r.frames, r.roce_frames, r.lines.len()), (17, 17, 17));
    assert!(r.problems.is_empty());
    assert!(r.other_counts.is_empty());
    assert_eq!(r.opcode_counts.values().sum::<usize>(), 17);
    assert_eq!(r.opcode_counts["RC_SEND_FIRST"], 1);
    assert_eq!(r.opcode_counts["RC_ATOMIC_ACKNOWLEDGE"], 1);
    assert!(r.lines.iter().all(|l| l.ends_with("ICRC ok")), "{r}");

    let l4 = &r.lines[3];
    for want in [
        "10.0.0.1 -> 10.0.0.2",
        "udp 49441->4791",
        "RC_ACKNOWLEDGE",
        "qpn 0x000011",
        "psn 1984382",
        "ack 0",
        "AETH 0x1f ACK credit 31",
        "msn 1",
        "payload 0",
    ] {
        assert!(l4.contains(want), "{want:?} not in {l4:?}");
    }
    let l12 = &r.lines[11];
    for want in [
        "RC_FETCH_ADD",
        "va 0x55a0c335a000",
        "rkey 0x6e1",
        "add 0x1",
        "compare 0x0",
        "ack 1",
    ] {
        assert!(l12.contains(want), "{want:?} not in {l12:?}");
    }
    assert!(r.lines[12].contains("orig 0x70bb542282b2a7f8"), "{}", r.lines[12]);
    assert!(
        r.lines[4].contains("RETH va 0x55a7c527a000 rkey 0x4fd len 16384"),
        "{}",
        r.lines[4]
    );
    assert!(r.lines[0].contains("payload 1024"), "{}", r.lines[0]);

    let text = r.to_string();
    assert!(text.contains("17 frames, 17 RoCEv2, 0 other"), "{text}");
    assert!(text.contains("problems: none"));
    assert!(text.ends_with("result: OK"));
    // decode_bytes gives the same report.
    assert_eq!(decode_bytes(&capture_bytes()).unwrap(), r);
}

#[test]
fn one_flipped_payload_bit_is_reported_as_bad_icrc() {
    let mut pcap = capture_bytes();
    let (data, len) = record_offsets(&pcap)[14]; // frame 15, SEND_ONLY with 64 B payload
    assert_eq!(len, 122);
    pcap[data + 14 + 20 + 8 + 12 + 10] ^= 0x04;
    let r = decode_bytes(&pcap).unwrap();
    assert!(!r.ok());
    assert_eq!(r.roce_frames, 17);
    assert_eq!(r.problems.len(), 1);
    assert_eq!((r.problems[0].frame, r.problems[0].problem), (15, Problem::BadIcrc));
    assert!(r.lines[14].contains("ICRC BAD"), "{}", r.lines[14]);
    assert_eq!(r.lines.iter().filter(|l| l.contains("ICRC ok")).count(), 16);
    assert_eq!(r.problem_counts()[&Problem::BadIcrc], 1);
    assert!(r.to_string().ends_with("result: FAIL"));
}

#[test]
fn truncated_file_is_reported_without_panic() {
    let pcap = capture_bytes();
    let (data, _) = record_offsets(&pcap)[5];
    // Cut in the middle of frame 6's data, and in the middle of its record header.
    for cut in [data + 100, data - 7] {
        let r = decode_bytes(&pcap[..cut]).unwrap();
        assert!(!r.ok());
        assert_eq!(r.frames, 5);
        assert_eq!(r.problems.len(), 1);
        assert_eq!(
            (r.problems[0].frame, r.problems[0].problem),
            (6, Problem::TruncatedFile)
        );
        assert!(r.to_string().contains("truncated pcap file"));
    }
    // Every possible cut: never a panic; a cut inside the global header is an error.
    for cut in 0..pcap.len() {
        match decode_bytes(&pcap[..cut]) {
            Ok(r) => assert!(
                cut >= 24 && (r.ok() == (record_offsets(&pcap).iter().any(|&(d, l)| d + l == cut) || cut == 24))
            ),
            Err(e) => assert!(cut < 24, "cut {cut}: {e}"),
        }
    }
}

#[test]
fn non_pcap_inputs_are_clear_errors() {
    let e = decode_bytes(b"this is not a capture at all, just text").unwrap_err();
    assert!(matches!(e, DecodeError::NotPcap(_)));
    assert!(e.to_string().starts_with("not a pcap file: bad magic number"), "{e}");
    assert!(matches!(decode_bytes(&[]), Err(DecodeError::NotPcap(_))));
    assert!(decode_bytes(&[0x0A, 0x0D, 0x0D, 0x0A, 0, 0, 0, 0])
        .unwrap_err()
        .to_string()
        .contains("pcapng"));
    let e = decode_pcap(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))).unwrap_err();
    assert!(matches!(e, DecodeError::NotPcap(_)), "{e}");
    let e = decode_pcap(Path::new("/nonexistent/file.pcap")).unwrap_err();
    assert!(matches!(e, DecodeError::Io { .. }) && e.to_string().contains("/nonexistent/file.pcap"));
    // A pcap with another link type.
    let mut other = capture_bytes()[..24].to_vec();
    other[20] = 113; // LINKTYPE_LINUX_SLL
    assert!(matches!(
        decode_bytes(&other),
        Err(DecodeError::UnsupportedLinkType(113))
    ));
}

#[test]
fn mixed_capture_with_arp_other_malformed_and_snaplen_truncated_frames() {
    let real = capture_bytes();
    let recs = record_offsets(&real);
    let frame = |i: usize| real[recs[i].0..recs[i].0 + recs[i].1].to_vec();
    let mut pcap = real[..24].to_vec();
    let req = ArpFrame::request(MacAddr([2, 0, 0, 0, 0, 1]), [10, 0, 0, 1].into(), [10, 0, 0, 2].into());
    push_record(&mut pcap, &req.build());
    push_record(&mut pcap, &req.reply_from(MacAddr([2, 0, 0, 0, 0, 2])).build());
    push_record(&mut pcap, &frame(3)); // ACK
    let mut lldp = vec![0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 1, 0x88, 0xcc];
    lldp.resize(ETH_MIN_FRAME_LEN, 0);
    push_record(&mut pcap, &lldp);
    let mut bad_opcode = frame(14);
    bad_opcode[14 + 20 + 8] = 0x15; // reserved RC opcode
    push_record(&mut pcap, &bad_opcode);
    push_record(&mut pcap, &frame(0)[..200]); // cut short
                                              // A snaplen-truncated record: incl_len 100, orig_len 1082.
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&100u32.to_le_bytes());
    pcap.extend_from_slice(&1082u32.to_le_bytes());
    pcap.extend_from_slice(&frame(1)[..100]);

    let r = decode_bytes(&pcap).unwrap();
    assert_eq!(r.frames, 7, "{r}");
    assert_eq!(r.roce_frames, 1);
    assert!(
        r.lines[0].contains("ARP who-has 10.0.0.2 tell 10.0.0.1"),
        "{}",
        r.lines[0]
    );
    assert!(
        r.lines[1].contains("ARP 10.0.0.2 is-at 02:00:00:00:00:02"),
        "{}",
        r.lines[1]
    );
    assert!(r.lines[3].contains("ethertype 0x88cc"), "{}", r.lines[3]);
    assert!(
        r.lines[4].contains("MALFORMED") && r.lines[4].contains("0x15"),
        "{}",
        r.lines[4]
    );
    assert!(
        r.lines[5].contains("TRUNCATED") && r.lines[5].contains("10.0.0.2 -> 10.0.0.1"),
        "{}",
        r.lines[5]
    );
    assert!(r.lines[6].contains("captured 100 of 1082 bytes"), "{}", r.lines[6]);
    assert_eq!(r.other_counts["ARP who-has"], 1);
    assert_eq!(r.other_counts["ARP is-at"], 1);
    let counts = r.problem_counts();
    assert_eq!((counts[&Problem::Malformed], counts[&Problem::Truncated]), (1, 2));
    assert!(!r.ok());
}

#[test]
#[ignore = "prints the decode of the real capture; run with --ignored --nocapture"]
fn print_real_capture() {
    println!("{}", decode_pcap(Path::new(CAPTURE)).unwrap());
}
