"""Does stratifying by an automatic judge buy a tighter TailBand at equal labels? (issue 22.5)

Run: ``PYTHONPATH=. python bench/curves_judge.py [--seeds 100]``

For each list and judge, TailBand is run with and without the judge (:mod:`receval.curves.
judged`) at the same labels and the same seeds; the study prints simultaneous coverage at every
rank (with its Monte Carlo SE) and the median half-width at k = 1/10/50/100 % of N.

Judges: on synthetic and real lists with complete labels, a simulated judge that gives each
item's true label flipped with probability 1 − accuracy (accuracy 0.95 and 0.85), a useless
judge (uniform random scores; the exact head then leaves it out) and the same useless judge
forced in (``always=True``: the band must still hold).  On Chaganty et al.'s MS MARCO answers
(file order), the real automatic word-overlap score as the judge (threshold ½).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

from receval.curves.judged import JudgeScores
from receval.curves.ranked import ArrayRankedList, SimulatedRankedList
from receval.curves.tailband import TailBand

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "curves"))

FRACTIONS = (0.01, 0.1, 0.5, 1.0)


def judges(labels: np.ndarray, seed: int = 0) -> dict[str, JudgeScores]:
    rng = np.random.default_rng(seed)
    out = {}
    for accuracy in (0.95, 0.85):
        flip = rng.random(labels.size) >= accuracy
        out[f"judge {accuracy:.2f}"] = JudgeScores(np.where(flip, 1.0 - labels, labels))
    noise = rng.random(labels.size)
    out["useless"] = JudgeScores(noise)
    out["useless forced"] = JudgeScores(noise, always=True)
    return out


def study(ranked, params: dict, named: dict[str, JudgeScores | None], seeds: int) -> dict:
    size = ranked.size
    ranks = np.arange(1, size + 1, dtype=np.int64)
    truth = ranked.true_precision(ranks)
    ks = np.maximum((np.array(FRACTIONS) * size).astype(np.int64), 1)
    out = {}
    for name, judge in named.items():
        covered, widths, labels, used = 0, [], 0, 0
        for seed in range(seeds):
            est = TailBand(seed=seed, judge=judge, **params).run(size, ranked.labels)
            _, lo, hi = est.at(ranks)
            covered += bool(np.all((truth >= lo - 1e-12) & (truth <= hi + 1e-12)))
            _, lo, hi = est.at(ks)
            widths.append((hi - lo) / 2)
            labels = est.annotations
            used += "design weights" in est.guarantee
        share = covered / seeds
        out[name] = {
            "coverage": share,
            "se": math.sqrt(max(share * (1 - share), 1e-12) / seeds),
            "halfwidth": np.median(widths, axis=0),
            "labels": labels,
            "used": used,
        }
    return out


def main(argv: list[str] | None = None) -> None:
    import real_lists as real
    from curves_tightness import synthetic

    parser = harness.parser(__doc__, reps=100, reps_name="seeds", quick={"seeds": 20})
    args = harness.parse(parser, argv)
    tee, table = harness.Tee(), []
    start = time.perf_counter()
    small = {"epsilon": 0.1, "window": 20}
    lists = []
    for kind in ("falling", "flat", "low"):
        lists.append((f"{kind} 1e5", SimulatedRankedList(100_000, synthetic(kind, 1e5), 7), {}))
    parabank = real.parabank_by_model_score()
    if parabank is not None:
        lists.append(("ParaBank by NLL", ArrayRankedList(parabank), small))
    ppdb = real.ppdb_by_proxy_score()
    if ppdb is not None:
        lists.append(("PPDB 2.0 by proxy", ArrayRankedList(ppdb), {}))
    print(
        "TailBand with and without a judge, equal labels: simultaneous coverage (δ = 0.05) and "
        "median half-width at k = 1/10/50/100 % of N"
    )
    for name, ranked, params in lists:
        labels = ranked.labels(np.arange(1, ranked.size + 1, dtype=np.int64))
        named = {"no judge": None, **judges(labels)}
        res = study(ranked, params, named, args.seeds)
        table += _report(name, ranked.size, res, args.seeds)
    found = real.msmarco_answers()
    if found is not None:
        labels, score = found
        named = {"no judge": None, "word overlap": JudgeScores(score)}
        res = study(ArrayRankedList(labels), small, named, args.seeds)
        table += _report("MS MARCO, file order", labels.size, res, args.seeds)
    print(f"\n(total {time.perf_counter() - start:.0f} s)")
    seeds = f"0 … {args.seeds - 1}"
    harness.store(args, "curves_judge", {"bands": table}, argv, output=tee, seed=seeds)


def _report(name: str, size: int, res: dict, seeds: int) -> list[dict]:
    base, rows = res["no judge"]["halfwidth"], []
    for judge, r in res.items():
        rows.append(
            {"list": name, "N": size, "judge": judge, "labels": r["labels"]}
            | {"coverage": r["coverage"], "se": r["se"], "judge_used": r["used"]}
            | {
                f"hw_{i}": w
                for i, w in zip(("10pc", "50pc", "100pc"), r["halfwidth"][1:], strict=True)
            }
            | {
                f"ratio_{i}": (a / b if b > 0 else None)
                for i, a, b in zip(
                    ("10pc", "50pc", "100pc"), r["halfwidth"][1:], base[1:], strict=True
                )
            }
        )
        hw = " / ".join(f"{w:.4f}" for w in r["halfwidth"])
        ratio = " / ".join(
            f"{a / b:.2f}" if b > 0 else " — " for a, b in zip(r["halfwidth"], base, strict=True)
        )
        print(
            f"{name:<22} {size:>8,} {judge:<15} {r['labels']:>6,} labels  coverage "
            f"{r['coverage']:.3f} ± {r['se']:.3f}  judge used {r['used']:>3}/{seeds}  "
            f"{hw}  (× {ratio})",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    main()
