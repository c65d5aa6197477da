"""Precision curves of huge ranked outputs from few labels.

Five methods share one interface (:class:`~receval.curves.base.CurveMethod`: ``plan``,
``estimate``, ``run``): the random-sampling baseline and LogStrat and PAULA (Sabharwal & Sedghi,
AISTATS 2017), AdaStrat (Sabharwal & Xue, UAI 2018) and StratBand (a band valid at every rank
without monotonicity assumptions, at PAULA's label count).  :func:`make_method` builds one from a
name and the common parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from receval.curves.adastrat import AdaStrat
from receval.curves.base import CurveEstimate, CurveMethod, Labels, Oracle, run_to_completion
from receval.curves.budget import curve_budget
from receval.curves.logstrat import LogStrat
from receval.curves.paula import Paula
from receval.curves.random_sampling import RandomSampling
from receval.curves.ranked import FrameRankedList, ParquetRankedList, SimulatedRankedList
from receval.curves.stratband import StratBand

METHODS: dict[str, type] = {
    "random": RandomSampling,
    "logstrat": LogStrat,
    "paula": Paula,
    "adastrat": AdaStrat,
    "stratband": StratBand,
}

__all__ = [
    "METHODS",
    "AdaStrat",
    "CurveEstimate",
    "CurveMethod",
    "FrameRankedList",
    "Labels",
    "LogStrat",
    "Oracle",
    "ParquetRankedList",
    "Paula",
    "RandomSampling",
    "SimulatedRankedList",
    "StratBand",
    "curve_budget",
    "make_method",
    "run_to_completion",
]


def make_method(name: str, **params: Any) -> CurveMethod:
    """The curve method ``name`` with those of ``params`` it takes.

    Parameters a method does not have are ignored (e.g. ``delta`` for PAULA), so one command
    line serves all methods.
    """
    try:
        cls = METHODS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown curve method {name!r} (known: {', '.join(METHODS)})") from None
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in params.items() if k in fields})
