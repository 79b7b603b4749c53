"""``predict_items`` starts the apps (the longest jobs) first on its threads and returns the items in the suite's
order."""

import threading

from gpuprofiler.validate import suite
from gpuprofiler.validate.suite import ItemResult, predict_items


def test_apps_are_predicted_first_and_results_keep_the_suites_order(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUPROFILER_PREDICT_THREADS", "2")
    started, lock = [], threading.Lock()

    def fake(res, item, sweep, checks, profile, models, every=None):
        with lock:
            started.append(res.name)

    monkeypatch.setattr(suite, "predict_item", fake)
    kinds = ["kernel", "kernel", "kernel", "app", "kernel", "app"]
    jobs = [(ItemResult(f"{kind}{k}", tmp_path / f"{k}", kind), None, None, {}) for k, kind in enumerate(kinds)]
    got = predict_items(jobs, None, ["fractal"])
    assert [r.name for r in got] == [f"{kind}{k}" for k, kind in enumerate(kinds)]
    assert set(started[:2]) == {"app3", "app5"} and len(started) == len(kinds)
