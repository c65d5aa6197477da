"""The ``receval`` command line: a thin shell over the library.

Every command exits 0 on success and 2 with one line ``error: <file>:<line>: <what is wrong>`` on
bad input (never a traceback).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from receval import __version__
from receval.errors import BundleError


class InputError(click.ClickException):
    """Bad input: printed as one ``error:`` line, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class ReceGroup(click.Group):
    """A click group that turns bad-input exceptions into :class:`InputError`."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BundleError as exc:
            raise InputError(str(exc)) from None
        except FileExistsError as exc:
            raise InputError(str(exc)) from None


@click.group(cls=ReceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="receval")
def cli() -> None:
    """receval: fair, label-efficient scoring of many systems in shared tasks.

    Typical session: simulate (or import) a task bundle, validate it, draw samples and annotate,
    then score and read the leaderboard and report.
    """


def _load(task: Path, **parts):
    from receval.task import load_task

    return load_task(task, **parts)


@cli.command()
@click.argument("task", type=click.Path(path_type=Path))
def validate(task: Path) -> None:
    """Load and check the bundle TASK; print a summary (systems, queries, outputs, labels, conflicts)."""
    loaded = _load(task)
    summary = loaded.summary()
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        click.echo(f"{key:<{width}}  {value}")
    samplers = loaded.samplers
    if samplers:
        designs = sorted({s.design for s in samplers})
        click.echo(
            f"{'sample designs':<{width}}  {', '.join(designs)} ({len(samplers)} system samples)"
        )
    conflicts = loaded.merged.conflicts
    if len(conflicts):
        kinds = conflicts["kind"].value_counts()
        detail = ", ".join(f"{k}: {v}" for k, v in kinds.items())
        click.echo(f"conflicts by kind: {detail} (all listed in conflicts.csv by `receval score`)")


def _engine(name: str, master: str | None):
    """The aggregation engine of ``--engine`` (a missing pyspark is a usage error)."""
    from receval.engine import connect

    try:
        return connect(name, master=master)
    except ImportError as exc:
        raise click.UsageError(str(exc)) from None


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


LEADERBOARD_VIEW = [
    ("rank", "rank"),
    ("rank_interval", "rank CI"),
    ("tier", "tier"),
    ("system", "system"),
    ("team", "team"),
    ("precision", "P"),
    ("recall", "R"),
    ("f1", "F1"),
]


def _print_leaderboard(board) -> None:
    from receval.report.writers import format_table

    view = board.copy()
    view["rank_interval"] = [
        "—" if lo != lo else f"{int(lo)}–{int(hi)}"
        for lo, hi in zip(view["rank_lo"], view["rank_hi"], strict=True)
    ]
    view["rank"] = view["rank"].astype("Int64").astype(str).replace("<NA>", "—")
    cols = list(LEADERBOARD_VIEW)
    if "precision_at_target" in view.columns:
        cols.append(("precision_at_target", "P@target"))
    click.echo(format_table(view, cols))


@cli.command()
@click.argument("task", type=click.Path(path_type=Path))
@click.option(
    "--out", "out", type=click.Path(path_type=Path), required=True, help="Output directory."
)
@click.option(
    "--estimator",
    type=click.Choice(["joint", "simple", "official"]),
    default="joint",
    show_default=True,
    help="joint: importance-reweighted (Chaganty et al. 2017); simple: own samples and exhaustive "
    "units only; official: TAC closed-world census of the judgments.",
)
@click.option(
    "--bootstrap",
    "bootstrap",
    type=click.IntRange(50, 100_000),
    default=1000,
    show_default=True,
    help="Bootstrap replicates B.",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0.5, 0.999),
    default=0.95,
    show_default=True,
    help="Two-sided interval level.",
)
@click.option(
    "--method",
    type=click.Choice(["percentile", "basic", "BCa"]),
    default="percentile",
    show_default=True,
    help="Bootstrap interval method.",
)
@click.option(
    "--weighting",
    type=click.Choice(["size", "overlap"]),
    default="size",
    show_default=True,
    help="Joint-precision mixture weights: size (w ∝ n_j) or overlap (the paper's heuristic).",
)
@click.option(
    "--target",
    "target",
    type=click.Choice(["micro", "macro"]),
    default="micro",
    show_default=True,
    help="micro: every fact weighs the same; macro: every answered query weighs the same (precision).",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap replicates."
)
@click.option(
    "--rank-by",
    type=click.Choice(["f1", "recall", "precision", "pooled_recall", "precision_at_target"]),
    default="f1",
    show_default=True,
    help="Metric the leaderboard is ranked by.",
)
@click.option(
    "--cluster-queries",
    is_flag=True,
    help="Also resample the queries as clusters (the query set is a sample of possible queries), "
    "as TAC's official bootstrap does; widens intervals when queries differ.",
)
@click.option(
    "--target-recall",
    type=click.FloatRange(0.01, 0.99),
    default=None,
    help="Also estimate each system's precision at this true recall (curve, or Dimm's extrapolation).",
)
@click.option(
    "--prevalence",
    type=click.FloatRange(1e-9, 0.99),
    default=None,
    help="Prevalence ρ for Dimm's model (default: estimated correct facts / [universe] size).",
)
@click.option(
    "--tiers",
    "tier_correction",
    type=click.Choice(["holm", "bh"]),
    default="holm",
    show_default=True,
    help="Multiple-testing correction of the paired tests behind the significance tiers.",
)
@click.option(
    "--anonymise",
    is_flag=True,
    help="Also write leaderboard_anonymised.csv (stable team pseudonyms).",
)
@click.option(
    "--anonymise-key", default=None, help="Secret key for the pseudonyms (default: the task name)."
)
@click.option(
    "--best-per-team",
    is_flag=True,
    help="Print only each team's best run (the CSV keeps all runs).",
)
@click.option(
    "--save-replicates", is_flag=True, help="Also write DIR/replicates.npz (the resampling counts)."
)
@click.option(
    "--replicates",
    "replicates_path",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="Reuse the replicates saved by an earlier run (--save-replicates).",
)
@click.option(
    "--engine",
    type=click.Choice(["duckdb", "spark"]),
    default="duckdb",
    show_default=True,
    help="Engine of the heavy aggregations (official census, leave-one-team-out): embedded "
    "DuckDB, or Apache Spark (pip install 'receval[spark]').",
)
@click.option(
    "--spark-master",
    default=None,
    help="Spark master URL for --engine spark (default: SPARK_MASTER, spark-defaults.conf, "
    "else local[*]).",
)
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def score(
    task: Path,
    out: Path,
    estimator: str,
    bootstrap: int,
    confidence: float,
    method: str,
    weighting: str,
    target: str,
    seed: int,
    rank_by: str,
    target_recall: float | None,
    prevalence: float | None,
    tier_correction: str,
    cluster_queries: bool,
    anonymise: bool,
    anonymise_key: str | None,
    best_per_team: bool,
    save_replicates: bool,
    replicates_path: Path | None,
    engine: str,
    spark_master: str | None,
    quiet: bool,
) -> None:
    """Estimate precision, recall and F1 of every system of TASK with intervals; write DIR/.

    Writes leaderboard.csv, pool.csv, conflicts.csv, run.json (and truth_check.csv when the bundle
    has truth.tsv).  Every interval is a bootstrap interval over all random stages (each system's
    sample, the exhaustive units) with replicates shared by all systems.
    """
    from receval.progress import progress

    # steps: load, estimate, diagnostics, outputs, report (a bar on a terminal after 1 s)
    with progress(5, "scoring", quiet) as bar:
        result, report_path = _score(
            task=task,
            out=out,
            estimator=estimator,
            bootstrap=bootstrap,
            confidence=confidence,
            method=method,
            weighting=weighting,
            target=target,
            seed=seed,
            rank_by=rank_by,
            target_recall=target_recall,
            prevalence=prevalence,
            tier_correction=tier_correction,
            cluster_queries=cluster_queries,
            anonymise=anonymise,
            anonymise_key=anonymise_key,
            best_per_team=best_per_team,
            save_replicates=save_replicates,
            replicates_path=replicates_path,
            quiet=quiet,
            bar=bar,
            engine=engine,
            spark_master=spark_master,
        )
    if not quiet:
        shown = result.leaderboard
        if best_per_team and "best_of_team" in shown:
            shown = shown[shown["best_of_team"]]
        _print_leaderboard(shown)
        interval = result.leaderboard["interval"].iloc[0] if len(result.leaderboard) else ""
        click.echo(f"\nintervals: {interval}; results in {out}/ (report: {report_path})")


def _score(
    task,
    out,
    estimator,
    bootstrap,
    confidence,
    method,
    weighting,
    target,
    seed,
    rank_by,
    target_recall,
    prevalence,
    tier_correction,
    cluster_queries,
    anonymise,
    anonymise_key,
    best_per_team,
    save_replicates,
    replicates_path,
    quiet,
    bar,
    engine="duckdb",
    spark_master=None,
) -> None:
    from receval.report.writers import curve_file_stem, write_csv, write_json
    from receval.scoring import ScoreOptions, score_task

    loaded = _load(task)
    bar.update(1)
    if cluster_queries and method == "BCa":
        raise click.UsageError(
            "--cluster-queries works with --method percentile or basic (BCa needs a jackknife)"
        )
    if cluster_queries and target == "macro":
        raise click.UsageError("--cluster-queries is implemented for --target micro only")
    if rank_by == "precision_at_target" and target_recall is None:
        raise click.UsageError("--rank-by precision_at_target needs --target-recall")
    if estimator == "official" and target_recall is not None:
        raise click.UsageError(
            "--target-recall needs a sample-based estimator (joint or simple), not official"
        )
    options = ScoreOptions(
        estimator=estimator,
        weighting=weighting,
        bootstrap=bootstrap,
        confidence=confidence,
        method=method,
        seed=seed,
        rank_by=rank_by,
        target=target,
        target_recall=target_recall,
        prevalence=prevalence,
        tiers=tier_correction,
        cluster_queries=cluster_queries,
    )
    replicates = None
    if replicates_path is not None:
        from receval.estimators.bootstrap import Replicates
        from receval.estimators.sample_data import build_sample_data
        from receval.scoring import _stages

        try:
            replicates = Replicates.load(
                replicates_path, _stages(build_sample_data(loaded, target), cluster_queries)
            )
        except ValueError as exc:
            raise InputError(str(exc)) from None
    result = score_task(loaded, options, replicates)
    bar.update(1)
    if not quiet:
        for w in result.warnings:
            _warn(w)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "leaderboard.csv", result.leaderboard)
    if anonymise:
        from receval.leaderboard import anonymise as anonymise_board

        write_csv(
            out / "leaderboard_anonymised.csv",
            anonymise_board(result.leaderboard, anonymise_key or loaded.name),
        )
    for name, curve in result.curves.items():
        write_csv(out / "curves" / f"{curve_file_stem(name)}.csv", curve)
    write_csv(out / "pool.csv", result.pool)
    write_csv(out / "conflicts.csv", result.conflicts)
    if result.truth_check is not None:
        write_csv(out / "truth_check.csv", result.truth_check)
    from receval.diagnostics import annotation_spend, per_query, pooling_bias

    write_csv(out / "per_query.csv", per_query(loaded))
    bar.update(1)
    write_csv(out / "annotation.csv", annotation_spend(loaded))
    joint_board = result.leaderboard if estimator != "official" else None
    from receval.engine.census import fact_matched

    # the engine counts fact-matched bundles; TAC bundles (classes across facts) stay in pandas
    runner = _engine(engine, spark_master) if fact_matched(loaded) else None
    write_csv(out / "pooling_bias.csv", pooling_bias(loaded, joint_board, engine=runner))
    info = dict(result.info)
    info["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    info["inputs"] = {"task": str(task), "checksums": loaded.checksums()}
    info["merge"] = {
        "rule": loaded.config.merge_rule,
        "tie": loaded.config.tie_policy,
        "conflicts": len(result.conflicts),
    }
    if save_replicates and result.replicates is not None:
        from receval.formats.tables import atomic_path

        with atomic_path(out / "replicates.npz") as tmp:
            with open(tmp, "wb") as fh:
                result.replicates.save(fh)
        info["replicates_file"] = "replicates.npz"
    write_json(out / "run.json", info)
    from receval.report.html import build_report

    bar.update(1)
    report_path = build_report(out, quiet=quiet)
    bar.update(1)
    return result, report_path


@cli.command()
@click.option(
    "--precision", "precision", type=float, required=True, help="Measured precision P at recall R."
)
@click.option("--recall", "recall", type=float, required=True, help="Measured recall R.")
@click.option(
    "--prevalence", type=float, required=True, help="Prevalence ρ of correct items in the universe."
)
@click.option("--target", "target", type=float, required=True, help="Target recall R_T.")
@click.option(
    "--max-recall-distance",
    type=float,
    default=0.10,
    show_default=True,
    help="Flag extrapolations over a larger recall distance.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def extrapolate(
    precision: float,
    recall: float,
    prevalence: float,
    target: float,
    max_recall_distance: float,
    as_json: bool,
) -> None:
    """Dimm's extrapolated precision at recall TARGET from one (R, P) point (a model extrapolation)."""
    import json

    from receval.extrapolation import ExtrapolationRefused, extrapolate_point

    try:
        result = extrapolate_point(
            precision, recall, prevalence, target, max_recall_distance=max_recall_distance
        )
    except ExtrapolationRefused as exc:
        raise InputError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        click.echo(f"beta                 {result.beta:.6g}")
        click.echo(
            f"precision at {target:<7g} {result.precision_at_target:.4f}  (model extrapolation, Dimm 2015)"
        )
        for flag in result.flags:
            click.echo(f"flag: {flag}")


