"""``gpuprofiler devices``: every CUDA and OpenCL device, the default marked."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("devices", help="list the CUDA and OpenCL devices")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.device import default_device_id, list_devices

    devices = list_devices()
    default = default_device_id(devices) if devices else None
    if args.json:
        print(json.dumps([{**d.to_dict(), "default": d.id == default} for d in devices], indent=2))
        return 0
    if not devices:
        print("no devices found", file=sys.stderr)
        return 3
    for d in devices:
        mark = "*" if d.id == default else " "
        clock = f"{d.clock_mhz:.0f} MHz" if d.clock_mhz else "? MHz"
        print(f"{mark} {d.id:<12} {d.type:<4} {d.name}  [{d.platform}; {d.compute_units} CUs, {clock}, "
              f"{d.global_mem_bytes / 2**30:.1f} GiB, local {d.local_mem_bytes // 1024} KiB, "
              f"max wg {d.max_work_group_size}, warp {d.warp_size or '-'}; {d.driver}]")
        if d.extra.get("problem"):
            print(f"    not usable: {d.extra['problem']}")
    print("(* = default device)")
    return 0
