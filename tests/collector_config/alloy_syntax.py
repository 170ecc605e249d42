"""A parser for the subset of Grafana Alloy's configuration syntax that collector-config uses.

Alloy's syntax (https://grafana.com/docs/alloy/latest/get-started/syntax/): a file is a body
of attributes (``name = expression``) and blocks (``a.b.c "label" { body }``); expressions are
strings (double-quoted with escapes, or raw in backticks), numbers, ``true``/``false``/``null``,
lists ``[a, b]``, objects ``{ key = value, "key" = value }``, references to exports
(``loki.write.loki.receiver``), function calls (``coalesce(sys.env("X"), "d")``) and ``+``
(string concatenation). Comments are ``//`` and ``/* */``. Statements end at a newline, and a
list or object whose closing bracket is on its own line needs a trailing comma, as in Alloy.

Anything outside that subset is a :class:`AlloySyntaxError`, so a config that starts using more
of the language fails its tests until this parser learns it, rather than passing unchecked.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Final, TypeAlias

__all__ = [
    "AlloySyntaxError",
    "Block",
    "Call",
    "Concat",
    "Ref",
    "Value",
    "evaluate",
    "parse",
]


class AlloySyntaxError(ValueError):
    """Input outside the supported subset, with its line and column."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.line = line
        self.column = column


@dataclasses.dataclass(frozen=True)
class Ref:
    """A reference to a component export or a namespace, e.g. ``loki.write.loki.receiver``."""

    path: str


@dataclasses.dataclass(frozen=True)
class Call:
    """A function call, e.g. ``sys.env("HOME")``."""

    name: str
    args: tuple[Value, ...]


@dataclasses.dataclass(frozen=True)
class Concat:
    """``a + b + ...`` (Alloy concatenates strings with ``+``)."""

    parts: tuple[Value, ...]


Value: TypeAlias = (
    "str | int | float | bool | list[Value] | dict[str, Value] | Ref | Call | Concat | None"
)


@dataclasses.dataclass
class Block:
    """A block: ``name "label" { attributes and blocks }``; the file itself has name ``""``."""

    name: str
    label: str | None
    attributes: dict[str, Value]
    blocks: list[Block]
    line: int

    def children(self, name: str) -> list[Block]:
        """The child blocks called ``name``, in file order."""
        return [block for block in self.blocks if block.name == name]

    def child(self, name: str) -> Block:
        """The one child block called ``name``.

        Raises:
            LookupError: when there is not exactly one.
        """
        found = self.children(name)
        if len(found) != 1:
            raise LookupError(f"{self.name}: expected one {name} block, found {len(found)}")
        return found[0]


@dataclasses.dataclass(frozen=True)
class _Token:
    kind: str  # "ident", "string", "number", "punct", "eof"
    text: str
    value: object
    line: int
    column: int
    newline_before: bool


