"""Brute force: every allowed configuration, in the space's order."""

from __future__ import annotations

from gpuprofiler.tune.strategies.base import Strategy


class Brute(Strategy):
    name = "brute"

    def search(self, tuner) -> None:
        order = list(tuner.candidates)
        if getattr(tuner, "runner", None) is not None:  # on a cluster, as many at once as the budget allows
            tuner.measure_many(order[:tuner.budget] if tuner.budget is not None else order)
        for config in order:
            if tuner.exhausted:
                self.notes.append(f"budget reached after {tuner.measured_count} configuration(s)")
                return
            tuner.measure(config)
