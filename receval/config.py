"""``task.toml``: the optional settings of a task bundle (label vocabulary, merging, matching)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from receval.errors import BundleError
from receval.formats.tables import read_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

LABEL_CATEGORIES = ("correct", "wrong", "inexact", "ignore")
DEFAULT_LABELS: dict[str, tuple[str, ...]] = {
    "correct": ("C", "correct", "1", "true", "yes"),
    "wrong": ("W", "wrong", "0", "false", "no"),
    "inexact": ("X", "inexact"),
    "ignore": ("I", "ignore"),
}
INEXACT_POLICIES = ("wrong", "correct", "ignore")
MERGE_RULES = ("majority", "any-correct", "unanimous")
TIE_POLICIES = ("half", "wrong", "correct", "unjudged")
#: ``[official] unjudged``: how the official census counts a response nobody judged (TAC's
#: CS-Score ignores it; trec_eval counts an unjudged document as not relevant).
UNJUDGED_POLICIES = ("ignore", "wrong")
#: ``[official] average``: how the official census averages over queries (micro: pooled counts,
#: TAC's CS-Score; macro: mean over the judged queries a system answered, trec_eval).
OFFICIAL_AVERAGES = ("micro", "macro")


@dataclass(frozen=True)
class Matching:
    """How answers are normalised into facts (``[matching]``)."""

    strip: bool = True
    collapse_whitespace: bool = True
    casefold: bool = True
    unicode: str | None = None  # "NFC" | "NFKC" | None


@dataclass(frozen=True)
class TaskConfig:
    """The parsed ``task.toml`` (every field has the documented default)."""

    name: str = ""
    labels: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_LABELS))
    inexact_policy: str = "wrong"
    merge_rule: str = "majority"
    tie_policy: str = "half"
    matching: Matching = field(default_factory=Matching)
    universe_size: int | None = None
    #: ``[official] unjudged`` as written (None: not set, the official estimator ignores them)
    unjudged: str | None = None
    #: ``[official] average`` as written (None: not set, the official estimator follows ``target``)
    average: str | None = None
    #: ``[judge] scale = [lo, hi]``: the grade scale of every automatic judge (None: not set,
    #: scores are probabilities in [0, 1]); ``[judge.scales] name = [lo, hi]`` per judge
    judge_scale: tuple[float, float] | None = None
    judge_scales: dict[str, tuple[float, float]] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    def scale_of(self, judge: str) -> tuple[float, float]:
        """The declared grade scale of ``judge`` (its own, else ``[judge] scale``, else [0, 1])."""
        return self.judge_scales.get(judge, self.judge_scale or (0.0, 1.0))

    @property
    def judge_graded(self) -> bool:
        """Whether ``task.toml`` declares a judge scale (the judges are then calibrated)."""
        return self.judge_scale is not None or bool(self.judge_scales)

    def label_map(self) -> dict[str, str]:
        """Case-folded raw label -> category (correct, wrong, inexact, ignore)."""
        out: dict[str, str] = {}
        for category in LABEL_CATEGORIES:
            for value in self.labels.get(category, ()):
                out[str(value).strip().casefold()] = category
        return out

    def category_value(self) -> dict[str, float]:
        """Category -> label value in [0, 1]; NaN means the annotation is ignored."""
        nan = float("nan")
        inexact = {"wrong": 0.0, "correct": 1.0, "ignore": nan}[self.inexact_policy]
        return {"correct": 1.0, "wrong": 0.0, "inexact": inexact, "ignore": nan}


def unknown_label_text(raw: str, vocab: str) -> str:
    """The error text for a label outside the bundle's vocabulary; a number (a graded judgment
    such as 2 on a 0-3 scale) is told that it needs an explicit mapping to correct/wrong."""
    text = f"unknown label {raw!r} (known labels: {vocab})"
    try:
        float(raw)
    except ValueError:
        return text
    return (
        f"{text}; a graded judgment is not a label in [0, 1]: map each grade to correct or "
        "wrong in task.toml [labels] (graded judgments need an explicit mapping)"
    )


_HEADER = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+")


def _line_of(text: str, key: str, section: str | None = None) -> int | None:
    """1-based line of ``key = ...`` inside table ``[section]`` (None: top level), else of the
    table header ``[key]``, else of ``key =`` anywhere; None when the key is not found."""
    assign = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    current: str | None = None
    anywhere = None
    for number, line in enumerate(text.split("\n"), start=1):
        header = _HEADER.match(line)
        if header:
            current = header.group(1).strip()
            if section is None and current.split(".")[0].strip() == key:
                return number
            continue
        if assign.match(line):
            if current == section:
                return number
            anywhere = anywhere or number
    return anywhere


def _parse_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The text of ``path`` and its parsed TOML (BundleError with the line on bad input)."""
    data = read_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BundleError(path, line, f"not valid UTF-8 (byte 0x{data[exc.start]:02x})") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        match = re.search(r"line (\d+)", msg)
        if match:
            line = int(match.group(1))
        elif "end of document" in msg:
            line = max(text.count("\n") + (0 if text.endswith("\n") else 1), 1)
        else:
            line = None
        raise BundleError(path, line, f"invalid TOML: {msg}") from None


