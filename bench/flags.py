"""Flags and looking: which intervals deserve a note, measured; what a top-up after looking does.

Two studies (issue 37, items 3 and 4):

* ``looking``: a 12-system null world (:func:`bench.topup.null_world`: every system the same true
  precision 0.4 and recall 0.2, teams, shared facts, exhaustive units).  Round 1: ``--first``
  draws per system; score; the best ``--top`` systems by F1 are topped up with
  :func:`receval.planning.adaptive_sample_sizes` at ``--width`` (what ``receval sample --adaptive
  --target-width W --system …`` does after looking at the leaderboard); score again, with the
  default (which now detects the partial round) and with explicit ``intervals="bootstrap"``.
  Per metric: the coverage of the topped-up and the other systems' intervals (unflagged ones
  only, and all), the share flagged, the median half-width, and the tier family-wise error
  (more than one tier: every system is equally good).
* ``calibration``: one round of ``--per-system`` draws per system (20: the README's first
  round), scored with the defaults, on real and simulated worlds built to break the intervals
  (``kbp-sim``: the demo bundle with its truth; ``parabank``, ``msmarco``: real systems, every
  pooled output judged by people; ``tiny``: precision 0.02–0.1; ``high``: precision 0.95–1;
  ``shared``: teammates that output nearly the same facts; ``heavy``: entity-relation design,
  heavy-tailed weights; ``uneven``: 5 to 120 draws per system; ``null``).  Per metric the coverage
  of unflagged and flagged intervals against the truth, and the share of leaderboard rows with
  a flag (and with any note).  ``parabank-units`` and ``msmarco-units``: the real worlds with
  60 queries drawn as exhaustive units each repetition (the pool is their universe), so recall,
  F1 and the notes an organiser would see are measured too.
* ``target``: precision at the target recall (``--target-recall``), one round of 20 draws per
  system, on :data:`TARGET_SETTINGS`: ``data/kbp-sim`` at the README's target 0.1 and, held
  out, at 0.05 and 0.2 (an extrapolated regime: most lists end before it); ParaBank's 36 real
  systems ranked by their NLL (query units, the pool as universe) at 0.05; simulated worlds
  (defaults, entity-relation weights, uneven samples of 5–120 draws, precision 0.02–0.1).  The
  truth is the precision where the list's exact yield reaches the target
  (:func:`true_at_target`; none when the list falls short).  Per world: rows noted, and the
  coverage of the unflagged intervals where a truth exists, for the curve (split by whether
  some replicates fell short of the target: the note this study removed) and for Dimm's
  extrapolation (split at :data:`NEARLY_ALL_SHORT`).

Usage: python bench/flags.py [--only looking calibration target] [--reps R] [--seed S]
[--json FILE]
Results (per study: command, seed, commit, date, figures) go to ``bench/results/flags.json``.
``--only looking --reps 30`` takes about 3 CPU minutes, ``--only calibration --reps 12`` about
30 CPU seconds (each several minutes of wall time on a busy machine).

Measured (seed 37; before = the flags of 13e5542 on the same draws, after = this module's):

* calibration, rows of the leaderboard with a flag, before -> after: kbp-sim (70 systems)
  0.83 -> 0.00, ParaBank (36) 0.76 -> 0.00, MS MARCO (5) 0.62 -> 0.00, null 0.94 -> 0.00,
  uneven 0.97 -> 0.00, heavy 1.00 -> 0.00, shared 0.38 -> 0.00, tiny 0.81 -> 0.17, high 1.00 ->
  0.86.  Unflagged 95 % coverage after (± cluster SE over repetitions): precision 0.927–1.0
  (kbp-sim 0.931 ± 0.020, ParaBank 0.958 ± 0.010, null 0.927 ± 0.028), pooled recall 0.93–0.98
  except the shared world, 0.90 ± 0.07 (whole repetitions miss together when the sample
  under-estimates the pool's correct facts: no label-free count sees it); flagged precision
  intervals covered 0.44 (tiny) and 0.53 (high).
* looking (30 repetitions): with the bootstrap the topped-up systems' pooled recall covered
  0.52 ± 0.09 (bias +0.056 on 0.2), recall and F1 0.73, the other systems' precision 0.80 and
  pooled recall 0.87, tiers split the equal systems in 0.33 ± 0.09 of repetitions; the default
  now chooses the anytime intervals there: every number covered 0.94–1.0, tier FWER 0, half-widths
  of pooled recall 0.24–0.26 (bootstrap 0.07), of the topped-up systems' precision 0.019 (0.022).
  An explicit bootstrap flags every number but the topped-up systems' precision (0.956).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from receval.design import new_sample_round
from receval.planning import adaptive_sample_sizes
from receval.scoring import ScoreOptions, score_task
from receval.task import with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

HERE = Path(__file__).resolve().parent
METRICS = ("precision", "pooled_recall", "recall", "f1")
VARIANTS = ("default", "bootstrap", "anytime")


def sibling(name: str):
    """The bench script ``bench/<name>.py`` as a module (registered: dataclasses need it)."""
    key = f"bench_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def flagged(notes: pd.Series, metric: str) -> np.ndarray:
    """Which rows' ``note`` flags ``metric`` (F1 rests on precision and recall: any flag)."""
    notes = notes.fillna("").astype(str)
    if metric == "f1":
        return notes.str.contains("flagged", regex=False).to_numpy()
    if metric == "recall":
        return (
            notes.str.contains("recall: flagged", regex=False)
            | notes.str.contains("pooled_recall: flagged", regex=False)
        ).to_numpy()
    return notes.str.contains(f"{metric}: flagged", regex=False).to_numpy()


