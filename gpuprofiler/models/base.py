"""The one shape of every predictor, after scikit-learn's estimator contract.

* ``__init__`` only stores parameters (no work, no data);
* :meth:`Predictor.applies_to` says whether the predictor can model an item on a profile's device,
  and if not, why;
* :meth:`Predictor.fit` learns from the item, the hardware profile and (for predictors that need
  them) the small-size measurements, and returns ``self``; what it learned ends in ``_``;
* :meth:`Predictor.predict` returns one :class:`Prediction` per size: seconds with an interval
  that holds them.

A predictor that cannot model what it was given raises :class:`NotApplicable` (a user error with
the reason). :mod:`gpuprofiler.models.registry` names every predictor; ``validate`` runs them all.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from gpuprofiler.errors import UserError


class NotApplicable(UserError):
    """The predictor cannot model this item on this device (the message says why)."""


@dataclass(frozen=True)
class Applicability:
    """Whether a predictor applies; falsy with the reason when it does not."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


APPLIES = Applicability(True)


# what a static model's refusal adds: the predictor that needs no code analysis, only measurements
STILL_APPLIES = "the fractal extrapolation from measured small sizes still applies"


def refuse(reason: str) -> Applicability:
    return Applicability(False, reason)


def positive_time(seconds: float, what: str) -> float:
    """``seconds`` where it is a time at all (finite and positive); else a UserError: no model prints a negative or
    non-finite time. The profile's figures are checked on load (:func:`gpuprofiler.profile.file.load_profile`), so
    this is the last guard, against inputs no check foresaw."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise UserError(f"{what}: the predicted time {seconds!r} s is not a positive finite time; the inputs (the "
                        "hardware profile's figures, the sizes) are not physically possible")
    return seconds


@dataclass(frozen=True)
class Prediction:
    """One predicted run time: ``seconds`` at ``size``, the 95% interval [``low``, ``high``] around it, the
    predictor's name, a one-line ``summary`` of how (the law chosen, the model's variant) and ``details``
    (the model's own breakdown, JSON-ready)."""

    size: int | float
    seconds: float
    low: float
    high: float
    model: str
    summary: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def interval(self) -> tuple[float, float]:
        return self.low, self.high

    def check(self) -> "Prediction":
        """Self, after checking it is a time at all: positive and finite, inside a finite interval."""
        if not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ValueError(f"{self.model}: predicted {self.seconds!r} s at size {self.size}: not a positive time")
        if not (math.isfinite(self.low) and math.isfinite(self.high) and 0 <= self.low <= self.seconds <= self.high):
            raise ValueError(f"{self.model}: interval [{self.low!r}, {self.high!r}] does not hold {self.seconds!r} s")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "predicted_s": self.seconds, "interval_s": [self.low, self.high],
                "model": self.model, "summary": self.summary, "details": self.details}


class Predictor(abc.ABC):
    """Base of every predictor; subclasses set ``name`` and implement the three methods."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    # True when fit needs the small-size measurements (a sweep), False for static models
    needs_measurements: ClassVar[bool] = False

    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters, as stored."""
        return {k: v for k, v in vars(self).items() if not k.endswith("_") and not k.startswith("_")}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    @abc.abstractmethod
    def applies_to(self, item: Any, profile: Any) -> Applicability:
        """Whether this predictor can model ``item`` (a kernel spec or an app) on ``profile``'s device."""

    @abc.abstractmethod
    def fit(self, item: Any, profile: Any = None, measurements: Any = None) -> "Predictor":
        """Learn what is needed to predict ``item``; ``measurements`` is a sweep of its small sizes
        (:class:`gpuprofiler.workloads.sweep.Sweep`) for predictors that need one. Returns self."""

    @abc.abstractmethod
    def predict(self, sizes: Sequence[int]) -> list[Prediction]:
        """One prediction per size, after :meth:`fit`."""

    def _refuse_unless(self, item: Any, profile: Any) -> None:
        """Raise :class:`NotApplicable` with the reason when the predictor does not apply."""
        verdict = self.applies_to(item, profile)
        if not verdict:
            raise NotApplicable(f"{self.name}: {verdict.reason}")

    def _fitted(self) -> None:
        if not getattr(self, "fitted_", False):
            raise RuntimeError(f"{type(self).__name__}: call fit() before predict()")
