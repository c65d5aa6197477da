"""The sampled path in SQL: per-system sizes, hash-keyed draws and the membership of drawn facts,
computed by the engine over the runs (Parquet files on disk), so Python holds only the draws.

Draws are a deterministic function of ``(seed, round, system, draw index)`` and the system's
set of facts, whatever the engine and however the runs are split into files:

* every fact ``x = (query_id, normalised answer)`` gets a key ``h(x)``: the first 60 bits of the
  MD5 of ``query_id ␟ answer`` (a function both DuckDB and Spark SQL compute; :data:`DIALECTS`);
  a system's facts ordered by ``h`` are ``x_(0) < ... < x_(N_j - 1)``;
* draw ``d`` of system ``j`` in round ``r`` picks ``x_(k)`` with ``k = ⌊u · N_j⌋``, ``u`` the first
  60 bits of the MD5 of ``seed ␟ r ␟ j ␟ d`` over 2⁶⁰ (:func:`draw_uniform`): i.i.d. uniform
  draws with replacement from the system's distinct facts, ``prob`` = 1/N_j (Chaganty et al.
  2017, §3, the ``uniform`` design);
* ``k`` is located without sorting the runs: one aggregation counts distinct keys per
  (system, bucket) (bucket = the key's top 16 bits), Python finds the bucket and offset of every
  ``k``, and a second scan reads only the keys of those buckets (:func:`locate_draws`).

Two facts of one system with the same 60-bit key would count once (probability about
N_j² / 2⁶¹: 2·10⁻⁶ at 2·10⁶ facts per system).  The SQL normalises answers per ``[matching]``
exactly as Python does (:mod:`receval.engine.matching`: the ``str.isspace`` class, full case
folding; a normal form the engine lacks, NFKC in DuckDB, is refused).

Every SQL text is in this module; the few engine-specific functions are in :data:`DIALECTS`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.errors import BundleError

if TYPE_CHECKING:
    from receval.config import Matching
    from receval.engine.base import Engine

#: keys are 60-bit integers; a bucket is a key's top 16 bits
KEY_BITS = 60
BUCKET_SHIFT = 44
#: the separator of the hashed fields (ASCII unit separator)
SEP = "\x1f"

#: per-engine SQL: the 60-bit key of a text (answer normalisation: receval.engine.matching,
#: the same as Python's)
DIALECTS: dict[str, dict[str, str]] = {
    "duckdb": {"key": "CAST(('0x' || substr(md5({x}), 1, 15)) AS BIGINT)"},
    "spark": {"key": "CAST(conv(substr(md5({x}), 1, 15), 16, 10) AS BIGINT)"},
}


def python_key(text: str) -> int:
    """The 60-bit key SQL computes for ``text`` (:data:`DIALECTS` ``key``)."""
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[:15], 16)


def _dialect(engine: Engine) -> dict[str, str]:
    return DIALECTS[engine.name]


def create_view(engine: Engine, name: str, sql: str, *, materialise: bool = False) -> None:
    """Make the SELECT ``sql`` queryable as ``name``: the engine's ``create_table`` (when
    ``materialise``) or ``create_view``, else a Spark temporary view (cached when
    ``materialise``)."""
    method = getattr(engine, "create_table" if materialise else "create_view", None)
    if method is not None:
        method(name, sql)
        return
    spark = getattr(engine, "spark", None)
    if spark is None:
        raise TypeError(f"engine {engine.name!r} cannot create views")
    frame = spark.sql(sql)
    if materialise:
        frame = frame.cache()
    frame.createOrReplaceTempView(name)


# ---------------------------------------------------------------------------------------------
# the runs as one view


#: the columns the sampled path reads and the Arrow types a Parquet run may give them
RUN_COLUMNS = ("system", "query_id", "answer")
#: columns read when a file has them (NULL otherwise)
OPTIONAL_RUN_COLUMNS = ("team",)


def check_run_schema(path: Path, keys: dict[str, str]) -> None:
    """A Parquet run file has ``query_id`` and ``answer`` (and ``system`` unless its location
    names it) as text or integers; else a BundleError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise BundleError(path, None, f"not a readable Parquet file ({exc})") from None
    for name in (*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS):
        if name not in schema.names:
            if name in keys or name in OPTIONAL_RUN_COLUMNS:
                continue
            raise BundleError(path, None, f"missing required column {name}")
        kind = schema.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and not (
            pa.types.is_integer(kind) or pa.types.is_dictionary(kind)
        ):
            raise BundleError(path, None, f"column {name} has type {kind}; expected text")


