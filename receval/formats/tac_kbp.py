"""TAC-KBP Cold Start slot-filling (SF) files -> a task bundle.

Reads the three official inputs of the TAC Cold Start scorer (CS-Score, 2014–2017) and writes
them as a bundle (docs/contracts.md, "The task bundle"):

* **Query file**, one of

  - the **SF query file** (``sf-query.xml``): ``<query id="..."><name/><docid/><beg/><end/>
    <enttype/><slot0/>[<slot1/>]</query>``; 2014 files may say ``<slot>`` for ``<slot0>``;
  - the **LDC query file** (``ldc-query.xml``): one query per entity with several entry points
    (``<mentions><mention><name/><docid/><beg/><end/></mention>...</mentions>``).  Each entry point
    is one SF query, named as the official tools name it (CS-Score ``-expand``,
    ``Query::get_short_uuid`` of ``ColdStartLib.pm``): the last 10 hex digits of the UUID v3 (nil
    namespace) of ``"<docid>:<beg>:<end>:<slot0>[:<slot1>...]"``.  The runs and assessments name
    the SF query ``<prefix>_<those 10 digits>`` (e.g. ``CSSF17_ENG_afddc4ed21``); like CS-Score,
    matching is on the 10 digits, and the bundle uses the full id the files use
    (``ldc_query_id`` keeps the LDC query's own id);
  - **none** (``queries=None``): the queries are the SF query ids the runs and assessments name;
    an id that extends another id by ``_<suffix>`` is a derived (hop ≥ 1) query of it.  Queries
    nobody answered or assessed are then unknown (they have no ground truth, so micro averages are
    unaffected; macro averages over queries can differ).
* **SF runs** (tab-separated, one response per line):

  ========  ===================================================================================
  columns   layout
  ========  ===================================================================================
  7 (2014)  query id, slot, run id, relation provenance, filler, filler provenance, confidence
  8 (2015,  query id, slot, run id, relation provenance, filler, **filler type**, filler
  2016)     provenance, confidence
  9 (2017)  as 2015 plus **node id**
  ========  ===================================================================================

* **Assessments** (``qrel.txt``, ``*.assessed.fqec``; tab-separated): response id,
  ``query id:slot``, relation provenance, filler, filler provenance, filler assessment,
  [filler mention type,] justification assessment, equivalence class [, equivalence-class mention
  type].  8 columns in 2014–2015, 10 (with the two bracketed mention types) in 2016–2017.

A provenance is ``DOCID:start-end``, 1–4 of them comma-separated.  Blank lines and lines starting
with ``#`` are skipped.  Every malformed line raises :class:`~receval.errors.BundleError` naming the
file and the line (wrong column count, bad provenance, unknown assessment code, unknown query, a
correct assessment without an equivalence class, ...).

Bundle encoding
---------------
* ``queries.tsv``: one row per SF query and hop.  ``query_id`` is ``<SF query id>:<slot>``, the
  assessments' second column, so a bundle query is the question being scored (an entity *and* a
  slot).  Extra columns: ``sf_query_id, slot, entity, enttype, docid, beg, end, hop,
  parent_query``.
* ``runs.tsv``: one row per run line.  ``system`` = run id (third column), ``answer`` = filler
  string, ``score`` = confidence, ``provenance`` = filler provenance as written.  Extra columns:
  ``relation_provenance, filler_type, node_id, sf_query_id, slot, hop, source`` (``source`` is
  ``<run file name>:<line>``).  Facts are (query_id, normalised filler): the statistical
  estimators share one label per fact across systems.
* ``judgments.tsv``: one row per assessment line.  ``answer`` = filler, ``label`` = the TAC
  assessment code, ``equivalence_class`` = the LDC class (``<query id>:N``; empty for ``0``; a
  bare 2014 class number ``N`` becomes ``<query id>:N``), ``provenance`` = filler provenance.
  Extra columns: ``relation_provenance, response_id, justification, filler_mention_type,
  ec_mention_type, sf_query_id, slot, hop, source``.
* ``task.toml``: the ``[labels]`` vocabulary of :data:`TAC_LABELS` (C correct; W wrong; X, S, L
  inexact; I ignore) with ``inexact_policy = "wrong"`` (CS-Score's default counts INEXACT as wrong).

Official (CS-Score) scoring does not go through the fact normalisation: it matches each response to
its assessment exactly, by (query, filler string, filler provenance, relation provenance), and
:mod:`receval.official.scores` does so from the ``provenance`` and ``relation_provenance``
columns kept here.

Hop-1 responses (queries derived from a hop-0 answer, ids ``<SF query id>_<hash>``) are skipped by
default; the number skipped is in ``tables["runs"].attrs["hop1_rows_skipped"]`` and
``tables["judgments"].attrs["hop1_rows_skipped"]``.  With ``include_hop1=True`` they are kept, each
derived query becoming its own bundle query with ``hop >= 1`` and ``parent_query`` set.
"""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from receval.config import DEFAULT_LABELS, TaskConfig
from receval.errors import BundleError
from receval.formats.tables import read_input_bytes, read_input_text, read_run_files

