"""How often two figures agree within 10% when each is one block's p10 (K = 1) or the minimum of the p10s of K
blocks drawn from those measured here (without replacement; 4000 pairs, seed 0). Run in this folder."""
import json

import numpy as np

rng = np.random.default_rng(0)
series = {f: [json.loads(x)["model_s"] for x in open(f"{f}.jsonl")] for f in ("scale", "mvt")}
for f, keys in (("alloc", ("P", "F")), ("corr", ("ref", "spec", "fma"))):
    rows = [json.loads(x) for x in open(f"{f}.jsonl")]
    series.update({f"{f}.{k}": [r[k] for r in rows] for k in keys})
for name, v in series.items():
    v = np.array(v)
    out = []
    for k in (1, 2, 3, 4, 6):
        a = np.array([rng.choice(v, k, replace=False).min() for _ in range(4000)])
        b = np.array([rng.choice(v, k, replace=False).min() for _ in range(4000)])
        out.append(f"K={k} {np.mean(np.abs(b / a - 1) <= 0.1):.2f}")
    print(f"{name:10s} {len(v):3d} blocks  " + "  ".join(out))
