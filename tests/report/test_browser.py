"""report.html in headless Chromium, driven over the DevTools protocol (Python stdlib only).

Asserts: no console errors or uncaught exceptions, no request but the page's own file, one
leaderboard row per system, every figure present with a non-empty drawing, the sort buttons
work.  A full-page screenshot is kept as a test artifact (its path is printed).  Skips with
the reason when Debian's ``chromium`` is not installed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from receval.report.html import build_report

pytestmark = pytest.mark.browser
pytest_plugins = ["report_outputs"]  # the full_output_dir fixture

#: The browser: $RECEVAL_CHROMIUM if set (a path; empty or missing = no browser), else Debian's.
CHROMIUM = (
    os.environ["RECEVAL_CHROMIUM"] or None
    if "RECEVAL_CHROMIUM" in os.environ
    else shutil.which("chromium") or shutil.which("chromium-browser")
)


def skip_with_reason(reason: str) -> None:
    """Skip, and say why where a plain ``pytest -q`` run shows it (the warnings summary)."""
    warnings.warn(f"browser test skipped: {reason}", pytest.PytestWarning, stacklevel=2)
    pytest.skip(reason)


class DevTools:
    """A minimal client of the Chrome DevTools protocol over one page's websocket (RFC 6455)."""

    def __init__(self, port: int, path: str, timeout: float = 60.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            buf += chunk
        return bytes(buf)

    def _send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _receive(self) -> dict[str, Any]:
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._exact(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._exact(8))
            data = self._exact(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            if opcode in (0x9, 0xA):  # ping / pong: not used by DevTools, ignore
                continue
            message += data
            if b0 & 0x80:
                return json.loads(message)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self._send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = self._receive()
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, event: str, timeout: float = 60.0, after: int = 0) -> dict[str, Any]:
        """The first ``event`` among the events from index ``after`` on (waiting for it)."""
        deadline = time.monotonic() + timeout
        for msg in self.events[after:]:
            if msg.get("method") == event:
                return msg
        while time.monotonic() < deadline:
            msg = self._receive()
            self.events.append(msg)
            if msg.get("method") == event:
                return msg
        raise TimeoutError(event)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def close(self) -> None:
        self.sock.close()


def open_chromium(profile: Path) -> tuple[subprocess.Popen, DevTools]:
    """Start headless Chromium with remote debugging on a free loopback port; connect to its page."""
    proc = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        port_file.exists() and port_file.read_text().count("\n") >= 1
    ):
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with code {proc.returncode}")
        time.sleep(0.1)
    if not port_file.exists():
        proc.kill()
        raise RuntimeError("chromium did not open its DevTools port within 60 s")
    port = int(port_file.read_text().split()[0])
    import http.client

    for _ in range(100):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/json/list")
        targets = json.loads(conn.getresponse().read())
        conn.close()
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("chromium has no page target")
    ws_path = "/" + pages[0]["webSocketDebuggerUrl"].split("/", 3)[3]
    return proc, DevTools(port, ws_path)


#: What a first reader meets (issue 23): where the leaderboard and the run card start, the size of
#: the small multiples' text as drawn, whether a collapsed curve entry's summary is cut off, and
#: the leaderboard sorted by its rank interval column (one click: ascending).
FIRST_HOUR_FACTS = """(() => {
  const top = sel => { const e = document.querySelector(sel);
    return e ? e.getBoundingClientRect().top + scrollY : null; };
  const overview = document.querySelector('svg[data-figure="curves-overview"]');
  let fonts = [];
  if (overview) {
    const scale = overview.getBoundingClientRect().width / overview.viewBox.baseVal.width;
    fonts = Array.from(overview.querySelectorAll('text')).filter(t => t.textContent.trim())
      .map(t => ({text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * scale}));
  }
  const summaries = Array.from(document.querySelectorAll('.curve-list summary')).map(s => ({
    text: s.textContent, scroll: s.scrollWidth, client: s.clientWidth}));
  const table = document.querySelector('#leaderboard-table');
  let ranks = null;
  if (table) {
    const button = table.tHead.rows[0].cells[1].querySelector('button');
    if (button) { button.click();
      ranks = Array.from(table.tBodies[0].rows).map(r => r.cells[1].textContent); }
  }
  return {leaderboard: top('#leaderboard'), run_card: top('#run-card'),
          checksums: top('table.checksums'), fonts: fonts, summaries: summaries,
          rank_sorted: ranks};
})()"""


