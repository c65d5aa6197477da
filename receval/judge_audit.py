"""The judge audit: which systems an automatic judge favours, and what the judge was worth.

LLM judges agree with assessors overall while misranking the top systems, and a judge can
favour a system built on its own model (issue 38).  The prediction-powered estimators stay
unbiased whatever the judge (:mod:`receval.estimators.ppi`), but the organiser should see it.
For every judge of ``judge.tsv`` (its raw grades mapped onto [0, 1] by the declared scale) and
every system, :func:`audit_frame` gives one row of ``judge.csv`` (:data:`AUDIT_COLUMNS`):

* **Implied precision** Σ_x t_i(x) s(x) over the system's outputs: what an organiser using the
  judge alone would publish (an unscored fact takes the judge's mean over the pool facts it
  scored, as :func:`receval.judge.fact_scores` imputes; ``imputed_facts`` counts them), next to
  the run's human-calibrated estimate and interval; ``residual`` = implied − estimate, its
  interval the estimate's interval shifted (the implied precision is exact, not sampled).
* **Favouritism test** (:func:`stratified_permutation_test`): does the judge score the system's
  labelled facts higher (or lower) than *other facts of the same query with the same human
  label*?  The raw residual s − f is no test of favour: it is negative on correct facts and
  positive on wrong ones for any judge short of perfect, so it tracks a system's precision
  (bench/judge_audit.py: the raw-residual test flags systems in most null worlds).  Statistic
  T_i = Σ_{x labelled, output by i} (s(x) − s̄_{h(x)}), h = (query, label), s̄_h the mean over
  the stratum's labelled scored facts; the null distribution permutes the scores among the
  facts of each stratum (``PERMUTATIONS`` Monte Carlo permutations, p = (1 + #{|T*| ≥ |T|}) /
  (1 + P), two-sided, valid at every P; above ``EXACT_MAX`` labelled facts the normal with
  T_i's exact permutation variance instead).  The fact is the unit, so a fact output by several
  systems is permuted once and its score counts for each of them.  Holm's step-down over the
  systems of each judge (family-wise error ≤ 1 − confidence); ``flag`` is ``favours`` /
  ``disfavours`` where the adjusted p is below 1 − confidence.  ``excess`` = T_i / (labelled
  facts of i): the judge's mean excess on the system's facts, in normalised grade units.
  Assumption: given its query and human label, a fact's judge score does not depend on which
  systems output it (exchangeable within strata); a coarse human label (relevant at NIST
  grade ≥ 2) lets a system whose correct facts are *more* relevant look favoured, and a
  ``judge-strata`` design (draws depending on the judge's grade) makes the test approximate.
* **Agreement**: Cohen's κ between the judge thresholded at the middle of its scale
  (normalised grade ≥ 0.5: UMBRELA grade ≥ 2 on 0–4) and the merged human label (≥ 0.5), over
  the labelled facts it scored, each fact once (not importance-weighted); Krippendorff's α
  (interval metric on the normalised grades, :func:`interval_alpha`) of the judge and the
  human label, and (run.json) of every judge and the human label together.
* **Worth** (``--estimator ppi`` with bootstrap replicates): width ratio r = the percentile
  interval width of ppi's precision over the run's replicates / that of the human-only joint
  estimator (the same precision form) over the *same* replicates and labels; ``labels_saved``
  = 1 − r², the share of human labels the judge saved at equal width (negative: it cost).
  With several judges ppi uses their calibrated combination, so these rows carry the judge
  name ``combined``.

Measured (bench/judge_audit.py, TREC RAG 2025 pairs: NIST labels, UMBRELA's real grades, 16
constructed systems, 200 worlds, seed 1): no system flagged in 0.99 (SE 0.007) / 0.98 (0.010)
of null worlds at 10 / 30 labels per system; the favoured system (UMBRELA + 1 grade on its
facts) flagged in 0.865 (0.024) / 1.0, with + 0.2 on a probability judge 0.67 (0.033) / 1.0;
the raw-residual test flags none in only 0.44 / 0.02 of null worlds.  Weighting the strata by
their inverse within-stratum variance did not help (80 worlds, 10 labels: power 0.79 against
0.80, null 0.96 against 0.99).

Pure functions over arrays, then :func:`audit_frame` and :func:`audit_block` over a task and a
score run's output (:class:`receval.estimators.base.ScoringOutput`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from receval.run_record import FlaggedSystem, JudgeAuditBlock, JudgeAuditEntry

#: Columns of ``judge.csv`` (one row per judge and system, plus an ``all`` row per judge).
AUDIT_COLUMNS = [
    "judge",
    "system",
    "labelled_facts",
    "implied_precision",
    "precision",
    "precision_lo",
    "precision_hi",
    "residual",
    "residual_lo",
    "residual_hi",
    "excess",
    "test",
    "p_value",
    "p_adjusted",
    "flag",
    "kappa",
    "alpha",
    "width_ratio",
    "labels_saved",
    "imputed_facts",
    "note",
]
#: Monte Carlo permutations of the favouritism test (p-values resolve down to 1/(P + 1))
PERMUTATIONS = 1999
#: permutations evaluated at once, at most (memory: block × labelled facts floats ≤ CELLS)
BLOCK = 250
CELLS = 2_000_000
TEST_NAME = (
    "stratified permutation (scores permuted among labelled facts of the same query and "
    "human label), two-sided, Holm over systems"
)
#: above this many labelled facts the permutation distribution is replaced by the normal with
#: its exact permutation variance (the Monte Carlo permutations cost P · n log n)
EXACT_MAX = 5000
NORMAL_NAME = TEST_NAME.replace(
    "two-sided", "normal approximation with the exact permutation variance, two-sided"
)
#: the judge's threshold for Cohen's kappa, on its normalised scale
KAPPA_THRESHOLD = 0.5
COMBINED = "combined"
#: the name judge.csv gives the judge of a table without a ``judge`` column
UNNAMED = "(unnamed)"


# --------------------------------------------------------------------------- pure functions


def stratified_permutation_test(
    values: np.ndarray,
    strata: np.ndarray,
    member: np.ndarray,
    rng: np.random.Generator,
    permutations: int = PERMUTATIONS,
) -> tuple[np.ndarray, np.ndarray]:
    """(excess (m,), two-sided Monte Carlo p-value (m,)) of every column of ``member``.

    Parameters
    ----------
    values : (n,) the judge's scores of the labelled facts.
    strata : (n,) integer stratum of every fact (query × human label).
    member : (n, m) bool, whether system i output the fact.

    T_i = Σ_x member_i(x) (v(x) − v̄_{h(x)}); under the null the scores are exchangeable within
    strata, so T_i's distribution is that of the scores permuted within strata; p = (1 + #{|T*_i|
    ≥ |T_i|}) / (1 + P) (Phipson & Smyth 2010: exact Monte Carlo p-value).  excess_i = T_i /
    n_i; NaN (and p NaN) for a system without labelled facts.
    """
    values = np.asarray(values, float)
    member = np.asarray(member, float)
    n, m = member.shape
    _, strata = np.unique(strata, return_inverse=True)
    sums = np.bincount(strata, weights=values)
    mean = sums[strata] / np.bincount(strata)[strata] if n else values
    centred = values - mean
    observed = centred @ member
    counts = member.sum(axis=0)
    order = np.argsort(strata, kind="stable")
    exceed = np.zeros(m)
    tol = 1e-9 * max(1.0, float(np.abs(centred).sum()))
    done = 0
    while done < permutations:
        size = min(BLOCK, max(1, CELLS // max(n, 1)), permutations - done)
        keys = strata[order][None, :] + rng.random((size, n))
        perm = order[np.argsort(keys, axis=1)]  # within-stratum shuffles of the sorted order
        shuffled = np.empty((size, n))
        shuffled[:, order] = centred[perm]
        exceed += (np.abs(shuffled @ member) >= np.abs(observed) - tol).sum(axis=0)
        done += size
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = np.where(counts > 0, observed / counts, np.nan)
    p = np.where(counts > 0, (1.0 + exceed) / (1.0 + permutations), np.nan)
    return excess, p


def permutation_normal_test(
    values: np.ndarray, strata: np.ndarray, member: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(excess, two-sided p) of the same statistic as :func:`stratified_permutation_test`,
    p from the normal with T_i's exact permutation variance (sampling without replacement
    within strata): Var T_i = Σ_h k_ih (n_h − k_ih) / (n_h (n_h − 1)) Σ_{x∈h} (v − v̄_h)²,
    k_ih the system's facts in stratum h (for many labelled facts: the CLT over strata)."""
    from scipy.stats import norm

    values = np.asarray(values, float)
    member = np.asarray(member, float)
    centred, var = permutation_variance(values, strata, member)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = centred @ member
        counts = member.sum(axis=0)
        z = np.where(var > 0, observed / np.sqrt(var), 0.0)
        excess = np.where(counts > 0, observed / counts, np.nan)
    p = np.where(counts > 0, 2 * norm.sf(np.abs(z)), np.nan)
    return excess, p


