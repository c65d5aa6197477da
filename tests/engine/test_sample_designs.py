"""``sample`` on the engine path: out of core by default on large Parquet bundles, and every
design drawn in SQL with the probabilities the in-memory estimators expect."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner
from test_bundle import write_bundle

from receval.cli import cli


def _sample(root, *extra):
    args = ["sample", str(root), "--per-system", "5", "--seed", "7", *extra]
    return CliRunner().invoke(cli, args)


def _drawn(root) -> list[str]:
    return list(pd.read_csv(root / "samples.tsv", sep="\t", dtype=str)["answer"])


@pytest.mark.parametrize("threshold", [10, 10**9])
def test_sample_takes_the_engine_path_from_engine_path_rows(tmp_path, monkeypatch, threshold):
    """Without --engine, a Parquet bundle of ≥ ENGINE_PATH_ROWS rows draws as --engine duckdb
    does (the hashed draws); a smaller one, or --in-memory, draws in memory."""
    import receval.engine.score as score

    monkeypatch.setattr(score, "ENGINE_PATH_ROWS", threshold)
    roots = {k: write_bundle(tmp_path / k, "per-system") for k in ("auto", "engine", "memory")}
    assert _sample(roots["auto"]).exit_code == 0
    assert _sample(roots["engine"], "--engine", "duckdb").exit_code == 0
    assert _sample(roots["memory"], "--in-memory").exit_code == 0
    same = _drawn(roots["auto"]) == _drawn(roots["engine"])
    assert same == (threshold == 10)
    assert (_drawn(roots["auto"]) == _drawn(roots["memory"])) == (threshold != 10)


def test_engine_with_in_memory_is_a_usage_error(tmp_path):
    root = write_bundle(tmp_path / "b", "per-system")
    result = _sample(root, "--engine", "duckdb", "--in-memory")
    assert result.exit_code == 2 and "not with --in-memory" in result.output
    result = _sample(root, "--out-of-core")
    assert result.exit_code == 0, result.output
