#!/usr/bin/env bash
# Run HERE (a machine with PyPI): fetch pycuda's sdist and the pure-Python/binary wheels it needs into .whl/,
# for a GPU machine that has no internet (Python 3.12, x86-64). Carry .whl with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
py=(--python-version 3.12 --implementation cp)
python3 -m pip download --no-deps --no-binary=:all: -d .whl "pycuda==${PYCUDA_VERSION:-2025.1.2}"
python3 -m pip download --no-deps --only-binary=:all: "${py[@]}" "${plat[@]}" -d .whl \
    pytools platformdirs mako siphash24 typing_extensions
ls -l .whl
