#!/usr/bin/env bash
# The project's two commands (see README.md):
#   ./run.sh demo [ARGS]   the main job: `rnic demo`
#   ./run.sh test          every test of the workspace
# Each installs what it needs first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
cmd=${1:-demo}
[ $# -gt 0 ] && shift
case "$cmd" in
    demo) exec cargo run --release -q -p rnic-sim --bin rnic -- demo "$@" ;;
    test) exec cargo test --workspace "$@" ;;
    *) echo "usage: ./run.sh demo|test" >&2; exit 2 ;;
esac
