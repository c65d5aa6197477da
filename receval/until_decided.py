"""Label until decided: the next batch of draws where the leaderboard's comparisons are still open.

``receval sample TASK --until-decided --batch B --seed S`` scores the task with the anytime
sequences and finds the comparisons still open: every pair that the paired test-by-betting
sequences with Holm over all pairs (:mod:`receval.estimators.anytime.pairs`, the ones behind
``tier``/``rank_lo``/``rank_hi``; ranked by f1, :mod:`receval.estimators.anytime.f1`) have not
decided.  Then it draws the next B labels:

* a *floor* share φ of the batch (default 1/5) from q₀ = (1/m) Σ_j p_j: a system chosen uniformly,
  then a fact from its p_j, recorded with ``mixture_prob`` = q₀(x).  It keeps every system and the
  whole pool covered by the stream's mixture, so every sequence (pooled recall included) keeps
  learning from every round;
* the rest as fixed per-system counts, split over the systems of open pairs in proportion to the
  weights of their open pairs (racing / LUCB): a pair's weight is (the steps it still needs at
  its present rate of evidence)^-1/2, ×10 for a pair adjacent in the ranking (a tier boundary),
  so the pairs closest to being decided get the labels and near-ties, which no budget settles,
  little; each system's share then × the share of its target mass not yet labelled (the
  sequences take labelled facts exactly, so a draw of one adds nothing).

With ``top`` K (``--top K``) only which systems are the best K is to be decided: a system is
surely in when the decided pairs put it above S − K others, surely out when K are above it
(true whenever every decided pair is, so the same error bound holds); the open pairs are the
undecided ones across the boundary of the points' best K that touch a system still unsure
(LUCB's), and since every one of them must be decided, the hardest within reach gets the
draws first (weight need^+1/2, near-ties beyond the horizon little).

The round is written in a uniformly random order, marked ``order`` = ``random`` like every
round ``receval sample`` writes (the anytime stream reads it in file order: each draw then comes
from the mixture of the sources still to come).  Every choice uses only
labels already seen and the counts of a round are fixed before it is drawn, so that mixture
stays predictable and the sequences stay valid at every look
however the loop goes on.  The draws of a source are i.i.d. from its p_j, so ``prob`` keeps
the joint and simple estimators valid conditional on the counts.

When every open pair is decided, when no draw can help (every system of an open pair is
judged in full), or when ``budget`` draws are recorded, nothing is drawn and the result says
``decided`` with what is still open.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from receval.design import (
    SampleRound,
    hashed_precision_samples,
    in_hashed_order,
    next_round_name,
    round_to_annotate,
)
from receval.draw_hash import floor_counts
from receval.errors import OptionError
from receval.estimators.anytime.stream import MIXTURE_COLUMN

# The racing constants were tuned on bench/anytime.py's gradient world, when the sequences
# weighed every draw: the loop then needed 0.51 (SE 0.02, 80 repetitions) of the equal
# design's labels for its pairs there and 0.46 in gradient20.  With labelled facts entering
# the sequences exactly both designs decide more, and where the draws outnumber the pool an
# equal spread finds new facts about as fast as racing: 0.72 and 0.66 (SE 0.02), 0.53 (SE
# 0.03, median 0.49) in gradient-large, whose pool is 5.7x the draws.  Tried on the same
# repetitions and worse or no better (README): NEED_POWER 1, 3/4 (0.545), 1/4 or 0,
# ADJACENT_BOOST 40 or 3 (0.509), FLOOR_SHARE 1/10 (0.508), a token weight (x0.02) for pairs
# needing more than 4x the draws so far (0.542: a near-tie's draws also serve its systems'
# other pairs), and splitting each pair's weight toward its bottleneck system in proportion
# to v_i/n_i².
#: share of each batch drawn from the uniform floor mixture q₀
FLOOR_SHARE = 0.2
#: an open pair's weight is (steps it still needs)^-NEED_POWER: larger concentrates the draws
#: on the pairs closest to being decided
NEED_POWER = 0.5
#: with ``top`` K every pair across the boundary must be decided, so the hardest of them (the
#: bottleneck) gets the draws: weight (steps it still needs)^+1/2 for pairs within TOP_HORIZON x
#: the draws so far, TOP_BEYOND x the least of those weights for pairs beyond (near-ties at the
#: boundary, which no budget settles).  bench/anytime.py --top, against the closest-first
#: weights of the full ranking on the same repetitions: ParaBank top 1 loop / equal 0.86 vs
#: 1.01 (SE 0.03-0.04, 16 repetitions), gradient top 4 0.90 vs 0.96 (SE 0.03, 24), gradient-large
#: drawn with --seed 3 top 4 1.04 vs 0.96 (SE 0.08; 12 of 24 decided within 8 rounds)
TOP_NEED_POWER = -0.5
TOP_HORIZON = 4.0
TOP_BEYOND = 0.1
#: weight of an undecided pair adjacent in the ranking (a tier boundary) relative to others
ADJACENT_BOOST = 10.0
#: a system's focus weight is multiplied by (its share not yet labelled)^FRESH_POWER: the
#: chance that one more draw of it is a new fact (gradient world, 80 repetitions, loop / equal
#: labels 0.75 without, 0.72 at 1, 0.69 at 2, SE 0.02)
FRESH_POWER = 1.0
#: rank keys the loop can decide
RANK_KEYS = ("f1", "precision", "recall", "pooled_recall")
#: interval methods whose paired tests hold at every look (``--intervals`` of the loop):
#: ``anytime`` (betting, any number of draws) and ``anytime-asymptotic`` (as draws grow)
LOOP_METHODS = ("anytime", "anytime-asymptotic")
#: the loop's default (bench/anytime_asymptotic.py)
LOOP_INTERVALS = "anytime"


@dataclass(frozen=True)
class Decisions:
    """The state of the comparisons at this look: the systems with their point estimates, the
    pairs still open (indices into ``systems``, the closest to deciding first), ``pairs`` the
    pairs considered, and per open pair a weight (how close it is to being decided)."""

    systems: list[str]
    point: np.ndarray
    open_pairs: list[tuple[int, int]]
    pairs: int
    census: np.ndarray
    draws: int
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: per system the share of its target mass not yet labelled (1: nothing known)
    fresh: np.ndarray | None = None
    #: ``top`` K: only whether each system is among the best K is to be decided; ``sure_in``
    #: the systems the decided pairs already put there (better than all but K − 1 others)
    top: int | None = None
    sure_in: np.ndarray | None = None
    #: the systems the decided pairs already put outside the best K (K others better)
    sure_out: np.ndarray | None = None

    def describe_open(self, limit: int = 6) -> str:
        if self.top is None:
            return self._pairs_text(limit)
        text = f"top-{self.top} membership: " + self._pairs_text(limit)
        settled = self.members() if self.sure_in is not None else []
        return text + (
            f"; surely among the best {self.top}: {', '.join(settled)}" if settled else ""
        )

    def members(self) -> list[str]:
        """The systems surely among the best ``top`` (best first)."""
        inside = np.flatnonzero(self.sure_in)
        return [self.systems[i] for i in inside[np.argsort(-self.point[inside], kind="stable")]]

    def _pairs_text(self, limit: int) -> str:
        names = [f"{self.systems[i]}–{self.systems[j]}" for i, j in self.open_pairs[:limit]]
        more = len(self.open_pairs) - limit
        return ", ".join(names) + (f" (+{more} more)" if more > 0 else "")

    def system_weights(self) -> np.ndarray:
        """Each system's share of the focus draws: the weights of its open pairs, summed."""
        weight = np.zeros(len(self.systems))
        for (i, j), w in zip(self.open_pairs, self.weights, strict=True):
            weight[i] += w
            weight[j] += w
        if self.fresh is not None:  # a draw of a labelled fact adds nothing new
            weight = weight * self.fresh**FRESH_POWER
        return np.where(self.census, 0.0, weight)  # a census learns nothing from a draw


