"""Shipping: batches moved from the spool to Loki, each record visible once.

One delivery design with two runners.

- The design: ``_delivery.Delivery`` delivers one batch (push, retry with backoff, halve a body
  too large, bisect refused entries out, dead-letter them, acknowledge) and keeps the counters;
  entries Loki refused go to the dead-letter file (``_dead_letter``), and records in doubt
  after a crash or an unanswered push are looked for in Loki before they are pushed again
  (``_reconcile``).
- The runners decide when a batch is delivered, and where: ``_shipper.Shipper`` builds a
  ``Delivery`` and runs it from a daemon thread of the service; ``shipper="process"`` runs
  that same ``Shipper`` in a helper process (``_process`` starts and serves ``_child``, which
  reads the service's spool through a stand-in; ``_counters`` keeps the children's counters).

``_durable`` is the pipeline's sink for the durable path (record → spool → runner → Loki) and
picks the runner; ``_adoption`` ships the orphan spools of dead processes from a thread of its
own. ``agent-logging drain``, the gate before a reimage (``_drain``), ships what is
left with a ``Shipper`` in the calling thread and checks that everything spooled is visible
(``_visibility``).
"""
