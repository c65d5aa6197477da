"""Budget planning: how many labels a system's sample needs for a target interval half-width.

Chaganty et al. 2017 ("Adaptive sample size for a newly submitted system"; notes §1): with the
balance-heuristic mixture q = Σ_j (n_j/N) s_j, the joint precision estimator of system i has

    Var π̂_i = Σ_j (n_j/N²) (E_{s_j}[(t_i f/q)²] − π_ij²)            (appendix, Theorem 1).

Samplers with labelled draws contribute their empirical Theorem-1 terms (the paper: "for the
existing systems use the empirical Theorem-1 terms").  A planned sampler's labels are unknown; two
bounds are offered, written with the unnormalised mixture mass M(x) = Σ_j n_j s_j(x) = N q(x), so
that N cancels:

* ``bound="paper"`` (default): the paper's conservative bound n_j E_{s_j}[(t_i f / M)²] with f ≤ 1
  where a fact is unlabelled and the −π_ij² term dropped.  Valid for any labels.  For a lone
  system it is 1/n — so the paper's target "the variance of 500 samples for a lone system" is
  1/500 in the same units.
* ``bound="exchangeable"``: keeps −π_ij² and lets the unlabelled facts be correct with an unknown
  common probability π, maximising the variance over π ∈ [0, 1] (a concave quadratic, solved
  exactly).  For a lone system this is the binomial worst case 1/(4n), so it asks for about four
  times fewer labels for the same absolute half-width; it is a bound under exchangeable labels,
  not for an adversarial labelling.
* ``bound="expected"``: no bound but the expected variance, with unlabelled facts correct at
  the estimated rate of the pool's unlabelled facts — what :func:`expected_widths` reports by
  default ("what widths should a budget of L labels give?").

Facts already labelled keep their label either way (labels are reused).  For a *new* system
the bound falls as its n grows (M grows on X_i), so bisection finds the smallest n meeting a
target (the paper's procedure).  For a system that already has a sample this is not guaranteed:
more planned draws change the mixture mass under the system's existing draws, whose empirical
Theorem-1 terms can grow, so the bound need not fall monotonically; bisection then returns an n
that meets the target, not necessarily the smallest.  True recall's bound has a floor that no
sample size lowers, ν² Var θ̂ from the exhaustive units: a recall target below it is reported as
unreachable (n = 0 and a note saying how many units would reach it).  For pooled recall, the delta-method variance of the
self-normalised ratio ν̂_i = A/B is bounded the same way with terms (g_i(x) − ν_i) f(x) / M(x), and
true recall r̂ = θ̂ ν̂ adds ν² Var θ̂ from the exhaustive units.  Every planned sample is uniform over
the system's distinct facts, or follows ``design`` (``judge-uncertainty`` for ``--by-judge``).

With ``judge=True`` the intervals are those of ``--estimator ppi``: the draws' variance
(precision, pooled recall) is multiplied by :func:`judge_factor`, 1 − ρ_lo², the share of it a
judge of correlation ρ leaves at the optimal coefficient, ρ_lo a lower confidence bound from the
labels; θ̂'s part is unchanged.  An approximation (not a bound), conservative in ρ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.special import ndtri

from receval.design import sampling_probabilities
from receval.estimators.recall import pooled_recall_terms
from receval.estimators.sample_data import SampleData, build_sample_data
from receval.task import Task


def _worst_case_variance(s: np.ndarray, c: np.ndarray, label: np.ndarray) -> float:
    """max over π ∈ [0, 1] of Var_{x ~ s}[c(x) f(x)] when unlabelled facts are correct w.p. π.

    Labelled facts keep their label.  With E[f] = E[f²] = π for the unlabelled ones the variance
    is (A π + K1) − (B π + K0)², a concave quadratic in π whose maximiser is
    π* = (A − 2 B K0) / (2 B²), clipped to [0, 1].  For a lone system (c constant) this is the
    binomial worst case c²/4 at π = 1/2.
    """
    known = ~np.isnan(label)
    f = np.where(known, label, 0.0)
    A = float(np.sum(s[~known] * c[~known] ** 2))
    Bc = float(np.sum(s[~known] * c[~known]))
    K1 = float(np.sum(s * f * c**2))
    K0 = float(np.sum(s * f * c))
    pi = 0.0 if Bc == 0 else min(max((A - 2 * Bc * K0) / (2 * Bc**2), 0.0), 1.0)
    return max((A * pi + K1) - (Bc * pi + K0) ** 2, 0.0)


def _sampler_variance_sum(values: np.ndarray, sampler: np.ndarray, J: int) -> float:
    """Σ_j n_j · (empirical variance of ``values`` within sampler j): Theorem 1's terms × N²."""
    if values.size == 0:
        return 0.0
    n = np.bincount(sampler, minlength=J).astype(float)
    s1 = np.bincount(sampler, weights=values, minlength=J)
    s2 = np.bincount(sampler, weights=values**2, minlength=J)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(n > 0, s2 / np.where(n > 0, n, 1) - (s1 / np.where(n > 0, n, 1)) ** 2, 0.0)
    return float(np.sum(n * np.maximum(var, 0.0)))