def permutation_variance(values, strata, member) -> tuple[np.ndarray, np.ndarray]:
    """(values centred within strata (n,), exact permutation variance of T_i (m,))."""
    _, strata = np.unique(strata, return_inverse=True)
    H = int(strata.max(initial=-1)) + 1
    size = np.bincount(strata, minlength=H).astype(float)
    mean = np.bincount(strata, weights=values, minlength=H) / np.maximum(size, 1)
    centred = values - mean[strata]
    ss = np.bincount(strata, weights=centred**2, minlength=H)
    k = np.zeros((H, member.shape[1]))
    np.add.at(k, strata, member)
    factor = np.where(size > 1, ss / np.maximum(size * (size - 1), 1), 0.0)
    return centred, (k * (size[:, None] - k) * factor[:, None]).sum(axis=0)


def favour_test(values, strata, member, rng) -> tuple[np.ndarray, np.ndarray, str]:
    """(excess, p, test name): Monte Carlo permutations up to :data:`EXACT_MAX` labelled
    facts, the normal approximation above."""
    if np.asarray(values).size > EXACT_MAX:
        return (*permutation_normal_test(values, strata, member), NORMAL_NAME)
    return (*stratified_permutation_test(values, strata, member, rng), TEST_NAME)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries are left out of the family)."""
    p = np.asarray(p, float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if not ok.size:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    k = order.size
    adjusted = np.maximum.accumulate(p[order] * (k - np.arange(k)))
    out[order] = np.minimum(adjusted, 1.0)
    return out


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's κ of two binary ratings of the same items: (p_o − p_e) / (1 − p_e) (Cohen 1960);
    NaN without items or when both raters are constant and agree (p_e = 1)."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    if not a.size:
        return float("nan")
    po = float((a == b).mean())
    pa, pb = float(a.mean()), float(b.mean())
    pe = pa * pb + (1 - pa) * (1 - pb)
    return float("nan") if pe >= 1.0 else (po - pe) / (1.0 - pe)


def interval_alpha(matrix: np.ndarray) -> float:
    """Krippendorff's α, interval metric, of a (raters × items) matrix (NaN: no rating); NaN
    when undefined (fewer than two pairable items or no variation).

    In closed form over the pairable items u (m_u ≥ 2 ratings, n ratings in all): with
    Σ_{i≠j} (x_i − x_j)² = 2(m Σx² − (Σx)²) over the ordered pairs of m values,
    α = 1 − (n − 1) Σ_u [(m_u Σ_u x² − (Σ_u x)²) / (m_u − 1)] / (n Σ x² − (Σ x)²)
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability", the coincidence matrix
    summed with δ² = (c − k)²): O(raters × items), where the ``krippendorff`` package builds
    an (items × values × values) array — 12.8 GiB for 7,437 facts and 480 distinct scores."""
    matrix = np.asarray(matrix, float)
    pairable = (np.isfinite(matrix).sum(axis=0) >= 2) if matrix.size else np.zeros(0, bool)
    data = matrix[:, pairable]
    if data.shape[1] < 2 or np.nanstd(data) == 0:
        return float("nan")
    m = np.isfinite(data).sum(axis=0).astype(float)
    s1, s2 = np.nansum(data, axis=0), np.nansum(data * data, axis=0)
    n = m.sum()
    within = np.sum((m * s2 - s1 * s1) / (m - 1.0))
    total = n * s2.sum() - s1.sum() ** 2
    return float(1.0 - (n - 1.0) * within / total)


def percentile_width(replicates: np.ndarray, level: float) -> np.ndarray:
    """(m,) width of the percentile interval at ``level`` of (B, m) replicates."""
    a = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore"):
        lo, hi = np.nanquantile(replicates, [a, 1.0 - a], axis=0)
    return hi - lo


# --------------------------------------------------------------------------- over a task


def _judge_matrix(task) -> tuple[tuple[str, ...], np.ndarray]:
    """(names (an unnamed judge: :data:`UNNAMED`), (F, J) normalised grades, NaN where a judge
    gave none)."""
    from receval.judge import judge_grades

    grades = judge_grades(task)
    names = tuple(n or UNNAMED for n in grades.names)
    return names, np.clip(grades.normalised, 0.0, 1.0)


def _implied(task, scores: np.ndarray, systems: list[str], target: str) -> np.ndarray:
    """(m,) Σ_x t_i(x) s(x) over each system's outputs (``scores`` per fact, imputed)."""
    from receval.estimators.sample_data import query_targets

    out = task.outputs
    t = query_targets(task, target).to_numpy(float)
    codes = pd.Index(systems).get_indexer(out["system"].astype(str))
    ok = codes >= 0
    s = scores[out["fact"].to_numpy(np.int64)]
    return np.bincount(codes[ok], weights=(t * s)[ok], minlength=len(systems))


