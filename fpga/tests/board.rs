//! The U250 board layer's checks that need no Vivado: the board top (with port-exact stubs of the IPs)
//! passes Verilator's `-Wall` lint; the constraints name every pin of the board description with the card's
//! configuration trailer, not rust-hdl's 3.3 V one; the Vivado flow's Tcl runs in `tclsh` against stub
//! procedures that record each Vivado command, and stops with exit code 1 when the slack is negative.

use fpga::board::{u250, vivado};
use std::process::Command;

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rnic-board-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn board_top_lints_clean_with_the_ip_stubs() {
    let d = tempdir("lint");
    let f = d.join("rnic_u250_stubs.v");
    std::fs::write(&f, vivado::verilog_with_stubs()).unwrap();
    fpga::gates::lint(&f).unwrap();
}

#[test]
fn vivado_verilog_has_no_stubs_and_instantiates_both_ips() {
    let v = vivado::verilog();
    assert!(!v.contains("(* blackbox *)"));
    assert!(!v.contains("module cmac0") && !v.contains("module qdma0"), "the real IPs come from create_ip");
    for inst in ["cmac0 cmac_inst", "qdma0 qdma_inst", "IBUFDS_GTE4", "BUFGCE_DIV"] {
        assert!(v.contains(inst), "{inst}");
    }
    assert!(v.contains("module top("));
}

#[test]
fn pins_xdc_places_every_pin_and_keeps_the_card_trailer() {
    let x = vivado::pins_xdc();
    for p in u250::PINS {
        let target = p.bit.map_or(p.port.to_string(), |b| format!("{}[{}]", p.port, b));
        assert!(x.contains(&format!("set_property PACKAGE_PIN {} [get_ports {{ {target} }}]", p.loc)), "{target} at {}", p.loc);
        if let Some(s) = p.iostandard {
            assert!(x.contains(&format!("set_property IOSTANDARD {s} [get_ports {{ {target} }}]")), "{target} {s}");
        }
        assert!(x.contains(p.source));
    }
    for (port, period, _) in u250::CLOCKS {
        assert!(x.contains(&format!("-period {period} [get_ports {{ {port} }}]")), "{port}");
    }
    assert!(!x.contains("CONFIG_VOLTAGE") && !x.contains("CFGBVS"), "rust-hdl's 3.3 V trailer removed");
    let b = vivado::bitstream_xdc();
    assert!(b.contains("set_property CONFIG_VOLTAGE 1.8 [current_design]") && b.contains("set_property CFGBVS GND [current_design]"));
    let c = vivado::cdc_xdc();
    assert!(!c.contains("set_clock_groups"), "clock groups would override the crossings' max-delay constraints");
    assert_eq!(c.matches("set_bus_skew").count(), 20, "two gray pointers in each of the ten FIFOs");
}

/// Stubs for every Vivado command the flow calls: each appends its name and arguments to a log; `get_property
/// SLACK` answers the slack given in `SLACK`.
const STUBS: &str = r#"
set log {}
foreach cmd {set_part create_ip set_property get_ips generate_target synth_ip read_verilog read_xdc synth_design
             opt_design place_design phys_opt_design route_design report_utilization report_timing_summary report_cdc
             report_clock_interaction write_checkpoint write_bitstream write_cfgmem get_timing_paths} {
    proc $cmd {args} "lappend ::log \[list $cmd {*}\$args\]; return {}"
}
proc get_property {name args} { lappend ::log [list get_property $name]; return $::env(SLACK) }
rename exit real_exit
proc exit {code} { puts "LOG [llength $::log] [join [lmap c $::log {lindex $c 0}] ,]"; real_exit $code }
source [lindex $argv 0]
puts "LOG [llength $::log] [join [lmap c $::log {lindex $c 0}] ,]"
foreach c $::log { if {[lindex $c 0] eq "set_property"} { puts "PROP [lrange $c 1 end]" } }
"#;

fn run_tcl(slack: &str) -> (i32, String) {
    let d = tempdir(&format!("tcl{}", slack.replace('-', "m")));
    let names = vivado::write_all(&d).unwrap();
    assert!(names.contains(&"build_u250.tcl".to_string()));
    std::fs::write(d.join("stubs.tcl"), STUBS).unwrap();
    let out = Command::new("tclsh")
        .arg(d.join("stubs.tcl"))
        .arg(d.join("build_u250.tcl"))
        .env("SLACK", slack)
        .output()
        .expect("tclsh (apt-get install tcl; ./run.sh does it)");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn vivado_flow_runs_in_tclsh_and_fails_on_negative_slack() {
    let (code, text) = run_tcl("0.125");
    assert_eq!(code, 0, "{text}");
    let order = [
        "set_part", "create_ip", "set_property", "create_ip", "set_property", "generate_target", "synth_ip", "read_verilog",
        "read_xdc", "synth_design", "opt_design", "place_design", "phys_opt_design", "route_design", "report_timing_summary",
        "write_bitstream", "write_cfgmem",
    ];
    let log = text.lines().find(|l| l.starts_with("LOG ")).expect("the call log");
    let calls: Vec<&str> = log.split_whitespace().nth(2).unwrap().split(',').collect();
    let mut at = 0;
    for want in order {
        at += calls[at..].iter().position(|c| *c == want).unwrap_or_else(|| panic!("{want} missing or out of order: {calls:?}"));
    }
    assert!(text.contains("timing: WNS 0.125 ns"));
    // the IPs' CONFIG dictionaries reach set_property
    let props: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("PROP ")).collect();
    assert!(props.iter().any(|p| p.contains("CONFIG.GT_GROUP_SELECT")) && props.iter().any(|p| p.contains("CONFIG.en_bridge_slv")), "{props:?}");
    let (code, text) = run_tcl("-0.042");
    assert_eq!(code, 1, "negative slack must fail the build: {text}");
    assert!(text.contains("ERROR: timing not met"));
    assert!(!text.contains("write_bitstream"), "no bitstream after a timing failure");
}

