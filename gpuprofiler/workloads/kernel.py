"""A kernel spec on a device: build, upload, check against the numpy reference, then time with the engine."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from gpuprofiler.device.base import Backend, Buffer, Kernel
from gpuprofiler.errors import DeviceError, UserError, stage
from gpuprofiler.measure.contention import combine, contended
from gpuprofiler.measure.engine import Engine, Timing
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.records import KERNEL_METRIC, host_figures, record
from gpuprofiler.workloads.bounds import check_instance, check_sizes
from gpuprofiler.workloads.checking import compare, poison
from gpuprofiler.workloads.safe_eval import names_in
from gpuprofiler.workloads.spec import KernelSpec, SpecInstance


@dataclass
class PreparedKernel:
    """A spec instance compiled and uploaded, ready to launch repeatedly."""

    instance: SpecInstance
    kernel: Kernel
    host: dict[str, Any]
    buffers: dict[str, Buffer]
    extra: list[Any] = field(default_factory=list)  # arguments after the spec's (an instrumented kernel's counters)
    upload_s: float = 0.0  # wall time the buffers took to allocate and fill: what a new placement of them costs

    def args(self) -> list[Any]:
        return [self.buffers.get(a.name, self.host[a.name]) for a in self.instance.spec.args] + list(self.extra)


def prepare(backend: Backend, spec: KernelSpec, size: int, seed: int = 0,
            overrides: dict[str, Any] | None = None, source_text: str | None = None,
            bounds_checked: bool = False) -> PreparedKernel:
    """Compile the spec's kernel (or ``source_text`` in its place) and upload its inputs at ``size``; the launch is
    checked against the declared shapes first unless ``bounds_checked`` (the caller followed the kernel's index
    expressions already, which also clears a launch padded past the arrays' ends that the kernel guards)."""
    instance = spec.instantiate(size, overrides)
    if not bounds_checked:
        with stage("bounds", UserError):
            check_instance(instance)
    check_fits(backend, instance)
    source = spec.source_for(backend.kind)
    kernel = backend.compile(source_text if source_text is not None else source.read_text(), spec.kernel,
                             instance.defines)
    host = instance.make_args(np.random.default_rng(seed))
    started = time.perf_counter()
    buffers = {a.name: backend.to_device(host[a.name])[0] for a in spec.args if not a.is_scalar}
    backend.finish()
    return PreparedKernel(instance, kernel, host, buffers, upload_s=time.perf_counter() - started)


def host_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def gib(need: int, have: int) -> tuple[str, str]:
    """Two byte counts as GiB with two decimals; exact bytes where the rounded figures would read the same
    ("8589934596 bytes exceeds ... (8589934592 bytes)", not "8.00 GiB exceeds ... (8.00 GiB)")."""
    a, b = f"{need / 2**30:.2f} GiB", f"{have / 2**30:.2f} GiB"
    return (a, b) if a != b else (f"{need} bytes", f"{have} bytes")


def check_fits(backend: Backend, instance: SpecInstance) -> None:
    """Refuse, before allocating anything, a size whose arrays the device cannot hold."""
    info = backend.info
    need = instance.array_bytes
    if need > info.global_mem_bytes:
        shown = gib(need, info.global_mem_bytes)
        raise DeviceError(f"{instance.spec.name} at size {instance.size} needs {shown[0]} of device memory; "
                          f"{info.name} has {shown[1]}")
    host = host_available_bytes()
    if host is not None and 2 * need > host:  # inputs, plus their copies for the reference check
        shown = gib(2 * need, host)
        raise DeviceError(f"{instance.spec.name} at size {instance.size} needs about {shown[0]} of host "
                          f"memory for its arrays and their check; {shown[1]} is available")
    limit = info.extra.get("max_mem_alloc_bytes")
    for arg in instance.spec.args:
        if not arg.is_scalar and limit:
            nbytes = math.prod(instance.shapes[arg.name]) * arg.dtype.itemsize
            if nbytes > limit:
                shown = gib(nbytes, limit)
                raise DeviceError(f"{arg.where}: {shown[0]} exceeds the device's largest allocation ({shown[1]})")


def launch(backend: Backend, prepared: PreparedKernel):
    inst = prepared.instance
    return backend.launch(prepared.kernel, inst.global_size, inst.local_size, prepared.args())


def run_checked(backend: Backend, prepared: PreparedKernel) -> float:
    """Poison the outputs, run once, read them back and compare with the reference; returns the worst error/tolerance."""
    spec = prepared.instance.spec
    outputs = [a for a in spec.args if a.output]
    read = set().union(*(names_in(c.expect) for c in spec.checks)) if spec.checks else set()
    for arg in outputs:
        if arg.name not in read:  # an in/out array (saxpy's y) keeps its input values
            backend.to_device(poison(prepared.host[arg.name]), prepared.buffers[arg.name])
    launch(backend, prepared)
    backend.finish()
    after = dict(prepared.host)
    for arg in outputs:
        out = np.empty_like(prepared.host[arg.name])
        backend.from_device(prepared.buffers[arg.name], out)
        after[arg.name] = out
    worst = compare(spec.checks, prepared.host, after, prepared.instance.names)
    for arg in outputs:  # restore the initial state so that timed runs start from the spec's inputs
        backend.to_device(prepared.host[arg.name], prepared.buffers[arg.name])
    return worst


def time_kernel(backend: Backend, prepared: PreparedKernel, policy: TimingPolicy | None = None) -> Timing:
    inst = prepared.instance
    return Engine(policy).time_launch(backend, prepared.kernel, inst.global_size, inst.local_size, prepared.args())


def _timed_run(backend: Backend, engine: Engine, prepared: PreparedKernel) -> Callable[[], float]:
    inst, args = prepared.instance, prepared.args()

    def once() -> float:
        event = engine.launch_once(backend, prepared.kernel, inst.global_size, inst.local_size, args)
        backend.finish()
        return event.seconds()

    return once


def reallocate(backend: Backend, prepared: PreparedKernel) -> None:
    """The kernel's buffers allocated afresh and filled with its initial inputs; the old ones are released only
    after, so that the new ones cannot be given the pages just freed."""
    fresh = {name: backend.to_device(prepared.host[name])[0] for name in prepared.buffers}
    backend.finish()
    prepared.buffers.clear()
    prepared.buffers.update(fresh)


def _time_placements(backend: Backend, prepared: list[PreparedKernel], policy: TimingPolicy) -> list[Timing]:
    """The group timed in ``policy.placements`` blocks, each on newly allocated buffers, every block's samples
    kept (a block's budget and minimum samples a share of the policy's): a slow placement of the pages (a column
    walk crowding a physically indexed cache's sets) is then one block of several, not the whole measurement.
    One block where a second copy of the group's buffers would not fit (half the host's free memory, the
    device's); no more blocks than the sampling budget pays for in uploads (a new placement costs what the first
    upload took: 3 to 5 s for vadd's 1.5 GiB at 2^27 on this VM, whose arrays span so many pages that where they
    land averages out)."""
    blocks = max(1, policy.placements)
    if 2 * sum(float(one.instance.array_bytes) for one in prepared) > _room(backend):
        blocks = 1  # a second copy of the buffers would not fit beside the first
    upload = sum(one.upload_s for one in prepared)
    if blocks > 1 and upload > 0 and math.isfinite(policy.budget_s):
        blocks = min(blocks, 1 + int(policy.budget_s * len(prepared) / upload))
    block = policy if blocks == 1 else policy.but(
        budget_s=policy.budget_s / blocks, min_samples=max(2, -(-policy.min_samples // blocks)),
        max_samples=max(2, policy.max_samples // blocks))
    merged = [Timing(policy=policy) for _ in prepared]
    shared: list[dict | None] = []
    for b in range(blocks):
        if b:
            for one in prepared:
                reallocate(backend, one)
        engine = Engine(block)
        timings = engine.interleave([_timed_run(backend, engine, one) for one in prepared],
                                    budget_s=block.budget_s * len(prepared))
        for into, timing in zip(merged, timings):
            into.device_s += timing.device_s
            into.host_s += timing.host_s
            into.warmup_s += timing.warmup_s
            into.stop_reason = timing.stop_reason
            into.placements = blocks
        shared.append(timings[0].contention if timings else None)
    for into in merged:
        into.contention = combine(shared)
    return merged


def _room(backend: Backend) -> float:
    """Bytes of buffers the device holds and the host can stage: the device's memory, at most half the host's
    free memory."""
    room = float(backend.info.global_mem_bytes)
    host = host_available_bytes()
    return min(room, host / 2) if host is not None else room


def rounds(backend: Backend, spec: KernelSpec, sizes: list[int], overrides: dict[str, Any] | None = None) -> list[list[int]]:
    """The sizes in groups measured in alternation: consecutive sizes whose arrays fit on the device and in the
    host's memory together (half of either, so that a group never crowds the device)."""
    room = _room(backend)
    groups: list[list[int]] = []
    used = 0.0
    for size in sizes:
        need = float(spec.instantiate(size, overrides).array_bytes)
        if groups and used + need <= room / 2:
            groups[-1].append(size)
            used += need
        else:
            groups.append([size])
            used = need
    return groups


def measure_spec(backend: Backend, spec: KernelSpec, sizes: Iterable[int], policy: TimingPolicy | None = None,
                 check: bool = True, on_record: Callable[[dict], None] | None = None,
                 overrides: dict[str, Any] | None = None, progress: Callable[[str], None] | None = None,
                 interleave: bool = True, check_bounds: bool = True,
                 on_size: Callable[[int, list[dict]], None] | None = None,
                 on_stage: Callable[[str, list[int]], None] | None = None) -> list[dict]:
    """Measure ``spec`` at each size; each finished record is passed to ``on_record`` at once (and the records of
    one size, together, to ``on_size``).

    First, before anything is compiled, every size's launch is checked against its buffers
    (:func:`gpuprofiler.workloads.bounds.check_instance`: the kernel's code followed; ``check_bounds=False`` when
    the caller has done so). ``on_stage(stage, sizes)`` is
    told what is about to run (``"prepare"``: compiling, uploading and checking one size; ``"time"``: timing a
    group), so that a crash can be placed. With ``interleave`` the sizes are timed in rounds, one launch of each
    size per round (as many at once as fit, see :func:`rounds`), so that a shared device's changing load falls on
    every size alike; the budget is the policy's per size."""
    policy = policy or TimingPolicy()
    sizes = [int(s) for s in sizes]
    if check_bounds:
        with stage("bounds", UserError):
            check_sizes(spec, sizes, overrides, say=progress)
    groups = rounds(backend, spec, sizes, overrides) if interleave else [[s] for s in sizes]
    records = []
    for group in groups:
        prepared: list[PreparedKernel] = []
        checks: list[tuple[bool, float | None]] = []
        for size in group:
            if progress:
                progress(f"{spec.name}: size {size}: compiling, uploading{', checking' if check and spec.checks else ''}")
            if on_stage:
                on_stage("prepare", [size])
            one = prepare(backend, spec, size, overrides=overrides, bounds_checked=True)
            with stage("check", UserError):  # a reference that cannot be evaluated fails the check too
                checks.append((True, run_checked(backend, one)) if check and spec.checks else (False, None))
            prepared.append(one)
        if progress:
            progress(f"{spec.name}: timing size{'s' if len(group) > 1 else ''} {', '.join(map(str, group))}"
                     + (" in alternation" if len(group) > 1 else ""))
        if on_stage:
            on_stage("time", list(group))
        timings = _time_placements(backend, prepared, policy)
        for size, one, (checked, check_error), timing in zip(group, prepared, checks, timings):
            rec = spec_record(spec, size, one.instance, timing, checked, check_error,
                              [s for s in group if s != size])
            rec["placements"] = timing.placements
            rec["contended"] = contended(rec.get("contention"), getattr(backend.info, "type", None))
            records.append(rec)
            if on_record:
                on_record(rec)
            if on_size:
                on_size(size, [rec])
        del prepared
    return records


def spec_record(spec: KernelSpec, size: int, inst: SpecInstance, timing: Timing, checked: bool,
                check_error: float | None, interleaved_with: list[int]) -> dict:
    """The record of one timed size, built so that it cannot fail once the timing is done: the samples and the
    launch first; the figures derived from the spec's expressions (``flops``, ``bytes``, ``params`` and the rates)
    each become None, with the reason in ``derived_errors``, where they cannot be computed."""
    rec = record("kernel", spec.name, spec.kernel, size, timing.device_s, KERNEL_METRIC, str(spec.path),
                 timing.policy.confidence, **host_figures(timing),
                 checked=checked, check_error_over_tol=check_error, interleaved_with=interleaved_with,
                 global_size=[int(g) for g in inst.global_size],
                 local_size=None if inst.local_size is None else [int(v) for v in inst.local_size])
    model = rec["model_s"]
    errors: dict[str, str] = {}

    def derived(key: str, fn: Callable[[], Any]) -> None:
        try:
            value = fn()
            if isinstance(value, complex) or (isinstance(value, float) and not math.isfinite(value)):
                raise ValueError(f"not a finite real number: {value!r}")
            rec[key] = value
        except Exception as exc:  # noqa: BLE001 - a derived figure never costs the measurement
            rec[key] = None
            errors[key] = f"{type(exc).__name__}: {exc}"[:200]

    derived("params", lambda: {str(k): _plain(v) for k, v in inst.names.items()})
    derived("flops", lambda: None if inst.flops is None else _number(inst.flops))
    derived("bytes", lambda: None if inst.bytes is None else _number(inst.bytes))
    derived("gflops", lambda: rec["flops"] / model / 1e9 if rec["flops"] and model else None)
    derived("gbps", lambda: rec["bytes"] / model / 1e9 if rec["bytes"] and model else None)
    if errors:
        rec["derived_errors"] = errors
    return rec


def _number(value: Any) -> float | int:
    """A work count as a plain JSON number: an int that fits 64 bits, else a finite float."""
    if isinstance(value, (bool, complex)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"not a real number: {value!r}")
    if isinstance(value, (int, np.integer)) and abs(int(value)) < 2**63:
        return int(value)
    out = float(value)  # OverflowError past the float range
    if not math.isfinite(out):
        raise ValueError(f"not finite: {value!r}")
    return out


def _plain(value: Any) -> Any:
    """A parameter's value for the record: numbers as JSON numbers (huge or complex ones as text)."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    try:
        return _number(value)
    except (ValueError, OverflowError, TypeError):
        pass
    if isinstance(value, int) and value.bit_length() > 200:
        return f"<an integer of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= 64 else text[:61] + "..."