def inspect_page(
    html: Path, browser: tuple[subprocess.Popen, DevTools], screenshot: Path
) -> dict[str, Any]:
    """Load ``html`` in the browser; return the requests, console errors and DOM facts; save a
    screenshot (and a PDF print beside it); close the browser."""
    proc, dt = browser
    try:
        for domain in ("Network", "Runtime", "Log", "Page"):
            dt.call(f"{domain}.enable")
        dt.call(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        url = html.resolve().as_uri()
        dt.call("Page.navigate", url=url)
        dt.wait_for("Page.loadEventFired")
        facts = dt.evaluate(
            """(() => {
              const figs = Array.from(document.querySelectorAll('svg.plot')).map(s => {
                const r = s.getBoundingClientRect();
                return {name: s.dataset.figure, width: r.width, height: r.height,
                        marks: s.querySelectorAll('path, use, text').length,
                        title: (s.querySelector('title') || {}).textContent || ''};
              });
              const table = document.querySelector('#leaderboard-table');
              const systems = table ? Array.from(table.tBodies[0].rows).map(r => r.cells[3].childNodes[0].textContent) : [];
              return {figures: figs, systems: systems,
                      sections: Array.from(document.querySelectorAll('section')).map(s => s.id),
                      height: document.documentElement.scrollHeight};
            })()"""
        )
        facts["first_hour"] = dt.evaluate(FIRST_HOUR_FACTS)
        # sort by system name (descending after two clicks) with the header buttons
        facts["sorted"] = dt.evaluate(
            """(() => {
              const table = document.querySelector('#leaderboard-table');
              if (!table) return null;
              const button = table.tHead.rows[0].cells[3].querySelector('button');
              if (!button) return null;
              button.click(); button.click();
              return Array.from(table.tBodies[0].rows).map(r => r.cells[3].childNodes[0].textContent);
            })()"""
        )
        mark = len(dt.events)
        dt.evaluate("location.reload()")
        dt.wait_for("Page.loadEventFired", after=mark)
        height = int(facts["height"])
        dt.call(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=min(height, 16000),
            deviceScaleFactor=1,
            mobile=False,
        )
        shot = dt.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        pdf = dt.call("Page.printToPDF", paperWidth=8.27, paperHeight=11.69)
        screenshot.with_suffix(".pdf").write_bytes(base64.b64decode(pdf["data"]))
        time.sleep(0.2)
        dt.call("Runtime.evaluate", expression="1")  # drain late events
        events = list(dt.events)
    finally:
        dt.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
    return {"facts": facts, "events": events, "url": url}


def _problems(events: list[dict[str, Any]], url: str) -> tuple[list[str], list[str]]:
    errors, requests = [], []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            errors.append(
                f"{details.get('text', '')} {details.get('exception', {}).get('description', '')}"
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(json.dumps(params.get("args", []))[:300])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            errors.append(params["entry"].get("text", "")[:300])
        elif method == "Network.requestWillBeSent":
            requests.append(params.get("request", {}).get("url", ""))
    return errors, [r for r in requests if r != url]


@pytest.fixture(scope="module")
def loaded_page(tmp_path_factory, full_output_dir):
    if CHROMIUM is None or not Path(CHROMIUM).is_file():
        skip_with_reason(
            "headless Chromium not installed (Debian package 'chromium'; .ci/run installs it "
            "with apt-get where it can), so report.html was not checked in a browser"
        )
    page = build_report(full_output_dir)
    work = tmp_path_factory.mktemp("browser")
    screenshot = work / "report.png"
    try:
        browser = open_chromium(work / "profile")
    except (OSError, RuntimeError, ValueError) as exc:
        skip_with_reason(f"{CHROMIUM} is installed but could not be started: {exc}")
    result = inspect_page(page, browser, screenshot)
    print(f"\nscreenshot of report.html: {screenshot}")
    return full_output_dir, result, screenshot


def test_no_console_errors_and_no_requests(loaded_page):
    _, result, _ = loaded_page
    errors, requests = _problems(result["events"], result["url"])
    assert errors == []
    assert requests == []
    # the page itself was requested: the network log is live, so an empty list means something
    assert any(
        e.get("method") == "Network.requestWillBeSent"
        and e["params"]["request"]["url"] == result["url"]
        for e in result["events"]
    )


def test_leaderboard_has_one_row_per_system(loaded_page):
    out, result, _ = loaded_page
    import pandas as pd

    board = pd.read_csv(out / "leaderboard.csv", dtype={"system": str}, keep_default_na=False)
    assert result["facts"]["systems"] == list(board["system"])
    assert result["facts"]["sorted"] == sorted(board["system"], reverse=True)


def test_every_figure_is_present_and_drawn(loaded_page):
    out, result, _ = loaded_page
    import pandas as pd

    board = pd.read_csv(out / "leaderboard.csv", dtype={"system": str}, keep_default_na=False)
    figures = result["facts"]["figures"]
    names = [f["name"] for f in figures]
    n_curves = len(list((out / "curves").glob("*.csv")))
    assert names[:1] == ["forest"]
    assert {"pool-coverage", "pooling-bias", "annotation"} <= set(names)
    assert sum(name.startswith("curve-") for name in names) == len(board) >= n_curves
    for fig in figures:
        assert fig["width"] > 100 and fig["height"] > 60, fig
        assert fig["marks"] > 20, fig  # axes, ticks, labels and data: an empty SVG has none
        assert fig["title"], fig
    assert result["facts"]["sections"] == [
        "leaderboard",
        "run-card",
        "forest",
        "curves",
        "pool",
        "annotation",
        "per-query",
        "files",
    ]


def test_the_leaderboard_comes_first(loaded_page):
    """The leaderboard starts on the first screen, above the run card and the checksum table."""
    facts = loaded_page[1]["facts"]["first_hour"]
    assert facts["leaderboard"] < 400
    assert facts["leaderboard"] < facts["run_card"] < facts["checksums"]


def test_small_multiples_text_is_readable(loaded_page):
    """Every text of the curve overview is drawn at ≥ 9 px in a 1280 px window."""
    fonts = loaded_page[1]["facts"]["first_hour"]["fonts"]
    assert len(fonts) > 20  # titles, values, ticks, legend
    small = [f for f in fonts if f["px"] < 9.0]
    assert small == [], small[:5]


def test_collapsed_curve_entries_are_not_cut_off(loaded_page):
    summaries = loaded_page[1]["facts"]["first_hour"]["summaries"]
    assert summaries and any("P@R_T" in s["text"] for s in summaries)
    for summary in summaries:
        assert summary["scroll"] <= summary["client"], summary


def test_sorting_by_rank_interval_sorts_by_both_ends(loaded_page):
    ranks = loaded_page[1]["facts"]["first_hour"]["rank_sorted"]
    pairs = [tuple(int(v) for v in r.split("–")) for r in ranks if "–" in r]
    assert len(pairs) > 3 and len({hi for _, hi in pairs}) > 1
    assert pairs == sorted(pairs)


def test_screenshot_kept(loaded_page):
    _, _, screenshot = loaded_page
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack("!II", data[16:24])
    assert width == 1280 and height > 2000


def test_prints_to_pdf(loaded_page):
    _, _, screenshot = loaded_page
    pdf = screenshot.with_suffix(".pdf").read_bytes()
    assert pdf[:5] == b"%PDF-"
    pages = len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf))
    print(f"\nprinted report: {pages} A4 pages, {screenshot.with_suffix('.pdf')}")
    assert pages >= 3


