"""Progress bars on stderr for long runs (bootstrap, sampling, curves, report figures).

:func:`progress` wraps :func:`click.progressbar` so that

* nothing is printed when ``quiet`` is set or when the stream is not a terminal (pipes, files,
  CI logs stay clean: no bar, no label);
* on a terminal, the bar appears only once the run has lasted ``delay`` seconds (default 1 s),
  so short runs print nothing either.

Use it over an iterable::

    with progress(systems, "curves", quiet) as items:
        for system in items:
            ...

or over a count, advancing by hand::

    with progress(B, "bootstrap", quiet) as bar:
        for chunk in chunks:
            ...
            bar.update(len(chunk))
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from operator import length_hint
from typing import Any, Generic, TextIO, TypeVar

import click

T = TypeVar("T")

__all__ = ["Progress", "progress", "stage", "stage_detail"]

#: the innermost progress bar entered in this context (what :func:`stage` relabels)
_ACTIVE: ContextVar[Progress | None] = ContextVar("receval_progress", default=None)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress(Generic[T]):
    """A delayed, terminal-only progress bar; a context manager (see :func:`progress`).

    Iterating it yields the items of the wrapped iterable and advances the bar by one per item;
    :meth:`update` advances it by hand.  Outside a terminal (or quiet) it only counts.
    """

    def __init__(
        self,
        iterable: Iterable[T] | None,
        length: int | None,
        label: str,
        stream: TextIO | None,
        delay: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._iterable = iterable
        self.length = length
        self.label = label
        self._stream = stream
        self._delay = delay
        self._clock = clock
        self._start = clock()
        self._bar: Any = None
        self.done = 0
        self._base = label
        self._stage = ""
        self._token: Any = None

    @property
    def shown(self) -> bool:
        """Whether the bar has been drawn (on a terminal, after ``delay`` seconds)."""
        return self._bar is not None

    def __enter__(self) -> Progress[T]:
        self._start = self._clock()
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        if self._bar is not None:
            self._bar.__exit__(*exc_info)

    def relabel(self, what: str) -> None:
        """Show ``label: what`` (the stage of a long step) until the next relabel."""
        self._stage = what
        self._show(f"{self._base}: {what}" if what else self._base)

    def detail(self, where: str) -> None:
        """Show ``label: stage, where`` (how far the stage is, e.g. ``cell 5/23``), keeping the
        stage for the next detail."""
        head = f"{self._base}: {self._stage}" if self._stage else self._base
        self._show(f"{head}, {where}" if where else head)

    def _show(self, label: str) -> None:
        self.label = label
        if self._bar is not None:
            self._bar.label = self.label
            self._bar.render_progress()
        elif self._stream is not None:
            self.update(0)  # drawn now if the delay has passed

    def __iter__(self) -> Iterator[T]:
        if self._iterable is None:
            raise TypeError("a progress bar over a length is not iterable: call update(n)")
        for item in self._iterable:
            yield item
            self.update(1)

    def update(self, steps: int = 1) -> None:
        """Advance by ``steps`` (drawing the bar once ``delay`` seconds have passed)."""
        self.done += steps
        if self._stream is None:
            return
        if self._bar is None:
            if self._clock() - self._start < self._delay:
                return
            self._bar = click.progressbar(
                iter(()),
                length=self.length,
                label=self.label,
                file=self._stream,
                show_pos=True,
            )
            self._bar.__enter__()
            self._bar.update(self.done)
        else:
            self._bar.update(steps)


def stage(what: str) -> None:
    """Say which stage of a long step runs now, on the innermost progress bar entered in this
    context (e.g. ``score``'s: ``scoring: anytime: recall and F1 (θ grid)``); nothing without
    one, so library code may call it freely."""
    bar = _ACTIVE.get()
    if bar is not None:
        bar.relabel(what)


def stage_detail(where: str) -> None:
    """Say how far the current stage is (``where``, e.g. ``cell 5/23`` or ``pairs 800/2415``)
    on the innermost progress bar, after the stage's own label; nothing without a bar."""
    bar = _ACTIVE.get()
    if bar is not None:
        bar.detail(where)


def progress(
    iterable_or_length: Iterable[T] | int,
    label: str,
    quiet: bool = False,
    *,
    file: TextIO | None = None,
    delay: float = 1.0,
) -> Progress[T]:
    """A progress bar over an iterable or a number of steps, shown on stderr only when useful.

    Parameters
    ----------
    iterable_or_length : the items to iterate over, or the number of steps (then call
        ``update(n)`` on the object the ``with`` statement gives).
    label : what is progressing (``"bootstrap"``, ``"curves"``).
    quiet : print nothing (``--quiet``).
    file : the stream (default ``sys.stderr`` at call time); no bar unless it is a terminal.
    delay : seconds to wait before drawing: runs shorter than that print nothing.
    """
    if isinstance(iterable_or_length, int):
        iterable: Iterable[T] | None = None
        length: int | None = int(iterable_or_length)
    else:
        iterable = iterable_or_length
        hint = length_hint(iterable, -1)
        length = hint if hint >= 0 else None
    stream = sys.stderr if file is None else file
    shown = not quiet and _is_terminal(stream)
    return Progress(iterable, length, label, stream if shown else None, delay)