@dataclass(frozen=True)
class UntilDecidedRound(SampleRound):
    """A sample round drawn by ``--until-decided`` (possibly empty) and why it stopped."""

    decided: bool = False
    message: str = ""
    decisions: Decisions | None = field(default=None, repr=False)


def decisions(
    task,
    rank_by: str = "f1",
    confidence: float = 0.95,
    target: str = "micro",
    top: int | None = None,
    intervals: str = LOOP_INTERVALS,
    estimator: str = "joint",
) -> Decisions:
    """Score ``task`` and list the comparisons by ``rank_by`` still open at level ``confidence``
    (with ``top`` K: only those that settle which systems are the best K; ``intervals`` an
    anytime interval method, :data:`LOOP_METHODS`, whose paired tests decide).

    Every pair, tested by the paired anytime sequences with Holm over all pairs
    (:mod:`receval.estimators.anytime.pairs`, the ones behind ``tier`` and
    ``rank_lo``/``rank_hi``; f1: :mod:`receval.estimators.anytime.f1`); an open pair's weight is
    1 / (the steps it needs at its present rate)^(1/2), ×10 when adjacent in the ranking, so
    pairs about to be decided get the draws and near-ties little.

    Scored through the same pipeline as ``score --intervals anytime --estimator E``
    (:func:`receval.scoring.fit`): the points are ``estimator``'s, and an estimator that uses
    the judge decides with it (:meth:`~receval.estimators.anytime.method.AnytimeIntervals.pair_tests`)."""
    from receval.estimators.base import ScoringContext
    from receval.estimators.sample_data import build_sample_data
    from receval.options import ScoreOptions, check_score_options
    from receval.scoring import fit, pipeline_components

    build = getattr(task, "sample_data", None)  # the engine path's view: from its aggregates
    data = build(target) if build is not None else build_sample_data(task, target)
    m = data.m
    if data.K == 0:  # nothing labelled yet: every pair is open, equally (equal counts)
        nan = np.full(m, np.nan)
        pairs = [(int(i), int(j)) for i, j in zip(*np.triu_indices(m, 1), strict=True)]
        return Decisions(list(data.systems), nan, pairs, len(pairs), data.census, 0,
                         np.ones(len(pairs)), top=top)  # fmt: skip
    options = ScoreOptions(
        estimator=estimator,
        intervals=intervals,
        rank_by=rank_by,
        confidence=confidence,
        target=target,
    )
    options = check_score_options(options)  # the one check, as for score
    chosen, method = pipeline_components(task, options)
    ctx = ScoringContext(task, data, options)
    fitted = fit(ctx, chosen, method=method)
    # recall = θ·ν orders the systems as pooled recall ν does (also without exhaustive units)
    key = "pooled_recall" if rank_by == "recall" else rank_by
    point = np.asarray(fitted.run.point[key], float)
    return _pair_decisions(ctx, key, point, top, fitted.intervals)


