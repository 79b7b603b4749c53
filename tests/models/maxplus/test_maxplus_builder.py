"""The graph builder on real kernel sources, the models' numbers, and the ``maxplus`` command."""

import json
import math
import textwrap

import numpy as np
import pytest
from conftest import POCL_PROFILE, run_cli

from gpuprofiler.errors import UserError
from gpuprofiler.models.maxplus.builder import build, build_spec
from gpuprofiler.models.maxplus.graph import graph_times, height
from gpuprofiler.models.maxplus.models import parameters, predict
from gpuprofiler.profile.file import load_profile
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.spec import load_spec

PROFILE = POCL_PROFILE


def built(name, size=None, backend="opencl"):
    spec = load_spec(resolve(name))
    inst = spec.instantiate(size or spec.small[0])
    return build_spec(inst, backend), inst


def accesses(kernel, kind):
    return [a for g in kernel.fragments for a in g.arcs if a.kind == kind]


@pytest.mark.parametrize("name,reads,writes,ops", [
    ("copy", 1, 1, 0), ("scale", 1, 1, 1), ("vadd", 2, 1, 1), ("saxpy", 2, 1, 1), ("triad", 2, 1, 1),
    ("transpose_naive", 1, 1, 0), ("stencil5", 4, 1, 4)])
@pytest.mark.parametrize("backend", ["opencl", "cuda"])
def test_builtin_memory_kernels(name, reads, writes, ops, backend):
    kernel, _ = built(name, backend=backend)
    assert len(kernel.fragments) == 1
    assert len(accesses(kernel, "read")) == reads and len(accesses(kernel, "write")) == writes
    assert len(kernel.fragments[0].loops) == ops


def test_access_patterns():
    kernel, inst = built("transpose_naive", 4096)
    (read,), (write,) = accesses(kernel, "read"), accesses(kernel, "write")
    assert read.info["pattern"] == "unit"
    assert write.info["pattern"] == "strided" and write.info["stride"] == inst.scalars["n"] == 64
    kernel, _ = built("vadd")
    assert {a.info["pattern"] for a in accesses(kernel, "read") + accesses(kernel, "write")} == {"unit"}


def test_cache_marks_neighbour_reads_as_repeated():
    kernel, _ = built("stencil5")
    assert [a.info["first"] for a in accesses(kernel, "read")] == [True, False, False, False]


def test_barriers_split_fragments():
    kernel, _ = built("transpose_tiled", 64 * 64)
    assert len(kernel.fragments) == 2
    assert [a.kind for a in kernel.fragments[0].arcs] == ["read", "local_write"]
    assert [a.kind for a in kernel.fragments[1].arcs] == ["local_read", "write"]


def test_fixed_loop_is_unrolled_from_the_launch_arguments():
    kernel, inst = built("matmul_naive", 32)
    assert len(accesses(kernel, "read")) == 2 * inst.scalars["n"]
    assert height(kernel.fragments[0]) > 2 * 32


def test_data_dependent_loop_without_its_data_is_refused_naming_the_line():
    spec = load_spec(resolve("spmv_csr"))
    inst = spec.instantiate(4096)
    source = spec.sources["opencl"].read_text()
    with pytest.raises(UserError, match=r"spmv_csr.cl:\d+: the loop's trip count depends on data"):
        build(source, "spmv_csr", inst.scalars, inst.local_size, "spmv_csr.cl", global_size=inst.global_size)


@pytest.mark.parametrize("backend", ["opencl", "cuda"])
def test_data_dependent_loop_follows_the_specs_inputs(backend):
    """spmv_csr's row loop runs rowptr[row+1] - rowptr[row] = k times: counted from the spec's range input."""
    kernel, inst = built("spmv_csr", 4096, backend)
    k = int(inst.names["k"])
    reads = accesses(kernel, "read")
    assert sum(a.info["array"] == "vals" for a in reads) == k
    assert sum(a.info["array"] == "x" for a in reads) == k
    assert any(f"{k} passes on average" in note for note in kernel.notes)
    # a lane walks its own row: each request touches one sector per lane, the group's L1 keeps the rest
    vals = [a for a in reads if a.info["array"] == "vals"]
    assert all(a.info["sectors"] == 32 for a in vals)
    assert kernel.l1_miss["vals"] == pytest.approx(1 / k)


def test_counted_loop_trip_counts_are_exact():
    from gpuprofiler.kernelcode.interpret import _trips

    start, bound = np.array([0, 5, 3, 10]), np.array([8, 5, 4, 2])
    assert _trips(start, bound, "<", 1).tolist() == [8, 0, 1, 0]
    assert _trips(start, bound, "<=", 2).tolist() == [5, 1, 1, 0]
    assert _trips(bound, start, ">", -3).tolist() == [3, 0, 1, 0]
    assert _trips(start, bound, "<", -1) is None  # never ends where start < bound


