"""The SQL functions whose spelling differs between the engines, one small table per dialect.

An aggregation is written once (:mod:`receval.engine.queries`); where it needs a function the
two dialects spell differently (regular-expression replace, string literals with backslashes,
hashing, Unicode normal forms), it asks the engine's :class:`Dialect` for the SQL of that call:

>>> from receval.engine.dialect import DIALECTS
>>> DIALECTS["duckdb"].regexp_replace("answer", " +", " ")
"regexp_replace(answer, ' +', ' ', 'g')"

``stable_hash`` is the same 60-bit integer in DuckDB and Spark (the first 15 hex digits of the
MD5 of the text), for draws that must not depend on the engine; ``hash64`` is each engine's fast
native hash (DuckDB's ``hash``, Spark's ``xxhash64``: different values).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """How one engine spells the functions that differ (templates over ``{s}`` etc.).

    ``nfc``/``nfkc`` are None where the engine has no such normal form.
    """

    name: str
    backslash_escapes: bool  #: string literals treat ``\\`` as an escape (Spark SQL)
    regexp_replace_sql: str
    regexp_matches_sql: str
    hash64_sql: str
    stable_hash_sql: str
    nfc_sql: str | None
    nfkc_sql: str | None

    def literal(self, text: str) -> str:
        """``text`` as a SQL string literal of this dialect."""
        if self.backslash_escapes:
            text = text.replace("\\", "\\\\")
        return "'" + text.replace("'", "''" if not self.backslash_escapes else "\\'") + "'"

    def regexp_replace(self, s: str, pattern: str, replacement: str) -> str:
        """Replace every match of ``pattern`` (Java / RE2 syntax both read) in ``s``."""
        return self.regexp_replace_sql.format(
            s=s, p=self.literal(pattern), r=self.literal(replacement)
        )

    def regexp_matches(self, s: str, pattern: str) -> str:
        """True where ``pattern`` matches somewhere in ``s``."""
        return self.regexp_matches_sql.format(s=s, p=self.literal(pattern))

    def hash64(self, *columns: str) -> str:
        """The engine's native 64-bit hash of ``columns`` (not the same across engines)."""
        return self.hash64_sql.format(cols=", ".join(columns))

    def stable_hash(self, text: str) -> str:
        """A non-negative 60-bit integer from the MD5 of the text expression ``text``: the same
        value in every dialect."""
        return self.stable_hash_sql.format(s=text)

    def normal_form(self, s: str, form: str) -> str:
        """``s`` in Unicode normal form ``form`` (``NFC``/``NFKC``); ValueError where the
        engine has none."""
        template = {"NFC": self.nfc_sql, "NFKC": self.nfkc_sql}.get(form.upper())
        if template is None:
            raise ValueError(f"the {self.name} engine has no Unicode {form} normalisation")
        return template.format(s=s)


DIALECTS = {
    "duckdb": Dialect(
        name="duckdb",
        backslash_escapes=False,
        regexp_replace_sql="regexp_replace({s}, {p}, {r}, 'g')",
        regexp_matches_sql="regexp_matches({s}, {p})",
        hash64_sql="hash({cols})",
        stable_hash_sql="CAST('0x' || substr(md5({s}), 1, 15) AS BIGINT)",
        nfc_sql="nfc_normalize({s})",
        nfkc_sql=None,
    ),
    "spark": Dialect(
        name="spark",
        backslash_escapes=True,
        regexp_replace_sql="regexp_replace({s}, {p}, {r})",
        regexp_matches_sql="({s} RLIKE {p})",
        hash64_sql="xxhash64({cols})",
        stable_hash_sql="CAST(conv(substr(md5({s}), 1, 15), 16, 10) AS BIGINT)",
        # ICU4J ships with Spark >= 4.0 (collations); its static compose(String, boolean compat)
        nfc_sql="reflect('com.ibm.icu.text.Normalizer', 'compose', {s}, false)",
        nfkc_sql="reflect('com.ibm.icu.text.Normalizer', 'compose', {s}, true)",
    ),
}