def register_runs(engine: Engine, sources: list[tuple[Path, dict[str, str]]]) -> None:
    """Register the Parquet run files as one view ``runs(system, query_id, answer, team)``
    (text, stripped; ``team`` NULL where a file has none); a file's location
    (``runs/A.parquet``, ``runs/system=A/``) sets its ``system``."""
    import pyarrow.parquet as pq

    parts = []
    for i, (path, keys) in enumerate(sources):
        check_run_schema(path, keys)
        present = set(pq.read_schema(path).names)
        name = f"runs_part_{i}"
        engine.register(name, path)
        columns = []
        for column in (*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS):
            if column in keys:
                value = keys[column].replace("'", "''")
                columns.append(f"'{value}' AS {column}")
            elif column in present:
                columns.append(f"trim(CAST({column} AS STRING)) AS {column}")
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
    if sql == column:
        return sql
    # printable ASCII without a leading, trailing or repeated space is its own normal form
    # but for case: one regular expression instead of the whole chain on most answers
    plain = engine.dialect.regexp_matches(column, "[^\\x{20}-\\x{7e}]|  |\\A | \\z")
    fast = f"lower({column})" if matching.casefold else column
    return f"CASE WHEN {plain} THEN {sql} ELSE {fast} END"


def register_keyed(engine: Engine, matching: Matching | None = None) -> None:
    """View ``keyed(system, query_id, answer, answer_raw, h, bucket)`` over ``runs``: each row's
    fact key ``h`` and its bucket (module docstring)."""
    answer = normalised_answer_sql(engine, matching)
    key = _dialect(engine)["key"].format(x=f"concat(query_id, chr(31), {answer})")
    create_view(
        engine,
        "keyed",
        f"SELECT system, query_id, {answer} AS answer, answer AS answer_raw, h, "
        f"CAST(floor(h / {float(1 << BUCKET_SHIFT)!r}) AS BIGINT) AS bucket "
        f"FROM (SELECT system, query_id, answer, {key} AS h FROM runs) t",
    )


# ---------------------------------------------------------------------------------------------
# the SQL texts (engine-neutral)

#: the distinct (system, fact key) pairs: the one aggregation over every output row (MD5 once
#: per row), materialised as table ``system_facts`` (:func:`register_system_facts`)
SYSTEM_FACTS = """
SELECT system, h, bucket, count(*) AS copies FROM keyed GROUP BY system, h, bucket
"""

#: distinct facts per (system, bucket)
BUCKET_SIZES = """
SELECT system, bucket, count(*) AS facts FROM system_facts GROUP BY system, bucket
"""

#: the distinct facts in the wanted (system, bucket) pairs, one row per (system, key), with the
#: system's own spelling (a second scan of the runs, keeping the rows of those buckets only)
BUCKET_FACTS = """
SELECT k.system, k.bucket, k.h, min(k.query_id) AS query_id, min(k.answer_raw) AS answer_raw
FROM keyed k JOIN wanted w ON k.system = w.system AND k.bucket = w.bucket
GROUP BY k.system, k.bucket, k.h
"""

#: which systems output each drawn fact (a scan of the runs joined to the few drawn keys)
MEMBERSHIP = """
SELECT k.system, k.h FROM keyed k JOIN drawn_keys d ON k.h = d.h GROUP BY k.system, k.h
"""


def register_system_facts(engine: Engine, *, materialise: bool = False) -> None:
    """:data:`SYSTEM_FACTS` as ``system_facts``: a view (each query reading it aggregates the
    runs again, in bounded memory), or with ``materialise`` a table (DuckDB's ``create_table``;
    Spark: a cached view): fewer scans, but DuckDB could not hold a 5·10⁷-row table under a
    1 GB limit (measured: out of memory).  Scoring reads none of it
    (:mod:`receval.engine.summary`)."""
    create_view(engine, "system_facts", SYSTEM_FACTS, materialise=materialise)


# ---------------------------------------------------------------------------------------------
# drawing


def draw_uniform(seed: int, round_number: int, system: str, draws: int) -> np.ndarray:
    """``u`` in [0, 1) for draws 1..``draws`` of ``system`` in round ``round_number``: the first
    60 bits of MD5(``seed ␟ round ␟ system ␟ d``) over 2⁶⁰ (exact in float64 after the shift)."""
    out = np.empty(draws, dtype=np.float64)
    for d in range(draws):  # per draw, not per output row: n_j hashes per system
        key = python_key(f"{int(seed)}{SEP}{int(round_number)}{SEP}{system}{SEP}{d + 1}")
        out[d] = (key >> 8) / float(1 << (KEY_BITS - 8))
    return out


