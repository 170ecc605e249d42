"""``agent-logging drain``: the gate before a reimage, and finding spools from the shell.

:func:`drain` ships everything spooled (its owner may be gone; a live owner is left to ship
its own, and waited for until what was spooled at the start has left its spool), then queries
Loki until every spooled record is visible, and looks up every record of the spools'
dead-letter files (entries Loki refused: they were never shipped, and a later run would find
the spool empty). It answers 0 only when all of them are in Loki, and 1 with the counts of
what is missing otherwise (what must be visible, and the check, are ``_visibility``'s).

Records lost to damage are never in the spool to be looked for: a segment cut short, zeroed,
overwritten or deleted holds nothing that says what it held. The spool's ledger does
(``spool._ledger``): opening a spool checks every segment against it and reports each loss in
the spool's quarantine (``spool._quarantine``), and so does a live owner. Drain fails while any
spool's quarantine holds a report (or the same check finds a loss not yet reported, in a
spool whose owner is alive), naming the records lost and where, until the operator accepts
the loss (``--accept-loss``) or removes the folder. A
``--spool-dir`` that holds no spool is a :class:`UsageError` (naming spools found below it, if
any): a mistyped path must not pass the gate having checked nothing. The helpers that find
spools (:func:`check_spool_dir`, :func:`nested_spool_roots`) serve ``agent-logging status``
too (``_cli``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from agent_logging import _environ
from agent_logging.loki._client import LokiClient
from agent_logging.shipping._shipper import Shipper
from agent_logging.shipping._visibility import (
    POLL_S,
    DeadLetters,
    Expected,
    collect,
    count,
    dead_letters,
    default_labels,
    difference,
    intersection,
    record_key,
    union,
    verify,
)
from agent_logging.spool._dirs import (
    DEAD_LETTER_NAME,
    is_spool_dir,
    live_owner_pid,
    spool_dirs,
    spooled_records,
)
from agent_logging.spool._quarantine import QUARANTINE_NAME, Quarantine, read_quarantine
from agent_logging.spool._segments import losses_not_reported
from agent_logging.spool._spool import Spool, SpoolStats

__all__ = [
    "QUARANTINE_ADVICE",
    "Losses",
    "UsageError",
    "check_spool_dir",
    "drain",
    "either",
    "nested_spool_roots",
]

#: How many directories below ``--spool-dir`` are looked at for a misplaced spool.
_SEARCH_DIRS = 2000
_SEARCH_DEPTH = 3
_SPOOL_LOOKS = (
    "a spool is a directory holding a `lock` file and `seg-*.spool` segment files; "
    "a service configured with spool_dir=DIR (AGENT_LOGGING_SPOOL_DIR) keeps it in DIR/<service>/"
)


#: What an operator can do about records lost to damage (``drain`` and ``status`` say it).
QUARANTINE_ADVICE = (
    f"Each spool's {QUARANTINE_NAME}/ folder holds the damaged segment files as they were found "
    "and one SEGMENT.loss.json report per segment: how many records it lost, how many it was "
    "given and held intact, and the damaged byte ranges. The lost records cannot be shipped "
    "from there; look at the files (agent-logging status --spool-dir DIR shows the counts). "
    f"Once the loss is accepted, pass --accept-loss, or remove the {QUARANTINE_NAME}/ folder: "
    "drain fails until then."
)


@dataclass(frozen=True)
class Losses:
    """A spool's records lost to damage: its quarantine, and losses not reported yet."""

    directory: Path
    quarantine: Quarantine
    #: Found by the same check as replay's, in segments no report names (a live owner's).
    unreported: dict[str, int]

    @classmethod
    def of(cls, directory: Path) -> Losses:
        quarantine = read_quarantine(directory)
        reported = {str(report.get("segment")) for report in quarantine.reports}
        live = live_owner_pid(directory) is not None
        return cls(directory, quarantine, losses_not_reported(directory, reported, live=live))

    @property
    def records(self) -> int:
        return self.quarantine.records_lost + sum(self.unreported.values())

    def __bool__(self) -> bool:
        return bool(self.quarantine.reports or self.quarantine.unreadable or self.unreported)

    def where(self) -> list[str]:
        """One phrase per damaged segment: what it lost, and where."""
        phrases = []
        for report in self.quarantine.reports:
            damage = report.get("damage") or []
            at = ", ".join(f"{d['kind']} at bytes {d['offset']}..{d['end']}" for d in damage[:3])
            at += ", ..." if len(damage) > 3 else ""
            lost = report.get("records_lost", 0)
            name = str(report.get("segment", "?"))
            kept = self.quarantine.folder / name
            phrases.append(
                f"{kept if kept.exists() else self.directory / name}: "
                f"{'at least ' if report.get('at_least') else ''}{lost} records lost"
                f" ({report.get('why', '')}{'; ' + at if at else ''})"
            )
        if self.quarantine.unreadable:
            phrases.append(
                f"{self.quarantine.folder}: {self.quarantine.unreadable} reports cannot be read"
            )
        phrases.extend(
            f"{self.directory / name}: {lost} records lost (found now, not yet reported)"
            for name, lost in sorted(self.unreported.items())
        )
        return phrases