@cli.command()
@click.argument("task", type=click.Path(path_type=Path))
@click.option(
    "--per-system",
    type=click.IntRange(0, None),
    default=None,
    help="Draws per system in this round (i.i.d. with replacement).",
)
@click.option(
    "--system", "systems", multiple=True, help="Only these systems (repeatable; default: all)."
)
@click.option(
    "--distribution",
    type=click.Choice(["uniform", "entity-relation"]),
    default="uniform",
    show_default=True,
    help="Sampling distribution over each system's distinct facts.",
)
@click.option(
    "--exhaustive-units",
    type=click.IntRange(0, None),
    default=0,
    show_default=True,
    help="Units (documents) to draw for exhaustive annotation.",
)
@click.option(
    "--units-from",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="Table of candidate units (column 'unit', optional 'prob') to draw exhaustive units from.",
)
@click.option(
    "--adaptive",
    is_flag=True,
    help="Choose each unsampled system's sample size so its interval half-width is at most --target-width.",
)
@click.option(
    "--target-width",
    type=click.FloatRange(0.001, 0.5),
    default=None,
    help="With --adaptive: the target half-width of the precision and recall intervals.",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0.5, 0.999),
    default=0.95,
    show_default=True,
    help="With --adaptive: interval level the width refers to.",
)
@click.option(
    "--max-per-system",
    type=click.IntRange(1, None),
    default=2000,
    show_default=True,
    help="With --adaptive: upper end of the search for n.",
)
@click.option(
    "--width-for",
    type=click.Choice(["both", "precision", "recall"]),
    default="both",
    show_default=True,
    help="With --adaptive: which intervals must meet --target-width.",
)
@click.option(
    "--bound",
    type=click.Choice(["paper", "exchangeable"]),
    default="paper",
    show_default=True,
    help="With --adaptive: the variance bound for unlabelled facts (paper: f <= 1, valid for any "
    "labels; exchangeable: worst case over a common unknown precision, about 4x fewer labels).",
)
@click.option(
    "--name", "sample_name", default=None, help="Name of this sample round (default round-K)."
)
@click.option(
    "--seed", type=int, required=True, help="Seed of the draws (combined with the round number)."
)
def sample(
    task: Path,
    per_system: int | None,
    systems: tuple[str, ...],
    distribution: str,
    exhaustive_units: int,
    units_from: Path | None,
    adaptive: bool,
    target_width: float | None,
    confidence: float,
    max_per_system: int,
    bound: str,
    width_for: str,
    sample_name: str | None,
    seed: int,
) -> None:
    """Draw a new sample round for TASK; append it to samples.tsv and write to_annotate.tsv.

    to_annotate.tsv lists what still needs a label: each drawn fact not yet judged (once, however
    many systems output it: labels are shared) and each drawn exhaustive unit.  Earlier rounds are
    kept.  Add labels to judgments.tsv, and annotated units to exhaustive_units.tsv/exhaustive.tsv.
    """
    import pandas as pd

    from receval.design import new_sample_round
    from receval.formats.bundle import append_rows
    from receval.formats.tables import read_table, write_table

    # only what a draw needs: who output which fact, the labels and the earlier rounds
    loaded = _load(
        task,
        tables=("judgments", "samples", "exhaustive_units"),
        run_columns=("team",),
    )
    if adaptive and target_width is None:
        raise click.UsageError("--adaptive needs --target-width")
    if not adaptive and per_system is None and exhaustive_units == 0:
        raise click.UsageError(
            "nothing to draw: give --per-system N, --exhaustive-units M or --adaptive"
        )
    if exhaustive_units and units_from is None:
        raise click.UsageError("--exhaustive-units needs --units-from FILE (the candidate units)")
    unknown = sorted(set(systems) - set(loaded.systems))
    if unknown:
        raise click.BadParameter(f"unknown system(s): {', '.join(unknown)}", param_hint="--system")
    candidates = None
    if units_from is not None:
        candidates = read_table(units_from)
        if "unit" not in candidates.columns:
            raise InputError(f"{units_from}:1: missing required column unit")
        if "prob" in candidates.columns:
            candidates["prob"] = pd.to_numeric(candidates["prob"], errors="coerce")
    sizes: int | dict[str, int] = per_system or 0
    if adaptive:
        from receval.planning import adaptive_sample_sizes
        from receval.progress import progress

        todo = len(systems) if systems else len(set(loaded.systems) - set(loaded.samples["system"]))
        with progress(max(todo, 1), "planning", False) as bar:
            plan = adaptive_sample_sizes(
                loaded,
                target_width,
                confidence=confidence,
                systems=list(systems) or None,
                max_n=max_per_system,
                bound=bound,
                metrics=("precision", "recall") if width_for == "both" else (width_for,),
                on_system=lambda _name: bar.update(1),
            )
        sizes = dict(zip(plan["system"], plan["n"], strict=True))
        if not sizes and exhaustive_units == 0:
            click.echo(
                "every system has a sample already: nothing to plan (name systems with --system to plan "
                "more for them)"
            )
            return
        for _, row in plan.iterrows():
            click.echo(
                f"{row['system']}: n = {row['n']} (bound on half-width: precision {row['precision_halfwidth']:.3f}, "
                f"recall {row['recall_halfwidth']:.3f})"
            )
    try:
        drawn = new_sample_round(
            loaded,
            sizes,
            seed=seed,
            distribution=distribution,
            systems=list(systems) or None,
            units=candidates,
            exhaustive_units=exhaustive_units,
            name=sample_name,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if len(drawn.samples):
        append_rows(task, "samples", drawn.samples)
    write_table(task / "to_annotate.tsv", drawn.to_annotate)
    facts = int((drawn.to_annotate["kind"] == "fact").sum())
    units = int((drawn.to_annotate["kind"] == "unit").sum())
    if len(drawn.samples) == 0 and units == 0:
        click.echo(
            f"no new draws; {facts} facts drawn earlier still need a label ({task / 'to_annotate.tsv'})"
        )
        return
    click.echo(
        f"sample {drawn.name}: {len(drawn.samples)} draws from {len(drawn.sizes)} systems; "
        f"{facts} facts and {units} units to annotate in {task / 'to_annotate.tsv'}"
    )


@cli.command()
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--systems",
    type=click.IntRange(2, 10_000),
    default=70,
    show_default=True,
    help="Number of systems.",
)
@click.option(
    "--queries",
    type=click.IntRange(1, 1_000_000),
    default=317,
    show_default=True,
    help="Number of queries.",
)
@click.option(
    "--teams",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Number of teams (default ≈ systems/4).",
)
@click.option(
    "--per-system",
    type=click.IntRange(0, 1_000_000),
    default=150,
    show_default=True,
    help="Precision-sample draws per system in the simulated annotation round.",
)
@click.option(
    "--exhaustive-facts",
    type=click.FloatRange(0, None),
    default=150,
    show_default=True,
    help="About how many true facts the exhaustively annotated documents hold.",
)
@click.option(
    "--exhaustive-units",
    type=click.IntRange(0, None),
    default=None,
    help="Documents to annotate exhaustively (default: enough for --exhaustive-facts).",
)
@click.option(
    "--provenance/--no-provenance",
    default=False,
    show_default=True,
    help="Give every output a provenance (document) column.",
)
@click.option(
    "--annotators",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Annotators per judged fact.",
)
@click.option(
    "--annotator-error",
    type=click.FloatRange(0, 0.5),
    default=0.0,
    show_default=True,
    help="Probability that an annotator flips a label.",
)
@click.option(
    "--distribution",
    type=click.Choice(["uniform", "entity-relation"]),
    default="uniform",
    show_default=True,
    help="Sampling distribution of the simulated precision samples.",
)
@click.option("--name", default=None, help="Task name (default: the folder name).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed (world and annotation).")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists.")
def simulate(
    out: Path,
    systems: int,
    queries: int,
    teams: int | None,
    per_system: int,
    exhaustive_facts: float,
    exhaustive_units: int | None,
    provenance: bool,
    annotators: int,
    annotator_error: float,
    distribution: str,
    name: str | None,
    seed: int,
    overwrite: bool,
) -> None:
    """Write a realistic synthetic TAC-KBP-style task bundle with ground truth (truth.tsv) to OUT.

    Teams of overlapping systems, precision 0.1-0.7 and recall 0.05-0.4, confidence scores that
    correlate with correctness, shared wrong answers, documents holding the true facts (pool
    coverage well below 1), one simulated annotation round and exhaustive units.  The embedded
    default task is `receval simulate data/kbp-sim --seed 2022`.
    """
    from receval.simulate import SimulationConfig, simulate_task

    config = SimulationConfig(
        systems=systems,
        queries=queries,
        teams=teams,
        name=name or out.name,
        per_system=per_system,
        exhaustive_facts=exhaustive_facts,
        exhaustive_units=exhaustive_units,
        provenance=provenance,
        annotators=annotators,
        annotator_error=annotator_error,
        distribution=distribution,
    )
    path = simulate_task(out, config, seed=seed, overwrite=overwrite)
    click.echo(f"wrote {path} ({systems} systems, {queries} queries, seed {seed})")


