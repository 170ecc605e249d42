"""An operator's owner rules: a TOML file of rows tried before the built-in table.

A site knows failures the built-in table cannot (its BMC vendor's wording, its own services'
error types). It says so in a file, without code, and points ``AGENT_LOGGING_OWNER_RULES``
(or ``configure(owner_rules=...)``) at it::

    version = 1                         # optional; this library reads version 1

    [[rule]]
    name = "bmc-timeout"                # required, unique in the file
    owner_layer = "node"                # required: deploy cert ingress api_auth api
                                        #   workflow_state db node provider
    description = "the BMC did not answer in time"      # optional
    # Criteria: at least one about the failure itself (type, module, status, errno,
    # exit_code, message). Every criterion given must match, and any one value within it.
    type = ["ironic.common.exception.IPMIFailure"]       # error type names
    module = ["pyghmi"]                 # packages the error type comes from
    status = [503]                      # HTTP statuses, 100-599
    errno = [110]                       # errno values (negative: getaddrinfo's EAI_*)
    exit_code = [2]                     # process exit codes, 0-255
    message = ["BMC .{0,20} timed out"] # RE2 patterns, searched case-insensitively
    service = ["ironic-conductor"]      # optional: only failures these services log
    layer = ["node"]                    # optional: only failures logged at these layers
                                        #   (node ingress api workflow db provider projection)

Each criterion takes one value or a list. What each matches, against an exception and
against evidence text, is :class:`~agent_logging.owner.OwnerRule`'s; the file's keys are its
fields' names as an operator says them. The file's rules come first, in the file's order:
:func:`rules_with_defaults` puts them ahead of :data:`~agent_logging.owner.DEFAULT_RULES`.

Patterns are compiled with RE2, whose matching time is linear in the text whatever the
pattern: ``(a+)+$`` is harmless. RE2 has no backreferences and no look-around; a pattern that
uses them is refused, as is one that matches an empty message (it would claim every failure).

A file that is wrong in any way is refused whole, with a
:class:`~agent_logging.errors.ConfigurationError` that names the file, the rule (counted from
1, with its name and line) and the key (``message[1]``: a list's second value), e.g.
``owner rules file 'rules.toml': rule #3 'bmc-timeout' (line 12): key 'status[0]': expected
an HTTP status (an integer), got a string ('503')``. A half-read table would classify some
failures by rules the operator never meant. The limits below keep a file's cost at start-up bounded.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from agent_logging._types import OWNER_LAYERS
from agent_logging.errors import ConfigurationError
from agent_logging.owner._rule import OwnerRule, compile_patterns
from agent_logging.owner._table import DEFAULT_RULES
from agent_logging.schema import EVIDENCE_LAYERS

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PATTERN_CHARS",
    "MAX_RULES",
    "MAX_VALUES",
    "OWNER_RULES_FORMAT_VERSION",
    "load_rules",
    "rules_with_defaults",
]

#: The ``version`` this library reads; a file may leave the key out.
OWNER_RULES_FORMAT_VERSION: Final = 1

#: Largest file read (1 MiB): a rules file is hand-written, kilobytes long.
MAX_FILE_BYTES: Final = 1 << 20

#: Most rules in one file: each is tried against every failure logged.
MAX_RULES: Final = 1000

#: Most values one criterion of one rule lists.
MAX_VALUES: Final = 100

#: Longest pattern, in characters.
MAX_PATTERN_CHARS: Final = 1000

_MAX_NAME_CHARS: Final = 100
_MAX_TEXT_CHARS: Final = 200  # a type name, package, service
_MAX_DESCRIPTION_CHARS: Final = 2000
# Linux's errno values and Windows' socket codes (WSAECONNREFUSED is 10061), and the
# negative EAI_* codes socket.gaierror carries ("[Errno -2] Name or service not known").
_ERRNO_RANGE: Final = (-4095, 65535)

# Layers a failure can be logged at: the library's, and those of evidence the correlator reads
# from other sources (an AAP job is ``provider``; a Kubernetes custom resource ``projection``).
_EVIDENCE_LAYERS: Final = frozenset(EVIDENCE_LAYERS)
_RULE_OWNER_LAYERS: Final = OWNER_LAYERS - {"unknown"}

_TOP_KEYS: Final = ("rule", "version")
_CRITERIA: Final = ("type", "module", "status", "errno", "exit_code", "message")
_RULE_KEYS: Final = ("name", "owner_layer", "description", *_CRITERIA, "service", "layer")

# A [[rule]] header, to say on which line a rule starts; used only when the headers found
# are as many as the rules (a table array written inline has none).
_RULE_HEADER: Final = re.compile(r"^[ \t]*\[\[[ \t]*(?:rule|\"rule\"|'rule')[ \t]*\]\]", re.M)


_T = TypeVar("_T")


class _Invalid(Exception):
    """One value is wrong: ``problem`` in words, ``index`` its place in a list."""

    def __init__(self, problem: str, index: int | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.index = index


@dataclass(frozen=True, slots=True)
class _Where:
    """Where in the file a problem is, to say so in the error."""

    source: str
    index: int | None = None
    name: str | None = None
    line: int | None = None

    def error(self, key: str | None, problem: str) -> ConfigurationError:
        parts = [f"owner rules file {self.source!r}"]
        if self.index is not None:
            rule = f"rule #{self.index}"
            if self.name is not None:
                rule += f" {self.name!r}"
            if self.line is not None:
                rule += f" (line {self.line})"
            parts.append(rule)
        if key is not None:
            parts.append(f"key {key!r}")
        return ConfigurationError(f"{': '.join(parts)}: {problem}")


def load_rules(path: str | os.PathLike[str]) -> tuple[OwnerRule, ...]:
    """The rules of an operator's owner rules file, in the file's order.

    Args:
        path: the TOML file (format in this module's docstring).

    Returns:
        One :class:`OwnerRule` per ``[[rule]]``, its patterns compiled with RE2; empty for
        a file without rules.

    Raises:
        ConfigurationError: the file cannot be read, is not UTF-8 TOML, or a rule is wrong;
            the message names the file, the rule (number, name, line) and the key.
    """
    import tomllib  # here: a service without a rules file does not pay for the parser

    where = _Where(os.fspath(path))
    text = _read(Path(path), where)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message says the line and column
        raise where.error(None, f"is not valid TOML: {exc}") from exc
    except ValueError as exc:  # an integer past int()'s digit limit
        raise where.error(None, f"is not valid TOML: {exc}") from exc
    except RecursionError as exc:
        raise where.error(None, "is not valid TOML: arrays or tables nest too deeply") from exc
    return _rules(document, where, _header_lines(text))


def rules_with_defaults(path: str | os.PathLike[str] | None) -> tuple[OwnerRule, ...]:
    """The owner table in force: the file's rules, then :data:`DEFAULT_RULES`.

    Args:
        path: an owner rules file, or None for the built-in table alone.

    Returns:
        The rules in priority order.

    Raises:
        ConfigurationError: the file is refused (see :func:`load_rules`).
    """
    if path is None:
        return DEFAULT_RULES
    return load_rules(path) + DEFAULT_RULES


def _read(path: Path, where: _Where) -> str:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise where.error(None, "is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise where.error(None, f"is {info.st_size} bytes; the limit is {MAX_FILE_BYTES}")
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise where.error(None, f"cannot be read: {exc.strerror or exc}") from exc
    if len(data) > MAX_FILE_BYTES:  # it grew after stat()
        raise where.error(None, f"is more than {MAX_FILE_BYTES} bytes")
    try:
        # TOML is UTF-8 (TOML 1.0, "Spec"); a byte-order mark, as some editors write, is
        # not TOML but costs nothing to forgive.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise where.error(
            None, f"is not UTF-8 text (line {line}, byte {exc.start}); TOML files are UTF-8"
        ) from exc


def _header_lines(text: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in _RULE_HEADER.finditer(text)]


def _rules(
    document: Mapping[str, object], where: _Where, lines: list[int]
) -> tuple[OwnerRule, ...]:
    for key in document:
        if key not in _TOP_KEYS:
            raise where.error(key, f"unknown top-level key{_allowed(key, _TOP_KEYS)}")
    if "version" in document:
        version = document["version"]
        if type(version) is not int or version != OWNER_RULES_FORMAT_VERSION:
            raise where.error(
                "version",
                f"this library reads version {OWNER_RULES_FORMAT_VERSION}, got {_kind(version)}",
            )
    tables = document.get("rule", [])
    if not isinstance(tables, list):
        raise where.error("rule", "must be an array of tables: write [[rule]], not [rule]")
    if len(tables) > MAX_RULES:
        raise where.error("rule", f"{len(tables)} rules; the limit is {MAX_RULES}")
    starts = lines if len(lines) == len(tables) else None
    rules: list[OwnerRule] = []
    names: dict[str, int] = {}
    for number, table in enumerate(tables, start=1):
        line = starts[number - 1] if starts is not None else None
        rule = _rule(table, _Where(where.source, number, None, line))
        if rule.name in names:
            raise _Where(where.source, number, rule.name, line).error(
                "name", f"rule #{names[rule.name]} has the same name; names must be unique"
            )
        names[rule.name] = number
        rules.append(rule)
    return tuple(rules)


def _rule(table: object, where: _Where) -> OwnerRule:
    if not isinstance(table, dict):
        raise where.error(None, f"must be a table ([[rule]]), got {_kind(table)}")
    if "name" not in table:
        raise where.error("name", "is required")
    name = _value(table, "name", _name, where)
    where = _Where(where.source, where.index, name, where.line)
    for key in table:
        if key not in _RULE_KEYS:
            raise where.error(key, f"unknown key{_allowed(key, _RULE_KEYS)}")
    if "owner_layer" not in table:
        raise where.error("owner_layer", "is required")
    owner_layer = _value(table, "owner_layer", _owner_layer, where)
    if not any(key in table for key in _CRITERIA):
        raise where.error(
            None,
            "has no criterion on the failure itself (one of "
            f"{', '.join(_CRITERIA)}); service and layer only narrow a rule",
        )
    description = (
        _value(table, "description", _description, where) if "description" in table else ""
    )
    type_names = _optional(table, "type", _type_names, where)
    module_prefixes = _optional(table, "module", _packages, where)
    statuses = _optional(table, "status", _statuses, where)
    errnos = _optional(table, "errno", _errnos, where)
    exit_codes = _optional(table, "exit_code", _exit_codes, where)
    patterns = _optional(table, "message", _patterns, where)
    services = _optional(table, "service", _services, where)
    layers = _optional(table, "layer", _layers, where)
    try:
        return OwnerRule(
            owner_layer=owner_layer,
            name=name,
            description=description,
            type_names=type_names,
            module_prefixes=module_prefixes,
            statuses=frozenset(statuses),
            errnos=frozenset(errnos),
            exit_codes=frozenset(exit_codes),
            message_patterns=patterns,
            services=services,
            layers=layers,
            linear=True,
        )
    except ConfigurationError as exc:
        # Each pattern compiled alone (see _pattern): only their alternation can fail here.
        raise where.error(
            "message",
            f"RE2 refuses the {len(patterns)} patterns together: {_re2_reason(exc)} (each "
            "compiles alone; split them over several rules)",
        ) from exc


def _value(
    table: Mapping[str, object], key: str, parse: Callable[[object], _T], where: _Where
) -> _T:
    try:
        return parse(table[key])
    except _Invalid as exc:
        at = key if exc.index is None else f"{key}[{exc.index}]"
        raise where.error(at, exc.problem) from None


def _optional(
    table: Mapping[str, object],
    key: str,
    parse: Callable[[object], tuple[_T, ...]],
    where: _Where,
) -> tuple[_T, ...]:
    return _value(table, key, parse, where) if key in table else ()


def _kind(value: object) -> str:
    """A TOML value's kind, as an operator would call it, with the value when short."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a float ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else f"{value[:60]}..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"  # dates and times


def _allowed(key: str, allowed: tuple[str, ...]) -> str:
    import difflib  # only for a wrong file

    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f" (allowed: {', '.join(allowed)}){hint}"


def _listed(value: object) -> list[object]:
    """One value or an array of them, as a list."""
    if not isinstance(value, list):
        return [value]
    if not value:
        raise _Invalid("is an empty array, which matches nothing; leave the key out")
    if len(value) > MAX_VALUES:
        raise _Invalid(f"lists {len(value)} values; the limit is {MAX_VALUES}")
    return value


def _each(value: object, parse: Callable[[object], _T]) -> tuple[_T, ...]:
    items = _listed(value)
    parsed: list[_T] = []
    for index, item in enumerate(items):
        try:
            parsed.append(parse(item))
        except _Invalid as exc:
            raise _Invalid(exc.problem, index if isinstance(value, list) else None) from None
    return tuple(parsed)


def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected {what} (a string), got {_kind(value)}")
    if not value:
        raise _Invalid(f"expected {what}, got an empty string")
    if len(value) > limit:
        raise _Invalid(f"is {len(value)} characters long; the limit is {limit}")
    if value != value.strip() or not value.isprintable():
        raise _Invalid(f"{_kind(value)} has surrounding spaces or control characters")
    return value


def _name(value: object) -> str:
    return _text(value, "the rule's name", _MAX_NAME_CHARS)


def _description(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected a string, got {_kind(value)}")
    if len(value) > _MAX_DESCRIPTION_CHARS:
        raise _Invalid(f"is {len(value)} characters long; the limit is {_MAX_DESCRIPTION_CHARS}")
    return value


def _owner_layer(value: object) -> str:
    if not isinstance(value, str) or value not in _RULE_OWNER_LAYERS:
        raise _Invalid(
            f"expected one of {', '.join(sorted(_RULE_OWNER_LAYERS))}, got {_kind(value)}"
        )
    return value


def _type_name(value: object) -> str:
    return _text(value, "an error type name", _MAX_TEXT_CHARS)


def _package(value: object) -> str:
    text = _text(value, "a package name", _MAX_TEXT_CHARS)
    if text.startswith(".") or text.endswith("."):
        raise _Invalid(f"{text!r} is not a package name: write it without the dots at its ends")
    return text


def _service(value: object) -> str:
    return _text(value, "a service name", _MAX_TEXT_CHARS)


def _layer(value: object) -> str:
    if not isinstance(value, str) or value not in _EVIDENCE_LAYERS:
        raise _Invalid(f"expected one of {', '.join(sorted(_EVIDENCE_LAYERS))}, got {_kind(value)}")
    return value


def _integer(value: object, what: str, low: int, high: int) -> int:
    if type(value) is not int:  # a boolean is an int to Python, not to an operator
        hint = ""
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            hint = "; write the number without quotes"
        raise _Invalid(f"expected {what} (an integer), got {_kind(value)}{hint}")
    if not low <= value <= high:
        raise _Invalid(f"expected {what} from {low} to {high}, got {value}")
    return value


def _status(value: object) -> int:
    return _integer(value, "an HTTP status", 100, 599)


def _errno(value: object) -> int:
    number = _integer(value, "an errno value", *_ERRNO_RANGE)
    if number == 0:
        raise _Invalid("errno 0 means no error")
    return number


def _exit_code(value: object) -> int:
    return _integer(value, "a process exit code", 0, 255)


def _pattern(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected a regular expression (a string), got {_kind(value)}")
    if not value:
        raise _Invalid("is an empty pattern, which matches every message")
    if len(value) > MAX_PATTERN_CHARS:
        raise _Invalid(f"is {len(value)} characters long; the limit is {MAX_PATTERN_CHARS}")
    try:
        search = compile_patterns([value], linear=True, name="")
    except ConfigurationError as exc:
        raise _Invalid(
            f"RE2 refuses {_kind(value)}: {_re2_reason(exc)} (RE2 runs in linear time: it has "
            "no backreferences and no look-around, and limits an automaton's size)"
        ) from None
    if search("") is not None:
        raise _Invalid(f"{_kind(value)} matches an empty message, so it would match every failure")
    return value


def _re2_reason(exc: ConfigurationError) -> str:
    cause = exc.__cause__
    reason = cause.args[0] if cause is not None and cause.args else str(exc)
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    return str(reason)


def _type_names(value: object) -> tuple[str, ...]:
    return _each(value, _type_name)


def _packages(value: object) -> tuple[str, ...]:
    return _each(value, _package)


def _statuses(value: object) -> tuple[int, ...]:
    return _each(value, _status)


def _errnos(value: object) -> tuple[int, ...]:
    return _each(value, _errno)


def _exit_codes(value: object) -> tuple[int, ...]:
    return _each(value, _exit_code)


def _patterns(value: object) -> tuple[str, ...]:
    return _each(value, _pattern)


def _services(value: object) -> tuple[str, ...]:
    return _each(value, _service)


def _layers(value: object) -> tuple[str, ...]:
    return _each(value, _layer)