__all__ = [
    "ASSESSMENT_CODES",
    "SINGLE_VALUED_SLOTS",
    "TAC_LABELS",
    "import_tac_kbp",
    "is_ldc_query_file",
    "normalize_provenance",
    "parse_provenance",
    "queries_from_responses",
    "read_assessments",
    "read_ldc_queries",
    "read_sf_queries",
    "read_sf_run",
    "sf_query_hash",
]

#: TAC filler-assessment codes and what they mean (CS-Score's names).
ASSESSMENT_CODES: dict[str, str] = {
    "C": "CORRECT",
    "W": "INCORRECT",
    "X": "INEXACT",
    "I": "IGNORE",
    "S": "INEXACT_SHORT",
    "L": "INEXACT_LONG",
}

#: The bundle label vocabulary for TAC codes (``[labels]`` of the emitted ``task.toml``).
TAC_LABELS: dict[str, tuple[str, ...]] = {
    "correct": ("C",),
    "wrong": ("W",),
    "inexact": ("X", "S", "L"),
    "ignore": ("I",),
}

#: Slots that admit one answer (the TAC KBP slot descriptions, 2013–2017).  CS-Score counts at most
#: one equivalence class as ground truth for them and at most one right response.
SINGLE_VALUED_SLOTS: frozenset[str] = frozenset(
    {
        "per:age",
        "per:cause_of_death",
        "per:city_of_birth",
        "per:city_of_death",
        "per:country_of_birth",
        "per:country_of_death",
        "per:date_of_birth",
        "per:date_of_death",
        "per:religion",
        "per:stateorprovince_of_birth",
        "per:stateorprovince_of_death",
        "org:city_of_headquarters",
        "org:country_of_headquarters",
        "org:date_dissolved",
        "org:date_founded",
        "org:number_of_employees_members",
        "org:stateorprovince_of_headquarters",
        "org:website",
    }
)

_RUN_LAYOUTS: dict[int, tuple[str, ...]] = {
    7: (
        "sf_query_id",
        "slot",
        "run_id",
        "relation_provenance",
        "filler",
        "filler_provenance",
        "confidence",
    ),
    8: (
        "sf_query_id",
        "slot",
        "run_id",
        "relation_provenance",
        "filler",
        "filler_type",
        "filler_provenance",
        "confidence",
    ),
    9: (
        "sf_query_id",
        "slot",
        "run_id",
        "relation_provenance",
        "filler",
        "filler_type",
        "filler_provenance",
        "confidence",
        "node_id",
    ),
}
_RUN_YEARS = {7: "2014", 8: "2015–2016", 9: "2017"}

_ASSESSMENT_LAYOUTS: dict[int, tuple[str, ...]] = {
    8: (
        "response_id",
        "query_and_slot",
        "relation_provenance",
        "filler",
        "filler_provenance",
        "code",
        "justification",
        "equivalence_class",
    ),
    10: (
        "response_id",
        "query_and_slot",
        "relation_provenance",
        "filler",
        "filler_provenance",
        "code",
        "filler_mention_type",
        "justification",
        "equivalence_class",
        "ec_mention_type",
    ),
}
_ASSESSMENT_YEARS = {8: "2014–2015", 10: "2016–2017"}

_TRIPLE = re.compile(r"^([^:\s,]+):(\d+)-(\d+)$")
_MAX_TRIPLES = 4
#: CS-Score truncates a provenance span longer than this many characters (matching sees the cut).
MAX_SPAN_CHARS = 200


# ---------------------------------------------------------------------------------------------
# provenance


def parse_provenance(text: str) -> list[tuple[str, int, int]]:
    """``"D:s-e,D:s-e"`` -> ``[(doc, start, end), ...]``; raises ValueError saying what is wrong."""
    text = text.strip()
    if not text:
        raise ValueError("empty provenance")
    parts = text.split(",")
    if len(parts) > _MAX_TRIPLES:
        raise ValueError(f"{len(parts)} provenance spans (at most {_MAX_TRIPLES} are allowed)")
    out = []
    for part in parts:
        match = _TRIPLE.match(part.strip())
        if match is None:
            raise ValueError(f"provenance {part.strip()!r} is not DOCID:start-end")
        doc, start, end = match.group(1), int(match.group(2)), int(match.group(3))
        if end < start:
            raise ValueError(f"provenance {part.strip()!r} ends before it starts")
        out.append((doc, start, end))
    return out


