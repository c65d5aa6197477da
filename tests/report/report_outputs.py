"""Output directories for the report tests (fixtures imported by test_html and test_browser).

* ``scored_dir``: what ``receval simulate`` + ``receval score --target-recall`` really write
  (12 systems, annotator conflicts, sample-based curves with recall, Dimm extrapolations).
* ``full_output_dir``: the same plus PAULA and AdaStrat curves (ranks only, no recall column
  values) for the two best systems, as ``run.json`` records curves of those methods.
* :func:`write_method_curve`: a curve table of a real curve method run on a synthetic list.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli


def _invoke(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="session")
def scored_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scored")
    task, out = root / "task", root / "out"
    _invoke(
        [
            "simulate",
            str(task),
            "--systems",
            "12",
            "--queries",
            "80",
            "--seed",
            "5",
            "--annotators",
            "2",
            "--annotator-error",
            "0.1",
        ]
    )
    _invoke(
        [
            "score",
            str(task),
            "--out",
            str(out),
            "--target-recall",
            "0.1",
            "--bootstrap",
            "200",
            "--seed",
            "1",
            "--quiet",
        ]
    )
    (out / "report.html").unlink(missing_ok=True)
    return out


def method_curve(method: str, size: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """Run PAULA or AdaStrat on a synthetic ranked list of ``size`` items; the curve table and
    the run.json record ``receval score`` writes for it."""
    from receval.curves.adastrat import AdaStrat
    from receval.curves.paula import Paula

    def oracle(ranks: np.ndarray) -> np.ndarray:
        p = 0.15 + 0.8 * np.exp(-ranks / (0.3 * size))
        rng = np.random.default_rng([seed, *map(int, ranks[:1])])
        return (rng.random(ranks.size) < p).astype(float)

    runner = Paula() if method == "paula" else AdaStrat(seed=seed)
    est = runner.run(size, oracle)
    frame = pd.DataFrame(
        {
            "rank": est.ranks,
            "precision": est.precision,
            "lower": est.lower,
            "upper": est.upper,
            "recall": np.nan,
            "queried": np.isin(est.ranks, est.queried).astype(int),
        }
    )
    record = {
        "method": est.method,
        "kind": est.kind,
        "guarantee": est.guarantee,
        "size": est.size,
        "annotations": est.annotations,
        "flags": list(est.flags),
    }
    return frame, record


def add_method_curves(out: Path, systems: dict[str, str], size: int = 60_000) -> None:
    """Replace the curves of ``systems`` (system -> method) in ``out`` by real method runs."""
    run = json.loads((out / "run.json").read_text())
    run.setdefault("curves", {})
    for i, (system, method) in enumerate(systems.items()):
        frame, record = method_curve(method, size, seed=i)
        (out / "curves").mkdir(exist_ok=True)
        frame.to_csv(out / "curves" / f"{system}.csv", index=False, float_format="%.6g")
        run["curves"][system] = record
    (out / "run.json").write_text(json.dumps(run, indent=2))


@pytest.fixture(scope="session")
def full_output_dir(scored_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("full") / "out"
    shutil.copytree(scored_dir, out)
    board = pd.read_csv(out / "leaderboard.csv", dtype={"system": str})
    add_method_curves(out, {board["system"][0]: "paula", board["system"][1]: "adastrat"})
    return out
