"""Reading and writing the tables of a task bundle (TSV, CSV, Parquet) with line numbers.

Every reader returns a frame of *strings* (no type guessing: an answer ``"1"`` stays ``"1"``) with
an extra integer column ``_line``: the 1-based line of the row in the file (header = line 1), or
the 1-based row number for Parquet.  Type checks happen in :mod:`receval.task`, which turns every
problem into a :class:`~receval.errors.BundleError` naming the file and the line.

Writers are atomic: the file is written under a temporary name in the same folder and renamed
over the target, so a failed run never leaves a half-written file.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from receval.errors import BundleError

TABLE_SUFFIXES = (".tsv", ".csv", ".parquet")
LINE = "_line"


def find_table(folder: Path, stem: str) -> Path | None:
    """The one file ``stem.{tsv,csv,parquet}`` in ``folder``, or None; two of them is an error."""
    found = [folder / f"{stem}{s}" for s in TABLE_SUFFIXES if (folder / f"{stem}{s}").is_file()]
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise BundleError(found[1], None, f"ambiguous: both {names} exist; keep one")
    return found[0] if found else None


def read_table(path: Path) -> pd.DataFrame:
    """Read one bundle table as strings, with the ``_line`` column (see module docstring)."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _read_parquet(path)
    if suffix not in (".tsv", ".csv"):
        raise BundleError(
            path, None, f"unsupported table format {suffix!r} (use .tsv, .csv or .parquet)"
        )
    raw = path.read_bytes()
    if not raw.strip():
        raise BundleError(path, 1, "file is empty (a header row is required)")
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise BundleError(path, line, "binary data (NUL byte): not a text table")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BundleError(path, line, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})") from None
    if suffix == ".tsv":
        return _read_delimited(path, text, sep="\t")
    return _read_delimited(path, text, sep=",")


def _read_delimited(path: Path, text: str, sep: str) -> pd.DataFrame:
    lines = text.splitlines()
    header = lines[0]
    other = "," if sep == "\t" else "\t"
    if sep not in header and other in header:
        kind = "comma" if other == "," else "tab"
        want = "tab" if sep == "\t" else "comma"
        raise BundleError(
            path,
            1,
            f"header looks {kind}-separated but a {path.suffix} file must be {want}-separated",
        )
    names = header.split(sep) if sep == "\t" else next(csv.reader([header]))
    names = [n.strip() for n in names]
    if any(not n for n in names):
        raise BundleError(path, 1, "empty column name in the header")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BundleError(path, 1, f"duplicate column name(s) in the header: {', '.join(dup)}")
    if sep == "\t":
        # TSV: no quoting at all (answers may contain quote characters), exact field counts.
        rows = []
        line_numbers = []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != len(names):
                raise BundleError(
                    path, number, f"expected {len(names)} tab-separated fields, found {len(fields)}"
                )
            rows.append(fields)
            line_numbers.append(number)
        frame = pd.DataFrame(rows, columns=names, dtype=object)
    else:
        rows = []
        line_numbers = []
        reader = csv.reader(io.StringIO(text))
        next(reader)
        try:
            for fields in reader:
                number = reader.line_num
                if not fields or all(not f.strip() for f in fields):
                    continue
                if len(fields) != len(names):
                    raise BundleError(
                        path,
                        number,
                        f"expected {len(names)} comma-separated fields, found {len(fields)}",
                    )
                rows.append(fields)
                line_numbers.append(number)
        except csv.Error as exc:
            raise BundleError(path, reader.line_num, f"malformed CSV: {exc}") from None
        frame = pd.DataFrame(rows, columns=names, dtype=object)
    frame[LINE] = (
        pd.array(line_numbers, dtype="int64") if line_numbers else pd.Series([], dtype="int64")
    )
    return frame


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_parquet(path)
    except ImportError:
        raise BundleError(
            path, None, "reading Parquet needs pyarrow: pip install 'receval[parquet]'"
        ) from None
    except Exception as exc:  # pyarrow raises many types for corrupt files
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(path, None, f"not a readable Parquet file ({first})") from None
    frame = frame.reset_index(drop=True)
    out = pd.DataFrame(index=frame.index)
    for name in frame.columns:
        col = frame[name]
        if pd.api.types.is_float_dtype(col):
            out[str(name)] = col.map(lambda v: "" if pd.isna(v) else repr(float(v)))
        else:
            out[str(name)] = col.map(
                lambda v: "" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)
            )
    out[LINE] = pd.RangeIndex(1, len(out) + 1).to_numpy()
    return out


# ---------------------------------------------------------------------------------------------
# atomic writing


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


_NEEDS_QUOTE = re.compile(r"[\t\n\r]")


def write_table(path: Path, frame: pd.DataFrame) -> None:
    """Write ``frame`` atomically as TSV, CSV or Parquet according to the suffix of ``path``.

    TSV fields may not contain tabs or newlines (there is no quoting in bundle TSV); such a value
    is an error rather than a silently corrupted file.
    """
    path = Path(path)
    frame = frame.drop(columns=[LINE], errors="ignore")
    suffix = path.suffix.lower()
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        elif suffix == ".csv":
            frame.to_csv(tmp, index=False, lineterminator="\n")
        elif suffix == ".tsv":
            for name in frame.columns:
                col = frame[name]
                if col.dtype == object:
                    bad = col.astype(str).str.contains(_NEEDS_QUOTE, regex=True)
                    if bad.any():
                        row = int(bad.to_numpy().nonzero()[0][0])
                        raise ValueError(
                            f"{path.name}: value in column {name!r} (row {row + 1}) contains a tab or newline"
                        )
            frame.to_csv(
                tmp,
                sep="\t",
                index=False,
                quoting=csv.QUOTE_NONE,
                lineterminator="\n",
                escapechar=None,
            )
        else:
            raise ValueError(f"unsupported table format {suffix!r}")
