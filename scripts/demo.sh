#!/usr/bin/env bash
# The demo: sets everything up on a fresh machine, then redistributes a 256 MiB
# float32 field across 2 and 4 ranks against raw MPI_Alltoall (scripts/bench.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/bench.sh redistribute "$@"
echo "demo: results in $(pwd)/bench-redistribute.json"
