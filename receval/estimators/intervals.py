"""Interval methods behind one protocol: what turns an estimator's run into intervals and the
pairwise comparisons behind tiers and rank sets.

``--intervals`` picks the method from :mod:`receval.estimators.registry`:

* ``bootstrap`` (default): the shared bootstrap's replicates, with ``--method`` percentile,
  basic or BCa (:func:`receval.estimators.bootstrap.confidence_interval`), and the step-down /
  Holm / BH paired tests over the same replicates (``--tiers``;
  :func:`receval.leaderboard.stepdown_comparisons`).  Valid for a design fixed in advance and
  scored once.
* methods that need the draws in arrival order (confidence sequences valid at every look) read
  them from the context: :attr:`SampleData.draw_row` and :attr:`SampleData.sampler_round`, and
  declare ``needs_bootstrap = False`` if they do not use replicates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from receval.estimators.base import ScoringContext
    from receval.estimators.bootstrap import BootstrapRun
    from receval.leaderboard import Comparisons
    from receval.run_record import IntervalRecord


@dataclass(frozen=True)
class Estimates:
    """One metric of every system: the point to print and its interval ends (arrays (m,))."""

    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    #: system index -> a ``note`` the method adds about this estimate (e.g. a point moved into
    #: its interval)
    notes: dict[int, str] = field(default_factory=dict)


class IntervalMethod:
    """The protocol of an interval method (subclass, set ``name``, register)."""

    name: ClassVar[str]
    #: one line for ``--intervals``' help (the registry joins them)
    summary: ClassVar[str] = ""
    #: whether the method reads bootstrap replicates (False: none are drawn)
    needs_bootstrap: ClassVar[bool] = True
    #: the :class:`~receval.options.ScoreOptions` fields only some interval methods take, that
    #: this one takes (see :data:`receval.options.OWNED_OPTIONS`)
    options: ClassVar[tuple[str, ...]] = ()

    def check(self, options: Any) -> None:
        """Refuse option combinations this method cannot honour (``ValueError``)."""

    def run_warnings(self, ctx: ScoringContext) -> list[str]:
        """Warnings about what this method can make of the data (printed once per run)."""
        return []

    def system_notes(self, ctx: ScoringContext, notes: list[list[str]]) -> None:
        """Append to ``notes[i]`` what not to trust in system i's intervals (none by default)."""

    def record(self, ctx: ScoringContext) -> IntervalRecord | None:
        """This method's part of ``run.json``: its ``intervals`` block and the fields of
        ``ranking`` and ``bootstrap`` it sets (:class:`~receval.run_record.IntervalRecord`);
        None (the bootstrap's own blocks) by default."""
        return None

    def interval(
        self,
        options: Any,
        point: np.ndarray,
        replicates: np.ndarray | None,
        jackknife: np.ndarray | None = None,
        bounds: tuple[float, float] | None = (0.0, 1.0),
        draws: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The interval of a derived quantity (precision at the target recall, the universe's
        correct facts) from its point and replicates (NaN ends where the method has none)."""
        raise NotImplementedError

    def label(self, options: Any, B: int | None) -> str:
        """The ``interval`` column's text: method, level (and what it is valid for)."""
        raise NotImplementedError

    def estimate(
        self,
        ctx: ScoringContext,
        run: BootstrapRun | None,
        metric: str,
        bounds: tuple[float, float] | None = (0.0, 1.0),
    ) -> Estimates:
        """The metric's point and interval for every system (or the pool's, shape (1,))."""
        raise NotImplementedError

    def comparisons(
        self,
        ctx: ScoringContext,
        point: np.ndarray,
        replicates: np.ndarray | None,
        metric: str,
    ) -> Comparisons:
        """All pairwise comparisons of ``metric`` (family-wise error ≤ 1 − confidence)."""
        raise NotImplementedError


class BootstrapIntervals(IntervalMethod):
    """Intervals and paired tests from the shared bootstrap replicates."""

    name: ClassVar[str] = "bootstrap"
    summary: ClassVar[str] = (
        "the shared bootstrap (--method), valid for a design fixed in advance and scored once"
    )
    options: ClassVar[tuple[str, ...]] = ("annotator_resampling", "cluster_queries")

    def label(self, options: Any, B: int | None) -> str:
        clusters = ", queries resampled as clusters" if options.cluster_queries else ""
        if getattr(options, "annotator_resampling", False):
            clusters += ", annotator votes resampled"
        return f"{options.method} bootstrap {options.confidence:.0%}, B={B}, small-sample expanded{clusters}"

    def estimate(
        self,
        ctx: ScoringContext,
        run: BootstrapRun | None,
        metric: str,
        bounds: tuple[float, float] | None = (0.0, 1.0),
    ) -> Estimates:
        assert run is not None, "the bootstrap interval method needs a bootstrap run"
        point = run.point[metric]
        jack = None if run.jackknife is None else run.jackknife[metric]
        draws = None if run.draws is None else run.draws.get(metric)
        low, high = self.interval(ctx.options, point, run.replicates[metric], jack, bounds, draws)
        return Estimates(point, low, high)

    def interval(
        self,
        options: Any,
        point: np.ndarray,
        replicates: np.ndarray,
        jackknife: np.ndarray | None = None,
        bounds: tuple[float, float] | None = (0.0, 1.0),
        draws: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``--method`` interval at ``--confidence`` of any replicated quantity (BCa falls
        back to percentile for a quantity without jackknife values), expanded for small samples
        where ``draws`` (the draws each column's variance rests on) is given."""
        from receval.estimators.bootstrap import confidence_interval

        method = options.method if jackknife is not None or options.method != "BCa" else None
        ci = confidence_interval(
            point,
            replicates,
            method=method or "percentile",
            level=options.confidence,
            jackknife=jackknife,
            bounds=bounds,
            draws=draws,
        )
        return ci.low, ci.high

    def comparisons(
        self,
        ctx: ScoringContext,
        point: np.ndarray,
        replicates: np.ndarray | None,
        metric: str,
    ) -> Comparisons:
        from receval.leaderboard import stepdown_comparisons

        options = ctx.options
        return stepdown_comparisons(
            point, replicates, alpha=1 - options.confidence, procedure=options.tiers
        )
