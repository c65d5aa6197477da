"""``score --estimator official`` without building the :class:`~receval.task.Task`: the census
counted from the run table's integer codes, read straight from Arrow.

Loading a task builds, per output row, the validated frames every estimator may need (raw and
collapsed outputs, facts, their systems); the official census of a fact-matched bundle needs
only four integer codes per run row (system, query, fact, and the fact's assessed category).
:func:`official_view` reads the bundle's small tables as the engine path does
(:func:`receval.engine.sampled_data.read_small_tables`: every check and error of the loader),
then the run table's ``system, query_id, answer`` (and ``score``, checked) columns with
Arrow's reader, dictionary-encodes them and numbers the facts: judged facts keep the small
tables' ids, the others follow.  The result, an :class:`OfficialView`, is what the scoring
pipeline reads of a task (:func:`receval.api.score` takes it as it takes the engine path's
view); the counting is :mod:`receval.official.coded`'s, so every file of the output set is the
same bytes as the in-memory path's (tests compare them).

It is taken by default (``out_of_core`` not given) for ``--estimator official`` without
``--cutoff``, in-process or DuckDB engine, when the bundle is plainly fact-matched: TSV or
Parquet run tables with ``system, query_id, answer`` columns and none of ``team``,
``provenance``, ``relation_provenance`` or ``hop``; every ``system``, ``query_id`` and ``answer``
non-empty, ASCII and free of whitespace (so the ``[matching]`` normalisation leaves it as it
is), every query known, every score a number, no (system, fact) output twice; no samples,
exhaustive units, truth or judge tables, equivalence classes or provenance in the judgments,
hops or slots in the queries, ``[universe] size``, conflicting judgments (``conflicts.csv`` names
facts by the loaded task's ids, numbered over every fact output).  Anything else (including every malformed
input) returns None: the in-memory path then scores it, or reports the error as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from receval.bundle import Bundle
from receval.engine.sampled_data import SmallTablesView
from receval.formats.buffers import numpy_array

if TYPE_CHECKING:
    from receval.engine.sampled_data import SmallTables
    from receval.official.coded import CodedResponses

#: Run columns the direct path reads (``score`` only to check it is a number).
READ_COLUMNS = ("system", "query_id", "answer", "score")
#: Run columns that change how responses match or group: their presence sends the bundle to
#: the in-memory path.
OTHER_PATH_COLUMNS = ("team", "provenance", "relation_provenance", "hop")
#: Bytes :meth:`str.isspace` takes as whitespace in ASCII text (a regular-expression class).
_ASCII_SPACE = r"[\t-\r\x1c-\x20]"
#: (system, fact) keys checked for repeats with a table of one byte per possible key up to
#: this many keys (else one sort).
PAIR_TABLE_BYTES = 1 << 28


@dataclass(frozen=True, eq=False)
class OfficialView(SmallTablesView):
    """What the official scoring pipeline reads of a task, without a row-level frame:
    the small tables, the sorted systems (each its own team) and the run rows' codes
    (``coded``, registered with :mod:`receval.official.coded`), ``pool_size`` the distinct
    facts output and ``in_pool`` which of the small tables' facts some system output."""

    root: Path
    small: SmallTables = field(repr=False)
    systems: list[str]
    coded: CodedResponses = field(repr=False)
    pool_size: int
    in_pool: np.ndarray = field(repr=False)
    fact_teams: np.ndarray = field(repr=False)  # per fact: its one team's code, -1 shared/none
    truth: None = None
    judge: None = None
    duplicate_rows: int = 0
    empty_systems: tuple[str, ...] = ()
    #: SHA-256 of input files already computed (the run table's, checked against its sidecar)
    known_checksums: dict[Path, str] = field(default_factory=dict, repr=False)

    @property
    def teams(self) -> dict[str, str]:
        return {s: s for s in self.systems}

    @cached_property
    def merged(self):
        from receval.engine.sampled_data import merged_labels

        return merged_labels(self.small)

    @property
    def labels(self) -> pd.Series:
        return self.merged.labels

    @property
    def raw_outputs(self) -> pd.DataFrame:
        """No row: the rows are ``coded`` (zero rows, so the census counts in process)."""
        return pd.DataFrame({c: [] for c in ("system", "team", "query_id", "answer", "fact")})

    def checksums(self) -> dict[str, str]:
        from receval.task import Task

        # reads files and root only; the run table's digest when its sidecar was checked
        return Task.checksums(self, self.known_checksums)  # type: ignore[arg-type]

    def diagnostics(self, joint: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
        """``per_query``, ``annotation``, ``pooling_bias`` and ``agreement`` as the in-memory
        path's :mod:`receval.diagnostics` computes them, from the codes."""
        from receval.agreement import agreement_by_round
        from receval.diagnostics import annotation_frame

        return {
            "per_query": self._per_query(),
            "annotation": annotation_frame(self.samples, self.systems, np.zeros(0), np.zeros(0)),
            "pooling_bias": self._pooling_bias(joint),
            "agreement": agreement_by_round(self),
        }

    def record(self) -> None:
        """Nothing for run.json: the output set is the in-memory path's."""
        return None

    def _per_query(self) -> pd.DataFrame:
        """``per_query.csv`` (:func:`receval.diagnostics.per_query`)."""
        from receval.diagnostics import judged_columns, sort_per_query

        coded = self.coded
        n_q = len(coded.queries)
        ids = coded.queries["query_id"]
        outputs = np.bincount(coded.query, minlength=n_q)
        seen = np.zeros(n_q * coded.n_systems, dtype=bool)
        seen[coded.query.astype(np.int64) * coded.n_systems + coded.system] = True
        systems = seen.reshape(n_q, coded.n_systems).sum(axis=1)
        q = self.queries[["query_id"]].copy()
        q["outputs"] = q["query_id"].map(pd.Series(outputs, index=ids)).fillna(0).astype(int)
        q["systems"] = q["query_id"].map(pd.Series(systems, index=ids)).fillna(0).astype(int)
        labels = self.labels
        facts = self.small.facts
        judged = facts[self.in_pool & facts.index.isin(labels.index)]
        judged_columns(q, judged, labels, self.merged.conflicts)
        q["exhaustive_facts"] = 0
        return sort_per_query(q)

    def _pooling_bias(self, joint: pd.DataFrame | None) -> pd.DataFrame:
        """``pooling_bias.csv`` (:func:`receval.diagnostics.pooling_bias`)."""
        from receval.diagnostics import pooling_bias_frame
        from receval.official.coded import leave_team_out_coded
        from receval.official.scores import official_scores

        teams = self.coded.teams
        team_of = pd.Series(self.teams, dtype=object)
        owner = self.fact_teams
        labelled = np.zeros(len(owner), dtype=bool)
        labelled[self.labels.index.to_numpy(np.int64)] = True
        unique = owner >= 0
        n = len(teams)
        return pooling_bias_frame(
            team_of,
            pd.Series(np.bincount(owner[unique], minlength=n), index=teams),
            pd.Series(np.bincount(owner[unique & labelled], minlength=n), index=teams),
            official_scores(self).set_index("system"),
            leave_team_out_coded(self),
            joint,
        )


def official_view(task: Any, options: Any, engine: Any, out_of_core: bool | None) -> Any:
    """The :class:`OfficialView` of bundle path ``task`` for a run with ``options``, or None
    when the in-memory path should score it (module docstring)."""
    if options.estimator != "official" or options.cutoff is not None or out_of_core is not None:
        return None
    if not isinstance(task, (str, Path)) or engine not in (None, "duckdb"):
        return None
    bundle = Bundle(task)
    bundle.check_folder()
    runs = _single_run_table(bundle)
    if runs is None:
        return None
    from receval.engine.sampled_data import read_small_tables

    small = read_small_tables(_Listed(bundle.root, runs=runs))
    if not _small_ok(small):
        return None
    small.files["runs"] = runs
    columns = _run_columns(bundle.root, runs)
    known = {runs: columns.sha256} if getattr(columns, "sha256", "") else {}
    view = _view(Path(task), small, columns, known)  # None: not plain
    if view is not None and len(view.merged.conflicts):
        return None  # conflicts.csv names facts by the task's ids over every fact output
    return view


def _single_run_table(bundle: Any) -> Path | None:
    """The bundle's one run table (``runs.tsv`` or ``runs.parquet``), or None for any other
    layout (a ``runs/`` folder, a Parquet dataset, a CSV table: the in-memory path reads them,
    and reports an ambiguous or missing one)."""
    path = bundle.table("runs")
    root = Path(bundle.root)
    if path is None or path.is_dir() or (root / "runs").exists():
        return None
    return path if path.suffix.lower() in (".tsv", ".parquet") else None


class _Listed(Bundle):
    """A bundle whose run files are known (:func:`_single_run_table`) and not read to list
    them (:meth:`receval.bundle.Bundle.run_files` reads a text run table whole)."""

    def __init__(self, root: Path, *, runs: Path) -> None:
        super().__init__(root)
        object.__setattr__(self, "_runs", runs)

    def run_files(self) -> dict[str, Path]:
        return {"runs": self._runs}


def _small_ok(small: SmallTables) -> bool:
    """Whether the small tables are plainly fact-matched (module docstring)."""
    if small.optional or len(small.samples) or small.config.universe_size is not None:
        return False
    judg, queries = small.judgments, small.queries
    for column in ("equivalence_class", "provenance", "relation_provenance", "ec_mention_type"):
        blank = ("", "0") if column == "equivalence_class" else ("",)
        if column in judg and (~judg[column].fillna("").astype(str).str.strip().isin(blank)).any():
            return False
    return "hop" not in queries and "slot" not in queries


def _read_runs(paths: list[Path]) -> Any:
    """The run tables' ``system, query_id, answer`` (and ``score``) as one Arrow table, or
    None when a file is not a plain TSV or Parquet table of those columns."""
    import pyarrow as pa

    parts = []
    for path in paths:
        part = _read_run(path)
        if part is None or part.num_rows == 0:
            return None
        parts.append(part.select([c for c in READ_COLUMNS if c in part.column_names]))
    if len({tuple(p.column_names) for p in parts}) != 1:
        return None
    return pa.concat_tables(parts)


def _read_run(path: Path) -> Any:
    import pyarrow as pa

    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        if not _columns_ok(names):
            return None
        table = pq.read_table(path, columns=[c for c in READ_COLUMNS if c in names])
        for name in table.column_names:
            if name != "score" and not pa.types.is_string(table.schema.field(name).type):
                return None
        return table
    return _read_tsv(path) if suffix == ".tsv" else None


def _read_tsv(path: Path) -> Any:
    """A plain TSV run table (:func:`receval.formats.tables.read_plain_tsv`'s byte-level
    tests) parsed by Arrow's reader: the text columns as strings, ``score`` as float64; None
    when Arrow cannot read it so (the loader then reads it, or names the bad line)."""
    from receval.formats.tables import _looks_plain, mapped_bytes

    with mapped_bytes(path) as raw:  # the byte-level tests, then unmapped: Arrow reads the file
        end = raw.find(b"\n")
        header = raw[:] if end < 0 else raw[:end]
        if not _looks_plain(raw, header):
            return None
        size = len(raw)
    try:
        names = header.rstrip(b"\r").decode("utf-8").split("\t")
    except UnicodeDecodeError:
        return None
    if len(set(names)) < len(names) or any(n != n.strip() for n in names):
        return None
    if not _columns_ok(names):
        return None
    return _parse_tsv(path, names, size)


def _parse_tsv(path: Path, names: list[str], size: int) -> Any:
    """Arrow's parse of a plain TSV run table's ``READ_COLUMNS`` (``score`` as float64) read
    from the file block by block (the text is not held whole), or None when it fails."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from receval.formats.tables import THREADED_PARSE_BYTES

    wanted = [c for c in READ_COLUMNS if c in names]
    types = {c: pa.float64() if c == "score" else pa.string() for c in wanted}
    try:
        return pacsv.read_csv(
            str(path),
            read_options=pacsv.ReadOptions(
                column_names=names, skip_rows=1, use_threads=size > THREADED_PARSE_BYTES
            ),
            parse_options=pacsv.ParseOptions(
                delimiter="\t",
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                include_columns=wanted,
            ),
        )
    except pa.ArrowInvalid:
        return None


def _columns_ok(names: list[str]) -> bool:
    return all(c in names for c in READ_COLUMNS[:3]) and not set(names) & set(OTHER_PATH_COLUMNS)


def _plain_text(dictionary: Any, whitespace_inside: bool = False) -> bool:
    """Every value non-empty ASCII without leading or trailing whitespace (none at all unless
    ``whitespace_inside``)."""
    import pyarrow.compute as pc

    if not len(dictionary) or not pc.all(pc.string_is_ascii(dictionary)).as_py():
        return False
    if pc.min(pc.binary_length(dictionary)).as_py() == 0:
        return False
    pattern = f"^{_ASCII_SPACE}|{_ASCII_SPACE}$" if whitespace_inside else _ASCII_SPACE
    return not pc.any(pc.match_substring_regex(dictionary, pattern)).as_py()


def _encoded(column: Any, whitespace_inside: bool = False) -> tuple[Any, np.ndarray] | None:
    """(distinct values, int32 codes) of a string column, or None when it has a null or a value
    that is not plain (:func:`_plain_text`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.null_count:
        return None
    encoded = pc.dictionary_encode(column)
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    if not chunks:
        return None
    dictionary = chunks[0].dictionary
    if not _plain_text(dictionary, whitespace_inside):
        return None
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks])
    return dictionary, codes