def test_the_checks_see_requests_and_console_errors(tmp_path):
    """The same machinery on a page that loads a (local, missing) image and logs errors: the
    request list and the error list are not empty, so the assertions above can fail."""
    if CHROMIUM is None or not Path(CHROMIUM).is_file():
        skip_with_reason("headless Chromium not installed")
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="missing.png" alt="">'
        '<script>console.error("boom"); notDefined();</script></body></html>'
    )
    try:
        browser = open_chromium(tmp_path / "profile")
    except (OSError, RuntimeError, ValueError) as exc:
        skip_with_reason(f"{CHROMIUM} is installed but could not be started: {exc}")
    result = inspect_page(page, browser, tmp_path / "bad.png")
    errors, requests = _problems(result["events"], result["url"])
    assert set(requests) == {(tmp_path / "missing.png").as_uri()}  # once per load
    assert any("boom" in e for e in errors)
    assert any("notDefined" in e for e in errors)


# --------------------------------------------------------------------------- 70 systems at 1400 px

#: The viewport of the layout checks and the page height the 70-system report must stay under.
VIEWPORT_WIDTH = 1400
MAX_PAGE_HEIGHT = 12_000

#: Where the screenshots for the closing note go ($RECEVAL_ARTIFACTS, else the test's tmp dir).
ARTIFACTS = os.environ.get("RECEVAL_ARTIFACTS")

