"""The ``receval`` command line: a thin shell over the library.

Every command exits 0 on success and 2 with one line ``error: <file>:<line>: <what is wrong>`` on
bad input (never a traceback).
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import click

from receval import __version__
from receval import options as opts
from receval.errors import BundleError, OptionError


class InputError(click.ClickException):
    """Bad input: printed as one ``error:`` line, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class FilePath(click.Path):
    """click's path type, refusing an empty path (``--out ''`` would name the working
    directory, which a whole-file write then tries to replace)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str | os.PathLike) and not str(value).strip():
            self.fail("an empty path", param, ctx)
        return super().convert(value, param, ctx)


class FiniteRange(click.FloatRange):
    """click's float range, refusing nan and ±inf (which every comparison of the range lets
    through)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


#: Seeds are non-negative integers (numpy's SeedSequence refuses others).
SEED = click.IntRange(min=0)


# click ≥ 8.2 raises this for a group called without a command; older versions print help
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


#: The line printed after Ctrl-C (exit 130): receval writes each file, and each output set, whole.
INTERRUPTED = (
    "interrupted (Ctrl-C): files are written whole or not at all; the previous output set was kept"
)


class RegistryChoice(click.Choice):
    """The names the registry holds when the command runs (``names``: a function of
    :mod:`receval.estimators.registry` or :mod:`receval.options`), so an estimator or interval
    method registered at run time is a choice too."""

    def __init__(self, names: str) -> None:
        self._names = names
        super().__init__(())  # read from the registry when used

    @property
    def choices(self) -> tuple[str, ...]:
        from receval import options
        from receval.estimators import registry

        source = registry if hasattr(registry, self._names) else options
        return tuple(getattr(source, self._names)())

    @choices.setter
    def choices(self, value) -> None:  # click sets it once; the registry is the source
        pass