def covered(board: pd.DataFrame, truth: pd.DataFrame, metric: str) -> np.ndarray:
    true = truth[metric].reindex(board.index).to_numpy(float)
    lo, hi = board[f"{metric}_lo"].to_numpy(float), board[f"{metric}_hi"].to_numpy(float)
    return (lo <= true + 1e-12) & (true - 1e-12 <= hi)


def share(x) -> tuple[float, float]:
    """Mean of 0/1 values and its binomial Monte Carlo SE."""
    x = np.asarray(x, float)
    if not x.size:
        return math.nan, math.nan
    p = float(x.mean())
    return p, math.sqrt(max(p * (1 - p), 1e-12) / x.size)


def cluster_share(hit: np.ndarray, keep: np.ndarray) -> tuple[float, float]:
    """Coverage over the kept (rep, system) cells, SE from per-repetition totals (a ratio
    estimator: one world's systems err together)."""
    hit, keep = np.asarray(hit, bool), np.asarray(keep, bool)
    n = keep.sum(axis=1)
    if n.sum() == 0:
        return math.nan, math.nan
    h = (hit & keep).sum(axis=1)
    c = float(h.sum() / n.sum())
    R = hit.shape[0]
    se = math.sqrt(np.sum((h - c * n) ** 2) / (R * (R - 1))) / n.mean() if R > 1 else math.nan
    return c, se


# --------------------------------------------------------------------------- looking


def looking_rep(world, base, truth, rng, *, first: int, top: int, width: float, B: int) -> dict:
    """Round 1, look, top up the best ``top`` by F1, score with the default and bootstrap."""
    topup = sibling("topup")
    ann = world.annotate(rng, per_system=first)
    systems = sorted(world.systems)
    opts = ScoreOptions(bootstrap=B, seed=int(rng.integers(2**31)))
    task = topup._annotated(world, base, ann.samples, ann)
    chosen = list(score_task(task, opts).leaderboard["system"][:top])
    plan = adaptive_sample_sizes(task, width, systems=chosen)
    sizes = dict(zip(plan["system"], plan["n"].astype(int), strict=True))
    extra = new_sample_round(task, sizes, seed=int(rng.integers(2**31)), systems=chosen)
    samples = topup._concat(ann.samples, extra.samples)
    looked = topup._annotated(world, base, samples, ann)
    out = {"topped": np.isin(systems, [s for s, n in sizes.items() if n > 0])}
    for name, options in (
        ("default", opts),
        ("bootstrap", dataclasses.replace(opts, intervals="bootstrap")),
        ("anytime", dataclasses.replace(opts, intervals="anytime")),
    ):
        result = score_task(looked, options)
        board = result.leaderboard.set_index("system").reindex(systems)
        tiers = board["tier"].replace("", np.nan).astype(float)
        rec = {"split": bool(np.nanmax(tiers) > 1), "interval": board["interval"].iloc[0]}
        for metric in METRICS:
            rec[f"cover_{metric}"] = covered(board, truth, metric)
            rec[f"flag_{metric}"] = flagged(board["note"], metric) | ~np.isfinite(
                board[f"{metric}_lo"].to_numpy(float)
            )
            rec[f"half_{metric}"] = (board[f"{metric}_hi"] - board[f"{metric}_lo"]).to_numpy() / 2
            rec[f"error_{metric}"] = board[metric].to_numpy(float) - truth[metric].reindex(
                systems
            ).to_numpy(float)
        out[name] = rec
    return out