def _labelled(task, systems: list[str]):
    """(fact ids (n,), labels (n,), strata (n,), member (n, m)) of the labelled facts."""
    labels = task.labels
    ids = labels.index.to_numpy(np.int64)
    y = labels.to_numpy(float)
    ok = np.isfinite(y)
    ids, y = ids[ok], y[ok]
    engine = getattr(task, "engine_judge", None)
    facts = task.facts if engine is None else engine.small.facts
    query = pd.factorize(facts["query_id"].to_numpy()[ids])[0]
    label_code = np.unique(y, return_inverse=True)[1]
    strata = query * (int(label_code.max(initial=0)) + 1) + label_code
    if engine is not None:  # the labelled facts' memberships (receval.engine.summary)
        return ids, y, strata, _engine_member(engine.summary, ids, systems)
    out = task.outputs
    at = pd.Index(ids).get_indexer(out["fact"].to_numpy(np.int64))
    codes = pd.Index(systems).get_indexer(out["system"].astype(str))
    keep = (at >= 0) & (codes >= 0)
    member = np.zeros((ids.size, len(systems)), bool)
    member[at[keep], codes[keep]] = True
    return ids, y, strata, member


def _engine_member(summary, ids: np.ndarray, systems: list[str]) -> np.ndarray:
    """(n, m) bool: which of ``systems`` output each fact of ``ids``, from the runs' aggregates."""
    from receval.engine.sampled_data import member_matrix

    order = np.unique(ids)
    member = member_matrix(summary, order)[np.searchsorted(order, ids)]
    at = pd.Index(summary.systems).get_indexer(systems)
    return np.where(at[None, :] >= 0, member[:, np.maximum(at, 0)], False)


