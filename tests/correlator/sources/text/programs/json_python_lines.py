"""Write Python ``logging`` output as the JSON formatters of python-json-logger and
ecs-logging print it, for the ``json`` text format.

Neither library is a dependency of the project: install them in a virtual environment of
their own, then regenerate the fixtures (from this folder) with::

    python -m venv /tmp/json-loggers && /tmp/json-loggers/bin/pip install \
        python-json-logger==4.2.0 ecs-logging==2.3.0
    TZ=Europe/Berlin /tmp/json-loggers/bin/python json_python_lines.py jsonlogger \
        > ../fixtures/json_python.log
    TZ=Europe/Berlin /tmp/json-loggers/bin/python json_python_lines.py ecs \
        > ../fixtures/json_ecs.log

``jsonlogger`` writes python-json-logger's ``JsonFormatter`` with the fields of
``%(asctime)s %(levelname)s %(name)s %(message)s`` (a local time without an offset), then
with ``timestamp=True`` and ``levelname`` renamed ``severity`` (what Google Cloud's structured
logging reads); ``ecs`` writes ecs-logging's ``StdlibFormatter`` (Elastic Common Schema:
``@timestamp``, ``log.level``, ``message``). Each ends with an exception logged with its
traceback.
"""

import logging
import sys

from ecs_logging import StdlibFormatter
from pythonjsonlogger.json import JsonFormatter

REQUEST = {"request_id": "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab", "host": "worker-1"}


def _lines(formatter: logging.Formatter) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    app = logging.getLogger("app.module")
    app.handlers[:] = [handler]
    app.setLevel(logging.DEBUG)
    app.propagate = False
    app.info("service started")
    app.debug("handling request", extra=REQUEST)
    trace = {"trace.id": "4bf92f3577b34da6a3ce929d0e0e4736"}
    app.warning('slow "spawn"\nsecond line', extra=trace)
    try:
        raise ValueError("boom: disk full")
    except ValueError:
        app.exception("write failed", extra={"attempt": 3})


def main(form: str) -> None:
    if form == "jsonlogger":
        _lines(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        _lines(
            JsonFormatter(
                "%(levelname)s %(name)s %(message)s",
                timestamp=True,
                rename_fields={"levelname": "severity"},
            )
        )
    elif form == "ecs":
        _lines(StdlibFormatter())
    else:
        raise SystemExit(f"usage: {sys.argv[0]} jsonlogger|ecs")


if __name__ == "__main__":
    main(sys.argv[1])
