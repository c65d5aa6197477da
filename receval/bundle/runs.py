"""The runs checked and encoded: every run row as integer codes (:class:`Vocabulary`,
:class:`_EncodedRuns`), answers normalised into facts numbered over everything the bundle
mentions (:func:`_attach_facts`), and duplicate outputs collapsed (:func:`_collapse_outputs`).
The runs are never all strings at once: one source is read, checked and encoded at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.bundle.answers import _strip, normalize_answers
from receval.bundle.sources import _require
from receval.config import Matching
from receval.errors import BundleError
from receval.formats.checks import parse_numbers
from receval.formats.tables import LINE, STRING, arrow_series, text_column

if TYPE_CHECKING:
    from receval.formats.coded import CodedTable


def _code_dtype(n: int) -> type:
    """The smallest signed integer type pandas uses for the codes of ``n`` categories."""
    for kind in (np.int8, np.int16, np.int32):
        if n < np.iinfo(kind).max:
            return kind
    return np.int64


class Vocabulary:
    """Strings numbered in first-seen order, grown one column at a time (:meth:`encode`);
    :meth:`categorical` turns codes into a Categorical with sorted categories.

    Hashing and lookups run in Arrow kernels (no Python object per value).  Two levels, so that
    a lookup hashes the large part rarely rebuilt (``_old``) and the values added since
    (``_new``), merged when ``_new`` grows large.
    """

    def __init__(self) -> None:
        import pyarrow as pa

        self._old = pa.array([], type=pa.large_string())
        self._new: list = []
        self._new_len = 0

    def __len__(self) -> int:
        return len(self._old) + self._new_len

    #: From this many values on, lookups in ``_old`` run as a DuckDB join (faster than
    #: hashing the whole value set again in Arrow for every column).
    LARGE = 1_000_000

    def _merge(self) -> None:
        import pyarrow as pa

        if self._new:
            self._old = pa.concat_arrays([self._old, *self._new])
            self._new, self._new_len = [], 0
            self._table = None

    def _lookup_old(self, uniques) -> np.ndarray:
        """The ``_old`` code of every value of ``uniques`` (-1 when absent)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if len(self._old) < self.LARGE:
            found = pc.index_in(uniques, value_set=self._old).to_numpy(zero_copy_only=False)
            if found.dtype.kind != "f":
                return found.astype(np.int64)
            return np.where(np.isnan(found), -1, np.nan_to_num(found, nan=-1)).astype(np.int64)
        if getattr(self, "_table", None) is None:
            import duckdb

            if getattr(self, "_con", None) is None:
                import tempfile

                self._con = duckdb.connect()
                self._con.execute("SET memory_limit = '2GB'")  # spills beyond that
                spill = Path(tempfile.gettempdir()) / "receval-duckdb"
                self._con.execute(f"SET temp_directory = '{spill.as_posix()}'")
            codes = pa.array(np.arange(len(self._old), dtype=np.int64))
            self._con.register("known_values", pa.table({"a": self._old, "code": codes}))
            self._con.execute("CREATE OR REPLACE TABLE known AS SELECT a, code FROM known_values")
            self._con.unregister("known_values")
            self._table = "known"
        index = pa.array(np.arange(len(uniques), dtype=np.int64))
        self._con.register("wanted", pa.table({"a": uniques, "i": index}))
        hits = self._con.execute(
            "SELECT w.i, k.code FROM wanted w JOIN known k ON w.a = k.a"
        ).fetchnumpy()
        self._con.unregister("wanted")
        out = np.full(len(uniques), -1, dtype=np.int64)
        out[np.asarray(hits["i"], dtype=np.int64)] = np.asarray(hits["code"], dtype=np.int64)
        return out

    @property
    def values(self):
        """Every value, in code order (a pyarrow array)."""
        self._merge()
        return self._old

    def encode(self, column) -> tuple[np.ndarray, object]:
        """(codes of ``column``, the values this call added, in code order, as an Arrow
        array)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        values = pa.array(np.asarray(column, dtype=object) if isinstance(column, list) else column)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        values = values.cast(pa.large_string())
        encoded = pc.dictionary_encode(values)
        uniques = encoded.dictionary
        where = np.full(len(uniques), -1, dtype=np.int64)
        if len(self._old) and len(uniques):
            where = self._lookup_old(uniques)
        miss = np.flatnonzero(where < 0)
        if len(miss) and self._new_len:
            found = pc.index_in(uniques.take(pa.array(miss)), value_set=pa.concat_arrays(self._new))
            found = found.to_numpy(zero_copy_only=False)
            hit = ~np.isnan(found) if found.dtype.kind == "f" else np.ones(len(found), bool)
            where[miss[hit]] = np.nan_to_num(found[hit]).astype(np.int64) + len(self._old)
            miss = miss[~hit]
        added = uniques.take(pa.array(miss)) if len(miss) else uniques.slice(0, 0)
        if len(miss):
            where[miss] = np.arange(len(self), len(self) + len(miss))
            self._new.append(added)
            self._new_len += len(added)
            if self._new_len > max(len(self._old) // 4, 4096):
                self._merge()
        codes = where[encoded.indices.to_numpy(zero_copy_only=False)]
        return codes, added

    def code_of(self, value: str) -> int:
        """The code of ``value`` (added when new)."""
        return int(self.encode(np.array([value], dtype=object))[0][0])

    def ranks(self) -> tuple[np.ndarray, pd.Index]:
        """(rank of every code in sorted order, the sorted values)."""
        import pyarrow.compute as pc

        values = self.values
        order = pc.sort_indices(values)
        rank = np.empty(len(values), dtype=np.int64)
        rank[order.to_numpy()] = np.arange(len(values))
        return rank, pd.Index(text_column(values.take(order)))

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        rank, categories = self.ranks()
        kind = _code_dtype(len(categories))
        return pd.Categorical.from_codes(
            rank.astype(kind)[codes], dtype=pd.CategoricalDtype(categories), validate=False
        )


@dataclass
class _EncodedRuns:
    """Every run row as integer codes, in input order (files in order, rows in file order)."""

    queries: pd.Index  # sorted query ids: query codes index it
    systems: Vocabulary = field(default_factory=Vocabulary)
    teams: Vocabulary = field(default_factory=Vocabulary)
    raw: Vocabulary = field(default_factory=Vocabulary)  # answers as given
    normalized: Vocabulary = field(default_factory=Vocabulary)
    raw_to_normalized: list[np.ndarray] = field(default_factory=list)
    # provenance and extra columns: a vocabulary, or None for a plain (mostly distinct) column
    text: dict[str, Vocabulary | None] = field(default_factory=dict)
    parts: list[dict[str, np.ndarray]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    path_codes: dict[str, int] = field(default_factory=dict)
    empty_systems: tuple[str, ...] = ()

    def add(self, table: CodedTable, scores: np.ndarray | None, matching: Matching) -> None:
        """Encode one checked run table (its text columns stripped where they should be) and
        forget its strings."""
        values, codes = table.text["answer"]
        # several parts (Parquet row groups) of one file share its code
        file_code = self.path_codes.setdefault(str(table.path), len(self.paths))
        raw_codes, new = self.raw.encode(values)
        if len(new):
            fresh = text_column(new)
            self.raw_to_normalized.append(
                self.normalized.encode(normalize_answers(fresh, matching))[0]
            )
        queries = self.queries.get_indexer(table.text["query_id"][0].to_numpy(zero_copy_only=False))
        part = {
            "system": _encode_values(self.systems, table, "system", strip=False),
            "query_id": _narrow_codes(queries)[table.text["query_id"][1]],
            "answer_raw": raw_codes.astype(np.int32)[codes],
            "score": scores,
            "_file": np.full(table.rows, file_code, dtype=_code_dtype(file_code + 1)),
            LINE: None if table.lines is None and not table.row_offset else table.line_numbers(),
            "_rows": table.rows,
            "_path": str(table.path),
        }
        part["team"] = (
            _encode_values(self.teams, table, "team", strip=True) if "team" in table.text else None
        )
        for col in table.columns:
            if col in ("system", "query_id", "answer", "score", "team"):
                continue
            if col not in self.text:
                self.text[col] = None if col in table.plain else Vocabulary()
            vocab = self.text[col]
            if vocab is None:
                part[col] = table.plain_text(col)
            else:
                part[col] = _encode_values(vocab, table, col, strip=col == "provenance")
        self.parts.append(part)
        if file_code == len(self.paths):
            self.paths.append(str(table.path))

    def column(self, name: str, blank: int | float = -1, *, pop: bool = False) -> np.ndarray:
        """One code column over every row (``blank`` for files without the column; row numbers
        for a file without line numbers); ``pop`` forgets the per-file pieces (so a column is
        held once)."""

        def piece(p: dict) -> np.ndarray:
            got = p.pop(name, None) if pop else p.get(name)
            return got if got is not None else self._blank(p, name, blank)

        if len(self.parts) == 1:
            return np.asarray(piece(self.parts[0]))
        kinds = [
            p[name].dtype if p.get(name) is not None else self._blank_dtype(name, blank)
            for p in self.parts
        ]
        out = np.empty(sum(p["_rows"] for p in self.parts), dtype=np.result_type(*kinds))
        start = 0
        for p in self.parts:  # filled file by file: each piece freed once copied when popping
            out[start : start + p["_rows"]] = piece(p)
            start += p["_rows"]
        return out

    def drop(self, name: str) -> None:
        """Forget a column's per-file pieces."""
        for p in self.parts:
            p.pop(name, None)

    def plain_column(self, name: str) -> pd.Series:
        """A plain text column over every row ("" for files without it), forgotten per file."""
        import pyarrow as pa

        pieces = []
        for p in self.parts:
            piece = p.pop(name, None)
            if piece is None:
                piece = pa.nulls(p["_rows"], pa.large_string()).fill_null("")
            pieces.append(piece)
        return arrow_series(pa.chunked_array(pieces, pa.large_string()))

    @staticmethod
    def _blank(part: dict, name: str, blank: int | float) -> np.ndarray:
        kind = _EncodedRuns._blank_dtype(name, blank)
        if name == LINE:
            return np.arange(1, part["_rows"] + 1, dtype=kind)
        return np.full(part["_rows"], blank, dtype=kind)

    @staticmethod
    def _blank_dtype(name: str, blank: int | float) -> np.dtype:
        if name == LINE:
            return np.dtype(np.int32)
        if isinstance(blank, int) and blank >= 0:  # a code: as narrow as it can be
            return np.dtype(_code_dtype(blank + 1))
        return np.asarray(blank).dtype

    def normalized_codes(self) -> np.ndarray:
        """Normalised-answer code of every raw-answer code."""
        return np.concatenate(self.raw_to_normalized) if self.raw_to_normalized else np.zeros(0)