LAYOUT_FACTS = """(() => {
  const doc = document.documentElement;
  const forest = document.querySelector('svg[data-figure="forest"]');
  // every drawn element of the forest plot with a partial opacity: the tier bands and the
  // legend swatch (matplotlib writes alpha as the element's opacity)
  const shaded = forest ? Array.from(forest.querySelectorAll('path, rect')).map(el => {
    const r = el.getBoundingClientRect();
    return {opacity: parseFloat(getComputedStyle(el).opacity), fill: getComputedStyle(el).fill,
            width: r.width, height: r.height};
  }).filter(e => e.opacity < 1) : [];
  const wraps = Array.from(document.querySelectorAll('.table-wrap')).map(w => ({
    id: (w.closest('section') || {}).id, scroll: w.scrollWidth, client: w.clientWidth}));
  const rows = Array.from(document.querySelectorAll('#leaderboard-table tbody tr'));
  const reach = rows.map(tr => {
    const link = tr.cells[3].querySelector('a[href^="#curve-"]');
    const system = tr.cells[3].childNodes[0].textContent;
    if (!link) return {system: system, link: null};
    link.click();
    const target = document.getElementById(link.getAttribute('href').slice(1));
    const details = target ? target.closest('details') : null;
    const svg = target ? target.querySelector('svg.plot') : null;
    const box = svg ? svg.getBoundingClientRect() : {height: 0, top: -1};
    const out = {system: system, link: link.getAttribute('href'), open: !!(details && details.open),
                 height: box.height, visible: box.top < innerHeight && box.bottom > 0,
                 title: svg ? svg.querySelector('title').textContent : ''};
    if (details) details.open = false;
    return out;
  });
  scrollTo(0, 0);
  const box = sel => { const e = document.querySelector(sel); if (!e) return null;
    const r = e.getBoundingClientRect(); return {x: r.left + scrollX, y: r.top + scrollY,
    width: r.width, height: r.height}; };
  return {height: doc.scrollHeight, scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth,
          shaded: shaded, wraps: wraps, reach: reach,
          boxes: {leaderboard: box('#leaderboard'), forest: box('#forest figure'),
                  overview: box('#curves figure.overview')}};
})()"""


def inspect_layout(html: Path, browser: tuple[subprocess.Popen, DevTools], shots: Path) -> dict:
    """Load ``html`` at 1400 px; return :data:`LAYOUT_FACTS`; screenshot three regions."""
    proc, dt = browser
    try:
        dt.call("Page.enable")
        dt.call(
            "Emulation.setDeviceMetricsOverride",
            width=VIEWPORT_WIDTH,
            height=1000,
            deviceScaleFactor=1,
            mobile=False,
        )
        dt.call("Page.navigate", url=html.resolve().as_uri())
        dt.wait_for("Page.loadEventFired")
        facts = dt.evaluate(LAYOUT_FACTS)
        for name, box in facts["boxes"].items():
            if box is None:
                continue
            clip = {**box, "height": min(box["height"], 3000), "scale": 1}
            shot = dt.call(
                "Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True
            )
            (shots / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))
    finally:
        dt.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
    return facts


