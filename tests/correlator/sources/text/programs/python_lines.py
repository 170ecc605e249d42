"""Write Python ``logging`` output in the formats the ``python`` text format reads.

Regenerate the fixtures (from this folder) with::

    python python_lines.py default > ../fixtures/python_default.log
    python python_lines.py asctime > ../fixtures/python_asctime.log
    python python_lines.py dashes > ../fixtures/python_dashes.log

``default`` is ``logging.basicConfig()``'s own format (``%(levelname)s:%(name)s:%(message)s``,
no time); ``asctime`` is ``%(asctime)s %(levelname)s %(name)s %(message)s``; ``dashes`` is
``%(asctime)s - %(name)s - %(levelname)s - %(message)s`` (the logging cookbook's). Each ends with
an exception logged with its traceback.
"""

import logging
import sys

FORMATS = {
    "default": logging.BASIC_FORMAT,
    "asctime": "%(asctime)s %(levelname)s %(name)s %(message)s",
    "dashes": "%(asctime)s - %(name)s - %(levelname)s - %(message)s",
}


def main(form: str) -> None:
    logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format=FORMATS[form])
    logging.warning("disk almost full")  # noqa: LOG015  # the root logger, as written
    app = logging.getLogger("app.module")
    app.info("request handled request_id=req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab")
    app.debug("a message\nthat spans two lines")
    logging.getLogger("app.db").error("query failed: %s", "timeout")
    try:
        {}["missing"]
    except KeyError:
        app.exception("lookup failed")
    logging.getLogger("app.module").critical("giving up")


if __name__ == "__main__":
    main(sys.argv[1])
