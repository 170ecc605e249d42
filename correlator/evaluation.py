"""``correlator eval``: replay incidents whose truth is known, and score the verdicts.

A case is a folder of evidence files and a ``truth.json``::

    {
      "seed": "allocation_id=a-7c21",
      "owner_layer": "cert",                       # or "none" for a healthy run
      "first_failure_contains": "certificate has expired",   # optional
      "excluded": ["allocation_id=a-9911"],        # optional: must stay out of the timeline
      "sources": {"edge.log": "nginx"},            # optional: files not named after their kind
      "notes": "what happened, and how the evidence was produced"
    }

An evidence file's source kind is the part of its name before the first ``.``, ``-`` or
``_`` (``nginx-error.log``, ``postgres.csv``, ``agent-node.ndjson``), unless ``sources`` names
it. Each case is ingested into a scratch store of its own, its seed's timeline asked for, and
the verdict compared with the truth: the owner layer, the first failure's text, and that no
excluded identifier's evidence got into the timeline. A case is right when all three hold.

Teams replay their own post-mortems this way after changing an owner rules file; CI replays
the project's corpus (``tests/incidents``) and fails under an accuracy floor or on any owner
named in a healthy case (a false alarm).
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agent_logging.owner import DEFAULT_RULES, OwnerRule
from correlator import incident
from correlator.errors import CorrelatorError, InputError, NotFoundError
from correlator.ingest import ingest_paths
from correlator.model import OWNER_LAYERS
from correlator.sources import file_kinds
from correlator.store import Store

__all__ = ["CaseResult", "Report", "Truth", "evaluate", "find_cases", "read_truth", "run_case"]

TRUTH_FILE: Final = "truth.json"
_TRUTH_KEYS: Final = frozenset(
    {"seed", "owner_layer", "first_failure_contains", "excluded", "sources", "notes"}
)
_ANSWERS: Final = (*(o for o in OWNER_LAYERS if o != "unknown"), "none")
_KIND_PREFIX: Final = re.compile(r"^([a-z0-9]+)")


@dataclass(frozen=True, slots=True)
class Truth:
    """What really happened in one case."""

    seed: tuple[str, str]
    owner_layer: str
    first_failure_contains: str | None = None
    excluded: tuple[tuple[str, str], ...] = ()
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class CaseResult:
    """One case replayed."""

    case: str
    expected: str
    got: str
    confidence: float
    right: bool
    why: str
    reason: str
    seconds: float
    accepted: int = 0
    rejected: int = 0
    owner_source: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of one row."""
        return {
            "case": self.case,
            "expected": self.expected,
            "got": self.got,
            "confidence": self.confidence,
            "right": self.right,
            "why": self.why,
            "reason": self.reason,
            "owner_source": self.owner_source,
            "seconds": round(self.seconds, 3),
            "accepted": self.accepted,
            "rejected": self.rejected,
        }


