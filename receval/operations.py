"""The bundle operations behind the CLI commands, as library functions.

Every ``receval`` command is a few lines of argument parsing over one function here or in
:mod:`receval.api` (``score``, ``sample``, ``plan_sample``, ``simulate``, ``extrapolate``):

==========================  =================================================
command                     function
==========================  =================================================
``validate``                :func:`validate` -> :class:`Validation`
``budget``                  :func:`budget` -> DataFrame
``judgments add``           :func:`receval.judgments.add_judgments` -> ``AddResult``
``export label-studio``     :func:`export_label_studio` -> :class:`Exported`
``import tac-kbp``          :func:`import_tac_kbp` -> :class:`Imported`
``import trec``             :func:`import_trec` -> :class:`Imported`
``curve plan``              :func:`curve_plan` -> :class:`CurvePlan`
``curve estimate``          :func:`curve_estimate` -> ``SystemCurve``
``curve budget``            :func:`receval.curves.curve_budget` -> dict
==========================  =================================================

Bad input raises :class:`~receval.errors.BundleError` (file and line) or ``ValueError``; the
CLI prints either as one ``error:`` line with exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from receval.bundle import Bundle
    from receval.task import Task

__all__ = [
    "CurvePlan",
    "Exported",
    "Imported",
    "Validation",
    "budget",
    "curve_estimate",
    "curve_plan",
    "export_label_studio",
    "import_tac_kbp",
    "import_trec",
    "validate",
]


def _task(task: Task | Bundle | Path | str) -> Task:
    from receval.bundle import Bundle
    from receval.task import Task

    if isinstance(task, Task):
        return task
    return (task if isinstance(task, Bundle) else Bundle(task)).load()


def _folder(task: Any) -> Path:
    """The bundle folder of a path, a :class:`~receval.bundle.Bundle` or a loaded task."""
    return Path(task) if isinstance(task, str | Path) else Path(task.root)


# ---------------------------------------------------------------------------------------------
# validate


@dataclass(frozen=True)
class Validation:
    """What ``receval validate`` found: the task's counts, sample designs, annotator agreement per
    round and conflicts by kind.  :meth:`lines` is the text the command prints."""

    summary: dict[str, Any]
    designs: tuple[str, ...]
    samplers: int
    agreement: pd.DataFrame
    conflict_kinds: dict[str, int]

    def lines(self) -> list[str]:
        """The printed summary, one line per count."""
        width = max(len(k) for k in self.summary)
        out = [f"{key:<{width}}  {value}" for key, value in self.summary.items()]
        if self.samplers:
            out.append(
                f"{'sample designs':<{width}}  {', '.join(self.designs)} ({self.samplers} system samples)"
            )
        for _, row in self.agreement.iterrows():
            alpha = "undefined" if row["alpha"] != row["alpha"] else f"{row['alpha']:.3f}"
            out.append(
                f"{'agreement':<{width}}  round {row['round']}: Krippendorff's alpha {alpha} "
                f"({row['annotators']} annotators, {row['facts_multiply_labelled']} facts labelled "
                "by two or more)"
            )
        if self.conflict_kinds:
            detail = ", ".join(f"{k}: {v}" for k, v in self.conflict_kinds.items())
            out.append(
                f"conflicts by kind: {detail} (all listed in conflicts.csv by `receval score`)"
            )
        return out


def validate(
    task: Task | Bundle | Path | str,
    *,
    engine: Any = None,
    out_of_core: bool | None = None,
) -> Validation:
    """Load and check every file of a bundle (:func:`receval.load_task`) and summarise it.

    A bundle path with Parquet runs is checked out of core instead (SQL aggregates in
    ``engine``: None or ``"duckdb"``, ``"spark"`` or a connected engine;
    :mod:`receval.engine.validate`) when ``out_of_core`` is True, or when it is None and the runs
    hold at least ``ENGINE_PATH_ROWS`` rows and the bundle is one that path checks: the same
    summary, never holding an output row.  ``out_of_core=False`` always loads the task.

    Raises :class:`~receval.errors.BundleError` naming the file and line of the first problem;
    ``ValueError`` when ``out_of_core=True`` and the engine path cannot check this bundle.
    """
    from receval.agreement import agreement_by_round
    from receval.bundle import Bundle
    from receval.engine.validate import validation_view, view_summary

    source = task.root if isinstance(task, Bundle) else task
    view = validation_view(source, engine, out_of_core)
    loaded = view if view is not None else _task(task)
    samplers = loaded.samplers
    kinds = loaded.merged.conflicts["kind"].value_counts()
    return Validation(
        summary=view_summary(view) if view is not None else loaded.summary(),
        designs=tuple(sorted({s.design for s in samplers})),
        samplers=len(samplers),
        agreement=agreement_by_round(loaded),
        conflict_kinds={str(k): int(v) for k, v in kinds.items()},
    )


# ---------------------------------------------------------------------------------------------
# budget


def budget(
    task: Task | Bundle | Path | str,
    total: int,
    *,
    confidence: float = 0.95,
    bound: str = "expected",
    estimator: str = "joint",
    by_judge: bool = False,
) -> pd.DataFrame:
    """Expected interval half-widths if ``total`` more draws were spread evenly over the systems.

    Reuses the labels already collected (Chaganty et al. 2017, Theorem 1: empirical terms for the
    labelled samples; for the new draws the expected variance, or a conservative bound).  With
    ``estimator="ppi"`` the draws' variance is multiplied by the share a judge is expected to
    leave, 1 − ρ_lo² (:func:`receval.planning.judge_factor`, an approximation); ``by_judge``
    plans the new draws with ``sample --by-judge``'s design.  Returns ``system,
    precision_halfwidth, recall_halfwidth``; ``attrs["per_system"]`` is the number of new draws
    per system and ``attrs["judge_factor"]`` the factor used (1 without the judge).
    ``ValueError`` when ``total`` gives no system a draw, or the judge is needed and missing.
    """
    from receval.options import BUDGET_BOUNDS, CONFIDENCE_RANGE, check_choice, check_range
    from receval.planning import expected_widths, judge_factor

    check_choice("bound", bound, BUDGET_BOUNDS)
    check_range("confidence", confidence, *CONFIDENCE_RANGE)
    loaded = _task(task)
    per_system = int(total) // len(loaded.systems)
    if per_system < 1:
        raise ValueError(
            f"total={total} gives fewer than one draw per system ({len(loaded.systems)} systems)"
        )
    from receval.estimators.registry import estimator_class
    from receval.options import planned_estimators

    check_choice("estimator", estimator, planned_estimators())
    use_judge = estimator_class(estimator).uses_judge
    design = "uniform"
    if by_judge:
        from receval.estimators.judge_calibration import judge_strata_design

        design = judge_strata_design(loaded)
    table = expected_widths(
        loaded, per_system, confidence=confidence, bound=bound, judge=use_judge, design=design
    )
    table.attrs["per_system"] = per_system
    table.attrs["judge_factor"] = judge_factor(loaded) if use_judge else 1.0
    table.attrs["uses_judge"] = use_judge
    return table


# ---------------------------------------------------------------------------------------------
# judgments and annotation tools


@dataclass(frozen=True)
class Exported:
    """What :func:`export_label_studio` wrote."""

    tasks: int
    tasks_file: Path
    config_file: Path


def export_label_studio(
    task: Task | Bundle | Path | str, out: Path | str, *, on_step: Callable[[], None] | None = None
) -> Exported:
    """Write the task's pending facts as Label Studio tasks (``out``, JSON) and a labelling
    configuration (``out`` with suffix ``.xml``), each atomically."""
    import json

    from receval.formats.label_studio import label_studio_tasks, labelling_config
    from receval.formats.tables import write_text_atomic

    step = on_step or (lambda: None)
    out = Path(out)
    loaded = _task(task)
    step()
    tasks = label_studio_tasks(loaded)
    step()
    with_provenance = any("provenance" in t["data"] for t in tasks)
    write_text_atomic(out, json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
    config_path = out.with_suffix(".xml")
    write_text_atomic(config_path, labelling_config(loaded.config, with_provenance))
    step()
    return Exported(len(tasks), out, config_path)


# ---------------------------------------------------------------------------------------------
# importers


@dataclass(frozen=True)
class Imported:
    """What an importer wrote: the bundle folder and its counts (``notes``: what was left out)."""

    path: Path
    queries: int
    runs: int
    judgments: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def import_tac_kbp(
    out: Path | str,
    runs: list[Path] | list[str],
    *,
    queries: Path | str | None = None,
    assessments: Path | str | None = None,
    include_hop1: bool = False,
    name: str | None = None,
    overwrite: bool = False,
    judge: Path | str | list | None = None,
    on_step: Callable[[], None] | None = None,
    judge_scale: tuple[float, float] | None = None,
) -> Imported:
    """Convert TAC-KBP Cold Start slot-filling runs (and assessments, queries) into a bundle at
    ``out`` (:func:`receval.formats.tac_kbp.import_tac_kbp` documents the rules).  ``judge``: an
    automatic judge's scores, or a list of files, one per judge
    (:func:`receval.judge.read_judge_files`), checked before anything is written and stored as
    the bundle's judge table; ``judge_scale`` (lo, hi): the judges' grade scale, written to
    ``task.toml [judge] scale`` (default: probabilities in [0, 1])."""
    from receval.formats.bundle import write_bundle
    from receval.formats.tac_kbp import import_tac_kbp as read_tac_kbp

    step = on_step or (lambda: None)
    out = Path(out)
    judge_table = _judge_table(judge, judge_scale)
    tables, config = read_tac_kbp(
        queries, list(runs), assessments, include_hop1=include_hop1, name=name or out.name
    )
    config = _with_judge_scale(config, judge_scale)
    if judge_table is not None:
        tables["judge"] = judge_table
    step()
    write_bundle(out, tables, config, overwrite=overwrite)
    step()
    skipped = int(tables["runs"].attrs.get("hop1_rows_skipped", 0))
    notes = (
        (f"{skipped} hop-1 run rows skipped (receval scores hop 0; --include-hop1 keeps them)",)
        if skipped
        else ()
    )
    return Imported(
        out,
        len(tables["queries"]),
        int(tables["runs"]["system"].nunique()),
        len(tables.get("judgments", ())),
        notes,
    )


def import_trec(
    out: Path | str,
    runs: list[Path] | list[str],
    *,
    qrels: Path | str | None = None,
    depth: int | None = None,
    name: str | None = None,
    overwrite: bool = False,
    table_format: str = "tsv",
    judge: Path | str | list | None = None,
    on_file: Callable[[Any], None] | None = None,
    judge_scale: tuple[float, float] | None = None,
) -> Imported:
    """Convert TREC runs (and qrels) into a bundle at ``out`` with tables in ``table_format``
    (``tsv`` or ``parquet``) (:func:`receval.formats.trec.import_trec_tables` documents the
    rules).  ``judge``, ``judge_scale``: the judges' scores, as for :func:`import_tac_kbp`.
    ``on_file``
    is called after each input file is read and once after writing."""
    from receval.formats.bundle import staged_bundle, write_tables
    from receval.formats.trec import write_trec_bundle
    from receval.options import check_choice

    check_choice("table_format", table_format, ("tsv", "parquet"))
    step = on_file or (lambda _file: None)
    out = Path(out)
    judge_table = _judge_table(judge, judge_scale)
    with staged_bundle(out, overwrite) as folder:  # the runs streamed: one run in memory
        tables, config, systems = write_trec_bundle(
            folder, qrels, list(runs), depth, name=name or out.name, on_file=step,
            suffix=f".{table_format}",
        )  # fmt: skip
        config = _with_judge_scale(config, judge_scale)
        if judge_table is not None:
            tables["judge"] = judge_table
        write_tables(folder, tables, config, f".{table_format}")
    step(out)
    judged = tables["judgments"].num_rows if "judgments" in tables else 0
    return Imported(out, tables["queries"].num_rows, systems, judged)


# ---------------------------------------------------------------------------------------------
# precision curves


def curve_source(
    task: Task | Bundle | Path | str,
    system: str,
    *,
    engine: str = "duckdb",
    spark_master: str | None = None,
) -> Any:
    """The task as the curve operations read it: the loaded bundle, or, when ``system``'s run is
    a large Parquet file, only task.toml, queries, judgments and that run, ranked in ``engine``
    (``duckdb``, or ``spark`` on ``spark_master``: Spark reads the run itself;
    :class:`receval.curves.sources.CurveBundle`)."""
    from receval.curves.sources import CurveBundle, engine_run_file
    from receval.task import Task

    if isinstance(task, Task | CurveBundle):
        return task
    if engine_run_file(_folder(task), system) is not None:
        return CurveBundle.load(_folder(task), engine=engine, spark_master=spark_master)
    return _task(task)


@dataclass(frozen=True)
class CurvePlan:
    """What :func:`curve_plan` wrote: the new batch, the labels it reused, the batch file, how
    many pending rows of earlier batches it kept, and the seed (``seed_note`` says where a seed
    not given came from; None when it was given or the method draws nothing);
    ``duplicate_rows``: the system's input rows dropped as copies of a fact it output again."""

    batch: pd.DataFrame
    reused: int
    path: Path
    kept: int
    seed: int | None = None
    seed_note: str | None = None
    duplicate_rows: int = 0


