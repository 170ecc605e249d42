"""What a text record says of its identifiers and its place: :class:`IdRule` (a field or a
pattern to one of the identifiers) and :class:`LayerRule` (a field's value to a layer), and
how a list of them is applied to one record.

An identifier rule takes its value from a named field of the record (``request_id``), or from
the first match of a pattern in a field's text (in the message by default: the group named
``id``, else the first group, else the whole match). The first rule that gives a key a value
gives it; later rules for the same key are not tried, so an operator's rules, which come
first, win over the built-in ones. A value is checked as every identifier is
(``_fields.take_id``): one that fails is refused and its problem noted, never stored.

A layer rule places a record whose field (the service by default) matches its pattern.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from agent_logging.schema import TRACE_KEYS
from correlator.model import IDENTIFIER_KEYS
from correlator.sources._fields import take_id

__all__ = ["ID_TARGETS", "IdRule", "LayerRule", "identifiers_of", "layer_of"]

#: What an identifier rule may fill: the five identifiers, and the trace context.
ID_TARGETS: Final = (*IDENTIFIER_KEYS, *TRACE_KEYS)

#: The text a rule reads when it names no field: the record's message.
MESSAGE = "message"


@dataclass(frozen=True, slots=True)
class IdRule:
    """One identifier rule.

    Attributes:
        to: the identifier it fills (one of :data:`ID_TARGETS`).
        field: the field whose value it takes, or whose text ``pattern`` searches
            (``message``: the record's message).
        pattern: what to find in the field's text; None: the whole value is the identifier.
        formats: the formats it applies to; empty: every format.
        name: how a refused value names the rule (``field request_id``, ``rules.toml
            identifiers[2]``).
    """

    to: str
    field: str = MESSAGE
    pattern: re.Pattern[str] | None = None
    formats: frozenset[str] = frozenset()
    name: str = ""

    def value(self, message: str, fields: Mapping[str, str]) -> str | None:
        """What the rule finds in a record, unchecked; None: nothing."""
        text = message if self.field == MESSAGE else fields.get(self.field)
        if not text:
            return None
        if self.pattern is None:
            return text
        match = self.pattern.search(text)
        if match is None:
            return None
        if "id" in self.pattern.groupindex:
            return match.group("id")
        return match.group(1) if self.pattern.groups else match.group()


@dataclass(frozen=True, slots=True)
class LayerRule:
    """One layer rule: a record whose ``field`` matches ``pattern`` is of ``layer``.

    Attributes:
        layer: one of the five layers.
        pattern: searched in the field's value.
        field: the field read (``service``: the record's service).
        name: how the rule is named in messages.
    """

    layer: str
    pattern: re.Pattern[str]
    field: str = "service"
    name: str = ""


def identifiers_of(
    rules: Sequence[IdRule], message: str, fields: Mapping[str, str], refused: dict[str, str]
) -> dict[str, str]:
    """The identifiers ``rules`` find in one record, checked.

    Args:
        rules: the rules of the record's format, first first.
        message: the record's message.
        fields: its named fields.
        refused: where a value that fails the identifier check is noted, by identifier
            (``"correlation_id": "request_id: '<x>' holds ..."``).

    Returns:
        The accepted identifiers, by key.
    """
    found: dict[str, str] = {}
    for rule in rules:
        if rule.to in found or rule.to in refused:
            continue
        value = rule.value(message, fields)
        if value is None:
            continue
        problems: dict[str, str] = {}
        checked = take_id(rule.to, value, problems)
        if checked is not None:
            found[rule.to] = checked
        else:
            refused[rule.to] = f"{rule.name}: {problems[rule.to]}"
    return found


def layer_of(
    rules: Sequence[LayerRule], service: str | None, fields: Mapping[str, str]
) -> str | None:
    """The layer the first matching rule gives, or None."""
    for rule in rules:
        text = service if rule.field == "service" else fields.get(rule.field)
        if text and rule.pattern.search(text):
            return rule.layer
    return None
