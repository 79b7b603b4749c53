"""Fuzzing the profile reader and the models that read profiles: the committed profiles corrupted (a value replaced
by a wrong type, a negative, zero, NaN or huge number, a key deleted, deep nesting, bytes flipped) are refused with
a UserError naming the key, or used; ``profile show``, ``profile compare``, ``maxplus`` and ``pipeline`` on them
exit 0 or 2 with no traceback, create no file, and never print a negative or non-finite time."""

import json
import math
import random
import re

import pytest
from conftest import H100_PROFILE, POCL_PROFILE, PTX_FIXTURES
from fuzzing import mutate_bytes, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.profile.file import load_profile

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASES = {"pocl": json.loads(POCL_PROFILE.read_text()), "h100": json.loads(H100_PROFILE.read_text())}
# the parts the models read, where a corruption matters most
HOT = ("launch", "memory", "bandwidth", "clock", "device", "caches", "latency_curve", "instructions", "concurrency")

VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, -1, -1.0, 0.0, -3.35e12, 1e308, 10**30, "x", "", [], {}, [1, 2],
                     {"value": -1.0, "unit": "s", "status": "ok", "interval": None, "method": "m"},
                     {"value": 1.0, "unit": "s", "status": "ok", "interval": [2.0, 1.0], "method": "m"},
                     float("nan"), float("inf"), -float("inf")]),
    st.floats(), st.integers(-2**70, 2**70), st.text(max_size=10))


def leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield path + (k,)
            yield from leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:3]):
            yield path + (i,)
            yield from leaves(v, path + (i,))


PATHS = {name: [p for p in leaves(data) if p[0] in HOT and "raw" not in p] for name, data in BASES.items()}


def corrupted(name, data_draw):
    """The profile ``name`` with one to three of its values replaced, deleted or negated (a deep copy)."""
    data = json.loads(json.dumps(BASES[name]))
    for _ in range(data_draw(st.integers(1, 3))):
        path = data_draw(st.sampled_from(PATHS[name]))
        node = data
        try:
            for part in path[:-1]:
                node = node[part]
            if not isinstance(node, (dict, list)):
                continue  # an earlier corruption replaced a table by a string, which indexes but cannot be changed
            old = node[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier corruption removed it
        how = data_draw(st.sampled_from(["replace", "negate", "delete", "nest"]))
        if how == "delete":
            del node[path[-1]]
        elif how == "negate" and isinstance(old, (int, float)) and not isinstance(old, bool):
            node[path[-1]] = -old
        elif how == "nest":
            node[path[-1]] = json.loads("[" * 40 + "]" * 40)
        else:
            node[path[-1]] = data_draw(VALUES)
    return json.dumps(data).encode()


def check_load(data: bytes, tmp_path_factory):
    path = tmp_path_factory.mktemp("p") / "p.json"
    path.write_bytes(data)
    try:
        load_profile(path)
    except UserError as exc:
        assert str(path) in str(exc), exc


@FAST
@given(st.sampled_from(sorted(BASES)), st.data())
def test_corrupted_values(tmp_path_factory, name, data):
    check_load(corrupted(name, data.draw), tmp_path_factory)


@pytest.mark.slow
@LONG
@given(st.sampled_from(sorted(BASES)), st.data())
def test_corrupted_values_long(tmp_path_factory, name, data):
    check_load(corrupted(name, data.draw), tmp_path_factory)


@FAST
@given(st.sampled_from(sorted(BASES)), st.data())
def test_corrupted_bytes(tmp_path_factory, name, data):
    raw = (POCL_PROFILE if name == "pocl" else H100_PROFILE).read_bytes()
    check_load(mutate_bytes(raw, data.draw, st), tmp_path_factory)


def times_in(text: str):
    """Every 'N s' figure a command printed."""
    for m in re.finditer(r"(-?[0-9.]+(?:e[-+]?[0-9]+)?|nan|inf|-inf) s\b", text):
        yield float(m.group(1))


def commands(name):
    other = POCL_PROFILE if name == "h100" else H100_PROFILE
    return [("profile", "show", "{p.json}"), ("profile", "compare", "{p.json}", other),
            ("maxplus", "vadd", "--size", "65536", "--profile", "{p.json}"),
            ("maxplus", "vadd", "--size", "65536", "--model", "naive", "--profile", "{p.json}"),
            ("pipeline", PTX_FIXTURES / "vadd.ptx", "--grid", "64", "--block", "256", "--args", "n=16384",
             "--budget", "2000", "--profile", "{p.json}")]


def check_commands(name, data: bytes, which: list[int]):
    for i in which:
        argv = commands(name)[i]
        code, out, err = run_cli(*argv, inputs={"p.json": data})
        if code == 0 and argv[0] in ("maxplus", "pipeline"):
            for t in times_in(out):
                assert math.isfinite(t) and t >= 0, f"{argv}: printed {t} s\n{out}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BASES)), st.data())
def test_commands_on_corrupted_profiles(name, data):
    check_commands(name, corrupted(name, data.draw), [data.draw(st.integers(0, 4))])


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BASES)), st.data())
def test_commands_on_corrupted_profiles_long(name, data):
    check_commands(name, corrupted(name, data.draw), [data.draw(st.integers(0, 4))])


def test_negated_profiles_never_print_a_negative_time():
    """The issue's case: every figure of a section negated; the loader refuses it, naming the key."""
    rng = random.Random(17)
    for name, base in BASES.items():
        for section in ("launch", "bandwidth", "memory", "clock"):
            data = json.loads(json.dumps(base))

            def negate(node):
                if isinstance(node, dict):
                    return {k: negate(v) for k, v in node.items()}
                if isinstance(node, list):
                    return [negate(v) for v in node]
                return -node if isinstance(node, (int, float)) and not isinstance(node, bool) else node
            data[section] = negate(data[section])
            code, out, err = run_cli(*commands(name)[rng.choice([0, 2, 4])],
                                     inputs={"p.json": json.dumps(data).encode()})
            assert code == 2 and f"{section}." in err, err
