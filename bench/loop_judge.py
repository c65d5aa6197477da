"""Where the labelling loop's ppi tests lose against the judge's variance floor.

RAG 2025 worlds (``until_decided_judge.rag_systems``: 8 constructed systems over the real TREC
RAG 2025 pairs, NIST labels as the truth, UMBRELA grade 0–4 as the judge), ``--fixed`` equal
rounds of ``--batch`` draws (the loop's floor and random order, counts fixed: ``fixed_round``),
then, at the last look, per pair of systems whose true precisions differ by ≥ 0.02, the paired
step terms D the loop's tests bet on, under each variant against joint's (no judge):

* ``var``: Var(D) over joint's (the variance the tests see; the floor study's 0.73–0.83);
* ``z2``: the Gaussian information n·mean(D)²/Var(D) over joint's (what a test free of anytime
  costs would gain: the labels it needs scale with the inverse);
* ``logcap``: the betting test's log capital in the true direction over joint's (what the
  loop's tests gain: at a growth rate per step, the steps to decide scale with the inverse);
* ``best_const``: the log capital of the best constant bet in hindsight, λ = c/(−lo) with
  c ∈ [0, 0.95] (what better-tuned bets could reach within the same ranges);
* ``open``: pairs of all still open at the last look.

Each ratio is a median over pairs, overall and over the *mid* pairs (true gap 0.05–0.2: those
still being decided when the loop stops; the easy ones are decided early whatever the judge).
Variants: ``ppi`` (the loop today: :mod:`receval.estimators.judge_stream`, isotonic per grade,
a logit offset per query, a logistic map per system, refitted at every doubling of the rows),
``cellK`` (the per-(query, grade) calibration: each cell's share correct among the labels so
far, shrunk toward the loop's calibration by K pseudo-labels), ``grow1.25`` (refitted at every
1.25× growth instead of 2×), ``cap0.7``/``cap0.9`` (the bets' truncation, ``pairs.CAP``, 0.5 in
use; joint too), ``prior0.1`` (the bets' prior second moment per unit of range, 0.25 in use),
``toward20`` (the bets' running mean shrunk toward the judge's own predictable estimate of the
difference by 20 pseudo-steps, instead of toward 0 by one), ``clip0.1``/``clip0.2`` (every
prediction clipped into [0.1, 0.9] / [0.2, 0.8]: lighter tails, narrower ranges) and ``oracle``
(the judge calibrated per (query, grade) on *every* pair's label, a bound no loop can reach).
``--by-judge``: the rounds drawn by ``sample --by-judge``'s design; ``--variants``: only some.
``bet:SPEC`` (:func:`mixed_bets`): other bettors on the judged terms, e.g. ``bet:sq@0.5``,
``bet:agrapa@0.5|flat@0.7`` (the average capital of two).  Recorded [diagnose_ppi_bet...],
10 worlds, 6 rounds of 200: the pairs being decided gain within a few per cent of the bets in
use, so the bets are not where the judge's information is lost.

``--segments``: per system by *true rank* (0: the best) and per calibration segment of the
stream (s0 the raw grade / 4, s1 the map fitted on ≥ 32 labels, then one per doubling), the
judged terms' mean squared error E[(Y − π)²] over the plain terms' on the same steps, at the
last look, means over the repetitions (``--variants``, ``a+b`` combined; default ``ppi,oracle``).
Recorded [segments_level_centred_oracle+level_oracle+centred] at commit eb3a44e, 8 worlds, 6
rounds of 200 (``level`` is ``ppi``, the library's terms): the best system's error is 5.2×,
16.6×, 5.7×, 1.5×, 1.3×, 1.04×, 1.16× the plain terms' in s0–s6 (1.14× over all steps), the
second best's 0.88× overall, ranks 2–7 0.74–0.81×; the oracle calibration changes that
little (best 1.07×, second 0.85×, others 0.67–0.80×).  [segments_ppi_oracle] (bb54dab, the
same worlds) adds the pairs across the boundary of the best two: the judged paired terms'
variance over joint's is 0.89 (ranks 0-2), 0.84 (0-3), 0.81 (1-2), 0.78 (1-3); oracle 0.82,
0.79, 0.75, 0.74.  So the judge helps least for the
systems a ``--top K`` decision rests on: their precision is high (0.75–0.85), their outputs
mostly relevant, and UMBRELA's grade tells little *within* them.  ``centred`` (eb3a44e's
``judge_stream.CONTROL = "centred"``, since removed: each system's running precision plus β ×
the map's deviation from the system's mean, β fitted on earlier labels) brought every segment
to ≤ 1.14× (best system 0.94× overall), but the loop spent more labels with it
(bench/until_decided_judge.py, [rag_centred]).

    PYTHONPATH=. python bench/loop_judge.py --segments --reps 8 --fixed 6 \
        --variants ppi,oracle

    PYTHONPATH=. python bench/loop_judge.py --reps 10 --fixed 6 --batch 200
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

#: the ppi variants and joint's CAP variants compared with joint at CAP 0.5
VARIANTS = ("ppi", "cell2", "cell5", "cell10", "grow1.25", "cap0.7", "cap0.9", "prior0.1",
            "toward20", "clip0.1", "clip0.2", "clip0.3", "clip0.2+cap0.7", "oracle", "joint_cap0.7", "joint_cap0.9",
            "joint_prior0.1")  # fmt: skip
#: the true precision gaps of the mid pairs
MID = (0.05, 0.2)
#: the pairs of true ranks across the boundary of the best two (0: the best)
BOUNDARY = ((0, 2), (0, 3), (1, 2), (1, 3))


def world_tasks(world, rep: int, args):
    """A fresh constructed world and its task after each of ``args.fixed`` equal rounds."""
    import dataclasses

    from until_decided_judge import COLUMNS, _labels, rag_systems

    from receval.estimators.judge_calibration import judge_strata_design
    from receval.task import with_annotation
    from receval.until_decided import fixed_round

    rag_systems(world, args.systems, args.seed * 1000 + rep, False)
    judge = world.judge_table({"umbrela": world.grade}, ["umbrela"], False)
    config = dataclasses.replace(world.task.config, judge_scale=(0.0, 4.0))
    base = with_annotation(dataclasses.replace(world.task, config=config), judge=judge)
    task, samples = base, None
    for r in range(args.fixed):
        design = judge_strata_design(task) if getattr(args, "by_judge", False) else "uniform"
        drawn = fixed_round(task, args.batch, seed=rep * 100 + r, distribution=design)
        new = drawn.samples.reindex(columns=COLUMNS)
        new.attrs = {}
        samples = new if samples is None else pd.concat([samples, new], ignore_index=True)
        task = with_annotation(base, samples=samples, judgments=_labels(world, samples),
                               judge=judge)  # fmt: skip
        yield r + 1, task


def oracle_scores(world) -> np.ndarray:
    """Every fact's share correct among all pairs of its (query, grade): the oracle map."""
    pairs = world.pairs
    rel = (pairs["grade_nist"].to_numpy() >= 2).astype(float)
    key = pd.factorize(pairs["q"])[0] * 5 + pairs["grade_umb"].to_numpy(int)
    n = np.bincount(key, minlength=key.max() + 1)
    hits = np.bincount(key, rel, minlength=key.max() + 1)
    return (hits / np.maximum(n, 1))[key][world.at]


