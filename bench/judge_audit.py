"""The judge audit's favouritism test on real judge data: false flags and power.

World: the TREC RAG 2025 pairs (``../shared/data/trec-rag25-judges``: NIST's labels as the
truth, UMBRELA's real 0–4 grades as the judge) with ``--systems`` systems constructed over them
as ``bench/judges.py`` does (topic-dependent recall and precision odds, overlapping outputs).
Every repetition builds a new world (new systems), draws ``--n`` uniform labels per system, and
runs the audit's test (:func:`receval.judge_audit.stratified_permutation_test`, Holm over the
systems at level 0.95) on

* ``null``: UMBRELA's real grades (no system favoured);
* ``favoured``: UMBRELA's grade raised by one level (capped at 4) on every fact system s00
  output (so the facts it shares with other systems are raised too);
* ``favoured_prob``: the grade / 4 as a probability, + 0.2 (capped at 1) on s00's facts;
* ``raw_residual``: for comparison, the naive test of the residual s − f (permuted within
  queries only, not within the human label): it tracks each system's precision, not favour.

Printed: the share of repetitions flagging no system (null), flagging s00 (power) and flagging
some other system (favoured worlds), each with its Monte Carlo SE √(p(1 − p)/R).  Optionally
(``--ppi-runs K``) K end-to-end ``receval.score(..., estimator="ppi")`` runs on the null world
give judge.csv's labels saved (1 − width ratio²) for UMBRELA.  Results in
``bench/results/judge_audit.json``.

Usage: nice python bench/judge_audit.py [--reps 100] [--n 10,30] [--systems 16] [--seed 1]
[--ppi-runs 3]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judges import RagWorld

from receval.judge_audit import _labelled, holm, stratified_permutation_test
from receval.task import with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

RESULTS = Path(__file__).resolve().parent / "results" / "judge_audit.json"
LEVEL = 0.95


def flags(values, strata, member, rng, permutations: int) -> tuple[np.ndarray, np.ndarray]:
    """(flagged (m,) bool, excess (m,)) of the audit's test at LEVEL."""
    excess, p = stratified_permutation_test(values, strata, member, rng, permutations)
    return holm(p) < 1.0 - LEVEL, excess


def repetition(seed: int, systems: int, n: int, permutations: int) -> dict[str, list]:
    """One world, one label sample, every configuration: {config: flagged systems (m,)}."""
    world = RagWorld(systems, seed)
    rng = np.random.default_rng([seed, 7])
    task = with_annotation(world.task, **world.annotate(rng, n))
    names = sorted(task.systems)
    ids, y, strata, member = _labelled(task, names)
    grade = world.grade[ids]
    favoured = member[:, names.index("s00")]
    query = strata // 2
    configs = {
        "null": (grade / 4.0, strata),
        "favoured": (np.minimum(grade + favoured, 4.0) / 4.0, strata),
        "favoured_prob": (np.minimum(grade / 4.0 + 0.2 * favoured, 1.0), strata),
        "raw_residual": (grade / 4.0 - y, query),
    }
    out = {}
    for name, (values, by) in configs.items():
        flagged, excess = flags(values, by, member, rng, permutations)
        out[name] = flagged.tolist()
        out[f"{name}_excess_s00"] = float(excess[names.index("s00")])
    out["labelled_facts"] = int(ids.size)
    out["labelled_s00"] = int(favoured.sum())
    return out


def rate(hits: np.ndarray) -> dict[str, float]:
    p = float(hits.mean())
    return {"rate": round(p, 4), "se": round(float(np.sqrt(p * (1 - p) / hits.size)), 4)}


def summarise(results: list[dict], systems: int) -> dict:
    def matrix(name: str) -> np.ndarray:
        return np.array([r[name] for r in results], bool)

    s00 = 0  # sorted names: s00 first
    null, raw = matrix("null"), matrix("raw_residual")
    out = {
        "null_no_flag": rate(~null.any(axis=1)),
        "null_flags_per_world": round(float(null.sum(axis=1).mean()), 3),
        "raw_residual_no_flag": rate(~raw.any(axis=1)),
        "labelled_facts_median": float(np.median([r["labelled_facts"] for r in results])),
        "labelled_s00_median": float(np.median([r["labelled_s00"] for r in results])),
    }
    for name in ("favoured", "favoured_prob"):
        m = matrix(name)
        out[f"{name}_power"] = rate(m[:, s00])
        out[f"{name}_other_flagged"] = rate(np.delete(m, s00, axis=1).any(axis=1))
        out[f"{name}_excess_s00_median"] = round(
            float(np.median([r[f"{name}_excess_s00"] for r in results])), 4
        )
    return out


def ppi_worth(runs: int, systems: int, n: int, seed: int, bootstrap: int) -> dict:
    """judge.csv's labels saved for UMBRELA (graded 0–4) in end-to-end ppi runs."""
    import dataclasses

    from receval.api import score

    saved, kappa, alpha = [], [], []
    for r in range(runs):
        world = RagWorld(systems, seed + 1000 + r)
        rng = np.random.default_rng([seed, r, 11])
        judge = world.judge_table({"umbrela": world.grade}, ["umbrela"], prob=False)
        config = dataclasses.replace(world.task.config, judge_scale=(0.0, 4.0))
        task = dataclasses.replace(world.task, config=config)
        task = with_annotation(task, judge=judge, **world.annotate(rng, n))
        result = score(task, estimator="ppi", bootstrap=bootstrap, seed=seed + r)
        frame = result.judge_audit
        rows = frame[frame["system"] != "all"]
        saved.extend(rows["labels_saved"].tolist())
        overall = frame[frame["system"] == "all"].iloc[0]
        kappa.append(float(overall["kappa"]))
        alpha.append(float(overall["alpha"]))
    s = np.array(saved, float)
    return {
        "runs": runs,
        "bootstrap": bootstrap,
        "labels_saved_median": round(float(np.nanmedian(s)), 4),
        "labels_saved_quartiles": [round(float(q), 4) for q in np.nanquantile(s, [0.25, 0.75])],
        "kappa_mean": round(float(np.mean(kappa)), 4),
        "alpha_mean": round(float(np.mean(alpha)), 4),
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1, reps=100)
    parser.add_argument("--n", default="10,30", help="labels per system (comma-separated)")
    parser.add_argument("--systems", type=int, default=16)
    parser.add_argument("--permutations", type=int, default=999)
    parser.add_argument("--ppi-runs", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--out", default=str(RESULTS))
    args = harness.parse(parser, argv)
    start = time.time()
    figures = {}
    for n in (int(x) for x in args.n.split(",")):
        results = [
            repetition(args.seed * 100_003 + r, args.systems, n, args.permutations)
            for r in range(args.reps)
        ]
        figures[f"n={n}"] = summarise(results, args.systems)
        if args.ppi_runs:
            figures[f"n={n}"]["ppi_umbrela"] = ppi_worth(
                args.ppi_runs, args.systems, n, args.seed, args.bootstrap
            )
        for key, value in figures[f"n={n}"].items():
            print(f"n={n} {key}: {value}", flush=True)
    setting = {"reps": args.reps, "n": args.n, "systems": args.systems}
    setting |= {"permutations": args.permutations, "level": LEVEL}
    seconds = round(time.time() - start, 1)
    if not args.no_store:
        command = harness.command("judge_audit", argv)
        harness.store_result("judge_audit", command, args.seed, figures, out=args.out,
                             seconds=seconds, **setting)  # fmt: skip


if __name__ == "__main__":
    main()
