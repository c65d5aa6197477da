"""What every benchmark script shares: its options, its clocks and its stored record.

Each script under ``bench/`` is run as a file (``python bench/<script>.py``) and loaded by the
tests with ``importlib``, so the folder is not a package: a script imports this module after
``sys.path.insert(0, <bench folder>)``.  It gives

* :func:`parser`: the conventions every script follows — ``--seed S`` (the seed of every random
  draw), ``--reps R`` (Monte Carlo repetitions), ``--quick`` (a short but honest configuration,
  stated in the stored record);
* :func:`timed`, :func:`peak_rss_mib`: wall and CPU time and peak memory of one call;
* :func:`store_result`: the record ``bench/results/<script>.json`` (bench/README.md gives the
  shape), so that every figure on the documentation's validation page names the command, the
  seed and the code that produced it, and the machine it ran on.  "The code" is the checkout
  the measured children imported ``receval`` from (:func:`run_child` asks each child's
  interpreter, with its options, environment and working directory: :func:`child_checkout`),
  not necessarily the one this script imports; a script that runs nothing as a child measured
  the ``receval`` it imports itself.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
#: the keys every stored record has (tests/test_bench_results.py checks them)
REQUIRED = ("command", "seed", "commit", "date", "figures")
#: scripts under bench/ that are libraries for the others and store nothing themselves
LIBRARIES = ("harness",)


# ------------------------------------------------------------------------------ options


def parser(
    doc: str | None,
    *,
    seed: int | None = None,
    reps: int | bool | None = False,
    reps_name: str = "reps",
    quick: dict[str, Any] | None = None,
) -> argparse.ArgumentParser:
    """An argument parser with the bench conventions (parse it with :func:`parse`).

    Parameters
    ----------
    doc : the script's docstring; its first line is the description.
    seed : default of ``--seed`` (``None``: the script draws nothing at random, no option).
    reps : default of ``--reps`` (``False``: no such option; ``None``: the script's per-study
        default).
    reps_name : the script's own name for its repetitions (``runs``, ``seeds``, ...): ``--reps``
        and ``--<reps_name>`` are the same option, stored as ``args.<reps_name>``.
    quick : the defaults ``--quick`` stands for (option dest → value; options given on the
        command line win), a short but honest configuration recorded in the stored result.
    """
    out = argparse.ArgumentParser(description=(doc or "").strip().split("\n")[0])
    if seed is not None:
        out.add_argument("--seed", type=int, default=seed, help=f"random seed (default {seed})")
    if reps is not False:
        names = ["--reps"] + ([f"--{reps_name.replace('_', '-')}"] if reps_name != "reps" else [])
        out.add_argument(*names, dest=reps_name, type=int, default=reps, help="repetitions")
    if quick is not None:
        preset = ", ".join(f"{k}={v}" for k, v in quick.items())
        out.add_argument("--quick", action="store_true", help=f"short run: {preset}")
        out.set_defaults(_quick_preset=quick)
    out.add_argument(
        "--no-store", action="store_true", help="print only; do not write bench/results/"
    )
    return out


def parse(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """Parse ``argv`` (default ``sys.argv[1:]``); with ``--quick``, the parser's quick preset
    replaces the defaults of the options not given."""
    args = parser.parse_args(argv)
    preset = getattr(args, "_quick_preset", None)
    if getattr(args, "quick", False) and preset:
        parser.set_defaults(**preset)
        args = parser.parse_args(argv)
    return args


def configuration(args: argparse.Namespace) -> str:
    """The run's configuration in words: the quick preset, or the script's defaults."""
    preset = getattr(args, "_quick_preset", None)
    if getattr(args, "quick", False) and preset:
        return "quick (" + ", ".join(f"{k}={v}" for k, v in preset.items()) + ")"
    return "as given by the command (defaults otherwise)"


class Tee:
    """Copy everything printed from now on (``sys.stdout``) into a buffer; :meth:`close` stops
    copying and returns the text (stored as a record's ``output``)."""

    def __init__(self) -> None:
        self.stream = sys.stdout
        self.buffer = io.StringIO()
        sys.stdout = self

    def write(self, text: str) -> int:
        self.buffer.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> str:
        if sys.stdout is self:
            sys.stdout = self.stream
        return self.buffer.getvalue()


def command(script: str, argv: list[str] | None = None) -> str:
    """The command line that regenerates a run: ``python bench/<script>.py ARGS``."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python", f"bench/{script}.py", *map(shlex.quote, args)])


# ------------------------------------------------------------------------------- clocks


@dataclass(frozen=True)
class Timed:
    """One timed call: its value, wall and CPU seconds, and (when traced) the peak of Python
    allocations in bytes (``tracemalloc``)."""

    value: Any
    wall: float
    cpu: float
    peak: int | None = None


def timed(func: Callable[..., Any], *args: Any, trace: bool = False, **kwargs: Any) -> Timed:
    """Call ``func(*args, **kwargs)``, measuring ``time.perf_counter``, ``time.process_time``
    and, with ``trace``, the ``tracemalloc`` peak (tracing slows the call: time separately)."""
    if trace:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        value = func(*args, **kwargs)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        peak = tracemalloc.get_traced_memory()[1] if trace else None
    finally:
        if trace:
            tracemalloc.stop()
    return Timed(value, wall, cpu, peak)


def peak_rss_mib(children: bool = False) -> float:
    """Peak resident memory of this process (or of its finished children) in MiB (Linux
    ``ru_maxrss`` is in KiB)."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024


def best(call: Callable[[], Any], repeat: int) -> float:
    """Smallest wall time of ``repeat`` calls (the machine is shared: the minimum is the cost)."""
    return min(timed(call).wall for _ in range(max(1, repeat)))


@dataclass(frozen=True)
class Child:
    """One finished child process: wall and CPU seconds (user + system), its own peak RSS in
    MiB, its stdout, the tail of its stderr, its exit code and the checkout whose ``receval``
    it imports (:func:`child_checkout`; None for a child that is not Python or has none)."""

    wall: float
    cpu: float
    rss_mib: float
    stdout: str
    stderr_tail: str
    exit: int = 0
    checkout: str | None = None


def run_child(
    args: list[str],
    env: dict[str, str] | None = None,
    check: bool = True,
    cwd: Path | str | None = None,
) -> Child:
    """Run a command (in ``cwd``, default this process's) and measure it.  ``os.wait4`` reports
    the resource usage of exactly this child, so several measured children do not mask each
    other (``RUSAGE_CHILDREN`` keeps only the largest so far); CPU time depends far less on the
    machine's load than wall time.  The checkout the child imports ``receval`` from is noted
    in :data:`CHILD_CHECKOUTS` (the commit a stored record names, :func:`git_commit`)."""
    args = _safe_path(args, env)
    checkout = child_checkout(args, env, cwd)
    if checkout is not None:
        CHILD_CHECKOUTS[checkout] = CHILD_CHECKOUTS.get(checkout, 0) + 1
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        tail = " | ".join(err.read().decode(errors="replace").strip().splitlines()[-3:])
    code = os.waitstatus_to_exitcode(status)
    if check and code != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {tail}")
    cpu = usage.ru_utime + usage.ru_stime
    return Child(wall, cpu, usage.ru_maxrss / 1024, stdout, tail, code, checkout)


def _safe_path(args: list[str], env: dict[str, str] | None) -> list[str]:
    """``args`` with ``-P`` after the interpreter when it runs ``-m``/``-c`` with an explicit
    ``PYTHONPATH``: ``-m`` and ``-c`` put the working directory first on ``sys.path``, so a
    benchmark run from a checkout would time that checkout's ``receval`` whatever
    ``PYTHONPATH`` (e.g. a baseline tree) says (Python ≥ 3.11; unchanged before)."""
    explicit = env is not None and "PYTHONPATH" in env
    if not explicit or sys.version_info < (3, 11) or len(args) < 2:
        return args
    for i, arg in enumerate(args[:-1]):  # past nice/time/... wrappers to the interpreter
        if arg == sys.executable or Path(arg).name.startswith("python"):
            if args[i + 1] in ("-m", "-c"):
                return [*args[: i + 1], "-P", *args[i + 1 :]]
            return args
    return args


# ------------------------------------------------------------------ the measured checkout

#: the checkouts the children run by :func:`run_child` import ``receval`` from (path → how
#: many children), in the order first seen: the code a record's figures measured
CHILD_CHECKOUTS: dict[str, int] = {}
#: commands that run the rest of their command line (:func:`child_checkout` looks past them)
_WRAPPERS = ("nice", "time", "ionice", "taskset", "chrt")
#: Python options that take the next argument as their value
_VALUED = ("-X", "-W", "--check-hash-based-pycs")
#: what the probe prints: the folder holding the ``receval`` package it would import (found,
#: not imported: nothing of the package runs)
_PROBE = (
    "import importlib.util as u, pathlib; s = u.find_spec('receval'); "
    "print(pathlib.Path(s.origin).resolve().parents[1] if s and s.origin else '')"
)
_PROBED: dict[tuple, str | None] = {}


def child_checkout(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | str | None = None
) -> str | None:
    """The folder whose ``receval`` the command ``args`` imports when run with ``env`` in
    ``cwd``: asked of the same interpreter with the same options, environment and folder
    (``-m``/``-c`` put the working directory first on ``sys.path``, unless ``-P``/``-I``; a
    script or a console script puts its own folder there instead, so the probe runs with
    ``-P``).  None when the command is not Python or finds no ``receval``."""
    python, options, cwd_first = _python_of(args)
    if python is None:
        return None
    probe = [python, *options, *([] if cwd_first else ["-P"]), "-c", _PROBE]
    where = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
    env_key = tuple(sorted((env if env is not None else os.environ).items()))
    key = (tuple(probe), where, env_key)
    if key not in _PROBED:
        try:
            done = subprocess.run(
                probe, capture_output=True, text=True, env=env, cwd=where, timeout=120
            )
            _PROBED[key] = (done.stdout.strip() or None) if done.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            _PROBED[key] = None
    return _PROBED[key]


def _python_of(args: list[str]) -> tuple[str | None, list[str], bool]:
    """(the Python interpreter of a command, its options before ``-m``/``-c``/the script,
    whether the working directory comes first on its ``sys.path``)."""
    if args and Path(args[0]).name in _WRAPPERS:  # nice -n 10 python ...: the python
        pythons = [i for i, a in enumerate(args) if Path(a).name.startswith("python")]
        args = args[pythons[0] :] if pythons else []
    if not args:
        return None, [], False
    python = args[0] if Path(args[0]).name.startswith("python") else _shebang(args[0])
    if python is None or python != args[0]:  # a console script: its folder comes first
        return python, [], False
    options: list[str] = []
    i = 1
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-m", "-c"):
        options.append(args[i])
        if args[i] in _VALUED and i + 1 < len(args):
            options.append(args[i + 1])
            i += 1
        i += 1
    runs_code = i < len(args) and args[i] in ("-m", "-c")
    isolated = any(o in ("-P", "-I") or (o.startswith("-") and "P" in o[1:]) for o in options)
    return python, options, runs_code and not isolated


def _shebang(path: str) -> str | None:
    """The Python interpreter a script's ``#!`` line names (None: no such line, or not Python)."""
    import shutil

    found = shutil.which(path) or path
    try:
        with open(found, "rb") as fh:
            line = fh.readline(512).decode(errors="replace")
    except OSError:
        return None
    if not line.startswith("#!") or "python" not in line:
        return None
    words = line[2:].split()
    if Path(words[0]).name == "env" and len(words) > 1:
        return shutil.which(words[1])
    return words[0]


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPU count, load averages (1, 5, 15 min) at the time
    of storing, the niceness of this process, Python and the platform."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpus": os.cpu_count(),
        "load_average": load,
        "nice": os.nice(0),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


# ------------------------------------------------------------------------------ records


def measured_checkout() -> Path:
    """The checkout whose code the figures measured: the first one a child of
    :func:`run_child` imported ``receval`` from (:data:`CHILD_CHECKOUTS`), else (nothing run
    as a child: the script measured in process) the one this process imports."""
    if CHILD_CHECKOUTS:
        return Path(next(iter(CHILD_CHECKOUTS)))
    import receval

    return Path(receval.__file__).resolve().parents[1]


def git_commit(checkout: Path | str | None = None) -> str:
    """The HEAD commit of ``checkout`` (default: :func:`measured_checkout`, the checkout the
    measured children imported ``receval`` from, which their ``PYTHONPATH`` or working
    directory may make another than this script's), with ``+dirty`` when its tracked files
    differ from HEAD, or ``"unknown"`` outside git."""
    if checkout is None:
        checkout = measured_checkout()
    try:
        head = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(checkout), "diff", "--quiet", "HEAD", "--", "receval"],
            capture_output=True,
        )
    except OSError:
        return "unknown"
    commit = head.stdout.strip()
    if not commit:
        return "unknown"
    return commit + ("+dirty" if dirty.returncode == 1 else "")