def pending_curve_rows(task: Any, target: Path) -> pd.DataFrame | None:
    """Rows of an existing curve batch file that still have no label (None when absent).

    Refuses (``BundleError``) a file that is not a curve batch, e.g. the to_annotate.tsv of
    ``sample``, or a row whose rank is not an integer.
    """

    from receval.curves.workflow import BATCH_COLUMNS, unlabelled_rows
    from receval.errors import BundleError
    from receval.formats.checks import whole_numbers
    from receval.formats.tables import read_table

    if not target.exists():
        return None
    old = read_table(target)
    missing = [c for c in ("rank", "query_id", "answer", "system") if c not in old.columns]
    if missing:
        raise BundleError(
            target,
            1,
            f"exists and is not a curve batch (no {', '.join(missing)} column); it may hold "
            "pending work: write the batch to another file",
        )
    ranks, bad = whole_numbers(old["rank"])
    if bad.any():
        line = old["_line"][bad].iloc[0] if "_line" in old.columns else None
        raise BundleError(target, line, "rank is not an integer")
    old = old[[c for c in BATCH_COLUMNS if c in old.columns]].copy()
    old["rank"] = ranks
    return unlabelled_rows(task, old)


def curve_plan(
    task: Task | Bundle | Path | str,
    system: str,
    method: str,
    *,
    seed: int | None = None,
    out: Path | str | None = None,
    engine: str = "duckdb",
    spark_master: str | None = None,
    **params: Any,
) -> CurvePlan:
    """Write the next batch of ``system``'s ranked items that ``method`` needs labelled.

    The batch goes to ``out`` (default ``TASK/curve_to_annotate.tsv``), never to the
    to_annotate.tsv of ``sample``; rows of earlier batches still unlabelled (any system) are
    kept, labelled ones dropped.  ``params`` are the method's (:func:`receval.curves.make_method`);
    ``engine``, ``spark_master``: as in :func:`curve_source`.
    A random method without ``seed`` uses the seed recorded in ``TASK/curve_plan.json``, else a
    fresh random one, recorded there (:mod:`receval.curves.plan_record`).  An empty batch means
    the method has every label it needs.
    """
    from receval.bundle import ROUND_LOCK_WAIT, Bundle
    from receval.curves.plan_record import planned_seed, record_plan, seeded
    from receval.curves.workflow import merge_batches, plan_batch
    from receval.formats.tables import write_table

    # the bundle lock (sample and judgments add take it too): plans made at once keep each
    # other's pending rows and recorded seeds
    with Bundle(_folder(task), lock_timeout=ROUND_LOCK_WAIT).lock():
        source = curve_source(task, system, engine=engine, spark_master=spark_master)
        root = Path(source.root)
        note = None
        if seed is None and seeded(method):
            seed, note = planned_seed(root, system, method)
        if seed is not None:
            params["seed"] = seed
        batch, reused = plan_batch(source, system, method, params)
        if note is not None:
            record_plan(root, system, method, params)
        target = Path(out) if out is not None else root / "curve_to_annotate.tsv"
        merged = merge_batches(pending_curve_rows(source, target), batch)
        write_table(target, merged)
    from receval.curves.sources import duplicate_rows

    dups = duplicate_rows(source, system)
    return CurvePlan(batch, reused, target, len(merged) - len(batch), seed, note, dups)


