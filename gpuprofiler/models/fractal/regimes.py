"""Where the small sizes and the targets stand against the device's regime boundaries (cache sizes, the
device's concurrency), read from the hardware profile: warnings for targets the fit cannot see past, and
small sizes chosen on the target's side of the last-level cache."""

from __future__ import annotations

import functools
import math

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.profile.hardware import view


def cache_boundaries(profile) -> list[tuple[str, float]]:
    """Cache sizes that bound a regime: the latency knees, and the streaming knee (the last-level cache as a
    stream sees it, which on CPUs with a large shared cache lies well past the latency knee)."""
    hw = view(profile)
    out = [(f"L{c.level} cache ({_bytes(c.size_bytes)}, latency knee)", float(c.size_bytes)) for c in hw.caches]
    stream = hw.figure("bandwidth.streaming_llc_bytes").value
    if stream:
        out.append((f"the last-level cache as streams see it ({stream / 2**20:.0f} MiB)", float(stream)))
    return out


def regime_warnings(small: list[int], targets: list[int], working_set, work_items, profile) -> list[str]:
    """Warnings for targets on the other side of a cache size or of the device's concurrency than the small sizes."""
    if profile is None:
        return []
    out = []
    bounds = [(name, size, working_set) for name, size in cache_boundaries(profile)]
    conc = view(profile).figure("concurrency.work_items").value
    if conc:
        bounds.append((f"the device's concurrency ({conc:.0f} work-items at once)", float(conc), work_items))
    for name, limit, measure in bounds:
        if measure is None:
            continue
        try:
            small_vals = [measure(s) for s in small]
        except Exception:  # noqa: BLE001 - a size the item cannot evaluate
            continue
        if any(v is None for v in small_vals):
            continue
        small_min, small_max = min(small_vals), max(small_vals)
        what = "working set" if measure is working_set else "work-items"
        for t in targets:
            tv = measure(t)
            if tv is None:
                continue
            if tv > limit >= small_max:
                out.append(f"target {t}: its {what} ({_fmt(tv, what)}) exceeds {name}, which the small sizes "
                           f"(at most {_fmt(small_max, what)}) stay within: expect a regime change the fit cannot see")
            elif tv > limit and small_min <= limit < small_max:
                out.append(f"target {t}: the small sizes' {what} ({_fmt(small_min, what)} .. "
                           f"{_fmt(small_max, what)}) straddles {name}, which the target ({_fmt(tv, what)}) is "
                           "past: the fit mixes two regimes and its slope need not hold past the boundary")
    return out


def crosses_regime(small: list[int], target: int, working_set, work_items, profile) -> bool:
    """Whether ``target`` lies past a boundary that every small size stays within: its working set past the
    last-level cache, or its work-items past the device's concurrency (the regime changes a law fitted to the
    small sizes cannot see; the inner cache levels every sweep crosses do not count)."""
    if profile is None:
        return False
    bounds = cache_boundaries(profile)
    checks = [(max(size for _, size in bounds), working_set)] if bounds else []
    conc = view(profile).figure("concurrency.work_items").value
    if conc and conc > 1:
        checks.append((float(conc), work_items))
    for limit, measure in checks:
        if measure is None:
            continue
        try:
            if float(measure(target)) > limit >= max(float(measure(s)) for s in small):
                return True
        except Exception:  # noqa: BLE001 - a size the item cannot evaluate: no crossing known
            continue
    return False


def _bytes(v: float) -> str:
    return f"{v / 2**20:.1f} MiB" if v >= 2**20 else f"{v / 2**10:.0f} KiB"


def _fmt(v: float, what: str) -> str:
    return _bytes(v) if what == "working set" else f"{v:.0f}"


FMA_NAMES = ("float_fma", "fma.rn.f32", "float_mad")
LAUNCH_FLOOR = 50.0  # a small size runs at least this many launch overheads (where the target does)


def launch_overhead(profile) -> float | None:
    """Device time of an empty launch: the larger of ``launch.event_s`` and the fit's ``launch.fixed_s``."""
    hw = view(profile)
    values = [f.value for f in (hw.figure("launch.event_s"), hw.figure("launch.fixed_s")) if f.ok and f.value > 0]
    return max(values) if values else None


