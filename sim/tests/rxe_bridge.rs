//! The bridge and host stack without qemu: this test plays qemu on the unix socket (4-byte BE length + frame).

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use sim::rxe::{self, Bridge, BridgeConfig, Endpoint, HostConfig, HostStack};
use testbench::wire::frame::{
    internet_checksum, parse_ethernet, ArpFrame, Frame, MacAddr, ARP_OP_REPLY,
};

const VM_MAC: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
const VM_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn send(s: &mut UnixStream, f: &[u8]) {
    let mut b = (f.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(f);
    s.write_all(&b).unwrap();
}

fn recv(s: &mut UnixStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut f = vec![0; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut f).unwrap();
    f
}

fn connect(path: &std::path::Path) -> UnixStream {
    let s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn icmp_echo_request(seq: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&HostConfig::default().mac.0);
    f.extend_from_slice(&VM_MAC.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let payload = b"0123456789abcdef";
    let mut ip = vec![
        0x45,
        0,
        0,
        (20 + 8 + payload.len()) as u8,
        0x12,
        0x34,
        0x40,
        0,
        64,
        1,
        0,
        0,
    ];
    ip.extend_from_slice(&VM_IP.octets());
    ip.extend_from_slice(&OUR_IP.octets());
    let c = internet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut icmp = vec![8, 0, 0, 0, 0xbe, 0xef];
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(payload);
    let c = internet_checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    f
}

/// Inner RoCE endpoint for the test: sends every frame back unchanged.
struct Mirror(u64);
impl Endpoint for Mirror {
    fn on_frame(&mut self, frame: &[u8], _now_ns: u64) -> Vec<Vec<u8>> {
        self.0 += 1;
        vec![frame.to_vec()]
    }
    fn poll(&mut self, _now_ns: u64) -> Vec<Vec<u8>> {
        Vec::new()
    }
}

fn roce_like_frame() -> Vec<u8> {
    // Ethernet/IPv4/UDP to 4791 with a 12-byte "BTH" and 4-byte "ICRC": only the classifier looks at it.
    let mut f = Vec::new();
    f.extend_from_slice(&HostConfig::default().mac.0);
    f.extend_from_slice(&VM_MAC.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let udp_len = 8 + 12 + 4;
    let mut ip = vec![
        0x45,
        0,
        0,
        (20 + udp_len) as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ];
    ip.extend_from_slice(&VM_IP.octets());
    ip.extend_from_slice(&OUR_IP.octets());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0xC0, 0x01, 0x12, 0xB7, 0, udp_len as u8, 0, 0]);
    f.extend_from_slice(&[0u8; 16]);
    f
}

#[test]
fn rxe_bridge_arp_icmp_roce_and_pcap() {
    let dir = rxe::run_dir("rxe_bridge_arp_icmp_roce_and_pcap");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("link.pcap");
    let sock = rxe::temp_socket_path("bridge-test");
    let host = HostStack::new(HostConfig::default()).with_roce(Mirror(0));
    let cfg = BridgeConfig {
        pcap: Some(pcap.clone()),
        accept_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let bridge = Bridge::listen(&sock, cfg).unwrap().spawn(host);
    let mut q = connect(&sock);

    // ARP
    send(&mut q, &ArpFrame::request(VM_MAC, VM_IP, OUR_IP).build());
    let r = recv(&mut q);
    let Ok(Frame::Arp(a)) = parse_ethernet(&r) else {
        panic!("not ARP: {r:02x?}")
    };
    assert_eq!(a.arp.oper, ARP_OP_REPLY);
    assert_eq!((a.arp.sha, a.arp.spa), (HostConfig::default().mac, OUR_IP));
    assert_eq!((a.eth.dst, a.arp.tha, a.arp.tpa), (VM_MAC, VM_MAC, VM_IP));
    // ARP for somebody else: no answer (checked below by the frame count)
    send(
        &mut q,
        &ArpFrame::request(VM_MAC, VM_IP, Ipv4Addr::new(10, 0, 0, 3)).build(),
    );

    // ICMP echo
    let req = icmp_echo_request(7);
    send(&mut q, &req);
    let r = recv(&mut q);
    assert_eq!(&r[0..6], &VM_MAC.0);
    assert_eq!(&r[26..30], &OUR_IP.octets());
    assert_eq!(&r[30..34], &VM_IP.octets());
    assert_eq!(internet_checksum(&r[14..34]), 0, "IP checksum");
    assert_eq!(r[34], 0, "echo reply");
    assert_eq!(internet_checksum(&r[34..34 + 8 + 16]), 0, "ICMP checksum");
    assert_eq!(r.len(), 60, "padded to the Ethernet minimum");
    assert_eq!(&r[38..req.len()], &req[38..], "id, seq and payload echoed");

    // RoCE goes to the inner endpoint
    let roce = roce_like_frame();
    assert!(rxe::is_roce_v2(&roce));
    send(&mut q, &roce);
    assert_eq!(recv(&mut q), roce);

    drop(q); // "qemu" exits: the bridge ends by itself
    let report = bridge.join_within(Duration::from_secs(5));
    assert!(report.error.is_none(), "{:?}", report.error);
    let s = report.stats;
    assert_eq!((s.from_vm, s.to_vm), (4, 3), "{s:?}");
    let st = report.endpoint.stats();
    assert_eq!(
        (
            st.arp_replies_sent,
            st.icmp_echo_replies_sent,
            st.roce_to_inner
        ),
        (1, 1, 1)
    );
    assert_eq!(report.endpoint.inner().0, 1);

    let mut rd = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
    assert_eq!(rd.header().datalink, pcap_file::DataLink::ETHERNET);
    let mut n = 0;
    while let Some(p) = rd.next_packet() {
        p.unwrap();
        n += 1;
    }
    assert_eq!(n, 7);
    let _ = std::fs::remove_file(&sock);
}

#[test]
fn rxe_bridge_drops_are_seeded_counted_and_roce_only() {
    // 40 RoCEv2 frames interleaved with 40 ARP requests: only the RoCE frames are subject to the drop
    // fault (ARP and the tools' TCP stand for the management network), so every ARP request is answered.
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut rng = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let roce: Vec<Vec<u8>> = testbench::wire::samples::rc_frames(&mut rng, &[64; 40])
        .iter()
        .map(|f| f.build().unwrap())
        .collect();
    assert!(roce.iter().all(|f| rxe::is_roce_v2(f)));
    assert!(!rxe::is_roce_v2(&ArpFrame::request(VM_MAC, VM_IP, OUR_IP).build()));
    assert!(!rxe::is_roce_v2(&icmp_echo_request(1)));
    let run = |seed: u64, ended: bool| {
        let sock = rxe::temp_socket_path("bridge-drop");
        let cfg = BridgeConfig {
            drop_from_vm: 0.5,
            seed,
            drops_end: Some(std::sync::Arc::new(std::sync::atomic::AtomicBool::new(ended))),
            accept_timeout: Duration::from_secs(5),
            ..Default::default()
        };
        let bridge = Bridge::listen(&sock, cfg)
            .unwrap()
            .spawn(HostStack::new(HostConfig::default()));
        let mut q = connect(&sock);
        for f in &roce {
            send(&mut q, &ArpFrame::request(VM_MAC, VM_IP, OUR_IP).build());
            send(&mut q, f);
        }
        let mut replies = 0;
        q.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut len = [0u8; 4];
        while q.read_exact(&mut len).is_ok() {
            let mut f = vec![0; u32::from_be_bytes(len) as usize];
            q.read_exact(&mut f).unwrap();
            replies += 1;
        }
        drop(q);
        let r = bridge.join_within(Duration::from_secs(5));
        assert!(r.error.is_none());
        assert_eq!(r.stats.from_vm + r.stats.dropped_from_vm, 80);
        assert_eq!(replies, 40, "every ARP request answered: ARP is never dropped");
        assert_eq!(r.stats.to_vm, replies);
        r.stats
    };
    let a = run(42, false);
    assert!(a.dropped_from_vm > 5 && a.dropped_from_vm < 35, "{a:?}");
    assert_eq!(run(42, false), a, "same seed, same drops");
    // once `drops_end` is set (ibv_rc_pingpong's last message posted) nothing more is dropped
    assert_eq!(run(42, true).dropped_from_vm, 0);
}

#[test]
fn rxe_bridge_accept_timeout_is_an_error_not_a_hang() {
    let sock = rxe::temp_socket_path("bridge-noconn");
    let cfg = BridgeConfig {
        accept_timeout: Duration::from_millis(200),
        ..Default::default()
    };
    let r = Bridge::listen(&sock, cfg)
        .unwrap()
        .spawn(rxe::NullEndpoint)
        .join();
    assert!(r.error.is_some());
    let _ = std::fs::remove_file(&sock);
}
