"""Precision at a shared target recall: read off the estimated curve, or extrapolate with Dimm.

For system i with outputs ranked by score (:class:`receval.curves.ranked.FrameRankedList` order),
the number of correct facts among its top k is estimated from every judged draw that hit one of
its outputs, by the same importance weights as pooled recall (Horvitz–Thompson form, unbiased for
each k):

    Ĉ_i(k) = Σ_{draws x with rank_i(x) ≤ k} f(x) / (N q0(x)),

so Ĉ_i(|X_i|) / |X_i| is the joint precision (balance weights) and Ĉ_i(k) / 𝒴̂ its recall at k,
with 𝒴̂ = Ŷ / θ̂ the estimated number of correct facts in the universe.  Between draw ranks Ĉ is
interpolated linearly (Ĉ(0) = 0).  Precision at target recall R_T is R_T 𝒴̂ / k* where Ĉ(k*) =
R_T 𝒴̂ (``method = curve``).  When the whole list does not reach R_T the system's end point
(r̂_i, π̂_i) is extrapolated with Dimm's reference curves (``method = dimm``, a model
extrapolation; :mod:`receval.extrapolation`), with prevalence ρ = 𝒴̂ / universe size.  The same
computation runs inside every bootstrap replicate, so the interval covers both the sampling
noise of the curve and of 𝒴̂ (and, for Dimm, of the point extrapolated from).

A replicate whose curve falls short of R_T while the point's reaches it is extrapolated with Dimm
too; the share of such replicates is recorded (run.json ``target.systems.<name>
.short_of_target``), not noted: with 20 draws per system the curve's intervals covered 0.955–0.99
whatever that share (``bench/flags.py --only target``, issue 37), so it marks no doubt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from receval.curves.ranked import system_ranked_list
from receval.estimators.sample_data import SampleData
from receval.extrapolation import (
    extrapolated_precision,
    recall_distance_flag,
    refusal_message,
)

MAX_CURVE_POINTS = 200

#: A Dimm extrapolation whose back-test deviation exceeds this is flagged as "does not fit".
#: The deviation (:func:`forward_backtest`) is how far Dimm's model, carried along the system's
#: own estimated curve over the recall distance it extrapolates, misses the curve's end *beyond*
#: the 95% sampling noise of that gap: a curve too noisy to judge the model gets 0, not a flag.
#: 0.10 is of the order of a typical precision interval's half-width: a model error that large,
#: on the system's own data and net of noise, makes the extrapolated number unsupported.  On
#: the simulated task (binormal rankings, whose curves decline as ranked retrieval curves do)
#: no back-test exceeds it; on lists whose precision collapses at the end of the list (the
#: ``logistic`` confidence model) most do.
BACKTEST_LIMIT = 0.10

#: The flag of a curve's estimate above 1 (goal / k* > 1: the yield Ĉ up to the target grew faster
#: than the ranks, which only a few heavily weighted draws early in the list can do).  Measured
#: (``bench/flags.py --only target``, 20 draws per system): such intervals covered 0.82 on
#: ParaBank's real systems, the curve's other intervals 0.94–0.99 in every world.
ABOVE_ONE_FLAG = (
    "is above 1: the yield curve up to the target rests on a few heavily weighted draws early "
    "in the list, and the interval may undercover"
)

#: The longest recall distance the back-test carries Dimm's model along the curve, and the draws
#: its starting point needs (an earlier Ĉ(k)/k rests on a handful of labels).
BACKTEST_WINDOW = 0.15
BACKTEST_MIN_DRAWS = 30


#: The leaderboard note of an extrapolation that fails its back-test (the value is in the
#: ``precision_at_target_backtest`` column; one wording for all systems keeps notes groupable).
POOR_FIT_NOTE = (
    f"precision_at_target: model extrapolation does not fit: its back-test deviation "
    f"(precision_at_target_backtest) exceeds {BACKTEST_LIMIT:.2f} beyond the curve's sampling "
    "noise, so Dimm's reference curve does not describe the system's own curve"
)


def _poor_fit(deviation: float) -> str:
    return (
        f"model extrapolation does not fit: back-test deviation {deviation:.2f} > "
        f"{BACKTEST_LIMIT:.2f} (Dimm's reference curve vs the system's own curve)"
    )


@dataclass
class TargetResult:
    """Per-system precision at target: point (m,), replicates (B, m), method and notes."""

    point: np.ndarray
    replicates: np.ndarray
    method: list[str]
    notes: list[list[str]]
    flags: list[list[str]]
    details: dict[str, dict] = field(default_factory=dict)
    curves: dict[str, pd.DataFrame] = field(default_factory=dict)
    prevalence: float = float("nan")  # ρ used for Dimm's model (full-sample value)


def system_ranks(outputs: pd.DataFrame, system: str) -> pd.Series:
    """Rank (1-based) of every fact of ``system`` in its score order, indexed by fact id."""
    ranked = system_ranked_list(outputs, system)
    return pd.Series(ranked["rank"].to_numpy(), index=ranked["fact"].to_numpy())


def score_ranking_problem(outputs: pd.DataFrame, system: str) -> str | None:
    """Why ``system``'s outputs have no confidence ranking (None when they have one).

    Precision at a target recall reads the system's precision curve over its outputs ranked by
    ``score``; without a score (or with one score for every output) that order is the input
    order, an arbitrary one, so the curve and anything read off it mean nothing.
    """
    rows = outputs.loc[outputs["system"] == system]
    scores = rows["score"] if "score" in rows.columns else pd.Series(dtype=float)
    scored = scores.dropna()
    if scored.empty:
        return "its outputs have no score"
    if scored.nunique() < 2 and len(rows) > 1:
        return "every output has the same score"
    return None


def _crossing(ranks: np.ndarray, cum: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """k* where the piecewise-linear Ĉ (through (0, 0) and (ranks, cum)) first reaches goal.

    ``cum`` is (B, n) non-decreasing, ``goal`` (B,); NaN where Ĉ(size) < goal.
    """
    B = cum.shape[0]
    if ranks.size == 0:
        return np.full(B, np.nan)
    reached = cum >= goal[:, None]
    any_reached = reached.any(axis=1)
    first = np.argmax(reached, axis=1)
    prev_c = np.where(first > 0, cum[np.arange(B), np.maximum(first - 1, 0)], 0.0)
    prev_k = np.where(first > 0, ranks[np.maximum(first - 1, 0)], 0.0)
    cur_c = cum[np.arange(B), first]
    cur_k = ranks[first].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(cur_c > prev_c, (goal - prev_c) / (cur_c - prev_c), 1.0)
    k = prev_k + frac * (cur_k - prev_k)
    return np.where(any_reached & (goal > 0), np.maximum(k, 1e-12), np.nan)


def forward_backtest(
    ranks: np.ndarray,
    cum_point: np.ndarray,
    cum_reps: np.ndarray,
    universe: tuple[float, np.ndarray],
    rho: tuple[float, np.ndarray],
    end: tuple[float, float, np.ndarray, np.ndarray],
    distance: float,
    level: float,
) -> dict:
    """Back-test of Dimm's extrapolation on the system's own curve, net of the curve's noise.

    The extrapolation carries the end point (R̂, P̂) of the list a recall distance
    d = R_T − R̂ forward.  The back-test does the same on data the system has: it fits the
    reference curve (Dimm 2015, eq. 12) through the curve's point A at recall R̂ − d' (the knot
    nearest it, with d' = min(d, :data:`BACKTEST_WINDOW`, R̂/2): the end of the curve, not its
    steep head, is what the extrapolation continues) and carries it forward to the end,
    G = X(R̂; ρ̂, β̂_A) − P̂ (eq. 11), where P̂ = Ĉ(k)/k and R̂ = Ĉ(k)/𝒴̂ along the curve.  The
    same gap in every bootstrap replicate (curve, 𝒴̂ and ρ̂ resampled, β refitted) gives its
    standard error s; the back-test value is the part of the gap the curve's sampling noise
    does not explain, (|G| − z s)⁺ with z the two-sided ``level`` normal quantile: 0 when
    Dimm's model predicts the end of the curve within its noise, otherwise by how much it
    misses it at least.  A diagnostic of the model on this system, not an error bound.

    A never rests on fewer than :data:`BACKTEST_MIN_DRAWS` draws (it moves down the curve until
    it does); no back-test (``backtest_max_dev`` None) when it then lies less than d'/2 before
    the end (a curve too short to test the model over the distance it extrapolates) or Dimm's
    model refuses it.  Returns the run record
    entries ``backtest_max_dev``, ``backtest_gap`` (G), ``backtest_se`` (s),
    ``backtest_anchor_recall`` and ``backtest_distance``.
    """
    from scipy.stats import norm

    from receval.extrapolation import extrapolated_precision

    out: dict = {"backtest_max_dev": None}
    end_recall, end_precision, recall_reps, precision_reps = end
    reach = min(max(distance, 0.0), BACKTEST_WINDOW, end_recall / 2)
    if ranks.size < BACKTEST_MIN_DRAWS or not reach > 0 or not universe[0] > 0:
        return out
    recall_p = cum_point / universe[0]
    j = max(int(np.argmin(np.abs(recall_p - (end_recall - reach)))), BACKTEST_MIN_DRAWS - 1)
    if end_recall - recall_p[j] < reach / 2:
        return out
    size = float(ranks[j])
    with np.errstate(invalid="ignore", divide="ignore"):
        anchor_r = recall_p[j], cum_reps[:, j] / universe[1]
        anchor_p = min(cum_point[j] / size, 1.0), np.minimum(cum_reps[:, j] / size, 1.0)
        point = extrapolated_precision(anchor_p[0], anchor_r[0], rho[0], end_recall)
        reps = extrapolated_precision(anchor_p[1], anchor_r[1], rho[1], recall_reps)
    gap = float(point.precision_at_target) - float(end_precision)
    gaps = reps.precision_at_target - precision_reps
    gaps = gaps[np.isfinite(gaps)]
    out.update(
        backtest_anchor_recall=float(anchor_r[0]),
        backtest_distance=float(end_recall - anchor_r[0]),
    )
    if not np.isfinite(gap) or gaps.size < 20:
        return out
    se = float(gaps.std(ddof=1))
    z = float(norm.ppf(0.5 + level / 2))
    out.update(backtest_max_dev=max(abs(gap) - z * se, 0.0), backtest_gap=gap, backtest_se=se)
    return out


def _refused(problem: str, notes: list[str], flags: list[str]) -> dict:
    """Refuse precision at target for a system without a confidence ranking: the curve would be
    read over an arbitrary order (and Dimm's model, a family of ranked-retrieval curves, assumes
    a ranking too).  Appends the note and flag; returns the run record entry."""
    notes.append(
        f"precision_at_target: refused: {problem}, so the ranked list is arbitrary and "
        "precision at a target recall is undefined (add a score column to rank the outputs)"
    )
    flags.append(f"no confidence ranking: {problem}")
    return {"method": None, "refused": f"no confidence ranking: {problem}", "flags": flags}


def _yield_curve(
    data: SampleData,
    outputs: pd.DataFrame,
    system: str,
    i: int,
    counts: np.ndarray,
    num_terms: np.ndarray,
    draw_x: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """System i's importance-weighted yield Ĉ at the ranks of the draws that hit its output.

    Returns the distinct ranks of the draws that hit it (one knot per drawn rank: draws of the same fact,
    by one sampler or several, add up), and Ĉ at those ranks for the point (1, n) and for every
    replicate (B, n).
    """
    rank_of = system_ranks(outputs, system)
    hit = np.flatnonzero(data.member[data.draw_fact, i] & (num_terms[:, i] > 0))
    ranks_hit = rank_of.reindex(draw_x[hit]).to_numpy()
    order = np.argsort(ranks_hit, kind="stable")
    hit, ranks_hit = hit[order], ranks_hit[order].astype(float)
    if not hit.size:
        return ranks_hit, np.zeros((1, 0)), np.zeros((counts.shape[0], 0))
    w = num_terms[hit, i]
    ranks_hit, starts = np.unique(ranks_hit, return_index=True)
    cum_point = np.cumsum(np.add.reduceat(w, starts))[None, :]
    cum_reps = np.cumsum(np.add.reduceat(counts[:, hit] * w[None, :], starts, axis=1), axis=1)
    return ranks_hit, cum_point, cum_reps


def precision_at_target(
    data: SampleData,
    outputs: pd.DataFrame,
    counts: np.ndarray,
    num_terms: np.ndarray,
    universe_point: float,
    universe_reps: np.ndarray,
    recall_point: np.ndarray,
    recall_reps: np.ndarray,
    precision_point: np.ndarray,
    precision_reps: np.ndarray,
    target: float,
    universe_size: int | None,
    *,
    prevalence: float | None = None,
    level: float = 0.95,
    max_recall_distance: float = 0.10,
) -> TargetResult:
    """Precision at recall ``target`` for every system (see the module docstring).

    ``counts`` are the draws stage's replicate counts (B × K); ``num_terms`` the pooled-recall
    numerator terms (K × m), f/(N q0) on each system's facts; ``universe_*`` 𝒴̂ (point, (B,)).
    ``prevalence`` fixes ρ (else ρ = 𝒴̂ / ``universe_size`` in each replicate).
    """
    m = data.m
    B = counts.shape[0]
    point = np.full(m, np.nan)
    reps = np.full((B, m), np.nan)
    methods = [""] * m
    notes: list[list[str]] = [[] for _ in range(m)]
    flags: list[list[str]] = [[] for _ in range(m)]
    details: dict[str, dict] = {}
    curves: dict[str, pd.DataFrame] = {}
    draw_x = data.facts[data.draw_fact]
    alpha = (1 - level) / 2
    rho_point, rho_reps = _prevalence_estimate(
        prevalence, universe_point, universe_reps, universe_size, B
    )
    inputs = _TargetInputs(
        universe_point,
        universe_reps,
        rho_point,
        rho_reps,
        prevalence is not None or bool(universe_size),
        (recall_point, precision_point, recall_reps, precision_reps),
        target,
        level,
        max_recall_distance,
    )
    for i, system in enumerate(data.systems):
        problem = score_ranking_problem(outputs, system)
        if problem is not None:
            details[system] = _refused(problem, notes[i], flags[i])
            details[system].update(
                recall=float(recall_point[i]), precision=float(precision_point[i])
            )
            continue
        _note_unscored(outputs, system, notes[i])
        curve = _yield_curve(data, outputs, system, i, counts, num_terms, draw_x)
        point[i], reps[:, i], methods[i], details[system] = _system_at_target(
            inputs, i, curve, notes[i], flags[i]
        )
        # the curve for reports: thinned to at most MAX_CURVE_POINTS knots
        if curve[0].size:
            curves[system] = _report_curve(curve, int(data.sizes[i]), alpha, universe_point)
    return TargetResult(point, reps, methods, notes, flags, details, curves, float(rho_point))


def _prevalence_estimate(
    prevalence: float | None,
    universe_point: float,
    universe_reps: np.ndarray,
    universe_size: int | None,
    B: int,
) -> tuple[float, np.ndarray]:
    """ρ (point, (B,)): ``prevalence`` when given, else 𝒴̂ / ``universe_size`` (NaN without one)."""
    if prevalence is not None:
        return float(prevalence), np.full(B, float(prevalence))
    rho_point = universe_point / universe_size if universe_size else np.nan
    rho_reps = universe_reps / universe_size if universe_size else np.full(B, np.nan)
    return rho_point, rho_reps


@dataclass(frozen=True)
class _TargetInputs:
    """What :func:`precision_at_target` shares between systems.  ``rp`` is (recall point,
    precision point, recall replicates, precision replicates), per system."""

    universe_point: float
    universe_reps: np.ndarray
    rho_point: float
    rho_reps: np.ndarray
    has_rho: bool
    rp: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    target: float
    level: float
    max_recall_distance: float


def _note_unscored(outputs: pd.DataFrame, system: str, notes: list[str]) -> None:
    """Note the system's outputs without a score (ranked last in input order)."""
    unscored = int(outputs.loc[outputs["system"] == system, "score"].isna().sum())
    if unscored:
        notes.append(
            f"precision_at_target: {unscored} outputs have no score; they are ranked after the "
            "scored ones in input order, so the curve over them is arbitrary"
        )


