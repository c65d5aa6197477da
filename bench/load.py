"""Benchmark: simulate a TAC-KBP-2015-sized bundle, then load and validate it.

Steps, each timed with ``time.perf_counter``:

1. ``simulate_world`` (70 systems, 317 queries by default), ``World.annotate`` (the annotation
   campaign alone, repeated: what a statistical test redraws) and ``write_bundle`` (via
   ``simulate_task``) into a temporary directory;
2. ``load_task`` + ``Task.summary()`` on that bundle — in a fresh child process, so that its peak
   resident memory (``resource.getrusage(...).ru_maxrss``) is the load's own and not the
   simulator's — and, in a second pass, under ``tracemalloc`` for the peak of Python allocations.

Usage: python bench/load.py [--systems N] [--queries Q] [--seed S] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from receval.simulation import SimulationConfig, simulate_task, simulate_world, split_seed

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


def load_stage(root: Path) -> dict[str, float | dict]:
    """Time ``load_task`` + ``summary()`` (untraced), then once more under tracemalloc."""
    from receval.task import load_task

    plain = harness.timed(lambda: load_task(root).summary())
    rss = harness.peak_rss_mib()
    traced = harness.timed(lambda: load_task(root).summary(), trace=True)
    return {
        "wall_s": plain.wall,
        "maxrss_mib": rss,
        "traced_peak_mib": traced.peak / 2**20,
        "traced_wall_s": traced.wall,
        "summary": plain.value,
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=2022, quick={"repeat": 5})
    parser.add_argument("--systems", type=int, default=70)
    parser.add_argument("--queries", type=int, default=317)
    parser.add_argument("--repeat", type=int, default=20, help="annotation redraws to time")
    parser.add_argument("--load-only", type=Path, help=argparse.SUPPRESS)
    args = harness.parse(parser, argv)
    if args.load_only is not None:  # child process: print the load figures as JSON
        print(json.dumps(load_stage(args.load_only), default=str))
        return

    tee = harness.Tee()
    config = SimulationConfig(systems=args.systems, queries=args.queries)
    world_rng, annotation_rng = split_seed(args.seed)
    start = time.perf_counter()
    world = simulate_world(config, world_rng)
    t_world = time.perf_counter() - start
    world.annotate(annotation_rng)  # warm the world's cached frames
    times = []
    for r in range(args.repeat):
        start = time.perf_counter()
        world.annotate(np.random.default_rng(r))
        times.append(time.perf_counter() - start)
    truth = world.truth_metrics()

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        root = simulate_task(Path(tmp) / "bundle", config, seed=args.seed)
        t_task = time.perf_counter() - start
        size = sum(p.stat().st_size for p in root.iterdir())
        child = subprocess.run(
            [sys.executable, __file__, "--load-only", str(root)],
            check=True,
            capture_output=True,
            text=True,
        )
        load = json.loads(child.stdout)

    print(f"simulated task: {args.systems} systems, {args.queries} queries, seed {args.seed}")
    print(
        f"  world: {world.output_candidate.size:,} output rows, {world.pool.size:,} distinct "
        f"facts output, {world.n_true:,} true facts, universe {world.universe_size:,}, "
        f"pool coverage θ = {world.pool_coverage:.3f}"
    )
    print(
        f"  systems: precision {truth['precision'].min():.2f}-{truth['precision'].max():.2f} "
        f"(mean {truth['precision'].mean():.2f}), true recall {truth['recall'].min():.3f}-"
        f"{truth['recall'].max():.3f} (mean {truth['recall'].mean():.3f})"
    )
    print(f"simulate_world                 {t_world * 1e3:8.1f} ms")
    print(
        f"World.annotate (median of {args.repeat})  {np.median(times) * 1e3:8.1f} ms"
        f"   (min {min(times) * 1e3:.1f} ms)"
    )
    print(
        f"simulate_task (world+annotation+write) {t_task * 1e3:8.1f} ms, bundle {size / 1e6:.2f} MB"
    )
    print(f"load_task + summary()          {load['wall_s'] * 1e3:8.1f} ms")
    print(f"  peak RSS of the loading process   {load['maxrss_mib']:8.1f} MiB (ru_maxrss)")
    print(
        f"  peak traced Python allocations    {load['traced_peak_mib']:8.1f} MiB "
        f"(tracemalloc; traced run took {load['traced_wall_s'] * 1e3:.0f} ms)"
    )
    print(f"peak RSS of this process (simulation)  {harness.peak_rss_mib():8.1f} MiB")
    print("summary:", ", ".join(f"{k}={v}" for k, v in load["summary"].items()))
    figures = {
        "simulate_world_ms": round(t_world * 1e3, 1),
        "annotate_median_ms": round(float(np.median(times)) * 1e3, 1),
        "simulate_task_ms": round(t_task * 1e3, 1),
        "bundle_mb": round(size / 1e6, 2),
        "load_and_summary_ms": round(load["wall_s"] * 1e3, 1),
        "load_peak_rss_mib": round(load["maxrss_mib"], 1),
        "load_traced_peak_mib": round(load["traced_peak_mib"], 1),
        "simulation_peak_rss_mib": round(harness.peak_rss_mib(), 1),
    }
    harness.store(args, "load", figures, argv, output=tee, title="simulate, load, validate")


if __name__ == "__main__":
    main()
