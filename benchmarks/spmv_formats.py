"""Benchmark (not a test): tuned Sliced ELLPACK (and its 1x2-block variant) against the builtin CSR kernel and
scipy.sparse on each matrix family, and the model-guided search against brute force on the same space.

    python benchmarks/spmv_formats.py [--device opencl:0:0] [--size 1048576] [--families poisson2d,...] -o DIR

Per family: ``tune --strategy brute`` over S in {1..32} x Nt in {64..512} (Nt % S == 0), then ``--strategy model``
on a store of its own (it measures afresh), ``spmv_sell_pairs`` by brute force, the CSR spec on the same matrix, and scipy's CSR product on the host
timed by the same engine (host seconds). The model strategy's pick is judged by its figure in the brute-force table
of the same run, and by the two configurations timed again in alternation (an A/B: the device's drift falls on
both alike), since on a shared device two configurations a few percent apart trade places between runs.
Writes DIR/<family>/{brute,model,pairs}/ (stores, tables, plots), DIR/formats.csv and DIR/formats.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.device import open_backend  # noqa: E402
from gpuprofiler.measure.engine import Engine  # noqa: E402
from gpuprofiler.measure.stats import model_value  # noqa: E402
from gpuprofiler.report.plots import plot_tune  # noqa: E402
from gpuprofiler.report.validation import write_csv  # noqa: E402
from gpuprofiler.tune import strategies  # noqa: E402
from gpuprofiler.tune.space import parse_space  # noqa: E402
from gpuprofiler.tune.store import TuneStore  # noqa: E402
from gpuprofiler.tune.tuner import TUNE, Tuner, table_columns  # noqa: E402
from gpuprofiler.workloads import isolated, sparse  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402
from gpuprofiler.workloads.spec import load_spec  # noqa: E402

SPACE = "S=1,2,4,8,16,32;Nt=64,128,256,512"
RESTRICT = "Nt % S == 0"


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def tune(backend, spec, size, strategy, out: Path):
    space = parse_space(SPACE, [RESTRICT])
    tuner = Tuner(backend, spec, size, space, TuneStore(out / "tune.jsonl", backend.info), policy=TUNE, say=say)
    s = strategies.create(strategy)
    t0 = time.perf_counter()
    s.search(tuner)
    wall = time.perf_counter() - t0
    rows = tuner.table()
    plot_tune(rows, space.names, out / "space.png", f"{spec.name} on {spec.matrix['source']} at {size}, {strategy}",
              space.params)
    write_csv(out / "table.csv", rows, table_columns(space.names))
    return tuner, s, wall


def ab(backend, spec, size, a: dict, b: dict, seconds: float = 4.0) -> tuple[float, float, float]:
    """Two configurations timed in alternation, one launch of each per round (the drift of a shared device falls
    on both alike): (figure of a, figure of b, b / a)."""
    from gpuprofiler.workloads.bounds import check_sizes
    from gpuprofiler.workloads.kernel import _timed_run, prepare

    engine = Engine(TUNE.but(budget_s=seconds, rel_ci=0.0, max_samples=100000))
    runs = []
    for cfg in (a, b):
        check_sizes(spec, [size], cfg)
        runs.append(_timed_run(backend, engine, prepare(backend, spec, size, overrides=cfg, bounds_checked=True)))
    ta, tb = engine.interleave(runs)
    fa, fb = model_value(ta.device_s), model_value(tb.device_s)
    return fa, fb, fb / fa


def scipy_time(m, seconds: float = 1.0) -> list[float]:
    a = m.scipy()
    x = np.random.default_rng(0).random(m.rows, dtype=np.float32)
    y = np.empty(m.rows, np.float32)

    def once() -> float:
        t0 = time.perf_counter()
        np.copyto(y, a @ x)
        return time.perf_counter() - t0

    return Engine(TUNE.but(budget_s=seconds)).sample(once).device_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--families", default=",".join(sparse.FAMILIES))
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    out = Path(args.output)
    backend = open_backend(args.device)
    sell = load_spec(resolve("spmv_sell"))
    pairs = load_spec(resolve("spmv_sell_pairs"))
    csr = load_spec(resolve("spmv_csr_matrix"))
    table = []
    for family in args.families.split(","):
        n = args.size
        m = sparse.matrix(family, n)
        d = sparse.describe(m)
        brute, _, brute_wall = tune(backend, sell.with_matrix(family), n, "brute", out / family / "brute")
        model, ms, model_wall = tune(backend, sell.with_matrix(family), n, "model", out / family / "model")
        best = brute.best()
        pick = model.best()
        pick_in_brute = brute.results[pick.key].seconds
        if pick.key != best.key:
            _, _, pick_ab = ab(backend, sell.with_matrix(family), n, best.config, pick.config)
        else:
            pick_ab = 1.0
        paired, _, _ = tune(backend, pairs.with_matrix(family), n, "brute", out / family / "pairs")
        pbest = paired.best()
        [crec] = isolated.measure(backend, csr.with_matrix(family), [n], TUNE)
        sp = scipy_time(m)
        csr_bytes = 8 * m.nnz + 4 * (n + 1) + 8 * n
        row = {"family": family, "rows": n, "nnz": m.nnz, "mean_row": round(d["mean_row"], 2),
               "max_row": d["max_row"], "row_cv": round(d["row_cv"], 3),
               "sell_best": best.key, "sell_ms": best.seconds * 1e3, "sell_gbps": best.record["gbps"],
               "sell_stored_over_nnz": sparse.sell(family, n, best.config["S"]).stored / m.nnz,
               "pairs_best": pbest.key, "pairs_ms": pbest.seconds * 1e3, "pairs_gbps": pbest.record["gbps"],
               "pairs_stored_over_nnz": sparse.pair_sell(family, n, pbest.config["S"]).stored / m.nnz,
               "csr_ms": crec["model_s"] * 1e3, "csr_gbps": crec["gbps"],
               "scipy_ms": model_value(sp) * 1e3, "scipy_gbps": csr_bytes / model_value(sp) / 1e9,
               "brute_measured": brute.measured_count, "brute_s": round(brute_wall, 1),
               "model_pick": pick.key, "model_pick_vs_best": pick_in_brute / best.seconds - 1,
               "model_pick_vs_best_ab": pick_ab - 1,
               "model_measured": model.measured_count, "model_share": model.measured_count / len(model.candidates),
               "model_s": round(model_wall, 1), "model_note": " ".join(ms.notes)}
        say(f"{family}: {row}")
        table.append(row)
        write_csv(out / "formats.csv", table, list(table[0]))
    backend.close()
    lines = ["| family | rows | nnz | row CV | SELL best | SELL ms | SELL GB/s | stored/nnz | SELL 1x2 best | SELL 1x2 ms | "
             "SELL 1x2 GB/s | blocks/nnz | CSR ms | CSR GB/s | "
             "scipy ms | scipy GB/s | model pick | pick vs best (brute table) | pick vs best (A/B) | measured by model |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['family']} | {r['rows']} | {r['nnz']} | {r['row_cv']} | {r['sell_best']} | "
                     f"{r['sell_ms']:.3f} | {r['sell_gbps']:.1f} | {r['sell_stored_over_nnz']:.2f} | {r['pairs_best']} | "
                     f"{r['pairs_ms']:.3f} | {r['pairs_gbps']:.1f} | {r['pairs_stored_over_nnz']:.2f} | {r['csr_ms']:.3f} | "
                     f"{r['csr_gbps']:.1f} | {r['scipy_ms']:.3f} | {r['scipy_gbps']:.1f} | {r['model_pick']} | "
                     f"{r['model_pick_vs_best']:+.1%} | {r['model_pick_vs_best_ab']:+.1%} | {r['model_measured']}/{len(parse_space(SPACE, [RESTRICT]).configs())} "
                     f"({r['model_share']:.0%}) |")
    (out / "formats.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