@pytest.fixture(scope="module")
def kbp_layout(tmp_path_factory):
    """The embedded 70-system task, scored at R_T = 0.2 (B = 200), rendered at 1400 px."""
    if CHROMIUM is None or not Path(CHROMIUM).is_file():
        skip_with_reason("headless Chromium not installed (Debian package 'chromium')")
    task = Path(__file__).resolve().parents[2] / "data" / "kbp-sim"
    if not (task / "runs.tsv").is_file():
        skip_with_reason(f"the embedded task {task} is not in this checkout")
    from click.testing import CliRunner

    from receval.cli import cli

    work = tmp_path_factory.mktemp("kbp")
    out = work / "out"
    args = ["score", str(task), "--out", str(out), "--target-recall", "0.2", "--bootstrap", "200"]
    result = CliRunner().invoke(cli, [*args, "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    shots = Path(ARTIFACTS) if ARTIFACTS else work / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        browser = open_chromium(work / "profile")
    except (OSError, RuntimeError, ValueError) as exc:
        skip_with_reason(f"{CHROMIUM} is installed but could not be started: {exc}")
    facts = inspect_layout(out / "report.html", browser, shots)
    print(f"\nscreenshots of the 70-system report: {shots}")
    return out, facts, shots


@pytest.mark.slow  # scores the 70-system task first; CI runs the slow set
def test_tier_bands_are_drawn_visibly(kbp_layout):
    out, facts, _ = kbp_layout
    import pandas as pd

    from receval.report.plots import TIER_ALPHA

    tiers = pd.read_csv(out / "leaderboard.csv", dtype={"tier": str})["tier"].dropna()
    assert tiers.nunique() > 1  # there are bands to shade
    bands = [s for s in facts["shaded"] if abs(s["opacity"] - TIER_ALPHA) < 1e-6]
    # ≥ 1 band per panel (3 panels) plus the legend swatch, all drawn with a visible opacity
    wide = [b for b in bands if b["width"] > 100 and b["height"] > 2]
    assert len(wide) >= 3, facts["shaded"][:10]
    assert any(b["width"] < 40 for b in bands)  # the legend swatch shows the same shading
    assert all(s["opacity"] > 0.02 for s in facts["shaded"])


@pytest.mark.slow  # scores the 70-system task first; CI runs the slow set
def test_every_curve_is_reachable_from_the_leaderboard(kbp_layout):
    out, facts, _ = kbp_layout
    import pandas as pd

    board = pd.read_csv(out / "leaderboard.csv", dtype={"system": str}, keep_default_na=False)
    reach = facts["reach"]
    assert [r["system"] for r in reach] == list(board["system"])
    for r in reach:
        assert r["link"], r  # one click on the system name ...
        assert r["open"], r  # ... opens its collapsed entry (no JavaScript needed: fragment)
        assert r["height"] > 150 and r["visible"], r  # ... and shows its figure on screen
        assert r["title"] == f"Precision curve of {r['system']}", r


@pytest.mark.slow  # scores the 70-system task first; CI runs the slow set
def test_no_horizontal_overflow_at_1400px(kbp_layout):
    _, facts, _ = kbp_layout
    assert facts["scrollWidth"] <= facts["clientWidth"] <= VIEWPORT_WIDTH
    for wrap in facts["wraps"]:  # a scrolling table would clip its last columns
        assert wrap["scroll"] <= wrap["client"], wrap


@pytest.mark.slow  # scores the 70-system task first; CI runs the slow set
def test_page_height_for_70_systems(kbp_layout):
    _, facts, _ = kbp_layout
    print(f"\npage height at {VIEWPORT_WIDTH} px: {facts['height']} px")
    assert len(facts["reach"]) == 70
    assert facts["height"] < MAX_PAGE_HEIGHT


@pytest.mark.slow  # scores the 70-system task first; CI runs the slow set
def test_screenshots_written(kbp_layout):
    _, _, shots = kbp_layout
    for name in ("leaderboard", "forest", "overview"):
        data = (shots / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack("!II", data[16:24])
        assert width > 600 and height > 200, (name, width, height)
