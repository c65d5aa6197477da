"""Pool coverage θ under ``--intervals anytime``: how wide is its end next to the bootstrap's, and
how much could any constant bet have gained?

Recall = θ·ν, so recall's anytime width cannot fall below θ's share of it.  θ comes from the
exhaustive units only (few, and fixed by the design), and its joint test uses θ's final capital
over the units (:func:`receval.estimators.anytime.sequences.joint_bounds`).  Per repetition of the
gradient worlds of ``bench/anytime.py`` (the units its loops use, 60 true facts' worth), this
prints:

* θ's end at level α from that final capital (plug-in bets, the ones ``score`` uses), its width
  over the bootstrap's (the joint estimator's percentile interval, small-sample expanded);
* an *oracle*: the narrowest interval any constant bet λ chosen in hindsight would give (the
  same truncation; invalid as an interval, a bound on what tuning the bets could buy);
* recall's final-look ratio is in ``bench/anytime.py``; this separates θ's part.

Usage: python bench/anytime_theta.py [--reps R] [--world gradient|gradient20] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import receval
from receval.estimators.anytime.betting import one_sided_ends, plugin_bets
from receval.estimators.anytime.sequences import _unit_streams
from receval.estimators.sample_data import build_sample_data
from receval.simulation import SimulationConfig
from receval.task import with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from anytime import GRADIENTS, world_task

ALPHA = 0.05
LAMBDAS = np.linspace(0.02, 1.5, 75)


def _ends(streams, bets) -> tuple[float, float]:
    """θ's two ends at α from the units' final capital with ``bets`` (1, n)."""
    level = np.full((1, 1), np.log(2.0 / ALPHA))
    lo, hi = (
        one_sided_ends(streams, bets, level, side, (0.0, 1.0), 24, running=False)[0, 0]
        for side in (+1, -1)
    )
    return float(lo), float(hi)


def betting_end(data) -> tuple[float, float]:
    """θ's ends with the plug-in bets ``score`` uses."""
    streams, horizon, scale = _unit_streams(data)
    return _ends(streams, plugin_bets(streams, ALPHA, 0.5, horizon, scale))


def oracle_end(data) -> tuple[float, float]:
    """The narrowest ends any constant bet (chosen per side in hindsight) gives, under the same
    truncation (the streams' cap)."""
    streams, _, _ = _unit_streams(data)
    ends = [_ends(streams, np.full(streams.shape, lam)) for lam in LAMBDAS]
    return max(lo for lo, _ in ends), min(hi for _, hi in ends)


def theta_study(reps: int, seed: int, where: Path, world: dict) -> dict[str, np.ndarray]:
    """Per repetition: units as bench/anytime.py's loops draw them, θ's three widths."""
    config = SimulationConfig(
        systems=world["systems"], teams=world["teams"], queries=world["queries"],
        precision_range=world["precision"], recall_range=(0.1, 0.3), uppercase_teams=0.0,
        exhaustive_facts=60,
    )  # fmt: skip
    sim, task = world_task(config, seed, where)
    out: dict[str, list] = {k: [] for k in ("units", "betting", "oracle", "bootstrap")}
    for rep in range(reps):
        ann = sim.annotate(np.random.default_rng(2000 * seed + rep), per_system=20)
        rep_task = with_annotation(task, **ann.tables())
        data = build_sample_data(rep_task)
        pool = receval.score(rep_task, rank_by="precision").pool.set_index("quantity")
        lo, hi = pool.loc["pool_coverage", ["lower", "upper"]].astype(float)
        b_lo, b_hi = betting_end(data)
        o_lo, o_hi = oracle_end(data)
        out["units"].append(int((data.unit_found > 0).sum()))
        out["betting"].append(b_hi - b_lo)
        out["oracle"].append(o_hi - o_lo)
        out["bootstrap"].append(hi - lo)
    return {k: np.asarray(v, float) for k, v in out.items()}


def _mean_se(x: np.ndarray) -> str:
    return f"{x.mean():.3f} (SE {x.std(ddof=1) / np.sqrt(x.size):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--world", choices=sorted(GRADIENTS), default="gradient20")
    args = parser.parse_args()
    start = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        out = theta_study(args.reps, args.seed, Path(tmp), GRADIENTS[args.world])
    print(f"{args.world}: {args.reps} reps, units with correct facts {_mean_se(out['units'])}")
    print(f"  theta width, anytime (final capital, plug-in bets): {_mean_se(out['betting'])}")
    print(f"  theta width, best constant bet in hindsight (oracle): {_mean_se(out['oracle'])}")
    print(f"  theta width, bootstrap (joint, expanded): {_mean_se(out['bootstrap'])}")
    print(f"  anytime / bootstrap: {_mean_se(out['betting'] / out['bootstrap'])}")
    print(f"  oracle / anytime: {_mean_se(out['oracle'] / out['betting'])}")
    print(f"  CPU {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
