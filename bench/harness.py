"""What every benchmark script shares: the commit a figure was measured on, and its record.

Each script stores its figures in ``bench/results/<script>.json`` (bench/README.md gives the
shape: ``command, seed, commit, date, figures``), so a figure on the documentation's validation
page names the command, the seed and the code that produced it.  A script imports this module
with ``sys.path.append(<bench folder>)`` (scripts are run as files and loaded by the tests with
``importlib``, so the folder is not a package).
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def git_commit(checkout: Path | str | None = None) -> str:
    """The HEAD commit of ``checkout`` (default: the checkout ``receval`` is imported from, which
    ``PYTHONPATH`` may point at another than this script's), or ``"unknown"`` outside git."""
    if checkout is None:
        import receval

        checkout = Path(receval.__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def now() -> str:
    """The current UTC time, ISO 8601 to the second (a record's ``date``)."""
    return datetime.now(UTC).isoformat(timespec="seconds")
