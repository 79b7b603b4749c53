"""Shared pieces of the microbenchmarks: timing a launch, linear fits with intervals, the clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy.special import stdtrit

from gpuprofiler.measure.engine import Engine
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.stats import Summary

Progress = Callable[[str], None] | None


def say(progress: Progress, message: str) -> None:
    if progress:
        progress(message)


@dataclass
class LinearFit:
    """y = slope * x + intercept with 95% intervals of both (ordinary least squares, t distribution)."""

    slope: float
    intercept: float
    slope_ci: tuple[float, float]
    intercept_ci: tuple[float, float]
    r2: float
    n: int


def linear_fit(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> LinearFit:
    """Ordinary least squares as ``scipy.stats.linregress`` fits it, in numpy (a calibration then does not import
    scipy.stats: half a second of every run). A constant y is fitted exactly (r2 1, no interval), where linregress
    gives nan."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    xm, ym = float(np.mean(x)), float(np.mean(y))
    sxx, sxy, _, syy = (float(v) for v in np.cov(x, y, bias=True).flat)
    if not sxx > 0:
        raise ValueError("a linear fit needs at least two distinct x values")
    slope = sxy / sxx
    intercept = ym - slope * xm
    r = 1.0 if syy == 0 else float(np.clip(sxy / np.sqrt(sxx * syy), -1.0, 1.0))  # a constant y: fit exactly
    stderr = float(np.sqrt((1 - r**2) * syy / sxx / (n - 2))) if n > 2 else 0.0
    intercept_stderr = stderr * float(np.sqrt(sxx + xm**2))
    t = _t_quantile(confidence, max(n - 2, 1))
    return LinearFit(slope, intercept, (slope - t * stderr, slope + t * stderr),
                     (intercept - t * intercept_stderr, intercept + t * intercept_stderr), r**2, n)


def _t_quantile(confidence: float, dof: int) -> float:
    """The two-sided ``confidence`` quantile of Student's t with ``dof`` degrees of freedom."""
    return float(stdtrit(dof, 0.5 + confidence / 2))


def origin_fit(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Slope of y = s*x through the origin (least squares) with its interval (t distribution)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    sxx = float(np.sum(x * x))
    slope = float(np.sum(x * y) / sxx)
    dof = max(len(x) - 1, 1)
    se = float(np.sqrt(np.sum((y - slope * x) ** 2) / dof / sxx))
    t = _t_quantile(confidence, dof)
    return slope, (slope - t * se, slope + t * se)


def alternating_times(backend: Any, kernels: Sequence[Any], global_size: Sequence[int], local_size: Sequence[int],
                      args: Sequence[Any], policy: TimingPolicy) -> list[Summary]:
    """Device event times of several kernels launched in alternation, one of each per round: a shared machine's
    load drifts, and kernels sampled one after the other would see different loads (two chain lengths
    whose ratio must be 2, say). Each kernel keeps the policy's budget: the rounds get their sum."""
    engine = Engine(policy.but(budget_s=policy.budget_s * len(kernels)))

    def run(kernel: Any) -> Callable[[], float]:
        def once() -> float:
            event = engine.launch_once(backend, kernel, global_size, local_size, args)
            backend.finish()
            return event.seconds()
        return once

    return [t.device for t in engine.interleave([run(k) for k in kernels])]


def cpu_clock_hz() -> tuple[float, str] | None:
    """Mean current core clock from /proc/cpuinfo, read now (Linux)."""
    try:
        mhz = [float(line.split(":")[1]) for line in open("/proc/cpuinfo") if line.lower().startswith("cpu mhz")]
    except OSError:
        return None
    return (float(np.mean(mhz)) * 1e6, "/proc/cpuinfo cpu MHz, read at run time") if mhz else None


def device_clock(backend: Any) -> dict[str, Any]:
    """The clock for cycles <-> seconds: the CPU's current clock for CPU devices, else the device's reported clock.

    The CUDA instruction benchmarks replace this with the SM clock measured from %clock64 against events.
    """
    if backend.info.type == "cpu":
        found = cpu_clock_hz()
        if found:
            return {"hz": found[0], "source": found[1]}
    if backend.info.clock_mhz:
        return {"hz": backend.info.clock_mhz * 1e6, "source": f"{backend.kind} device max clock (reported)"}
    return {"hz": None, "source": "unknown"}


def random_cycle(count: int, rng: np.random.Generator, stride: int = 1) -> np.ndarray:
    """A random cyclic permutation: ``next[p[i]] = p[i+1]`` over ``count`` slots ``stride`` elements apart.

    Element ``j*stride`` holds the index of the next slot's element; one cycle visits every slot.
    """
    order = rng.permutation(count).astype(np.uint32) * np.uint32(stride)
    nxt = np.zeros(count * stride, dtype=np.uint32)
    nxt[order] = np.roll(order, -1)
    return nxt


def page_grouped_cycle(count: int, rng: np.random.Generator, stride: int = 16, lines_per_page: int = 64) -> np.ndarray:
    """A random cyclic permutation of ``count`` lines that visits pages in random order and the lines of
    each page in random order: the same cache behaviour as a plain random cycle, with 1/lines_per_page
    of its TLB misses, so that cache knees are not confused with TLB reach.
    """
    pages = max(1, count // lines_per_page)
    per = count // pages
    patterns = np.argsort(rng.random((256, per)), axis=1).astype(np.uint32)  # 256 random in-page orders
    within = patterns[rng.integers(0, 256, pages)]
    order = (rng.permutation(pages).astype(np.uint32)[:, None] * np.uint32(per) + within).ravel()
    order *= np.uint32(stride)
    nxt = np.zeros(pages * per * stride, dtype=np.uint32)
    nxt[order] = np.roll(order, -1)
    return nxt


def written_buffer(backend: Any, nbytes: int, dtype: Any = np.uint32) -> Any:
    """A device buffer of ``nbytes`` of ones of ``dtype`` whose every page the process wrote: pages only ever read
    may all map one shared zero page, which a kernel's data never does. On a Zen 4 VM's PoCL that hid about two
    thirds of the page walks' cost at 2896-4096 pages, and a guarded stream over 128 MiB never written took 0.83 ns
    a work-item, 1.12 written, where the same copy in validate's kernels took 1.05."""
    return backend.to_device(np.ones(nbytes // np.dtype(dtype).itemsize, dtype))[0]


class Workspace:
    """Device buffers shared by several microbenchmarks of one calibration (built once: they are big)."""

    def __init__(self, backend: Any, seed: int = 11):
        self.backend = backend
        self.rng = np.random.default_rng(seed)
        self._cycles: dict[int, tuple[Any, int]] = {}
        self._big: Any = None
        self._big_bytes = 0

    def scratch(self, nbytes: int) -> Any:
        """One large device buffer, reused (first touch of fresh memory is slow on some devices)."""
        if self._big is None or self._big_bytes < nbytes:
            self._big = None
            self._big = self.backend.alloc(nbytes)
            self._big_bytes = nbytes
        return self._big

    def cycle(self, nbytes: int, keep: bool = False) -> tuple[Any, int]:
        """A page-grouped random cycle over ``nbytes`` of 64-byte lines, uploaded; returns (buffer, lines)."""
        if nbytes in self._cycles:
            return self._cycles[nbytes]
        host = page_grouped_cycle(max(2, nbytes // 64), self.rng)
        if keep:
            buf, _ = self.backend.to_device(host)
        else:
            buf = self.scratch(max(host.nbytes, self._big_bytes))
            self.backend.to_device(host, buf)
        lines = host.size // 16
        if keep:
            self._cycles[nbytes] = (buf, lines)
        return buf, lines
