"""TREC run and qrels files -> a task bundle.

* **Run** (one per file, whitespace-separated): ``qid Q0 docno rank score tag``.  The second
  column is ignored (conventionally ``Q0``); ``rank`` must be an integer and ``score`` a finite
  number; ``tag`` names the system.  One run per file (a single tag), and no two files may share a
  tag.  A document retrieved twice for the same query is an error.
* **Qrels** (whitespace-separated): ``qid iteration docno relevance``; ``relevance`` is an integer
  grade.  A (qid, docno) pair judged twice is an error.

Blank lines and lines starting with ``#`` are skipped; every malformed line raises
:class:`~receval.errors.BundleError` naming the file and the line.

Ranking convention
------------------
As trec_eval does, the rank column of the file is **not** used for ordering: within each
(system, query) the documents are ranked by decreasing ``score``, ties broken by decreasing
``docno`` (plain code-point string order), so the ordering is deterministic and independent of the
line order.  The recomputed 1-based rank is the bundle's ``rank`` column; the file's own value is
kept as ``rank_file``.  ``depth=K`` keeps the top K documents of each (system, query) in that order.

Bundle encoding
---------------
* ``queries.tsv``: every qid of the qrels and of the runs, with ``in_qrels`` (``true``/``false``;
  trec_eval scores only queries with qrels) and ``relevant`` (number of documents with
  relevance > 0).
* ``runs.tsv``: ``system`` = tag, ``query_id`` = qid, ``answer`` = docno, ``score``, ``rank``,
  ``rank_file``, ``source`` (``<file name>:<line>``).
* ``judgments.tsv``: one row per qrels line; ``label`` is ``1`` when relevance > 0 and ``0``
  otherwise (zero and negative grades are "wrong"); ``relevance`` keeps the grade, ``iteration``
  the second column.
* ``task.toml``: default labels (``1`` correct, ``0`` wrong); answers are matched without case
  folding (``[matching] casefold = false``): document ids are case-sensitive; ``[official]
  unjudged = "wrong"``: the official census counts an unjudged document not relevant, as
  trec_eval does.
"""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd

from receval.config import Matching, TaskConfig
from receval.errors import BundleError
from receval.formats.tables import read_run_files, read_text

__all__ = ["import_trec", "read_qrels", "read_trec_run"]


def _split(path: Path, ncols: int, layout: str) -> tuple[np.ndarray, list[int]]:
    """The whitespace-separated fields of every data line as an (n, ncols) object array, and
    the lines' numbers.  One ``str.split`` per line, then whole-array checks (no per-row
    regex or frame building)."""
    path = Path(path)
    if not path.exists():
        raise BundleError(path, None, "no such file")
    if path.is_dir():
        raise BundleError(path, None, "is a directory, not a file")
    text = read_text(path)
    fast = _split_with_arrow(text, ncols)
    if fast is not None:
        return fast, list(range(1, len(fast) + 1))
    lines = text.split("\n")
    split = [line.split() for line in lines]
    counts = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    data = counts > 0
    if "#" in "".join(s[0][:1] for s in split if s):  # comment lines (first field starts with #)
        data &= np.fromiter((not s or s[0][0] != "#" for s in split), dtype=bool, count=len(split))
    keep = np.flatnonzero(data)
    if not len(keep):
        raise BundleError(path, None, "no data lines (the file is empty or only comments)")
    bad = keep[counts[keep] != ncols]
    if len(bad):
        i = int(bad[0])
        raise BundleError(
            path,
            i + 1,
            f"expected {ncols} whitespace-separated columns ({layout}), found {counts[i]}",
        )
    kept = split if len(keep) == len(split) else [split[i] for i in keep]
    fields = np.array(list(itertools.chain.from_iterable(kept)), dtype=object)
    return fields.reshape(len(keep), ncols), (keep + 1).tolist()


