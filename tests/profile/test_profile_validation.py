"""Profiles are checked against the schema on load: deep nesting, non-UTF-8, NaN, wrong types, missing keys and
physically impossible figures (negative, zero, non-finite) each give a UserError that names the key; partial but
valid profiles still load and show; and no model prints a time that is not positive and finite."""

import contextlib
import copy
import io
import json

import pytest
from conftest import H100_PROFILE, POCL_PROFILE

from gpuprofiler.cli.main import main
from gpuprofiler.errors import UserError
from gpuprofiler.models.base import positive_time
from gpuprofiler.profile.file import MAX_PROFILE_DEPTH, Profile, entry, load_profile, validate_profile

H100 = json.loads(H100_PROFILE.read_text())
POCL = json.loads(POCL_PROFILE.read_text())


def written(tmp_path, data=None, text=None, raw=None):
    path = tmp_path / "p.json"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(text if text is not None else json.dumps(data))
    return path


def refused(tmp_path, **kwargs):
    path = written(tmp_path, **kwargs)
    with pytest.raises(UserError) as info:
        load_profile(path)
    return str(info.value).replace(str(path), "P")


def mutated(base, key, value):
    """A deep copy of ``base`` with the dotted ``key`` set to ``value`` (``DELETE`` removes it)."""
    data = copy.deepcopy(base)
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = int(parts[-1]) if isinstance(node, list) else parts[-1]
    if value == "DELETE":
        del node[last]
    else:
        node[last] = value
    return data


def test_committed_profiles_load():
    for path in (H100_PROFILE, POCL_PROFILE):
        validate_profile(json.loads(path.read_text()), path)


# ---- the file ------------------------------------------------------------------------------------

def test_deeply_nested_json(tmp_path):
    assert refused(tmp_path, text="[" * 100_000 + "]" * 100_000) == "cannot read profile P: JSON nested too deeply"
    deep = mutated(POCL, "device.extra.deep", json.loads("[" * 40 + "]" * 40))
    assert refused(tmp_path, data=deep) == (f"P: device.extra.deep{'.0' * (MAX_PROFILE_DEPTH - 2)}: nested more "
                                            f"than {MAX_PROFILE_DEPTH} levels deep")


def test_not_utf8_names_the_line(tmp_path):
    raw = POCL_PROFILE.read_bytes().replace(b'"name": "pthread', b'"name": "\xffpthread', 1)
    got = refused(tmp_path, raw=raw)
    assert got.startswith("P:") and got.endswith("not UTF-8 text (byte 0xff): a profile must be a text file")


def test_bad_json_names_line_and_column(tmp_path):
    assert refused(tmp_path, text='{"schema": ') == ("cannot read profile P: not valid JSON: Expecting value "
                                                     "(at line 1, column 12)")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_numbers(tmp_path, constant):
    text = json.dumps(POCL).replace('"value": 2', f'"value": {constant}, "x": 2', 1)
    assert refused(tmp_path, text=text) == f"cannot read profile P: {constant} is not a number JSON allows"


def test_huge_integers(tmp_path):
    text = json.dumps(POCL).replace('"compute_units": 2', '"compute_units": ' + "9" * 5000, 1)
    assert "Exceeds the limit (4300 digits)" in refused(tmp_path, text=text)
    data = mutated(POCL, "device.compute_units", 10**30)
    assert refused(tmp_path, data=data) == "P: device.compute_units: an integer larger than 2^63 in magnitude"


# ---- wrong types, missing keys, impossible values: the key is named -----------------------------------

