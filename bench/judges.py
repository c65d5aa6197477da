"""Real automatic judges: do calibrated, combined judges narrow PPI on real assessor labels?

World: the 10,284 (topic, segment) pairs of TREC RAG 2025 (``../shared/data/trec-rag25-judges``),
each graded 0–4 by NIST (the truth: relevant at grade ≥ 2) and by UMBRELA (the judge).  No
participant runs are public, so ``--systems`` systems are constructed over the real pairs:
system i outputs a relevant pair with probability a_i and a non-relevant one with b_i (its
precision ≈ a_i/(a_i + b_i) per topic), so systems overlap as pooled runs do, and their true
precision and pooled recall are known from the NIST labels (a_i and the odds b_i/a_i vary by
topic, log-normally, as runs do between easy and hard topics).  Each campaign draws ``--n``
uniform draws per system, labels them with NIST's labels, and scores them with the joint
estimator (human only) and ``--estimator ppi`` on the same bootstrap replicates.

Configurations (judge tables):

* ``prob``: UMBRELA's grade / 4 as a probability, no declared scale (the one-judge path of
  receval ≤ this round: the linear map);
* ``graded``: UMBRELA's grade with ``[judge] scale = [0, 4]`` (calibrated per grade and query);
* ``several``: UMBRELA, plus constructed judges — ``noisy`` (UMBRELA's grade plus noise),
  ``biased`` (+2 grades on a third of the topics), ``useless`` (random grades) and
  ``adversarial`` (UMBRELA's grade turned upside down, and grade 4 on every output of system
  s00, which it favours: a wrong-way judge that also flatters one system);
* ``umbrela+useless``, ``umbrela+adversarial``: what a bad judge costs next to a good one;
* ``noisy``, ``biased``, ``adversarial``: the constructed judges alone (for the best single
  judge in hindsight);
* ``graded/strata``, ``several/strata``: the same judges, with the labels drawn in two rounds as
  the docs advise: a third uniform, then ``sample --by-judge`` (Neyman allocation over the best
  judge's grades, weights from the first round's labels); the joint estimator's baseline stays
  uniform with the same number of labels.

Printed per configuration and metric: coverage of the 95% intervals (pooled over systems and
runs; MC SE ≈ √(c(1 − c)/runs)), and the median over systems of the width ratio ppi / joint
(mean widths over runs).  Results go to ``bench/results/judges.json``.

Also (``--classes-runs R``, 0 to skip) the equivalence-class study: a simulated TAC-style world
with aliases (8 systems, 30 labels each, a judge of correlation ≈ 0.83), precision width ratio
ppi / joint and coverage, each estimator with its default ``--precision-form auto``.

Usage: nice python bench/judges.py [--runs R] [--bootstrap B] [--n 30] [--systems 16] [--seed S]
[--configs prob,graded,...] [--classes-runs R]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from receval.config import TaskConfig
from receval.design import draw_precision_samples
from receval.estimators.base import ScoringContext
from receval.estimators.registry import get_estimator
from receval.estimators.sample_data import build_sample_data
from receval.options import ScoreOptions
from receval.scoring import fit
from receval.task import Task, with_annotation

sys.path.append(str(Path(__file__).resolve().parent))
from harness import git_commit

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-rag25-judges"
RESULTS = Path(__file__).resolve().parent / "results" / "judges.json"
METRICS = ("precision", "pooled_recall")
CONFIGS = (
    "prob",
    "graded",
    "graded/strata",
    "several/strata",
    "several",
    "umbrela+useless",
    "umbrela+adversarial",
    "noisy",
    "biased",
)


def read_qrels(path: Path) -> pd.DataFrame:
    with gzip.open(path, "rt") as fh:
        frame = pd.read_csv(fh, sep=r"\s+", header=None, names=["q", "it", "doc", "grade"])
    return frame[["q", "doc", "grade"]].astype({"q": str, "doc": str, "grade": int})


class RagWorld:
    """Constructed systems over the real RAG 2025 pairs, NIST labels as the truth."""

    def __init__(self, systems: int, seed: int) -> None:
        nist = read_qrels(DATA / "nist.qrels.gz")
        umb = read_qrels(DATA / "umbrela.qrels.gz")
        pairs = nist.merge(umb, on=["q", "doc"], suffixes=("_nist", "_umb"))
        self.pairs = pairs
        rel = (pairs["grade_nist"].to_numpy() >= 2).astype(float)
        rng = np.random.default_rng(seed)
        topic = pd.factorize(pairs["q"])[0]
        T = topic.max() + 1
        rows = []
        for i in range(systems):
            # a system's recall and precision odds vary by topic (easy and hard topics)
            a = np.clip(rng.uniform(0.08, 0.25) * np.exp(rng.normal(0, 0.5, T)), 0.01, 0.9)
            b = a * rng.uniform(0.25, 1.6) * np.exp(rng.normal(0, 0.7, T))
            take = rng.random(len(pairs)) < np.where(rel == 1, a[topic], np.minimum(b[topic], 1))
            rows.append(pd.DataFrame({"system": f"s{i:02d}", "query_id": pairs["q"][take]}))
            rows[-1]["answer"] = pairs["doc"][take].to_numpy()
        runs = pd.concat(rows, ignore_index=True)
        exact = TaskConfig(name="rag25")
        self.task = Task.from_frames(runs=runs, config=exact)
        key = pd.MultiIndex.from_frame(pairs[["q", "doc"]])
        at = pd.Series(np.arange(len(pairs)), index=key).reindex(
            pd.MultiIndex.from_frame(self.task.facts[["query_id", "answer"]])
        )
        self.at = at.to_numpy(np.int64)  # fact id -> pair row
        self.label = rel[self.at]
        self.grade = pairs["grade_umb"].to_numpy(float)[self.at]
        out = self.task.outputs
        correct = self.label[out["fact"].to_numpy(np.int64)]
        g = pd.DataFrame({"system": out["system"].astype(str), "c": correct}).groupby("system")
        pool_true = float(self.label[self.task.facts["in_pool"].to_numpy(bool)].sum())
        self.truth = pd.DataFrame(
            {"precision": g["c"].mean(), "pooled_recall": g["c"].sum() / pool_true}
        )

    def judges(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Grades 0–4 of every fact by UMBRELA and the constructed judges."""
        F = len(self.label)
        umb = self.grade
        topics = self.task.facts["query_id"].to_numpy()
        chosen = rng.choice(np.unique(topics), size=len(np.unique(topics)) // 3, replace=False)
        favoured = np.zeros(F, bool)  # the facts of system s00, which the adversary favours
        out = self.task.outputs
        favoured[out["fact"].to_numpy(np.int64)[(out["system"] == "s00").to_numpy()]] = True
        return {
            "umbrela": umb,
            "noisy": np.clip(np.round(umb + rng.normal(0, 1.5, F)), 0, 4),
            "biased": np.clip(umb + 2 * np.isin(topics, chosen), 0, 4),
            "useless": rng.integers(0, 5, F).astype(float),
            "adversarial": np.where(favoured, 4.0, 4.0 - umb),
        }

    def judge_table(self, grades: dict[str, np.ndarray], names: list[str], prob: bool):
        facts = self.task.facts
        frames = []
        for name in names:
            score = grades[name] / 4.0 if prob else grades[name]
            frames.append(
                pd.DataFrame(
                    {
                        "query_id": facts["query_id"].to_numpy(),
                        "answer": facts["answer"].to_numpy(),
                        "judge_score": score,
                        "judge": "" if prob else name,
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)

    def annotate(self, rng: np.random.Generator, n: int) -> dict:
        task = self.task
        samples = draw_precision_samples(task.outputs, task.queries, n, rng)
        return self.labelled(samples)

    def annotate_by_judge(self, rng: np.random.Generator, n: int, judge: pd.DataFrame) -> dict:
        """Two rounds, as the docs advise: n/3 uniform draws per system, then the rest with
        ``sample --by-judge``'s design (Neyman over the judge's grades from round 1's labels)."""
        from receval.estimators.judge_calibration import judge_strata_design

        first = self.annotate(rng, n // 3)
        task = with_annotation(_with_scale(self.task, True), judge=judge, **first)
        design = judge_strata_design(task)
        second = draw_precision_samples(
            task.outputs, task.queries, n - n // 3, rng, distribution=design, sample="round-2"
        )
        rows = np.concatenate([first["samples"].attrs["rows"], second.attrs["rows"]])
        first["samples"].attrs, second.attrs = {}, {}
        both = pd.concat([first["samples"], second], ignore_index=True)
        both.attrs["rows"] = rows
        return self.labelled(both)

    def labelled(self, samples: pd.DataFrame) -> dict:
        """The samples and NIST's labels of the facts they drew."""
        task = self.task
        rows = samples.attrs["rows"]
        facts = np.unique(task.outputs["fact"].to_numpy(np.int64)[rows])
        judgments = pd.DataFrame(
            {
                "query_id": task.facts["query_id"].to_numpy()[facts],
                "answer": task.facts["answer"].to_numpy()[facts],
                "label": np.where(self.label[facts] == 1, "C", "W"),
            }
        )
        return {"samples": samples, "judgments": judgments}


def config_judges(config: str) -> tuple[list[str], bool]:
    """(judge names, as a probability without a scale) of a configuration (``…/strata``: the
    same judges, labels drawn in two rounds, the second by ``sample --by-judge``)."""
    config = config.removesuffix("/strata")
    if config == "prob":
        return ["umbrela"], True
    if config == "graded":
        return ["umbrela"], False
    if config == "several":
        return ["umbrela", "noisy", "biased", "useless", "adversarial"], False
    if "+" in config:
        return config.split("+"), False
    return [config], False


def campaign(world: RagWorld, rng, n: int, configs: dict, seed: int, B: int) -> dict:
    """{config or "joint": {metric: (point, lo, hi)}} for one human sample (and one two-round
    sample per ``…/strata`` configuration), every configuration with ``n`` draws per system."""
    out = {}
    base = world.task
    tables = world.annotate(rng, n)
    for name, (judge, graded) in configs.items():
        mine = tables
        if name.endswith("/strata"):
            mine = world.annotate_by_judge(rng, n, judge)
        task = with_annotation(
            _with_scale(base, graded),
            judge=judge,
            samples=mine["samples"],
            judgments=mine["judgments"],
        )
        data = build_sample_data(task)
        data = data.__class__(**{**data.__dict__, "census": np.zeros(data.m, bool)})
        wanted = [("joint", "joint")] if not out else []
        wanted.append((name, "ppi"))
        for label, estimator in wanted:
            options = ScoreOptions(estimator=estimator, bootstrap=B, seed=seed)
            ctx = ScoringContext(task, data, options)
            fitted = fit(ctx, get_estimator(estimator))
            est = {}
            for metric in METRICS:
                e = fitted.intervals.estimate(ctx, fitted.run, metric)
                est[metric] = (e.point, e.lower, e.upper)
            out[label] = est
        out["systems"] = data.systems
    return out


def _with_scale(task: Task, graded: bool) -> Task:
    import dataclasses

    config = dataclasses.replace(task.config, judge_scale=(0.0, 4.0) if graded else None)
    return dataclasses.replace(task, config=config)


def summarise(world: RagWorld, results: list[dict], names: list[str]) -> list[dict]:
    systems = results[0]["systems"]
    rows = []
    for metric in METRICS:
        true = world.truth.loc[systems, metric].to_numpy(float)
        jl = np.array([r["joint"][metric][1] for r in results])
        jh = np.array([r["joint"][metric][2] for r in results])
        for name in ["joint", *names]:
            lo = np.array([r[name][metric][1] for r in results])
            hi = np.array([r[name][metric][2] for r in results])
            covered = (lo <= true + 1e-12) & (true - 1e-12 <= hi)
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = np.nanmean(hi - lo, axis=0) / np.nanmean(jh - jl, axis=0)
            rows.append(
                {
                    "config": name,
                    "metric": metric,
                    "coverage": round(float(np.nanmean(covered)), 4),
                    "median_width_ratio": round(float(np.nanmedian(ratio)), 4),
                    "max_width_ratio": round(float(np.nanmax(ratio)), 4),
                }
            )
    return rows


def tuned_judge(y: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """logistic(k(2y − 1) + ε), ε ~ N(0, 1), with k tuned so that corr(s, y) ≈ ``rho``."""
    noise = rng.normal(size=y.size)
    lo, hi = 0.0, 20.0
    for _ in range(40):
        k = (lo + hi) / 2
        s = 1.0 / (1.0 + np.exp(-(k * (2 * y - 1) + noise)))
        lo, hi = (k, hi) if np.corrcoef(s, y)[0, 1] < rho else (lo, k)
    return 1.0 / (1.0 + np.exp(-(k * (2 * y - 1) + noise)))


def classes_study(runs: int, B: int, seed: int, n: int = 30, rho: float = 0.83) -> dict:
    """Equivalence classes (TAC-style aliases, simulated: 8 systems, alias rate 0.3) with a judge
    of correlation ≈ ``rho``: precision width ratio ppi / joint (each estimator's default
    ``--precision-form auto``) and coverage at ``n`` labels per system."""
    import tempfile

    from receval.formats.bundle import write_bundle
    from receval.simulation import SimulationConfig, simulate_world
    from receval.task import load_task

    cfg = SimulationConfig(systems=8, queries=60, name="classes", teams=4, alias_rate=0.3)
    world = simulate_world(cfg, np.random.default_rng(seed + 10))
    root = Path(tempfile.mkdtemp()) / "w"
    base = load_task(write_bundle(root, world.tables(), world.task_config()))
    label = np.full(len(base.facts), np.nan)
    label[base.truth["fact"].to_numpy(np.int64)] = base.truth["value"].to_numpy(float)
    truth = world.truth_metrics().set_index("system")
    facts = base.facts
    pooled = np.flatnonzero(facts["in_pool"].to_numpy())
    score = tuned_judge(np.nan_to_num(label[pooled]), rho, np.random.default_rng(seed + 3))
    judge = pd.DataFrame(
        {
            "query_id": facts["query_id"].to_numpy()[pooled],
            "answer": facts["answer"].to_numpy()[pooled],
            "judge_score": score,
        }
    )
    widths: dict[str, list] = {"joint": [], "ppi": []}
    covered: dict[str, list] = {"joint": [], "ppi": []}
    keep = ("samples", "judgments", "exhaustive_units", "exhaustive")
    for r in range(runs):
        ann = world.annotate(np.random.default_rng(seed * 100 + r), per_system=n).tables()
        task = with_annotation(base, judge=judge, **{k: v for k, v in ann.items() if k in keep})
        data = build_sample_data(task)
        true = truth.loc[data.systems, "precision"].to_numpy(float)
        for name in ("joint", "ppi"):
            ctx = ScoringContext(task, data, ScoreOptions(estimator=name, bootstrap=B, seed=r))
            fitted = fit(ctx, get_estimator(name))
            e = fitted.intervals.estimate(ctx, fitted.run, "precision")
            widths[name].append(e.upper - e.lower)
            covered[name].append((e.lower <= true + 1e-12) & (true - 1e-12 <= e.upper))
    ratio = np.mean(widths["ppi"], axis=0) / np.mean(widths["joint"], axis=0)
    # Monte Carlo SE of the median ratio: the runs resampled (200 bootstrap sets of runs)
    pick = np.random.default_rng(seed).integers(0, runs, (200, runs))
    w_ppi, w_joint = np.asarray(widths["ppi"]), np.asarray(widths["joint"])
    again = [np.median(w_ppi[ix].mean(0) / w_joint[ix].mean(0)) for ix in pick]
    cover = float(np.mean(covered["ppi"]))
    return {
        "world": "simulated, 8 systems, alias_rate 0.3 (equivalence classes)",
        "n": n,
        "judge_correlation": rho,
        "unresolved_outputs": int(data.unresolved_outputs),
        "precision_median_width_ratio": round(float(np.median(ratio)), 4),
        "precision_median_width_ratio_se": round(float(np.std(again)), 4),
        "precision_max_width_ratio": round(float(np.max(ratio)), 4),
        "runs": runs,
        "ppi_coverage": round(cover, 4),
        "ppi_coverage_se": round(float(np.sqrt(cover * (1 - cover) / np.size(covered["ppi"]))), 4),
        "joint_coverage": round(float(np.mean(covered["joint"])), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--systems", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--classes-runs", type=int, default=24)
    parser.add_argument(
        "--classes-only",
        action="store_true",
        help="run only the equivalence-class study and replace the 'classes' entry of --out",
    )
    args = parser.parse_args()
    start = time.time()
    classes = None
    if args.classes_runs:
        classes = classes_study(args.classes_runs, args.bootstrap, args.seed)
        classes["command"] = (
            f"python bench/judges.py --classes-only --classes-runs {args.classes_runs} "
            f"--bootstrap {args.bootstrap} --seed {args.seed}"
        )
        classes["git_commit"] = git_commit()
        print(
            f"classes: precision median width ratio ppi/joint "
            f"{classes['precision_median_width_ratio']:.3f} (SE "
            f"{classes['precision_median_width_ratio_se']:.3f}, max "
            f"{classes['precision_max_width_ratio']:.3f}), coverage ppi "
            f"{classes['ppi_coverage']:.3f}, joint {classes['joint_coverage']:.3f}",
            flush=True,
        )
    if args.classes_only:
        record = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
        record["classes"] = classes
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
        return
    world = RagWorld(args.systems, args.seed)
    grades = world.judges(np.random.default_rng(args.seed + 5))
    names = args.configs.split(",")
    configs = {}
    for name in names:
        judges, prob = config_judges(name)
        configs[name] = (world.judge_table(grades, judges, prob), not prob)
    results = []
    for r in range(args.runs):
        rng = np.random.default_rng(args.seed * 1000 + r)
        results.append(campaign(world, rng, args.n, configs, args.seed * 1000 + r, args.bootstrap))
    rows = summarise(world, results, names)
    print(f"{'config':22} {'metric':14} {'cover':>6} {'median':>7} {'max':>6}")
    for row in rows:
        print(
            f"{row['config']:22} {row['metric']:14} {row['coverage']:6.3f} "
            f"{row['median_width_ratio']:7.3f} {row['max_width_ratio']:6.3f}"
        )
    elapsed = time.time() - start
    print(f"({elapsed:.0f} s; runs={args.runs}, B={args.bootstrap}, n={args.n})")
    correlations = {
        k: round(float(np.corrcoef(v, world.label)[0, 1]), 3) for k, v in grades.items()
    }
    record = {
        "command": "python bench/judges.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "seed": args.seed,
        "git_commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(elapsed, 1),
        "pairs": len(world.pairs),
        "judge_correlation_with_nist": correlations,
        "figures": rows,
        "classes": classes,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
