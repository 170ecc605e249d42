"""What a text record says of its identifiers and its place: :class:`IdRule` (a field or a
pattern to one of the identifiers) and :class:`LayerRule` (a field's value to a layer), and
how a list of them is applied to one record.

An identifier rule takes its value from a named field of the record (``request_id``), or from
the first match of a pattern in a field's text (in the message by default: the group named
``id``, else the first group, else the whole match). The first rule that gives a key a value
gives it; later rules for the same key are not tried, so an operator's rules, which come
first, win over the built-in ones. A value is checked as every identifier is
(``_fields.take_id``): one that fails is refused and its problem noted, never stored.

:class:`IdRules` applies a list of them to a record. A layer rule places a record whose
field (the service by default) matches its pattern.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from agent_logging.schema import TRACE_KEYS
from correlator.model import IDENTIFIER_KEYS
from correlator.sources._fields import good_ids, take_id

__all__ = ["ID_TARGETS", "IdRule", "IdRules", "LayerRule", "layer_of"]

#: What an identifier rule may fill: the five identifiers, and the trace context.
ID_TARGETS: Final = (*IDENTIFIER_KEYS, *TRACE_KEYS)

_FIVE: Final = frozenset(IDENTIFIER_KEYS)
#: How many sets of fields :class:`IdRules` keeps the ordered rules of (a JSON log whose keys
#: vary without end must not grow it without end).
_MAX_FIELD_SETS: Final = 1024
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
        needs: text the field must hold for ``pattern`` to be searched (``/servers/``): a
            substring test is cheaper than a search that finds nothing.
    """

    to: str
    field: str = MESSAGE
    pattern: re.Pattern[str] | None = None
    formats: frozenset[str] = frozenset()
    name: str = ""
    needs: str = ""


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


class IdRules:
    """A list of identifier rules, indexed by the field each reads, so that a record costs
    only the rules of the fields it has (twenty-odd built-in rules; a record has a handful of
    fields). The first rule in the list's order that gives an identifier a value gives it.

    Args:
        rules: the rules, first first.
    """

    __slots__ = ("_by_field", "_candidates", "_fields")

    def __init__(self, rules: Sequence[IdRule]) -> None:
        by_field: dict[str, list[tuple[int, IdRule]]] = {}
        for index, rule in enumerate(rules):
            by_field.setdefault(rule.field, []).append((index, rule))
        self._by_field = by_field
        self._fields = frozenset(by_field) - {MESSAGE}
        # The rules a record runs, by the fields it has that rules read: the records of one
        # input have few such sets, so each is ordered once.
        self._candidates: dict[frozenset[str], list[IdRule]] = {}

    def _order(self, present: frozenset[str]) -> list[IdRule]:
        """The rules of the fields ``present`` and of the message, in the list's order."""
        items = [item for name in present for item in self._by_field[name]]
        items.extend(self._by_field.get(MESSAGE, ()))
        items.sort(key=_index)
        ordered = [rule for _, rule in items]
        if len(self._candidates) < _MAX_FIELD_SETS:
            self._candidates[present] = ordered
        return ordered

    def find(
        self,
        message: str,
        fields: Mapping[str, str],
        refused: dict[str, str],
        taken: set[str],
    ) -> dict[str, str]:
        """The identifiers the rules find in one record, checked.

        Args:
            message: the record's message.
            fields: its named fields.
            refused: where a value that fails the identifier check is noted, by identifier
                (``"correlation_id": "field request_id: ..."``).
            taken: where the fields whose whole value became an identifier are added (their
                column holds them).

        Returns:
            The accepted identifiers, by key.
        """
        present = frozenset(fields.keys() & self._fields)
        candidates = self._candidates.get(present)
        if candidates is None:
            candidates = self._order(present)
        found: dict[str, str] = {}
        for rule in candidates:
            to = rule.to
            if to in found or to in refused:
                continue
            value = _value(rule, message if rule.field == MESSAGE else fields[rule.field])
            if value is None:
                continue
            if not (value in good_ids and to in _FIVE):  # proven good before: one set test
                problems: dict[str, str] = {}
                if take_id(to, value, problems) is None:
                    refused[to] = f"{rule.name}: {problems[to]}"
                    continue
            found[to] = value
            if rule.pattern is None:
                taken.add(rule.field)
        return found


def _index(item: tuple[int, IdRule]) -> int:
    return item[0]


def _value(rule: IdRule, text: str) -> str | None:
    """What ``rule`` finds in its field's text, unchecked; None: nothing."""
    if not text:
        return None
    pattern = rule.pattern
    if pattern is None:
        return text
    if rule.needs and rule.needs not in text:
        return None
    match = pattern.search(text)
    if match is None:
        return None
    if "id" in pattern.groupindex:
        return match.group("id")  # None when the group took no part
    return match.group(1) if pattern.groups else match.group()


def layer_of(
    rules: Sequence[LayerRule], service: str | None, fields: Mapping[str, str]
) -> str | None:
    """The layer the first matching rule gives, or None."""
    for rule in rules:
        text = service if rule.field == "service" else fields.get(rule.field)
        if text and rule.pattern.search(text):
            return rule.layer
    return None
