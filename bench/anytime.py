"""Label until decided: do the anytime intervals and tiers hold at every look of the loop?

Each repetition simulates an annotation campaign on one world (:mod:`receval.simulation`, truth
known): a first round of 20 draws per system drawn by ``--until-decided`` with nothing labelled
(equal counts plus the floor, in random order; the exhaustive units from the simulator), then
8 rounds of ``receval sample --until-decided --batch B`` (labels from the truth),
with ``receval score --intervals anytime`` after the first round and after every later round
(the *looks*).  Per scenario it prints, with Monte Carlo standard errors over repetitions:

* **null worlds** (every system the same true precision; teams, shared facts, uneven sizes,
  12 and 40 systems; ranked by precision): the share of repetitions in which *any* look splits
  the systems into more than one tier (target ≤ 0.05 + 2 SE), and the share of (repetition,
  system) pairs whose interval covers the true value at *every* look, per metric (target
  ≥ 0.95 − 2 SE);
* **gradient world** (:data:`GRADIENT`: 12 systems, true precision 0.38–0.74 in three groups;
  ranked by precision; a first round of 20 per system, then 8 rounds of 30 per system): the
  share of repetitions with a wrongly ordered decided pair at some look (target ≤ 0.05); the
  pairs the loop decides (paired sequences, Holm, closure) and the labels drawn when it decided
  the last of them; the labels a fixed equal design needs to decide the same pairs — the same
  first round, then equal rounds of the same size drawn like ``--until-decided``'s (floor share,
  random order), read by the same sequences, at most 24 rounds (not reached: counted at that
  bound, so the mean ratio is an upper bound); the pairs the equal design decides with the
  loop's labels; and the final-look width ratio anytime / fixed-n percentile bootstrap on the
  same labels (target ≤ 1.5).

Usage: python bench/anytime.py [--reps R] [--only null12 null40 gradient] [--seed S]
The default (fewer repetitions, to stay near five CPU minutes per study) is what the report
quotes; ``--reps`` raises it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import receval
from receval.formats.bundle import write_bundle
from receval.simulation import SimulationConfig, simulate_world
from receval.task import load_task, with_annotation

COLUMNS = ["sample", "system", "query_id", "answer", "prob", "draw", "design", "mixture_prob"]
METRICS = ("precision", "pooled_recall", "recall", "f1")


def world_task(config: SimulationConfig, seed: int, where: Path):
    """The world and its task (truth included), loaded once."""
    world = simulate_world(config, np.random.default_rng(seed))
    root = write_bundle(where / f"w{seed}", world.tables(), world.task_config(), overwrite=True)
    return world, load_task(root)


def labels_of(task, samples: pd.DataFrame) -> pd.DataFrame:
    """Judgments of every drawn answer from the task's truth (C/W)."""
    truth = task.truth.set_index("fact")["value"]
    key = pd.MultiIndex.from_frame(task.facts[["query_id", "answer"]])
    fact = pd.Series(np.arange(len(key)), index=key)
    drawn = samples[["query_id", "answer"]].drop_duplicates()
    ids = fact.reindex(pd.MultiIndex.from_frame(drawn)).to_numpy()
    value = truth.reindex(ids).fillna(0).to_numpy()
    return drawn.assign(label=np.where(value > 0, "C", "W"), annotator="truth")


class Loop:
    """One campaign: the first round, then until-decided rounds, scoring at every look."""

    def __init__(self, world, task, first: int, seed: int):
        annotation = world.annotate(np.random.default_rng(seed), per_system=1)
        self.base = task
        self.units = annotation.exhaustive_units
        self.exhaustive = annotation.exhaustive
        self.samples = pd.DataFrame(columns=COLUMNS)
        self.task = self._task()
        # the first round by --until-decided too (nothing labelled: equal counts plus the
        # floor, written in random order, so the anytime stream reads it draw by draw)
        self.step(first * len(task.systems), seed, "precision")

    def _task(self):
        return with_annotation(
            self.base, samples=self.samples, judgments=labels_of(self.base, self.samples),
            exhaustive_units=self.units, exhaustive=self.exhaustive,
        )  # fmt: skip

    def look(self, rank_by: str, intervals: str = "anytime"):
        return receval.score(self.task, intervals=intervals, rank_by=rank_by, bootstrap=300)

    def step(self, batch: int, seed: int, rank_by: str) -> bool:
        """One until-decided round; False once it says decided."""
        drawn = receval.sample(
            self.task, until_decided=True, batch=batch, seed=seed, rank_by=rank_by
        )
        if drawn.decided:
            return False
        new = drawn.samples.reindex(columns=COLUMNS)
        new.attrs = {}
        self.samples = (
            pd.concat([self.samples, new], ignore_index=True) if len(self.samples) else new
        )
        self.task = self._task()
        return True


