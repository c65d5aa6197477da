"""The estimator seam: what every estimator declares and computes, behind one protocol.

An estimator is a small object with a ``name`` (the ``--estimator`` value), a ``kind``
(``unbiased``, ``consistent``, ``census``), the ``equation`` it implements and a one-line
``summary``.  A sample-based estimator turns the task's sample arrays (:class:`SampleData`) into
*per-row terms* of each random stage — draws, exhaustive units, and queries when they are
resampled as clusters — laid out in *named* column blocks (:class:`TermLayout`), and a
``statistic`` that maps stage totals (column sums, or their bootstrap replicates) to the metrics.
The shared bootstrap (:mod:`receval.estimators.bootstrap`) only ever sees these two, so an
estimator is a new module registered in :mod:`receval.estimators.registry`.

Data flow::

    Task ─build_sample_data─> SampleData ─Estimator.terms─> {stage: rows × columns}
        ─run_bootstrap(stages, terms, Estimator.statistic)─> point / replicates
        ─IntervalMethod─> intervals, pairwise comparisons ─> leaderboard
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from receval.estimators.bootstrap import QUERY_STAGE, Stage

if TYPE_CHECKING:
    from receval.estimators.reliability import EffectiveSizes
    from receval.estimators.sample_data import SampleData
    from receval.options import ScoreOptions
    from receval.run_record import Block, RecordParts
    from receval.task import Task

#: stage totals (each ``(..., columns)``) -> metrics (each ``(..., m)`` or ``(..., 1)``)
Statistic = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]

#: the metrics every sample-based statistic returns per system
METRICS = ("precision", "pooled_recall", "recall", "f1")

#: leaderboard.csv's leading columns, in order (every estimator)
LEADERBOARD_COLUMNS = [
    "system",
    "team",
    "outputs",
    "judged",
    "precision",
    "precision_lo",
    "precision_hi",
    "pooled_recall",
    "pooled_recall_lo",
    "pooled_recall_hi",
    "recall",
    "recall_lo",
    "recall_hi",
    "f1",
    "f1_lo",
    "f1_hi",
    "rank",
    "rank_lo",
    "rank_hi",
    "tier",
]


@dataclass(frozen=True)
class ScoringOutput:
    """What one estimator run produced, before diagnostics: the public
    :class:`receval.api.ScoreResult` is built from it (frames ready to write, the raw replicates
    and the scoring stage's blocks of the run record, which
    :func:`receval.run_record.run_record` composes)."""

    options: Any
    leaderboard: pd.DataFrame
    pool: pd.DataFrame
    conflicts: pd.DataFrame
    truth_check: pd.DataFrame | None
    warnings: list[str]
    run: Any  # BootstrapRun | None
    replicates: Any  # Replicates | None
    record: RecordParts | None = None
    curves: dict[str, pd.DataFrame] = field(default_factory=dict)


@dataclass(frozen=True)
class TermLayout:
    """Named column blocks of one stage's term matrix (no code counts offsets)."""

    blocks: dict[str, slice]
    width: int

    @classmethod
    def of(cls, *parts: tuple[str, int]) -> TermLayout:
        """Blocks in order, each ``(name, width)``."""
        blocks, start = {}, 0
        for name, size in parts:
            blocks[name] = slice(start, start + size)
            start += size
        return cls(blocks, start)

    def __getitem__(self, name: str) -> slice:
        return self.blocks[name]

    def __contains__(self, name: str) -> bool:
        return name in self.blocks


@dataclass(frozen=True)
class ScoringContext:
    """What an estimator and an interval method see: the task, its sample arrays, the options."""

    task: Task | None
    data: SampleData
    options: ScoreOptions

    @classmethod
    def of(cls, data: SampleData, task: Task | None = None, **options: Any) -> ScoringContext:
        """A context from sample arrays and option fields (notebooks, tests, studies)."""
        from receval.options import ScoreOptions

        return cls(task, data, ScoreOptions(**options))