def _pair_decisions(ctx, key: str, point: np.ndarray, top=None, method=None) -> Decisions:
    """The open pairs and their weights from the interval method's paired tests."""
    data = ctx.data
    ok = np.isfinite(point)
    tests = method.pair_tests(ctx, key, ok)
    need = tests.steps_to_decide()
    still = np.flatnonzero(~tests.decided())
    sure_in = sure_out = None
    if top is not None:
        sure_in, sure_out, still = membership_open(tests, point, ok, top, still)
    still = still[np.argsort(need[still], kind="stable")]
    weight = pair_weights(need[still], top is not None, data.K)
    # tier boundaries: undecided pairs adjacent in the ranking by the points weigh more
    rank = np.full(data.m, -1)
    order = np.flatnonzero(ok)[np.argsort(-point[ok], kind="stable")]
    rank[order] = np.arange(order.size)
    a, b = tests.pairs[still].T
    weight = weight * np.where(np.abs(rank[a] - rank[b]) == 1, ADJACENT_BOOST, 1.0)
    open_pairs = [(int(a), int(b)) for a, b in tests.pairs[still]]
    labelled = np.isfinite(np.asarray(data.label, float))
    fresh = np.clip(1.0 - data.target[labelled].sum(axis=0), 0.0, 1.0)
    return Decisions(
        list(data.systems), point, open_pairs, int(tests.pairs.shape[0]),
        data.census, data.K, weight, fresh, top, sure_in, sure_out,
    )  # fmt: skip


def pair_weights(need: np.ndarray, membership: bool, draws: int) -> np.ndarray:
    """The open pairs' weights from the steps each still needs: the closest to being decided
    first (need^-1/2); deciding ``membership`` (top K), the bottleneck first (need^+1/2)
    within TOP_HORIZON x ``draws``, the pairs beyond it little; 0 for a pair that shows no
    difference (need inf)."""
    power = TOP_NEED_POWER if membership else NEED_POWER
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(np.isfinite(need), 1.0 / np.maximum(need, 1.0) ** power, 0.0)
    if membership:
        beyond = np.isfinite(need) & (need > TOP_HORIZON * max(draws, 1))
        within = np.isfinite(need) & ~beyond
        if beyond.any() and within.any():
            weight = np.where(beyond, TOP_BEYOND * weight[within].min(), weight)
    return weight


