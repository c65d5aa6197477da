"""Writing task bundles (importers and the simulator use this); reading is :func:`receval.task.load_task`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from receval.config import TaskConfig, dump_config
from receval.errors import BundleError
from receval.formats.tables import LINE, current_umask, read_table, write_table

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

#: Bundle tables in the order they are written, with their required columns.
BUNDLE_TABLES: dict[str, tuple[str, ...]] = {
    "queries": ("query_id",),
    "runs": ("system", "query_id", "answer"),
    "judgments": ("query_id", "answer", "label"),
    "samples": ("sample", "system", "query_id", "answer", "prob"),
    "exhaustive_units": ("unit",),
    "exhaustive": ("unit", "query_id", "answer"),
    "truth": ("query_id", "answer", "label"),
    "judge": ("query_id", "answer", "judge_score"),
}


def write_bundle(
    out: Path | str,
    tables: dict[str, pd.DataFrame] | dict[str, pa.Table],
    config: TaskConfig | None = None,
    *,
    overwrite: bool = False,
    suffix: str = ".tsv",
) -> Path:
    """Write a bundle directory atomically: built in a temporary sibling, then renamed into place.

    ``tables`` maps a bundle table name (see :data:`BUNDLE_TABLES`) to its frame (pandas, or a
    pyarrow Table).  An existing
    non-empty ``out`` is refused unless ``overwrite`` is set (then it is replaced as a whole, only
    after the new bundle is complete).
    """
    out = Path(out)
    _check_destination(out, overwrite)
    _check_tables(tables)
    with staged_bundle(out, overwrite) as tmp:
        write_tables(tmp, tables, config, suffix)
    return out


@contextmanager
def staged_bundle(out: Path | str, overwrite: bool = False) -> Iterator[Path]:
    """A temporary sibling folder of ``out`` to write a bundle into, renamed into place when the
    block ends without error (removed otherwise): :func:`write_bundle`'s atomicity for writers
    that stream a table (``receval import trec`` writes one run at a time)."""
    out = Path(out)
    _check_destination(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp.chmod(0o777 & ~current_umask())  # mkdtemp makes 0700; a bundle is meant to be shared
    try:
        yield tmp
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _check_destination(out: Path, overwrite: bool) -> None:
    """Refuse a destination that is a file, or a non-empty directory without ``overwrite``."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (use --overwrite to replace it)")


def _check_tables(tables: dict[str, pd.DataFrame] | dict[str, pa.Table]) -> None:
    """Refuse an unknown table name or a table without its required columns."""
    for name, frame in tables.items():
        if name not in BUNDLE_TABLES:
            raise ValueError(f"unknown bundle table {name!r}")
        columns = frame.column_names if hasattr(frame, "column_names") else frame.columns
        missing = [c for c in BUNDLE_TABLES[name] if c not in columns]
        if missing:
            raise ValueError(f"table {name!r} lacks column(s) {', '.join(missing)}")


def write_tables(
    tmp: Path,
    tables: dict[str, pd.DataFrame] | dict[str, pa.Table],
    config: TaskConfig | None,
    suffix: str,
) -> None:
    """Write task.toml (when ``config`` is given) and the tables, in bundle order, into ``tmp``."""
    if config is not None:
        (tmp / "task.toml").write_text(dump_config(config), encoding="utf-8")
    for name in BUNDLE_TABLES:
        if name in tables:
            write_table(tmp / f"{name}{suffix}", tables[name])


def _move_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished ``tmp`` to ``out``, replacing an existing ``out`` as a whole."""
    if out.exists():
        old = out.with_name(f".{out.name}.old")
        if old.exists():
            shutil.rmtree(old)
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        tmp.rename(out)


def append_rows(root: Path | str, name: str, rows: pd.DataFrame) -> Path:
    """Append ``rows`` to the bundle table ``name`` (created as TSV if absent), atomically and
    under the bundle lock (:func:`receval.lock.bundle_lock`, re-entrant: a caller holding it,
    such as :meth:`receval.bundle.Bundle.append`, does not wait), so that two appends at once
    both land.

    The existing file keeps its format and its columns; new columns are added (empty for the
    old rows), columns the new rows lack are left empty.
    """
    import pandas as pd

    from receval.formats.tables import find_table
    from receval.lock import ROUND_LOCK_WAIT, bundle_lock

    root = Path(root)
    with bundle_lock(root, ROUND_LOCK_WAIT):
        path = find_table(root, name) or root / f"{name}.tsv"
        if path.exists():
            old = read_table(path).drop(columns=[LINE])
            columns = list(old.columns) + [c for c in rows.columns if c not in old.columns]
            merged = pd.concat([old, rows.astype(object)], ignore_index=True)[columns].fillna("")
        else:
            merged = rows
        write_table(path, merged)
    return path


def read_candidate_units(path: Path | str) -> pd.DataFrame:
    """The candidate units for exhaustive annotation (``unit``, optional ``prob``) from ``path``."""

    from receval.formats.checks import nonempty, numbers, raise_first_bad

    path = Path(path)
    candidates = read_table(path)
    if "unit" not in candidates.columns:
        raise BundleError(path, 1, "missing required column unit")
    nonempty(candidates, path, ("unit",), verbatim=())
    twice = candidates["unit"].duplicated()
    if twice.any():
        row = candidates[twice].iloc[0]
        raise BundleError(path, int(row[LINE]), f"unit {row['unit']!r} is listed twice")
    if "prob" in candidates.columns:
        # one unreadable weight would otherwise turn the whole table uniform, silently
        candidates["prob"] = numbers(candidates, path, "prob", allow_empty=True)
        given = candidates["prob"].notna()
        if given.any():
            raise_first_bad(
                candidates,
                path,
                ~given,
                "no prob here but on other lines: give every candidate a weight or none",
            )
        raise_first_bad(
            candidates,
            path,
            candidates["prob"] < 0,
            "prob must be >= 0 (a relative selection weight)",
        )
        if given.all() and len(candidates) and not candidates["prob"].sum() > 0:
            raise BundleError(path, None, "every prob is 0: no unit could be drawn")
    return candidates


def record_sample_round(root: Path | str, drawn, *, timeout: float | None = None) -> Path:
    """Append a drawn round to ``samples.tsv`` and rewrite ``to_annotate.tsv`` (every drawn fact
    still unlabelled, earlier rounds included, and the drawn units); returns the latter's path.

    Under the bundle lock (:func:`receval.bundle.bundle_lock`, re-entrant: a caller already
    holding it does not wait), waiting up to ``timeout`` seconds (default
    :data:`receval.bundle.ROUND_LOCK_WAIT`).  Each file is replaced atomically."""
    from receval.lock import ROUND_LOCK_WAIT, bundle_lock

    root = Path(root)
    with bundle_lock(root, ROUND_LOCK_WAIT if timeout is None else timeout):
        if len(drawn.samples):
            append_rows(root, "samples", drawn.samples)
        path = root / "to_annotate.tsv"
        write_table(path, drawn.to_annotate)
    return path
