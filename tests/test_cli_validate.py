"""``receval validate``: the malformed-bundle matrix and the summary of a good bundle.

Every malformed case must end with exit code 2 and exactly one line on stderr,
``error: <file>:<line>: <what is wrong>`` (``error: <file>: <what>`` for problems that have no
line: a missing file or folder, an unreadable Parquet file, two files where one is expected), and
never a traceback.  Each case names the file and line it expects, so an error that points at the
wrong place fails too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DEFAULT_FILES, make_bundle

from receval.cli import cli

RUNS_HEADER = "system\tteam\tquery_id\tanswer\tscore\n"


def runs_with(*rows: str) -> str:
    """The default runs.tsv with ``rows`` appended (rows are tab-joined strings, no newline)."""
    return DEFAULT_FILES["runs.tsv"] + "".join(r + "\n" for r in rows)


def judgments_with(*rows: str) -> str:
    return DEFAULT_FILES["judgments.tsv"] + "".join(r + "\n" for r in rows)


def samples_with(*rows: str) -> str:
    return DEFAULT_FILES["samples.tsv"] + "".join(r + "\n" for r in rows)


def toml(text: str) -> str:
    return 'name = "tiny"\n' + text


@dataclass(frozen=True)
class Case:
    """One malformed bundle: how to build it, and the file / line / words the error must name."""

    id: str
    build: Callable[[Path], Path]
    file: str  # the path in the message must end with this
    line: int | None  # None: the message must carry no line number
    words: str  # a fragment of the message (case-insensitive)


def bundle(**kw) -> Callable[[Path], Path]:
    return lambda tmp: make_bundle(tmp, **kw)


def _file_not_dir(tmp: Path) -> Path:
    path = tmp / "bundle.tsv"
    path.write_text("query_id\nq1\n")
    return path


def _parquet_missing_column(tmp: Path) -> Path:
    import pandas as pd

    root = make_bundle(tmp, queries=None)
    pd.DataFrame({"qid": ["q1", "q2", "q3"]}).to_parquet(root / "queries.parquet")
    return root


def _parquet_bad_weight(tmp: Path) -> Path:
    import pandas as pd

    root = make_bundle(tmp, queries=None)
    pd.DataFrame({"query_id": ["q1", "q2", "q3"], "weight": [1.0, float("nan"), 2.0]}).to_parquet(
        root / "queries.parquet"
    )
    return root


RUNS_A = "query_id\tanswer\tscore\nq1\tParis\t0.9\nq2\tRome\t0.8\n"
RUNS_B = "query_id\tanswer\tscore\nq1\tParis\t0.7\nq3\tMadrid\t0.5\n"

CASES = [
    # --- the bundle folder and its files
    Case("missing-dir", lambda tmp: tmp / "nope", "nope", None, "not found"),
    Case("file-instead-of-dir", _file_not_dir, "bundle.tsv", None, "directory"),
    Case("missing-queries", bundle(queries=None), "queries.tsv", None, "missing file"),
    Case("missing-runs", bundle(runs=None), "runs.tsv", None, "missing file"),
    Case(
        "runs-table-and-runs-folder",
        bundle(files={"runs/A.tsv": RUNS_A}),
        "runs.tsv",
        None,
        "ambiguous",
    ),
    Case(
        "queries-tsv-and-csv",
        bundle(files={"queries.csv": "query_id\nq1\n"}),
        "queries.csv",
        None,
        "ambiguous",
    ),
    Case(
        "runs-folder-without-tables",
        bundle(runs=None, files={"runs/README.txt": "nothing here"}),
        "runs",
        None,
        "no .tsv",
    ),
    Case(
        "runs-folder-two-files-one-system",
        bundle(runs=None, files={"runs/A.tsv": RUNS_A, "runs/A.csv": "query_id,answer\nq1,x\n"}),
        "A.tsv",
        None,
        "two run files",
    ),
    Case(
        "exhaustive-without-units", bundle(exhaustive_units=None), "exhaustive.tsv", None, "units"
    ),
    Case(
        "unreadable-parquet",
        bundle(queries=None, files={"queries.parquet": b"PAR1 this is not parquet PAR1"}),
        "queries.parquet",
        None,
        "parquet",
    ),
    # --- empty files and headers
    Case("empty-runs", bundle(runs=""), "runs.tsv", 1, "empty"),
    Case("blank-lines-only-queries", bundle(queries="\n\n  \n"), "queries.tsv", 1, "empty"),
    Case("bom-only-file", bundle(judgments=b"\xef\xbb\xbf"), "judgments.tsv", 1, "empty"),
    Case("header-only-runs", bundle(runs=RUNS_HEADER), "runs.tsv", 2, "no outputs"),
    Case("header-only-queries", bundle(queries="query_id\n"), "queries.tsv", 2, "no queries"),
    # a header-only runs/<system>.tsv is an empty submission, scored (tests/test_roundtrip_fixes.py)
    Case(
        "header-only-run-files-in-folder",
        bundle(runs=None, files={"runs/B.tsv": "query_id\tanswer\n"}),
        "runs/B.tsv",
        2,
        "no outputs",
    ),
    Case(
        "blank-first-line",
        bundle(queries="\nquery_id\nq1\nq2\nq3\n"),
        "queries.tsv",
        1,
        "header",
    ),
    Case(
        "missing-column-runs",
        bundle(runs="system\tquery_id\nA\tq1\n"),
        "runs.tsv",
        1,
        "missing required column(s) answer",
    ),
    Case(
        "missing-column-judgments",
        bundle(judgments="query_id\tanswer\nq1\tParis\n"),
        "judgments.tsv",
        1,
        "label",
    ),
    Case(
        "missing-column-samples",
        bundle(samples="sample\tsystem\tquery_id\tanswer\ns1\tA\tq1\tParis\n"),
        "samples.tsv",
        1,
        "prob",
    ),
    Case(
        "missing-column-run-file-in-folder",
        bundle(runs=None, files={"runs/A.tsv": "query_id\tscore\nq1\t0.5\n"}),
        "A.tsv",
        1,
        "answer",
    ),
    Case("missing-column-parquet", _parquet_missing_column, "queries.parquet", 1, "query_id"),
    Case(
        "empty-column-name",
        bundle(queries="query_id\t\tentity\nq1\tx\ty\n"),
        "queries.tsv",
        1,
        "empty column name",
    ),
    Case(
        "duplicate-column-name",
        bundle(queries="query_id\tentity\tentity\nq1\tx\ty\n"),
        "queries.tsv",
        1,
        "duplicate column",
    ),
    Case(
        "reserved-line-column",
        bundle(queries="query_id\t_line\nq1\t7\n"),
        "queries.tsv",
        1,
        "reserved",
    ),
    Case(
        "reserved-derived-column",
        bundle(runs="system\tquery_id\tanswer\tcopies\nA\tq1\tParis\t3\n"),
        "runs.tsv",
        1,
        "reserved",
    ),
    # --- delimiters and bytes
    Case(
        "comma-in-tsv",
        bundle(runs="system,query_id,answer\nA,q1,Paris\n"),
        "runs.tsv",
        1,
        "comma-separated",
    ),
    Case(
        "tab-in-csv",
        bundle(runs=None, files={"runs.csv": "system\tquery_id\tanswer\nA\tq1\tParis\n"}),
        "runs.csv",
        1,
        "tab-separated",
    ),
    Case(
        "semicolons-in-csv",
        bundle(runs=None, files={"runs.csv": "system;query_id;answer\nA;q1;Paris\n"}),
        "runs.csv",
        1,
        "wrong delimiter",
    ),
    Case(
        "invalid-utf8",
        bundle(
            runs=(RUNS_HEADER + "A\tT1\tq1\tParis\t0.9\nA\tT1\tq2\tR\xf4me\t0.8\n").encode(
                "latin-1"
            )
        ),
        "runs.tsv",
        3,
        "utf-8",
    ),
    Case(
        "nul-bytes",
        bundle(judgments=DEFAULT_FILES["judgments.tsv"].encode() + b"q1\tParis\x00\x00\tC\tann3\n"),
        "judgments.tsv",
        9,
        "nul",
    ),
    Case(
        "gzip-garbage",
        bundle(queries=b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xcbH\xcd\xc9\xc9\x07\x00"),
        "queries.tsv",
        1,
        "binary",
    ),
    Case(
        "too-many-fields",
        bundle(runs=runs_with("A\tT1\tq2\tRome\t0.8\textra")),
        "runs.tsv",
        9,
        "expected 5 tab-separated fields, found 6",
    ),
    Case(
        "too-few-fields",
        bundle(judgments=judgments_with("q1\tParis")),
        "judgments.tsv",
        9,
        "found 2",
    ),
    Case(
        "csv-field-count",
        bundle(
            runs=None,
            files={"runs.csv": 'system,query_id,answer\nA,q1,"Paris, France"\nA,q2,Rome,extra\n'},
        ),
        "runs.csv",
        3,
        "found 4",
    ),
    Case(
        "csv-unterminated-quote",
        bundle(
            runs=None,
            files={"runs.csv": 'system,query_id,answer\nA,q1,Paris\nA,q2,"Rome\nA,q3,Madrid\n'},
        ),
        "runs.csv",
        3,
        "malformed csv",
    ),
    # --- types and values
    Case(
        "non-numeric-score",
        bundle(runs=runs_with("A\tT1\tq2\tNaples\thigh")),
        "runs.tsv",
        9,
        "'high' is not a finite number",
    ),
    Case("inf-score", bundle(runs=runs_with("A\tT1\tq2\tNaples\tinf")), "runs.tsv", 9, "finite"),
    Case("nan-score", bundle(runs=runs_with("A\tT1\tq2\tNaples\tNaN")), "runs.tsv", 9, "finite"),
    Case(
        "overflowing-score",
        bundle(runs=runs_with("B\tT2\tq2\tTurin\t1e999")),
        "runs.tsv",
        9,
        "finite",
    ),
    Case(
        "decimal-comma-score",
        bundle(runs=runs_with("B\tT2\tq2\tTurin\t0,5")),
        "runs.tsv",
        9,
        "finite",
    ),
    Case("empty-answer", bundle(runs=runs_with("A\tT1\tq2\t   \t0.1")), "runs.tsv", 9, "answer"),
    Case("empty-system", bundle(runs=runs_with("\tT1\tq2\tNaples\t0.1")), "runs.tsv", 9, "system"),
    Case(
        "empty-query-in-judgments",
        bundle(judgments=judgments_with("\tParis\tC\tann3")),
        "judgments.tsv",
        9,
        "query_id",
    ),
    Case(
        "unknown-label",
        bundle(judgments=judgments_with("q2\tRome\tmaybe\tann2")),
        "judgments.tsv",
        9,
        "unknown label 'maybe'",
    ),
    Case(
        "unknown-label-in-truth",
        bundle(truth="query_id\tanswer\tlabel\nq1\tParis\tC\nq2\tRome\t2\n"),
        "truth.tsv",
        3,
        "unknown label '2'",
    ),
    Case(
        "ignored-label-in-truth",
        bundle(truth="query_id\tanswer\tlabel\nq1\tParis\tC\nq2\tRome\tI\n"),
        "truth.tsv",
        3,
        "correct or wrong",
    ),
    Case(
        "truth-with-two-labels",
        bundle(truth="query_id\tanswer\tlabel\nq1\tParis\tC\nq2\tRome\tW\nq1\tparis \tW\n"),
        "truth.tsv",
        4,
        "two truth labels",
    ),
    Case(
        "duplicate-query-id",
        bundle(queries="query_id\nq1\nq2\nq1\nq3\n"),
        "queries.tsv",
        4,
        "duplicate query_id 'q1'",
    ),
    Case(
        "empty-query-id",
        bundle(queries="query_id\tentity\nq1\tx\n\ty\nq2\tz\nq3\tw\n"),
        "queries.tsv",
        3,
        "query_id",
    ),
    Case(
        "non-numeric-weight",
        bundle(queries="query_id\tweight\nq1\t1\nq2\theavy\nq3\t1\n"),
        "queries.tsv",
        3,
        "weight",
    ),
    Case(
        "zero-weight",
        bundle(queries="query_id\tweight\nq1\t1\nq2\t2\nq3\t0\n"),
        "queries.tsv",
        4,
        "> 0",
    ),
    Case(
        "negative-weight",
        bundle(queries="query_id\tweight\nq1\t-1\nq2\t2\nq3\t1\n"),
        "queries.tsv",
        2,
        "> 0",
    ),
    Case(
        "empty-weight",
        bundle(queries="query_id\tweight\tentity\nq1\t1\tx\nq2\t\ty\nq3\t1\tz\n"),
        "queries.tsv",
        3,
        "weight",
    ),
    Case("nan-weight-parquet", _parquet_bad_weight, "queries.parquet", 2, "weight"),
    Case(
        "prob-zero", bundle(samples=samples_with("s1\tB\tq1\tParis\t0")), "samples.tsv", 5, "(0, 1]"
    ),
    Case(
        "prob-above-one",
        bundle(samples=samples_with("s1\tB\tq1\tParis\t1.5")),
        "samples.tsv",
        5,
        "(0, 1]",
    ),
    Case(
        "prob-negative",
        bundle(samples=samples_with("s1\tB\tq1\tParis\t-0.2")),
        "samples.tsv",
        5,
        "(0, 1]",
    ),
    Case(
        "prob-non-numeric",
        bundle(samples=samples_with("s1\tB\tq1\tParis\tone-third")),
        "samples.tsv",
        5,
        "finite",
    ),
    Case(
        "prob-empty", bundle(samples=samples_with("s1\tB\tq1\tParis\t")), "samples.tsv", 5, "prob"
    ),
    Case(
        "unit-prob-zero",
        bundle(exhaustive_units="unit\tprob\nd1\t0.5\nd2\t0\n"),
        "exhaustive_units.tsv",
        3,
        "(0, 1]",
    ),
    # --- references between files
    Case(
        "unknown-query-in-runs",
        bundle(runs=runs_with("B\tT2\tq9\tLisbon\t0.2")),
        "runs.tsv",
        9,
        "query_id 'q9' is not in queries",
    ),
    Case(
        "unknown-query-in-run-file",
        bundle(runs=None, files={"runs/A.tsv": RUNS_A, "runs/B.tsv": RUNS_B + "q7\tOslo\t0.1\n"}),
        "B.tsv",
        4,
        "q7",
    ),
    Case(
        "unknown-query-in-judgments",
        bundle(judgments=judgments_with("q4\tBerlin\tC\tann1")),
        "judgments.tsv",
        9,
        "q4",
    ),
    Case(
        "unknown-query-in-samples",
        bundle(samples=samples_with("s1\tB\tq0\tMilan\t0.3333333333")),
        "samples.tsv",
        5,
        "q0",
    ),
    Case(
        "unknown-query-in-exhaustive",
        bundle(exhaustive="unit\tquery_id\tanswer\nd1\tq1\tParis\nd2\tQ1\tParis\n"),
        "exhaustive.tsv",
        3,
        "'Q1'",
    ),
    Case(
        "unknown-query-in-truth",
        bundle(truth="query_id\tanswer\tlabel\nq1\tParis\tC\nq5\tRome\tW\n"),
        "truth.tsv",
        3,
        "q5",
    ),
    Case(
        "unit-not-in-units",
        bundle(exhaustive="unit\tquery_id\tanswer\nd1\tq1\tParis\nd3\tq3\tMadrid\n"),
        "exhaustive.tsv",
        3,
        "unit 'd3'",
    ),
    Case(
        "duplicate-unit",
        bundle(exhaustive_units="unit\nd1\nd2\nd1\n"),
        "exhaustive_units.tsv",
        4,
        "duplicate unit",
    ),
    Case(
        "sample-of-fact-never-output",
        bundle(samples=samples_with("s1\tB\tq2\tRome\t0.3333333333")),
        "samples.tsv",
        5,
        "never output",
    ),
    Case(
        "sample-of-system-without-outputs",
        bundle(samples=samples_with("s1\tC\tq2\tRome\t0.5")),
        "samples.tsv",
        5,
        "'C' has no outputs",
    ),
    Case(
        "same-answer-two-probs",
        bundle(samples=samples_with("s1\tA\tq1\tparis\t0.25")),
        "samples.tsv",
        5,
        "two different prob",
    ),
    Case(
        "system-with-two-teams",
        bundle(runs=runs_with("B\tT3\tq1\tLyon\t0.1")),
        "runs.tsv",
        9,
        "two teams",
    ),
    Case(
        "run-file-system-column-disagrees",
        bundle(
            runs=None,
            files={
                "runs/A.tsv": RUNS_A,
                "runs/B.tsv": "system\tquery_id\tanswer\nB\tq1\tParis\nA\tq2\tRome\n",
            },
        ),
        "B.tsv",
        3,
        "differs from the file name",
    ),
    # --- task.toml
    Case(
        "invalid-toml", bundle(task_toml='name = "x"\n[merge\nrule = 1\n'), "task.toml", 2, "toml"
    ),
    Case("toml-cut-short", bundle(task_toml='name = "x"\nsize = \n'), "task.toml", 2, "toml"),
    Case("toml-not-utf8", bundle(task_toml=b'name = "caf\xe9"\n'), "task.toml", 1, "utf-8"),
    Case(
        "unknown-merge-rule",
        bundle(task_toml=toml('[merge]\nrule = "plurality"\n')),
        "task.toml",
        3,
        "merge rule",
    ),
    Case(
        "unknown-tie-policy",
        bundle(task_toml=toml('[merge]\nrule = "majority"\ntie = "coin"\n')),
        "task.toml",
        4,
        "tie",
    ),
    Case(
        "unknown-inexact-policy",
        bundle(task_toml=toml('[labels]\ninexact_policy = "half"\n')),
        "task.toml",
        3,
        "inexact_policy",
    ),
    Case(
        "unknown-section",
        bundle(task_toml=toml('\n[scoring]\nmetric = "f1"\n')),
        "task.toml",
        3,
        "unknown setting 'scoring'",
    ),
    Case("unknown-top-level-key", bundle(task_toml=toml("seed = 3\n")), "task.toml", 2, "'seed'"),
    Case(
        "unknown-key-in-section",
        bundle(task_toml=toml('[merge]\nrule = "majority"\n[matching]\nstem = true\n')),
        "task.toml",
        5,
        "stem",
    ),
    Case(
        "label-in-two-categories",
        bundle(task_toml=toml('[labels]\ncorrect = ["C"]\nwrong = ["W", "c"]\n')),
        "task.toml",
        4,
        "both",
    ),
    Case(
        "labels-not-a-list",
        bundle(task_toml=toml('[labels]\ncorrect = "C"\n')),
        "task.toml",
        3,
        "list",
    ),
    Case(
        "bad-universe-size",
        bundle(task_toml=toml("[universe]\nsize = -5\n")),
        "task.toml",
        3,
        "positive integer",
    ),
    Case(
        "universe-smaller-than-the-pool",  # the default bundle's runs output 5 distinct facts
        bundle(task_toml=toml("\n[universe]\nsize = 4\n")),
        "task.toml",
        4,
        "[universe] size 4 is smaller than the 5 distinct facts the runs output",
    ),
    Case(
        "bad-unicode-form",
        bundle(task_toml=toml('[matching]\nunicode = "NFD"\n')),
        "task.toml",
        3,
        "NFKC",
    ),
    Case(
        "matching-flag-not-bool",
        bundle(task_toml=toml('[matching]\ncasefold = "yes"\n')),
        "task.toml",
        3,
        "true or false",
    ),
    Case("name-not-string", bundle(task_toml="name = 7\n"), "task.toml", 1, "name"),
    Case(
        "label-unknown-under-custom-vocabulary",
        bundle(task_toml=toml('[labels]\ncorrect = ["Y"]\nwrong = ["N"]\n')),
        "judgments.tsv",
        2,
        "unknown label 'C'",
    ),
]

ERROR_WITH_LINE = re.compile(r"^error: (?P<file>.+?):(?P<line>\d+): (?P<msg>\S.*)$")
ERROR_WITHOUT_LINE = re.compile(r"^error: (?P<file>[^:]+): (?P<msg>\S.*)$")


def run_validate(path: Path):
    return CliRunner().invoke(cli, ["validate", str(path)])


def assert_one_error(result, file: str, line: int | None, words: str) -> re.Match:
    """Exit 2, one ``error:`` line on stderr naming ``file`` (and ``line``), no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    pattern = ERROR_WITH_LINE if line is not None else ERROR_WITHOUT_LINE
    match = pattern.match(lines[0])
    assert match, lines[0]
    assert match.group("file").endswith(file), lines[0]
    if line is not None:
        assert int(match.group("line")) == line, lines[0]
    assert words.casefold() in match.group("msg").casefold(), lines[0]
    return match


