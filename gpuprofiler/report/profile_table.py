"""Human views of a hardware profile: the `profile show` table and `profile compare`'s side-by-side table."""

from __future__ import annotations

from typing import Any

from gpuprofiler.calibrate.caches import DEVICE_TYPES, level_names
from gpuprofiler.profile.file import Profile, is_entry, method_version, method_version_of


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        for scale, name in ((1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"), (1e-12, "ps")):
            if abs(value) >= scale:
                return f"{value / scale:.3g} {name}"
        return f"{value:.3g} s"
    if unit == "B/s":
        return f"{value / 1e9:.3g} GB/s"
    if unit == "op/s":
        return f"{value / 1e9:.3g} Gop/s"
    if unit == "s/thread":
        return f"{value * 1e12:.3g} ps/thread"
    return f"{value:.4g} {unit}"


def _row(label: str, e: Any, old: str = "") -> str:
    if not is_entry(e):
        return f"  {label:<34} -"
    if e["status"] != "ok":
        return f"  {label:<34} FAILED: {e.get('reason', '')}{old}"
    iv = e.get("interval")
    interval = f"  [{_fmt(iv[0], e['unit'])} .. {_fmt(iv[1], e['unit'])}]" if iv else ""
    return f"  {label:<34} {_fmt(e['value'], e['unit']):>14}{interval}{old}"


def _old(d: dict, key: str) -> str:
    """A note for a figure the profile measured with an older method than this gpuprofiler's, else ''."""
    have, now = method_version(d, key), method_version_of(key)
    return f"  (method v{have}, now v{now}: re-calibrate)" if have < now else ""


def cache_names(d: dict) -> list[str]:
    """The profile's cache level names: as recorded, else (profiles before they were) from the device type."""
    caches = [c for c in d.get("caches") or [] if isinstance(c, dict)]
    kind = str((d.get("device") or {}).get("type", "")).lower()
    derived = level_names(len(caches), kind) if kind in DEVICE_TYPES else []
    return [str(c.get("name") or (derived[i] if derived else f"L{c.get('level', i + 1)}"))
            for i, c in enumerate(caches)]


def show(profile: Profile) -> str:
    d = profile.data
    dev = d.get("device") or {}
    lines = [f"{dev.get('name')} ({dev.get('id')}, {dev.get('driver')})",
             f"calibrated {d.get('created')} by gpuprofiler {d.get('gpuprofiler_version')}"
             f"{' (quick)' if d.get('quick') else ''} in {d.get('duration_s') or 0:.1f} s"]
    clock = d.get("clock") or {}
    if clock.get("hz"):
        lines.append(f"clock {clock['hz'] / 1e6:.0f} MHz ({clock.get('source')})")
    for section, keys in (
        ("launch", ("fixed_s", "per_thread_s", "event_s", "round_trip_s", "back_to_back_s", "queue_to_start_s")),
        ("memory", ("read_s", "read_step_s", "write_s", "write_step_s", "cached_read_s", "dram_latency_s")),
        ("bandwidth", ("read_Bps", "write_Bps", "copy_Bps", "triad_Bps", "gather_s")),
        ("transfer", ("htod_Bps", "dtoh_Bps", "htod_pinned_Bps", "dtoh_pinned_Bps", "latency_s")),
        ("concurrency", ("work_items",)),
        ("local_memory", ("latency_s", "latency_cycles")),
        ("tlb", ("reach_pages", "miss_s")),
    ):
        if section in d:
            lines.append(section)
            lines += [_row(k, d[section].get(k), _old(d, f"{section}.{k}")) for k in keys if k in d[section]]
    if d.get("caches"):
        lines.append("caches (knees of the latency curve)")
        caches = [c for c in d["caches"] if isinstance(c, dict)]
        for name, c in zip(cache_names(d), caches):
            cyc = f", {c['latency_cycles']:.1f} cycles" if c.get("latency_cycles") else ""
            size = f"{c['size_bytes'] / 1024:.0f} KiB" if c.get("size_bytes") else "size -"
            lines.append(f"  {name}: {size}, {_fmt(c.get('latency_s'), 's')}{cyc}")
    if d.get("instructions"):
        lines.append("instructions (latency; throughput)")
        for op, r in d["instructions"].items():
            if not isinstance(r, dict):
                continue
            lat = r.get("latency_cycles") or r.get("latency_s")
            if r.get("status") in ("failed",) or (is_entry(lat) and lat["status"] != "ok"):
                reason = (r.get("latency_s") or {}).get("reason") or r.get("reason", "")
                lines.append(f"  {op:<22} FAILED: {reason}{_old(d, f'instructions.{op}')}")
                continue
            if r.get("status") == "skipped":
                lines.append(f"  {op:<22} skipped: {r.get('reason')}")
                continue
            lat_s = r.get("latency_s", {}).get("value") if is_entry(r.get("latency_s")) else None
            cyc = r.get("latency_cycles", {}).get("value") if is_entry(r.get("latency_cycles")) else None
            thr = r.get("throughput_ops_per_s", {}).get("value") if is_entry(r.get("throughput_ops_per_s")) else None
            lines.append(f"  {op:<22} {_fmt(lat_s, 's'):>10}  {('%.2f cycles' % cyc) if cyc else '':>12}  "
                         f"{_fmt(thr, 'op/s') if thr else ''}{_old(d, f'instructions.{op}')}")
    failures = profile.failures()
    lines.append(f"failed measurements: {len(failures)}")
    lines += [f"  {f['key']}: {f['reason']}" for f in failures]
    return "\n".join(lines)


KEY_VALUES = ("launch.fixed_s", "launch.per_thread_s", "launch.event_s", "launch.round_trip_s",
              "launch.back_to_back_s", "launch.queue_to_start_s", "memory.read_s", "memory.read_step_s",
              "memory.write_s", "memory.write_step_s", "memory.cached_read_s", "memory.dram_latency_s",
              "bandwidth.read_Bps", "bandwidth.write_Bps", "bandwidth.copy_Bps", "bandwidth.triad_Bps",
              "bandwidth.gather_s", "transfer.htod_Bps", "transfer.dtoh_Bps", "concurrency.work_items",
              "instructions.float_fma.latency_s", "instructions.float_add.latency_s", "local_memory.latency_s")


def compare(a: Profile, b: Profile, tolerance: float = 0.10) -> tuple[str, int]:
    """Side-by-side key values of two profiles; a value agrees when the other run's value lies in its
    interval, or the two differ by at most ``tolerance``. Returns the table and the count that disagree."""
    lines = [f"{'key':<36} {'A':>12} {'B':>12} {'B/A':>7}  agree"]
    bad = 0
    keys = list(KEY_VALUES)
    for i in range(max(len(a.data.get("caches", [])), len(b.data.get("caches", [])))):
        keys += [f"caches.{i}.size_bytes", f"caches.{i}.latency_s"]
    for key in keys:
        va, vb = a.get(key, None), b.get(key, None)
        if not isinstance(va, (int, float)) or not isinstance(vb, (int, float)):
            continue
        ia = _interval(a, key)
        ib = _interval(b, key)
        within = (ia and ia[0] <= vb <= ia[1]) or (ib and ib[0] <= va <= ib[1])
        close = abs(vb - va) <= tolerance * abs(va)
        ok = bool(within or close)
        bad += not ok
        lines.append(f"{key:<36} {va:>12.4g} {vb:>12.4g} {vb / va if va else float('nan'):>7.3f}  "
                     f"{'yes' if ok else 'NO'}{' (interval)' if within and not close else ''}")
    return "\n".join(lines), bad


def _interval(p: Profile, key: str):
    try:
        node = p.entry(key)
    except (KeyError, IndexError, TypeError):
        return None
    return node.get("interval") if is_entry(node) else None