BOUNDS = ("paper", "exchangeable", "expected")

#: one-sided level of the lower confidence bound on the judge's correlation the planner assumes
JUDGE_PLANNING_LEVEL = 0.9
#: with fewer labelled facts the judge scored, the planner assumes the judge explains nothing
JUDGE_PLANNING_MIN = 10


def judge_factor(task: Task, data: SampleData | None = None) -> float:
    """The share 1 − ρ_lo² of the human draws' variance a judge is expected to leave.

    The prediction-powered estimator (:mod:`receval.estimators.ppi`) with its coefficient at
    the optimum has the variance of the human-only estimator times 1 − ρ², ρ the correlation of
    the draws' label and judge terms (PPI++, Angelopoulos, Duchi & Zrnic 2024, §2).  ρ is
    estimated by the correlation of judge score and human label over the labelled facts the
    judge scored, and replaced, conservatively, by its one-sided lower confidence bound at
    :data:`JUDGE_PLANNING_LEVEL` (Fisher's z, tanh(atanh |ρ̂| − z_level/√(n − 3)), floored at
    0): the estimator calibrates the judge on the labels first, so an inverted judge helps too.
    With fewer than :data:`JUDGE_PLANNING_MIN` such facts the factor is 1 (no judge assumed).
    With several judges or a graded scale ρ is that of the judges' cross-fitted calibrated
    combination (:func:`receval.estimators.judge_calibration.crossfit_judge_scores`), the
    control the estimator uses.  An approximation, not a bound: the importance weights make the draws' correlation smaller
    than the facts' (bench/ppi.py: realised width ratios ≈ 0.63 at ρ ≈ 0.8, √(1 − ρ²) = 0.6),
    and cross-fitting spends part of the gain at small n.
    """
    from receval.judge import fact_scores

    if getattr(task, "judge", None) is None or not len(task.judge):
        from receval.errors import BundleError

        raise BundleError(
            task.root / "judge.tsv",
            None,
            "planning for the judge needs its scores: judge.tsv (or .csv/.parquet) with "
            "query_id, answer, judge_score in [0, 1]",
        )
    scores, scored = fact_scores(task)
    from receval.judge import calibrates

    if calibrates(task):  # several judges or graded: the cross-fitted calibrated combination
        from receval.estimators.judge_calibration import crossfit_judge_scores

        scores = crossfit_judge_scores(task).combined
    ids = task.labels.index.to_numpy(np.int64)
    keep = scored[ids]
    s, f = scores[ids][keep], task.labels.to_numpy(float)[keep]
    n = s.size
    if n < max(JUDGE_PLANNING_MIN, 4) or s.std() == 0 or f.std() == 0:
        return 1.0
    rho = float(np.clip(abs(np.corrcoef(s, f)[0, 1]), 0.0, 0.999999))
    low = np.tanh(np.arctanh(rho) - ndtri(JUDGE_PLANNING_LEVEL) / np.sqrt(n - 3))
    return float(1.0 - max(low, 0.0) ** 2)


def _paper_bound(s: np.ndarray, c: np.ndarray, label: np.ndarray) -> float:
    """E_{x~s}[c(x)² f(x)] with f ≤ 1 where unlabelled: the paper's bound (−π² dropped).

    Valid for any labels.  For a lone system it is 1/n, four times the binomial worst case.
    """
    e = np.where(np.isnan(label), 1.0, label)
    return float(np.sum(s * e * c**2))


