#!/usr/bin/env python3
"""Does a page stride change what a TLB reaches? One work-item's independent loads of one line per page over P
pages, the pages consecutive (stride 1) or 4 apart, visited in order or at random (a random line of each page, so
that the caches' sets fill alike), and a column walk of a 4000-float row-major matrix (16000 bytes apart: mvt's
x2 loop). Per load as `calibrate`'s TLB curve (microbench.tlb.per_access), whose pages are consecutive; this buffer
is written before it is read.

    python scripts/tlb_stride.py [DEVICE]     # default opencl:0:0; prints a table in ns per load
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
from gpuprofiler.microbench.tlb import SOURCE, per_access

PAGE_WORDS, LINE_WORDS = 1024, 16


def main(argv: list[str]) -> int:
    device = argv[0] if argv else "opencl:0:0"
    backend = open_backend(device)
    kernel = build(backend, SOURCE, "sweep")
    rng = np.random.default_rng(0)
    buf = written_buffer(backend, (8192 * 4 + 8) * PAGE_WORDS * 4)
    out = backend.alloc(4)
    policy = bench(True, 0.1, 0.02)
    print(f"# {backend.info.name} ({device}), gpuprofiler {__version__}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, `python scripts/tlb_stride.py {device}`")
    print("# ns per load; packed: P lines in P/64 pages; sN: one line in each of P pages N apart, in order (seq) or "
          "not (rnd); mvt: 16000 bytes apart")
    print(f"{'pages':>6} {'packed':>7} {'s1 seq':>7} {'s1 rnd':>7} {'s4 seq':>7} {'s4 rnd':>7} {'mvt':>7}")
    for pages in (512, 1024, 2048, 3072, 4096, 8192):
        offsets = {"packed": rng.permutation(pages) * LINE_WORDS}
        for stride in (1, 4):
            for shuffled in (False, True):
                pg = np.arange(pages) * stride
                pg = rng.permutation(pg) if shuffled else pg
                offsets[f"s{stride}{shuffled}"] = pg * PAGE_WORDS + LINE_WORDS * rng.integers(0, PAGE_WORDS // LINE_WORDS,
                                                                                              pages)
        offsets["mvt"] = np.arange(pages) * 4000
        per = per_access(backend, kernel, buf, out, offsets, policy)
        print(f"{pages:>6} " + " ".join(f"{x * 1e9:7.2f}" for x in per.values()), flush=True)
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
