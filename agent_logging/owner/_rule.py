"""One row of the owner table, and how it is held against an exception or against text.

A rule names an owner layer and the criteria that prove it: error type names, driver
packages, HTTP statuses, ``errno`` values, process exit codes, message patterns, and (for an
operator's own rules) the service and layer that logged the failure. Every criterion given
must match, and any one value within a criterion.

The same rule is applied two ways, so the library and the correlator agree by construction:

- to an exception object at log time (:meth:`OwnerRule.matches`): type names along the MRO,
  ``errno`` and HTTP status read from attributes, patterns searched in ``str(exc)``;
- to the *text* of evidence at correlation time (:meth:`OwnerRule.matches_link`): a type name
  as written (``ssl.SSLCertVerificationError``, ``javax.net.ssl.SSLHandshakeException``), the
  ``errno`` and exit code as programs print them (``[Errno 111]``, ``exit status 127``,
  ``rc=127``, ``status=203/EXEC``), patterns searched in the message.

Patterns of the built-in table are Python regular expressions kept to the linear-time subset
(no nested quantifiers, no backreferences, no look-around; a test compiles every one with
RE2 to prove it). Patterns from an operator's rules file are compiled with RE2
(``google-re2``), whose matching time is linear in the text whatever the pattern: a hostile
pattern cannot hang a service or the correlator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from agent_logging._types import OWNER_LAYERS
from agent_logging.errors import ConfigurationError

__all__ = [
    "Link",
    "OwnerRule",
    "Searcher",
    "compile_patterns",
    "errnos_in",
    "exception_message",
    "exit_codes_in",
]

#: A pattern's search: the matched text, or None.
Searcher = Callable[[str], "str | None"]

#: (type, message) of one exception of a chain, as text; either may be missing.
Link = tuple["str | None", "str | None"]

_ERRNO: Final = re.compile(r"\[Errno (\d{1,4})\]|\berrno[ =:]{1,3}(\d{1,4})\b", re.IGNORECASE)
# How programs print a process's exit code: Python's CalledProcessError ("returned non-zero
# exit status 127"), Go's os/exec ("exit status 127"), shells and CI ("exit code 127"),
# Ansible task results ("rc=127", '"rc": 127'), systemd ("status=203/EXEC").
_EXIT: Final = re.compile(
    r"\bexit (?:status|code)[ :=]{1,3}(\d{1,3})\b"
    r"|\brc[ =:]{1,3}(\d{1,3})\b"
    r"|\"rc\": ?(\d{1,3})\b"
    r"|\bstatus=(\d{1,3})/[A-Z]",
    re.IGNORECASE,
)


def errnos_in(text: str) -> set[int]:
    """The ``errno`` values a message prints (``[Errno 111]``, ``errno=28``)."""
    if "rrno" not in text and "RRNO" not in text:  # a substring test before the regex's scan
        return set()
    return {int(a or b) for a, b in _ERRNO.findall(text)}


def exit_codes_in(text: str) -> set[int]:
    """The process exit codes a message prints (``exit status 127``, ``rc=2``)."""
    lowered = text.lower()
    if "exit" not in lowered and "rc" not in lowered and "status=" not in lowered:
        return set()
    return {int(next(g for g in groups if g)) for groups in _EXIT.findall(text)}


def compile_patterns(patterns: Sequence[str], *, linear: bool, name: str) -> Searcher:
    """One case-insensitive search over the alternation of ``patterns``.

    Args:
        patterns: regular expressions.
        linear: compile with RE2 (an operator's patterns); otherwise Python's ``re`` (the
            built-in table, kept to RE2's subset by a test).
        name: the rule's name, for the error.

    Returns:
        A function from text to the matched text, or None.

    Raises:
        ConfigurationError: a pattern does not compile (RE2 also refuses backreferences and
            look-around, which it cannot run in linear time).
    """
    joined = "|".join(f"(?:{pattern})" for pattern in patterns)
    if linear:
        import re2  # the google-re2 package; imported only when an operator gives patterns

        options = re2.Options()
        options.log_errors = False  # its C++ logger would write to stderr on a bad pattern
        options.case_sensitive = False
        options.max_mem = 8 << 20  # a pattern whose automaton needs more is refused
        try:
            compiled_re2 = re2.compile(joined, options)
        except re2.error as exc:
            raise ConfigurationError(
                f"owner rule {name!r}: pattern does not compile under RE2 (linear-time "
                f"regular expressions: no backreferences, no look-around): {exc}"
            ) from exc

        def search_re2(text: str) -> str | None:
            match = compiled_re2.search(text)
            return None if match is None else str(match.group(0))

        return search_re2
    try:
        compiled = re.compile(joined, re.IGNORECASE)
    except re.error as exc:
        raise ConfigurationError(f"owner rule {name!r}: bad pattern: {exc}") from exc

    def search(text: str) -> str | None:
        match = compiled.search(text)
        return None if match is None else match.group(0)

    return search


@dataclass(frozen=True, slots=True)
class OwnerRule:
    """One row of the owner table: which failures belong to ``owner_layer``.

    Attributes:
        owner_layer: one of :data:`agent_logging.OWNER_LAYERS` (but ``unknown``).
        name: the rule's name, quoted by the correlator's verdict.
        type_names: error type names. Against an exception, matched with every class of its
            MRO (module-qualified, builtins also bare); against text, a written type matches
            a name equal to it or, when either is unqualified, to its last dotted part.
        module_prefixes: packages (``"psycopg"`` matches ``psycopg.errors.LockNotAvailable``):
            an MRO class's module, or a written type's leading parts.
        statuses: HTTP statuses (an exception's ``status_code``/``status``/
            ``response.status_code``; the evidence's status).
        errnos: ``errno`` values (``OSError.errno``; ``[Errno N]`` in text).
        exit_codes: process exit codes (``CalledProcessError.returncode``; ``exit status N``,
            ``rc=N`` in text, or the evidence's exit code).
        message_patterns: regular expressions searched case-insensitively in the message.
        services: the service that logged the failure (an operator's rules).
        layers: the layer that logged it (an operator's rules).
        linear: compile the patterns with RE2 (set for rules read from a file).
        description: what the rule recognises and which programs print it.
        weak: the rule recognises only a status relayed in words ("502 Bad Gateway" in a
            client's error): like a rule on the status itself, any rule about the failure's
            own words outranks it (see :attr:`is_weak`).

    Raises:
        ConfigurationError: an unknown owner layer, no criterion, or a bad pattern.
    """

    owner_layer: str
    type_names: tuple[str, ...] = ()
    module_prefixes: tuple[str, ...] = ()
    statuses: frozenset[int] = frozenset()
    errnos: frozenset[int] = frozenset()
    message_patterns: tuple[str, ...] = ()
    name: str = ""
    exit_codes: frozenset[int] = frozenset()
    services: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()
    linear: bool = False
    description: str = ""
    weak: bool = False
    _search: Searcher | None = field(default=None, init=False, repr=False, compare=False)
    _bare_types: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.owner_layer not in OWNER_LAYERS or self.owner_layer == "unknown":
            raise ConfigurationError(
                f"owner rule {self.name!r}: owner_layer {self.owner_layer!r} is not one of "
                f"{sorted(OWNER_LAYERS - {'unknown'})}"
            )
        if not (
            self.type_names
            or self.module_prefixes
            or self.statuses
            or self.errnos
            or self.exit_codes
            or self.message_patterns
        ):
            raise ConfigurationError(
                f"owner rule {self.name!r} has no criterion on the failure itself (type, "
                "module, status, errno, exit code or message): it would match every failure"
            )
        if self.message_patterns:
            search = compile_patterns(self.message_patterns, linear=self.linear, name=self.name)
            object.__setattr__(self, "_search", search)
        object.__setattr__(
            self, "_bare_types", frozenset(n.rsplit(".", 1)[-1] for n in self.type_names)
        )

    @property
    def is_weak(self) -> bool:
        """A rule that rests on an HTTP status alone (or is declared ``weak``): it says which
        layer answered, not why; the verdict lets any rule about the failure's own words
        outrank it."""
        return self.weak or (
            bool(self.statuses)
            and not (
                self.type_names
                or self.module_prefixes
                or self.errnos
                or self.exit_codes
                or self.message_patterns
            )
        )

    def matches(
        self, exc: BaseException, *, service: str | None = None, layer: str | None = None
    ) -> bool:
        """Whether an exception meets every criterion of this rule; never raises.

        Args:
            exc: the exception (its causes are not looked at).
            service: the service logging it, for rules that name services.
            layer: the layer logging it, for rules that name layers.

        Returns:
            True on a match.
        """
        if not self._context_matches(service, layer):
            return False
        mro = type(exc).__mro__
        if self.type_names and not any(
            name in self.type_names for cls in mro for name in _class_names(cls)
        ):
            return False
        if self.module_prefixes and not any(
            _in_package(getattr(cls, "__module__", None), self.module_prefixes) for cls in mro
        ):
            return False
        if self.statuses and _http_status(exc) not in self.statuses:
            return False
        if self.errnos and not (isinstance(exc, OSError) and exc.errno in self.errnos):
            return False
        if self.exit_codes and _returncode(exc) not in self.exit_codes:
            return False
        return self._search is None or self._search(exception_message(exc)) is not None

    def matches_link(
        self,
        link: Link,
        *,
        status: int | None = None,
        exit_code: int | None = None,
        service: str | None = None,
        layer: str | None = None,
        errnos: set[int] | None = None,
        codes: set[int] | None = None,
    ) -> str | None:
        """Whether one (type, message) of evidence text meets every criterion; never raises.

        Args:
            link: the type as written and the message.
            status: the evidence's HTTP status.
            exit_code: the evidence's exit code, when it has one as a field.
            service: the service that logged the evidence.
            layer: the layer that logged it.
            errnos: the message's :func:`errnos_in`, when the caller read them already.
            codes: the message's :func:`exit_codes_in`, likewise.

        Returns:
            What matched, to be quoted (the text a pattern matched, else the type, the
            status, the errno or the exit code), or None.
        """
        if not self._context_matches(service, layer):
            return None
        written_type, message = link
        quote = ""
        if self.type_names or self.module_prefixes:
            if not written_type or not self._type_written(written_type):
                return None
            quote = written_type
        if self.statuses:
            if status not in self.statuses:
                return None
            quote = quote or f"HTTP {status}"
        text = message or ""
        if self.errnos:
            found = (errnos_in(text) if errnos is None else errnos) & self.errnos
            if not found:
                return None
            quote = quote or f"[Errno {min(found)}]"
        if self.exit_codes:
            codes = set(exit_codes_in(text) if codes is None else codes)
            if exit_code is not None:
                codes.add(exit_code)
            found = codes & self.exit_codes
            if not found:
                return None
            quote = quote or f"exit code {min(found)}"
        if self._search is not None:
            matched = self._search(text)
            if matched is None:
                return None
            quote = matched
        return quote

    def _type_written(self, written: str) -> bool:
        if written in self.type_names:
            return True
        if self.type_names:
            bare = written.rsplit(".", 1)[-1]
            if bare in self._bare_types and (
                "." not in written or any("." not in n for n in self.type_names)
            ):
                return True
        return any(
            written == prefix or written.startswith(f"{prefix}.") for prefix in self.module_prefixes
        )

    def _context_matches(self, service: str | None, layer: str | None) -> bool:
        if self.services and service not in self.services:
            return False
        return not (self.layers and layer not in self.layers)


def _class_names(cls: type) -> tuple[str, ...]:
    qualname = getattr(cls, "__qualname__", cls.__name__)
    module = getattr(cls, "__module__", None)
    if not isinstance(module, str) or module == "builtins":
        return (qualname, f"builtins.{qualname}")
    return (f"{module}.{qualname}",)


def _in_package(module: object, prefixes: tuple[str, ...]) -> bool:
    return isinstance(module, str) and any(
        module == prefix or module.startswith(f"{prefix}.") for prefix in prefixes
    )


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries, if any; attribute access is guarded."""
    try:
        for attribute in ("status_code", "status"):
            status = getattr(exc, attribute, None)
            if isinstance(status, int) and not isinstance(status, bool):
                return status
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
    except Exception:  # noqa: BLE001 - a property of a third-party exception: never raise
        return None
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _returncode(exc: BaseException) -> int | None:
    """``returncode`` of ``subprocess.CalledProcessError`` and its look-alikes."""
    try:
        code = getattr(exc, "returncode", None)
    except Exception:  # noqa: BLE001 - a property of a third-party exception: never raise
        return None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder when its ``__str__`` raises (as traceback does)."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break logging
        return f"<unprintable {type(exc).__name__} object>"