class _Planner:
    """Mixture masses and labels over all facts, for repeated variance bounds."""

    def __init__(
        self,
        task: Task,
        data: SampleData,
        bound: str = "paper",
        judge: bool = False,
        design: str = "uniform",
    ) -> None:
        if bound not in BOUNDS:
            raise ValueError(f"unknown bound {bound!r} (known: {', '.join(BOUNDS)})")
        self.bound = bound
        #: the share of the draws' variance the judge leaves (1 without it): see judge_factor
        self.judge_factor = judge_factor(task, data) if judge else 1.0
        self.task = task
        self.data = data
        outputs = task.outputs
        self.systems = data.systems
        self.index = {s: i for i, s in enumerate(self.systems)}
        n_facts = len(task.facts)
        self.n_facts = n_facts
        fact = outputs["fact"].to_numpy()
        sys_ = outputs["system"].map(self.index).to_numpy()
        shape = (n_facts, len(self.systems))
        s_uniform = sampling_probabilities(outputs, task.queries, "uniform").to_numpy()
        self.T = sparse.csc_matrix((s_uniform, (fact, sys_)), shape=shape)  # targets t_i
        self.S = self.T  # the planned samplers' design
        if design != "uniform":
            s_planned = sampling_probabilities(outputs, task.queries, design).to_numpy()
            self.S = sparse.csc_matrix((s_planned, (fact, sys_)), shape=shape)
        # existing mixture mass M0(x) = Σ_j n_j s_j(x) over all facts
        mass = np.zeros(n_facts)
        for design in sorted(set(data.sampler_design)):
            s = sampling_probabilities(outputs, task.queries, design).to_numpy()
            Sd = sparse.csr_matrix((s, (fact, sys_)), shape=(n_facts, len(self.systems)))
            n_by_sys = np.zeros(len(self.systems))
            for j, d in enumerate(data.sampler_design):
                if d == design:
                    n_by_sys[data.sampler_system[j]] += data.sampler_n[j]
            mass += Sd @ n_by_sys
        self.mass0 = mass
        label = np.full(n_facts, np.nan)
        label[task.labels.index.to_numpy(np.int64)] = task.labels.to_numpy(float)
        self.label = label
        # expected label of an unlabelled fact, for ν's plug-in: the estimated share of correct
        # facts among the pool's unlabelled ones (1/2 before any draw is labelled)
        rate = 0.5
        if data.K:
            _, den = pooled_recall_terms(data)
            in_pool = task.facts["in_pool"].to_numpy(bool)
            labelled = ~np.isnan(label) & in_pool
            unlabelled = int(in_pool.sum() - labelled.sum())
            if unlabelled > 0:
                rate = float(np.clip((den.sum() - label[labelled].sum()) / unlabelled, 0.0, 1.0))
        self.unlabelled_rate = rate
        self.sampled = set(data.sampler_system[data.sampler_n > 0].tolist())
        self.plug_in = np.where(np.isnan(label), rate, label)
        self.draw_x = data.facts[data.draw_fact]
        self.draw_f = data.label[data.draw_fact]
        # pool coverage and its variance from the exhaustive units (ratio linearisation)
        a, b = data.unit_pooled * data.unit_weight, data.unit_found * data.unit_weight
        if b.sum() > 0 and a.size > 1:
            theta = a.sum() / b.sum()
            u = a.size
            self.theta = theta
            self.var_theta = u / (u - 1) * np.sum((a - theta * b) ** 2) / b.sum() ** 2
        else:
            self.theta, self.var_theta = np.nan, np.nan

    def plug_in_nu(self, i: int) -> float:
        """ν_i's expected value with unlabelled facts correct at the plug-in rate: Σ_x g_i e /
        Σ_x e over the pool (the large-sample limit of ν̂_i, whatever the sample sizes)."""
        rows_i, _ = self.column(i)
        in_pool = self.task.facts["in_pool"].to_numpy(bool)
        e = np.where(in_pool, self.plug_in, 0.0)
        total = float(e.sum())
        return float(e[rows_i].sum() / total) if total > 0 else 1.0

    def planned_variance(self, s: np.ndarray, c: np.ndarray, rows: np.ndarray) -> float:
        """Var_{x ~ s}[c(x) f(x)] of a planned sampler under the chosen bound (module docstring)."""
        if self.bound == "paper":
            return _paper_bound(s, c, self.label[rows])
        if self.bound == "exchangeable":
            return _worst_case_variance(s, c, self.label[rows])
        e = self.plug_in[rows]  # "expected": unlabelled facts correct at the estimated rate
        return max(float(np.sum(s * e * c**2) - np.sum(s * e * c) ** 2), 0.0)

    def column(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(fact ids, s_i) of system i's outputs under the planned design."""
        col = self.S[:, i]
        return col.indices, col.data

    def bounds(self, i: int, planned: dict[int, float]) -> tuple[float, float, float]:
        """(variance bound of precision, of pooled recall, of true recall) for system i."""
        mass = self.mass0.copy()
        for j, n in planned.items():
            rows, s = self.column(j)
            mass[rows] += n * s
        col = self.T[:, i]
        rows_i, t_i = col.indices, col.data  # uniform target t_i
        t = np.zeros(self.n_facts)
        t[rows_i] = t_i
        g = np.zeros(self.n_facts, bool)
        g[rows_i] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            x, f, j_of = self.draw_x, self.draw_f, self.data.draw_sampler
            prec_emp = _sampler_variance_sum(t[x] * f / mass[x], j_of, self.data.J)
            prec_plan = 0.0
            a_emp = np.sum(g[x] * f / mass[x])
            b_emp = np.sum(f / mass[x])
            a_plan = b_plan = 0.0
            for j, n in planned.items():
                rows, s = self.column(j)
                c = t[rows] / mass[rows]
                prec_plan += n * self.planned_variance(s, c, rows)
                e = self.plug_in[rows]
                a_plan += n * np.sum(s * e * g[rows] / mass[rows])
                b_plan += n * np.sum(s * e / mass[rows])
            B = b_emp + b_plan
            nu = (a_emp + a_plan) / B if B > 0 else np.nan
            rec_emp = _sampler_variance_sum((g[x] - nu) * f / mass[x], j_of, self.data.J)
            rec_plan = 0.0
            for j, n in planned.items():
                rows, s = self.column(j)
                d = (g[rows] - nu) / mass[rows]
                rec_plan += n * self.planned_variance(s, d, rows)
            var_nu = (rec_emp + rec_plan) / B**2 if B > 0 else np.inf
        var_p = (prec_emp + prec_plan) * self.judge_factor
        var_nu = var_nu * self.judge_factor
        if not np.isfinite(var_p):
            var_p = np.inf
        theta = self.theta if np.isfinite(self.theta) else 1.0
        var_theta = self.var_theta if np.isfinite(self.var_theta) else 0.0
        var_r = (
            theta**2 * var_nu + (nu**2 if np.isfinite(nu) else 1.0) * var_theta + var_nu * var_theta
        )
        return float(var_p), float(var_nu), float(var_r)


@dataclass(frozen=True)
class PlanGroups:
    """The pool's facts grouped for :class:`GroupPlanner` (from the engine:
    :func:`receval.engine.adaptive.plan_groups`): facts with the same membership among the
    planned systems ``columns`` (indices into the systems), the same existing mixture mass
    M0(x) = Σ_j n_j s_j(x) (n_k/|X_k| for uniform samplers; an entity-relation sampler's s_j is
    one value per (system, query)) and the same label (NaN: unlabelled) form one
    group of ``count`` facts; ``member`` (groups × columns) says which planned systems output
    them.  Every pool fact is in one group (those of no planned system with mass 0)."""

    columns: list[int]
    member: sparse.csr_matrix
    mass0: np.ndarray
    label: np.ndarray
    count: np.ndarray
    #: (groups × columns) the planned design's s_j(x) of each group's facts (0 where the
    #: planned system does not output them); None: the uniform design, 1/|X_j| on ``member``
    planned: sparse.csr_matrix | None = None


@dataclass(frozen=True)
class PlanDraws:
    """The drawn facts as :class:`_Planner` sees them when they are not ``data``'s own arrays
    (:class:`GroupPlanner` ``draws``): ``sizes`` |X_j| of the runs as they are, ``member``
    (D, m) which systems output each drawn fact, ``mass0`` (D,) its existing mixture mass
    M0(x) = Σ_j n_j s_j(x), ``planned`` (D, m) the planned design's s_j(x) (None: uniform).
    With equivalence classes the drawn facts are the classes' canonical facts and these arrays
    are the runs' own (as :class:`_Planner` reads ``task.outputs``), while labels, units and
    the pooled-recall terms come from ``data``, the task seen with one fact per class."""

    sizes: np.ndarray
    member: np.ndarray
    mass0: np.ndarray
    planned: np.ndarray | None = None


def _is_strata(design: str) -> bool:
    from receval.design import JUDGE_STRATA

    return str(design).startswith(JUDGE_STRATA + ":")


class GroupPlanner:
    """:class:`_Planner`'s variance bounds from :class:`PlanGroups` and the draws' arrays
    (:func:`receval.engine.sampled_data.engine_sample_data`) instead of every fact: uniform
    or entity-relation samplers and a uniform planned design.  With M(x) = M0(x) +
    Σ_j n_j 1[x ∈ X_j]/|X_j| every
    term of :meth:`_Planner.bounds` is a sum, over the facts of X_i ∩ X_j, of the label (or the
    unlabelled indicator) over M(x) or M(x)²: four (planned × planned) matrices per trial
    sizes (:meth:`_pair_sums`), the same variances up to the order of summation.

    A planned design other than uniform (``groups.planned``, ``draws.planned``: the
    ``judge-strata`` design of ``--by-judge``, ``entity-relation``) weights those sums by its
    s_j(x); ``draws`` (:class:`PlanDraws`) replaces the draws' arrays read from ``data``;
    ``judge_factor`` (:func:`judge_factor`) multiplies the draws' variances, as
    :class:`_Planner` with ``judge=True``."""

    def __init__(
        self,
        data: SampleData,
        groups: PlanGroups,
        bound: str = "paper",
        draws: PlanDraws | None = None,
        judge_factor: float = 1.0,
    ) -> None:
        if bound not in BOUNDS:
            raise ValueError(f"unknown bound {bound!r} (known: {', '.join(BOUNDS)})")
        designs = {d for d in data.sampler_design if not _is_strata(d)}
        if designs - {"uniform", "entity-relation"}:
            raise ValueError(
                "the grouped planner reads uniform, entity-relation and judge-strata samplers only"
            )
        self.bound, self.data, self.groups = bound, data, groups
        self.judge_factor = float(judge_factor)
        self.systems = data.systems
        self.index = {s: i for i, s in enumerate(self.systems)}
        self.column_of = {i: c for c, i in enumerate(groups.columns)}
        sizes = np.asarray(data.sizes if draws is None else draws.sizes, float)
        with np.errstate(divide="ignore"):
            self.inverse = np.where(sizes > 0, 1.0 / sizes, 0.0)
        self._draws(data, draws)
        self.draw_f = data.label[data.draw_fact]
        known = ~np.isnan(groups.label)
        rate = 0.5
        if data.K:
            _, den = pooled_recall_terms(data)
            unlabelled = float(groups.count[~known].sum())
            if unlabelled > 0:
                found = float(np.sum(groups.count[known] * groups.label[known]))
                rate = float(np.clip((den.sum() - found) / unlabelled, 0.0, 1.0))
        self.unlabelled_rate = rate
        self.known = known
        self.plug_in = np.where(known, groups.label, rate)
        self.sampled = set(data.sampler_system[data.sampler_n > 0].tolist())
        a, b = data.unit_pooled * data.unit_weight, data.unit_found * data.unit_weight
        if b.sum() > 0 and a.size > 1:
            theta = a.sum() / b.sum()
            self.theta = theta
            self.var_theta = a.size / (a.size - 1) * np.sum((a - theta * b) ** 2) / b.sum() ** 2
        else:
            self.theta, self.var_theta = np.nan, np.nan
        self._cache: dict = {}

    def _draws(self, data: SampleData, draws: PlanDraws | None) -> None:
        """The drawn facts' membership, existing mass and planned design (:class:`PlanDraws`)."""
        self.draw_planned = None
        if draws is not None:
            self.draw_member = np.asarray(draws.member, float)
            self.draw_mass0 = np.asarray(draws.mass0, float)
            self.draw_planned = draws.planned
            return
        n_by_sys = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m)
        member = np.asarray(data.member, float)
        self.draw_member = member
        self.draw_mass0 = member @ (n_by_sys * self.inverse) if member.size else np.zeros(0)
        if set(data.sampler_design) != {"uniform"} and member.size:  # Σ_j n_j s_j(x)
            self.draw_mass0 = data.proposal @ np.asarray(data.sampler_n, float)

    def plug_in_nu(self, i: int) -> float:
        """:meth:`_Planner.plug_in_nu` from the groups."""
        e = self.groups.count * self.plug_in
        total = float(e.sum())
        col = self.groups.member[:, self.column_of[i]].toarray().ravel() > 0
        return float(e[col].sum() / total) if total > 0 else 1.0

    def _pair_sums(self, planned: dict[int, float]) -> dict[str, np.ndarray]:
        """Σ over X_a ∩ X_b of w(x)/M(x)^p for every two planned columns a, b: ``unk1``,
        ``unk2`` (w = 1 on unlabelled facts), ``lab1``, ``lab2`` (w = the label)."""
        key = tuple(sorted(planned.items()))
        if key in self._cache:
            return self._cache[key]
        g = self.groups
        add = np.zeros(len(g.columns))
        for j, n in planned.items():
            add[self.column_of[j]] = n if g.planned is not None else n * self.inverse[j]
        mass = g.mass0 + (g.member if g.planned is None else g.planned) @ add
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(mass > 0, 1.0 / mass, 0.0)
        out = {}
        weights = {"unk": np.where(self.known, 0.0, 1.0), "lab": np.where(self.known, g.label, 0.0)}
        right = g.member if g.planned is None else g.planned  # s_b(x) inside the sums
        for name, w in weights.items():
            for p in (1, 2):
                vals = g.count * w * inv**p
                out[f"{name}{p}"] = (g.member.T @ right.multiply(vals[:, None]).tocsr()).toarray()
        self._cache = {key: out}
        return out

    def _scale(self, j: int) -> float:
        """s_j of the planned uniform design (1/|X_j|) outside the pair sums; 1 when the sums
        hold the planned design's s_j(x) (``groups.planned``)."""
        return self.inverse[j] if self.groups.planned is None else 1.0

    def _variance(self, u1: float, u2: float, l1: float, l2: float) -> float:
        """:meth:`_Planner.planned_variance` from Σ_unk s v, Σ_unk s v², Σ s f v, Σ s f v²."""
        if self.bound == "paper":
            return float(u2 + l2)
        if self.bound == "exchangeable":
            pi = 0.0 if u1 == 0 else min(max((u2 - 2 * u1 * l1) / (2 * u1**2), 0.0), 1.0)
            return max((u2 * pi + l2) - (u1 * pi + l1) ** 2, 0.0)
        rate = self.unlabelled_rate
        return max((rate * u2 + l2) - (rate * u1 + l1) ** 2, 0.0)

    def bounds(self, i: int, planned: dict[int, float]) -> tuple[float, float, float]:
        """(variance bound of precision, of pooled recall, of true recall): :meth:`_Planner.bounds`."""
        data = self.data
        add = np.zeros(data.m)
        for j, n in planned.items():
            add[j] = n if self.draw_planned is not None else n * self.inverse[j]
        d, f, j_of = data.draw_fact, self.draw_f, data.draw_sampler
        spread = self.draw_member if self.draw_planned is None else self.draw_planned
        mass = (self.draw_mass0 + spread @ add)[d] if d.size else np.zeros(0)
        g = self.draw_member[d, i] if d.size else np.zeros(0)
        t = g * self.inverse[i]
        sums = self._pair_sums(planned) if planned else {}
        a, rate = self.column_of.get(i), self.unlabelled_rate
        with np.errstate(invalid="ignore", divide="ignore"):
            prec_emp = _sampler_variance_sum(t * f / mass, j_of, data.J)
            a_emp, b_emp = np.sum(g * f / mass), np.sum(f / mass)
            prec_plan = a_plan = b_plan = 0.0
            for j, n in planned.items():
                b = self.column_of[j]
                s, ti = self._scale(j), self.inverse[i]
                ij = {k: (v[a, b] if a is not None else 0.0) for k, v in sums.items()}
                jj = {k: v[b, b] for k, v in sums.items()}
                prec_plan += n * self._variance(
                    s * ti * ij["unk1"], s * ti**2 * ij["unk2"],
                    s * ti * ij["lab1"], s * ti**2 * ij["lab2"],
                )  # fmt: skip
                a_plan += n * s * (rate * ij["unk1"] + ij["lab1"])
                b_plan += n * s * (rate * jj["unk1"] + jj["lab1"])
            B = b_emp + b_plan
            nu = (a_emp + a_plan) / B if B > 0 else np.nan
            rec_emp = _sampler_variance_sum((g - nu) * f / mass, j_of, data.J)
            rec_plan = 0.0
            for j, n in planned.items():
                b, s = self.column_of[j], self._scale(j)
                ij = {k: (v[a, b] if a is not None else 0.0) for k, v in sums.items()}
                jj = {k: v[b, b] for k, v in sums.items()}
                one = {k: s * (ij[k] - nu * jj[k]) for k in ("unk1", "lab1")}
                two = {k: s * ((1 - 2 * nu) * ij[k] + nu**2 * jj[k]) for k in ("unk2", "lab2")}
                rec_plan += n * self._variance(one["unk1"], two["unk2"], one["lab1"], two["lab2"])
            var_nu = (rec_emp + rec_plan) / B**2 if B > 0 else np.inf
        var_p = float(prec_emp + prec_plan) * self.judge_factor
        var_nu = var_nu * self.judge_factor
        if not np.isfinite(var_p):
            var_p = np.inf
        theta = self.theta if np.isfinite(self.theta) else 1.0
        var_theta = self.var_theta if np.isfinite(self.var_theta) else 0.0
        var_r = (
            theta**2 * var_nu + (nu**2 if np.isfinite(nu) else 1.0) * var_theta + var_nu * var_theta
        )
        return float(var_p), float(var_nu), float(var_r)