class RegistryOption(click.Option):
    """An option whose help ends with the registry's descriptions of its choices
    (``registry_help``: a function of :mod:`receval.estimators.registry`), read only when help
    is shown, so start-up imports no estimator."""

    def __init__(self, *args, registry_help: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.registry_help = registry_help

    def get_help_record(self, ctx):
        from receval.estimators import registry

        described = getattr(registry, self.registry_help)()
        self.help = (self.help or "") + described + "."
        try:
            return super().get_help_record(ctx)
        finally:
            self.help = self.help[: -len(described) - 1]


def _interrupted(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is in the exception's chain (cause or context)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class ReceGroup(click.Group):
    """A click group that turns bad-input exceptions into :class:`InputError`.

    Every error, command-line misuse included, is printed as one ``error:`` line (no usage
    block, no traceback) with exit code 2.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NO_ARGS_IS_HELP as exc:
            click.echo(exc.ctx.get_help())
            sys.exit(0)
        except click.UsageError as exc:
            where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
            hint = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            click.echo(f"error: {where}{exc.format_message()}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort as exc:  # Ctrl-C (click turns KeyboardInterrupt into Abort)
            if exc.__cause__ is not None and not _interrupted(exc):
                raise exc.__cause__ from None  # click's Abort for an EOFError: not a Ctrl-C
            click.echo(f"error: {INTERRUPTED}", err=True)
            sys.exit(130)
        except Exception as exc:
            if not _interrupted(exc):
                raise
            # Ctrl-C inside a C extension's import (e.g. scipy's, loaded lazily) surfaces as
            # that import's own error, caused by the KeyboardInterrupt
            click.echo(f"error: {INTERRUPTED}", err=True)
            sys.exit(130)
        sys.exit(code or 0)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BundleError as exc:
            raise InputError(exc.for_cli()) from None
        except (FileExistsError, TimeoutError) as exc:  # a lock another process holds too long
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


#: ``--spark-master``, the same for every command that takes ``--engine``
SPARK_MASTER = click.option(
    "--spark-master",
    default=None,
    help="Spark master URL for --engine spark (default: SPARK_MASTER, spark-defaults.conf, "
    "else local[*]).",
)


@cli.command()
@click.argument("task", type=FilePath(path_type=Path))
@click.option(
    "--engine",
    type=click.Choice(opts.ENGINES),
    default="duckdb",
    show_default=True,
    help="Engine that reads Parquet runs out of core: embedded DuckDB, or Apache Spark "
    "(pip install 'receval[spark]').",
)
@SPARK_MASTER
@click.option(
    "--out-of-core/--in-memory",
    "out_of_core",
    default=None,
    help="Check the Parquet runs with SQL aggregates in --engine, never holding an output row "
    "in memory (the same summary; no exhaustive units, truth or judge tables, equivalence "
    "classes or non-uniform sample designs), or load the task in memory.  Default: out of core "
    "from 10M Parquet run rows when the bundle allows it.",
)
def validate(task: Path, engine: str, spark_master: str | None, out_of_core: bool | None) -> None:
    """Load and check the bundle TASK; print a summary (systems, queries, outputs, labels, conflicts)."""
    from receval.operations import validate as validate_task

    chosen = _engine(engine, spark_master)
    try:
        result = validate_task(task, engine=chosen, out_of_core=out_of_core)
    except ValueError as exc:  # what the engine path cannot check: one line
        raise InputError(str(exc)) from None
    finally:
        if chosen is not None:
            chosen.close()
    for line in result.lines():
        click.echo(line)


def _engine(name: str, master: str | None):
    """The aggregation engine of ``--engine``: None for DuckDB (the task's own embedded engine,
    one per task); a missing pyspark is a usage error."""
    from receval.engine import connect

    if name == "duckdb":
        return None
    try:
        return connect(name, master=master)
    except ImportError as exc:
        raise click.UsageError(str(exc)) from None


def _warn(message: str) -> None:
    from receval.report.terminal import fit_text, terminal_width

    click.echo(fit_text(message, terminal_width(), "warning: "), err=True)


def _anonymisation_key(
    task: Path, out: Path, key: str | None, key_file: Path | None, quiet: bool
) -> tuple[str, str]:
    """The pseudonym key of ``score --anonymise`` and where it came from (for run.json)."""
    from receval.leaderboard import DEFAULT_KEY_FILE, anonymisation_key

    if key is not None and key_file is not None:
        raise click.UsageError("give --anonymise-key or --anonymise-key-file, not both")
    if key is not None:
        if not key:
            raise click.UsageError("--anonymise-key must not be empty")
        return key, "--anonymise-key"
    path = key_file if key_file is not None else Path(task) / DEFAULT_KEY_FILE
    if path.resolve().is_relative_to(Path(out).resolve()):
        raise click.UsageError(
            f"--anonymise-key-file {path} is inside the output directory {out}, which is published: "
            "keep the key elsewhere"
        )
    try:
        value, created = anonymisation_key(path)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(
            f"{path}: cannot use it as the anonymisation key file ({reason}); choose another "
            "with --anonymise-key-file"
        ) from None
    if created and not quiet:
        click.echo(
            f"anonymise: new random key written to {path}: keep it private, and keep it (same file "
            "or --anonymise-key-file) for the same pseudonyms in later runs",
            err=True,
        )
    return value, f"random key in {path}"


def _print_leaderboard(board, best_per_team: bool = False, run=None) -> None:
    """The leaderboard table, fitted to the terminal; ``run`` (the run record) names the
    metrics (``P@10`` for a cutoff)."""
    from receval.report.terminal import format_leaderboard, metric_heads, terminal_width

    if best_per_team and "best_of_team" in board:
        board = board[board["best_of_team"]]
    heads = metric_heads(run)
    click.echo(format_leaderboard(board, width=terminal_width(), heads=heads))


@cli.command()
@click.argument("task", type=FilePath(path_type=Path))
@click.option(
    "--out", "out", type=FilePath(path_type=Path), required=True, help="Output directory."
)
@click.option(
    "--estimator",
    type=RegistryChoice("estimator_names"),
    default="joint",
    show_default=True,
    cls=RegistryOption,
    registry_help="estimator_help",
)
@click.option(
    "--bootstrap",
    "bootstrap",
    type=click.IntRange(opts.MIN_BOOTSTRAP, opts.MAX_BOOTSTRAP),
    default=1000,
    show_default=True,
    help="Bootstrap replicates B.",
)
@click.option(
    "--confidence",
    type=FiniteRange(*opts.CONFIDENCE_RANGE),
    default=0.95,
    show_default=True,
    help="Two-sided interval level.",
)
@click.option(
    "--method",
    type=click.Choice(opts.INTERVAL_METHODS),
    default="percentile",
    show_default=True,
    help="Bootstrap interval method (every one expanded for small samples: read at the "
    "level of a t interval on the draws the number rests on).",
)
@click.option(
    "--intervals",
    type=RegistryChoice("interval_choices"),
    default="auto",
    show_default=True,
    cls=RegistryOption,
    registry_help="interval_method_help",
    help="Interval method: auto (bootstrap, or anytime when samples.tsv has rounds drawn for some "
    "systems only: a top-up after looking); ",
)
@click.option(
    "--weighting",
    type=click.Choice(opts.WEIGHTINGS),
    default="size",
    show_default=True,
    help="Joint-precision mixture weights: size (w ∝ n_j) or overlap (the paper's heuristic).",
)
@click.option(
    "--target",
    "target",
    type=click.Choice(opts.TARGETS),
    default="micro",
    show_default=True,
    help="micro: every fact weighs the same; macro: every answered query weighs the same (precision).",
)
@click.option(
    "--seed", type=SEED, default=0, show_default=True, help="Seed of the bootstrap replicates."
)
@click.option(
    "--rank-by",
    type=click.Choice(opts.RANK_KEYS),
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
    "--annotator-resampling",
    is_flag=True,
    help="Also resample each fact's annotator votes (with replacement) in every bootstrap "
    "replicate and merge them again, so disagreement widens the intervals (by default intervals "
    "are conditional on the merged labels).",
)
@click.option(
    "--target-recall",
    type=FiniteRange(*opts.TARGET_RECALL_RANGE),
    default=None,
    help="Also estimate each system's precision at this true recall (curve, or Dimm's extrapolation).",
)
@click.option(
    "--prevalence",
    type=FiniteRange(1e-9, 0.99),
    default=None,
    help="Prevalence ρ for Dimm's model (default: estimated correct facts / [universe] size).",
)
@click.option(
    "--tiers",
    "tier_correction",
    type=click.Choice(opts.TIER_CORRECTIONS),
    default="stepdown",
    show_default=True,
    help="Pairwise tests behind tiers and rank sets: max-t step-down bootstrap (family-wise "
    "error <= 1 - confidence), or marginal tests with Holm / Benjamini-Hochberg (FDR only).",
)
@click.option(
    "--anonymise",
    is_flag=True,
    help="Also write leaderboard_anonymised.csv (team pseudonyms from a secret key: by default a "
    "random key kept in TASK/.receval/anonymise.key, created on first use and reused, so the "
    "pseudonyms stay the same across runs).",
)
@click.option(
    "--anonymise-key",
    default=None,
    help="Secret key for the pseudonyms instead of the key file (anyone who knows or guesses it "
    "can confirm the real names).",
)
@click.option(
    "--anonymise-key-file",
    type=FilePath(path_type=Path, dir_okay=False),
    default=None,
    help="File holding the random pseudonym key (created if missing; default "
    "TASK/.receval/anonymise.key); never inside --out.",
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
    type=FilePath(path_type=Path, exists=True, dir_okay=False),
    help="Reuse the replicates saved by an earlier run (--save-replicates).",
)
@click.option(
    "--unjudged",
    type=click.Choice(opts.UNJUDGED_RULES),
    default=None,
    help="Official estimator: count unjudged responses wrong (trec_eval) or ignore them (TAC "
    "CS-Score). Default: the bundle's [official] unjudged (import trec: wrong; tac-kbp: ignore).",
)
@click.option(
    "--average",
    type=click.Choice(opts.AVERAGES),
    default=None,
    help="Official estimator: micro (pooled counts, CS-Score) or macro (mean over the queries a "
    "system answered that have judgments, trec_eval). Default: macro with --target macro, else "
    "the bundle's [official] average (import trec: macro; tac-kbp: micro).",
)
@click.option(
    "--cutoff",
    type=click.IntRange(1, None),
    default=None,
    help="Official estimator: score each system's top K responses per query (trec_eval order: "
    "score as float32 descending, then id descending); P@K divides by K.",
)
@click.option(
    "--allow-pending",
    is_flag=True,
    help="Score although some sample draws have no label yet (they are left out and assumed "
    "missing at random; by default scoring refuses, naming how many are pending).",
)
@click.option(
    "--precision-form",
    type=click.Choice(opts.PRECISION_FORMS),
    default="auto",
    show_default=True,
    help="Joint precision: unbiased sum, self-normalised ratio (always in [0, 1]), auto (the sum "
    "unless its estimate ± 1.96 SE leaves [0, 1], then the ratio), or per system the form with "
    "the smaller estimated variance.",
)
@click.option(
    "--engine",
    type=click.Choice(opts.ENGINES),
    default="duckdb",
    show_default=True,
    help="Engine of the heavy aggregations (official census, leave-one-team-out): embedded "
    "DuckDB (a task of at most 100M run rows is counted in process: the same numbers), or "
    "Apache Spark (pip install 'receval[spark]').",
)
@SPARK_MASTER
@click.option(
    "--out-of-core/--in-memory",
    "out_of_core",
    default=None,
    help="Read the Parquet runs with SQL aggregates in --engine, never holding an output row "
    "in memory (the same output set; estimators joint and simple, bootstrap or anytime "
    "intervals, exhaustive units, equivalence classes, truth.tsv, entity-relation rounds), or "
    "load the task in memory.  Default: out of core from 10M "
    "Parquet run rows when the options allow it (else a warning says why not).",
)
@click.option(
    "--no-report",
    is_flag=True,
    help="Write the CSV/JSON set without report.html (build it later with `receval report DIR`).",
)
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def score(
    task: Path,
    out: Path,
    anonymise: bool,
    anonymise_key: str | None,
    anonymise_key_file: Path | None,
    best_per_team: bool,
    save_replicates: bool,
    replicates_path: Path | None,
    engine: str,
    spark_master: str | None,
    out_of_core: bool | None,
    no_report: bool,
    quiet: bool,
    **choices,
) -> None:
    """Estimate precision, recall and F1 of every system of TASK with intervals; write DIR/.

    Writes the whole output folder as one set: leaderboard.csv, pool.csv, conflicts.csv,
    per_query.csv, annotation.csv, pooling_bias.csv, agreement.csv, run.json, report.html (not
    with --no-report), and truth_check.csv, curves/, leaderboard_anonymised.csv, replicates.npz
    when they apply.  Every
    interval is a bootstrap interval over all random stages (each system's sample, the exhaustive
    units) with replicates shared by all systems.
    """
    from receval.api import score as score_task
    from receval.formats.output_set import check_output_folder
    from receval.progress import progress

    check_output_folder(out)
    key = key_source = None
    if not anonymise and (anonymise_key is not None or anonymise_key_file is not None):
        raise click.UsageError("--anonymise-key and --anonymise-key-file need --anonymise")
    if anonymise:
        key, key_source = _anonymisation_key(task, out, anonymise_key, anonymise_key_file, quiet)
    options = _score_options(choices)
    with progress(5, "scoring", quiet) as bar:
        result = _library_call(
            score_task, task, options, replicates=replicates_path, anonymise_key=key,
            anonymise_source=key_source, engine=_engine(engine, spark_master),
            out_of_core=out_of_core,
            on_step=lambda: bar.update(1),
        )  # fmt: skip
        result.write(out, save_replicates=save_replicates, report=not no_report, quiet=quiet)
        bar.update(1)
    if not quiet:
        for w in result.warnings:
            _warn(w)
        _print_leaderboard(result.leaderboard, best_per_team, result.run)
        _print_closing(result.leaderboard, out, no_report)


def _print_closing(board, out: Path, no_report: bool) -> None:
    """The interval method and where the results are, each wrapped to the terminal."""
    from receval.report.terminal import fit_text, terminal_width

    width = terminal_width()
    interval = board["interval"].iloc[0] if len(board) else ""
    where = "no report: `receval report`" if no_report else f"report: {out / 'report.html'}"
    click.echo("\n" + fit_text(str(interval), width, "intervals: "))
    click.echo(fit_text(f"{out}/ ({where})", width, "results in "))


def _score_options(choices: dict):
    """:class:`~receval.scoring.ScoreOptions` from the command's options (the official-only
    options that were not given take the bundle's defaults)."""
    from receval.scoring import ScoreOptions

    choices = dict(choices)
    choices["tiers"] = choices.pop("tier_correction")
    for name in ("unjudged", "average", "cutoff"):
        if choices.get(name) is None:
            choices.pop(name, None)
    return ScoreOptions(**choices)


def _library_call(func, *args, **kwargs):
    """Call the library; an invalid option (ValueError) becomes a usage error (exit 2)."""
    try:
        return func(*args, **kwargs)
    except BundleError:
        raise
    except OptionError as exc:  # options named as this command's flags
        raise click.UsageError(exc.for_cli()) from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


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

    from receval.api import extrapolate as extrapolate_api
    from receval.extrapolation import ExtrapolationRefused

    try:
        result = extrapolate_api(
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
@click.argument("task", type=FilePath(path_type=Path))
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
    type=click.Choice(opts.SAMPLE_DISTRIBUTIONS),
    default="uniform",
    show_default=True,
    help="Sampling distribution over each system's distinct facts.",
)
@click.option(
    "--by-judge",
    is_flag=True,
    help="Draw where the automatic judge (judge.tsv) is unsure: strata are the levels of the "
    "best judge, weighted sqrt(p(1-p)) with p each level's share correct in the labels so far "
    "(Neyman allocation for --estimator ppi), 30% uniform so every fact keeps a floor "
    "(design judge-strata:<judge>:<weights>, recorded in samples.tsv, so every estimator "
    "stays unbiased).  With --adaptive the sizes are planned for this design and for "
    "--estimator ppi (the judge's explained share, estimated conservatively from the labels).",
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
    type=FilePath(path_type=Path, exists=True, dir_okay=False),
    help="Table of candidate units (column 'unit', optional 'prob') to draw exhaustive units from.",
)
@click.option(
    "--adaptive",
    is_flag=True,
    help="Choose the sample sizes of the unsampled (or --system) systems jointly, one common size, so "
    "every interval half-width is at most --target-width.",
)
@click.option(
    "--target-width",
    type=FiniteRange(0.001, 0.5),
    default=None,
    help="With --adaptive: the target half-width of the precision and recall intervals.",
)
@click.option(
    "--confidence",
    type=FiniteRange(*opts.CONFIDENCE_RANGE),
    default=0.95,
    show_default=True,
    help="With --adaptive: interval level the width refers to; with --until-decided: the level "
    "of the comparisons.",
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
    type=click.Choice(opts.WIDTH_FOR),
    default="both",
    show_default=True,
    help="With --adaptive: which intervals must meet --target-width.",
)
@click.option(
    "--bound",
    type=click.Choice(opts.PLANNING_BOUNDS),
    default="expected",
    show_default=True,
    help="With --adaptive: the variance for unlabelled facts (expected: unlabelled facts correct "
    "at the pool's estimated rate, so realised widths land near the target; paper: f <= 1, a bound "
    "valid for any labels; exchangeable: worst case over a common unknown precision).",
)
@click.option(
    "--until-decided",
    is_flag=True,
    help="Draw the next --batch labels where the anytime comparisons (score --intervals anytime) "
    "are still open; draw nothing and say 'decided' once they are (or --budget is spent).",
)
@click.option("--batch", type=int, default=None, help="With --until-decided: draws in this round.")
@click.option(
    "--rank-by",
    type=click.Choice(["f1", "precision", "recall", "pooled_recall"]),
    default="f1",
    show_default=True,
    help="With --until-decided: the ranking whose comparisons must be decided.",
)
@click.option(
    "--budget",
    type=int,
    default=None,
    help="With --until-decided: stop once samples.tsv holds this many draws.",
)
@click.option(
    "--target",
    type=click.Choice(opts.TARGETS),
    default="micro",
    show_default=True,
    help="With --until-decided: the average the comparisons are about, as `score --target` "
    "(micro: over facts; macro: the mean over queries).",
)
@click.option(
    "--estimator",
    type=RegistryChoice("estimator_names"),
    default="joint",
    show_default=True,
    help="With --until-decided: the estimator the comparisons are scored with, as `score "
    "--estimator E --intervals anytime` (an estimator that uses the judge, such as ppi, decides "
    "with judge.tsv too, by the betting tests of --intervals anytime; the draws stay uniform "
    "within each system: drawing by the judge's grades was measured to leave more pairs open).",
)
@click.option(
    "--top",
    type=int,
    default=None,
    help="With --until-decided: decide only which systems are the best K (their order inside "
    "and outside the K left open); stops 'decided' once the top K are separated from the rest.",
)
@click.option(
    "--intervals",
    "loop_intervals",
    type=click.Choice(["anytime", "anytime-asymptotic"]),
    default="anytime",
    show_default=True,
    help="With --until-decided: whose paired tests decide: anytime (betting sequences, valid at "
    "any number of draws) or anytime-asymptotic (valid as the draws grow: i.i.d. draws, finite "
    "variance; see score --intervals).",
)
@click.option(
    "--name", "sample_name", default=None, help="Name of this sample round (default round-K)."
)
@click.option(
    "--engine",
    "engine",
    type=click.Choice(opts.ENGINES),
    default=None,
    help="Draw the round in this engine (SQL over the runs, Parquet read on disk: memory flat "
    "in the number of output rows); the draws are keyed by hashes of (seed, round, system, "
    "fact), the same on every engine and file layout and in memory.",
)
@click.option(
    "--out-of-core/--in-memory",
    "out_of_core",
    default=None,
    help="Draw in --engine (default duckdb) out of core, or load the task in memory.  Default: "
    "out of core from 10M Parquet run rows (as score) when the design allows it.",
)
@SPARK_MASTER
@click.option(
    "--seed", type=SEED, required=True, help="Seed of the draws (combined with the round number)."
)
def sample(
    task: Path,
    per_system: int | None,
    systems: tuple[str, ...],
    distribution: str,
    by_judge: bool,
    exhaustive_units: int,
    units_from: Path | None,
    adaptive: bool,
    target_width: float | None,
    confidence: float,
    max_per_system: int,
    bound: str,
    width_for: str,
    until_decided: bool,
    batch: int | None,
    rank_by: str,
    budget: int | None,
    target: str,
    estimator: str,
    top: int | None,
    loop_intervals: str,
    sample_name: str | None,
    engine: str | None,
    out_of_core: bool | None,
    spark_master: str | None,
    seed: int,
) -> None:
    """Draw a new sample round for TASK; append it to samples.tsv and write to_annotate.tsv.

    to_annotate.tsv lists what still needs a label: each drawn fact not yet judged (once, however
    many systems output it: labels are shared) and each drawn exhaustive unit.  Earlier rounds are
    kept.  Add labels to judgments.tsv, and annotated units to exhaustive_units.tsv/exhaustive.tsv.
    The round's rows are in a random order drawn from --seed, marked order = random in
    samples.tsv, so --intervals anytime counts every draw for every system it could have hit.
    """
    from receval.api import sample as draw_round
    from receval.bundle import ROUND_LOCK_WAIT, Bundle
    from receval.formats.bundle import read_candidate_units

    _check_round_kind(until_decided, adaptive)
    if spark_master:  # the sampling paths connect to Spark by name: it reads SPARK_MASTER
        os.environ["SPARK_MASTER"] = spark_master
    if until_decided:
        choice = {"rank_by": rank_by, "confidence": confidence, "budget": budget,
                  "distribution": distribution, "target": target, "top": top,
                  "intervals": loop_intervals, "estimator": estimator}  # fmt: skip
        chosen = _sample_engine(task, engine, out_of_core)
        explicit = engine is not None or bool(out_of_core)
        with Bundle(task, ROUND_LOCK_WAIT).lock():  # one round at a time: each its own name
            _until_decided(task, batch, seed, choice, chosen, explicit)
        return
    _check_sample_flags(adaptive, target_width, per_system, exhaustive_units, units_from)
    chosen = _sample_engine(task, engine, out_of_core)
    if chosen is not None:
        explicit = engine is not None or bool(out_of_core)
        plan = {"per_system": per_system, "systems": systems, "sample_name": sample_name,
                "seed": seed, "distribution": distribution, "units_from": units_from,
                "exhaustive_units": exhaustive_units, "by_judge": by_judge,
                "adaptive": adaptive and [target_width, confidence, list(systems),
                                          max_per_system, bound, width_for]}  # fmt: skip
        if _engine_round(task, chosen, plan, explicit=explicit):
            return
        _warn("these options are drawn in memory only: loading the whole task (--in-memory)")
    with Bundle(task, ROUND_LOCK_WAIT).lock():
        loaded, distribution = _sample_task(task, by_judge, distribution, adaptive)
        sizes: int | dict[str, int] = per_system or 0
        if adaptive:
            plan = [target_width, confidence, list(systems), max_per_system, bound, width_for]
            sizes = _adaptive_sizes(loaded, *plan, distribution=distribution, judge=by_judge)
            if not sizes and exhaustive_units == 0:
                return
        units = read_candidate_units(units_from) if units_from is not None else None
        drawn = _library_call(
            draw_round, loaded, sizes, seed=seed, distribution=distribution,
            systems=list(systems) or None, units=units, exhaustive_units=exhaustive_units,
            name=sample_name,
        )  # fmt: skip
        _record_round(task, drawn)


#: options only --adaptive reads
_ADAPTIVE_ONLY = (("target_width", "--target-width"), ("max_per_system", "--max-per-system"),
                  ("bound", "--bound"), ("width_for", "--width-for"))  # fmt: skip
#: `sample` options that size or name a round themselves, which --until-decided does
_SIZING = (("per_system", "--per-system"), ("systems", "--system"), ("adaptive", "--adaptive"),
           *_ADAPTIVE_ONLY, ("by_judge", "--by-judge"), ("exhaustive_units", "--exhaustive-units"),
           ("units_from", "--units-from"), ("sample_name", "--name"))  # fmt: skip
#: options only --until-decided reads
_UNTIL_ONLY = (("batch", "--batch"), ("rank_by", "--rank-by"), ("budget", "--budget"),
               ("target", "--target"), ("top", "--top"), ("estimator", "--estimator"),
               ("loop_intervals", "--intervals"))  # fmt: skip


def _check_round_kind(until_decided: bool, adaptive: bool) -> None:
    """A usage error for an option given on the command line that the chosen kind of round
    would ignore (silently drawing something else than asked is worse than stopping)."""
    ctx = click.get_current_context()
    given = {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    }

    def first(options) -> str | None:
        return next((flag for name, flag in options if name in given), None)

    if until_decided:
        if clash := first(_SIZING):
            raise click.UsageError(
                f"{clash} does not apply with --until-decided (it sizes and names its own "
                "rounds from the open comparisons)"
            )
        return
    if unused := first(_UNTIL_ONLY):
        raise click.UsageError(f"{unused} applies only with --until-decided")
    if adaptive:
        return
    if unused := first(_ADAPTIVE_ONLY):
        raise click.UsageError(f"{unused} applies only with --adaptive")
    if "confidence" in given:
        raise click.UsageError("--confidence applies only with --adaptive or --until-decided")


def _check_sample_flags(adaptive, target_width, per_system, exhaustive_units, units_from) -> None:
    """The flag combinations `sample` cannot work with (usage errors)."""
    if adaptive and target_width is None:
        raise click.UsageError("--adaptive needs --target-width")
    if not adaptive and per_system is None and exhaustive_units == 0:
        raise click.UsageError(
            "nothing to draw: give --per-system N, --exhaustive-units M or --adaptive"
        )
    if exhaustive_units and units_from is None:
        raise click.UsageError("--exhaustive-units needs --units-from FILE (the candidate units)")


def _sample_engine(task: Path, engine: str | None, out_of_core: bool | None) -> str | None:
    """The engine ``sample`` draws in, or None to draw in memory: ``--engine`` or
    ``--out-of-core`` say so; by default a large Parquet bundle, as ``score``
    (:func:`receval.engine.sample_path.default_engine`)."""
    from receval.engine.sample_path import default_engine

    if out_of_core is False and engine is not None:
        raise click.UsageError("--engine draws out of core: not with --in-memory")
    if engine is not None:
        return engine
    return default_engine(task, out_of_core)


def _engine_round(task, engine, plan: dict, *, explicit: bool) -> bool:
    """``sample`` in an engine: a round drawn by SQL (receval.engine.sampled), ``plan`` its
    per_system, systems, name, seed, distribution, by_judge, exhaustive_units, units_from and
    adaptive (the planning options, or False).  False when the engine path cannot plan this
    --adaptive round and ``explicit`` is not set (the caller draws in memory); a usage error
    when it is."""
    from receval.bundle import ROUND_LOCK_WAIT, Bundle
    from receval.engine.sampled import sample_round
    from receval.formats.bundle import read_candidate_units

    bundle = Bundle(task, lock_timeout=ROUND_LOCK_WAIT)
    sizes = plan["per_system"] or 0
    with bundle.lock():
        if plan["adaptive"]:
            sizes = _engine_adaptive(bundle, engine, plan, explicit)
            if sizes is None:
                return False
            if not sizes and plan["exhaustive_units"] == 0:
                return True
        units_from = plan["units_from"]
        units = read_candidate_units(units_from) if units_from is not None else None
        drawn = _library_call(
            sample_round, bundle, sizes, seed=plan["seed"],
            systems=list(plan["systems"]) or None, name=plan["sample_name"], engine=engine,
            distribution=plan["distribution"], by_judge=plan["by_judge"], units=units,
            exhaustive_units=plan["exhaustive_units"],
        )  # fmt: skip
        _record_round(task, drawn)
    return True


def _engine_adaptive(bundle, engine: str, plan: dict, explicit: bool) -> dict[str, int] | None:
    """``--adaptive``'s sizes planned from the engine's aggregates
    (:func:`receval.engine.adaptive.adaptive_sizes`), or None when the engine path cannot plan
    this bundle or design and ``explicit`` is not set (a usage error when it is)."""
    from receval.engine.adaptive import adaptive_sizes, unsupported
    from receval.engine.sampled_data import read_small_tables

    small = _library_call(read_small_tables, bundle)
    problem = unsupported(small, plan["distribution"], plan["by_judge"])
    if problem:
        if not explicit:
            return None
        raise click.UsageError(
            f"the engine path (--engine, --out-of-core) does not plan --adaptive with {problem}"
        )
    width, confidence, systems, max_n, bound, width_for = plan["adaptive"]
    planner = partial(adaptive_sizes, engine=engine, distribution=plan["distribution"],
                      by_judge=plan["by_judge"])  # fmt: skip
    return _print_plan(
        _plan_with_progress(planner, bundle, width, confidence, systems, max_n, bound, width_for,
                            len(systems) or None),
        bound,
    )  # fmt: skip


def _sample_task(task: Path, by_judge: bool, distribution: str, adaptive: bool = False):
    """(the task with only what a draw needs, the distribution): who output which fact, the
    labels and the earlier rounds (and the judge's scores with --by-judge; with --adaptive the
    units' facts too, whose θ̂ the recall target's variance includes; the judge's too when
    the bundle has one: rounds drawn --by-judge are read at its levels)."""
    from receval.bundle import Bundle

    judged = by_judge or Bundle(task).table("judge") is not None
    tables = ("judgments", "samples", "exhaustive_units", *(("judge",) if judged else ()),
              *(("exhaustive",) if adaptive else ()))  # fmt: skip
    loaded = _load(task, tables=tables, run_columns=("team",))
    if not by_judge:
        return loaded, distribution
    if loaded.judge is None:
        raise InputError(
            f"{Path(task) / 'judge.tsv'}: --by-judge needs the judge's scores (judge.tsv with "
            "query_id, answer, judge_score)"
        )
    from receval.estimators.judge_calibration import judge_strata_design

    return loaded, judge_strata_design(loaded)  # Neyman over the judge's levels


def _record_round(task: Path, drawn) -> None:
    """Append the drawn round to the bundle and say what is to annotate."""
    from receval.bundle import ROUND_LOCK_WAIT, Bundle

    path = Bundle(task, ROUND_LOCK_WAIT).record_round(drawn)
    facts = int((drawn.to_annotate["kind"] == "fact").sum())
    units_n = int((drawn.to_annotate["kind"] == "unit").sum())
    if len(drawn.samples) == 0 and units_n == 0:
        click.echo(f"no new draws; {facts} facts drawn earlier still need a label ({path})")
        return
    click.echo(
        f"sample {drawn.name}: {len(drawn.samples)} draws from {len(drawn.sizes)} systems; "
        f"{facts} facts and {units_n} units to annotate in {path}"
    )


def _until_decided(task, batch, seed, choice: dict, engine=None, explicit=False) -> None:
    """``sample --until-decided``: the next batch, or one line saying it is decided; in
    ``engine`` (:mod:`receval.engine.until_decided`) when given and it can score the looks
    (else in memory with a warning, or a usage error when ``explicit``)."""
    from receval.api import sample as draw_round
    from receval.bundle import ROUND_LOCK_WAIT, Bundle

    if batch is None:
        raise click.UsageError("--until-decided needs --batch B")
    drawn = _engine_looks(task, batch, seed, choice, engine, explicit) if engine else None
    if drawn is None:
        drawn = _library_call(
            draw_round, _load(task), seed=seed, until_decided=True, batch=batch, **choice
        )
    if drawn.decided:
        click.echo(drawn.message)
        return
    path = Bundle(task, ROUND_LOCK_WAIT).record_round(drawn)
    facts = int((drawn.to_annotate["kind"] == "fact").sum())
    click.echo(f"{drawn.message}; {facts} facts to annotate in {path}")


def _engine_looks(task, batch, seed, choice: dict, engine: str, explicit: bool):
    """The ``--until-decided`` round drawn on the engine path, or None when it cannot score
    these options or tables and ``explicit`` is not set (warned: drawn in memory)."""
    from receval.bundle import Bundle
    from receval.engine.until_decided import until_decided_round

    try:
        return until_decided_round(Bundle(task), batch, seed=seed, engine=engine, **choice)
    except BundleError:
        raise
    except OptionError as exc:
        raise click.UsageError(exc.for_cli()) from None
    except ValueError as exc:
        declined = "engine path" in str(exc) or "reads Parquet runs" in str(exc)
        if not declined or explicit:
            raise click.UsageError(str(exc)) from None
        _warn(f"{exc}: loading the whole task (--in-memory)")
        return None


def _adaptive_sizes(
    loaded, width, confidence, systems, max_n, bound, width_for, distribution="uniform", judge=False
) -> dict[str, int]:
    """Plan the adaptive sample sizes (progress bar, one line per planned system)."""
    from receval.api import plan_sample

    todo = len(systems) if systems else len(set(loaded.systems) - set(loaded.samples["system"]))
    planner = partial(plan_sample, distribution=distribution, judge=judge)
    plan = _plan_with_progress(
        planner, loaded, width, confidence, systems, max_n, bound, width_for, todo
    )
    return _print_plan(plan, bound)


def _plan_with_progress(planner, task, width, confidence, systems, max_n, bound, width_for, todo):
    """``planner(task, width, ...)`` (:func:`receval.api.plan_sample` or the engine's) behind a
    progress bar of ``todo`` systems (None: unknown before planning)."""
    from receval.progress import progress

    with progress(max(todo or 1, 1), "planning", False) as bar:
        return _library_call(
            planner, task, width, confidence=confidence, systems=systems or None, max_n=max_n,
            bound=bound, width_for=width_for, on_system=lambda _name: bar.update(1),
        )  # fmt: skip


def _print_plan(plan, bound: str) -> dict[str, int]:
    """One line per planned system (or that nothing is to plan); the sizes."""
    if plan.empty:
        click.echo(
            "every system has a sample already: nothing to plan (name systems with --system to plan "
            "more for them)"
        )
    for _, row in plan.iterrows():
        click.echo(
            f"{row['system']}: n = {row['n']} ({bound} half-width: precision "
            f"{row['precision_halfwidth']:.3f}, recall {row['recall_halfwidth']:.3f})"
            + (f"; {row['note']}" if row.get("note") else "")
        )
    return dict(zip(plan["system"], plan["n"], strict=True))


@cli.command()
@click.argument("out", type=FilePath(path_type=Path))
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
    type=FiniteRange(0, None),
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
    type=FiniteRange(0, 0.5, max_open=True),
    default=0.0,
    show_default=True,
    help="Probability that an annotator flips a label.",
)
@click.option(
    "--distribution",
    type=click.Choice(opts.SAMPLE_DISTRIBUTIONS),
    default="uniform",
    show_default=True,
    help="Sampling distribution of the simulated precision samples.",
)
@click.option("--name", default=None, help="Task name (default: the folder name).")
@click.option(
    "--seed", type=SEED, default=0, show_default=True, help="Seed (world and annotation)."
)
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
    coverage well below 1), one simulated annotation round (written in a random order marked
    order = random, as `receval sample` writes its rounds) and exhaustive units.  The embedded
    default task is `receval simulate data/kbp-sim --seed 2022`.
    """
    from receval.api import simulate as simulate_api

    path = simulate_api(
        out,
        seed=seed,
        overwrite=overwrite,
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
    click.echo(f"wrote {path} ({systems} systems, {queries} queries, seed {seed})")


#: ``import tac-kbp|trec --judge FILE [--judge-scale LO,HI]`` (two options, two commands)
def _import_judge_option(func):
    func = click.option(
        "--judge-scale",
        "judge_scale",
        type=JUDGE_SCALE,
        default=None,
        help="The judges' grade scale LO,HI (e.g. 0,4 for UMBRELA), written to task.toml "
        "[judge] scale: --estimator ppi calibrates the grades on the labels (default: scores "
        "are probabilities in [0, 1]).",
    )(func)
    return click.option(
        "--judge",
        "judge_file",
        type=FilePath(path_type=Path, exists=True, dir_okay=False),
        multiple=True,
        help="An automatic judge's scores, written as the bundle's judge table (for --estimator "
        "ppi): a table with query_id, answer, judge_score [, judge], or 'query_id iteration "
        "answer score' lines (TREC qrels).  Repeatable: one file per judge (named by the file's "
        "stem unless it has a judge column).",
    )(func)


class _JudgeScale(click.ParamType):
    """``LO,HI``: two numbers with LO < HI."""

    name = "LO,HI"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        parts = str(value).split(",")
        try:
            lo, hi = (float(p) for p in parts) if len(parts) == 2 else (0.0, 0.0)
        except ValueError:
            lo, hi = 0.0, 0.0
        if not lo < hi:
            self.fail(f"{value!r} is not LO,HI with LO < HI (e.g. 0,4)", param, ctx)
        return (lo, hi)


JUDGE_SCALE = _JudgeScale()


@cli.group(name="import", cls=ReceGroup)
def import_() -> None:
    """Convert official formats (TAC-KBP Cold Start, TREC) into a task bundle."""


@import_.command(name="tac-kbp")
@click.argument("out", type=FilePath(path_type=Path))
@click.option(
    "--queries",
    "queries",
    type=FilePath(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="SF query XML (sf-query.xml) or LDC query XML (ldc-query.xml: entry points expanded "
    "into SF queries as CS-Score -expand names them); default: the queries the runs and "
    "assessments name.",
)
@click.option(
    "--runs",
    "runs",
    type=FilePath(path_type=Path, exists=True, dir_okay=False),
    multiple=True,
    required=True,
    help="SF run file (repeatable; 2014-2017 column variants).",
)
@click.option(
    "--assessments",
    type=FilePath(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="Assessment file (qrel.txt / *.assessed.fqec).",
)
@click.option(
    "--include-hop1", is_flag=True, help="Also keep hop-1 responses (receval scores hop 0 only)."
)
@click.option("--name", default=None, help="Task name (default: the folder name).")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists.")
@_import_judge_option
def import_tac_kbp_command(
    out: Path,
    queries: Path | None,
    runs: tuple[Path, ...],
    assessments: Path | None,
    include_hop1: bool,
    name: str | None,
    overwrite: bool,
    judge_file: tuple[Path, ...],
    judge_scale: tuple[float, float] | None,
) -> None:
    """Convert TAC-KBP slot-filling runs and assessments into a bundle at OUT."""
    from receval.operations import import_tac_kbp
    from receval.progress import progress

    with progress(2, "importing (files read, then the bundle)", False) as bar:
        done = import_tac_kbp(
            out,
            list(runs),
            queries=queries,
            assessments=assessments,
            include_hop1=include_hop1,
            name=name,
            overwrite=overwrite,
            judge=list(judge_file) or None,
            judge_scale=judge_scale,
            on_step=lambda: bar.update(1),
        )
    for note in done.notes:
        click.echo(f"note: {note}")
    click.echo(
        f"wrote {out}: {done.queries} queries, {done.runs} runs, {done.judgments} assessments"
    )


@import_.command(name="trec")
@click.argument("out", type=FilePath(path_type=Path))
@click.option(
    "--qrels",
    type=FilePath(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="TREC qrels (qid 0 doc rel).",
)
@click.option(
    "--runs",
    "runs",
    type=FilePath(path_type=Path, exists=True, dir_okay=False),
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
@_import_judge_option
def import_trec_command(
    out: Path,
    qrels: Path | None,
    runs: tuple[Path, ...],
    depth: int | None,
    name: str | None,
    overwrite: bool,
    table_format: str,
    judge_file: tuple[Path, ...],
    judge_scale: tuple[float, float] | None,
) -> None:
    """Convert TREC runs (and qrels) into a bundle at OUT."""
    from receval.operations import import_trec
    from receval.progress import progress

    files = len(runs) + (qrels is not None)
    with progress(files + 1, "importing (files read, then the bundle)", False) as bar:
        done = import_trec(
            out,
            list(runs),
            qrels=qrels,
            depth=depth,
            name=name,
            overwrite=overwrite,
            table_format=table_format,
            judge=list(judge_file) or None,
            judge_scale=judge_scale,
            on_file=lambda _: bar.update(1),
        )
    click.echo(f"wrote {out}: {done.queries} queries, {done.runs} runs, {done.judgments} judgments")


def _curve_options(func):
    """The parameters shared by the curve commands (defaults as in the papers)."""
    options = [
        click.option(
            "--method",
            type=click.Choice(opts.CURVE_METHODS),
            required=True,
            help="Curve method (stratband, tailband: bands valid at every rank, no monotonicity "
            "assumed, at most PAULA's labels; tailband is never wider than the uniform-sample "
            "baseline, stratband is the tighter one just beyond the head).",
        ),
        click.option(
            "--epsilon", type=FiniteRange(1e-4, 1.0), default=None, help="ε (default 0.03)."
        ),
        click.option(
            "--window", type=click.IntRange(1, None), default=None, help="Δ (default 100)."
        ),
        click.option(
            "--delta", type=FiniteRange(1e-6, 0.5), default=None, help="δ (default 0.05)."
        ),
        click.option(
            "--beta",
            type=str,
            default=None,
            help="β (default 1.05); 'gamma' for LogStrat's β = γ as in PAULA's table.",
        ),
        click.option(
            "--pmin", type=FiniteRange(1e-4, 1.0), default=None, help="p_min (default 0.5)."
        ),
        click.option(
            "--eta",
            type=FiniteRange(0.0, 0.5, max_open=True),
            default=None,
            help="AdaStrat, TailBand, StratBand: declared probability that an annotation is "
            "flipped (default 0: the band is about the labels given).",
        ),
        click.option(
            "--estimator",
            type=click.Choice(opts.CURVE_ESTIMATORS),
            default=None,
            help="AdaStrat: interval behind each queried point (default hoeffding, the paper's); "
            "StratBand: hoeffding (default) or bernstein.",
        ),
        click.option(
            "--r-tilde",
            "r_tilde",
            type=click.IntRange(1, None),
            default=None,
            help="r̃: monotonicity assumed from this rank (default ⌈(Δ+2)/ε⌉).",
        ),
        click.option(
            "--m",
            "m",
            type=click.IntRange(1, None),
            default=None,
            help="AdaStrat: weak-monotonicity distance m (default from ε and r̃).",
        ),
        click.option(
            "--check-labels",
            type=click.IntRange(0, None),
            default=None,
            help="AdaStrat: labels spent checking weak monotonicity (default ⌈s₁/2⌉); its band "
            "is claimed only when the check works at the band's resolution.",
        ),
        click.option(
            "--judge",
            is_flag=True,
            default=None,
            help="TailBand: stratify the tail by the task's automatic judge scores (judge.tsv) "
            "when a small uniform pilot sample of the tail says that narrows the band (the pilot's "
            "labels count in the plan).",
        ),
        click.option(
            "--labels-per-stratum",
            type=click.IntRange(2, None),
            default=None,
            help="StratBand: labels drawn per stratum (default Δ).",
        ),
        click.option(
            "--halfwidth",
            type=FiniteRange(0.0, 1.0, min_open=True, max_open=True),
            default=None,
            help="StratBand: size the strata samples for this band half-width instead.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _curve_params(method: str | None = None, beta: str | None = None, **options) -> dict:
    """The method's parameters from the command line (None: the method's default)."""
    params = {k: v for k, v in options.items() if v is not None}
    if beta is not None:
        if beta.lower() == "gamma":
            if method not in (None, "logstrat"):
                raise click.BadParameter("'gamma' is LogStrat's setting", param_hint="--beta")
            params["beta"] = None
        else:
            try:
                params["beta"] = float(beta)
            except ValueError:
                raise click.BadParameter("a number or 'gamma'", param_hint="--beta") from None
    return params


@cli.group(cls=ReceGroup)
def curve() -> None:
    """Precision curves of a system's confidence-ranked output from few labels.

    plan → annotate TASK/curve_to_annotate.tsv → add to judgments.tsv → plan … until the plan is
    empty → estimate.  Labels already in judgments.tsv are reused, whoever collected them.
    """


#: ``--engine`` of the curve commands: which engine ranks a large Parquet run
CURVE_ENGINE = click.option(
    "--engine",
    type=click.Choice(opts.ENGINES),
    default="duckdb",
    show_default=True,
    help="Engine that ranks the system's run when it is a large Parquet file (from 2M rows, or "
    "in a bundle of 10M Parquet run rows): embedded DuckDB, or Apache Spark reading the run "
    "itself (pip install 'receval[spark]').",
)


def _curve_engine(name: str, master: str | None) -> None:
    """Refuse ``--engine spark`` before any work when pyspark is missing (a usage error) or
    the standalone master does not answer (one ``error:`` line); Spark itself starts only
    when a run is ranked."""
    if name != "spark":
        return
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise click.UsageError(
            "--engine spark needs pyspark and a Java runtime: pip install 'receval[spark]'"
        ) from None
    from receval.engine.base import check_master

    given = master or os.environ.get("SPARK_MASTER")
    if given:
        check_master(given)


@curve.command(name="plan")
@click.argument("task", type=FilePath(path_type=Path))
@click.option("--system", required=True, help="The system whose ranked output is evaluated.")
@_curve_options
@click.option(
    "--seed",
    type=SEED,
    default=None,
    help="Seed of the random methods' draws (default: the seed recorded for this system and "
    "method in TASK/curve_plan.json, else a fresh random seed, printed and recorded there).",
)
@click.option(
    "--out",
    "out",
    type=FilePath(path_type=Path, dir_okay=False),
    default=None,
    help="The curve batch file (default TASK/curve_to_annotate.tsv); rows still unlabelled "
    "in it are kept, a file of another kind is refused.",
)
@CURVE_ENGINE
@SPARK_MASTER
def curve_plan(
    task: Path,
    system: str,
    method: str,
    seed: int | None,
    out: Path | None,
    engine: str,
    spark_master: str | None,
    **options,
) -> None:
    """Write the next batch of ranked items to annotate (rank, query_id, answer, system, method).

    The batch goes to its own file, never to the to_annotate.tsv of `receval sample`.  Pending
    rows already in the file (for any system) are kept; labelled ones are dropped.
    """
    from receval.operations import curve_plan as plan

    params = _curve_params(method=method, **options)
    _curve_engine(engine, spark_master)
    done = _library_call(
        plan, task, system, method, seed=seed, out=out, engine=engine,
        spark_master=spark_master, **params,
    )  # fmt: skip
    if done.seed_note is not None:
        click.echo(done.seed_note)
    kept = f"; {done.kept} pending rows kept" if done.kept else ""
    if len(done.batch):
        click.echo(
            f"{len(done.batch)} items of {system} to annotate ({method}; {done.reused} labels "
            f"reused) in {done.path}{kept}"
        )
    else:
        click.echo(
            f"{method} has every label it needs for {system}: run `receval curve estimate`{kept}"
        )
    if done.duplicate_rows:
        from receval.scoring import duplicate_rows_warning

        _warn(duplicate_rows_warning(done.duplicate_rows))


@curve.command(name="estimate")
@click.argument("task", type=FilePath(path_type=Path))
@click.option("--system", required=True, help="The system whose ranked output is evaluated.")
@_curve_options
@click.option(
    "--seed",
    type=SEED,
    default=None,
    help="Seed used when planning (default: the one recorded in TASK/curve_plan.json, else 0).",
)
@click.option(
    "--true-facts",
    type=click.IntRange(1, None),
    default=None,
    help="Number of correct facts in the universe, for the recall column (default: from "
    "truth.tsv, else estimated with an interval).",
)
@click.option(
    "--out",
    "out",
    type=FilePath(path_type=Path, dir_okay=False),
    required=True,
    help="CSV to write.",
)
@CURVE_ENGINE
@SPARK_MASTER
def curve_estimate(
    task: Path,
    system: str,
    method: str,
    seed: int | None,
    true_facts: int | None,
    out: Path,
    engine: str,
    spark_master: str | None,
    **options,
) -> None:
    """Write the precision curve to FILE: rank, precision, lower, upper[, recall], queried, kind,
    then recall_lower, recall_upper, yield (correct items in the top k), yield_lower, yield_upper.

    FILE.json beside it records the method, what the bounds are (kind and guarantee), the labels
    used and every flag (e.g. a detected violation of the monotonicity assumption).
    """
    from receval.operations import curve_estimate as estimate
    from receval.operations import curve_source

    params = _curve_params(method=method, **options)
    _curve_engine(engine, spark_master)
    source = curve_source(task, system, engine=engine, spark_master=spark_master)
    if system not in source.systems:
        raise click.BadParameter(f"unknown system {system!r}", param_hint="--system")
    _warn_no_recall(source, true_facts)
    try:
        curve = estimate(
            source, system, method, seed=seed, true_facts=true_facts, out=out, **params
        )
    except ValueError as exc:
        raise InputError(f"{task}: {exc}") from None
    est = curve.estimate
    designed = curve.record.get("designed_halfwidth")
    widths = ""
    if designed is not None:
        realised = curve.record["realised_max_halfwidth"]
        widths = f"; largest half-width {realised:.4g} (designed at most {designed:.4g})"
    click.echo(
        f"{system}: {method} curve with {len(curve.frame)} knots from {est.annotations} labels; "
        f"{est.kind}: {est.guarantee}{widths}"
    )
    for flag in est.flags:
        _warn(flag)
    if curve.record.get("duplicate_rows"):
        from receval.scoring import duplicate_rows_warning

        _warn(duplicate_rows_warning(curve.record["duplicate_rows"]))


def _warn_no_recall(source, true_facts: int | None) -> None:
    """Say why a curve of an engine-ranked run has no recall columns."""
    from receval.curves.sources import CurveBundle

    if true_facts is None and isinstance(source, CurveBundle) and source.true_facts() is None:
        _warn(
            "no recall columns: estimating the number of correct facts reads every run of "
            "the task; give --true-facts or a truth table"
        )


#: Human names of the keys of `curve budget` (the JSON keeps the keys).
_BUDGET_NAMES = {
    "method": "method",
    "size": "items in the ranked list",
    "annotations": "labels to collect",
    "kind": "that count is",
    "queries": "points of the curve estimated",
    "head": "top items labelled one by one",
    "strata": "strata sampled beyond them",
    "labels_per_stratum": "labels drawn per stratum",
    "samples_per_point": "label draws per estimated point",
    "samples": "label draws from the whole list",
    "reach_samples": "more label draws up to N/10",
    "expected_draws": "expected label draws (with repeats)",
    "expected_distinct": "expected distinct items to label",
    "halfwidth": "half-width of the precision band at any rank (at most)",
    "knot_halfwidth": "half-width at the strata boundaries (at most)",
    "epsilon": "grid step ε (points 1+ε apart)",
    "window": "window Δ (labels per local estimate)",
    "r_tilde": "grid starts at rank r̃",
    "delta": "failure probability δ",
    "beta": "per-point approximation factor β",
    "pmin": "precision assumed at least p_min",
    "eta": "label noise η",
    "ell": "first grid exponent ℓ",
    "L": "last grid exponent L",
    "m": "weak-monotonicity distance m",
    "gamma": "PAULA's factor γ",
    "approximation": "overall approximation factor",
    "alpha": "relative accuracy α",
    "guarantee": "guarantee",
}


def _human(value) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


@curve.command(name="budget")
@_curve_options
@click.option(
    "--size", type=click.IntRange(1, None), required=True, help="N, the number of ranked items."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (machine keys).")
def curve_budget_command(method: str, size: int, as_json: bool, **options) -> None:
    """Labels a method needs for a list of N items, before any label (AdaStrat: worst case)."""
    import json

    from receval.curves import curve_budget

    params = _curve_params(method=method, **options)
    params.pop("estimator", None)
    params.pop("judge", None)  # the same number of labels
    try:
        result = curve_budget(method, size, **params)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result))
        return
    width = max(len(_BUDGET_NAMES.get(k, k)) for k in result)
    for key, value in result.items():
        click.echo(f"{_BUDGET_NAMES.get(key, key):<{width}}  {_human(value)}")


@cli.command(name="leaderboard")
@click.argument("out_dir", type=FilePath(path_type=Path, exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the rows as one JSON array.")
@click.option("--best-per-team", is_flag=True, help="Only each team's best run.")
def leaderboard_command(out_dir: Path, as_json: bool, best_per_team: bool) -> None:
    """Print the leaderboard that `receval score` wrote to OUT_DIR (a table, or JSON)."""
    from receval.formats.output_set import check_output_set
    from receval.report.writers import leaderboard_records, read_leaderboard

    check_output_set(out_dir)
    board = read_leaderboard(out_dir / "leaderboard.csv")
    if as_json:
        import json

        click.echo(json.dumps(leaderboard_records(board, best_per_team), ensure_ascii=False))
    else:
        _print_leaderboard(board, best_per_team, _recorded_run(out_dir))


def _recorded_run(out_dir: Path):
    """DIR/run.json as a :class:`~receval.run_record.RunRecord` (None when absent or unreadable:
    the table is printed anyway)."""
    import json

    from receval.run_record import RunRecord

    try:
        return RunRecord.from_json(json.loads((out_dir / "run.json").read_text("utf-8")))
    except (OSError, ValueError, TypeError):
        return None


@cli.command()
@click.argument("out_dir", type=FilePath(path_type=Path, exists=True, file_okay=False))
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def report(out_dir: Path, quiet: bool) -> None:
    """Rebuild OUT_DIR/report.html from the CSV/JSON that `receval score` wrote (no recomputation)."""
    from receval.formats.output_set import check_output_set
    from receval.report.html import build_report

    check_output_set(out_dir)
    path = build_report(out_dir, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {path}")


@cli.command()
@click.argument("task", type=FilePath(path_type=Path))
@click.option(
    "--total",
    "total",
    type=click.IntRange(1, None),
    required=True,
    help="Total new draws to spread evenly over the systems.",
)
@click.option(
    "--confidence",
    type=FiniteRange(*opts.CONFIDENCE_RANGE),
    default=0.95,
    show_default=True,
    help="Interval level the widths refer to.",
)
@click.option(
    "--bound",
    type=click.Choice(opts.BUDGET_BOUNDS),
    default="expected",
    show_default=True,
    help="expected: the expected variance (unlabelled facts correct at the estimated rate); paper / "
    "exchangeable: conservative bounds (see `receval sample --help`).",
)
@click.option(
    "--estimator",
    type=RegistryChoice("planned_estimators"),
    default="joint",
    show_default=True,
    help="ppi: the intervals of `score --estimator ppi` (the draws' variance times 1 - rho^2, "
    "rho a conservative lower bound on the judge's correlation with the labels; needs judge.tsv).",
)
@click.option(
    "--by-judge",
    is_flag=True,
    help="Plan the new draws with `sample --by-judge`'s design (judge-strata).",
)
@click.option(
    "--out",
    "out",
    type=FilePath(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the table as CSV.",
)
def budget(
    task: Path,
    total: int,
    confidence: float,
    bound: str,
    estimator: str,
    by_judge: bool,
    out: Path | None,
) -> None:
    """Expected interval half-widths if TOTAL more draws were spread evenly over the systems.

    Reuses the labels already collected (Chaganty et al. 2017, Theorem 1: empirical terms for the
    labelled samples; for the new draws the expected variance, or a conservative bound).
    """
    from receval.operations import budget as budget_widths
    from receval.report.writers import format_table, write_csv

    try:
        table = budget_widths(
            task, total, confidence=confidence, bound=bound, estimator=estimator, by_judge=by_judge
        )
    except BundleError:
        raise
    except ValueError as exc:
        raise click.BadParameter(str(exc).split(" gives ", 1)[-1], param_hint="--total") from None
    per_system = table.attrs["per_system"]
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
        f"\n{per_system} more draws per system ({per_system * len(table)} in all); median half-width: "
        f"precision {table['precision_halfwidth'].median():.3f}, recall {table['recall_halfwidth'].median():.3f} "
        f"({confidence:.0%}, {bound} variance)"
    )
    if table.attrs.get("uses_judge"):  # an estimator that uses the judge (ppi)
        click.echo(
            f"ppi: the draws' variance times {table.attrs['judge_factor']:.3f}, the share the "
            "judge is expected to leave (1 - rho^2 at a 90% lower bound on rho; an approximation)"
        )
    if out is not None:
        write_csv(out, table)


@cli.group(cls=ReceGroup)
def judgments() -> None:
    """Manage the bundle's labels (judgments.tsv)."""


