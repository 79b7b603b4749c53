"""The architecture graph: the host's memory, each device's compute units and memory, and the links between them.

A networkx graph whose nodes are memories (``host``, ``dev0.mem``, ...) and arithmetic elements (``dev0``,
...) and whose edges are links: host to device with the transfer curve the profile measured (pageable or pinned
host memory; time for a number of bytes, interpolated in log-log between the measured sizes, bandwidth beyond
them), device memory to its compute units. Several profiles, or one device split into sub-devices, make one
machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.profile.hardware import view

DIRECTIONS = ("htod", "dtoh")


@dataclass
class Link:
    """A host-device link in one direction: seconds for ``bytes`` from a measured curve, else latency + bytes / bw."""

    bandwidth_Bps: float | None = None
    latency_s: float = 0.0
    curve: list[tuple[float, float]] = field(default_factory=list)  # (bytes, seconds), increasing bytes

    def seconds(self, nbytes: float) -> float:
        if self.curve:
            xs = np.log([max(b, 1.0) for b, _ in self.curve])
            ys = np.log([max(s, 1e-12) for _, s in self.curve])
            x = math.log(max(float(nbytes), 1.0))
            if x <= xs[-1]:
                return float(math.exp(np.interp(x, xs, ys)))
            if self.bandwidth_Bps:
                return float(self.curve[-1][1] + (nbytes - self.curve[-1][0]) / self.bandwidth_Bps)
        if not self.bandwidth_Bps:
            raise UserError("a transfer given in bytes needs a link bandwidth: pass --profile")
        return self.latency_s + float(nbytes) / self.bandwidth_Bps


@dataclass
class DeviceNode:
    """A device (or sub-device): its compute units and its links to the host."""

    name: str
    compute_units: int = 1
    links: dict[str, Link] = field(default_factory=dict)
    launch_s: float | None = None  # host call to device start on an idle queue, from the profile
    info: dict[str, Any] = field(default_factory=dict)
    rate: float = 1.0  # its compute units' speed relative to the device the kernel costs were measured on


def links_from_profile(profile: Any, pinned: bool = False) -> dict[str, Link]:
    """The profile's measured host-device transfer curves (pageable unless ``pinned``), one link per direction."""
    hw = view(profile)
    out = {}
    for d in DIRECTIONS:
        key = f"{d}_pinned" if pinned else d
        bw = hw.figure(f"transfer.{key}_Bps")
        curve = hw.transfer_curve(key)
        out[d] = Link(bw.value if bw.ok else None, curve[0][1] if curve else 0.0, curve)
    return out


def launch_from_profile(profile: Any) -> float | None:
    """Host call to device start of an empty kernel on an idle queue, from the profile's launch section."""
    fig = view(profile).figure("launch.queue_to_start_s")
    return fig.value if fig.ok else None


@dataclass
class Machine:
    """Devices joined to one host; ``graph`` is the architecture graph (memories, compute, links)."""

    devices: list[DeviceNode]
    name: str = "machine"
    graph: nx.Graph = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.devices:
            raise UserError("a machine needs at least one device")
        g = nx.Graph()
        g.add_node("host", kind="memory")
        for k, dev in enumerate(self.devices):
            g.add_node(f"dev{k}", kind="compute", compute_units=dev.compute_units, name=dev.name)
            g.add_node(f"dev{k}.mem", kind="memory")
            g.add_edge(f"dev{k}.mem", f"dev{k}", kind="on-device")
            g.add_edge("host", f"dev{k}.mem", kind="link",
                       **{f"{d}_Bps": (dev.links[d].bandwidth_Bps if d in dev.links else None) for d in DIRECTIONS})
        self.graph = g


def machine(count: int, compute_units: int, name: str = "device", profile: Any = None,
            pinned: bool = False, info: dict[str, Any] | None = None, rate: float = 1.0) -> Machine:
    """``count`` like devices of ``compute_units`` each, linked to the host as the profile measured (no links
    without a profile: transfers then need their measured or declared cost), their compute units at ``rate``
    times the speed of those the kernel costs were measured on."""
    if count < 1 or compute_units < 1:
        raise UserError("a machine needs at least one device of at least one compute unit")
    if not (rate > 0 and math.isfinite(rate)):
        raise UserError(f"a compute rate must be a positive number, got {rate!r}")
    links = links_from_profile(profile, pinned) if profile is not None else {}
    launch = launch_from_profile(profile) if profile is not None else None
    return Machine([DeviceNode(f"{name} #{k}" if count > 1 else name, compute_units, dict(links), launch,
                               dict(info or {}), rate) for k in range(count)],
                   name=f"{count} x {name} ({compute_units} CU{'s' if compute_units > 1 else ''})")