def test_varying_row_lengths_unroll_the_mean():
    src = """
    __kernel void rows(int n, __global const int *len, __global const float *x, __global float *y) {
        int i = get_global_id(0);
        float acc = 0.0f;
        for (int p = 0; p < len[i]; p++)
            acc += x[p];
        y[i] = acc;
    }"""
    lengths = lambda idx: (np.asarray(idx) % 4) * 2  # noqa: E731 - 0, 2, 4, 6: mean 3
    kernel = build(src, "rows", {"n": 4096}, [64], "rows.cl", global_size=[4096], contents={"len": lengths})
    assert sum(a.info["array"] == "x" for a in accesses(kernel, "read")) == 3
    assert any("3 passes on average" in note and "min 0, max 6" in note for note in kernel.notes)


def test_gather_through_an_index_array():
    src = """
    __kernel void gather(int n, __global const int *idx, __global const float *x, __global float *y) {
        int i = get_global_id(0);
        y[i] = x[idx[i]];
    }"""
    kernel = build(src, "gather", {"n": 1024}, [64])
    patterns = {a.info["array"]: a.info["pattern"] for a in accesses(kernel, "read")}
    assert patterns == {"idx": "unit", "x": "gather"}


def test_unsupported_code_names_the_line():
    src = "__kernel void f(__global float *a) {\n  int i = get_global_id(0);\n  while (a[i] > 0) a[i] -= 1;\n}"
    with pytest.raises(UserError, match=r"k.cl:3: the loop's trip count depends on data"):
        build(src, "f", {}, [64], "k.cl")