class UsageError(Exception):
    """A command-line argument is unusable: exit 2, as argparse does."""


def _node_id_label(choice: str, directory: Path) -> bool:
    """Whether to ship a spool with ``node_id`` as a label, as its owner would have."""
    if choice != "auto":
        return choice == "on"
    head = next(spooled_records(directory), None)
    if head is None:
        return False
    try:
        layer = orjson.loads(head.payload).get("layer")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return bool(layer == "node")


def _shipped_by_owner(directory: Path, expected: Expected) -> bool:
    """Whether a live owner has shipped every record its spool held when drain started.

    The owner goes on logging, so its spool may never be empty; but it acknowledges in
    order, so once the oldest record left is not one drain collected, all those are gone.
    """
    head = next(spooled_records(directory), None)
    if head is None:
        return True
    stream, key = record_key(head, default_labels(directory))
    return key not in expected.streams.get(stream, set())


def _ship(
    directory: Path,
    client: LokiClient,
    args: argparse.Namespace,
    deadline: float,
    expected: Expected,
) -> tuple[str, SpoolStats | None]:
    """Ship one spool; returns a problem sentence or "", and the counters of the spool when
    drain opened it (its owner gone: opening checked it against its ledger)."""
    if not directory.exists():
        return "", None  # adopted, emptied and removed by a live process since we listed it
    spool = Spool.try_open(directory)
    if spool is None:
        # A live owner ships its own spool: wait until what drain collected has left it.
        while time.monotonic() < deadline:
            if _shipped_by_owner(directory, expected):
                return "", None
            time.sleep(POLL_S)
        owner = live_owner_pid(directory)
        return f"{directory}: its owner (pid {owner}) did not ship it in time", None
    with spool:
        stats = spool.stats()
        shipper = Shipper(
            spool,
            client,
            dead_letter_path=directory / DEAD_LETTER_NAME,
            node_id_label=_node_id_label(args.node_id_label, directory),
            default_labels=default_labels(directory),
            backoff_max_s=5.0,
        )
        if not shipper.ship_pending(max(0.0, deadline - time.monotonic())):
            last_error = shipper.stats()["last_error"]
            return f"{directory}: Loki did not accept everything in time ({last_error})", stats
        stats = spool.stats()
    return "", stats


def check_spool_dir(spool_dir: Path) -> None:
    if not spool_dir.is_dir():
        raise UsageError(f"--spool-dir {spool_dir} is not a directory")