def _pool_figures(task, j: int, s: np.ndarray, systems: list[str], target: str):
    """(fill, implied precision (m,), imputed outputs (m,), pool facts not graded) of judge
    ``j`` with normalised grades ``s`` per fact (NaN: not graded); on the engine path from
    SQL sums over the runs (:meth:`receval.engine.judge.EngineJudge.judge_pool_figures`)."""
    engine = getattr(task, "engine_judge", None)
    if engine is not None:
        return engine.judge_pool_figures(j, systems, target)
    pooled = task.facts["in_pool"].to_numpy(bool)
    missing = np.isnan(s)
    fill = float(np.nanmean(s[pooled & ~missing])) if (pooled & ~missing).any() else 0.5
    implied = _implied(task, np.where(missing, fill, s), systems, target)
    return fill, implied, _imputed(task, missing, systems), int((pooled & missing).sum())


def _imputed(task, missing: np.ndarray, systems: list[str]) -> np.ndarray:
    """(m,) outputs of each system whose fact the judge did not grade."""
    out = task.outputs
    codes = pd.Index(systems).get_indexer(out["system"].astype(str))
    miss = missing[out["fact"].to_numpy(np.int64)] & (codes >= 0)
    return np.bincount(codes[miss], minlength=len(systems))


def _seed(options: Any) -> int:
    seed = getattr(options, "seed", None)
    return int(seed) if isinstance(seed, int | np.integer) else 0