def cell_calibration(world, prior: float):
    """``judge_stream.calibrated_scores`` with each (query, grade) cell's share correct among
    the labelled facts, shrunk toward the fitted calibration by ``prior`` pseudo-labels."""
    from receval.estimators import judge_stream as js

    fitted = js.calibrated_scores
    query = pd.factorize(world.task.facts["query_id"])[0]
    cell = query * 5 + world.grade.astype(int)

    def calibrated(task, facts, label, raw):
        g = fitted(task, facts, label, raw)
        n = np.bincount(cell[facts], minlength=cell.max() + 1).astype(float)
        hits = np.bincount(cell[facts], weights=label, minlength=n.size)
        return (hits[cell] + prior * g) / (n[cell] + prior)

    return calibrated


def segment_starts(growth: float):
    """``judge_stream.segment_starts`` refitting at every ``growth``× the rows (2× in use)."""
    from receval.estimators import judge_stream as js

    def starts(pool_step):
        step = np.asarray(pool_step, np.int64)
        if step.size < 2:
            return np.zeros(1, np.int64)
        before = np.maximum.accumulate(step)[:-1]
        after = np.minimum.accumulate(step[::-1])[::-1][1:]
        clean = np.flatnonzero(before < after) + 1
        out, target = [0], js.FIRST_REFIT
        while (later := clean[clean >= target]).size:
            out.append(int(later[0]))
            target = int(np.ceil(growth * later[0]))
        return np.asarray(out, np.int64)

    return starts


