#!/usr/bin/env python3
"""Does it matter whether the TLB microbenchmark's buffer was written? The calibration's TLB curve (packed lines
against one line per 4 KiB page, microbench.tlb) over two 64 MiB buffers in the same process and the same rounds:
one written before it is read, as `calibrate` does since method version 2 of `tlb.curve`, and one only allocated,
as version 1 did (pages only ever read may all map one shared zero page).

    python scripts/tlb_written.py [DEVICE]     # default opencl:0:0; prints ns per load
"""

from __future__ import annotations

import datetime
import sys

import numpy as np

from gpuprofiler import __version__
from gpuprofiler.device import open_backend
from gpuprofiler.measure.policy import bench
from gpuprofiler.microbench.common import written_buffer
from gpuprofiler.microbench.source import build
from gpuprofiler.microbench.tlb import PAGE_BYTES, PAGES, SOURCE, layouts, per_access


def main(argv: list[str]) -> int:
    device = argv[0] if argv else "opencl:0:0"
    backend = open_backend(device)
    kernel = build(backend, SOURCE, "sweep")
    out = backend.alloc(64)
    size = PAGES[-1] * PAGE_BYTES
    buffers = {"written": written_buffer(backend, size), "never written": backend.alloc(size)}
    policy = bench(True, 0.1, 0.02)
    rng = np.random.default_rng(5)
    print(f"# {backend.info.name} ({device}), gpuprofiler {__version__}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, `python scripts/tlb_written.py {device}`")
    print("# ns per load: packed (P lines in P/64 pages) and spread's extra over it (one line per page), per buffer")
    print(f"{'pages':>6} " + " ".join(f"{name + ' ' + what:>26}" for name in buffers for what in ("packed", "extra")))
    for pages in PAGES:
        offsets = layouts(pages, rng)
        row = []
        for buf in buffers.values():
            per = per_access(backend, kernel, buf, out, offsets, policy)
            row += [per["packed"], per["spread"] - per["packed"]]
        print(f"{pages:>6} " + " ".join(f"{x * 1e9:26.2f}" for x in row), flush=True)
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
