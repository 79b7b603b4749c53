"""What a search strategy is: it decides which configurations the tuner measures, and in what order."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuprofiler.tune.tuner import Tuner


class Strategy(ABC):
    """``search(tuner)`` calls ``tuner.measure(config)`` on the configurations it picks (``tuner.candidates``, the
    ones the restrictions allow) until it is done or ``tuner.exhausted`` (the budget); its notes say why it
    stopped."""

    name = "strategy"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.notes: list[str] = []

    @abstractmethod
    def search(self, tuner: "Tuner") -> None:
        ...
