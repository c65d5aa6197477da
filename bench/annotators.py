"""What do the intervals cover when annotators err?  Merged labels vs the latent truth.

A simulated world (:mod:`receval.simulation`, default 12 systems) whose every candidate fact
gets ``--annotators`` votes (default 3), each wrong independently with probability ``--error``
(default 0.10), merged by majority — the merged label a fact *would* get, fixed per repetition
for the whole universe, so the merged-label value of every metric is known exactly.  Each
repetition draws ``--per-system`` uniform draws per system and the default exhaustive units
(perfect exhaustive annotators), labels the drawn facts with their votes, and scores twice with
the same replicates: the default bootstrap (conditional on the merged labels) and with
``annotator_resampling=True``.  It prints the 95 % coverage (unflagged numbers) of

* precision and pooled recall against their merged-label values (what the default intervals are
  about), and
* precision, pooled recall, true recall and F1 against the latent truth,

with Monte Carlo standard errors over repetitions, and the median interval width ratio.

Usage: python bench/annotators.py [--reps R] [--bootstrap B] [--per-system N] [--seed S]
The default (200 repetitions, B = 200) takes about 1 minute of CPU.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from receval.formats.bundle import write_bundle
from receval.scoring import ScoreOptions, score_task
from receval.simulation import SimulationConfig, World, simulate_world
from receval.task import Task, load_task, with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

METRICS = ("precision", "pooled_recall", "recall", "f1")


def world_and_task(seed: int, systems: int) -> tuple[World, Task]:
    cfg = SimulationConfig(systems=systems, queries=100, annotators=3, annotator_error=0.1)
    world = simulate_world(cfg, np.random.default_rng([seed, 1]))
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "world", world.tables(), world.task_config()))
    return world, base


def universe_votes(world: World, annotators: int, error: float, rng) -> np.ndarray:
    """(candidates × annotators) votes, True = correct: the truth flipped w.p. ``error``."""
    truth = world.candidate_true.astype(bool)
    flips = rng.random((truth.size, annotators)) < error
    return truth[:, None] ^ flips


def merged_metrics(world: World, merged: np.ndarray) -> pd.DataFrame:
    """Precision and pooled recall of every system with the merged labels as the truth."""
    system, cand = world.output_system, world.output_candidate
    pool = np.unique(cand)
    pool_correct = merged[pool].sum()
    names = np.asarray(world.systems)
    frame = pd.DataFrame({"system": names[system], "cand": cand}).drop_duplicates()
    frame["m"] = merged[frame["cand"].to_numpy()]
    grouped = frame.groupby("system")["m"]
    return pd.DataFrame(
        {"precision": grouped.mean(), "pooled_recall": grouped.sum() / pool_correct}
    )


def judgments(world: World, samples: pd.DataFrame, votes: np.ndarray) -> pd.DataFrame:
    """Every annotator's vote on each distinct drawn fact."""
    ids = np.unique(world.candidate_ids(samples["query_id"], samples["answer"]))
    k = votes.shape[1]
    query_ids = world.queries["query_id"].to_numpy()
    return pd.DataFrame(
        {
            "query_id": np.repeat(query_ids[world.candidate_query[ids]], k),
            "answer": np.repeat(world.candidate_answer[ids], k),
            "label": np.where(votes[ids].ravel(), "C", "W").astype(object),
            "annotator": np.tile([f"ann{a + 1}" for a in range(k)], ids.size),
        }
    )