def looking_study(reps: int, *, seed: int = 37, first: int = 20, top: int = 3,
                  width: float = 0.05, B: int = 200) -> dict:  # fmt: skip
    """``reps`` repetitions of the look-then-top-up scenario in one null world."""
    topup = sibling("topup")
    world, base = topup.null_world(seed, 12)
    truth = world.truth_metrics().set_index("system")
    rng = np.random.default_rng([seed, 3])
    runs = [
        looking_rep(world, base, truth, rng, first=first, top=top, width=width, B=B)
        for _ in range(reps)
    ]
    return looking_figures(runs)


def looking_figures(runs: list[dict]) -> dict:
    topped = np.array([r["topped"] for r in runs])
    fig: dict = {"reps": len(runs)}
    for name in VARIANTS:
        recs = [r[name] for r in runs]
        f = {"interval": recs[0]["interval"], "fwer": share([r["split"] for r in recs])}
        for metric in METRICS:
            hit = np.array([r[f"cover_{metric}"] for r in recs])
            flag = np.array([r[f"flag_{metric}"] for r in recs])
            half = np.array([r[f"half_{metric}"] for r in recs])
            err = np.array([r[f"error_{metric}"] for r in recs])
            for group, mask in (("topped", topped), ("others", ~topped)):
                f[f"{metric}_{group}"] = {
                    "cover_unflagged": cluster_share(hit, mask & ~flag),
                    "cover_all": cluster_share(hit, mask),
                    "flagged": float(flag[mask].mean()),
                    "half_width": float(np.nanmedian(half[mask])),
                    "bias": float(np.nanmean(err[mask])),
                }
        fig[name] = f
    return fig


def print_looking(fig: dict) -> None:
    print(f"looking: {fig['reps']} repetitions (null world, top-up of the best by F1)")
    for name in VARIANTS:
        f = fig[name]
        p, se = f["fwer"]
        print(f"  {name}: {f['interval']}")
        print(f"    tier FWER {p:.3f} ± {se:.3f}")
        for metric in METRICS:
            for group in ("topped", "others"):
                g = f[f"{metric}_{group}"]
                c, cse = g["cover_unflagged"]
                a, ase = g["cover_all"]
                print(
                    f"    {metric:<14} {group:<7} unflagged {c:.3f} ± {cse:.3f}  all {a:.3f} ± "
                    f"{ase:.3f}  flagged {g['flagged']:.2f}  half-width {g['half_width']:.3f}  "
                    f"bias {g['bias']:+.4f}"
                )


# --------------------------------------------------------------------------- calibration

#: simulated worlds built to break the intervals: (SimulationConfig fields, draws per system)
SIMULATED = {
    "tiny": ({"precision_range": (0.02, 0.1), "recall_range": (0.02, 0.1)}, 20),
    "high": ({"precision_range": (0.95, 0.999), "recall_range": (0.1, 0.4)}, 20),
    "shared": ({"member_spread": 0.05, "team_spread": 0.3}, 20),
    "heavy": ({"distribution": "entity-relation"}, 20),
    "uneven": ({}, "uneven"),
    "null": ({"precision_range": (0.4, 0.400001), "recall_range": (0.2, 0.200001)}, 20),
}
#: the uneven world's draws per system (cycled over the systems)
UNEVEN = (5, 10, 20, 40, 120)