def _encoded_runs(column: Any, whitespace_inside: bool = False) -> tuple | None:
    """(distinct values, int32 codes, where each run of equal values begins) of a string
    column: :func:`_encoded` of each run's first value, repeated over the run (the same
    values and codes: a value first appears at a run's start).  Run tables come in long runs
    of one system and one query, so few values are hashed."""
    import pyarrow as pa

    if column.null_count:
        return None
    starts = _run_starts(column)
    if not len(starts):
        return None
    encoded = _encoded(column.take(pa.array(starts)), whitespace_inside)
    if encoded is None:
        return None
    values, codes = encoded
    return values, np.repeat(codes, np.diff(np.append(starts, len(column)))), starts


def _run_starts(column: Any) -> np.ndarray:
    """Row positions where a run of equal values of a string column begins (every chunk's
    first row included)."""
    import pyarrow.compute as pc

    chunks = column.chunks if hasattr(column, "chunks") else [column]
    starts, offset = [], 0
    for chunk in chunks:
        n = len(chunk)
        if n:
            change = np.ones(n, dtype=bool)
            if n > 1:
                change[1:] = numpy_array(pc.not_equal(chunk.slice(1), chunk.slice(0, n - 1)))
            starts.append(np.flatnonzero(change) + offset)
        offset += n
    return np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)


