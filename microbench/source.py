"""One kernel source for both APIs: a prelude of macros so microbenchmarks are written once.

Kernels use ``KERNEL``, ``GLOBAL``, ``LOCAL_ARRAY(type, name, n)``, ``GID``, ``GSIZE``,
``LID``, ``LSIZE``, ``GROUP``, ``BARRIER`` and the integer types ``idx_t`` / ``u32``.
"""

from __future__ import annotations

from typing import Any

_OPENCL = """\
#define KERNEL __kernel
#define GLOBAL __global
#define LOCAL_ARRAY(type, name, n) __local type name[n]
#define GID ((long)get_global_id(0))
#define GSIZE ((long)get_global_size(0))
#define LID ((int)get_local_id(0))
#define LSIZE ((int)get_local_size(0))
#define GROUP ((long)get_group_id(0))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define VOLATILE_GLOBAL volatile __global
typedef long idx_t;
typedef uint u32;
"""

_CUDA = """\
#define KERNEL extern "C" __global__
#define GLOBAL
#define LOCAL_ARRAY(type, name, n) __shared__ type name[n]
#define GID ((long long)blockIdx.x * blockDim.x + threadIdx.x)
#define GSIZE ((long long)gridDim.x * blockDim.x)
#define LID ((int)threadIdx.x)
#define LSIZE ((int)blockDim.x)
#define GROUP ((long long)blockIdx.x)
#define BARRIER __syncthreads()
#define VOLATILE_GLOBAL volatile
typedef long long idx_t;
typedef unsigned int u32;
"""


def prelude(kind: str) -> str:
    return {"opencl": _OPENCL, "cuda": _CUDA}[kind]


def build(backend: Any, body: str, name: str, defines: dict[str, Any] | None = None):
    """Compile ``body`` behind the backend's prelude and return kernel ``name``."""
    return backend.compile(prelude(backend.kind) + body, name, defines)


VECTOR_WIDTHS = {"opencl": (1, 2, 4, 8, 16), "cuda": (1, 2, 4)}


def vec_type(kind: str, width: int) -> str:
    return "float" if width == 1 else f"float{width}"


def components(kind: str, width: int) -> list[str]:
    """Component accessors of a float vector: ``.s0 …`` in OpenCL, ``.x .y .z .w`` in CUDA."""
    if width == 1:
        return [""]
    if kind == "cuda":
        return [f".{c}" for c in "xyzw"[:width]]
    return [f".s{c}" for c in "0123456789abcdef"[:width]]