def null_study(systems: int, reps: int, seed: int, where: Path, rounds: int = 8) -> dict:
    config = SimulationConfig(
        systems=systems, queries=max(40, systems * 3), precision_range=(0.5, 0.500001),
        recall_range=(0.05, 0.3), uppercase_teams=0.0, exhaustive_facts=60,
    )  # fmt: skip
    world, task = world_task(config, seed, where)
    truth = world.truth_metrics().set_index("system")
    split, covered, looks = [], {m: [] for m in METRICS}, []
    for rep in range(reps):
        loop = Loop(world, task, first=20, seed=1000 * seed + rep)
        any_split = False
        ok = {m: np.ones(systems, bool) for m in METRICS}
        n_looks = 0
        for r in range(rounds + 1):
            board = loop.look("precision").leaderboard.set_index("system")
            n_looks += 1
            any_split |= board["tier"].astype(str).nunique() > 1
            for m in METRICS:
                true = truth[m].reindex(board.index).to_numpy()
                inside = (board[f"{m}_lo"] - 1e-9 <= true) & (true <= board[f"{m}_hi"] + 1e-9)
                ok[m] &= inside.to_numpy()
            if r == rounds or not loop.step(10 * systems, seed=rep, rank_by="precision"):
                break
        split.append(any_split)
        looks.append(n_looks)
        for m in METRICS:
            covered[m].append(ok[m].mean())  # per repetition: systems of one rep correlate
    return {"split": np.array(split, float), "covered": covered, "looks": looks}


def pair_state(task, rank_by: str = "precision", confidence: float = 0.95):
    """The anytime pair tests of ``task`` (Holm over all ordered pairs, as ``score`` uses them)
    and the systems' names."""
    from receval.estimators.anytime_pairs import anytime_pair_tests
    from receval.estimators.sample_data import build_sample_data

    data = build_sample_data(task)
    tests = anytime_pair_tests(task, data, rank_by, data.sizes > 0, 1.0 - confidence)
    return tests, list(data.systems)


def _better_pairs(task) -> set[tuple[str, str]]:
    tests, names = pair_state(task)
    a, b = np.nonzero(tests.better)
    return {(names[i], names[j]) for i, j in zip(a, b, strict=True)}


#: the gradient world: 12 systems, one per team, true precisions drawn by the simulator inside
#: 0.35–0.80 (world seed 1: 0.74 0.73 0.72 0.70 | 0.58 0.56 0.56 0.55 | 0.49 0.43 0.41 0.38)
GRADIENT = {"systems": 12, "queries": 50, "precision": (0.35, 0.80)}


def gradient_study(reps: int, seed: int, where: Path, rounds: int = 8, per: int = 30) -> dict:
    """The loop (first round 20 per system, then ``rounds`` until-decided rounds of ``per`` per
    system, ranked by precision) against a fixed equal design read by the same sequences (the
    same first round, then equal rounds of the same size, random order, same floor)."""

    m = GRADIENT["systems"]
    config = SimulationConfig(
        systems=m, teams=m, queries=GRADIENT["queries"], precision_range=GRADIENT["precision"],
        recall_range=(0.1, 0.3), uppercase_teams=0.0, exhaustive_facts=60,
    )  # fmt: skip
    world, task = world_task(config, seed, where)
    truth = world.truth_metrics().set_index("system")["precision"]
    out: dict[str, list] = {k: [] for k in ("wrong", "decided", "used", "equal_used",
                                             "equal_at_same", "ratio", "total")}  # fmt: skip
    for rep in range(reps):
        loop = Loop(world, task, first=20, seed=2000 * seed + rep)
        first_seen: dict[tuple[str, str], int] = {}
        bad = False
        for r in range(rounds + 1):
            for pair in _better_pairs(loop.task):
                first_seen.setdefault(pair, len(loop.samples))
                bad |= bool(truth[pair[0]] < truth[pair[1]])
            if r == rounds or not loop.step(per * m, seed=rep, rank_by="precision"):
                break
        pairs = set(first_seen)
        out["wrong"].append(bad)
        out["decided"].append(len(pairs))
        out["total"].append(len(loop.samples))
        # labels the loop used to decide its pairs: the look at which the last one was decided
        used = max(first_seen.values(), default=0)
        out["used"].append(used)
        board = loop.look("precision").leaderboard.set_index("system")
        boot = loop.look("precision", intervals="bootstrap").leaderboard.set_index("system")
        w_any = (board["precision_hi"] - board["precision_lo"]).to_numpy()
        w_boot = (boot["precision_hi"] - boot["precision_lo"]).reindex(board.index).to_numpy()
        out["ratio"].append(float(np.nanmedian(w_any / np.where(w_boot > 0, w_boot, np.nan))))
        need, same = _equal_design(world, task, pairs, used, seed, rep, per, 3 * rounds)
        out["equal_used"].append(need)
        out["equal_at_same"].append(same)
    out["truth"] = sorted(truth.to_numpy(), reverse=True)
    return {k: np.asarray(v, float) for k, v in out.items()}


