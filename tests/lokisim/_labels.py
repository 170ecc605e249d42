"""Prometheus/LogQL label sets and stream selectors: lexing, parsing, formatting.

Loki parses a pushed stream's ``labels`` string with Prometheus' ``ParseMetric``
(``syntax.ParseLabels`` in ``pkg/logql/syntax/parser.go``) and prints label sets
with Prometheus' ``labels.Labels.String()``: sorted by name, ``{a="b", c="d"}``,
values quoted with Go's ``strconv.Quote``. This module reproduces both, plus the
stream selector (``{app="x", env=~"p.*"}``) that LogQL shares with PromQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "LABEL_NAME_RE",
    "LabelParseError",
    "Matcher",
    "Token",
    "describe",
    "format_labels",
    "go_quote",
    "go_unquote",
    "parse_label_set",
    "parse_matchers",
    "tokenize",
    "triple",
]

# Prometheus' legacy label-name charset, the one Loki's push path accepts unquoted.
LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NUMBER_RE = re.compile(r"[0-9]+(\.[0-9]+)?")

_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t"}
_GO_ESCAPES["\v"] = r"\v"
_GO_UNESCAPES = {"a": 0x07, "b": 0x08, "f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_GO_UNESCAPES["\\"] = 0x5C

# Longest operators first so that "=~" is not read as "=" then "~".
_OPERATORS = ("|=", "|~", "|>", "!=", "!~", "!>", "=~", "==", ">=", "<=", "=", ">", "<", "|")
_PUNCT = {"{": "{", "}": "}", ",": ",", "(": "(", ")": ")"}


class LabelParseError(ValueError):
    """A label set, selector or LogQL query is malformed.

    Attributes:
        detail: what is wrong, in Prometheus/LogQL parser wording.
        offset: 0-based character offset of the offending token.
    """

    def __init__(self, detail: str, offset: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset


@dataclass(frozen=True)
class Token:
    """One lexical token: ``kind`` is ``ident``, ``string``, ``number``, ``eof`` or the operator."""

    kind: str
    text: str
    offset: int
    value: str = ""


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a stream selector (``name op "value"``).

    Regexes are fully anchored, as in Prometheus (``re.fullmatch``).
    """

    name: str
    op: str
    value: str
    _regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def build(cls, name: str, op: str, value: str, offset: int = 0) -> Matcher:
        """Build a matcher, compiling the regex of ``=~``/``!~``.

        Args:
            name: label name.
            op: one of ``=``, ``!=``, ``=~``, ``!~``.
            value: the literal or the regex.
            offset: where the value starts, for the error message.

        Returns:
            The matcher.

        Raises:
            LabelParseError: the regex does not compile.
        """
        regex = None
        if op in ("=~", "!~"):
            try:
                regex = re.compile(value, re.DOTALL)
            except re.error as exc:
                raise LabelParseError(f"error parsing regexp: {exc}", offset) from exc
        return cls(name, op, value, regex)

    def matches(self, value: str) -> bool:
        """Tell whether a label value (``""`` when absent) satisfies the matcher.

        Args:
            value: the label's value, or ``""`` when the label is absent.

        Returns:
            True when it matches.
        """
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        if self._regex is None:  # pragma: no cover - build() always compiles
            raise ValueError(f"matcher {self.name}{self.op} has no regex")
        found = self._regex.fullmatch(value) is not None
        return found if self.op == "=~" else not found


def go_quote(value: str) -> str:
    """Quote a string the way Go's ``strconv.Quote`` does.

    Args:
        value: any string.

    Returns:
        The double-quoted, escaped form.
    """
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_unquote(text: str, offset: int = 0) -> str:
    """Unquote a Go/PromQL string literal: ``"..."``, ``'...'`` or a raw backtick string.

    Args:
        text: the literal including its quotes.
        offset: where the literal starts in the query, for error messages.

    Returns:
        The decoded string.

    Raises:
        LabelParseError: an invalid escape or a missing closing quote.
    """
    quote = text[:1]
    if len(text) < 2 or text[-1] != quote or quote not in "\"'`":
        raise LabelParseError("unterminated quoted string", offset)
    body = text[1:-1]
    if quote == "`":
        # Go drops carriage returns from raw strings.
        return body.replace("\r", "")
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\n":
            raise LabelParseError("newline in string", offset + i + 1)
        if ch != "\\":
            out += ch.encode()
            i += 1
            continue
        i = _unescape(body, i + 1, quote, out, offset)
    return out.decode("utf-8", errors="replace")