def adaptive_sample_sizes(
    task: Task,
    target_width: float,
    *,
    confidence: float = 0.95,
    systems: list[str] | None = None,
    max_n: int = 2000,
    bound: str = "expected",
    metrics: tuple[str, ...] = ("precision", "recall"),
    on_system: Callable[[str], None] | None = None,
    judge: bool = False,
    design: str = "uniform",
) -> pd.DataFrame:
    """Uniform sample sizes for ``systems`` that bring their half-widths under ``target_width``.

    The systems are ``systems`` or, by default, every system without a sample.  They are planned
    **jointly**: one common size n for every system that still needs draws, the smallest n
    (bisection) at which *every* one of them meets the target with all the planned draws in the
    mixture (labels already collected are reused).  Planning them one after another instead lets
    the first take all the draws and the later ones, which reuse its labels, none (sizes from 0
    to max_n), leaving systems with a few own draws inside a large pool, whose bootstrap
    intervals undercover (issue 20).  The half-width of an interval at level ``confidence`` is
    taken as z·√V with V the variance of the module docstring under ``bound``, for precision and
    for true recall (pooled recall when there are no exhaustive units).  ``bound="expected"``
    (default) aims at the target in expectation, so the realised half-widths land near it;
    ``"paper"`` and ``"exchangeable"`` are bounds, valid for any (exchangeable) labels, whose
    realised widths fall well below the target (for a lone system at precision p the paper bound
    asks for 1/(p(1 − p)) times the draws).

    A system whose labels already meet the target gets n = 0; a target that ``max_n`` cannot
    reach gives n = max_n and ``reached = False``; a recall target below the floor set by the
    exhaustive units (ν̂² Var θ̂, which no sample size lowers) gives n = 0, ``reached = False``
    and a ``note`` naming the number of exhaustive units that would reach it.

    ``metrics`` names the intervals that must meet the target: precision (the paper's
    criterion: its adaptive experiment bounds the variance of π̂), recall, or both (default).
    ``on_system`` is called with each system's name once it is planned (progress reporting).
    ``judge``: the intervals will come from ``--estimator ppi``, so the draws' variance is
    multiplied by :func:`judge_factor` (θ̂'s part from the exhaustive units is not);
    ``design``: the planned draws' design (``judge-uncertainty`` for ``sample --by-judge``).

    Returns a frame ``system, n, precision_halfwidth, recall_halfwidth, reached, note``.
    """
    _require_metrics(metrics)
    data = build_sample_data(task)
    planner = _Planner(task, data, bound, judge, design)
    return plan_sizes(planner, data, target_width, confidence, systems, max_n, metrics, on_system)


