"""PTX in: a ``.ptx`` file, a ``.cu`` compiled by nvcc (or NVRTC), or a committed fixture.

A ``.cu`` is compiled with ``nvcc --ptx -arch=sm_XX -DNAME=VALUE ...``; where nvcc is missing, NVRTC
(``libnvrtc``) is tried through ctypes. A fixture under ``tests/fixtures/ptx`` is used instead when its
header records the same source hash, architecture and defines (so results are reproducible, and a
machine without the CUDA toolkit can still analyse the builtin kernels). ``ptxas -v``, where present,
gives the real register count per thread for the occupancy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError
from gpuprofiler.textfile import read_text
from gpuprofiler.workloads.builtin import kernels_dir

FIXTURE_TAG = "// gpuprofiler-ptx-fixture"
# in a source checkout: the repository root is three levels above this file (gpuprofiler/models/pipeline/)
REPO_FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "ptx"
MAX_PTX_BYTES = 64 << 20      # a kernel's PTX is KiB to a few MiB: a larger file is refused before it is read
MAX_SOURCE_BYTES = 16 << 20   # a .cu source


@dataclass
class PtxSource:
    """PTX text and how it was obtained."""

    text: str
    origin: str
    how: str


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_ROOT"), os.environ.get("CUDA_PATH"),
                 "/usr/local/cuda"):
        if root and (Path(root) / "bin" / name).is_file():
            return str(Path(root) / "bin" / name)
    return None


def _shown(path: Path) -> str:
    """``path`` relative to the working directory where it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def nvcc_path() -> str | None:
    return _tool("nvcc")


def ptxas_path() -> str | None:
    return _tool("ptxas")


def _define_flags(defines: dict[str, Any] | None) -> list[str]:
    out = []
    for k, v in sorted((defines or {}).items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)):
            raise UserError(f"define {str(k)[:80]!r}: not a C identifier (a define is -DNAME=VALUE, never an option)")
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        out.append(f"-D{k}={v}")
    return out


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fixture_header(path: Path, arch: str, defines: dict[str, Any] | None) -> str:
    flags = " ".join(_define_flags(defines)) or "-"
    return f"{FIXTURE_TAG} source={path.name} sha256={source_hash(path)} arch={arch} defines={flags}"


def find_fixture(path: Path, arch: str, defines: dict[str, Any] | None, folder: Path = REPO_FIXTURES) -> Path | None:
    """A committed PTX fixture made from exactly this source, architecture and defines, if any."""
    if not folder.is_dir():
        return None
    want = fixture_header(path, arch, defines)
    for cand in sorted(folder.glob("*.ptx")):
        with cand.open(encoding="utf-8", errors="replace") as fh:
            if fh.readline(4096).rstrip("\n") == want:
                return cand
    return None