#: Anything the Arrow reader would treat differently from ``str.split``: runs of spaces, other
#: whitespace, blank lines, comment lines, leading or trailing spaces.
_NOT_PLAIN = re.compile(r"  |[\t\x0b\x0c\r\x1c-\x1f]|\n\n|^\n|^ |\n | \n|^#|\n#")


def _split_with_arrow(text: str, ncols: int) -> np.ndarray | None:
    """The common case in C++: ASCII lines of single-space-separated fields, no comments or
    blank lines (checked with one pattern search over the whole text).  None when the file is
    not that plain or a line has the wrong number of fields: the line-by-line reader then
    gives the exact error."""
    if not text.isascii() or _NOT_PLAIN.search(text) or not text.strip():
        return None
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [f"f{i}" for i in range(ncols)]
    try:
        table = pacsv.read_csv(
            io.BytesIO(text.encode("ascii")),
            read_options=pacsv.ReadOptions(column_names=names),
            parse_options=pacsv.ParseOptions(
                delimiter=" ", quote_char=False, double_quote=False, ignore_empty_lines=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:
        return None
    columns = [table.column(i).to_numpy(zero_copy_only=False) for i in range(ncols)]
    return np.column_stack(columns).astype(object, copy=False)


def _first_bad(mask: np.ndarray) -> int | None:
    idx = mask.nonzero()[0]
    return int(idx[0]) if len(idx) else None


def read_trec_run(path: Path | str) -> pd.DataFrame:
    """Read one TREC run: ``qid, docno, rank_file`` (int), ``score`` (float), ``tag, line``."""
    path = Path(path)
    rows, numbers = _split(path, 6, "qid Q0 docno rank score tag")
    frame = pd.DataFrame(rows, columns=["qid", "q0", "docno", "rank", "score", "tag"], dtype=object)
    frame["line"] = np.asarray(numbers, dtype=np.int64)
    rank = pd.to_numeric(frame["rank"], errors="coerce")
    bad = _first_bad((rank.isna() | (rank != rank.round())).to_numpy())
    if bad is not None:
        raise BundleError(path, numbers[bad], f"rank {frame['rank'].iat[bad]!r} is not an integer")
    score = pd.to_numeric(frame["score"], errors="coerce").to_numpy(dtype=float)
    bad = _first_bad(~np.isfinite(score))
    if bad is not None:
        raise BundleError(
            path, numbers[bad], f"score {frame['score'].iat[bad]!r} is not a finite number"
        )
    tags = pd.unique(frame["tag"])
    if len(tags) > 1:
        i = _first_bad((frame["tag"] != tags[0]).to_numpy())
        assert i is not None
        raise BundleError(
            path,
            numbers[i],
            f"run tag {tags[1]!r} differs from {tags[0]!r} on the first line (one run per file)",
        )
    dup = frame.duplicated(["qid", "docno"]).to_numpy()
    i = _first_bad(dup)
    if i is not None:
        raise BundleError(
            path,
            numbers[i],
            f"document {frame['docno'].iat[i]!r} retrieved twice for query {frame['qid'].iat[i]!r}",
        )
    frame["rank_file"] = rank.astype(np.int64)
    frame["score"] = score
    return frame[["qid", "docno", "rank_file", "score", "tag", "line"]]


def read_qrels(path: Path | str) -> pd.DataFrame:
    """Read TREC qrels: ``qid, iteration, docno, relevance`` (int), ``line``."""
    path = Path(path)
    rows, numbers = _split(path, 4, "qid iteration docno relevance")
    frame = pd.DataFrame(rows, columns=["qid", "iteration", "docno", "relevance"], dtype=object)
    frame["line"] = np.asarray(numbers, dtype=np.int64)
    rel = pd.to_numeric(frame["relevance"], errors="coerce")
    bad = _first_bad((rel.isna() | (rel != rel.round())).to_numpy())
    if bad is not None:
        raise BundleError(
            path, numbers[bad], f"relevance {frame['relevance'].iat[bad]!r} is not an integer"
        )
    frame["relevance"] = rel.astype(np.int64)
    i = _first_bad(frame.duplicated(["qid", "docno"]).to_numpy())
    if i is not None:
        raise BundleError(
            path,
            numbers[i],
            f"document {frame['docno'].iat[i]!r} judged twice for query {frame['qid'].iat[i]!r}",
        )
    return frame


def trec_rank(frame: pd.DataFrame) -> np.ndarray:
    """1-based rank within each (tag, qid): decreasing score, ties by decreasing docno (trec_eval)."""
    order = frame.sort_values(
        ["tag", "qid", "score", "docno"], ascending=[True, True, False, False], kind="stable"
    )
    rank = order.groupby(["tag", "qid"], sort=False).cumcount().to_numpy() + 1
    out = np.empty(len(frame), dtype=np.int64)
    out[frame.index.get_indexer(order.index)] = rank
    return out


def import_trec(
    qrels: Path | str | None,
    runs: list[Path] | list[str],
    depth: int | None = None,
    *,
    name: str | None = None,
) -> tuple[dict[str, pd.DataFrame], TaskConfig]:
    """Convert TREC runs (and qrels) into bundle tables and a config (see the module docstring).

    Parameters
    ----------
    qrels : the qrels file, or None for an unjudged task.
    runs : one or more run files, one run (tag) each.
    depth : keep only the top ``depth`` documents per query and run (trec_eval order); None keeps
        all.
    name : the task name in ``task.toml`` (default ``"trec"``).

    Returns
    -------
    (tables, config) : ``queries``, ``runs`` and (with qrels) ``judgments`` frames for
        :func:`receval.formats.bundle.write_bundle`, and the task config.
    """
    if not runs:
        raise ValueError("at least one run file is needed")
    if depth is not None and (isinstance(depth, bool) or int(depth) != depth or depth < 1):
        raise ValueError(f"depth must be a positive integer, not {depth!r}")
    parts = []
    message = "run tag {id!r} also names {owner}; give each run its own tag"
    for run_path, frame in read_run_files(runs, read_trec_run, "tag", message):
        frame["rank"] = trec_rank(frame)
        if depth is not None:
            frame = frame[frame["rank"] <= depth]
        frame = frame.sort_values(["qid", "rank"], kind="stable")
        frame["source"] = run_path.name + ":" + frame["line"].astype(str)
        parts.append(frame)
    run = pd.concat(parts, ignore_index=True)
    runs_table = pd.DataFrame(
        {
            "system": run["tag"],
            "query_id": run["qid"],
            "answer": run["docno"],
            "score": run["score"],
            "rank": run["rank"],
            "rank_file": run["rank_file"],
            "source": run["source"],
        }
    )
    tables: dict[str, pd.DataFrame] = {}
    qids = list(pd.unique(run["qid"]))
    in_qrels: set[str] = set()
    relevant = pd.Series(dtype=np.int64)
    if qrels is not None:
        qpath = Path(qrels)
        qr = read_qrels(qpath)
        in_qrels = set(qr["qid"])
        relevant = (qr["relevance"] > 0).groupby(qr["qid"]).sum()
        qids = list(pd.unique(pd.concat([qr["qid"], run["qid"]], ignore_index=True)))
        tables["judgments"] = pd.DataFrame(
            {
                "query_id": qr["qid"],
                "answer": qr["docno"],
                "label": np.where(qr["relevance"] > 0, "1", "0"),
                "relevance": qr["relevance"],
                "iteration": qr["iteration"],
                "source": qpath.name + ":" + qr["line"].astype(str),
            }
        )
    queries_table = pd.DataFrame(
        {
            "query_id": qids,
            "in_qrels": ["true" if q in in_qrels else "false" for q in qids],
            "relevant": relevant.reindex(qids, fill_value=0).astype(np.int64).to_numpy(),
        }
    )
    tables = {"queries": queries_table, "runs": runs_table, **tables}
    config = TaskConfig(name=name or "trec", matching=Matching(casefold=False), unjudged="wrong")
    return tables, config