_PUNCT: Final = frozenset("{}[]()=,.+")
_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SIMPLE_ESCAPES: Final = {
    "\\": "\\",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "'": "'",
    '"': '"',
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.column = 1

    def error(self, message: str) -> AlloySyntaxError:
        return AlloySyntaxError(message, self.line, self.column)

    def advance(self, count: int) -> None:
        for char in self.text[self.pos : self.pos + count]:
            if char == "\n":
                self.line += 1
                self.column = 1
            else:
                self.column += 1
        self.pos += count

    def skip_space(self) -> bool:
        """Skip whitespace and comments; say whether a newline was among them."""
        newline = False
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\n":
                newline = True
                self.advance(1)
            elif char in " \t\r":
                self.advance(1)
            elif self.text.startswith("//", self.pos):
                end = self.text.find("\n", self.pos)
                self.advance((len(self.text) if end < 0 else end) - self.pos)
            elif self.text.startswith("/*", self.pos):
                end = self.text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated block comment")
                newline = newline or "\n" in self.text[self.pos : end]
                self.advance(end + 2 - self.pos)
            else:
                break
        return newline

    def tokens(self) -> Iterator[_Token]:
        while True:
            newline = self.skip_space()
            line, column = self.line, self.column
            if self.pos >= len(self.text):
                yield _Token("eof", "", None, line, column, True)
                return
            char = self.text[self.pos]
            if char == '"':
                start = self.pos
                value = self.string()
                yield _Token("string", self.text[start : self.pos], value, line, column, newline)
            elif char == "`":
                end = self.text.find("`", self.pos + 1)
                if end < 0:
                    raise self.error("unterminated raw string")
                value = self.text[self.pos + 1 : end]
                self.advance(end + 1 - self.pos)
                yield _Token("string", value, value, line, column, newline)
            elif match := _IDENT.match(self.text, self.pos):
                self.advance(match.end() - self.pos)
                yield _Token("ident", match.group(), match.group(), line, column, newline)
            elif match := _NUMBER.match(self.text, self.pos):
                self.advance(match.end() - self.pos)
                text = match.group()
                number: int | float = float(text) if any(c in text for c in ".eE") else int(text)
                yield _Token("number", text, number, line, column, newline)
            elif char in _PUNCT:
                self.advance(1)
                yield _Token("punct", char, char, line, column, newline)
            else:
                raise self.error(f"unexpected character {char!r}")

    def string(self) -> str:
        """A double-quoted string at ``pos``, escapes decoded (Alloy's table of escapes)."""
        self.advance(1)
        out = bytearray()
        while True:
            if self.pos >= len(self.text):
                raise self.error("unterminated string")
            char = self.text[self.pos]
            if char == '"':
                self.advance(1)
                break
            if char == "\n":
                raise self.error("newline in a string (use \\n)")
            if char != "\\":
                out += char.encode("utf-8")
                self.advance(1)
                continue
            out += self.escape()
        try:
            return out.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error("string escapes do not form valid UTF-8") from exc

    def escape(self) -> bytes:
        code = self.text[self.pos + 1 : self.pos + 2]
        if code in _SIMPLE_ESCAPES:
            self.advance(2)
            return _SIMPLE_ESCAPES[code].encode("utf-8")
        if code in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = self.text[self.pos + 2 : self.pos + 2 + width]
            if len(digits) != width or not set(digits) <= _HEX:
                raise self.error(f"\\{code} needs {width} hexadecimal digits")
            self.advance(2 + width)
            if code == "x":
                return bytes([int(digits, 16)])
            point = int(digits, 16)
            if point > 0x10FFFF or 0xD800 <= point <= 0xDFFF:
                raise self.error(f"\\{code}{digits} is not a Unicode scalar value")
            return chr(point).encode("utf-8")
        digits = self.text[self.pos + 1 : self.pos + 4]
        if len(digits) == 3 and set(digits) <= set("01234567"):
            if int(digits, 8) > 0xFF:
                raise self.error(f"octal escape \\{digits} is over 255")
            self.advance(4)
            return bytes([int(digits, 8)])
        raise self.error(f"unknown escape \\{code}")


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = list(_Lexer(text).tokens())
        self.index = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def error(self, message: str, token: _Token | None = None) -> AlloySyntaxError:
        token = token or self.current
        return AlloySyntaxError(message, token.line, token.column)

    def take(self) -> _Token:
        token = self.current
        if token.kind != "eof":
            self.index += 1
        return token

    def is_punct(self, text: str) -> bool:
        return self.current.kind == "punct" and self.current.text == text

    def expect_punct(self, text: str) -> _Token:
        if not self.is_punct(text):
            raise self.error(f"expected {text!r}, found {self.current.text or 'end of file'!r}")
        return self.take()

    def body(self, name: str, label: str | None, line: int, closing: str | None) -> Block:
        block = Block(name=name, label=label, attributes={}, blocks=[], line=line)
        while True:
            token = self.current
            if closing is None and token.kind == "eof":
                return block
            if closing is not None and self.is_punct(closing):
                self.take()
                return block
            if token.kind != "ident":
                raise self.error(f"expected an attribute or a block, found {token.text!r}")
            start = token
            parts = [self.take().text]
            while self.is_punct("."):
                self.take()
                if self.current.kind != "ident":
                    raise self.error("expected a name after '.'")
                parts.append(self.take().text)
            if self.is_punct("="):
                if len(parts) > 1:
                    raise self.error("an attribute name has no dots", start)
                self.take()
                if parts[0] in block.attributes:
                    raise self.error(f"attribute {parts[0]!r} set twice", start)
                block.attributes[parts[0]] = self.expression()
                after = self.current
                ends_block = closing is not None and self.is_punct(closing)
                if not (after.newline_before or after.kind == "eof" or ends_block):
                    raise self.error("expected a newline after the attribute", after)
                continue
            child_label: str | None = None
            if self.current.kind == "string":
                child_label = str(self.take().value)
            self.expect_punct("{")
            block.blocks.append(self.body(".".join(parts), child_label, start.line, "}"))

    def expression(self) -> Value:
        parts = [self.operand()]
        while self.is_punct("+"):
            self.take()
            parts.append(self.operand())
        return parts[0] if len(parts) == 1 else Concat(tuple(parts))

    def operand(self) -> Value:
        token = self.current
        if token.kind in ("string", "number"):
            self.take()
            return token.value  # type: ignore[return-value]
        if self.is_punct("["):
            self.take()
            return self.sequence("]")
        if self.is_punct("{"):
            self.take()
            return self.object()
        if token.kind != "ident":
            raise self.error(f"expected a value, found {token.text or 'end of file'!r}")
        self.take()
        if token.text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[token.text]
        path = [token.text]
        while self.is_punct("."):
            self.take()
            if self.current.kind != "ident":
                raise self.error("expected a name after '.'")
            path.append(self.take().text)
        if self.is_punct("("):
            self.take()
            return Call(".".join(path), tuple(self.sequence(")")))
        return Ref(".".join(path))

    def separator(self, closing: str) -> bool:
        """After an element: consume ``,``; say whether the sequence goes on."""
        if self.is_punct(","):
            self.take()
            return not self.is_punct(closing)
        if self.is_punct(closing):
            if self.current.newline_before:
                raise self.error(f"missing ',' before a {closing!r} on its own line")
            return False
        raise self.error(f"expected ',' or {closing!r}, found {self.current.text!r}")

    def sequence(self, closing: str) -> list[Value]:
        items: list[Value] = []
        if not self.is_punct(closing):
            items.append(self.expression())
            while self.separator(closing):
                items.append(self.expression())
        self.expect_punct(closing)
        return items

    def object(self) -> dict[str, Value]:
        fields: dict[str, Value] = {}
        if self.is_punct("}"):
            self.take()
            return fields
        while True:
            token = self.current
            if token.kind not in ("ident", "string"):
                raise self.error(f"expected an object key, found {token.text!r}")
            key = str(self.take().value)
            if key in fields:
                raise self.error(f"object key {key!r} set twice", token)
            self.expect_punct("=")
            fields[key] = self.expression()
            if not self.separator("}"):
                break
        self.expect_punct("}")
        return fields


def parse(text: str) -> Block:
    """Parse an Alloy configuration file.

    Args:
        text: the file's contents.

    Returns:
        The file as a :class:`Block` named ``""``: top-level attributes and component blocks.

    Raises:
        AlloySyntaxError: the text is not in the supported subset of the syntax.
    """
    return _Parser(text).body("", None, 1, None)


def evaluate(value: Value, environ: Mapping[str, str]) -> Value:
    """Evaluate the standard-library calls this repository uses, leaving references alone.

    ``sys.env(NAME)`` reads ``environ`` (missing is ``""``, as in Alloy); ``coalesce`` returns
    its first argument that is not null, ``""``, ``[]`` or ``{}``, else its last; ``+``
    concatenates strings.

    Args:
        value: a parsed value.
        environ: the environment to evaluate ``sys.env`` against.

    Returns:
        The value with every call and concatenation replaced by its result.

    Raises:
        ValueError: an unsupported function, or ``+`` over something other than strings.
    """
    if isinstance(value, list):
        return [evaluate(item, environ) for item in value]
    if isinstance(value, dict):
        return {key: evaluate(item, environ) for key, item in value.items()}
    if isinstance(value, Concat):
        parts = [evaluate(part, environ) for part in value.parts]
        if not all(isinstance(part, str) for part in parts):
            raise ValueError(f"+ over non-strings: {parts!r}")
        return "".join(str(part) for part in parts)
    if isinstance(value, Call):
        args = [evaluate(arg, environ) for arg in value.args]
        if value.name == "sys.env" and len(args) == 1 and isinstance(args[0], str):
            return environ.get(args[0], "")
        if value.name == "coalesce" and args:
            for arg in args:
                if arg not in (None, "", [], {}):
                    return arg
            return args[-1]
        raise ValueError(f"unsupported call {value.name}({args!r})")
    return value
