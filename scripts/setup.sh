#!/usr/bin/env bash
# Installs what the project needs on a Debian 12 machine, only when missing: Verilator and Yosys (the RTL
# gates and the Verilator models), the C++ toolchain the Verilator models compile with, and tclsh (the
# board flow's Tcl is run against stub Vivado commands).
# The rxe VM harness installs its own packages (sim/vm/build-vm.sh).
set -euo pipefail
need=()
command -v verilator >/dev/null || need+=(verilator)
command -v yosys >/dev/null || need+=(yosys)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
command -v tclsh >/dev/null || need+=(tcl)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing: ${need[*]}. Run: sudo apt-get update && sudo apt-get install -y ${need[*]}" >&2
        exit 1
    fi
    echo "setup: installing ${need[*]} with apt" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null; then
    echo "missing: a Rust toolchain (cargo). Install it with rustup: https://rustup.rs" >&2
    exit 1
fi
