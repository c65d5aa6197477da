"""Does `sample --until-decided --estimator ppi` decide with the judge, and validly?

Worlds of 6 systems with precisions spread over 0.2-0.7, one round of N draws per system, a
judge.tsv of a given quality (the truth with a share of labels flipped; 0.5: no information).
Per repetition: the pairs by precision still open under joint and under ppi (the loop's
decisions, :func:`receval.until_decided.decisions`), and whether any decided pair contradicts
the true precisions (a wrong decision; the family-wise error the tests bound by 1 - confidence).

    PYTHONPATH=. python bench/until_decided_judge.py --reps 20 --draws 60 --flip 0.05 --seed 0

``--rag``: the loop itself on worlds built from the real TREC RAG 2025 pairs
(``../shared/data/trec-rag25-judges``, :class:`judges.RagWorld`: constructed systems over the
real pairs, NIST's labels as the truth, UMBRELA's grade 0–4 as the judge, correlation ≈ 0.44).
Per repetition a fresh world of ``--systems`` systems; ``sample --until-decided --top K --batch
B --rank-by precision`` run round after round (labels from NIST) with ``--estimator ppi`` and
with ``--estimator joint`` from the same empty start, each until it says decided or
``--budget`` draws are recorded.  Printed: the labels (distinct facts) each spent until
decided, their ratio ppi / joint over the repetitions both decided (mean of per-world
ratios with its SE, and the ratio of the means), the open pairs at equal labels (the first
round after which both have drawn ≥ the same count), and whether any look put a system
among the best K against the truth.  ``--null``: null worlds instead (every system exactly
the same precision: R relevant and N non-relevant pairs each, chosen at random with
topic-varying weights); the loop ranks all pairs with ``--estimator ppi`` (the judge in the
loop), and a repetition errs when any look decides any pair (family-wise error over all pairs
and looks, target ≤ 0.05 + 2 SE).

    PYTHONPATH=. python bench/until_decided_judge.py --rag --reps 10 --systems 8 --top 2 \
        --batch 160 --budget 4000
    PYTHONPATH=. python bench/until_decided_judge.py --rag --null --reps 30 --systems 8 \
        --batch 160 --budget 1600

``--calibration oracle``: the ppi loop's judge calibrated from *every* label (a bound,
:func:`calibration`); the summary's ``coverage_by_rank_*``: the share of each system's outputs
labelled when the loop stopped, systems by true precision, means over the worlds both decided.

``--intervals anytime-asymptotic``: the loop decides by the asymptotic (Gaussian) paired tests
instead of the betting ones (with ``--fixed``: all four of joint / ppi × betting / Gaussian on
the same labels).  The ``*_asymptotic`` records below were made at commits fc09645..318af35,
where those tests took the judge's predictions with ``--estimator ppi``; that was reverted
(8f7638c), so re-running them now measures the Gaussian tests *without* the judge.  ``--moments``: after ``--fixed`` equal rounds, the variance of the paired
step terms the tests bet on, with the judge over without, and their ranges.  ``--floor``: the
share of a label's variance the judge leaves within each system, per calibration, drawn
uniformly or with probability ∝ √Var(Y | judge) (:func:`floor_study`).

    PYTHONPATH=. python bench/until_decided_judge.py --rag --reps 10 --systems 8 --top 2 \
        --batch 160 --budget 4000 --intervals anytime-asymptotic
    PYTHONPATH=. python bench/until_decided_judge.py --moments --reps 6 --fixed 8 --batch 200
    PYTHONPATH=. python bench/until_decided_judge.py --floor --reps 10 --systems 8

Recorded (bench/results/until_decided_judge.json; titles in brackets):

* [rag], [rag_seed1] (rerun at 2026-11-29 with the hashed draws of ``sample``; before, on
  the older draws: 0.86, SE 0.04, 17 worlds) labels until the best 2 of 8 were decided, ppi /
  joint: seed 0 ratio of means 0.871 (bootstrap SE 0.08; mean of ratios 0.91, median 0.98)
  over the 8 worlds both decided (ppi 9/10, joint 9/10 within 4000 draws); seed 1 0.919 (SE
  0.047; mean 0.945, median 0.99) over 9 (ppi 10/10, joint 9/10); the 17 worlds of both seeds:
  **ratio of means 0.897 (bootstrap SE 0.045), mean of ratios 0.928 (SE 0.045), median 0.99**;
  no wrong look.  ``coverage_by_rank_*``: when the loops stopped they had labelled 36-49 % of
  the best system's outputs, 59-67 % of the second's and 49-57 % of the third's (the top-2
  boundary), 12-41 % of the others'.  [rag_oracle], [rag_seed1_oracle] (``--calibration
  oracle``: each fact's share correct among *all* pairs of its (query, grade), a bound no loop
  can know): 0.898 and 0.919, over both seeds' 18 worlds 0.909 (SE 0.045), median 0.99, so a
  better calibration is not what is missing (``bench/loop_judge.py --segments``: the judge
  helps least for the best systems, which the decision rests on).  [rag_centred] (commit
  eb3a44e's ``judge_stream.CONTROL = "centred"``, since removed: each system's running
  precision plus β × the judge's deviation from the system's mean, β fitted on earlier labels):
  seed 0 1.018 (SE 0.05) over 8 worlds, against 0.871 with the calibrated map as the
  prediction.  Where the gap to the variance floor goes: ``bench/loop_judge.py``.  With the
  judge's predictions clipped into [0.2, 0.8] in the paired tests (commit cba22c0, reverted,
  older draws): seed 0 ppi / joint 0.92 (ratio of means, mean 0.92 SE 0.08) instead of 0.87,
  ppi labels 13,254
  against 12,694 unclipped over the same 10 worlds; null worlds 0 of 30 on seeds 0 and 1.  [rag_fixed] the same labels read by both (``--fixed 8 --batch 200 --reps 6``):
  open pairs of 28 at ≈ 700 / 1000 / 1300 labels joint 16.0 / 12.5 / 9.3, ppi 14.2 / 10.2 /
  7.8 (ppi reaches joint's count with ≈ 0.82-0.88× the labels).
* [rag_asymptotic] deciding by the Gaussian tests, the same 10 worlds: ppi decided 6, joint 4
  within 4000 draws (betting: 10 and 9); ppi / joint 0.81 (SE 0.07) over the 4 both decided,
  but ppi there spent more labels than either betting loop (e.g. 1881 / 1866 undecided where
  betting ppi decided with 1731 / 1260).  [rag_fixed_asymptotic] open pairs at ≈ 1300 labels:
  joint 9.3, ppi 7.8 (betting), joint 10.8, ppi 8.3 (Gaussian): the judge gains the same
  under both, so the betting tests' wider ranges are not where the gap to the variance bound
  comes from (nor their truncation: CAP 0.5 / 0.7 / 0.9 or the judge shrunk toward 1/2 by 0.8
  or 0.6 left ppi's open pairs within ±0.7 of 28 at equal labels, 6 worlds, ad hoc).
* [moments] the loop's own paired terms (6 worlds, 8 rounds of 200, 168 pairs): variance with
  the judge / without, median 0.76 (0.72 over the later half of the steps, the judge's map
  learnt); ranges 1.83× wider.  [floor] within a system's outputs (10 worlds, 80 systems,
  cross-fitted): the judge calibrated per grade leaves 0.83 of a label's variance, per (query,
  grade) 0.76, per (system, grade) 0.83; drawing ∝ √Var(Y | judge) (floor 0.2× the mean)
  instead: 0.82 / 0.73 / 0.80.  So any test needs ≥ ≈ 0.72-0.76× the draws with this judge,
  the active design buys ≤ 4 %, and ≤ 0.75× the labels is out of reach for it.
* [rag_null], [rag_null_seed1] null worlds, betting tests with the judge, rerun at 040274f on
  the hashed draws: a pair decided at some look in 1 of 30 on each seed (2/60 = 0.033, SE
  0.023, within 0.05 + 2 SE; Clopper-Pearson upper 95 % 0.15 each); on the older draws 0 of
  30 + 30.
  [rag_null_asymptotic], [rag_null_asymptotic_seed1] the Gaussian tests with the judge: 0 of
  30 and 2 of 30 (2/60 = 0.033, upper bound 0.10); [rag_null_asymptotic_seed1_joint] the same
  30 worlds as the second without the judge: 0.  With no gain and that doubt, the Gaussian
  tests were left without the judge (``--null-estimator joint``: the loop without it).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


def one(rep: int, draws: int, flip: float, seed: int) -> dict:
    from receval.scoring import true_metrics
    from receval.simulation import SimulationConfig, simulate_task
    from receval.task import load_task
    from receval.until_decided import decisions

    with tempfile.TemporaryDirectory() as tmp:
        config = SimulationConfig(systems=6, teams=6, queries=40, per_system=draws,
                                  precision_range=(0.2, 0.7), uppercase_teams=0.0)  # fmt: skip
        root = simulate_task(Path(tmp) / "w", config, seed=seed * 1000 + rep)
        truth = pd.read_csv(root / "truth.tsv", sep="\t", dtype=str)
        correct = truth["label"].str.lower().isin(["c", "correct", "1", "true", "yes"])
        rng = np.random.default_rng([seed, rep])
        flips = rng.random(len(truth)) < flip
        score = np.where(flips, ~correct, correct).astype(float)
        truth[["query_id", "answer"]].assign(judge_score=score).to_csv(
            root / "judge.tsv", sep="\t", index=False
        )
        task = load_task(root)
        true = true_metrics(task)["precision"]
        out = {}
        for est in ("joint", "ppi"):
            d = decisions(task, "precision", estimator=est)
            wrong = 0
            for a, b in {(i, j) for i in range(6) for j in range(6) if i != j}:
                pair = (min(a, b), max(a, b))
                if pair in {tuple(p) for p in d.open_pairs}:
                    continue
                # decided: the points' order is the decision's direction
                sa, sb = d.systems[a], d.systems[b]
                if d.point[a] > d.point[b] and true[sa] < true[sb]:
                    wrong += 1
            out[est] = {"open": len(d.open_pairs), "wrong": wrong}
        return out


COLUMNS = ["sample", "system", "query_id", "answer", "prob", "draw", "design", "order",
           "mixture_prob"]  # fmt: skip


def rag_systems(world, systems: int, seed: int, null: bool) -> None:
    """Replace ``world``'s systems (:class:`judges.RagWorld`) by ``systems`` new ones over the
    same pairs: as there (recall and precision odds varying by topic), with precisions spread
    evenly over about 0.3–0.85 (so the best K are decidable), or, ``null``, every system
    exactly R relevant and N non-relevant pairs (the same precision R/(R + N)), chosen with
    topic-varying weights so that systems overlap unevenly."""
    from receval.config import TaskConfig
    from receval.task import Task

    pairs = world.pairs
    rel = (pairs["grade_nist"].to_numpy() >= 2).astype(float)
    rng = np.random.default_rng(seed)
    topic = pd.factorize(pairs["q"])[0]
    T = topic.max() + 1
    rows = []
    R, N = 400, 400
    for i in range(systems):
        if null:
            weight = np.exp(rng.normal(0, 0.7, T))[topic]
            take = np.zeros(len(pairs), bool)
            for value, count in ((1.0, R), (0.0, N)):
                idx = np.flatnonzero(rel == value)
                p = weight[idx] / weight[idx].sum()
                take[rng.choice(idx, size=count, replace=False, p=p)] = True
        else:
            # precision ≈ p_i, spread evenly over 0.3-0.85 (relevant and not about equally
            # many), varying by topic
            p_i = 0.85 - 0.55 * i / max(systems - 1, 1)
            a = np.clip(rng.uniform(0.04, 0.1) * np.exp(rng.normal(0, 0.5, T)), 0.005, 0.9)
            b = a * (1 - p_i) / p_i * np.exp(rng.normal(0, 0.5, T) - 0.125)
            take = rng.random(len(pairs)) < np.where(rel == 1, a[topic], np.minimum(b[topic], 1))
        rows.append(pd.DataFrame({"system": f"s{i:02d}", "query_id": pairs["q"][take],
                                  "answer": pairs["doc"][take].to_numpy()}))  # fmt: skip
    world.task = Task.from_frames(runs=pd.concat(rows, ignore_index=True),
                                  config=TaskConfig(name="rag25"))  # fmt: skip
    key = pd.MultiIndex.from_frame(pairs[["q", "doc"]])
    at = pd.Series(np.arange(len(pairs)), index=key).reindex(
        pd.MultiIndex.from_frame(world.task.facts[["query_id", "answer"]])
    )
    world.at = at.to_numpy(np.int64)
    world.label = rel[world.at]
    world.grade = pairs["grade_umb"].to_numpy(float)[world.at]
    out = world.task.outputs
    correct = world.label[out["fact"].to_numpy(np.int64)]
    world.precision = (
        pd.DataFrame({"system": out["system"].astype(str), "c": correct})
        .groupby("system")["c"]
        .mean()
    )


def rag_loop(world, judge, estimator: str, top, batch: int, budget: int, seed: int,
             intervals: str = "anytime") -> dict:  # fmt: skip
    """One campaign of ``sample --until-decided`` on ``world`` from nothing labelled: per look
    the draws, distinct labels, open pairs, and whether it put a system among the best ``top``
    against the truth (or, without ``top``, decided any pair: for null worlds)."""
    import dataclasses

    from receval.task import with_annotation
    from receval.until_decided import until_decided_round

    config = dataclasses.replace(world.task.config, judge_scale=(0.0, 4.0))
    base = with_annotation(dataclasses.replace(world.task, config=config), judge=judge)
    task, samples = base, None
    best = set(world.precision.nlargest(top).index) if top else set()
    looks = []
    for _r in range(10_000):
        rnd = until_decided_round(task, batch, seed=seed, rank_by="precision", top=top,
                                  estimator=estimator, budget=budget,
                                  intervals=intervals)  # fmt: skip
        state = rnd.decisions
        names = np.asarray(state.systems)
        if top:
            wrong = state.sure_in is not None and (
                not set(names[state.sure_in]) <= best or bool(best & set(names[state.sure_out]))
            )
        else:
            wrong = state.draws > 0 and len(state.open_pairs) < state.pairs
        labels = 0 if samples is None else len(samples[["query_id", "answer"]].drop_duplicates())
        looks.append({"draws": state.draws, "labels": labels, "open": len(state.open_pairs),
                      "wrong": bool(wrong), "decided": bool(rnd.decided and not state.open_pairs)})  # fmt: skip
        if rnd.decided:
            break
        new = rnd.samples.reindex(columns=COLUMNS)
        new.attrs = {}
        samples = new if samples is None else pd.concat([samples, new], ignore_index=True)
        task = with_annotation(base, samples=samples, judgments=world.labelled_of(samples),
                               judge=judge)  # fmt: skip
    return {"looks": looks, "decided": looks[-1]["decided"], "labels": looks[-1]["labels"],
            "wrong": any(look["wrong"] for look in looks),
            "coverage": coverage_by_rank(world, samples)}  # fmt: skip


def coverage_by_rank(world, samples) -> list[float]:
    """The share of each system's outputs labelled, systems by true precision (best first)."""
    out = world.task.outputs
    labelled = np.zeros(len(world.task.facts), bool)
    if samples is not None:
        key = pd.Series(np.arange(len(world.task.facts)), index=pd.MultiIndex.from_frame(
            world.task.facts[["query_id", "answer"]]))  # fmt: skip
        drawn = samples[["query_id", "answer"]].drop_duplicates()
        labelled[key.reindex(pd.MultiIndex.from_frame(drawn)).to_numpy(np.int64)] = True
    share = (
        pd.Series(labelled[out["fact"].to_numpy(np.int64)])
        .groupby(out["system"].astype(str).to_numpy())
        .mean()
    )
    return [round(float(share[s]), 3) for s in world.precision.sort_values(ascending=False).index]


