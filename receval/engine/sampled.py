"""The sampled path in SQL: per-system sizes, draws and the membership of drawn facts,
computed by the engine over the runs (Parquet files on disk), so Python holds only the draws.

A uniform ``--per-system`` round (:func:`sample_round`) is drawn by :mod:`receval.engine.draws`:
draws are a deterministic function of ``(seed, round, system, draw index)`` and the system's
set of facts, the same on every engine and however the runs are split into files; the k-th of
a system's facts in ``(query_id, last character of the answer, answer)`` order, ``k`` uniform
from the MD5 of ``seed ␟ round ␟ system ␟ draw`` (:func:`receval.draw_hash.draw_uniform`).  No
output row is hashed.  The in-memory ``sample`` draws the same facts
(:func:`receval.design.hashed_precision_samples`).

In Python a drawn fact ``x = (query_id, normalised answer)`` is named by a key ``h(x)``: the
first 60 bits of the MD5 of ``query_id ␟ answer`` (:func:`python_key`).  Two facts with the same
60-bit key would count as one (probability about N² / 2⁶¹ for N facts).  The SQL normalises
answers per ``[matching]`` exactly as Python does (:mod:`receval.engine.matching`: the
``str.isspace`` class, full case folding; a normal form the engine lacks, NFKC in DuckDB, is
refused).

The SQL texts of the draws are in :mod:`receval.engine.draws`, those of scoring out of core in
:mod:`receval.engine.summary`; the engine-specific spellings in :mod:`receval.engine.dialect`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.draw_hash import SEP, draw_uniform, python_key, random_order
from receval.engine.draws import entity_relation_weights
from receval.engine.run_files import (
    OPTIONAL_RUN_COLUMNS,
    RUN_COLUMNS,
    answer_as_read,
    check_run_schema,
    create_view,
    trimmed,
)
from receval.errors import BundleError

if TYPE_CHECKING:
    from receval.config import Matching
    from receval.engine.base import Engine

# ---------------------------------------------------------------------------------------------
# the runs as one view


def register_runs(
    engine: Engine, sources: list[tuple[Path, dict[str, str]]], *, strip: bool
) -> None:
    """Register the Parquet run files as one view ``runs(system, query_id, answer, team)``
    (text; ``system``, ``query_id``, ``team`` trimmed, ``answer`` per ``strip`` = ``[matching]
    strip``: :func:`~receval.engine.run_files.answer_as_read`; ``team`` NULL where a file has
    none); a file's location (``runs/A.parquet``, ``runs/system=A/``) sets its ``system``."""
    import pyarrow.parquet as pq

    if engine.name == "spark":  # one scan per schema, not one per file
        from receval.engine.spark_runs import register_parquet_runs

        register_parquet_runs(engine, sources, strip=strip)
        return
    parts = []
    engine.run_teams = False  # whether some file has a team column (RUN_CELLS skips it if not)
    for i, (path, keys) in enumerate(sources):
        check_run_schema(path, keys)
        present = set(pq.read_schema(path).names)
        engine.run_teams |= "team" in present or "team" in keys
        name = f"runs_part_{i}"
        engine.register(name, path)
        columns = []
        for column in (*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS):
            if column in keys:
                value = keys[column].replace("'", "''")
                columns.append(f"'{value}' AS {column}")
            elif column == "answer":
                columns.append(f"{answer_as_read('CAST(answer AS STRING)', strip=strip)} AS answer")
            elif column in present:
                columns.append(f"{trimmed(f'CAST({column} AS STRING)')} AS {column}")
            else:
                columns.append(f"CAST(NULL AS STRING) AS {column}")
        parts.append(f"SELECT {', '.join(columns)} FROM {name}")
    create_view(engine, "runs", "\nUNION ALL\n".join(parts))