def normalize_provenance(text: str) -> str:
    """Canonical form of a provenance list, as CS-Score compares them.

    Spans longer than :data:`MAX_SPAN_CHARS` are cut to that length and the spans are sorted by
    (start, end, document), so ``D:7-9,D:1-3`` and ``D:1-3,D:7-9`` match.  Text that is not a TAC
    provenance list is returned stripped and otherwise unchanged (so non-TAC bundles still match
    on their exact provenance strings).
    """
    try:
        triples = parse_provenance(text)
    except ValueError:
        return text.strip()
    cut = [(d, s, min(e, s + MAX_SPAN_CHARS - 1)) for d, s, e in triples]
    cut.sort(key=lambda t: (t[1], t[2], t[0]))
    return ",".join(f"{d}:{s}-{e}" for d, s, e in cut)


# ---------------------------------------------------------------------------------------------
# low-level readers


def _text_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the non-blank, non-comment lines of a UTF-8 file."""
    path = Path(path)
    if not path.exists():
        raise BundleError(path, None, "no such file")
    if path.is_dir():
        raise BundleError(path, None, "is a directory, not a file")
    text = read_input_text(path)  # a gzipped run or assessment file is read as it is
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        out.append((number, line))
    return out


def _first_error(path: Path, lines: np.ndarray, checks: list[tuple[np.ndarray, object]]) -> None:
    """Raise for the earliest row that fails any check (``checks``: (bad mask, message(i)))."""
    best: tuple[int, int] | None = None
    for k, (bad, _) in enumerate(checks):
        idx = np.flatnonzero(bad)
        if len(idx) and (best is None or idx[0] < best[0]):
            best = (int(idx[0]), k)
    if best is not None:
        i, k = best
        message = checks[k][1]
        raise BundleError(path, int(lines[i]), message(i))  # type: ignore[operator]


def _split_fields(
    path: Path, lines: list[tuple[int, str]], layouts: dict[int, tuple[str, ...]], what: str
) -> tuple[int, pd.DataFrame]:
    """Split tab-separated lines into a frame of stripped strings with a ``line`` column.

    Every line must have one of the column counts of ``layouts``, the same as the first line, and
    no empty field (except ``node_id``).
    """
    if not lines:
        raise BundleError(path, None, "no data lines (the file is empty or only comments)")
    numbers = np.fromiter((n for n, _ in lines), dtype=np.int64, count=len(lines))
    split = [line.split("\t") for _, line in lines]
    lengths = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    counts = [str(n) for n in layouts]
    allowed = counts[0] if len(counts) == 1 else ", ".join(counts[:-1]) + " or " + counts[-1]
    expected = int(lengths[0])
    _first_error(
        path,
        numbers,
        [
            (
                ~np.isin(lengths, list(layouts)),
                lambda i: f"expected {allowed} tab-separated columns in {what}, found {lengths[i]}",
            ),
            (
                lengths != expected,
                lambda i: (
                    f"{lengths[i]} columns, but the first line of this file has {expected} "
                    "(one file must use one format)"
                ),
            ),
        ],
    )
    names = list(layouts[expected])
    frame = pd.DataFrame(split, columns=names, dtype=object)
    for col in names:
        frame[col] = frame[col].str.strip()
    required = [c for c in names if c != "node_id"]
    empty = frame[required].eq("").to_numpy()
    _first_error(
        path,
        numbers,
        [
            (
                empty.any(axis=1),
                lambda i: f"empty {required[int(np.argmax(empty[i]))].replace('_', ' ')} column",
            )
        ],
    )
    frame["line"] = numbers
    return expected, frame


_PROVENANCE_LIST = re.compile(
    rf"\s*[^:\s,]+:\d+-\d+\s*(?:,\s*[^:\s,]+:\d+-\d+\s*){{0,{_MAX_TRIPLES - 1}}}"
)
_OFFSETS = re.compile(r":(\d+)-(\d+)")


def _valid_provenance(text: str) -> bool:
    """Fast equivalent of ``parse_provenance`` succeeding (used on whole columns)."""
    if _PROVENANCE_LIST.fullmatch(text) is None:
        return False
    return all(int(a) <= int(b) for a, b in _OFFSETS.findall(text))


def _bad_provenance(values: pd.Series) -> np.ndarray:
    """True where ``values`` is not a valid provenance list (see :func:`parse_provenance`)."""
    return np.fromiter((not _valid_provenance(v) for v in values), dtype=bool, count=len(values))


def _provenance_message(values: pd.Series, what: str):
    def message(i: int) -> str:
        try:
            parse_provenance(values.iat[i])
        except ValueError as exc:
            return f"bad {what}: {exc}"
        return f"bad {what}: {values.iat[i]!r}"  # pragma: no cover - the two checks agree

    return message


def read_sf_run(path: Path | str) -> pd.DataFrame:
    """Read one SF run file (2014, 2015–2016 or 2017 layout; see the module docstring).

    Returns one row per response with columns ``sf_query_id, slot, run_id, relation_provenance,
    filler, filler_type, filler_provenance, confidence`` (float), ``node_id, line`` (``filler_type``
    and ``node_id`` are empty where the layout lacks them).
    """
    path = Path(path)
    ncols, frame = _split_fields(path, _text_lines(path), _RUN_LAYOUTS, "an SF run")
    for col in ("filler_type", "node_id"):
        if col not in frame.columns:
            frame[col] = ""
    lines = frame["line"].to_numpy()
    conf = pd.to_numeric(frame["confidence"], errors="coerce").to_numpy(dtype=float)
    _first_error(
        path,
        lines,
        [
            (
                ~frame["slot"].str.contains(":", regex=False).to_numpy(dtype=bool),
                lambda i: f"slot {frame['slot'].iat[i]!r} is not of the form type:name",
            ),
            (
                _bad_provenance(frame["relation_provenance"]),
                _provenance_message(frame["relation_provenance"], "relation provenance"),
            ),
            (
                _bad_provenance(frame["filler_provenance"]),
                _provenance_message(frame["filler_provenance"], "filler provenance"),
            ),
            (
                ~np.isfinite(conf) | (conf < 0) | (conf > 1),
                lambda i: f"confidence {frame['confidence'].iat[i]!r} is not a number in [0, 1]",
            ),
        ],
    )
    frame["confidence"] = conf
    frame.attrs["layout"] = _RUN_YEARS[ncols]
    return frame


def read_assessments(path: Path | str) -> pd.DataFrame:
    """Read an assessment file (2014–2015 8-column or 2016–2017 10-column layout).

    Returns one row per assessment with columns ``response_id, sf_query_id, slot,
    relation_provenance, filler, filler_provenance, code, justification, equivalence_class,
    filler_mention_type, ec_mention_type, line``.  ``equivalence_class`` is empty for ``0``; a bare
    class number is qualified with the query id.  A correct (C) or inexact (X) assessment must name
    an equivalence class and a wrong (W) or ignored (I) one must not (CS-Score refuses both).
    """
    path = Path(path)
    ncols, frame = _split_fields(path, _text_lines(path), _ASSESSMENT_LAYOUTS, "an assessment file")
    for col in ("filler_mention_type", "ec_mention_type"):
        if col not in frame.columns:
            frame[col] = ""
    lines = frame["line"].to_numpy()
    parts = frame["query_and_slot"].str.partition(":")
    qid, slot = parts[0], parts[2]
    ec = frame["equivalence_class"].where(frame["equivalence_class"] != "0", "")
    bare = (ec != "") & ~ec.str.contains(":", regex=False)
    ec = ec.where(~bare, qid + ":" + ec)
    code = frame["code"]
    known = ", ".join(ASSESSMENT_CODES)
    _first_error(
        path,
        lines,
        [
            (
                ((parts[1] == "") | (qid == "") | ~slot.str.contains(":", regex=False)).to_numpy(),
                lambda i: (
                    f"second column {frame['query_and_slot'].iat[i]!r} is not of the form "
                    "<query id>:<type>:<slot>"
                ),
            ),
            (
                ~code.isin(ASSESSMENT_CODES).to_numpy(),
                lambda i: f"unknown assessment code {code.iat[i]!r} (known: {known})",
            ),
            (
                _bad_provenance(frame["relation_provenance"]),
                _provenance_message(frame["relation_provenance"], "relation provenance"),
            ),
            (
                _bad_provenance(frame["filler_provenance"]),
                _provenance_message(frame["filler_provenance"], "filler provenance"),
            ),
            (
                (code.isin(("C", "X")) & (ec == "")).to_numpy(),
                lambda i: (
                    f"assessment {code.iat[i]} (correct/inexact) without an equivalence class"
                ),
            ),
            (
                (code.isin(("W", "I")) & (ec != "")).to_numpy(),
                lambda i: (
                    f"assessment {code.iat[i]} (wrong/ignored) with equivalence class "
                    f"{ec.iat[i]!r}; only correct or inexact answers have one"
                ),
            ),
        ],
    )
    frame["sf_query_id"] = qid
    frame["slot"] = slot
    frame["equivalence_class"] = ec
    frame = frame.drop(columns=["query_and_slot"])
    frame.attrs["layout"] = _ASSESSMENT_YEARS[ncols]
    return frame


@dataclass(frozen=True)
class _Query:
    sf_query_id: str
    slots: tuple[str, ...]
    entity: str
    enttype: str
    docid: str
    beg: str
    end: str
    ldc_query_id: str = ""


def _query_elements(path: Path) -> list[tuple[ET.Element, int | None, str]]:
    """(element, line, id) of every ``<query>`` of an XML query file; ids checked non-empty."""
    if not path.exists():
        raise BundleError(path, None, "no such file")
    if path.is_dir():
        raise BundleError(path, None, "is a directory, not a file")
    raw = read_input_bytes(path)
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        raise BundleError(path, line, f"not well-formed XML ({exc.msg})") from None
    text = raw.decode("utf-8", errors="replace")
    starts = [text[: m.start()].count("\n") + 1 for m in re.finditer(r"<query[\s>]", text)]
    elements = list(root.iter("query"))
    if not elements:
        raise BundleError(path, None, "no <query> elements found")
    out = []
    for k, element in enumerate(elements):
        line = starts[k] if k < len(starts) else None
        qid = (element.get("id") or "").strip()
        if not qid:
            raise BundleError(path, line, "<query> without an id attribute")
        out.append((element, line, qid))
    return out


def _field(element: ET.Element, tag: str) -> str:
    node = element.find(tag)
    return (node.text or "").strip() if node is not None else ""


def _query_slots(element: ET.Element, qid: str, path: Path, line: int | None) -> tuple[str, ...]:
    """``(slot0, slot1, ...)`` of a query element (2014 ``<slot>`` = ``<slot0>``)."""
    first = _field(element, "slot0") or _field(element, "slot")
    if not first:
        raise BundleError(path, line, f"query {qid!r} has no <slot0>")
    slots = [first]
    while _field(element, f"slot{len(slots)}"):
        slots.append(_field(element, f"slot{len(slots)}"))
    for slot in slots:
        if ":" not in slot:
            raise BundleError(
                path, line, f"query {qid!r}: slot {slot!r} is not of the form type:name"
            )
    return tuple(slots)


def _query_frame(out: list[_Query]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sf_query_id": [q.sf_query_id for q in out],
            "slots": [q.slots for q in out],
            "slot": [q.slots[0] for q in out],
            "entity": [q.entity for q in out],
            "enttype": [q.enttype for q in out],
            "docid": [q.docid for q in out],
            "beg": [q.beg for q in out],
            "end": [q.end for q in out],
            "ldc_query_id": [q.ldc_query_id for q in out],
        }
    )


def is_ldc_query_file(path: Path | str) -> bool:
    """True when the XML query file is an LDC query file (queries with ``<mentions>``)."""
    return any(
        element.find("mentions") is not None or len(element.findall("docid")) > 1
        for element, _, _ in _query_elements(Path(path))
    )


def read_sf_queries(path: Path | str) -> pd.DataFrame:
    """Read an SF query XML file: one row per query with ``sf_query_id, slots`` (a tuple,
    ``slot0`` first), ``slot`` (= slot0), ``entity, enttype, docid, beg, end, ldc_query_id``
    (empty)."""
    path = Path(path)
    out: list[_Query] = []
    seen: dict[str, int] = {}
    for element, line, qid in _query_elements(path):
        if element.find("mentions") is not None or len(element.findall("docid")) > 1:
            raise BundleError(
                path,
                line,
                f"query {qid!r} has several entry points (an LDC query file); "
                "read it with read_ldc_queries (import_tac_kbp recognises it)",
            )
        if qid in seen:
            raise BundleError(path, line, f"duplicate query id {qid!r} (first at line {seen[qid]})")
        seen[qid] = line or 0
        out.append(
            _Query(
                qid,
                _query_slots(element, qid, path, line),
                _field(element, "name"),
                _field(element, "enttype"),
                _field(element, "docid"),
                _field(element, "beg"),
                _field(element, "end"),
            )
        )
    return _query_frame(out)


def sf_query_hash(docid: str, beg: str | int, end: str | int, slots: tuple[str, ...]) -> str:
    """The 10 hex digits that name the SF query of one LDC entry point.

    As the official Cold Start tools derive them (``Query::get_short_uuid`` in ``ColdStartLib.pm``,
    used by ``CS-Score -expand``): the last 10 characters of the UUID version 3 (MD5, nil
    namespace) of ``"<docid>:<beg>:<end>:<slot0>[:<slot1>...]"``.
    """
    name = f"{docid}:{beg}:{end}:" + ":".join(slots)
    return str(uuid.uuid3(uuid.UUID(int=0), name))[-10:]


def read_ldc_queries(path: Path | str) -> pd.DataFrame:
    """Read an LDC query XML file: one row per entry point (an SF query).

    Columns as :func:`read_sf_queries`; ``sf_query_id`` is the entry point's 10-digit hash
    (:func:`sf_query_hash`), which the runs' SF query ids end with, and ``ldc_query_id`` the LDC
    query's id.  Two entry points with the same hash (the same mention and slots) are one SF query.
    """
    path = Path(path)
    out: list[_Query] = []
    seen: dict[str, str] = {}
    for element, line, qid in _query_elements(path):
        slots = _query_slots(element, qid, path, line)
        mentions = element.findall("./mentions/mention") or [element]
        for mention in mentions:
            docid, beg, end = (_field(mention, t) for t in ("docid", "beg", "end"))
            if not docid or not beg.isdigit() or not end.isdigit():
                raise BundleError(
                    path,
                    line,
                    f"query {qid!r}: an entry point needs <docid>, and integer <beg> and <end>",
                )
            key = sf_query_hash(docid, beg, end, slots)
            if key in seen:
                continue
            seen[key] = qid
            out.append(
                _Query(
                    key,
                    slots,
                    _field(mention, "name"),
                    _field(element, "enttype"),
                    docid,
                    beg,
                    end,
                    qid,
                )
            )
    return _query_frame(out)


# ---------------------------------------------------------------------------------------------
# the importer


class _QueryResolver:
    """Maps an SF query id (hop 0, or derived ``<root>_<hash>[_<hash>]``) to its root and hop.

    With ``by_hash`` (an LDC query file) the known keys are the entry points' 10-digit hashes and
    a root is any id whose last ``_`` part is one of them (``CSSF17_ENG_afddc4ed21``); the first
    full id seen for a hash names it in the bundle (:attr:`full`).
    """

    def __init__(self, queries: pd.DataFrame, by_hash: bool = False) -> None:
        self.slots = dict(zip(queries["sf_query_id"], queries["slots"], strict=True))
        self.by_hash = by_hash
        self.full: dict[str, str] = {}

    def resolve(self, sf_query_id: str) -> tuple[str, int, str] | None:
        """(root as written in the id, hop, query key) or None."""
        if sf_query_id in self.slots and not self.by_hash:
            return sf_query_id, 0, sf_query_id
        parts = sf_query_id.split("_")
        if self.by_hash:
            for i, part in enumerate(parts):
                if part in self.slots:
                    rest = parts[i + 1 :]
                    if not all(rest):
                        return None
                    root = "_".join(parts[: i + 1])
                    self.full.setdefault(part, root)
                    return root, len(rest), part
            return None
        # the longest known prefix ending before an underscore; every later part is one hop
        cut = len(sf_query_id)
        while (cut := sf_query_id.rfind("_", 0, cut)) > 0:
            root = sf_query_id[:cut]
            if root in self.slots:
                rest = sf_query_id[cut + 1 :].split("_")
                return (root, len(rest), root) if all(rest) else None
        return None

    def check(self, sf_query_id: str, slot: str) -> tuple[str, int, str] | str:
        """(root, hop, key), or what is wrong with this (query id, slot) pair."""
        found = self.resolve(sf_query_id)
        if found is None:
            return f"query {sf_query_id!r} is not in the query file"
        root, hop, key = found
        slots = self.slots[key]
        if hop >= len(slots):
            return (
                f"query {sf_query_id!r} is hop {hop} of {root!r}, "
                f"which asks only {len(slots)} slot(s)"
            )
        if slot != slots[hop]:
            return f"slot {slot!r} is not the slot query {sf_query_id!r} asks ({slots[hop]!r} at hop {hop})"
        return found

    def canonical(self, key: str) -> str:
        """The SF query id of a key in the bundle."""
        if not self.by_hash:
            return key
        if key in self.full:
            return self.full[key]
        prefixes = Counter(full[: -len(k) - 1] for k, full in self.full.items())
        prefix = prefixes.most_common(1)[0][0] if prefixes else "CSSF"
        return f"{prefix}_{key}" if prefix else key


def _resolve_rows(
    frame: pd.DataFrame,
    path: Path,
    resolver: _QueryResolver,
    include_hop1: bool,
) -> tuple[pd.DataFrame, int]:
    """Attach ``query_id, hop, parent_query`` to run or assessment rows; drop hop>0 unless kept."""
    codes, pairs = pd.factorize(
        pd.MultiIndex.from_arrays([frame["sf_query_id"], frame["slot"]]), sort=False
    )
    resolved = [resolver.check(qid, slot) for qid, slot in pairs]
    failed = np.array([isinstance(r, str) for r in resolved], dtype=bool)
    _first_error(
        path,
        frame["line"].to_numpy(),
        [(failed[codes], lambda i: resolved[codes[i]])],  # type: ignore[arg-type]
    )
    hops = np.array([r[1] for r in resolved], dtype=np.int64)[codes]
    # the id as the bundle names it: the root's canonical id (LDC: the first full id of its hash)
    sf_ids = np.array(
        [
            resolver.canonical(r[2]) + qid[len(r[0]) :]
            for r, (qid, _) in zip(resolved, pairs, strict=True)
        ],
        dtype=object,
    )[codes]
    parents = np.array(
        [f"{resolver.canonical(r[2])}:{resolver.slots[r[2]][0]}" for r in resolved], dtype=object
    )[codes]
    frame = frame.assign(
        sf_query_id=sf_ids,
        hop=hops,
        query_id=sf_ids + ":" + frame["slot"].to_numpy(dtype=object),
        parent_query=np.where(hops > 0, parents, ""),
    )
    skipped = 0
    if not include_hop1:
        keep = hops == 0
        skipped = int((~keep).sum())
        frame = frame[keep]
    return frame.reset_index(drop=True), skipped


def queries_from_responses(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The SF queries the runs and assessments name (no query file), as :func:`read_sf_queries`.

    An id that extends another named id by ``_<suffix>`` is derived from it (one hop per suffix);
    a root's slot at hop k is the slot its hop-k ids are asked (the first seen; the importer then
    checks every row against it).
    """
    pairs = pd.concat([f[["sf_query_id", "slot"]] for f in frames], ignore_index=True)
    pairs = pairs.drop_duplicates()
    ids = set(pairs["sf_query_id"])

    def root_of(qid: str) -> tuple[str, int]:
        cut, root, hop = len(qid), qid, 0
        while (cut := qid.rfind("_", 0, cut)) > 0:
            if qid[:cut] in ids:
                root, hop = qid[:cut], qid.count("_") - qid[:cut].count("_")
        return root, hop

    slots: dict[str, dict[int, str]] = {}
    for qid, slot in zip(pairs["sf_query_id"], pairs["slot"], strict=True):
        root, hop = root_of(qid)
        slots.setdefault(root, {}).setdefault(hop, slot)
    out = []
    for root, by_hop in slots.items():
        if 0 not in by_hop:  # pragma: no cover - a root is hop 0 of itself
            continue
        chain = [by_hop[0]]
        while len(chain) in by_hop:
            chain.append(by_hop[len(chain)])
        out.append(_Query(root, tuple(chain), "", "", "", "", ""))
    return _query_frame(out)


