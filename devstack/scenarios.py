"""The scenarios: one fault each, its true owner layer, and what the correlator made of it.

:func:`run_scenario` runs one on a stack: it marks where the evidence starts, lets the
scenario inject its fault and drive traffic (``faults.py``), drains every spool
(``agent-logging drain``), collects the evidence of all five layers, ingests the files into a
fresh DuckDB with the correlator's own CLI, asks it for the seed's timeline with the
incident's records pulled from Loki (``correlator timeline --id --loki-url``; verdict
included) and for the findings, then restores the fault.

Owner layers (the truth each scenario is checked against):

============================  ================  ============================================
scenario                      owner             why
============================  ================  ============================================
``cert-expired``              ``cert``          the ingress serves an expired certificate
``token-rotated``             ``api_auth``      the API refuses the node's old token (401)
``missing-prerequisite``      ``deploy``        the node image lacks the deploy tool
``release-stuck``             ``workflow_state``  the release lost a concurrency race; the
                                                lifecycle is stuck in ``release_failed``
``db-lock-timeout``           ``db``            a lock timeout in PostgreSQL
``stale-cr-status``           ``provider``      the provider canceled the job; the CR's
                                                projection drifting is the finding
``delete-during-provision``   ``provider``      the provider's deprovision cannot destroy the
                                                VM its canceled job left locked; the VM is
                                                the provider's resource, so is the orphan
``reimage-mid-task``          ``node``          the node was reimaged while it held a task
``ingress-no-route``          ``ingress``       the ingress cannot reach its upstream
``healthy``                   ``none``          nothing fails
============================  ================  ============================================

Findings are computed with the devstack's thresholds (:data:`FINDINGS_CONFIG`: 1 s instead
of the production minutes and hours), since a scenario lives for seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from correlator.findings import FindingsConfig
from devstack import faults
from devstack.evidence import (
    Marks,
    collect,
    count_delivered,
    count_pulled,
    drain_all,
    ingest,
    ledger_lines,
    naming,
    timeline,
)
from devstack.harness import Run
from devstack.supervisor import Stack

__all__ = [
    "FINDINGS_CONFIG",
    "REQUIRED_LAYERS",
    "SCENARIOS",
    "Result",
    "Scenario",
    "render",
    "run_scenario",
]

#: The findings' thresholds at the devstack's time scale.
FINDINGS_CONFIG: Final = FindingsConfig(
    release_failed_deadline_s=1.0,
    provision_job_deadline_s=60.0,
    outbox_publish_deadline_s=1.0,
    drift_threshold_s=1.0,
    orphan_grace_s=1.0,
)

#: The layers every scenario's timeline must hold evidence from.
REQUIRED_LAYERS: Final = ("node", "ingress", "api", "workflow", "db")


@dataclass(frozen=True)
class Scenario:
    """A fault, its true owner layer and the findings it must produce."""

    name: str
    expected_owner_layer: str
    summary: str
    drive: Callable[[Run], dict[str, str]]
    expected_findings: tuple[str, ...] = ()


SCENARIOS: Final = {
    scenario.name: scenario
    for scenario in (
        Scenario("cert-expired", "cert", "the ingress certificate expires", faults.cert_expired),
        Scenario(
            "token-rotated", "api_auth", "the API rotates the node token", faults.token_rotated
        ),
        Scenario(
            "missing-prerequisite",
            "deploy",
            "the node image lacks its deploy tool",
            faults.missing_prerequisite,
        ),
        Scenario(
            "release-stuck",
            "workflow_state",
            "a release loses a race; the node stays fenced",
            faults.release_stuck,
            ("release_failed_stuck",),
        ),
        Scenario(
            "db-lock-timeout",
            "db",
            "a lock timeout leaves an outbox row unpublished",
            faults.db_lock_timeout,
            ("outbox_unpublished",),
        ),
        Scenario(
            "stale-cr-status",
            "provider",
            "the job is canceled; the CR keeps saying Running",
            faults.stale_cr_status,
            ("projection_drift",),
        ),
        Scenario(
            "delete-during-provision",
            "provider",
            "deleted mid-provision; the deprovision leaves the VM",
            faults.delete_during_provision,
            ("vm_orphaned",),
        ),
        Scenario(
            "reimage-mid-task", "node", "the node is reimaged mid-task", faults.reimage_mid_task
        ),
        Scenario(
            "ingress-no-route",
            "ingress",
            "the ingress's upstream is unreachable",
            faults.ingress_no_route,
        ),
        Scenario("healthy", "none", "no fault", faults.healthy),
    )
}


@dataclass
class Result:
    """What one scenario run showed."""

    scenario: Scenario
    seed: dict[str, str]
    timeline: dict[str, Any]
    findings: list[dict[str, Any]]
    #: Records the processes logged in the window (their ledgers), those Loki holds exactly
    #: once (the delivery check), and those the pull brought (the incident's); of them, those
    #: naming the seed, logged and pulled.
    records_logged: int
    records_seen: int
    records_pulled: int
    seed_records: int
    seed_records_pulled: int
    started_ns: int
    end_ns: int
    verdict_at_ns: int
    fault_at_ns: int | None
    directory: Path
    ingest_summary: str = ""
    problems: list[str] = field(default_factory=list)
    #: Seconds per phase: drive (fault and traffic), settle (of drive: waiting on purpose
    #: for a finding's threshold), drain, collect, ingest (the files), pull (the timeline
    #: from Loki, verdict included), analyse (the findings).
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> dict[str, Any]:
        verdict: dict[str, Any] = self.timeline["verdict"]
        return verdict

    @property
    def layers_seen(self) -> list[str]:
        return sorted({str(event["layer"]) for event in self.timeline["events"]})

    @property
    def finding_rules(self) -> list[str]:
        return sorted({str(finding["rule"]) for finding in self.findings})

    def check(self) -> list[str]:
        """What is wrong with the correlator's answer; empty when it is right."""
        problems = []
        if self.verdict["owner_layer"] != self.scenario.expected_owner_layer:
            problems.append(
                f"verdict {self.verdict['owner_layer']!r}, expected "
                f"{self.scenario.expected_owner_layer!r}: {self.verdict.get('reason', '')}"
            )
        missing = set(REQUIRED_LAYERS) - set(self.layers_seen)
        if missing:
            problems.append(f"no evidence from {', '.join(sorted(missing))} on the timeline")
        expected = set(self.scenario.expected_findings)
        if not expected <= set(self.finding_rules):
            problems.append(f"findings {self.finding_rules}, expected {sorted(expected)}")
        if not expected and self.findings:
            problems.append(f"unexpected findings {self.finding_rules}")
        if self.records_logged != self.records_seen:
            problems.append(
                f"{self.records_logged - self.records_seen} of {self.records_logged} records "
                "logged are not in Loki exactly once"
            )
        if self.seed_records_pulled != self.seed_records:
            problems.append(
                f"{self.seed_records - self.seed_records_pulled} of the {self.seed_records} "
                "records naming the seed were not pulled from Loki"
            )
        return problems

    @property
    def correct(self) -> bool:
        return not self.check()

    @property
    def fault_to_verdict_s(self) -> float:
        """Seconds from the fault taking effect (the start, for ``healthy``) to the verdict."""
        return (self.verdict_at_ns - self._fault_ns) / 1e9

    @property
    def fault_to_symptom_s(self) -> float:
        """Seconds from the fault to the end of the evidence window (the failure has shown
        itself, and a stuck state has outlived its finding threshold)."""
        return (self.end_ns - self._fault_ns) / 1e9

    @property
    def _fault_ns(self) -> int:
        return self.fault_at_ns if self.fault_at_ns is not None else self.started_ns

    def as_json(self) -> dict[str, Any]:
        """The stable ``devstack scenario NAME --json`` object."""
        return {
            "scenario": self.scenario.name,
            "expected_owner_layer": self.scenario.expected_owner_layer,
            "seed": self.seed,
            "verdict": self.verdict,
            "findings": self.findings,
            "layers_seen": self.layers_seen,
            "records_logged": self.records_logged,
            "records_seen": self.records_seen,
            "records_pulled": self.records_pulled,
            "seed_records": self.seed_records,
            "seed_records_pulled": self.seed_records_pulled,
        }


