//! Every emitted block is lint-clean under `verilator --lint-only -Wall`, synthesises with Yosys' generic
//! flow, and meets its depth budget (322 MHz: at most 6 LUT6 levels). One test per block so that the
//! synthesis runs in parallel. The UltraScale+ resource mapping (`synth_xilinx`, about half of the Yosys
//! time and no budget to check) is `rnic synth`, not a test. A block that is also a sub-block of a gated
//! parent ([`DEPTH_IN_PARENT`]) has its depth measured there: the parent is synthesised flattened and its
//! worst path runs through every path of the sub-block, as in the top.

use fpga::gates::{depth, emit, lint};

// The test harness starts tests in name order, two at a time: the three longest syntheses (TX Packet Build
// about 95 s, the Responder and RX Parse about 60 s each) are named `gate_1_..` to `gate_3_..` so that they
// start first and the short ones fill the other core, instead of one of them running alone at the end.

/// Sub-blocks whose depth is measured in their parent's gate: (block, parent, its instance in the parent).
/// `sub_blocks_are_in_their_parents_unchanged` checks that the parent holds exactly the block's Verilog.
const DEPTH_IN_PARENT: &[(&str, &str, &str)] = &[
    ("icrc_engine", "rx_parse", "engine"),
    ("tx_icrc_append", "tx_packet_build", "icrc"),
    ("key_cache", "req_front", "kc"),
    ("qp_context", "responder", "tk$qpc"),
    ("psn_check", "responder", "chk$psnc"),
    ("atomic_alu", "responder", "at$alu"),
    ("resp_recv_queue", "responder", "rq"),
    ("resp_read_res", "responder", "rr"),
    ("resp_checks", "responder", "chk"),
    ("resp_key_check", "responder", "kck"),
    ("resp_take", "responder", "tk"),
    ("resp_fast_path", "responder", "fp"),
    ("resp_read_reply", "responder", "rd"),
    ("resp_atomic", "responder", "at"),
    ("resp_tx", "responder", "tx"),
    ("resp_completion", "responder", "cqe"),
    ("comp_intake", "completer", "ri"),
    ("comp_read_place", "completer", "rp"),
    ("comp_timer", "completer", "tm"),
    ("comp_payload", "completer", "pl"),
    ("comp_cqe", "completer", "cqe"),
    ("comp_feedback", "completer", "fb"),
];