def normalised_answer_sql(engine: Engine, matching: Matching | None, column: str = "answer") -> str:
    """SQL of ``column`` normalised per ``[matching]``, equal to
    :func:`receval.task.normalize_answers` character for character
    (:func:`receval.engine.matching.normalise_steps`: the explicit ``str.isspace`` class, full
    case folding from ``str.casefold``, the engine's normal forms; a normal form the engine lacks
    is a ``ValueError``)."""
    from receval.engine.matching import normalise_steps

    if matching is None:
        from receval.config import Matching

        matching = Matching()
    sql = column
    for step in normalise_steps(matching, engine.dialect):
        sql = step.format(s=f"({sql})")
    if not matching.strip:  # blank stays blank (the loader refuses it whatever strip says)
        from receval.engine.matching import _whitespace

        blank = engine.dialect.regexp_matches(column, f"\\A{_whitespace()}*\\z")
        sql = f"CASE WHEN {blank} THEN '' ELSE {sql} END"
    if sql == column:
        return sql
    # printable ASCII without a leading, trailing or repeated space is its own normal form
    # but for case: one regular expression instead of the whole chain on most answers
    plain = engine.dialect.regexp_matches(column, "[^\\x{20}-\\x{7e}]|  |\\A | \\z")
    fast = f"lower({column})" if matching.casefold else column
    return f"CASE WHEN {plain} THEN {sql} ELSE {fast} END"


# ---------------------------------------------------------------------------------------------
# a whole round


def _normalised_facts(
    query_id: pd.Series, answer: pd.Series, matching: Matching
) -> tuple[np.ndarray, np.ndarray]:
    """(query ids stripped, answers normalised in Python as the loader does) of a small
    table (samples, judgments)."""
    from receval.task import normalize_answers

    norm = normalize_answers(answer.astype(str), matching).astype(str).to_numpy(object)
    return query_id.astype(str).str.strip().to_numpy(object), norm


def _fact_keys(query_id: pd.Series, answer: pd.Series, matching: Matching) -> np.ndarray:
    """The 60-bit key of each (query, answer) of a small table (samples, judgments), its answer
    normalised in Python as the loader does."""
    queries, norm = _normalised_facts(query_id, answer, matching)
    texts = [f"{q}{SEP}{a}" for q, a in zip(queries, norm, strict=True)]
    return np.fromiter((python_key(t) for t in texts), dtype=np.int64, count=len(texts))


def labelled_keys(judgments: pd.DataFrame, config) -> np.ndarray:
    """Keys of the facts the ``[merge]`` rule gives a label (``judgments`` as the loader
    checks it)."""
    from receval.merge import merge_labels

    if judgments.empty:
        return np.empty(0, np.int64)
    frame = judgments.assign(
        fact=_fact_keys(judgments["query_id"], judgments["answer"], config.matching)
    )
    merged = merge_labels(frame, config.merge_rule, config.tie_policy)
    return np.asarray(merged.labels.index, dtype=np.int64)


