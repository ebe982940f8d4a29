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
fn emit_writes_top_and_blocks_lint_clean() {
    let d = tmp("emit");
    let (code, out, err) = rnic(&["emit", "--out", d.to_str().unwrap(), "--lint"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(d.join("top.v").exists() && d.join("icrc_engine.v").exists());
    assert!(out.contains("lint clean"));
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
    assert!(err.contains("--role is responder, requester, pair, reads or atomics"), "{err}");
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
