"""A kernel spec on a device: build, upload, check against the numpy reference, then time with the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from gpuprofiler.device.base import Backend, Buffer, Kernel
from gpuprofiler.errors import DeviceError
from gpuprofiler.measure.engine import Engine, Timing
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.records import KERNEL_METRIC, host_figures, record
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

    def args(self) -> list[Any]:
        return [self.buffers.get(a.name, self.host[a.name]) for a in self.instance.spec.args] + list(self.extra)


def prepare(backend: Backend, spec: KernelSpec, size: int, seed: int = 0,
            overrides: dict[str, Any] | None = None, source_text: str | None = None) -> PreparedKernel:
    """Compile the spec's kernel (or ``source_text`` in its place) and upload its inputs at ``size``."""
    instance = spec.instantiate(size, overrides)
    check_fits(backend, instance)
    source = spec.source_for(backend.kind)
    kernel = backend.compile(source_text if source_text is not None else source.read_text(), spec.kernel,
                             instance.defines)
    host = instance.make_args(np.random.default_rng(seed))
    buffers = {a.name: backend.to_device(host[a.name])[0] for a in spec.args if not a.is_scalar}
    return PreparedKernel(instance, kernel, host, buffers)


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


def check_fits(backend: Backend, instance: SpecInstance) -> None:
    """Refuse, before allocating anything, a size whose arrays the device cannot hold."""
    info = backend.info
    need = instance.array_bytes
    if need > info.global_mem_bytes:
        raise DeviceError(f"{instance.spec.name} at size {instance.size} needs {need / 2**30:.2f} GiB of device memory; "
                          f"{info.name} has {info.global_mem_bytes / 2**30:.2f} GiB")
    host = host_available_bytes()
    if host is not None and 2 * need > host:  # inputs, plus their copies for the reference check
        raise DeviceError(f"{instance.spec.name} at size {instance.size} needs about {2 * need / 2**30:.2f} GiB of host "
                          f"memory for its arrays and their check; {host / 2**30:.2f} GiB is available")
    limit = info.extra.get("max_mem_alloc_bytes")
    for arg in instance.spec.args:
        if not arg.is_scalar and limit:
            nbytes = int(np.prod(instance.shapes[arg.name])) * arg.dtype.itemsize
            if nbytes > limit:
                raise DeviceError(f"{arg.where}: {nbytes / 2**30:.2f} GiB exceeds the device's largest allocation "
                                  f"({limit / 2**30:.2f} GiB)")


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


def rounds(backend: Backend, spec: KernelSpec, sizes: list[int], overrides: dict[str, Any] | None = None) -> list[list[int]]:
    """The sizes in groups measured in alternation: consecutive sizes whose arrays fit on the device and in the
    host's memory together (half of either, so that a group never crowds the device)."""
    room = float(backend.info.global_mem_bytes)
    host = host_available_bytes()
    if host is not None:
        room = min(room, host / 2)
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
                 interleave: bool = True) -> list[dict]:
    """Measure ``spec`` at each size; each finished record is passed to ``on_record`` at once.

    With ``interleave`` the sizes are timed in rounds, one launch of each size per round (as many at once as
    fit, see :func:`rounds`), so that a shared device's changing load falls on every size alike; the budget is
    the policy's per size."""
    policy = policy or TimingPolicy()
    sizes = [int(s) for s in sizes]
    groups = rounds(backend, spec, sizes, overrides) if interleave else [[s] for s in sizes]
    records = []
    for group in groups:
        prepared: list[PreparedKernel] = []
        checks: list[tuple[bool, float | None]] = []
        for size in group:
            if progress:
                progress(f"{spec.name}: size {size}: compiling, uploading{', checking' if check and spec.checks else ''}")
            one = prepare(backend, spec, size, overrides=overrides)
            checks.append((True, run_checked(backend, one)) if check and spec.checks else (False, None))
            prepared.append(one)
        if progress:
            progress(f"{spec.name}: timing size{'s' if len(group) > 1 else ''} {', '.join(map(str, group))}"
                     + (" in alternation" if len(group) > 1 else ""))
        engine = Engine(policy)
        timings = engine.interleave([_timed_run(backend, engine, one) for one in prepared],
                                    budget_s=policy.budget_s * len(group))
        for size, one, (checked, check_error), timing in zip(group, prepared, checks, timings):
            inst = one.instance
            rec = record("kernel", spec.name, spec.kernel, size, timing.device_s, KERNEL_METRIC, str(spec.path),
                         timing.policy.confidence, **host_figures(timing),
                         checked=checked, check_error_over_tol=check_error, interleaved_with=[s for s in group if s != size],
                         global_size=inst.global_size, local_size=inst.local_size, params=inst.names,
                         flops=inst.flops, bytes=inst.bytes,
                         gflops=inst.flops / timing.device.model / 1e9 if inst.flops else None,
                         gbps=inst.bytes / timing.device.model / 1e9 if inst.bytes else None)
            records.append(rec)
            if on_record:
                on_record(rec)
        del prepared
    return records