def run_cost(item, profile):
    """A rough time of one run at size n from the profile, monotone in n: the spec's declared bytes over the read
    bandwidth and flops over twice the FMA throughput, whichever is larger (a spec that declares no work, and an
    app: its working set over the bandwidth). It only places the small sizes; None where the profile lacks the
    figures."""
    from gpuprofiler.workloads.spec import KernelSpec
    from gpuprofiler.workloads.sweep import working_set

    hw = view(profile)
    bw = hw.figure("bandwidth.read_Bps")
    fma = next((f for f in (hw.instruction(n, "throughput_ops_per_s") for n in FMA_NAMES) if f.ok and f.value > 0),
               None)
    bw_ok = bw.ok and bw.value > 0
    if isinstance(item, KernelSpec) and (item.bytes is not None or item.flops is not None):
        if (item.bytes is None or not bw_ok) and (item.flops is None or fma is None):
            return None

        def cost(n: float) -> float:
            try:  # a size the spec does not take costs what the multiple below it does: monotone, a step
                inst = item.instantiate(item.valid_size(n))
                t = [float(inst.bytes) / bw.value] if item.bytes is not None and bw_ok else []
                t += [float(inst.flops) / (2.0 * fma.value)] if item.flops is not None and fma is not None else []
            except (UserError, ValueError, ArithmeticError, TypeError):
                return 0.0  # a size the spec cannot instantiate costs nothing: the sizes pass over it
            return max(t)
        return cost
    try:
        if not bw_ok or working_set(item, 2) is None:
            return None
    except Exception:  # noqa: BLE001 - an app's own working_set(n) may fail anywhere: then no cost
        return None

    def app_cost(n: float) -> float:
        try:
            return float(working_set(item, max(int(n), 1))) / bw.value
        except Exception:  # noqa: BLE001 - as above, for this size
            return 0.0
    return app_cost


def roofline(item, profile):
    """``cost(n, bandwidth)``: a kernel spec's time at size n if its declared bytes move at ``bandwidth`` and its
    flops run at twice the profile's FMA throughput, whichever is longer (the cache-aware law takes the bandwidth
    the profile measured for the size's working set). None unless the spec declares both and the profile has an
    FMA throughput."""
    from gpuprofiler.workloads.spec import KernelSpec

    if not isinstance(item, KernelSpec) or item.bytes is None or item.flops is None:
        return None
    fma = next((f for f in (view(profile).instruction(n, "throughput_ops_per_s") for n in FMA_NAMES)
                if f.ok and f.value > 0), None)
    if fma is None:
        return None
    def cost(n: float, bandwidth: float) -> float:
        try:
            inst = item.instantiate(item.valid_size(n))
            return max(float(inst.bytes) / bandwidth, float(inst.flops) / (2.0 * fma.value))
        except (UserError, ValueError, ArithmeticError, TypeError):
            return 0.0
    return functools.cache(cost)  # the laws' fits and folds ask for the same few sizes thousands of times


def work_function(item, profile, probe: int):
    """W(n) of the work law for a kernel spec: its roofline cost (:func:`run_cost`, the declared bytes over the
    read bandwidth or the flops over the FMA throughput, whichever is larger) where the spec declares both and the
    profile has both rates, so that a compute-bound kernel follows its flops (n^3 for a matrix product) and a
    streaming one its bytes; else the declared count that grows faster past ``probe``. None where nothing is
    declared. A launch of fewer work-items than the device runs at once (the profile's concurrency) leaves part of
    it idle: its cost is what a full device would take, W(n) * C / w(n) (see :func:`filling`)."""
    law = _work_function(item, profile, probe)
    return None if law is None else functools.cache(filling(law, item, profile))  # as roofline's


def concurrency(profile) -> float | None:
    """The work-items the device runs at once (``concurrency.work_items``) where it runs more than one; else None
    (unmeasured, or a device that fills at once)."""
    conc = view(profile).figure("concurrency.work_items")
    return float(conc.value) if conc.ok and conc.value and conc.value > 1 else None


def filling(law, item, profile):
    """``law`` with the device filling up: W(n) * max(1, C / w(n)), w(n) the work-items of the launch at n and C
    the work-items the device runs at once (``concurrency.work_items``). Below C the time is that of C work-items
    each doing a work-item's share (a 128 x 128 matrix product on a GPU that runs 65000 threads at once costs like
    one a quarter of the device's size), so small sizes that leave the device partly idle do not teach the law a
    per-work cost four times too high. Unchanged without the figure (and on a CPU, whose few cores fill at once)."""
    from gpuprofiler.workloads.sweep import work_items

    conc = concurrency(profile)
    if conc is None:
        return law

    def filled(n: float) -> float:
        try:
            items = work_items(item, n)
        except (UserError, ValueError, ArithmeticError, TypeError):
            items = None
        w = float(law(n))
        return w * max(1.0, conc / items) if items else w

    return filled


