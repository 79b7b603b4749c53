"""The plugin's regression test and its baseline files: exact and property-based checks, no device."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler import __version__
from gpuprofiler.errors import UserError
from gpuprofiler.testing import baseline as bl
from gpuprofiler.testing.decide import compare
from gpuprofiler.testing.options import parse_fraction

times = st.lists(st.floats(1e-6, 1.0), min_size=5, max_size=60)


@settings(max_examples=60, deadline=None)
@given(times, st.floats(0.05, 0.5))
def test_the_same_samples_are_never_a_regression(samples, threshold):
    c = compare(samples, samples, threshold)
    assert c.ratio == pytest.approx(1.0) and c.low <= 1.0 + 1e-12 <= c.high + 2e-12
    assert c.verdict != "regressed"


@settings(max_examples=60, deadline=None)
@given(times, st.floats(1e-3, 1e3))
def test_the_verdict_does_not_depend_on_the_unit(samples, scale):
    a, b = np.array(samples), np.array(samples[::-1]) * 1.3
    one, other = compare(a, b, 0.1), compare(a * scale, b * scale, 0.1)
    assert one.verdict == other.verdict and one.ratio == pytest.approx(other.ratio, rel=1e-9)


def test_a_clear_slowdown_past_the_threshold_regresses_and_one_within_it_does_not():
    rng = np.random.default_rng(1)
    base = 1e-3 * (1 + 0.02 * rng.standard_normal(200)) + 1e-3 * (rng.random(200) < 0.3)  # two modes
    slow = 1.25 * (1e-3 * (1 + 0.02 * rng.standard_normal(200)) + 1e-3 * (rng.random(200) < 0.5))
    same = 1e-3 * (1 + 0.02 * rng.standard_normal(200)) + 1e-3 * (rng.random(200) < 0.6)  # more slowed runs
    assert compare(base, slow, 0.10).verdict == "regressed"
    assert compare(base, same, 0.10).verdict in ("unchanged", "slower", "faster")  # the fast mode did not move
    assert compare(base, slow, 0.40).verdict == "slower"  # significantly slower, but within the threshold
    assert compare(base, base / 1.25, 0.10).verdict == "faster"
    assert compare(base, slow, None).verdict == "slower"  # no threshold: reported, never failed
    assert compare(base[:3], slow, 0.1).verdict == "too few samples"
    with pytest.raises(ValueError):
        compare(base, slow, -0.1)


def test_fractions_parse_from_percentages():
    assert parse_fraction("10%") == pytest.approx(0.10) and parse_fraction("0.25") == 0.25
    for bad in ("ten", "-5%", "nan", ""):
        with pytest.raises(ValueError):
            parse_fraction(bad)


DEVICE = SimpleNamespace(id="opencl:0:0", name="PoCL CPU", slug="pocl-cpu")


def test_baselines_merge_and_are_found_by_device_kernel_and_size(tmp_path):
    path = bl.path_for(tmp_path, "main")
    e1 = bl.entry(DEVICE, "vadd", 4096, [1e-5, 2e-5, 1.1e-5, 1e-5, 1.2e-5], 1e-5, "p10", "t::a")
    assert bl.save(path, {bl.key("pocl-cpu", "vadd", 4096): e1}) == 1
    e2 = bl.entry(DEVICE, "spin", None, [1e-3] * 5, 1e-3, "p10", "t::b")
    assert bl.save(path, {bl.key("pocl-cpu", "spin", None): e2}) == 2  # merged, the first kept
    entries = bl.load(path)
    assert bl.find(entries, "pocl-cpu", "vadd", 4096, "main").entry["samples_s"] == e1["samples_s"]
    assert bl.find(entries, "pocl-cpu", "spin", None, "main").entry["test"] == "t::b"
    other = bl.find(entries, "h100", "vadd", 4096, "main")
    assert other.entry is None and "only for another device (PoCL CPU)" in other.note
    assert bl.find(entries, "pocl-cpu", "vadd", 8192, "main").entry is None
    old = {k.replace(__version__, "0.0.1"): {**v, "version": "0.0.1"} for k, v in entries.items()}
    found = bl.find(old, "pocl-cpu", "vadd", 4096, "main")
    assert found.entry is not None and "saved with gpuprofiler 0.0.1" in found.note
    assert bl.latest(tmp_path) == path


def test_a_file_that_is_not_a_baseline_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"format": 1, "entries": {"k": {"samples_s": "x"}}}), json.dumps([1])):
        bad.write_text(text)
        with pytest.raises(UserError, match="baseline"):
            bl.load(bad)
    with pytest.raises(UserError, match="plain file name"):
        bl.path_for(tmp_path, "../escape")


GOOD_SESSION = {"figure_s": 1e-3, "samples_s": [1e-3, 1.1e-3, 1e-3, 1.2e-3, 1e-3]}


@pytest.mark.parametrize("change, problem", [
    ({"samples_s": [float("nan")] * 5}, "no measurement"),
    ({"samples_s": [0.0] * 5}, "no measurement"),
    ({"samples_s": [-1e-3] * 5}, "no measurement"),
    ({"samples_s": [1e-3, float("inf")]}, "no measurement"),
    ({"samples_s": [1e-3, 2 * 86_400.0]}, "no measurement"),
    ({"samples_s": [1e-13]}, "no measurement"),
    ({"samples_s": []}, "no list of device times"),
    ({"samples_s": None}, "no list of device times"),
    ({"samples_s": ["1e-3"] * 5}, "not a number"),
    ({"samples_s": [True] * 5}, "not a number"),
    ({"samples_s": [1e-3] * (bl.MAX_SAMPLES + 1)}, "more than"),
    ({"figure_s": float("nan")}, "no measurement"),
    ({"figure_s": "fast"}, "not a number"),
])
def test_a_baseline_session_that_is_no_measurement_is_an_error_naming_it(tmp_path, change, problem):
    """NaN, zero, negative, empty, out-of-range or non-numeric device times, and sessions past the size limit, in the
    last session or an earlier one: a UserError naming the entry and the session, never a comparison of too few
    samples."""
    path = tmp_path / "b.json"
    for where in ("last", "history"):
        bad = {**GOOD_SESSION, **change}
        e = {**bad} if where == "last" else {**GOOD_SESSION, "history": [GOOD_SESSION, bad]}
        path.write_text(json.dumps({"format": 1, "entries": {"dev|k|1|v": e}}))
        which = "its last session" if where == "last" else "its earlier session 2"
        with pytest.raises(UserError, match=f"entry 'dev\\|k\\|1\\|v', {which}: .*{problem}"):
            bl.load(path)


def test_a_hostile_baseline_file_is_a_clear_error(tmp_path):
    """Nesting too deep to follow, an integer too long to convert, a history that is not a list, an entry that is
    not a table: a UserError, no traceback."""
    path = tmp_path / "b.json"
    texts = ["[" * 100_000 + "]" * 100_000,
             '{"format": 1, "entries": {"k": {"samples_s": [' + "9" * 5000 + "]}}}",
             '{"format": 1, "entries": {"k": {"samples_s": [' + "9" * 4000 + "]}}}",
             json.dumps({"format": 1, "entries": {"k": {**GOOD_SESSION, "history": {"a": 1}}}}),
             json.dumps({"format": 1, "entries": {"k": [1, 2]}})]
    for text in texts:
        path.write_text(text)
        with pytest.raises(UserError, match="baseline"):
            bl.load(path)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=1e-12, max_value=86_400.0), min_size=1, max_size=50))
def test_every_session_of_measured_times_loads(tmp_path_factory, samples):
    path = tmp_path_factory.mktemp("b") / "b.json"
    path.write_text(json.dumps({"format": 1, "entries": {"k": {"figure_s": samples[0], "samples_s": samples}}}))
    assert bl.load(path)["k"]["samples_s"] == samples


def test_a_callables_device_time_is_what_it_returns_or_its_launches_events():
    from gpuprofiler.testing.session import Failed, _device_seconds

    event = SimpleNamespace(seconds=lambda: 1e-3)
    assert _device_seconds(None, [event, event]) == pytest.approx(2e-3)  # its launches, summed
    assert _device_seconds([event, 2e-3], []) == pytest.approx(3e-3) and _device_seconds(5e-4, []) == 5e-4
    for bad in ([None], "x", -1.0, True, float("nan")):
        with pytest.raises(Failed, match="the callable returned"):
            _device_seconds(bad, [event])
    with pytest.raises(Failed, match="launched nothing"):
        _device_seconds(None, [])


def test_several_baseline_sessions_teach_the_test_how_far_a_kernel_moves_between_sessions():
    """vadd at 2^24 on this VM's PoCL took 4.5 to 5.7 ms in seven sessions: against one fast session a later
    unchanged run looks 12% slower and regresses; against five sessions it does not, and a 1.6x slowdown still
    does."""
    rng = np.random.default_rng(3)

    def session(figure):
        return figure * (1 + 0.01 * np.abs(rng.standard_normal(150)))

    history = [session(f) for f in (4.5e-3, 5.4e-3, 4.6e-3, 5.1e-3, 5.7e-3)]
    current = session(5.05e-3 * 1.0)
    assert compare(history[0], current, 0.10).verdict == "regressed"
    several = compare(None, current, 0.10, sessions=history)
    assert several.verdict != "regressed" and several.ratio == pytest.approx(5.05 / 5.1, rel=0.02)
    assert compare(None, session(8.2e-3), 0.10, sessions=history).verdict == "regressed"
    assert compare(None, current, 0.10, sessions=history[:1]).verdict == compare(history[0], current, 0.10).verdict


def test_a_key_saved_again_keeps_its_last_sessions(tmp_path):
    path = bl.path_for(tmp_path, "main")
    k = bl.key("pocl-cpu", "vadd", 4096)
    for i in range(7):
        bl.save(path, {k: bl.entry(DEVICE, "vadd", 4096, [1e-3 * (1 + i)] * 5, 1e-3 * (1 + i), "p10", "t")})
    e = bl.load(path)[k]
    assert len(e["history"]) == bl.SESSIONS - 1 and e["figure_s"] == pytest.approx(7e-3)
    assert [s[0] for s in bl.sessions(e)] == pytest.approx([3e-3, 4e-3, 5e-3, 6e-3, 7e-3])  # oldest first


def _session_with_baseline(tmp_path, samples, threshold):
    """A plugin session comparing against a baseline file whose one entry holds ``samples``, and a measured result
    of ten normal device times for the same kernel and device."""
    from gpuprofiler.testing.options import Options
    from gpuprofiler.testing.session import GpuDevice, GpuResult, GpuSession

    device = GpuDevice("opencl:0:0", "PoCL CPU", SimpleNamespace(slug="pocl-cpu", backend="opencl"), None)
    entry = bl.entry(DEVICE, "vadd", 4096, [1e-3] * 5, 1e-3, "p10", "t::a")
    entry["samples_s"] = samples
    (tmp_path / "base.json").write_text(json.dumps({"format": 1, "entries": {bl.key("pocl-cpu", "vadd", 4096): entry}}))
    session = GpuSession(Options(compare="base", compare_fail=threshold, directory=tmp_path))
    times = [1e-3 * (1 + 0.01 * i) for i in range(10)]
    result = GpuResult("t::a", "vadd", 4096, device.id, device.name, times, times[0], times[0], times[-1], times[4])
    return session, result, device


def test_a_baseline_of_nan_samples_fails_the_test_with_its_reason(tmp_path):
    """The plugin's regression check against a baseline whose device times are NaN fails the test naming the entry,
    under a failing threshold or not; one of too few valid times fails it under a failing threshold."""
    from gpuprofiler.testing.session import Failed

    for threshold in (0.10, None):
        session, result, device = _session_with_baseline(tmp_path, [float("nan")] * 5, threshold)
        with pytest.raises(Failed, match="vadd.*its last session: a device time of nan s is no measurement"):
            session._compare(result, device, None)
    session, result, device = _session_with_baseline(tmp_path, [1e-3] * 3, 0.10)
    session._compare(result, device, None)
    assert result.verdict == "FAIL" and "needs 5 device times on each side, the baseline's session has 3" in \
        result.failures[0]
    session, result, device = _session_with_baseline(tmp_path, [1e-3] * 3, None)
    session._compare(result, device, None)
    assert not result.failures and result.verdict == "too few samples"