def _system_at_target(
    inputs: _TargetInputs,
    i: int,
    curve: tuple[np.ndarray, np.ndarray, np.ndarray],
    notes: list[str],
    flags: list[str],
) -> tuple[float, np.ndarray, str, dict]:
    """(point, replicates, method, details) of system i's precision at the target recall: the
    curve where it reaches the target, else Dimm's extrapolation (notes and flags appended)."""
    recall_point, precision_point, recall_reps, precision_reps = inputs.rp
    target = inputs.target
    ranks_hit, cum_point, cum_reps = curve
    goal_point = np.array([target * inputs.universe_point])
    goal_reps = target * inputs.universe_reps
    k_point = _crossing(ranks_hit, cum_point, goal_point)[0]
    k_reps = _crossing(ranks_hit, cum_reps, goal_reps)
    curve_ok_reps = np.isfinite(k_reps)
    with np.errstate(invalid="ignore", divide="ignore"):
        curve_reps = np.where(curve_ok_reps, goal_reps / k_reps, np.nan)
    # Dimm for the replicates (and the point) whose curve does not reach the target
    ext_p = extrapolated_precision(
        precision_point[i],
        recall_point[i],
        inputs.rho_point,
        target,
        max_recall_distance=inputs.max_recall_distance,
    )
    ext_r = extrapolated_precision(
        precision_reps[:, i],
        recall_reps[:, i],
        inputs.rho_reps,
        target,
        max_recall_distance=inputs.max_recall_distance,
    )
    reps_i = np.where(curve_ok_reps, curve_reps, ext_r.precision_at_target)
    info: dict = {
        "recall": float(recall_point[i]),
        "precision": float(precision_point[i]),
        "short_of_target": float(1 - curve_ok_reps.mean()),
    }
    if np.isfinite(k_point):
        point_i = goal_point[0] / k_point
        method = "curve"
        info.update(
            {
                "method": "curve",
                "rank_at_target": float(k_point),
                "draws_at_target": _draws_to(ranks_hit, cum_point[0], k_point),
            }
        )
        if point_i > 1:
            flags.append(ABOVE_ONE_FLAG)
            notes.append(
                f"precision_at_target: flagged: the estimate {point_i:.3f} {ABOVE_ONE_FLAG}"
            )
    else:
        method = "dimm"
        point_i = float(ext_p.precision_at_target)
        info.update(
            {"method": "dimm", "beta": float(ext_p.beta), "prevalence": float(inputs.rho_point)}
        )
        _check_dimm(inputs, i, point_i, ext_p, curve, info, notes, flags)
    info["flags"] = flags
    return point_i, reps_i, method, info