@cli.group(name="import", cls=ReceGroup)
def import_() -> None:
    """Convert official formats (TAC-KBP Cold Start, TREC) into a task bundle."""


@import_.command(name="tac-kbp")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--queries",
    "queries",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    required=True,
    help="SF query XML (sf-query.xml).",
)
@click.option(
    "--runs",
    "runs",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    multiple=True,
    required=True,
    help="SF run file (repeatable; 2014-2017 column variants).",
)
@click.option(
    "--assessments",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="Assessment file (qrel.txt / *.assessed.fqec).",
)
@click.option(
    "--include-hop1", is_flag=True, help="Also keep hop-1 responses (receval scores hop 0 only)."
)
@click.option("--name", default=None, help="Task name (default: the folder name).")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists.")
def import_tac_kbp_command(
    out: Path,
    queries: Path,
    runs: tuple[Path, ...],
    assessments: Path | None,
    include_hop1: bool,
    name: str | None,
    overwrite: bool,
) -> None:
    """Convert TAC-KBP slot-filling runs and assessments into a bundle at OUT."""
    from receval.formats.bundle import write_bundle
    from receval.formats.tac_kbp import import_tac_kbp

    tables, config = import_tac_kbp(
        queries, list(runs), assessments, include_hop1=include_hop1, name=name or out.name
    )
    write_bundle(out, tables, config, overwrite=overwrite)
    skipped = int(tables["runs"].attrs.get("hop1_rows_skipped", 0))
    if skipped:
        click.echo(
            f"note: {skipped} hop-1 run rows skipped (receval scores hop 0; --include-hop1 keeps them)"
        )
    click.echo(
        f"wrote {out}: {len(tables['queries'])} queries, {tables['runs']['system'].nunique()} runs, "
        f"{len(tables.get('judgments', ()))} assessments"
    )


