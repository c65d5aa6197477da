"""The judge calibrated on the labels so far, predictably, for the anytime streams.

``--estimator ppi --intervals anytime`` and ``sample --until-decided --estimator ppi`` use the
judge's score g(x) as the prediction of each fresh fact in the precision terms
(:func:`receval.estimators.anytime.method.judged_precision_terms`,
:func:`receval.estimators.anytime.control.controlled_precision_streams`): per step
Y = Σ w (f − g) + Σ_{X_i} t g, whose conditional mean is the precision for *any* g fixed before
the step's draw.  The raw score (a grade mapped onto [0, 1], the mean of several judges) is a
poor g when the judge is weak or biased: UMBRELA's grade 2 of 4 is 0.5, while NIST finds such
pairs relevant at 0.1–0.9 depending on the topic.  The better g is the judge *calibrated on the
human labels* (:mod:`receval.estimators.judge_calibration`: isotonic per grade level, a shrunk
logit offset per query, several judges combined) — but fitted on labels from the stream's
*earlier* steps only, so that it stays predictable and the anytime guarantee holds:

* The stream's rows (in stream order) are cut into *segments* at clean cuts — row k such
  that every earlier row has a smaller pool step than every row from k on (every row of a
  round in a random order; a round drawn by system, ``legacy``, only at its start) — the
  first at or after :data:`FIRST_REFIT` rows, each further one at or after twice the rows of
  the previous cut (a doubling schedule: the calibration is refitted ≈ log₂(K/32) times).
* Segment c's map g_c is fitted on the labels of the facts drawn at rows before its first
  row (the stream's own draws only, each fact once), or is the raw score for the first
  segment and while fewer than :data:`MIN_LABELS` facts are labelled.  Then **per system** a
  logistic map g_ci(x) = σ(a_ci + b_ci logit g_c(x)), fitted by penalised likelihood
  (:data:`SYSTEM_PRIOR`, towards (0, 1)) on the same labelled facts that system i output.  A
  map shared by the systems
  predicts a high-precision system's facts too low and a low-precision one's too high, and a
  prediction off by a constant within a system *adds* variance to its terms (the raw term's
  own prediction is the system's running precision): on RAG 2025 worlds the shared map made
  some systems' terms 1.8–2.3× as variable as without the judge (bench/until_decided_judge.py).
* A step's term uses its segment's g_c throughout: the prediction at the drawn fact, the
  exact total Σ_{X_i} t g_c over the system's outputs, Σ t g_c over the facts labelled before
  the step, and a range from the largest and smallest g_c over the system's outputs (fixed
  before the draw, unlike the drawn fact's own score).

Every g_c is a function of rows before the segment, so E[term | past] is the precision at
every step, and a later look reads the same terms for the same steps (new rounds only add rows
with larger pool steps: the cuts and fits of earlier segments do not change).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: rows of the stream before the first calibrated segment; then at every doubling
FIRST_REFIT = 32
#: labelled facts a segment's calibration needs (fewer: the previous segment's map)
MIN_LABELS = 10
#: ridge penalty of a system's map (a, b) towards (0, 1) (≈ labels of prior weight)
SYSTEM_PRIOR = 4.0


@dataclass(frozen=True)
class StreamJudge:
    """The judge's score per segment of the stream: ``starts`` (C,) each segment's first row
    (``starts[0]`` = 0), ``tables`` (C, F) each segment's score of every fact of the task,
    ``row_segment`` (K,) and ``step_segment`` (P,) the segment of every row and pool step."""

    starts: np.ndarray
    tables: np.ndarray
    row_segment: np.ndarray
    step_segment: np.ndarray
    #: (C, m, 2) each segment's per-system map (a, b): g_ci = σ(a + b logit g_c); (0, 1): g_c
    offsets: np.ndarray

    def of(self, c: int, task_facts: np.ndarray, systems: np.ndarray) -> np.ndarray:
        """Segment ``c``'s score g_ci(x) of facts ``task_facts`` for ``systems`` (broadcast)."""
        return _mapped(self.tables[c][task_facts], self.offsets[c][systems])

    def at_rows(self, task_facts: np.ndarray) -> np.ndarray:
        """(K, m) the score each row's segment gives the row's fact, per system."""
        z = self.tables[self.row_segment, task_facts][:, None]
        return _mapped(z, self.offsets[self.row_segment])


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def _mapped(p: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """σ(a + b logit p) with (a, b) = ``coef[..., 0]``, ``coef[..., 1]`` (p itself at (0, 1))."""
    a, b = coef[..., 0], coef[..., 1]
    out = 0.5 * (1.0 + np.tanh(0.5 * (a + b * _logit(p))))
    return np.where((a == 0) & (b == 1), p, out)


def segment_starts(pool_step: np.ndarray) -> np.ndarray:
    """The first row of every segment (module docstring) from each row's pool step (K,)."""
    step = np.asarray(pool_step, np.int64)
    K = step.size
    if K < 2:
        return np.zeros(1, np.int64)
    before = np.maximum.accumulate(step)[:-1]  # the largest step among rows < k
    after = np.minimum.accumulate(step[::-1])[::-1][1:]  # the smallest among rows >= k
    clean = np.flatnonzero(before < after) + 1
    starts = [0]
    target = FIRST_REFIT
    while True:
        later = clean[clean >= target]
        if not later.size:
            break
        starts.append(int(later[0]))
        target = 2 * int(later[0])
    return np.asarray(starts, np.int64)


def calibrated_scores(task, facts: np.ndarray, label: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """(F,) every fact's judge score calibrated on the labelled ``facts`` (task fact ids) with
    ``label``: :func:`receval.estimators.judge_calibration.task_calibration` (every judge of
    the table, combined), ``raw`` when the task has no judge table."""
    from receval.estimators.judge_calibration import task_calibration

    fit = task_calibration(task, facts, label)
    return raw if fit is None else np.clip(fit.combined, 0.0, 1.0)


def stream_judge(task, data, st, scores=None) -> StreamJudge:
    """:class:`StreamJudge` of the stream ``st`` of ``data`` (module docstring).  ``scores``:
    (raw (F,), calibrate(ids, label) -> (F,)) over another index than the task's facts (the
    engine path's, :func:`receval.engine.judge_anytime.stream_scores`)."""
    if scores is None:
        from receval.judge import fact_scores

        raw = np.clip(np.asarray(fact_scores(task)[0], float), 0.0, 1.0)
        scores = (raw, lambda ids, y: calibrated_scores(task, ids, y, raw))
    raw = np.clip(np.asarray(scores[0], float), 0.0, 1.0)
    facts = np.asarray(data.facts)[st.fact] if st.fact.size else np.zeros(0, np.int64)
    label = np.asarray(st.label, float)
    starts = segment_starts(st.pool_step)
    tables, offsets = [raw], [np.tile([0.0, 1.0], (data.m, 1))]
    for start in starts[1:]:
        seen = np.isfinite(label[:start])
        ids, first = np.unique(facts[:start][seen], return_index=True)
        if ids.size < MIN_LABELS:
            tables.append(tables[-1])
            offsets.append(offsets[-1])
            continue
        y = label[:start][seen][first]
        tables.append(scores[1](ids, y))
        own = np.asarray(data.member, bool)[st.fact[:start][seen][first]]  # (n, m)
        offsets.append(system_offsets(tables[-1][ids], y, own))
    row_segment = np.searchsorted(starts, np.arange(st.fact.size), side="right") - 1
    step_segment = np.zeros(st.P, np.int64)
    if st.fact.size:  # a step's rows share a segment (the cuts are clean)
        step_segment[st.pool_step] = row_segment
        step_segment = np.maximum.accumulate(step_segment)
    return StreamJudge(starts, np.stack(tables), row_segment, step_segment, np.stack(offsets))


def system_offsets(g: np.ndarray, label: np.ndarray, own: np.ndarray) -> np.ndarray:
    """(m, 2) per system (a_i, b_i) of the map g ↦ σ(a_i + b_i logit g) maximising
    Σ_{x ∈ X_i} log-likelihood(f(x) | σ(a_i + b_i logit g(x))) − SYSTEM_PRIOR (a_i² +
    (b_i − 1)²)/2 over the labelled facts (``g``, ``label`` (n,), ``own`` (n, m) whether system
    i output each): an offset (the system's precision) and a slope (how much the judge tells
    *within* the system, b_i < 1 pulling towards its mean); (0, 1) for a system without
    labelled facts.  Newton steps, two parameters per system."""
    m = own.shape[1]
    z = _logit(g)
    coef = np.tile([0.0, 1.0], (m, 1))
    for i in np.flatnonzero(own.any(axis=0)):
        x = np.stack([np.ones(int(own[:, i].sum())), z[own[:, i]]], axis=1)
        y = label[own[:, i]]
        theta = np.array([0.0, 1.0])
        for _ in range(25):
            p = 0.5 * (1.0 + np.tanh(0.5 * (x @ theta)))
            grad = x.T @ (y - p) - SYSTEM_PRIOR * (theta - [0.0, 1.0])
            hess = (x * (p * (1 - p))[:, None]).T @ x + SYSTEM_PRIOR * np.eye(2)
            step = np.linalg.solve(hess, grad)
            theta = theta + step
            if np.abs(step).max() < 1e-8:
                break
        coef[i] = theta
    return coef


def segment_controls(sj: StreamJudge, t_all, sys_codes, facts, stratum, m: int, B: int = 1):
    """Per segment and system: Σ_{X_i} t g_ci (C, m), and the largest and smallest g_ci over
    the system's outputs per popularity stratum (C, m, B) (``t_all``, ``sys_codes``, ``facts``,
    ``stratum`` per output row of the view; ``stratum`` None: one stratum)."""
    C = sj.tables.shape[0]
    b = np.zeros(facts.size, np.int64) if stratum is None else stratum
    total = np.zeros((C, m))
    high = np.zeros((C, m, B))
    low = np.ones((C, m, B))
    for c in range(C):
        g = sj.of(c, facts, sys_codes)
        total[c] = np.bincount(sys_codes, weights=t_all * g, minlength=m)
        np.maximum.at(high[c], (sys_codes, b), g)
        np.minimum.at(low[c], (sys_codes, b), g)
    return total, high, low


def known_predictions(sj: StreamJudge, kn, values: np.ndarray, task_facts, segment, by_step=0):
    """Σ t_i g_ci over the facts labelled before each row (``by_step`` 0) or pool step
    (``by_step`` = P), with c the row's or step's own ``segment``: ``values`` (K, m) = t_i at
    each row's fact, ``kn`` the :class:`~receval.estimators.anytime.control.KnownLabels`."""
    m = values.shape[1]
    out = np.zeros((by_step, m) if by_step else values.shape)
    for c in np.unique(segment):
        g = sj.of(c, task_facts[:, None], np.arange(m)[None, :])  # (K, m)
        part = kn.by_step(values * g, by_step) if by_step else kn.before(values * g)
        mine = segment == c
        out[mine] = part[mine]
    return out


@dataclass(frozen=True)
class JudgeReach:
    """What a fresh draw can move each system's judged term by (m, P): ``reach`` the step's
    Σ 1/own over its draws (w = t/q ≤ 1/own), ``g_high``/``g_low`` the largest and smallest g of
    the step's segment over the system's outputs, ``single`` (P,) whether the step is one draw
    and ``exact`` (m, P) where the term is exact (a census, or every fact labelled)."""

    reach: np.ndarray
    g_high: np.ndarray
    g_low: np.ndarray
    single: np.ndarray
    exact: np.ndarray

    def scaled(self, n: np.ndarray) -> JudgeReach:
        """The reach of the terms times ``n`` (m, 1) (pooled recall: n_i π_i)."""
        return JudgeReach(self.reach * n, self.g_high, self.g_low, self.single, self.exact)


def judged_terms(task, data, st, output_arrays):
    """(:class:`~receval.estimators.anytime.pairs.SystemTerms`, :class:`JudgeReach`): the
    paired precision terms with the judge's calibrated score g as the prediction of each fresh
    fact (:func:`receval.estimators.anytime.method.judged_precision_terms`): per step
    Y = Σ w (f − g) + [correct labelled so far] + [Σ t g over the outputs not labelled so far],
    w = t/q over the step's fresh draws, g the step's segment's map (module docstring), so
    E[Y | past] is the system's precision.  The range, fixed before the draw, is
    [base − Σ ḡ/own, base + Σ (1 − g̲)/own], ḡ and g̲ the largest and smallest g over the
    system's outputs.  A census system keeps its exact terms."""
    from receval.estimators.anytime.pairs import (
        EXACT_TOLERANCE,
        SystemTerms,
        _known_by_step,
        precision_terms,
    )
    from receval.estimators.sample_data import design_probabilities

    plain = precision_terms(task, data, st)
    if hasattr(task, "judge_stream_controls"):  # the engine path: from the runs' aggregates
        sj, totals, g_max, g_min = task.judge_stream_controls(data, st, 1)
    else:
        view = design_probabilities(task, True)[0]
        t_all, sys_codes, facts, _ = output_arrays(view, data)
        sj = stream_judge(task, data, st)
        totals, g_max, g_min = segment_controls(sj, t_all, sys_codes, facts, None, data.m)
    g_max, g_min = g_max[..., 0], g_min[..., 0]
    task_facts = np.asarray(data.facts)[st.fact]
    g = sj.at_rows(task_facts)  # (K, m)
    m, P = data.m, st.P
    seg = sj.step_segment  # (P,)
    target = data.target[st.fact]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = target * np.where(st.q > 0, 1.0 / st.q, 0.0)[:, None]
        high = np.where(st.own > 0, 1.0 / st.own, 0.0)
    act = st.own > 0
    correct, mass, kn = _known_by_step(st, target, P)
    known_g = known_predictions(sj, kn, target, task_facts, seg, by_step=P).T
    fresh = act & ~kn.known[:, None]
    label = np.nan_to_num(np.asarray(st.label, float))
    y = np.zeros((m, P))
    reach = np.zeros((m, P))
    for i in range(m):  # m bincounts over the steps
        w = np.where(fresh[:, i], ratio[:, i], 0.0)
        y[i] = np.bincount(st.pool_step, weights=w * (label - g[:, i]), minlength=P)
        reach[i] = np.bincount(st.pool_step, weights=np.where(act[:, i], high[:, i], 0.0),
                               minlength=P)  # fmt: skip
    done = mass >= 1.0 - EXACT_TOLERANCE  # all known: no fresh fact left
    reach = np.where(done, 0.0, reach)
    g_high, g_low = g_max[seg].T, g_min[seg].T
    base = correct + np.where(done, 0.0, totals[seg].T - known_g)
    a_s = np.asarray(plain.active, bool)
    keep = ~np.isnan(np.asarray(plain.exact, float)) if plain.exact is not None else None
    y, lo, hi = (
        np.where(a_s, y + base, 0.0),
        np.where(a_s, base - reach * g_high, 0.0),
        np.where(a_s, base + reach * (1.0 - g_low), 0.0),
    )
    exact = done | ~a_s
    if keep is not None and keep.any():  # a census keeps its exact terms
        y[keep], lo[keep], hi[keep] = plain.y[keep], plain.lo[keep], plain.hi[keep]
        exact[keep] = True
    single = np.bincount(st.pool_step, minlength=P) == 1
    terms = SystemTerms(y, lo, hi, a_s, plain.exact)
    return terms, JudgeReach(np.where(a_s, reach, 0.0), g_high, g_low, single, exact)


def pair_range(terms, reach: JudgeReach, a, b) -> tuple[np.ndarray, np.ndarray]:
    """The range of D = Y_a − Y_b per step (pairs × P), fixed before the draw.  In general
    [lo_a − hi_b, hi_a − lo_b].  At a step of one fresh draw x where neither term is exact,
    D − (base_a − base_b) = w_a (f − g_a) − w_b (f − g_b) with w_i ∈ [0, R_i] and one label f:
    at f = 1 it is at most w_a (1 − g_a) ≤ R_a (1 − g̲_a) and at least −R_b (1 − g̲_b), at
    f = 0 at most R_b ḡ_b and at least −R_a ḡ_a (linear in f, so f ∈ [0, 1] lies between) —
    about half the sum of the two ranges."""
    lo, hi = terms.lo[a] - terms.hi[b], terms.hi[a] - terms.lo[b]
    r_a, r_b = reach.reach[a], reach.reach[b]
    top_a, top_b = reach.g_high[a], reach.g_high[b]
    up_a, up_b = 1.0 - reach.g_low[a], 1.0 - reach.g_low[b]
    shift = (terms.lo[a] + r_a * top_a) - (terms.lo[b] + r_b * top_b)
    joint = reach.single[None, :] & ~reach.exact[a] & ~reach.exact[b]
    lo = np.where(joint, shift - np.maximum(r_a * top_a, r_b * up_b), lo)
    hi = np.where(joint, shift + np.maximum(r_a * up_a, r_b * top_b), hi)
    return lo, hi


def paired_judge_tests(terms, reach: JudgeReach, ok: np.ndarray, alpha: float):
    """:func:`receval.estimators.anytime.pairs.pair_tests` on the judged terms with the pair
    ranges of :func:`pair_range` (Holm over every ordered pair, as there)."""
    from receval.estimators.anytime.pairs import chunked, decide, log_capitals, ok_pairs

    idx, pairs = ok_pairs(ok)

    def part(a, b):
        lo, hi = pair_range(terms, reach, a, b)
        return log_capitals(
            terms.y[a] - terms.y[b], lo, hi, terms.active[a] & terms.active[b]
        )  # fmt: skip

    out = chunked(pairs, terms.y.shape[1], part)
    return decide(pairs, out, terms.y.shape[0], idx, alpha, terms.exact)
