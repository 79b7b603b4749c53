"""Brute force: every allowed configuration, in the space's order."""

from __future__ import annotations

from gpuprofiler.tune.strategies.base import Strategy


class Brute(Strategy):
    name = "brute"

    def search(self, tuner) -> None:
        for config in tuner.candidates:
            if tuner.exhausted:
                self.notes.append(f"budget reached after {tuner.measured_count} configuration(s)")
                return
            tuner.measure(config)