def now() -> str:
    """The current UTC time, ISO 8601 to the second (a record's ``date``)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def records(data: Any) -> list[dict]:
    """The records of a results file: one record (``command``/``figures`` at the top), a list
    of them, a ``runs`` list or mapping of them, or a mapping of named studies, each a record
    (a named study's name becomes its ``title``)."""
    if isinstance(data, list):
        return [r for r in data if isinstance(r, dict)]
    if not isinstance(data, dict):
        return []
    if "command" in data or "figures" in data:
        return [data]
    runs = data.get("runs")
    if isinstance(runs, list):
        return [r for r in runs if isinstance(r, dict)]
    named = runs if isinstance(runs, dict) else data
    return [
        {**record, "title": record.get("title") or str(name)}
        for name, record in named.items()
        if isinstance(record, dict) and ("command" in record or "figures" in record)
    ]


def rows(frame: Any) -> list[dict]:
    """A pandas DataFrame as a list of flat row objects for ``figures`` (named index levels
    become columns, NaN becomes ``null``, numbers stay numbers)."""
    if any(name is not None for name in frame.index.names):
        frame = frame.reset_index()
    return json.loads(frame.to_json(orient="records", double_precision=6))


def store_result(
    name: str,
    command: str,
    seed: int | None,
    figures: Any,
    *,
    config: str | None = None,
    title: str | None = None,
    out: Path | str | None = None,
    **extra: Any,
) -> Path:
    """Store one run's figures in ``bench/results/<name>.json`` (atomically) and return the path.

    The file is ``{"script": "bench/<name>.py", "runs": [record, ...]}``; a record replaces the
    stored one of the same ``title`` (or, untitled, the same ``command``), so that each
    configuration of a script keeps its latest run.  A record holds ``command, seed, commit,
    date, machine, config, figures`` and ``extra`` (e.g. ``description``, ``tables``).

    Parameters
    ----------
    config : the configuration in words when it is not the script's default (e.g. ``"quick:
        20 repetitions instead of 200"``), shown with the figures.
    """
    path = Path(out) if out is not None else RESULTS / f"{name}.json"
    record: dict[str, Any] = {"command": command, "seed": seed, "commit": git_commit()}
    if len(CHILD_CHECKOUTS) > 1:  # e.g. a baseline source tree timed in the same rounds
        record["commits"] = {where: git_commit(where) for where in CHILD_CHECKOUTS}
    record |= {"date": now(), "machine": machine(), "config": config or "the script's defaults"}
    if title:
        record["title"] = title
    record |= extra
    record["figures"] = figures
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):  # two runs of one script finishing together both keep their record
        kept = _stored_records(path)
        same = "title" if title else "command"
        kept = [
            r for r in kept if r.get(same) != record.get(same) or (not title and r.get("title"))
        ]
        data = {"script": f"bench/{name}.py", "runs": [*kept, record]}
        tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, default=_plain) + "\n", encoding="utf-8")
        tmp.replace(path)
    return path


