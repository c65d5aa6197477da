"""What scoring needs from the runs, as a few SQL aggregations whose results are small.

``score`` on the engine path (:mod:`receval.engine.score`) never holds an output row in Python.
Every number the estimators and the diagnostics take from the runs is one of:

* per (system, query): input rows and distinct facts (``m × Q`` rows): the systems' sizes
  |X_i|, the duplicate rows collapsed, per-query outputs, the macro target, the query
  clusters' |X_i ∩ q|;
* per team: the facts of the pool and those only that team output (a few rows): ``pool.csv``'s
  pool size, ``pooling_bias.csv``'s unique facts;
* per (fact of the small tables, system): the copies of the drawn and the judged facts in each
  run (:data:`MEMBERS`: a join of the runs with the small ``wanted`` table, never an
  aggregate over every fact): membership, the judged outputs, the official counts.

The first two come from one group per *fact*, not per (system, fact): :data:`ROW_CELLS` counts
the rows per (system, query) with no hash of the answers, :data:`FACT_MASKS` gives each fact
the systems that output it as bit masks (one 63-bit BIGINT per block of systems, ``bit_or``),
and :data:`MASK_SUMS` sums, per query, each system's bit (its distinct facts) and each team's
"no other team's bit" test (its unique facts) (:func:`masked_facts`).  At 10⁸ rows of 50
systems that is ~6·10⁶ groups instead of 10⁸.  Spark and DuckDB over one runs table take this
path; DuckDB with one file per system keeps the per-system :data:`RUN_CELLS` and the batched
:data:`POOL_PARTS` (below), whose every query reads a few files.

Facts are ``(query_id, normalised answer)`` as the loader defines them (answers normalised in
SQL exactly as :func:`receval.task.normalize_answers` does: :mod:`receval.engine.matching`).
Distinct facts are counted as distinct 64-bit hashes of the normalised answer *within one
(system, query)* or *within one query*: two different answers of one query with the same hash
would count once (probability about Σ_q n_q² / 2⁶⁵: below 10⁻⁸ for 10⁹ rows of 1,000 answers
per query).  Each aggregation is one scan of the runs, grouped with bounded memory (DuckDB
spills; no ORDER BY over the rows); no MD5 is computed on the scoring path.

In DuckDB, with one run file per system, the aggregations run on batches of a few systems
(:func:`system_batches`): the ``runs`` view is a UNION ALL of one scan per file, and an
aggregate over a hundred such branches keeps a hash table per branch and ran out of 1 GiB within
seconds at 2·10⁸ rows (100 files), while ten branches stay within it.  :data:`POOL_FACTS` is then
two steps: each batch's partial per-fact aggregate (:data:`POOL_PARTS`, fixed-size 64-bit keys)
appended to a table, merged in slices by a hash of the query (:data:`POOL_MERGE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.errors import BundleError

if TYPE_CHECKING:
    from pathlib import Path

    from receval.config import Matching
    from receval.engine.base import Engine

#: per (system, query): input rows, distinct facts, blank answers, the team cells' range; two
#: plain GROUP BYs (DuckDB spills them; a COUNT(DISTINCT) ran out of 1 GiB at 2·10⁸ rows)
RUN_CELLS = """
SELECT system, query_id, count(*) AS facts, sum(c) AS n_rows, sum(blank) AS blank{outer}
FROM (
    SELECT system, query_id, {h} AS a, count(*) AS c,
           sum(CASE WHEN answer = '' OR answer IS NULL THEN 1 ELSE 0 END) AS blank{inner}
    FROM normed {where} GROUP BY system, query_id, {h}
) t GROUP BY system, query_id
"""
#: per (system, query, team cell): input rows and blank answers; no hash of the answers (the
#: distinct facts are counted per fact, :data:`FACT_MASKS`): a few groups per (system, query)
ROW_CELLS = """
SELECT system, query_id{team}, count(*) AS n_rows,
       sum(CASE WHEN answer = '' OR answer IS NULL THEN 1 ELSE 0 END) AS blank