@contextmanager
def calibration(world, kind: str):
    """The judge's calibration in the loop's terms: ``fitted`` (the loop's own, on the labels
    of earlier steps) or ``oracle`` (every fact's share correct among *all* pairs of its
    (query, grade), ``loop_judge.oracle_scores``: a bound no loop can reach, it knows every
    label)."""
    if kind == "fitted":
        yield
        return
    from unittest import mock

    from loop_judge import oracle_scores

    from receval.estimators import judge_stream

    table = oracle_scores(world)
    with mock.patch.object(judge_stream, "calibrated_scores", lambda *a, **k: table):
        yield


def rag_fixed(world, judge, batch: int, looks: int, seed: int, both: bool = False) -> dict:
    """Equal rounds of ``batch`` draws (``fixed_round``: the loop's floor and random order, counts
    fixed), the same labels read by both estimators: the pairs by precision still open at each
    look under joint and under ppi (the paired tests' power at equal labels); ``both``: also
    under the asymptotic (Gaussian) paired tests, keys ``joint_asymptotic``, ``ppi_asymptotic``."""
    import dataclasses

    from receval.task import with_annotation
    from receval.until_decided import decisions, fixed_round

    config = dataclasses.replace(world.task.config, judge_scale=(0.0, 4.0))
    base = with_annotation(dataclasses.replace(world.task, config=config), judge=judge)
    methods = {"joint": ("joint", "anytime"), "ppi": ("ppi", "anytime")}
    if both:
        methods |= {f"{e}_asymptotic": (e, "anytime-asymptotic") for e in ("joint", "ppi")}
    task, samples, out = base, None, {"labels": []} | {k: [] for k in methods}
    for r in range(looks):
        new = fixed_round(task, batch, seed=seed * 100 + r).samples.reindex(columns=COLUMNS)
        new.attrs = {}
        samples = new if samples is None else pd.concat([samples, new], ignore_index=True)
        task = with_annotation(base, samples=samples, judgments=world.labelled_of(samples),
                               judge=judge)  # fmt: skip
        out["labels"].append(len(samples[["query_id", "answer"]].drop_duplicates()))
        for key, (est, intervals) in methods.items():
            d = decisions(task, "precision", estimator=est, intervals=intervals)
            out[key].append(len(d.open_pairs))
    return out


