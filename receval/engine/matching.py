"""Answer normalisation per ``[matching]`` as SQL, equal to :func:`receval.task.normalize_answers`.

The Python definition: Unicode normal form (Arrow's ``utf8_normalize``), whitespace runs (every
character :meth:`str.isspace` accepts) collapsed to one space, stripped, then case folded with
:meth:`str.casefold`.  In SQL:

* whitespace: regular expressions over the explicit class of those characters (``\\x{...}``
  escapes, read alike by Java and RE2), anchored with ``\\A``/``\\z`` (Java's ``$`` would also
  match before a final line break);
* case folding: **not** the engine's ``lower``.  Spark's ``lower`` is Java's
  ``String.toLowerCase``, which differs from full case folding (``ß`` stays ``ß``, not ``ss``;
  ``ﬁ`` stays a ligature; a word-final ``Σ`` becomes ``ς``, folded ``σ``; Cherokee small letters
  fold to capitals; ``ſ``, ``ϐ``, ``µ`` and others fold to other letters; it follows the JVM's
  Unicode version).  So an ASCII answer is lowered (``lower`` and ``casefold`` agree on ASCII),
  and any other answer goes through a table built here from this Python's own
  :meth:`str.casefold` over every code point: one ``translate`` for the characters that fold to
  one character, then one ``replace`` for each of the ~100 that fold to several (``ß`` →
  ``ss``).  Case folding is per code point without context, so the result is ``casefold``'s,
  character for character;
* Unicode normal forms: the engine's (Spark: ICU4J's ``Normalizer.compose``, shipped with Spark
  ≥ 4.0; DuckDB: NFC only).  Composition is stable across Unicode versions for characters both
  versions know; a character that ICU's Unicode version assigns and Arrow's does not (or the
  other way round) may normalise differently.  NFKC is refused where the engine lacks it.
"""

from __future__ import annotations

import functools

from receval.engine.dialect import Dialect


@functools.lru_cache(maxsize=1)
def casefold_table() -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """``(from, to, expansions)``: the code points whose :meth:`str.casefold` is one other
    character (``translate`` strings of equal length) and those that fold to several."""
    single_from, single_to, several = [], [], []
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        folded = char.casefold()
        if folded == char:
            continue
        if len(folded) == 1:
            single_from.append(char)
            single_to.append(folded)
        else:
            several.append((char, folded))
    return "".join(single_from), "".join(single_to), tuple(several)


def _whitespace() -> str:
    from receval.formats.tables import WHITESPACE

    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in WHITESPACE) + "]"


def normalise_steps(matching, dialect: Dialect) -> list[str]:
    """The SQL expressions, each over ``{s}`` (the previous step's value), that normalise an
    answer per ``matching`` (:class:`receval.config.Matching`) in ``dialect``.  Apply them in
    order, each in its own projection (so that no step repeats the text of the previous)."""
    steps = []
    if matching.unicode:
        steps.append(dialect.normal_form("{s}", matching.unicode))
    space = _whitespace()
    if matching.collapse_whitespace:
        steps.append(dialect.regexp_replace("{s}", space + "+", " "))
    if matching.strip:
        steps.append(dialect.regexp_replace("{s}", f"\\A{space}+|{space}+\\z", ""))
    if matching.casefold:
        steps.append(casefold_sql("{s}", dialect))
    return [_escape_braces(step) for step in steps]


def _escape_braces(step: str) -> str:
    """A step with every brace but ``{s}`` doubled, for :meth:`str.format`."""
    return step.replace("{", "{{").replace("}", "}}").replace("{{s}}", "{s}")


def casefold_sql(s: str, dialect: Dialect) -> str:
    """:meth:`str.casefold` of ``s`` in SQL (see the module's note)."""
    source, target, several = casefold_table()
    folded = f"translate({s}, {dialect.literal(source)}, {dialect.literal(target)})"
    for char, expansion in several:
        folded = f"replace({folded}, {dialect.literal(char)}, {dialect.literal(expansion)})"
    non_ascii = dialect.regexp_matches(s, "[^\\x{0}-\\x{7f}]")
    return f"CASE WHEN {non_ascii} THEN {folded} ELSE lower({s}) END"