def plan_sizes(
    planner,
    data: SampleData,
    target_width: float,
    confidence: float,
    systems: list[str] | None,
    max_n: int,
    metrics: tuple[str, ...],
    on_system: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """:func:`adaptive_sample_sizes` with a planner built (``planner.bounds``, ``index``,
    ``sampled``, ``var_theta``, ``plug_in_nu``): :class:`_Planner` over the loaded task, or
    :class:`GroupPlanner` over the engine's aggregates (:mod:`receval.engine.adaptive`)."""
    _require_metrics(metrics)
    z = float(ndtri(0.5 + confidence / 2))
    limit = (target_width / z) ** 2
    chosen = _systems_to_plan(data, systems)
    index = [planner.index[name] for name in chosen]
    target = _Target(planner, limit, metrics, data.U > 0)
    notes = _floor_notes(target, index, z, data.U)
    # systems that need draws: no floor in the way, and not already meeting the target
    active = [i for i in index if not notes[i] and not target.met_already(i)]
    common = _smallest_common_n(target, active, max_n)
    planned = {i: float(common) for i in active}
    rows = []
    for name, i in zip(chosen, index, strict=True):
        reached, var_p, var_rec = target.check(i, planned)
        if on_system is not None:
            on_system(name)
        rows.append(_plan_row(name, planned.get(i, 0), reached, var_p, var_rec, notes[i], z, max_n))
    return pd.DataFrame(
        rows,
        columns=["system", "n", "precision_halfwidth", "recall_halfwidth", "reached", "note"],
    )


def _require_metrics(metrics: tuple[str, ...]) -> None:
    """Raise ``ValueError`` unless ``metrics`` is a non-empty subset of precision, recall."""
    unknown = set(metrics) - {"precision", "recall"}
    if unknown or not metrics:
        raise ValueError(
            f"metrics must be precision and/or recall, not {sorted(unknown) or 'none'}"
        )


def _systems_to_plan(data: SampleData, systems: list[str] | None) -> list[str]:
    """``systems`` sorted, or by default every system without a sample, in data order."""
    have = set(
        np.array(data.systems)[
            np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m) > 0
        ]
    )
    return sorted(systems) if systems else [s for s in data.systems if s not in have]


