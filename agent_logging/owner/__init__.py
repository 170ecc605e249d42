"""Who owns a failure: one owner table, applied to exceptions at log time and to the text of
evidence at correlation time (DESIGN §4, §6).

- :data:`DEFAULT_RULES`: the built-in table, in priority order (:mod:`._table` says what each
  rule recognises and which programs print it).
- :class:`OwnerRule`: one row; an operator's rules file (TOML) adds rows ahead of the table:
  :func:`load_rules` reads one, :func:`rules_with_defaults` puts it ahead of the table.
- :func:`classify` and :func:`error_info`: an exception and its causes, at log time.
- :class:`Evidence`, :func:`classify_evidence`, :class:`OwnerMatch`: text that nobody stamped
  (a Go service's error string, a Java stack trace, curl's stderr), at correlation time.
- :func:`is_wrapper`: whether a failure's words only say that something failed.
"""

from __future__ import annotations

from agent_logging.owner._classify import (
    MAX_CHAIN,
    MAX_MESSAGE_CHARS,
    MAX_TEXT_CHARS,
    Evidence,
    OwnerMatch,
    classify,
    classify_evidence,
    error_info,
    exception_chain,
    is_wrapper,
    stack_links,
)
from agent_logging.owner._rule import OwnerRule
from agent_logging.owner._rules_file import (
    OWNER_RULES_FORMAT_VERSION,
    load_rules,
    rules_with_defaults,
)
from agent_logging.owner._table import DEFAULT_RULES

__all__ = [
    "DEFAULT_RULES",
    "MAX_CHAIN",
    "MAX_MESSAGE_CHARS",
    "MAX_TEXT_CHARS",
    "OWNER_RULES_FORMAT_VERSION",
    "Evidence",
    "OwnerMatch",
    "OwnerRule",
    "classify",
    "classify_evidence",
    "error_info",
    "exception_chain",
    "is_wrapper",
    "load_rules",
    "rules_with_defaults",
    "stack_links",
]