def _to_annotate(
    engine: Engine,
    keys: np.ndarray,
    spelled: pd.DataFrame,
    matching: Matching,
    forms: dict,
    batches: list[list[str]] | None = None,
    also: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``to_annotate.tsv`` fact rows of ``keys``: the spelling of the first system (in sorted
    order) that drew the fact (``spelled``: ``h, system, query_id, answer`` of the draws of this
    round and earlier ones), how many systems output it (:func:`receval.engine.draws.members`);
    and those members (``h, system``), of the facts of ``also`` too (one scan)."""
    from receval.engine import draws as drawing

    wanted = keys if also is None else np.union1d(keys, also)
    first = (
        spelled[spelled["h"].isin(wanted)]
        .sort_values(["h", "system"])
        .drop_duplicates("h")
        .set_index("h")
    )
    queries, norm = _normalised_facts(first["query_id"], first["answer"], matching)
    members = drawing.members(
        engine,
        forms=forms,
        facts=pd.DataFrame(
            {"h": first.index.to_numpy(np.int64), "query_id": queries, "answer": norm}
        ),
        batches=_batch_views(engine, "runs", batches),
    )
    counts = members.groupby("h", sort=True)["system"].size()
    first = first[first.index.isin(keys)]
    out = pd.DataFrame(
        {
            "kind": "fact",
            "query_id": first["query_id"].to_numpy(),
            "answer": first["answer"].to_numpy(),
            "systems": counts.reindex(first.index).fillna(0).to_numpy(np.int64),
        }
    )
    out = out.sort_values(["query_id", "answer"], ignore_index=True)
    out["unit"] = ""
    out["prob"] = np.nan
    return out, members


def _count_cells(
    engine: Engine,
    matching: Matching,
    batches: list[list[str]] | None = None,
    copies: bool = False,
    missing: int | None = None,
) -> tuple[dict[str, str], pd.DataFrame]:
    """Views ``normed_runs`` and (materialised) ``fact_cells`` of :mod:`receval.engine.draws`
    (with ``batches``: one batch of systems at a time, :func:`run_batches`); returns the normal
    forms of a column ``answer_raw`` (for its :data:`~receval.engine.draws.PICK` and
    :data:`~receval.engine.draws.MEMBERS`) and N_j per system.  With ``copies``, the cells
    count input rows too (:data:`~receval.engine.draws.COPIES`); with ``missing`` (the level of
    an ungraded fact), they are split by the judge's level (a registered ``fact_levels``:
    :data:`~receval.engine.draws.LEVEL_CELLS`)."""
    from receval.engine import draws as drawing

    def forms(column: str) -> dict[str, str]:
        full = normalised_answer_sql(engine, matching, column)
        return drawing.answer_forms(engine.dialect, full, column, matching.casefold)

    raw = forms("answer_raw")
    odd = forms("answer")["odd"]  # the inner query's, before ``answer`` is renamed
    normed = drawing.NORMED_RUNS.format(odd=odd, fast=raw["fast"], full=raw["full"])
    create_view(engine, "normed_runs", normed)
    tail = drawing.TAIL.format(a="answer")
    view = "normed_runs"
    if missing is not None:  # the judge-strata design: cells per level too
        create_view(engine, "levelled_runs", drawing.LEVELLED_RUNS.format(missing=int(missing)))
        view = "levelled_runs"
    sources = _batch_views(engine, view, batches) or [view]
    for i, source in enumerate(sources):
        counts = drawing.COPIES if copies else dict.fromkeys(drawing.COPIES, "")
        cells = drawing.CELLS.format(tail=tail, source=source, **counts)
        if missing is not None:
            cells = drawing.LEVEL_CELLS.format(tail=tail, source=source)
        if i == 0:
            create_view(engine, "fact_cells", cells, materialise=True)
        else:
            engine.con.execute(f"INSERT INTO fact_cells {cells}")
    return raw, drawing.sizes(engine)


#: a batch of :func:`run_batches`: at most this many run files and rows (a larger file alone)
BATCH_FILES = 10
BATCH_ROWS = 5_000_000


def run_batches(engine: Engine, sources: list[tuple[Path, dict[str, str]]] | None):
    """The systems cut into batches of at most :data:`BATCH_FILES` files and
    :data:`BATCH_ROWS` rows (Parquet metadata), in DuckDB when every file holds one system's
    rows; else None (one query over ``runs``).  The ``runs`` view is a UNION ALL of one scan per
    file: an aggregate over a hundred such branches keeps state per branch and ran out of
    1 GiB within seconds at 2·10⁸ rows; a batch's filter on ``system`` prunes the other
    branches."""
    import pyarrow.parquet as pq

    if engine.name != "duckdb" or not sources or any("system" not in k for _, k in sources):
        return None
    rows: dict[str, int] = {}
    files: dict[str, int] = {}
    for path, keys in sources:
        rows[keys["system"]] = rows.get(keys["system"], 0) + pq.ParquetFile(path).metadata.num_rows
        files[keys["system"]] = files.get(keys["system"], 0) + 1
    batches: list[list[str]] = []
    size = count = 0
    for system in sorted(rows):
        n, f = rows[system], files[system]
        if not batches or (batches[-1] and (size + n > BATCH_ROWS or count + f > BATCH_FILES)):
            batches.append([])
            size = count = 0
        batches[-1].append(system)
        size, count = size + n, count + f
    return batches


def _batch_views(engine: Engine, view: str, batches: list[list[str]] | None) -> list[str] | None:
    """``view`` restricted to each batch's systems, as subqueries (None without batches)."""
    if not batches:
        return None
    out = []
    for batch in batches:
        names = ", ".join(engine.dialect.literal(s) for s in batch)
        out.append(f"(SELECT * FROM {view} WHERE system IN ({names}))")
    return out


