"""The durable local spool: records kept on disk until Loki has them.

:class:`~agent_logging.spool._spool.Spool` (``_spool``) appends framed records (``_framing``)
to a preallocated active segment (``_writer``), rotates and caps segments (``_cap``), forces
them to disk by its fsync policy (``_sync``), hands batches to a shipper and takes their
acknowledgement (``_reading``, ``_batches``; ``_remote`` for a shipper in another process), and
counts what it did (``_stats``). On disk (``_dirs``, ``_segments``): one directory per service,
owned by the process holding its lock (``_lock``), with a ledger of what each segment was given
(``_ledger``) so that damage is found and its cost counted (``_quarantine``), even when the
directory itself is deleted (``_recreate``). Orphan spools of dead processes are adopted
(``_adoption``); a forked child never touches its parent's (``_fork``). Options are checked once,
at open (``_options``).
"""
