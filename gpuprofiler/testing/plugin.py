"""The pytest plugin: performance tests of GPU kernels in any project's test suite.

Loaded through the ``pytest11`` entry point. This module imports only pytest and the standard library: the
package's measuring code (and with it numpy, pyopencl or pycuda) is imported when a test first uses one of the
fixtures, so a test run that uses none of them pays nothing for the plugin.

Fixtures: ``gpu_device`` (parametrised over ``--gpu-device`` / ``GPUPROFILER_TEST_DEVICE``), ``gpu_profile`` (the
device's stored hardware profile) and ``gpu_measure`` (times a spec, builtin, app or callable, holds it to the
test's ``@pytest.mark.gpu_perf`` budgets). See the README's "Performance tests with pytest".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV_DEVICE = "GPUPROFILER_TEST_DEVICE"
FIXTURES = ("gpu_device", "gpu_profile", "gpu_measure")
MARKER = ("gpu_perf(max_s=None, max_slowdown=None, predicted_within=None, model='fractal'): a GPU performance "
          "test. max_s: the modelling figure's budget in seconds; max_slowdown: the slowdown against the saved "
          "baseline that fails it (else --gpu-compare-fail); predicted_within: the largest |error| against what "
          "the model (fractal, maxplus or pipeline) predicts. Every test using a gpu_* fixture carries this marker, "
          "so -m 'not gpu_perf' deselects them all.")
_SESSION = pytest.StashKey[object]()
_OPTIONS = pytest.StashKey[object]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("gpuprofiler", "GPU kernel performance tests (gpuprofiler)")
    group.addoption("--gpu-device", default=None, metavar="IDS",
                    help=f"devices to run gpu_* tests on, comma-separated (opencl:P:D, cuda:I, 'default', or 'all'); "
                         f"else ${ENV_DEVICE}, else the default device")
    group.addoption("--gpu-profile", default=None, metavar="FILE",
                    help="hardware profile for gpu_profile and the models (default: the device's stored one)")
    group.addoption("--gpu-budget", default="1.0", metavar="SECONDS",
                    help="seconds of sampling per measurement (default 1.0)")
    group.addoption("--gpu-save", default=None, metavar="NAME",
                    help="save every measurement as baseline NAME (a JSON file in --gpu-baseline-dir)")
    group.addoption("--gpu-compare", nargs="?", const="", default=None, metavar="NAME",
                    help="compare each measurement with baseline NAME (default: the newest saved)")
    group.addoption("--gpu-compare-fail", default=None, metavar="PCT",
                    help="fail a test whose kernel is slower than the baseline by more than PCT (e.g. 10%%), with "
                         "statistical confidence (see --gpu-alpha)")
    group.addoption("--gpu-alpha", default="0.01", metavar="P",
                    help="false-alarm rate of the regression test (default 0.01)")
    group.addoption("--gpu-baseline-dir", default=None, metavar="DIR",
                    help="where baselines are saved (default .gpuprofiler/baselines under the rootdir)")
    group.addoption("--gpu-isolate", action="store_true", default=False,
                    help="time specs and apps in a worker process per device, so that a crashing driver fails the "
                         "test and not the pytest run (default: in this process)")
    group.addoption("--gpu-json", default=None, metavar="FILE", help="write every measurement and verdict as JSON")
    group.addoption("--gpu-plot", default=None, metavar="DIR",
                    help="write a histogram of each measurement's samples (against the baseline's) to DIR")


def pytest_configure(config) -> None:
    from gpuprofiler.testing.options import parse

    config.addinivalue_line("markers", MARKER)
    config.stash[_SESSION] = None
    try:
        config.stash[_OPTIONS] = parse(config.getoption, os.environ.get(ENV_DEVICE), Path(str(config.rootpath)))
    except ValueError as exc:
        raise pytest.UsageError(f"gpuprofiler: {exc}") from None


def _session(config):
    """The session's state, made when a fixture first needs it (the package's measuring code imported then)."""
    if config.stash.get(_SESSION, None) is None:
        from gpuprofiler.testing.session import GpuSession

        config.stash[_SESSION] = GpuSession(config.stash[_OPTIONS])
    return config.stash[_SESSION]


def _device_params(config) -> list[str]:
    wanted = config.stash[_OPTIONS].devices
    if "all" in wanted:
        from gpuprofiler.device import list_devices

        try:
            found = [d.id for d in list_devices() if not d.extra.get("problem")]
        except Exception:  # noqa: BLE001 - no driver at all: the fixture skips with the reason
            found = []
        wanted = [w for w in wanted if w != "all"] + [d for d in found if d not in wanted]
        return wanted or ["default"]
    return wanted


def pytest_generate_tests(metafunc) -> None:
    if "gpu_device" in metafunc.fixturenames:
        params = _device_params(metafunc.config)
        metafunc.parametrize("gpu_device", params, ids=params, indirect=True, scope="session")


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if set(FIXTURES) & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("gpu_perf") is None:
            item.add_marker(pytest.mark.gpu_perf)


def _outcome(call):
    """Run ``call``; the plugin's Skip and Failed become pytest's skip and failure, with their message only."""
    from gpuprofiler.testing.session import Failed, Skip

    try:
        return call()
    except Skip as exc:
        skip, failure = str(exc), None
    except Failed as exc:
        skip, failure = None, str(exc)
    if skip is not None:  # outside the except clause: pytest shows the message alone, not a chain of exceptions
        pytest.skip(skip)
    pytest.fail(failure, pytrace=False)


@pytest.fixture(scope="session")
def gpu_device(request):
    """The device under test (a ``GpuDevice``: id, name, info, backend), opened once per session."""
    requested = getattr(request, "param", "default")
    return _outcome(lambda: _session(request.config).device(requested))


@pytest.fixture
def gpu_profile(request, gpu_device):
    """The device's hardware profile (``--gpu-profile``, else the stored one); skips, saying how to make one."""
    return _outcome(lambda: _session(request.config).profile(gpu_device))


@pytest.fixture
def gpu_measure(request, gpu_device):
    """``gpu_measure(target, size=None, *, name=None, check=True, set=None, budget_s=None)``: time ``target`` (a
    spec or app path, a builtin's name, or a callable that takes the backend and launches through it) on the
    device under test; returns a ``GpuResult`` (figure, interval, median, samples, device) after holding it to the
    test's ``gpu_perf`` budgets and the saved baseline."""
    session = _session(request.config)
    marker = request.node.get_closest_marker("gpu_perf")
    budgets = dict(marker.kwargs) if marker is not None else {}

    def measure(target, size=None, *, name=None, check=True, set=None, budget_s=None):  # noqa: A002 - as the CLI
        return _outcome(lambda: session.measure(request.node.nodeid, gpu_device, budgets, target, size, name=name,
                                                check=check, overrides=set, budget_s=budget_s))

    return measure


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None or not (session.results or session.failures):
        return
    from gpuprofiler.testing.summary import lines

    terminalreporter.section("gpuprofiler: GPU kernel performance")
    for line in lines(session):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session, exitstatus) -> None:
    state = session.config.stash.get(_SESSION, None)
    if state is None:
        return
    try:
        saved = state.save_baselines()
        if saved:
            state.notes_at_end = [f"saved {saved[1]} measurement(s) as baseline {saved[0]}"]
        if state.options.json:
            state.write_json(state.options.json)
        if state.options.plot and state.results:
            state.plot(state.options.plot)
    finally:
        state.close()