def membership_open(tests, point, ok, top: int, still: np.ndarray):
    """Top-K membership from the decided pairs: a system is surely among the best K when it is
    better than at least S − K others (S the systems with an estimate), surely not when at
    least K are better than it; on the event that every decided pair is right (Holm over all
    pairs and looks), both statements are true.  Returns ``sure_in``, ``sure_out`` and, of the undecided
    pairs ``still``, those that can settle a system still unsure: across the boundary of the
    points' best K (LUCB's pairs), or, should none be, any undecided pair of an unsure system."""
    S = int(ok.sum())
    k = min(top, S)
    better = np.asarray(tests.better, bool)
    sure_in = ok & (better.sum(axis=1) >= S - k)
    sure_out = ok & (better.sum(axis=0) >= k)
    unsure = ok & ~sure_in & ~sure_out
    inside = np.zeros(ok.size, bool)
    order = np.flatnonzero(ok)[np.argsort(-point[ok], kind="stable")]
    inside[order[:k]] = True
    a, b = tests.pairs[still].T
    touches = unsure[a] | unsure[b]
    across = touches & (inside[a] != inside[b])
    return sure_in, sure_out, still[across if across.any() else touches]


def _separated(state: Decisions, rank_by: str, level: str) -> str:
    """The 'decided' line once nothing is open."""
    if state.top is None:
        return (
            f"decided: all {state.pairs} pairs by {rank_by} are separated at {level}; nothing drawn"
        )
    return (
        f"decided: the top {state.top} by {rank_by} are separated from the rest at {level}: "
        f"{', '.join(state.members())}; nothing drawn"
    )


def check_top(top: int | None, systems: int) -> None:
    """``ValueError`` unless ``top`` is None or an integer in 1 .. systems − 1."""
    if top is None:
        return
    if not isinstance(top, int | np.integer) or isinstance(top, bool) or not 1 <= top < systems:
        raise OptionError(
            f"{{top={top!r}}} must be an integer from 1 to {systems - 1} (the task has "
            f"{systems} systems)"
        )


def check_until_decided(batch: int, confidence: float, budget: int | None) -> None:
    """``ValueError`` for a batch below 1, a confidence outside (0, 1) or a negative budget."""
    if not isinstance(batch, int | np.integer) or isinstance(batch, bool) or batch < 1:
        raise OptionError(f"{{batch={batch!r}}} must be an integer >= 1")
    from receval.options import check_round_draws

    check_round_draws(int(batch))
    if not isinstance(confidence, int | float) or not 0.0 < confidence < 1.0:
        raise OptionError(f"{{confidence={confidence!r}}} must be in (0, 1)")
    if budget is not None and (not isinstance(budget, int | np.integer) or budget < 0):
        raise OptionError(f"{{budget={budget!r}}} must be an integer >= 0")


def allocate(weights: np.ndarray, total: int) -> np.ndarray:
    """Integer counts summing to ``total`` in proportion to ``weights`` (largest remainders)."""
    weights = np.where(np.isfinite(weights) & (weights > 0), weights, 0.0)
    if total <= 0 or weights.sum() <= 0:
        return np.zeros(weights.size, np.int64)
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    rest = total - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1
    return counts


def _stop(decided: Decisions, name: str, message: str) -> UntilDecidedRound:
    empty = pd.DataFrame(columns=["sample", "system", "query_id", "answer", "prob", "draw"])
    return UntilDecidedRound(
        name=name, samples=empty, units=pd.DataFrame(columns=["unit", "prob"]),
        to_annotate=pd.DataFrame(), sizes={}, decided=True, message=message, decisions=decided,
    )  # fmt: skip


def until_decided_round(
    task,
    batch: int,
    *,
    seed: int,
    rank_by: str = "f1",
    confidence: float = 0.95,
    budget: int | None = None,
    distribution: str = "uniform",
    floor: float = FLOOR_SHARE,
    target: str = "micro",
    top: int | None = None,
    intervals: str = LOOP_INTERVALS,
    estimator: str = "joint",
) -> UntilDecidedRound:
    """The next batch of ``--until-decided`` (module docstring), not written; ``target`` the
    average the comparisons are about (micro or macro, as ``score --target``); ``top`` K: decide
    only which systems are the best K (their order inside and outside left open); ``estimator``
    the registered sample-based estimator the comparisons are scored with (``ppi``: the judge
    helps decide).

    Raises ``ValueError`` for invalid options and while earlier draws still wait for a label (the
    choice must see them; label to_annotate.tsv first).
    """
    look = next_look(
        task, batch, rank_by=rank_by, confidence=confidence, budget=budget, target=target,
        top=top, intervals=intervals, estimator=estimator,
    )  # fmt: skip
    if isinstance(look, UntilDecidedRound):
        return look
    state, weight, n, name, k = look
    samples = _draw(task, state, weight, n, floor, seed, k, name, distribution)
    todo = _to_annotate(task, samples)
    return drawn_round(state, samples, todo, name, rank_by)