@judgments.command(name="add")
@click.argument("task", type=FilePath(path_type=Path, exists=True, file_okay=False))
@click.argument(
    "files", nargs=-1, required=True, type=FilePath(path_type=Path, exists=True, dir_okay=False)
)
@click.option("--annotator", default=None, help="Annotator of files without an annotator column.")
@click.option(
    "--replace",
    is_flag=True,
    help="Let a new vote replace the same annotator's different vote on the same fact.",
)
def judgments_add(
    task: Path, files: tuple[Path, ...], annotator: str | None, replace: bool
) -> None:
    """Merge filled-in label files into TASK/judgments.tsv.

    FILES are to_annotate.tsv-like tables (TSV/CSV) with a label and an annotator column, or
    Label Studio JSON exports. Labels are checked against the bundle's vocabulary; one vote per
    annotator and fact; disagreements between annotators are kept and reported; rows without a
    label stay in to_annotate.tsv. Safe to run for several annotators at once (a lock).
    """
    from receval.bundle import Bundle
    from receval.judgments import ADD_LOCK_WAIT, ADD_STEPS
    from receval.progress import progress

    with progress(ADD_STEPS, "adding judgments", False) as bar:
        result = Bundle(task, ADD_LOCK_WAIT).add_judgments(
            list(files), annotator=annotator, replace=replace, on_step=bar.update
        )
    click.echo(
        f"added {len(result.added)} votes from {len(files)} file(s) to {task / 'judgments.tsv'}"
        f"; {result.duplicates} duplicate(s) skipped"
        + (f"; {result.replaced} vote(s) replaced" if result.replaced else "")
    )
    if result.unlabelled:
        click.echo(f"{result.unlabelled} row(s) without a label: still pending")
    fresh = result.new_disagreements
    if len(fresh):
        click.echo(f"annotators disagree on {len(fresh)} fact(s) this call added or changed:")
        for _, row in fresh.head(20).iterrows():
            click.echo(f"  {row['query_id']}\t{row['answer']}\t{row['votes']}")
        if len(fresh) > 20:
            click.echo(f"  ... ({len(fresh) - 20} more; see conflicts.csv of score)")
    earlier = len(result.disagreements) - len(fresh)
    if earlier:
        click.echo(
            f"{earlier} earlier disagreement(s) unchanged by this call "
            "(conflicts.csv of `receval score` lists them)"
        )
    click.echo(f"{result.pending} fact(s) still to annotate in {task / 'to_annotate.tsv'}")
    for note in result.notes:
        _warn(note)


