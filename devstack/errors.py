"""Exceptions the devstack's services raise and log, each owned by a layer.

``agent_logging`` classifies an exception by an ``owner_layer`` attribute anywhere in its
chain before its rule table (DESIGN §4); services use that for the failures they, and only
they, can attribute: the worker knows that a canceled provider job is the provider's, the API
knows that a task held by a node instance that no longer exists was lost to the node. The
attribute belongs to the class, as a service's own error types would carry it; no scenario
sets it. Failures of other software (TLS, HTTP statuses from a peer, PostgreSQL, missing
executables) are raised by that software and classified by ``agent_logging``'s rules.

The tree::

    DevstackError
     ├── ProviderJobError      provider   an AAP/EDA job failed or was canceled under us
     ├── StaleTransitionError  workflow_state  a transition lost an optimistic-concurrency race
     ├── TaskLostError         node       a task's node was reimaged while it held the task
     ├── TaskFailedError       (unset)    a node agent reported a task failed (wrapper)
     └── TaskReportError       (unset)    a node agent could not deliver a result (wrapper)
"""

from __future__ import annotations

__all__ = [
    "DevstackError",
    "ProviderJobError",
    "StaleTransitionError",
    "TaskFailedError",
    "TaskLostError",
    "TaskReportError",
]


class DevstackError(Exception):
    """Root of the devstack's own exceptions."""


class ProviderJobError(DevstackError):
    """A provider job ended failed or canceled without the workflow asking for it."""

    owner_layer = "provider"


class StaleTransitionError(DevstackError):
    """A state transition found the row changed since the workflow step read it."""

    owner_layer = "workflow_state"


class TaskLostError(DevstackError):
    """A node came back with a new ``node_instance_id`` while its old instance held a task."""

    owner_layer = "node"


class TaskFailedError(DevstackError):
    """A node agent reported its task failed; the node's own record says why."""


class TaskReportError(DevstackError):
    """A node agent could not report a task's result; the cause says why."""