def _unescape(body: str, i: int, quote: str, out: bytearray, offset: int) -> int:
    """Decode the escape after a backslash at ``body[i-1]``; return the next index."""
    if i >= len(body):
        raise LabelParseError("invalid syntax", offset)
    ch = body[i]
    if ch in _GO_UNESCAPES:
        out.append(_GO_UNESCAPES[ch])
        return i + 1
    if ch == quote:
        out += ch.encode()
        return i + 1
    widths = {"x": 2, "u": 4, "U": 8}
    if ch in widths:
        digits = body[i + 1 : i + 1 + widths[ch]]
        if len(digits) != widths[ch] or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise LabelParseError("invalid syntax", offset + i)
        number = int(digits, 16)
        if ch == "x":
            out.append(number)
        elif number > 0x10FFFF or 0xD800 <= number <= 0xDFFF:
            raise LabelParseError("invalid syntax", offset + i)
        else:
            out += chr(number).encode()
        return i + 1 + widths[ch]
    digits = body[i : i + 3]
    if len(digits) == 3 and all(c in "01234567" for c in digits) and int(digits, 8) <= 0xFF:
        out.append(int(digits, 8))
        return i + 3
    raise LabelParseError("invalid syntax", offset + i)


def tokenize(text: str) -> list[Token]:
    """Split a label set, selector or LogQL query into tokens.

    Args:
        text: the source.

    Returns:
        The tokens, ending with an ``eof`` token.

    Raises:
        LabelParseError: an unterminated string or a bad escape.
    """
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _PUNCT:
            tokens.append(Token(_PUNCT[ch], ch, i))
            i += 1
        elif ch in "\"'`":
            end = _string_end(text, i)
            literal = text[i:end]
            tokens.append(Token("string", literal, i, go_unquote(literal, i)))
            i = end
        elif match := _METRIC_NAME_RE.match(text, i):
            tokens.append(Token("ident", match.group(), i, match.group()))
            i = match.end()
        elif match := _NUMBER_RE.match(text, i):
            tokens.append(Token("number", match.group(), i, match.group()))
            i = match.end()
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, i)), None)
            # An unknown character becomes a token so the parser reports it in context.
            tokens.append(Token(op or "char", op or ch, i))
            i += len(op or ch)
    tokens.append(Token("eof", "", len(text)))
    return tokens