@import_.command(name="trec")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--qrels",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="TREC qrels (qid 0 doc rel).",
)
@click.option(
    "--runs",
    "runs",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    multiple=True,
    required=True,
    help="TREC run file (qid Q0 doc rank score tag; repeatable).",
)
@click.option(
    "--depth",
    type=click.IntRange(1, None),
    default=None,
    help="Keep the top K documents per query and run.",
)
@click.option("--name", default=None, help="Task name (default: the folder name).")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists.")
@click.option(
    "--format",
    "table_format",
    type=click.Choice(["tsv", "parquet"]),
    default="tsv",
    show_default=True,
    help="Table format of the bundle (Parquet: faster to write and to load).",
)
def import_trec_command(
    out: Path,
    qrels: Path | None,
    runs: tuple[Path, ...],
    depth: int | None,
    name: str | None,
    overwrite: bool,
    table_format: str,
) -> None:
    """Convert TREC runs (and qrels) into a bundle at OUT."""
    from receval.formats.bundle import write_bundle
    from receval.formats.trec import import_trec

    tables, config = import_trec(qrels, list(runs), depth, name=name or out.name)
    write_bundle(out, tables, config, overwrite=overwrite, suffix=f".{table_format}")
    click.echo(
        f"wrote {out}: {len(tables['queries'])} queries, {tables['runs']['system'].nunique()} runs, "
        f"{len(tables.get('judgments', ()))} judgments"
    )