def _scores_ok(table: Any) -> bool:
    """Every ``score`` (when the runs have one) a number, as the loader requires."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "score" not in table.column_names:
        return True
    score = table["score"]
    if score.null_count:
        return False
    if pa.types.is_integer(score.type):
        return True
    if not pa.types.is_floating(score.type):
        try:
            score = pc.cast(score, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
    return bool(pc.all(pc.is_finite(score)).as_py())


def _run_columns(root: Path, runs: Path) -> Any:
    """The run table's columns: its sidecar (:func:`receval.formats.runs_sidecar.
    read_runs_columns`, written by ``import trec``) when it belongs to the table as it is,
    else the table read (:func:`_read_runs`; None when it is not plainly readable)."""
    from receval.formats.runs_sidecar import read_runs_columns

    columns = read_runs_columns(root, runs)
    return _read_runs([runs]) if columns is None else columns


def _view(
    root: Path, small: SmallTables, table: Any, known: dict[Path, str] | None = None
) -> OfficialView | None:
    """Encode the runs (``table``: an Arrow table, the sidecar's
    :class:`~receval.formats.runs_sidecar.RunsColumns`, or None when something is not plain)
    and build the view (``known``: its :attr:`OfficialView.known_checksums`)."""
    from receval.formats.runs_sidecar import RunsColumns

    if table is None:
        return None
    if isinstance(table, RunsColumns):  # its scores were checked when it was written
        encoded = _encoded_blocks(table.blocks)
        answer, checked = table.answer, (True, table.plain_answers)
    elif _scores_ok(table):
        encoded = _encoded_table(table)
        answer, checked = table["answer"], (False, False)
        del table
    else:
        return None
    if encoded is None:
        return None
    return _coded_view(root, small, *encoded, answer, *checked, known=known or {})


def _encoded_table(table: Any) -> tuple | None:
    """(systems, their row codes, query ids, their row codes, where each run of one query
    begins) of a run table's columns (:func:`_encoded_runs`), or None (not plain)."""
    encoded = [_encoded_runs(table[c], c == "system") for c in ("system", "query_id")]
    if encoded[0] is None or encoded[1] is None:
        return None
    (systems, sys_codes, _), (qids, q_codes, q_starts) = encoded
    return systems, sys_codes, qids, q_codes, q_starts


def _encoded_blocks(blocks: Any) -> tuple | None:
    """:func:`_encoded_table` of the sidecar's blocks (one system and one query each): the
    same dictionaries (first appearance order) and row codes, each block a run."""
    lengths = numpy_array(blocks["rows"])
    systems, queries = _encoded(blocks["system"], True), _encoded(blocks["query_id"])
    if systems is None or queries is None:
        return None
    starts = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)[:-1]])
    sys_codes, q_codes = (np.repeat(codes, lengths) for _, codes in (systems, queries))
    return systems[0], sys_codes, queries[0], q_codes, starts


def _coded_view(
    root: Path,
    small: SmallTables,
    systems: Any,
    sys_codes: np.ndarray,
    qids: Any,
    q_codes: np.ndarray,
    q_starts: np.ndarray,
    answer: Any,
    distinct: bool = False,
    plain: bool = False,
    known: dict[Path, str] | None = None,
) -> OfficialView | None:
    """The view of the runs' encoded systems and queries and their ``answer`` column.
    ``distinct``: no system outputs a (query, answer) twice, ``plain``: every answer is plain
    text (:func:`_plain_text`), both known (the sidecar of an imported TREC run table: the
    import checked them), else checked here; ``known``: input files' SHA-256 already computed
    (:attr:`OfficialView.known_checksums`)."""
    from receval.official.coded import fact_owners, register_responses, responses_of_codes
    from receval.official.rules import hop0_queries

    query_ids = small.queries["query_id"].astype(str)
    query_of = pd.Index(query_ids).get_indexer(qids.to_pylist())
    if (query_of < 0).any():
        return None
    names = systems.to_pylist()
    order = np.argsort(np.array(names, dtype=object), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    system = rank.astype(np.int32)[sys_codes]
    query = query_of.astype(np.int32)[q_codes]
    del sys_codes, q_codes
    facts = _facts_of_answers(small, answer, query, q_starts, query_ids, plain)
    del answer
    if facts is None:
        return None
    fact, n_facts, in_pool = facts
    n_sys = len(names)
    if not distinct and _repeats(fact.astype(np.int64) * n_sys + system, n_facts * n_sys):
        return None
    teams = sorted(names)  # each system its own team
    coded = responses_of_codes(
        hop0_queries(small), small.judgments, teams, (system, system, query, fact), n_sys,
        n_facts, distinct_pairs=True,
    )  # fmt: skip
    view = OfficialView(
        root=root,
        small=small,
        systems=teams,
        coded=coded,
        pool_size=int(n_facts - (len(in_pool) - in_pool.sum())),
        in_pool=in_pool,
        fact_teams=fact_owners(coded),
        known_checksums=known or {},
    )
    register_responses(view, coded)
    return view


def _facts_of_answers(
    small: SmallTables,
    answer: Any,
    query: np.ndarray,
    starts: np.ndarray,
    query_ids: pd.Series,
    plain: bool = False,
) -> tuple[np.ndarray, int, np.ndarray] | None:
    """:func:`_facts` of the run rows' ``answer`` column, encoded query by query
    (:func:`_grouped_pairs`) when the rows come in blocks of one query (``starts``), else as
    one dictionary; None when an answer is not plain (:func:`_plain_text`) or, with
    ``casefold``, not lower case."""
    import pyarrow.compute as pc

    casefold = small.config.matching.casefold
    grouped = _grouped_pairs(answer, query, starts, len(query_ids))
    if grouped is not None:
        codes, dictionaries, offsets = grouped
        every = _chunked(dictionaries)
        if not (plain or _plain_text(every)) or (
            casefold and not pc.all(pc.equal(pc.ascii_lower(every), every)).as_py()
        ):
            return None
        where = _known_grouped(small.facts, query_ids, dictionaries, offsets)
        return None if where is None else _numbered(where, int(offsets[-1]), codes)
    encoded = _encoded(answer)
    if encoded is None:
        return None
    answers, a_codes = encoded
    if casefold and not pc.all(pc.equal(pc.ascii_lower(answers), answers)).as_py():
        return None
    return _facts(small, query, a_codes, answers, query_ids)


#: Answers are encoded query by query when the rows come in at most this many blocks of one
#: query per row (run tables written run by run, each sorted by query, as ``import trec``
#: writes them): one small hash table per query instead of one over every distinct answer.
GROUPED_BLOCKS_PER_ROW = 1 / 16


def _grouped_pairs(
    answer: Any, query: np.ndarray, starts: np.ndarray, n_query: int
) -> tuple[np.ndarray, list, np.ndarray] | None:
    """(per row, a code of its (query, answer) pair; per query, its distinct answers; per
    query, the first code of its pairs, and the number of pairs last): each query's answers
    dictionary-encoded over its blocks of rows (``starts``: where each block begins), or None
    when the rows come in too many blocks (:data:`GROUPED_BLOCKS_PER_ROW`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(answer)
    if not n or len(starts) > n * GROUPED_BLOCKS_PER_ROW:
        return None
    ends = np.append(starts[1:], n)
    block_query = query[starts]
    order = np.argsort(block_query, kind="stable")
    bounds = np.searchsorted(block_query[order], np.arange(n_query + 1))
    codes = np.empty(n, dtype=np.int64)
    offsets = np.zeros(n_query + 1, dtype=np.int64)
    dictionaries = []
    for q in range(n_query):
        blocks = order[bounds[q] : bounds[q + 1]]
        slices = [answer.slice(starts[b], ends[b] - starts[b]) for b in blocks]
        chunks = [c for piece in slices for c in piece.chunks if len(c)]
        if not chunks:
            dictionaries.append(pa.array([], answer.type))
            offsets[q + 1] = offsets[q]
            continue
        encoded = pc.dictionary_encode(pa.chunked_array(chunks, answer.type)).chunks
        local = np.concatenate([numpy_array(c.indices) for c in encoded]) + offsets[q]
        at = 0
        for b in blocks:
            size = int(ends[b] - starts[b])
            codes[starts[b] : starts[b] + size] = local[at : at + size]
            at += size
        dictionaries.append(encoded[0].dictionary)
        offsets[q + 1] = offsets[q] + len(encoded[0].dictionary)
    return codes, dictionaries, offsets


def _chunked(arrays: list) -> Any:
    import pyarrow as pa

    return pa.chunked_array([a for a in arrays if len(a)] or arrays[:1])


def _known_grouped(
    known: pd.DataFrame, query_ids: pd.Series, dictionaries: list, offsets: np.ndarray
) -> np.ndarray | None:
    """Per small-table fact, the code of its (query, answer) pair among
    :func:`_grouped_pairs`'s, -1 when no row has it; None for a fact of an unknown query."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kq = pd.Index(query_ids).get_indexer(known["query_id"].astype(str))
    if (kq < 0).any():
        return None
    answers = pa.array(known["answer"].astype(str), from_pandas=True)
    where = np.full(len(known), -1, dtype=np.int64)
    order = np.argsort(kq, kind="stable")
    bounds = np.searchsorted(kq[order], np.arange(len(dictionaries) + 1))
    for q in np.flatnonzero(np.diff(bounds)):
        rows = order[bounds[q] : bounds[q + 1]]
        if not len(dictionaries[q]):
            continue
        mine = answers.take(pa.array(rows)).cast(dictionaries[q].type)
        local = numpy_array(pc.fill_null(pc.index_in(mine, value_set=dictionaries[q]), -1))
        where[rows] = np.where(local >= 0, local + offsets[q], -1)
    return where


def _numbered(
    where: np.ndarray, n_pairs: int, codes: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray]:
    """(fact id of every row, number of facts, which small-table facts are output) from the
    small-table facts' pair codes (``where``, -1: not output) and the rows' (``codes``): the
    small tables' facts keep their ids, the other pairs follow in code order."""
    in_pool = where >= 0
    fact_of = np.full(n_pairs, -1, dtype=np.int64)
    fact_of[where[in_pool]] = np.flatnonzero(in_pool)
    new = fact_of < 0
    fact_of[new] = len(where) + np.arange(int(new.sum()))
    n_facts = len(where) + int(new.sum())
    kind = np.int32 if n_facts < np.iinfo(np.int32).max else np.int64
    return fact_of.astype(kind)[codes], n_facts, in_pool


def _facts(
    small: SmallTables, query: np.ndarray, a_codes: np.ndarray, answers: Any, query_ids: pd.Series
) -> tuple[np.ndarray, int, np.ndarray] | None:
    """(fact id of every row, number of facts, which small-table facts are output): the small
    tables' facts keep their ids, the other facts output follow (:func:`_pair_codes`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes, n_pairs, pair_of = _pair_codes(query, a_codes, len(answers))
    known = small.facts
    kq = pd.Index(query_ids).get_indexer(known["query_id"].astype(str))
    if (kq < 0).any():
        return None
    known_answers = pa.array(known["answer"].astype(str).to_numpy(object), pa.string())
    ka = pc.index_in(known_answers, value_set=answers.cast(pa.string()))
    ka = ka.to_numpy(zero_copy_only=False)
    ka = np.where(np.isnan(ka.astype(float)), -1, ka).astype(np.int64)
    where = np.where(ka >= 0, pair_of(kq, ka), -1)
    return _numbered(where, n_pairs, codes)


def _pair_codes(query: np.ndarray, answer: np.ndarray, n_ans: int):
    """A code for every distinct (query, answer) pair of the rows, without hashing every row:
    an answer's pair with the first query it came with is coded by the answer itself
    (``0 .. n_ans-1``, all used: every answer came with some query); only the rows of an answer
    with another query (a document retrieved for several topics) are factorised, coded from
    ``n_ans`` on.  Returns (row codes, number of codes, ``pair_of(query, answer)``: the code of
    given pairs, -1 for pairs no row has)."""
    first = np.empty(n_ans, dtype=query.dtype)
    first[answer[::-1]] = query[::-1]  # reversed: the first row's query wins
    other = np.flatnonzero(first[answer] != query)
    codes = answer.astype(np.int64)
    extra = pd.Index([], dtype=np.int64)
    if len(other):
        key = query[other].astype(np.int64) * n_ans + answer[other]
        sub, extra = pd.factorize(key)
        codes[other] = n_ans + sub
        extra = pd.Index(extra)

    def pair_of(q: np.ndarray, a: np.ndarray) -> np.ndarray:
        out = np.full(len(q), -1, dtype=np.int64)
        own = first[a] == q
        out[own] = a[own]
        rest = np.flatnonzero(~own)
        if len(rest) and len(extra):
            found = extra.get_indexer(q[rest].astype(np.int64) * n_ans + a[rest])
            out[rest] = np.where(found >= 0, n_ans + found, -1)
        return out

    return codes, n_ans + len(extra), pair_of


def _repeats(key: np.ndarray, size: int) -> bool:
    """Whether a value of ``key`` (in [0, size)) occurs twice: a table of flags when it fits
    in :data:`PAIR_TABLE_BYTES`, else one sort."""
    if size <= PAIR_TABLE_BYTES:
        seen = np.zeros(size, dtype=bool)
        seen[key] = True
        return int(np.count_nonzero(seen)) < len(key)
    key = np.sort(key)
    return bool((key[1:] == key[:-1]).any())
