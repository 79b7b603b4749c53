"""One contract for every registered predictor, after scikit-learn's ``parametrize_with_checks``: ``__init__``
stores parameters only, ``fit`` returns self, ``predict`` gives positive finite times inside their interval,
and what a predictor cannot model it refuses with a reason, in ``applies_to`` and in ``fit`` alike.

Each predictor meets every builtin kernel spec and app on the PoCL and the H100 test profiles and on no
profile; predictors that learn from measurements get a sweep of the item's small sizes (made up: a line
through the origin with 5% repeats; the contract is about shapes, not accuracy).
"""

import inspect
import math

import numpy as np
import pytest
from conftest import H100_PROFILE, POCL_PROFILE

from gpuprofiler.models import registry
from gpuprofiler.models.base import NotApplicable, Prediction, Predictor
from gpuprofiler.profile.file import load_profile
from gpuprofiler.workloads.builtin import builtin_apps, builtin_specs
from gpuprofiler.workloads.sweep import Sweep, load_target

ITEMS = {p.stem: p for p in builtin_specs() + builtin_apps()}
PROFILES = {"pocl": POCL_PROFILE, "h100": H100_PROFILE, "none": None}


def made_up_sweep(item) -> Sweep:
    sizes = [int(s) for s in item.small]
    phases = {"main": [np.array([2e-9 * n * f for f in (0.97, 1.0, 1.05, 1.0, 0.99)]) for n in sizes],
              "minor": [np.array([1e-6 + 1e-11 * n] * 5) for n in sizes]}
    totals = [phases["main"][i] + phases["minor"][i] for i in range(len(sizes))]
    return Sweep(item.name, "app" if item.__class__.__name__ == "App" else "kernel", sizes, phases, totals)


@pytest.fixture(scope="module", autouse=True)
def short_cache_analyses():
    """Cache analyses over windows of 2^14 accesses: the contract is about shapes, and the full windows' analyses
    of ~30 items x 8 sizes x 2 profiles took most of the suite's time."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gpuprofiler.models.fractal.misses.BUDGET", 1 << 14)
        mp.setattr("gpuprofiler.models.maxplus.predictor.ANALYSIS_BUDGET", 1 << 14)
        yield


@pytest.fixture(scope="module")
def profiles():
    return {k: (load_profile(v) if v else None) for k, v in PROFILES.items()}


@pytest.fixture(scope="module")
def items():
    return {k: load_target(v) for k, v in ITEMS.items()}


@pytest.mark.parametrize("name", registry.names())
def test_init_only_stores_parameters(name):
    cls = registry.get(name)
    assert issubclass(cls, Predictor) and cls.name == name
    p = cls()
    params = p.get_params()
    assert set(params) == set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert not any(k.endswith("_") for k in vars(p)), "learned attributes before fit"
    with pytest.raises(RuntimeError, match="fit"):
        p.predict([1024])


# the default run's share of the contract: a stream, a gather with a data-dependent loop, a kernel with local
# memory and barriers, and an app (the whole builtin suite is the slow test below)
FEW = ("vadd", "spmv_csr", "matmul_tiled", "jacobi")


@pytest.mark.parametrize("name", registry.names())
def test_fit_predict_or_refuse_on_a_few_builtins_and_every_profile(name, items, profiles):
    check_contract(name, {k: items[k] for k in FEW}, profiles)


@pytest.mark.slow
@pytest.mark.parametrize("name", registry.names())
def test_fit_predict_or_refuse_on_every_builtin_and_profile(name, items, profiles):
    check_contract(name, items, profiles)


def check_contract(name, items, profiles):
    cls = registry.get(name)
    applied, refused = [], []
    for item_name, item in items.items():
        sizes = [int(item.small[0]), int(item.small[1])]
        for profile_name, profile in profiles.items():
            case = f"{name} on {item_name} with the {profile_name} profile"
            p = cls()
            verdict = p.applies_to(item, profile)
            if not verdict:
                assert isinstance(verdict.reason, str) and verdict.reason, case
                with pytest.raises(NotApplicable) as err:
                    p.fit(item, profile, made_up_sweep(item))
                assert verdict.reason in str(err.value), case
                refused.append(case)
                continue
            try:
                fitted = p.fit(item, profile, made_up_sweep(item) if cls.needs_measurements else None)
            except NotApplicable as exc:  # found out while fitting (a loop whose length depends on data)
                assert str(exc).startswith(f"{name}: ") and len(str(exc)) > len(name) + 10, case
                refused.append(case)
                continue
            assert fitted is p, case
            try:
                predictions = p.predict(sizes)
            except NotApplicable as exc:  # a size past what the model handles (a graph too large to unroll)
                assert str(exc).startswith(f"{name}: ") and "=" in str(exc), case
                refused.append(case)
                continue
            assert [q.size for q in predictions] == sizes, case
            for q in predictions:
                assert isinstance(q, Prediction) and q.model == name, case
                assert math.isfinite(q.seconds) and q.seconds > 0, case
                assert math.isfinite(q.low) and math.isfinite(q.high) and 0 <= q.low <= q.seconds <= q.high, case
                assert q.check() is q and isinstance(q.summary, str)
            applied.append(case)
    assert applied, f"{name} applied to nothing"


@pytest.mark.parametrize("name", registry.names())
def test_refuses_what_it_cannot_model_with_a_reason(name, items, profiles):
    cls = registry.get(name)
    verdict = cls().applies_to(object(), profiles["pocl"])  # not a kernel spec nor an app
    assert not verdict and verdict.reason
    with pytest.raises(NotApplicable, match=f"^{name}: "):
        cls().fit(object(), profiles["pocl"])
    if cls.needs_measurements:
        vadd = items["vadd"]
        with pytest.raises(NotApplicable, match="sweep"):
            cls().fit(vadd, profiles["pocl"], None)
        one = made_up_sweep(vadd).subset([0])
        with pytest.raises(NotApplicable, match="sweep"):
            cls().fit(vadd, profiles["pocl"], one)
