#!/usr/bin/env bash
# Run ON THE GPU MACHINE (no internet), from the repository root, with .whl carried along:
#   source scripts/gpu_setup.sh
# Installs the carried wheels into /tmp/site and builds pycuda from its sdist against /usr/local/cuda.
set -eo pipefail
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
export PATH="$CUDA_ROOT/bin:$PATH"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import pycuda.driver" 2>/dev/null; then
    rm -rf /tmp/pycuda-src && mkdir -p /tmp/pycuda-src
    tar -xzf .whl/pycuda-*.tar.gz -C /tmp/pycuda-src --strip-components=1
    (cd /tmp/pycuda-src \
        && python3 configure.py --cuda-root="$CUDA_ROOT" --cudadrv-lib-dir=/usr/lib/x86_64-linux-gnu \
            --cudadrv-lib-dir="$CUDA_ROOT/lib64/stubs" >/tmp/pycuda-configure.log \
        && python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site . \
            >/tmp/pycuda-build.log 2>&1) || { tail -40 /tmp/pycuda-build.log 2>/dev/null; exit 1; }
fi
python3 -c "import pycuda.driver as d; d.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, d.Device(0).name())"
