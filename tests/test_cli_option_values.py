"""Option values click lets through but the command cannot use (found by trying every option of
every command with values such as ``''``, ``-1``, ``nan``, ``inf``): each is a usage error, exit
2 with one ``error:`` line and no traceback, and nothing is written."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.cli import cli


def _invoke(args: list[str]):
    result = CliRunner().invoke(cli, args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--seed", "-1", "'--seed': -1 is not in the range x>=0"),
        ("--exhaustive-facts", "nan", "'nan' is not a finite number"),
        ("--exhaustive-facts", "inf", "'inf' is not a finite number"),
        ("--annotator-error", "0.5", "0.5 is not in the range 0<=x<0.5"),
        ("--annotator-error", "nan", "'nan' is not a finite number"),
    ],
)
def test_simulate_refuses_values_it_cannot_use(tmp_path, option, value, words):
    out = tmp_path / "sim"
    line = _invoke(["simulate", str(out), "--systems", "3", "--queries", "5", option, value])
    assert words in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "value"),
    [
        *[(c, v) for c in ("score", "budget", "curve-estimate") for v in ("", "  ")],
        ("budget", "DIR"),  # score --out is a directory by design
        ("curve-estimate", "DIR"),
    ],
)
def test_an_empty_or_directory_output_path_is_refused(tmp_path, monkeypatch, command, value):
    """``--out ''`` named the working directory: budget tried to replace it with its CSV (a
    directory is refused for the commands that write one file)."""
    monkeypatch.chdir(tmp_path)  # a regression writes here, not into the checkout
    task = make_bundle(tmp_path)
    out = str(tmp_path) if value == "DIR" else value
    args = {
        "score": ["score", str(task), "--out", out],
        "budget": ["budget", str(task), "--total", "10", "--out", out],
        "curve-estimate": [
            *("curve", "estimate", str(task), "--system", "A", "--method", "paula"),
            *("--out", out),
        ],
    }[command]
    line = _invoke(args)
    assert "'--out'" in line
    assert "an empty path" in line or "is a directory" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_float_range_refuses_non_finite_values(tmp_path, value):
    """nan passes every comparison of click's FloatRange; receval's ranges refuse it."""
    task = make_bundle(tmp_path)
    line = _invoke(["score", str(task), "--out", str(tmp_path / "o"), "--confidence", value])
    assert "'--confidence'" in line  # inf is out of range: click says so itself
    assert f"'{value}' is not a finite number" in line or "is not in the range" in line
    assert not (tmp_path / "o").exists()


def test_extrapolate_with_prevalence_zero_is_one_line(capfd):
    """ρ = 0 printed numpy's divide-by-zero RuntimeWarning above the error line."""
    line = _invoke(
        [
            *("extrapolate", "--precision", "0.5", "--recall", "0.2"),
            *("--target", "0.5", "--prevalence", "0"),
        ]
    )
    assert "0 < prevalence < 1" in line
    assert "RuntimeWarning" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--until-decided", "--batch", "1000000000000"],
        ["--per-system", "1000000000000"],
        ["--per-system", "5000001"],  # 2 systems: 10,000,002 draws
    ],
)
def test_a_round_of_absurd_size_is_refused_before_any_allocation(tmp_path, args):
    """A mistyped size asked numpy for 1.46 TiB (MemoryError traceback); a round is capped at
    10,000,000 draws (each draw is a label to collect)."""
    task = make_bundle(tmp_path)
    line = _invoke(["sample", str(task), *args, "--seed", "1"])
    assert "draws is more than 10,000,000" in line


@pytest.mark.parametrize("seed", [-1, None, 1.5, "x", True])
def test_the_api_refuses_a_seed_numpy_cannot_take(tmp_path, seed):
    import receval

    task = make_bundle(tmp_path)
    with pytest.raises(ValueError, match=r"seed=.* must be an integer >= 0"):
        receval.sample(task, 1, seed=seed)
    with pytest.raises(ValueError, match=r"seed=.* must be an integer >= 0"):
        receval.sample(task, seed=seed, until_decided=True, batch=2)
    if seed is not None:  # None: fresh entropy, as numpy's convention
        with pytest.raises(ValueError, match="seed"):
            receval.score(task, bootstrap=50, seed=seed)


@pytest.mark.parametrize(("kw", "words"), [({"method": None}, "method"), ({"size": 1.5}, "size")])
def test_curve_budget_refuses_values_of_the_wrong_type(kw, words):
    import receval

    with pytest.raises(ValueError, match=words):
        receval.curve_budget(**{"method": "paula", "size": 1000, **kw})


def test_sample_takes_the_spark_master_as_validate_and_score_do(tmp_path, monkeypatch):
    """``sample --spark-master URL``: the sampling paths connect to Spark by name, so the URL
    reaches them as SPARK_MASTER (a DuckDB round here: the option is accepted and passed on)."""
    monkeypatch.setenv("SPARK_MASTER", "before")  # restored after the test, whatever sample sets
    task = make_bundle(tmp_path)
    args = ["sample", str(task), "--per-system", "2", "--seed", "1", "--spark-master", "local[1]"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    import os

    assert os.environ["SPARK_MASTER"] == "local[1]"