def entity_relation_cells(engine: Engine, queries: pd.DataFrame) -> pd.DataFrame:
    """``system, query_id, facts, weight`` of the ``entity-relation`` design
    (:func:`receval.design.sampling_probabilities`; Chaganty et al. 2017's evaluation service):
    w_jq = (#distinct facts of subj(q) in X_j) / (#input rows of X_j with subj(q) · #input
    rows of X_j with rel(q)), the same for every fact of query q, from the distinct facts and
    input rows per (system, query) (:data:`~receval.engine.draws.QUERY_SIZES`); subj is the
    query's ``entity`` (default: the query id), rel its ``slot`` (default: one relation)."""
    from receval.engine import draws as drawing

    cells = engine.query(drawing.QUERY_SIZES)
    cells = cells.astype({"facts": np.int64, "copies": np.int64})
    cells = cells.sort_values(["system", "query_id"], ignore_index=True)
    return entity_relation_weights(cells, queries)[["system", "query_id", "facts", "weight"]]


def _samples_frame(
    draws: pd.DataFrame, name: str, seed: int, k: int, design: str = "uniform"
) -> pd.DataFrame:
    """The round's ``samples.tsv`` rows in the random order the keys give (``order`` = random)."""
    from receval.design import ORDER_COLUMN, RANDOM_ORDER

    frame = pd.DataFrame(
        {
            "sample": name,
            "system": draws["system"].to_numpy(),
            "query_id": draws["query_id"].to_numpy(),
            "answer": draws["answer_raw"].to_numpy(),
            "prob": draws["prob"].to_numpy(float),
            "draw": draws["draw"].to_numpy(np.int64),
            "design": design,
        }
    )
    if "mixture" in draws:
        from receval.estimators.anytime.stream import MIXTURE_COLUMN

        frame[MIXTURE_COLUMN] = draws["mixture"].to_numpy(float)
    order = random_order(seed, k, frame["system"].to_numpy(), frame["draw"].to_numpy())
    frame = frame.iloc[order].reset_index(drop=True)
    frame[ORDER_COLUMN] = RANDOM_ORDER
    return frame


#: the designs :func:`sample_round` draws (``distribution``; ``--by-judge`` besides)
ENGINE_DESIGNS = ("uniform", "entity-relation")


