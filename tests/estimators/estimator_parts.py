"""An estimator's terms and statistic through the public seam (for the exact-expectation tests)."""

from __future__ import annotations

import numpy as np

from receval.estimators.base import ScoringContext
from receval.estimators.registry import get_estimator


def terms_and_statistic(data, estimator: str = "joint", ratio: np.ndarray | None = None, **options):
    """(terms by stage, statistic) of the registered ``estimator`` on ``data``."""
    ctx = ScoringContext.of(data, estimator=estimator, **options)
    chosen = get_estimator(estimator)
    return chosen.terms(ctx), chosen.statistic(ctx, ratio)


def point(data, estimator: str = "joint", ratio: np.ndarray | None = None, **options):
    """The estimator's point metrics: its statistic at the full-sample stage totals."""
    terms, statistic = terms_and_statistic(data, estimator, ratio, **options)
    return statistic({k: v.sum(axis=0) for k, v in terms.items()})
