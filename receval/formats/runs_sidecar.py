"""The run table's ``system, query_id, answer`` columns kept beside it in binary form, so that
``score --estimator official`` need not parse the text of ``runs.tsv`` again.

``receval import trec`` writes, in the same pass that writes the run table, the folder
``.receval/runs-columns/`` of the bundle (``.receval/`` gets a ``.gitignore`` of everything, as
for the anonymisation key):

* ``answers.arrow``: the ``answer`` column, row for row (an Arrow IPC file, one record batch
  per run file: read back memory-mapped, without a copy);
* ``blocks.arrow``: the rows as blocks of one ``system`` and one ``query_id`` (both as text, and
  ``rows``, the block's length), in the run table's order;
* ``meta.json``: the format version, the run table's name, size in bytes, modification time
  (``mtime_ns``) and the SHA-256 of its whole content (hashed once the import has closed it),
  the number of rows, and ``plain_answers``: every answer is ASCII (a TREC field is never
  empty and holds no whitespace, so such an answer is plain text the ``[matching]`` rules
  leave as it is).

The rows are the run table's, each run's query by query, not necessarily in its order (a run's
rows as they were read, its queries' blocks not yet sorted): what is counted per row does not
depend on the order.

:func:`read_runs_columns` returns them only when they provably belong to the run table as it is
now: the same name, size and ``mtime_ns`` (checked first, from the file's status), the same
SHA-256 of every byte, and as many rows in each file as ``meta.json`` says.  Any difference
(the table rewritten, edited, even in place to the same size with its time restored, copied
without its times, a sidecar from another version or damaged) returns None, and the caller
reads the table itself, exactly as it does for a bundle without the sidecar.  The sidecar says
nothing the table does not: every check the reader makes on the columns is still made on what
it returns.

The full hash costs ``score`` nothing: ``run.json`` records the SHA-256 of every input file
anyway, and the digest computed here is handed to it (:attr:`RunsColumns.sha256`,
:func:`receval.official.direct.official_view`) instead of being computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from receval.formats.buffers import arrow_array

__all__ = ["SIDECAR", "RunsColumns", "RunsColumnsWriter", "file_sha256", "read_runs_columns"]

#: The sidecar's folder, relative to the bundle.
SIDECAR = Path(".receval") / "runs-columns"
#: Bumped whenever the files' layout changes: an older sidecar is then ignored (version 1
#: fingerprinted 16 sampled blocks of the table, not all of it).
VERSION = 2
#: Bytes read at a time when hashing a file.
HASH_BLOCK = 1 << 20


def file_sha256(path: Path) -> str:
    """The SHA-256 (hex) of the file at ``path``, read in blocks of :data:`HASH_BLOCK` into
    one buffer (no copy of a large file in memory)."""
    buffer = bytearray(HASH_BLOCK)
    view = memoryview(buffer)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while size := fh.readinto(buffer):
            digest.update(view[:size])
    return digest.hexdigest()


def _status(path: Path) -> dict[str, Any]:
    """Name, size and ``mtime_ns`` of ``path``: the cheap part of the check."""
    stat = os.stat(path)
    return {"name": Path(path).name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


class RunsColumnsWriter:
    """Write the sidecar of a run table written in parts (one run file each, rows ranked so
    that each query's rows are together): :meth:`add` each part as it is written, then
    :meth:`finish` once the table is closed.  ``folder`` is the bundle being written."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder) / SIDECAR
        self.rows = 0
        self.plain = True
        self._answers: Any = None
        self._blocks: list[Any] = []

    def add(self, system: Any, query_id: Any, answer: Any, starts: np.ndarray) -> None:
        """Append a run's rows: its ``system``, ``query_id`` and ``answer`` columns, each
        query's rows together (``starts``: where each query's rows begin, the first row
        included).  The rows may be in any order: the sidecar keeps the run table's rows,
        each run's query by query, not its order."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.ipc as ipc

        if self._answers is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            ignore = self.folder.parent / ".gitignore"  # as the anonymisation key's folder
            if not ignore.exists():
                ignore.write_text("# created by receval: its files stay out of git\n*\n")
            schema = pa.schema([("answer", answer.type)])
            self._answers = ipc.new_file(str(self.folder / "answers.arrow"), schema)
        self._answers.write_table(pa.table({"answer": answer}))
        self.plain = self.plain and pc.all(pc.string_is_ascii(answer)).as_py() is not False
        n = len(answer)
        where = arrow_array(starts.astype(np.int64))
        lengths = np.diff(np.append(starts, n)).astype(np.int64)
        self._blocks.append(
            pa.table(
                {
                    "system": system.take(where),
                    "query_id": query_id.take(where),
                    "rows": arrow_array(lengths),
                }
            )
        )
        self.rows += n

    def finish(self, runs: Path) -> None:
        """Close the answers, write the blocks and ``meta.json`` naming the run table ``runs``
        as it is now (written and closed)."""
        import pyarrow as pa
        import pyarrow.ipc as ipc

        if self._answers is None:
            return
        self._answers.close()
        self._answers = None
        blocks = pa.concat_tables(self._blocks).combine_chunks()
        with ipc.new_file(str(self.folder / "blocks.arrow"), blocks.schema) as out:
            out.write_table(blocks)
        meta = {
            "version": VERSION,
            "runs": {**_status(runs), "sha256": file_sha256(runs)},
            "rows": self.rows,
            "plain_answers": self.plain,
        }
        (self.folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")

    def close(self) -> None:
        """Close an unfinished answers file (the bundle being written is then removed)."""
        if self._answers is not None:
            self._answers.close()
            self._answers = None


@dataclass(frozen=True)
class RunsColumns:
    """The sidecar as read: ``blocks`` (``system``, ``query_id``, ``rows``: an Arrow table,
    one row per block of one system and one query, in the run table's order), ``answer``
    (the run table's ``answer`` column, memory-mapped) and ``sha256``, the run table's digest
    (checked equal to the one the import recorded: ``run.json`` reuses it)."""

    blocks: Any
    answer: Any
    plain_answers: bool = False
    sha256: str = ""

    @property
    def rows(self) -> int:
        return len(self.answer)


def read_runs_columns(root: Path, runs: Path) -> RunsColumns | None:
    """The sidecar of bundle ``root`` when it belongs to the run table ``runs`` as it is now,
    else None (module docstring).  The table is hashed whole only when its name, size and
    ``mtime_ns`` match."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    folder = Path(root) / SIDECAR
    try:
        meta = json.loads((folder / "meta.json").read_text())
        current = isinstance(meta, dict) and meta.get("version") == VERSION
        recorded = meta.get("runs") if current else None
        if not isinstance(recorded, dict):
            return None
        if any(recorded.get(key) != value for key, value in _status(runs).items()):
            return None
        digest = file_sha256(runs)
        if recorded.get("sha256") != digest:
            return None
        blocks = ipc.open_file(pa.memory_map(str(folder / "blocks.arrow"))).read_all()
        answers = ipc.open_file(pa.memory_map(str(folder / "answers.arrow"))).read_all()
    except (OSError, ValueError, pa.ArrowException):  # absent, unreadable or damaged
        return None
    if blocks.column_names != ["system", "query_id", "rows"] or answers.column_names != ["answer"]:
        return None
    lengths = blocks["rows"].to_numpy()
    if answers.num_rows != meta.get("rows") or int(lengths.sum()) != answers.num_rows:
        return None
    if len(lengths) and lengths.min() < 1:
        return None
    plain = meta.get("plain_answers") is True
    return RunsColumns(blocks=blocks, answer=answers["answer"], plain_answers=plain, sha256=digest)
