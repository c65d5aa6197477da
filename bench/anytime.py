"""Label until decided: do the anytime intervals and tiers hold at every look of the loop?

Each repetition simulates an annotation campaign on one world (:mod:`receval.simulation`, truth
known): a first round of 20 draws per system drawn by ``--until-decided`` with nothing labelled
(equal counts plus the floor, in random order; the exhaustive units from the simulator), then
8 rounds of ``receval sample --until-decided --batch B`` (labels from the truth),
with ``receval score --intervals anytime`` after the first round and after every later round
(the *looks*).  Per scenario it prints, with Monte Carlo standard errors over repetitions:

* **population** (the unit-level check, no scoring): 2,000 campaigns of shuffled rounds on one
  fixed finite population with a known design (:func:`population_study`); per system the
  share of campaigns whose precision sequence *ever* misses the truth (target ≤ 0.05 + 3 SE),
  with and without the popularity control variate, popularity predicting right or wrong, and
  for rounds of per-system draws only (no floor: ``sample --per-system`` / ``--adaptive``);
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
  random order), read by the same sequences, at most ``--equal-rounds`` rounds (not reached: counted at that
  bound, so the mean ratio is an upper bound); the same for a fixed design *told the true
  values* (counts in proportion to the allocation that decides the same pairs with the fewest
  draws, a normal approximation, :func:`oracle_weights`): roughly what choosing counts can
  save without adapting; and the same ratio for a loop that races nothing (equal counts every
  round, its own decided pairs): what the ratio's selection alone gives, since a loop's pairs
  are those its own draws happened to decide and an independent design must decide them all
  (``--no-controls`` skips both); the pairs the equal design decides with the loop's labels;
  and the final-look width ratio anytime / fixed-n percentile bootstrap on the
  same labels (target ≤ 1.5 for precision; pooled recall, recall and F1 printed
  too, and precision with ``--estimator ppi`` and a judge of correlation ~0.7);
* **gradient20** (:data:`GRADIENT20`): the same study in a second world — 20 systems in 5
  teams of 4, 60 queries — to check that the racing constants, tuned on the first, carry over;
* **gradient-large** (:data:`GRADIENT_LARGE`): the first world with ten times the queries, so
  the pool (about 17,900 facts) is 5.7x the loop's draws; in the first two the draws
  outnumber the pool, and an equal spread labels most of it anyway.  Each gradient study
  also counts the distinct facts labelled (a fact drawn again costs no new label);
* **parabank**, **msmarco** (real labels from ``../shared/data``, skipped when absent:
  ParaBank-Eval's 36 systems, rounds of 10 per system; Chaganty et al.'s MS MARCO answers, 5
  systems, rounds of 50 per system; every pooled output judged by people, no exhaustive
  units): the same study ranked by precision, plus the share of (repetition, system) pairs
  whose precision and pooled-recall intervals cover the truth at every look.  A repetition
  deciding no pair is left out of the label ratios (it has no pairs to compare on).

"Covered at every look" is tallied per system by name (the leaderboard's row order follows
the ranking and changes between looks).

Usage: python bench/anytime.py [--reps R] [--only population null12 null40 gradient gradient20
gradient-large parabank msmarco]
[--seed S] [--no-widths] [--no-controls] [--top K] [--rank-by precision|f1|recall|pooled_recall]

``--top K``: the gradient and real worlds run the loop with ``--until-decided --top K``
(:func:`top_study`): whether any look put a system among the best K against the truth, the
share of repetitions deciding the best K within 8 rounds, and the draws the loop and the equal
design (read by the same sequences, the same membership rule) needed to decide them.

``--rank-by f1``: the gradient studies' loop ranks and decides by F1 (the paired tests of
:mod:`receval.estimators.anytime.f1`), a wrongly ordered pair is one against the truth's F1.
The default (fewer repetitions, to stay near five CPU minutes per study) is what the report
quotes; ``--reps`` raises it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

import receval
from receval.formats.bundle import write_bundle
from receval.simulation import SimulationConfig, simulate_world
from receval.task import load_task, with_annotation

COLUMNS = [
    "sample",
    "system",
    "query_id",
    "answer",
    "prob",
    "draw",
    "design",
    "order",
    "mixture_prob",
]
METRICS = ("precision", "pooled_recall", "recall", "f1")


def world_task(config: SimulationConfig, seed: int, where: Path):
    """The world and its task (truth included), loaded once."""
    world = simulate_world(config, np.random.default_rng(seed))
    root = write_bundle(where / f"w{seed}", world.tables(), world.task_config(), overwrite=True)
    return world, load_task(root)


def distinct_labels(samples: pd.DataFrame, draws: int) -> int:
    """The labels an organiser pays for among the first ``draws`` draws: distinct facts (a
    fact drawn again, for the same or another system, is labelled once)."""
    head = samples.iloc[: int(abs(draws))]
    return len(head[["query_id", "answer"]].drop_duplicates())


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

    def step(self, batch: int, seed: int, rank_by: str, top: int | None = None) -> bool:
        """One until-decided round; False once it says decided."""
        drawn = receval.sample(
            self.task, until_decided=True, batch=batch, seed=seed, rank_by=rank_by, top=top
        )
        self.state = drawn.decisions
        if drawn.decided:
            return False
        new = drawn.samples.reindex(columns=COLUMNS)
        new.attrs = {}
        self.samples = (
            pd.concat([self.samples, new], ignore_index=True) if len(self.samples) else new
        )
        self.task = self._task()
        return True


def inside_by_system(board: pd.DataFrame, truth: pd.DataFrame, metric: str, names) -> np.ndarray:
    """Whether each system of ``names`` (one fixed order for every look) has its true
    ``metric`` inside its interval on ``board`` (indexed by system; a missing interval is a
    miss).  The leaderboard's rows follow the ranking, which changes from look to look, so a
    tally over looks must align by name, not by row (by row it charged one look's miss to
    another look's system: precision 0.922 -> 0.98 in the 12-system null world)."""
    rows = board.reindex(names)
    true = truth[metric].reindex(names).to_numpy(float)
    lower = rows[f"{metric}_lo"].to_numpy(float)
    upper = rows[f"{metric}_hi"].to_numpy(float)
    return (lower - 1e-9 <= true) & (true <= upper + 1e-9)


def null_study(
    systems: int, reps: int, seed: int, where: Path, rounds: int = 8, rank_by: str = "precision"
) -> dict:
    """The null world ranked by ``rank_by``: every system the same true precision (recall
    0.05-0.3), or with ``rank_by="f1"`` the same true F1 0.3 from precisions 0.35-0.75 and
    sizes that differ (:func:`equal_f1_world`), so F1's tests must not follow precision."""
    config = SimulationConfig(
        systems=systems, queries=max(40, systems * 3), precision_range=(0.5, 0.500001),
        recall_range=(0.05, 0.3), uppercase_teams=0.0, exhaustive_facts=60,
    )  # fmt: skip
    world, task = (equal_f1_world if rank_by == "f1" else world_task)(config, seed, where)
    truth = world.truth_metrics().set_index("system")
    names = list(task.systems)
    split, wrong, covered, looks = [], [], {m: [] for m in METRICS}, []
    for rep in range(reps):
        loop = Loop(world, task, first=20, seed=1000 * seed + rep)
        any_split = any_wrong = False
        ok = {m: np.ones(systems, bool) for m in METRICS}
        n_looks = 0
        for r in range(rounds + 1):
            board = loop.look(rank_by).leaderboard.set_index("system")
            n_looks += 1
            any_split |= board["tier"].astype(str).nunique() > 1
            any_wrong |= _wrong_pair(board, truth[rank_by])
            for m in METRICS:
                ok[m] &= inside_by_system(board, truth, m, names)
            if r == rounds or not loop.step(10 * systems, seed=rep, rank_by=rank_by):
                break
        split.append(any_split)
        wrong.append(any_wrong)
        looks.append(n_looks)
        for m in METRICS:
            covered[m].append(ok[m].mean())  # per repetition: systems of one rep correlate
    return {"split": np.array(split, float), "wrong": np.array(wrong, float),
            "covered": covered, "looks": looks, "truth": truth[rank_by]}  # fmt: skip


def _wrong_pair(board: pd.DataFrame, truth: pd.Series) -> bool:
    """Whether the leaderboard puts a system in a better tier than one whose true value is
    higher (tiers are numbered from 1, the best)."""
    tier = pd.to_numeric(board["tier"], errors="coerce").reindex(truth.index).to_numpy(float)
    value = truth.to_numpy(float)
    above = tier[:, None] < tier[None, :]
    return bool((above & (value[:, None] < value[None, :] - 1e-12)).any())


def equal_f1_world(config: SimulationConfig, seed: int, where: Path):
    """:func:`world_task` with every system's target precision spread evenly over 0.35-0.75 and
    its target recall set so that F1 is 0.3 for all (R = F1·π/(2π − F1)): the sizes differ,
    F1 is (up to the simulator's rounding) equal."""
    import receval.simulation as sim

    draw = sim._draw_systems

    def equal_f1(cfg, rng):
        out = list(draw(cfg, rng))
        precision = np.linspace(0.35, 0.75, cfg.systems)[rng.permutation(cfg.systems)]
        out[3], out[4] = precision, 0.3 * precision / (2 * precision - 0.3)
        return tuple(out)

    sim._draw_systems = equal_f1
    try:
        return world_task(config, seed, where)
    finally:
        sim._draw_systems = draw


def width_ratios(anytime: pd.DataFrame, boot: pd.DataFrame) -> dict[str, float]:
    """Median over systems of the width anytime / bootstrap per metric (systems whose
    bootstrap interval has width 0, e.g. a census, left out)."""
    out = {}
    for m in METRICS:
        w_any = (anytime[f"{m}_hi"] - anytime[f"{m}_lo"]).to_numpy(float)
        w_boot = (boot[f"{m}_hi"] - boot[f"{m}_lo"]).reindex(anytime.index).to_numpy(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = w_any / np.where(w_boot > 0, w_boot, np.nan)
        out[m] = float(np.nanmedian(ratio)) if np.isfinite(ratio).any() else np.nan
    return out


def pair_state(task, rank_by: str = "precision", confidence: float = 0.95):
    """The anytime pair tests of ``task`` (Holm over all ordered pairs, as ``score`` uses them)
    and the systems' names."""
    from receval.estimators.anytime.method import anytime_pair_tests
    from receval.estimators.sample_data import build_sample_data

    data = build_sample_data(task)
    tests = anytime_pair_tests(task, data, rank_by, data.sizes > 0, 1.0 - confidence)
    return tests, list(data.systems)


def _better_pairs(task, rank_by: str = "precision") -> set[tuple[str, str]]:
    tests, names = pair_state(task, rank_by)
    a, b = np.nonzero(tests.better)
    return {(names[i], names[j]) for i, j in zip(a, b, strict=True)}


#: the gradient world: 12 systems, one per team, true precisions drawn by the simulator inside
#: 0.35–0.80 (world seed 1: 0.74 0.73 0.72 0.70 | 0.58 0.56 0.56 0.55 | 0.49 0.43 0.41 0.38)
GRADIENT = {"systems": 12, "teams": 12, "queries": 50, "precision": (0.35, 0.80)}
#: a second gradient world, to check that the racing constants tuned on the first carry over:
#: 20 systems in 5 teams of 4 (teammates share facts), 60 queries, precisions asked in
#: 0.35–0.80 (world seed 1 draws 0.70 0.70 0.69 0.68 0.67 0.66 0.63 0.62 0.59 0.59 0.58 0.56
#: 0.54 0.53 0.53 0.52 0.52 0.52 0.49 0.48: evenly spaced, no groups)
GRADIENT20 = {"systems": 20, "teams": 5, "queries": 60, "precision": (0.35, 0.80)}
#: the first gradient world with ten times the queries (about 1,900 outputs per system, a pool
#: of about 17,900 facts): the loop's draws stay well below the pool size, where in
#: the first world they reach 2.4x it and an equal spread labels most of the pool anyway
GRADIENT_LARGE = {**GRADIENT, "queries": 500}
GRADIENTS = {"gradient": GRADIENT, "gradient20": GRADIENT20, "gradient-large": GRADIENT_LARGE}


def gradient_study(
    reps: int,
    seed: int,
    where: Path,
    rounds: int = 8,
    per: int = 30,
    equal_rounds: int = 24,
    world: dict = GRADIENT,
    widths: bool = True,
    rank_by: str = "precision",
    controls: bool = False,
) -> dict:
    """The loop (first round 20 per system, then ``rounds`` until-decided rounds of ``per`` per
    system, ranked by ``rank_by``) against a fixed equal design read by the same sequences (the
    same first round, then equal rounds of the same size, random order, same floor) in the
    gradient ``world`` (:data:`GRADIENTS`)."""
    config = SimulationConfig(
        systems=world["systems"], teams=world["teams"], queries=world["queries"],
        precision_range=world["precision"],
        recall_range=(0.1, 0.3), uppercase_teams=0.0, exhaustive_facts=60,
    )  # fmt: skip
    sim, task = world_task(config, seed, where)
    truth = sim.truth_metrics().set_index("system")
    return loop_study(sim, task, truth, reps, seed, rounds, per, equal_rounds, widths, rank_by,
                      controls=controls)  # fmt: skip


def loop_study(world, task, truth, reps, seed, rounds, per, equal_rounds, widths, rank_by,
               coverage: tuple[str, ...] = (), controls: bool = False) -> dict:  # fmt: skip
    """:func:`gradient_study` on a loaded ``world`` (its ``annotate`` gives the exhaustive
    units; None: none) and ``task`` (with truth), ``truth`` the true metrics by system; with
    ``coverage`` also the share of systems whose interval of each of those metrics covers the
    truth at every look (scored with ``--intervals anytime`` after every round)."""
    m = len(task.systems)
    names = list(task.systems)
    out: dict[str, list] = {k: [] for k in ("wrong", "decided", "used", "equal_used",
                                             "equal_at_same", "total", "used_labels",
                                             "equal_labels", "oracle_used",
                                             "control_ratio")}  # fmt: skip
    out.update({f"covered {c}": [] for c in coverage})
    ratios: dict[str, list] = {m: [] for m in (*METRICS, "ppi precision")}
    judge = judge_table(task, np.random.default_rng(seed))
    for rep in range(reps):
        loop = Loop(world, task, first=20, seed=2000 * seed + rep)
        first_seen: dict[tuple[str, str], int] = {}
        bad = False
        ok = {c: np.ones(m, bool) for c in coverage}
        for r in range(rounds + 1):
            for pair in _better_pairs(loop.task, rank_by):
                first_seen.setdefault(pair, len(loop.samples))
                bad |= bool(truth[rank_by][pair[0]] < truth[rank_by][pair[1]])
            if coverage:
                board = loop.look(rank_by).leaderboard.set_index("system")
                for c in coverage:
                    ok[c] &= inside_by_system(board, truth, c, names)
            if r == rounds or not loop.step(per * m, seed=rep, rank_by=rank_by):
                break
        for c in coverage:
            out[f"covered {c}"].append(ok[c].mean())  # per repetition: its systems correlate
        pairs = set(first_seen)
        out["wrong"].append(bad)
        out["decided"].append(len(pairs))
        out["total"].append(len(loop.samples))
        # labels the loop used to decide its pairs: the look at which the last one was decided
        used = max(first_seen.values(), default=0)
        out["used"].append(used)
        out["used_labels"].append(distinct_labels(loop.samples, used))
        if widths:
            _width_ratios(loop, judge, ratios)
        need, same, labels = _equal_design(world, task, pairs, used, (seed, rep), per,
                                           equal_rounds, rank_by)  # fmt: skip
        out["equal_used"].append(need)
        told, control = (
            _controls(world, task, truth, pairs, used, (seed, rep), (per, rounds, equal_rounds),
                      rank_by) if controls and pairs else (np.nan, np.nan)
        )  # fmt: skip
        out["oracle_used"].append(told)
        out["control_ratio"].append(control)
        out["equal_labels"].append(labels)
        out["equal_at_same"].append(same)
        print(f"  rep {rep}: wrong {bad} decided {len(pairs)} used {used} equal {need} "
              f"same {same}", file=sys.stderr, flush=True)  # fmt: skip
    out["truth"] = sorted(truth[rank_by].to_numpy(), reverse=True)
    out["pool_facts"] = [float(task.facts["in_pool"].sum())]
    out["systems"] = [m]
    out.update({f"ratio {m}": v for m, v in ratios.items()})
    return {k: np.asarray(v, float) for k, v in out.items()}


def top_study(world, task, truth, reps, seed, rounds, per, equal_rounds, top: int) -> dict:
    """``--until-decided --top K`` ranked by precision: per repetition whether the loop decided
    which systems are the best K within ``rounds`` rounds, whether any look put a system among
    them (or surely outside) against the truth, the draws it had made when it decided, and the draws
    the equal design (:func:`_equal_design`'s rounds) needs to decide the same membership."""
    from receval.until_decided import decisions

    m = len(task.systems)
    best = set(truth["precision"].nlargest(top).index)
    out: dict[str, list] = {k: [] for k in ("decided", "wrong", "used", "equal_used")}
    for rep in range(reps):
        loop = Loop(world, task, first=20, seed=2000 * seed + rep)
        wrong, used = False, np.nan
        for r in range(rounds + 1):
            going = loop.step(per * m, seed=rep, rank_by="precision", top=top)
            wrong |= _membership_wrong(loop.state, best)
            if not going:
                used = float(len(loop.samples))
                break
            if r == rounds:
                break
        out["decided"].append(np.isfinite(used))
        out["wrong"].append(wrong)
        out["used"].append(used)
        need = np.nan
        if np.isfinite(used):
            equal = Loop(world, task, first=20, seed=2000 * seed + rep)
            need = _equal_until(
                equal, lambda t, _: not decisions(t, "precision", top=top).open_pairs, rep, per,
                equal_rounds,
            )  # fmt: skip
        out["equal_used"].append(need)
        print(f"  rep {rep}: top-{top} decided at {used} equal {need} wrong {wrong}",
              file=sys.stderr, flush=True)  # fmt: skip
    out["systems"] = [m]
    return {k: np.asarray(v, float) for k, v in out.items()}


def _top_of(name: str, reps: int, args, where: Path) -> dict | None:
    """:func:`top_study` in the world ``name`` (a gradient world drawn with ``--seed``, or a
    real one), rounds of the study's size."""
    if name in REAL:
        load, per = REAL[name]
        loaded = load()
        if loaded is None:
            return None
        world, task, truth = loaded
    else:
        per, w = 30, GRADIENTS[name]
        config = SimulationConfig(
            systems=w["systems"], teams=w["teams"], queries=w["queries"],
            precision_range=w["precision"], recall_range=(0.1, 0.3), uppercase_teams=0.0,
            exhaustive_facts=60,
        )  # fmt: skip
        world, task = world_task(config, args.seed, where)
        truth = world.truth_metrics().set_index("system")
    out = top_study(world, task, truth, reps, args.seed, 8, per, args.equal_rounds, args.top)
    out["truth"] = sorted(truth["precision"].to_numpy(), reverse=True)
    return out


def _print_top(out: dict, reps: int, name: str, top: int) -> None:
    truth = out["truth"]
    print(f"{name} --top {top}: {reps} reps, ranked by precision; true precision "
          f"{' '.join(f'{p:.2f}' for p in truth)}")  # fmt: skip
    share, se = _share(out["wrong"])
    verdict = "PASS" if share <= 0.05 + 1e-12 else "FAIL"
    print(f"  a look putting a system among (or outside) the best {top} against the truth: {share:.3f} "
          f"(SE {se:.3f}; target <= 0.05) {verdict}")  # fmt: skip
    decided = out["decided"].astype(bool)
    print(f"  top {top} decided within 8 rounds: {int(decided.sum())}/{reps}; draws then "
          f"{_mean_se(out['used'][decided])}")  # fmt: skip
    eq = out["equal_used"][decided]
    frac = out["used"][decided] / np.abs(eq)
    print(f"  equal design, same sequences, to decide the same: {_mean_se(np.abs(eq))} "
          f"({int((eq < 0).sum())} not within their bound); loop / equal {_mean_se(frac)}")  # fmt: skip


def _membership_wrong(state, best: set) -> bool:
    """Whether the look put a system surely among the best K that is not, or surely outside
    one that is."""
    if state is None or state.sure_in is None:
        return False
    names = np.asarray(state.systems)
    return not set(names[state.sure_in]) <= best or bool(best & set(names[state.sure_out]))


def _controls(world, task, truth, pairs, used, seeds, sizes, rank_by) -> tuple[float, float]:
    """The two controls of the loop's label ratio: the draws a fixed design *told the true
    values* needs for the loop's ``pairs`` (:func:`oracle_weights`: what choosing counts can
    save without adapting), and the ratio a loop that races nothing scores — equal counts every
    round, its own decided pairs against an independent equal design — which is what the
    ratio's selection alone gives (a loop's pairs are the ones its own draws happened to
    decide; an independent design must decide every one of them)."""
    per, rounds, equal_rounds = sizes
    seed, rep = seeds
    best = oracle_weights(truth, pairs, list(task.systems), rank_by)
    told = _equal_design(world, task, pairs, used, seeds, per, equal_rounds, rank_by, best)[0]
    plain = Loop(world, task, first=20, seed=2000 * seed + rep)
    first_seen: dict[tuple[str, str], int] = {}
    for r in range(rounds + 1):
        for pair in _better_pairs(plain.task, rank_by):
            first_seen.setdefault(pair, len(plain.samples))
        if r < rounds:
            _fixed_step(plain, per * len(task.systems), seed=20_000 + rep + r)
    if not first_seen:
        return told, np.nan
    mine = max(first_seen.values())
    need = _equal_design(world, task, set(first_seen), mine, seeds, per, equal_rounds, rank_by)[0]
    return told, mine / abs(need)


def _fixed_step(loop: Loop, batch: int, seed: int, weights=None) -> None:
    """One round of fixed counts (equal, or in proportion to ``weights``) added to ``loop``."""
    from receval.until_decided import fixed_round

    drawn = fixed_round(loop.task, batch, seed=seed, weights=weights)
    new = drawn.samples.reindex(columns=COLUMNS)
    new.attrs = {}
    loop.samples = pd.concat([loop.samples, new], ignore_index=True)
    loop.task = loop._task()


def _equal_until(equal: Loop, done, rep: int, per: int, max_rounds: int, weights=None) -> float:
    """Draws the fixed design ``equal`` (equal counts, or in proportion to ``weights``) has
    made when ``done(task, draws)`` first holds, checked after every round (negative: not
    within ``max_rounds``, a lower bound)."""
    m = len(equal.base.systems)
    for _r in range(max_rounds + 1):
        if done(equal.task, len(equal.samples)):
            return float(len(equal.samples))
        if _r == max_rounds:
            break
        _fixed_step(equal, per * m, seed=10_000 + rep + _r, weights=weights)
    return -float(len(equal.samples))


def parabank_world():
    """ParaBank-Eval (``../shared/data/parabank-eval``; real, every pooled output judged by
    people, :func:`bench.ppi.parabank_world`): 36 systems, a pool of 5,550 paraphrases, no
    exhaustive units; (world, task with truth, true metrics) or None when the data are absent."""
    here = str(Path(__file__).resolve().parent)  # bench/ppi.py, as bench/anytime_theta.py
    if here not in sys.path:  # imports this one
        sys.path.insert(0, here)
    from ppi import parabank_world as load

    real = load()
    if real is None:
        return None
    return NoUnits(), _with_truth(real.task, np.nan_to_num(real.label)), real.truth


def msmarco_world():
    """Chaganty et al.'s MS MARCO answers (``../shared/data/chaganty-active-eval``; real): five
    systems (the reference answers among them) answering 500 questions, every pooled answer
    judged by three crowd workers (correct: their mean ≥ ½; the 7 answers without a mean and
    the empty ones are left out); equal answers of several systems are one fact.  (world, task with truth, true
    metrics) or None when the data are absent."""
    import gzip
    import json

    from receval.config import Matching, TaskConfig
    from receval.task import Task

    path = PARABANK.parent / "chaganty-active-eval" / "qa.jsonl.gz"
    if not path.exists():
        return None
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            mean = row["output"].get("AvgCorrect")
            if mean is None:
                continue
            c = row["input"]["contents"]
            for system in str(c["system"]).split(";"):
                rows.append((system, f"q{c['id']}", str(c.get("answer") or ""), mean >= 0.5))
    frame = pd.DataFrame(rows, columns=["system", "query_id", "answer", "correct"])
    frame = frame[frame["answer"].str.strip() != ""]  # no answer: no output
    exact = Matching(strip=False, collapse_whitespace=False, casefold=False)
    task = Task.from_frames(runs=frame[["system", "query_id", "answer"]],
                            config=TaskConfig(name="msmarco", matching=exact))  # fmt: skip
    key = pd.MultiIndex.from_frame(task.facts[["query_id", "answer"]])
    value = frame.groupby(["query_id", "answer"])["correct"].max().reindex(key)
    label = value.fillna(False).to_numpy(float)
    return NoUnits(), _with_truth(task, label), _true_metrics(task, label)


def _with_truth(task, label: np.ndarray):
    """``task`` with a truth table giving every fact the ``label`` (F,)."""
    from dataclasses import replace

    facts = task.facts
    truth = pd.DataFrame({"query_id": facts["query_id"].to_numpy(),
                          "answer": facts["answer"].to_numpy(),
                          "answer_raw": facts["answer"].to_numpy(),
                          "fact": np.arange(len(facts), dtype=np.int64), "value": label})  # fmt: skip
    return replace(task, truth=truth)


def _true_metrics(task, label: np.ndarray) -> pd.DataFrame:
    """Each system's true precision and pooled recall (every pooled fact labelled)."""
    out = task.outputs
    correct = label[out["fact"].to_numpy(np.int64)]
    g = pd.DataFrame({"system": out["system"].astype(str), "c": correct}).groupby("system")["c"]
    truth = pd.DataFrame({"precision": g.mean(), "pooled_recall": g.sum() / float(label.sum())})
    truth["recall"] = np.nan  # no exhaustive annotation: θ unknown
    return truth


class NoUnits:
    """A world without exhaustive units (real data: recall and F1 are not estimated)."""

    @staticmethod
    def annotate(rng, per_system: int = 1):
        return SimpleNamespace(exhaustive_units=None, exhaustive=None)


#: the real worlds: (loader, draws per system in a round) — ParaBank 36 systems (360 a round,
#: a pool of 4,877 facts), MS MARCO 5 systems (250 a round, a pool of 1,850)
REAL = {"parabank": (parabank_world, 10), "msmarco": (msmarco_world, 50)}


def real_study(
    name: str,
    reps: int,
    seed: int,
    equal_rounds: int,
    widths: bool,
    rounds: int = 8,
    controls: bool = False,
) -> dict | None:
    """The loop on the real world ``name`` (:data:`REAL`) ranked by precision
    (:func:`loop_study`), with precision and pooled recall covered at every look; None when
    its data are absent."""
    load, per = REAL[name]
    loaded = load()
    if loaded is None:
        return None
    world, task, truth = loaded
    return loop_study(world, task, truth, reps, seed, rounds, per, equal_rounds, widths,
                      "precision", coverage=("precision", "pooled_recall"), controls=controls)  # fmt: skip


def _width_ratios(loop: Loop, judge: pd.DataFrame, ratios: dict[str, list]) -> None:
    """The final look's width ratios anytime / bootstrap per metric, and ``--estimator ppi``'s
    precision (a judge of correlation ~0.7) against the same bootstrap."""
    board = loop.look("precision").leaderboard.set_index("system")
    boot = loop.look("precision", intervals="bootstrap").leaderboard.set_index("system")
    for metric, value in width_ratios(board, boot).items():
        ratios[metric].append(value)
    judged = with_annotation(loop.task, judge=judge)
    ppi = receval.score(judged, estimator="ppi", intervals="anytime", rank_by="precision")
    ratios["ppi precision"].append(
        width_ratios(ppi.leaderboard.set_index("system"), boot)["precision"]
    )


def _equal_design(world, task, pairs, used, seeds, per, max_rounds, rank_by="precision",
                  weights=None):  # fmt: skip
    """Draws an equal design (or fixed counts in proportion to ``weights``) needs to decide
    ``pairs`` (minus the draws it had made when it had not within ``max_rounds``: a lower
    bound), the pairs it decides with ``used`` draws (the loop's) and the distinct facts it had
    labelled by then (negative: a lower bound)."""
    seed, rep = seeds
    equal = Loop(world, task, first=20, seed=2000 * seed + rep)
    found = {"need": np.nan, "same": np.nan}

    def done(t, drawn: int) -> bool:
        got = _better_pairs(t, rank_by)
        if np.isnan(found["same"]) and drawn >= used:
            found["same"] = len(got)
        if np.isnan(found["need"]) and pairs <= got:
            found["need"] = drawn
        return bool(np.isfinite(found["need"]) and np.isfinite(found["same"]))

    _equal_until(equal, done, rep, per, max_rounds, weights)
    need = found["need"]
    if np.isnan(need):  # not reached: it needs more than the labels it drew (a lower bound)
        need = -float(len(equal.samples))
    labels = distinct_labels(equal.samples, need)
    return need, found["same"], labels if need > 0 else -labels


def oracle_weights(truth, pairs, names, metric: str = "precision") -> np.ndarray:
    """Per system (``names`` order) the fixed counts that decide ``pairs`` with the fewest
    draws *knowing the true values* (a normal approximation): min Σ n_i subject to v_i/n_i +
    v_j/n_j ≤ (p_i − p_j)² for every pair, v = p(1 − p); 0 for a system in no pair.  Only
    shares matter (the constraints scale with the test's constant)."""
    from scipy.optimize import minimize

    p = truth[metric].reindex(names).to_numpy(float)
    v = np.maximum(p * (1 - p), 1e-3)
    at = {s: k for k, s in enumerate(names)}
    i, j = np.array([[at[a], at[b]] for a, b in pairs]).T
    gap2 = np.maximum((p[i] - p[j]) ** 2, 1e-12)
    used = np.unique(np.concatenate([i, j]))
    # in y = 1/n the constraints are linear: v_i y_i + v_j y_j <= gap²
    a = np.zeros((i.size, len(names)))
    a[np.arange(i.size), i] = v[i]
    a[np.arange(i.size), j] = v[j]
    y0 = np.full(len(names), 0.5 * gap2.min() / v.max())
    best = minimize(
        lambda y: np.sum(1.0 / y[used]), y0, method="SLSQP", bounds=[(1e-12, None)] * len(names),
        constraints=[{"type": "ineq", "fun": lambda y: gap2 - a @ y, "jac": lambda y: -a}],
    )  # fmt: skip
    weight = np.zeros(len(names))
    weight[used] = 1.0 / best.x[used]
    return weight


def judge_table(task, rng: np.random.Generator) -> pd.DataFrame:
    """An automatic judge over the pooled facts: logistic((2y − 1) + N(0, 1)), correlation
    with the truth y about 0.7."""
    facts = task.facts
    pooled = np.flatnonzero(facts["in_pool"].to_numpy(bool))
    truth = task.truth.set_index("fact")["value"].reindex(pooled).fillna(0).to_numpy() > 0
    z = (2.0 * truth - 1.0) + rng.normal(size=pooled.size)
    frame = facts.iloc[pooled]
    return pd.DataFrame({"query_id": frame["query_id"].to_numpy(),
                         "answer": frame["answer"].to_numpy(),
                         "judge_score": 1.0 / (1.0 + np.exp(-z))})  # fmt: skip


@dataclass(frozen=True)
class Population:
    """A fixed finite world for the unit-level check: F facts with labels, m systems (``member``
    (F, m): fact in X_i), a known design ``p`` (F, m) (system j's draw probabilities over X_j)
    and the precision target ``target`` (F, m) (1/|X_i| on X_i)."""

    label: np.ndarray
    member: np.ndarray
    p: np.ndarray
    target: np.ndarray

    @property
    def precision(self) -> np.ndarray:
        return (self.target * self.label[:, None]).sum(axis=0)


def finite_population(
    rng: np.random.Generator, facts: int = 150, systems: int = 5, popular: str = "right"
) -> Population:
    """Overlapping output sets of 15–60 facts, precisions spread, and a design that makes the
    weights uneven: system j draws a fact with weight 1 or (its correct facts, for the even
    systems) 0.15, so some correct facts carry importance weights ~7x the typical one.
    Facts output by several systems are correct with probability 0.85 (``popular="right"``)
    or 0.15 (``"wrong"``: the popularity control variate then predicts the wrong way), the
    others with 0.5."""
    member = np.zeros((facts, systems), bool)
    for j in range(systems):
        member[rng.choice(facts, size=int(rng.integers(15, 61)), replace=False), j] = True
    shared = member.sum(axis=1) > 1
    p_right = np.where(shared, 0.85 if popular == "right" else 0.15, 0.5)
    label = (rng.random(facts) < p_right).astype(float)
    rare = (label[:, None] > 0) & (np.arange(systems)[None, :] % 2 == 0)
    weight = np.where(member, np.where(rare, 0.15, 1.0), 0.0)
    p = weight / weight.sum(axis=0)
    target = member / member.sum(axis=0)
    return Population(label, member, p, target)


PARABANK = Path(__file__).resolve().parents[2] / "shared" / "data" / "parabank-eval"


def parabank_population(threshold: float = 70.0) -> Population | None:
    """Real third-party data as the fixed population: ParaBank-Eval's 36 systems' pooled
    paraphrases (a fact: one candidate of one reference; X_j: the candidates system j output;
    correct: mean human score >= ``threshold``), every system drawing uniformly from its own
    outputs.  None when ``../shared/data/parabank-eval`` is absent."""
    import gzip

    path = PARABANK / "candidates.tsv.gz"
    if not path.exists():
        return None
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        raw = pd.read_csv(fh, sep="\t", quoting=3, keep_default_na=False, na_values=[""])
    raw["score"] = raw["human_score"].fillna(0.0)
    items = raw.groupby(["ref_id", "candidate"], sort=True).agg(
        score=("score", "mean"), sys_id=("sys_id", "first")
    )
    systems = items["sys_id"].astype(str).str.split()
    names = sorted({s for row in systems for s in row})
    code = {name: j for j, name in enumerate(names)}
    member = np.zeros((len(items), len(names)), bool)
    for x, row in enumerate(systems):
        member[x, [code[s] for s in row]] = True
    label = (items["score"].to_numpy(float) >= threshold).astype(float)
    target = member / member.sum(axis=0)
    return Population(label, member, target.copy(), target)


def population_stream(pop: Population, rng, rounds: int = 6, first: int = 8, batch: int = 40,
                      floor: float = 0.2) -> dict:  # fmt: skip
    """One stream of until-decided-style rounds on ``pop``: a first round of ``first`` draws per
    system, then rounds of ``batch`` whose focus counts *chase* the systems that currently look
    best (a data-dependent rule that, without the anytime machinery, biases the leaders up),
    each round with a floor share drawn from q₀ and written in a random order.  ``floor=0``:
    rounds of per-system draws only, in a random order (``sample --per-system`` /
    ``--adaptive`` rounds; a system left without draws in a round is uncovered).  Returns the
    stream's arrays (the real :func:`receval.estimators.anytime.stream.shuffled_round` gives q_k and
    the ranges)."""
    from receval.estimators.anytime.control import popularity_strata, stratum_kappa
    from receval.estimators.anytime.stream import shuffled_round
    from receval.until_decided import allocate

    F, m = pop.p.shape
    fact_of, sys_of = np.nonzero(pop.member)
    strata = popularity_strata(fact_of, sys_of, pop.target[fact_of, sys_of], m)
    ratio = pop.p[fact_of, sys_of] / pop.target[fact_of, sys_of]
    kappa_b = stratum_kappa(ratio, sys_of, strata.of_fact[fact_of], m)
    kappa = np.where(strata.mass.T > 0, kappa_b, np.inf).min(axis=0)
    kappa_ext = np.zeros((m, m + 1))
    kappa_ext[np.arange(m), np.arange(m)] = kappa
    kappa_ext[:, m] = kappa / m
    kappa_b_ext = np.zeros((kappa_b.shape[0], m, m + 1))
    kappa_b_ext[:, np.arange(m), np.arange(m)] = kappa_b
    kappa_b_ext[:, :, m] = kappa_b / m
    alive = np.ones(m, bool)
    pool_min = float(pop.p.sum(axis=1)[pop.member.any(axis=1)].min())
    parts: dict[str, list] = {"fact": [], "q": [], "own": [], "own_b": [], "horizon": []}
    total = 0
    for r in range(rounds):
        n = first * m if r == 0 else batch
        n_floor = max(1, round(floor * n)) if floor > 0 else 0
        if r == 0:
            focus = allocate(np.ones(m), n - n_floor)
        else:
            fact, q = np.concatenate(parts["fact"]), np.concatenate(parts["q"])
            est = (pop.target[fact] * (pop.label[fact] / q)[:, None]).mean(axis=0)
            focus = allocate(np.maximum(est - np.median(est), 0.0) + 0.02, n - n_floor)
        src = np.concatenate([np.repeat(np.arange(m), focus),
                              np.full(n_floor, m)])  # fmt: skip
        whose = np.where(src < m, src, rng.integers(0, m, size=n))
        cum = np.cumsum(pop.p, axis=0)
        fact = np.minimum((cum[:, whose] < rng.random(n)[None, :]).sum(axis=0), F - 1)
        order = rng.permutation(n)
        src, fact = src[order], fact[order]
        p_ext = np.concatenate([pop.p[fact], pop.p[fact].sum(axis=1, keepdims=True) / m], axis=1)
        out = shuffled_round(p_ext, kappa_ext, src, alive, m, pool_min, kappa_b_ext)
        total += n
        parts["fact"].append(fact)
        parts["q"].append(out["q"])
        parts["own"].append(out["own"])
        parts["own_b"].append(out["own_b"])
        parts["horizon"].append(np.full((n, m), float(total)))
    out = {k: np.concatenate(v) for k, v in parts.items()}
    out["stratum"] = strata.of_fact[out["fact"]]
    out["mass"] = strata.mass
    return out


def population_study(
    streams: int, seed: int, alpha: float = 0.05, control: bool = True, popular: str = "right",
    judge: str | None = None, widths: bool = False, pop: Population | None = None,
    known: bool = True, **kw,
) -> dict:  # fmt: skip
    """The unit-level check of the precision sequences: ``streams`` independent campaigns on
    one fixed finite population (:func:`finite_population`, :func:`population_stream`), and
    per system the share of campaigns whose sequence ever excludes the true precision (the
    error of the worst stopping rule; must be <= alpha + MC error).  ``control``: the terms
    with the popularity control variate (what ``--intervals anytime`` uses), else the plain
    ones; ``popular``: whether popular facts are more often right (``right``) or wrong;
    ``judge`` (``strong``, ``inverted``): the control is an automatic judge's score instead
    (``--estimator ppi``), a noisy copy of the label or its opposite.  Also returns each
    campaign's final-step width at α per system (``width``)."""
    from receval.estimators.anytime.betting import BettingStreams, confidence_bounds, rejected
    from receval.estimators.anytime.control import (
        controlled_precision_streams,
        judge_control,
        popularity_strata,
    )
    from receval.estimators.anytime.sequences import precision_streams, sequence_bets

    rng = np.random.default_rng(seed)
    pop = finite_population(rng, popular=popular) if pop is None else pop
    m = pop.p.shape[1]
    runs = [population_stream(pop, rng, **kw) for _ in range(streams)]
    control_of = {}
    if judge is not None:
        noisy = np.clip(0.5 + 0.7 * (pop.label - 0.5) + rng.normal(0, 0.15, pop.label.size), 0, 1)
        score = noisy if judge == "strong" else 1.0 - noisy
        fact_of, sys_of = np.nonzero(pop.member)
        t_rows = pop.target[fact_of, sys_of]
        strata = popularity_strata(fact_of, sys_of, t_rows, m)
        control_of = {"judge": judge_control(score, fact_of, sys_of, t_rows, strata, m)}
    parts = [
        controlled_precision_streams(
            pop.target[r["fact"]], pop.label[r["fact"]], r["q"], r["own"], r["own_b"],
            r["stratum"], r["mass"],
            (score[r["fact"]], control_of["judge"]) if control_of else None,
            fact=r["fact"] if known else None,
        ) if control else
        precision_streams(pop.target[r["fact"]], pop.label[r["fact"]], r["q"], r["own"])
        for r in runs
    ]  # fmt: skip
    stacked = BettingStreams(*(np.concatenate([getattr(p, f) for p in parts]) for f in (
        "u", "v", "lo0", "lo1", "hi0", "hi1", "active")))  # fmt: skip
    horizon = np.concatenate([r["horizon"].T for r in runs])
    bets = sequence_bets(stacked, alpha, horizon)
    truth = np.tile(pop.precision, streams)
    miss = rejected(stacked, bets, truth, alpha).reshape(streams, m)
    out = {"miss": miss, "precision": pop.precision, "alpha": alpha}
    if widths:
        lo, hi = confidence_bounds(stacked, [alpha], alpha_bets=alpha, prior_mean=0.5,
                                   horizon=horizon, prior_scale=0.5, iterations=16)  # fmt: skip
        out["width"] = (hi[0] - lo[0]).reshape(streams, m)
    return out


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


def _print_gradient(out: dict, reps: int, name: str = "gradient", rank_by="precision") -> None:
    systems = int(out["systems"][0])
    if name in GRADIENTS:
        g = GRADIENTS[name]
        what = (f"{g['systems']} systems in {g['teams']} teams, precision {g['precision'][0]}-"
                f"{g['precision'][1]} (simulator), {g['queries']} queries")  # fmt: skip
    else:
        what = f"{systems} systems, real labels (every pooled output judged)"
    print(f"{name}: {reps} reps; {what}, ranked by {rank_by}; true {rank_by} "
          f"{' '.join(f'{p:.2f}' for p in out['truth'])}")  # fmt: skip
    share, se = _share(out["wrong"])
    verdict = "PASS" if share <= 0.05 + 1e-12 else "FAIL"
    print(
        f"  a wrongly ordered decided pair at some look: {share:.3f} (SE {se:.3f}; target <= 0.05) {verdict}"
    )
    pairs = systems * (systems - 1) // 2
    print(
        f"  pairs decided by the loop: {_mean_se(out['decided'])} of {pairs}; labels drawn "
        f"{_mean_se(out['total'])}; labels at the look deciding its last pair {_mean_se(out['used'])}"
    )
    eq = out["equal_used"]
    reached = eq > 0
    # not reached within its rounds: the equal design needs more than |eq| labels, so the
    # ratio is below used/|eq| and the mean over repetitions with those bounds is an upper bound
    # a repetition deciding no pair has no pairs to compare on: left out of the ratio
    frac = np.where(out["decided"] > 0, out["used"] / np.abs(eq), np.nan)
    print(
        f"  equal design, same sequences and rounds, to decide the same pairs: labels "
        f"{_mean_se(eq[reached])} (reached in {int(reached.sum())}/{eq.size}; the others "
        f"not within {_mean_se(np.abs(eq[~reached]))} labels)"
    )
    print(
        f"  loop labels / equal-design labels: {_mean_se(frac)} (target <= 0.5; "
        f"{'an upper bound: unreached reps at their bound' if (~reached).any() else 'exact'}); "
        f"median {np.nanmedian(frac):.2f}; reached reps only {_mean_se(frac[reached])}"
    )
    print(
        f"  pairs the equal design decides with the loop's labels: {_mean_se(out['equal_at_same'])}"
    )
    _print_controls(out, frac)
    # labels paid for: distinct facts (a fact drawn again costs no new label)
    distinct = np.where(
        out["decided"] > 0, out["used_labels"] / np.abs(out["equal_labels"]), np.nan
    )
    print(
        f"  in distinct facts labelled: loop {_mean_se(out['used_labels'])}, equal design "
        f"{_mean_se(np.abs(out['equal_labels']))}; loop / equal {_mean_se(distinct)} "
        f"(pool: {out['pool_facts'][0]:.0f} facts)"
    )
    for key in [k for k in out if k.startswith("covered ")]:
        cov = out[key]
        c, se = float(cov.mean()), float(cov.std(ddof=1) / np.sqrt(cov.size))
        verdict = "PASS" if c >= 0.95 - 2 * se else "FAIL"
        print(f"  {key[8:]} covered at every look: {c:.3f} (SE over {cov.size} reps {se:.3f}; "
              f"target >= 0.95 - 2 SE) {verdict}")  # fmt: skip
    for metric in (*METRICS, "ppi precision"):
        target = " (target <= 1.5)" if metric == "precision" else ""
        print(
            f"  final-look width anytime / bootstrap ({metric}, median over systems): "
            f"{_mean_se(out[f'ratio {metric}'])}{target}"
        )


def _print_controls(out: dict, frac: np.ndarray) -> None:
    """The controls of the label ratio (:func:`_controls`)."""
    told = out["oracle_used"]
    if not np.isfinite(told).any():
        return
    eq = np.abs(out["equal_used"])
    reached = told > 0
    print(
        f"  control, a fixed design told the true values (counts in proportion to the "
        f"fewest-draws allocation for the same pairs, normal approximation): labels "
        f"{_mean_se(told[reached])} (reached in {int(reached.sum())}/"
        f"{int(np.isfinite(told).sum())}); / equal design {_mean_se(np.abs(told) / eq)}; "
        f"loop / it {_mean_se(frac * eq / np.abs(told))}"
    )
    print(
        f"  control, a loop racing nothing (equal counts every round), its pairs / an "
        f"independent equal design's: {_mean_se(out['control_ratio'])} (the ratio's selection "
        f"alone; the loop {_mean_se(frac)})"
    )


def _print_population(streams: int, seed: int) -> None:
    """The unit-level check, with and without the control variate, popularity predicting
    correctness or its opposite."""
    se = np.sqrt(0.05 * 0.95 / streams)
    print(f"population: {streams} campaigns per row, alpha 0.05, MC SE of a 0.05 share {se:.4f}")
    for control in (True, False):
        for popular in ("right", "wrong"):
            miss = population_study(streams, seed, control=control, popular=popular)["miss"]
            share = miss.mean(axis=0)
            verdict = "PASS" if share.max() <= 0.05 + 3 * se else "FAIL"
            print(
                f"  {'control' if control else 'plain  '} popular={popular}: ever-miss share "
                f"per system {np.round(share, 4).tolist()} {verdict}"
            )
    # rounds of per-system draws only (sample --per-system / --adaptive, random order)
    for control in (True, False):
        miss = population_study(streams, seed, control=control, floor=0)["miss"].mean(axis=0)
        verdict = "PASS" if miss.max() <= 0.05 + 3 * se else "FAIL"
        print(
            f"  {'control' if control else 'plain  '} per-system rounds (no floor): ever-miss "
            f"share per system {np.round(miss, 4).tolist()} {verdict}"
        )
    real = parabank_population()
    if real is None:
        print("  parabank-eval: ../shared/data/parabank-eval absent, skipped")
        return
    n = min(streams, 400)
    se = np.sqrt(0.05 * 0.95 / n)
    for floor in (0.2, 0.0):
        miss = population_study(n, seed, pop=real, first=4, batch=120, floor=floor)["miss"]
        miss = miss.mean(axis=0)
        verdict = "PASS" if miss.max() <= 0.05 + 3 * se else "FAIL"
        print(
            f"  parabank-eval (real, {real.p.shape[1]} systems, {n} campaigns, SE {se:.4f}"
            f"{', per-system rounds' if floor == 0 else ''}): ever-miss share max "
            f"{miss.max():.4f}, mean {miss.mean():.4f} {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--equal-rounds", type=int, default=64, help="rounds the equal design may draw (gradient)"
    )
    parser.add_argument(
        "--only",
        nargs="*",
        default=[
            "population",
            "null12",
            "null40",
            "gradient",
            "gradient20",
            "gradient-large",
            "parabank",
            "msmarco",
        ],
    )
    parser.add_argument(
        "--no-widths", action="store_true", help="gradient: skip the final-look width ratios"
    )
    parser.add_argument(
        "--top", type=int, default=None,
        help="gradient, real worlds: the loop with --top K (decide only which systems are the "
        "best K) against the equal design deciding the same",
    )  # fmt: skip
    parser.add_argument(
        "--no-controls", action="store_true",
        help="gradient, real worlds: skip the controls (a fixed design told the true values; "
        "the loop drawing equal counts)",
    )  # fmt: skip
    parser.add_argument(
        "--rank-by", default="precision", choices=["precision", "f1", "recall", "pooled_recall"],
        help="null and gradient worlds: the key the loop ranks and decides by (f1's null world: "
        "equal F1 from precisions 0.35-0.75)",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        for name in args.only:
            start = time.process_time()
            if name == "population":
                _print_population(args.reps or 2000, args.seed)
            elif name.startswith("null"):
                m = int(name[4:])
                reps = args.reps or (30 if m <= 12 else 10)
                out = null_study(m, reps, args.seed, where, rank_by=args.rank_by)
                share, se = _share(out["split"])
                truth = out["truth"]
                print(
                    f"{name}: {reps} reps, looks {min(out['looks'])}-{max(out['looks'])}, "
                    f"ranked by {args.rank_by}, true values {truth.min():.4f}-{truth.max():.4f}"
                )
                verdict = "PASS" if share <= 0.05 + 2 * se + 1e-12 else "FAIL"
                print(
                    f"  any look > 1 tier: {share:.3f} (SE {se:.3f}; target <= 0.05 + 2 SE) {verdict}"
                )
                share, se = _share(out["wrong"])
                print(f"  any look with a wrongly ordered pair of tiers: {share:.3f} (SE {se:.3f})")
                for metric, cov in out["covered"].items():
                    cov = np.asarray(cov, float)  # per repetition: its systems correlate
                    c, s = float(cov.mean()), float(cov.std(ddof=1) / np.sqrt(cov.size))
                    verdict = "PASS" if c >= 0.95 - 2 * s else "FAIL"
                    print(
                        f"  covered at every look, {metric}: {c:.3f} (SE over {cov.size} reps "
                        f"{s:.3f}; {m} systems each) {verdict}"
                    )
            elif args.top is not None and name in (*REAL, *GRADIENTS):
                reps = args.reps or 8
                out = _top_of(name, reps, args, where)
                if out is None:
                    print(f"{name}: its data in ../shared/data are absent, skipped")
                else:
                    _print_top(out, reps, name, args.top)
            elif name in REAL:
                reps = args.reps or 8
                out = real_study(name, reps, args.seed, args.equal_rounds, not args.no_widths,
                                 controls=not args.no_controls)  # fmt: skip
                if out is None:
                    print(f"{name}: its data in ../shared/data are absent, skipped")
                else:
                    _print_gradient(out, reps, name, "precision")
            else:
                reps = args.reps or 12
                out = gradient_study(reps, args.seed, where, equal_rounds=args.equal_rounds,
                                     world=GRADIENTS[name], widths=not args.no_widths,
                                     rank_by=args.rank_by, controls=not args.no_controls)  # fmt: skip
                _print_gradient(out, reps, name, args.rank_by)
            print(f"  CPU {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