def _draws_to(ranks_hit: np.ndarray, cum_point: np.ndarray, k: float) -> float:
    """Kish's effective number of the judged-correct draws Ĉ(k) rests on (the knots up to and
    including the one where Ĉ reaches the goal; :func:`receval.estimators.reliability.kish`)."""
    from receval.estimators.reliability import kish

    upto = int(np.searchsorted(ranks_hit, k, side="left")) + 1
    return round(float(kish(np.diff(cum_point[:upto], prepend=0.0))), 2)


def _check_dimm(
    inputs: _TargetInputs,
    i: int,
    point_i: float,
    ext_p,
    curve: tuple[np.ndarray, np.ndarray, np.ndarray],
    info: dict,
    notes: list[str],
    flags: list[str],
) -> None:
    """Notes and flags of a Dimm extrapolation at the point: no prevalence, refused, or a model
    extrapolation with its forward backtest."""
    recall_point, precision_point, recall_reps, precision_reps = inputs.rp
    target = inputs.target
    if not inputs.has_rho:
        notes.append(
            f"precision_at_target: the list ends at recall {recall_point[i]:.3f} < {target:g} and "
            "Dimm's extrapolation needs the prevalence: set [universe] size in task.toml or --prevalence"
        )
    elif not np.isfinite(point_i):
        notes.append(
            "precision_at_target: "
            + refusal_message(
                int(ext_p.refusal), precision_point[i], recall_point[i], inputs.rho_point, target
            )
        )
    else:
        flags.append("model extrapolation (Dimm 2015)")
        if bool(ext_p.far):
            flags.append(
                recall_distance_flag(float(ext_p.recall_distance), inputs.max_recall_distance)
            )
        ranks_hit, cum_point, cum_reps = curve
        bt = forward_backtest(
            ranks_hit,
            cum_point[0],
            cum_reps,
            (inputs.universe_point, inputs.universe_reps),
            (inputs.rho_point, inputs.rho_reps),
            (recall_point[i], precision_point[i], recall_reps[:, i], precision_reps[:, i]),
            target - float(recall_point[i]),
            inputs.level,
        )
        info.update(bt)
        excess = bt["backtest_max_dev"]
        if excess is not None and excess > BACKTEST_LIMIT:
            flags.append(_poor_fit(float(excess)))
            notes.append(POOR_FIT_NOTE)