def true_facts_for_curve(
    source: Any, given: int | None = None, seed: int = 0
) -> tuple[Any, Any, Any]:
    """(T, (T⁻, T⁺) or None when exact, where it came from) for a curve's recall columns:
    ``given``, else truth.tsv, else the estimate 𝒴̂ = pool correct / pool coverage with its 95%
    percentile bootstrap interval; ``(None, None, None)`` when none is available."""
    if given is not None:
        return given, None, "--true-facts"
    from receval.curves.sources import CurveBundle

    if isinstance(source, CurveBundle):  # only what the curve reads was loaded
        total = source.true_facts()
        return (total, None, "truth.tsv") if total is not None else (None, None, None)
    if source.truth is not None:
        return int((source.truth["value"] == 1).sum()), None, "truth.tsv"
    from receval.scoring import estimated_true_facts

    estimate = estimated_true_facts(source, seed=seed)
    if estimate is None:
        return None, None, None
    point, interval = estimate[0], estimate[1:]
    return point, interval, "estimated (pool correct / pool coverage), 95% percentile bootstrap"


def curve_estimate(
    task: Task | Bundle | Path | str,
    system: str,
    method: str,
    *,
    seed: int | None = None,
    true_facts: int | None = None,
    out: Path | str | None = None,
    engine: str = "duckdb",
    spark_master: str | None = None,
    **params: Any,
) -> Any:
    """``system``'s precision curve with ``method`` from the labels the task has
    (:func:`receval.curves.workflow.estimate_system_curve`), with recall columns from
    :func:`true_facts_for_curve`.  ``seed``: the plan's (default: the one recorded in
    ``TASK/curve_plan.json``, else 0).  With ``out`` the table is written there as CSV (bounds
    rounded outward) and its record (kind, guarantee, flags) as ``out`` + ``.json``;
    ``engine``, ``spark_master``: as in :func:`curve_source`.
    ``ValueError`` for an unknown system or while the method still needs labels."""
    from receval.curves.plan_record import estimate_seed
    from receval.curves.table import outward_rounded
    from receval.curves.workflow import estimate_system_curve
    from receval.report.writers import write_csv, write_json

    source = curve_source(task, system, engine=engine, spark_master=spark_master)
    if system not in source.systems:
        raise ValueError(f"unknown system {system!r}")
    params["seed"] = estimate_seed(Path(source.root), system, method, seed)
    facts = true_facts_for_curve(source, true_facts, params["seed"])
    curve = estimate_system_curve(source, system, method, params, true_facts=facts)
    if out is not None:
        out = Path(out)
        write_csv(out, outward_rounded(curve.frame))
        write_json(out.with_name(out.name + ".json"), curve.record)
    return curve


def _judge_table(judge, scale: tuple[float, float] | None = None) -> Any:
    """``judge`` (a file or a list of files) read and checked
    (:func:`receval.judge.read_judge_files`), or None."""
    if judge is None or (isinstance(judge, list | tuple) and not judge):
        return None  # pandas stays unimported (import trec builds Arrow from buffers)
    from receval.judge import read_judge_files

    if scale is not None:
        from receval.options import check_judge_scale

        check_judge_scale(scale)
    return read_judge_files(judge, scale)


def _with_judge_scale(config: Any, scale: tuple[float, float] | None) -> Any:
    """``config`` with ``[judge] scale`` set when one is declared."""
    import dataclasses

    if scale is None:
        return config
    return dataclasses.replace(config, judge_scale=(float(scale[0]), float(scale[1])))
