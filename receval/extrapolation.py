"""Dimm's extrapolated precision: precision at a target recall from one (recall, precision) point.

Dimm (2015), "Information Retrieval Performance Measurement Using Extrapolated Precision", builds a
one-parameter family of reference precision-recall curves X(R; ρ, β) from a model of the
probability x(R; ρ, β) that the document found at recall R is relevant. Exactly one curve of the
family passes through each point (R, P) with P above the family's floor; moving along that curve to
a target recall R_T gives the *extrapolated precision* X(R_T). The result is a **model
extrapolation**: it is exact only for a system whose precision-recall curve has the family's shape,
and it is neither unbiased nor a bound. :func:`backtest` measures how far a real curve strays from
the family, so that a report can show when the model should not be trusted.

Everything here is vectorised over NumPy arrays (broadcasting ``precision``, ``recall``,
``prevalence``, ``target`` and ``beta``), so a bootstrap can fit every system in every replicate in
one call. :func:`extrapolate_point` is the one-point wrapper the command line uses.

Equations implemented (numbers as in the paper), with k = (1 − ρ)/ρ, a = arctan β,
L = ln(1 + β²) / (2 β a) and u = 1 − R:

* eq. (10)  x(R) = (1 + β²u²) / (1 + β²u² + k (β/a) (R + L))
* eq. (11)  X(R) = R / (R + k B(R)),
  B(R) = 1 − arctan(βu)/a · (1 + L) + ln(1 + β²u²) / (2 β a)
* eq. (12)  X(R; ρ, β) = P, solved for β with a bracketing root finder.

Eq. (11) as printed cancels catastrophically near R = 0 (both R and B vanish) and for large β
(arctan(βu)/a → 1). We evaluate B in the algebraically equal form

    B(R) = arctan(βR / (1 + β²u)) / a · (1 + L) + [ln(1 + β²u²) − ln(1 + β²)] / (2 β a),

with the logarithm difference taken as ``log1p(−β² R (2 − R) / (1 + β²))`` for R ≤ 1/2, and use the
limit X(0) = x(0) at R = 0. β is treated as its limit outside [1e-150, 1e150].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "BETA_MAX",
    "BETA_MIN",
    "DEFAULT_BACKTEST_DISTANCES",
    "DEFAULT_MAX_RECALL_DISTANCE",
    "MAX_MEASURED",
    "Backtest",
    "BetaFit",
    "Extrapolation",
    "ExtrapolationRefused",
    "ExtrapolationResult",
    "Refusal",
    "backtest",
    "extrapolate_point",
    "extrapolated_precision",
    "fit_beta",
    "recall_distance_flag",
    "reference_precision",
    "reference_probability",
    "refusal_message",
    "validity_floor",
]

#: Measured precision or recall at or above this is refused (Dimm, after eq. 12: near 1 the
#: reference curves crowd together, so one point says almost nothing about other recalls).
MAX_MEASURED = 0.99

#: Default "large recall distance": extrapolations over a longer recall distance |R_T − R| are
#: flagged. Dimm checks accuracy only over 0.05 (Fig. 9); ``bench/extrapolation.py`` repeats that
#: check at 0.05, 0.10 and 0.15. On simulated binormal lists the mean |X − P| is about 0.01 at
#: 0.05, 0.02 at 0.10 and 0.027 at 0.15 (roughly a third of the error of treating precision as
#: constant); on the ParaBank lists (short, flat curves) X is no better than constant precision
#: even at 0.05. At 0.10 the model error alone is already of the order of a typical precision
#: confidence half-width, so beyond it the number is a model guess rather than a measurement.
DEFAULT_MAX_RECALL_DISTANCE = 0.10

#: Signed recall offsets at which :func:`backtest` reports the model's deviation by default.
DEFAULT_BACKTEST_DISTANCES: tuple[float, ...] = (-0.15, -0.10, -0.05, 0.05, 0.10, 0.15)

#: Bracket of the β fit. X(R; ρ, BETA_MIN) is within about 1e-12 of the floor (X − floor is of
#: order β²), so a point between the floor and that curve gets β = BETA_MIN; a point above
#: X(R; ρ, BETA_MAX) is refused (it needs a prevalence below about 1e-8 to happen with P, R < 0.99).
BETA_MIN = 1e-6
BETA_MAX = 1e12

_BETA_CLAMP = (1e-150, 1e150)


class Refusal(IntEnum):
    """Why a point cannot be extrapolated (0 means it can)."""

    NONE = 0
    INVALID_INPUT = 1
    RECALL_TOO_HIGH = 2
    PRECISION_TOO_HIGH = 3
    AT_OR_BELOW_FLOOR = 4
    ABOVE_FAMILY = 5


class ExtrapolationRefused(ValueError):
    """The point lies outside the validity of Dimm's model; ``str(error)`` is one sentence."""

    def __init__(self, reason: Refusal, message: str) -> None:
        self.reason = Refusal(reason)
        self.message = message
        super().__init__(message)


