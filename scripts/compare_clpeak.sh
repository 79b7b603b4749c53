#!/usr/bin/env bash
# Side by side with clpeak on the same PoCL device, in one run (issue 3's acceptance):
#   best global read bandwidth >= 0.9 x clpeak's best "Global memory bandwidth";
#   launch latency by clpeak's definition (profiling START - QUEUED) within 2x of clpeak's;
#   `calibrate --quick` no slower than a whole clpeak run.
# COLD=1 gives each tool its own empty PoCL kernel cache (POCL_CACHE_DIR), as on a fresh machine, so that
# compiling the kernels counts for both.
# Needs Debian's clpeak and pocl-opencl-icd (apt-get install clpeak pocl-opencl-icd); clpeak runs on OpenCL
# platform 0, so gpuprofiler calibrates the device with the same name (override with DEVICE=opencl:P:D).
set -euo pipefail
cd "$(dirname "$0")/.."
GP=${GP:-gpuprofiler}
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
command -v clpeak >/dev/null || { echo "clpeak is not installed: apt-get install clpeak pocl-opencl-icd" >&2; exit 2; }
cold() { if [ "${COLD:-0}" = 1 ]; then d=$(mktemp -d); POCL_CACHE_DIR=$d "$@"; rm -rf "$d"; else "$@"; fi; }
t0=$(date +%s.%N); cold clpeak -p 0 -d 0 > "$out/clpeak.txt" 2>&1; t1=$(date +%s.%N)
device=${DEVICE:-$($GP devices --json | python3 -c "
import json, sys, re
name = re.search(r'Device: (.*)', open('$out/clpeak.txt').read()).group(1).strip()
print(next(d['id'] for d in json.load(sys.stdin) if d['name'] == name))")}
t2=$(date +%s.%N); cold $GP calibrate --quick --device "$device" -o "$out/profile_quick.json" > "$out/calibrate.txt" 2>&1
t3=$(date +%s.%N)
python3 - "$out" "$t0" "$t1" "$t2" "$t3" <<'PY'
import json, re, sys
out, t0, t1, t2, t3 = sys.argv[1], *map(float, sys.argv[2:])
text = open(f"{out}/clpeak.txt").read()
bw = text.split("Global memory bandwidth")[1].split("\n\n")[0]
clpeak_bw = max(float(v) for v in re.findall(r":\s*([\d.]+)", bw))
clpeak_lat = float(re.search(r"Kernel launch latency\s*:\s*([\d.]+)", text).group(1))
p = json.load(open(f"{out}/profile_quick.json"))
ours_bw = p["bandwidth"]["read_Bps"]["value"] / 1e9
ours_lat = p["launch"]["queue_to_start_s"]["value"] * 1e6
rows = [("best global read bandwidth (GB/s)", clpeak_bw, ours_bw, ours_bw / clpeak_bw, ours_bw >= 0.9 * clpeak_bw),
        ("kernel launch latency (us)", clpeak_lat, ours_lat, ours_lat / clpeak_lat,
         0.5 <= ours_lat / clpeak_lat <= 2.0),
        ("wall time (s): clpeak vs calibrate --quick", t1 - t0, t3 - t2, (t3 - t2) / (t1 - t0), t3 - t2 <= t1 - t0)]
print(f"device: {p['device']['name']} ({p['device']['id']}, {p['device']['driver']})")
print(f"{'figure':<45} {'clpeak':>10} {'gpuprofiler':>12} {'ratio':>7}  pass")
for name, a, b, r, ok in rows:
    print(f"{name:<45} {a:>10.2f} {b:>12.2f} {r:>7.2f}  {'yes' if ok else 'NO'}")
PY
echo "raw outputs in $out"
