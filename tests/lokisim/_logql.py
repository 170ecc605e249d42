"""The LogQL subset the test server answers: log queries, no metric queries.

Grammar (``pkg/logql/syntax/syntax.y`` cut down)::

    query        := selector stage*
    stage        := line_filter | "|" ("json" | "logfmt") | "|" label_expr
    line_filter  := ("|=" | "!=" | "|~" | "!~") STRING ("or" STRING)*
    label_expr   := and_expr ("or" and_expr)*
    and_expr     := primary (("," | "and") primary)*
    primary      := "(" label_expr ")" | IDENT ("=" | "!=" | "=~" | "!~") STRING
                  | IDENT ("=" | "==" | "!=" | ">" | ">=" | "<" | "<=") NUMBER

Line-filter regexes search anywhere in the line (Go ``regexp.MatchString``); selector
and label-filter regexes are fully anchored (Prometheus matchers). Label filters see
stream labels, structured metadata and parsed labels, later ones winning.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tests.lokisim._labels import (
    LABEL_NAME_RE,
    LabelParseError,
    Matcher,
    Token,
    describe,
    parse_matchers,
    tokenize,
    triple,
)

__all__ = ["LogQLParseError", "LogQuery", "parse_query"]

# Loki's message when every matcher also matches the empty string
# (errAtleastOneEqualityMatcherRequired in pkg/logql/syntax/parser.go).
_EMPTY_COMPATIBLE = (
    "queries require at least one regexp or equality matcher that does not have an "
    'empty-compatible value. For instance, app=~".*" does not meet this requirement, '
    'but app=~".+" will'
)
_NUMERIC_OPS: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_LINE_OPS = ("|=", "!=", "|~", "!~")


class LogQLParseError(ValueError):
    """The query is not valid LogQL (or is outside the subset); str() is Loki's message."""


@dataclass(frozen=True)
class LineFilter:
    """``|= "a" or "b"``: keep lines containing (or, negated, lacking) any of the values."""

    op: str
    values: tuple[str, ...]
    regexes: tuple[re.Pattern[str], ...]

    def keep(self, line: str) -> bool:
        """Tell whether the line passes the filter."""
        if self.op in ("|~", "!~"):
            found = any(regex.search(line) for regex in self.regexes)
        else:
            found = any(value in line for value in self.values)
        return found if self.op in ("|=", "|~") else not found


@dataclass(frozen=True)
class LabelTest:
    """One label comparison of a label filter; an absent label reads as ``""``."""

    matcher: Matcher | None
    name: str
    op: str
    number: float = 0.0

    def test(self, view: Mapping[str, str]) -> bool:
        """Evaluate against the entry's labels."""
        if self.matcher is not None:
            return self.matcher.matches(view.get(self.name, ""))
        try:
            value = float(view.get(self.name, ""))
        except ValueError:
            # Loki marks the entry with __error__=LabelFilterErr; the subset drops it.
            return False
        return _NUMERIC_OPS[self.op](value, self.number)


@dataclass(frozen=True)
class LabelBool:
    """``left and right`` / ``left or right``."""

    op: str
    left: LabelTest | LabelBool
    right: LabelTest | LabelBool

    def test(self, view: Mapping[str, str]) -> bool:
        """Evaluate against the entry's labels."""
        if self.op == "and":
            return self.left.test(view) and self.right.test(view)
        return self.left.test(view) or self.right.test(view)


@dataclass(frozen=True)
class Parser:
    """``| json`` or ``| logfmt``: extract labels from the line."""

    kind: str


Stage = LineFilter | LabelTest | LabelBool | Parser


@dataclass(frozen=True)
class LogQuery:
    """A parsed log query: the stream selector and the pipeline stages in order."""

    matchers: tuple[Matcher, ...]
    stages: tuple[Stage, ...]

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Tell whether a stream's labels satisfy the selector."""
        return all(m.matches(labels.get(m.name, "")) for m in self.matchers)

    def process(
        self, labels: Mapping[str, str], metadata: Mapping[str, str], line: str
    ) -> dict[str, str] | None:
        """Run the pipeline over one entry of a selected stream.

        Args:
            labels: the stream's labels.
            metadata: the entry's structured metadata.
            line: the log line.

        Returns:
            The labels the parsers extracted (possibly empty), or None when a filter
            drops the entry.
        """
        parsed: dict[str, str] = {}
        for stage in self.stages:
            if isinstance(stage, LineFilter):
                if not stage.keep(line):
                    return None
            elif isinstance(stage, Parser):
                extracted = _parse_json(line) if stage.kind == "json" else _parse_logfmt(line)
                for key, value in extracted.items():
                    # Loki renames an extracted label that clashes with a stream label.
                    parsed[f"{key}_extracted" if key in labels else key] = value
            elif not stage.test({**labels, **metadata, **parsed}):
                return None
        return parsed


