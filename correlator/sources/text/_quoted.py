"""Go's quoted strings (``strconv.Quote``), as klog's structured values and logfmt's values
are written, and the ``key=value`` pairs both write after a message.

go-logfmt writes a value in quotes when it holds a space, ``=``, ``"`` or a control
character, escaping with ``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\r``, ``\\u00XX``; klog
quotes every string value the same way. A bare key (``key`` without ``=``) is logfmt's key
with an empty value.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["pairs", "unquote"]

# A quoted string: the alternatives cannot overlap, so a long or unterminated one is matched
# in one pass, never backtracked over.
_QUOTED: Final = r'"(?:[^"\\]|\\.)*"'
#: One pair: a key (anything but space, ``=`` and ``"``), then ``=`` and a quoted or bare value,
#: or nothing (a bare key). Bare values stop at the next space.
_PAIR: Final = re.compile(rf'\s*([^\s="]+)(?:=({_QUOTED}|[^\s"]*))?(?=\s|$)', re.DOTALL)
_ESCAPE: Final = re.compile(
    r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL
)
_SIMPLE: Final = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    '"': '"',
    "\\": "\\",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "'": "'",
}


def _escape(match: re.Match[str]) -> str:
    hex_digits = match.group(1) or match.group(2) or match.group(3)
    if hex_digits is not None:
        code = int(hex_digits, 16)
        # An escape naming no character (a surrogate, past U+10FFFF) is kept as written.
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else match.group()
    return _SIMPLE.get(match.group(4), match.group())


def unquote(text: str) -> str:
    """The value of a Go quoted string (with its quotes); an unknown escape is kept as written."""
    inner = text[1:-1]
    return _ESCAPE.sub(_escape, inner) if "\\" in inner else inner


def pairs(text: str) -> dict[str, str] | str:
    """The ``key=value`` pairs of a text, by key (a repeated key: the last), quoted values
    unquoted.

    Returns:
        The pairs, or a sentence saying where the text stops being pairs (an unclosed
        quote, a quote inside a key or a bare value).
    """
    found: dict[str, str] = {}
    text = text.strip()
    position = 0
    while position < len(text):
        match = _PAIR.match(text, position)
        if match is None:
            start = len(text) - len(text[position:].lstrip())
            return f"not key=value pairs from character {start + 1}: {text[start : start + 40]!r}"
        key, value = match.groups()
        if value is None:
            found[key] = ""
        else:
            found[key] = unquote(value) if value.startswith('"') else value
        position = match.end()
    return found