@pytest.mark.parametrize("key, value, expected", [
    ("schema", "DELETE", 'P: not a gpuprofiler hardware profile (no "schema": "gpuprofiler.profile")'),
    ("schema_version", "1", "P: schema_version: expected a whole number, got a string '1'"),
    ("device", [], "P: device: expected an object, got a list []"),
    ("device", None, "P: device: expected an object, got null None"),
    ("device.name", 3, "P: device.name: expected a string, got an integer 3"),
    ("device.compute_units", -2, "P: device.compute_units: expected a whole number >= 0, got -2"),
    ("device.clock_mhz", -2599.0, "P: device.clock_mhz: expected a number >= 0, got -2599.0"),
    ("device.extra.max_mem_alloc_bytes", -1, "P: device.extra.max_mem_alloc_bytes: expected a number >= 0, got -1"),
    ("clock.hz", 0, "P: clock.hz: the value must be a positive finite number (a time, rate, size or clock), got 0"),
    ("clock.hz", "fast", "P: clock.hz: expected a positive number, got a string 'fast'"),
    ("launch.event_s.value", -3e-6, "P: launch.event_s.value: an ok entry's value must be a positive finite number "
                                    "(a time, rate, size or clock), got -3e-06"),
    ("launch.event_s.value", 0.0, "P: launch.event_s.value: an ok entry's value must be a positive finite number"),
    ("launch.event_s.value", "x", "P: launch.event_s.value: expected a number, got a string 'x'"),
    ("launch.event_s.value", None, "P: launch.event_s.value: expected a number, got null None"),
    ("launch.event_s.value", True, "P: launch.event_s.value: expected a number, got a boolean True"),
    ("launch.event_s.status", "great", "P: launch.event_s.status: expected \"ok\" or \"failed\", got 'great'"),
    ("launch.event_s.unit", None, "P: launch.event_s.unit: expected a string, got null"),
    ("launch.event_s.interval", [2, 1], "P: launch.event_s.interval: low 2 is above high 1"),
    ("launch.event_s.interval", [1], "P: launch.event_s.interval: expected [low, high] (two finite numbers) or null"),
    ("launch.event_s.interval", ["a", 1], "P: launch.event_s.interval: expected [low, high]"),
    ("launch.event_s", {"status": "ok", "unit": "s"}, "P: launch.event_s: expected an entry {value, unit, interval, "
                                                      "method, status} or a number, got an object"),
    ("launch.event_s", "fast", "P: launch.event_s: expected an entry"),
    ("launch.event_s", -1.0, "P: launch.event_s: the value must be a positive finite number"),
    ("launch", 5, "P: launch: expected an object, got an integer 5"),
    ("bandwidth.read_Bps.value", -1.0e10, "P: bandwidth.read_Bps.value: an ok entry's value must be a positive"),
    ("bandwidth.by_width.read.1", 3, "P: bandwidth.by_width.read.1: expected an entry"),
    ("bandwidth.by_width.read", [], "P: bandwidth.by_width.read: expected an object, got a list"),
    ("bandwidth.working_set_curve.0.bytes", -5, "P: bandwidth.working_set_curve.0.bytes: the value must be a "
                                                "positive finite number"),
    ("bandwidth.working_set_curve.0", 7, "P: bandwidth.working_set_curve.0: expected an object, got an integer 7"),
    ("caches", {}, "P: caches: expected a list, got an object {}"),
    ("caches.0.size_bytes", "big", "P: caches.0.size_bytes: expected a positive number, got a string 'big'"),
    ("caches.0.latency_s", -1e-9, "P: caches.0.latency_s: the value must be a positive finite number"),
    ("caches.0.level", 0, "P: caches.0.level: the value must be a positive finite number"),
    ("latency_curve.0.bytes", 0, "P: latency_curve.0.bytes: the value must be a positive finite number"),
    ("latency_curve.0.latency_s", "x", "P: latency_curve.0.latency_s: expected a number, got a string 'x'"),
    ("instructions", [], "P: instructions: expected an object, got a list []"),
    ("instructions.float_fma", 5, "P: instructions.float_fma: expected an object, got an integer 5"),
    ("instructions.float_fma.latency_s", 4.0, "P: instructions.float_fma.latency_s: expected an entry"),
    ("instructions.float_fma.latency_s.value", -1.0, "P: instructions.float_fma.latency_s.value: an ok entry's value"),
    ("method_versions", {"caches": "2"}, "P: method_versions.caches: expected a version number >= 1, got '2'"),
    ("sections", "launch", "P: sections: expected a list, got a string 'launch'"),
    ("failed", [3], "P: failed.0: expected an object {key, reason}, got an integer"),
    ("duration_s", "long", "P: duration_s: expected a number, got a string 'long'"),
    ("quick", "no", "P: quick: expected true or false, got a string 'no'"),
    ("complete", "yes", "P: complete: expected true or false, got a string 'yes'"),
    ("sections_done", [1], "P: sections_done.0: expected a section name, got an integer 1"),
    ("section_errors", [], "P: section_errors: expected an object, got a list []"),
    ("launch.points.0.threads", -1, "P: launch.points.0.threads: the value must be a positive finite number"),
])
def test_each_bad_key_is_named(tmp_path, key, value, expected):
    assert refused(tmp_path, data=mutated(POCL, key, value)).startswith(expected)


def test_a_failed_entry_carries_no_value(tmp_path):
    data = copy.deepcopy(H100)
    data["instructions"]["ld.global.ca.u64"]["latency_s"]["value"] = 1e-7
    assert refused(tmp_path, data=data) == ("P: instructions.ld.global.ca.u64.latency_s.value: a failed entry has "
                                            "value null, not 1e-07")


def test_newer_schema(tmp_path):
    got = refused(tmp_path, data=mutated(POCL, "schema_version", 99))
    assert got == "P: profile schema 99 is newer than this gpuprofiler (1); upgrade gpuprofiler"


# ---- partial but valid profiles still work -----------------------------------------------------------

def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("drop", ["caches", "bandwidth", "instructions", "launch", "device", "clock",
                                  "latency_curve", "transfer", "memory"])
def test_a_profile_missing_a_section_loads_and_shows(tmp_path, drop):
    path = written(tmp_path, data=mutated(POCL, drop, "DELETE"))
    load_profile(path)
    code, out, err = run("profile", "show", path)
    assert code == 0 and "Traceback" not in err, err
    code, out, err = run("profile", "compare", path, POCL_PROFILE)
    assert code == 0 and "Traceback" not in err, err


