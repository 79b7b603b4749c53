#!/usr/bin/env bash
# Run ON THE GPU MACHINE from the repository root, .whl carried (scripts/gpu_fetch_wheels.sh): the loop profiler on
# CUDA (counts and clock64 time shares) for the kernels of its acceptance, each run checked against its spec's
# reference; the JSON of each run and the log go to ${OUT:-/tmp/out}.
source scripts/gpu_setup.sh || exit 1
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() {  # name spec size
    python3 -m gpuprofiler loops "$2" --size "$3" --device cuda:0 --json > "$out/loops_$1.json" \
        2>> "$out/loops.log" || echo "$1 failed" >> "$out/loops.log"
    python3 -m gpuprofiler loops "$2" --size "$3" --device cuda:0 2>&1 | tee -a "$out/loops.log"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/loops.log"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/loops.log"
run matmul_naive matmul_naive 1024
run spmv_csr spmv_csr 4194304
run collatz tests/fixtures/loops/collatz.toml 100000
run unrolled tests/fixtures/loops/unrolled.toml 1048576
run matmul_tiled matmul_tiled 1024
run bitonic bitonic 1048576
