"""Benchmark: ``receval score`` with B bootstrap replicates on a TAC-KBP-2015-sized task.

The task is the embedded ``data/kbp-sim`` bundle (70 systems, 317 queries, ~141,000 outputs; the
default simulated task, seed 2022).  Figures, each timed with ``time.perf_counter``:

1. **The command end to end**: ``receval score TASK --out DIR --bootstrap B --confidence 0.9``
   in a child process (interpreter start, imports, loading and validating, scoring, every output
   file), run ``--cli-runs`` times; peak memory is the children's ``ru_maxrss``
   (``os.wait4`` per child, the largest run).
2. **The library call** :func:`receval.scoring.score_task` alone on a loaded task (untimed load),
   (best of ``--repeat`` runs), then once more under ``tracemalloc`` (on a freshly loaded task) for
   the peak of traced allocations; and, to explain the
   command's time, the other stages the command runs (``load_task``, the diagnostics it writes).
3. **The bootstrap engine** alone (:func:`receval.estimators.sample_data.build_sample_data`, the
   per-row terms, :func:`~receval.estimators.bootstrap.draw_replicates` and
   :func:`~receval.estimators.bootstrap.run_bootstrap`): one matrix product per stage for all B
   replicates and all systems at once.
4. **A straightforward per-replicate loop** written here as the baseline: for each replicate it
   resamples each system's sample (``rng.integers`` per sampler) and the exhaustive units, then
   recomputes joint precision, pooled recall, pool coverage θ and true recall θ·ν with a Python
   loop over systems (each system vectorised over the draws).  It is timed on
   ``--loop-replicates`` replicates and extrapolated linearly to B (the loop's cost per replicate
   does not depend on B).  Before timing, it is checked against the engine: on the full sample
   and on the engine's own first replicates it must give the same numbers.

The acceptance targets (issue): the engine at least 20× faster than the loop for the same
replicates, and the whole ``receval score`` under 30 s on this 2-core machine.

Usage: python bench/score.py [--task DIR] [--bootstrap B] [--loop-replicates R] [--cli-runs N]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from receval.estimators.base import terms_and_statistic
from receval.estimators.bootstrap import draw_replicates, run_bootstrap
from receval.estimators.sample_data import SampleData, build_sample_data
from receval.scoring import ScoreOptions, bootstrap_stages, score_task
from receval.task import load_task

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

DEFAULT_TASK = Path(__file__).resolve().parents[1] / "data" / "kbp-sim"
SPEEDUP_TARGET = 20.0
WALL_TARGET_S = 30.0
CONFIDENCE = 0.9


# ---------------------------------------------------------------------------------------------
# the baseline: one replicate at a time, one system at a time


@dataclass(frozen=True)
class LoopBaseline:
    """Inputs of the per-replicate loop (balance-heuristic joint estimators, micro targets).

    With mixture weights w_ij ∝ n_j every system's proposal is q(x) = Σ_j (n_j/N) s_j(x), so

    * joint precision π̂_i = (1/N) Σ_k t_i(x_k) f(x_k) / q(x_k) with t_i = 1/|X_i| on X_i
      (Chaganty et al. 2017, π̂_i^joint; unbiased);
    * pooled recall ν̂_i = Σ_k g_i(x_k) f(x_k)/q(x_k) / Σ_k f(x_k)/q(x_k) (self-normalised,
      consistent);
    * pool coverage θ̂ = Σ_u a_u / Σ_u b_u over exhaustive units (uniform units; consistent);
    * true recall r̂_i = θ̂ ν̂_i.

    Draw rows are resampled within each sampler (n_j fixed), units with replacement, as in the
    engine.
    """

    sampler_rows: list[np.ndarray]  # draw rows of each sampler
    draw_fact: np.ndarray  # (K,) drawn-fact index of each draw
    weight: np.ndarray  # (D,) f(x) / q(x) per drawn fact
    member: list[np.ndarray]  # per system: (D,) bool, x ∈ X_i
    sizes: np.ndarray  # (m,) |X_i|
    draws: int  # N
    unit_pooled: np.ndarray  # (U,) a_u
    unit_found: np.ndarray  # (U,) b_u

    @classmethod
    def from_data(cls, data: SampleData) -> LoopBaseline:
        if np.any(data.unit_weight != 1.0):
            raise ValueError("the baseline handles uniformly drawn exhaustive units only")
        if data.target_kind != "micro":
            raise ValueError("the baseline handles micro targets only")
        N = float(data.sampler_n.sum())
        q = data.proposal @ (data.sampler_n / N)  # balance mixture at every drawn fact
        return cls(
            sampler_rows=[np.flatnonzero(data.draw_sampler == j) for j in range(data.J)],
            draw_fact=data.draw_fact,
            weight=data.label / q,
            member=[np.ascontiguousarray(data.member[:, i]) for i in range(data.m)],
            sizes=data.sizes,
            draws=int(N),
            unit_pooled=data.unit_pooled,
            unit_found=data.unit_found,
        )

    def estimates(self, draw_rows: np.ndarray, unit_rows: np.ndarray) -> np.ndarray:
        """(4, m): joint precision, pooled recall, pool coverage, true recall of every system."""
        fact = self.draw_fact[draw_rows]
        w = self.weight[fact]
        total = w.sum()
        theta = self.unit_pooled[unit_rows].sum() / self.unit_found[unit_rows].sum()
        m = len(self.member)
        out = np.empty((4, m))
        for i in range(m):
            hit = w[self.member[i][fact]].sum()
            out[0, i] = hit / (self.draws * self.sizes[i])
            out[1, i] = hit / total
            out[2, i] = theta
            out[3, i] = theta * out[1, i]
        return out

    def resample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One replicate's row indices: each sampler's draws and the units, with replacement."""
        rows = np.concatenate([r[rng.integers(0, r.size, r.size)] for r in self.sampler_rows])
        units = rng.integers(0, self.unit_found.size, self.unit_found.size)
        return rows, units

    def run(self, B: int, rng: np.random.Generator) -> np.ndarray:
        """(B, 4, m) replicate estimates."""
        out = np.empty((B, 4, len(self.member)))
        for b in range(B):
            out[b] = self.estimates(*self.resample(rng))
        return out


