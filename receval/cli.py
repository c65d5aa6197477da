"""The ``receval`` command line: a thin shell over the library.

Every command exits 0 on success and 2 with one line ``error: <file>:<line>: <what is wrong>`` on
bad input (never a traceback).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from receval import __version__
from receval.errors import BundleError


class InputError(click.ClickException):
    """Bad input: printed as one ``error:`` line, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class ReceGroup(click.Group):
    """A click group that turns bad-input exceptions into :class:`InputError`."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BundleError as exc:
            raise InputError(str(exc)) from None
        except FileExistsError as exc:
            raise InputError(str(exc)) from None


@click.group(cls=ReceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="receval")
def cli() -> None:
    """receval: fair, label-efficient scoring of many systems in shared tasks.

    Typical session: simulate (or import) a task bundle, validate it, draw samples and annotate,
    then score and read the leaderboard and report.
    """


def _load(task: Path):
    from receval.task import load_task

    return load_task(task)


@cli.command()
@click.argument("task", type=click.Path(path_type=Path))
def validate(task: Path) -> None:
    """Load and check the bundle TASK; print a summary (systems, queries, outputs, labels, conflicts)."""
    loaded = _load(task)
    summary = loaded.summary()
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        click.echo(f"{key:<{width}}  {value}")
    conflicts = loaded.merged.conflicts
    if len(conflicts):
        kinds = conflicts["kind"].value_counts()
        detail = ", ".join(f"{k}: {v}" for k, v in kinds.items())
        click.echo(f"conflicts by kind: {detail} (all listed in conflicts.csv by `receval score`)")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="receval")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