def _encode_values(vocab: Vocabulary, table: CodedTable, name: str, *, strip: bool) -> np.ndarray:
    """``vocab`` codes (int32) of a text column of ``table``: each distinct value is stripped
    (when ``strip``) and looked up once."""
    values, codes = table.coded(name)
    return _narrow_codes(vocab.encode(_strip(values) if strip else values)[0])[codes]


def _narrow_codes(codes: np.ndarray) -> np.ndarray:
    """Codes in the smallest integer type that holds them (columns are concatenated over the
    files later, in the widest type any file needed)."""
    return codes.astype(_code_dtype(int(codes.max(initial=0)) + 1))


def _read_run_source(src) -> CodedTable:
    return src() if callable(src) else src


def _encode_runs(
    sources: list, queries: pd.Index, known: set[str], matching: Matching
) -> _EncodedRuns:
    """Read and check the run tables one at a time (``_file`` = the path errors name) and
    encode them (:class:`_EncodedRuns`).

    In a ``runs/`` folder a file with a header and no rows is an empty submission: it is left
    out here and listed in ``empty_systems`` (scored: precision undefined, recall 0).  A bundle
    with no outputs at all is an error.
    """
    from receval.progress import progress

    runs = _EncodedRuns(queries=queries)
    empty = []
    first = None
    with progress(sources, "reading runs") as items:
        for item in items:
            table = _read_run_source(item)
            first = first or table
            _require(table, ("system", "query_id", "answer"), "runs")
            if table.empty:  # a header-only runs/<system> file: an empty submission
                if table.submission is not None:
                    empty.append(table.submission)
                continue
            _check_run_values(table, known)
            runs.add(table, _run_scores(table), matching)
    if not runs.parts:
        raise BundleError(first.path, first.first_row, f"no outputs: {first.no_rows}")
    runs.empty_systems = tuple(empty) if len(sources) > 1 else ()
    return runs


