"""Random order without repeats (seeded): with a budget, a uniform sample of the space."""

from __future__ import annotations

import numpy as np

from gpuprofiler.tune.strategies.base import Strategy


class RandomOrder(Strategy):
    name = "random"

    def search(self, tuner) -> None:
        order = np.random.default_rng(self.seed).permutation(len(tuner.candidates))
        if getattr(tuner, "runner", None) is not None:  # on a cluster, as many at once as the budget allows
            chosen = order[:tuner.budget] if tuner.budget is not None else order
            tuner.measure_many([tuner.candidates[int(i)] for i in chosen])
        for i in order:
            if tuner.exhausted:
                self.notes.append(f"budget reached after {tuner.measured_count} configuration(s)")
                return
            tuner.measure(tuner.candidates[int(i)])
