//! The `rnic` command line as a user runs it.

use std::process::Command;

const CAPTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testbench/data/rxe-examples.pcap");

fn rnic(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rnic")).args(args).output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rnic-cli-{}-{name}", std::process::id()))
}

#[test]
fn decode_real_capture_all_good() {
    let (code, out, _) = rnic(&["decode", CAPTURE]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("ICRC ok")).count(), 17, "{out}");
    assert!(out.contains("RC_RDMA_READ_RESPONSE_FIRST") && out.contains("msn 1"), "{out}");
}

#[test]
fn decode_flags_one_flipped_payload_bit() {
    let mut data = std::fs::read(CAPTURE).unwrap();
    // the last byte of the first record's frame sits before the ICRC: flip one bit of the SEND_FIRST payload
    let frame0 = 24 + 16;
    data[frame0 + 100] ^= 0x10;
    let p = tmp("flip.pcap");
    std::fs::write(&p, &data).unwrap();
    let (code, out, _) = rnic(&["decode", p.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("ICRC BAD")).count(), 1, "{out}");
}

#[test]
fn decode_truncated_or_not_pcap_is_a_clear_error() {
    let data = std::fs::read(CAPTURE).unwrap();
    let p = tmp("trunc.pcap");
    std::fs::write(&p, &data[..data.len() - 30]).unwrap();
    let (code, out, err) = rnic(&["decode", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(!err.contains("panicked") && (out + &err).to_lowercase().contains("truncated"));
    let q = tmp("not.pcap");
    std::fs::write(&q, b"this is not a capture file at all").unwrap();
    let (code, _, err) = rnic(&["decode", q.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(!err.contains("panicked") && err.lines().count() == 1, "{err}");
}

#[test]
/// `rnic emit` writes the top and every block and lists each file. (`--lint` runs `fpga::gates::lint` on
/// each, which the gates run on every block and the top: not again here.)
fn emit_writes_top_and_blocks() {
    let d = tmp("emit");
    let (code, out, err) = rnic(&["emit", "--out", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(d.join("top.v").exists() && d.join("icrc_engine.v").exists() && d.join("responder.v").exists());
    let listed: Vec<&str> = out.lines().collect();
    assert!(listed.len() > 40, "{out}");
    for f in &listed {
        assert!(std::path::Path::new(f).exists(), "{f} listed but not written");
    }
}

#[test]
fn demo_passes() {
    let (code, out, err) = rnic(&["demo", "--frames", "2000"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.lines().filter(|l| l.ends_with("match")).count(), 17, "{out}");
    assert!(out.contains("mismatches 0") && out.contains("result: PASS"), "{out}");
}

/// `rnic bench --quick`: two RTL RNICs, every point completes (no stall, no MAC underrun), the latencies are
/// printed, and the CSV and the plot are written with one row / one line per point.
#[test]
fn bench_quick_runs_every_point() {
    let d = tmp("bench");
    let (code, out, err) = rnic(&["bench", "--quick", "--out", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("doorbell -> first beat on the wire"), "{out}");
    let csv = std::fs::read_to_string(d.join("bench.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{csv}");
    // verb,mtu,qps,size,messages,cycles,gbps,...,problem: every point moved data, none has a problem
    for r in &rows {
        let f: Vec<&str> = r.split(',').collect();
        assert!(f[6].parse::<f64>().unwrap() > 0.0 && f[9].is_empty(), "{r}");
    }
    let svg = std::fs::read_to_string(d.join("bench.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("wire limit, MTU 4096"), "{svg}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `rnic bench` runs only the points asked for, as many messages as `--bytes` asks; a verb it does not bench is
/// a one-line error.
#[test]
fn bench_runs_the_points_asked_for_and_refuses_unknown_verbs() {
    let d = tmp("bench-one");
    let (code, out, err) =
        rnic(&["bench", "--verb", "read", "--mtu", "1024", "--qps", "2", "--size", "3000", "--bytes", "300000", "--out", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let csv = std::fs::read_to_string(d.join("bench.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{csv}");
    // --bytes 300000 over 3000-byte messages: 100 of them
    assert!(rows[0].starts_with("RdmaRead,1024,2,3000,100,"), "{csv}");
    let (code, out, err) = rnic(&["bench", "--verb", "swap", "--out", d.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("--verb is write, read or send"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `rnic bench --inline`: a 64-byte WRITE point posts inline WQEs (the CSV says so), a READ point cannot and
/// does not; both complete with every message's own bytes at its destination (the bench checks each one).
#[test]
fn bench_inline_posts_small_writes_inline() {
    let d = tmp("bench-inline");
    let (code, out, err) =
        rnic(&["bench", "--verb", "write,read", "--mtu", "1024", "--qps", "2", "--size", "64", "--inline", "--out", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Write inl"), "{out}");
    let csv = std::fs::read_to_string(d.join("bench.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|r| r.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    for r in &rows {
        let inline = r[0] == "RdmaWrite";
        assert_eq!(r[11], if inline { "true" } else { "false" }, "{csv}");
        assert!(r[7].parse::<f64>().unwrap() > 0.0 && r[9].is_empty(), "{csv}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `rnic campaign`: one round of the RTL requester on a 5 %-drop link passes and writes its pcaps and, on
/// request, a VCD; a bad
/// role or an out-of-range fault rate is a one-line error with exit 2.
#[test]
fn campaign_runs_a_round_and_refuses_bad_arguments() {
    let d = tmp("campaign");
    let vcd = d.join("run.vcd");
    let (code, out, err) =
        rnic(&["campaign", "--role", "requester", "--messages", "32", "--drop", "0.05", "--out", d.to_str().unwrap(), "--vcd", vcd.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("RTL requester: 32 messages") && out.contains("PASS"), "{out}");
    assert!(d.join("rnic-tx.pcap").exists() && d.join("rnic-rx.pcap").exists());
    // the VCD on request: the top's ports, sampled over the whole run
    let head: Vec<u8> = std::fs::read(&vcd).expect("the VCD").into_iter().take(1 << 16).collect();
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("$version") && head.contains("m_axis$tvalid"), "{}", &head[..200.min(head.len())]);
    assert!(std::fs::metadata(&vcd).unwrap().len() > 1 << 20, "a VCD of the whole run");
    let (code, _, err) = rnic(&["campaign", "--role", "sideways"]);
    assert_eq!(code, 2);
    assert!(err.contains("--role is responder, requester, pair, uc, ud, reads or atomics"), "{err}");
    let (code, _, err) = rnic(&["campaign", "--drop", "0.7"]);
    assert_eq!(code, 2);
    assert!(err.contains("fault rates"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Without a card, the card's commands say what is missing and exit 2; none panics.
#[test]
fn board_commands_without_a_card_say_what_is_missing() {
    if std::path::Path::new("/sys/bus/pci/devices").read_dir().is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| std::fs::read_to_string(e.path().join("device")).is_ok_and(|v| v.trim() == "0x903f")))
    }) {
        return; // a card of ours is here: these are not the messages it gets
    }
    for args in [
        &["board", "probe"][..],
        &["board", "selftest", "--pci", "3b:00.0"],
        &["board", "arp", "--ip", "10.0.0.1"],
        &["rxe", "--endpoint", "board", "--pci", "3b:00.0", "--peer", "10.0.0.1", "--tool", "ib_write_bw"],
    ] {
        let (code, _, err) = rnic(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("no card with 10ee:903f on the PCIe bus") && err.contains("rescan"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let (code, _, err) = rnic(&["rxe", "--endpoint", "board", "--pci", "3b:00.0", "--tool", "ib_write_bw"]);
    assert!(code == 2 && err.contains("needs --peer"), "{err}");
    let (code, _, err) = rnic(&["rxe", "--endpoint", "rtl", "--peer", "10.0.0.1", "--tool", "ib_write_bw"]);
    assert!(code == 2 && err.contains("go with --endpoint board"), "{err}");
}

/// `rnic rxe --conn`: what cannot run is refused with the reason before any VM starts, never with a panic.
#[test]
fn rxe_conn_refusals_are_clear_errors() {
    for (args, want) in [
        (&["rxe", "--conn", "XRC", "--tool", "ib_send_bw"][..], "unknown connection type `XRC`"),
        (&["rxe", "--conn", "UD", "--tool", "ib_write_bw"], "ib_write_bw cannot run on UD: UD has SEND only"),
        (&["rxe", "--conn", "ud", "--tool", "ib_read_lat"], "ib_read_lat cannot run on UD"),
        (&["rxe", "--conn", "UD", "--tool", "ib_atomic_bw"], "ib_atomic_bw cannot run on UD"),
        (&["rxe", "--conn", "UD", "--tool", "ib_send_bw", "--size", "2048"], "larger than the path MTU 1024"),
        (&["rxe", "--conn", "UD", "--tool", "ib_send_lat", "--drop", "0.01"], "--drop needs RC"),
        (&["rxe", "--conn", "UD", "--tool", "ib_send_bw", "--iters", "16001"], "UC_MAX_RX"),
        (&["rxe", "--tool", "ibv_ud_pingpong", "--mtu", "512"], "ibv_ud_pingpong has no -m"),
        (&["rxe", "--tool", "ibv_ud_pingpong", "--size", "1025"], "refuses --size 1025 above the port MTU 1024"),
        (&["rxe", "--tool", "ibv_ud_pingpong", "--drop", "0.01"], "--drop needs RC"),
        (&["rxe", "--conn", "UC", "--tool", "ibv_ud_pingpong"], "ibv_ud_pingpong is UD"),
        (&["rxe", "--conn", "UC", "--tool", "ib_read_bw"], "ib_read_bw cannot run on UC"),
        (&["rxe", "--conn", "uc", "--tool", "ib_read_lat"], "ib_read_lat cannot run on UC"),
        (&["rxe", "--conn", "UC", "--tool", "ib_atomic_bw"], "ib_atomic_bw cannot run on UC"),
        (&["rxe", "--conn", "UC", "--tool", "ib_atomic_bw_cas"], "ib_atomic_bw cannot run on UC"),
        (&["rxe", "--conn", "RC", "--tool", "ibv_uc_pingpong"], "ibv_uc_pingpong is UC"),
        (&["rxe", "--conn", "UC", "--tool", "ibv_rc_pingpong"], "ibv_rc_pingpong is RC"),
        (&["rxe", "--conn", "UC", "--tool", "ib_write_bw", "--drop", "0.01"], "--drop needs RC"),
        (&["rxe", "--tool", "ibv_uc_pingpong", "--drop", "0.01"], "--drop needs RC"),
        (&["rxe", "--conn", "UC", "--tool", "ib_send_bw", "--iters", "16001"], "UC_MAX_RX"),
    ] {
        let t0 = std::time::Instant::now();
        let (code, _, err) = rnic(args);
        assert!(code == 2 && err.contains(want) && !err.contains("panicked"), "{args:?}: {code} {err}");
        // refused up front: no VM was built or booted
        assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{args:?} took {:?}", t0.elapsed());
    }
}

/// `rnic board build --board u250 --out DIR` with no Vivado on PATH: every file of the flow written, and the
/// command to run on a Vivado machine printed; exit 0.
#[test]
fn board_build_writes_the_flow_and_says_what_to_run_without_vivado() {
    let d = tmp("board-build");
    let empty = tmp("no-vivado-on-path");
    std::fs::create_dir_all(&empty).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rnic"))
        .args(["board", "build", "--board", "u250", "--out", d.to_str().unwrap()])
        .env("PATH", &empty)
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    for f in ["rnic_u250.v", "u250_pins.xdc", "u250_cdc.xdc", "u250_bitstream.xdc", "build_u250.tcl", "README.md"] {
        let len = std::fs::metadata(d.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} not written: {out}");
        assert!(out.contains(f), "{f} not named: {out}");
    }
    let v = std::fs::read_to_string(d.join("rnic_u250.v")).unwrap();
    assert!(v.contains("module top") && v.contains("cmac0 cmac_inst") && !v.contains("module cmac0"), "the IPs are Vivado's, not the stubs");
    assert!(std::fs::read_to_string(d.join("u250_pins.xdc")).unwrap().contains("PACKAGE_PIN"));
    assert!(std::fs::read_to_string(d.join("build_u250.tcl")).unwrap().contains("create_ip -name qdma"));
    assert!(out.contains("Vivado is not on PATH") && out.contains("vivado -mode batch -source build_u250.tcl"), "{out}");
    let (code, _, err) = rnic(&["board", "build", "--board", "vcu118", "--out", d.to_str().unwrap()]);
    assert!(code == 2 && err.contains("the boards are: u250"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// The bring-up commands on the simulated board (`--sim`: the U250 board shell as a Verilator model with its
/// PCIe bridge and MAC models), run as a user runs them: `probe` finds nothing wrong, `stats` names every
/// counter, `address` sets and reads back the address, `arp` learns the link partner's MAC with the RNIC's own
/// ARP requests (and says so, exit 1, when nobody answers), `selftest` passes every step. Each command opens
/// its own simulated board.
#[test]
fn board_commands_on_the_simulated_board() {
    let (code, out, err) = rnic(&["board", "probe", "--sim"]);
    assert_eq!(code, 0, "{out}{err}");
    for l in [
        "board   RNIB 1.0 on Alveo U250",
        "rnic    ID 0x524e4943",
        "link    enabled yes, up yes, RX aligned yes, RS-FEC on (lanes locked 0xf)",
        "qsfp    module present yes",
        "mac     RX bad FCS 0, TX underflows 0, TX gaps 0",
        "status  ready for traffic",
    ] {
        assert!(out.contains(l), "{l:?} missing:\n{out}");
    }
    assert!(!out.contains("problem"), "{out}");

    let (code, out, err) = rnic(&["board", "stats", "--sim"]);
    assert_eq!(code, 0, "{out}{err}");
    let named: Vec<(&str, u64)> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?, w.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(named.len(), 43 + 13, "every RNIC counter and board register, one a line:\n{out}");
    let get = |n: &str| named.iter().find(|x| x.0 == n).map(|x| x.1);
    assert_eq!(get("board_id"), Some(0x524E_4942), "{out}");
    assert_eq!(get("link_ups"), Some(1), "{out}");
    for n in ["rx_drop_mac_error", "mac_rx_bad_fcs", "mac_tx_underflows", "core_tx_gaps", "arp_requests", "icmp_echo_replies"] {
        assert_eq!(get(n), Some(0), "{n}:\n{out}");
    }

    let (code, out, err) = rnic(&["board", "address", "--sim", "--ip", "10.0.0.2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("address MAC 02:00:0a:00:00:02, IPv4 10.0.0.2"), "{out}");
    let (code, out, err) = rnic(&["board", "address", "--sim", "--ip", "10.0.0.3", "--mac", "02:11:22:33:44:55"]);
    assert!(code == 0 && out.contains("address MAC 02:11:22:33:44:55, IPv4 10.0.0.3"), "{out}{err}");
    let (code, _, err) = rnic(&["board", "address", "--sim", "--ip", "10.0.0.3", "--mac", "02:11:22"]);
    assert!(code == 2 && err.contains("is not a MAC address"), "{err}");

    let (code, out, err) = rnic(&["board", "arp", "--sim", "--ip", "10.0.0.9"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("arp     10.0.0.9 is at 02:00:00:00:00:09"), "{out}");
    let (code, out, err) = rnic(&["board", "arp", "--sim", "--ip", "10.0.0.1"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("arp     no ARP answer from 10.0.0.1 to 3 requests"), "{out}");

    let (code, out, err) = rnic(&["board", "selftest", "--sim"]);
    assert_eq!(code, 0, "{out}{err}");
    for step in ["registers", "loopback", "traffic", "counters", "arp", "restore"] {
        assert!(out.lines().any(|l| l.starts_with(step) && l[10..].starts_with(" ok ")), "{step}:\n{out}");
    }
    assert!(out.contains("every byte right") && out.trim_end().ends_with("selftest: PASS"), "{out}");
}

/// A fake sysfs (`rnic_driver::pci::SYSFS_ROOT_ENV`, for tests only) with our card at 0000:3b:00.0, bound to
/// `driver` (none if `None`), in IOMMU group `group` (none: the IOMMU off), its register BAR 4 MiB.
fn fake_sysfs(name: &str, driver: Option<&str>, group: Option<u32>) -> std::path::PathBuf {
    use std::os::unix::fs::symlink;
    let root = tmp(name);
    let _ = std::fs::remove_dir_all(&root);
    let d = root.join("bus/pci/devices/0000:3b:00.0");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("vendor"), "0x10ee\n").unwrap();
    std::fs::write(d.join("device"), "0x903f\n").unwrap();
    let bar = |start: u64, size: u64| format!("0x{start:016x} 0x{:016x} 0x0000000000140204\n", start + size - 1);
    let none = "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
    std::fs::write(d.join("resource"), [bar(0xf000_0000, 256 << 10), none.into(), bar(0xf100_0000, 4 << 20), none.into(), none.into(), none.into()].concat()).unwrap();
    if let Some(drv) = driver {
        let t = root.join("bus/pci/drivers").join(drv);
        std::fs::create_dir_all(&t).unwrap();
        symlink(&t, d.join("driver")).unwrap();
    }
    if let Some(g) = group {
        let t = root.join("kernel/iommu_groups").join(g.to_string());
        std::fs::create_dir_all(&t).unwrap();
        symlink(&t, d.join("iommu_group")).unwrap();
    }
    root
}

/// The card there but not usable: each command that opens it exits 2 with the reason and the commands that
/// fix it, never a panic (the sysfs tree is a fake one, so this runs without a card).
#[test]
fn board_commands_name_what_keeps_the_card_from_vfio() {
    let run = |root: &std::path::Path, args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_rnic")).args(args).env(rnic_driver::pci::SYSFS_ROOT_ENV, root).output().unwrap();
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let commands: [&[&str]; 4] = [
        &["board", "probe"],
        &["board", "selftest", "--pci", "3b:00.0"],
        &["board", "stats", "--pci", "0000:3b:00.0"],
        &["rxe", "--endpoint", "board", "--pci", "3b:00.0", "--peer", "10.0.0.1", "--tool", "ib_write_bw"],
    ];
    // a vendor driver took the card
    let xdma = fake_sysfs("sysfs-xdma", Some("xdma"), Some(27));
    // no driver at all
    let unbound = fake_sysfs("sysfs-unbound", None, Some(27));
    // vfio-pci, but the IOMMU is off: no group
    let no_iommu = fake_sysfs("sysfs-noiommu", Some("vfio-pci"), None);
    // nothing of ours on the bus
    let empty = tmp("sysfs-empty");
    std::fs::create_dir_all(empty.join("bus/pci/devices")).unwrap();
    for args in commands {
        let (code, out, err) = run(&xdma, args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains("0000:3b:00.0 is bound to xdma, not vfio-pci") && err.contains("echo 0000:3b:00.0 > /sys/bus/pci/drivers/xdma/unbind"), "{args:?}: {err}");
        assert!(err.contains("driver_override") && err.lines().count() == 1 && !err.contains("panicked"), "{args:?}: {err}");
        let (code, out, err) = run(&unbound, args);
        assert!(code == 2 && err.contains("is bound to no driver, not vfio-pci") && !err.contains("unbind"), "{args:?}: {out}{err}");
        let (code, out, err) = run(&no_iommu, args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains("0000:3b:00.0 has no IOMMU group: the IOMMU is off") && err.contains("intel_iommu=on"), "{args:?}: {err}");
        assert!(err.lines().count() == 1 && !err.contains("panicked"), "{args:?}: {err}");
        let (code, _, err) = run(&empty, args);
        assert!(code == 2 && err.contains("no card with 10ee:903f on the PCIe bus") && !err.contains("panicked"), "{args:?}: {err}");
    }
    // another address than the card's
    let (code, _, err) = run(&xdma, &["board", "probe", "--pci", "d8:00.0"]);
    assert!(code == 2 && err.contains("no card of ours at 0000:d8:00.0; found: 0000:3b:00.0"), "{err}");
    for d in [xdma, unbound, no_iommu, empty] {
        let _ = std::fs::remove_dir_all(d);
    }
}
