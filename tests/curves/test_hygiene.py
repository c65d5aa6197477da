"""Hygiene of the curve commands: seeds recorded, labels in [0, 1], bounds rounded outward."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from receval import run_curve
from receval.cli import cli
from receval.curves import StratBand
from receval.curves.base import Labels
from receval.curves.ranked import LogisticShape, SimulatedRankedList
from receval.curves.table import curve_frame, outward_rounded
from receval.report.writers import write_csv
from receval.task import load_task

PARAMS = ["--epsilon", "0.2", "--window", "10"]
SYSTEM: list[str] = []


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("hygiene") / "task"
    args = ["simulate", str(root), "--systems", "3", "--queries", "60", "--per-system", "20"]
    result = CliRunner().invoke(cli, [*args, "--seed", "3"])
    assert result.exit_code == 0, result.output
    SYSTEM[:] = [load_task(root).systems[0]]
    return root


def _plan(root, *extra: str):
    system = SYSTEM[0]
    args = ["curve", "plan", str(root), "--system", system, "--method", "stratband", *PARAMS]
    return CliRunner().invoke(cli, [*args, *extra])


def test_plan_without_seed_draws_records_and_reuses_it(bundle, tmp_path):
    root = tmp_path / "task"
    shutil.copytree(bundle, root)
    first = _plan(root, "--out", str(tmp_path / "a.tsv"))
    assert first.exit_code == 0, first.output
    assert "drawn at random" in first.output
    record = json.loads((root / "curve_plan.json").read_text())
    (entry,) = record["plans"].values()
    seed = entry["seed"]
    assert entry["method"] == "stratband" and entry["parameters"]["seed"] == seed
    assert f"seed {seed}" in first.output and seed > 2**32  # 128 bits of entropy, not 0
    again = _plan(root, "--out", str(tmp_path / "b.tsv"))
    assert f"seed {seed} (recorded" in again.output
    # the recorded seed reproduces the plan: same batch as --seed SEED
    explicit = _plan(root, "--seed", str(seed), "--out", str(tmp_path / "c.tsv"))
    assert explicit.exit_code == 0 and not explicit.output.startswith("seed")
    a, c = (pd.read_csv(tmp_path / f, sep="\t") for f in ("a.tsv", "c.tsv"))
    pd.testing.assert_frame_equal(a, c)


def test_plan_with_seed_is_unchanged_and_writes_no_record(bundle, tmp_path):
    root = tmp_path / "task"
    shutil.copytree(bundle, root)
    result = _plan(root, "--seed", "0", "--out", str(tmp_path / "z.tsv"))
    assert result.exit_code == 0 and not result.output.startswith("seed")
    assert not (root / "curve_plan.json").exists()
    # the draws of --seed 0 are those of StratBand(seed=0)
    batch = pd.read_csv(tmp_path / "z.tsv", sep="\t")
    assert len(batch) > 0


def test_labels_outside_zero_one_are_refused():
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*explicit mapping"):
        Labels(np.array([1, 2]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        run_curve(StratBand(epsilon=0.2, window=10), 500, lambda r: np.where(r == 7, 2.0, 1.0))
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        Labels(np.array([3]), np.array([np.nan]))
    Labels(np.array([1, 2, 3]), np.array([0.0, 0.5, 1.0]))  # a merged tie is a share


def test_cli_names_the_file_and_line_of_a_graded_label(bundle, tmp_path):
    root = tmp_path / "task"
    shutil.copytree(bundle, root)
    judgments = root / "judgments.tsv"
    lines = judgments.read_text().splitlines()
    header = lines[0].split("\t")
    row = lines[3].split("\t")
    row[header.index("label")] = "2"
    lines[3] = "\t".join(row)
    judgments.write_text("\n".join(lines) + "\n")
    result = _plan(root, "--seed", "1")
    assert result.exit_code == 2
    out = result.output.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"error: {judgments}:4:")
    assert "graded judgments need an explicit mapping" in out[0]


def test_written_bounds_are_rounded_outward(tmp_path):
    """At 1e-9, no exact-prefix row of the written CSV appears to miss p, and every written
    bound contains the computed one."""
    size = 20_000
    ranked = SimulatedRankedList(size, LogisticShape(0.7, 0.2, size / 3, size / 10), seed=1)
    est = StratBand(epsilon=0.1, window=20, seed=2).run(size, ranked.labels)
    frame = curve_frame(est, true_facts=3_333.0)
    write_csv(tmp_path / "c.csv", outward_rounded(frame))
    back = pd.read_csv(tmp_path / "c.csv")
    for name in ("lower", "recall_lower", "yield_lower"):
        assert (back[name].to_numpy() <= frame[name].to_numpy()).all()
    for name in ("upper", "recall_upper", "yield_upper"):
        assert (back[name].to_numpy() >= frame[name].to_numpy()).all()
    exact = back["kind"] == "exact"
    truth = ranked.true_precision(back["rank"].to_numpy()[exact])
    assert exact.sum() > 100
    assert np.all(back["lower"][exact] <= truth + 1e-9)
    assert np.all(truth <= back["upper"][exact] + 1e-9)
    # nearest rounding would miss some exact rows at 1e-9 (the reason for rounding outward)
    write_csv(tmp_path / "n.csv", frame)
    near = pd.read_csv(tmp_path / "n.csv")
    assert np.any(near["lower"][exact] > truth + 1e-9)
    # values with few digits are written as they are
    assert back["lower"][exact & (np.isclose(back["precision"], 0.5))].eq(0.5).all()


def test_check_labels_reach_adastrat_from_the_cli() -> None:
    base = ["curve", "budget", "--method", "adastrat", "--size", "100000000", "--json"]
    small = json.loads(CliRunner().invoke(cli, [*base, "--check-labels", "0"]).output)
    large = json.loads(CliRunner().invoke(cli, [*base, "--check-labels", "5000"]).output)
    assert large["annotations"] - small["annotations"] == 5000
