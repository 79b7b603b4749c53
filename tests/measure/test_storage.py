"""The measurement log: whole lines only (a line torn by a crash is cut before the next append), several records in
one write, and values JSON has no type for written anyway."""

import json
import math

import numpy as np

from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.measure.storage import MeasurementLog, json_ready, read_records

DEVICE = DeviceInfo("opencl:0:0", "opencl", "Test CPU", "V", "cpu", 2, 1000.0, 1 << 30, 1 << 16, 1024, "d")


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_append_writes_whole_lines_with_provenance(tmp_path):
    log = MeasurementLog(tmp_path / "m.jsonl", DEVICE)
    log.append({"kernel": "k", "size": 1, "samples_s": [1e-6] * 5000})
    log.append_many([{"kernel": "k", "size": 2}, {"kernel": "k", "size": 3}])
    got = lines(tmp_path / "m.jsonl")
    assert [r["size"] for r in got] == [1, 2, 3] and log.written == 3
    assert all(r["device"]["id"] == "opencl:0:0" and "command" in r for r in got)


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path):
    path = tmp_path / "m.jsonl"
    log = MeasurementLog(path, DEVICE)
    log.append({"kernel": "k", "size": 1})
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"kernel": "k", "size": 2, "samples_s": [0.1, 0.')  # a crash in mid-write
    assert len(read_records(path)) == 1  # the reader skips it
    log.append({"kernel": "k", "size": 3})
    assert [r["size"] for r in lines(path)] == [1, 3]  # every line parses


def test_a_file_of_only_a_torn_line_is_emptied_first(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"kernel": "k", "si')
    MeasurementLog(path, DEVICE).append({"kernel": "k", "size": 4})
    assert [r["size"] for r in lines(path)] == [4]


def test_json_ready_takes_what_json_cannot():
    got = json_ready({"c": complex(1, 2), "big": 10**400, "huge": 10**5000, "nan": math.nan, "arr": np.arange(3),
                      "np": np.float32(0.5), "ok": 2**62, 3: "key"})
    assert got == {"c": "(1+2j)", "big": None, "huge": None, "nan": None, "arr": [0, 1, 2], "np": 0.5, "ok": 2**62,
                   "3": "key"}
    assert json_ready(2**70) == float(2**70)
    json.dumps(got, allow_nan=False)


def test_keyed_log_writes_a_group_once_and_counts_only_whole_groups(tmp_path):
    from gpuprofiler.device.base import DeviceInfo
    from gpuprofiler.measure.storage import KeyedLog

    info = DeviceInfo("x:0", "x", "X", "v", "gpu", 1, 1.0, 1, 1, 1, "d")
    path = tmp_path / "k.jsonl"
    log = KeyedLog(path, info)
    assert log.put_many([("a", [{"i": 0}, {"i": 1}]), ("b", [{"i": 2}]), ("a", [{"i": 9}]), ("c", [])]) == 2
    assert not log.put("a", [{"i": 3}]) and "a" in log and "c" not in log and log.records == 3
    again = KeyedLog(path, info)
    assert again.stored == 2 and "a" in again and "b" in again
    # a write cut short after the first line of a group: the group is not stored, a rerun writes it whole
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[2])  # group a lost its second line
    cut = KeyedLog(path, info)
    assert "a" not in cut and "b" in cut
    assert cut.put("a", [{"i": 0}, {"i": 1}])
    path.write_bytes(path.read_bytes() + b'{"store_key": "d", "store_group": "g", "store_group_size": 1}')  # torn
    assert "d" not in KeyedLog(path, info) and KeyedLog(path, info).stored == 2


def test_an_output_that_cannot_take_records_is_refused_before_any_work(tmp_path):
    """A directory, a device, a pipe, a name too long or a folder that cannot be made: a UserError naming it; a new
    file is created empty, an existing one kept as it is."""
    import os

    import pytest

    from gpuprofiler.errors import UserError
    from gpuprofiler.measure.storage import writable

    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "file").write_text("x\n")
    for bad, message in ((tmp_path, "not a regular file"), ("/dev/full", "not a regular file"),
                         (tmp_path / "pipe", "not a regular file"), (tmp_path / ("x" * 300), "cannot write"),
                         (tmp_path / "file" / "under.jsonl", "cannot write")):
        with pytest.raises(UserError, match=message):
            MeasurementLog(bad, DEVICE).check()
    assert writable(tmp_path / "new" / "m.jsonl").read_text() == ""
    assert writable(tmp_path / "file").read_text() == "x\n"


def test_records_a_file_stops_taking_go_to_a_fallback_file_and_it_is_said(tmp_path, monkeypatch, capsys):
    """The file checked, then replaced by a directory: this record and the next go to results/unsaved/, whole, and
    stderr says where, once."""
    monkeypatch.setenv("GPUPROFILER_RESULTS", str(tmp_path / "results"))
    log = MeasurementLog(tmp_path / "m.jsonl", DEVICE).check()
    log.append({"kernel": "a", "size": 1})
    (tmp_path / "m.jsonl").unlink()
    (tmp_path / "m.jsonl").mkdir()
    log.append({"kernel": "b", "size": 2})
    log.append({"kernel": "c", "size": 3})
    (saved,) = (tmp_path / "results" / "unsaved").iterdir()
    assert [r["kernel"] for r in read_records(saved)] == ["b", "c"] and log.path == saved and log.written == 3
    err = capsys.readouterr().err
    assert err.count("cannot write") == 1 and str(saved) in err
