import json

import pytest

from gpuprofiler.errors import UserError
from gpuprofiler.profile.file import SCHEMA, SCHEMA_VERSION, Profile, entry, failed, load_profile


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