def judge_rows(task, board: pd.DataFrame, options: Any) -> list[dict[str, Any]]:
    """Every judge's rows of ``judge.csv`` (:data:`AUDIT_COLUMNS` but the worth columns)."""
    names, norm = _judge_matrix(task)
    systems = board["system"].astype(str).tolist()
    prec = board.set_index(board["system"].astype(str))
    ids, y, strata, member = _labelled(task, systems)
    truth = y >= 0.5
    level = float(getattr(options, "confidence", 0.95))
    rng = np.random.default_rng([_seed(options), 38])
    rows = []
    for j, name in enumerate(names):
        s = norm[:, j]
        missing = np.isnan(s)
        fill, implied, imputed, pool_missing = _pool_figures(task, j, s, systems, options.target)
        scored = ~missing[ids]
        sv, st, mem = s[ids][scored], strata[scored], member[scored]
        excess, p, test = favour_test(sv, st, mem, rng)
        adjusted = holm(p)
        judged = sv >= KAPPA_THRESHOLD
        for i, system in enumerate(systems):
            mine = mem[:, i]
            row = _system_row(name, system, prec.loc[system], implied[i], mine.sum())
            flag = ""
            if adjusted[i] < 1.0 - level:
                flag = "favours" if excess[i] > 0 else "disfavours"
            row.update(
                excess=excess[i],
                test=test,
                p_value=p[i],
                p_adjusted=adjusted[i],
                flag=flag,
                kappa=cohen_kappa(judged[mine], truth[scored][mine]),
                alpha=interval_alpha(np.stack([sv[mine], y[scored][mine]])),
                imputed_facts=int(imputed[i]),
                note=_note(int(imputed[i]), int(mine.sum())),
            )
            rows.append(row)
        rows.append(
            {
                "judge": name,
                "system": "all",
                "labelled_facts": int(scored.sum()),
                "kappa": cohen_kappa(judged, truth[scored]),
                "alpha": interval_alpha(np.stack([sv, y[scored]])),
                "imputed_facts": pool_missing,
                "flag": ", ".join(
                    f"{systems[i]} ({'+' if excess[i] > 0 else '−'})"
                    for i in np.flatnonzero(adjusted < 1.0 - level)
                ),
                "note": f"{pool_missing} pool facts not graded (imputed with "
                f"the judge's mean {fill:.3g}); {int((~scored).sum())} labelled facts not graded "
                "(left out of the test and agreement)",
            }
        )
    return rows


def _system_row(judge: str, system: str, est: pd.Series, implied: float, labelled) -> dict:
    p, lo, hi = (float(est.get(c, np.nan)) for c in ("precision", "precision_lo", "precision_hi"))
    return {
        "judge": judge,
        "system": system,
        "labelled_facts": int(labelled),
        "implied_precision": implied,
        "precision": p,
        "precision_lo": lo,
        "precision_hi": hi,
        "residual": implied - p,
        "residual_lo": implied - hi,
        "residual_hi": implied - lo,
    }


def _note(imputed: int, labelled: int) -> str:
    notes = []
    if imputed:
        notes.append(f"{imputed} outputs not graded by the judge (imputed with its mean)")
    if labelled < 10:
        notes.append(f"only {labelled} labelled facts graded: the test has little power")
    return "; ".join(notes)