def _work_function(item, profile, probe: int):
    from gpuprofiler.workloads.sweep import work_count

    declared = [k for k in ("bytes", "flops") if getattr(item, k, None) is not None]
    if not declared:
        return None
    hw = view(profile)
    have_rates = hw.figure("bandwidth.read_Bps").ok and any(
        hw.instruction(n, "throughput_ops_per_s").ok for n in FMA_NAMES)
    if len(declared) == 2 and have_rates:
        return run_cost(item, profile)
    if len(declared) == 1:
        return work_count(item)

    def count(key):
        return lambda n: float(getattr(item.instantiate(item.valid_size(n)), key))

    try:
        growth = {k: count(k)(2 * probe) / count(k)(probe) for k in declared}
    except (UserError, ValueError, ArithmeticError, TypeError, ZeroDivisionError):
        return work_count(item)
    return count("flops" if growth["flops"] > growth["bytes"] * (1 + 1e-9) else "bytes")


def _first(ok, lo: int, hi: int) -> int:
    """The smallest integer in [lo, hi] where the monotone predicate ``ok`` holds (hi if it holds nowhere)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return lo if ok(lo) else hi


def _size_at(cost, want: float, lo: int, hi: int) -> int:
    """The smallest integer size in [lo, hi] whose cost reaches ``want`` (hi if none does)."""
    return _first(lambda n: cost(n) >= want, lo, hi)


def hardware_sizes(target: int, working_set, profile, count: int = 8, ratio: float = 8.0,
                   margin: float = 1.5, cost=None, floor_rule: bool = True) -> tuple[list[int], list[str]]:
    """Small sizes below the target, chosen by what a run costs rather than by the size parameter.

    With ``cost`` (a run's rough time at size n, :func:`run_cost`): the largest small size costs 1/``ratio`` of
    the target (a 3-D grid of side n: n^3 work, so that size is half the target's side, not an eighth), the
    smallest 1/16 of the largest, and none costs less than ``LAUNCH_FLOOR`` launch overheads where the target
    costs more (``floor_rule``: where the cost is the declared work's; a working set's time is no estimate of a
    compute-bound kernel's); sizes are spread evenly in cost. Without it, up to target/``ratio`` in the size.
    Either way the working sets stay on the target's side of the last-level cache where that leaves the largest
    small size at most half the target."""
    notes = []
    target = int(target)
    if cost is not None and target > 2 and cost(target) > 0:
        top = cost(target)
        hi_cost, lo_cost = top / ratio, top / ratio / 16.0
        launch = launch_overhead(profile)
        floor = LAUNCH_FLOOR * launch if floor_rule and launch and top >= LAUNCH_FLOOR * launch else 0.0
        if lo_cost < floor:  # never trivially small launches: keep a 4x spread of cost above the floor if it fits
            lo_cost, wanted = floor, hi_cost
            hi_cost = max(hi_cost, min(top / 1.25, 4.0 * floor))
            closer = (f"; the largest costs only {top / hi_cost:.2g}x less than the target, not {ratio:g}x"
                      if hi_cost > wanted else "")
            notes.append(f"no small size runs under {LAUNCH_FLOOR:.0f} launch overheads ({launch * 1e6:.3g} us each; "
                         f"the target costs about {top / launch:.3g}){closer}")
        lo = _size_at(cost, lo_cost, 1, target)
        hi = max(lo, _size_at(cost, hi_cost, lo, target))
        if cost(hi) > hi_cost * 1.0001 and hi - 1 >= lo and cost(hi - 1) >= lo_cost:
            hi -= 1
        if hi <= lo:  # the target is barely above the floor: the sizes sit between the two
            hi = max(lo + 1, _size_at(cost, (max(lo_cost, cost(lo)) + top) / 2.0, lo, target))
        hi = min(hi, target - 1)
        lo = min(lo, hi)
        if floor and cost(lo) < floor:
            notes.append(f"the target costs barely {LAUNCH_FLOOR:.0f} launch overheads: no smaller size reaches that, "
                         "so the small sizes are launch-bound and cannot show how the kernel's work scales")
    else:
        hi = max(2, int(target / ratio))
        lo = max(1, hi // 16)
    bounds = cache_boundaries(profile) if profile is not None else []
    if bounds and working_set is not None:
        llc = max(size for _, size in bounds)
        if working_set(target) > llc and working_set(lo) <= margin * llc:
            n = 1  # the first power of two past margin * LLC (or the target), then the smallest size past it
            while working_set(n) <= margin * llc and n < target:
                n *= 2
            past = _first(lambda m: working_set(m) > margin * llc, max(n // 2, 1), n)
            where = f"the last-level cache ({llc / 2**20:.1f} MiB)"
            if cost is None and past * 4 <= target / 2:  # past the cache with a 4x spread, at most half the target
                lo = past
                if lo * 2 > hi:
                    hi = max(lo + 1, min(lo * 4, target // 2))
                    notes.append(f"to keep the small sizes past {where} the largest small size is {hi}, only "
                                 f"{target / hi:.1f}x below the target")
            elif cost is None:
                notes.append(f"the target's working set is too close to {where} to measure small sizes past it: "
                             "they stay below it, and the fit cannot see the change of regime")
            elif cost(past) * 4 <= cost(target) / 2:
                # past the cache, with a 4x spread of cost, the largest at most half the target's cost
                lo = past
                if cost(hi) < 4 * cost(lo):
                    hi = max(lo + 1, _size_at(cost, 4 * cost(lo), lo, target - 1))
                    notes.append(f"to keep the small sizes past {where} the largest costs only "
                                 f"{cost(target) / cost(hi):.2g}x less than the target, not {ratio:g}x")
            else:
                notes.append(f"the target's working set is too close to {where} to measure small sizes past it: "
                             "they stay below it, and the fit cannot see the change of regime")
    if cost is not None and hi > lo:
        want = np.geomspace(cost(lo), cost(hi), count)
        grid = np.unique([lo, *(_size_at(cost, w, lo, hi) for w in want[1:-1]), hi])
    else:
        grid = np.unique(np.round(np.geomspace(lo, max(hi, lo), count)).astype(int))
    return [int(g) for g in grid], notes


def recommended_small(item, targets: list[int], profile) -> tuple[list[int], list[str], str]:
    """The small sizes to measure for ``targets``: hardware-aware (:func:`hardware_sizes`, placed by a run's cost
    and the last-level cache, then laid out like the target: :func:`aligned_like`) where there is a profile and the
    item declares a working set; else the item's own
    ``small`` list. Returns the sizes, the chooser's notes and where the sizes came from (``"hardware"`` or
    ``"spec"``)."""
    from gpuprofiler.workloads.spec import KernelSpec
    from gpuprofiler.workloads.sweep import working_set

    top = max(int(t) for t in targets)
    try:
        has_ws = working_set(item, top) is not None
    except Exception:  # noqa: BLE001 - an app's own working_set(n) may fail: then the item's list
        has_ws = False
    if profile is None or not has_ws:
        return list(getattr(item, "small", []) or []), [], "spec"
    multiple = int(getattr(item, "size_multiple", 1) or 1)

    def ws(n: float) -> float:
        try:
            return float(working_set(item, max(int(n), 1)))
        except Exception:  # noqa: BLE001 - a size the item cannot take touches nothing: the sizes pass over it
            return 0.0

    declared = not isinstance(item, KernelSpec) or item.bytes is not None or item.flops is not None
    sizes, notes = hardware_sizes(top, ws, profile, cost=run_cost(item, profile), floor_rule=declared)
    if multiple > 1:  # the nearest multiple that the item takes, below the targets
        sizes = sorted({m for m in (max(multiple, multiple * round(s / multiple)) for s in sizes) if m < top})
    step = alignment_step(item, profile)
    if step > 1:
        sizes = aligned_like(sizes, top, step)
    given = [int(v) for v in list(getattr(item, "small", []) or []) + list(targets)]
    if len(given) >= 2 and all(v > 0 and v & (v - 1) == 0 for v in given):
        # every size the spec itself names is a power of two (a kernel that masks with n - 1, a butterfly): only
        # such sizes, as the spec's own sizes show; sizes past the rounding's reach are dropped
        rounded = sorted({1 << round(math.log2(v)) for v in sizes} - {1})
        sizes = [v for v in rounded if v < top]
        notes.append("the spec's own sizes are all powers of two: the small sizes are too")
    return sizes, notes, "hardware"


def alignment_step(item, profile) -> int:
    """How many of the size's units make a whole cache line (a GPU's sector) of the spec's smallest element, and
    a multiple of the spec's ``size_multiple``: sizes that agree modulo this step lay their rows out alike."""
    from gpuprofiler.models.cache.streams import device_order

    multiple = int(getattr(item, "size_multiple", 1) or 1)
    itemsizes = [np.dtype(a.dtype).itemsize for a in getattr(item, "args", []) if not a.is_scalar]
    if profile is None or not itemsizes:
        return multiple
    per_line = max(1, device_order(profile).line_bytes // max(1, min(itemsizes)))
    return int(np.lcm(per_line, multiple))


def aligned_like(sizes: list[int], target: int, step: int) -> list[int]:
    """``sizes`` moved to the target's residue modulo ``step`` (a row of n floats starts a line at the same offsets
    as the target's rows, so a vectorised load splits across lines as often): gesummv on this VM's PoCL took 434,
    584, 493, 734 and 444 us at n = 704, 708, 712, 714 and 720 (n mod 16 = 0, 4, 8, 10, 0). A size is moved to the
    nearest such size, never below the smallest; one that would move by more than an eighth stays."""
    rest = int(target) % step
    lowest = min(sizes) if sizes else 0
    out = set()
    for s in sizes:
        near = step * round((s - rest) / step) + rest
        if near < lowest:
            near += step
        out.add(int(near) if 0 < near < target and abs(near - s) * 8 <= s else int(s))
    return sorted(v for v in out if v < target)