class ContextCache:
    """Values a per-run component computes once per :class:`ScoringContext`.

    Held by the component instance (the registry gives every run fresh ones), never written into
    the frozen context, a class or a module, so nothing outlives the run.  A run sees a few
    contexts (its own; the relabelled ones of annotator resampling); the ``size`` most recent are
    kept, identified by identity (a context holds arrays, so it is not hashed).
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._held: list[tuple[ScoringContext, dict[str, Any]]] = []

    def of(self, ctx: ScoringContext) -> dict[str, Any]:
        """The values cached for ``ctx`` (an empty dict the first time)."""
        for held, values in self._held:
            if held is ctx:
                return values
        values: dict[str, Any] = {}
        self._held = [*self._held[-(self.size - 1) :], (ctx, values)]
        return values


def bootstrap_stages(data: SampleData, cluster_queries: bool = False) -> list[Stage]:
    """The random stages: each sampler's draws, the exhaustive units (and the queries).

    With ``cluster_queries`` the queries are resampled too, as clusters: every draw is weighted by
    its query's count, the exhaustive units' facts are split by query, and the precision
    denominators |X_i| become the resampled Σ_q v_q |X_i ∩ q| (the ``queries`` stage).
    """
    if not cluster_queries:
        return [Stage("draws", data.draw_sampler), Stage("units", np.zeros(data.U, np.int64))]
    return [
        Stage(QUERY_STAGE, np.zeros(len(data.queries), np.int64)),
        Stage("draws", data.draw_sampler, query=data.draw_query),
        Stage("units", np.zeros(data.U, np.int64), rows=data.pair_unit, query=data.pair_query),
    ]


class Estimator:
    """The protocol every estimator implements (subclass, set the class attributes, register).

    Sample-based estimators implement :meth:`layouts`, :meth:`terms` and :meth:`statistic`; a
    census (``sample_based = False``) implements :meth:`score` instead.
    """

    name: ClassVar[str]
    kind: ClassVar[str]  # "unbiased" | "consistent" | "census"
    equation: ClassVar[str]
    summary: ClassVar[str]
    sample_based: ClassVar[bool] = True
    #: whether the estimator reads the task's judge scores (``judge.tsv``): the anytime
    #: sequences then take them as the precision control, and ``sample --until-decided``
    #: decides with them
    uses_judge: ClassVar[bool] = False
    #: whether ``weighting`` (the joint mixture weights w_ij) shapes the estimate
    mixture_weights: ClassVar[bool] = False
    #: the :class:`~receval.options.ScoreOptions` fields only some estimators take, that this
    #: one takes (the others are refused naming it): see :data:`receval.options.OWNED_OPTIONS`
    options: ClassVar[tuple[str, ...]] = ()
    #: whether ``--precision-form`` chooses between the unbiased sum and the self-normalised ratio
    precision_forms: ClassVar[bool] = False
    #: appended to the ``interval`` column's text (what else the interval rests on)
    interval_note: ClassVar[str] = ""

    def check(self, task: Task, options: Any) -> None:
        """Refuse up front what this estimator cannot score (``BundleError``/``ValueError``)."""

    def stages(self, ctx: ScoringContext) -> list[Stage]:
        """The random stages the shared bootstrap resamples."""
        return bootstrap_stages(ctx.data, ctx.options.cluster_queries)

    def layouts(self, ctx: ScoringContext) -> dict[str, TermLayout]:
        """The named column blocks of each stage's terms."""
        raise NotImplementedError

    def terms(self, ctx: ScoringContext) -> dict[str, np.ndarray]:
        """Per-row terms of every stage (stage name -> rows × columns)."""
        raise NotImplementedError

    def statistic(self, ctx: ScoringContext, ratio: np.ndarray | None = None) -> Statistic:
        """The metrics as a function of stage totals."""
        raise NotImplementedError

    def effective_sizes(self, ctx: ScoringContext, terms: dict[str, np.ndarray]) -> EffectiveSizes:
        """Effective sample sizes behind each system's numbers (reliability flags)."""
        raise NotImplementedError

    def system_notes(self, ctx: ScoringContext, notes: list[list[str]]) -> None:
        """Add this estimator's per-system notes (systems with outputs, not a census)."""

    def run_warnings(self, ctx: ScoringContext, warnings: list[str]) -> None:
        """Add this estimator's run warnings (after the data's own)."""

    def record(self, ctx: ScoringContext, run: Any) -> Block | None:
        """This estimator's block of ``run.json`` (a :class:`~receval.run_record.Block` whose
        ``KEY`` names its place in the :class:`~receval.run_record.RunRecord`, e.g. ``judge``),
        or None."""
        return None

    def class_caveat(self) -> str:
        """How this estimator's precision is affected by aliases nobody classed."""
        return ""

    def score(self, task: Task, options: Any, engine: Any = None) -> Any:
        """A census estimator's whole result (``sample_based = False`` only), counted in
        ``engine`` (None: the task's embedded DuckDB)."""
        raise NotImplementedError(f"{self.name} is sample-based: use its terms and statistic")


#: units stage (not clustered): θ̂'s numerator a_u, denominator b_u, simple recall numerators c_ui
def unit_layout(m: int) -> TermLayout:
    return TermLayout.of(("theta_num", 1), ("theta_den", 1), ("simple_recall", m))


def unit_terms(data: SampleData) -> np.ndarray:
    """The units stage's terms [a_u | b_u | c_ui] (U × (m + 2)), design-weighted."""
    from receval.estimators.recall import pool_coverage_terms, simple_recall_terms

    a, b = pool_coverage_terms(data)
    rec_simple, _ = simple_recall_terms(data)
    if not data.U:
        return np.zeros((0, data.m + 2))
    return np.concatenate([a[:, None], b[:, None], rec_simple], axis=1)