def _string_end(text: str, start: int) -> int:
    """Return the index just past the string literal opening at ``start``."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\" and quote != "`":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    raise LabelParseError("unterminated quoted string", start)


def describe(token: Token, eof: str = "end of input") -> str:
    """Name a token the way the parsers' error messages do.

    Args:
        token: the unexpected token.
        eof: how to name the end of the input (PromQL and LogQL differ).

    Returns:
        e.g. ``'!='``, ``string "x"`` or ``end of input``.
    """
    if token.kind == "eof":
        return eof
    if token.kind in ("ident", "string", "number"):
        return f"{token.kind} {token.text}"
    if token.kind == "char":
        return f"character {token.text!r}"
    return repr(token.text)


def triple(tokens: list[Token], pos: int) -> tuple[Token, Token, Token]:
    """Return the three tokens from ``pos``, padded with the final ``eof`` token."""
    eof = tokens[-1]
    padded = [*tokens[pos : pos + 3], eof, eof, eof]
    return padded[0], padded[1], padded[2]


def parse_label_set(text: str) -> list[tuple[str, str]]:
    """Parse a Prometheus label set the way Loki's ``syntax.ParseLabels`` does.

    Accepts an optional metric name (``up{a="b"}`` gives ``__name__="up"``), a
    trailing comma and ``{}``; only ``=`` is allowed. Duplicates and empty values are
    kept: ``_limits.parse_stream_labels`` handles them as Loki does.

    Args:
        text: e.g. ``{service_name="api", layer="node"}``.

    Returns:
        The (name, value) pairs in source order.

    Raises:
        LabelParseError: the text is not a label set.
    """
    tokens = tokenize(text)
    pos = 0
    pairs: list[tuple[str, str]] = []
    if tokens[0].kind == "ident":
        pairs.append(("__name__", tokens[0].value))
        pos = 1
    if tokens[pos].kind != "{":
        raise LabelParseError(f"unexpected {describe(tokens[pos])}", tokens[pos].offset)
    pos += 1
    while tokens[pos].kind != "}":
        name, op, value = triple(tokens, pos)
        if name.kind != "ident" or not LABEL_NAME_RE.fullmatch(name.text):
            raise LabelParseError(f"unexpected {describe(name)} in label set", name.offset)
        if op.kind != "=":
            raise LabelParseError(
                f'unexpected {describe(op)} in label set, expected "="', op.offset
            )
        if value.kind != "string":
            raise LabelParseError(f"unexpected {describe(value)} in label set", value.offset)
        pairs.append((name.text, value.value))
        pos += 3
        if tokens[pos].kind == ",":
            pos += 1
        elif tokens[pos].kind != "}":
            raise LabelParseError(
                f"unexpected {describe(tokens[pos])} in label set", tokens[pos].offset
            )
    if tokens[pos + 1].kind != "eof":
        extra = tokens[pos + 1]
        raise LabelParseError(f"unexpected {describe(extra)}", extra.offset)
    return pairs


def parse_matchers(tokens: list[Token], pos: int) -> tuple[list[Matcher], int]:
    """Parse a stream selector ``{name op "value", ...}`` starting at ``tokens[pos]``.

    Args:
        tokens: output of :func:`tokenize`.
        pos: index of the opening brace.

    Returns:
        The matchers and the index just past the closing brace.

    Raises:
        LabelParseError: the selector is malformed.
    """
    if tokens[pos].kind != "{":
        raise LabelParseError(
            f"syntax error: unexpected {describe(tokens[pos], '$end')}", tokens[pos].offset
        )
    pos += 1
    matchers: list[Matcher] = []
    while tokens[pos].kind != "}":
        name, op, value = triple(tokens, pos)
        if name.kind != "ident" or not LABEL_NAME_RE.fullmatch(name.text):
            raise LabelParseError(
                f"syntax error: unexpected {describe(name, '$end')}, expecting IDENTIFIER",
                name.offset,
            )
        if op.kind not in ("=", "!=", "=~", "!~"):
            raise LabelParseError(
                f"syntax error: unexpected {describe(op, '$end')}, expecting = or =~ or !~ or !=",
                op.offset,
            )
        if value.kind != "string":
            raise LabelParseError(
                f"syntax error: unexpected {describe(value, '$end')}, expecting STRING",
                value.offset,
            )
        matchers.append(Matcher.build(name.text, op.kind, value.value, value.offset))
        pos += 3
        if tokens[pos].kind == ",":
            pos += 1
        elif tokens[pos].kind != "}":
            raise LabelParseError(
                f"syntax error: unexpected {describe(tokens[pos], '$end')}, expecting }} or ,",
                tokens[pos].offset,
            )
    return matchers, pos + 1


def format_labels(
    labels: Mapping[str, str] | Iterable[tuple[str, str]], *, quote_names: bool = True
) -> str:
    """Print a label set as Prometheus' ``labels.Labels.String()`` does.

    Args:
        labels: a mapping or (name, value) pairs; pairs keep duplicates.
        quote_names: quote names outside the legacy charset (Prometheus 3); False
            prints them raw, as Loki's JSON ``LabelSet.String()`` does.

    Returns:
        ``{a="b", c="d"}``, sorted by name.
    """
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    parts = []
    for name, value in sorted(pairs, key=lambda pair: pair[0]):
        shown = name if not quote_names or LABEL_NAME_RE.fullmatch(name) else go_quote(name)
        parts.append(f"{shown}={go_quote(value)}")
    return "{" + ", ".join(parts) + "}"


# xxHash64 (Yann Collet's XXH64, seed 0), as Prometheus' labels.Hash uses it through
# github.com/cespare/xxhash: written from the algorithm's description, for stream hashes.
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_MASK = (1 << 64) - 1


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK, 31) * _P1) & _MASK


def xxh64(data: bytes) -> int:
    """The 64-bit xxHash of ``data`` with seed 0."""
    size, offset = len(data), 0
    if size >= 32:
        v1, v2, v3, v4 = (_P1 + _P2) & _MASK, _P2, 0, (-_P1) & _MASK
        while offset + 32 <= size:
            a, b, c, d = (
                int.from_bytes(data[offset + i : offset + i + 8], "little") for i in (0, 8, 16, 24)
            )
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            offset += 32
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for lane in (v1, v2, v3, v4):
            acc = ((acc ^ _round(0, lane)) * _P1 + _P4) & _MASK
    else:
        acc = _P5
    acc = (acc + size) & _MASK
    while offset + 8 <= size:
        lane = int.from_bytes(data[offset : offset + 8], "little")
        acc = (_rotl(acc ^ _round(0, lane), 27) * _P1 + _P4) & _MASK
        offset += 8
    if offset + 4 <= size:
        lane = int.from_bytes(data[offset : offset + 4], "little")
        acc = (_rotl(acc ^ (lane * _P1 & _MASK), 23) * _P2 + _P3) & _MASK
        offset += 4
    while offset < size:
        acc = (_rotl(acc ^ (data[offset] * _P5 & _MASK), 11) * _P1) & _MASK
        offset += 1
    acc = ((acc ^ (acc >> 33)) * _P2) & _MASK
    acc = ((acc ^ (acc >> 29)) * _P3) & _MASK
    return acc ^ (acc >> 32)


def stream_hash(labels: Mapping[str, str]) -> int:
    """A stream's hash as Loki's queriers order streams by it: Prometheus' ``labels.Hash()``,
    the xxHash64 of each ``name 0xff value 0xff`` in name order."""
    data = b"".join(
        name.encode() + b"\xff" + value.encode() + b"\xff" for name, value in sorted(labels.items())
    )
    return xxh64(data)
