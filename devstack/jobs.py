"""The provider's job APIs as the worker and the projector use them (AAP- and EDA-style).

A job is named ``aap:N`` (an AAP job, ``/api/v2/jobs/N/``) or ``eda:N`` (an EDA activation
instance, ``/api/eda/v1/activation-instances/N/``), as the correlator's ``aap`` adapter names
them. Requests carry the current identifiers (``agent_logging.integrations.httpx``), and
:meth:`JobsClient.launch` hands them to the job as its extra vars (DESIGN §3: job payloads).
"""

from __future__ import annotations

from typing import Any, Final

import httpx

import agent_logging
from agent_logging.integrations.httpx import event_hooks

__all__ = ["JobsClient", "classify_status"]

_OK: Final = frozenset({"successful", "completed"})
_FAILED: Final = frozenset({"failed", "error"})
_CANCELED: Final = frozenset({"canceled", "stopped"})


def classify_status(status: str) -> str:
    """A job status (AAP or EDA) as ``active``, ``ok``, ``failed`` or ``canceled``."""
    if status in _OK:
        return "ok"
    if status in _FAILED:
        return "failed"
    if status in _CANCELED:
        return "canceled"
    return "active"


class JobsClient:
    """AAP- and EDA-style job APIs of the provider simulator.

    Args:
        base_url: the provider's address.
    """

    def __init__(self, base_url: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=5.0, event_hooks=event_hooks())

    def launch(self, provider: str, template: str) -> str:
        """Launch ``template`` with the current identifiers as extra vars.

        Args:
            provider: ``aap`` or ``eda``.
            template: ``provision`` or ``deprovision``.

        Returns:
            The job's name, ``aap:N`` or ``eda:N``.

        Raises:
            httpx.HTTPError: the provider refused or cannot be reached.
        """
        variables = agent_logging.payload()
        if provider == "aap":
            response = self.http.post(
                f"/api/v2/job_templates/{template}/launch/", json={"extra_vars": variables}
            )
            response.raise_for_status()
            return f"aap:{response.json()['job']}"
        response = self.http.post(
            "/api/eda/v1/activations/",
            json={"name": f"{template}-{variables.get('allocation_id')}", "extra_var": variables},
        )
        response.raise_for_status()
        return f"eda:{response.json()['id']}"

    def job(self, ref: str) -> dict[str, Any]:
        """The job object (AAP job or EDA activation instance) of ``ref``.

        Raises:
            httpx.HTTPError: the provider cannot be reached or does not know the job.
        """
        provider, _, number = ref.partition(":")
        path = (
            f"/api/v2/jobs/{number}/"
            if provider == "aap"
            else f"/api/eda/v1/activation-instances/{number}/"
        )
        response = self.http.get(path)
        response.raise_for_status()
        job: dict[str, Any] = response.json()
        return job

    def cancel(self, ref: str) -> None:
        """Cancel an AAP job, or disable an EDA activation (its instance stops)."""
        provider, _, number = ref.partition(":")
        path = (
            f"/api/v2/jobs/{number}/cancel/"
            if provider == "aap"
            else f"/api/eda/v1/activations/{number}/disable/"
        )
        self.http.post(path).raise_for_status()