def sample_round(
    bundle,
    per_system: int | dict[str, int],
    *,
    seed: int,
    systems: list[str] | None = None,
    name: str | None = None,
    engine: str = "duckdb",
    distribution: str = "uniform",
    by_judge: bool = False,
    units: pd.DataFrame | None = None,
    exhaustive_units: int = 0,
    focus: dict[str, int] | None = None,
):
    """A ``--per-system`` round drawn in the engine (module docstring): the runs are read by
    SQL (Parquet files on disk; other formats are loaded and registered as a frame), Python
    holds the draws, the bundle's small tables and per-system aggregates only.

    ``distribution``: ``uniform`` (:func:`receval.engine.draws.draw_ranks`) or
    ``entity-relation`` (:func:`entity_relation_cells`, :func:`receval.engine.draws.weighted_ranks`);
    ``by_judge``: the ``judge-strata`` design over the judge's levels (:func:`judge_strata`,
    :func:`receval.engine.draws.strata_ranks`); ``exhaustive_units`` units from ``units``
    (:func:`receval.design.hashed_units`).  With ``focus`` (``--until-decided``: per system its focus draws),
    a system's draws beyond its focus count are floor draws, recorded with ``mixture_prob`` =
    q₀(x) = (1/m) Σ_j 1/|X_j| over the systems that output x (m: the systems with outputs), the
    in-memory :func:`receval.until_decided.floor_probabilities` from the drawn facts' members.
    Returns a
    :class:`receval.design.SampleRound`, recorded with
    :meth:`receval.bundle.Bundle.record_round`.  The draws are a function of (seed, round,
    system, draw index) and the system's facts: the same on every engine and file layout.
    """
    from receval.config import load_config
    from receval.design import SampleRound, hashed_units, next_round_name, with_unit_rows
    from receval.task import _check_judgments, _check_queries, _check_samples, _table_source

    if distribution not in ENGINE_DESIGNS:
        raise ValueError(f"the engine path draws uniform or entity-relation, not {distribution!r}")
    if exhaustive_units and units is None:
        raise ValueError("exhaustive units need a table of candidate units")
    bundle.check_folder()
    root = Path(bundle.root)
    files: dict[str, Path] = {}
    config = load_config(root / "task.toml", default_name=root.resolve().name)
    queries = _check_queries(_table_source(root, "queries", files))
    known = set(queries["query_id"])
    samples = _check_samples(_table_source(root, "samples", files), known)
    judgments = _check_judgments(_table_source(root, "judgments", files), config, known)
    default, k = next_round_name(samples)
    name = name or default
    if len(samples) and name in set(samples["sample"]):
        raise ValueError(f"sample round {name!r} exists already; choose another --name")
    with _round_engine(bundle, engine) as con:
        strata = _round_strata(con, root, files, config, queries, judgments, samples, by_judge)
        batches = run_batches(con, bundle.parquet_runs())
        weighted = distribution == "entity-relation"
        if strata is not None:
            con.register("fact_levels", strata.levels)
        missing = None if strata is None else strata.missing
        forms, sizes = _count_cells(con, config.matching, batches, weighted, missing)
        unknown = sorted(set(systems or ()) - set(sizes["system"]))
        if unknown:
            raise ValueError(f"unknown system(s): {', '.join(unknown)}")
        everyone = sorted(sizes["system"]) if systems is None else sorted(systems)
        wanted = per_system if isinstance(per_system, dict) else dict.fromkeys(everyone, per_system)
        uniforms = {
            s: draw_uniform(seed, k, s, max(int(n), 0)) for s, n in wanted.items() if s in everyone
        }
        if strata is not None:
            draws = _pick_strata(con, strata, sizes, uniforms, forms, batches)
        else:
            draws = _pick(con, sizes, uniforms, forms, batches, queries if weighted else None)
        also = None
        if focus is not None:
            before = draws["system"].map(focus).fillna(0).to_numpy(np.int64)
            also = draws["draw"].to_numpy(np.int64) > before
        to_annotate, members = _round_to_annotate(
            con, draws, samples, judgments, config, forms, batches, also
        )
    design = distribution if strata is None else strata.design
    if focus is not None:
        draws = draws.assign(mixture=_floor_mixture(draws, also, members, sizes, config))
    frame = _samples_frame(draws, name, seed, k, design)
    unit_rows = pd.DataFrame(columns=["unit", "prob"])
    if exhaustive_units:
        unit_rows = hashed_units(units, exhaustive_units, seed, k, _done_units(root, files))
        to_annotate = with_unit_rows(to_annotate, unit_rows)
    to_annotate["label"] = ""
    to_annotate["annotator"] = ""
    counts = frame.groupby("system").size().to_dict() if len(frame) else {}
    return SampleRound(
        name=name, samples=frame, units=unit_rows, to_annotate=to_annotate, sizes=counts
    )


def _round_strata(con, root, files, config, queries, judgments, samples, by_judge: bool):
    """The ``--by-judge`` round's :class:`JudgeStrata` (None without ``by_judge``), the judge
    table checked as the loader checks it (:func:`one_grade_check` over ``con``'s runs)."""
    if not by_judge:
        return None
    parts = [f[["query_id", "answer"]] for f in (judgments, samples) if len(f)]
    facts = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame({"query_id": [], "answer": []}, dtype=object)
    )
    queries_, answers = _normalised_facts(facts["query_id"], facts["answer"], config.matching)
    small = pd.DataFrame({"query_id": queries_, "answer": answers}).drop_duplicates()
    check = one_grade_check(con, small, config.matching)
    return task_strata(judge_task(root, files, config, queries, judgments, check))


def _pick(con, sizes, uniforms, forms, batches, queries: pd.DataFrame | None) -> pd.DataFrame:
    """The round's draws (:func:`receval.engine.draws.pick_draws`): uniform, or with
    ``queries`` the ``entity-relation`` design."""
    from receval.engine import draws as drawing

    if queries is None:
        ranks = drawing.draw_ranks(sizes, uniforms)
    else:
        ranks = drawing.weighted_ranks(entity_relation_cells(con, queries), uniforms)
    return drawing.pick_draws(con, ranks, forms, _batch_views(con, "runs", batches))


