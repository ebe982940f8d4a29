//! Acceptance tests of the wire model against real rxe frames (testbench/data/rxe-examples.pcap, decoded
//! by `rnic decode`) and the ICRC reference frames of `docs/rxe-rules.md` section 1.

use std::net::{Ipv4Addr, Ipv6Addr};

use pcap_file::pcap::PcapReader;
use testbench::wire::frame::{ETH_MIN_FRAME_LEN, IPV4_FLAG_DF, ROCE_V2_UDP_DPORT};
use testbench::wire::headers::{AETH_ACK_UNLIMITED, AETH_NAK_PSN_SEQ_ERROR, DEFAULT_PKEY};
use testbench::wire::opcode::{self, Opcode};
use testbench::wire::*;

fn capture() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/rxe-examples.pcap");
    let file = std::fs::File::open(path).expect("open rxe-examples.pcap");
    let mut reader = PcapReader::new(file).expect("pcap header");
    let mut frames = Vec::new();
    while let Some(pkt) = reader.next_packet() {
        frames.push(pkt.expect("pcap record").data.into_owned());
    }
    frames
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn mac(last: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, last])
}

/// README table: (opcode, dest QP, PSN, AckReq, UDP sport, ICRC wire bytes).
const TABLE: [(u8, u32, u32, bool, u16, [u8; 4]); 17] = [
    (0x00, 0x11, 1984379, false, 0xC121, [0x98, 0xee, 0xce, 0x49]),
    (0x01, 0x11, 1984380, false, 0xC121, [0x8f, 0x4f, 0xb4, 0xd9]),
    (0x02, 0x11, 1984382, true, 0xC121, [0x42, 0xf0, 0xf9, 0x22]),
    (0x11, 0x11, 1984382, false, 0xC121, [0x33, 0xd8, 0x58, 0xc9]),
    (0x06, 0x13, 1436900, false, 0xC169, [0x0d, 0x01, 0xca, 0x08]),
    (0x07, 0x13, 1436901, false, 0xC169, [0x82, 0x77, 0x2b, 0x82]),
    (0x08, 0x13, 1436915, true, 0xC169, [0xc2, 0xbd, 0x16, 0xc4]),
    (0x0C, 0x14, 5025839, true, 0xC190, [0x39, 0xe6, 0x73, 0xbe]),
    (0x0D, 0x14, 5025839, false, 0xC190, [0x39, 0xa2, 0x10, 0xc3]),
    (0x0E, 0x14, 5025840, false, 0xC190, [0x3c, 0xdb, 0x3e, 0xbb]),
    (0x0F, 0x14, 5025854, false, 0xC190, [0xfb, 0x4f, 0x5c, 0x67]),
    (0x14, 0x15, 10863063, true, 0xC1B9, [0x07, 0xa8, 0xca, 0x70]),
    (0x12, 0x15, 10863063, false, 0xC1B9, [0xe0, 0x5c, 0x24, 0xac]),
    (0x13, 0x16, 4438154, true, 0xC1E4, [0x8e, 0xa7, 0x22, 0xf8]),
    (0x04, 0x17, 11257470, true, 0xC211, [0xa1, 0x4a, 0xbb, 0xe1]),
    (0x0A, 0x18, 1834388, true, 0xC240, [0x50, 0x6a, 0x97, 0x36]),
    (0x10, 0x19, 8953547, false, 0xC271, [0x7c, 0x9a, 0x5f, 0xbc]),
];

const FRAME_LENS: [usize; 17] = [
    1082, 1082, 1082, 62, 1098, 1082, 1082, 74, 1086, 1082, 1086, 86, 70, 86, 122, 138, 126,
];