def rag_study(args) -> dict:
    """The ``--rag`` study (module docstring)."""
    from judges import RagWorld

    world = RagWorld(2, args.seed)
    world.labelled_of = lambda samples: _labels(world, samples)
    rows = []
    for rep in range(args.reps):
        rag_systems(world, args.systems, args.seed * 1000 + rep, args.null)
        judge = world.judge_table({"umbrela": world.grade}, ["umbrela"], False)
        if args.fixed:
            both = args.intervals == "anytime-asymptotic"
            rows.append(rag_fixed(world, judge, args.batch, args.fixed, seed=rep, both=both))
            print(f"  rep {rep}: {rows[-1]}", file=sys.stderr, flush=True)
            continue
        out = {}
        for est in (args.null_estimator,) if args.null else ("ppi", "joint"):
            kind = args.calibration if est == "ppi" else "fitted"
            with calibration(world, kind):
                out[est] = rag_loop(world, judge, est, None if args.null else args.top,
                                    args.batch, args.budget, seed=rep,
                                    intervals=args.intervals)  # fmt: skip
        out["precision_spread"] = float(world.precision.max() - world.precision.min())
        rows.append(out)
        summary = {k: (v["labels"], v["decided"], v["wrong"]) for k, v in out.items()
                   if isinstance(v, dict)}  # fmt: skip
        print(f"  rep {rep}: {summary}", file=sys.stderr, flush=True)
    if args.fixed:
        return {k: np.mean([r[k] for r in rows], axis=0).round(2).tolist()
                for k in rows[0]} | {"reps": len(rows), "pairs": args.systems * (args.systems - 1) // 2}  # fmt: skip
    return summarise_rag(rows, args)


def moments_study(args) -> dict:
    """The ``--moments`` study: ``--fixed`` equal rounds of ``--batch`` draws per world, then,
    per pair of systems, the variance of the paired step terms D = Y_a − Y_b the loop's tests
    bet on, with the judge (``--estimator ppi``) over without (joint), over all steps both
    systems count and over the later half of them (the judge's map learnt), and the ratio of
    the terms' ranges (what the betting tests are bounded by)."""
    import dataclasses

    from judges import RagWorld

    from receval.estimators.anytime.method import judged_precision_terms
    from receval.estimators.anytime.pairs import precision_terms
    from receval.estimators.anytime.stream import build_stream
    from receval.estimators.sample_data import build_sample_data
    from receval.task import with_annotation
    from receval.until_decided import fixed_round

    world = RagWorld(2, args.seed)
    rows = []
    for rep in range(args.reps):
        rag_systems(world, args.systems, args.seed * 1000 + rep, False)
        judge = world.judge_table({"umbrela": world.grade}, ["umbrela"], False)
        config = dataclasses.replace(world.task.config, judge_scale=(0.0, 4.0))
        base = with_annotation(dataclasses.replace(world.task, config=config), judge=judge)
        task, samples = base, None
        for r in range(args.fixed):
            new = fixed_round(task, args.batch, seed=rep * 100 + r).samples.reindex(columns=COLUMNS)
            new.attrs = {}
            samples = new if samples is None else pd.concat([samples, new], ignore_index=True)
            task = with_annotation(base, samples=samples, judgments=_labels(world, samples),
                                   judge=judge)  # fmt: skip
        data = build_sample_data(task, "micro")
        st = build_stream(task, data)
        plain, judged = precision_terms(task, data, st), judged_precision_terms(task, data, st)
        for a, b in zip(*np.triu_indices(data.m, 1), strict=True):
            act = plain.active[a] & plain.active[b]
            late = act & (np.cumsum(act) > act.sum() // 2)
            ratio = [(judged.y[a] - judged.y[b])[m].var() / (plain.y[a] - plain.y[b])[m].var()
                     for m in (act, late)]  # fmt: skip
            width = (judged.hi[a] - judged.lo[a])[act].mean() / (plain.hi[a] - plain.lo[a])[
                act
            ].mean()
            rows.append((rep, *ratio, width))
        print(f"  rep {rep}: {np.median(np.array(rows)[:, 1:], axis=0).round(3)}", file=sys.stderr)
    table = pd.DataFrame(rows, columns=["rep", "all", "late", "range"])
    return {k: {"median": round(float(table[k].median()), 4), "mean": round(float(table[k].mean()), 4)}
            for k in ("all", "late", "range")} | {"pairs": len(table), "reps": args.reps}  # fmt: skip


def floor_study(args) -> dict:
    """The ``--floor`` study: per system of ``--reps`` constructed worlds, the share of a
    label's variance the judge leaves, E[Var(Y | judge)] / Var(Y) within the system's outputs,
    for the calibrations a loop could learn: per grade (cross-fitted over two halves of the
    pairs), per (query, grade) shrunk to the grade's share by 5 pseudo-labels, and per grade
    within the system (:func:`by_system_grade`), all cross-fitted;
    each drawn uniformly and drawn with probability ∝ √Var(Y | judge) (active inference, Zrnic &
    Candès 2024, floor 0.2× the mean; :func:`variance_shares`).  Labels needed to decide a
    fixed difference scale with these shares (the large-sample bound of any test)."""
    from judges import RagWorld

    world = RagWorld(2, args.seed)
    pairs = world.pairs
    rel = (pairs["grade_nist"].to_numpy() >= 2).astype(float)
    grade = pairs["grade_umb"].to_numpy(int)
    query = pd.factorize(pairs["q"])[0]
    rng = np.random.default_rng(args.seed)
    half = rng.random(rel.size) < 0.5
    key = query * 5 + grade
    calibrated = {"grade": np.empty(rel.size), "query_grade": np.empty(rel.size)}
    for fit in (half, ~half):  # cross-fitted: each half predicted from the other's labels
        count = np.maximum(np.bincount(grade[fit], None, 5), 1)
        share = np.bincount(grade[fit], rel[fit], 5) / count
        calibrated["grade"][~fit] = share[grade[~fit]]
        n = np.bincount(key[fit], None, key.max() + 1)[key[~fit]]
        hits = np.bincount(key[fit], rel[fit], key.max() + 1)[key[~fit]]
        calibrated["query_grade"][~fit] = (hits + 5 * share[grade[~fit]]) / (n + 5)
    out: dict[str, list[float]] = {}
    for rep in range(args.reps):
        rag_systems(world, args.systems, args.seed * 1000 + rep, False)
        facts = world.task.outputs["fact"].to_numpy(np.int64)
        system = world.task.outputs["system"].astype(str).to_numpy()
        for name in np.unique(system):
            r = world.at[facts[system == name]]
            own = {"system_grade": by_system_grade(rel[r], grade[r], half[r])}
            for what, mu in ({k: v[r] for k, v in calibrated.items()} | own).items():
                for design, share in variance_shares(rel[r], mu).items():
                    out.setdefault(f"{what}_{design}", []).append(share)
    figures = {k: {"mean": round(float(np.mean(v)), 4), "min": round(float(np.min(v)), 4),
                   "max": round(float(np.max(v)), 4)} for k, v in out.items()}  # fmt: skip
    return figures | {"systems": len(out["grade_uniform"]), "reps": args.reps}


def by_system_grade(y: np.ndarray, grade: np.ndarray, half: np.ndarray) -> np.ndarray:
    """Each output's share correct among the system's outputs of its grade in the other half
    (cross-fitted), shrunk to the system's share by 5 pseudo-labels."""
    mu = np.empty(y.size)
    for fit in (half, ~half):
        base = y[fit].mean() if fit.any() else 0.5
        n = np.bincount(grade[fit], None, 5)[grade[~fit]]
        hits = np.bincount(grade[fit], y[fit], 5)[grade[~fit]]
        mu[~fit] = (hits + 5 * base) / (n + 5)
    return mu


def variance_shares(y: np.ndarray, mu: np.ndarray) -> dict[str, float]:
    """One draw's variance of the prediction-corrected mean, as a share of Var(y): drawn
    uniformly (E[(y − μ)²] − (E[y − μ])²) and drawn with probability π ∝ max(σ̂, 0.2·mean σ̂),
    σ̂ = √(μ(1 − μ)), each draw reweighted by 1/π (E[(y − μ)²/π]·E[π] − (E[y − μ])²)."""
    r = y - mu
    sd = np.sqrt(np.clip(mu * (1.0 - mu), 0.0, None))
    pi = np.maximum(sd, 0.2 * sd.mean())
    pi = pi / pi.mean()
    total = y.var()
    return {"uniform": float((np.mean(r**2) - r.mean() ** 2) / total),
            "active": float((np.mean(r**2 / pi) - r.mean() ** 2) / total)}  # fmt: skip


def _labels(world, samples: pd.DataFrame) -> pd.DataFrame:
    """NIST's labels of the drawn answers (C/W)."""
    drawn = samples[["query_id", "answer"]].drop_duplicates()
    facts = world.task.facts
    key = pd.Series(
        np.arange(len(facts)), index=pd.MultiIndex.from_frame(facts[["query_id", "answer"]])
    )
    ids = key.reindex(pd.MultiIndex.from_frame(drawn)).to_numpy(np.int64)
    return drawn.assign(label=np.where(world.label[ids] == 1, "C", "W"))


def summarise_rag(rows: list[dict], args) -> dict:
    """Labels until decided (ppi / joint) and the error shares over the repetitions."""
    reps = len(rows)
    from scipy.stats import beta

    first = "ppi" if "ppi" in rows[0] else "joint"  # --null --null-estimator joint
    wrong = np.array([r[first]["wrong"] for r in rows], float)
    k = int(wrong.sum())  # Clopper-Pearson one-sided 95 % upper bound on the error share
    upper = float(beta.ppf(0.95, k + 1, reps - k)) if k < reps else 1.0
    figures = {"reps": reps, f"{first}_any_wrong_look": float(wrong.mean()),
               f"{first}_any_wrong_look_upper_95": round(upper, 4)}  # fmt: skip
    if args.null:
        return figures
    both = [r for r in rows if r["ppi"]["decided"] and r["joint"]["decided"]]
    ratio = np.array([r["ppi"]["labels"] / r["joint"]["labels"] for r in both])
    figures.update({
        "joint_any_wrong_look": float(np.mean([r["joint"]["wrong"] for r in rows])),
        "decided_ppi": int(sum(r["ppi"]["decided"] for r in rows)),
        "decided_joint": int(sum(r["joint"]["decided"] for r in rows)),
        "labels_ppi": [r["ppi"]["labels"] for r in rows],
        "labels_joint": [r["joint"]["labels"] for r in rows],
        "labels_ratio_mean": float(ratio.mean()) if ratio.size else None,
        "labels_ratio_median": float(np.median(ratio)) if ratio.size else None,
        "labels_ratio_se": float(ratio.std(ddof=1) / np.sqrt(ratio.size)) if ratio.size > 1 else None,
        "coverage_by_rank_ppi": np.mean([r["ppi"]["coverage"] for r in both], axis=0).round(3).tolist() if both else None,
        "coverage_by_rank_joint": np.mean([r["joint"]["coverage"] for r in both], axis=0).round(3).tolist() if both else None,
        "labels_ratio_of_means": float(
            np.mean([r["ppi"]["labels"] for r in both]) / np.mean([r["joint"]["labels"] for r in both])
        ) if both else None,
    })  # fmt: skip
    if len(both) > 1:  # bootstrap over the worlds (fixed seed): the ratio of means' SE
        pairs = np.array([(r["ppi"]["labels"], r["joint"]["labels"]) for r in both], float)
        idx = np.random.default_rng(0).integers(0, len(both), (2000, len(both)))
        boot = pairs[idx, 0].sum(axis=1) / pairs[idx, 1].sum(axis=1)
        figures["labels_ratio_of_means_se"] = round(float(boot.std(ddof=1)), 4)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=0, reps=20)
    parser.add_argument("--draws", type=int, default=60)
    parser.add_argument("--flip", type=float, default=0.05)
    parser.add_argument("--rag", action="store_true", help="the loop on RAG 2025 worlds")
    parser.add_argument("--null", action="store_true", help="--rag: null worlds")
    parser.add_argument(
        "--null-estimator", default="ppi", choices=("ppi", "joint"), help="--null: the loop's"
    )
    parser.add_argument("--systems", type=int, default=8)
    parser.add_argument("--top", type=int, default=2)
    parser.add_argument("--batch", type=int, default=160)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument(
        "--moments", action="store_true", help="the paired terms' variance (moments_study)"
    )
    parser.add_argument("--floor", action="store_true", help="the variance bound (floor_study)")
    parser.add_argument(
        "--intervals",
        default="anytime",
        choices=("anytime", "anytime-asymptotic"),
        help="--rag: the interval method whose paired tests the loop decides by",
    )
    parser.add_argument(
        "--calibration", default="fitted", choices=("fitted", "oracle"),
        help="--rag: the judge's calibration in the ppi loop (oracle: from every label, a bound)",
    )  # fmt: skip
    parser.add_argument(
        "--fixed", type=int, default=0,
        help="--rag: this many equal rounds of --batch, open pairs of joint and ppi per look",
    )  # fmt: skip
    args = harness.parse(parser, argv)
    start = time.time()
    if args.moments:
        figures = moments_study(args)
        print(json.dumps(figures, indent=1))
        harness.store(args, "until_decided_judge", figures, argv, title="moments")
        return
    if args.floor:
        figures = floor_study(args)
        print(json.dumps(figures, indent=1))
        harness.store(args, "until_decided_judge", figures, argv, title="floor")
        return
    if args.rag:
        figures = rag_study(args)
        print(json.dumps(figures, indent=1))
        title = "rag_null" if args.null else "rag_fixed" if args.fixed else "rag"
        title += "_asymptotic" if args.intervals == "anytime-asymptotic" else ""
        title += f"_seed{args.seed}" if args.seed else ""
        title += "_joint" if args.null and args.null_estimator == "joint" else ""
        title += "_oracle" if args.calibration == "oracle" else ""
        seconds = round(time.time() - start, 1)
        harness.store(args, "until_decided_judge", figures, argv, title=title, seconds=seconds)
        return
    rows = [one(r, args.draws, args.flip, args.seed) for r in range(args.reps)]
    figures = {}
    for est in ("joint", "ppi"):
        opened = np.array([r[est]["open"] for r in rows], float)
        wrong = np.array([r[est]["wrong"] > 0 for r in rows], float)
        figures[est] = {"mean_open_pairs": float(opened.mean()),
                        "any_wrong_decision": float(wrong.mean())}  # fmt: skip
    figures["open_ratio_ppi_over_joint"] = (
        figures["ppi"]["mean_open_pairs"] / figures["joint"]["mean_open_pairs"]
    )
    print(json.dumps(figures, indent=1))
    seconds = round(time.time() - start, 1)
    harness.store(args, "until_decided_judge", figures, argv, pairs=15, seconds=seconds)


if __name__ == "__main__":
    main()
