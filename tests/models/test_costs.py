"""The memory terms both static models share: which of the profile's bandwidths prices a launch's traffic."""

import pytest

from gpuprofiler.models.costs import cpu_fills_only, dram_bandwidth
from gpuprofiler.profile.file import Profile, entry
from gpuprofiler.profile.hardware import view


def _profile(device_type: str) -> Profile:
    def kind(**widths):
        return {w: entry(v, "B/s", f"float{w}") for w, v in widths.items()}

    by_width = {"read": kind(**{"4": 30e9, "8": 37e9, "16": 46e9}),
                "write": kind(**{"4": 16e9, "8": 31e9, "16": 48e9}),
                "copy": kind(**{"4": 23e9, "8": 36e9, "16": 58e9}),
                "triad": kind(**{"4": 23e9, "8": 37e9, "16": 52e9})}
    best = {f"{k}_Bps": entry(max(e["value"] for e in v.values()), "B/s", f"best {k}") for k, v in by_width.items()}
    return Profile({"device": {"type": device_type}, "bandwidth": {"by_width": by_width, **best}})


@pytest.mark.parametrize("read,write,expected", [
    (2.0, 1.0, 37e9),   # a triad's mix: float8's triad, not float16's 52 GB/s
    (1.0, 1.0, 36e9),   # a copy's
    (0.0, 1.0, 31e9),   # stores only
    (1.0, 0.0, 46e9),   # reads only: the best width, whole lines read
])
def test_a_cpu_prices_stores_at_widths_narrower_than_a_line(read, write, expected):
    bw = dram_bandwidth(_profile("CPU"), read, write)
    assert bw.value == pytest.approx(expected, rel=1e-12)
    if write:
        assert "by_width" in bw.source and ".16" not in bw.source


def test_a_gpu_without_an_access_width_keeps_the_best_figure():
    assert dram_bandwidth(_profile("GPU"), 2.0, 1.0).value == pytest.approx(52e9, rel=1e-12)
    # at an access width it takes that width's figure, as before
    assert dram_bandwidth(_profile("GPU"), 2.0, 1.0, width_bytes=32.0).value == pytest.approx(37e9, rel=1e-12)


def _contiguous_cpu() -> Profile:
    """A CPU profile measured the way CPU kernels run: one float, float4 or float16 per work-item."""
    def kind(**widths):
        return {w: entry(v, "B/s", f"float{w}") for w, v in widths.items()}

    by_width = {"read": kind(**{"1": 16e9, "4": 34e9, "16": 35e9}),
                "write": kind(**{"1": 27e9, "4": 28e9, "16": 27e9}),
                "copy": kind(**{"1": 33e9, "4": 36e9, "16": 33e9}),
                "triad": kind(**{"1": 36e9, "4": 38e9, "16": 35e9})}
    best = {f"{k}_Bps": entry(max(e["value"] for e in v.values()), "B/s", f"best {k}") for k, v in by_width.items()}
    return Profile({"device": {"type": "CPU"}, "bandwidth": {"by_width": by_width, "layout": "contiguous", **best}})


@pytest.mark.parametrize("read,write,width,expected", [
    (2.0, 1.0, 4.0, 36e9),    # a kernel written per float: the float figures, a triad's mix
    (1.0, 1.0, 4.0, 33e9),    # a copy's
    (0.0, 1.0, 4.0, 27e9),    # stores only
    (2.0, 1.0, 16.0, 38e9),   # a float4 kernel: the float4 figures
    (1.0, 0.0, 4.0, 35e9),    # reads take the best width whatever the access (a float read is held by its guard)
])
def test_a_contiguous_cpu_profile_prices_at_the_access_width(read, write, width, expected):
    bw = dram_bandwidth(_contiguous_cpu(), read, write, width_bytes=width)
    assert bw.value == pytest.approx(expected, rel=1e-12)


def test_only_a_contiguous_cpu_profile_counts_fills_alone():
    assert cpu_fills_only(view(_contiguous_cpu()))
    assert not cpu_fills_only(view(_profile("CPU")))  # strided figures: every written byte, as measured
    assert not cpu_fills_only(view(_profile("GPU")))