def nested_spool_roots(root: Path) -> list[Path]:
    """Directories below ``root`` that hold spools: where ``--spool-dir`` may have meant.

    Looks ``_SEARCH_DEPTH`` levels down, at no more than ``_SEARCH_DIRS`` directories (a
    ``--spool-dir /`` must not walk the disk); symbolic links are not followed.
    """
    found: list[Path] = []
    level = [root]
    budget = _SEARCH_DIRS
    for _ in range(_SEARCH_DEPTH):
        below: list[Path] = []
        for directory in level:
            try:
                children = sorted(
                    p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()
                )
            except OSError:
                continue
            for child in children:
                budget -= 1
                if budget < 0:
                    return found
                if is_spool_dir(child):
                    if directory != root:
                        found.append(directory)
                        break  # one hit names the directory; its siblings need no look
                else:
                    below.append(child)
        level = below
    return sorted(set(found))


def either(paths: Sequence[Path]) -> str:
    return " or ".join(str(path) for path in paths[:3]) + (" or ..." if len(paths) > 3 else "")


def _spools_to_drain(root: Path, allow_empty: bool) -> list[Path]:
    """The spools under ``root``; an empty list only when ``allow_empty`` accepts that.

    A mistyped path must not pass the reimage gate as "all 0 records are visible".

    Raises:
        UsageError: ``root`` is missing or holds no spool (and ``allow_empty`` does not
            apply), naming where spools were found below it, if anywhere.
    """
    if not root.is_dir():
        if allow_empty and not root.exists():
            return []
        raise UsageError(f"--spool-dir {root} is not a directory")
    directories = spool_dirs(root)
    if directories:
        return directories
    nested = nested_spool_roots(root)
    if nested:
        # Never accepted as empty: this node did spool, somewhere else than was given.
        raise UsageError(
            f"--spool-dir {root} holds no spool; did you mean {either(nested)}? ({_SPOOL_LOOKS})"
        )
    if allow_empty:
        return []
    raise UsageError(
        f"--spool-dir {root} holds no spool ({_SPOOL_LOOKS}); give the spool_dir the "
        "service was configured with, or pass --allow-empty if this node never spooled"
    )


def drain(args: argparse.Namespace) -> int:
    if not args.loki_url:
        raise UsageError(f"give --loki-url or set {_environ.LOKI_URL}")
    if not (math.isfinite(args.timeout_s) and args.timeout_s > 0):
        raise UsageError(f"--timeout-s must be a positive number of seconds, not {args.timeout_s}")
    started = time.monotonic()
    deadline = started + args.timeout_s
    directories = _spools_to_drain(args.spool_dir, args.allow_empty)
    if not directories:
        print(f"drain: no spool under {args.spool_dir}: nothing to ship (--allow-empty)")
        return 0
    expected = collect(directories)
    basic = (args.username, args.password or "") if args.username else None
    client = LokiClient(
        args.loki_url,
        tenant=args.tenant,
        basic_auth=basic,
        bearer_token=args.bearer_token,
        ca_bundle=args.ca_bundle,
    )
    problems = []
    torn = corrupt = 0
    with client:
        for directory in directories:
            problem, stats = _ship(directory, client, args, deadline, expected)
            if problem:
                problems.append(problem)
            if stats is not None:
                torn += stats.torn
                corrupt += stats.corrupt
        # Read after shipping: records refused just now are dead letters too.
        letters = dead_letters(directories)
        # Accepted dead letters are not looked for: old ones may be past Loki's retention.
        wanted = (
            expected.streams
            if args.accept_dead_letters
            else union(expected.streams, letters.streams)
        )
        missing, error = verify(client, wanted, deadline, settled=letters.streams)
    spooled_missing = intersection(missing, expected.streams)
    earlier_letters = difference(letters.streams, expected.streams)
    for problem in problems:
        print(f"drain: {problem}", file=sys.stderr)
    return _verdict(
        _Outcome(
            spools=len(directories),
            total=len(expected),
            # Spooled records Loki refused (this run, or a run cut short before): dead letters.
            refused=count(intersection(spooled_missing, letters.streams)),
            # Spooled records missing for any other reason: accepted but lost, not yet
            # visible, or not shipped in time. Never accepted.
            lost=count(difference(spooled_missing, letters.streams)),
            # Records of the dead-letter files that were not spooled now: not in Loki (or, when
            # accepted, not looked for).
            earlier=count(
                earlier_letters
                if args.accept_dead_letters
                else intersection(missing, earlier_letters)
            ),
            letters=letters,
            took_s=time.monotonic() - started,
            error=error,
            damaged=[losses for d in directories if (losses := Losses.of(d))],
            torn=torn,
            corrupt=corrupt,
        ),
        accept_dead_letters=args.accept_dead_letters,
        accept_loss=args.accept_loss,
    )


