"""The curve commands as an organiser uses them: plan → label → plan … → empty plan → estimate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.curves import FrameRankedList
from receval.task import load_task

PARAMS = [
    "--epsilon",
    "0.2",
    "--window",
    "10",
    "--seed",
    "1",
]  # r̃ = 60: small lists; fixed plan seed


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("curves") / "task"
    result = CliRunner().invoke(
        cli,
        [
            "simulate",
            str(root),
            "--systems",
            "6",
            "--queries",
            "120",
            "--per-system",
            "20",
            "--seed",
            "5",
        ],
    )
    assert result.exit_code == 0, result.output
    return root


def _truth_labels(root) -> pd.DataFrame:
    truth = pd.read_csv(root / "truth.tsv", sep="\t", dtype=str, keep_default_na=False)
    truth["key"] = truth["query_id"] + "\x1f" + truth["answer"].str.casefold()
    return truth.set_index("key")["label"]


def _annotate(root, batch: pd.DataFrame, truth: pd.Series) -> None:
    keys = batch["query_id"] + "\x1f" + batch["answer"].str.casefold()
    rows = pd.DataFrame(
        {
            "query_id": batch["query_id"],
            "answer": batch["answer"],
            "label": truth.reindex(keys).values,
        }
    )
    assert rows["label"].notna().all()
    old = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str, keep_default_na=False)
    new = pd.concat([old, rows], ignore_index=True).fillna("")
    new.to_csv(root / "judgments.tsv", sep="\t", index=False)


def _loop(runner, root, system, method, truth) -> int:
    labelled = 0
    for _ in range(60):
        result = runner.invoke(
            cli, ["curve", "plan", str(root), "--system", system, "--method", method, *PARAMS]
        )
        assert result.exit_code == 0, result.output
        batch = pd.read_csv(
            root / "curve_to_annotate.tsv",
            sep="\t",
            dtype={"query_id": str, "answer": str},
            keep_default_na=False,
        )
        assert list(batch.columns) == ["rank", "query_id", "answer", "system", "method"]
        mine = batch[batch["system"] == system]
        if mine.empty:
            return labelled
        labelled += len(mine)
        _annotate(root, batch, truth)
    raise AssertionError("the plan never became empty")


@pytest.mark.parametrize(
    "method", ["paula", "logstrat", "adastrat", "random", "stratband", "tailband"]
)
def test_plan_label_estimate_round_trip(bundle, tmp_path, method):
    runner = CliRunner()
    truth = _truth_labels(bundle)
    task = load_task(bundle)
    system = task.systems[0]
    _loop(runner, bundle, system, method, truth)
    out = tmp_path / f"{method}.csv"
    result = runner.invoke(
        cli,
        [
            "curve",
            "estimate",
            str(bundle),
            "--system",
            system,
            "--method",
            method,
            *PARAMS,
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    curve = pd.read_csv(out)
    assert list(curve.columns[:7]) == [
        "rank",
        "precision",
        "lower",
        "upper",
        "recall",
        "queried",
        "kind",
    ]
    assert {"recall_lower", "recall_upper", "yield", "yield_lower", "yield_upper"} <= set(
        curve.columns
    )
    assert curve["rank"].is_monotonic_increasing
    assert (curve["lower"] <= curve["upper"]).all()  # never crossed
    assert (curve["yield_lower"] <= curve["yield"] + 1e-6).all()
    assert (curve["recall_lower"] <= curve["recall"] + 1e-9).all()
    assert (curve["recall"] <= curve["recall_upper"] + 1e-9).all()
    meta = json.loads(out.with_suffix(".csv.json").read_text())
    expected_kind = {"paula": "approximation", "logstrat": "interval", "random": "interval"}
    assert meta["method"] == method and meta["kind"] == expected_kind.get(method, "band")
    assert set(curve["kind"]) <= {"exact", meta["kind"]}
    assert meta["annotations"] > 0 and isinstance(meta["flags"], list)
    designed, realised = meta["designed_halfwidth"], meta["realised_max_halfwidth"]
    assert (designed is not None) == (method in ("stratband", "tailband")) and realised >= 0
    assert designed is None or realised <= designed
    # the exact precision function at the knots, from the truth of the ranked list
    task = load_task(bundle)
    rows = task.outputs[task.outputs["system"] == system]
    ranked = FrameRankedList.from_frame(rows[["query_id", "answer", "score", "fact"]]).frame
    value = pd.Series(task.truth["value"].to_numpy(), index=task.truth["fact"].to_numpy())
    exact = np.cumsum(value.reindex(ranked["fact"]).to_numpy()) / np.arange(1, len(ranked) + 1)
    p = exact[curve["rank"].to_numpy() - 1]
    # the estimate is close to the truth where the curve is smooth (after the first few ranks)
    late = curve["rank"].to_numpy() >= 60
    assert np.median(np.abs(curve["precision"].to_numpy()[late] - p[late])) < 0.1


def test_labels_are_reused_across_methods_and_systems(bundle):
    runner = CliRunner()
    truth = _truth_labels(bundle)
    task = load_task(bundle)
    system = task.systems[1]
    first = _loop(runner, bundle, system, "paula", truth)
    again = _loop(runner, bundle, system, "paula", truth)
    assert first > 0 and again == 0  # everything already labelled: nothing asked twice
    # a team-mate shares many outputs: its plan asks for fewer new labels than its plan size
    other = task.systems[2]
    result = runner.invoke(
        cli, ["curve", "plan", str(bundle), "--system", other, "--method", "paula", *PARAMS]
    )
    assert "labels reused" in result.output


def test_estimate_before_the_plan_is_complete_is_a_clear_error(bundle, tmp_path):
    task = load_task(bundle)
    result = CliRunner().invoke(
        cli,
        [
            "curve",
            "estimate",
            str(bundle),
            "--system",
            task.systems[-1],
            "--method",
            "logstrat",
            "--seed",
            "99",
            *PARAMS,
            "--out",
            str(tmp_path / "x.csv"),
        ],
    )
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: ") and "still needs" in result.output
    assert "Traceback" not in result.output


def test_budget_reproduces_the_papers_counts():
    runner = CliRunner()
    expected = {
        35_615: (78, 11_292, 24_745),
        356_150: (156, 19_092, 84_369),
        3_561_500: (234, 26_892, 284_834),
        35_615_000: (312, 34_692, 954_359),
    }
    for size, (queries, paula, random) in expected.items():
        got = json.loads(
            runner.invoke(
                cli, ["curve", "budget", "--method", "paula", "--size", str(size), "--json"]
            ).output
        )
        assert (got["queries"], got["annotations"]) == (queries, paula)
        got = json.loads(
            runner.invoke(
                cli, ["curve", "budget", "--method", "random", "--size", str(size), "--json"]
            ).output
        )
        assert got["annotations"] == random
    logstrat = {35_615: 18_287, 356_150: 35_631, 3_561_500: 53_937, 35_615_000: 72_867}
    for size, paper in logstrat.items():
        got = json.loads(
            runner.invoke(
                cli, ["curve", "budget", "--method", "logstrat", "--size", str(size), "--json"]
            ).output
        )
        assert abs(got["annotations"] - paper) <= 0.02 * paper


def test_budget_of_adastrat_is_its_worst_case():
    result = CliRunner().invoke(
        cli, ["curve", "budget", "--method", "adastrat", "--size", "35615", "--json"]
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert got["kind"] == "upper bound" and got["annotations"] > 0


def test_budget_speaks_to_organisers_and_json_keeps_machine_keys():
    runner = CliRunner()
    text = runner.invoke(cli, ["curve", "budget", "--method", "paula", "--size", "35615"]).output
    assert "labels to collect" in text and "11,292" in text
    assert "1.0812000000000002" not in text and "r_tilde" not in text
    assert all(len(token) < 12 for token in text.split() if token[0].isdigit())
    got = json.loads(
        runner.invoke(
            cli, ["curve", "budget", "--method", "stratband", "--size", "35615", "--json"]
        ).output
    )
    assert got["annotations"] <= 11_292 and "r_tilde" in got


def test_plan_never_overwrites_pending_work(bundle, tmp_path):
    runner = CliRunner()
    task = load_task(bundle)
    # the sample command's batch has other columns: refused, file untouched
    other = tmp_path / "to_annotate.tsv"
    other.write_text("kind\tquery_id\tanswer\tsystems\tunit\tprob\nfact\tq1\ta\ts\t\t0.1\n")
    before = other.read_text()
    result = runner.invoke(
        cli,
        [
            "curve",
            "plan",
            str(bundle),
            "--system",
            task.systems[3],
            "--method",
            "paula",
            *PARAMS,
            "--out",
            str(other),
        ],
    )
    assert result.exit_code == 2 and result.output.startswith("error: ")
    assert "not a curve batch" in result.output and other.read_text() == before
    # two systems planned into one file: the first system's pending rows survive
    batch = tmp_path / "curve.tsv"
    for system in task.systems[3:5]:
        result = runner.invoke(
            cli,
            [
                "curve",
                "plan",
                str(bundle),
                "--system",
                system,
                "--method",
                "stratband",
                *PARAMS,
                "--out",
                str(batch),
            ],
        )
        assert result.exit_code == 0, result.output
    rows = pd.read_csv(batch, sep="\t", dtype=str, keep_default_na=False)
    assert set(rows["system"]) == set(task.systems[3:5])


def test_adastrat_options_reach_the_method(bundle, tmp_path):
    runner = CliRunner()
    task = load_task(bundle)
    args = ["--system", task.systems[5], "--method", "adastrat", *PARAMS]
    args += ["--eta", "0.05", "--estimator", "clopper-pearson", "--r-tilde", "80", "--m", "5"]
    args += ["--beta", "1.2", "--pmin", "0.2"]
    out = tmp_path / "batch.tsv"
    result = runner.invoke(cli, ["curve", "plan", str(bundle), *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        cli, ["curve", "plan", str(bundle), *args[:4], "--beta", "gamma", "--out", str(out)]
    )
    assert result.exit_code == 2 and "gamma" in result.output


def test_recall_interval_when_the_number_of_correct_facts_is_estimated(bundle, tmp_path):
    import shutil

    root = tmp_path / "no-truth"
    shutil.copytree(bundle, root)
    system = load_task(root).systems[0]
    runner = CliRunner()
    _loop(runner, root, system, "stratband", _truth_labels(root))
    (root / "truth.tsv").unlink()  # now the number of correct facts must be estimated
    args = ["--system", system, "--method", "stratband", *PARAMS]
    out = tmp_path / "curve.csv"
    result = runner.invoke(cli, ["curve", "estimate", str(root), *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    curve = pd.read_csv(out)
    meta = json.loads(out.with_suffix(".csv.json").read_text())
    low, high = meta["recall"]["true_facts_lower"], meta["recall"]["true_facts_upper"]
    assert low < meta["recall"]["true_facts"] < high
    assert (curve["recall_lower"] <= curve["recall"]).all()
    assert (curve["recall"] <= curve["recall_upper"]).all()
    # the interval of T widens the recall interval beyond the yield interval alone
    tail = curve.iloc[-1]
    assert (
        tail["recall_upper"] - tail["recall_lower"]
        > (tail["yield_upper"] - tail["yield_lower"]) / meta["recall"]["true_facts"]
    )


def test_stratband_options(bundle):
    runner = CliRunner()
    base = ["curve", "budget", "--method", "stratband", "--size", "356150", "--json"]
    got = json.loads(runner.invoke(cli, [*base, "--halfwidth", "0.025"]).output)
    # the half-width holds at every rank (knots and between), which costs more than PAULA's
    # labels at ε = 0.03: the interpolation inside a stratum alone takes about ε/4
    assert got["halfwidth"] <= 0.025 and got["knot_halfwidth"] < got["halfwidth"]
    assert got["annotations"] > 19_092
    got = json.loads(runner.invoke(cli, [*base, "--labels-per-stratum", "50"]).output)
    assert got["labels_per_stratum"] == 50
    result = runner.invoke(
        cli,
        [
            "curve",
            "plan",
            str(bundle),
            "--system",
            load_task(bundle).systems[0],
            "--method",
            "stratband",
            "--estimator",
            "clopper-pearson",
            *PARAMS,
        ],
    )
    assert result.exit_code == 2 and "estimator" in result.output


@pytest.mark.parametrize("rank", ["x", "1.5", "inf", "1e400"])
def test_a_malformed_batch_file_is_refused_with_its_line(bundle, tmp_path, rank):
    batch = tmp_path / "curve.tsv"
    batch.write_text(
        f"rank\tquery_id\tanswer\tsystem\tmethod\n3\tq\ta\ts\tpaula\n{rank}\tq\tb\ts\tpaula\n"
    )
    result = CliRunner().invoke(
        cli,
        [
            "curve",
            "plan",
            str(bundle),
            "--system",
            load_task(bundle).systems[0],
            "--method",
            "paula",
            *PARAMS,
            "--out",
            str(batch),
        ],
    )
    assert result.exit_code == 2 and result.output.startswith("error: ")
    assert "curve.tsv:3: rank is not an integer" in result.output
