#!/usr/bin/env bash
# Run HERE (a machine with PyPI): fetch pycuda's sdist and the wheels it needs into .whl/, plus gpuprofiler's own
# needs that the GPU image lacks (pycparser, pcpp), for a GPU machine that has no internet (Python 3.12, x86-64).
# Carry .whl with the working tree and run scripts/gpu_setup.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl .git/info
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
version=${PYCUDA_VERSION:-2026.1}
# pip cannot download an sdist without building its metadata (which needs CUDA); take the file PyPI lists.
url=$(curl -fsSL "https://pypi.org/pypi/pycuda/json" | python3 -c "import json,sys; \
print(next(u['url'] for u in json.load(sys.stdin)['releases']['$version'] if u['packagetype'] == 'sdist'))")
curl -fsS -o ".whl/$(basename "$url")" "$url"
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
py=(--python-version 3.12 --implementation cp)
python3 -m pip download --no-deps --only-binary=:all: "${py[@]}" "${plat[@]}" -d .whl \
    pytools platformdirs mako siphash24 typing_extensions pycparser pcpp
ls -l .whl