#[test]
fn every_capture_frame_parses_verifies_and_rebuilds_byte_for_byte() {
    let frames = capture();
    assert_eq!(frames.len(), 17);
    for (i, bytes) in frames.iter().enumerate() {
        let n = i + 1;
        assert_eq!(bytes.len(), FRAME_LENS[i], "frame {n} length");
        let f = RoceFrame::parse(bytes).unwrap_or_else(|e| panic!("frame {n}: {e}"));
        assert!(f.icrc_ok(), "frame {n}: ICRC");
        assert_eq!(f.verify_icrc(), Ok(()));
        assert_eq!(f.icrc_override, None);
        assert_eq!(f.eth_trailer, None, "frame {n}: no Ethernet padding in the capture");
        assert_eq!(f.build().unwrap(), *bytes, "frame {n}: rebuild");
        // The classifier agrees.
        assert_eq!(parse_ethernet(bytes).unwrap(), Frame::Roce(f.clone()));

        // README table.
        let (op, qpn, psn, ack, sport, icrc_bytes) = TABLE[i];
        let b = &f.packet.bth;
        assert_eq!(
            (b.opcode, b.dest_qpn, b.psn, b.ack_req),
            (op, qpn, psn, ack),
            "frame {n}"
        );
        assert_eq!(
            f.udp,
            UdpHeader {
                sport,
                dport: ROCE_V2_UDP_DPORT,
                checksum: 0
            },
            "frame {n}"
        );
        assert_eq!(bytes[bytes.len() - 4..], icrc_bytes, "frame {n}: ICRC wire bytes");
        assert_eq!(f.wire_icrc().unwrap(), u32::from_le_bytes(icrc_bytes));
        // Common to all 17 frames.
        assert!(!b.se && !b.mig_req && !b.fecn && !b.becn);
        assert_eq!(
            (b.pad_cnt, b.tver, b.pkey, b.resv6, b.resv7),
            (0, 0, DEFAULT_PKEY, 0, 0)
        );
        let IpHeader::V4(ip) = f.ip else {
            panic!("frame {n}: IPv4 expected")
        };
        assert_eq!(
            (ip.tos, ip.flags, ip.frag_offset, ip.ttl),
            (0, IPV4_FLAG_DF, 0, 64),
            "frame {n}"
        );
        let (a, bb) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        assert!((ip.src, ip.dst) == (a, bb) || (ip.src, ip.dst) == (bb, a));
        let info = opcode::info(op).unwrap();
        assert_eq!(f.packet.ext.len(), info.headers.len());
        let hdr = 14 + 20 + 8 + info.header_len() + 4;
        assert_eq!(f.packet.payload.len(), bytes.len() - hdr, "frame {n}: payload length");
    }
}

#[test]
fn capture_field_values_match_readme() {
    let frames = capture();
    let p = |n: usize| RoceFrame::parse(&frames[n - 1]).unwrap();

    // Frame 4: ACK PSN 1984382, syndrome 0x1F, MSN 1.
    let f4 = p(4);
    assert_eq!(f4.packet.opcode(), Some(Opcode::RcAcknowledge));
    assert_eq!(f4.packet.bth.psn, 1984382);
    assert_eq!(*f4.packet.aeth().unwrap(), Aeth { syndrome: 0x1F, msn: 1 });
    assert_eq!(f4.packet.aeth().unwrap().kind(), AethKind::Ack { credit: 31 });
    assert_eq!(f4.eth.src, MacAddr([0x52, 0x54, 0, 0, 0, 0x0a]));
    assert_eq!(f4.eth.dst, MacAddr([0x52, 0x54, 0, 0, 0, 0x0b]));

    // Frames 5, 8, 16: RETH.
    assert_eq!(
        *p(5).packet.reth().unwrap(),
        Reth {
            va: 0x55a7c527a000,
            rkey: 0x4fd,
            dma_len: 16384
        }
    );
    assert_eq!(
        *p(8).packet.reth().unwrap(),
        Reth {
            va: 0x55fe23e60000,
            rkey: 0x51a,
            dma_len: 16384
        }
    );
    assert_eq!(
        *p(16).packet.reth().unwrap(),
        Reth {
            va: 0x55d40d6c6000,
            rkey: 0x9e8,
            dma_len: 64
        }
    );
    assert_eq!(p(16).packet.payload.len(), 64);

    // Frame 12: FETCH_ADD va 0x55a0c335a000 rkey 0x6e1 add 1 cmp 0.
    let f12 = p(12);
    assert_eq!(f12.packet.opcode(), Some(Opcode::RcFetchAdd));
    assert_eq!(
        *f12.packet.atomic_eth().unwrap(),
        AtomicEth {
            va: 0x55a0c335a000,
            rkey: 0x6e1,
            swap_add: 1,
            compare: 0
        }
    );
    // Frame 13: ATOMIC_ACKNOWLEDGE, AETH 0x1F MSN 1, orig 0x70bb542282b2a7f8.
    let f13 = p(13);
    assert_eq!(*f13.packet.aeth().unwrap(), Aeth { syndrome: 0x1F, msn: 1 });
    assert_eq!(f13.packet.atomic_ack_eth().unwrap().orig, 0x70bb542282b2a7f8);
    // Frame 14: COMPARE_SWAP va 0x563cfe5e0000 rkey 0x780 swap 0 cmp 0.
    assert_eq!(
        *p(14).packet.atomic_eth().unwrap(),
        AtomicEth {
            va: 0x563cfe5e0000,
            rkey: 0x780,
            swap_add: 0,
            compare: 0
        }
    );
    // Read responses 9, 11, 17 carry AETH 0x1F / MSN 1; 10 carries none.
    for n in [9, 11, 17] {
        assert_eq!(
            *p(n).packet.aeth().unwrap(),
            Aeth { syndrome: 0x1F, msn: 1 },
            "frame {n}"
        );
    }
    assert!(p(10).packet.ext.is_empty());
    // ibv_rc_pingpong payload is 0x7B bytes, 1024 per packet.
    assert_eq!(p(1).packet.payload, vec![0x7B; 1024]);
}

