"""The official closed-world census and its leave-one-team-out variant, run by an engine.

For bundles matched on facts (:func:`fact_matched`: no provenance on both sides, no equivalence
classes or mention types, no ``hop`` column on the runs), these equal
:func:`receval.official.scores.official_scores` count for count (tests check it), with the
same policy (:class:`~receval.official.rules.OfficialPolicy`).  TAC bundles, whose classes
span facts and whose matching uses provenance, stay with the pandas scorer.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import numpy as np
import pandas as pd

from receval.engine.base import DuckDBEngine, Engine
from receval.engine.spark_runs import _skeleton, read_runs, run_layout
from receval.errors import BundleError
from receval.formats.coded import codes_in as recode
from receval.official.rules import (
    COUNT_COLUMNS,
    fact_matched,
    hop0_queries,
    official_rates,
    policy_words,
)
from receval.official.sql import (
    CATEGORY_CODES,
    GROUND_TRUTH,
    GROUND_TRUTH_LOST,
    LEAVE_TEAM_OUT_COUNTS,
    OFFICIAL_COUNTS,
)
from receval.task import Task


def coded_tables(task: Task) -> dict[str, pd.DataFrame]:
    """The integer-coded ``responses``, ``judgments`` and ``queries`` tables of
    :mod:`receval.engine.queries` (codes: systems and teams in sorted order, queries in
    ``hop0_queries`` order; facts are the task's fact ids)."""
    queries = hop0_queries(task)
    query_code = pd.Index(queries["query_id"])
    raw = task.raw_outputs
    q = recode(raw["query_id"], query_code)
    keep = q >= 0
    every = bool(keep.all())
    systems = pd.Index(task.systems)
    teams = pd.Index(sorted(set(task.teams.values())))
    fact = raw["fact"].to_numpy(np.int64)
    if len(task.facts) < np.iinfo(np.int32).max:  # 4 bytes per response row
        fact = fact.astype(np.int32)
    responses = pd.DataFrame(
        {
            "sys": _narrow(recode(raw["system"], systems), len(systems)),
            "team": _narrow(recode(raw["team"], teams), len(teams)),
            "query": _narrow(q, len(query_code)),
            "fact": fact,
            "single": queries["single"].to_numpy().astype(np.int8)[q],
        },
        copy=False,
    )
    if not every:
        responses = responses[keep].reset_index(drop=True)
    judg = task.judgments
    jq = query_code.get_indexer(judg["query_id"])
    jkeep = jq >= 0
    judgments = pd.DataFrame(
        {
            "query": jq[jkeep].astype(np.int64),
            "fact": judg["fact"].to_numpy(np.int64)[jkeep],
            "category": judg["category"].map(CATEGORY_CODES).to_numpy(np.int64)[jkeep],
            "ord": np.flatnonzero(jkeep).astype(np.int64),
        }
    )
    judged = np.zeros(len(queries), dtype=np.int64)
    judged[jq[jkeep]] = 1
    coded_queries = pd.DataFrame(
        {
            "query": np.arange(len(queries), dtype=np.int64),
            "single": queries["single"],
            "judged": judged,
        }
    )
    return {"responses": responses, "judgments": judgments, "queries": coded_queries}


def _narrow(codes: np.ndarray, n: int) -> np.ndarray:
    """Codes in the smallest integer type that holds ``n`` and -1."""
    for kind in (np.int16, np.int32):
        if n < np.iinfo(kind).max:
            return codes.astype(kind)
    return codes.astype(np.int64)


#: each task's embedded DuckDB, kept while the task lives (a Task is frozen: nothing is written
#: into it)
_TASK_ENGINES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def default_engine(task: Task) -> Engine:
    """The DuckDB engine of ``task`` (one per task, so its coded tables are registered once);
    at most 4 GB, it spills to the system's temporary folder when a join does not fit."""
    engine = _TASK_ENGINES.get(task)
    if engine is None:
        import tempfile

        engine = DuckDBEngine(
            memory_limit="4GB", temp_directory=Path(tempfile.gettempdir()) / "receval-duckdb"
        )
        _TASK_ENGINES[task] = engine
    return engine


def _policy_words(task: Task, policy) -> dict[str, str]:
    """The policy's choices as the census SQL spells them (``ignore`` -> ``ignored``)."""
    word = {"right": "right", "wrong": "wrong", "ignore": "ignored"}
    return {key: word[choice] for key, choice in policy_words(task, policy).items()}


def _register(task: Task, engine: Engine) -> None:
    """Register the coded tables of ``task`` (once per task and engine: a Task is not changed
    after it is built; ``dataclasses.replace`` makes a new one)."""
    if getattr(engine, "_registered_task", None) is task:
        return
    reads_runs = getattr(engine, "register_census_runs", None)  # Spark reads Parquet runs itself
    if reads_runs is None or not reads_runs(task):
        for name, table in coded_tables(task).items():
            engine.register(name, table)
    engine._registered_task = task
    engine._ground_truth = None
    engine._census = {}


def _ground_truth(engine: Engine) -> int:
    """CS-Score's recall denominator of the registered task (counted once per task)."""
    if getattr(engine, "_ground_truth", None) is None:
        engine._ground_truth = int(engine.query(GROUND_TRUTH)["gt"].iloc[0])
    return engine._ground_truth


def _counts(raw: pd.DataFrame, n_systems: int, words: dict[str, str]) -> pd.DataFrame:
    """Per-system count columns from the COUNTS query (systems without rows get zeros)."""
    raw = raw.set_index("sys").reindex(np.arange(n_systems), fill_value=0).astype(np.int64)
    duplicates = raw["eligible"] - raw["first_right"]
    right = raw["first_right"] + (duplicates if words["duplicate"] == "right" else 0)
    wrong = raw["wrong_rows"] + (duplicates if words["duplicate"] == "wrong" else 0)

    # the columns the COUNTS query returns as they are: official's count columns before the
    # policy-dependent ones (duplicates, right, wrong, ...)
    out = raw[COUNT_COLUMNS[: COUNT_COLUMNS.index("duplicates")]].copy()
    out["duplicates"] = duplicates
    out["right"] = right
    out["wrong"] = wrong
    out["ignored"] = raw["outputs"] - right - wrong
    if "evaluated" in raw.columns:
        out["evaluated"] = raw["evaluated"]
    return out


def rates(right, wrong, gt) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Micro precision, recall, F1 and the official note, with the official scorer's
    conventions (:func:`receval.official.rules.official_rates`: a 0/0 ratio is reported as 0, as
    CS-Score prints it, and the note says so)."""

    frame = official_rates(pd.DataFrame({"right": right, "wrong": wrong, "gt": gt}))
    return (
        frame["precision"].to_numpy(float),
        frame["recall"].to_numpy(float),
        frame["f1"].to_numpy(float),
        frame["note"].tolist(),
    )


def official_census(task: Task, engine: Engine, policy=None) -> pd.DataFrame:
    """The official hop-0 micro census per system, computed by ``engine``.

    Returns the columns of :func:`receval.official.scores.official_scores` (``system, team``,
    count columns, ``queries, precision, recall, f1, note``), equal to it for fact-matched
    bundles (micro average, no cutoff).  A
    census of the assessed pool: no sampling uncertainty, biased for true precision and recall
    (see :mod:`receval.official.scores`).

    Raises
    ------
    ValueError
        When the bundle is not fact-matched (:func:`fact_matched`).
    """
    if not fact_matched(task):
        raise ValueError(
            "the engine census covers fact-matched bundles (no provenance, no equivalence "
            "classes); use receval.official.scores.official_scores"
        )
    words = _policy_words(task, policy)
    _register(task, engine)
    key = tuple(sorted(words.items()))
    if key not in engine._census:  # the score and the pooling-bias diagnostic share it
        engine._census[key] = _census(task, engine, words)
    return engine._census[key].copy()


def _census(task: Task, engine: Engine, words: dict[str, str]) -> pd.DataFrame:

    counts = _counts(engine.query(OFFICIAL_COUNTS.format(**words)), len(task.systems), words)
    counts["gt"] = _ground_truth(engine)
    precision, recall, f1, notes = rates(counts["right"], counts["wrong"], counts["gt"])
    out = pd.DataFrame({"system": task.systems})
    out["team"] = out["system"].map(task.teams)
    for col in COUNT_COLUMNS:
        out[col] = counts[col].to_numpy(np.int64)
    out["queries"] = counts["evaluated"].to_numpy(np.int64)
    out["precision"], out["recall"], out["f1"], out["note"] = precision, recall, f1, notes
    return out


def leave_team_out(task: Task, engine: Engine, policy=None) -> pd.DataFrame:
    """Official P/R/F1 of every system with its team's unique facts left out of the pool.

    One pass (no re-scoring per team): per-fact team counts mark the responses on facts only
    their own team output, which lose their assessment (unassessed), and the classes those
    facts made leave the recall denominator.  Index ``system``; columns ``right, wrong, gt,
    precision, recall, f1``.  Fact-matched bundles only (else ValueError).
    """
    if not fact_matched(task):
        raise ValueError("leave_team_out in the engine needs a fact-matched bundle")
    words = _policy_words(task, policy)
    _register(task, engine)
    n = len(task.systems)
    counts = _counts(engine.query(LEAVE_TEAM_OUT_COUNTS.format(**words)), n, words)
    gt = _ground_truth(engine)
    teams = sorted(set(task.teams.values()))
    lost = engine.query(GROUND_TRUTH_LOST).set_index("team")["lost"]
    lost = lost.reindex(np.arange(len(teams)), fill_value=0).to_numpy(np.int64)
    team_of = pd.Index(teams).get_indexer([task.teams[s] for s in task.systems])
    gt_lto = gt - lost[team_of]
    precision, recall, f1, _ = rates(counts["right"], counts["wrong"], gt_lto)
    return pd.DataFrame(
        {
            "right": counts["right"].to_numpy(np.int64),
            "wrong": counts["wrong"].to_numpy(np.int64),
            "gt": gt_lto,
            "precision": precision,
            "recall": recall,
            "f1": f1,
        },
        index=pd.Index(task.systems, name="system"),
    )


def bundle_census(root: Path | str, engine, runs: str | None = None, policy=None):
    """The official census and the leave-one-team-out counts of the bundle at ``root`` without
    loading its runs in Python: the small tables (``task.toml``, queries, judgments) are read
    by the loader, the runs by Spark from ``runs`` (default: the bundle folder; any path Spark
    reads, e.g. ``hdfs://…/runs.parquet``).  Returns ``(census, leave_team_out)`` as
    :func:`official_census` and :func:`leave_team_out` do.

    Fact-matched bundles only (no ``hop`` or ``provenance`` column on the runs, no equivalence
    classes): else BundleError."""
    root = Path(root)
    location = runs or root.resolve().as_uri()
    layout = run_layout(engine.spark, location)
    if layout is None:
        raise BundleError(location, None, "Spark reads Parquet runs; these are text tables")
    frame = read_runs(engine.spark, layout)
    task = _skeleton(root, engine.spark, layout, frame)
    engine.register_census_runs(task, location)
    engine._registered_task, engine._ground_truth, engine._census = task, None, {}
    return official_census(task, engine, policy), leave_team_out(task, engine, policy)