def clipped(mapped, edge: float):
    """``judge_stream._mapped`` with every prediction clipped into [edge, 1 − edge] (lighter
    tails and narrower ranges for the terms, at some cost in variance)."""

    def inner(p, coef):
        return np.clip(mapped(p, coef), edge, 1.0 - edge)

    return inner


def patches(world, variant: str) -> list:
    """The patches that make ``variant`` (``a+b``: both)."""
    if "+" in variant:
        return [patch for part in variant.split("+") for patch in patches(world, part)]
    from receval.estimators import judge_stream as js
    from receval.estimators.anytime import pairs

    if variant.startswith("bet:"):
        return [mock.patch.object(pairs, "log_capitals", mixed_bets(variant[4:]))]
    if variant.startswith("cell"):
        return [
            mock.patch.object(js, "calibrated_scores", cell_calibration(world, float(variant[4:])))
        ]
    if variant.startswith("grow"):
        return [mock.patch.object(js, "segment_starts", segment_starts(float(variant[4:])))]
    if variant.startswith("clip"):
        return [mock.patch.object(js, "_mapped", clipped(js._mapped, float(variant[4:])))]
    if "prior" in variant:
        return [mock.patch.object(pairs, "PRIOR_UNIT_MOMENT", float(variant.rsplit("prior", 1)[1]))]
    if "cap" in variant:
        return [mock.patch.object(pairs, "CAP", float(variant.rsplit("cap", 1)[1]))]
    if variant == "oracle":
        table = oracle_scores(world)
        return [mock.patch.object(js, "calibrated_scores", lambda *a, **k: table)]
    return []  # fmt: skip


def one_bettor(d, lo, hi, act, kind: str, cap: float):
    """The log-capital paths (up, down) of one bettor on D: ``agrapa`` (the bets in use, the
    second moment per unit of range), ``sq`` (per squared range) or ``flat`` (unscaled), each
    truncated to ``cap``/(−lo) and ``cap``/hi; predictable (earlier steps only)."""
    from receval.estimators.anytime import pairs as pp

    act = act & (hi > lo)
    d = np.where(act, d, 0.0)
    width = np.where(act, hi - lo, 1.0)
    n_prev = np.cumsum(act, axis=1) - act
    mean_prev = (np.cumsum(d, axis=1) - d) / (n_prev + 1.0)
    power = {"agrapa": 1, "sq": 2, "flat": 0}[kind]
    scale = width**power
    unit = np.where(act, d**2 / scale, 0.0)
    prior = pp.PRIOR_UNIT_MOMENT ** max(power, 1) * (width if power == 0 else 1.0)
    second = (prior + np.cumsum(unit, axis=1) - unit) / (n_prev + 1.0) * scale + mean_prev**2
    with np.errstate(divide="ignore", invalid="ignore"):
        bet = mean_prev / second
        up = np.where(act, np.clip(bet, 0.0, np.where(lo < 0, cap / -lo, np.inf)), 0.0)
        down = np.where(act, np.clip(-bet, 0.0, np.where(hi > 0, cap / hi, np.inf)), 0.0)
    return pp.capital_path(up, d), pp.capital_path(down, -d), act, d


def mixed_bets(spec: str):
    """``pairs.log_capitals`` betting on the average capital of the bettors of ``spec``
    (``kind@cap`` joined by ``|``, :func:`one_bettor`): an average of test supermartingales
    is one, so the tests stay valid; it costs at most log(bettors) against the best of them."""
    from receval.estimators.anytime import pairs as pp

    def log_capitals(d, lo, hi, active, work=None):  # work: pairs.Work buffers (unused)
        paths = [one_bettor(d, lo, hi, active, *(p.split("@")[0], float(p.split("@")[1])))
                 for p in spec.split("|")]  # fmt: skip
        act, dd = paths[0][2], paths[0][3]

        def mix(k):
            stack = np.stack([p[k] for p in paths])
            top = stack.max(axis=0)
            return pp.running_top(top + np.log(np.exp(stack - top).mean(axis=0)))

        return (mix(0), mix(1), *pp.step_moments(dd, act))

    return log_capitals


