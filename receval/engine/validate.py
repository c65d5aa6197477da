"""``validate`` on the engine path: the checks and the summary of a Parquet bundle from SQL
aggregates over its runs, in memory that does not grow with the number of output rows.

:func:`validation_view` decides as ``score`` does (:func:`receval.engine.score.engine_view`):
the runs are Parquet and either ``out_of_core=True`` (``validate --out-of-core``), or nothing
was said and they hold at least :data:`~receval.engine.score.ENGINE_PATH_ROWS` rows.  What it
checks, with the in-memory loader's messages:

* every run file's schema (:func:`check_run_files`): the loader's own header, type and
  required-column checks run on the file's schema alone (no row read), then the engine's
  (:func:`receval.engine.run_files.check_run_schema`: a column the engine cannot read as text);
* the small tables (queries, judgments, samples; :func:`~receval.engine.sampled_data.read_small_tables`);
* the run values (blank answers, unknown queries, two teams for one system), the systems' sizes,
  duplicates and the pool as the three aggregations of :mod:`receval.engine.summary`; the draws
  against the outputs (:func:`~receval.engine.sampled_data.samplers_of`).

* ``truth.tsv`` (the loader's checks: :func:`~receval.engine.sampled_data.read_small_tables`),
  equivalence classes in the judgments (the summary counts raw facts, as the loader's does),
  exhaustive units, and rounds of the uniform and entity-relation designs (inferred and
  checked as the loader does).
* the judge table, read by the engine judge (:func:`receval.engine.judge.open_engine_judge`:
  the loader's :func:`receval.judge.check_judge_table` — columns, queries, scores within
  their scale — and :func:`receval.judge.dedupe_judge`'s one grade per judge and fact, same
  ``file:line`` messages), and with it the ``judge-strata`` rounds of ``sample --by-judge``
  (their probabilities at the judge's levels, :mod:`receval.engine.strata`).

Not covered (the in-memory path then, or an error with ``--out-of-core``): the
``judge-uncertainty`` design.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from receval.errors import BundleError

if TYPE_CHECKING:
    from receval.engine.sampled_data import SmallTables
    from receval.engine.score import BundleView


#: what :func:`~receval.engine.sampled_data.samplers_of` says of draws it cannot check
UNIFORM_ONLY = "covers the uniform design only"


def validation_view(task: Any, engine: Any, out_of_core: bool | None) -> BundleView | None:
    """The engine path's view of the bundle path ``task`` with every check above passed, or
    None for the in-memory path.  ValueError when ``out_of_core`` asks for it and it cannot."""
    from receval.bundle import Bundle
    from receval.engine.sampled_data import read_small_tables
    from receval.engine.score import ENGINE_PATH_ROWS, BundleView, parquet_rows, summarise_bundle

    if out_of_core is False or not isinstance(task, (str, Path)):
        if out_of_core and not isinstance(task, (str, Path)):
            raise ValueError("out_of_core needs a bundle path, not a loaded task")
        return None
    bundle = Bundle(task)
    bundle.check_folder()
    rows = parquet_rows(bundle)
    if rows is None or (out_of_core is None and rows < ENGINE_PATH_ROWS):
        if out_of_core:
            raise ValueError(
                "--out-of-core reads Parquet runs; this bundle's runs are text tables "
                "(convert them to Parquet, or validate in memory)"
            )
        return None
    small = read_small_tables(bundle, truth=True)
    problem = unsupported(small)
    if problem:
        if out_of_core:
            raise ValueError(f"validate --out-of-core cannot check {problem}; use --in-memory")
        return None
    check_run_files(bundle.parquet_runs() or [])
    name = engine if isinstance(engine, str) else getattr(engine, "name", "duckdb")
    summary = summarise_bundle(bundle, small, engine)
    judge = None
    if bundle.table("judge") is not None:  # checked as the loader checks it; strata rounds
        from receval.engine.judge import open_engine_judge

        judge = open_engine_judge(bundle, small, summary, engine)
    view = BundleView(
        root=bundle.root, small=small, summary=summary, engine_name=name, engine_judge=judge
    )
    try:
        view.samplers  # noqa: B018 - the draws checked against the outputs
    except BundleError as exc:
        if out_of_core or UNIFORM_ONLY not in str(exc):
            raise
        return None  # draws of another design (undeclared): the loader infers and checks it
    return view


def unsupported(small: SmallTables) -> str:
    """What of the small tables the engine path does not check ('' when it checks them all)."""
    from receval.engine.plan_designs import is_strata

    for table in small.optional:
        if (table == "truth" and small.truth is not None) or table == "judge":
            continue
        return f"{table}.tsv (the engine path reads no {table.replace('_', ' ')} table)"
    if "design" in small.samples:
        designs = set(small.samples["design"].astype(str).str.strip())
        designs = {d for d in designs if not is_strata(d)} - {"", "uniform", "entity-relation"}
        if designs:
            return (
                f"sample design {sorted(designs)[0]} in samples.tsv (the engine path checks "
                "uniform, entity-relation and judge-strata draws)"
            )
    return ""


def check_run_files(sources: list[tuple[Path, dict[str, str]]]) -> None:
    """Each Parquet run file's schema through the loader's checks (same messages: the header,
    nested types, required columns; :mod:`receval.bundle.sources`), then the engine's
    (:func:`~receval.engine.run_files.check_run_schema`), reading no row."""
    from receval.engine.run_files import check_run_schema

    for path, keys in sources:
        _loader_schema_check(path, keys)
        check_run_schema(path, keys)


def _loader_schema_check(path: Path, keys: dict[str, str]) -> None:
    """The loader's reading of a run file (:func:`receval.bundle.sources._read_run_file` for
    ``runs/<system>.parquet``, ``_read_run_part`` otherwise) on an empty table of its schema."""
    from receval.bundle.sources import _RUN_CODED, NUMERIC, _require, _set_constant
    from receval.formats.coded import coded_from_arrow
    from receval.formats.tables import _parquet_errors, _parquet_module

    pq = _parquet_module(path)
    with _parquet_errors(path):
        schema = pq.read_schema(path)
    table = coded_from_arrow(schema.empty_table(), path, NUMERIC, coded=_RUN_CODED)
    if path.parent.name == "runs" and keys.get("system") == path.stem:
        _require(table, ("query_id", "answer"), "runs")
        _set_constant(table, "system", path.stem, f"file name {path.stem!r}")
        return
    for key, value in keys.items():
        _set_constant(table, key, value, f"partition folder {key}={value}")
    _require(table, ("system", "query_id", "answer"), "runs")


def view_summary(view: BundleView) -> dict[str, int | str]:
    """The counts ``receval validate`` prints (:meth:`receval.task.Task.summary`), from the
    runs' aggregates and the small tables."""
    from receval.engine.score import _fact_systems

    merged = view.merged
    in_pool = _fact_systems(view) > 0
    empty = view.empty_systems
    return {
        "task": view.name,
        "systems": len(view.systems),
        "teams": len(set(view.teams.values())),
        "queries": len(view.queries),
        "outputs": int(view.summary.sizes.sum()),
        "duplicate output rows collapsed": view.duplicate_rows,
        "distinct facts output": view.pool_size,
        "judgments": len(view.judgments),
        "judged facts": len(merged.labels),
        "judged facts output by a system": int(in_pool.reindex(merged.labels.index).sum()),
        "annotators": int(view.judgments["annotator"].replace("", np.nan).nunique()),
        "conflicts": len(merged.conflicts),
        "sample draws": len(view.samples),
        "samples": int(view.samples["sample"].nunique()),
        "exhaustive units": len(view.exhaustive_units),
        "exhaustive facts": int(view.exhaustive["fact"].nunique()),
        **({"empty submissions": len(empty)} if empty else {}),
        "truth": "yes" if view.truth is not None else "no",
    }
