"""``gpuprofiler generate``: OpenCL kernels and a tunable spec from a loop nest, with loopy."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from gpuprofiler.cli.common import add_device, progress
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("generate", help="OpenCL kernels and a tunable spec from a loop nest (loopy), each variant "
                                        "checked on the device against the untransformed nest")
    p.add_argument("nest", metavar="NEST.py", help="a nest file (kernels/nests/gemm.py shows the fields), or a "
                                                  "builtin nest's name: gemm, stencil2d, matvec")
    p.add_argument("-o", "--output", metavar="DIR", help="where the spec and sources go (default: ./generated/NAME)")
    p.add_argument("--verify-size", type=int, help="the size each variant is checked at (default: the nest's "
                                                   "first small size, at most 256)")
    p.add_argument("--no-verify", action="store_true", help="write the files without running them")
    add_device(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.workloads import nests
    from gpuprofiler.workloads.builtin import kernels_dir

    path = Path(args.nest)
    if not path.is_file():
        builtin = kernels_dir() / "nests" / f"{path.stem}.py"
        if path.suffix in ("", ".py") and builtin.is_file():
            path = builtin
        else:
            raise UserError(f"no nest file {args.nest!r} (builtin nests: gemm, stencil2d, matvec)")
    nest = nests.load_nest(path)
    out = Path(args.output) if args.output else Path("generated") / nest.name
    progress(f"{nest.name}: {len(nest.configs())} configuration(s) of {', '.join(nest.params)} through loopy")
    made = nests.variants(nest)
    cl_path, toml_path = nests.write(nest, made, out)
    base = nests.write_untransformed(nest, out)
    progress(f"wrote {toml_path}, {cl_path} and the untransformed nest's {base}")
    refused = [v for v in made if v.error]
    for v in refused:
        print(f"refused by loopy: {v.config}: {v.error[:200]}")
    if args.no_verify:
        return 0
    from gpuprofiler.device import open_backend

    size = args.verify_size or min(nest.small[0] if nest.small else 64, 256)
    if size < 1:
        raise UserError("--verify-size must be at least 1")
    backend = open_backend(args.device)
    if backend.kind != "opencl":
        raise UserError("generate checks its OpenCL variants on an OpenCL device: name one with --device")
    try:
        rows = nests.verify(nest, toml_path, backend, made, size)
    finally:
        backend.close()
    names = list(nest.params)
    print(f"each variant at {nest.size}={size} against the untransformed nest run by loopy on {backend.info.name}:")
    print(" ".join(f"{n:>8}" for n in names) + f" {'status':<18} {'max rel. error':>14}  note")
    for r in rows:
        err = f"{r['max_rel_error']:.2e}" if math.isfinite(r["max_rel_error"]) else "-"
        print(" ".join(f"{r[n]:>8}" for n in names) + f" {r['status']:<18} {err:>14}  {r['reason'][:100]}")
    bad = [r for r in rows if r["status"] not in ("ok", "refused by loopy")]
    refused_n = sum(r["status"] == "refused by loopy" for r in rows)
    print(f"{len(rows) - len(bad) - refused_n} of {len(rows)} variant(s) agree with the nest and pass the spec's "
          f"check" + (f" ({refused_n} refused by loopy)" if refused_n else "") + "; "
          f"tune them with: gpuprofiler tune {toml_path} --space \"" +
          ";".join(f"{k}={','.join(map(str, v))}" for k, v in nest.params.items()) + '"')
    return 1 if bad else 0