def worth(output: Any, systems: list[str]) -> tuple[np.ndarray, np.ndarray, str]:
    """(width ratio (m,), labels saved (m,), note) of a ppi run: percentile widths of ppi's
    precision and of the human-only joint precision (same form) over the same replicates."""
    m = len(systems)
    nan = np.full(m, np.nan)
    run = getattr(output, "run", None)
    options = output.options
    if getattr(options, "estimator", "") != "ppi":
        return nan, nan, "labels saved: measured by --estimator ppi only"
    if run is None or len(run.replicates.get("precision", ())) < 2:
        return nan, nan, "labels saved: needs bootstrap replicates (not with anytime intervals)"
    design = output.record.design
    forms = (design.precision_forms if design is not None else None) or {}
    ratio = np.array([forms.get(s) == "ratio" for s in systems])
    reps = run.replicates
    human = np.where(ratio[None, :], reps["precision_ratio"], reps["precision_unbiased"])
    level = float(options.confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = percentile_width(reps["precision"], level) / percentile_width(human, level)
    return (
        r,
        1.0 - r**2,
        (
            "width ratio: percentile interval width of ppi / human-only joint estimator, same "
            "replicates and labels; labels saved = 1 - ratio^2 (negative: the judge cost labels)"
        ),
    )


def audit_frame(task, output: Any) -> pd.DataFrame | None:
    """``judge.csv`` for a score run of ``task`` (None when the bundle has no judge)."""
    from receval.judge import judge_grades

    if judge_grades(task) is None:
        return None
    board = output.leaderboard
    rows = judge_rows(task, board, output.options)
    systems = board["system"].astype(str).tolist()
    ratio, saved, note = worth(output, systems)
    frame = pd.DataFrame(rows, columns=AUDIT_COLUMNS)
    names = frame["judge"].unique()
    extra = []
    if len(names) > 1:  # ppi's control is the calibrated combination of every judge
        extra = [{"judge": COMBINED, "system": s, "note": note} for s in systems]
        frame = pd.concat([frame, pd.DataFrame(extra, columns=AUDIT_COLUMNS)], ignore_index=True)
        target = frame["judge"] == COMBINED
    else:
        target = frame["system"] != "all"
        at = frame.index[~target]
        frame.loc[at, "note"] = frame.loc[at, "note"].fillna("") + "; " + note
    for column, values in (("width_ratio", ratio), ("labels_saved", saved)):
        frame.loc[target, column] = values
    return frame


def audit_block(task, frame: pd.DataFrame | None, options: Any) -> JudgeAuditBlock | None:
    """run.json's ``judge_audit``: the method, and per judge κ, α and the flagged systems."""
    if frame is None:
        return None
    names, norm = _judge_matrix(task)
    labels = task.labels.dropna()
    ids = labels.index.to_numpy(np.int64)
    every = np.vstack([norm[ids].T, labels.to_numpy(float)[None, :]])
    judges = {}
    for name in names:
        mine = frame[frame["judge"] == name]
        overall = mine[mine["system"] == "all"].iloc[0]
        flagged = mine[(mine["system"] != "all") & (mine["flag"].fillna("") != "")]
        judges[name] = JudgeAuditEntry(
            test=str(mine["test"].dropna().iloc[0]) if mine["test"].notna().any() else "",
            labelled_facts=int(overall["labelled_facts"]),
            kappa=_round(overall["kappa"]),
            alpha=_round(overall["alpha"]),
            imputed_pool_facts=int(overall["imputed_facts"]),
            flagged={
                str(r.system): FlaggedSystem(
                    flag=r.flag,
                    excess=_round(r.excess),
                    p=_round(r.p_value, 6),
                    p_adjusted=_round(r.p_adjusted, 6),
                )
                for r in flagged.itertuples()
            },
        )
    saved = frame["labels_saved"].to_numpy(float)
    return JudgeAuditBlock(
        test=TEST_NAME,
        permutations=PERMUTATIONS,
        normal_above=f"{EXACT_MAX} labelled facts: {NORMAL_NAME}",
        level=float(options.confidence),
        kappa=f"judge at normalised grade >= {KAPPA_THRESHOLD} vs merged human label "
        ">= 0.5, labelled facts graded by the judge, unweighted",
        alpha="Krippendorff's alpha, interval metric on grades normalised to [0, 1]",
        alpha_all_judges=_round(interval_alpha(every)),
        labels_saved_median=_round(np.nanmedian(saved) if np.isfinite(saved).any() else np.nan),
        judges=judges,
    )


def _round(value: Any, digits: int = 4) -> float | None:
    v = float(value)
    return round(v, digits) if np.isfinite(v) else None


def report_section(block: JudgeAuditBlock | None) -> dict[str, Any] | None:
    """The report's judge-audit section from run.json's ``judge_audit`` (None without one)."""
    if block is None:
        return None
    rows, flagged = [], []
    for name, info in block.judges.items():
        marks = info.flagged
        rows.append(
            [
                name,
                _fmt(info.kappa),
                _fmt(info.alpha),
                "" if info.labelled_facts is None else str(info.labelled_facts),
                "" if info.imputed_pool_facts is None else str(info.imputed_pool_facts),
                ", ".join(marks) or "none",
            ]
        )
        for system, f in marks.items():
            p = [_fmt(f.p, "{:.2g}"), _fmt(f.p_adjusted, "{:.2g}")]
            flagged.append([name, system, f.flag or "", _fmt(f.excess), *p])
    summary = (
        f"Test: {block.test} at level {block.level}; κ: {block.kappa}; "
        f"α over every judge and the human label: {_fmt(block.alpha_all_judges)}; "
        f"median share of human labels the judge saved (ppi): "
        f"{_fmt(block.labels_saved_median)}.  Per system figures in judge.csv."
    )
    return {"summary": summary, "rows": rows, "flagged": flagged}


def _fmt(value: Any, form: str = "{:.3f}") -> str:
    return "—" if value is None else form.format(float(value))