def pair_figures(task, world, variant: str, alpha: float = 0.05) -> dict:
    """The terms and the paired tests of ``variant`` (joint: without the judge)."""
    from receval.estimators.anytime.method import output_arrays
    from receval.estimators.anytime.pairs import pair_tests, precision_terms
    from receval.estimators.anytime.stream import build_stream
    from receval.estimators.judge_stream import judged_terms, paired_judge_tests
    from receval.estimators.sample_data import build_sample_data

    data = build_sample_data(task, "micro")
    st = build_stream(task, data)
    ok = np.ones(data.m, bool)
    with ExitStack() as stack:
        for patch in patches(world, variant):
            stack.enter_context(patch)
        if variant.startswith("joint"):
            terms = precision_terms(task, data, st)
            tests = pair_tests(terms, ok, alpha)
        else:
            terms, reach = judged_terms(task, data, st, output_arrays)
            if variant.startswith("toward"):
                tests = toward_judge_tests(terms, reach, ok, alpha, float(variant[6:]))
            else:
                tests = paired_judge_tests(terms, reach, ok, alpha)
    slope = None
    if variant == "ppi":
        from receval.estimators.judge_stream import stream_judge

        slope = float(np.median(stream_judge(task, data, st).offsets[-1][:, 1]))
    return {"terms": terms, "tests": tests, "systems": list(data.systems), "slope": slope}