FROM normed GROUP BY system, query_id{team}
"""

#: systems per mask column: bits 0-62, so that every mask is a non-negative BIGINT in both
#: dialects (no sign bit, no shift operator: the bits are constants)
MASK_BITS = 63

#: one group per fact (query, 64-bit hash of the answer): the systems that output it as one
#: mask per block of :data:`MASK_BITS` systems (``system_bits``: :func:`system_bits`); Spark's
#: kept ``normed`` is partitioned by query, so this and :data:`MASK_SUMS` shuffle no rows
FACT_MASKS = """
SELECT n.query_id, {masks}
FROM normed n JOIN system_bits b ON n.system = b.system
GROUP BY n.query_id, {h}
"""

#: per query: the pool's facts and the sums of :func:`mask_sums` over :data:`FACT_MASKS`
MASK_SUMS = """
SELECT query_id, count(*) AS pool_facts{sums} FROM ({source}) f GROUP BY query_id
"""

#: sums of :data:`MASK_SUMS` per query: more systems and teams read the masks kept in a
#: table once per chunk of this many columns
SUMS_PER_QUERY = 128

#: :data:`RUN_CELLS`' team columns (``outer``, ``inner``): the team cells' range, or NULL when
#: no run file has a team column (the text min/max was about a third of the scan's CPU time)
TEAM_CELLS = {
    True: (", min(team_lo) AS team_lo, max(team_hi) AS team_hi",
           ", min(team) AS team_lo, max(team) AS team_hi"),
    False: (", NULL AS team_lo, NULL AS team_hi", ""),
}  # fmt: skip

#: per team: the distinct facts it was the only team to output (``one_team`` = 1) or shared;
#: teams as 64-bit hashes (fixed-size aggregate states), named again in Python
#: (:func:`_team_names`).  One group per pool fact, in one query (Spark, or a single runs
#: table); DuckDB with one file per system runs :data:`POOL_PARTS` and :data:`POOL_MERGE`
POOL_FACTS = """
SELECT lo AS owner, one_team, count(*) AS facts FROM (
    SELECT min(t) AS lo, CASE WHEN min(t) = max(t) THEN 1 ELSE 0 END AS one_team
    FROM (SELECT query_id, {h} AS a, {team} AS t FROM {source} src) s GROUP BY query_id, a
) t GROUP BY lo, one_team
"""

#: one batch of systems' share of :data:`POOL_FACTS`: per fact (query and answer as 64-bit
#: hashes: the queries' hashes are checked to be distinct) the least and greatest team hash
POOL_PARTS = """
SELECT {q} AS q, {h} AS a, min({team}) AS lo, max({team}) AS hi
FROM {source} src GROUP BY {q}, {h}
"""

#: :data:`POOL_FACTS` from the batches' parts (table ``pool_parts``), one slice of the facts
#: (``{where}``: a hash of the query modulo the slices) at a time
POOL_MERGE = """
SELECT lo AS owner, one_team, count(*) AS facts FROM (
    SELECT min(lo) AS lo, CASE WHEN min(lo) = max(hi) THEN 1 ELSE 0 END AS one_team
    FROM pool_parts {where} GROUP BY q, a
) t GROUP BY lo, one_team
"""

#: distinct facts (upper bound: the batches' distinct facts summed) in one batch of
#: :func:`system_batches`, and in one slice of :data:`POOL_MERGE`
BATCH_FACTS = 20_000_000
#: run files (UNION ALL branches) in one batch of :func:`system_batches`
BATCH_SYSTEMS = 10

#: the hash :data:`POOL_FACTS` gives each team name
TEAM_HASHES = "SELECT team, {team} AS t FROM team_names"

#: the copies of each fact of ``wanted(fact, query_id, answer)`` in each system's run
MEMBERS = """
SELECT w.fact, r.system, count(*) AS copies
FROM {normed} r JOIN wanted w ON r.query_id = w.query_id AND r.answer = w.answer
GROUP BY w.fact, r.system
"""


@dataclass(frozen=True)
class RunSummary:
    """The runs' aggregates (module docstring); ``systems`` sorted, empty submissions included."""

    systems: list[str]
    teams: dict[str, str]
    cells: pd.DataFrame  # system, query_id, n_rows, facts (one row per answered (system, query))
    sizes: np.ndarray  # (m,) distinct facts |X_i|
    rows: np.ndarray  # (m,) input rows
    pool_size: int
    team_facts: pd.DataFrame  # owner, one_team, facts
    members: pd.DataFrame  # fact, system, copies (facts of ``wanted``)

    @property
    def duplicate_rows(self) -> int:
        return int(self.rows.sum() - self.sizes.sum())

    def unique_facts(self) -> pd.Series:
        """Pool facts output by one team only, per team (teams without any: 0)."""
        one = self.team_facts[self.team_facts["one_team"] == 1]
        counts = one.groupby("owner")["facts"].sum()
        teams = sorted(set(self.teams.values()))
        return counts.reindex(teams, fill_value=0).astype(np.int64)