def _report_curve(
    curve: tuple[np.ndarray, np.ndarray, np.ndarray],
    size: int,
    alpha: float,
    universe_point: float,
) -> pd.DataFrame:
    """The precision curve for reports, thinned to at most MAX_CURVE_POINTS knots."""
    ranks_hit, cum_point, cum_reps = curve
    keep = np.unique(
        np.linspace(0, ranks_hit.size - 1, min(ranks_hit.size, MAX_CURVE_POINTS))
        .round()
        .astype(int)
    )
    # knots at the drawn ranks, and the end of the list (Ĉ stays flat after the last
    # drawn rank, so p falls to Ĉ(N)/N there: the system's precision estimate)
    knot_ranks = ranks_hit[keep]
    knot_cum_p = cum_point[0, keep]
    knot_cum_r = cum_reps[:, keep]
    queried = np.ones(keep.size, np.int64)
    if knot_ranks[-1] < size:
        knot_ranks = np.append(knot_ranks, size)
        knot_cum_p = np.append(knot_cum_p, cum_point[0, -1])
        knot_cum_r = np.column_stack([knot_cum_r, cum_reps[:, -1]])
        queried = np.append(queried, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec_p = knot_cum_p / knot_ranks
        prec_r = knot_cum_r / knot_ranks[None, :]
    lo, hi = np.quantile(prec_r, [alpha, 1 - alpha], axis=0)  # ranks ≥ 1: no NaN here
    return pd.DataFrame(
        {
            "rank": knot_ranks.astype(np.int64),
            "precision": np.minimum(prec_p, 1.0),
            "lower": np.clip(lo, 0.0, 1.0),
            "upper": np.clip(hi, 0.0, 1.0),
            "recall": knot_cum_p / universe_point if universe_point > 0 else np.nan,
            "queried": queried,
        }
    )
