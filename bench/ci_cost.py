"""What the test suite costs: wall and CPU seconds of every test, the slowest first.

Runs ``python -m pytest -q -m MARK`` (the fast suite ``"not slow"`` or the slow one ``slow``)
with ``RECEVAL_TEST_TIMES`` set, so that ``tests/conftest.py`` appends one JSON line per test
(setup + call + teardown: wall seconds, CPU seconds of the test process and of its finished
child processes, the load average) — or, with ``--from FILE ...``, reads such lines written by
earlier runs (e.g. shards run side by side).  CPU seconds are what a test costs: on a shared
machine its wall time is mostly the others' load.  A test's child processes count once they
have ended (a Spark JVM that lives for the session is counted by no test).

    python bench/ci_cost.py --suite slow [--files tests/...]
    python bench/ci_cost.py --from /tmp/slow-*.jsonl --title "slow suite"
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

ROOT = Path(__file__).resolve().parents[1]


def run_suite(suite: str, files: list[str], out: Path) -> int:
    """The suite under pytest with per-test times appended to ``out``; its exit code."""
    mark = "slow" if suite == "slow" else "not slow"
    env = {**os.environ, "RECEVAL_TEST_TIMES": str(out), "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-m", "pytest", "-q", "-m", mark, "-p", "no:cacheprovider", *files]
    return subprocess.run(args, cwd=ROOT, env=env).returncode


def read_times(paths: list[Path]) -> list[dict]:
    """Per-test rows (the last line of each test wins), costliest first."""
    rows: dict[str, dict] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["test"]] = row
    out = [{**r, "cpu_total": round(r["cpu"] + r["children_cpu"], 2)} for r in rows.values()]
    return sorted(out, key=lambda r: -r["cpu_total"])


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--suite", choices=("fast", "slow"), default="slow")
    parser.add_argument("--files", nargs="*", default=[], help="test files (default: all)")
    parser.add_argument("--from", dest="sources", nargs="*", type=Path, help="JSON lines")
    parser.add_argument("--title", default=None)
    parser.add_argument("--top", type=int, default=25)
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    sources = args.sources
    if not sources:
        sources = [Path(tempfile.mkdtemp(prefix="ci-cost-")) / "times.jsonl"]
        code = run_suite(args.suite, args.files, sources[0])
        print(f"pytest exit code {code}")
    rows = read_times(sources)
    cpu = sum(r["cpu_total"] for r in rows)
    print(f"{len(rows)} tests, {cpu:.0f} s CPU, {sum(r['wall'] for r in rows):.0f} s wall")
    for r in rows[: args.top]:
        print(f"{r['cpu_total']:8.1f} s CPU {r['wall']:8.1f} s wall  {r['test']}")
    keep = ("test", "cpu_total", "cpu", "children_cpu", "wall", "load")
    figures = {"tests": len(rows), "cpu_s": round(cpu, 1)}
    figures["slowest"] = [{k: r.get(k) for k in keep} for r in rows[: args.top]]
    title = args.title or f"{args.suite} suite"
    harness.store(args, "ci_cost", figures, argv, output=tee, title=title)


if __name__ == "__main__":
    main()
