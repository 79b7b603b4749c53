"""Atomics in the max-plus model: an atomic read-modify-write is its own operation, priced at the profile's atomic
figures, kept out of a CPU's vector lanes, and contended by the share of its lines that other work-groups hit."""

import pytest

from gpuprofiler.models.maxplus.builder import build
from gpuprofiler.models.maxplus.models import op_names, parameters, vector_lanes
from gpuprofiler.profile.file import Profile, entry

HIST = """__kernel void hist(int n, __global const int *x, __global int *bins) {
    int i = get_global_id(0);
    if (i < n) atomic_inc(&bins[x[i] & 15]);
}"""
OWN = """__kernel void own(int n, __global int *c) {
    int i = get_global_id(0);
    if (i < n) atomic_add(&c[i], 1);
}"""


def atomic_node(kernel):
    return next(info for g in kernel.fragments for info in g.loops.values() if info["op"] == "atomic")


def test_the_share_of_lines_other_work_groups_hit():
    n = 4096
    hist = build(HIST, "hist", {"n": n}, [256], global_size=[n], contents={"x": lambda i: i * 7})
    own = build(OWN, "own", {"n": n}, [256], global_size=[n])
    assert atomic_node(hist)["shared"] == 1.0  # 16 bins: every work-group hits the same line
    assert atomic_node(own)["shared"] == 0.0  # each work-group its own lines
    assert not any(vector_lanes(g) for g in hist.fragments if g.loops)


def profile(latency_s=2e-9, contended_ops=1.5e8, units=2):
    return Profile({"device": {"type": "cpu", "compute_units": units},
                    "instructions": {"atomic_add": {"latency_s": entry(latency_s, "s", "test"),
                                                    "throughput_ops_per_s": entry(contended_ops, "op/s", "test")},
                                     "int_add": {"latency_s": entry(4e-10, "s", "test"),
                                                 "throughput_ops_per_s": entry(5e9, "op/s", "test")}}})


@pytest.mark.parametrize("source,name,shared", [(HIST, "hist", 1.0), (OWN, "own", 0.0)])
def test_the_atomics_device_time_mixes_the_contended_rate_and_the_latency_per_unit(source, name, shared):
    n = 4096
    kernel = build(source, name, {"n": n}, [256], global_size=[n], contents={"x": lambda i: i * 7})
    params = parameters(profile(), kernel)
    theta = params.values["theta" + op_names(kernel)(atomic_node(kernel))[3:]]
    assert theta == pytest.approx(shared / 1.5e8 + (1 - shared) * 2e-9 / 2)
