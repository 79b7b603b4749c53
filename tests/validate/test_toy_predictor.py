"""Adding a predictor touches no module of the package: a toy roofline predictor, written and registered only
here, is run by ``validate`` on a builtin kernel like the builtin predictors."""

import csv

import pytest
from conftest import POCL_PROFILE, pocl_id

from gpuprofiler.cli.main import main
from gpuprofiler.models import registry
from gpuprofiler.models.base import APPLIES, Prediction, Predictor, refuse
from gpuprofiler.profile.file import load_profile
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.spec import KernelSpec, load_spec


class Roofline(Predictor):
    """The larger of the declared bytes over the read bandwidth and the declared flops over the FMA throughput."""

    name = "toy_roofline"

    def __init__(self, flops_per_op: float = 2.0):
        self.flops_per_op = flops_per_op

    def applies_to(self, item, profile):
        if not isinstance(item, KernelSpec) or item.bytes is None or item.flops is None:
            return refuse("it needs a kernel spec that declares work.bytes and work.flops")
        hw = view(profile)
        if not (hw.figure("bandwidth.read_Bps").ok and hw.instruction("float_fma", "throughput_ops_per_s").ok):
            return refuse("it needs the profile's read bandwidth and FMA throughput")
        return APPLIES

    def fit(self, item, profile=None, measurements=None):
        self._refuse_unless(item, profile)
        hw = view(profile)
        self.item_ = item
        self.bandwidth_ = hw.figure("bandwidth.read_Bps")
        self.fma_ = hw.instruction("float_fma", "throughput_ops_per_s")
        self.fitted_ = True
        return self

    def time(self, size, bandwidth, fma):
        inst = self.item_.instantiate(size)
        return max(inst.bytes / bandwidth, inst.flops / self.flops_per_op / fma)

    def predict(self, sizes):
        self._fitted()
        (b_lo, b_hi), (f_lo, f_hi) = self.bandwidth_.bounds(), self.fma_.bounds()
        return [Prediction(n, self.time(n, self.bandwidth_.value, self.fma_.value), self.time(n, b_hi, f_hi),
                           self.time(n, b_lo, f_lo), self.name, "max(bytes / bandwidth, flops / FMA rate)")
                for n in sizes]


@pytest.fixture
def toy():
    registry.register(Roofline)
    yield Roofline
    registry.unregister(Roofline.name)


def test_registered_predictor_is_in_the_default_model_list(toy):
    assert registry.names()[-1] == "toy_roofline" and registry.get("toy_roofline") is Roofline
    with pytest.raises(ValueError, match="already registered"):
        registry.register(type("Other", (Roofline,), {}))


@pytest.mark.slow
def test_validate_runs_a_predictor_registered_in_a_test_file(toy, tmp_path, pocl):
    out = tmp_path / "out"
    code = main(["validate", "--suite", "builtin", "--items", "matmul_tiled", "--models", "toy_roofline,fractal",
                 "--device", pocl_id(), "--profile", str(POCL_PROFILE), "--quick", "-o", str(out)])
    assert code == 0
    with open(out / "predictions.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    toy_rows = [r for r in rows if r["model"] == "toy_roofline"]
    spec = load_spec(resolve("matmul_tiled"))
    assert [(r["kernel"], int(r["size"])) for r in toy_rows] == [("matmul_tiled", t) for t in spec.target]
    (row,) = toy_rows
    expect = Roofline().fit(spec, load_profile(POCL_PROFILE)).predict(spec.target)[0]
    assert float(row["predicted_s"]) == pytest.approx(expect.seconds, rel=1e-9)
    assert float(row["interval_low_s"]) <= float(row["predicted_s"]) <= float(row["interval_high_s"])
    assert row["detail"] == "max(bytes / bandwidth, flops / FMA rate)"
    assert {r["model"] for r in rows} == {"toy_roofline", "fractal"}
    with open(out / "summary.csv", newline="") as fh:
        assert "toy_roofline" in {s["model"] for s in csv.DictReader(fh)}
    assert "| toy_roofline | 1 |" in (out / "report.md").read_text()