def simulated_setting(name: str, seed: int):
    """(world, base task, truth, annotate) for the simulated world ``name``."""
    from receval.simulation import SimulationConfig, simulate_world

    topup = sibling("topup")
    fields, per = SIMULATED[name]
    cfg = SimulationConfig(systems=16, queries=60, teams=5, per_system=20, **fields)
    world = simulate_world(cfg, np.random.default_rng([seed, 11]))
    from receval.formats.bundle import write_bundle
    from receval.task import load_task

    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "w", world.tables(), world.task_config()))
    truth = world.truth_metrics().set_index("system")
    systems = sorted(world.systems)

    def annotate(rng):
        ann = world.annotate(rng, per_system=20)
        samples = ann.samples
        if per == "uneven":
            sizes = {s: UNEVEN[k % len(UNEVEN)] for k, s in enumerate(systems)}
            samples = new_sample_round(base, sizes, seed=int(rng.integers(2**31))).samples
            samples.attrs = {}
        return with_annotation(
            base,
            samples=samples,
            judgments=topup.label_from_truth(world, samples),
            exhaustive_units=ann.exhaustive_units,
            exhaustive=ann.exhaustive,
        )

    return truth, annotate


#: exhaustive units (queries) drawn per repetition in the real worlds with units (``-units``)
REAL_UNITS = 60


def query_units(task, value: pd.Series, rng, n: int = REAL_UNITS) -> dict:
    """Exhaustive units for a world whose pool is its universe (every pooled fact judged): ``n``
    queries drawn uniformly without replacement, each listing its correct pooled facts."""
    facts = task.facts
    queries = np.unique(facts["query_id"].to_numpy())
    chosen = rng.choice(queries, size=min(n, queries.size), replace=False)
    correct = value.reindex(np.arange(len(facts))).fillna(0).to_numpy() > 0
    keep = correct & np.isin(facts["query_id"].to_numpy(), chosen)
    listed = facts[keep]
    return {
        "exhaustive_units": pd.DataFrame({"unit": chosen}),
        "exhaustive": pd.DataFrame({"unit": listed["query_id"].to_numpy(),
                                    "query_id": listed["query_id"].to_numpy(),
                                    "answer": listed["answer"].to_numpy()}),
    }  # fmt: skip


def real_setting(name: str, per: int = 20):
    """(truth, annotate) for a real world (``parabank``, ``msmarco``: every pooled output judged;
    with ``-units`` also :data:`REAL_UNITS` queries as exhaustive units, the pool being the
    universe, so recall and F1 are estimated; ``kbp-sim``: the demo bundle, its truth.tsv and its
    exhaustive units); None when absent."""
    anytime = sibling("anytime")
    units_n = REAL_UNITS if name.endswith("-units") else 0
    name = name.removesuffix("-units")
    if name == "kbp-sim":
        from receval.scoring import true_metrics
        from receval.task import load_task

        root = HERE.parent / "data" / "kbp-sim"
        task = load_task(root)
        truth = true_metrics(task)
        units = pd.read_csv(root / "exhaustive_units.tsv", sep="\t")
        exhaustive = pd.read_csv(root / "exhaustive.tsv", sep="\t", dtype=str)
    else:
        loaded = anytime.parabank_world() if name == "parabank" else anytime.msmarco_world()
        if loaded is None:
            return None
        _, task, truth = loaded
        units = exhaustive = None
        if units_n:  # the pool is the universe: true recall is pooled recall
            truth = truth.assign(recall=truth["pooled_recall"])
            p, r = truth["precision"], truth["recall"]
            truth["f1"] = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)

    value = pd.Series(task.truth["value"].to_numpy(float), index=task.truth["fact"].to_numpy())

    def annotate(rng):
        samples = new_sample_round(task, per, seed=int(rng.integers(2**31))).samples
        facts = task.outputs["fact"].to_numpy(np.int64)[samples.attrs["rows"]]
        samples.attrs = {}
        correct = value.reindex(facts).fillna(0).to_numpy() > 0  # by fact: raw spellings differ
        judgments = pd.DataFrame(
            {"query_id": samples["query_id"], "answer": samples["answer"],
             "label": np.where(correct, "C", "W")}
        ).drop_duplicates(["query_id", "answer"])  # fmt: skip
        frames = {"exhaustive_units": units, "exhaustive": exhaustive}
        if units_n:
            frames = query_units(task, value, rng, units_n)
        return with_annotation(task, samples=samples, judgments=judgments, **frames)

    return truth, annotate


