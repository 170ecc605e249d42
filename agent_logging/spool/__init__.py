"""The durable local spool: records kept on disk until Loki has them.

:class:`~agent_logging.spool._spool.Spool` (``_spool``) is the open spool, one class whole: it
appends framed records (``_framing``) to a preallocated active segment (``_writer``), rotates
and caps segments, forces them to disk by its fsync policy, hands batches to a shipper and
takes their acknowledgement (``_batches``; ``_remote`` for the messages of a shipper in another
process), counts what it did (``_stats``), re-creates its directory when it is deleted, and
never touches its parent's files in a forked child. On disk (``_dirs``, ``_segments``): one
directory per service, owned by the process holding its lock (``_lock``), with a ledger of what
each segment was given (``_ledger``) so that damage is found and its cost counted
(``_quarantine``); orphan spools of dead processes are shipped by ``agent_logging.shipping``.
Options are checked once, at open (``_options``).
"""
