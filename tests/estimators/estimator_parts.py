"""An estimator's point metrics through the public seam (for the exact-expectation tests)."""

from __future__ import annotations

import numpy as np

from receval.estimators.base import terms_and_statistic

__all__ = ["point", "terms_and_statistic"]


def point(data, estimator: str = "joint", ratio: np.ndarray | None = None, **options):
    """The estimator's point metrics: its statistic at the full-sample stage totals."""
    terms, statistic = terms_and_statistic(data, estimator, ratio, **options)
    return statistic({k: v.sum(axis=0) for k, v in terms.items()})