def number_rows(task, result, truth: pd.DataFrame) -> pd.DataFrame:
    """One row per (system, metric): covered, flagged (by the default notes) and the statistics
    a flag could rest on."""
    from receval.estimators.base import ScoringContext
    from receval.estimators.registry import get_estimator
    from receval.estimators.sample_data import build_sample_data

    options = result.options
    data = build_sample_data(task, options.target)
    estimator = get_estimator(options.estimator)
    ctx = ScoringContext(task, data, options)
    sizes = estimator.effective_sizes(ctx, estimator.terms(ctx))
    board = result.leaderboard.set_index("system").reindex(data.systems)
    stats = pd.DataFrame(
        {
            "own": sizes.own_draws,
            "correct_hits": sizes.correct_hits,
            "wrong_hits": sizes.wrong_hits,
            "precision_ess": sizes.precision,
            "precision_vd": sizes.precision_variance,
            "pooled_ess": sizes.pooled_recall,
            "pooled_vd": sizes.pooled_recall_variance,
            "units_with_facts": float(sizes.units_with_facts),
        },
        index=data.systems,
    )
    rows = []
    for metric in METRICS:
        if metric not in truth.columns or truth[metric].isna().all():
            continue
        reps = result.run.replicates[metric]
        point = result.run.point[metric]
        with np.errstate(invalid="ignore", divide="ignore"):
            centred = reps - np.nanmean(reps, axis=0)
            skew = np.nanmean(centred**3, axis=0) / np.nanmean(centred**2, axis=0) ** 1.5
        frame = stats.copy()
        frame["metric"] = metric
        frame["covered"] = covered(board, truth, metric)
        frame["finite"] = np.isfinite(board[f"{metric}_lo"].to_numpy(float))
        frame["flagged"] = flagged(board["note"], metric)
        frame["noted"] = board["note"].fillna("").astype(str).str.len().to_numpy() > 0
        frame["estimate"] = board[metric].to_numpy(float)
        frame["true"] = truth[metric].reindex(data.systems).to_numpy(float)
        frame["skew"] = skew
        frame["point"] = point
        frame["half"] = (board[f"{metric}_hi"] - board[f"{metric}_lo"]).to_numpy(float) / 2
        rows.append(frame.rename_axis("system").reset_index())
    return pd.concat(rows, ignore_index=True)


def calibration_rows(names, reps: int, *, seed: int = 37, B: int = 200) -> pd.DataFrame:
    """The rows of :func:`number_rows` over ``reps`` repetitions of every setting in ``names``."""
    frames = []
    for name in names:
        made = simulated_setting(name, seed) if name in SIMULATED else real_setting(name)
        if made is None:
            print(f"  {name}: its data in ../shared/data are absent, skipped")
            continue
        truth, annotate = made
        rng = np.random.default_rng([seed, 5, len(name)])
        for rep in range(reps):
            task = annotate(rng)
            opts = ScoreOptions(bootstrap=B, seed=int(rng.integers(2**31)))
            result = score_task(task, opts)
            frame = number_rows(task, result, truth)
            frame["setting"], frame["rep"] = name, rep
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


SETTINGS = ("kbp-sim", "parabank", "msmarco", "parabank-units", "msmarco-units", *SIMULATED)


def calibration_figures(rows: pd.DataFrame) -> dict:
    """Per setting and metric: coverage of the unflagged and flagged intervals (cluster SE over
    repetitions), the share flagged; per setting the share of leaderboard rows with a flag and
    with any note."""
    out: dict = {}
    for setting, frame in rows.groupby("setting", sort=False):
        per = {}
        for metric, g in frame.groupby("metric", sort=False):
            flag = (g["flagged"] | ~g["finite"]).to_numpy()
            hit = g["covered"].to_numpy()
            reps = g["rep"].to_numpy()
            R = int(reps.max()) + 1
            shape = (R, -1)
            per[metric] = {
                "cover_unflagged": cluster_share(hit.reshape(shape), ~flag.reshape(shape)),
                "cover_flagged": cluster_share(hit.reshape(shape), flag.reshape(shape)),
                "flagged": float(flag.mean()),
            }
        first = frame[frame["metric"] == "precision"]
        per["rows_flagged"] = float(frame.groupby(["rep", "system"])["flagged"].any().mean())
        per["rows_noted"] = float(first["noted"].mean())
        per["systems"] = int(first["system"].nunique())
        per["reps"] = int(first["rep"].nunique())
        out[str(setting)] = per
    return out


