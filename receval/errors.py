"""The one error type for bad input."""

from __future__ import annotations

from pathlib import Path


class BundleError(ValueError):
    """Bad input: names the file, the line (when there is one) and what is wrong.

    ``str(error)`` is ``"<file>:<line>: <what is wrong>"`` (``"<file>: <what>"`` without a line);
    the command-line interface prints it as ``error: ...`` and exits with code 2.
    """

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = " ".join(str(message).split())
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"