/// The constraints in `constraints/u250/` are the generator's output, so they never drift from the board
/// description (`rnic board build` writes the same files).
#[test]
fn checked_in_constraints_match_the_generator() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../constraints/u250");
    for (name, text) in [("u250_pins.xdc", vivado::pins_xdc()), ("u250_cdc.xdc", vivado::cdc_xdc()), ("u250_bitstream.xdc", vivado::bitstream_xdc())] {
        let on_disk = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(on_disk == text, "constraints/u250/{name} differs from the generator: run `rnic board build --out DIR` and copy it");
    }
}

/// The domain of each port of the board shell: the QDMA's user side is in its `axi_aclk` (`pclk`), the
/// CMAC's in its user clock (the core's `clock`); the QSFP module's pins and the LEDs have no clock.
fn shell_port_domain(p: &str) -> Option<String> {
    if p.starts_with("s_axil_") || p.starts_with("m_axib_") || p.starts_with("pcie_") {
        Some("pclk".into())
    } else if p.starts_with("cmac_") {
        Some("clock".into())
    } else if p.starts_with("qsfp0_") || p == "led" {
        Some("async".into())
    } else {
        None
    }
}

/// The board shell (the core and the glue between the IPs) crosses between the PCIe clock and the core clock
/// only through the blocks of `board::cdc`: every other path from one domain's registers or ports to the
/// other's is reported.
#[test]
fn board_shell_crosses_clocks_only_through_the_cdc_blocks() {
    let d = tempdir("cdc");
    let t = std::time::Instant::now();
    let r = fpga::board::cdc_check::check(&fpga::board::shell::verilog(), &["clock", "pclk"], &shell_port_domain, &[("top$core", "clock")], &d).unwrap();
    eprintln!("{:.1} s; flops per domain {:?}; {} allowed crossings", t.elapsed().as_secs_f64(), r.flops, r.crossings.len());
    for c in &r.crossings {
        eprintln!("  {c:?}");
    }
    assert!(r.violations.is_empty(), "{} crossings outside the CDC blocks:\n{}", r.violations.len(), r.violations.join("\n"));
    assert!(r.flops.get("clock").copied().unwrap_or(0) > 100 && r.flops.get("pclk").copied().unwrap_or(0) > 100, "{:?}", r.flops);
    let n = |k: &str| r.crossings.iter().filter(|c| c.0 == k).count();
    // 10 AsyncFifos (the BAR's five channels, the DMA's five): two gray pointers each, a RAM each
    assert!(n("synchroniser") >= 20 && n("AsyncFifo RAM read") >= 10 && n("reset synchroniser") >= 1, "{:?}", r.crossings);
}

/// The check finds what it must: a register of one clock sampled by a register of the other that is not a
/// synchroniser, a synchroniser fed through logic, and an asynchronous pin used without one.
#[test]
fn the_cdc_check_reports_crossings_outside_the_cdc_blocks() {
    let d = tempdir("cdc-bad");
    let v = "module top(input wire clock, input wire pclk, input wire a, input wire b, input wire pin, output reg y, output reg z, output reg w);\n\
             reg pa = 0; reg pb = 0; reg cdc_s1 = 0; reg cdc_s2 = 0;\n\
             always @(posedge pclk) begin pa <= a; pb <= b; end\n\
             always @(posedge clock) begin y <= pa; cdc_s1 <= pa ^ pb; cdc_s2 <= cdc_s1; z <= cdc_s2; w <= pin; end\n\
             endmodule\n";
    let dom = |p: &str| {
        Some(match p {
            "pin" => "async",
            "y" | "z" | "w" => "clock",
            _ => "pclk",
        }
        .to_string())
    };
    let r = fpga::board::cdc_check::check(v, &["clock", "pclk"], &dom, &[], &d).unwrap();
    eprintln!("{:#?}", r.violations);
    assert_eq!(r.violations.len(), 3, "{:#?}", r.violations);
    assert!(r.violations.iter().any(|l| l.starts_with("y") && l.contains("pa")));
    assert!(r.violations.iter().any(|l| l.starts_with("cdc_s1") && l.contains("through logic")));
    assert!(r.violations.iter().any(|l| l.starts_with("w") && l.contains("async")));
    // the same synchroniser fed straight from one register is allowed
    let ok = v.replace("cdc_s1 <= pa ^ pb", "cdc_s1 <= pa").replace("y <= pa;", "").replace("w <= pin;", "");
    let r = fpga::board::cdc_check::check(&ok, &["clock", "pclk"], &dom, &[], &d).unwrap();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert_eq!(r.crossings.iter().filter(|c| c.0 == "synchroniser").count(), 1);
}