def _stored_records(path: Path) -> list[dict]:
    """The records already stored in ``path`` (none when it is missing or not JSON)."""
    if not path.is_file():
        return []
    try:
        return records(json.loads(path.read_text(encoding="utf-8")))
    except ValueError:
        return []


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive advisory lock on ``<path>.lock`` (POSIX ``flock``; no lock elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path.with_suffix(".json.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON values (``json.dumps`` ``default``)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def store(
    args: argparse.Namespace,
    name: str,
    figures: Any,
    argv: list[str] | None = None,
    *,
    output: Tee | str | None = None,
    **kw: Any,
) -> Path | None:
    """:func:`store_result` for a script's parsed ``args`` (its ``--seed`` unless ``seed`` is
    given, e.g. ``"0 … 199"`` for a script seeding each repetition by its index; its configuration;
    nothing stored with ``--no-store``), with what the script printed (``output``, kept as the
    record's ``output`` text), printing where the record went."""
    text = output.close() if isinstance(output, Tee) else output
    if getattr(args, "no_store", False):
        return None
    if text:
        kw["output"] = text
    kw.setdefault("config", configuration(args))
    seed = kw.pop("seed", getattr(args, "seed", None))
    path = store_result(name, command(name, argv), seed, figures, **kw)
    print(f"stored in bench/results/{path.name}")
    return path
