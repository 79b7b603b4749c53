"""The pipeline simulator gives hand-computable answers exactly, and keeps its invariants on random programs."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models.pipeline.simulator import Program, simulate


def chain(k, lat, pipe="fma", ii=1.0):
    """k instructions, each reading and writing register 0: a dependent chain."""
    return Program(list(range(k)), [lat] * k, [ii] * k, [pipe] * k, [(0,)] * k, [(0,)] * k)


def independent(n, lat, pipe="fma", ii=1.0):
    """n instructions writing distinct registers and reading none."""
    return Program(list(range(n)), [lat] * n, [ii] * n, [pipe] * n, [()] * n, [(i,) for i in range(n)])


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 200), st.integers(1, 40))
def test_one_warp_dependent_chain_takes_k_times_latency(k, lat):
    r = simulate(chain(k, lat))
    assert r.cycles == k * lat and r.warp_instructions == k


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 150), st.integers(1, 30), st.integers(1, 4))
def test_independent_instructions_are_bound_by_issue_throughput(n, lat, per_scheduler):
    # W schedulers each with `per_scheduler` warps: one issue per scheduler per cycle
    r = simulate(independent(n, lat), blocks=1, warps_per_block=4 * per_scheduler, schedulers=4)
    assert r.cycles == per_scheduler * n - 1 + lat


def test_four_warps_on_four_schedulers_issue_in_parallel():
    # exactly the acceptance case: 4 warps x 100 independent FMAs of latency 4 on 4 schedulers
    assert simulate(independent(100, 4), warps_per_block=4, schedulers=4).cycles == 100 - 1 + 4
    # the same 4 warps on one scheduler take four times the issue slots
    assert simulate(independent(100, 4), warps_per_block=4, schedulers=1).cycles == 400 - 1 + 4


@pytest.mark.parametrize("load, add", [(479, 4), (33, 4), (600, 6)])
def test_load_then_dependent_add(load, add):
    p = Program([0, 1], [load, add], [4.0, 1.0], ["mem", "fma"], [(), (0,)], [(0,), (1,)])
    assert simulate(p).cycles == load + add


def test_half_rate_pipe_halves_throughput_and_queueing_is_in_order():
    # one warp, n independent instructions on a pipe that accepts one every 2 cycles (e.g. FP32 on sm_80)
    n, lat = 50, 4
    r = simulate(independent(n, lat, ii=2.0))
    assert r.cycles == 2 * (n - 1) + lat
    # SM-wide memory pipe with a fractional interval: n loads start at k * 2.5 cycles, rounded up
    r = simulate(independent(n, 100, pipe="mem", ii=2.5))
    assert r.cycles == -(-(2.5 * (n - 1)) // 1) + 100


def test_sm_wide_pipe_is_shared_by_all_schedulers_and_private_pipes_are_not():
    n = 40
    private = simulate(independent(n, 4, pipe="sfu", ii=8.0), warps_per_block=4, schedulers=4)
    shared = simulate(independent(n, 4, pipe="mem", ii=8.0), warps_per_block=4, schedulers=4)
    assert private.cycles == 8 * (n - 1) + 4                  # each scheduler has its own SFU pipe
    assert shared.cycles == 8 * (4 * n - 1) + 4               # one memory pipe for the SM


def test_barrier_waits_for_the_slowest_warp():
    # 2 warps on one scheduler: op (lat 10) -> bar.sync (lat 20) -> add reading the op's result (lat 4)
    p = Program([0, 1, 2], [10, 20, 4], [1.0, 1.0, 1.0], ["fma", "misc", "fma"], [(0,), (), (0,)],
                [(0,), (), (1,)], barrier=[False, True, False])
    r = simulate(p, warps_per_block=2, schedulers=1)
    # by hand: ops issue at 0 and 1; the barriers (they read nothing) at 2 and 3 and execute until 22 and 23;
    # both warps are released at 23; the adds issue at 23 and 24 and write back at 27 and 28
    assert r.cycles == 28
    # the same list without the barrier: the adds issue at 10 and 11 (when their op has written back); the
    # run ends when the second 20-cycle op, started at 3, has finished: 23
    q = Program([0, 1, 2], [10, 20, 4], [1.0, 1.0, 1.0], ["fma", "misc", "fma"], [(0,), (), (0,)],
                [(0,), (), (1,)])
    assert simulate(q, warps_per_block=2, schedulers=1).cycles == 23


def test_waves_of_blocks_run_one_after_another():
    p = chain(10, 4)
    one = simulate(p, blocks=1, warps_per_block=1).cycles
    assert simulate(p, blocks=3, warps_per_block=1, resident=1).cycles == 3 * one
    assert simulate(p, blocks=3, warps_per_block=1, resident=3).cycles == one   # on three schedulers at once


def test_unit_counts_and_utilisation():
    r = simulate(independent(100, 4), warps_per_block=4, schedulers=4)
    fma = r.units["fma"]
    assert fma["instructions"] == 400 and fma["utilization"] == pytest.approx(400 / (4 * 103))


def random_program(rng, n_static, length, shared=True):
    pipes = ["fma", "alu", "sfu", "misc"] + (["mem", "smem"] if shared else [])
    lat = [rng.choice([1, 2, 4, 6, 18, 29, 479]) for _ in range(n_static)]
    ii = [rng.choice([1.0, 2.0, 4.0, 8.0, 2.75]) for _ in range(n_static)]
    pipe = [rng.choice(pipes) for _ in range(n_static)]
    reads = [tuple(rng.sample(range(12), rng.randint(0, 3))) for _ in range(n_static)]
    writes = [tuple(rng.sample(range(12), rng.randint(0, 2))) for _ in range(n_static)]
    trace = [rng.randrange(n_static) for _ in range(length)]
    return Program(trace, lat, ii, pipe, reads, writes)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 8), st.integers(1, 4))
def test_fast_forward_gives_the_same_schedule(seed, warps, blocks):
    p = random_program(random.Random(seed), 12, 60)
    a = simulate(p, blocks=blocks, warps_per_block=warps, resident=blocks, fast_forward=True)
    b = simulate(p, blocks=blocks, warps_per_block=warps, resident=blocks, fast_forward=False)
    assert a.cycles == b.cycles


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6))
def test_bounds_on_random_programs(seed, warps):
    """The result is at least the critical path of one warp and the issue bound, at most the serial sum."""
    p = random_program(random.Random(seed), 10, 50)
    r = simulate(p, blocks=1, warps_per_block=warps, schedulers=4)
    single = simulate(p, blocks=1, warps_per_block=1).cycles
    assert r.cycles >= single                                # more warps never finish earlier than one
    assert r.cycles >= -(-warps // 4) * len(p.trace) - 1     # issue slots
    serial = sum(p.latency[s] + p.ii[s] + 1 for s in p.trace) * warps
    assert r.cycles <= serial
    assert r.warp_instructions == warps * len(p.trace)
