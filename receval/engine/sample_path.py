"""Whether ``sample`` draws a bundle out of core (:func:`default_engine`): kept apart from
:mod:`receval.engine.sampled`, which :mod:`receval.bundle` imports, because it reads
:mod:`receval.engine.score`'s rule (a runtime import cycle otherwise)."""

from __future__ import annotations

from pathlib import Path


def default_engine(task, out_of_core: bool | None = None) -> str | None:
    """``"duckdb"`` when ``sample`` draws ``task`` (a bundle folder or
    :class:`~receval.bundle.Bundle`) out of core by default, else None: ``out_of_core`` True,
    or None and the runs are Parquet with at least
    :data:`~receval.engine.score.ENGINE_PATH_ROWS` rows (from the files' metadata), the rule of
    ``score``.  A loaded task, a folder that is not a bundle or unreadable runs: None (the
    in-memory path says what is wrong)."""
    from receval.bundle import Bundle

    if out_of_core is False:
        return None
    root = task.root if isinstance(task, Bundle) else task
    if out_of_core:
        if not isinstance(root, (str, Path)):
            raise ValueError("out_of_core needs a bundle path or Bundle, not a loaded task")
        return "duckdb"
    if not isinstance(root, (str, Path)) or not Path(root).is_dir():
        return None
    from receval.engine.score import ENGINE_PATH_ROWS, parquet_rows

    try:
        rows = parquet_rows(task if isinstance(task, Bundle) else Bundle(root))
    except (OSError, ValueError):
        return None
    return "duckdb" if rows is not None and rows >= ENGINE_PATH_ROWS else None
