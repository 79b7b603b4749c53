#!/usr/bin/env bash
# Run ON THE GPU MACHINE from the repository root, with .whl carried (scripts/gpu_fetch_wheels.sh, plus
# `pip download distributed` into .whl for Python 3.12): the Dask path on the real GPU(s): a fleet calibration
# through a LocalCluster (a worker per GPU), `profile fleet`, a validation of three builtin kernels on the cluster,
# and the scheduling-overhead benchmark. Everything lands in /tmp/gpu-cluster, packed as $OUT/gpu-cluster.tar.gz.
set -u
source scripts/gpu_setup.sh || exit 1
out=/tmp/gpu-cluster
mkdir -p "$out"
{ date -u +%FT%TZ; python3 -c "import distributed; print('distributed', distributed.__version__)"; \
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } | tee "$out/machine.txt"
python3 -m gpuprofiler devices 2>&1 | tee "$out/devices.txt"
step() { local name=$1; shift; echo "== $name: $*"; local t0=$SECONDS; "$@" > "$out/$name.txt" 2>&1; local rc=$?; \
         echo "rc $rc in $((SECONDS - t0)) s" | tee -a "$out/$name.txt"; grep -v "INFO\|WARNING\|warnings.warn" \
         "$out/$name.txt" | tail -${TAIL:-8}; }
step calibrate python3 -m gpuprofiler calibrate --cluster local --all-devices --quick -o "$out/fleet"
step profile_fleet python3 -m gpuprofiler profile fleet "$out/fleet"
prof=$(ls "$out"/fleet/*/*/profile.json | head -1)
TAIL=14 step validate python3 -m gpuprofiler validate --cluster local --items vadd,copy,scale --quick --profile "$prof" \
    -o "$out/validate"
step overhead python3 benchmarks/cluster_overhead.py --workers 1
grep -c "context was still active" "$out"/*.txt | tee "$out/aborts.txt"
tar -czf "${OUT:-/tmp}/gpu-cluster.tar.gz" -C /tmp gpu-cluster