def toward_judge_tests(terms, reach, ok, alpha: float, k: float):
    """``paired_judge_tests`` with the bets' running mean of D shrunk toward the judge's own
    predictable estimate of the difference (the step's base_a − base_b: known labels plus the
    calibrated judge's predicted mass) by ``k`` pseudo-steps, instead of toward 0 by one."""
    from receval.estimators.anytime import pairs as pp
    from receval.estimators.judge_stream import pair_range

    base = np.where(terms.active, terms.lo + reach.reach * reach.g_high, 0.0)
    idx, pairs = pp.ok_pairs(ok)
    a, b = pairs.T
    lo, hi = pair_range(terms, reach, a, b)
    act = terms.active[a] & terms.active[b] & (hi > lo)
    d = np.where(act, terms.y[a] - terms.y[b], 0.0)
    width = np.where(act, hi - lo, 1.0)
    n_prev = np.cumsum(act, axis=1) - act
    mean_prev = (np.cumsum(d, axis=1) - d + k * (base[a] - base[b])) / (n_prev + k)
    unit = np.where(act, d**2 / width, 0.0)
    unit_prev = (pp.PRIOR_UNIT_MOMENT + np.cumsum(unit, axis=1) - unit) / (n_prev + 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bet = mean_prev / (unit_prev * width + mean_prev**2)
        up = np.where(act, np.clip(bet, 0.0, np.where(lo < 0, pp.CAP / -lo, np.inf)), 0.0)
        down = np.where(act, np.clip(-bet, 0.0, np.where(hi > 0, pp.CAP / hi, np.inf)), 0.0)
    out = (pp.running_top(pp.capital_path(up, d)), pp.running_top(pp.capital_path(down, -d)),
           *pp.step_moments(d, act))  # fmt: skip
    return pp.decide(pairs, out, terms.y.shape[0], idx, alpha, terms.exact)


def pair_row(f: dict, k: int, a: int, b: int, sign: int) -> tuple[float, ...]:
    """(Var(D), n·mean²/Var, log capital, best constant bet's log capital, kurtosis of D)
    of pair k."""
    t, tests = f["terms"], f["tests"]
    act = t.active[a] & t.active[b]
    d = sign * (t.y[a] - t.y[b])[act]
    lo = (t.lo[a] - t.hi[b])[act] if sign > 0 else -(t.hi[a] - t.lo[b])[act]
    scale = 1.0 / np.maximum(-lo, 1e-12)
    best = max(np.log1p(np.maximum(c * scale * d, -1 + 1e-12)).sum()
               for c in np.linspace(0.0, 0.95, 96))  # fmt: skip
    cap = tests.up[k] if sign > 0 else tests.down[k]
    kurtosis = ((d - d.mean()) ** 4).mean() / max(d.var(), 1e-12) ** 2
    return d.var(), act.sum() * d.mean() ** 2 / max(d.var(), 1e-12), cap, best, kurtosis


def compare(world, task, variants: tuple[str, ...] = VARIANTS) -> dict:
    """Per pair with a true difference: each variant's ratios to joint's (module docstring)."""
    out = {v: pair_figures(task, world, v) for v in ("joint", *variants)}
    true = world.precision.reindex(out["joint"]["systems"]).to_numpy()
    gaps, rows = [], []
    for k, (a, b) in enumerate(out["joint"]["tests"].pairs):
        gap = abs(true[a] - true[b])
        if gap < 0.02:
            continue
        sign = 1 if true[a] > true[b] else -1
        gaps.append(gap)
        rows.append({v: pair_row(f, k, a, b, sign) for v, f in out.items()})
    gaps = np.asarray(gaps)
    mid = (gaps >= MID[0]) & (gaps < MID[1])
    figures = {}
    for v in variants:
        for i, name in enumerate(("var", "z2", "logcap", "best_const", "kurtosis")):
            r = np.array([row[v][i] / max(row["joint"][i], 1e-12) for row in rows])
            figures[f"{v}_{name}"] = float(np.median(r))
            figures[f"{v}_{name}_mid"] = float(np.median(r[mid])) if mid.any() else np.nan
    for v, f in out.items():
        figures[f"open_{v}"] = int((~f["tests"].decided()).sum())
    figures["joint_logcap_mid"] = float(np.median([row["joint"][2] for row in np.array(rows)[mid]]))
    figures["ppi_map_slope"] = out["ppi"]["slope"]
    figures["mid_pairs"] = int(mid.sum())
    return figures


def segment_errors(world, task, variants: tuple[str, ...]) -> dict:
    """Per variant, per system by true rank (0: the best) and per calibration segment of the
    stream: the judged terms' mean squared error E[(Y − π)²] over the segment's steps, over
    the plain terms' (joint's) on the same steps; and per pair of :data:`BOUNDARY` ranks the
    paired terms' variance over joint's, all steps (key ``(variant, "pair a-b", -1)``)."""
    from receval.estimators.anytime.method import output_arrays
    from receval.estimators.anytime.pairs import precision_terms
    from receval.estimators.anytime.stream import build_stream
    from receval.estimators.judge_stream import judged_terms, stream_judge
    from receval.estimators.sample_data import build_sample_data

    data = build_sample_data(task, "micro")
    st = build_stream(task, data)
    plain = precision_terms(task, data, st)
    true = world.precision.reindex(list(data.systems)).to_numpy()
    rank = (-true).argsort().argsort()
    seg = stream_judge(task, data, st).step_segment
    out = {}
    for v in variants:
        with ExitStack() as stack:
            for patch in patches(world, v):
                stack.enter_context(patch)
            terms, _ = judged_terms(task, data, st, output_arrays)
        for i in range(data.m):
            for c in np.unique(seg[plain.active[i]]):
                on = plain.active[i] & (seg == c)
                err = ((terms.y[i][on] - true[i]) ** 2).mean()
                out[(v, int(rank[i]), int(c))] = err / ((plain.y[i][on] - true[i]) ** 2).mean()
            on = plain.active[i]
            out[(v, int(rank[i]), -1)] = ((terms.y[i][on] - true[i]) ** 2).mean() / (
                (plain.y[i][on] - true[i]) ** 2
            ).mean()
        by_rank = np.argsort(rank)
        for r_a, r_b in BOUNDARY:  # Var(D) of the pairs across the best two, over joint's
            a, b = by_rank[r_a], by_rank[r_b]
            on = plain.active[a] & plain.active[b]
            ratio = (terms.y[a] - terms.y[b])[on].var() / (plain.y[a] - plain.y[b])[on].var()
            out[(v, f"pair {r_a}-{r_b}", -1)] = ratio
    return out


def segments_study(args, variants: tuple[str, ...]) -> dict:
    """``--segments``: :func:`segment_errors` at the last look, means over the repetitions:
    ``{variant: {"rank r": {"all": ratio, "s0": ..., "s1": ...}}}`` (s0: the raw score, s1
    the map fitted on ≥ 32 labels, then every doubling)."""
    from judges import RagWorld

    world = RagWorld(2, args.seed)
    rows: dict[tuple, list[float]] = {}
    for rep in range(args.reps):
        for look, task in world_tasks(world, rep, args):
            if look == args.fixed:
                for key, value in segment_errors(world, task, variants).items():
                    rows.setdefault(key, []).append(value)
        print(f"  rep {rep}", file=sys.stderr, flush=True)
    out: dict = {}
    for (v, r, c), values in sorted(rows.items(), key=str):
        name = "all" if c < 0 else f"s{c}"
        row = r if isinstance(r, str) else f"rank {r}"
        out.setdefault(v, {}).setdefault(row, {})[name] = round(float(np.mean(values)), 3)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=0, reps=10)
    parser.add_argument("--systems", type=int, default=8)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--fixed", type=int, default=6)
    parser.add_argument("--every", type=int, default=2, help="compare at every k-th look")
    parser.add_argument(
        "--variants", default="", help="compare only these (with ppi), comma-separated"
    )
    parser.add_argument(
        "--by-judge", action="store_true",
        help="draw the rounds with sample --by-judge's design (Neyman over the judge's grades, "
        "recomputed from the labels before each round) instead of uniformly",
    )  # fmt: skip
    parser.add_argument(
        "--segments", action="store_true",
        help="per system by true rank and per calibration segment: the judged terms' mean "
        "squared error over the plain terms' (segments_study)",
    )  # fmt: skip
    args = harness.parse(parser, argv)
    from judges import RagWorld

    if args.segments:
        variants = tuple(args.variants.split(",")) if args.variants else ("ppi", "oracle")
        start = time.time()
        figures = segments_study(args, variants)
        figures["note"] = ("E[(Y - pi)^2] of the judged terms over the plain terms', per system "
                           "by true rank (0 best) and calibration segment, last look")  # fmt: skip
        print(json.dumps(figures, indent=1))
        harness.store(args, "loop_judge", figures, argv, title="segments_" + "_".join(variants),
                      seconds=round(time.time() - start, 1))  # fmt: skip
        return

    variants = tuple(args.variants.split(",")) if args.variants else VARIANTS
    known = {v for v in variants if v.startswith("bet:")} | set(VARIANTS)
    if "ppi" not in variants or not set(variants) <= known:
        parser.error(f"--variants: ppi and any of {', '.join(VARIANTS)}")
    if args.fixed % args.every:
        parser.error("--fixed must be a multiple of --every")
    start = time.time()
    world = RagWorld(2, args.seed)
    looks: dict[int, list[dict]] = {}
    for rep in range(args.reps):
        for look, task in world_tasks(world, rep, args):
            if look % args.every == 0:
                looks.setdefault(look, []).append(compare(world, task, variants))
        last = looks[args.fixed][-1]
        print(f"  rep {rep}: ppi logcap_mid {last['ppi_logcap_mid']:.3f}, open joint "
              f"{last['open_joint']} ppi {last['open_ppi']}", file=sys.stderr, flush=True)  # fmt: skip
    figures = {f"look{look}": {k: round(float(np.nanmean([r[k] for r in rows])), 4) for k in rows[0]}
               for look, rows in looks.items()}  # fmt: skip
    figures["draws_per_look"] = args.batch
    figures["reps"] = args.reps
    figures["note"] = ("ratios to joint's (no judge) at equal labels; medians over pairs, then "
                       "means over reps; mid: true gap 0.05-0.2")  # fmt: skip
    print(json.dumps(figures, indent=1))
    title = "diagnose_by_judge" if args.by_judge else "diagnose"
    title += f"_{args.variants.replace(',', '_').replace('+', '_')}" if args.variants else ""
    harness.store(args, "loop_judge", figures, argv, title=title,
                  seconds=round(time.time() - start, 1))  # fmt: skip


if __name__ == "__main__":
    main()
