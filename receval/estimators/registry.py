"""The registries of estimators and interval methods: the one place a name becomes an object.

Options, the CLI's choices, the reliability flags and the report read names and descriptions from
here, so adding an estimator is a new module plus one line in :data:`ESTIMATORS` (or a call of
:func:`register` for code outside receval).  Entries are ``"module:Class"`` strings loaded on
first use, so importing this module (and ``receval --help``) stays free of numpy and pandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: estimator name -> "module:Class" (an :class:`receval.estimators.base.Estimator` subclass)
ESTIMATORS: dict[str, str] = {
    "joint": "receval.estimators.joint:JointEstimator",
    "simple": "receval.estimators.simple:SimpleEstimator",
    "official": "receval.official.estimator:OfficialEstimator",
    "ppi": "receval.estimators.ppi:PPIEstimator",
}

#: interval method name (``--intervals``) -> "module:Class" (an
#: :class:`receval.estimators.intervals.IntervalMethod` subclass)
INTERVAL_METHODS: dict[str, str] = {
    "bootstrap": "receval.estimators.intervals:BootstrapIntervals",
    "anytime": "receval.estimators.anytime.method:AnytimeIntervals",
    "anytime-asymptotic": "receval.estimators.anytime.asymptotic:AsymptoticIntervals",
}


def _load(table: dict[str, str], kind: str, name: str) -> type:
    """The class registered as ``name`` (imported on first use; Python caches the module)."""
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r} (known: {', '.join(table)})")
    module, _, attr = table[name].partition(":")
    return getattr(import_module(module), attr)


def register(cls: type) -> type:
    """Class decorator: make an estimator available under ``cls.name`` (also as a CLI choice
    when registered before the CLI is imported)."""
    ESTIMATORS[cls.name] = f"{cls.__module__}:{cls.__qualname__}"
    return cls


def register_interval_method(cls: type) -> type:
    """Class decorator: make an interval method available under ``cls.name``."""
    INTERVAL_METHODS[cls.name] = f"{cls.__module__}:{cls.__qualname__}"
    return cls


def estimator_class(name: str) -> type:
    """The estimator class registered as ``name``: its declarations (``kind``, ``summary``,
    ``sample_based``, ``uses_judge``, ``options``) without an instance."""
    return _load(ESTIMATORS, "estimator", name)


def interval_method_class(name: str) -> type:
    """The interval method class registered as ``name`` (its declarations)."""
    return _load(INTERVAL_METHODS, "interval method", name)


def get_estimator(name: str) -> Any:
    """A fresh estimator registered as ``name``, for one run (``ValueError`` for an unknown
    name): a component keeps its caches for the run it serves, never across runs."""
    return estimator_class(name)()


def get_interval_method(name: str) -> Any:
    """A fresh interval method registered as ``name``, for one run (``ValueError`` for an
    unknown name)."""
    return interval_method_class(name)()


def estimator_help() -> str:
    """Every registered estimator as ``name: summary`` (the CLI's ``--estimator`` help)."""
    return "; ".join(f"{name}: {estimator_class(name).summary}" for name in ESTIMATORS)


def interval_method_help() -> str:
    """Every registered interval method as ``name: summary`` (``--intervals`` help)."""
    return "; ".join(f"{name}: {interval_method_class(name).summary}" for name in INTERVAL_METHODS)


def estimator_names() -> tuple[str, ...]:
    """The registered estimator names, in registration order."""
    return tuple(ESTIMATORS)


def interval_method_names() -> tuple[str, ...]:
    """The registered interval method names, in registration order."""
    return tuple(INTERVAL_METHODS)
