"""Start-up time of the command line: `receval --help` and `receval curve budget` at N = 2·10⁹.

Prints the median wall time of each command over several runs (fresh interpreter each time), the
time of a bare `python -c pass` for reference, and what `import receval.cli` imports (the heavy
libraries must not be among them).  Goal (issue 12): each command < 1 s on the 2-core machine.

    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "receval --help": [sys.executable, "-m", "receval.cli", "--help"],
    "receval curve budget --method paula --size 2e9": [
        sys.executable,
        "-m",
        "receval.cli",
        "curve",
        "budget",
        "--method",
        "paula",
        "--size",
        "2000000000",
    ],
}
HEAVY = ("pandas", "scipy", "statsmodels", "matplotlib", "duckdb", "pyspark", "pyarrow")


def wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, reps=7, reps_name="runs", quick={"runs": 3})
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    rows = []
    for name, cmd in COMMANDS.items():
        seconds = wall(cmd, args.runs)
        verdict = "" if name.startswith("python") else ("PASS" if seconds < 1.0 else "FAIL")
        print(f"{name:<50} {seconds * 1000:8.0f} ms  {verdict}")
        rows.append({"command": name, "median_wall_ms": round(seconds * 1000), "goal": verdict})
    code = f"import sys, receval.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    print(f"heavy modules imported by `import receval.cli`: {loaded.stdout.strip()}")
    figures = {"start_up": rows, "heavy_modules_imported": loaded.stdout.strip()}
    harness.store(args, "startup", figures, argv, output=tee, title="start-up time, median wall")


if __name__ == "__main__":
    main()