def _curve_options(func):
    """The parameters shared by the curve commands (defaults as in the papers)."""
    options = [
        click.option(
            "--method",
            type=click.Choice(["random", "logstrat", "paula", "adastrat"]),
            required=True,
            help="Curve method.",
        ),
        click.option(
            "--epsilon", type=click.FloatRange(1e-4, 1.0), default=None, help="ε (default 0.03)."
        ),
        click.option(
            "--window", type=click.IntRange(1, None), default=None, help="Δ (default 100)."
        ),
        click.option(
            "--delta", type=click.FloatRange(1e-6, 0.5), default=None, help="δ (default 0.05)."
        ),
        click.option(
            "--beta",
            type=str,
            default=None,
            help="β (default 1.05); 'gamma' for LogStrat's β = γ as in PAULA's table.",
        ),
        click.option(
            "--pmin", type=click.FloatRange(1e-4, 1.0), default=None, help="p_min (default 0.5)."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _curve_params(epsilon, window, delta, beta, pmin, **extra) -> dict:
    params = {"epsilon": epsilon, "window": window, "delta": delta, "pmin": pmin, **extra}
    params = {k: v for k, v in params.items() if v is not None}
    if beta is not None:
        if beta.lower() == "gamma":
            params["beta"] = None
        else:
            try:
                params["beta"] = float(beta)
            except ValueError:
                raise click.BadParameter("a number or 'gamma'", param_hint="--beta") from None
    return params


def _make_method(name: str, params: dict):
    from receval.curves import make_method

    try:
        return make_method(name, **params)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _ranked_system(task, system: str):
    """(ranked list frame with rank, known Labels) for one system of a loaded task."""
    import numpy as np

    from receval.curves import FrameRankedList, Labels

    if system not in task.systems:
        raise click.BadParameter(f"unknown system {system!r}", param_hint="--system")
    rows = task.outputs.loc[
        task.outputs["system"] == system, ["query_id", "answer", "answer_raw", "score", "fact"]
    ]
    ranked = FrameRankedList.from_frame(rows).frame
    labels = task.labels
    value = labels.reindex(ranked["fact"]).to_numpy()
    have = ~np.isnan(value)
    return ranked, Labels(ranked["rank"].to_numpy()[have], value[have])


@cli.group(cls=ReceGroup)
def curve() -> None:
    """Precision curves of a system's confidence-ranked output from few labels.

    plan → annotate to_annotate.tsv → add to judgments.tsv → plan … until the plan is empty →
    estimate.  Labels already in judgments.tsv are reused, whoever collected them.
    """


@curve.command(name="plan")
@click.argument("task", type=click.Path(path_type=Path))
@click.option("--system", required=True, help="The system whose ranked output is evaluated.")
@_curve_options
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the random methods' draws."
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write the batch (default TASK/to_annotate.tsv).",
)
def curve_plan(
    task: Path,
    system: str,
    method: str,
    epsilon,
    window,
    delta,
    beta,
    pmin,
    seed: int,
    out: Path | None,
) -> None:
    """Write the next batch of ranked items to annotate (rank, query_id, answer); header only when done."""
    import pandas as pd

    from receval.formats.tables import write_table

    loaded = _load(task)
    ranked, known = _ranked_system(loaded, system)
    algo = _make_method(method, _curve_params(epsilon, window, delta, beta, pmin, seed=seed))
    need = known.missing(algo.plan(len(ranked), known))
    rows = ranked.iloc[need - 1]
    batch = pd.DataFrame(
        {
            "rank": need,
            "query_id": rows["query_id"].to_numpy(),
            "answer": rows["answer_raw"].to_numpy(),
        }
    )
    target = out or task / "to_annotate.tsv"
    write_table(target, batch)
    if len(batch):
        click.echo(
            f"{len(batch)} items of {system} to annotate ({method}; {len(known)} labels reused) in {target}"
        )
    else:
        click.echo(f"{method} has every label it needs for {system}: run `receval curve estimate`")


@curve.command(name="estimate")
@click.argument("task", type=click.Path(path_type=Path))
@click.option("--system", required=True, help="The system whose ranked output is evaluated.")
@_curve_options
@click.option("--seed", type=int, default=0, show_default=True, help="Seed used when planning.")
@click.option(
    "--true-facts",
    type=click.IntRange(1, None),
    default=None,
    help="Number of correct facts in the universe, for the recall column (default: from truth.tsv).",
)
@click.option("--out", "out", type=click.Path(path_type=Path), required=True, help="CSV to write.")
def curve_estimate(
    task: Path,
    system: str,
    method: str,
    epsilon,
    window,
    delta,
    beta,
    pmin,
    seed: int,
    true_facts: int | None,
    out: Path,
) -> None:
    """Write the precision curve (rank, precision, lower, upper [, recall], queried, kind) to FILE.

    FILE.json beside it records the method, what the bounds are (kind and guarantee), the labels
    used and every flag (e.g. a detected violation of the monotonicity assumption).
    """
    import numpy as np
    import pandas as pd

    from receval.report.writers import write_csv

    loaded = _load(task)
    ranked, known = _ranked_system(loaded, system)
    algo = _make_method(method, _curve_params(epsilon, window, delta, beta, pmin, seed=seed))
    missing = known.missing(algo.plan(len(ranked), known))
    if missing.size:
        raise InputError(
            f"{task}: {method} still needs {missing.size} labels for {system}: run `receval curve plan` and annotate"
        )
    est = algo.estimate(len(ranked), known)
    frame = pd.DataFrame(
        {"rank": est.ranks, "precision": est.precision, "lower": est.lower, "upper": est.upper}
    )
    recall_from = "--true-facts"
    if true_facts is None and loaded.truth is not None:
        true_facts, recall_from = int((loaded.truth["value"] == 1).sum()), "truth.tsv"
    if true_facts is None:
        from receval.scoring import estimated_true_facts

        true_facts, recall_from = (
            estimated_true_facts(loaded),
            "estimated (pool correct / pool coverage)",
        )
    if true_facts:
        frame["recall"] = est.precision * est.ranks / true_facts
    frame["queried"] = np.isin(est.ranks, est.queried).astype(int)
    frame["kind"] = est.kind
    write_csv(out, frame)
    from receval.report.writers import write_json

    write_json(
        out.with_name(out.name + ".json"),
        {
            "system": system,
            "method": method,
            "kind": est.kind,
            "guarantee": est.guarantee,
            "size": est.size,
            "annotations": est.annotations,
            "queried": len(est.queried),
            "flags": list(est.flags),
            "recall": None if not true_facts else {"true_facts": true_facts, "from": recall_from},
            "parameters": _curve_params(epsilon, window, delta, beta, pmin, seed=seed),
        },
    )
    click.echo(
        f"{system}: {method} curve with {len(frame)} knots from {est.annotations} labels; {est.kind}: {est.guarantee}"
    )
    for flag in est.flags:
        _warn(flag)


@curve.command(name="budget")
@_curve_options
@click.option(
    "--size", type=click.IntRange(1, None), required=True, help="N, the number of ranked items."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def curve_budget_command(
    method: str, epsilon, window, delta, beta, pmin, size: int, as_json: bool
) -> None:
    """Annotation plan size of a non-adaptive method for a list of N items, without any labels."""
    import json

    from receval.curves import curve_budget

    params = _curve_params(epsilon, window, delta, beta, pmin)
    try:
        result = curve_budget(method, size, **params)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result))
    else:
        for key, value in result.items():
            click.echo(f"{key:<20} {value}")