class _Target:
    """The half-width target of :func:`adaptive_sample_sizes` as a variance limit per metric."""

    def __init__(
        self, planner: _Planner, limit: float, metrics: tuple[str, ...], use_true: bool
    ) -> None:
        self.planner = planner
        self.limit = limit
        self.metrics = metrics
        self.use_true = use_true

    def check(self, i: int, planned: dict[int, float]) -> tuple[bool, float, float]:
        """(target met, variance of precision, variance of recall) for system i under ``planned``."""
        var_p, var_nu, var_r = self.planner.bounds(i, planned)
        var_rec = var_r if self.use_true else var_nu
        ok_p = var_p <= self.limit or "precision" not in self.metrics
        ok_r = var_rec <= self.limit or "recall" not in self.metrics
        return ok_p and ok_r, var_p, var_rec

    def met_already(self, i: int) -> bool:
        """True when system i has a sample whose labels alone meet the target."""
        return i in self.planner.sampled and self.check(i, {})[0]

    def all_ok(self, active: list[int], n: int) -> bool:
        """True when every ``active`` system meets the target with n planned draws each."""
        planned = {i: float(n) for i in active}
        return all(self.check(i, planned)[0] for i in active)


def _floor_notes(target: _Target, index: list[int], z: float, units: int) -> dict[int, str]:
    """Per system, '' or the note saying the recall target lies below the exhaustive floor."""
    notes = {i: "" for i in index}
    if target.use_true and "recall" in target.metrics:
        for i in index:
            notes[i] = _recall_floor_note(target.planner, i, {}, target.limit, z, units)
    return notes