fn gate(name: &str) {
    let dir = std::env::temp_dir().join(format!("rnic-gates-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // only this block's Verilog is built (the top alone takes seconds)
    let b = fpga::block(name).unwrap_or_else(|| panic!("no block {name}"));
    let f = dir.join(format!("{name}.v"));
    std::fs::write(&f, &b.verilog).unwrap();
    lint(&f).unwrap_or_else(|e| panic!("{e:#}"));
    if let Some((_, parent, _)) = DEPTH_IN_PARENT.iter().find(|(n, _, _)| *n == name) {
        eprintln!("{name}: lint clean; depth measured in {parent}'s gate");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let r = depth(&f).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    eprintln!("{name}: {r:?}");
    assert!(r.luts > 0 && r.ffs > 0, "{name}: nothing synthesised: {r:?}");
    if let Some(budget) = b.depth_budget {
        assert!(r.lut_levels <= budget, "{name}: {} LUT levels on {:?}", r.lut_levels, r.worst_path);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The modules of an emitted file, each from `module` to `endmodule`.
fn modules(v: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = v;
    while let Some(i) = rest.find("module ") {
        if i > 0 && !rest[..i].ends_with('\n') {
            rest = &rest[i + 7..];
            continue;
        }
        let Some(j) = rest[i..].find("endmodule") else { break };
        out.push(&rest[i..i + j + 9]);
        rest = &rest[i + j + 9..];
    }
    out
}

/// A block whose depth is left to its parent's gate is in the parent unchanged: each of its modules, named
/// under its instance (`top` becomes `top$<instance>`), is a module of the parent's Verilog, text for text,
/// and the parent's gate has a depth budget no looser than the block's.
#[test]
fn sub_blocks_are_in_their_parents_unchanged() {
    for (name, parent, inst) in DEPTH_IN_PARENT {
        let b = fpga::block(name).unwrap();
        let p = fpga::block(parent).unwrap();
        assert!(p.depth_budget.is_some() && p.depth_budget <= b.depth_budget, "{parent} checks {name}'s budget");
        assert!(!DEPTH_IN_PARENT.iter().any(|(n, _, _)| n == parent), "{parent} has its own depth run");
        let renamed = b.verilog.replace("top$", &format!("top${inst}$")).replace("module top(", &format!("module top${inst}("));
        let in_parent = modules(&p.verilog);
        let ms = modules(&renamed);
        assert!(!ms.is_empty(), "{name}: no module");
        for m in ms {
            let head = m.lines().next().unwrap();
            assert!(in_parent.contains(&m), "{name} in {parent}: `{head}` differs or is missing");
        }
    }
}

/// The blocks with a gate test below; a new block must be added here.
const GATED: &[&str] =
    &["rnic", "icrc_engine", "tx_icrc_append", "rx_parse", "key_cache", "psn_check", "qp_context", "tx_packet_build", "requester", "req_front", "dma_read_arb", "dma_write_arb", "tx_req_arb", "tx_frame_mux", "tx_frame_buffer", "gather_path", "scatter_path", "csr", "sq_ring", "completer", "comp_intake", "comp_read_place", "comp_timer", "comp_payload", "comp_cqe", "comp_feedback", "cqe_gen", "arp_responder", "icmp_echo", "nd_responder", "vlan_strip", "vlan_insert", "responder", "resp_recv_queue", "resp_read_res", "resp_checks", "resp_key_check", "resp_take", "resp_fast_path", "resp_read_reply", "resp_atomic", "resp_tx", "resp_completion", "atomic_alu", "axis_slice", "async_fifo", "axi_read_master", "axi_write_master", "axil_split", "board_regs", "cmac_ctl"];

#[test]
fn emit_writes_every_block_and_the_top() {
    let dir = std::env::temp_dir().join(format!("rnic-gates-{}-emit", std::process::id()));
    let files = emit(&dir).unwrap();
    assert!(files.iter().any(|f| f.ends_with("top.v")), "the current top is emitted as top.v");
    assert_eq!(files.len(), fpga::block_names().len() + 1);
    let top = std::fs::read_to_string(dir.join("top.v")).unwrap();
    assert!(top.contains("module top("));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_block_has_a_gate_test() {
    let names = fpga::block_names();
    for n in &names {
        assert!(GATED.contains(n), "block {n} has no gate test in fpga/tests/gates.rs");
    }
}

/// The whole top: lint here. Its Yosys run takes about 10 minutes on the 2-core CI machine (every block
/// below is synthesised and depth-checked on its own in this file; the top adds the wiring, the command
/// dispatcher and the muxes), so the top's synthesis is `rnic synth --block rnic` and the ignored test below
/// (2026-12-01, RTL of f6d3631: 50,602 LUT, 35,984 FF, 123.5 BRAM36, 6 LUT levels: the whole top meets the
/// 6-level budget, see `docs/architecture.md`, "Depth status").
#[test]
fn gate_rnic_lint() {
    let dir = std::env::temp_dir().join(format!("rnic-gates-{}-rnic-lint", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = fpga::block("rnic").expect("the top is a block");
    assert_eq!(fpga::TOP, "rnic");
    let f = dir.join("rnic.v");
    std::fs::write(&f, &b.verilog).unwrap();
    lint(&f).unwrap_or_else(|e| panic!("{e:#}"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "20-40 minutes of Yosys on one core (the whole top); run with --ignored or `rnic synth --block rnic`"]
fn gate_rnic() {
    gate("rnic");
}

#[test]
fn gate_icrc_engine() {
    gate("icrc_engine");
}

#[test]
fn gate_tx_icrc_append() {
    gate("tx_icrc_append");
}

#[test]
fn gate_3_rx_parse() {
    gate("rx_parse");
}

#[test]
fn gate_key_cache() {
    gate("key_cache");
}

#[test]
fn gate_psn_check() {
    gate("psn_check");
}

#[test]
fn gate_qp_context() {
    gate("qp_context");
}

#[test]
fn gate_req_front() {
    gate("req_front");
}

#[test]
fn gate_dma_read_arb() {
    gate("dma_read_arb");
}

#[test]
fn gate_dma_write_arb() {
    gate("dma_write_arb");
}

#[test]
fn gate_tx_req_arb() {
    gate("tx_req_arb");
}

#[test]
fn gate_tx_frame_mux() {
    gate("tx_frame_mux");
}

#[test]
fn gate_tx_frame_buffer() {
    gate("tx_frame_buffer");
}

#[test]
fn gate_requester() {
    gate("requester");
}

#[test]
fn gate_1_tx_packet_build() {
    gate("tx_packet_build");
}

#[test]
fn gate_gather_path() {
    gate("gather_path");
}

#[test]
fn gate_scatter_path() {
    gate("scatter_path");
}

#[test]
fn gate_csr() {
    gate("csr");
}

#[test]
fn gate_sq_ring() {
    gate("sq_ring");
}
#[test]
fn gate_completer() {
    gate("completer");
}

#[test]
fn gate_cqe_gen() {
    gate("cqe_gen");
}

#[test]
fn gate_arp_responder() {
    gate("arp_responder");
}

#[test]
fn gate_icmp_echo() {
    gate("icmp_echo");
}

#[test]
fn gate_nd_responder() {
    gate("nd_responder");
}

#[test]
fn gate_vlan_strip() {
    gate("vlan_strip");
}

#[test]
fn gate_vlan_insert() {
    gate("vlan_insert");
}

#[test]
fn gate_2_responder() {
    gate("responder");
}

#[test]
fn gate_axis_slice() {
    gate("axis_slice");
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

#[test]
fn gate_atomic_alu() {
    gate("atomic_alu");
}

#[test]
fn gate_comp_intake() {
    gate("comp_intake");
}

#[test]
fn gate_comp_read_place() {
    gate("comp_read_place");
}

#[test]
fn gate_comp_timer() {
    gate("comp_timer");
}

#[test]
fn gate_comp_payload() {
    gate("comp_payload");
}

#[test]
fn gate_comp_cqe() {
    gate("comp_cqe");
}

#[test]
fn gate_comp_feedback() {
    gate("comp_feedback");
}

#[test]
fn gate_resp_recv_queue() {
    gate("resp_recv_queue");
}

#[test]
fn gate_resp_read_res() {
    gate("resp_read_res");
}

#[test]
fn gate_resp_fast_path() {
    gate("resp_fast_path");
}

#[test]
fn gate_resp_take() {
    gate("resp_take");
}

#[test]
fn gate_resp_key_check() {
    gate("resp_key_check");
}

#[test]
fn gate_resp_checks() {
    gate("resp_checks");
}

#[test]
fn gate_resp_read_reply() {
    gate("resp_read_reply");
}

#[test]
fn gate_resp_atomic() {
    gate("resp_atomic");
}

#[test]
fn gate_resp_tx() {
    gate("resp_tx");
}

#[test]
fn gate_resp_completion() {
    gate("resp_completion");
}

#[test]
fn gate_async_fifo() {
    gate("async_fifo");
}

#[test]
fn gate_axi_read_master() {
    gate("axi_read_master");
}

#[test]
fn gate_axi_write_master() {
    gate("axi_write_master");
}

#[test]
fn gate_axil_split() {
    gate("axil_split");
}

#[test]
fn gate_board_regs() {
    gate("board_regs");
}

#[test]
fn gate_cmac_ctl() {
    gate("cmac_ctl");
}
