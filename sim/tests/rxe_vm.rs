//! Boots the soft-RoCE peer VM (qemu, TCG) against our host stack.
//!
//! Skips (prints why and passes) only when qemu cannot run on this host at all and `RNIC_REQUIRE_VM` is unset.
//! Logs, scripts and pcaps stay in `sim/vm/work/run/<test>/`.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sim::rxe::{self, BridgeConfig, HostConfig, HostStack, Session, VmConfig, VmImage};
use testbench::wire::frame::{parse_ethernet, Frame, MacAddr, ARP_OP_REPLY, ARP_OP_REQUEST};

/// One image build at a time within this test binary (build-vm.sh also takes a file lock).
static BUILD: Mutex<()> = Mutex::new(());

fn image_or_skip(test: &str) -> Option<VmImage> {
    let _g = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    match rxe::vm_available() {
        Ok(Some(img)) => Some(img),
        Ok(None) => {
            eprintln!("SKIP {test}: qemu-system-x86_64 is not available and could not be installed (set RNIC_REQUIRE_VM=1 to fail instead)");
            None
        }
        Err(e) => panic!("{test}: the VM cannot be built: {e:#}"),
    }
}

fn vm_config(test: &str, img: VmImage, script: &str) -> VmConfig {
    let dir = rxe::run_dir(test);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg = VmConfig::new("vm", img, rxe::temp_socket_path(test), dir);
    cfg.script = Some(script.to_string());
    cfg.timeout = Duration::from_secs(50);
    cfg
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    assert_eq!(r.header().datalink, pcap_file::DataLink::ETHERNET);
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.unwrap().data.into_owned());
    }
    out
}

fn is_icmp_echo(f: &[u8], ty: u8, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
    f.len() >= 34 + 8
        && f[12..14] == [0x08, 0x00]
        && f[23] == 1
        && f[26..30] == src.octets()
        && f[30..34] == dst.octets()
        && f[14 + usize::from(f[14] & 0xF) * 4] == ty
}

#[test]
fn rxe_vm_ping_and_devinfo() {
    let test = "rxe_vm_ping_and_devinfo";
    let Some(img) = image_or_skip(test) else {
        return;
    };
    let t0 = Instant::now();
    let script = include_str!("../vm/scripts/smoke.sh");
    let cfg = vm_config(test, img, script);
    let pcap = cfg.run_dir.join("link.pcap");
    let host = HostStack::new(HostConfig::default());
    let bcfg = BridgeConfig {
        pcap: Some(pcap.clone()),
        ..Default::default()
    };
    let (out, report) = Session::start(&cfg, bcfg, host).unwrap().finish().unwrap();
    eprintln!(
        "{test}: VM wall {:.2} s, rxe0 ACTIVE at guest uptime {:?} s, test total {:.2} s",
        out.wall.as_secs_f64(),
        out.ready_uptime_s,
        t0.elapsed().as_secs_f64()
    );
    assert!(report.error.is_none(), "bridge error: {:?}", report.error);
    assert!(
        out.ok(),
        "script failed (rc {:?}); log {}:\n{}",
        out.script_rc,
        out.log_path.display(),
        out.tail(40)
    );
    assert!(
        out.log
            .contains("3 packets transmitted, 3 packets received"),
        "{}",
        out.tail(40)
    );
    assert!(
        out.log.contains("hca_id:\trxe0"),
        "ibv_devinfo output missing"
    );
    assert!(out.log.contains("PORT_ACTIVE"), "rxe0 port not active");
    assert!(
        out.log.contains("hw_counter sent_pkts "),
        "hw_counters missing"
    );
    assert!(has_v4_mapped_gid(&out.log, "0a00:0001"), "GID table missing the RoCE v2 GID of 10.0.0.1");

    let st = report.endpoint.stats().clone();
    eprintln!("{test}: bridge {:?}\n{test}: host {:?}", report.stats, st);
    assert!(st.arp_replies_sent >= 1);
    assert!(st.icmp_echo_replies_sent >= 3);
    let vm_mac = MacAddr([0x52, 0x54, 0, 0, 0, 0x01]);
    assert_eq!(st.neighbors.get(&Ipv4Addr::new(10, 0, 0, 1)), Some(&vm_mac));

    // The pcap holds exactly the frames that crossed, both directions.
    let frames = read_pcap(&pcap);
    assert_eq!(
        frames.len() as u64,
        report.stats.from_vm + report.stats.to_vm
    );
    let (vm_ip, our_ip) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let arp = |oper| {
        frames
            .iter()
            .filter(|f| matches!(parse_ethernet(f), Ok(Frame::Arp(a)) if a.arp.oper == oper))
            .count()
    };
    assert!(arp(ARP_OP_REQUEST) >= 1, "no ARP request in the pcap");
    assert!(arp(ARP_OP_REPLY) >= 1, "no ARP reply in the pcap");
    let req = frames
        .iter()
        .filter(|f| is_icmp_echo(f, 8, vm_ip, our_ip))
        .count();
    let rep = frames
        .iter()
        .filter(|f| is_icmp_echo(f, 0, our_ip, vm_ip))
        .count();
    assert!(req >= 3 && rep >= 3, "echo requests {req}, replies {rep}");
}