def test_cases_are_many_and_distinct():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_bundle_exits_2_with_one_error_line(tmp_path: Path, case: Case):
    result = run_validate(case.build(tmp_path))
    assert_one_error(result, case.file, case.line, case.words)


def test_unreadable_file_is_an_input_error(tmp_path: Path, monkeypatch):
    """An OSError while reading (permissions, I/O) becomes the one-line error too."""
    root = make_bundle(tmp_path)
    real = Path.read_bytes

    def deny(self: Path) -> bytes:
        if self.name == "judgments.tsv":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", deny)
    result = run_validate(root)
    assert_one_error(result, "judgments.tsv", None, "permission denied")


def test_error_path_is_the_one_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A relative bundle path is echoed relative (the file part is the bundle's own file)."""
    root = make_bundle(tmp_path, runs=runs_with("A\tT1\tq2\tNaples\tx"))
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    rel = Path("../") / root.relative_to(tmp_path)
    assert (cwd / rel).is_dir()
    result = CliRunner().invoke(cli, ["validate", str(rel)])
    match = assert_one_error(result, "runs.tsv", 9, "finite")
    assert match.group("file") == str(rel / "runs.tsv")


# --------------------------------------------------------------------------------------------
# the summary of a good bundle


def summary_of(result) -> dict[str, str]:
    assert result.exit_code == 0, (result.output, result.exception)
    out = {}
    for line in result.stdout.splitlines():
        key, _, value = line.rpartition("  ")
        out[key.strip()] = value.strip()
    return out


def test_validate_prints_the_summary(bundle: Path):
    result = run_validate(bundle)
    assert result.stderr == ""
    summary = summary_of(result)
    expected = {
        "task": "tiny",
        "systems": "2",
        "teams": "2",
        "queries": "3",
        "outputs": "6",  # 7 rows, A's "Paris"/"paris" collapsed
        "duplicate output rows collapsed": "1",
        "distinct facts output": "5",  # paris (both systems), rome, milan, barcelona, madrid
        "judgments": "7",
        "judged facts": "5",
        "annotators": "2",
        "conflicts": "1",  # barcelona: one C, one W
        "sample draws": "3",
        "samples": "1",
        "exhaustive units": "2",
        "exhaustive facts": "2",
        "truth": "no",
    }
    for key, value in expected.items():
        assert summary.get(key) == value, (key, summary)
    assert "conflicts by kind: tie: 1" in result.stdout


def test_validate_minimal_bundle(tmp_path: Path):
    """Only queries and runs: every optional count is zero."""
    root = make_bundle(
        tmp_path,
        task_toml=None,
        judgments=None,
        samples=None,
        exhaustive_units=None,
        exhaustive=None,
    )
    summary = summary_of(run_validate(root))
    assert summary["task"] == "bundle"  # the folder name when task.toml is absent
    for key in ("judgments", "judged facts", "annotators", "conflicts", "sample draws", "samples"):
        assert summary[key] == "0", key
    assert summary["exhaustive units"] == "0"


def test_validate_help():
    result = CliRunner().invoke(cli, ["validate", "--help"])
    assert result.exit_code == 0
    assert "TASK" in result.output