@dataclass(frozen=True)
class _Sections:
    """The parsed ``task.toml`` with helpers that name the offending line on an error."""

    path: Path
    text: str
    raw: dict[str, Any]

    def fail(self, key: str, message: str, section: str | None = None) -> BundleError:
        return BundleError(self.path, _line_of(self.text, key, section), message)

    def table(self, name: str, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
        """``[name]`` (empty when absent); with ``keys``, any other key is an error."""
        value = self.raw.get(name, {})
        if not isinstance(value, dict):
            raise self.fail(name, f"[{name}] must be a table")
        for key in value if keys is not None else ():
            if key not in keys:
                raise self.fail(key, f"unknown [{name}] key {key!r}", name)
        return value

    def choice(self, section: str, key: str, allowed: tuple[str, ...], what: str, default):
        value = self.table(section).get(key, default)
        if value is not None and value not in allowed:
            raise self.fail(
                key, f"{what} must be one of {', '.join(allowed)}, not {value!r}", section
            )
        return value


def _labels(sections: _Sections) -> tuple[dict[str, tuple[str, ...]], str]:
    labels = dict(DEFAULT_LABELS)
    table = sections.table("labels", ("inexact_policy", *LABEL_CATEGORIES))
    policy = sections.choice(
        "labels", "inexact_policy", INEXACT_POLICIES, "inexact_policy", "wrong"
    )
    for key, value in table.items():
        if key in LABEL_CATEGORIES:
            if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
                raise sections.fail(key, f"labels.{key} must be a list of strings", "labels")
            labels[key] = tuple(str(v) for v in value)
    seen: dict[str, str] = {}
    for category, values in labels.items():
        for v in values:
            folded = v.strip().casefold()
            if folded in seen and seen[folded] != category:
                raise sections.fail(
                    category,
                    f"label {v!r} is listed both as {seen[folded]} and as {category}",
                    "labels",
                )
            seen[folded] = category
    return labels, policy


def _matching(sections: _Sections) -> Matching:
    table = sections.table("matching", ("strip", "collapse_whitespace", "casefold", "unicode"))
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        if key == "unicode":
            if value not in ("NFC", "NFKC", "none"):
                raise sections.fail(key, "matching.unicode must be NFC, NFKC or none", "matching")
            kwargs[key] = None if value == "none" else value
        elif not isinstance(value, bool):
            raise sections.fail(key, f"matching.{key} must be true or false", "matching")
        else:
            kwargs[key] = value
    return Matching(**kwargs)


def _universe_size(sections: _Sections) -> int | None:
    size = sections.table("universe", ("size",)).get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
        raise sections.fail("size", "universe.size must be a positive integer", "universe")
    return size


def universe_line(path: Path) -> int | None:
    """The line of ``[universe] size`` in the ``task.toml`` at ``path`` (None if unknown)."""
    try:
        return _line_of(path.read_text(encoding="utf-8-sig"), "size", "universe")
    except OSError:
        return None


def load_config(path: Path, default_name: str) -> TaskConfig:
    """Parse ``task.toml`` at ``path`` (absent file: defaults with ``name = default_name``).

    Every unknown section or key and every invalid value raises :class:`BundleError` naming the
    line it is on.
    """
    if not path.is_file():
        return TaskConfig(name=default_name)
    text, raw = _parse_toml(path)
    return _config_from_sections(_Sections(path, text, raw), default_name)


def config_from_mapping(raw: Mapping[str, Any], default_name: str = "task") -> TaskConfig:
    """The settings of a parsed ``task.toml`` (the mapping :func:`tomllib.load` returns).

    The same checks as :func:`load_config`; an error names ``task.toml`` without a line.
    """
    if not isinstance(raw, Mapping):
        raise TypeError(f"config must be a mapping of task.toml settings, not {type(raw).__name__}")
    return _config_from_sections(_Sections(Path("task.toml"), "", dict(raw)), default_name)


def _config_from_sections(sections: _Sections, default_name: str) -> TaskConfig:
    """:func:`load_config` after parsing: every section and key checked."""
    raw = sections.raw
    known_top = {"name", "labels", "matching", "merge", "universe", "official", "judge"}
    for key in raw:
        if key not in known_top:
            raise sections.fail(
                key, f"unknown setting {key!r} (known: {', '.join(sorted(known_top))})"
            )
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise sections.fail("name", "name must be a non-empty string")
    labels, inexact_policy = _labels(sections)
    # section and key checks first, so an unknown key is reported before a bad value elsewhere
    sections.table("merge", ("rule", "tie"))
    sections.table("official", ("unjudged", "average"))
    judge_scale, judge_scales = _judge_scales(sections)
    return TaskConfig(
        name=name.strip(),
        labels=labels,
        inexact_policy=inexact_policy,
        merge_rule=sections.choice("merge", "rule", MERGE_RULES, "merge rule", "majority"),
        tie_policy=sections.choice("merge", "tie", TIE_POLICIES, "merge tie policy", "half"),
        matching=_matching(sections),
        universe_size=_universe_size(sections),
        unjudged=sections.choice(
            "official", "unjudged", UNJUDGED_POLICIES, "official.unjudged", None
        ),
        average=sections.choice("official", "average", OFFICIAL_AVERAGES, "official.average", None),
        judge_scale=judge_scale,
        judge_scales=judge_scales,
        raw=raw,
    )


def _scale(sections: _Sections, key: str, value: Any, section: str) -> tuple[float, float]:
    """``[lo, hi]`` checked: two finite numbers with lo < hi."""
    ok = isinstance(value, list) and len(value) == 2
    ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    if not ok or not float(value[0]) < float(value[1]) or not all(map(_finite, value)):
        raise sections.fail(
            key, f"{section}.{key} must be [lo, hi], two numbers with lo < hi", section
        )
    return float(value[0]), float(value[1])


def _finite(v: float) -> bool:
    return v == v and abs(v) != float("inf")


def _judge_scales(sections: _Sections) -> tuple[tuple[float, float] | None, dict]:
    """``[judge] scale`` and ``[judge.scales]`` (module TaskConfig): the judges' grade scales."""
    table = sections.table("judge", ("scale", "scales"))
    scale = _scale(sections, "scale", table["scale"], "judge") if "scale" in table else None
    per = table.get("scales", {})
    if not isinstance(per, dict):
        raise sections.fail("scales", "[judge.scales] must be a table of name = [lo, hi]", "judge")
    scales = {str(k): _scale(sections, k, v, "judge.scales") for k, v in per.items()}
    return scale, scales


def dump_config(config: TaskConfig) -> str:
    """``task.toml`` text for ``config`` (only the settings that differ from the defaults)."""

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"name = {q(config.name)}"]
    label_lines = []
    for category in LABEL_CATEGORIES:
        if config.labels.get(category) != DEFAULT_LABELS[category]:
            label_lines.append(f"{category} = [{', '.join(q(v) for v in config.labels[category])}]")
    label_lines.append(
        f"inexact_policy = {q(config.inexact_policy)}"
    )  # always stated: it changes scores
    if label_lines:
        lines += ["", "[labels]", *label_lines]
    if config.merge_rule != "majority" or config.tie_policy != "half":
        lines += ["", "[merge]", f"rule = {q(config.merge_rule)}", f"tie = {q(config.tie_policy)}"]
    m = config.matching
    if m != Matching():
        lines += [
            "",
            "[matching]",
            f"strip = {str(m.strip).lower()}",
            f"collapse_whitespace = {str(m.collapse_whitespace).lower()}",
            f"casefold = {str(m.casefold).lower()}",
            f"unicode = {q(m.unicode or 'none')}",
        ]
    if config.universe_size is not None:
        lines += ["", "[universe]", f"size = {config.universe_size}"]
    official = [
        f"{key} = {q(value)}"
        for key, value in (("unjudged", config.unjudged), ("average", config.average))
        if value is not None
    ]
    if official:
        lines += ["", "[official]", *official]
    lines += _judge_lines(config, q)
    return "\n".join(lines) + "\n"


def _judge_lines(config: TaskConfig, q) -> list[str]:
    """The ``[judge]`` lines of ``task.toml`` (none when no scale is declared)."""

    def pair(scale: tuple[float, float]) -> str:
        return "[" + ", ".join(f"{v:g}" for v in scale) + "]"

    lines = []
    if config.judge_scale is not None:
        lines += ["", "[judge]", f"scale = {pair(config.judge_scale)}"]
    if config.judge_scales:
        lines += ["", "[judge.scales]"]
        lines += [f"{q(k)} = {pair(v)}" for k, v in sorted(config.judge_scales.items())]
    return lines
