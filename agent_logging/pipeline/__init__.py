"""The record pipeline: what happens at a logging call.

A record is stamped and enriched with the identifiers bound now (``_processors``), redacted
(``agent_logging.redaction``), rendered to one JSON line (``_render``; ``_direct`` keeps the
pieces of a plain record's line between calls) and fanned out to the configured outputs
(``_pipeline``): the durable path to Loki (``agent_logging.shipping``), local streams and files
(``_sinks``), OTLP (``_otlp``). ``_bound`` is the structlog logger ``get_logger()`` returns and
``_stdlib`` the bridge from stdlib ``logging`` into the same pipeline.
"""