def clustered_terms(data: SampleData, draws: np.ndarray) -> dict[str, np.ndarray]:
    """The stages when queries are resampled as clusters: units split per (unit, query) pair,
    and the queries' [|X_i ∩ q| (m) | labelled correct (m)]."""
    w = data.unit_weight[data.pair_unit] if data.pair_unit.size else np.empty(0)
    units = np.concatenate(
        [
            (data.pair_pooled * w)[:, None],
            (data.pair_found * w)[:, None],
            data.pair_by_system * w[:, None],
        ],
        axis=1,
    )
    queries = np.concatenate([data.query_sizes, data.query_correct], axis=1)
    return {"draws": draws, "units": units, QUERY_STAGE: queries}


def stack_blocks(data: SampleData, blocks: list[np.ndarray]) -> np.ndarray:
    """The draws stage's term matrix from its blocks (K × width)."""
    width = sum(x.shape[1] for x in blocks)
    return np.concatenate(blocks, axis=1) if data.K else np.zeros((0, width))


def stage_terms(ctx: ScoringContext, draw_blocks: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every stage's terms from the draws stage's blocks: the units' [a_u | b_u | c_ui], or
    with ``cluster_queries`` the per-(unit, query) pairs and the queries' cells."""
    draws = stack_blocks(ctx.data, draw_blocks)
    if ctx.options.cluster_queries:
        return clustered_terms(ctx.data, draws)
    return {"draws": draws, "units": unit_terms(ctx.data)}


#: combine(draw totals, unit totals, θ̂, ν̂, self-normalised precision) -> (precision, recall)
Combine = Callable[..., tuple[np.ndarray, np.ndarray]]


def sampled_statistic(
    data: SampleData, layout: TermLayout, combine: Combine, use_ratio: np.ndarray
) -> Statistic:
    """The statistic of a sample-based estimator whose draws stage has the blocks ``joint``,
    ``pooled_num``, ``pooled_den`` and ``mass``: θ̂ = Σa/Σb, ν̂ = Σ num / Σ den, the
    self-normalised precision Σ t f/q / Σ t/q, then ``combine`` for precision and recall; a census
    system's precision is exact, and with queries resampled t_i = 1/|X_i| becomes
    v_q / Σ_q v_q |X_i ∩ q| (the ratio form is invariant to the scale of t_i)."""
    m = data.m
    census, exact = data.census, data.census_precision
    units = unit_layout(m)
    num, den = units["theta_num"].start, units["theta_den"].start

    def stat(totals: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        d = totals["draws"]
        u = totals["units"]
        with np.errstate(invalid="ignore", divide="ignore"):
            theta = u[..., num] / u[..., den]
            ratio_form = d[..., layout["joint"]] / d[..., layout["mass"]]
            pooled = d[..., layout["pooled_num"]] / d[..., layout["pooled_den"]]
            precision, recall = combine(d, u, theta, pooled, ratio_form)
            census_precision = exact
            if QUERY_STAGE in totals:
                q = totals[QUERY_STAGE]
                precision = np.where(use_ratio, precision, precision * data.sizes / q[..., :m])
                census_precision = q[..., m:] / q[..., :m]
        precision = np.where(census, census_precision, precision)
        joint = d[..., layout["joint"]]
        pool_correct = d[..., layout["pooled_den"]]
        return metric_dict(precision, pooled, recall, theta, pool_correct, joint, ratio_form)

    return stat


def metric_dict(
    precision: np.ndarray,
    pooled: np.ndarray,
    recall: np.ndarray,
    theta: np.ndarray,
    pool_correct: np.ndarray,
    unbiased: np.ndarray,
    ratio_form: np.ndarray,
) -> dict[str, np.ndarray]:
    """What every sample-based statistic returns: the four :data:`METRICS` (F1 from precision
    and recall), pool coverage θ̂ and the pool's correct facts (shape (..., 1)), and both
    precision forms (the unbiased sum and the self-normalised ratio)."""
    from receval.estimators.recall import f1_score

    return {
        "precision": precision,
        "pooled_recall": pooled,
        "recall": recall,
        "f1": f1_score(precision, recall),
        "pool_coverage": np.asarray(theta)[..., None],
        "pool_correct": np.asarray(pool_correct),
        "precision_unbiased": unbiased,
        "precision_ratio": ratio_form,
    }


def terms_and_statistic(
    data: SampleData, estimator: str = "joint", ratio: np.ndarray | None = None, **options: Any
) -> tuple[dict[str, np.ndarray], Statistic]:
    """The per-row terms of every stage and the statistic of the registered ``estimator`` on
    ``data`` (``options``: :class:`~receval.options.ScoreOptions` fields such as ``weighting``
    or ``cluster_queries``) — what :func:`receval.scoring.score_task` bootstraps, for studies and
    tests that resample by hand.  ``statistic({k: v.sum(axis=0) for k, v in terms.items()})``
    is the point estimate."""
    from receval.estimators.registry import get_estimator

    ctx = ScoringContext.of(data, estimator=estimator, **options)
    chosen = get_estimator(estimator)
    return chosen.terms(ctx), chosen.statistic(ctx, ratio)