@dataclass(frozen=True)
class JudgeStrata:
    """A ``judge-strata`` design for the engine: its name (``judge-strata:<judge>:<u_0>,…``),
    the stratum weights u parsed back from it (what the estimators read), the level of an
    ungraded fact, and ``levels``: ``query_id, answer, level`` of the graded facts (answers
    normalised)."""

    design: str
    weights: np.ndarray
    missing: int
    levels: pd.DataFrame


def judge_strata(root: Path, files: dict, config, queries, judgments) -> JudgeStrata:
    """The ``sample --by-judge`` design of the bundle at ``root``
    (:func:`receval.estimators.judge_calibration.judge_strata_design`) and its judge's levels
    (:func:`receval.judge.judge_levels`), from ``judge.tsv`` and the labels only
    (:func:`judge_task`)."""
    return task_strata(judge_task(root, files, config, queries, judgments))


def judge_task(root: Path, files: dict, config, queries, judgments, check=None):
    """A :class:`receval.task.Task` whose one run ``judge`` outputs the facts of the judge and
    judgments tables, with the bundle's judge table, judgments and queries: what the loader
    computes of the judge alone (its levels, its calibration on the labels) is the same on it
    as on the whole task (the levels are ranks over the graded facts in (query, answer) order;
    only the facts of the judge table are read into Python).  BundleError without a judge
    table; ``check(frame, path)`` (:func:`one_grade_check`) runs on the checked table before
    the task is built."""
    from receval.judge import check_judge_table
    from receval.task import LINE, Task, _table_source

    source = _table_source(root, "judge", files)
    if source is None:
        raise BundleError(
            root / "judge.tsv",
            None,
            "--by-judge needs the judge's scores (judge.tsv with query_id, answer, judge_score)",
        )
    judge = source.frame.drop(columns=[LINE], errors="ignore").copy()  # as read
    checked = check_judge_table(source, set(queries["query_id"]), config)
    if check is not None:
        check(checked, source.path)
    labelled = judgments[["query_id", "answer_raw" if "answer_raw" in judgments else "answer"]]
    facts = pd.concat(
        [judge[["query_id", "answer"]], labelled.set_axis(["query_id", "answer"], axis=1)],
        ignore_index=True,
    ).drop_duplicates()
    return Task.from_frames(
        runs=facts.assign(system="judge"),
        judgments=_raw(root, "judgments", files),
        judge=judge,
        queries=queries.drop(columns=[LINE], errors="ignore"),
        config=config,
    )


#: how many distinct facts of the runs (``normed``), the judge table and the small tables
#: (``grade_facts``) sort before (``{q}``, ``{a}``): the loader's id of that fact
FACTS_BEFORE = """
SELECT count(*) AS n FROM (
    SELECT query_id, answer FROM {runs} r UNION SELECT query_id, answer FROM grade_facts
) x WHERE query_id < {q} OR (query_id = {q} AND answer < {a})
"""