@cli.group(name="export", cls=ReceGroup)
def export() -> None:
    """Export items to annotation tools."""


@export.command(name="label-studio")
@click.argument("task", type=FilePath(path_type=Path, exists=True, file_okay=False))
@click.argument("out", type=FilePath(path_type=Path, dir_okay=False))
def export_label_studio(task: Path, out: Path) -> None:
    """Write TASK's pending facts as Label Studio tasks (OUT.json) and a labelling config (OUT.xml).

    Import OUT.json into a Label Studio project whose labelling interface is OUT.xml; export the
    annotations as JSON and merge them with `receval judgments add TASK export.json`.
    """
    from receval.operations import export_label_studio as export_tasks
    from receval.progress import progress

    with progress(3, "exporting (load, tasks, files)", False) as bar:
        done = export_tasks(task, out, on_step=lambda: bar.update(1))
    click.echo(
        f"wrote {done.tasks} Label Studio tasks to {out} and the labelling config to {done.config_file}"
    )


def main() -> None:
    """Console-script entry point.

    After Ctrl-C (exit 130) the process ends at once, without the interpreter's finalisation:
    a native library's worker threads (the engine's) may still be running then, and finalising
    around them can crash the process instead of exiting with 130.
    """
    try:
        cli(prog_name="receval")
    except SystemExit as exc:
        if exc.code == 130:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