def parse_query(text: str) -> LogQuery:
    """Parse a LogQL log query.

    Args:
        text: e.g. ``{service_name="api"} |= "error" | allocation_id="a-9"``.

    Returns:
        The query.

    Raises:
        LogQLParseError: with Loki's ``parse error at line L, col C: ...`` wording.
    """
    try:
        tokens = tokenize(text)
        matchers, pos = parse_matchers(tokens, 0)
        stages: list[Stage] = []
        while tokens[pos].kind != "eof":
            stage, pos = _parse_stage(tokens, pos)
            stages.append(stage)
    except LabelParseError as exc:
        line = text.count("\n", 0, exc.offset) + 1
        col = exc.offset - (text.rfind("\n", 0, exc.offset) + 1) + 1
        raise LogQLParseError(f"parse error at line {line}, col {col}: {exc.detail}") from exc
    if all(m.matches("") for m in matchers):
        raise LogQLParseError(f"parse error : {_EMPTY_COMPATIBLE}")
    return LogQuery(tuple(matchers), tuple(stages))


def _unexpected(token: Token) -> LabelParseError:
    return LabelParseError(f"syntax error: unexpected {describe(token, '$end')}", token.offset)


def _parse_stage(tokens: list[Token], pos: int) -> tuple[Stage, int]:
    token = tokens[pos]
    if token.kind in _LINE_OPS:
        values = []
        pos += 1
        while True:
            if tokens[pos].kind != "string":
                raise _unexpected(tokens[pos])
            values.append(tokens[pos])
            pos += 1
            if not (tokens[pos].kind == "ident" and tokens[pos].text == "or"):
                break
            pos += 1
        regexes: tuple[re.Pattern[str], ...] = ()
        if token.kind in ("|~", "!~"):
            regexes = tuple(_compile(value.value, value.offset) for value in values)
        return LineFilter(token.kind, tuple(v.value for v in values), regexes), pos
    if token.kind != "|":
        raise _unexpected(token)
    pos += 1
    if tokens[pos].kind == "ident" and tokens[pos].text in ("json", "logfmt"):
        if tokens[pos + 1].kind == "string":
            raise LabelParseError("syntax error: parser parameters are not supported", pos)
        return Parser(tokens[pos].text), pos + 1
    return _parse_or(tokens, pos)


def _parse_or(tokens: list[Token], pos: int) -> tuple[LabelTest | LabelBool, int]:
    left, pos = _parse_and(tokens, pos)
    while tokens[pos].kind == "ident" and tokens[pos].text == "or":
        right, pos = _parse_and(tokens, pos + 1)
        left = LabelBool("or", left, right)
    return left, pos


def _parse_and(tokens: list[Token], pos: int) -> tuple[LabelTest | LabelBool, int]:
    left, pos = _parse_primary(tokens, pos)
    while tokens[pos].kind == "," or (tokens[pos].kind == "ident" and tokens[pos].text == "and"):
        right, pos = _parse_primary(tokens, pos + 1)
        left = LabelBool("and", left, right)
    return left, pos


def _parse_primary(tokens: list[Token], pos: int) -> tuple[LabelTest | LabelBool, int]:
    if tokens[pos].kind == "(":
        expr, pos = _parse_or(tokens, pos + 1)
        if tokens[pos].kind != ")":
            raise _unexpected(tokens[pos])
        return expr, pos + 1
    name, op, value = triple(tokens, pos)
    if name.kind != "ident" or not LABEL_NAME_RE.fullmatch(name.text):
        raise _unexpected(name)
    if value.kind == "string" and op.kind in ("=", "!=", "=~", "!~"):
        return LabelTest(
            Matcher.build(name.text, op.kind, value.value, value.offset), name.text, op.kind
        ), pos + 3
    if value.kind == "number" and op.kind in _NUMERIC_OPS:
        return LabelTest(None, name.text, op.kind, float(value.text)), pos + 3
    raise _unexpected(op if op.kind not in _NUMERIC_OPS and op.kind not in ("=~", "!~") else value)


def _compile(pattern: str, offset: int) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise LabelParseError(f"error parsing regexp: {exc}", offset) from exc


def _sanitize(key: str) -> str:
    """Make a JSON/logfmt key a label name, as Loki's ``sanitizeLabelKey`` does."""
    key = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return f"_{key}" if key[:1].isdigit() else key


def _parse_json(line: str) -> dict[str, str]:
    try:
        document = json.loads(line)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return {
            "__error__": "JSONParserErr",
            "__error_details__": "Value looks like object, but can't find closing '}' symbol",
        }
    out: dict[str, str] = {}
    _flatten(document, "", out)
    return out


def _flatten(node: dict[str, object], prefix: str, out: dict[str, str]) -> None:
    for key, value in node.items():
        name = _sanitize(f"{prefix}_{key}" if prefix else key)
        if isinstance(value, dict):
            _flatten(value, name, out)
        elif isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, str):
            out[name] = value
        elif isinstance(value, int | float):
            out[name] = json.dumps(value)
        # Arrays and nulls are skipped, as Loki's json parser does without parameters.


def _parse_logfmt(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for match in re.finditer(r'([^\s=]+)(?:=("(?:[^"\\]|\\.)*"|\S*))?', line):
        key, value = match.group(1), match.group(2) or ""
        if value.startswith('"'):
            try:
                value = json.loads(value)
            except ValueError:
                return {"__error__": "LogfmtParserErr"}
        out[_sanitize(key)] = value
    return out