def one_grade_check(engine: Engine, facts: pd.DataFrame, matching: Matching, runs: str = ""):
    """``check(frame, path)`` for :func:`judge_task`: :func:`receval.judge.dedupe_judge`'s rule
    (one grade per judge and fact, answers normalised) with the loader's message — the file's
    line of the first row that disagrees, the fact numbered as the loader numbers it among the
    runs' facts (``runs``: a view or subquery of them with answers normalised, by default the
    view ``runs`` normalised here), ``facts`` (``query_id, answer`` of the small tables,
    normalised) and the judge table's (:data:`FACTS_BEFORE`, run only on a clash)."""
    from receval.task import LINE, normalize_answers

    def check(frame: pd.DataFrame, path: Path) -> None:
        rows = pd.DataFrame(
            {
                "query_id": frame["query_id"].astype(str).str.strip().to_numpy(object),
                "answer": normalize_answers(frame["answer"].astype(str), matching).to_numpy(object),
                "judge": frame["judge"].astype(str).to_numpy(object),
                "score": frame["judge_score"].to_numpy(float),
                "line": frame[LINE].to_numpy(np.int64),
            }
        ).sort_values("line", kind="stable", ignore_index=True)
        first = rows.groupby(["judge", "query_id", "answer"], sort=False)["score"].transform(
            "first"
        )
        clash = np.flatnonzero((rows["score"] != first).to_numpy())
        if not clash.size:
            return
        row, q, a = (
            rows.iloc[clash[0]],
            rows["query_id"].iloc[clash[0]],
            rows["answer"].iloc[clash[0]],
        )
        both = pd.concat([facts[["query_id", "answer"]], rows[["query_id", "answer"]]])
        engine.register("grade_facts", both.astype(object).reset_index(drop=True))
        literal = engine.dialect.literal
        source = runs or (
            f"(SELECT query_id, {normalised_answer_sql(engine, matching)} AS answer FROM runs)"
        )
        sql = FACTS_BEFORE.format(runs=source, q=literal(q), a=literal(a))
        fact = int(engine.query(sql)["n"].iloc[0])
        by = f" from judge {row['judge']!r}" if row["judge"] else ""
        raise BundleError(
            path,
            int(row["line"]),
            f"the fact ({q!r}, {a!r}) already has judge_score {float(first.iloc[clash[0]])!r}"
            f"{by} (fact {fact}); one judge gives one score per fact",
        )

    return check


def task_strata(small) -> JudgeStrata:
    """The :class:`JudgeStrata` of :func:`judge_task`'s ``small`` task."""
    from receval.design import parse_judge_strata
    from receval.estimators.judge_calibration import judge_strata_design

    design = judge_strata_design(small)
    name, weights = parse_judge_strata(design)
    missing = len(weights) - 1
    levels, _ = graded_levels(small, name, missing)
    return JudgeStrata(design=design, weights=weights, missing=missing, levels=levels)


def graded_levels(small, name: str, missing: int | None = None) -> tuple[pd.DataFrame, int]:
    """(``query_id, answer, level`` of the facts judge ``name`` graded, answers normalised;
    the level of an ungraded fact: ``missing``, by default the judge's number of levels) of
    :func:`judge_task`'s ``small`` task."""
    from receval.design import LEVEL_COLUMN

    if missing is None:
        from receval.judge import judge_grades, judge_levels

        grades = judge_grades(small)
        _, counts = judge_levels(grades.grades)
        missing = int(counts[list(grades.names).index(name)])
    level = small.outputs[LEVEL_COLUMN + name].to_numpy(np.int64)
    graded = level < missing
    levels = pd.DataFrame(
        {
            "query_id": small.outputs["query_id"].astype(str).to_numpy(object)[graded],
            "answer": small.outputs["answer"].astype(str).to_numpy(object)[graded],
            "level": level[graded],
        }
    )
    return levels, missing


def _raw(root: Path, stem: str, files: dict) -> pd.DataFrame | None:
    """The bundle table ``stem`` as read (strings), without its line numbers."""
    from receval.task import LINE, _table_source

    source = _table_source(root, stem, files)
    return None if source is None else source.frame.drop(columns=[LINE], errors="ignore")


def _pick_strata(con, strata: JudgeStrata, sizes, uniforms, forms, batches) -> pd.DataFrame:
    """The round's draws of the ``judge-strata`` design
    (:func:`receval.engine.draws.strata_ranks`, :func:`receval.engine.draws.pick_strata_draws`),
    each with s_j(x) = a/N_j + (1 − a) u_h(x)/Σ_h N_jh u_h."""
    from receval.design import JUDGE_STRATA_FLOOR
    from receval.engine import draws as drawing

    level_sizes = con.query(drawing.LEVEL_SIZES).astype({"level": np.int64, "facts": np.int64})
    if len(level_sizes) and level_sizes["level"].max() > strata.missing:
        raise ValueError("a fact's level is beyond the design's weights")  # pragma: no cover
    u = strata.weights
    ranks = drawing.strata_ranks(level_sizes, u, JUDGE_STRATA_FLOOR, uniforms)
    prob = drawing.strata_probability(level_sizes, u, JUDGE_STRATA_FLOOR)
    missing = strata.missing
    return drawing.pick_strata_draws(
        con, ranks, forms, missing, prob, _batch_views(con, "runs", batches)
    )