fn golden_send_only() -> RocePacket {
    let mut bth = Bth::new(opcode::RC_SEND_ONLY, 0x11, 0x123456);
    bth.ack_req = true;
    RocePacket::new(bth, vec![], b"hello rxe!!!".to_vec())
}

#[test]
fn golden_vector_ipv4_send_only() {
    let mut f = RoceFrame::ipv4(
        mac(1),
        mac(2),
        Ipv4Addr::new(192, 168, 1, 1),
        Ipv4Addr::new(192, 168, 1, 2),
        0xC123,
        golden_send_only(),
    );
    let IpHeader::V4(ip) = &mut f.ip else { unreachable!() };
    ip.id = 0x1234;
    let want = hex("020000000002020000000001080045000038123440004011a52dc0a80101c0a80102c12312b7002400000400ffff000000118012345668656c6c6f20727865212121248d44bb");
    let got = f.build().unwrap();
    assert_eq!(got, want);
    assert_eq!(got[got.len() - 4..], [0x24, 0x8d, 0x44, 0xbb]);
    assert_eq!(RoceFrame::parse(&want).unwrap(), f);
}

#[test]
fn golden_vector_ipv6_send_only() {
    let f = RoceFrame::ipv6(
        mac(2),
        mac(1),
        "fe80::2".parse::<Ipv6Addr>().unwrap(),
        "fe80::1".parse::<Ipv6Addr>().unwrap(),
        0xC123,
        golden_send_only(),
    );
    let want = hex("02000000000102000000000286dd6000000000241140fe800000000000000000000000000002fe800000000000000000000000000001c12312b7002400000400ffff000000118012345668656c6c6f20727865212121602759c6");
    let got = f.build().unwrap();
    assert_eq!(got, want);
    assert_eq!(got[got.len() - 4..], [0x60, 0x27, 0x59, 0xc6]);
    assert_eq!(RoceFrame::parse(&want).unwrap(), f);
}

fn golden_ack(syndrome: u8) -> RoceFrame {
    let bth = Bth::new(opcode::RC_ACKNOWLEDGE, 0x22, 0x123456);
    let packet = RocePacket::new(bth, vec![ExtHeader::Aeth(Aeth { syndrome, msn: 1 })], vec![]);
    RoceFrame::ipv4(
        mac(2),
        mac(1),
        Ipv4Addr::new(192, 168, 1, 2),
        Ipv4Addr::new(192, 168, 1, 1),
        0xC123,
        packet,
    )
}

#[test]
fn golden_vector_ack_and_nak() {
    let want = hex("020000000001020000000002080045000030000040004011b769c0a80102c0a80101c12312b7001c00001100ffff00000022001234561f0000010c1f4232");
    let ack = golden_ack(AETH_ACK_UNLIMITED);
    let got = ack.build().unwrap();
    assert_eq!(got.len(), 62);
    assert_eq!(got, want);
    assert_eq!(RoceFrame::parse(&want).unwrap(), ack);

    let nak = golden_ack(AETH_NAK_PSN_SEQ_ERROR).build().unwrap();
    assert_eq!(nak[nak.len() - 4..], [0xc6, 0xaf, 0x1e, 0x01]);
    let parsed = RoceFrame::parse(&nak).unwrap();
    assert_eq!(
        parsed.packet.aeth().unwrap().kind(),
        AethKind::Nak(NakCode::PsnSequenceError)
    );
    assert!(parsed.icrc_ok());
}

