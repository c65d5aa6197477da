"""Precision curves of huge ranked outputs from few labels.

Six methods share one interface (:class:`~receval.curves.base.CurveMethod`: ``plan``,
``estimate``, ``run``): the random-sampling baseline and LogStrat and PAULA (Sabharwal & Sedghi,
AISTATS 2017), AdaStrat (Sabharwal & Xue, UAI 2018), StratBand (a band valid at every rank
without monotonicity assumptions, at PAULA's label count) and TailBand (the same guarantee from
an exact head and a uniform tail sample with exact hypergeometric bounds).  :func:`make_method` builds one from a
name and the common parameters.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING, Any

from receval.options import CURVE_METHODS

if TYPE_CHECKING:
    from receval.curves.base import CurveMethod

# name -> module; imported on first use so `receval curve budget` does not load pandas
_EXPORTS = {
    "AdaStrat": "adastrat",
    "CurveEstimate": "base",
    "CurveMethod": "base",
    "Labels": "base",
    "Oracle": "base",
    "run_to_completion": "base",
    "curve_budget": "budget",
    "LogStrat": "logstrat",
    "Paula": "paula",
    "RandomSampling": "random_sampling",
    "FrameRankedList": "ranked",
    "ParquetRankedList": "ranked",
    "SimulatedRankedList": "ranked",
    "StratBand": "stratband",
    "TailBand": "tailband",
}
_METHOD_CLASSES = dict(
    zip(
        CURVE_METHODS,
        ("RandomSampling", "LogStrat", "Paula", "AdaStrat", "StratBand", "TailBand"),
        strict=True,
    )
)

__all__ = ["METHODS", *sorted(_EXPORTS), "make_method"]


def __getattr__(name: str) -> Any:
    if name == "METHODS":
        value: Any = {key: __getattr__(cls) for key, cls in _METHOD_CLASSES.items()}
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(f"receval.curves.{_EXPORTS[name]}"), name)
    else:
        raise AttributeError(f"module 'receval.curves' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def make_method(name: str, **params: Any) -> CurveMethod:
    """The curve method ``name`` with those of ``params`` it takes.

    Parameters a method does not have are ignored (e.g. ``delta`` for PAULA), so one command
    line serves all methods.
    """
    try:
        cls = __getattr__(_METHOD_CLASSES[name.lower()])
    except KeyError:
        known = ", ".join(_METHOD_CLASSES)
        raise ValueError(f"unknown curve method {name!r} (known: {known})") from None
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in params.items() if k in fields})
