//! Every emitted block is lint-clean under `verilator --lint-only -Wall` and synthesises with Yosys for
//! UltraScale+; every block with a depth budget meets it (322 MHz: at most 6 LUT6 levels).

use fpga::gates::{emit, lint, synth};

#[test]
fn every_block_is_lint_clean_and_synthesises() {
    let dir = std::env::temp_dir().join(format!("rnic-gates-{}", std::process::id()));
    let files = emit(&dir).unwrap();
    assert!(files.iter().any(|f| f.ends_with("top.v")), "the current top is emitted as top.v");
    for f in &files {
        lint(f).unwrap_or_else(|e| panic!("{e:#}"));
    }
    for b in fpga::blocks() {
        let r = synth(&dir.join(format!("{}.v", b.name))).unwrap_or_else(|e| panic!("{}: {e:#}", b.name));
        eprintln!("{}: {r:?}", b.name);
        assert!(r.luts > 0 && r.ffs > 0, "{}: nothing synthesised: {r:?}", b.name);
        if let Some(budget) = b.depth_budget {
            assert!(r.lut_levels <= budget, "{}: {} LUT levels on {:?}", b.name, r.lut_levels, r.worst_path);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lint_gate_rejects_a_width_bug() {
    // The gate must bite: an unwaived warning (here a width mismatch) fails it.
    let dir = std::env::temp_dir().join(format!("rnic-lintbad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.v");
    std::fs::write(&f, "module top(input wire [7:0] a, output wire [3:0] y);\n  assign y = a;\nendmodule\n").unwrap();
    let e = lint(&f).unwrap_err().to_string();
    assert!(e.contains("WIDTH"), "{e}");
}
