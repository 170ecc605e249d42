"""devstack: a local provisioning environment on 127.0.0.1 with injectable faults.

Real nginx (TLS from a local CA) in front of a FastAPI provisioning API, a real PostgreSQL,
a workflow worker driving AAP/EDA-style provider jobs, a status projector writing CR-like
documents, and node agents; every process logs through ``agent_logging`` to Loki. The
scenarios (``python -m devstack scenario NAME``) inject one fault each and check that the
correlator names its owner layer from the evidence. See DESIGN §7 and ``devstack/cli.py``.
"""

from __future__ import annotations

__all__: list[str] = []