def print_calibration(fig: dict) -> None:
    print("calibration: 20 draws per system, default score; coverage of 95 % intervals")
    for setting, per in fig.items():
        print(
            f"  {setting}: {per['systems']} systems x {per['reps']} repetitions; rows flagged "
            f"{per['rows_flagged']:.2f}, rows with any note {per['rows_noted']:.2f}"
        )
        for metric in METRICS:
            if metric not in per:
                continue
            g = per[metric]
            c, cse = g["cover_unflagged"]
            f, _ = g["cover_flagged"]
            print(
                f"    {metric:<14} unflagged {c:.3f} ± {cse:.3f}  flagged {g['flagged']:.2f} "
                f"(their coverage {f:.3f})"
            )


# --------------------------------------------------------------------------- target

#: worlds of the precision-at-target study: (setting, target recall); kbp-sim at 0.1 is the
#: README's command, the others are held out (other targets, real data, worlds built to break)
TARGET_SETTINGS = (
    ("kbp-sim", 0.1),
    ("kbp-sim", 0.05),
    ("kbp-sim", 0.2),
    ("parabank", 0.05),
    ("base", 0.1),
    ("heavy", 0.1),
    ("uneven", 0.1),
    ("tiny", 0.05),
)


def true_at_target(task, target: float) -> pd.Series:
    """True precision at recall ``target`` per system: goal / k at the (interpolated) rank k where
    the list's true yield first reaches goal = target × (correct facts in the universe); NaN where
    the whole list falls short (then only a model extrapolation answers)."""
    from receval.estimators.target import system_ranks

    value = pd.Series(task.truth["value"].to_numpy(float), index=task.truth["fact"].to_numpy())
    goal = target * float((value == 1).sum())
    out = {}
    for system in task.systems:
        ranks = system_ranks(task.outputs, system).sort_values()
        yield_ = np.cumsum(value.reindex(ranks.index).fillna(0).to_numpy())
        if not yield_.size or yield_[-1] < goal or goal <= 0:
            out[system] = math.nan
            continue
        k = int(np.argmax(yield_ >= goal))
        before = yield_[k - 1] if k else 0.0
        out[system] = goal / (k + (goal - before) / (yield_[k] - before))
    return pd.Series(out, dtype=float)


def parabank_scored():
    """ParaBank with a confidence ranking: every candidate scored by its NLL (as the systems
    ranked them), truth.tsv from the human labels; the Task, or None when the data are absent."""
    from dataclasses import replace

    from receval.config import Matching, TaskConfig
    from receval.task import Task

    real = sibling("ppi").parabank_world()
    if real is None:
        return None
    out = real.task.outputs
    runs = pd.DataFrame(
        {"system": out["system"].astype(str).to_numpy(), "query_id": out["query_id"].to_numpy(),
         "answer": out["answer"].to_numpy(),
         "score": real.task.facts["nll_score"].to_numpy()[out["fact"].to_numpy(np.int64)]}
    )  # fmt: skip
    exact = Matching(strip=False, collapse_whitespace=False, casefold=False)
    task = Task.from_frames(runs=runs, config=TaskConfig(name="parabank", matching=exact))
    old = pd.Series(np.nan_to_num(real.label), index=pd.MultiIndex.from_frame(
        real.task.facts[["query_id", "answer"]]))  # fmt: skip
    facts = task.facts
    label = old.reindex(pd.MultiIndex.from_frame(facts[["query_id", "answer"]])).to_numpy(float)
    truth = pd.DataFrame({"query_id": facts["query_id"].to_numpy(),
                          "answer": facts["answer"].to_numpy(),
                          "answer_raw": facts["answer"].to_numpy(),
                          "fact": np.arange(len(facts), dtype=np.int64), "value": label})  # fmt: skip
    # the pool is the universe: its size is what the organiser declares ([universe] size)
    return replace(task, truth=truth, config=replace(task.config, universe_size=len(facts)))


def parabank_target_setting(per: int = 20):
    """(None, annotate) of :func:`parabank_scored` with ``per`` draws per system and query
    units (:func:`query_units`); None when the data are absent."""
    task = parabank_scored()
    if task is None:
        return None
    value = pd.Series(task.truth["value"].to_numpy(float), index=task.truth["fact"].to_numpy())

    def annotate(rng):
        samples = new_sample_round(task, per, seed=int(rng.integers(2**31))).samples
        facts = task.outputs["fact"].to_numpy(np.int64)[samples.attrs["rows"]]
        samples.attrs = {}
        judgments = pd.DataFrame(
            {"query_id": samples["query_id"], "answer": samples["answer"],
             "label": np.where(value.reindex(facts).to_numpy() > 0, "C", "W")}
        ).drop_duplicates(["query_id", "answer"])  # fmt: skip
        return with_annotation(
            task, samples=samples, judgments=judgments, **query_units(task, value, rng)
        )

    return None, annotate


