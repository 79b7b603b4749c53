import json

import pytest
from conftest import H100_PROFILE

from gpuprofiler.errors import UserError
from gpuprofiler.profile.file import (
    CHANGED_METHODS,
    SCHEMA,
    SCHEMA_DOC,
    SCHEMA_VERSION,
    Profile,
    entry,
    failed,
    load_profile,
    method_version,
    method_version_of,
    method_versions_present,
)


def sample_profile():
    return Profile({"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
                    "launch": {"fixed_s": entry(2.5e-6, "s", "fit", (2e-6, 3e-6))},
                    "instructions": {"float_fma": {"latency_s": failed("s", "chain", "below one cycle")}},
                    "caches": [{"level": 1, "size_bytes": 49152, "latency_s": 1e-9}]})


def test_get_and_failures(tmp_path):
    p = sample_profile()
    assert p.get("launch.fixed_s") == 2.5e-6
    assert p.get("caches.0.size_bytes") == 49152
    with pytest.raises(KeyError, match="failed: below one cycle"):
        p.get("instructions.float_fma.latency_s")
    assert p.get("instructions.float_fma.latency_s", None) is None
    assert p.failures() == [{"key": "instructions.float_fma.latency_s", "reason": "below one cycle"}]
    path = p.save(tmp_path / "p.json")
    again = load_profile(path)
    assert again.get("launch.fixed_s") == 2.5e-6
    assert again.data["failed"] == p.failures()


def test_failed_entries_never_carry_a_value():
    e = entry(float("nan"), "s", "x")
    assert e["status"] == "failed" and e["value"] is None
    assert failed("s", "m", "why")["value"] is None


def test_load_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UserError, match="cannot read"):
        load_profile(bad)
    bad.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(UserError, match="not a gpuprofiler"):
        load_profile(bad)


# --------------------------------------------------------------------------------------------------
# method versions: figures whose measuring method changed can be told apart; old profiles still load
# --------------------------------------------------------------------------------------------------

CHANGED = ("launch.back_to_back_s", "launch.round_trip_s", "instructions.add.s32", "instructions.add.u32",
           "instructions.sub.s32", "instructions.sub.u32", "instructions.ld.global.ca.u64", "caches", "latency_curve")


def test_changed_methods_are_listed_with_their_version():
    assert set(CHANGED) <= set(CHANGED_METHODS)
    for key, (version, text) in CHANGED_METHODS.items():
        assert version == method_version_of(key) >= 2 and text
        assert key in SCHEMA_DOC
    assert method_version_of("launch.event_s") == 1 and method_version_of("instructions.fma.rn.f32") == 1
    assert method_version_of("concurrency.guarded_item_s") == 3
    assert "method_versions" in SCHEMA_DOC and "L2 far" in SCHEMA_DOC


def test_old_profile_loads_and_reads_as_version_1():
    """The committed H100 profile predates method versions: it loads, and every changed figure is v1."""
    old = load_profile(H100_PROFILE)
    assert "method_versions" not in old.data
    assert old.get("launch.round_trip_s") == pytest.approx(2.276e-4, rel=1e-3)
    assert [method_version(old.data, key) for key in CHANGED_METHODS] == [1] * len(CHANGED_METHODS)


@pytest.mark.parametrize("recorded, expected", [(2, 2), (1, 1), ("2", 1), (True, 1), (0, 1), (None, 1), (2.0, 1)])
def test_method_version_reads_only_positive_integers(recorded, expected):
    assert method_version({"method_versions": {"launch.round_trip_s": recorded}}, "launch.round_trip_s") == expected
    assert method_version({"method_versions": "nonsense"}, "launch.round_trip_s") == 1
    assert method_version({}, "caches") == 1


def test_method_versions_present_names_what_was_measured(tmp_path):
    data = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
            "launch": {"round_trip_s": entry(5e-6, "s", "loop"), "event_s": entry(2e-6, "s", "event")},
            "instructions": {"add.s32": {}, "fma.rn.f32": {}}, "caches": [{"level": 1, "name": "L1"}]}
    versions = method_versions_present(data)
    assert versions == {"launch.round_trip_s": 2, "instructions.add.s32": 2, "caches": 2}
    assert method_versions_present({"caches": []}) == {}
    data["method_versions"] = versions
    again = load_profile(Profile(data).save(tmp_path / "p.json"))
    assert method_version(again.data, "launch.round_trip_s") == 2 and method_version(again.data, "launch.back_to_back_s") == 1


def test_profile_show_marks_old_methods_and_names_caches():
    from gpuprofiler.report.profile_table import cache_names, show

    old = load_profile(H100_PROFILE)
    text = show(old)
    marked = [line.split()[0] for line in text.splitlines() if "(method v1, now v2: re-calibrate)" in line]
    assert marked == ["round_trip_s", "back_to_back_s", "add.s32", "sub.s32", "add.u32", "sub.u32",
                      "ld.global.ca.u64", "ld.global.cg.u64", "ld.global.cv.u64"]
    assert cache_names(old.data) == ["L1", "L2", "L2 far"]          # derived from the device type: a GPU
    assert "  L2 far: " in text and "L3" not in text
    new = Profile(json.loads(json.dumps(old.data)))
    new.data["method_versions"] = method_versions_present(new.data)
    for c, name in zip(new.data["caches"], ["first", "second", "third"]):
        c["name"] = name                                             # recorded names win
    assert "re-calibrate" not in show(new) and cache_names(new.data) == ["first", "second", "third"]
    cpu = {"device": {"type": "cpu"}, "caches": [{"level": 1}, {"level": 2}, {"level": 3}]}
    assert cache_names(cpu) == ["L1", "L2", "L3"]
    assert cache_names({"device": {"type": "??"}, "caches": [{"level": 1}, {"level": 2}]}) == ["L1", "L2"]
