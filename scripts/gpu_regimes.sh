#!/usr/bin/env bash
# Run ON THE GPU MACHINE from the repository root, .whl carried (scripts/gpu_fetch_wheels.sh): a quick calibration;
# the matrix products from launch-bound small sizes (32..128) to 1024, as the H100's committed sweeps have them;
# issue 16's regime kernels and kernels of the PolyBench family from their spec's small sizes to their targets, each
# target measured (scripts/compare_extrapolation.py). Everything goes to ${OUT:-/tmp/out}; measurements are written
# as they are taken, so a run cut off keeps what it measured.
source scripts/gpu_setup.sh || exit 1
out=${OUT:-/tmp/out}
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader
  date -u +%Y-%m-%dT%H:%M:%SZ; git rev-parse HEAD 2>/dev/null; python3 --version; } | tee "$out/machine.txt"
python3 -m gpuprofiler calibrate --device cuda:0 --quick -o "$out/profile.json" 2>&1 | tee "$out/calibrate.txt"
for k in matmul_naive matmul_tiled; do
    python3 -m gpuprofiler extrapolate "kernels/$k.toml" --device cuda:0 --profile "$out/profile.json" \
        --small 32,48,64,80,96,128 --target 1024 --check --budget 0.5 --no-extrap -o "$out/launch_bound.jsonl" \
        2>&1 | tee -a "$out/launch_bound.txt"
done
python3 scripts/compare_extrapolation.py --device cuda:0 --profile "$out/profile.json" --out "$out/regimes" \
    --budget 0.5 --only "${REGIMES:-matmul_naive,transpose_naive,transpose_tiled,spmv_csr}" 2>&1 | tee "$out/regimes.txt"
python3 scripts/compare_extrapolation.py --device cuda:0 --profile "$out/profile.json" --out "$out/polybench" \
    --budget 0.5 --only "${POLYBENCH:-gemm,mvt,syrk,conv2d,gesummv,covariance}" 2>&1 | tee "$out/polybench.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/machine.txt"