def target_setting(name: str, seed: int):
    """(truth, annotate) of a target-study world (``base``: the simulator's defaults)."""
    if name == "parabank":
        return parabank_target_setting()
    if name == "base":
        SIMULATED.setdefault("base", ({}, 20))
    if name in SIMULATED:
        return simulated_setting(name, seed)
    return real_setting(name)


def _or_nan(record, name: str) -> float:
    """A system's target-record field, NaN when the system or the field is absent."""
    value = getattr(record, name, None)
    return math.nan if value is None else value


def target_rows(
    settings, reps: int, *, seed: int = 37, B: int = 200, max_nan_share: float | None = None
) -> pd.DataFrame:
    """Per (setting, target, repetition, system): precision at target with its interval, method,
    the share of replicates whose curve fell short of the target, the truth, the note.
    ``max_nan_share``: the share of replicates that may be NaN before an interval is refused
    (the scorer's 0.01 when None; a study of that rule)."""
    if max_nan_share is not None:
        import functools

        from receval.estimators import bootstrap

        original = bootstrap.confidence_interval
        bootstrap.confidence_interval = functools.partial(original, max_nan_share=max_nan_share)
        try:
            return target_rows(settings, reps, seed=seed, B=B)
        finally:
            bootstrap.confidence_interval = original
    frames = []
    for name, target in settings:
        made = target_setting(name, seed)
        if made is None:
            print(f"  {name}: its data in ../shared/data are absent, skipped")
            continue
        _, annotate = made
        rng = np.random.default_rng([seed, 7, len(name), int(target * 1000)])
        true = None
        for rep in range(reps):
            task = annotate(rng)
            true = true_at_target(task, target) if true is None else true
            opts = ScoreOptions(bootstrap=B, seed=int(rng.integers(2**31)), target_recall=target)
            result = score_task(task, opts)
            board = result.leaderboard.set_index("system").reindex(true.index)
            systems = result.record.target.systems
            frames.append(pd.DataFrame({
                "setting": f"{name}@{target:g}", "rep": rep, "system": true.index,
                "true": true.to_numpy(), "estimate": board["precision_at_target"].to_numpy(),
                "lo": board["precision_at_target_lo"].to_numpy(float),
                "hi": board["precision_at_target_hi"].to_numpy(float),
                "method": board["precision_at_target_method"].to_numpy(),
                "short": [_or_nan(systems.get(s), "short_of_target") for s in true.index],
                "draws_at": [_or_nan(systems.get(s), "draws_at_target")
                             for s in true.index],
                "note": board["note"].fillna("").astype(str).to_numpy(),
            }))  # fmt: skip
    rows = pd.concat(frames, ignore_index=True)
    rows["covered"] = (rows["lo"] <= rows["true"] + 1e-12) & (rows["true"] - 1e-12 <= rows["hi"])
    rows["flagged"] = rows["note"].str.contains("precision_at_target: flagged", regex=False)
    rows["flagged"] |= ~np.isfinite(rows["lo"])
    return rows


#: the share of a system's replicates whose curve falls short of the target that splits the
#: study's groups (a Dimm extrapolation almost sure to be one)
NEARLY_ALL_SHORT = 0.9


def _grouped_cover(frame: pd.DataFrame, reps: int) -> tuple[float, float, int]:
    """Coverage of ``frame``'s intervals (cluster SE over repetitions) and their number."""
    if frame.empty:
        return math.nan, math.nan, 0
    keep = frame.groupby("rep")["covered"].agg(["sum", "size"]).reindex(range(reps), fill_value=0)
    hits, sizes = keep["sum"].to_numpy(float), keep["size"].to_numpy(float)
    slots = np.arange(sizes.max())[None, :]  # per repetition: its intervals, hits first
    c, se = cluster_share(slots < hits[:, None], slots < sizes[:, None])
    return c, se, int(sizes.sum())


