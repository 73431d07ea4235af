#!/usr/bin/env bash
# Where a clean unmount's time goes on the GPU machine (issue 67, part 2):
# probe.py on the cuda backend, alone and six side by side (as make
# test-gpu's suites), survive=on (the keeper, its standby's CUDA context)
# and survive=off; then the host backend for comparison. Every table in
# $OUT/summary.txt, every step of every unmount in $OUT/*/rounds.csv.
# Run from the repository root, after make, as root:
#   OUT=/tmp/unmount-probe bench/probes/unmount/run_gpu.sh
set -u
OUT=${OUT:?set OUT to a directory for the results}
mkdir -p "$OUT"
probe() { # NAME ARGS...
	local name=$1
	shift
	echo "== $name" | tee -a "$OUT/summary.txt"
	python3 bench/probes/unmount/probe.py --out "$OUT/$name" "$@" 2>&1 | tee -a "$OUT/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv >>"$OUT/summary.txt" 2>&1
probe cuda-on-alone --backend cuda --survive on --rounds 10
probe cuda-off-alone --backend cuda --survive off --rounds 10
probe cuda-on-6 --backend cuda --survive on --rounds 5 --parallel 6
probe cuda-off-6 --backend cuda --survive off --rounds 5 --parallel 6
probe host-on-alone --backend host --survive on --rounds 10
echo "all in $OUT/summary.txt"