def _check_run_values(table: CodedTable, known: set[str]) -> None:
    """No blank system, query or answer (system and query stripped, answers kept verbatim for
    normalisation); every query in ``queries``."""
    import pyarrow.compute as pc

    for col in ("system", "query_id", "answer"):
        values = table.text[col][0]
        stripped = _strip(values)
        row, _ = table.first_row_where(col, _flags(pc.equal(stripped, "")))
        if row >= 0:
            raise BundleError(
                table.path, table.line(row), f"empty value in required column {col!r}"
            )
        if col != "answer":
            table.replace_values(col, stripped)
    ids = table.text["query_id"][0].to_numpy(zero_copy_only=False)
    unknown = ~pd.Index(ids, dtype=object).isin(known)
    row, count = table.first_row_where("query_id", unknown)
    if row >= 0:
        raise BundleError(
            table.path,
            table.line(row),
            f"query_id {table.value_at('query_id', row)!r} is not in queries ({count} such rows)",
        )


def _flags(mask) -> np.ndarray:
    """An Arrow boolean array as a numpy bool array (null = False)."""
    return np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _run_scores(table: CodedTable) -> np.ndarray | None:
    """The ``score`` column as floats (NaN = empty); a text that is not a finite number is an
    error naming its first row."""
    if "score" in table.numbers:
        values = table.numbers["score"]
        bad = np.flatnonzero(np.isinf(values))
        if len(bad):
            text = repr(float(values[bad[0]]))
            raise BundleError(
                table.path, table.line(bad[0]), f"column 'score': {text!r} is not a finite number"
            )
        return values
    if "score" in table.plain:  # one text per row
        values, codes = table.plain["score"], np.arange(table.rows)
    elif "score" in table.text:  # distinct texts, parsed once each
        values, codes = table.text["score"]
    else:
        return None
    # every text a finite number: Arrow's parse, no Python object per text (it refuses
    # surrounding whitespace, so texts it reads as they are need no stripping)
    fast = _arrow_floats(values)
    if fast is not None:
        return fast[codes]
    stripped = _strip(values)
    fast = _arrow_floats(stripped)
    if fast is not None:
        return fast[codes]
    text = pd.Series(stripped.to_numpy(zero_copy_only=False), dtype=object)
    numbers, bad = parse_numbers(text, allow_empty=True)
    rows = np.flatnonzero(bad[codes])
    if len(rows):
        raise BundleError(
            table.path,
            table.line(rows[0]),
            f"column 'score': {text.iloc[int(codes[rows[0]])]!r} is not a finite number",
        )
    return numbers.to_numpy(float)[codes]


