#!/usr/bin/env bash
# Regenerate the PTX fixtures in tests/fixtures/ptx with nvcc (sm_90): every builtin kernel (kernels/*.cu, with
# its spec's -D defines), the apps' kernels (kernels/apps/*.cu, -DLOCAL=256 as the apps compile them) and the
# gather kernel of the divergence tests. Each fixture's first line records the source's sha256, the architecture
# and the defines, so `gpuprofiler pipeline` can use it in place of nvcc when they match.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
command -v nvcc >/dev/null || { echo "nvcc not found: put the CUDA toolkit's bin on PATH" >&2; exit 2; }
"$PY" - <<'PYEOF'
import math
from pathlib import Path

from gpuprofiler.models.pipeline.ptx_source import make_fixture
from gpuprofiler.workloads.spec import load_spec

out = Path("tests/fixtures/ptx")
arch = "sm_90"
done = set()
for toml in sorted(Path("kernels").glob("*.toml")):
    spec = load_spec(toml)
    cu = spec.sources.get("cuda")
    if cu is None:
        continue
    size = (spec.small or spec.target or [1024])[0]
    defines = spec.instantiate(size).defines
    print(make_fixture(cu, out / f"{cu.stem}.ptx", arch, defines))
    done.add(cu.resolve())
for cu in sorted(Path("kernels").glob("*.cu")):
    if cu.resolve() not in done:
        print(make_fixture(cu, out / f"{cu.stem}.ptx", arch, {}))
for cu in sorted(Path("kernels/apps").glob("*.cu")):
    print(make_fixture(cu, out / f"apps_{cu.stem}.ptx", arch, {"LOCAL": 256}))
print(make_fixture(out / "gather.cu", out / "gather.ptx", arch, {}))
PYEOF
