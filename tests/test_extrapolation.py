"""Tests of Dimm's reference curves, the β fit and extrapolated precision (Dimm 2015).

Tolerances, and why:

* Quadrature checks use ``scipy.integrate.quad`` with ``epsrel=1e-12``; eq. (11) as implemented
  has a rounding error of a few ulps (no cancellation), so 1e-10 relative leaves two orders of
  magnitude for both, while any algebra slip (e.g. a wrong c1 as in the paper's Fig. 4) moves the
  result by percent.
* Eq. (3) is checked in integrated form by quadrature (no numerical differentiation, whose
  convergence at 1e-10 depends on the platform's rounding) and allows 1e-9.
* The β fit runs to full double precision, so the brief's 1e-9 round trip is a loose bound.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad

from receval.extrapolation import (
    BETA_MAX,
    BETA_MIN,
    DEFAULT_MAX_RECALL_DISTANCE,
    MAX_MEASURED,
    ExtrapolationRefused,
    ExtrapolationResult,
    Refusal,
    backtest,
    extrapolate_point,
    extrapolated_precision,
    fit_beta,
    reference_precision,
    reference_probability,
    validity_floor,
)

PREVALENCES = (0.001, 0.03, 0.3, 0.9)
BETAS = tuple(np.logspace(-3, 4, 8))
RECALLS = (0.0, 1e-12, 1e-6, 1e-3, 0.1, 0.5, 0.75, 0.9, 0.999, 1.0)


def inverse_probability_integral(r_from: float, r_to: float, rho: float, beta: float) -> float:
    """∫ dr / x(r) by adaptive quadrature; 1/x has a peak of width ~1/β just below r = 1."""
    if r_to <= r_from:
        return 0.0
    peak = 1.0 - 1.0 / beta
    points = [peak] if r_from < peak < r_to else None
    value, _ = quad(
        lambda r: 1.0 / float(reference_probability(r, rho, beta)),
        r_from,
        r_to,
        epsabs=0.0,
        epsrel=1e-12,
        limit=200,
        points=points,
    )
    return value


def recall_over_precision(r: np.ndarray, rho: float, beta: float) -> np.ndarray:
    """R / X(R): by eq. (4) the number retrieved per relevant document in the population."""
    return r / reference_precision(r, rho, beta)


def printed_eq11(r: float, rho: float, beta: float) -> float:
    """Eq. (11) exactly as printed in the paper (fine away from R = 0 and for moderate β)."""
    a = math.atan(beta)
    half_log = math.log(1 + beta**2) / (2 * beta * a)
    brace = (
        1
        - math.atan(beta * (1 - r)) / a * (1 + half_log)
        + math.log(1 + beta**2 * (1 - r) ** 2) / (2 * beta * a)
    )
    return r / (r + (1 - rho) / rho * brace)


# --------------------------------------------------------------------------- the curves


@pytest.mark.parametrize("rho", PREVALENCES)
def test_precision_is_eq4_integral_of_probability_across_beta_and_recall(rho: float) -> None:
    # Eq. (4): R / X(R) = ∫_0^R dr / x(r). This checks eq. (11) against eq. (10) independently
    # of the rewritten closed form, including R → 0 and large β where eq. (11) cancels.
    for beta in BETAS:
        for r in RECALLS[1:]:
            integral = inverse_probability_integral(0.0, r, rho, beta)
            x_value = float(reference_precision(r, rho, beta))
            assert r / x_value == pytest.approx(integral, rel=1e-10), (rho, beta, r)


@pytest.mark.parametrize("rho", PREVALENCES)
def test_closed_form_equals_printed_eq11_where_that_is_well_conditioned(rho: float) -> None:
    for beta in (0.01, 0.5, 3.0, 40.0, 500.0):
        for r in (0.2, 0.4, 0.5, 0.6, 0.8):
            assert float(reference_precision(r, rho, beta)) == pytest.approx(
                printed_eq11(r, rho, beta), rel=1e-10
            )


@pytest.mark.parametrize("rho", PREVALENCES)
def test_normalisation_eq5(rho: float) -> None:
    # Eq. (5): ∫_0^1 dr / x(r) = 1 / P(1) = 1 / ρ.
    for beta in BETAS:
        assert inverse_probability_integral(0.0, 1.0, rho, beta) == pytest.approx(
            1.0 / rho, rel=1e-10
        )


def test_precision_at_full_recall_is_prevalence() -> None:
    rho = np.array(PREVALENCES)[:, None]
    beta = np.array(BETAS)[None, :]
    np.testing.assert_allclose(
        reference_precision(1.0, rho, beta), np.broadcast_to(rho, (4, 8)), rtol=1e-13
    )


def test_precision_at_zero_recall_is_probability_there_and_continuous() -> None:
    rho = np.array(PREVALENCES)[:, None]
    beta = np.array(BETAS)[None, :]
    at_zero = reference_precision(0.0, rho, beta)
    np.testing.assert_allclose(at_zero, reference_probability(0.0, rho, beta), rtol=1e-13)
    # |X(R) − X(0)| = O(R): at R = 1e-13 the change is far below 1e-9.
    np.testing.assert_allclose(reference_precision(1e-13, rho, beta), at_zero, rtol=1e-9)


@pytest.mark.parametrize("rho", PREVALENCES)
def test_eq3_differential_equation_holds(rho: float) -> None:
    # Eq. (3): dX/dR = X/R · (1 − X/x), checked in integrated form so that no numerical
    # differentiation is involved (an adaptive finite difference asked for 1e-10 converges or not
    # depending on the platform's last bits):  ln X(b) − ln X(a) = ∫_a^b (1 − X/x) / R dR.
    # Quadrature to 1e-12 relative and X to a few ulps leave the 1e-9 tolerance two orders of room.
    knots = (0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98)
    for beta in BETAS:
        peak = 1.0 - 1.0 / beta

        def slope(r: float, beta: float = beta) -> float:
            x_cap = float(reference_precision(r, rho, beta))
            return (1.0 - x_cap / float(reference_probability(r, rho, beta))) / r

        for a, b in itertools.pairwise(knots):
            integral, _ = quad(
                slope,
                a,
                b,
                epsabs=1e-14,
                epsrel=1e-12,
                limit=200,
                points=[peak] if a < peak < b else None,
            )
            change = math.log(float(reference_precision(b, rho, beta))) - math.log(
                float(reference_precision(a, rho, beta))
            )
            assert change == pytest.approx(integral, rel=1e-9, abs=1e-12), (rho, beta, a, b)


def test_precision_strictly_increasing_in_beta() -> None:
    # The β fit brackets a root of X(R; ρ, β) − P, which is valid because X is monotone in β.
    beta = np.logspace(-3, 4, 3000)
    for rho in (0.001, 0.03, 0.3, 0.9, 0.99):
        for r in (1e-6, 0.01, 0.2, 0.5, 0.75, 0.9, 0.98, 0.9999):
            steps = np.diff(reference_precision(r, rho, beta))
            assert np.all(steps > 0.0), (rho, r, steps.min())
    # Over the whole fitting bracket the steps of X can fall below its rounding error (a few
    # ulps) at the ends, where X is within β² of the floor or within rounding of 1; beyond
    # that it never falls.
    wide = np.logspace(math.log10(BETA_MIN), math.log10(BETA_MAX), 3000)
    for rho in (1e-6, 0.03, 0.9):
        for r in (1e-6, 0.5, 0.98):
            x_cap = reference_precision(r, rho, wide)
            assert np.all(np.diff(x_cap) >= -4.0 * np.spacing(x_cap[1:])), (rho, r)
            assert x_cap[-1] - x_cap[0] > 0.0


def test_precision_and_probability_fall_with_recall() -> None:
    r = np.linspace(0.0, 1.0, 2001)
    for rho in PREVALENCES:
        for beta in BETAS:
            assert np.all(np.diff(reference_precision(r, rho, beta)) < 0.0), (rho, beta)
            assert np.all(np.diff(reference_probability(r, rho, beta)) < 0.0), (rho, beta)


def test_values_are_probabilities_between_floor_and_one() -> None:
    r = np.linspace(0.0, 1.0, 101)[:, None]
    beta = np.logspace(-3, 4, 50)[None, :]
    for rho in PREVALENCES:
        x_cap = reference_precision(r, rho, beta)
        x_prob = reference_probability(r, rho, beta)
        assert np.all(np.isfinite(x_cap)) and np.all(np.isfinite(x_prob))
        assert np.all(x_cap >= validity_floor(r, rho) * (1 - 1e-15)) and np.all(x_cap <= 1.0)
        assert np.all(x_prob > 0.0) and np.all(x_prob <= 1.0)


def test_floor_is_the_small_beta_limit() -> None:
    r = np.linspace(0.0, 1.0, 11)
    for rho in PREVALENCES:
        floor = validity_floor(r, rho)
        # X − floor is O(β²): at β = 1e-7 it is far below 1e-12.
        np.testing.assert_allclose(reference_precision(r, rho, 1e-7), floor, rtol=1e-12)
        inner = r < 1.0
        assert np.all(reference_precision(r[inner], rho, 1e-3) > floor[inner])
    assert float(validity_floor(1.0, 0.2)) == pytest.approx(0.2)
    assert float(validity_floor(0.0, 0.2)) == pytest.approx(0.4 / 1.2)


# --------------------------------------------------------------------------- fitting β


def random_valid_points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rho = 10.0 ** rng.uniform(-3, math.log10(0.8), n)
    r = rng.uniform(0.001, 0.989, n)
    floor = validity_floor(r, rho)
    # precision anywhere between the floor and 0.99, including very close to both ends
    share = np.concatenate([rng.uniform(0, 1, n - 4), [1e-12, 1e-6, 1 - 1e-6, 1 - 1e-12]])
    p = floor + (MAX_MEASURED - floor) * share
    p = np.clip(p, np.nextafter(floor, 1.0), np.nextafter(MAX_MEASURED, 0.0))
    return p, r, rho


def test_fit_round_trip() -> None:
    p, r, rho = random_valid_points(5000, seed=11)
    fit = fit_beta(p, r, rho)
    assert np.all(fit.ok)
    assert np.all((fit.beta >= BETA_MIN) & (fit.beta <= BETA_MAX))
    np.testing.assert_allclose(reference_precision(r, rho, fit.beta), p, rtol=0, atol=1e-9)


def test_fit_recovers_known_curve_and_its_extrapolation() -> None:
    rng = np.random.default_rng(5)
    n = 2000
    rho = 10.0 ** rng.uniform(-3, -0.3, n)
    beta = 10.0 ** rng.uniform(-2, 3, n)
    r = rng.uniform(0.05, 0.95, n)
    target = rng.uniform(0.05, 0.95, n)
    p = reference_precision(r, rho, beta)
    keep = p < MAX_MEASURED
    res = extrapolated_precision(p[keep], r[keep], rho[keep], target[keep])
    assert np.all(res.ok)
    np.testing.assert_allclose(
        res.precision_at_target,
        reference_precision(target[keep], rho[keep], beta[keep]),
        rtol=0,
        atol=1e-9,
    )


def test_target_at_measured_recall_gives_measured_precision() -> None:
    p, r, rho = random_valid_points(500, seed=3)
    res = extrapolated_precision(p, r, rho, r)
    np.testing.assert_allclose(res.precision_at_target, p, rtol=0, atol=1e-9)
    assert not np.any(res.far)


def test_refusal_codes() -> None:
    rho = 0.2
    floor = float(validity_floor(0.5, rho))
    cases = [
        (floor, 0.5, rho, Refusal.AT_OR_BELOW_FLOOR),  # exactly at the floor
        (rho, 0.5, rho, Refusal.AT_OR_BELOW_FLOOR),
        (0.1, 0.5, rho, Refusal.AT_OR_BELOW_FLOOR),
        (0.99, 0.5, rho, Refusal.PRECISION_TOO_HIGH),
        (0.7, 0.99, rho, Refusal.RECALL_TOO_HIGH),
        (0.7, 1.0, rho, Refusal.RECALL_TOO_HIGH),
        (np.nan, 0.5, rho, Refusal.INVALID_INPUT),
        (0.0, 0.5, rho, Refusal.INVALID_INPUT),
        (1.2, 0.5, rho, Refusal.INVALID_INPUT),
        (0.7, 0.0, rho, Refusal.INVALID_INPUT),
        (0.7, 0.5, 0.0, Refusal.INVALID_INPUT),
        (0.7, 0.5, 1.0, Refusal.INVALID_INPUT),
        (np.nextafter(floor, 1.0), 0.5, rho, Refusal.NONE),
        (0.98, 0.98, 1e-9, Refusal.ABOVE_FAMILY),
        (0.7, 0.5, rho, Refusal.NONE),
    ]
    p, r, rh, expected = (np.array(c) for c in zip(*cases, strict=True))
    fit = fit_beta(p, r, rh)
    assert fit.refusal.tolist() == [int(e) for e in expected]
    assert np.all(np.isnan(fit.beta[~fit.ok])) and np.all(np.isfinite(fit.beta[fit.ok]))


def test_invalid_target_is_refused_in_arrays() -> None:
    res = extrapolated_precision(0.7, 0.5, 0.2, np.array([-0.1, 0.0, 1.0, 1.5, np.nan]))
    assert res.refusal.tolist() == [1, 0, 0, 1, 1]
    assert np.isnan(res.precision_at_target[[0, 3, 4]]).all()
    assert res.precision_at_target[2] == pytest.approx(0.2, rel=1e-12)  # X(1) = ρ


# --------------------------------------------------------------------------- one point (CLI)


def test_extrapolate_point_result_and_flag_wording() -> None:
    res = extrapolate_point(0.6, 0.5, 0.1, 0.82)
    assert isinstance(res, ExtrapolationResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.beta = 1.0  # type: ignore[misc]
    assert res.flags == ("extrapolated over recall distance 0.32 (> 0.10)",)
    assert res.precision_at_target == pytest.approx(
        float(reference_precision(0.82, 0.1, res.beta)), rel=1e-15
    )
    assert float(reference_precision(0.5, 0.1, res.beta)) == pytest.approx(0.6, abs=1e-12)
    assert res.precision_at_target < 0.6  # precision falls with recall
    assert res.to_dict()["flags"] == list(res.flags)
    assert list(res.to_dict())[:3] == ["beta", "precision_at_target", "flags"]


def test_flag_threshold_is_a_parameter_and_strict() -> None:
    assert DEFAULT_MAX_RECALL_DISTANCE == pytest.approx(0.10)
    assert extrapolate_point(0.6, 0.5, 0.1, 0.55).flags == ()
    assert extrapolate_point(0.6, 0.5, 0.1, 0.75, max_recall_distance=0.25).flags == ()
    assert extrapolate_point(0.6, 0.5, 0.1, 0.76, max_recall_distance=0.25).flags == (
        "extrapolated over recall distance 0.26 (> 0.25)",
    )


@pytest.mark.parametrize(
    ("point", "reason", "fragment"),
    [
        ((0.15, 0.5, 0.2, 0.75), Refusal.AT_OR_BELOW_FLOOR, "at or below"),
        ((0.995, 0.5, 0.2, 0.75), Refusal.PRECISION_TOO_HIGH, "precision 0.995"),
        ((0.7, 0.991, 0.2, 0.75), Refusal.RECALL_TOO_HIGH, "recall 0.991"),
        ((0.7, 0.5, 0.2, 1.3), Refusal.INVALID_INPUT, "target"),
        ((0.7, 0.5, -0.2, 0.75), Refusal.INVALID_INPUT, "prevalence"),
    ],
)
def test_extrapolate_point_refuses_with_one_sentence(
    point: tuple[float, float, float, float], reason: Refusal, fragment: str
) -> None:
    with pytest.raises(ExtrapolationRefused) as info:
        extrapolate_point(*point)
    assert isinstance(info.value, ValueError)
    assert info.value.reason == reason
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message and message.endswith(".")


def test_vectorised_equals_one_point_at_a_time() -> None:
    p, r, rho = random_valid_points(200, seed=8)
    target = np.linspace(0.05, 0.95, 200)
    res = extrapolated_precision(p, r, rho, target)
    for i in range(0, 200, 17):
        one = extrapolate_point(p[i], r[i], rho[i], target[i])
        assert one.beta == res.beta[i]
        assert one.precision_at_target == res.precision_at_target[i]
        assert bool(one.flags) == bool(res.far[i])


def test_broadcasting_scalar_prevalence_over_a_batch() -> None:
    p = np.array([0.5, 0.6, 0.7])
    res = extrapolated_precision(p, 0.4, 0.1, 0.5)
    assert res.precision_at_target.shape == (3,)
    assert np.all(np.diff(res.precision_at_target) > 0)  # higher P at the same R: higher X


# --------------------------------------------------------------------------- backtest


def test_backtest_on_a_model_curve_has_no_deviation() -> None:
    r = np.linspace(0.05, 0.95, 19)
    p = reference_precision(r, 0.05, 40.0)
    bt = backtest(r, p, 0.05, anchor_recall=0.52)
    assert bt.anchor_recall == pytest.approx(0.5)
    assert bt.beta == pytest.approx(40.0, rel=1e-8)
    assert bt.recall.size == 18 and 0.5 not in bt.recall
    assert bt.max_abs_deviation < 1e-9 and bt.rms_deviation < 1e-9
    np.testing.assert_allclose(bt.deviation_at_distance, 0.0, atol=1e-3)  # linear interpolation


def test_backtest_signs_and_distances() -> None:
    r = np.array([0.2, 0.3, 0.4, 0.5, 0.6, 0.9])
    p = reference_precision(r, 0.05, 10.0) - 0.05  # the curve sits 0.05 below the model ...
    p[3] += 0.05  # ... except at the anchor, which lies on it
    bt = backtest(r, p, 0.05, anchor_index=3, distances=(-0.1, 0.1, 0.45), window=0.15)
    np.testing.assert_allclose(bt.deviation, 0.05, atol=1e-12)  # model over-predicts: positive
    # window 0.15 keeps recalls 0.4 and 0.6 (and 0.3 is 0.2 away)
    assert bt.max_abs_deviation == pytest.approx(0.05, abs=1e-12)
    assert bt.deviation_at_distance[0] == pytest.approx(0.05, abs=1e-12)  # 0.4 is a curve point
    assert bt.deviation_at_distance[1] == pytest.approx(0.05, abs=1e-12)  # 0.6 is a curve point
    assert math.isnan(bt.deviation_at_distance[2])  # 0.95 is beyond the curve
    assert bt.to_dict()["deviation_at_distance"]["+0.45"] is None


def test_backtest_refuses_an_anchor_below_the_floor_and_bad_input() -> None:
    r = np.array([0.2, 0.5, 0.8])
    with pytest.raises(ExtrapolationRefused):
        backtest(r, np.array([0.9, 0.05, 0.1]), 0.1, anchor_index=1)
    with pytest.raises(ValueError, match="exactly one"):
        backtest(r, np.array([0.9, 0.5, 0.3]), 0.1)
    with pytest.raises(ValueError, match="out of range"):
        backtest(r, np.array([0.9, 0.5, 0.3]), 0.1, anchor_index=3)