class _Laps:
    """Seconds per phase of a run."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._clock = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self._clock, 3)
        self._clock = now


def run_scenario(stack: Stack, scenario: Scenario) -> Result:
    """Run ``scenario`` on ``stack`` (which must be up) and judge the correlator's answer.

    The fault stays in place until the verdict is in (then it is undone and the run's
    allocations archived), so ``verdict_at_ns - fault_at_ns`` is detection time only.

    Raises:
        ScenarioError: the scenario could not drive the stack where it needed to.
        StackError: draining or ingesting the evidence failed.
    """
    from correlator.sources import workflow

    config = stack.config
    marks = Marks.take(config)
    directory = config.scenarios_dir / f"{scenario.name}-{marks.start_ns // 1_000_000}"
    run = Run(stack)
    lap = _Laps()
    try:
        seed = scenario.drive(run)
        end_ns = time.time_ns()
        lap("drive")
        time.sleep(0.2)  # what was logged before end_ns is in the spools by now
        drain_all(stack)
        lap("drain")
        files = collect(config, marks, directory, set(run.allocations))
        audit = list(workflow.read_audit_table(config.dsn, since_ns=marks.start_ns))
        lap("collect")
        db_path = directory / "correlator.duckdb"
        summary = ingest(db_path, files, audit)
        lap("ingest")
        answer, pulled = timeline(db_path, config, marks, end_ns, seed)
        lap("pull")
        found = _findings(db_path)
        lap("analyse")
        verdict_at_ns = time.time_ns()
    finally:
        try:
            run.restore()
        finally:
            run.close()
    lap.phases["settle"] = run.settled_s
    logged = ledger_lines(config, marks.start_ns, end_ns)
    own = naming(logged, seed)
    result = Result(
        scenario=scenario,
        seed=seed,
        timeline=answer,
        findings=found,
        records_logged=len(logged),
        records_seen=count_delivered(config, marks.start_ns, end_ns, logged),
        records_pulled=count_pulled(db_path, logged),
        seed_records=len(own),
        seed_records_pulled=count_pulled(db_path, own),
        started_ns=marks.start_ns,
        end_ns=end_ns,
        verdict_at_ns=verdict_at_ns,
        fault_at_ns=run.fault_at_ns,
        directory=directory,
        ingest_summary=summary + pulled,
        phases=lap.phases,
    )
    result.problems = result.check()
    return result


def _findings(db_path: Path) -> list[dict[str, Any]]:
    """Every finding in the store, at the devstack's scale."""
    from correlator import queries
    from correlator.store import Store

    with Store(db_path, read_only=True) as store:
        found: list[dict[str, Any]] = queries.findings(store, time.time_ns(), FINDINGS_CONFIG)[
            "findings"
        ]
    return found


