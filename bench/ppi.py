"""Prediction-powered scoring study: how much does an automatic judge save, and is it still valid?

For each world (simulated TREC/KBP-like worlds from :mod:`receval.simulation`, and ParaBank-Eval
from ``../shared/data/parabank-eval`` with every pooled output judged) and each judge quality
the human sample is redrawn ``--runs`` times with n draws per system; each campaign is scored
with ``--estimator joint`` (human only, the default) and ``--estimator ppi`` on the *same*
bootstrap replicates (:func:`receval.scoring.fit`, as ``receval score`` fits them).  Per judge
quality × n × metric the study prints

* coverage of the 95% intervals (pooled over systems and runs) for ppi (and joint); its MC SE
  is about √(c(1 − c)/R) (runs, not runs × systems, are independent);
* the width ratio ppi / joint per system (mean widths over runs): median (± its Monte Carlo SE,
  jackknife over runs) and max over systems;
* label savings at equal width, 1 − ratio² (interval widths scale as 1/√n);
* the worst bias of ppi over systems in Monte Carlo standard errors, |mean err| / (sd/√R).

Judges (s(x) ∈ [0, 1] for every pooled fact, from its true label y):
``strong`` logistic(k(2y − 1) + ε) with ρ(s, y) ≈ 0.8; ``weak`` the same with ρ ≈ 0.3;
``useless`` uniform noise; ``inverted`` 1 − strong; ``team-biased`` strong, plus 0.35 on every
fact the first team output (favours that team); ``missing-30`` strong with 30 % of the facts
unscored; ``constant`` 0.5 everywhere (the judge control is then the known output mass: the
control variate issue 21 item 5 asks about for the human-only joint estimator).  On ParaBank also ``nll``: the model's own score, 1 − rank(NLL)/N (label-free).

Usage: python bench/ppi.py [--runs R] [--bootstrap B] [--n 10,30,100] [--judges ...]
[--worlds sim,trec,parabank] [--seed S]
"""

from __future__ import annotations

import gzip
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from receval.config import Matching, TaskConfig
from receval.design import draw_precision_samples
from receval.estimators.base import ScoringContext
from receval.estimators.registry import get_estimator
from receval.estimators.sample_data import build_sample_data
from receval.formats.bundle import write_bundle
from receval.options import ScoreOptions
from receval.scoring import fit
from receval.simulation import SimulationConfig, simulate_world
from receval.task import Task, load_task, with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
METRICS = ("precision", "pooled_recall", "recall")
JUDGES = ("weak", "strong", "useless", "inverted", "team-biased", "missing-30")


@dataclass
class World:
    """A task whose every pooled fact has a known label, and its true metrics."""

    name: str
    task: Task  # runs (+ exhaustive frame source), no annotation
    label: np.ndarray  # (F,) true label of every fact id (NaN outside the pool)
    truth: pd.DataFrame  # index system: precision, pooled_recall, recall
    first_team_facts: np.ndarray  # (F,) bool: facts output by the first team
    annotate: object  # (rng, n) -> dict of annotation frames