def _round_to_annotate(
    con, draws, samples, judgments, config, forms, batches, also=None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The fact rows of ``to_annotate.tsv``: every fact drawn in this round or an earlier one
    without a label, and the members of those and of the draws ``also`` marks
    (:func:`_to_annotate`)."""
    drawn = _fact_keys(draws["query_id"], draws["answer_raw"], config.matching)
    earlier = (
        _fact_keys(samples["query_id"], samples["answer"], config.matching)
        if len(samples)
        else np.empty(0, np.int64)
    )
    keys = np.concatenate([earlier, drawn])
    todo = np.setdiff1d(np.unique(keys), labelled_keys(judgments, config))
    spelled = pd.concat(
        [
            pd.DataFrame(
                {
                    "h": earlier,
                    "system": samples["system"].to_numpy(object)[: len(earlier)],
                    "query_id": samples["query_id"].to_numpy(object)[: len(earlier)],
                    "answer": samples["answer"].to_numpy(object)[: len(earlier)],
                }
            ),
            draws[["system", "query_id"]].assign(h=drawn, answer=draws["answer_raw"]),
        ],
        ignore_index=True,
    )
    extra = None if also is None else drawn[np.asarray(also, bool)]
    return _to_annotate(con, todo, spelled, config.matching, forms, batches, extra)


def _floor_mixture(draws, floor, members, sizes, config) -> np.ndarray:
    """``mixture_prob`` of each draw: q₀(x) for the ``floor`` draws (their facts' members and
    the systems' sizes N_j), NaN for the others."""
    keys = _fact_keys(draws["query_id"], draws["answer_raw"], config.matching)
    size = dict(zip(sizes["system"], sizes["facts"].astype(float), strict=True))
    alive = max(int((sizes["facts"] > 0).sum()), 1)
    inverse = members["system"].map(lambda s: 1.0 / size[s]).to_numpy(float)
    q0 = pd.Series(inverse).groupby(members["h"].to_numpy(np.int64)).sum() / alive
    out = np.full(len(draws), np.nan)
    out[floor] = q0.reindex(keys[floor]).to_numpy(float)
    return out


def _done_units(root: Path, files: dict) -> set[str]:
    """The units of ``exhaustive_units.tsv`` (annotated in earlier rounds)."""
    from receval.bundle.checks import _check_exhaustive
    from receval.task import _table_source

    units, _ = _check_exhaustive(_table_source(root, "exhaustive_units", files), None, set())
    return set(units["unit"]) if len(units) else set()


class _round_engine:
    """The bundle's engine with ``runs`` registered: its Parquet files, else the loaded runs."""

    def __init__(self, bundle, name: str) -> None:
        self.bundle, self.name = bundle, name

    def __enter__(self) -> Engine:
        from receval.engine.base import connect

        self.engine = connect(self.name, **({"on_disk": True} if self.name == "duckdb" else {}))
        strip = self.bundle.config().matching.strip
        sources = self.bundle.parquet_runs()
        if sources is not None:
            register_runs(self.engine, sources, strip=strip)
            return self.engine
        task = self.bundle.load(tables=(), run_columns=())
        outputs = task.raw_outputs
        answers = outputs["answer_raw"].astype(str)
        frame = pd.DataFrame(
            {
                "system": outputs["system"].astype(str).to_numpy(),
                "query_id": outputs["query_id"].astype(str).to_numpy(),
                "answer": (answers.str.strip(" ") if strip else answers).to_numpy(),  # as read
            }
        )
        self.engine.register("runs_frame", frame)
        create_view(
            self.engine,
            "runs",
            "SELECT system, query_id, answer, CAST(NULL AS STRING) AS team FROM runs_frame",
        )
        return self.engine

    def __exit__(self, kind, value, trace) -> None:
        self.engine.close()
        if kind is not None and kind.__name__ == "OutOfMemoryException":
            from receval.engine.base import MEMORY_LIMIT_ENV

            raise ValueError(
                f"the engine ran out of its memory limit ({value}); set {MEMORY_LIMIT_ENV} "
                "higher (e.g. 4GB)"
            ) from None
