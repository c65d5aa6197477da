"""Output folders written as one set: all files of a run appear together, or none do.

A run writes every file into a staging folder beside ``--out`` (same file system, so renames are
atomic) and swaps it in at the end:

1. ``out`` is checked before any work: a file, a path under a file, or a non-empty folder that
   receval did not write is refused with one clear line (:class:`~receval.errors.BundleError`).
2. The caller writes the whole set into ``.<name>.staging-<random>`` (the context manager yields
   that path).
3. On success the previous folder (if any) is renamed to ``.<name>.previous-<random>``, the staging
   folder to ``out``, and the previous folder is removed.  SIGINT and SIGTERM are held back during
   the two renames, so an interrupted run leaves either the previous complete set or the new one.
4. On any error or interruption the staging folder is removed; ``out`` is untouched.

A folder receval wrote carries the marker file ``.receval-output`` (the names of the files in the
set), which is how step 1 recognises it; folders written before the marker existed are recognised
by their ``run.json`` with a ``receval_version`` key.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from receval.errors import BundleError
from receval.formats.tables import current_umask

MARKER = ".receval-output"


def _written_by_receval(folder: Path) -> bool:
    if (folder / MARKER).is_file():
        return True
    run = folder / "run.json"
    if not run.is_file():
        return False
    from receval.run_record import RunRecord

    try:
        return bool(
            RunRecord.from_json(json.loads(run.read_text(encoding="utf-8"))).receval_version
        )
    except (OSError, ValueError):
        return False


def check_output_folder(out: Path) -> None:
    """Raise :class:`BundleError` unless ``out`` can receive a new output set.

    ``out`` may be missing (it is created), an empty folder, or a folder an earlier receval run
    wrote (it is replaced as a whole).
    """
    out = Path(out)
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise BundleError(parent, None, "is a file, so it cannot hold the output folder")
    if out.exists() and not out.is_dir():
        raise BundleError(out, None, "is a file, not a folder: choose another --out")
    if out.is_dir() and any(out.iterdir()) and not _written_by_receval(out):
        raise BundleError(
            out,
            None,
            "is not empty and was not written by receval (no .receval-output or run.json): "
            "choose another --out or empty it; receval replaces only folders it wrote",
        )


def check_output_set(folder: Path) -> None:
    """Raise :class:`BundleError` unless ``folder`` holds an output set receval wrote (what
    ``receval leaderboard`` and ``receval report`` read)."""
    folder = Path(folder)
    if not _written_by_receval(folder):
        raise BundleError(
            folder,
            None,
            "is not an output folder of `receval score` (it has no .receval-output marker and no "
            "run.json written by receval): give the folder a score run wrote",
        )


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold back SIGINT/SIGTERM (main thread only) until the block ends."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _swap_in(staging: Path, out: Path) -> None:
    previous = None
    try:
        with _signals_held():
            if out.exists():
                previous = Path(tempfile.mkdtemp(prefix=f".{out.name}.previous-", dir=out.parent))
                previous.rmdir()
                os.rename(out, previous)
            os.rename(staging, out)
    finally:
        # a signal held back during the renames arrives as they are released: the previous
        # folder is removed on that path too (it was left beside ``out`` once in a CI run)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)


@contextlib.contextmanager
def output_set(out: Path) -> Iterator[Path]:
    """Yield a staging folder; on success it replaces ``out`` as a whole.

    Parameters
    ----------
    out : Path
        The output folder (``--out``).  Checked first with :func:`check_output_folder`.

    Yields
    ------
    Path
        An empty folder beside ``out`` to write the whole set into.

    Example
    -------
    >>> with output_set(Path("results")) as folder:  # doctest: +SKIP
    ...     (folder / "leaderboard.csv").write_text("system\\n")
    """
    out = Path(out)
    check_output_folder(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=out.parent))
    os.chmod(staging, 0o777 & ~current_umask())
    try:
        yield staging
        files = sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())
        (staging / MARKER).write_text(
            "written by receval as one set; files:\n" + "\n".join(files) + "\n", encoding="utf-8"
        )
        _swap_in(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
