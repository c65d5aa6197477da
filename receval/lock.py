"""The bundle lock: one exclusive, re-entrant lock per task folder, taken by every writer of a
bundle (library and CLI alike).

:func:`bundle_lock` lives apart from :class:`receval.bundle.Bundle` so that the writers the
bundle delegates to (:mod:`receval.formats.bundle`, :mod:`receval.judgments`) can take it
without importing the bundle back (no import cycle); :mod:`receval.bundle` re-exports it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from receval.errors import BundleError

__all__ = ["LOCK_NAME", "ROUND_LOCK_WAIT", "bundle_lock"]

LOCK_NAME = ".receval.lock"
#: Seconds ``sample`` and ``curve plan`` wait for the bundle lock (a round on a large bundle,
#: or an adaptive plan, can hold it for minutes).
ROUND_LOCK_WAIT = 600.0

#: the bundle locks this thread holds: resolved folder -> depth (re-entrant within a thread;
#: another thread or process waits, as ``flock`` on its own open file makes it)
_HELD = threading.local()


def _held() -> dict[str, int]:
    if not hasattr(_HELD, "depth"):
        _HELD.depth = {}
    return _HELD.depth


def _is_bundle(root: Path) -> bool:
    from receval.formats.tables import TABLE_SUFFIXES

    return any((root / f"queries{s}").is_file() for s in TABLE_SUFFIXES)


@contextmanager
def bundle_lock(root: Path | str, timeout: float = 60.0) -> Iterator[None]:
    """Hold an exclusive lock on the bundle ``root`` (``root/.receval.lock``) while inside.

    Uses ``fcntl.flock`` where available (released by the kernel if the process dies), else an
    exclusive-create lock file.  Waits up to ``timeout`` seconds, then raises ``TimeoutError``.
    A folder that is not a bundle (no queries table: a mistyped path) is not locked, so no lock
    file is left there; loading it says why.  Re-entrant within one thread: the CLI holds it
    around a whole round and the library writers it calls take it again without waiting.
    ``judgments add``, ``sample``, ``curve plan`` and every :class:`Bundle` writer take it: two
    rounds drawn at once each get their own name, two writers at once both land.
    """
    root = Path(root)
    if not _is_bundle(root):
        yield
        return
    key = str(root.resolve())
    held = _held()
    if held.get(key, 0) > 0:
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    with _exclusive(root / LOCK_NAME, timeout):
        held[key] = 1
        try:
            yield
        finally:
            del held[key]


@contextmanager
def _exclusive(path: Path, timeout: float) -> Iterator[None]:
    """The OS-level exclusive lock on ``path`` (see :func:`bundle_lock`)."""
    deadline = time.monotonic() + timeout
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        fcntl = None
    if fcntl is None:  # pragma: no cover - Windows
        with _exclusive_file(path, deadline):
            yield
        return
    try:
        handle = open(path, "a+")  # closed by the with below
    except OSError as exc:  # a read-only bundle, or something else at that path
        raise BundleError(
            path, None, f"cannot take the bundle lock ({exc.strerror or exc})"
        ) from None
    with handle:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{path}: another receval process holds the lock (waited {timeout:.0f} s)"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def _exclusive_file(path: Path, deadline: float) -> Iterator[None]:  # pragma: no cover - Windows
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path}: another receval process holds the lock") from None
            time.sleep(0.05)
    try:
        yield
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
