"""The error types: bad input (:class:`BundleError`) and bad options (:class:`OptionError`)."""

from __future__ import annotations

import re
from pathlib import Path


class BundleError(ValueError):
    """Bad input: names the file, the line (when there is one) and what is wrong.

    ``str(error)`` is ``"<file>:<line>: <what is wrong>"`` (``"<file>: <what>"`` without a line);
    the command-line interface prints it as ``error: ...`` and exits with code 2.
    """

    def __init__(
        self, path: Path | str, line: int | None, message: str, *, cli_message: str | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        self.message = " ".join(str(message).split())
        #: the message as the command line says it (options as ``--flags``), when it differs
        self.cli_message = None if cli_message is None else " ".join(cli_message.split())
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self._where()}: {self.message}"

    def for_cli(self) -> str:
        """``str(self)`` naming command-line options instead of Python keywords."""
        return f"{self._where()}: {self.cli_message or self.message}"

    def _where(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


class OptionError(ValueError):
    """An invalid option or combination of options.

    The message is a template whose ``{name}`` / ``{name=value}`` fields name options:
    ``str(error)`` names them as Python keywords (``cluster_queries``, ``method='BCa'``), as the
    API takes them; :meth:`for_cli` as command-line flags (``--cluster-queries``,
    ``--method BCa``).
    """

    def __init__(self, template: str) -> None:
        self.template = template
        super().__init__(option_text(template))

    def for_cli(self) -> str:
        return option_text(self.template, cli=True)


_OPTION_FIELD = re.compile(r"\{(\w+)(?:=([^{}]*))?\}")


def option_text(template: str, cli: bool = False) -> str:
    """``template`` with its option fields as Python keywords, or (``cli``) as ``--flags``:
    ``{allow_pending=True}`` is ``allow_pending=True`` or ``--allow-pending``, ``{method='BCa'}``
    ``method='BCa'`` or ``--method BCa``, ``{rank_by}`` ``rank_by`` or ``--rank-by``."""

    def render(match: re.Match) -> str:
        name, value = match.group(1), match.group(2)
        if not cli:
            return name if value is None else f"{name}={value}"
        flag = "--" + name.replace("_", "-")
        if value is None or value == "True":
            return flag
        return f"{flag} {value.strip(chr(39) + chr(34))}"

    return _OPTION_FIELD.sub(render, template)