def _rows_from_counts(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(counts.size), counts)


def check_baseline(baseline: LoopBaseline, run, replicates, data: SampleData, n: int = 3) -> float:
    """Largest |difference| between the loop and the engine (full sample and ``n`` replicates)."""
    names = ("precision", "pooled_recall", "pool_coverage", "recall")

    def engine(values: dict[str, np.ndarray]) -> np.ndarray:
        cov = np.broadcast_to(values["pool_coverage"], values["precision"].shape)
        return np.stack([values[names[0]], values[names[1]], cov, values[names[3]]])

    full = baseline.estimates(np.arange(data.K), np.arange(data.U))
    worst = float(np.nanmax(np.abs(full - engine(run.point))))
    for b in range(n):
        rows = _rows_from_counts(replicates.counts["draws"][b])
        units = _rows_from_counts(replicates.counts["units"][b])
        loop = baseline.estimates(rows, units)
        rep = {k: v[b] for k, v in run.replicates.items()}
        worst = max(worst, float(np.nanmax(np.abs(loop - engine(rep)))))
    return worst


# ---------------------------------------------------------------------------------------------
# the stages


def time_cli(task: Path, B: int, seed: int, runs: int) -> tuple[list[float], float, str]:
    """Wall times of ``receval score`` in child processes and the children's peak RSS (MiB)."""
    exe = shutil.which("receval")
    command = [exe] if exe else [sys.executable, "-c", "from receval.cli import main; main()"]
    walls, rss = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(runs):
            out = Path(tmp) / f"out{r}"
            args = [*command, "score", str(task), "--out", str(out), "--bootstrap", str(B)]
            args += ["--confidence", str(CONFIDENCE), "--seed", str(seed), "--quiet"]
            child = harness.run_child(args)
            walls.append(child.wall)
            rss = max(rss, child.rss_mib)
        files = ", ".join(sorted(p.name for p in (Path(tmp) / "out0").iterdir()))
    return walls, rss, files


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=0, quick={"bootstrap": 200, "cli_runs": 1, "repeat": 1})
    parser.add_argument("--task", type=Path, default=DEFAULT_TASK)
    parser.add_argument("--bootstrap", type=int, default=1000, help="replicates B")
    parser.add_argument("--loop-replicates", type=int, default=20, help="replicates of the loop")
    parser.add_argument("--cli-runs", type=int, default=2, help="runs of the command")
    parser.add_argument("--repeat", type=int, default=3, help="in-process timings: best of N")
    args = harness.parse(parser, argv)
    B = args.bootstrap
    tee = harness.Tee()

    # 1. the command end to end, each child measured on its own (os.wait4)
    cli_walls, cli_rss, cli_files = time_cli(args.task, B, args.seed, args.cli_runs)

    # 2. the library call and the command's other stages
    start = time.perf_counter()
    task = load_task(args.task)
    summary = task.summary()
    t_load = time.perf_counter() - start
    options = ScoreOptions(bootstrap=B, confidence=CONFIDENCE, seed=args.seed)
    score_task(task, options)  # warm: imports and the task's cached properties
    t_score = harness.best(lambda: score_task(task, options), args.repeat)
    traced = harness.timed(score_task, load_task(args.task), options, trace=True)
    t_traced, score_peak = traced.wall, traced.peak

    from receval.diagnostics import annotation_spend, per_query, pooling_bias

    result = score_task(task, options)
    start = time.perf_counter()
    per_query(task)
    annotation_spend(task)
    pooling_bias(task, result.leaderboard)
    t_diag = time.perf_counter() - start

    # 3. the engine alone: the same replicates for every system, one product per stage
    start = time.perf_counter()
    data = build_sample_data(task)
    t_data = time.perf_counter() - start

    def engine():
        stages = bootstrap_stages(data)
        terms, statistic = terms_and_statistic(data)  # what `receval score` computes for joint
        replicates = draw_replicates(stages, B, np.random.default_rng(args.seed))
        return replicates, run_bootstrap(stages, terms, statistic, replicates)

    replicates, run = engine()
    t_engine = harness.best(engine, args.repeat)
    stages = bootstrap_stages(data)
    draw_peak = harness.timed(
        draw_replicates, stages, B, np.random.default_rng(args.seed), trace=True
    ).peak

    # 4. the loop baseline: checked against the engine, then timed on a few replicates
    start = time.perf_counter()
    baseline = LoopBaseline.from_data(data)
    t_setup = time.perf_counter() - start
    worst = check_baseline(baseline, run, replicates, data)
    R = min(args.loop_replicates, B)
    t_loop = harness.best(lambda: baseline.run(R, np.random.default_rng(args.seed)), args.repeat)
    t_loop_B = t_loop * B / R

    speedup_engine = t_loop_B / t_engine
    speedup_score = t_loop_B / t_score
    cli_best = min(cli_walls)

    print(f"task {args.task} ({summary['task']})")
    print(
        f"  {summary['systems']} systems, {summary['queries']} queries, {summary['outputs']:,} "
        f"outputs, {summary['judged facts']:,} judged facts, {summary['sample draws']:,} sample "
        f"draws, {summary['exhaustive units']} exhaustive units "
        f"({summary['exhaustive facts']} facts)"
    )
    print(f"bootstrap: B = {B}, percentile {CONFIDENCE:.0%} intervals, seed {args.seed}")
    print()
    print("receval score (child process, end to end)")
    print(
        f"  wall time        {cli_best:7.2f} s   (best of {len(cli_walls)}: "
        + ", ".join(f"{w:.2f}" for w in cli_walls)
        + " s)"
    )
    print(f"  peak memory      {cli_rss:7.1f} MiB (ru_maxrss of the largest child, os.wait4)")
    print(f"  wrote            {cli_files}")
    print("library, in this process (warm imports)")
    print(f"  load_task + summary()              {t_load:7.2f} s")
    print(
        f"  score_task                         {t_score:7.2f} s   (under tracemalloc: "
        f"{t_traced:.2f} s, peak traced {score_peak / 2**20:.1f} MiB, fresh task)"
    )
    print(f"  per_query + annotation + pooling_bias diagnostics {t_diag:7.2f} s")
    print(
        f"  bootstrap engine: build_sample_data {t_data:.2f} s, then terms + {B} replicates + "
        f"every metric for all {data.m} systems {t_engine:.2f} s"
    )
    print(
        f"  peak traced memory of draw_replicates alone (B x draws resampling counts): "
        f"{draw_peak / 2**20:.1f} MiB"
    )
    print(f"per-replicate loop baseline ({data.m} systems, {data.J} samplers, {data.K:,} draws)")
    print(f"  agrees with the engine: max |difference| {worst:.1e} (full sample + 3 replicates)")
    print(
        f"  {R} replicates {t_loop:.2f} s -> {t_loop_B:.2f} s for B = {B} "
        f"(linear extrapolation x{B / R:g}); setup {t_setup * 1e3:.0f} ms"
    )
    print()
    print(
        f"speed-up, same work (engine vs loop; B = {B}):        {speedup_engine:6.1f}x  "
        f"{'PASS' if speedup_engine >= SPEEDUP_TARGET else 'FAIL'} (target >= {SPEEDUP_TARGET:g}x)"
    )
    print(
        f"speed-up, score_task (ranks, tiers, truth check too) vs loop: {speedup_score:6.1f}x  "
        f"{'PASS' if speedup_score >= SPEEDUP_TARGET else 'FAIL'} (target >= {SPEEDUP_TARGET:g}x)"
    )
    print(
        f"receval score end to end: {cli_best:.1f} s  "
        f"{'PASS' if cli_best < WALL_TARGET_S else 'FAIL'} (aim < {WALL_TARGET_S:g} s)"
    )
    figures = {
        "bootstrap": B,
        "score_cli_wall_s": round(cli_best, 2),
        "score_cli_peak_rss_mib": round(cli_rss, 1),
        "load_s": round(t_load, 2),
        "score_task_s": round(t_score, 2),
        "score_task_traced_peak_mib": round(score_peak / 2**20, 1),
        "diagnostics_s": round(t_diag, 2),
        "engine_s": round(t_engine, 3),
        "loop_s_for_B": round(t_loop_B, 2),
        "speed_up_engine_vs_loop": round(speedup_engine, 1),
        "speed_up_score_task_vs_loop": round(speedup_score, 1),
        "engine_agrees_with_loop_max_abs_diff": worst,
    }
    harness.store(args, "score", figures, argv, output=tee, title="receval score, bootstrap B")


if __name__ == "__main__":
    main()