def _equal_design(world, task, pairs, used, seed, rep, per, max_rounds):
    """Labels an equal design needs to decide ``pairs`` (minus the labels it had drawn when it
    had not within ``max_rounds``: a lower bound) and the pairs it decides with ``used`` labels
    (the loop's)."""
    from receval.until_decided import equal_round

    m = len(task.systems)
    equal = Loop(world, task, first=20, seed=2000 * seed + rep)
    need, same = np.nan, np.nan
    for _r in range(max_rounds + 1):
        got = _better_pairs(equal.task)
        if np.isnan(same) and len(equal.samples) >= used:
            same = len(got)
        if np.isnan(need) and pairs <= got:
            need = len(equal.samples)
        if (np.isfinite(need) and np.isfinite(same)) or _r == max_rounds:
            break
        drawn = equal_round(equal.task, per * m, seed=10_000 + rep + _r)
        new = drawn.samples.reindex(columns=COLUMNS)
        new.attrs = {}
        equal.samples = pd.concat([equal.samples, new], ignore_index=True)
        equal.task = equal._task()
    if np.isnan(need):  # not reached: it needs more than the labels it drew (a lower bound)
        need = -float(len(equal.samples))
    return need, same


def _share(x) -> tuple[float, float]:
    x = np.asarray(x, float)
    return float(x.mean()), float(np.sqrt(x.mean() * (1 - x.mean()) / max(x.size, 1)))


def _mean_se(x) -> str:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if not x.size:
        return "n/a"
    se = x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else np.nan
    return f"{x.mean():.3g} (SE {se:.2g}, {x.size} reps)"


def _print_gradient(out: dict, reps: int) -> None:
    g = GRADIENT
    print(f"gradient: {reps} reps; {g['systems']} systems, precision {g['precision'][0]}-"
          f"{g['precision'][1]} (simulator), {g['queries']} queries, ranked by precision; true "
          f"precisions {' '.join(f'{p:.2f}' for p in out['truth'])}")  # fmt: skip
    share, se = _share(out["wrong"])
    verdict = "PASS" if share <= 0.05 + 1e-12 else "FAIL"
    print(
        f"  a wrongly ordered decided pair at some look: {share:.3f} (SE {se:.3f}; target <= 0.05) {verdict}"
    )
    pairs = g["systems"] * (g["systems"] - 1) // 2
    print(
        f"  pairs decided by the loop: {_mean_se(out['decided'])} of {pairs}; labels drawn "
        f"{_mean_se(out['total'])}; labels at the look deciding its last pair {_mean_se(out['used'])}"
    )
    eq = out["equal_used"]
    reached = eq > 0
    # not reached within its rounds: the equal design needs more than |eq| labels, so the
    # ratio is below used/|eq| and the mean over repetitions with those bounds is an upper bound
    frac = out["used"] / np.abs(eq)
    print(
        f"  equal design, same sequences and rounds, to decide the same pairs: labels "
        f"{_mean_se(eq[reached])} (reached in {int(reached.sum())}/{eq.size}; the others "
        f"not within {_mean_se(np.abs(eq[~reached]))} labels)"
    )
    print(
        f"  loop labels / equal-design labels: {_mean_se(frac)} (target <= 0.5; "
        f"{'an upper bound: unreached reps at their bound' if (~reached).any() else 'exact'}); "
        f"median {np.median(frac):.2f}; reached reps only {_mean_se(frac[reached])}"
    )
    print(
        f"  pairs the equal design decides with the loop's labels: {_mean_se(out['equal_at_same'])}"
    )
    print(
        f"  final-look width anytime / bootstrap (precision, median over systems): "
        f"{_mean_se(out['ratio'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="*", default=["null12", "null40", "gradient"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        for name in args.only:
            start = time.process_time()
            if name.startswith("null"):
                m = int(name[4:])
                reps = args.reps or (30 if m <= 12 else 10)
                out = null_study(m, reps, args.seed, where)
                share, se = _share(out["split"])
                print(f"{name}: {reps} reps, looks {min(out['looks'])}-{max(out['looks'])}")
                verdict = "PASS" if share <= 0.05 + 2 * se + 1e-12 else "FAIL"
                print(
                    f"  any look > 1 tier: {share:.3f} (SE {se:.3f}; target <= 0.05 + 2 SE) {verdict}"
                )
                for metric, cov in out["covered"].items():
                    cov = np.asarray(cov, float)  # per repetition: its systems correlate
                    c, s = float(cov.mean()), float(cov.std(ddof=1) / np.sqrt(cov.size))
                    verdict = "PASS" if c >= 0.95 - 2 * s else "FAIL"
                    print(
                        f"  covered at every look, {metric}: {c:.3f} (SE over {cov.size} reps "
                        f"{s:.3f}; {m} systems each) {verdict}"
                    )
            else:
                reps = args.reps or 12
                out = gradient_study(reps, args.seed, where)
                _print_gradient(out, reps)
            print(f"  CPU {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
