"""Write structlog's JSON lines (``JSONRenderer`` with an ISO time stamp and the level), for
the ``json`` text format: structlog names the message ``event``.

structlog is a dependency of the project (``agent_logging`` uses it); regenerate the fixture
(from this folder, the project's ``.venv`` active) with::

    python json_structlog_lines.py > ../fixtures/json_structlog.log
"""

import structlog

structlog.configure(
    processors=[
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        structlog.processors.JSONRenderer(),
    ]
)
log = structlog.get_logger()
log.info("deploy started", allocation_id="b9000564-fe1a-409b-b8cc-1e88b294cd1d", host="worker-1")
log.warning("retrying", request_id="req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab", attempt=2)
try:
    raise TimeoutError("ansible job 4711 timed out after 600 s")
except TimeoutError:
    log.exception("deploy failed", request_id="req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab")