# --------------------------------------------------------------------------- the model curves


def _as_float(*values: ArrayLike) -> list[np.ndarray]:
    return [np.asarray(v, dtype=np.float64) for v in values]


def _model_constants(
    prevalence: np.ndarray, beta: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """k = (1 − ρ)/ρ, the clamped β, a = arctan β and L = ln(1 + β²)/(2 β a) (ρ = 0 gives
    k = inf: the caller refuses that point, so numpy's warning would only be noise)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        k = (1.0 - prevalence) / prevalence
    b = np.clip(beta, *_BETA_CLAMP)
    a = np.arctan(b)
    half_log = np.log1p(b * b) / (2.0 * b * a)
    return k, b, a, half_log


def validity_floor(recall: ArrayLike, prevalence: ArrayLike) -> np.ndarray:
    """The lowest precision any reference curve reaches at ``recall``: 2ρ / (1 + ρ + R(1 − ρ)).

    This is the β → 0 limit of eq. (11) of Dimm (2015); X(R; ρ, β) rises strictly from it towards 1
    as β grows, so a measured precision at or below it cannot be fitted (it is exact, not an
    estimate). It equals ρ at R = 1 and 2ρ/(1 + ρ) at R = 0.
    """
    r, rho = _as_float(recall, prevalence)
    return 2.0 * rho / (1.0 + rho + r * (1.0 - rho))


def reference_probability(recall: ArrayLike, prevalence: ArrayLike, beta: ArrayLike) -> np.ndarray:
    """Dimm's model probability x(R; ρ, β) that the document found at recall R is relevant, eq. (10).

    A model quantity, not an estimate. Strictly decreasing in R from x(0) to
    x(1) = 1 / (1 + k (β/a)(1 + L)); normalised so that ∫₀¹ dR / x = 1/ρ (eq. 5). Arrays broadcast.
    """
    r, rho, beta_ = _as_float(recall, prevalence, beta)
    k, b, a, half_log = _model_constants(rho, beta_)
    u = 1.0 - r
    return 1.0 / (1.0 + k * (b / a) * (r + half_log) / (1.0 + (b * u) ** 2))


def reference_precision(recall: ArrayLike, prevalence: ArrayLike, beta: ArrayLike) -> np.ndarray:
    """Dimm's reference precision curve X(R; ρ, β), eq. (11), computed without cancellation.

    X is the precision (eq. 4) implied by the model probability x of eq. (10): X(1) = ρ,
    X(0) = x(0), strictly decreasing in R and strictly increasing in β between
    :func:`validity_floor` (β → 0) and 1 (β → ∞). A model curve, not an estimate. Arrays broadcast;
    relative accuracy is a few ulps for β in [1e-3, 1e4] and R in [0, 1] (tested against
    numerical integration of eq. 4).
    """
    r, rho, beta_ = _as_float(recall, prevalence, beta)
    k, b, a, half_log = _model_constants(rho, beta_)
    u = 1.0 - r
    b2 = b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        # 1 − arctan(βu)/arctan(β), as one arctan (both arguments are ≥ 0).
        rise = np.arctan(b * r / (1.0 + b2 * u)) / a
        # ln(1 + β²u²) − ln(1 + β²): log1p of a small argument for small R, a plain difference
        # of logarithms (no cancellation there) for large R.
        low = np.log1p(-(b2 / (1.0 + b2)) * r * (2.0 - r))
        high = np.log1p(b2 * u * u) - np.log1p(b2)
        log_ratio = np.where(r <= 0.5, low, high)
        brace = rise * (1.0 + half_log) + log_ratio / (2.0 * b * a)
        x = r / (r + k * brace)
    at_zero = 1.0 / (1.0 + k * np.log1p(b2) / (2.0 * a * a * (1.0 + b2)))
    return np.where(r == 0.0, at_zero, x)


# --------------------------------------------------------------------------- fitting β (eq. 12)


@dataclass(frozen=True)
class BetaFit:
    """β of the reference curve through each point (eq. 12 of Dimm 2015).

    ``beta`` is NaN where the point was refused; ``refusal`` holds the :class:`Refusal` code of
    each point (0 where fitted). Both have the broadcast shape of the inputs.
    """

    beta: np.ndarray
    refusal: np.ndarray

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of fitted points."""
        return self.refusal == Refusal.NONE


def _refusals(precision: np.ndarray, recall: np.ndarray, prevalence: np.ndarray) -> np.ndarray:
    """Refusal codes for the checks that need no fit (the first failing check wins)."""
    with np.errstate(invalid="ignore"):
        invalid = ~(
            np.isfinite(precision)
            & np.isfinite(recall)
            & np.isfinite(prevalence)
            & (precision > 0.0)
            & (precision <= 1.0)
            & (recall > 0.0)
            & (recall <= 1.0)
            & (prevalence > 0.0)
            & (prevalence < 1.0)
        )
        codes = np.select(
            [
                invalid,
                recall >= MAX_MEASURED,
                precision >= MAX_MEASURED,
                precision <= validity_floor(recall, prevalence),
            ],
            [
                Refusal.INVALID_INPUT,
                Refusal.RECALL_TOO_HIGH,
                Refusal.PRECISION_TOO_HIGH,
                Refusal.AT_OR_BELOW_FLOOR,
            ],
            Refusal.NONE,
        )
    return codes.astype(np.int8)


def _log_beta_residual(
    log_beta: np.ndarray, precision: np.ndarray, recall: np.ndarray, prevalence: np.ndarray
) -> np.ndarray:
    return reference_precision(recall, prevalence, np.exp(log_beta)) - precision


def fit_beta(precision: ArrayLike, recall: ArrayLike, prevalence: ArrayLike) -> BetaFit:
    """β such that X(R; ρ, β) = P, eq. (12) of Dimm (2015), for arrays of points.

    Solved in log β with SciPy's vectorised bracketing root finder (Chandrupatla's method,
    ``scipy.optimize.elementwise.find_root``) on [``BETA_MIN``, ``BETA_MAX``], which is valid
    because X is continuous and strictly increasing in β. Converges to full double precision, so
    X(R; ρ, β̂) reproduces P to about 1e-15. Refused points (see :class:`Refusal`): invalid input;
    R or P ≥ ``MAX_MEASURED``; P at or below :func:`validity_floor`; P above X(R; ρ, BETA_MAX).
    A point between the floor and X(R; ρ, BETA_MIN) (within ~1e-12 of the floor) gets
    β = BETA_MIN.

    Parameters
    ----------
    precision, recall, prevalence : array_like
        Measured precision P and recall R, and the prevalence ρ of relevant items in the universe
        the recall refers to; broadcast together.

    Returns
    -------
    BetaFit
        ``beta`` (NaN where refused) and ``refusal`` codes, in the broadcast shape.

    References
    ----------
    W. C. Dimm (2015), Information Retrieval Performance Measurement Using Extrapolated
    Precision, eqs. (11) and (12).
    """
    from scipy.optimize.elementwise import find_root

    p, r, rho = np.broadcast_arrays(*_as_float(precision, recall, prevalence))
    codes = _refusals(p, r, rho)
    beta = np.full(p.shape, np.nan)
    todo = codes == Refusal.NONE
    if np.any(todo):
        pt, rt, rhot = p[todo], r[todo], rho[todo]
        lo, hi = math.log(BETA_MIN), math.log(BETA_MAX)
        f_lo = reference_precision(rt, rhot, BETA_MIN) - pt
        f_hi = reference_precision(rt, rhot, BETA_MAX) - pt
        fitted = np.full(pt.shape, np.nan)
        fitted[f_lo >= 0.0] = BETA_MIN
        fitted[f_hi == 0.0] = BETA_MAX
        above = f_hi < 0.0
        solve = (f_lo < 0.0) & (f_hi > 0.0)
        if np.any(solve):
            res = find_root(
                _log_beta_residual,
                (np.full(int(solve.sum()), lo), np.full(int(solve.sum()), hi)),
                args=(pt[solve], rt[solve], rhot[solve]),
            )
            if not np.all(res.success):  # pragma: no cover - a valid bracket always converges
                raise RuntimeError("the β root finder did not converge")
            fitted[solve] = np.exp(res.x)
        sub_codes = np.where(above, Refusal.ABOVE_FAMILY, Refusal.NONE).astype(np.int8)
        fitted[above] = np.nan
        beta[todo] = fitted
        codes[todo] = sub_codes
    return BetaFit(beta=beta, refusal=codes)


# --------------------------------------------------------------------------- extrapolation


@dataclass(frozen=True)
class Extrapolation:
    """Extrapolated precision X(R_T; ρ, β̂) for arrays of points (a model extrapolation).

    ``precision_at_target`` and ``beta`` are NaN where ``refusal`` is non-zero. ``far`` marks
    fitted points with ``recall_distance`` = |R_T − R| above ``max_recall_distance``.
    """

    beta: np.ndarray
    precision_at_target: np.ndarray
    refusal: np.ndarray
    recall_distance: np.ndarray
    far: np.ndarray
    max_recall_distance: float

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of extrapolated points."""
        return self.refusal == Refusal.NONE


def extrapolated_precision(
    precision: ArrayLike,
    recall: ArrayLike,
    prevalence: ArrayLike,
    target: ArrayLike,
    *,
    max_recall_distance: float = DEFAULT_MAX_RECALL_DISTANCE,
) -> Extrapolation:
    """Dimm's extrapolated precision at target recall R_T for arrays of (P, R, ρ) points.

    Fits β through (R, P) by eq. (12) (:func:`fit_beta`) and evaluates eq. (11) at R_T. This is a
    **model extrapolation**, exact only for curves of Dimm's family; X(R_T) = P when R_T = R.
    A target outside [0, 1] is refused as invalid input. Arrays broadcast; the cost is a few
    dozen vectorised evaluations of eq. (11), so 70,000 points take well under a second.

    Parameters
    ----------
    precision, recall, prevalence, target : array_like
        Measured P and R, prevalence ρ and target recall R_T; broadcast together.
    max_recall_distance : float
        |R_T − R| above which a point is marked ``far`` (see ``DEFAULT_MAX_RECALL_DISTANCE``).

    Returns
    -------
    Extrapolation
        Arrays in the broadcast shape: ``beta``, ``precision_at_target`` (NaN where refused),
        ``refusal``, ``recall_distance`` and ``far``.
    """
    p, r, rho, t = np.broadcast_arrays(*_as_float(precision, recall, prevalence, target))
    fit = fit_beta(p, r, rho)
    refusal = fit.refusal.copy()
    bad_target = ~(np.isfinite(t) & (t >= 0.0) & (t <= 1.0))
    refusal[bad_target & (refusal == Refusal.NONE)] = Refusal.INVALID_INPUT
    ok = refusal == Refusal.NONE
    beta = np.where(ok, fit.beta, np.nan)
    with np.errstate(invalid="ignore"):
        at_target = np.where(ok, reference_precision(np.where(ok, t, 0.5), rho, beta), np.nan)
        distance = np.abs(t - r)
    far = ok & (distance > max_recall_distance)
    return Extrapolation(
        beta=beta,
        precision_at_target=at_target,
        refusal=refusal,
        recall_distance=distance,
        far=far,
        max_recall_distance=float(max_recall_distance),
    )


def recall_distance_flag(distance: float, max_recall_distance: float) -> str:
    """The flag text for an extrapolation over a large recall distance.

    Two decimals, or as many more (up to six) as it takes to print the distance above the threshold.
    """
    digits = next((d for d in range(2, 7) if round(distance, d) > max_recall_distance), 6)
    return f"extrapolated over recall distance {distance:.{digits}f} (> {max_recall_distance:.2f})"


def refusal_message(
    reason: Refusal | int,
    precision: float,
    recall: float,
    prevalence: float,
    target: float | None = None,
) -> str:
    """One sentence saying why the point (R, P) with prevalence ρ cannot be extrapolated."""
    reason = Refusal(int(reason))
    point = f"precision {precision:.4g} at recall {recall:.4g}"
    if reason == Refusal.INVALID_INPUT:
        return (
            "need finite 0 < precision <= 1, 0 < recall <= 1, 0 < prevalence < 1 and "
            f"0 <= target <= 1 (got precision {precision:g}, recall {recall:g}, "
            f"prevalence {prevalence:g}, target {target if target is not None else 'none'})."
        )
    if reason == Refusal.RECALL_TOO_HIGH:
        return (
            f"recall {recall:.4g} is at or above {MAX_MEASURED}, where Dimm's reference curves "
            "crowd together and one point says almost nothing about precision at other recalls."
        )
    if reason == Refusal.PRECISION_TOO_HIGH:
        return (
            f"precision {precision:.4g} is at or above {MAX_MEASURED}, where Dimm's reference "
            "curves crowd together and one point says almost nothing about other recalls."
        )
    if reason == Refusal.AT_OR_BELOW_FLOOR:
        floor = float(validity_floor(recall, prevalence))
        return (
            f"{point} is at or below {floor:.4g}, the lowest precision of any of Dimm's reference "
            f"curves there (2ρ/(1+ρ+R(1−ρ)) with prevalence ρ = {prevalence:.4g}), "
            "so no curve of the model passes through the point."
        )
    if reason == Refusal.ABOVE_FAMILY:
        return (
            f"{point} lies above every reference curve with β <= {BETA_MAX:g} for prevalence "
            f"{prevalence:.4g}, so β cannot be fitted."
        )
    raise ValueError("Refusal.NONE is not a refusal")


@dataclass(frozen=True)
class ExtrapolationResult:
    """One extrapolated point: β of the reference curve, X(R_T) (a model extrapolation), flags.

    ``flags`` is empty when nothing is worth a warning; otherwise each entry is one sentence
    (currently only :func:`recall_distance_flag`).
    """

    beta: float
    precision_at_target: float
    flags: tuple[str, ...]
    precision: float
    recall: float
    prevalence: float
    target: float
    recall_distance: float

    def to_dict(self) -> dict[str, object]:
        """The JSON object of ``receval extrapolate --json`` (keys ``beta``,
        ``precision_at_target``, ``flags`` first, then the inputs)."""
        return {
            "beta": self.beta,
            "precision_at_target": self.precision_at_target,
            "flags": list(self.flags),
            "precision": self.precision,
            "recall": self.recall,
            "prevalence": self.prevalence,
            "target": self.target,
            "recall_distance": self.recall_distance,
            "method": "dimm",
            "kind": "model extrapolation",
        }


def extrapolate_point(
    precision: float,
    recall: float,
    prevalence: float,
    target: float,
    *,
    max_recall_distance: float = DEFAULT_MAX_RECALL_DISTANCE,
) -> ExtrapolationResult:
    """Dimm's extrapolated precision X(R_T) for one measured point (eqs. 11 and 12).

    A **model extrapolation**, not an estimate with known error. Raises
    :class:`ExtrapolationRefused` (a ``ValueError``) with a one-sentence reason when the point is
    outside the model's validity (see :class:`Refusal`). Flags an extrapolation over a recall
    distance above ``max_recall_distance``.

    Parameters
    ----------
    precision, recall, prevalence, target : float
        Measured P and R, prevalence ρ and target recall R_T.
    max_recall_distance : float
        Flag the result when |R_T − R| exceeds this (default ``DEFAULT_MAX_RECALL_DISTANCE``).

    Returns
    -------
    ExtrapolationResult
        β, X(R_T) and a tuple of flag sentences (empty when none).

    Raises
    ------
    ExtrapolationRefused
        When the point is outside the model's validity; ``str(error)`` is the reason.
    """
    values = [float(v) for v in (precision, recall, prevalence, target)]
    res = extrapolated_precision(*values, max_recall_distance=max_recall_distance)
    code = int(res.refusal)
    if code != Refusal.NONE:
        raise ExtrapolationRefused(Refusal(code), refusal_message(code, *values))
    distance = float(res.recall_distance)
    flags = (recall_distance_flag(distance, max_recall_distance),) if bool(res.far) else ()
    return ExtrapolationResult(
        beta=float(res.beta),
        precision_at_target=float(res.precision_at_target),
        flags=flags,
        precision=values[0],
        recall=values[1],
        prevalence=values[2],
        target=values[3],
        recall_distance=distance,
    )


# --------------------------------------------------------------------------- backtest


@dataclass(frozen=True)
class Backtest:
    """How far the reference curve through one point of a known curve strays from its other points.

    ``deviation`` = X(R_i; ρ, β̂) − P_i for the other points (positive: the model over-predicts
    precision there), in order of recall; ``max_abs_deviation`` and ``rms_deviation`` summarise
    the points within ``window`` of the anchor (all other points when ``window`` is None; NaN when
    none). ``deviation_at_distance[j]`` is the signed deviation at recall
    ``anchor_recall + distances[j]``, the curve's precision there interpolated linearly in recall
    between its points (NaN outside the curve's recall range).
    """

    anchor_recall: float
    anchor_precision: float
    prevalence: float
    beta: float
    recall: np.ndarray
    precision: np.ndarray
    deviation: np.ndarray
    max_abs_deviation: float
    rms_deviation: float
    window: float | None
    distances: tuple[float, ...]
    deviation_at_distance: np.ndarray

    def to_dict(self) -> dict[str, object]:
        """A JSON-friendly summary (no per-point arrays)."""
        return {
            "anchor_recall": self.anchor_recall,
            "anchor_precision": self.anchor_precision,
            "prevalence": self.prevalence,
            "beta": self.beta,
            "points": int(self.recall.size),
            "max_abs_deviation": self.max_abs_deviation,
            "rms_deviation": self.rms_deviation,
            "window": self.window,
            "deviation_at_distance": {
                f"{d:+.2f}": (None if np.isnan(v) else float(v))
                for d, v in zip(self.distances, self.deviation_at_distance, strict=True)
            },
        }


def backtest(
    recall_points: ArrayLike,
    precision_points: ArrayLike,
    prevalence: float,
    *,
    anchor_index: int | None = None,
    anchor_recall: float | None = None,
    distances: tuple[float, ...] = DEFAULT_BACKTEST_DISTANCES,
    window: float | None = None,
) -> Backtest:
    """Backtest Dimm's model on a known (e.g. estimated) precision-recall curve.

    Fits β through one anchor point of the curve (eq. 12) — ``anchor_index`` into the given arrays,
    or the point whose recall is nearest ``anchor_recall`` (the first on ties) — and compares the
    reference curve X(R; ρ, β̂) (eq. 11) with the curve's other points. This measures how well
    the model describes this particular curve; it is a diagnostic, not an error bound (an estimated
    curve carries its own sampling error). Raises :class:`ExtrapolationRefused` when the anchor
    point cannot be fitted and ``ValueError`` on malformed input.

    Parameters
    ----------
    recall_points, precision_points : array_like
        The known curve: 1-d, equal length, at least two points (any order).
    prevalence : float
        ρ of the universe the recalls refer to (the curve's precision at recall 1).
    anchor_index, anchor_recall : int or float, keyword-only
        Exactly one: the point the reference curve is fitted through.
    distances : tuple of float
        Signed recall offsets from the anchor at which to report the deviation.
    window : float or None
        Summarise (max |deviation|, RMS) only the points within this recall distance of the
        anchor; None uses every other point.

    Returns
    -------
    Backtest
        β, the other points with their signed deviations X − P, the summaries and the deviations
        at ``distances``.
    """
    r = np.asarray(recall_points, dtype=np.float64)
    p = np.asarray(precision_points, dtype=np.float64)
    if r.ndim != 1 or r.shape != p.shape or r.size < 2:
        raise ValueError("recall_points and precision_points must be 1-d, equal length, >= 2")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(p))):
        raise ValueError("recall_points and precision_points must be finite")
    if (anchor_index is None) == (anchor_recall is None):
        raise ValueError("give exactly one of anchor_index and anchor_recall")
    if anchor_index is None:
        anchor_index = int(np.argmin(np.abs(r - float(anchor_recall))))
    if not -r.size <= anchor_index < r.size:
        raise ValueError(f"anchor_index {anchor_index} is out of range for {r.size} points")
    anchor_index %= r.size
    r0, p0 = float(r[anchor_index]), float(p[anchor_index])
    fit = fit_beta(p0, r0, prevalence)
    code = int(fit.refusal)
    if code != Refusal.NONE:
        raise ExtrapolationRefused(Refusal(code), refusal_message(code, p0, r0, float(prevalence)))
    beta = float(fit.beta)

    others = np.ones(r.size, dtype=bool)
    others[anchor_index] = False
    order = np.argsort(r[others], kind="stable")
    r_other, p_other = r[others][order], p[others][order]
    deviation = reference_precision(r_other, prevalence, beta) - p_other
    inside = np.ones(r_other.size, dtype=bool) if window is None else np.abs(r_other - r0) <= window
    if np.any(inside):
        max_abs = float(np.max(np.abs(deviation[inside])))
        rms = float(np.sqrt(np.mean(deviation[inside] ** 2)))
    else:
        max_abs = rms = math.nan

    order_all = np.argsort(r, kind="stable")
    r_sorted, p_sorted = r[order_all], p[order_all]
    at = r0 + np.asarray(distances, dtype=np.float64)
    covered = (at >= r_sorted[0]) & (at <= r_sorted[-1])
    curve_at = np.interp(at, r_sorted, p_sorted)
    model_at = reference_precision(np.clip(at, 0.0, 1.0), prevalence, beta)
    at_distance = np.where(covered, model_at - curve_at, np.nan)
    return Backtest(
        anchor_recall=r0,
        anchor_precision=p0,
        prevalence=float(prevalence),
        beta=beta,
        recall=r_other,
        precision=p_other,
        deviation=deviation,
        max_abs_deviation=max_abs,
        rms_deviation=rms,
        window=window,
        distances=tuple(float(d) for d in distances),
        deviation_at_distance=at_distance,
    )
