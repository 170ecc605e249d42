"""Loki's distributor over a decoded push: label and entry checks, metadata normalisation.

Labels that do not parse refuse the whole push, bad labels refuse one stream, bad
entries refuse one entry each (:mod:`tests.lokisim._limits` has the rules and messages);
metadata names are normalised and ``detected_level`` added (:mod:`tests.lokisim._levels`).
What passes becomes the ingester's keys, ``(ts_ns, line, metadata id)``.

Speed (a stand-alone server must take agent_logging's full rate): the checks depend only
on the label text or the metadata and on the fixed limits, so each distinct value is
parsed, checked and normalised once and cached. A stream whose entries all pass (the
usual case) is checked with C-level ``min``/``max``/``map`` over its columns and its
keys built with ``zip``; anything else takes the per-entry path, which has the messages.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from itertools import repeat

from tests.lokisim._labels import format_labels
from tests.lokisim._levels import (
    LEVEL_LABEL,
    detect_level,
    level_from_fields,
    normalize_level,
    normalize_metadata_name,
)
from tests.lokisim._limits import (
    MISSING_STREAMS,
    Limits,
    metadata_size,
    parse_stream_labels,
    validate_entry,
    validate_labels,
)
from tests.lokisim._proto import DecodedPush, DecodedStream, PushEntry

__all__ = ["Checked", "Distributor", "Key", "LabelSet", "PushResult"]

_NS_PER_S = 1_000_000_000
# Beyond any timestamp a push can carry (int64 seconds * 1e9 < 1e28): "no bound".
_UNBOUNDED = 10**40
# A UTF-8 character is at most 4 bytes: a line of at most max_line_size // 4 characters
# is within Loki's byte limit without encoding it.
_MAX_UTF8_BYTES = 4
# Caches keyed by what clients send (label sets, metadata); a client repeats a few, and
# a pathological one only makes the caches restart.
_MAX_CACHED = 100_000
Key = tuple[int, str, int]
"""``(ts_ns, line, metadata id)``: what the ingester compares to de-duplicate and what
the store keeps per entry. Strings and ints only, so the garbage collector stops
tracking these tuples: millions of stored entries do not slow every collection."""
# What one metadata tuple of one label set becomes: whether it passes the distributor's
# metadata limits, and the stored metadata's id, or the 500 message of a name that does
# not normalise, or (when the line decides detected_level) the metadata without it.
_Outcome = tuple[bool, int | str | dict[str, str]]


@dataclass(frozen=True)
class PushResult:
    """What the push endpoint answers: 204 with no message, or an error status and text."""

    status: int
    message: str = ""


@dataclass
class LabelSet:
    """A pushed label-set text after parsing and the distributor's label checks.

    Attributes:
        pairs: the normalised pairs (``service_name`` added, sorted).
        problem: the message refusing the stream's entries, or None.
        labels: the pairs as a mapping.
        shown: the labels as Loki prints them (the stream's identity).
        outcomes: per metadata tuple, what it becomes in this stream (a cache).
    """

    pairs: list[tuple[str, str]]
    problem: str | None
    labels: dict[str, str]
    shown: str
    outcomes: dict[tuple[tuple[str, str], ...], _Outcome] = field(default_factory=dict)


@dataclass(frozen=True)
class Checked:
    """A push that passed the distributor, at least in part.

    Attributes:
        batches: per stream with accepted entries, its label set and their keys.
        errors: the refusals, in the order the entries were checked.
    """

    batches: list[tuple[LabelSet, list[Key]]]
    errors: list[str]


class Distributor:
    """Checks pushes against one set of limits; thread-safe.

    It also interns stored metadata: keys carry an id, :meth:`metadata` gives it back.
    """

    def __init__(self, limits: Limits) -> None:
        """Create a distributor with empty caches.

        Args:
            limits: the limits every tenant gets.
        """
        self._limits = limits
        self._label_sets: dict[str, LabelSet | str] = {}
        self._metadata_ok: dict[tuple[tuple[str, str], ...], bool] = {}
        # Equal metadata gets equal ids, so keys compare as the metadata would.
        self._intern_lock = threading.Lock()
        self._metadata_ids: dict[tuple[tuple[str, str], ...], int] = {}
        self._metadata: list[tuple[tuple[str, str], ...]] = []

    def metadata(self, metadata_id: int) -> tuple[tuple[str, str], ...]:
        """Return the stored metadata pairs (sorted by name) a key's id stands for."""
        return self._metadata[metadata_id]

    def check(self, push: DecodedPush) -> Checked | PushResult:
        """Run a push through the distributor.

        Args:
            push: the decoded push.

        Returns:
            The accepted keys and refusals, or the answer when the whole push is
            refused (422 no streams, 400 unparseable labels, 500 a metadata name that
            does not normalise: Loki's distributor returns it as is, storing nothing).
        """
        if not push.streams:
            return PushResult(422, MISSING_STREAMS)
        label_sets = []
        for stream in push.streams:
            label_set = self._label_set(stream.labels)
            if isinstance(label_set, str):
                return PushResult(400, label_set)
            label_sets.append(label_set)
        limits = self._limits
        now_ns = limits.now()
        lowest = (
            now_ns - int(limits.reject_old_samples_max_age_s * _NS_PER_S)
            if limits.reject_old_samples
            else -_UNBOUNDED
        )
        highest = now_ns + int(limits.creation_grace_period_s * _NS_PER_S)
        line_chars = limits.max_line_size // _MAX_UTF8_BYTES if limits.max_line_size else _UNBOUNDED
        checked = Checked([], [])
        for label_set, stream in zip(label_sets, push.streams, strict=True):
            if not stream.lines:
                continue
            if label_set.problem is not None:
                checked.errors.append(label_set.problem)
                continue
            fast = self._fast_keys(label_set, push.metadata, stream, lowest, highest, line_chars)
            good = (
                fast
                if fast is not None
                else self._checked_keys(label_set, push.metadata, stream, now_ns, checked.errors)
            )
            if isinstance(good, PushResult):
                return good
            if good:
                checked.batches.append((label_set, good))
        return checked

    def _fast_keys(
        self,
        label_set: LabelSet,
        metadata: list[tuple[tuple[str, str], ...]],
        stream: DecodedStream,
        lowest: int,
        highest: int,
        line_chars: int,
    ) -> list[Key] | None:
        """The stream's keys when every entry passes without a per-entry check, else None.

        The usual push (recent timestamps, short lines, metadata within limits and a
        level field) is checked with C-level min/max/map over the whole stream; anything
        else returns None and goes through :meth:`_checked_keys`, which has the messages.
        """
        ids: dict[int, int] = {}
        for slot in set(stream.slots):
            ok, stored = self._outcome(label_set, metadata[slot])
            if not ok or not isinstance(stored, int):
                return None
            ids[slot] = stored
        timestamps, lines = stream.timestamps, stream.lines
        if not (lowest <= min(timestamps) and max(timestamps) <= highest):
            return None
        if max(map(len, lines)) > line_chars:
            return None
        if len(ids) == 1:
            (only,) = ids.values()
            return list(zip(timestamps, lines, repeat(only, len(lines)), strict=True))
        return list(zip(timestamps, lines, map(ids.__getitem__, stream.slots), strict=True))

    def _checked_keys(
        self,
        label_set: LabelSet,
        metadata: list[tuple[tuple[str, str], ...]],
        stream: DecodedStream,
        now_ns: int,
        errors: list[str],
    ) -> list[Key] | PushResult:
        """The distributor's per-entry checks; refusals go to ``errors``.

        Returns:
            The keys of the accepted entries, or the 500 of a metadata name that does
            not normalise (Loki's distributor returns it as is, and stores nothing).
        """
        limits = self._limits
        outcomes: dict[int, _Outcome] = {}
        good: list[Key] = []
        for ts_ns, line, slot in zip(stream.timestamps, stream.lines, stream.slots, strict=True):
            outcome = outcomes.get(slot)
            if outcome is None:
                outcome = outcomes[slot] = self._outcome(label_set, metadata[slot])
            entry = PushEntry(ts_ns, line, metadata[slot])
            problem = validate_entry(limits, label_set.shown, entry, now_ns)
            if problem is not None:
                errors.append(problem)
                continue
            stored = outcome[1]
            if isinstance(stored, int):
                good.append((ts_ns, line, stored))
            elif isinstance(stored, str):
                return PushResult(500, stored)
            else:
                good.append((ts_ns, line, self._with_level(label_set, stored, line)))
        return good

    def _label_set(self, text: str) -> LabelSet | str:
        """Parse and check a label-set text (cached); a str is the whole push's 400."""
        cached = self._label_sets.get(text)
        if cached is not None:
            return cached
        try:
            pairs = parse_stream_labels(text, self._limits)
        except ValueError as exc:
            result: LabelSet | str = str(exc)
        else:
            problem = validate_labels(self._limits, pairs)
            result = LabelSet(pairs, problem, dict(pairs), format_labels(pairs))
        if len(self._label_sets) >= _MAX_CACHED:
            self._label_sets.clear()
        self._label_sets[text] = result
        return result

    def _outcome(self, label_set: LabelSet, pairs: tuple[tuple[str, str], ...]) -> _Outcome:
        """What metadata ``pairs`` become in a stream of ``label_set`` (cached)."""
        cached = label_set.outcomes.get(pairs)
        if cached is not None:
            return cached
        outcome = (self._check_metadata(pairs), self._finish(label_set.labels, pairs))
        if len(label_set.outcomes) >= _MAX_CACHED:
            label_set.outcomes.clear()
        label_set.outcomes[pairs] = outcome
        return outcome

    def _check_metadata(self, pairs: tuple[tuple[str, str], ...]) -> bool:
        """True when ``pairs`` pass the distributor's metadata limits (validate_entry's)."""
        ok = self._metadata_ok.get(pairs)
        if ok is None:
            limits = self._limits
            size, count = metadata_size(pairs), len(pairs)
            ok = not pairs or (
                limits.allow_structured_metadata
                and not (
                    limits.max_structured_metadata_size
                    and size > limits.max_structured_metadata_size
                )
                and not (
                    limits.max_structured_metadata_entries_count
                    and count > limits.max_structured_metadata_entries_count
                )
            )
            if len(self._metadata_ok) >= _MAX_CACHED:
                self._metadata_ok.clear()
            self._metadata_ok[pairs] = ok
        return ok

    def _finish(
        self, labels: dict[str, str], pairs: tuple[tuple[str, str], ...]
    ) -> int | str | dict[str, str]:
        """Normalise metadata and add ``detected_level``, as the distributor does.

        Returns:
            The stored metadata's id; the 500 message when a name does not normalise; or
            the normalised metadata when ``detected_level`` depends on the line.
        """
        metadata: dict[str, str] = {}
        try:
            for name, value in pairs:
                metadata[normalize_metadata_name(name)] = value.replace("\ufffd", " ")
        except ValueError as exc:
            return str(exc)
        if self._limits.discover_log_levels and self._limits.allow_structured_metadata:
            if LEVEL_LABEL in metadata:
                metadata[LEVEL_LABEL] = normalize_level(metadata[LEVEL_LABEL])
            else:
                level = level_from_fields(labels, metadata)
                if level is None:
                    return metadata
                metadata[LEVEL_LABEL] = level
        return self._intern(tuple(sorted(metadata.items())))

    def _with_level(self, label_set: LabelSet, metadata: dict[str, str], line: str) -> int:
        """The stored metadata's id once the line gave ``detected_level``."""
        level = detect_level(label_set.labels, metadata, line)
        return self._intern(tuple(sorted({**metadata, LEVEL_LABEL: level}.items())))

    def _intern(self, metadata: tuple[tuple[str, str], ...]) -> int:
        found = self._metadata_ids.get(metadata)
        if found is not None:
            return found
        with self._intern_lock:
            found = self._metadata_ids.get(metadata)
            if found is None:
                found = self._metadata_ids[metadata] = len(self._metadata)
                self._metadata.append(metadata)
            return found
