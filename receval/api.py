"""The public Python API: score a task, draw samples, simulate, extrapolate.

Everything the command line does is a call to one of these functions; the CLI only parses its
arguments and prints.  Options are checked up front (``ValueError`` naming the option), bad input
data raises :class:`~receval.errors.BundleError`.

Example
-------
>>> import receval
>>> task = receval.load_task("data/kbp-sim")  # doctest: +SKIP
>>> result = receval.score(task, bootstrap=200, seed=1)  # doctest: +SKIP
>>> result.leaderboard[["system", "precision", "recall", "f1", "rank"]].head()  # doctest: +SKIP
>>> result.write("reports/kbp-sim")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from receval.options import (
    ENGINES,
    check_choice,
    check_round_draws,
    check_score_options,
    check_seed,
    resolve_seed,
)
from receval.run_record import JudgeAuditBlock, RunRecord, run_record

if TYPE_CHECKING:
    import pandas as pd

    from receval.bundle import Bundle
    from receval.design import SampleRound
    from receval.estimators.bootstrap import Replicates
    from receval.scoring import ScoreOptions
    from receval.task import Task


@dataclass(frozen=True)
class ScoreResult:
    """Everything a score run estimated, ready to inspect or :meth:`write`.

    Attributes
    ----------
    leaderboard : pandas.DataFrame
        One row per system in rank order (columns of ``leaderboard.csv``).
    pool : pandas.DataFrame
        Pool coverage θ̂, estimated correct facts and counts (``pool.csv``).
    conflicts : pandas.DataFrame
        Every annotator disagreement and how it was decided (``conflicts.csv``).
    per_query, annotation, pooling_bias, agreement : pandas.DataFrame
        Diagnostics: per-query breakdown, annotation spend, leave-one-team-out pooling bias,
        inter-annotator agreement (Krippendorff's α) per sample round.
    truth_check : pandas.DataFrame or None
        Estimates against ``truth.tsv`` where the bundle has one.
    curves : Mapping[str, pandas.DataFrame]
        Per-system precision curves (with a target recall).
    run : RunRecord
        The run record written as ``run.json``.
    anonymised : pandas.DataFrame or None
        The leaderboard with pseudonyms (when an anonymisation key was given).
    replicates : Replicates or None
        The bootstrap resampling counts (``replicates.npz`` when written).
    """

    leaderboard: pd.DataFrame
    pool: pd.DataFrame
    conflicts: pd.DataFrame
    per_query: pd.DataFrame
    annotation: pd.DataFrame
    pooling_bias: pd.DataFrame
    agreement: pd.DataFrame
    truth_check: pd.DataFrame | None
    run: RunRecord
    curves: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    anonymised: pd.DataFrame | None = None
    replicates: Replicates | None = None
    #: the judge audit (``judge.csv``, :mod:`receval.judge_audit`) when the bundle has a judge
    judge_audit: pd.DataFrame | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        """Caveats of the run (also in ``run.json``)."""
        return self.run.warnings

    def system(self, name: str) -> pd.Series:
        """One system's leaderboard row (indexed by column), e.g. ``result.system("A")["f1"]``.

        ``leaderboard`` stays a plain frame in rank order (``leaderboard.csv``); this is the
        lookup by name (``KeyError`` naming the systems when ``name`` is not one of them).
        """
        board = self.leaderboard
        rows = board.index[board["system"].astype(str) == str(name)]
        if not len(rows):
            shown = ", ".join(map(str, board["system"].head(5)))
            more = f", ... ({len(board)} systems)" if len(board) > 5 else ""
            raise KeyError(f"no system {name!r} in the leaderboard (systems: {shown}{more})")
        return board.loc[rows[0]]

    def __repr__(self) -> str:
        """A few lines: the run, the leading systems, where the tables are (no frames)."""
        run, board = self.run, self.leaderboard
        options = run.options
        if run.bootstrap is not None:
            how = f"B={run.bootstrap.B}, seed={run.bootstrap.seed}"
        else:
            how = "census, no interval"
        lines = [
            f"ScoreResult(task {run.task!r}, estimator {options.estimator!r}, "
            f"{len(board)} systems, {how})"
        ]
        key = options.rank_by or "f1"
        if len(board) and key in board.columns:
            top = ", ".join(
                f"{s} {v:.3f}"
                for s, v in zip(board["system"].head(3), board[key].head(3), strict=True)
            )
            lines.append(f"  top by {key}: {top}")
        tables = ["leaderboard", "pool", "per_query", "annotation", "pooling_bias"]
        if self.curves:
            tables.append(f"curves ({len(self.curves)})")
        lines.append(f"  tables: {', '.join('.' + t for t in tables)}; .system(name) for one row")
        if run.warnings:
            lines.append(f"  {len(run.warnings)} warning(s): see .warnings")
        return "\n".join(lines)

    def write(
        self,
        out: Path | str,
        *,
        save_replicates: bool = False,
        report: bool = True,
        quiet: bool = True,
    ) -> Path:
        """Write the whole output set to the folder ``out`` as one unit.

        Parameters
        ----------
        out : path
            The output folder.  Missing, empty, or written by an earlier receval run (replaced
            whole); anything else is refused with :class:`~receval.errors.BundleError`.
        save_replicates : bool
            Also write ``replicates.npz`` (reuse with ``score(..., replicates=path)``).
        report : bool
            Also build ``report.html`` from the written files.
        quiet : bool
            No progress bar while the report's figures are drawn.

        Returns
        -------
        Path
            ``out``.  An interrupted write leaves the previous set (or nothing), never a mix.
        """
        from receval.formats.output_set import output_set

        out = Path(out)
        with output_set(out) as folder:
            run = self._write_files(folder, save_replicates)
            _write_json(folder / "run.json", run.to_json())
            if report:
                from receval.report.html import build_report

                build_report(folder, quiet=quiet)
        return out

    def _write_files(self, folder: Path, save_replicates: bool) -> RunRecord:
        from receval.report.writers import curve_file_stem, write_csv

        tables = {
            "leaderboard.csv": self.leaderboard,
            "pool.csv": self.pool,
            "conflicts.csv": self.conflicts,
            "per_query.csv": self.per_query,
            "annotation.csv": self.annotation,
            "pooling_bias.csv": self.pooling_bias,
            "agreement.csv": self.agreement,
            "truth_check.csv": self.truth_check,
            "leaderboard_anonymised.csv": self.anonymised,
            "judge.csv": self.judge_audit,
        }
        for name, frame in tables.items():
            if frame is not None:
                write_csv(folder / name, frame)
        for system, curve in self.curves.items():
            write_csv(folder / "curves" / f"{curve_file_stem(system)}.csv", curve)
        if save_replicates and self.replicates is not None:
            with open(folder / "replicates.npz", "wb") as fh:
                self.replicates.save(fh)
            return self.run.replace(replicates_file="replicates.npz")
        return self.run


def _write_json(path: Path, data: dict[str, Any]) -> None:
    from receval.report.writers import write_json

    write_json(path, data)


def _as_task(task: Task | Bundle | Path | str, run_columns: tuple[str, ...] | None = None) -> Task:
    from receval.task import Task

    return task if isinstance(task, Task) else _bundle(task).load(run_columns=run_columns)


def _bundle(task: Bundle | Path | str) -> Bundle:
    """``task`` as a :class:`~receval.bundle.Bundle` (a bundle folder's path, or one)."""
    from receval.bundle import Bundle

    return task if isinstance(task, Bundle) else Bundle(task)


def _as_source(task: Task | Bundle | Path | str) -> Task | Path | str:
    """A loaded task as it is, a :class:`~receval.bundle.Bundle` as its folder."""
    from receval.bundle import Bundle

    return task.root if isinstance(task, Bundle) else task


def _check_systems(task: Task, systems: list[str] | None) -> None:
    unknown = sorted(set(systems or ()) - set(task.systems))
    if unknown:
        raise ValueError(f"unknown system(s): {', '.join(unknown)}")


def _load_replicates(task: Task, options: Any, replicates: Any) -> Replicates | None:
    if replicates is None:
        return None
    from receval.estimators.bootstrap import Replicates
    from receval.estimators.sample_data import build_sample_data
    from receval.scoring import bootstrap_stages

    if isinstance(replicates, Replicates):
        return replicates
    build = getattr(task, "sample_data", None)  # the engine path's view builds its own
    data = build(options.target) if build else build_sample_data(task, options.target)
    stages = bootstrap_stages(data, options.cluster_queries)
    return Replicates.load(Path(replicates), stages)


def score(
    task: Task | Bundle | Path | str,
    options: ScoreOptions | None = None,
    *,
    replicates: Replicates | Path | str | None = None,
    anonymise_key: str | None = None,
    anonymise_source: str | None = None,
    engine: Any = "duckdb",
    on_step: Callable[[], None] | None = None,
    out_of_core: bool | None = None,
    **fields: Any,
) -> ScoreResult:
    """Estimate precision, recall and F1 of every system with shared bootstrap intervals.

    Parameters
    ----------
    task : Task, Bundle or path
        A loaded task (:func:`load_task`, :meth:`Task.from_frames`), or a bundle (its folder,
        or a :class:`~receval.bundle.Bundle`).
    options : ScoreOptions, optional
        Every option at once (:class:`receval.scoring.ScoreOptions`); keywords below override
        its fields (``score(task, opts, seed=2)``).  Checked once, before any work.
    estimator : str
        A registered estimator (:mod:`receval.estimators.registry`):
        ``joint``: importance-reweighted precision and pooled recall over every system's sample,
        true recall = pool coverage × pooled recall (Chaganty et al. 2017); ``simple``: each
        system's own sample; ``official``: TAC's closed-world census (no interval); ``ppi``:
        prediction-powered with the judge's scores (judge.tsv); any other registered name
        (:func:`receval.estimators.registry.estimator_help` lists them all).
    bootstrap : int
        Replicates B (50–100,000), shared by all systems so ranks and differences are paired.
    confidence : float
        Two-sided interval level in [0.5, 0.999].
    method : {'percentile', 'basic', 'BCa'}
        Bootstrap interval method.
    intervals : str
        The interval method (:mod:`receval.estimators.intervals`): ``auto`` (default: the
        bootstrap, or ``anytime`` when samples.tsv has rounds drawn for only some systems, a
        top-up after looking; :mod:`receval.estimators.looking`), ``bootstrap`` (the shared
        bootstrap with ``method``) or another registered one.
    weighting : {'size', 'overlap'}
        Joint-precision mixture weights (w ∝ n_j, or the paper's overlap heuristic).
    target : {'micro', 'macro'}
        Every fact weighs the same, or every answered query (precision).
    seed : int, None or numpy.random.Generator
        Seed of the bootstrap replicates: an integer; None for fresh entropy; a Generator to draw
        one from (numpy/scipy style).  The integer used is recorded (``result.run.bootstrap
        .seed``, ``run.json``): ``seed=<it>`` repeats the run.
    rank_by : {'f1', 'recall', 'precision', 'pooled_recall', 'precision_at_target'}
        The ranking metric.
    target_recall : float, optional
        Also estimate precision at this true recall (curve, else Dimm's extrapolation).
    prevalence : float, optional
        ρ for Dimm's model (default: estimated correct facts / ``[universe] size``).
    tiers : {'stepdown', 'holm', 'bh'}
        The pairwise tests behind tiers and rank confidence sets: the max-t step-down bootstrap
        (Romano & Wolf; family-wise error ≤ 1 − confidence), or marginal tests with Holm or
        Benjamini–Hochberg correction.
    allow_pending : bool
        Score although some sample draws have no label yet (by default this is refused: the
        unlabelled draws bias the estimates).
    precision_form : {'auto', 'unbiased', 'ratio', 'min-variance'}
        Joint precision: the unbiased sum, the self-normalised ratio (always in [0, 1]), auto
        (the sum unless its estimate ± 1.96 SE leaves [0, 1]) or per system the smaller-variance
        form.
    cluster_queries : bool
        Also resample queries as clusters.
    annotator_resampling : bool
        Also resample each fact's annotator votes (with replacement) in every replicate and merge
        them again, so disagreement widens the intervals; by default every interval is
        conditional on the merged labels (:mod:`receval.estimators.annotators`).
    unjudged : {'wrong', 'ignore'}, optional
        Official estimator: unjudged responses count wrong (trec_eval) or are ignored (TAC
        CS-Score); default: the bundle's ``[official] unjudged``.
    average : {'micro', 'macro'}, optional
        Official estimator: pooled counts (CS-Score) or the mean over queries (trec_eval);
        default: ``target`` when it is macro, else the bundle's ``[official] average``
        (``import trec``: macro), else micro.
    cutoff : int, optional
        Official estimator: score each system's top K responses per query (P@K divides by K).
    replicates : Replicates or path, optional
        Reuse the resampling counts of an earlier run (``replicates.npz``).
    anonymise_key : str, optional
        Also compute the leaderboard with keyed team pseudonyms (``leaderboard_anonymised.csv``).
    anonymise_source : str, optional
        Where ``anonymise_key`` came from (e.g. ``'--anonymise-key'`` or the key file), recorded
        in ``run.json``'s ``anonymise`` block; never the key itself.
    engine : {'duckdb', 'spark'}
        Engine of the heavy aggregations (the leave-one-team-out diagnostic): embedded DuckDB
        (a fact-matched task of at most 100M run rows is counted in process instead, the same
        numbers: :mod:`receval.official.coded`), or Apache Spark (``pip install
        'receval[spark]'``; master from ``SPARK_MASTER``).
    on_step : callable, optional
        Called after each of the four steps (load, estimate, diagnostics, record), e.g. to
        advance a progress bar.
    out_of_core : bool, optional
        The engine path (:mod:`receval.engine.score`): the bundle's Parquet runs read by SQL
        aggregates in ``engine``, no output row in memory, the same output set.  None (default):
        taken for a bundle path whose Parquet runs hold at least 10⁷ rows when the options are
        ones it scores; True: always (ValueError naming what it cannot score); False: never.

    Returns
    -------
    ScoreResult
        Leaderboard, pool, conflicts, diagnostics, curves and the run record.

    Raises
    ------
    ValueError
        An invalid option or combination, before any work.
    BundleError
        Bad input data (file, line and problem).

    Example
    -------
    >>> result = receval.score("data/kbp-sim", bootstrap=200, seed=1)  # doctest: +SKIP
    >>> result.leaderboard.loc[0, "system"]  # doctest: +SKIP

    References
    ----------
    A. Chaganty, A. Paranjape, P. Liang, C. Manning. Importance sampling for unbiased on-demand
    evaluation of knowledge base population. EMNLP 2017.
    """
    from receval.scoring import ScoreOptions

    if options is not None and not isinstance(options, ScoreOptions):
        raise TypeError(f"options must be a ScoreOptions, not {type(options).__name__}")
    known = {f.name for f in dataclasses.fields(ScoreOptions)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise TypeError(
            f"score() got unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    options = dataclasses.replace(options or ScoreOptions(), **fields)
    options = dataclasses.replace(options, seed=resolve_seed(options.seed))
    if isinstance(engine, str):
        check_choice("engine", engine, ENGINES)
    options = check_score_options(options)  # every option and combination, once, before any work
    from receval.agreement import agreement_by_round
    from receval.diagnostics import annotation_spend, per_query, pooling_bias
    from receval.engine.score import engine_path
    from receval.scoring import score_task

    step = on_step or (lambda: None)
    from receval.task import SCORING_RUN_COLUMNS

    task = _as_source(task)
    # a large Parquet bundle (or out_of_core=True): SQL aggregates, no output row in memory
    view, in_memory_at_size = engine_path(task, options, engine, out_of_core)
    if view is None and replicates is None:  # the official census of a plain bundle: no Task
        from receval.official.direct import official_view

        view = official_view(task, options, engine, out_of_core)
        in_memory_at_size = None if view is not None else in_memory_at_size
    loaded = view or _as_task(task, SCORING_RUN_COLUMNS)  # a per-row note is not read
    step()
    chosen = None if view else task_engine(loaded, engine)  # census and diagnostic run in it
    estimates = score_task(
        loaded, options, _load_replicates(loaded, options, replicates), engine=chosen
    )
    step()
    joint = estimates.leaderboard if estimates.run is not None else None  # sample-based
    if view:
        diagnostics = view.diagnostics(joint)
    else:
        diagnostics = {
            "per_query": per_query(loaded),
            "annotation": annotation_spend(loaded),
            "pooling_bias": pooling_bias(loaded, joint, engine=chosen),
            "agreement": agreement_by_round(loaded),
        }
    step()
    anonymised = None
    if anonymise_key is not None:
        from receval.leaderboard import anonymise

        anonymised = anonymise(estimates.leaderboard, anonymise_key)
    judge_audit, audit_block = _judge_audit(loaded, estimates)
    run = run_record(
        loaded,
        estimates.record,
        (*estimates.warnings, *filter(None, [in_memory_at_size])),
        len(estimates.conflicts),
        judge_audit=audit_block,
        anonymise=anonymise_source,
    )
    if view and view.record() is not None:  # how the engine path read the runs
        run = run.replace(extra={**run.extra, "engine_path": view.record()})
    result = ScoreResult(
        leaderboard=estimates.leaderboard,
        pool=estimates.pool,
        conflicts=estimates.conflicts,
        truth_check=estimates.truth_check,
        curves=dict(estimates.curves),
        run=run,
        anonymised=anonymised,
        replicates=estimates.replicates,
        judge_audit=judge_audit,
        **diagnostics,
    )
    step()
    return result


def _judge_audit(task: Task, estimates: Any) -> tuple[Any, JudgeAuditBlock | None]:
    """(``judge.csv``, run.json's ``judge_audit`` block), or (None, None), of a run on a bundle
    with a judge (:mod:`receval.judge_audit`)."""
    from receval.judge_audit import audit_block, audit_frame

    frame = audit_frame(task, estimates)
    if frame is None:
        return None, None
    return frame, audit_block(task, frame, estimates.options)


def task_engine(task: Task, engine: Any) -> Any:
    """The aggregation engine of one scoring run, passed explicitly to the official census and
    the leave-one-team-out diagnostic (tables registered once): a connected engine, a name
    (``'duckdb'``, ``'spark'``) or None (the task's own embedded DuckDB).  None for TAC bundles,
    whose equivalence classes span facts: they are counted and re-scored per team in pandas; and
    None under ``'duckdb'`` for a task counted in process (integer codes, numpy: the same
    numbers; :func:`receval.official.coded.in_process`)."""
    from receval.engine import connect
    from receval.official.census import default_engine
    from receval.official.coded import in_process
    from receval.official.rules import fact_matched

    if not fact_matched(task):
        return None
    if engine is None or engine == "duckdb":
        return None if in_process(task) else default_engine(task)
    return connect(engine) if isinstance(engine, str) else engine


def sample(
    task: Task | Bundle | Path | str,
    per_system: int | Mapping[str, int] = 0,
    *,
    seed: int,
    distribution: str = "uniform",
    systems: list[str] | None = None,
    units: pd.DataFrame | None = None,
    exhaustive_units: int = 0,
    name: str | None = None,
    until_decided: bool = False,
    batch: int | None = None,
    rank_by: str = "f1",
    confidence: float = 0.95,
    budget: int | None = None,
    target: str = "micro",
    top: int | None = None,
    intervals: str | None = None,
    estimator: str = "joint",
    out_of_core: bool | None = None,
) -> SampleRound:
    """Draw a new sample round: per-system i.i.d. draws and exhaustive units (not written).

    Parameters
    ----------
    task : Task, Bundle or path
        The task to draw from.
    per_system : int or mapping
        Draws per system (with replacement from its distinct facts), or per-system sizes (e.g.
        from :func:`receval.planning.adaptive_sample_sizes`).
    seed : int
        Seed of the draws (combined with the round number).
    distribution : {'uniform', 'entity-relation'}
        The sampling distribution over each system's facts.
    systems : list of str, optional
        Only these systems.
    units : pandas.DataFrame, optional
        Candidate units (``unit``, optional ``prob``) for exhaustive annotation.
    exhaustive_units : int
        How many units to draw from ``units``.
    name : str, optional
        Name of the round (default ``round-K``).
    until_decided : bool
        Draw the next ``batch`` labels where the anytime comparisons by ``rank_by`` at
        ``confidence`` are still open, or nothing once they are decided (or ``budget`` draws are
        recorded): :func:`receval.until_decided.until_decided_round`; the result's ``decided``
        and ``message`` say which.  ``batch``, ``rank_by``, ``confidence``, ``budget``,
        ``target`` (``'micro'`` or ``'macro'``, as :func:`score`'s) and ``top`` (K: decide only
        which systems are the best K, LUCB-style) apply to it only; so do ``intervals``, the
        anytime method whose paired tests decide: ``'anytime'`` (betting, the default; valid at
        any number of draws) or ``'anytime-asymptotic'`` (valid as the draws grow), and
        ``estimator`` (the registered sample-based estimator the comparisons are scored with, as
        ``score(estimator=..., intervals='anytime')``: ``'ppi'`` decides with the judge too).
    out_of_core : bool, optional
        Draw in DuckDB out of core (:func:`receval.engine.sampled.sample_round`: the draws are
        hashed functions of seed, round, system and fact, the same as in memory),
        or load the task (False).  Default: out of core for a bundle of Parquet runs with at
        least 10⁷ rows, as :func:`score`, when ``distribution`` is uniform or entity-relation;
        ``until_decided`` rounds too (:mod:`receval.engine.until_decided`: the looks scored
        on ``score``'s engine path), drawn in memory with a warning where it cannot score them.

    Returns
    -------
    SampleRound
        ``samples`` (rows for ``samples.tsv``), ``units``, ``to_annotate`` and ``sizes``;
        :meth:`receval.bundle.Bundle.record_round` records it in a bundle, and
        :func:`sample_round` draws and records a round under the bundle's lock at once.

    Example
    -------
    >>> drawn = receval.sample("data/kbp-sim", 50, seed=2)  # doctest: +SKIP
    >>> len(drawn.to_annotate)  # doctest: +SKIP
    """
    from receval.design import DISTRIBUTIONS, known_design, new_sample_round

    if not known_design(distribution):  # a judge-strata:<judge>:<weights> design parses
        check_choice("distribution", distribution, DISTRIBUTIONS)
    check_seed(seed)
    if until_decided:
        from receval.until_decided import until_decided_round

        if batch is None:
            raise ValueError("until_decided needs batch (the draws of the next round)")
        loop = {"rank_by": rank_by, "confidence": confidence, "budget": budget,
                "distribution": distribution, "target": target, "top": top,
                "estimator": estimator, **({} if intervals is None else {"intervals": intervals})}  # fmt: skip
        drawn = _engine_until_decided(task, batch, seed, out_of_core, loop)
        if drawn is not None:
            return drawn
        return until_decided_round(_as_task(task), batch, seed=seed, **loop)
    unused = {"batch": batch is not None, "budget": budget is not None,
              "rank_by": rank_by != "f1", "target": target != "micro", "top": top is not None,
              "intervals": intervals is not None, "estimator": estimator != "joint"}  # fmt: skip
    if any(unused.values()):
        first = next(k for k, v in unused.items() if v)
        raise ValueError(f"{first} applies only with until_decided=True")
    sizes = dict(per_system) if isinstance(per_system, Mapping) else int(per_system)
    if isinstance(sizes, int) and sizes < 0:
        raise ValueError(f"per_system={per_system!r} must be ≥ 0")
    if exhaustive_units and units is None:
        raise ValueError("exhaustive_units needs units (the candidate units)")
    from receval.engine.sample_path import default_engine
    from receval.engine.sampled import ENGINE_DESIGNS

    engine = default_engine(task, out_of_core) if distribution in ENGINE_DESIGNS else None
    if engine is not None:  # a large Parquet bundle: drawn in DuckDB, out of core
        from receval.engine.sampled import sample_round as engine_round

        return engine_round(
            _bundle(task), sizes, seed=seed, systems=systems, name=name, engine=engine,
            distribution=distribution, units=units, exhaustive_units=exhaustive_units,
        )  # fmt: skip
    if out_of_core:
        raise ValueError(f"out_of_core draws {' or '.join(ENGINE_DESIGNS)}, not {distribution!r}")
    loaded = _as_task(task)
    _check_systems(loaded, systems)
    n_systems = len(systems) if systems else len(loaded.systems)
    check_round_draws(sum(sizes.values()) if isinstance(sizes, dict) else sizes * n_systems)
    return new_sample_round(
        loaded,
        sizes,
        seed=seed,
        distribution=distribution,
        systems=systems,
        units=units,
        exhaustive_units=exhaustive_units,
        name=name,
    )


def _engine_until_decided(task, batch: int, seed: int, out_of_core, loop: dict):
    """The ``until_decided`` round on the engine path
    (:func:`receval.engine.until_decided.until_decided_round`) when ``out_of_core`` asks for
    it, or by default on a large Parquet bundle (the rule of :func:`sample`); None to draw in
    memory (by default where the engine path cannot score the looks, with a warning)."""
    import warnings

    from receval.engine.sample_path import default_engine

    engine = default_engine(task, out_of_core)
    if engine is None:
        return None
    from receval.engine.until_decided import until_decided_round as engine_round

    try:
        return engine_round(_bundle(task), batch, seed=seed, engine=engine, **loop)
    except ValueError as exc:
        declined = "engine path" in str(exc) or "reads Parquet runs" in str(exc)
        if out_of_core or not declined:
            raise
        warnings.warn(f"{exc}: drawn in memory", stacklevel=3)
        return None


def sample_round(
    task: Bundle | Path | str, per_system: int | Mapping[str, int] = 0, *, seed: int, **options: Any
) -> SampleRound:
    """Draw a round and record it in the bundle, all under the bundle's lock: ``receval
    sample``'s library twin.

    The bundle is loaded inside the lock, so a round drawn by another writer at the same time
    (a process or a thread; the CLI takes the same lock) is seen: each round gets its own name
    and ``to_annotate.tsv`` lists both rounds' facts.  Drawing (:func:`sample`, whose keyword
    ``options`` it takes) and then recording (:meth:`receval.bundle.Bundle.record_round`)
    separately leaves a window in which two writers draw against the same bundle.  A round of
    ``until_decided=True`` that finds the comparisons decided records nothing.

    Parameters
    ----------
    task : Bundle or path
        The task bundle (a loaded :class:`~receval.task.Task` has no folder to write to).

    Returns
    -------
    SampleRound
        As :func:`sample`'s; its rows are in ``samples.tsv`` and ``to_annotate.tsv``.
    """
    from receval.task import Task

    if isinstance(task, Task):
        raise TypeError("sample_round writes to a bundle: give its path or a Bundle, not a Task")
    bundle = _bundle(task)
    with bundle.lock():
        drawn = sample(bundle, per_system, seed=seed, **options)
        if not getattr(drawn, "decided", False):
            bundle.record_round(drawn)
    return drawn


def plan_sample(
    task: Task | Bundle | Path | str,
    target_width: float,
    *,
    confidence: float = 0.95,
    systems: list[str] | None = None,
    max_n: int = 2000,
    bound: str = "expected",
    width_for: str = "both",
    on_system: Callable[[str], None] | None = None,
    distribution: str = "uniform",
    judge: bool = False,
) -> pd.DataFrame:
    """The smallest per-system sample sizes that bring interval half-widths under ``target_width``.

    Parameters
    ----------
    task : Task, Bundle or path
        The task (labels already collected are reused).
    target_width : float
        The wanted half-width of the intervals.
    confidence : float
        The interval level the width refers to.
    systems : list of str, optional
        Plan for these systems (default: every system without a sample yet).
    max_n : int
        Upper end of the search for n.
    bound : {'expected', 'paper', 'exchangeable'}
        The variance used for unlabelled facts: its expected value with unlabelled facts correct at
        the pool's estimated rate (default: realised widths land near the target), or a bound
        (Chaganty et al. 2017, Theorem 1; or the worst case
        over a common precision under exchangeable labels).
    width_for : {'both', 'precision', 'recall'}
        Which intervals must meet the width.
    on_system : callable, optional
        Called with each system's name when it is planned (progress).
    distribution : str
        The planned draws' design (``judge-uncertainty`` for ``sample --by-judge``).
    judge : bool
        Plan for ``--estimator ppi``: the draws' variance times the share the judge is expected
        to leave (:func:`receval.planning.judge_factor`; needs judge.tsv).

    Returns
    -------
    pandas.DataFrame
        ``system, n, precision_halfwidth, recall_halfwidth`` (and ``note``: e.g. a target the
        exhaustive units cannot reach gets n = 0 and says what would reach it).

    Example
    -------
    >>> plan = receval.plan_sample("data/kbp-sim", 0.05, systems=["T01_1"])  # doctest: +SKIP
    >>> drawn = receval.sample("data/kbp-sim", dict(zip(plan.system, plan.n)), seed=3)  # doctest: +SKIP
    """
    from receval.options import PLANNING_BOUNDS, WIDTH_FOR
    from receval.planning import adaptive_sample_sizes

    check_choice("bound", bound, PLANNING_BOUNDS)
    check_choice("width_for", width_for, WIDTH_FOR)
    loaded = _as_task(task)
    _check_systems(loaded, systems)
    return adaptive_sample_sizes(
        loaded,
        target_width,
        confidence=confidence,
        systems=systems,
        max_n=max_n,
        bound=bound,
        metrics=("precision", "recall") if width_for == "both" else (width_for,),
        on_system=on_system or (lambda _name: None),
        judge=judge,
        design=distribution,
    )


def simulate(out: Path | str, *, seed: int = 0, overwrite: bool = False, **config: Any) -> Path:
    """Write a synthetic TAC-KBP-style bundle with ground truth (``truth.tsv``) to ``out``.

    Parameters
    ----------
    out : path
        The bundle folder to write (refused if it exists, unless ``overwrite``).
    seed : int
        Seed of the world and of the annotation campaign.
    overwrite : bool
        Replace ``out`` if it exists.
    **config
        Fields of :class:`receval.simulation.SimulationConfig` (``systems``, ``queries``,
        ``teams``, ``per_system``, ``exhaustive_facts``, ``annotators``, ...).

    Returns
    -------
    Path
        The bundle folder.

    Example
    -------
    >>> receval.simulate("/tmp/demo", systems=20, queries=100, seed=7)  # doctest: +SKIP
    """
    import dataclasses

    from receval.simulation import SimulationConfig, simulate_task

    known = {f.name for f in dataclasses.fields(SimulationConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"unknown simulation option(s): {', '.join(unknown)}")
    config.setdefault("name", Path(out).name)
    check_seed(seed)
    return simulate_task(out, SimulationConfig(**config), seed=seed, overwrite=overwrite)


def extrapolate(
    precision: float,
    recall: float,
    prevalence: float,
    target: float,
    *,
    max_recall_distance: float | None = None,
) -> Any:
    """Dimm's extrapolated precision at recall ``target`` from one measured (R, P) point.

    A **model extrapolation** (Dimm 2015, eqs. 11–12), not an estimate with known error.

    Parameters
    ----------
    precision, recall : float
        The measured point.
    prevalence : float
        ρ, the share of correct items in the universe.
    target : float
        The target recall.
    max_recall_distance : float, optional
        Flag extrapolations over a larger recall distance.

    Returns
    -------
    receval.extrapolation.ExtrapolationResult
        ``beta``, ``precision_at_target``, ``flags``.

    Raises
    ------
    receval.extrapolation.ExtrapolationRefused
        Where the point lies outside the model's validity (the reason is the message).

    Example
    -------
    >>> receval.extrapolate(0.6, 0.3, 0.01, 0.5).precision_at_target  # doctest: +SKIP

    References
    ----------
    C. Dimm. Extrapolated precision. 2015.
    """
    from receval.extrapolation import DEFAULT_MAX_RECALL_DISTANCE, extrapolate_point

    distance = DEFAULT_MAX_RECALL_DISTANCE if max_recall_distance is None else max_recall_distance
    return extrapolate_point(precision, recall, prevalence, target, max_recall_distance=distance)
