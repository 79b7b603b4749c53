"""The memory terms both static models share: which of the profile's bandwidths prices a launch's traffic."""

import pytest

from gpuprofiler.models.costs import cpu_fills_only, dram_bandwidth
from gpuprofiler.profile.file import Profile, entry
from gpuprofiler.profile.hardware import view


def _bandwidths(device_type: str, figures: dict[str, dict[str, float]], **bandwidth) -> Profile:
    """A profile with these bandwidths by kind and width (GB/s), each kind's best as its figure."""
    by_width = {k: {w: entry(v * 1e9, "B/s", f"float{w}") for w, v in widths.items()} for k, widths in figures.items()}
    best = {f"{k}_Bps": entry(max(e["value"] for e in v.values()), "B/s", f"best {k}") for k, v in by_width.items()}
    return Profile({"device": {"type": device_type}, "bandwidth": {"by_width": by_width, **bandwidth, **best}})


def _profile(device_type: str) -> Profile:
    return _bandwidths(device_type, {"read": {"4": 30, "8": 37, "16": 46}, "write": {"4": 16, "8": 31, "16": 48},
                                     "copy": {"4": 23, "8": 36, "16": 58}, "triad": {"4": 23, "8": 37, "16": 52}})


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
    return _bandwidths("CPU", {"read": {"1": 16, "4": 34, "16": 35}, "write": {"1": 27, "4": 28, "16": 27},
                               "copy": {"1": 33, "4": 36, "16": 33}, "triad": {"1": 36, "4": 38, "16": 35}},
                       layout="contiguous")


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


def _analysis(scattered: float):
    """A CPU launch's cache analysis: 1e8 loads missing the L1, 6e7 missing the private L2, 1e6 the shared L3; the
    L2's misses all of buffer B, ``scattered`` of whose new lines fall in another page than the last."""
    from types import SimpleNamespace

    from gpuprofiler.models.cache.analysis import CacheAnalysis

    def level(name, misses, shared):
        return SimpleNamespace(name=name, misses=misses, shared=shared, write_share=0.0, by_array={"B": 1.0})

    levels = [level("L1", 1e8, False), level("L2", 6e7, False), level("L3", 1e6, True)]
    return SimpleNamespace(levels=levels, order=SimpleNamespace(line_bytes=64),
                           scattered_share=lambda lv: CacheAnalysis.scattered_share(
                               SimpleNamespace(scattered={"B": scattered}), lv))


def test_scattered_loads_the_shared_cache_serves_are_priced_apart_from_the_served_stream():
    """The loads missing the last private level but not the last level: those at scattered lines at the profile's
    gather_llc_s (added to the work), the rest a line each at the L3-range bandwidth (a bound); without the figure
    every one in the bound, as before."""
    from gpuprofiler.models.costs import cache_served, scattered_served

    base = {"device": {"type": "cpu", "compute_units": 2}}
    with_figure = Profile({**base, "bandwidth": {"gather_llc_s": entry(0.6e-9, "s", "gather over 4 MiB")}})
    without = Profile({**base, "bandwidth": {}})
    bws = [None, 64e9, 30e9]
    for share in (0.0, 0.25, 1.0):
        a = _analysis(share)
        loads = 6e7 - 1e6
        added, source = scattered_served(with_figure, a)
        assert added == pytest.approx(loads * share * 0.6e-9, rel=1e-12)
        assert (added > 0) == (share > 0) and ("gather_llc_s" in source if share else True)
        served, _ = cache_served(with_figure, a, bandwidths=bws)
        assert served == pytest.approx(loads * (1 - share) * 64 / 64e9, rel=1e-12)
        assert scattered_served(without, a)[0] == 0.0
        assert cache_served(without, a, bandwidths=bws)[0] == pytest.approx(loads * 64 / 64e9, rel=1e-12)
    gpu = Profile({"device": {"type": "gpu"}, "bandwidth": {"gather_llc_s": entry(0.6e-9, "s", "x")}})
    assert scattered_served(gpu, _analysis(1.0))[0] == 0.0
