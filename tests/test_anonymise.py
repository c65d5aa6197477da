"""``receval score --anonymise``: pseudonyms from a secret random key kept outside the output
directory, reproducible across runs with the same key file (issue 14, item 6)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.leaderboard import DEFAULT_KEY_FILE, anonymisation_key, anonymise, pseudonym


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("anon") / "task"
    args = ["simulate", str(root), "--systems", "6", "--queries", "30", "--seed", "4"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


def score(task: Path, out: Path, *extra: str):
    args = ["score", str(task), "--out", str(out), "--bootstrap", "50", "--anonymise", *extra]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def published(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())


def test_default_key_is_random_kept_beside_the_task_and_reused(task, tmp_path):
    key_file = task / DEFAULT_KEY_FILE
    key_file.unlink(missing_ok=True)
    first = score(task, tmp_path / "a")
    assert first.exit_code == 0, first.output
    assert "new random key written to" in first.output
    key = key_file.read_text().strip()
    assert len(key) == 64 and int(key, 16) >= 0  # 256 random bits, hex
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert (key_file.parent / ".gitignore").read_text().splitlines()[-1] == "*"  # not committed
    # the key is nowhere in the published folder
    assert key.encode() not in published(tmp_path / "a")
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["anonymise"]["key"].startswith("random key in ")
    # a second run reuses the key: same pseudonyms; no new-key message
    second = score(task, tmp_path / "b")
    assert second.exit_code == 0 and "new random key" not in second.output
    a = pd.read_csv(tmp_path / "a" / "leaderboard_anonymised.csv")
    b = pd.read_csv(tmp_path / "b" / "leaderboard_anonymised.csv")
    assert list(a["team"]) == list(b["team"]) and list(a["system"]) == list(b["system"])
    # ... and the pseudonyms are not those of a key anyone could guess (the task name)
    board = pd.read_csv(tmp_path / "a" / "leaderboard.csv")
    guessed = anonymise(board, task.name)
    assert set(guessed["team"]).isdisjoint(a["team"])
    real = set(board["team"]) | set(board["system"])
    assert real.isdisjoint(set(a["team"]) | set(a["system"]))


def test_key_file_option_reproduces_pseudonyms_and_a_new_file_changes_them(task, tmp_path):
    keep = tmp_path / "organiser" / "anon.key"
    assert score(task, tmp_path / "a", "--anonymise-key-file", str(keep)).exit_code == 0
    assert score(task, tmp_path / "b", "--anonymise-key-file", str(keep)).exit_code == 0
    other = tmp_path / "organiser" / "other.key"
    assert score(task, tmp_path / "c", "--anonymise-key-file", str(other)).exit_code == 0
    read = {k: pd.read_csv(tmp_path / k / "leaderboard_anonymised.csv") for k in "abc"}
    assert list(read["a"]["team"]) == list(read["b"]["team"])
    assert set(read["a"]["team"]).isdisjoint(read["c"]["team"])
    # the same pseudonyms from the library, given the key in the file
    board = pd.read_csv(tmp_path / "a" / "leaderboard.csv")
    key, created = anonymisation_key(keep)
    assert not created
    assert list(anonymise(board, key)["team"]) == list(read["a"]["team"])


def test_key_file_inside_the_output_is_refused(task, tmp_path):
    out = tmp_path / "out"
    result = score(task, out, "--anonymise-key-file", str(out / "anonymise.key"))
    assert result.exit_code == 2
    assert "inside the output directory" in result.output
    assert not (out / "anonymise.key").exists()


def test_explicit_key_and_unusable_key_file(task, tmp_path):
    result = score(task, tmp_path / "a", "--anonymise-key", "s3cret")
    assert result.exit_code == 0, result.output
    board = pd.read_csv(tmp_path / "a" / "leaderboard.csv")
    anon = pd.read_csv(tmp_path / "a" / "leaderboard_anonymised.csv")
    assert list(anonymise(board, "s3cret")["team"]) == list(anon["team"])
    both = score(task, tmp_path / "b", "--anonymise-key", "x", "--anonymise-key-file", "k")
    assert both.exit_code == 2
    empty = tmp_path / "empty.key"
    empty.write_text("\n")
    bad = score(task, tmp_path / "c", "--anonymise-key-file", str(empty))
    assert bad.exit_code == 2
    assert bad.output.startswith(f"error: {empty}: ") and "Traceback" not in bad.output


def test_pseudonym_shape():
    assert (
        pseudonym("T01", "k", "team-").startswith("team-") and len(pseudonym("T01", "k", "")) == 6
    )
    with pytest.raises(ValueError):
        anonymise(pd.DataFrame({"team": ["a"], "system": ["a1"]}), "")


def test_a_key_without_anonymise_is_a_usage_error(task, tmp_path):
    args = ["score", str(task), "--out", str(tmp_path / "a"), "--anonymise-key", "s3cret"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "need --anonymise" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "a").exists()