def render(result: Result) -> None:
    """Print a result for a person: the verdict, its first failure, findings, counts."""
    verdict = result.verdict
    mark = "ok" if result.correct else "WRONG"
    print(f"scenario {result.scenario.name}: {mark}")
    print(f"  seed          {result.seed}")
    print(
        f"  verdict       {verdict['owner_layer']} (confidence {verdict['confidence']}), "
        f"expected {result.scenario.expected_owner_layer}"
    )
    print(f"  reason        {verdict.get('reason', '')}")
    first = verdict.get("first_failure")
    if first:
        print(f"  first failure [{first['layer']}:{first.get('service', '')}] {first['message']}")
    print(f"  layers        {', '.join(result.layers_seen)}")
    for finding in result.findings:
        print(f"  finding       {finding['rule']}: {finding['summary']}")
    print(
        f"  records       logged {result.records_logged}, in Loki {result.records_seen}, "
        f"pulled {result.records_pulled} (naming the seed: {result.seed_records_pulled} of "
        f"{result.seed_records})"
    )
    for problem in result.problems:
        print(f"  PROBLEM       {problem}")
    print(f"  evidence      {result.directory}")
    db = result.directory / "correlator.duckdb"
    key, value = next(iter(result.seed.items()))
    print(f"  timeline      correlator --db {db} timeline --id {key}={value}")
