#!/usr/bin/env bash
# Run ON THE GPU MACHINE (no internet), from the repository root, with .whl carried along
# (fill it here first with scripts/gpu_fetch_wheels.sh):
#   source scripts/gpu_setup.sh || exit 1
# Installs the carried wheels into $GPU_SITE (default /tmp/site), builds pycuda from its sdist against
# $CUDA_ROOT (default /usr/local/cuda) unless a pycuda wheel built earlier is carried in .whl, and puts both
# and this checkout on PYTHONPATH. The built wheel is left in /tmp/pycuda-dist: copy it into .whl
# to skip the build (about a minute on 16 cores) on the next fresh machine. Shell options are left alone.
_gpu_setup() {
    export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
    export PATH="$CUDA_ROOT/bin:$PATH"
    local site=${GPU_SITE:-/tmp/site}
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        .whl/*.whl || return 1
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    if ! python3 -c "import pycuda.driver" 2>/dev/null; then
        local libdirs="$CUDA_ROOT/lib64/stubs,$CUDA_ROOT/lib64,/usr/local/nvidia/lib64,/usr/lib/x86_64-linux-gnu"
        rm -rf /tmp/pycuda-src /tmp/pycuda-dist && mkdir -p /tmp/pycuda-src || return 1
        tar -xzf .whl/pycuda-*.tar.gz -C /tmp/pycuda-src --strip-components=1 || return 1
        (cd /tmp/pycuda-src \
            && python3 configure.py --cuda-root="$CUDA_ROOT" --cudadrv-lib-dir="$libdirs" >/tmp/pycuda-configure.log \
            && python3 setup.py -q build_ext -j "$(nproc)" bdist_wheel -d /tmp/pycuda-dist >/tmp/pycuda-build.log 2>&1 \
            && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/pycuda-dist/*.whl) \
            || { tail -40 /tmp/pycuda-build.log 2>/dev/null; return 1; }
    fi
    export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 -c "import pycuda.driver as d; d.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, d.Device(0).name())"
}
_gpu_setup
