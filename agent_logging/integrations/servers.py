"""One call that routes an ASGI/WSGI server's own logging through the pipeline.

uvicorn and gunicorn configure their loggers themselves: handlers of their own with their own
text formats, and ``propagate`` off, so their access and error lines stay plain text beside a
service's JSON records (the correlator then rejects them, and they carry no identifier).
:func:`route_server_logs` takes those handlers off and lets the records propagate to the root
logger, which :func:`agent_logging.configure` routes through the pipeline::

    agent_logging.configure(service="api", layer="api")
    agent_logging.integrations.servers.route_server_logs()
    uvicorn.run(app, log_config=None)  # None: uvicorn leaves logging as configured

With ``uvicorn.run(app)`` (its default ``log_config``) or the ``uvicorn`` command, uvicorn
configures its loggers when it starts, after this call: pass ``log_config=None`` (command:
``--log-config`` with a file that configures nothing), or call this from the app's startup.
gunicorn sets its loggers up when it starts too: call it from a hook (``post_worker_init``)
in its config file. uvicorn's ``color_message`` (its message again, with ANSI colour codes)
is left out of the records.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

__all__ = ["SERVER_LOGGERS", "route_server_logs"]

#: The loggers uvicorn and gunicorn write their access and error lines to.
SERVER_LOGGERS: Final = (
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "uvicorn.asgi",
    "gunicorn",
    "gunicorn.error",
    "gunicorn.access",
)


def route_server_logs(names: Iterable[str] = SERVER_LOGGERS) -> None:
    """Send the server's loggers' records through the pipeline instead of their own handlers.

    Args:
        names: the loggers to route (default :data:`SERVER_LOGGERS`).
    """
    for name in names:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)  # the pipeline's level decides