@cli.command()
@click.argument("out_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def report(out_dir: Path, quiet: bool) -> None:
    """Rebuild OUT_DIR/report.html from the CSV/JSON that `receval score` wrote (no recomputation)."""
    from receval.report.html import build_report

    path = build_report(out_dir, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {path}")


@cli.command()
@click.argument("task", type=click.Path(path_type=Path))
@click.option(
    "--total",
    "total",
    type=click.IntRange(1, None),
    required=True,
    help="Total new draws to spread evenly over the systems.",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0.5, 0.999),
    default=0.95,
    show_default=True,
    help="Interval level the widths refer to.",
)
@click.option(
    "--bound",
    type=click.Choice(["expected", "paper", "exchangeable"]),
    default="expected",
    show_default=True,
    help="expected: the expected variance (unlabelled facts correct at the estimated rate); paper / "
    "exchangeable: conservative bounds (see `receval sample --help`).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the table as CSV.",
)
def budget(task: Path, total: int, confidence: float, bound: str, out: Path | None) -> None:
    """Expected interval half-widths if TOTAL more draws were spread evenly over the systems.

    Reuses the labels already collected (Chaganty et al. 2017, Theorem 1: empirical terms for the
    labelled samples; for the new draws the expected variance, or a conservative bound).
    """
    from receval.planning import expected_widths
    from receval.report.writers import format_table, write_csv

    loaded = _load(task)
    per_system = total // len(loaded.systems)
    if per_system == 0:
        raise click.BadParameter(
            f"fewer than one draw per system ({len(loaded.systems)} systems)", param_hint="--total"
        )
    table = expected_widths(loaded, per_system, confidence=confidence, bound=bound)
    click.echo(
        format_table(
            table,
            [
                ("system", "system"),
                ("precision_halfwidth", "± precision"),
                ("recall_halfwidth", "± recall"),
            ],
        )
    )
    click.echo(
        f"\n{per_system} more draws per system ({per_system * len(loaded.systems)} in all); median half-width: "
        f"precision {table['precision_halfwidth'].median():.3f}, recall {table['recall_halfwidth'].median():.3f} "
        f"({confidence:.0%}, {bound} variance)"
    )
    if out is not None:
        write_csv(out, table)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="receval")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