#[test]
fn short_frames_are_padded_to_60_and_padding_is_outside_the_icrc() {
    // Zero-length SEND_ONLY over IPv4: 58 bytes before padding (`docs/rxe-rules.md` section 1).
    let bth = Bth::new(opcode::RC_SEND_ONLY, 0x11, 7);
    let f = RoceFrame::ipv4(
        mac(1),
        mac(2),
        [10, 0, 0, 1].into(),
        [10, 0, 0, 2].into(),
        0xC000,
        RocePacket::new(bth, vec![], vec![]),
    );
    let bytes = f.build().unwrap();
    assert_eq!(bytes.len(), ETH_MIN_FRAME_LEN);
    assert_eq!(bytes[58..], [0, 0]);
    // The ICRC sits right after the UDP length, before the padding.
    let crc = icrc(&bytes[14..54]);
    assert_eq!(bytes[54..58], crc.to_le_bytes());
    let parsed = RoceFrame::parse(&bytes).unwrap();
    assert_eq!(parsed, f);
    assert!(parsed.icrc_ok());

    // Non-default trailers (non-zero padding, an FCS) are kept and reproduced, and ignored by the ICRC.
    let mut odd = bytes.clone();
    odd[58] = 0xAA;
    odd.extend_from_slice(&[1, 2, 3, 4]);
    let p = RoceFrame::parse(&odd).unwrap();
    assert!(p.icrc_ok());
    assert_eq!(p.eth_trailer.as_deref(), Some(&[0xAA, 0, 1, 2, 3, 4][..]));
    assert_eq!(p.build().unwrap(), odd);
}

#[test]
fn bad_icrc_is_reported_and_reproduced() {
    let mut bytes = golden_ack(AETH_ACK_UNLIMITED).build().unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0x01;
    let f = RoceFrame::parse(&bytes).unwrap();
    assert!(!f.icrc_ok());
    assert!(matches!(f.verify_icrc(), Err(WireError::BadIcrc { .. })));
    assert_eq!(f.build().unwrap(), bytes, "a bad frame rebuilds exactly");
}

#[test]
fn arp_request_and_reply_round_trip() {
    let req = ArpFrame::request(mac(1), Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let bytes = req.build();
    assert_eq!(bytes.len(), 60);
    assert_eq!(bytes[..6], [0xFF; 6]);
    assert_eq!(bytes[12..14], [0x08, 0x06]);
    assert_eq!(bytes[14..22], [0, 1, 8, 0, 6, 4, 0, 1]);
    assert_eq!(parse_ethernet(&bytes).unwrap(), Frame::Arp(req.clone()));
    let rep = req.reply_from(mac(2));
    assert_eq!(rep.arp.oper, testbench::wire::frame::ARP_OP_REPLY);
    assert_eq!(
        (rep.arp.spa, rep.arp.tpa, rep.arp.tha),
        (req.arp.tpa, req.arp.spa, mac(1))
    );
    assert_eq!(rep.eth.dst, mac(1));
    let rb = rep.build();
    assert_eq!(ArpFrame::parse(&rb).unwrap(), rep);
    // Truncated ARP: typed error.
    assert!(matches!(parse_ethernet(&bytes[..30]), Err(WireError::Truncated { .. })));
}

#[test]
fn classifier_reports_other_frames() {
    // A TCP/IPv4 frame to port 22.
    let mut b = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    b.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    b.extend_from_slice(&[0x12, 0x34, 0, 22]);
    b.resize(60, 0);
    match parse_ethernet(&b).unwrap() {
        Frame::Other(o) => {
            let ip = o.ip.unwrap();
            assert_eq!((ip.protocol, ip.ports), (6, Some((0x1234, 22))));
            assert_eq!(o.bytes, b);
        }
        f => panic!("{f:?}"),
    }
    // A non-RoCE UDP port stays Other; the same frame to 4791 is malformed RoCE.
    b[23] = 17;
    assert!(matches!(parse_ethernet(&b).unwrap(), Frame::Other(_)));
    b[36] = 0x12;
    b[37] = 0xB7;
    assert!(parse_ethernet(&b).is_err());
    // Unknown ethertype.
    b[12] = 0x88;
    b[13] = 0xCC;
    assert!(matches!(
        parse_ethernet(&b).unwrap(),
        Frame::Other(OtherFrame {
            ethertype: 0x88CC,
            ip: None,
            ..
        })
    ));
}
