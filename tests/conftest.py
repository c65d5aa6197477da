"""Shared test helpers: :func:`make_bundle` writes a tiny valid task bundle.

Use it from any test module::

    from conftest import make_bundle

    def test_something(tmp_path):
        root = make_bundle(tmp_path, judgments=None)            # drop judgments.tsv
        root = make_bundle(tmp_path, runs="system\\tquery_id\\tanswer\\nA\\tq1\\tx\\n")

or through the ``bundle`` fixture (the default bundle, untouched).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


#: why the Spark tests cannot run here (None: pyspark and a Java runtime are present)
SPARK_MISSING = (
    "pyspark is not installed (pip install 'receval[spark]')"
    if importlib.util.find_spec("pyspark") is None
    else "no Java runtime on PATH (Spark needs one; Debian: apt-get install default-jre-headless)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME")
    else None
)
needs_spark = pytest.mark.skipif(SPARK_MISSING is not None, reason=SPARK_MISSING or "")


def load_bench(name: str) -> ModuleType:
    """The benchmark script ``bench/<name>.py`` as a module (loaded once; registered in
    ``sys.modules`` because dataclasses look their module up there)."""
    key = f"bench_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def simulated_world(config, seed: int, where: Path | None = None):
    """A simulated world from ``config`` (generator seeded ``seed``) and its task without
    annotation, loaded from a bundle written to ``where`` (kept: ``score`` reads its files
    again for the run card) or to a temporary folder removed at once."""
    import tempfile

    import numpy as np

    from receval.formats.bundle import write_bundle
    from receval.simulation import simulate_world
    from receval.task import load_task

    world = simulate_world(config, np.random.default_rng(seed))
    if where is not None:
        return world, load_task(write_bundle(where / "w", world.tables(), world.task_config()))
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "w", world.tables(), world.task_config()))
    return world, base


#: The default bundle: file name -> content.  Three queries, two systems of two teams, one
#: duplicated output row (A outputs "Paris" twice, with scores 0.9 and 0.4), a fact output by both
#: systems ("paris" / " Paris "), two annotators with one tie, a two-system precision sample and
#: two exhaustive units.
DEFAULT_FILES: dict[str, str] = {
    "task.toml": 'name = "tiny"\n',
    "queries.tsv": "query_id\tentity\tslot\nq1\tFrance\tcapital\nq2\tItaly\tcapital\nq3\tSpain\tcapital\n",
    "runs.tsv": (
        "system\tteam\tquery_id\tanswer\tscore\n"
        "A\tT1\tq1\tParis\t0.9\n"
        "A\tT1\tq1\tparis\t0.4\n"
        "A\tT1\tq2\tRome\t0.8\n"
        "A\tT1\tq3\tBarcelona\t0.3\n"
        "B\tT2\tq1\t Paris \t0.7\n"
        "B\tT2\tq2\tMilan\t0.6\n"
        "B\tT2\tq3\tMadrid\t0.5\n"
    ),
    "judgments.tsv": (
        "query_id\tanswer\tlabel\tannotator\n"
        "q1\tParis\tC\tann1\n"
        "q1\tparis\tcorrect\tann2\n"
        "q2\tRome\tC\tann1\n"
        "q2\tMilan\tW\tann1\n"
        "q3\tBarcelona\tC\tann1\n"
        "q3\tBarcelona\tW\tann2\n"
        "q3\tMadrid\tC\tann2\n"
    ),
    "samples.tsv": (
        "sample\tsystem\tquery_id\tanswer\tprob\n"
        "s1\tA\tq1\tParis\t0.3333333333\n"
        "s1\tA\tq3\tBarcelona\t0.3333333333\n"
        "s1\tB\tq2\tMilan\t0.3333333333\n"
    ),
    "exhaustive_units.tsv": "unit\nd1\nd2\n",
    "exhaustive.tsv": "unit\tquery_id\tanswer\nd1\tq1\tParis\nd1\tq3\tMadrid\n",
}

#: keyword -> file name for the overrides of :func:`make_bundle`.
KEYWORDS: dict[str, str] = {
    "task_toml": "task.toml",
    "queries": "queries.tsv",
    "runs": "runs.tsv",
    "judgments": "judgments.tsv",
    "samples": "samples.tsv",
    "exhaustive_units": "exhaustive_units.tsv",
    "exhaustive": "exhaustive.tsv",
    "truth": "truth.tsv",
}


def make_bundle(
    tmp_path: Path,
    name: str = "bundle",
    *,
    files: dict[str, str | bytes | None] | None = None,
    **overrides: str | bytes | None,
) -> Path:
    """Write the default bundle (:data:`DEFAULT_FILES`) into ``tmp_path / name`` and return it.

    Parameters
    ----------
    tmp_path : the pytest ``tmp_path`` (or any folder).
    name : folder name of the bundle inside ``tmp_path``.
    files : any file by relative path (``"runs/A.tsv"``, ``"queries.csv"``): text is written as
        UTF-8, bytes verbatim, ``None`` removes a default file.  Applied after ``overrides``.
    **overrides : a table by keyword (:data:`KEYWORDS`, e.g. ``runs=``, ``task_toml=``) with the
        same meaning: the new content, or ``None`` to leave the file out.
    """
    content: dict[str, str | bytes | None] = dict(DEFAULT_FILES)
    for key, value in overrides.items():
        if key not in KEYWORDS:
            raise TypeError(f"make_bundle: unknown table {key!r} (known: {', '.join(KEYWORDS)})")
        content[KEYWORDS[key]] = value
    content.update(files or {})
    root = tmp_path / name
    root.mkdir(parents=True, exist_ok=False)
    for rel, value in content.items():
        if value is None:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, bytes):
            path.write_bytes(value)
        else:
            path.write_text(value, encoding="utf-8")
    return root


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """The default tiny bundle (see :data:`DEFAULT_FILES`)."""
    return make_bundle(tmp_path)


@pytest.fixture(scope="session")
def readme_demo(tmp_path_factory):
    """The README's main command run verbatim once, minus the install step (this environment
    has receval installed), into a temporary folder: (the finished process, the output folder).
    Shared by the test that it runs and the test that its output is publishable, so the
    70-system score at B = 1000 runs once (slow tests only)."""
    import re
    import shutil
    import subprocess

    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text()
    block = re.search(r"<!-- main-command -->\s*```\s*(.+?)\s*```", text, re.S).group(1).strip()
    install, _, command = block.partition("&&")
    assert "pip install" in install
    command = command.strip()
    assert command.startswith("receval score data/kbp-sim")
    out = tmp_path_factory.mktemp("readme") / "kbp-sim"
    exe = shutil.which("receval") or f"{sys.executable} -m receval.cli"
    proc = subprocess.run(
        command.replace("receval", exe, 1).replace("reports/kbp-sim", str(out)),
        shell=True,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return proc, out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``RECEVAL_TEST_TIMES=FILE``, append the test's wall and CPU seconds (this process
    and its finished children; setup + call + teardown) as one JSON line (bench/ci_cost.py)."""
    path = os.environ.get("RECEVAL_TEST_TIMES")
    if not path:
        yield
        return
    import json
    import resource
    import time

    def cpu() -> tuple[float, float]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime

    wall, (own, children) = time.perf_counter(), cpu()
    yield
    after = cpu()
    row = {"test": item.nodeid, "wall": round(time.perf_counter() - wall, 2)}
    row |= {"cpu": round(after[0] - own, 2), "children_cpu": round(after[1] - children, 2)}
    row["load"] = round(os.getloadavg()[0], 1)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
