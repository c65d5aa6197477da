"""Annotation budgets of the non-adaptive curve methods, computed without any label.

``curve_budget`` backs ``receval curve budget --method M --size N --json``.  The counts are the
papers' formulas, so they hold for any N:

* ``paula`` — PAULA Theorem 3: L − ℓ queries and g_ℓ + Δ(L − ℓ) annotations;
* ``logstrat`` — PAULA Theorem 2: L − ℓ queries and ⌈g_ℓ + ε(L−ℓ)/(2(β−1)²(1+ε)p_min²) ·
  ln((L−ℓ)/(δ/2))⌉ label draws (AdaStrat Table 2 uses β = γ; pass ``beta=None`` for that);
* ``random`` — PAULA eq. (5): ⌈√(2N/(α²p_min²) · ln(2N/δ))⌉ with α = γ(1+ε) − 1;
* ``stratband`` — g_ℓ + Σ_j min(n, size_j) with n = Δ by default: at most PAULA's count;
* ``tailband`` — the same count as StratBand: g_ℓ exact, then as many uniform tail draws;
* ``adastrat`` — adaptive: its count depends on the labels, so the budget is the worst case
  before any label (``kind = "upper bound"``: l̃ + K·s_K with K ≤ ⌊log_{1+ε}(N/l̃)⌋ + 1).

Defaults are the papers': ε = 0.03, Δ = 100, r̃ = ⌈(Δ+2)/ε⌉, δ = 0.05, β = 1.05, p_min = 0.5.
"""

from __future__ import annotations

import numbers

from receval.curves import make_method

__all__ = ["BUDGET_METHODS", "NON_ADAPTIVE_METHODS", "curve_budget"]

#: Method names whose budget is exact before any label.
NON_ADAPTIVE_METHODS = ("paula", "logstrat", "random", "stratband", "tailband")
#: Every method :func:`curve_budget` accepts (AdaStrat's budget is a worst-case bound).
BUDGET_METHODS = (*NON_ADAPTIVE_METHODS, "adastrat")


def curve_budget(
    method: str,
    size: int,
    epsilon: float = 0.03,
    window: int = 100,
    delta: float = 0.05,
    beta: float | None = 1.05,
    pmin: float = 0.5,
    r_tilde: int | None = None,
    eta: float = 0.0,
    m: int | None = None,
    labels_per_stratum: int | None = None,
    halfwidth: float | None = None,
    check_labels: int | None = None,
) -> dict[str, object]:
    """Queries and annotations a method needs for a list of ``size`` items, before any label.

    Parameters
    ----------
    method
        ``"paula"``, ``"logstrat"``, ``"random"``, ``"stratband"`` or ``"adastrat"``
        (case-insensitive; AdaStrat's count is a worst-case upper bound).
    size
        N ≥ 1.
    epsilon, window, delta, beta, pmin, r_tilde, eta, m, labels_per_stratum
        ε, Δ, δ, β (``None``: γ; AdaStrat then uses 1.05), p_min, r̃ (``None``: ⌈(Δ+2)/ε⌉),
        η and m (AdaStrat), n per stratum or the wanted half-width (StratBand).  Parameters a method does not use are
        ignored; ``check_labels`` is AdaStrat's premise check (default ⌈s₁/2⌉).

    Returns
    -------
    dict
        JSON-ready; always has ``method``, ``size``, ``queries`` (points of p queried) and
        ``annotations`` (labels needed, as counted by the papers), plus the derived constants
        and method-specific details (e.g. ``expected_distinct``).

    Raises
    ------
    ValueError
        Unknown or adaptive method, or invalid parameters (message says which).
    """
    if not isinstance(method, str):
        raise ValueError(f"method={method!r} must be a method name (str)")
    key = method.strip().lower()
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size={size!r} must be an integer ≥ 1")
    key = "random" if key == "random-sampling" else key
    if key not in BUDGET_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(BUDGET_METHODS)}")
    if key == "adastrat" and beta is None:
        beta = 1.05  # AdaStrat has no γ fallback
    params = {
        "epsilon": epsilon, "window": window, "delta": delta, "beta": beta, "pmin": pmin,
        "r_tilde": r_tilde, "eta": eta, "m": m, "labels_per_stratum": labels_per_stratum,
        "halfwidth": halfwidth, "check_labels": check_labels,
    }  # fmt: skip
    # each method takes the parameters it has (make_method drops the others)
    return make_method(key, **params).budget(size)