def tac_config(name: str = "tac-kbp") -> TaskConfig:
    """``task.toml`` settings for an imported TAC bundle: the TAC label vocabulary, INEXACT wrong,
    unassessed responses ignored by the official census (CS-Score's rule)."""
    labels = dict(DEFAULT_LABELS)
    labels.update(TAC_LABELS)
    return TaskConfig(name=name, labels=labels, inexact_policy="wrong", unjudged="ignore")


def _read_runs(runs: list[Path]) -> list[tuple[Path, pd.DataFrame]]:
    """Read every run file; two files may not share a run id."""
    message = "run id {id!r} also appears in {owner}; give each run its own id"
    return read_run_files(runs, read_sf_run, "run_id", message)


def _read_query_file(
    queries: Path | None, frames: list[pd.DataFrame]
) -> tuple[pd.DataFrame, _QueryResolver]:
    if queries is None:
        qframe = queries_from_responses(frames)
        return qframe, _QueryResolver(qframe)
    if is_ldc_query_file(queries):
        qframe = read_ldc_queries(queries)
        return qframe, _QueryResolver(qframe, by_hash=True)
    qframe = read_sf_queries(queries)
    return qframe, _QueryResolver(qframe)


def _runs_table(rframe: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "system": rframe["run_id"],
            "query_id": rframe["query_id"],
            "answer": rframe["filler"],
            "score": rframe["confidence"],
            "provenance": rframe["filler_provenance"],
            "relation_provenance": rframe["relation_provenance"],
            "filler_type": rframe["filler_type"],
            "node_id": rframe["node_id"],
            "sf_query_id": rframe["sf_query_id"],
            "slot": rframe["slot"],
            "hop": rframe["hop"].astype(str),
            "source": rframe["source"],
        }
    )