def drawn_round(
    state: Decisions, samples: pd.DataFrame, todo: pd.DataFrame, name: str, rank_by: str
) -> UntilDecidedRound:
    """The round of ``samples`` (with ``mixture_prob`` on its floor draws) and its message."""
    sizes = samples.groupby("system", observed=True).size().to_dict()
    message = (
        f"sample {name}: {len(samples)} draws ({int(samples[MIXTURE_COLUMN].notna().sum())} "
        f"spread over all systems) toward {len(state.open_pairs)} open pairs by {rank_by}: "
        f"{state.describe_open()}"
    )
    return UntilDecidedRound(
        name=name, samples=samples, units=pd.DataFrame(columns=["unit", "prob"]),
        to_annotate=todo, sizes=sizes, decided=False, message=message, decisions=state,
    )  # fmt: skip


def next_look(
    task,
    batch: int,
    *,
    rank_by: str = "f1",
    confidence: float = 0.95,
    budget: int | None = None,
    target: str = "micro",
    top: int | None = None,
    intervals: str = LOOP_INTERVALS,
    estimator: str = "joint",
):
    """The look of :func:`until_decided_round` before drawing: a decided (empty)
    :class:`UntilDecidedRound`, or ``(decisions, per-system focus weights, draws n, round
    name, round number)`` for the next batch.  ``task`` a loaded task or the engine path's
    view (:class:`receval.engine.score.BundleView`: scored from its aggregates)."""
    from receval.options import TARGETS, check_choice

    check_until_decided(batch, confidence, budget)
    check_choice("rank_by", rank_by, RANK_KEYS)
    check_choice("target", target, TARGETS)
    check_top(top, len(task.systems))
    check_choice("intervals", intervals, LOOP_METHODS)
    if len(task.samples):
        pending = ~task.samples["fact"].isin(task.labels.index)
        if pending.any():
            from receval.scoring import ignored_only

            raise ValueError(
                f"{int(pending.sum())} earlier draws have no label yet{ignored_only(task)}: "
                "label them (to_annotate.tsv) before drawing the next batch"
            )
    name, k = next_round_name(task.samples)
    state = decisions(
        task, rank_by, confidence, target, top, intervals=intervals, estimator=estimator
    )
    level = f"{confidence:.0%} ({intervals}, all pairs and looks)"
    ranked = int(np.isfinite(state.point).sum())
    if state.draws and ranked < min(2, len(state.systems)):
        return _stop(state, name, f"decided: no draw can help: {rank_by} cannot be estimated "
                     "for two systems (recall and f1 need exhaustive units: add them, or rank by "
                     "what the draws alone estimate with --rank-by precision or pooled_recall)")  # fmt: skip
    if not state.open_pairs:
        return _stop(state, name, _separated(state, rank_by, level))
    recorded = len(task.samples)
    if budget is not None and recorded >= budget:
        return _stop(state, name, f"decided: budget of {budget} draws spent; still open "
                     f"({len(state.open_pairs)}): {state.describe_open()}")  # fmt: skip
    weight = state.system_weights()
    if not weight.any():
        return _stop(state, name, "decided: no draw can help (every system of an open pair is "
                     "judged in full or shows no difference at all, or, ranked by f1, the pair "
                     "is ordered differently at the two ends of the true facts' interval, which "
                     "only more exhaustive units narrow); still open: "
                     f"{state.describe_open()}")  # fmt: skip
    n = batch if budget is None else min(batch, budget - recorded)
    return state, weight, n, name, k


