"""Anytime intervals and ``sample --until-decided`` when labels create equivalence classes.

Each repetition runs the loop of :mod:`bench.anytime` (a first ``--until-decided`` round of 20
draws per system with nothing labelled, then rounds of 10 per system, ``score --intervals
anytime`` at every look) in a **null world with aliases**: every system the same true precision,
``alias_rate`` of the true facts (default 0.25, so at least 15 % of the classes have two names)
also spelled another way, output alongside with probability ½.  Labels come from the truth the
way the README asks assessors to give them: a drawn answer judged correct gets its class's
``equivalence_class`` and every output of its query naming the same thing is listed with it
(:func:`class_labels`), so classes appear while labelling, after the draws of the earlier rounds
were recorded.

Printed with Monte Carlo standard errors over repetitions: errors (any exit 2 / BundleError:
target 0), the share of repetitions in which any look splits the systems into more than one
tier (target ≤ 0.05 + 2 SE), and per metric the share of (repetition, system) pairs covered at
every look, averaged per repetition (target ≥ 0.95 − 2 SE); the share of classes with two
names and the looks.  Results are stored in ``bench/results/anytime_classes.json``.

Usage: python bench/anytime_classes.py [--reps R] [--systems M] [--rounds L] [--seed S]
[--alias-rate A] [--no-store]
"""

from __future__ import annotations

import importlib.util
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402


def _anytime_bench():
    """bench/anytime.py as a module (its Loop, world and tallies)."""
    key = "bench_anytime"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / "anytime.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def class_labels(world, samples: pd.DataFrame) -> pd.DataFrame:
    """Judgments of every drawn answer from the world's truth, as the README asks: C/W, a
    correct answer's ``equivalence_class``, and every pooled output of the same class listed
    with it (the aliases among the outputs)."""
    if not len(samples):
        return pd.DataFrame(columns=["query_id", "answer", "label", "annotator"])
    ids = world.candidate_ids(samples["query_id"].to_numpy(), samples["answer"].to_numpy())
    drawn = world._with_aliases(np.unique(ids[ids >= 0]))
    true = world.candidate_true[drawn]
    frame = pd.DataFrame(
        {
            "query_id": world._query_ids[world.candidate_query[drawn]],
            "answer": world.candidate_answer[drawn],
            "label": np.where(true, "C", "W").astype(object),
            "annotator": "truth",
        }
    )
    frame["equivalence_class"] = world._class_names(drawn)
    return frame


def alias_world(systems: int, seed: int, where: Path, alias_rate: float):
    """The null world of bench/anytime.py (every system true precision 0.5) with aliases."""
    from receval.simulation import SimulationConfig

    bench = _anytime_bench()
    config = SimulationConfig(
        systems=systems, queries=max(40, systems * 3), precision_range=(0.5, 0.500001),
        recall_range=(0.05, 0.3), uppercase_teams=0.0, exhaustive_facts=60,
        alias_rate=alias_rate,
    )  # fmt: skip
    return bench.world_task(config, seed, where)


def two_name_share(world) -> float:
    """The share of the world's true classes (in the pool) that have two names."""
    classes = world.classes
    true_pooled = np.unique(classes[world.pool][world.candidate_true[world.pool]])
    aliased = np.unique(classes[~world.representative])
    return float(np.isin(true_pooled, aliased).mean()) if true_pooled.size else 0.0


def class_loop(world, task, first: int, seed: int):
    """bench/anytime.py's Loop, labelled with classes and aliases (:func:`class_labels`)."""
    from receval.task import with_annotation

    bench = _anytime_bench()

    class ClassLoop(bench.Loop):
        def _task(self):
            return with_annotation(
                self.base, samples=self.samples, judgments=class_labels(world, self.samples),
                exhaustive_units=self.units, exhaustive=self.exhaustive,
            )  # fmt: skip

    return ClassLoop(world, task, first=first, seed=seed)