def _smallest_common_n(target: _Target, active: list[int], max_n: int) -> int:
    """Bisection for the smallest common n in [1, max_n] meeting the target (max_n if none; 0
    when no system is active)."""
    if not active:
        return 0
    lo, hi = 1, max_n
    if target.all_ok(active, hi):
        while lo < hi:
            mid = (lo + hi) // 2
            if target.all_ok(active, mid):
                hi = mid
            else:
                lo = mid + 1
    return hi


def _plan_row(
    name: str,
    n: float,
    reached: bool,
    var_p: float,
    var_rec: float,
    floor_note: str,
    z: float,
    max_n: int,
) -> dict[str, object]:
    """One output row of :func:`adaptive_sample_sizes`."""
    note = floor_note or ("" if reached else f"target not reached with max_n = {max_n} draws")
    return {
        "system": name,
        "n": int(n),
        "precision_halfwidth": z * np.sqrt(var_p),
        "recall_halfwidth": z * np.sqrt(var_rec),
        "reached": bool(reached and not floor_note),
        "note": note,
    }


def _recall_floor_note(
    planner: _Planner, i: int, planned: dict[int, float], limit: float, z: float, units: int
) -> str:
    """'' when the recall target lies above the exhaustive units' floor ν² Var θ̂, else why not.

    The floor is the part of Var r̂ = θ² Var ν̂ + ν² Var θ̂ + Var ν̂ Var θ̂ that draws cannot
    lower; Var θ̂ falls as 1/U, so about U · ν² Var θ̂ / limit units reach the target.
    """
    nu_hat = planner.plug_in_nu(i)
    var_theta = planner.var_theta if np.isfinite(planner.var_theta) else 0.0
    floor = nu_hat**2 * var_theta
    if not np.isfinite(floor) or floor <= limit:
        return ""
    need = int(np.ceil(units * floor / limit))
    return (
        f"recall target unreachable: the {units} exhaustive units alone give a half-width of "
        f"{z * np.sqrt(floor):.3f} > {z * np.sqrt(limit):.3f}; about {need} exhaustive units in "
        "total would reach it (receval sample --exhaustive-units); nothing drawn for it"
    )


def expected_widths(
    task: Task,
    per_system: int,
    *,
    confidence: float = 0.95,
    bound: str = "expected",
    judge: bool = False,
    design: str = "uniform",
) -> pd.DataFrame:
    """Bound on each system's half-widths if every system got ``per_system`` more draws.

    For a total budget L over m systems, call with ``per_system = L // m``.  Labels already
    collected are reused (their draws stay in the estimator; facts already labelled cost nothing).
    ``judge`` and ``design`` as for :func:`adaptive_sample_sizes` (the draws are uniform by
    default).  Returns ``system, precision_halfwidth, recall_halfwidth``.
    """
    data = build_sample_data(task)
    planner = _Planner(task, data, bound, judge, design)
    z = float(ndtri(0.5 + confidence / 2))
    planned = {i: float(per_system) for i in range(data.m)}
    out = []
    for i, name in enumerate(data.systems):
        var_p, var_nu, var_r = planner.bounds(i, planned)
        out.append(
            {
                "system": name,
                "precision_halfwidth": z * np.sqrt(var_p),
                "recall_halfwidth": z * np.sqrt(var_r if data.U > 0 else var_nu),
            }
        )
    return pd.DataFrame(out)