@dataclass(frozen=True)
class _Outcome:
    """What a drain found: counts of records, as :func:`drain` works them out."""

    spools: int
    total: int
    refused: int
    lost: int
    earlier: int
    letters: DeadLetters
    took_s: float
    error: str
    #: Spools that lost records to damage (their quarantine, or a loss not reported yet).
    damaged: list[Losses]
    #: Damaged regions found in the spools drain opened (``health()``'s counters).
    torn: int
    corrupt: int

    @property
    def damage_lost(self) -> int:
        return sum(losses.records for losses in self.damaged)

    def damage_text(self) -> str:
        """The records lost to damage and the counters, as one sentence ("" for none)."""
        if not (self.damaged or self.torn or self.corrupt):
            return ""
        at_least = any(losses.quarantine.at_least or losses.unreported for losses in self.damaged)
        text = (
            f"{'at least ' if at_least else ''}{self.damage_lost} records were lost to damage "
            f"in the spool before they could be shipped (damaged regions found: {self.torn} "
            f"torn, {self.corrupt} corrupt)"
        )
        where = [phrase for losses in self.damaged for phrase in losses.where()]
        if where:
            text += ": " + "; ".join(where)
        return text


def _verdict(outcome: _Outcome, *, accept_dead_letters: bool, accept_loss: bool) -> int:
    """Print what drain found; 0 when the node may be reimaged, else 1."""
    o = outcome
    unconfirmed = o.refused + o.earlier + o.letters.unreadable  # dead letters not in Loki
    files = ", ".join(str(path) for path in o.letters.files)
    visible = o.total - o.lost - o.refused
    damage = o.damage_text()
    if o.lost == 0 and (unconfirmed == 0 or accept_dead_letters) and (not o.damaged or accept_loss):
        text = (
            f"drain: all {visible} spooled records from {o.spools} spools are visible in Loki "
            f"({o.took_s:.1f} s)"
        )
        if o.damaged:
            text += f"; {damage}, accepted as lost (--accept-loss)"
        elif damage:
            text += f"; no record was lost to damage ({damage})"
        if unconfirmed:
            text += (
                f"; {unconfirmed} dead-lettered records, not confirmed in Loki, are accepted "
                f"as lost (--accept-dead-letters; see {files})"
            )
        elif o.letters.streams and not accept_dead_letters:
            text += f"; so are the {count(o.letters.streams)} records of the dead-letter files"
        print(text)
        return 0
    parts = []
    if o.damaged:
        parts.append(damage)
    if o.lost or o.refused:
        part = (
            f"{o.lost + o.refused} of {o.total} spooled records are NOT visible in Loki after "
            f"{o.took_s:.1f} s"
        )
        if o.refused:
            part += f"; {o.refused} were refused by Loki"
        parts.append(part)
    if o.earlier:
        parts.append(f"{o.earlier} records dead-lettered by an earlier run are NOT in Loki")
    if o.letters.unreadable:
        parts.append(f"{o.letters.unreadable} lines of the dead-letter files cannot be read")
    text = "drain: " + "; ".join(parts)
    if unconfirmed:
        text += f" (see {files})"
    if o.error:
        text += f"; last query error: {o.error}"
    text += ". Do not reimage yet."
    if unconfirmed and not accept_dead_letters:
        text += (
            " Dead letters are entries Loki refused, each with its labels, timestamp, line and "
            "Loki's reason: fix the cause and push them again, or pass --accept-dead-letters "
            "to accept their loss."
        )
    if o.damaged and not accept_loss:
        text += " " + QUARANTINE_ADVICE
    print(text, file=sys.stderr)
    return 1
