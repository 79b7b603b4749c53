"""Fuzzing the PTX reader and the pipeline model: the committed fixtures mutated (truncated, bytes flipped, lines
deleted, duplicated or swapped, huge numbers, non-UTF-8 bytes, braces deleted) are parsed or refused with a
UserError naming the file; ``gpuprofiler pipeline`` on them exits 0 or 2 with no traceback and creates no file."""

import re

import pytest
from conftest import POCL_PROFILE, PTX_FIXTURES
from fuzzing import mutate_bytes, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.ptx_parser import parse_ptx
from gpuprofiler.textfile import decode

FAST = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIXTURES = sorted(PTX_FIXTURES.glob("*.ptx"))
SMALL = [p for p in FIXTURES if p.stat().st_size < 6000]     # the quick ones for whole-model runs


def check_parse(data: bytes):
    try:
        module = parse_ptx(decode(data, "k.ptx", "PTX file"), "k.ptx")
    except UserError as exc:
        assert str(exc).startswith("k.ptx"), exc
        return None
    for entry in module.entries.values():
        assert all(count <= 65536 for _, count in entry.families.values())
    return module


@FAST
@given(st.sampled_from(FIXTURES), st.data())
def test_mutated_fixtures_parse_or_are_refused(path, data):
    mutated = path.read_bytes()
    for _ in range(data.draw(st.integers(1, 3))):
        mutated = mutate_bytes(mutated, data.draw, st)
    check_parse(mutated)


@pytest.mark.slow
@LONG
@given(st.sampled_from(FIXTURES), st.data())
def test_mutated_fixtures_parse_or_are_refused_long(path, data):
    mutated = path.read_bytes()
    for _ in range(data.draw(st.integers(1, 4))):
        mutated = mutate_bytes(mutated, data.draw, st)
    check_parse(mutated)


REG = re.compile(rb"%[a-z]+<\d+>")


@FAST
@given(st.sampled_from(FIXTURES), st.sampled_from([b"0", b"1", b"65536", b"65537", b"100000000",
                                                   b"99999999999999999999999999", b"-1", b"1.5", b"x", b""]))
def test_register_declarations(path, count):
    text = path.read_bytes()
    found = REG.search(text)
    mutated = text[:found.start()] + re.sub(rb"<\d+>", b"<" + count + b">", found.group()) + text[found.end():]
    check_parse(mutated)


def cli_case(path, mutated: bytes, budget: int = 2000):
    return run_cli("pipeline", "{k.ptx}", "--grid", "64", "--block", "128", "--args", "0=1024",
                   "--profile", POCL_PROFILE, "--budget", str(budget), "--json", inputs={"k.ptx": mutated})


def check_cli(path, mutated: bytes):
    code, out, err = cli_case(path, mutated)
    if code == 0:
        import json

        result = json.loads(out)
        assert result["predicted_s"] > 0 and result["interval_s"][0] >= 0


@pytest.mark.slow  # over five seconds; a cheaper test of the same behaviour stays in the default run
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL), st.data())
def test_pipeline_cli_on_mutated_fixtures(path, data):
    check_cli(path, mutate_bytes(path.read_bytes(), data.draw, st))


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIXTURES), st.data())
def test_pipeline_cli_on_mutated_fixtures_long(path, data):
    mutated = path.read_bytes()
    for _ in range(data.draw(st.integers(1, 3))):
        mutated = mutate_bytes(mutated, data.draw, st)
    check_cli(path, mutated)


def test_the_issue_cases_on_the_cli():
    vadd = (PTX_FIXTURES / "vadd.ptx").read_bytes()
    for mutated in (vadd.replace(b"%f<4>", b"%f<100000000>"), vadd.replace(b"ld.param", b"\xffld.param", 1),
                    vadd[:len(vadd) // 2], vadd.replace(b"}", b""), vadd.replace(b"\n", b"\n\x00", 1)):
        code, out, err = cli_case(PTX_FIXTURES / "vadd.ptx", mutated)
        assert code == 2