def _covers(board: pd.DataFrame, metric: str, true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = board[f"{metric}_lo"].to_numpy(float), board[f"{metric}_hi"].to_numpy(float)
    notes = board["note"].fillna("").astype(str)
    flagged = notes.str.contains("flagged", regex=False).to_numpy() | ~np.isfinite(lo)
    return (lo <= true + 1e-12) & (true - 1e-12 <= hi), flagged


def _coverage(hit: np.ndarray, ok: np.ndarray) -> tuple[float, float]:
    """Coverage over unflagged (rep, system) cells; ratio-estimator SE over repetitions."""
    n = ok.sum(axis=1)
    h = (hit & ok).sum(axis=1)
    c = h.sum() / n.sum()
    R = hit.shape[0]
    return float(c), float(math.sqrt(np.sum((h - c * n) ** 2) / (R * (R - 1))) / n.mean())


def study(
    reps: int,
    *,
    B: int = 200,
    per_system: int = 100,
    systems: int = 12,
    seed: int = 4,
    annotators: int = 3,
    error: float = 0.10,
) -> dict[tuple[str, str, str], tuple[float, float]]:
    """Coverage (unflagged, with its Monte Carlo SE) per (scoring, against, metric)."""
    world, base = world_and_task(seed, systems)
    names = sorted(world.systems)
    latent = world.truth_metrics().set_index("system").reindex(names)
    rng = np.random.default_rng([seed, 2])
    hits: dict[tuple[str, str, str], list[np.ndarray]] = {}
    flags: dict[tuple[str, str, str], list[np.ndarray]] = {}
    widths: dict[str, list[np.ndarray]] = {"default": [], "resampled": []}
    for _ in range(reps):
        votes = universe_votes(world, annotators, error, rng)
        merged = votes.sum(axis=1) * 2 > annotators
        truth_merged = merged_metrics(world, merged).reindex(names)
        ann = world.annotate(rng, per_system=per_system)
        task = with_annotation(
            base,
            samples=ann.samples,
            judgments=judgments(world, ann.samples, votes),
            exhaustive_units=ann.exhaustive_units,
            exhaustive=ann.exhaustive,
        )
        seed_b = int(rng.integers(2**31))
        for kind, resample in (("default", False), ("resampled", True)):
            options = ScoreOptions(bootstrap=B, seed=seed_b, annotator_resampling=resample)
            board = score_task(task, options).leaderboard.set_index("system").reindex(names)
            widths[kind].append((board["precision_hi"] - board["precision_lo"]).to_numpy())
            for metric in METRICS:
                targets = {"latent": latent[metric].to_numpy()}
                if metric in truth_merged:
                    targets["merged"] = truth_merged[metric].to_numpy()
                for against, true in targets.items():
                    hit, flagged = _covers(board, metric, true)
                    hits.setdefault((kind, against, metric), []).append(hit)
                    flags.setdefault((kind, against, metric), []).append(flagged)
    out = {key: _coverage(np.array(hits[key]), ~np.array(flags[key])) for key in sorted(hits)}
    ratio = np.array(widths["resampled"]) / np.array(widths["default"])
    out[("width", "ratio", "precision")] = (float(np.nanmedian(ratio)), math.nan)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, seed=4, reps=200, quick={"reps": 60})
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--per-system", type=int, default=100)
    parser.add_argument("--annotators", type=int, default=3)
    parser.add_argument("--error", type=float, default=0.10)
    parser.add_argument("--systems", type=int, default=12)
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    start = time.process_time()
    cover = study(
        args.reps,
        B=args.bootstrap,
        per_system=args.per_system,
        systems=args.systems,
        seed=args.seed,
        annotators=args.annotators,
        error=args.error,
    )
    seconds = time.process_time() - start
    print(
        f"{args.reps} repetitions, {args.systems} systems, {args.per_system} draws per system, "
        f"{args.annotators} annotators at {args.error:.0%} error, majority merge; "
        f"{seconds:.0f} s CPU"
    )
    for (kind, against, metric), (c, se) in cover.items():
        if kind == "width":
            print(f"  precision interval width, resampled / default: median {c:.2f}")
        else:
            print(f"  {kind:<9} vs {against:<6} {metric:<14} 95% coverage {c:.3f} ± {se:.3f}")
    table = [
        {"intervals": k, "against": a, "metric": m, "value": c, "se": se}
        for (k, a, m), (c, se) in cover.items()
    ]
    harness.store(
        args, "annotators", {"coverage": table}, argv, output=tee, title="annotator error"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