def logistic(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _tuned_judge(y: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """logistic(k(2y − 1) + ε), ε ~ N(0, 1), with k tuned so that corr(s, y) ≈ ``rho``."""
    noise = rng.normal(size=y.size)
    lo, hi = 0.0, 20.0
    for _ in range(40):
        k = (lo + hi) / 2
        r = np.corrcoef(logistic(k * (2 * y - 1) + noise), y)[0, 1]
        lo, hi = (k, hi) if r < rho else (lo, k)
    return logistic(k * (2 * y - 1) + noise)


def judge_scores(world: World, quality: str, rng: np.random.Generator) -> pd.DataFrame:
    """The judge table of ``quality`` over the world's pooled facts (see module docstring)."""
    facts = world.task.facts
    pooled = np.flatnonzero(facts["in_pool"].to_numpy())
    y = world.label[pooled]
    if quality == "nll":
        s = world.task.facts["nll_score"].to_numpy()[pooled]
    elif quality == "consensus":  # label-free: how highly the runs rank the fact
        s = world.task.facts["consensus_score"].to_numpy()[pooled]
    elif quality == "useless":
        s = rng.random(y.size)
    elif quality == "constant":  # the judge control is then the known-mass control variate
        s = np.full(y.size, 0.5)
    elif quality == "weak":
        s = _tuned_judge(y, 0.3, rng)
    else:
        s = _tuned_judge(y, 0.8, rng)
    if quality == "inverted":
        s = 1.0 - s
    if quality == "team-biased":
        s = np.minimum(1.0, s + 0.35 * world.first_team_facts[pooled])
    keep = np.ones(y.size, bool)
    if quality == "missing-30":
        keep = rng.random(y.size) >= 0.3
    frame = facts.iloc[pooled[keep]]
    return pd.DataFrame(
        {"query_id": frame["query_id"], "answer": frame["answer"], "judge_score": s[keep]}
    )


def simulated_world(seed: int = 11, systems: int = 16, queries: int = 60) -> World:
    """A TREC/KBP-like simulated world (overlapping systems, teams, exhaustive documents)."""
    cfg = SimulationConfig(systems=systems, queries=queries, name="ppi-sim", teams=4)
    world = simulate_world(cfg, np.random.default_rng(seed))
    tmp = tempfile.mkdtemp()
    base = load_task(write_bundle(Path(tmp) / "w", world.tables(), world.task_config()))
    label = np.full(len(base.facts), np.nan)
    truth = base.truth
    label[truth["fact"].to_numpy(np.int64)] = truth["value"].to_numpy(float)
    first = base.outputs[base.outputs["team"] == world.teams[0]]["fact"].to_numpy(np.int64)
    team = np.zeros(len(base.facts), bool)
    team[first] = True
    metrics = world.truth_metrics().set_index("system")

    def annotate(rng: np.random.Generator, n: int) -> dict:
        ann = world.annotate(rng, per_system=n, exhaustive_units=25)
        return ann.tables()

    return World("sim", base, label, metrics, team, annotate)


def parabank_world(threshold: float = 70.0) -> World | None:
    """ParaBank-Eval: 36 systems' paraphrases of shared references, every pooled output judged
    (correct: mean human score ≥ ``threshold``); the judge ``nll`` is the model's NLL rank."""
    path = DATA / "parabank-eval" / "candidates.tsv.gz"
    if not path.exists():
        return None
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        raw = pd.read_csv(fh, sep="\t", quoting=3, keep_default_na=False, na_values=[""])
    raw["score"] = raw["human_score"].fillna(0.0)
    items = raw.groupby(["ref_id", "candidate"], sort=True).agg(
        nll=("NLL", "max"), score=("score", "mean"), sys_id=("sys_id", "first")
    )
    items = items[items["nll"] >= 0].reset_index()
    items["correct"] = items["score"] >= threshold
    rows = items.assign(system=items["sys_id"].astype(str).str.split()).explode("system")
    runs = pd.DataFrame(
        {
            "system": "s" + rows["system"].astype(str).str.zfill(2),
            "query_id": "r" + rows["ref_id"].astype(str),
            "answer": rows["candidate"].astype(str),
        }
    )
    exact = Matching(strip=False, collapse_whitespace=False, casefold=False)
    task = Task.from_frames(runs=runs, config=TaskConfig(name="parabank", matching=exact))
    key = pd.MultiIndex.from_frame(
        items.assign(q="r" + items["ref_id"].astype(str))[["q", "candidate"]]
    )
    lookup = pd.Series(np.arange(len(items)), index=key)
    at = lookup.reindex(pd.MultiIndex.from_frame(task.facts[["query_id", "answer"]])).to_numpy()
    if np.isnan(at.astype(float)).any():  # an answer changed by normalisation: skip the data set
        return None
    at = at.astype(np.int64)
    label = items["correct"].to_numpy(float)[at]
    nll = items["nll"].to_numpy(float)[at]
    task.facts["nll_score"] = 1.0 - pd.Series(nll).rank(pct=True).to_numpy()
    out = task.outputs
    correct = label[out["fact"].to_numpy(np.int64)]
    g = pd.DataFrame({"system": out["system"].astype(str), "c": correct}).groupby("system")["c"]
    pool_true = float(label.sum())
    truth = pd.DataFrame({"precision": g.mean(), "pooled_recall": g.sum() / pool_true})
    truth["recall"] = np.nan  # no exhaustive annotation: θ unknown
    first_system = sorted(out["system"].astype(str).unique())[0]
    team = np.zeros(len(task.facts), bool)
    team[out[out["system"].astype(str) == first_system]["fact"].to_numpy(np.int64)] = True

    def annotate(rng: np.random.Generator, n: int) -> dict:
        samples = draw_precision_samples(task.outputs, task.queries, n, rng)
        drawn = task.facts.reset_index()
        key_q = pd.MultiIndex.from_frame(drawn[["query_id", "answer"]])
        ids = pd.Series(drawn["fact"].to_numpy(), index=key_q)
        facts = ids.reindex(
            pd.MultiIndex.from_arrays([samples["query_id"], samples["answer"]])
        ).to_numpy(np.int64)
        unique = np.unique(facts)
        judgments = pd.DataFrame(
            {
                "query_id": task.facts["query_id"].to_numpy()[unique],
                "answer": task.facts["answer"].to_numpy()[unique],
                "label": np.where(label[unique] == 1, "C", "W"),
            }
        )
        return {"samples": samples, "judgments": judgments}

    return World("parabank", task, label, truth, team, annotate)


def trec_world(
    seed: int = 3,
    queries: int = 50,
    docs: int = 4000,
    systems: int = 16,
    teams: int = 4,
    units: int = 12,
) -> World:
    """A TREC 2003 Robust-like world (no network here, so simulated; issue 21 item 6).

    Per query a collection of ``docs`` documents with graded relevance 0/1/2 (prevalence
    p_q ~ Beta(1, 140), mean ≈ 0.007 in the collection; a relevant document is highly relevant
    with probability 0.4), mapped to binary relevance ≥ 1 as TREC's binary measures do.  Each
    of ``systems`` ranked runs (``teams`` teams: runs of a team share the team's scoring noise)
    scores a document as skill_t · (1.5 grade + N(0, 1)) + team noise + run noise and outputs its
    top ``depth`` documents, depth ∈ {30, 50, 100, 150} per run (cut-offs differ as submitted
    run depths do).  Runs keep a ``rank`` column.  The pool is every retrieved document
    (share relevant ≈ 0.04, pool coverage ≈ 0.6 at these depths); true recall counts every relevant
    document of the collection.  Exhaustive annotation: ``units`` queries drawn uniformly
    without replacement, every relevant document of each listed (a fully judged topic).

    Judges: ``consensus`` is label-free, the share of runs retrieving the document weighted by
    1/√rank (how highly the runs rank it), turned into a rank percentile to the power 8
    (ρ ≈ 0.3 with the labels, as measured on real TREC/CLEF runs); ``strong`` is labels plus
    noise with ρ ≈ 0.8 (:func:`_tuned_judge`).
    """
    rng = np.random.default_rng(seed)
    team_of = np.arange(systems) % teams
    skill = rng.uniform(0.6, 1.4, teams)
    depth = rng.choice([30, 50, 100, 150], systems)
    rows, truth_rows = [], []
    hit_weight: dict[tuple[int, int], float] = {}
    for q in range(queries):
        p = rng.beta(1.0, 140.0)
        rel = rng.random(docs) < p
        grade = rel * (1 + (rng.random(docs) < 0.4))
        topical = 1.5 * grade + rng.normal(size=docs)
        team_noise = rng.normal(scale=0.8, size=(teams, docs))
        for i in range(systems):
            score = skill[team_of[i]] * topical + team_noise[team_of[i]]
            score = score + rng.normal(scale=0.8, size=docs)
            top = np.argsort(-score)[: depth[i]]
            for r, d in enumerate(top):
                rows.append((f"r{i:02d}", f"t{team_of[i]}", f"q{q:03d}", f"d{d:05d}", r + 1))
                hit_weight[(q, d)] = hit_weight.get((q, d), 0.0) + 1.0 / (r + 1) ** 0.5
        for d in np.flatnonzero(rel):
            truth_rows.append((f"q{q:03d}", f"d{d:05d}", int(grade[d])))
    runs = pd.DataFrame(rows, columns=["system", "team", "query_id", "answer", "rank"])
    relevant = pd.DataFrame(truth_rows, columns=["query_id", "answer", "grade"])
    pooled_keys = runs[["query_id", "answer"]].drop_duplicates()
    truth = pooled_keys.merge(relevant, how="outer", on=["query_id", "answer"])
    truth["label"] = np.where(truth["grade"].fillna(0) >= 1, "C", "W")
    task = Task.from_frames(
        runs=runs, truth=truth[["query_id", "answer", "label"]], config=TaskConfig(name="trec-sim")
    )
    facts = task.facts
    key = pd.MultiIndex.from_frame(facts[["query_id", "answer"]])
    truth_key = pd.MultiIndex.from_frame(truth[["query_id", "answer"]])
    correct = pd.Series((truth["label"] == "C").to_numpy(float), index=truth_key)
    label = correct.reindex(key).fillna(0.0).to_numpy(float)
    weights = pd.Series(
        list(hit_weight.values()),
        index=pd.MultiIndex.from_tuples(
            [(f"q{q:03d}", f"d{d:05d}") for q, d in hit_weight], names=["query_id", "answer"]
        ),
    )
    consensus = weights.reindex(key).fillna(0.0).to_numpy(float)
    in_pool = facts["in_pool"].to_numpy(bool)
    pct = np.zeros(len(facts))
    pct[in_pool] = pd.Series(consensus[in_pool]).rank(pct=True).to_numpy()
    facts["consensus_score"] = pct**8  # sharpened: the top of the consensus ranking
    out = task.outputs
    got = pd.DataFrame(
        {"system": out["system"].astype(str), "c": label[out["fact"].to_numpy(np.int64)]}
    ).groupby("system")["c"]
    pool_true = float(label[in_pool].sum())
    all_true = float(label.sum())
    metrics = pd.DataFrame(
        {
            "precision": got.mean(),
            "pooled_recall": got.sum() / pool_true,
            "recall": got.sum() / all_true,
        }
    )
    first = out[out["system"].astype(str).isin([f"r{i:02d}" for i in range(0, systems, teams)])]
    team = np.zeros(len(facts), bool)
    team[first["fact"].to_numpy(np.int64)] = True
    correct_facts = facts[label == 1]

    def annotate(rng: np.random.Generator, n: int) -> dict:
        samples = draw_precision_samples(task.outputs, task.queries, n, rng)
        drawn = pd.MultiIndex.from_arrays([samples["query_id"], samples["answer"]]).unique()
        at = pd.Series(np.arange(len(facts)), index=key).reindex(drawn).to_numpy(np.int64)
        judgments = pd.DataFrame(
            {
                "query_id": facts["query_id"].to_numpy()[at],
                "answer": facts["answer"].to_numpy()[at],
                "label": np.where(label[at] == 1, "C", "W"),
            }
        )
        chosen = rng.choice(task.queries["query_id"].to_numpy(), size=units, replace=False)
        found = correct_facts[correct_facts["query_id"].isin(chosen)]
        exhaustive = pd.DataFrame(
            {"unit": found["query_id"].to_numpy(), "query_id": found["query_id"].to_numpy()}
        ).assign(answer=found["answer"].to_numpy())
        return {
            "samples": samples,
            "judgments": judgments,
            "exhaustive_units": pd.DataFrame({"unit": chosen}),
            "exhaustive": exhaustive,
        }

    return World("trec", task, label, metrics, team, annotate)


def one_campaign(world: World, judge: pd.DataFrame, n: int, seed: int, B: int) -> dict:
    """{estimator: {metric: (point, lo, hi) arrays over systems}} for one human sample."""
    tables = world.annotate(np.random.default_rng(seed), n)
    task = with_annotation(world.task, judge=judge, **tables)
    data = build_sample_data(task)
    data = data.__class__(**{**data.__dict__, "census": np.zeros(data.m, bool)})
    out = {"systems": data.systems}
    for name in ("joint", "ppi"):
        ctx = ScoringContext(task, data, ScoreOptions(estimator=name, bootstrap=B, seed=seed))
        fitted = fit(ctx, get_estimator(name))
        est = {}
        for metric in METRICS:
            e = fitted.intervals.estimate(ctx, fitted.run, metric)
            est[metric] = (e.point, e.lower, e.upper)
        out[name] = est
    return out


def width_ratio(ppi_width: np.ndarray, joint_width: np.ndarray) -> np.ndarray:
    """Per system (runs × systems in), mean ppi width over mean joint width (NaN where the joint
    width is 0: every draw agrees)."""
    joint = np.nanmean(joint_width, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(joint > 0, np.nanmean(ppi_width, axis=0) / joint, np.nan)


def jackknife_se(ppi_width: np.ndarray, joint_width: np.ndarray) -> float:
    """Monte Carlo SE of the median width ratio over systems: jackknife over the runs."""
    R = ppi_width.shape[0]
    if R < 3:
        return float("nan")
    keep = np.ones(R, bool)
    values = []
    for r in range(R):
        keep[r] = False
        values.append(np.nanmedian(width_ratio(ppi_width[keep], joint_width[keep])))
        keep[r] = True
    values = np.array(values)
    return float(np.sqrt((R - 1) / R * np.sum((values - values.mean()) ** 2)))


def study(world: World, quality: str, n: int, runs: int, B: int, seed: int) -> list[dict]:
    """One judge quality × n: per metric coverage, width ratios, savings, worst bias."""
    judge = judge_scores(world, quality, np.random.default_rng(seed + 7))
    results = [one_campaign(world, judge, n, seed * 1000 + r, B) for r in range(runs)]
    systems = results[0]["systems"]
    rows = []
    for metric in METRICS:
        true = world.truth.loc[systems, metric].to_numpy(float)
        if np.isnan(true).all():
            continue
        per = {}
        for name in ("joint", "ppi"):
            point = np.array([r[name][metric][0] for r in results])
            lo = np.array([r[name][metric][1] for r in results])
            hi = np.array([r[name][metric][2] for r in results])
            per[name] = (point, lo, hi)
        point, lo, hi = per["ppi"]
        covered = (lo <= true + 1e-12) & (true - 1e-12 <= hi)
        valid = np.isfinite(lo) & np.isfinite(hi)
        _, jl, jh = per["joint"]
        j_cov = ((jl <= true + 1e-12) & (true - 1e-12 <= jh))[np.isfinite(jl)].mean()
        ratio = width_ratio(hi - lo, jh - jl)
        ratio_se = jackknife_se(hi - lo, jh - jl)
        err = point - true
        with np.errstate(invalid="ignore", divide="ignore"):
            mean, sd = np.nanmean(err, axis=0), np.nanstd(err, axis=0, ddof=1)
            # an estimate that never varies (every draw agrees) is exact up to rounding
            z = np.where(sd > 1e-12, mean / (sd / math.sqrt(runs)), 0.0)
        rows.append(
            {
                "world": world.name,
                "judge": quality,
                "n": n,
                "metric": metric,
                "coverage": float(covered[valid].mean()),
                "coverage_se": math.sqrt(
                    covered[valid].mean() * (1 - covered[valid].mean()) / runs
                ),
                "ratio_se": ratio_se,
                "joint_coverage": float(j_cov),
                "median_ratio": float(np.nanmedian(ratio)),
                "max_ratio": float(np.nanmax(ratio)),
                "savings": 1.0 - float(np.nanmedian(ratio)) ** 2,
                "max_bias_z": float(np.nanmax(np.abs(z))),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    quick = {"runs": 10, "n": "10,30", "judges": "weak,strong,useless"}
    parser = harness.parser(__doc__, seed=1, reps=40, reps_name="runs", quick=quick)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--n", default="10,30,100")
    parser.add_argument("--judges", default="weak,strong,useless,inverted,team-biased,missing-30")
    parser.add_argument("--worlds", default="sim,parabank")
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    worlds, table = [], []
    if "sim" in args.worlds:
        worlds.append(simulated_world())
    if "trec" in args.worlds:
        worlds.append(trec_world())
    if "parabank" in args.worlds:
        pb = parabank_world()
        if pb is None:
            print("(ParaBank data not found; skipped)")
        else:
            worlds.append(pb)
    header = (
        f"{'world':9} {'judge':12} {'n':>4} {'metric':14} {'cover':>6} {'joint':>6} "
        f"{'med_ratio':>9} {'±se':>6} {'max_ratio':>9} {'savings':>8} {'|z|max':>7}"
    )
    print(header)
    start = time.time()
    for world in worlds:
        judges = args.judges.split(",") + (["nll"] if world.name == "parabank" else [])
        judges += ["consensus"] if world.name == "trec" and "consensus" not in judges else []
        for quality in judges:
            for n in (int(x) for x in args.n.split(",")):
                for row in study(world, quality, n, args.runs, args.bootstrap, args.seed):
                    table.append(row)
                    print(
                        f"{row['world']:9} {row['judge']:12} {row['n']:>4} {row['metric']:14} "
                        f"{row['coverage']:6.3f} {row['joint_coverage']:6.3f} "
                        f"{row['median_ratio']:9.3f} {row['ratio_se']:6.3f} {row['max_ratio']:9.3f} "
                        f"{row['savings']:8.2f} {row['max_bias_z']:7.2f}",
                        flush=True,
                    )
    print(f"({time.time() - start:.0f} s; runs={args.runs}, B={args.bootstrap})")
    figures = {"runs": args.runs, "bootstrap": args.bootstrap, "rows": table}
    harness.store(args, "ppi", figures, argv, output=tee, title=f"worlds {args.worlds}")


if __name__ == "__main__":
    main()