#[test]
fn rxe_vm_management_tcp() {
    let test = "rxe_vm_management_tcp";
    let Some(img) = image_or_skip(test) else {
        return;
    };
    let t0 = Instant::now();
    // Phase 1: a listener in the VM; we connect (like perftest's server in the VM, client here).
    // Phase 2: the VM connects to us (like perftest's client in the VM, server here).
    let script = include_str!("../vm/scripts/mgmt-echo.sh");
    let cfg = vm_config(test, img, script);
    let pcap = cfg.run_dir.join("link.pcap");
    let host = HostStack::new(HostConfig::default());
    let mgmt = host.mgmt();
    let listener = mgmt.listen(18516).unwrap();
    let bcfg = BridgeConfig {
        pcap: Some(pcap.clone()),
        ..Default::default()
    };
    let session = Session::start(&cfg, bcfg, host).unwrap();

    let vm_ip = Ipv4Addr::new(10, 0, 0, 1);
    let conn = mgmt.connect(vm_ip, 18515, Duration::from_secs(40)).unwrap();
    let t_conn = t0.elapsed();
    conn.send_all(b"ping-from-host\n", Duration::from_secs(5))
        .unwrap();
    conn.close();
    let got = conn.recv_to_end(Duration::from_secs(10)).unwrap();
    assert_eq!(got, b"pong-from-vm\n");
    drop(conn);

    let c2 = listener.accept(Duration::from_secs(20)).unwrap();
    assert_eq!(c2.remote().map(|r| r.0), Some(vm_ip));
    let got = c2
        .recv_exact(b"hello-from-vm\n".len(), Duration::from_secs(10))
        .unwrap();
    assert_eq!(got, b"hello-from-vm\n");
    c2.send_all(b"hello-from-host\n", Duration::from_secs(5))
        .unwrap();
    c2.close();
    c2.flush(Duration::from_secs(5)).unwrap();
    drop(c2);

    let (out, report) = session.finish().unwrap();
    eprintln!(
        "{test}: connected after {:.2} s, VM wall {:.2} s, test total {:.2} s",
        t_conn.as_secs_f64(),
        out.wall.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    assert!(report.error.is_none(), "bridge error: {:?}", report.error);
    assert!(
        out.ok(),
        "script failed (rc {:?}); log {}:\n{}",
        out.script_rc,
        out.log_path.display(),
        out.tail(40)
    );
    let st = report.endpoint.stats();
    eprintln!("{test}: bridge {:?}\n{test}: host {:?}", report.stats, st);
    assert!(st.tcp_to_mgmt > 0);

    // Both connections are on the wire: SYNs to the VM's port 18515 and to our port 18516.
    let frames = read_pcap(&pcap);
    let tcp_to = |port: u16| {
        frames
            .iter()
            .filter(|f| {
                matches!(parse_ethernet(f), Ok(Frame::Other(o))
                if o.ip.is_some_and(|ip| ip.protocol == 6 && ip.ports.map(|p| p.1) == Some(port)))
            })
            .count()
    };
    assert!(tcp_to(18515) >= 3, "no TCP to 18515 in the pcap");
    assert!(tcp_to(18516) >= 3, "no TCP to 18516 in the pcap");
}

#[test]
fn rxe_vm_timeout_kills_qemu() {
    let test = "rxe_vm_timeout_kills_qemu";
    let Some(img) = image_or_skip(test) else {
        return;
    };
    let mut cfg = vm_config(test, img, "echo sleeping; sleep 600; exit 0\n");
    cfg.timeout = Duration::from_secs(12);
    let t0 = Instant::now();
    let (out, report) = rxe::run_vm(
        &cfg,
        BridgeConfig::default(),
        HostStack::new(HostConfig::default()),
    )
    .unwrap();
    let wall = t0.elapsed();
    eprintln!("{test}: killed after {:.2} s", wall.as_secs_f64());
    assert!(out.timed_out);
    assert!(!out.ok());
    assert_eq!(out.script_rc, None);
    assert!(out.log.contains("RNIC_SCRIPT_START"), "{}", out.tail(20));
    assert!(wall < Duration::from_secs(20), "{wall:?}");
    assert!(report.error.is_none(), "{:?}", report.error);
}

/// Whether `ibv_devinfo -v` listed the IPv4-mapped GID of `v4` (low 32 bits, as ibv_devinfo prints them) at
/// any index: the index of the RoCE v2 GID of eth0's address depends on the order in which the kernel adds the
/// addresses (seen at 1 in most boots, at 2 behind the IPv6 link-local one in others).
fn has_v4_mapped_gid(log: &str, v4: &str) -> bool {
    let want = format!("0000:0000:0000:0000:0000:ffff:{v4}");
    log.lines().any(|l| l.contains("GID[") && l.contains(&want))
}

#[test]
fn the_v4_mapped_gid_is_found_at_any_index() {
    let at2 = "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:5054:00ff:fe00:0001, RoCE v2\n\t\t\tGID[  1]:\t\tfe80:0000:0000:0000:5054:00ff:fe00:0001, RoCE v1\n\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:0a00:0001, RoCE v2\n";
    assert!(has_v4_mapped_gid(at2, "0a00:0001"));
    assert!(has_v4_mapped_gid("GID[1] 0000:0000:0000:0000:0000:ffff:0a00:0001", "0a00:0001"));
    assert!(!has_v4_mapped_gid(at2, "0a00:0002"));
    assert!(!has_v4_mapped_gid("0000:0000:0000:0000:0000:ffff:0a00:0001 (no GID line)", "0a00:0001"));
}