def _arrow_floats(texts) -> np.ndarray | None:
    """Stripped number texts as float64 by Arrow's parser (correctly rounded, as pandas'), or
    None when one is empty or not a finite number (the caller's parse then names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        values = pc.cast(texts, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return values if np.isfinite(values).all() else None


def _run_teams(runs: _EncodedRuns) -> np.ndarray:
    """One team per system: a blank team cell takes the system's team (or its name when no row
    names a team).  Returns the team name of every system code (object array).

    File by file (a system's rows are in one file), so no array spans every row.
    """
    systems = runs.systems.values.to_numpy(zero_copy_only=False)
    first_team = np.full(len(systems), -1, dtype=np.int64)
    if not len(runs.teams):
        return systems.copy()
    blank = runs.teams.code_of("")
    teams = runs.teams.values.to_numpy(zero_copy_only=False)
    for p in runs.parts:
        path = p["_path"]
        team_codes = p.pop("team", None)
        if team_codes is None:
            continue
        sys_codes = p["system"]
        named = team_codes != blank
        rows = np.flatnonzero(named)[::-1]
        first_row = np.full(len(systems), -1, dtype=np.int64)
        first_row[sys_codes[rows]] = rows  # reversed, so the earliest row of each system wins
        found = (first_row >= 0) & (first_team < 0)
        first_team[found] = team_codes[first_row[found]]
        differs = named & (team_codes != first_team[sys_codes])
        if differs.any():
            i = int(differs.nonzero()[0][0])
            raise BundleError(
                Path(path),
                int(p[LINE][i]) if p[LINE] is not None else i + 1,
                f"system {systems[sys_codes[i]]!r} is given two teams "
                f"({teams[first_team[sys_codes[i]]]!r} and {teams[team_codes[i]]!r})",
            )
    return np.where(first_team >= 0, teams[np.maximum(first_team, 0)], systems)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique``: pandas' hash table finds the distinct values (numpy 2's hash-based
    ``unique`` is much slower on int64 keys, and sorting every value costs more), then only
    those are sorted."""
    return np.sort(pd.unique(values))


def output_repeats(system: np.ndarray, fact: np.ndarray, n_systems: int, n_facts: int) -> bool:
    """Whether some (system, fact) pair occurs twice.  When the pairs number at most 8 per row
    (or 2**22), each row writes its position into its pair's slot and a row that does not read
    its own position back shares the slot: no sort; else one sort of the pairs."""
    pair = system.astype(np.int64) * n_facts + fact
    if n_systems * n_facts <= max(8 * len(pair), 1 << 22):
        kind = np.int32 if len(pair) < 2**31 else np.int64
        slot = np.empty(n_systems * n_facts, dtype=kind)
        rows = np.arange(len(pair), dtype=kind)
        slot[pair] = rows
        return bool((slot[pair] != rows).any())
    return len(_sorted_unique(pair)) < len(pair)


def _attach_facts(
    frames: list[pd.DataFrame], matching: Matching, runs: _EncodedRuns
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Normalise the answers of the small tables in place (``answer_raw`` keeps the original),
    number the facts and turn the encoded runs into their frame (Categorical text columns).

    Fact ids are the ranks of ``(query_id, normalised answer)`` in sorted order, so they do not
    depend on which file mentions a fact first.  Returns ``(facts, runs frame)``.
    """
    queries = runs.queries
    small = []
    for frame in frames:
        frame["answer_raw"] = frame["answer"]
        frame["answer"] = normalize_answers(frame["answer"], matching)
        codes, _ = runs.normalized.encode(frame["answer"]) if len(frame) else (np.zeros(0), None)
        small.append((queries.get_indexer(frame["query_id"]), codes.astype(np.int64)))
    rank, answers = runs.normalized.ranks()
    width = max(len(answers), 1)
    to_answer = rank[runs.normalized_codes().astype(np.int64)]
    keys = [q.astype(np.int64) * width + rank[a] for q, a in small]
    uniques = _sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    duplicates = False
    from receval.design import chunked_bincount
    from receval.progress import progress

    seen = np.zeros(len(runs.systems), dtype=bool)
    several = set()  # parts of several systems: repeats looked for once facts are numbered
    with progress(runs.parts, "numbering facts") as parts:
        for i, p in enumerate(parts):  # one run file at a time: its keys merged into ``uniques``
            key = p["query_id"].astype(np.int64) * width + to_answer[p["answer_raw"]]
            part = _sorted_unique(key)
            # within one part, checked here; a system spread over several parts (row groups,
            # dataset files) may repeat a fact across them: _collapse_outputs then looks
            present = np.flatnonzero(chunked_bincount(p["system"], minlength=len(seen)))
            duplicates |= bool(seen[present].any())
            seen[present] = True
            if len(present) == 1:
                duplicates |= len(part) < len(key)
            else:
                several.add(i)
            at = np.minimum(np.searchsorted(uniques, part), max(len(uniques) - 1, 0))
            new = part if not len(uniques) else part[uniques[at] != part]
            if len(new):
                uniques = np.sort(np.concatenate([uniques, new]), kind="stable")
    facts = pd.DataFrame(
        {
            "query_id": queries.to_numpy(dtype=object)[uniques // width],
            "answer": answers.to_numpy(dtype=object)[uniques % width],
        }
    )
    facts.index.name = "fact"
    lookup = pd.Index(uniques)  # every key is in it: its hash table gives searchsorted's answer
    for frame, key in zip(frames, keys, strict=True):
        frame["fact"] = lookup.get_indexer(key).astype(np.int64)
    fact = np.empty(sum(p["_rows"] for p in runs.parts), dtype=np.int64)
    start = 0
    for i, p in enumerate(runs.parts):  # filled file by file: no second copy of the column
        key = p["query_id"].astype(np.int64) * width + to_answer[p["answer_raw"]]
        part = fact[start : start + len(key)]
        part[:] = lookup.get_indexer(key)
        if i in several and not duplicates:
            duplicates = output_repeats(p["system"], part, len(runs.systems), len(uniques))
        start += len(key)
    frame = _run_frame(runs, fact, uniques % width, answers)
    frame.attrs["duplicates"] = duplicates
    return facts, frame


def _normalisation_changed_nothing(runs: _EncodedRuns) -> bool:
    """Whether every raw answer is its own normalised form (the raw and normalised
    vocabularies hold the same values in the same order), so the answer column serves as
    ``answer_raw`` without sorting the raw answers again."""
    to_normalized = runs.normalized_codes()
    return (
        len(runs.raw) == len(runs.normalized) == len(to_normalized)
        and bool((to_normalized == np.arange(len(to_normalized))).all())
        and runs.raw.values.equals(runs.normalized.values)
    )


def _run_frame(
    runs: _EncodedRuns, fact: np.ndarray, fact_answer: np.ndarray, answers: pd.Index
) -> pd.DataFrame:
    """The runs as one frame: ``system, team, query_id, answer, answer_raw, score, provenance,
    fact``, extra columns, ``_file, _line``; text columns are Categoricals (sorted categories)."""
    teams = _run_teams(runs)
    sys_codes = runs.column("system", pop=True)
    system = runs.systems.categorical(sys_codes)
    team_vocab = Vocabulary()
    team_codes, _ = team_vocab.encode(teams)
    n = len(fact)
    answer = pd.Categorical.from_codes(
        fact_answer.astype(_code_dtype(len(answers)))[fact],
        dtype=pd.CategoricalDtype(answers),
        validate=False,
    )
    if _normalisation_changed_nothing(runs):  # one column for both
        raw = answer
        runs.drop("answer_raw")
    else:
        raw = runs.raw.categorical(runs.column("answer_raw", pop=True))
        if raw.categories.equals(answers) and np.array_equal(raw.codes, answer.codes):
            raw = answer
    columns = {
        "system": system,
        "team": team_vocab.categorical(team_codes[sys_codes] if n else []),
        "query_id": pd.Categorical.from_codes(
            runs.column("query_id", pop=True).astype(_code_dtype(len(runs.queries))),
            dtype=pd.CategoricalDtype(pd.Index(runs.queries, dtype=STRING)),
            validate=False,
        ),
        "answer": answer,
        "answer_raw": raw,
        "score": np.asarray(runs.column("score", blank=np.nan, pop=True), dtype=float),
    }
    text = dict(runs.text)
    text.setdefault("provenance", Vocabulary())
    for name, vocab in text.items():
        if vocab is None:
            columns[name] = runs.plain_column(name)
            continue
        blank = vocab.code_of("")
        columns[name] = vocab.categorical(runs.column(name, blank=blank, pop=True))
    columns["fact"] = np.asarray(fact, dtype=np.int64)
    file_codes = runs.column("_file", pop=True)
    columns["_file"] = pd.Categorical.from_codes(
        file_codes.astype(_code_dtype(len(runs.paths))),
        categories=pd.Index(runs.paths),
        validate=False,
    )
    columns[LINE] = runs.column(LINE, pop=True)
    runs.parts.clear()
    order = ["system", "team", "query_id", "answer", "answer_raw", "score", "provenance", "fact"]
    order += [c for c in columns if c not in order]
    frame = pd.DataFrame({c: columns[c] for c in order}, copy=False)
    frame.attrs["empty_systems"] = runs.empty_systems
    return frame


def check_conflicting_duplicates(runs: pd.DataFrame, rows: np.ndarray) -> None:
    """BundleError naming both lines when a system gives the same answer (same text, query and
    provenance) twice with different scores: which score counts would decide its ranking.

    ``rows`` are the input rows of the (system, fact) groups with more than one row.  Rows that
    differ only in the answer's surface form ("Paris" / "paris") or in provenance are distinct
    outputs of one fact, collapsed as before; identical rows are a counted warning.
    """
    if not len(rows):
        return
    cols = ["system", "query_id", "answer_raw", "provenance"]
    sub = runs[cols].take(rows).astype(object).reset_index(drop=True)
    sub["score"] = runs["score"].to_numpy(float)[rows]
    sub["_row"] = rows
    sub = sub.sort_values([*cols, "_row"], kind="stable")
    same = sub[cols].eq(sub[cols].shift()).all(axis=1).to_numpy()
    score = sub["score"].to_numpy()
    prev = np.r_[np.nan, score[:-1]]
    differs = same & ~((score == prev) | (np.isnan(score) & np.isnan(prev)))
    if not differs.any():
        return
    i = int(np.flatnonzero(differs)[0])
    first, second = int(sub["_row"].iloc[i - 1]), int(sub["_row"].iloc[i])
    files = runs["_file"].astype(object).to_numpy()
    lines = runs[LINE].to_numpy()
    where = f"{files[first]}:{int(lines[first])}"
    raise BundleError(
        files[second],
        int(lines[second]),
        f"system {sub['system'].iloc[i]!r} outputs answer {sub['answer_raw'].iloc[i]!r} for query "
        f"{sub['query_id'].iloc[i]!r} twice with different scores ({_score_text(prev[i])} at "
        f"{where}, {_score_text(score[i])} here): keep one row (the kept score decides the ranking)",
    )


def _score_text(score: float) -> str:
    return "no score" if np.isnan(score) else repr(float(score))


def _collapse_outputs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``outputs`` (one row per system and fact: the highest score, first in file order among
    equal scores, ``copies`` counted) and ``raw_outputs`` (every input row)."""
    keep = ["system", "team", "query_id", "answer", "answer_raw", "score", "provenance", "fact"]
    extra = [c for c in runs.columns if c not in keep and c not in (LINE, "_file", "_order")]
    raw_outputs = runs[keep + extra + ["_file", LINE]].reset_index(drop=True)
    key = None
    if runs.attrs.get("duplicates", True):  # perhaps: one sort tells (cheaper than a lexsort)
        sys_codes, _ = pd.factorize(runs["system"])
        fact = runs["fact"].to_numpy(np.int64)
        key = sys_codes.astype(np.int64) * (int(fact.max(initial=0)) + 1) + fact
    if key is None or len(_sorted_unique(key)) == len(key):
        outputs = runs[keep + extra].reset_index(drop=True)  # every row is an output (no copy)
        outputs.insert(len(keep), "copies", np.ones(len(runs), dtype=np.int32))
        return outputs, raw_outputs
    score = runs["score"].to_numpy(float)
    # by (system, fact), then score descending (NaN last), then input order
    order = np.lexsort((np.arange(len(key)), np.isnan(score), -np.nan_to_num(score), key))
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    copies = np.diff(np.r_[starts, len(key)])
    check_conflicting_duplicates(runs, order[np.repeat(copies > 1, copies)])
    first = order[starts]
    back = np.argsort(first, kind="stable")  # outputs in input order
    outputs = runs[keep + extra].take(first[back]).reset_index(drop=True)
    outputs.insert(len(keep), "copies", copies[back].astype(np.int32))
    return outputs, raw_outputs