def study(systems: int, reps: int, seed: int, where: Path, rounds: int = 8,
          alias_rate: float = 0.25) -> dict:  # fmt: skip
    """The null world with aliases over ``rounds`` + 1 looks per repetition (module docstring)."""
    from receval.errors import BundleError

    bench = _anytime_bench()
    world, task = alias_world(systems, seed, where, alias_rate)
    truth = world.truth_metrics().set_index("system")
    names = list(task.systems)
    metrics = bench.METRICS
    split, errors, looks, classed = [], [], [], []
    covered: dict[str, list[float]] = {m: [] for m in metrics}
    for rep in range(reps):
        ok = {m: np.ones(systems, bool) for m in metrics}
        any_split, n_looks, error = False, 0, ""
        try:
            loop = class_loop(world, task, 20, 1000 * seed + rep)
            for r in range(rounds + 1):
                board = loop.look("precision").leaderboard.set_index("system")
                n_looks += 1
                any_split |= board["tier"].astype(str).nunique() > 1
                for m in metrics:
                    ok[m] &= bench.inside_by_system(board, truth, m, names)
                if r == rounds or not loop.step(10 * systems, seed=rep, rank_by="precision"):
                    break
            votes = loop.task.judgments
            named = votes["equivalence_class"].fillna("").astype(str).str.strip()
            classed.append(int(named[named != ""].nunique()))
        except (BundleError, ValueError) as exc:
            error = str(exc).splitlines()[0]
        errors.append(error)
        split.append(any_split)
        looks.append(n_looks)
        for m in metrics:
            covered[m].append(float(ok[m].mean()) if not error else 0.0)
    return {
        "split": np.array(split, float), "errors": errors, "covered": covered, "looks": looks,
        "classes_labelled": classed, "two_names": two_name_share(world),
        "truth": truth["precision"],
    }  # fmt: skip


def _share(x) -> tuple[float, float]:
    x = np.asarray(x, float)
    return float(x.mean()), float(math.sqrt(max(x.mean() * (1 - x.mean()), 0.05 * 0.95) / x.size))


def summarise(out: dict, systems: int) -> dict:
    """The figures, verdicts and targets of one study."""
    reps = len(out["looks"])
    split, split_se = _share(out["split"])
    figures = {
        "reps": reps, "systems": systems, "looks": [min(out["looks"]), max(out["looks"])],
        "two_name_share_of_true_pooled_classes": round(out["two_names"], 4),
        "classes_labelled_mean": float(np.mean(out["classes_labelled"]))
        if out["classes_labelled"] else 0.0,
        "errors": sum(bool(e) for e in out["errors"]),
        "first_error": next((e for e in out["errors"] if e), ""),
        "split": split, "split_se": split_se,
        "split_pass": bool(split <= 0.05 + 2 * split_se + 1e-12),
        "covered": {},
    }  # fmt: skip
    for metric, cov in out["covered"].items():
        cov = np.asarray(cov, float)
        se = float(cov.std(ddof=1) / math.sqrt(cov.size)) if cov.size > 1 else 0.0
        se = max(se, math.sqrt(0.05 * 0.95 / (systems * reps)))
        figures["covered"][metric] = {
            "share": float(cov.mean()), "se": se, "pass": bool(cov.mean() >= 0.95 - 2 * se),
        }  # fmt: skip
    return figures


def _print(figures: dict) -> None:
    f = figures
    print(
        f"null{f['systems']} with aliases: {f['reps']} reps, looks {f['looks'][0]}-{f['looks'][1]}, "
        f"{f['two_name_share_of_true_pooled_classes']:.1%} of the pooled true classes have two "
        f"names, {f['classes_labelled_mean']:.1f} classes labelled per rep"
    )
    print(f"  errors (exit 2): {f['errors']} {f['first_error']}")
    verdict = "PASS" if f["split_pass"] else "FAIL"
    print(
        f"  any look > 1 tier: {f['split']:.3f} (SE {f['split_se']:.3f}; <= 0.05 + 2 SE) {verdict}"
    )
    for metric, c in f["covered"].items():
        verdict = "PASS" if c["pass"] else "FAIL"
        print(f"  covered at every look, {metric}: {c['share']:.3f} (SE {c['se']:.3f}) {verdict}")


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1, reps=20)
    parser.add_argument("--systems", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--alias-rate", type=float, default=0.25)
    args = harness.parse(parser, argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = study(args.systems, args.reps, args.seed, Path(tmp), args.rounds, args.alias_rate)
    figures = summarise(out, args.systems)
    figures["seconds"] = round(time.perf_counter() - start, 1)
    _print(figures)
    harness.store(args, "anytime_classes", figures, argv)


if __name__ == "__main__":
    main()