def target_figures(rows: pd.DataFrame) -> dict:
    """Per setting: rows noted (any note; a precision-at-target note), the coverage of the
    unflagged intervals where the truth exists (curve; Dimm, split at :data:`NEARLY_ALL_SHORT`),
    and of the curve's by the share of replicates that fell short (the note removed)."""
    out: dict = {}
    for setting, frame in rows.groupby("setting", sort=False):
        reps = int(frame["rep"].max()) + 1
        known = frame[np.isfinite(frame["true"]) & ~frame["flagged"]]
        curve, dimm = known[known["method"] == "curve"], known[known["method"] == "dimm"]
        per = {
            "systems": int(frame["system"].nunique()),
            "reps": reps,
            "rows_noted": float((frame["note"].str.len() > 0).mean()),
            "rows_noted_target": float(frame["note"].str.contains("precision_at_target").mean()),
            "rows_flagged_target": float(frame["flagged"].mean()),
            "truth_exists": float(np.isfinite(frame["true"]).mean()),
            "dimm": float((frame["method"] == "dimm").mean()),
            "cover_curve": _grouped_cover(curve, reps),
            "cover_curve_short": _grouped_cover(curve[curve["short"] >= 0.005], reps),
            "cover_curve_reached": _grouped_cover(curve[curve["short"] < 0.005], reps),
            "cover_dimm": _grouped_cover(dimm, reps),
            "cover_dimm_nearly_all_short": _grouped_cover(
                dimm[dimm["short"] >= NEARLY_ALL_SHORT], reps
            ),
            "cover_dimm_other": _grouped_cover(dimm[dimm["short"] < NEARLY_ALL_SHORT], reps),
        }
        out[str(setting)] = per
    return out


def print_target(fig: dict) -> None:
    print("target: precision at the target recall, 20 draws per system, default score")
    for setting, per in fig.items():
        print(
            f"  {setting}: {per['systems']} systems x {per['reps']} reps; rows noted "
            f"{per['rows_noted']:.2f} (precision_at_target {per['rows_noted_target']:.2f}); truth "
            f"exists {per['truth_exists']:.2f}; Dimm {per['dimm']:.2f}"
        )
        for key in ("curve", "curve_reached", "curve_short", "dimm", "dimm_other",
                    "dimm_nearly_all_short"):  # fmt: skip
            c, se, n = per[f"cover_{key}"]
            if n:
                print(f"    unflagged {key:<22} covered {c:.3f} ± {se:.3f} ({n} intervals)")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, seed=37, reps=None)
    parser.add_argument("--only", nargs="*", default=["looking", "calibration", "target"])
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--json", default=str(HERE / "results" / "flags.json"))
    parser.add_argument(
        "--max-nan-share", type=float, default=None,
        help="target: refuse an interval above this share of NaN replicates (scorer: 0.01); "
        "stored as the study target_nan_<share>",
    )  # fmt: skip
    parser.add_argument(
        "--settings", nargs="*", default=None,
        help="target: only these worlds, as name@target (default: all of TARGET_SETTINGS)",
    )  # fmt: skip
    args = harness.parse(parser, argv)
    results: dict = {}
    if "looking" in args.only:
        start = time.process_time()
        fig = looking_study(args.reps or 40, seed=args.seed, B=args.bootstrap)
        fig["cpu_seconds"] = round(time.process_time() - start, 1)
        print_looking(fig)
        results["looking"] = fig
    if "calibration" in args.only:
        start = time.process_time()
        rows = calibration_rows(SETTINGS, args.reps or 12, seed=args.seed, B=args.bootstrap)
        fig = calibration_figures(rows)
        print_calibration(fig)
        fig["cpu_seconds"] = round(time.process_time() - start, 1)
        results["calibration"] = fig
    if "target" in args.only:
        start = time.process_time()
        settings = [
            (name, t)
            for name, t in TARGET_SETTINGS
            if args.settings is None or f"{name}@{t:g}" in args.settings
        ]
        rows = target_rows(settings, args.reps or 12, seed=args.seed, B=args.bootstrap,
                           max_nan_share=args.max_nan_share)  # fmt: skip
        fig = target_figures(rows)
        print_target(fig)
        fig["cpu_seconds"] = round(time.process_time() - start, 1)
        key = "target" if args.max_nan_share is None else f"target_nan_{args.max_nan_share:g}"
        results[key] = fig
    command = harness.command("flags", argv)
    for study, figures in results.items():  # each study keeps the run that measured it
        if args.json and not args.no_store:
            harness.store_result("flags", command, args.seed, figures, title=study, out=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
