//! Every test of the Verilator models, the CLI and the rxe VM lab, as one test binary: `cargo test` runs test
//! binaries one after the other, each to its slowest test, so one binary per file left a core idle behind
//! every long test and linked the models twenty times. Each file below is a module of the suite; a test's
//! name starts with its file's (`cargo test -p rnic-sim --test suite -- rxe_perftest::`).
//!
//! libtest starts the tests in name order, as many at a time as there are cores: the serial chain of rxe
//! pingpong runs (about three minutes, one VM at a time) is named to start first, so that the other core
//! works through the rest beside it instead of both waiting for it at the end.

#[path = "rxe_pingpong.rs"]
mod a_rxe_pingpong;
mod board_system;
mod cases;
mod cli;
mod icrc_equivalence;
mod key_cache_equivalence;
mod qp_context_equivalence;
mod rnic_access;
mod rnic_equivalence;
mod rnic_faults;
mod rnic_fuzz;
mod rnic_pair;
mod rnic_rules;
mod rnic_system;
mod rx_equivalence;
mod rxe_bridge;
mod rxe_cm;
mod rxe_mw;
mod rxe_perftest;
mod rxe_vm;
mod stage_equivalence;
mod tx_equivalence;