def test_caches_without_sizes_show(tmp_path):
    data = mutated(POCL, "caches", [{"level": 1, "name": "L1"}, {"level": 2, "size_bytes": 1024}])
    code, out, err = run("profile", "show", written(tmp_path, data=data))
    assert code == 0 and "L1: size -, -" in out, err


def test_the_cli_reports_a_bad_profile_with_exit_2(tmp_path):
    path = written(tmp_path, data=mutated(POCL, "bandwidth.read_Bps.value", -1.0))
    for argv in (("profile", "show", path), ("profile", "compare", path, POCL_PROFILE),
                 ("maxplus", "vadd", "--size", "1024", "--profile", path)):
        code, out, err = run(*argv)
        assert code == 2 and "bandwidth.read_Bps.value" in err and "Traceback" not in err, err


# ---- calibrate's entries always load; models never print an impossible time ----------------------------

def test_entry_records_an_impossible_value_as_failed():
    assert entry(-1e-6, "s", "fit")["status"] == "failed"
    assert entry(-1e-6, "s", "fit")["reason"] == "-1e-06 s is not positive"
    assert entry(0.0, "B/s", "x")["status"] == "failed"
    assert entry(2.0, "s", "x", (1.0, float("nan")))["interval"] is None
    profile = Profile({"schema": "gpuprofiler.profile", "schema_version": 1,
                       "launch": {"fixed_s": entry(-1.0, "s", "fit"), "event_s": entry(1e-6, "s", "e")}})
    validate_profile(profile.data)


@pytest.mark.parametrize("seconds", [-1.0, 0.0, float("nan"), float("inf")])
def test_positive_time_is_the_last_guard(seconds):
    with pytest.raises(UserError, match=r"maxplus: the predicted time .* is not a positive finite time"):
        positive_time(seconds, "maxplus")
    assert positive_time(2e-6, "maxplus") == 2e-6


def test_maxplus_refuses_to_return_an_impossible_time(monkeypatch):
    """Whatever the inputs no check foresaw, the model's own guard stops a negative time (here a launch cost
    made negative behind the profile's check)."""
    from gpuprofiler.models import costs
    from gpuprofiler.models.maxplus import models
    from gpuprofiler.models.maxplus.builder import build_spec
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.spec import load_spec

    def negative(profile, threads, blocks=None):
        cost = costs.Launch(-1.0, 0.0, "negative on purpose")
        return cost, (cost, cost)

    monkeypatch.setattr(models, "launch_costs", negative)
    inst = load_spec(resolve("vadd")).instantiate(1024)
    kernel = build_spec(inst, "opencl")
    with pytest.raises(UserError, match=r"maxplus ops model of vadd at N = 1024: the predicted time -0\.\d+ s is not a"):
        models.predict(kernel, models.parameters(Profile(POCL), kernel), 1024, 1024, "ops", "sequential")


@pytest.mark.parametrize("point,expected", [
    ({"ops": 8, "overlap": -1.0}, "P: concurrency.overlap_curve.0.overlap: the value must be a positive finite number"),
    ({"ops": 0, "overlap": 2.0}, "P: concurrency.overlap_curve.0.ops: the value must be a positive finite number"),
    ({"ops": 8, "overlap": 2.0, "seconds": "x"}, "P: concurrency.overlap_curve.0.seconds: expected a number"),
    (3, "P: concurrency.overlap_curve.0: expected an object, got an integer 3"),
])
def test_a_bad_overlap_point_is_named(tmp_path, point, expected):
    data = copy.deepcopy(POCL)
    data["concurrency"]["overlap_curve"] = [point]
    assert refused(tmp_path, data=data).startswith(expected)


@pytest.mark.parametrize("where, value, message", [
    (("bandwidth", "streaming_llc_bytes", "value"), 1e30, "past 16 GiB"),
    (("bandwidth", "streaming_llc_bytes", "value"), 1e12, "past 16 GiB"),
    (("caches", 0, "size_bytes"), 2.0 ** 35, "past 16 GiB"),
    (("clock", "hz"), 1.7e308, "past 10 GHz"),
    (("clock", "hz"), 2e10, "past 10 GHz"),
    (("bandwidth", "read_Bps", "value"), 1e20, "past 1 PB/s"),
    (("caches", 0, "latency_s"), 1.4e291, "past a day"),
    (("device", "extra", "global_mem_cache_bytes"), 1e15, "past 16 GiB"),
])
def test_a_figure_no_device_can_have_is_refused_naming_it(where, value, message):
    """The audit's profiles the schema accepted (a 1e30-byte cache, a 1.7e308 Hz clock with a 1.4e291 s latency)
    and their neighbours: refused on load, naming the key and the limit; the committed profiles all pass."""
    data = copy.deepcopy(POCL)
    node = data
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    key = ".".join(str(k) for k in where)
    with pytest.raises(UserError, match=rf"{key.replace('.', '[.]')}: .*{message}"):
        validate_profile(data)
    validate_profile(copy.deepcopy(POCL))
    validate_profile(copy.deepcopy(H100))
