"""A real Label Studio server round trip (issue 23, items 6 and 7).

``receval export label-studio`` a bundle's pending facts; create a project with our labelling
config through Label Studio's REST API; import the tasks; two users (the admin, and a second
user who signs up through the web form) annotate through the API; export the project as JSON,
JSON-MIN and CSV (the export button's files, and a snapshot export that names users); and
``receval judgments add`` each export.  Checked: the labelling view is blind (neither the config
Label Studio stores nor a task's data names a system; the systems are in the task's ``meta``),
the labels land as bundle labels, and ``annotator`` is each user's e-mail where the export has
it, the user id with a warning where it does not.  A second test clicks two votes in Label
Studio's own labelling view (headless Chromium, over the DevTools helpers of the report's
browser test; skipped without Chromium): the page names no system, and the view stores the
choice's alias (``C``, ``W``: the bundle's label values), which ``judgments add`` reads.

Tested with **Label Studio 1.23.2** (``TESTED_VERSION``); the test runs against whatever version
it is given and fails only on what receval reads.

How it gets a server: ``RECEVAL_LABEL_STUDIO`` names a ``label-studio`` executable (or the venv
folder that has one), else ``label-studio`` on ``PATH``.  Label Studio is not a dependency of
receval and is not installed into receval's environment (it pins Django and many other
packages): it lives in its own venv, e.g. ::

    python -m venv /tmp/ls-venv && /tmp/ls-venv/bin/pip install label-studio==1.23.2
    RECEVAL_LABEL_STUDIO=/tmp/ls-venv python -m pytest -q -m slow tests/test_label_studio_live.py

Without one, the test **skips** with that instruction, and it skips too when the server does
not answer within ``RECEVAL_LABEL_STUDIO_TIMEOUT`` seconds (default 300: the first start
migrates a fresh SQLite database, about 1–2 minutes on two cores).  CI opts in: ``.ci/run``
installs Label Studio into a separate venv in the background while the fast tests run and sets
``RECEVAL_LABEL_STUDIO`` for the slow run (if the install fails, the test skips and says so).
The server runs on a free loopback port with its data in a temporary folder and is stopped at
the end.  Both tests take about 2.5 minutes, most of it the server's first start; installing
Label Studio into an empty venv took 5 min 17 s (network-bound), hidden behind the fast tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli

pytestmark = pytest.mark.slow

#: The Label Studio release this round trip was last run against.
TESTED_VERSION = "1.23.2"

ADMIN = ("alice@example.com", "alice-pass-1234", "receval-live-test-token-0001")
SECOND = ("carol@example.com", "carol-pass-1234")


def _executable() -> str | None:
    given = os.environ.get("RECEVAL_LABEL_STUDIO", "").strip()
    if given:
        path = Path(given)
        if path.is_dir():
            path = path / "bin" / "label-studio"
        return str(path) if path.is_file() else None
    return shutil.which("label-studio")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A Label Studio server on 127.0.0.1 (REST calls with a user's token)."""

    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, method: str, path: str, token: str, body=None, raw: bool = False):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            out = response.read()
        return out if raw else json.loads(out or b"null")

    def session(self, form: str, email: str, password: str):
        """(an opener holding the session, its cookie jar) after posting the web ``form``
        (``signup`` or ``login``) as a person would."""
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = f"{self.base}/user/{form}/"
        opener.open(page, timeout=60).read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        fields = {"csrfmiddlewaretoken": csrf, "email": email, "password": password}
        request = urllib.request.Request(
            page, data=urllib.parse.urlencode(fields).encode(), headers={"Referer": page}
        )
        opener.open(request, timeout=60).read()
        return opener, jar

    def sign_up(self, email: str, password: str) -> str:
        """Sign ``email`` up through the web form; returns the user's API token."""
        opener, _ = self.session("signup", email, password)
        with opener.open(self.base + "/api/current-user/token", timeout=60) as response:
            return json.loads(response.read())["token"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    exe = _executable()
    if exe is None:
        given = os.environ.get("RECEVAL_LABEL_STUDIO", "").strip()
        where = f"RECEVAL_LABEL_STUDIO={given} has no bin/label-studio" if given else "not found"
        pytest.skip(
            f"label-studio {where}: set RECEVAL_LABEL_STUDIO to a label-studio venv "
            f"(python -m venv V && V/bin/pip install label-studio=={TESTED_VERSION})"
        )
    data = tmp_path_factory.mktemp("label-studio")
    port = _free_port()
    email, password, token = ADMIN
    env = {
        **os.environ,
        "LABEL_STUDIO_BASE_DATA_DIR": str(data),
        "LABEL_STUDIO_USERNAME": email,
        "LABEL_STUDIO_PASSWORD": password,
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LATEST_VERSION_CHECK": "false",
    }
    log = (data / "server.log").open("wb")
    args = [exe, "start", "--no-browser", "--port", str(port), "--internal-host", "127.0.0.1"]
    process = subprocess.Popen(
        [*args, "--enable-legacy-api-token"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: stopped as one at the end
    )
    base = f"http://127.0.0.1:{port}"
    timeout = float(os.environ.get("RECEVAL_LABEL_STUDIO_TIMEOUT", 300))
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                tail = (data / "server.log").read_text(errors="replace")[-600:]
                pytest.skip(f"label-studio exited ({process.returncode}) on start: {tail}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.skip(
                    f"label-studio ({exe}) did not answer within {timeout:g} s "
                    "(RECEVAL_LABEL_STUDIO_TIMEOUT)"
                )
            time.sleep(2)
        yield Server(base)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        log.close()


def _run(*args) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundle") / "task"
    _run("simulate", root, "--systems", "3", "--queries", "10", "--per-system", "5", "--seed", "1")
    _run("sample", root, "--per-system", "2", "--seed", "3")
    return root


def _blind(config: str) -> None:
    """The labelling view shows the query, the answer (and its provenance), never systems."""
    assert "system" not in config.casefold()
    assert set(re.findall(r"\$(\w+)", config)) <= {"query", "query_id", "answer", "provenance"}


def _choice(label: str) -> dict:
    return {
        "from_name": "label",
        "to_name": "answer",
        "type": "choices",
        "value": {"choices": [label]},
    }


def _exports(server: Server, project: int, token: str, out: Path) -> dict[str, Path]:
    """The export button's files (user ids) and a snapshot export naming users (e-mails)."""
    files = {}
    for kind, suffix in (("JSON", ".json"), ("JSON_MIN", ".json"), ("CSV", ".csv")):
        body = server.call(
            "GET", f"/api/projects/{project}/export?exportType={kind}", token, raw=True
        )
        files[f"button-{kind}"] = out / f"button-{kind.lower()}{suffix}"
        files[f"button-{kind}"].write_bytes(body)
    options = {"annotations__completed_by": {"only_id": False}}
    snapshot = server.call(
        "POST", f"/api/projects/{project}/exports", token, {"serialization_options": options}
    )
    where = f"/api/projects/{project}/exports/{snapshot['id']}"
    for _ in range(120):
        if server.call("GET", where, token)["status"] in ("completed", "failed"):
            break
        time.sleep(0.5)
    assert server.call("GET", where, token)["status"] == "completed"
    for kind, suffix in (("JSON", ".json"), ("JSON_MIN", ".json"), ("CSV", ".csv")):
        body = server.call("GET", f"{where}/download?exportType={kind}", token, raw=True)
        files[f"snapshot-{kind}"] = out / f"snapshot-{kind.lower()}{suffix}"
        files[f"snapshot-{kind}"].write_bytes(body)
    return files


def test_label_studio_round_trip(server, bundle, tmp_path):
    version = server.call("GET", "/api/version", ADMIN[2])["release"]
    print(f"Label Studio {version} (tested with {TESTED_VERSION})")

    tasks_path = tmp_path / "tasks.json"
    _run("export", "label-studio", bundle, tasks_path)
    tasks = json.loads(tasks_path.read_text())
    config = tasks_path.with_suffix(".xml").read_text()
    assert len(tasks) >= 4
    _blind(config)
    assert all("systems" not in t["data"] and t["meta"]["systems"] for t in tasks)

    admin = ADMIN[2]
    project = server.call(
        "POST", "/api/projects", admin, {"title": "receval", "label_config": config}
    )
    _blind(server.call("GET", f"/api/projects/{project['id']}", admin)["label_config"])
    server.call("POST", f"/api/projects/{project['id']}/import", admin, tasks)
    listed = server.call("GET", f"/api/tasks?project={project['id']}&page_size=100", admin)
    stored = listed["tasks"] if isinstance(listed, dict) else listed
    assert len(stored) == len(tasks)
    for task in stored:  # systems kept with the task, out of what the view shows
        assert "systems" not in task["data"] and task["meta"]["systems"]
        assert set(task["data"]) <= {"query_id", "query", "answer", "provenance"}

    # two users: alice picks as the labelling view writes (the choice's alias: the bundle's own
    # label); carol, signed up through the web form, by category name, disagreeing on task 1
    carol = server.sign_up(*SECOND)
    flip = {"C": "W", "W": "C"}
    name = {"C": "correct", "W": "wrong"}
    want = []
    for i, task in enumerate(stored):
        label = "CW"[i % 2]
        theirs = flip[label] if i == 0 else label
        for token, choice in ((admin, label), (carol, name[theirs])):
            result = [_choice(choice)]
            server.call("POST", f"/api/tasks/{task['id']}/annotations/", token, {"result": result})
        want += [
            (task["data"]["answer"], "alice", label),
            (task["data"]["answer"], "carol", theirs),
        ]

    users = {u["email"]: str(u["id"]) for u in server.call("GET", "/api/users", admin)}
    ids = {"alice": users[ADMIN[0]], "carol": users[SECOND[0]]}
    emails = {"alice": ADMIN[0], "carol": SECOND[0]}
    for kind, path in _exports(server, project["id"], admin, tmp_path).items():
        copy = tmp_path / f"bundle-{kind}"
        shutil.copytree(bundle, copy)
        result = CliRunner().invoke(cli, ["judgments", "add", str(copy), str(path)])
        assert result.exit_code == 0, result.output
        assert f"added {2 * len(stored)} votes" in result.output, (kind, result.output)
        assert "0 fact(s) still to annotate" in result.output
        votes = pd.read_csv(copy / "judgments.tsv", sep="\t", dtype=str, keep_default_na=False)
        votes = votes[votes["source"].str.startswith(path.name)]
        who = emails if kind.startswith("snapshot") else ids
        expected = sorted((a, who[u], name[label]) for a, u, label in want)
        category = votes["label"].map({**name, **{v: v for v in name.values()}})
        got = sorted(zip(votes["answer"], votes["annotator"], category, strict=True))
        assert got == expected, kind
        named_by_id = "names 2 annotator(s) only by user id" in result.output
        assert named_by_id == kind.startswith("button"), (kind, result.output)


def _browser():
    """The DevTools helpers of the report's browser test (tests/report/test_browser.py)."""
    import importlib.util

    path = Path(__file__).parent / "report" / "test_browser.py"
    spec = importlib.util.spec_from_file_location("receval_report_browser", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.CHROMIUM is None or not Path(module.CHROMIUM).is_file():
        pytest.skip("no headless Chromium (Debian's chromium, or RECEVAL_CHROMIUM)")
    return module


def _poll(devtools, expression: str, timeout: float = 120.0, every: float = 0.5):
    """The first truthy value of ``expression`` in the page (None after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = devtools.evaluate(expression)
        if value:
            return value
        time.sleep(every)
    return None


_CLICK = """(() => {
  const pick = [...document.querySelectorAll('label')]
    .filter(l => l.innerText.trim().replace(/\\[\\d+\\]$/, '') === %s);
  if (pick.length !== 1) return null;
  pick[0].click();
  return document.body.innerText;
})()"""

# checked, or clicked again: a click that lands before the view is interactive is lost (CI saw
# 'correct' never checked within 30 s); polled every 2 s so a slow re-render is not toggled back
_CHECKED = """(() => {
  const pick = [...document.querySelectorAll('label')]
    .filter(l => l.innerText.trim().replace(/\\[\\d+\\]$/, '') === %s);
  if (pick.length !== 1) return null;
  const input = pick[0].querySelector('input');
  if (input && input.checked) return true;
  pick[0].click();
  return null;
})()"""

_SUBMIT = """(() => {
  const b = [...document.querySelectorAll('button')].filter(b => b.innerText.trim() === 'Submit');
  if (b.length !== 1 || b[0].disabled) return null;
  b[0].click();
  return true;
})()"""


def _saved(server, admin, where: str, devtools, timeout: float = 60.0) -> bool:
    """Whether the task gets an annotation within ``timeout`` s, clicking Submit again every 10 s
    while the button is still there (a click the view dropped under load)."""
    deadline = time.monotonic() + timeout
    again = time.monotonic() + 10
    while not server.call("GET", where, admin).get("total_annotations"):
        if time.monotonic() > deadline:
            return False
        if time.monotonic() > again:
            devtools.evaluate(_SUBMIT)
            again = time.monotonic() + 10
        time.sleep(0.5)
    return True


_TEXT = "document.body ? document.body.innerText.replace(/\\s+/g, ' ').slice(0, 300) : ''"


def _vote(server, admin, devtools, url: str, where: str, choice: str) -> str:
    """Click ``choice`` in the labelling view at ``url`` and Submit until the task has an
    annotation; the page text. A loaded machine can drop the click or the Submit (CI saw both),
    so the view is loaded afresh up to three times; the test fails naming what each attempt
    saw."""
    seen, shown = [], None
    for _ in range(3):
        if shown is not None and server.call("GET", where, admin).get("total_annotations"):
            return shown  # the Submit of the attempt before landed late
        devtools.call("Page.navigate", url=url)
        shown = _poll(devtools, _CLICK % json.dumps(choice)) or shown
        if shown is None:
            seen.append("no choice")
        elif not _poll(devtools, _CHECKED % json.dumps(choice), 60, every=2.0):
            seen.append("not checked")
        elif not _poll(devtools, _SUBMIT, 30):
            seen.append("no Submit button")
        elif _saved(server, admin, where, devtools):
            return shown
        else:
            seen.append("not saved")
        seen[-1] += f" (page: {devtools.evaluate(_TEXT)!r})"
    pytest.fail(f"{choice!r} vote on {where}: " + "; ".join(seen))


def test_a_vote_clicked_in_the_labelling_view(server, bundle, tmp_path):
    """An annotator's clicks in Label Studio's own labelling view (headless Chromium): the view
    shows no system, the stored choice is the alias (the bundle's label value), and
    ``judgments add`` reads it."""
    browser = _browser()
    tasks_path = tmp_path / "tasks.json"
    _run("export", "label-studio", bundle, tasks_path)
    tasks = json.loads(tasks_path.read_text())[:2]
    admin = ADMIN[2]
    config = tasks_path.with_suffix(".xml").read_text()
    project = server.call(
        "POST", "/api/projects", admin, {"title": "clicks", "label_config": config}
    )
    server.call("POST", f"/api/projects/{project['id']}/import", admin, tasks)
    listed = server.call("GET", f"/api/tasks?project={project['id']}&page_size=100", admin)
    stored = listed["tasks"] if isinstance(listed, dict) else listed
    _, jar = server.session("login", ADMIN[0], ADMIN[1])
    systems = {s for t in tasks for s in t["meta"]["systems"].split(", ")}
    proc, devtools = browser.open_chromium(tmp_path / "profile")
    try:
        devtools.call("Network.enable")
        for cookie in jar:
            devtools.call(
                "Network.setCookie", name=cookie.name, value=cookie.value, url=server.base
            )
        devtools.call("Page.enable")
        for task, choice in zip(stored, ("correct", "wrong"), strict=True):
            url = f"{server.base}/projects/{project['id']}/data?task={task['id']}"
            shown = _vote(server, admin, devtools, url, f"/api/tasks/{task['id']}", choice)
            assert task["data"]["answer"] in shown
            assert not [s for s in systems if s in shown], "the labelling view names a system"
    finally:
        devtools.close()
        proc.kill()
        proc.wait(30)
    export = tmp_path / "clicks.json"
    export.write_bytes(
        server.call("GET", f"/api/projects/{project['id']}/export?exportType=JSON", admin, raw=True)
    )
    results = [
        a["result"][0]["value"]["choices"]
        for t in json.loads(export.read_text())
        for a in t["annotations"]
    ]
    assert sorted(results) == [["C"], ["W"]]  # the view writes the choice's alias
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    result = CliRunner().invoke(cli, ["judgments", "add", str(copy), str(export)])
    assert result.exit_code == 0, result.output
    votes = pd.read_csv(copy / "judgments.tsv", sep="\t", dtype=str, keep_default_na=False)
    votes = votes[votes["source"].str.startswith(export.name)]
    assert sorted(votes["label"]) == ["C", "W"]
