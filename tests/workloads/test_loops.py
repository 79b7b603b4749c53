"""The loop profiler: loops found in kernel sources, counted exactly on the PoCL device, the instrumented kernel
still passing the spec's check; the CUDA instrumentation compiles with nvcc."""

import shutil
import subprocess

import numpy as np
import pytest
from conftest import FIXTURES, KERNELS, POCL_PROFILE, run_cli

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.instrument import find_loops, instrument
from gpuprofiler.workloads.loops import profile_loops
from gpuprofiler.workloads.spec import load_spec

TRICKY = """// for (int i = 0; i < 9; ++i) in a comment is not a loop
__kernel void k(int n, __global float *a /* while (1) */, __global int *b)
{
    int i = get_global_id(0);
    if (i >= n) return;
    for (int j = 0; j < 4; ++j)
        for (int k = 0; k < j; ++k) a[i] += 1.0f;   // single-statement bodies, nested
#pragma unroll
    for (int j = 0; j < 3; ++j) { a[i] *= 2.0f; }
    int x = b[i];
    do { x /= 2; } while (x > 0);
    while (x < 5) if (x % 2) x += 3; else x += 1;
    b[i] = x;
}
"""


def test_loops_are_found_with_their_bodies_and_depth():
    loops = find_loops(TRICKY, "k")
    assert [(lp.kind, lp.line, lp.depth, lp.braced) for lp in loops] == [
        ("for", 6, 0, False), ("for", 7, 1, False), ("for", 9, 0, True), ("do", 11, 0, True), ("while", 12, 0, False)]
    assert TRICKY[loops[4].body_start:loops[4].body_end] == "if (x % 2) x += 3; else x += 1;"
    assert TRICKY[loops[3].start:loops[3].end] == "do { x /= 2; } while (x > 0);"


def test_instrumented_source_counts_every_loop_and_exits_through_the_flush():
    inst = instrument(TRICKY, "k", "opencl")
    src = inst.source
    assert inst.slots == 3 * 5 + 1 and "__global ulong *__gp_out" in src
    assert "goto __gp_exit;" in src and "return;" not in src.split("__gp_exit: ;")[0].split("{", 1)[1]
    assert src.count("__gp_c[") >= 2 * 5 and "atom_add(&__gp_out" in src
    assert "#pragma unroll" in src  # the user's own source, directives and all
    with pytest.raises(UserError, match="no kernel function named 'nope'"):
        instrument(TRICKY, "nope", "opencl")


def run(pocl, spec, size):
    return {c.loop.line: (c.entries, c.iterations) for c in profile_loops(pocl, spec, size).loops}


def test_matmul_naive_inner_loop_runs_n_cubed_times(pocl):
    counts = run(pocl, load_spec(KERNELS / "matmul_naive.toml"), 96)
    ((entries, iterations),) = counts.values()
    assert (entries, iterations) == (96 * 96, 96 ** 3)


def test_spmv_inner_loop_runs_nnz_times(pocl):
    spec = load_spec(KERNELS / "spmv_csr.toml")
    counts = run(pocl, spec, 5000)
    ((entries, iterations),) = counts.values()
    nnz = spec.instantiate(5000).names["nnz"]
    assert (entries, iterations) == (5000, nnz)


LOOPS = FIXTURES / "loops"  # collatz (a data-dependent while loop) and unrolled (#pragma unroll), .cl and .cu


def collatz_steps(x):
    s = 0
    while x != 1:
        x = 3 * x + 1 if x % 2 else x // 2
        s += 1
    return s


def test_a_data_dependent_while_loop_is_counted_exactly(pocl, tmp_path):
    counts = run(pocl, load_spec(LOOPS / "collatz.toml"), 1000)
    assert counts == {9: (1000, sum(collatz_steps(x) for x in range(1, 1001)))}
    # the max-plus builder refuses the loop, and takes the device's count instead
    r = run_cli("maxplus", LOOPS / "collatz.toml", "--size", 1000, "--profile", POCL_PROFILE, cwd=tmp_path)
    assert r.returncode == 2 and "--count-loops" in r.stderr
    r = run_cli("maxplus", LOOPS / "collatz.toml", "--size", 1000, "--count-loops", "--profile", POCL_PROFILE,
                "--device", pocl.info.id, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "loop counted on the device: 59.54 iterations per entry; the graph unrolls 60" in r.stdout + r.stderr


def test_a_loop_marked_for_unrolling_is_counted_and_still_checked(pocl):
    assert run(pocl, load_spec(LOOPS / "unrolled.toml"), 10000) == {9: (10000, 80000)}


def test_unrolled_and_barrier_loops_keep_the_reference_check(pocl):
    # bitonic: nested loops with barriers inside; its outputs are checked exactly (rtol 0) after the counted run
    counts = run(pocl, load_spec(KERNELS / "bitonic.toml"), 4096)
    assert list(counts.values()) == [(2048, 2048 * 9), (2048 * 9, 2048 * 45)]


def test_cli_table_and_errors(tmp_path):
    r = run_cli("loops", "kmeans", "--size", 5000, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "for (int f = 0; f < F; ++f)" in r.stdout and " 850000 " in r.stdout  # 5000 x 5 x 34
    r = run_cli("loops", "vadd", "--size", 1024, cwd=tmp_path)
    assert r.returncode == 2 and "no loop" in r.stderr
    r = run_cli("loops", "cg", "--size", 1024, cwd=tmp_path)
    assert r.returncode == 2 and "not an app" in r.stderr


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("source,name", [((FIXTURES / "loops" / "unrolled.cu").read_text(), "unrolled"),
                                         ((FIXTURES / "loops" / "collatz.cu").read_text(), "collatz"),
                                         ((KERNELS / "spmv_csr.cu").read_text(), "spmv_csr"),
                                         ((KERNELS / "matmul_tiled.cu").read_text(), "matmul_tiled")])
def test_cuda_instrumentation_compiles_with_nvcc(tmp_path, source, name):
    inst = instrument(source, name, "cuda")
    path = tmp_path / "k.cu"
    path.write_text(inst.source)
    done = subprocess.run(["nvcc", "--ptx", "-arch=sm_90", "-DTILE=16", "-o", str(tmp_path / "k.ptx"), str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert ".entry " + name in ptx and "atom.global.add.u64" in ptx and "clock64" in inst.source
    assert np.all([f"__gp_c[{3 * i + 1}]" in inst.source for i in range(len(inst.loops))])


def test_a_loop_is_timed_around_its_body_not_inside_it():
    """Where a loop's body is one statement, the body's braces close before the loop's clock is read (they once
    closed after it, which timed each iteration from the loop's start: 49292% of the kernel's cycles)."""
    src = instrument(TRICKY.replace("__kernel", "extern \"C\" __global__").replace("__global ", ""), "k", "cuda").source
    assert "a[i] += 1.0f; } __gp_c[5] += __gp_clock() - __gp_t1; }" in src  # inner body, then the inner loop's time
    assert src.count("__gp_clock()") == 2 * 5 + 2