def test_serial_model_numbers_follow_the_formula():
    kernel, inst = built("vadd", 1 << 20)
    prof = load_profile(PROFILE)
    p = parameters(prof, kernel, n_override=4)
    r = predict(kernel, p, math.prod(inst.global_size), inst.size, "serial", "sequential")
    v = p.values
    dt, dT = 4 * v["dt_per_byte"], 4 * v["dT_per_byte"]
    batch = v["T"] + 3 * dT + v["tau"] + v["t"] + 7 * dt
    assert r.details["work_s"] == pytest.approx(math.ceil((1 << 20) / 4) * batch, rel=1e-12)
    d = r.details  # the launch: fixed overhead, then dispatch overlapping the work
    assert r.seconds == pytest.approx(d["launch_fixed_s"] + max(d["dispatch_s"], d["work_s"]), rel=1e-12)
    piped = predict(kernel, p, math.prod(inst.global_size), inst.size, "serial")
    per = max(4 * (2 * dt + dT), 4 * v["theta"])
    assert piped.details["work_s"] == pytest.approx(((1 << 20) // 4 - 1) * per + batch, rel=1e-12)


def test_interval_is_the_model_at_the_ends_of_the_profiles_intervals():
    kernel, inst = built("vadd", 1 << 20)
    p = parameters(load_profile(PROFILE), kernel, n_override=4)
    assert {"t", "T", "dt_per_byte"} <= set(p.bounds)  # measured with intervals
    lo, hi = p.bounds["dt_per_byte"]
    bw = load_profile(PROFILE).entry("bandwidth.read_Bps")["interval"]
    assert (lo, hi) == pytest.approx((1 / bw[1], 1 / bw[0]), rel=1e-12)  # a bandwidth's interval inverted
    r = predict(kernel, p, math.prod(inst.global_size), inst.size, "serial")
    ends = [predict(kernel, p.at(e), math.prod(inst.global_size), inst.size, "serial").details["work_s"]
            for e in ("low", "high")]
    lo_w, hi_w = r.details["work_interval_s"]
    assert lo_w == pytest.approx(min(ends)) and hi_w == pytest.approx(max(ends)) and lo_w < r.details["work_s"] < hi_w
    assert r.low < r.seconds < r.high  # with the launch figures' own intervals around them
    bare = type(p)(p.values, p.n, p.sources, hw=p.hw)  # no intervals: the work's interval is the work itself
    b = predict(kernel, bare, math.prod(inst.global_size), inst.size, "serial")
    assert b.details["work_interval_s"] == [b.details["work_s"]] * 2


def write_user_kernel(tmp_path):
    """A kernel spec written only from the README: a new kernel, a fixed-length loop, a math function."""
    (tmp_path / "hypot4.cl").write_text(textwrap.dedent("""
        __kernel void hypot4(int n, __global const float *a, __global const float *b, __global float *c)
        {
            int i = get_global_id(0);
            float acc = 0.0f;
            for (int k = 0; k < 4; k++)
                acc += a[i] * b[i];
            c[i] = sqrt(acc);
        }"""))
    (tmp_path / "hypot4.toml").write_text(textwrap.dedent("""
        name = "hypot4"
        kernel = "hypot4"
        size = "n"
        small = [1048576]
        [source]
        opencl = "hypot4.cl"
        [[args]]
        name = "n"
        dtype = "int32"
        value = "n"
        [[args]]
        name = "a"
        dtype = "float32"
        shape = "n"
        [[args]]
        name = "b"
        dtype = "float32"
        shape = "n"
        [[args]]
        name = "c"
        dtype = "float32"
        shape = "n"
        output = true
        [launch]
        global = ["n"]
        local = [64]
        [[check]]
        got = "c"
        expect = "sqrt(4 * a * b)"
        """))
    return tmp_path / "hypot4.toml"


def test_cli_user_kernel_json(tmp_path):
    spec = write_user_kernel(tmp_path)
    r = run_cli("maxplus", spec, "--profile", PROFILE, "--size", 1 << 20, "--model", "cache", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"predicted_s", "model", "height", "n"} <= set(out)
    assert out["model"] == "cache" and out["n"] >= 1 and out["predicted_s"] > 0
    assert out["height"] >= 4 + 2  # read, 4 multiplies and adds unrolled, sqrt, write


def test_cli_explain_reproduces_z3():
    r = run_cli("maxplus", "vadd", "--profile", PROFILE, "--size", 1 << 20, "--model", "serial",
                "--batches", "sequential", "--explain")
    assert r.returncode == 0, r.stderr
    assert "<1_o, Z^3 (.) 1_i> = T + tau + t + (2n-1)*dt + (n-1)*dT" in r.stdout
    assert "time: launch + ceil(N/n)*(T + tau + t + (2n-1)*dt + (n-1)*dT)" in r.stdout
    row2 = next(line for line in r.stdout.splitlines() if line.strip().startswith("2 ")).split()
    assert row2[1] == "." and "tau" in row2


@pytest.mark.parametrize("example,expected", [("fork", "time: max{t1, t2}"), ("chain", "time: t1 + t2")])
def test_cli_table1_examples(example, expected):
    r = run_cli("maxplus", "--example", example, "--model", "naive")
    assert r.returncode == 0, r.stderr
    assert expected in r.stdout


def test_cli_refuses_bad_input_cleanly(tmp_path):
    (tmp_path / "drain.cl").write_text(
        "__kernel void drain(__global float *a) {\n  int i = get_global_id(0);\n  while (a[i] > 0) a[i] -= 1;\n}\n")
    (tmp_path / "drain.toml").write_text(textwrap.dedent("""
        name = "drain"
        kernel = "drain"
        size = "n"
        [source]
        opencl = "drain.cl"
        [[args]]
        name = "a"
        dtype = "float32"
        shape = "n"
        init = "random"
        output = true
        [launch]
        global = ["n"]
        """))
    r = run_cli("maxplus", tmp_path / "drain.toml", "--profile", PROFILE, "--size", 1024)
    assert r.returncode == 2 and "drain.cl:3" in r.stderr and "depends on data" in r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli("maxplus", "vadd", "--profile", PROFILE, "--size", 1024, "--model", "magic")
    assert r.returncode == 2 and "unknown --model" in r.stderr
    r = run_cli("maxplus", "vadd", "--profile", tmp_path / "none.json", "--size", 1024)
    assert r.returncode == 2 and "profile not found" in r.stderr


def test_math_on_the_work_items_index_is_the_work_items_work():
    """A twiddle factor computed from the work-item's index (an FFT stage's sincos of k / p) is work each
    work-item does: operations on its path; the same computed from the kernel's arguments alone is hoisted."""
    src = """
    __kernel void twiddle(__global float *y, int p, float a) {
        int i = get_global_id(0);
        int k = i & (p - 1);
        float c;
        float s = sincos(-M_PI_F * (float)k / (float)p, &c);
        float u = native_exp((float)p * a);
        y[i] = s * c + u;
    }"""
    kernel = build(src, "twiddle", {"p": 64, "a": 0.5}, [64])
    (g,) = kernel.fragments
    ops = sorted(info["op"] for info in g.loops.values())
    assert ops == ["div", "fma", "mul", "sin"]  # -pi * k, / p, sincos, s * c + u: not the uniform exp
    ones = np.zeros(g.size)
    ones[list(g.loops)] = 1.0
    # each operation a unit of time, moves and accesses none: the four in one chain from the work-item's start
    assert graph_times(g, np.zeros(len(g.arcs)), ones)[0] == 4.0