def fixed_round(
    task,
    batch: int,
    *,
    seed: int,
    weights: np.ndarray | None = None,
    floor: float = FLOOR_SHARE,
    distribution: str = "uniform",
) -> UntilDecidedRound:
    """A round drawn like ``--until-decided``'s (floor share, random order, ``mixture_prob``)
    but with counts fixed whatever the labels say: equal per system with outputs, or in
    proportion to ``weights`` (one per system, in ``task.systems`` order).  The fixed designs
    the benchmark compares the loop with (the same anytime sequences read them)."""
    check_until_decided(batch, 0.95, None)
    name, k = next_round_name(task.samples)
    systems = list(task.systems)
    sizes = task.outputs.groupby("system", observed=True).size().reindex(systems).fillna(0)
    state = Decisions(systems, np.full(len(systems), np.nan), [], 0,
                      np.zeros(len(systems), bool), len(task.samples))  # fmt: skip
    alive = (sizes.to_numpy() > 0).astype(float)
    weight = alive if weights is None else alive * np.asarray(weights, float)
    samples = _draw(task, state, weight, batch, floor, seed, k, name, distribution)
    sizes_drawn = samples.groupby("system", observed=True).size().to_dict()
    return UntilDecidedRound(
        name=name, samples=samples, units=pd.DataFrame(columns=["unit", "prob"]),
        to_annotate=_to_annotate(task, samples), sizes=sizes_drawn, message=f"sample {name}",
    )  # fmt: skip


def _draw(task, state, weight, n, floor, seed, k, name, distribution) -> pd.DataFrame:
    """Focus draws (fixed counts in proportion to ``weight``) and floor draws (mixture q₀), all
    hashed draws of round ``k`` (:func:`receval.design.hashed_precision_samples`; a system's
    floor draws numbered after its focus draws, the floor's systems by
    :func:`receval.draw_hash.floor_counts`): the engine path's round for the same seed."""
    systems = state.systems
    sizes = task.outputs.groupby("system", observed=True).size().reindex(systems).fillna(0)
    alive = np.flatnonzero(sizes.to_numpy() > 0)
    # at least one (in bundles written before the order column, floor rows marked a shuffled round)
    n_floor = floor_draws(n, floor)
    focus = allocate(weight, n - n_floor)
    counts = np.asarray(focus, np.int64).copy()
    counts[alive] += floor_counts(len(alive), n_floor, seed, k)
    per = {systems[i]: int(c) for i, c in enumerate(counts) if c > 0}
    out = hashed_precision_samples(
        task.outputs, task.queries, per, seed=seed, round_number=k, distribution=distribution,
        sample=name, raw_outputs=task.raw_outputs, strip=task.config.matching.strip,
    )  # fmt: skip
    rows = out.attrs["rows"]
    is_floor = out["draw"].to_numpy(np.int64) > focus_counts_of(out["system"], focus, systems)
    out[MIXTURE_COLUMN] = np.nan
    out.loc[is_floor, MIXTURE_COLUMN] = floor_probabilities(task, distribution, rows[is_floor])
    out.attrs["rows"] = rows
    # the round in a uniformly random order (the stream reads it in file order: given the
    # draws before it, each draw comes from the mixture of the sources still to come)
    return in_hashed_order(out, seed, k)


def floor_draws(n: int, floor: float = FLOOR_SHARE) -> int:
    """The floor draws of a batch of ``n``: at least one (in bundles written before the order
    column, floor rows marked a shuffled round)."""
    return max(1, round(floor * n))


def focus_counts_of(system: pd.Series, focus: np.ndarray, systems: list[str]) -> np.ndarray:
    """The focus draws of each row's system (floor draws are numbered after them)."""
    index = pd.Series(focus, index=systems)
    return index.reindex(system.to_numpy()).to_numpy(np.int64)


def floor_probabilities(task, distribution: str, rows: np.ndarray) -> np.ndarray:
    """q₀(x) = (1/m) Σ_j p_j(x) of the answer strings at output ``rows``, m the systems with
    outputs: the probability of what was drawn, whatever classes later labels create
    (:func:`receval.estimators.anytime.stream.drawn_floor_probabilities`)."""
    from receval.estimators.anytime.stream import drawn_floor_probabilities

    facts = task.outputs["fact"].to_numpy(np.int64)[rows]
    return drawn_floor_probabilities(task, distribution, facts)


def _to_annotate(task, samples: pd.DataFrame) -> pd.DataFrame:
    """Every drawn fact still unlabelled (this batch and earlier ones), once, as the engine
    path lists them (:func:`receval.design.round_to_annotate`)."""
    todo = round_to_annotate(task, samples)
    todo["label"] = ""
    todo["annotator"] = ""
    return todo