def _judgments_table(aframe: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": aframe["query_id"],
            "answer": aframe["filler"],
            "label": aframe["code"],
            "equivalence_class": aframe["equivalence_class"],
            "provenance": aframe["filler_provenance"],
            "relation_provenance": aframe["relation_provenance"],
            "response_id": aframe["response_id"],
            "justification": aframe["justification"],
            "filler_mention_type": aframe["filler_mention_type"],
            "ec_mention_type": aframe["ec_mention_type"],
            "sf_query_id": aframe["sf_query_id"],
            "slot": aframe["slot"],
            "hop": aframe["hop"].astype(str),
            "source": aframe["source"],
        }
    )


def _queries_table(
    qframe: pd.DataFrame, resolver: _QueryResolver, derived: list[pd.DataFrame]
) -> pd.DataFrame:
    sf_ids = qframe["sf_query_id"].map(resolver.canonical)
    hop0 = pd.DataFrame(
        {
            "query_id": sf_ids + ":" + qframe["slot"],
            "sf_query_id": sf_ids,
            "slot": qframe["slot"],
            "entity": qframe["entity"],
            "enttype": qframe["enttype"],
            "docid": qframe["docid"],
            "beg": qframe["beg"],
            "end": qframe["end"],
            "hop": "0",
            "parent_query": "",
        }
    )
    if resolver.by_hash:
        hop0["ldc_query_id"] = qframe["ldc_query_id"].to_numpy()
    extra = pd.concat(derived, ignore_index=True)
    if not len(extra):
        return hop0
    extra = extra.drop_duplicates("query_id")
    hop_n = pd.DataFrame(
        {
            "query_id": extra["query_id"],
            "sf_query_id": extra["sf_query_id"],
            "slot": extra["slot"],
            "entity": "",
            "enttype": "",
            "docid": "",
            "beg": "",
            "end": "",
            "hop": extra["hop"].astype(str),
            "parent_query": extra["parent_query"],
        }
    )
    if resolver.by_hash:
        hop_n["ldc_query_id"] = ""
    return pd.concat([hop0, hop_n], ignore_index=True).reset_index(drop=True)