def order_keys(seed: int, round_number: int, systems: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The key that puts a round's rows in a random order (``order`` = ``random``)."""
    return np.array(
        [
            python_key(f"order{SEP}{int(seed)}{SEP}{int(round_number)}{SEP}{s}{SEP}{int(d)}")
            for s, d in zip(systems, draws, strict=True)
        ],
        dtype=np.int64,
    )


@dataclass(frozen=True)
class BucketTable:
    """Distinct facts per (system, bucket), sorted: what locating a rank needs."""

    systems: np.ndarray  # (S,) system names, sorted
    start: np.ndarray  # (S + 1,) each system's first row in the bucket arrays
    bucket: np.ndarray  # bucket of each row
    cum: np.ndarray  # facts in this and the earlier buckets of the same system

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> BucketTable:
        frame = frame.sort_values(["system", "bucket"], ignore_index=True)
        systems, first = np.unique(frame["system"].to_numpy(dtype=object), return_index=True)
        start = np.append(first, len(frame)).astype(np.int64)
        facts = frame["facts"].to_numpy(np.int64)
        cum = np.cumsum(facts)
        cum -= np.repeat(np.append(0, cum[start[1:-1] - 1]), np.diff(start))
        return cls(systems, start, frame["bucket"].to_numpy(np.int64), cum)

    def size(self, i: int) -> int:
        return int(self.cum[self.start[i + 1] - 1])

    def locate(self, i: int, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bucket and offset in the bucket of each 0-based ``ranks`` of system ``i``."""
        lo, hi = self.start[i], self.start[i + 1]
        cum = self.cum[lo:hi]
        at = np.searchsorted(cum, ranks, side="right")
        before = np.where(at > 0, cum[np.maximum(at - 1, 0)], 0)
        return self.bucket[lo:hi][at], ranks - before


def locate_draws(
    engine: Engine,
    sizes: pd.DataFrame,
    per_system: dict[str, int],
    seed: int,
    round_number: int,
) -> pd.DataFrame:
    """Every draw of a uniform round: ``system, draw, h, query_id, answer_raw, prob``.

    ``sizes`` is :data:`BUCKET_SIZES`' result; ``per_system`` the draws per system (systems with
    no fact are skipped)."""
    table = BucketTable.from_frame(sizes)
    index = {s: i for i, s in enumerate(table.systems)}
    pieces = []
    for system in sorted(per_system):
        n = int(per_system[system])
        if n <= 0 or system not in index:
            continue
        i = index[system]
        size = table.size(i)
        ranks = np.minimum(np.floor(draw_uniform(seed, round_number, system, n) * size), size - 1)
        bucket, offset = table.locate(i, ranks.astype(np.int64))
        pieces.append(
            pd.DataFrame(
                {
                    "system": system,
                    "draw": np.arange(1, n + 1, dtype=np.int64),
                    "bucket": bucket,
                    "offset": offset,
                    "prob": 1.0 / size,
                }
            )
        )
    if not pieces:
        return pd.DataFrame(columns=["system", "draw", "h", "query_id", "answer_raw", "prob"])
    draws = pd.concat(pieces, ignore_index=True)
    wanted = draws[["system", "bucket"]].drop_duplicates(ignore_index=True)
    engine.register("wanted", wanted)
    facts = engine.query(BUCKET_FACTS).sort_values(["system", "bucket", "h"], ignore_index=True)
    facts["offset"] = facts.groupby(["system", "bucket"], sort=False).cumcount()
    picked = draws.merge(facts, on=["system", "bucket", "offset"], how="left", validate="m:1")
    if picked["h"].isna().any():  # pragma: no cover - the two scans saw different runs
        raise RuntimeError("the runs changed between two scans of one sample round")
    picked["h"] = picked["h"].astype(np.int64)
    return picked[["system", "draw", "h", "query_id", "answer_raw", "prob"]]


def membership(engine: Engine, keys: np.ndarray) -> pd.DataFrame:
    """``system, h`` for every system that output a fact of ``keys``."""
    engine.register("drawn_keys", pd.DataFrame({"h": np.unique(np.asarray(keys, np.int64))}))
    return engine.query(MEMBERSHIP).sort_values(["h", "system"], ignore_index=True)


# ---------------------------------------------------------------------------------------------
# a whole round


def _fact_keys(query_id: pd.Series, answer: pd.Series, matching: Matching) -> np.ndarray:
    """The 60-bit key of each (query, answer) of a small table (samples, judgments), its answer
    normalised in Python as the loader does."""
    from receval.task import normalize_answers

    norm = normalize_answers(answer.astype(str), matching)
    texts = query_id.astype(str).str.strip() + SEP + norm.astype(str)
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


def _to_annotate(engine: Engine, keys: np.ndarray, spelled: pd.DataFrame) -> pd.DataFrame:
    """``to_annotate.tsv`` fact rows of ``keys``: the spelling of the first system (in sorted
    order) that drew the fact (``spelled``: ``h, system, query_id, answer`` of the draws of this
    round and earlier ones), how many systems output it."""
    members = membership(engine, keys)
    counts = members.groupby("h", sort=True)["system"].size()
    first = (
        spelled[spelled["h"].isin(keys)]
        .sort_values(["h", "system"])
        .drop_duplicates("h")
        .set_index("h")
    )
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
    out["label"] = ""
    out["annotator"] = ""
    return out


def _samples_frame(draws: pd.DataFrame, name: str, seed: int, k: int) -> pd.DataFrame:
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
            "design": "uniform",
        }
    )
    order = np.argsort(order_keys(seed, k, frame["system"].to_numpy(), frame["draw"].to_numpy()))
    frame = frame.iloc[order].reset_index(drop=True)
    frame[ORDER_COLUMN] = RANDOM_ORDER
    return frame


def sample_round(
    bundle,
    per_system: int | dict[str, int],
    *,
    seed: int,
    systems: list[str] | None = None,
    name: str | None = None,
    engine: str = "duckdb",
):
    """A uniform ``--per-system`` round drawn in the engine (module docstring): the runs are
    read by SQL (Parquet files on disk; other formats are loaded and registered as a frame),
    Python holds the draws, the bundle's small tables and per-system aggregates only.

    Returns a :class:`receval.design.SampleRound` (no exhaustive units), recorded with
    :meth:`receval.bundle.Bundle.record_round`.  The draws are a function of (seed, round,
    system, draw index) and the system's facts: the same on every engine and file layout.
    """
    from receval.config import load_config
    from receval.design import SampleRound, next_round_name
    from receval.task import _check_judgments, _check_queries, _check_samples, _table_source

    bundle.check_folder()
    root = Path(bundle.root)
    files: dict[str, Path] = {}
    config = load_config(root / "task.toml", default_name=root.resolve().name)
    known = set(_check_queries(_table_source(root, "queries", files))["query_id"])
    samples = _check_samples(_table_source(root, "samples", files), known)
    judgments = _check_judgments(_table_source(root, "judgments", files), config, known)
    default, k = next_round_name(samples)
    name = name or default
    if len(samples) and name in set(samples["sample"]):
        raise ValueError(f"sample round {name!r} exists already; choose another --name")
    with _round_engine(bundle, engine) as con:
        register_keyed(con, config.matching)
        register_system_facts(con)
        sizes = con.query(BUCKET_SIZES)
        everyone = sorted(set(sizes["system"])) if systems is None else sorted(systems)
        wanted = per_system if isinstance(per_system, dict) else dict.fromkeys(everyone, per_system)
        draws = locate_draws(
            con, sizes, {s: n for s, n in wanted.items() if s in everyone}, seed, k
        )
        earlier = (
            _fact_keys(samples["query_id"], samples["answer"], config.matching)
            if len(samples)
            else np.empty(0, np.int64)
        )
        keys = np.concatenate([earlier, draws["h"].to_numpy(np.int64)])
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
                draws[["h", "system", "query_id"]].assign(answer=draws["answer_raw"]),
            ],
            ignore_index=True,
        )
        to_annotate = _to_annotate(con, todo, spelled)
    frame = _samples_frame(draws, name, seed, k)
    counts = frame.groupby("system").size().to_dict() if len(frame) else {}
    return SampleRound(
        name=name,
        samples=frame,
        units=pd.DataFrame(columns=["unit", "prob"]),
        to_annotate=to_annotate,
        sizes=counts,
    )


class _round_engine:
    """The bundle's engine with ``runs`` registered: its Parquet files, else the loaded runs."""

    def __init__(self, bundle, name: str) -> None:
        self.bundle, self.name = bundle, name

    def __enter__(self) -> Engine:
        from receval.engine.base import connect

        self.engine = connect(self.name, **({"on_disk": True} if self.name == "duckdb" else {}))
        sources = self.bundle.parquet_runs()
        if sources is not None:
            register_runs(self.engine, sources)
            return self.engine
        task = self.bundle.load(tables=(), run_columns=())
        outputs = task.raw_outputs
        frame = pd.DataFrame(
            {
                "system": outputs["system"].astype(str).to_numpy(),
                "query_id": outputs["query_id"].astype(str).to_numpy(),
                "answer": outputs["answer_raw"].astype(str).str.strip().to_numpy(),
            }
        )
        self.engine.register("runs_frame", frame)
        create_view(self.engine, "runs", "SELECT system, query_id, answer FROM runs_frame")
        return self.engine

    def __exit__(self, kind, value, trace) -> None:
        self.engine.close()
        if kind is not None and kind.__name__ == "OutOfMemoryException":
            from receval.engine.base import MEMORY_LIMIT_ENV

            raise ValueError(
                f"the engine ran out of its memory limit ({value}); set {MEMORY_LIMIT_ENV} "
                "higher (e.g. 4GB)"
            ) from None