def register_normed(engine: Engine, matching: Matching | None) -> None:
    """View ``normed(system, team, query_id, answer)`` over ``runs``: the answer normalised per
    ``[matching]``, a blank team cell NULL."""
    from receval.engine.sampled import create_view, normalised_answer_sql

    answer = normalised_answer_sql(engine, matching)
    create_view(
        engine,
        "normed",
        f"SELECT system, CASE WHEN team = '' THEN NULL ELSE team END AS team, query_id, "
        f"{answer} AS answer FROM runs",
    )
    if engine.name == "spark":  # normalised and shuffled by query once, kept for the scans
        from receval.engine.spark_runs import keep_normed

        keep_normed(engine)


def summarise_runs(
    engine: Engine,
    wanted: pd.DataFrame,
    files: dict[str, Path],
    known_queries: set[str],
    empty_systems: tuple[str, ...] = (),
    by_system: list[str] | None = None,
    pool: bool = True,
) -> RunSummary:
    """The aggregations over ``normed`` (:func:`register_normed`); ``wanted`` is
    ``fact, query_id, answer`` (normalised) of the small tables' facts; ``files`` name the run
    files in errors (``runs/<system>.parquet`` when there is one per system); ``by_system``:
    the systems, when each file holds one system's rows (:func:`run_cells`).  Without
    ``pool`` the pool's facts are not counted (``team_facts`` empty, ``pool_size`` -1).

    Spark, and DuckDB over one runs table, count the facts with one per-fact aggregation
    carrying system masks (:func:`masked_facts`); DuckDB with one file per system runs
    :data:`RUN_CELLS` one system at a time and the pool in batches (module docstring)."""
    h = engine.dialect.hash64("answer")
    masked = engine.name == "spark" or by_system is None
    cells = row_cells(engine) if masked else run_cells(engine, h, by_system)
    _check_cells(cells, files, known_queries)
    teams = _teams(cells, files)
    systems = sorted({*teams, *empty_systems})
    teams.update({s: s for s in empty_systems})
    if masked:
        cells, team_facts = masked_facts(engine, h, cells, teams, pool)
    else:
        team_facts = _batched_pool(engine, h, cells, teams, (by_system, known_queries), pool)
    batches = None
    if by_system is not None and engine.name == "duckdb":
        batches = system_batches(cells, by_system)
    engine.register("wanted", wanted[["fact", "query_id", "answer"]])
    members = run_members(engine, batches) if len(wanted) else _no_members()
    by_system = cells.groupby("system")[["n_rows", "facts"]].sum()
    by_system = by_system.reindex(systems, fill_value=0)
    return RunSummary(
        systems=systems,
        teams={s: teams[s] for s in systems},
        cells=cells[["system", "query_id", "n_rows", "facts"]],
        sizes=by_system["facts"].to_numpy(float),
        rows=by_system["n_rows"].to_numpy(np.int64),
        pool_size=int(team_facts["facts"].sum()) if pool else -1,
        team_facts=team_facts,
        members=members.astype({"fact": np.int64, "copies": np.int64}),
    )


