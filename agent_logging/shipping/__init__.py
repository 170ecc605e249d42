"""Shipping: batches moved from the spool to Loki, each record visible once.

One delivery design (``_delivery``: push, halve, bisect, dead-letter, account) with two runners:
a daemon thread (``_shipper``) or a helper process (``_process`` starting ``_child``, its
counters shared through ``_counters``). ``_durable`` is the pipeline's sink for the durable path
(record → spool → shipper → Loki). Entries Loki refused go to the dead-letter file
(``_dead_letter``); records in doubt after a crash are looked for in Loki before they are pushed
again (``_reconcile``). ``agent-logging drain``, the gate before a reimage (``_drain``), checks
that everything spooled is visible (``_visibility``).
"""