def import_tac_kbp(
    queries: Path | str | None,
    runs: list[Path] | list[str],
    assessments: Path | str | None,
    *,
    include_hop1: bool = False,
    name: str | None = None,
) -> tuple[dict[str, pd.DataFrame], TaskConfig]:
    """Convert TAC Cold Start SF files into bundle tables and a config (see the module docstring).

    Parameters
    ----------
    queries : the SF query file (``sf-query.xml``), the LDC query file (``ldc-query.xml``; its
        entry points are expanded into SF queries as CS-Score ``-expand`` does), or None (the
        queries the runs and assessments name).
    runs : one or more SF run files; the run id in their third column names the system.  Two
        files may not use the same run id.
    assessments : the assessment file (``qrel.txt``), or None for an unjudged task.
    include_hop1 : keep hop-1 (and deeper) responses and assessments as derived bundle queries.
    name : the task name in ``task.toml`` (default ``"tac-kbp"``).

    Returns
    -------
    (tables, config) : ``tables`` holds ``queries``, ``runs`` and (with assessments)
        ``judgments`` frames ready for :func:`receval.formats.bundle.write_bundle`.

    Raises
    ------
    BundleError : malformed input, naming the file and line.
    """
    if not runs:
        raise ValueError("at least one run file is needed")
    run_files = _read_runs([Path(r) for r in runs])
    apath = Path(assessments) if assessments is not None else None
    aframe = read_assessments(apath) if apath is not None else None
    frames = [f for _, f in run_files] + ([aframe] if aframe is not None else [])
    qframe, resolver = _read_query_file(Path(queries) if queries is not None else None, frames)

    # assessments first: with an LDC query file the first full id seen names each SF query
    tables: dict[str, pd.DataFrame] = {}
    derived = []
    if aframe is not None and apath is not None:
        aframe, skipped = _resolve_rows(aframe, apath, resolver, include_hop1)
        aframe["source"] = apath.name + ":" + aframe["line"].astype(str)
        derived.append(aframe[aframe["hop"] > 0])
        judgments = _judgments_table(aframe)
        judgments.attrs["hop1_rows_skipped"] = skipped
        tables["judgments"] = judgments

    run_parts = []
    skipped_runs = 0
    for run_path, frame in run_files:
        frame, skipped = _resolve_rows(frame, run_path, resolver, include_hop1)
        skipped_runs += skipped
        frame["source"] = run_path.name + ":" + frame["line"].astype(str)
        run_parts.append(frame)
    rframe = pd.concat(run_parts, ignore_index=True)
    derived.insert(0, rframe[rframe["hop"] > 0])
    runs_table = _runs_table(rframe)
    runs_table.attrs["hop1_rows_skipped"] = skipped_runs

    queries_table = _queries_table(qframe, resolver, derived)
    tables = {"queries": queries_table, "runs": runs_table, **tables}
    return tables, tac_config(name or "tac-kbp")
