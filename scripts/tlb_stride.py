#!/usr/bin/env python3
"""Does a page stride change what a TLB reaches? One work-item's independent loads of one line per page over P
pages, the pages consecutive (stride 1) or 4 apart, visited in order or at random (a random line of each page, so
that the caches' sets fill alike), and a column walk of a 4000-float row-major matrix (16000 bytes apart: mvt's
x2 loop). Per load: (T(2r) - T(r)) / (P r), as `calibrate`'s TLB curve, whose pages are consecutive.

    python scripts/tlb_stride.py [DEVICE]     # default opencl:0:0; prints a table in ns per load
"""

from __future__ import annotations

import datetime
import sys

import numpy as np

from gpuprofiler import __version__
from gpuprofiler.device import open_backend
from gpuprofiler.measure.engine import time_launch
from gpuprofiler.measure.policy import bench
from gpuprofiler.microbench.source import build
from gpuprofiler.microbench.tlb import ACCESSES, SOURCE

PAGE_WORDS, LINE_WORDS = 1024, 16


def main(argv: list[str]) -> int:
    device = argv[0] if argv else "opencl:0:0"
    backend = open_backend(device)
    kernel = build(backend, SOURCE, "sweep")
    rng = np.random.default_rng(0)
    buf = backend.to_device(np.ones((8192 * 4 + 8) * PAGE_WORDS, np.uint32))[0]
    out = backend.alloc(4)
    policy = bench(True, 0.2, 0.03)

    def per_load(words: np.ndarray) -> float:
        pages = len(words)
        idx = backend.to_device(words.astype(np.uint32))[0]
        reps = max(1, ACCESSES // pages)
        t = {r: min(time_launch(backend, kernel, (1,), (1,), [buf, idx, np.int32(pages), np.int32(r), out,
                                                               np.uint32(7)], policy).device.minimum
                    for _ in range(3)) for r in (reps, 2 * reps)}
        return (t[2 * reps] - t[reps]) / (pages * reps)

    print(f"# {backend.info.name} ({device}), gpuprofiler {__version__}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, `python scripts/tlb_stride.py {device}`")
    print("# ns per load; packed: P lines in P/64 pages; sN: one line in each of P pages N apart, in order (seq) or "
          "not (rnd); mvt: 16000 bytes apart")
    print(f"{'pages':>6} {'packed':>7} {'s1 seq':>7} {'s1 rnd':>7} {'s4 seq':>7} {'s4 rnd':>7} {'mvt':>7}")
    for pages in (512, 1024, 2048, 3072, 4096, 8192):
        row = [per_load(rng.permutation(pages) * LINE_WORDS)]
        for stride in (1, 4):
            for shuffled in (False, True):
                pg = np.arange(pages) * stride
                pg = rng.permutation(pg) if shuffled else pg
                row.append(per_load(pg * PAGE_WORDS + LINE_WORDS * rng.integers(0, PAGE_WORDS // LINE_WORDS, pages)))
        row.append(per_load(np.arange(pages) * 4000))
        print(f"{pages:>6} " + " ".join(f"{x * 1e9:7.2f}" for x in row), flush=True)
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