@dataclass(slots=True)
class Report:
    """Every case replayed, and the scores."""

    results: list[CaseResult]

    @property
    def accuracy(self) -> float:
        """Right cases over all cases (1.0 for none)."""
        if not self.results:
            return 1.0
        return sum(r.right for r in self.results) / len(self.results)

    @property
    def false_alarms(self) -> list[CaseResult]:
        """Healthy cases (truth ``none``) in which an owner was named."""
        return [r for r in self.results if r.expected == "none" and r.got != "none"]

    def confusion(self) -> dict[str, dict[str, int]]:
        """``{expected: {got: count}}`` over the owner layers."""
        matrix: dict[str, dict[str, int]] = {}
        for result in self.results:
            row = matrix.setdefault(result.expected, {})
            row[result.got] = row.get(result.got, 0) + 1
        return matrix

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of ``correlator eval --json``."""
        return {
            "cases": [r.as_dict() for r in self.results],
            "accuracy": round(self.accuracy, 4),
            "right": sum(r.right for r in self.results),
            "total": len(self.results),
            "false_alarms": [r.case for r in self.false_alarms],
            "confusion": self.confusion(),
        }


def _pair(text: Any, where: str) -> tuple[str, str]:
    if not isinstance(text, str):
        raise InputError(f"{where}: expected a KEY=VALUE string, got {text!r}")
    try:
        return incident.parse_seed(text)
    except CorrelatorError as exc:
        raise InputError(f"{where}: {exc}") from exc


def read_truth(path: Path) -> Truth:
    """A case's ``truth.json``, checked.

    Raises:
        InputError: unreadable, not JSON, or a field missing or malformed (named).
    """
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    unknown = sorted(set(data) - _TRUTH_KEYS)
    if unknown:
        raise InputError(
            f"{path}: unknown field {', '.join(unknown)}; allowed: {', '.join(sorted(_TRUTH_KEYS))}"
        )
    if "seed" not in data or "owner_layer" not in data:
        raise InputError(f"{path}: 'seed' and 'owner_layer' are required")
    owner = data["owner_layer"]
    if owner not in _ANSWERS:
        raise InputError(f"{path}: owner_layer {owner!r} is not one of {', '.join(_ANSWERS)}")
    contains = data.get("first_failure_contains")
    if contains is not None and not isinstance(contains, str):
        raise InputError(f"{path}: first_failure_contains must be a string")
    excluded = data.get("excluded", [])
    if not isinstance(excluded, list):
        raise InputError(f"{path}: excluded must be a list of KEY=VALUE strings")
    sources = data.get("sources", {})
    kinds = file_kinds()
    if not isinstance(sources, dict) or not all(
        isinstance(k, str) and v in kinds for k, v in sources.items()
    ):
        raise InputError(
            f"{path}: sources must map file names to a kind: {', '.join(sorted(kinds))}"
        )
    return Truth(
        seed=_pair(data["seed"], f"{path}: seed"),
        owner_layer=owner,
        first_failure_contains=contains,
        excluded=tuple(_pair(e, f"{path}: excluded") for e in excluded),
        sources=dict(sources),
    )


def find_cases(roots: Sequence[Path]) -> list[Path]:
    """Case folders under ``roots`` (a root that holds ``truth.json`` is a case itself),
    sorted by path.

    Raises:
        InputError: a root is not a folder, or holds no case.
    """
    cases: list[Path] = []
    for root in roots:
        if not root.is_dir():
            raise InputError(f"{root}: not a folder of incidents")
        found = (
            [root]
            if (root / TRUTH_FILE).is_file()
            else sorted(p.parent for p in root.glob(f"*/{TRUTH_FILE}"))
        )
        if not found:
            raise InputError(f"{root}: no {TRUTH_FILE} in it or in its sub-folders")
        cases.extend(found)
    return sorted(dict.fromkeys(cases))


def _kind(path: Path, truth: Truth) -> str:
    if path.name in truth.sources:
        return truth.sources[path.name]
    match = _KIND_PREFIX.match(path.name)
    kind = match.group(1) if match else ""
    kinds = file_kinds()
    if kind not in kinds:
        raise InputError(
            f"{path}: cannot tell its source kind from its name; name it after one "
            f"({', '.join(sorted(kinds))}) or give it in truth.json's 'sources'"
        )
    return kind


def _evidence(case: Path, truth: Truth) -> Iterator[tuple[str, Path]]:
    for path in sorted(case.iterdir()):
        if path.name == TRUTH_FILE or path.name.startswith((".", "README")) or not path.is_file():
            continue
        yield _kind(path, truth), path


def _judge(truth: Truth, answer: dict[str, Any]) -> tuple[bool, str]:
    verdict = answer["verdict"]
    got = verdict["owner_layer"]
    if got != truth.owner_layer:
        return False, f"owner {got}, expected {truth.owner_layer}"
    if truth.first_failure_contains is not None:
        first = verdict.get("first_failure") or {}
        text = f"{first.get('message', '')}\n{first.get('raw', '')}"
        if truth.first_failure_contains.lower() not in text.lower():
            return False, (
                f"the first failure does not contain {truth.first_failure_contains!r}: "
                f"{first.get('message', '(none)')!r}"
            )
    leaked = [
        f"{key}={value}"
        for key, value in truth.excluded
        if any(event.get(key) == value for event in answer["events"])
    ]
    if leaked:
        return False, f"excluded evidence in the timeline: {', '.join(leaked)}"
    return True, "right"


def run_case(case: Path, rules: Sequence[OwnerRule] = DEFAULT_RULES) -> CaseResult:
    """Replay one case into a scratch store and judge its verdict.

    Raises:
        InputError: the case's truth or evidence cannot be read.
    """
    started = time.perf_counter()
    truth = read_truth(case / TRUTH_FILE)
    with (
        tempfile.TemporaryDirectory(prefix="correlator-eval-") as scratch,
        Store(Path(scratch) / "case.duckdb") as store,
    ):
        accepted = rejected = 0
        for kind, path in _evidence(case, truth):
            result = ingest_paths(store, kind, [path])
            accepted += result.accepted
            rejected += sum(result.rejected.values())
        key, value = truth.seed
        try:
            answer = incident.timeline_for(store, key, value, rules=rules)
        except NotFoundError as exc:
            return CaseResult(
                case.name,
                truth.owner_layer,
                "-",
                0.0,
                False,
                str(exc),
                "",
                time.perf_counter() - started,
                accepted,
                rejected,
            )
    right, why = _judge(truth, answer)
    verdict = answer["verdict"]
    return CaseResult(
        case.name,
        truth.owner_layer,
        verdict["owner_layer"],
        verdict["confidence"],
        right,
        why,
        verdict.get("reason", ""),
        time.perf_counter() - started,
        accepted,
        rejected,
        verdict.get("owner_source"),
    )


def evaluate(
    roots: Sequence[Path],
    rules: Sequence[OwnerRule] = DEFAULT_RULES,
    *,
    on_case: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Replay every case under ``roots``.

    Args:
        roots: case folders, or folders of case folders.
        rules: the owner table the verdicts apply.
        on_case: called with each result as it is known (progress).

    Returns:
        The report; a case whose truth or evidence cannot be read is a wrong one whose
        ``got`` is ``error`` and whose ``why`` says what is wrong.

    Raises:
        InputError: a root is not a folder or holds no case.
    """
    results = []
    for case in find_cases(roots):
        started = time.perf_counter()
        try:
            result = run_case(case, rules)
        except InputError as exc:  # this case is unreadable; the others are still replayed
            expected = "?"
            with contextlib.suppress(InputError):
                expected = read_truth(case / TRUTH_FILE).owner_layer
            result = CaseResult(
                case.name,
                expected,
                "error",
                0.0,
                False,
                str(exc),
                "",
                time.perf_counter() - started,
            )
        results.append(result)
        if on_case is not None:
            on_case(result)
    return Report(results)