def _batched_pool(
    engine: Engine,
    h: str,
    cells: pd.DataFrame,
    teams: dict[str, str],
    layout: tuple[list[str], set[str]],
    pool: bool,
) -> pd.DataFrame:
    """:func:`pool_facts` in DuckDB's batches of systems (``layout``: the systems in file
    order and the known queries), owners named (empty without ``pool``)."""
    named = {s: t for s, t in teams.items() if t != s}
    if named:
        engine.register("system_teams", pd.DataFrame({"system": list(teams), "t": teams.values()}))
    batches = system_batches(cells, layout[0])
    _check_query_hashes(engine, layout[1])
    if not pool:
        return _no_team_facts()
    return _team_names(engine, pool_facts(engine, h, bool(named), batches), teams)


def _no_team_facts() -> pd.DataFrame:
    return pd.DataFrame({"owner": [], "one_team": [], "facts": []})


def _team_names(engine: Engine, facts: pd.DataFrame, teams: dict[str, str]) -> pd.DataFrame:
    """:func:`pool_facts` with each ``owner`` hash named again (the teams' hashes are checked
    to be distinct)."""
    names = sorted(set(teams.values()))
    engine.register("team_names", pd.DataFrame({"team": names}))
    hashes = engine.query(TEAM_HASHES.format(team=engine.dialect.hash64("team")))
    if hashes["t"].nunique() < len(hashes):  # pragma: no cover - a 64-bit collision
        raise RuntimeError("two team names have the same 64-bit hash")
    name_of = dict(zip(hashes["t"].tolist(), hashes["team"].tolist(), strict=True))
    facts["owner"] = [name_of.get(t) for t in facts["owner"].tolist()]
    return facts


def run_cells(engine: Engine, h: str, by_system: list[str] | None) -> pd.DataFrame:
    """:data:`RUN_CELLS`: in DuckDB one system at a time when each file holds one system (the
    view's other branches are pruned, so each query groups one run's rows: memory bounded by
    the largest run), else in one query."""
    outer, inner = TEAM_CELLS[bool(getattr(engine, "run_teams", True))]
    if by_system is None or engine.name != "duckdb":
        return engine.query(RUN_CELLS.format(h=h, where="", outer=outer, inner=inner))
    parts = []
    for system in by_system:
        where = "WHERE system = " + engine.dialect.literal(system)
        parts.append(engine.query(RUN_CELLS.format(h=h, where=where, outer=outer, inner=inner)))
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else engine.query(RUN_CELLS.format(h=h, where="", outer=outer, inner=inner))
    )


def row_cells(engine: Engine) -> pd.DataFrame:
    """Per answered (system, query): input rows and blank answers (:data:`ROW_CELLS`, a
    group per (system, query, team cell): no hash of the answers), and each system's range of
    team cells (``team_lo``, ``team_hi``: NULL when no run file has a team column); sorted by
    (system, query).  The distinct facts come from :func:`masked_facts`."""
    named = bool(getattr(engine, "run_teams", True))
    rows = engine.query(ROW_CELLS.format(team=", team" if named else ""))
    key = ["system", "query_id"]
    cells = rows.groupby(key, as_index=False, dropna=False, sort=True)[["n_rows", "blank"]].sum()
    cells[["n_rows", "blank"]] = cells[["n_rows", "blank"]].astype(np.int64)
    cells["team_lo"] = cells["team_hi"] = None
    if named:  # the range in Python: Spark aggregates text min/max by sorting every row
        span = rows.dropna(subset=["team"]).groupby("system")["team"].agg(["min", "max"])
        cells["team_lo"] = cells["system"].map(span["min"]).astype(object)
        cells["team_hi"] = cells["system"].map(span["max"]).astype(object)
    return cells


def system_bits(systems: list[str]) -> pd.DataFrame:
    """``system, block, bit``: system *i* is bit ``i mod`` :data:`MASK_BITS` of the mask of
    block ``i div`` :data:`MASK_BITS` (a non-negative BIGINT in both dialects)."""
    index = np.arange(len(systems), dtype=np.int64)
    return pd.DataFrame(
        {
            "system": np.asarray(systems, dtype=object),
            "block": index // MASK_BITS,
            "bit": np.left_shift(np.int64(1), index % MASK_BITS),
        }
    )