def compile_nvcc(path: Path, arch: str, defines: dict[str, Any] | None = None) -> str:
    """``nvcc --ptx``; a failed compile is a UserError with nvcc's log."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise UserError("nvcc not found (put the CUDA toolkit's bin on PATH or set CUDA_HOME)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / (path.stem + ".ptx")
        cmd = [nvcc, "--ptx", f"-arch={arch}", *_define_flags(defines), str(path), "-o", str(out)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UserError(f"nvcc failed to run: {exc}") from None
        if done.returncode != 0 or not out.is_file():
            raise UserError(f"{path}: nvcc --ptx failed:\n{(done.stderr or done.stdout).strip()}")
        return out.read_text()


def compile_nvrtc(source: str, name: str, arch: str, defines: dict[str, Any] | None = None) -> str:
    """PTX through NVRTC (libnvrtc via ctypes); a UserError when the library is missing or the compile fails."""
    libname = ctypes.util.find_library("nvrtc")
    candidates = [libname] if libname else []
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            candidates += [str(p) for p in sorted((Path(root) / "lib64").glob("libnvrtc.so*"))]
    lib = None
    for cand in candidates:
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError:
            continue
    if lib is None:
        raise UserError("NVRTC (libnvrtc) not found")
    prog = ctypes.c_void_p()
    src = source.encode()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, name.encode(), 0, None, None) != 0:
        raise UserError("nvrtcCreateProgram failed")
    opts = [f"--gpu-architecture=compute_{arch.split('_')[1]}".encode()] + [f.encode() for f in _define_flags(defines)]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    status = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if status != 0:
        raise UserError(f"{name}: NVRTC failed:\n{log.value.decode(errors='replace').strip()}")
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, ptx)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.value.decode()


def load_ptx(path: str | Path, arch: str = "sm_90", defines: dict[str, Any] | None = None,
             use_fixture: bool = True) -> PtxSource:
    """PTX for a ``.ptx`` or ``.cu`` file: matching fixture, else nvcc, else NVRTC; else a clear UserError."""
    path = Path(path)
    if path.suffix == ".ptx":  # read as bytes: not UTF-8 text is refused with the line where it stops being text
        return PtxSource(read_text(path, "PTX file", MAX_PTX_BYTES), str(path), f"file {_shown(path)}")
    if path.suffix != ".cu":
        raise UserError(f"{path}: expected a .cu, .ptx or kernel spec (.toml)")
    text = read_text(path, "CUDA source", MAX_SOURCE_BYTES)
    if use_fixture:
        fix = find_fixture(path, arch, defines)
        if fix is not None:
            return PtxSource(read_text(fix, "PTX file", MAX_PTX_BYTES), str(path),
                             f"fixture {_shown(fix)} (same source sha256, arch and defines)")
    if nvcc_path() is not None:
        flags = " ".join(_define_flags(defines))
        return PtxSource(compile_nvcc(path, arch, defines), str(path), f"nvcc --ptx -arch={arch} {flags}".strip())
    try:
        return PtxSource(compile_nvrtc(text, path.name, arch, defines), str(path), "NVRTC")
    except UserError as exc:
        raise UserError(f"{path}: cannot make PTX: nvcc is not installed and {exc}; install the CUDA toolkit "
                        "or give the kernel's .ptx") from None


def make_fixture(path: str | Path, out: str | Path, arch: str = "sm_90", defines: dict[str, Any] | None = None) -> Path:
    """Compile ``path`` with nvcc and write the PTX with a header that :func:`find_fixture` matches."""
    path, out = Path(path), Path(out)
    text = compile_nvcc(path, arch, defines)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(fixture_header(path, arch, defines) + "\n" + text)
    return out


@lru_cache(maxsize=128)
def ptxas_info(ptx_text: str, kernel: str, arch: str) -> dict[str, int] | None:
    """Registers per thread and static shared memory ptxas allocates for ``kernel``; None without ptxas. Run once
    per PTX text, kernel and arch (every size and launch of a kernel shares it); read-only to callers."""
    ptxas = ptxas_path()
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx_text)
        try:
            done = subprocess.run([ptxas, f"-arch={arch}", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return None
    if done.returncode != 0:
        return None
    current = None
    for line in (done.stderr + done.stdout).splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current == kernel:
            smem = re.search(r"(\d+) bytes smem", line)
            return {"registers": int(m.group(1)), "smem": int(smem.group(1)) if smem else 0}
    return None


def cu_source_for_ptx(path: Path, text: str) -> Path | None:
    """The .cu a PTX file was made from: named by a fixture header (same sha256), or beside it with its stem."""
    first = text.split("\n", 1)[0]
    m = re.match(re.escape(FIXTURE_TAG) + r" source=(\S+) sha256=(\w+)", first)
    if m:
        for folder in (path.parent, kernels_dir(), kernels_dir() / "apps"):
            cand = folder / m.group(1)
            if cand.is_file() and source_hash(cand) == m.group(2):
                return cand
    cand = path.with_suffix(".cu")
    return cand if cand.is_file() else None


def cu_parameters(source: str, kernel: str) -> list[tuple[str, bool]] | None:
    """Names of a CUDA kernel's parameters (and whether each is a pointer), from its signature in the .cu."""
    m = re.search(r"__global__\s+(?:[\w\s]*?\s)?void\s+" + re.escape(kernel) + r"\s*\(([^)]*)\)", source)
    if not m:
        return None
    params = []
    for part in m.group(1).split(","):
        part = part.strip()
        if not part:
            continue
        name = re.findall(r"[A-Za-z_]\w*", part.split("=")[0])
        if not name:
            return None
        params.append((name[-1], "*" in part or "[" in part))
    return params
