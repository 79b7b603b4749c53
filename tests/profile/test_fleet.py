"""``profile fleet``'s outlier rule on hand-made fleets: exact, deterministic cases."""

from pathlib import Path

from gpuprofiler.profile.fleet import Device, Figure, compare, outliers


def fleet(values, key="bandwidth.read_Bps", interval=None):
    return [Device(Path(f"k/host{i}/profile.json"), "k", "K", f"host{i}",
                   {key: Figure(v, *(v * (1 - interval), v * (1 + interval)) if interval else (None, None))})
            for i, v in enumerate(values)]


def test_a_device_ten_percent_slow_is_the_only_outlier():
    values = [100.0 * (1 + 0.01 * d) for d in (0.3, -0.5, 0.8, -1.1, 0.2, 0.0, -0.4, 0.6)] + [90.0]
    rows = compare(fleet(values, interval=0.01))
    assert list(outliers(rows)) == ["k/host8"]
    worst = outliers(rows)["k/host8"][0]
    assert worst["slower"] and worst["deviation"] < -0.09


def test_identical_figures_but_one_a_hair_off_are_not_outliers():
    rows = compare(fleet([1980e6] * 8 + [1980e6 * 1.001], key="clock.hz"))
    assert outliers(rows) == {}
    rows = compare(fleet([1980e6] * 8 + [1980e6 * 1.10], key="clock.hz"))
    assert list(outliers(rows)) == ["k/host8"] and not outliers(rows)["k/host8"][0]["slower"]


def test_a_device_whose_own_interval_holds_the_median_is_not_flagged():
    devices = fleet([100.0] * 8 + [80.0], interval=0.01)
    devices[-1].figures["bandwidth.read_Bps"] = Figure(80.0, 70.0, 101.0)  # a wide interval that holds the median
    assert outliers(compare(devices)) == {}


def test_fewer_than_three_devices_of_a_kind_are_not_judged():
    assert compare(fleet([100.0, 50.0])) == []