def mask_sums(systems: list[str], teams: dict[str, str], pool: bool) -> list[str]:
    """The sums :data:`MASK_SUMS` takes per query over :data:`FACT_MASKS`' facts: per system
    (``s<i>``) the facts whose mask has its bit; with ``pool``, per team (``u<j>``, teams
    sorted) the facts every one of whose systems is of that team."""
    blocks = -(-len(systems) // MASK_BITS)
    sums = [
        f"sum(CASE WHEN (m{i // MASK_BITS} & {1 << (i % MASK_BITS)}) <> 0 THEN 1 ELSE 0 END)"
        f" AS s{i}"
        for i in range(len(systems))
    ]
    if not pool:
        return sums
    full = (1 << MASK_BITS) - 1
    for j, team in enumerate(sorted(set(teams.values()))):
        own = [0] * blocks
        for i, system in enumerate(systems):
            if teams.get(system, system) == team:
                own[i // MASK_BITS] |= 1 << (i % MASK_BITS)
        outside = " AND ".join(f"(m{k} & {full ^ own[k]}) = 0" for k in range(blocks))
        sums.append(f"sum(CASE WHEN {outside} THEN 1 ELSE 0 END) AS u{j}")
    return sums


def masked_facts(
    engine: Engine, h: str, cells: pd.DataFrame, teams: dict[str, str], pool: bool
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``cells`` (:func:`row_cells`) with their distinct facts, and the pool's facts per team
    (``owner``, ``one_team``, ``facts``: one row per team of facts no other team output, one
    of the shared facts; empty without ``pool``), from one group per fact
    (:data:`FACT_MASKS`: its systems as bit masks) summed per query (:data:`MASK_SUMS`): no
    group per (system, fact).  A fact is a distinct 64-bit hash of the answer within its
    query, as :data:`RUN_CELLS` and :data:`POOL_FACTS` count them."""
    systems = sorted(set(cells["system"].dropna()))
    engine.register("system_bits", system_bits(systems))
    blocks = max(1, -(-len(systems) // MASK_BITS))
    masks = ", ".join(
        f"bit_or(CASE WHEN b.block = {k} THEN b.bit ELSE 0 END) AS m{k}" for k in range(blocks)
    )
    inner = FACT_MASKS.format(h=h, masks=masks)
    sums = mask_sums(systems, teams, pool)
    chunks = [sums[i : i + SUMS_PER_QUERY] for i in range(0, len(sums), SUMS_PER_QUERY)] or [[]]
    if len(chunks) > 1:  # the facts' masks kept once, summed a chunk of columns at a time
        engine.create_table("fact_masks", inner)
        inner = "SELECT * FROM fact_masks"
    parts = [
        engine.query(
            MASK_SUMS.format(source=inner, sums="".join(", " + s for s in chunk))
        ).set_index("query_id")
        for chunk in chunks
    ]
    if len(chunks) > 1 and engine.name == "duckdb":
        engine.con.execute("DROP TABLE fact_masks")
    per_query = pd.concat(parts, axis=1)
    per_query = per_query.loc[:, ~per_query.columns.duplicated()]
    return _with_facts(cells, per_query, systems), _mask_team_facts(per_query, teams, pool)


def _with_facts(cells: pd.DataFrame, per_query: pd.DataFrame, systems: list[str]) -> pd.DataFrame:
    """``cells`` with ``facts``: each system's column ``s<i>`` of ``per_query``."""
    columns = [f"s{i}" for i in range(len(systems))]
    counts = per_query[columns].to_numpy(np.int64) if columns else np.zeros((len(per_query), 0))
    q, i = np.nonzero(counts)
    found = pd.DataFrame(
        {
            "system": np.asarray(systems, dtype=object)[i],
            "query_id": per_query.index.to_numpy(object)[q],
            "facts": counts[q, i].astype(np.int64),
        }
    )
    out = cells.merge(found, on=["system", "query_id"], how="left", validate="one_to_one")
    if out["facts"].isna().any() or len(out) - len(cells):  # pragma: no cover - a bug
        raise RuntimeError("a (system, query) with rows but no fact")
    return out.astype({"facts": np.int64})


def _mask_team_facts(per_query: pd.DataFrame, teams: dict[str, str], pool: bool) -> pd.DataFrame:
    """:func:`masked_facts`' team rows from the per-query sums."""
    if not pool:
        return _no_team_facts()
    names = sorted(set(teams.values()))
    unique = [int(per_query[f"u{j}"].sum()) for j in range(len(names))]
    shared = int(per_query["pool_facts"].sum()) - sum(unique)
    return pd.DataFrame(
        {
            "owner": [*names, None],
            "one_team": np.array([1] * len(names) + [0], dtype=np.int64),
            "facts": np.array([*unique, shared], dtype=np.int64),
        }
    )


def system_batches(
    cells: pd.DataFrame,
    systems: list[str],
    facts: int = BATCH_FACTS,
    width: int = BATCH_SYSTEMS,
) -> list[list[str]]:
    """``systems`` in order, cut into batches of at most ``width`` systems whose distinct
    facts (:data:`RUN_CELLS`) sum to at most ``facts`` (a larger system alone)."""
    sizes = cells.groupby("system")["facts"].sum()
    batches: list[list[str]] = []
    total = 0
    for system in systems:
        n = int(sizes.get(system, 0))
        if not batches or len(batches[-1]) >= width or (total + n > facts and batches[-1]):
            batches.append([])
            total = 0
        batches[-1].append(system)
        total += n
    return batches


def _in_systems(engine: Engine, batch: list[str]) -> str:
    """``normed`` restricted to the systems of ``batch`` (the other UNION ALL branches of the
    ``runs`` view are pruned: their constant ``system`` fails the test)."""
    names = ", ".join(engine.dialect.literal(s) for s in batch)
    return f"(SELECT * FROM normed WHERE system IN ({names}))"


def _team_source(named: bool, rows: str = "normed") -> str:
    """``rows`` of ``normed`` as ``(query_id, answer, team)``: the team of ``system_teams`` when
    some system is given a team, else the system itself."""
    if named:
        return (
            f"(SELECT n.query_id, n.answer, s.t AS team FROM {rows} n "
            "JOIN system_teams s ON n.system = s.system)"
        )
    return f"(SELECT query_id, answer, system AS team FROM {rows} n)"


def pool_facts(
    engine: Engine, h: str, named: bool, batches: list[list[str]] | None
) -> pd.DataFrame:
    """``owner`` (team hash), ``one_team``, ``facts``: :data:`POOL_FACTS` in one query, or with
    ``batches`` (DuckDB) each batch's :data:`POOL_PARTS` in table ``pool_parts`` (the engine's
    database file: spilled), merged by :data:`POOL_MERGE` in :func:`merge_slices` slices."""
    team = engine.dialect.hash64("team")
    if not batches:
        return engine.query(POOL_FACTS.format(h=h, source=_team_source(named), team=team))
    q = engine.dialect.hash64("query_id")
    for i, batch in enumerate(batches):
        source = _team_source(named, _in_systems(engine, batch))
        sql = POOL_PARTS.format(q=q, h=h, team=team, source=source)
        if i == 0:
            engine.create_table("pool_parts", sql)
        else:
            engine.con.execute(f"INSERT INTO pool_parts {sql}")
    slices = merge_slices(engine)
    frames = [
        engine.query(POOL_MERGE.format(where=f"WHERE q % {slices} = {k}" if slices > 1 else ""))
        for k in range(slices)
    ]
    engine.con.execute("DROP TABLE pool_parts")
    facts = pd.concat(frames, ignore_index=True)
    return facts.groupby(["owner", "one_team"], as_index=False)["facts"].sum()


def merge_slices(engine: Engine, facts: int | None = None) -> int:
    """Slices of :data:`POOL_MERGE` with at most about ``facts`` distinct facts each: its hash
    table holds one group per distinct fact, not per part (with batches of two systems, 10⁹
    rows of overlapping runs give 8·10⁸ parts for 3·10⁷ facts: sliced by parts, the merge
    read the parts table 42 times), counted by ``approx_count_distinct`` (HyperLogLog, a
    relative error of a few per cent) with a margin of a quarter; at most one slice per part
    ``facts``."""
    facts = BATCH_FACTS if facts is None else facts
    row = engine.query(
        "SELECT count(*) AS parts, approx_count_distinct(hash(q, a)) AS facts FROM pool_parts"
    ).iloc[0]
    parts, distinct = int(row["parts"]), int(row["facts"])
    by_parts = -(-parts // facts)
    by_facts = -(-(distinct + distinct // 4) // facts)
    return max(1, min(by_parts, by_facts))


def run_members(engine: Engine, batches: list[list[str]] | None) -> pd.DataFrame:
    """:data:`MEMBERS` in one query, or one batch of systems at a time (:func:`pool_facts`)."""
    if not batches:
        return engine.query(MEMBERS.format(normed="normed"))
    parts = [engine.query(MEMBERS.format(normed=_in_systems(engine, b))) for b in batches]
    return pd.concat(parts, ignore_index=True)


def _check_query_hashes(engine: Engine, known: set[str]) -> None:
    """The queries' 64-bit hashes (:data:`POOL_PARTS`' keys) are distinct."""
    engine.register("query_names", pd.DataFrame({"query_id": sorted(known)}))
    sql = f"SELECT {engine.dialect.hash64('query_id')} AS q FROM query_names"
    hashes = engine.query(sql)["q"]
    if hashes.nunique() < len(hashes):  # pragma: no cover - a 64-bit collision
        raise RuntimeError("two query ids have the same 64-bit hash")


def _no_members() -> pd.DataFrame:
    return pd.DataFrame({"fact": np.empty(0, np.int64), "system": [], "copies": np.empty(0)})


def _run_file(files: dict[str, Path], system: str) -> Path | str:
    """The file errors about ``system``'s rows name: its own run file, else the runs table."""
    for name, path in files.items():
        if name in (f"runs/{system}.parquet", f"runs/system={system}"):
            return path
        if f"system={system}/" in name:
            return path
    runs = [p for n, p in files.items() if n == "runs" or n.startswith("runs")]
    return runs[0] if len(runs) == 1 else "runs"


def _check_cells(cells: pd.DataFrame, files: dict[str, Path], known: set[str]) -> None:
    """The loader's checks of the run values: no blank system, query or answer (NULL is
    blank, as the loader reads it), every query known."""
    for column in ("system", "query_id"):
        empty = cells[cells[column].isna() | (cells[column].astype(str) == "")]
        if len(empty):
            system = empty["system"].iloc[0]
            raise BundleError(
                _run_file(files, system if isinstance(system, str) else ""),
                None,
                f"empty value in required column {column!r} ({int(empty['n_rows'].sum())} such rows)",
            )
    blank = cells[cells["blank"] > 0]
    if len(blank):
        system = str(blank["system"].iloc[0])
        raise BundleError(
            _run_file(files, system),
            None,
            f"empty value in required column 'answer' ({int(blank['blank'].sum())} such rows, "
            f"system {system!r})",
        )
    unknown = cells[~cells["query_id"].isin(known)]
    if len(unknown):
        system = str(unknown["system"].iloc[0])
        raise BundleError(
            _run_file(files, system),
            None,
            f"query_id {unknown['query_id'].iloc[0]!r} is not in queries "
            f"({int(unknown['n_rows'].sum())} such rows, system {system!r})",
        )


def _teams(cells: pd.DataFrame, files: dict[str, Path]) -> dict[str, str]:
    """One team per system (a blank team cell takes the system's team, or its name)."""
    lo = cells.groupby("system")["team_lo"].min()
    hi = cells.groupby("system")["team_hi"].max()
    teams = {}
    for system in sorted(lo.index):
        a, b = lo[system], hi[system]
        if isinstance(a, str) and isinstance(b, str) and a != b:
            raise BundleError(
                _run_file(files, system),
                None,
                f"system {system!r} is given two teams ({a!r} and {b!r})",
            )
        teams[str(system)] = str(a) if isinstance(a, str) else str(system)
    return teams
