"""Loki's rate-based stream sharding and the tenant's ingestion rate limit.

What Loki 3.7 does, from its source (``pkg/distributor/distributor.go``: ``shardStream``,
``shardCountFor``, ``calculateShards``, ``createShards``; ``ratestore.go``;
``shard_tracker.go``; ``pkg/ingester/stream_rate_calculator.go``; defaults in
``pkg/distributor/shardstreams/config.go`` and ``pkg/validation/limits.go``):

- Sharding is on by default (``shard_streams.enabled``), with ``desired_rate`` 1536 KB
  (1,572,864 bytes per second).
- Each ingester adds up, per stream and per second, the bytes pushed to it (line plus
  structured metadata, ``detected_level`` included) and counts the pushes. Every second the
  distributor collects these: the shards of one stream are summed by their unsharded stream,
  with the highest push count of a shard; each value is folded into an exponential moving
  average (0.4 of the new value, 0.6 of the old; the first one is taken as it is). A stream
  not reported decays toward 0 the same way and is forgotten after 10 minutes.
- A push of ``push_size`` bytes to a stream is cut into
  ``ceil((rate + push_size * min(push_rate, 1)) / desired_rate)`` shards (1 when that is at
  most 1, and always 1 while the distributor has no push rate for the stream yet: its first
  second), never more shards than the push has entries.
- Entry ``i`` of the push goes to the ``i % n``-th derived stream; derived stream ``k`` is shard
  ``(start + k) % shards``, where ``start`` is a per-stream counter that then advances by the
  number of derived streams: consecutive pushes rotate over the shards. A shard is the stream
  with the label ``__stream_shard__="<number>"`` added; Loki de-duplicates within one of them
  only, so an entry pushed twice can be stored once in each of two shards.
- The tenant's ingestion rate limit is a token bucket of ``ingestion_rate_mb`` (4 MiB) per
  second holding at most ``ingestion_burst_size_mb`` (6 MiB), full at the start. A push whose
  valid entries total more bytes than the bucket holds is refused whole (429), and takes no
  tokens; a push larger than the burst is refused whatever the wait.

Where the test server simplifies: the ingesters' second and the distributor's poll are one
tick every second of :attr:`Limits.clock`, so a rate is known one tick after it happened (in
Loki, 1 to 2.2 s after); there is one distributor and one ingester.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["SHARD_LABEL", "IngestionLimiter", "StreamRates"]

#: The label Loki adds to a sharded stream (``pkg/ingester/instance.go`` ``ShardLbName``).
SHARD_LABEL = "__stream_shard__"

_SMOOTHING = 0.4  # ratestore.go smoothingFactor: the weight of the newest second
_KEEP_ALIVE_S = 600.0  # ratestore.go rateKeepAlive
_TICK_S = 1.0  # stream_rate_calculator.go updateInterval, ratestore's update interval
# More missed ticks than this (a clock far ahead) decay every rate to nothing anyway.
_MAX_CATCH_UP = 64

_StreamId = tuple[str, str]  # (tenant, the unsharded stream's labels as Loki prints them)


@dataclass
class _Rate:
    rate: int = 0
    pushes: float = 0.0
    updated_s: float = 0.0


@dataclass
class _Second:
    """What the ingester saw of one stream in the current second, per shard."""

    bytes: int = 0
    pushes: dict[str, int] = field(default_factory=dict)


class StreamRates:
    """The distributor's stream rates and shard counters (the store's lock guards them)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        """Start with no rates.

        Args:
            clock: seconds, monotonic (:attr:`Limits.clock`).
        """
        self._clock = clock
        self._next_tick: float | None = None
        self._second: dict[_StreamId, _Second] = {}
        self._rates: dict[_StreamId, _Rate] = {}
        self._last_shard: dict[_StreamId, int] = {}

    def shards(
        self, stream: _StreamId, push_bytes: int, entries: int, desired_rate: int
    ) -> list[int]:
        """The shard numbers of a push's derived streams, in the order entries are dealt.

        Returns ``[]`` when the push is not sharded (one stream, without the label).

        Args:
            stream: the tenant and the stream's labels.
            push_bytes: the bytes of the push's valid entries to this stream.
            entries: how many entries those are.
            desired_rate: ``shard_streams.desired_rate``, bytes per second.
        """
        self._tick()
        if desired_rate <= 0:
            return []
        known = self._rates.get(stream)
        if known is None or known.pushes == 0:
            return []  # the first push: "don't shard until the rate is understood"
        push_rate = min(known.pushes, 1.0)
        count = (known.rate + int(push_bytes * push_rate)) / desired_rate
        total = 1 if count <= 1 else math.ceil(count)
        if total <= 1:
            return []
        derived = min(total, entries)
        start = self._last_shard.get(stream, 0)
        self._last_shard[stream] = start + derived
        return [(start + k) % total for k in range(derived)]

    def record(self, stream: _StreamId, shard: str, size_bytes: int) -> None:
        """An ingester took ``size_bytes`` for one shard (``""``: unsharded) of ``stream``."""
        self._tick()
        second = self._second.get(stream)
        if second is None:
            second = self._second[stream] = _Second()
        second.bytes += size_bytes
        second.pushes[shard] = second.pushes.get(shard, 0) + 1

    def rate(self, stream: _StreamId) -> int:
        """The stream's rate as the distributor knows it, bytes per second (for tests)."""
        self._tick()
        known = self._rates.get(stream)
        return 0 if known is None else known.rate

    def _tick(self) -> None:
        now = self._clock()
        if self._next_tick is None:
            self._next_tick = now + _TICK_S
            return
        missed = 0
        while now >= self._next_tick:
            if missed < _MAX_CATCH_UP:
                self._update(self._next_tick)
            missed += 1
            self._next_tick += _TICK_S
        if missed >= _MAX_CATCH_UP:
            self._next_tick = now + _TICK_S

    def _update(self, now: float) -> None:
        seen, self._second = self._second, {}
        for stream, second in seen.items():
            pushes = float(max(second.pushes.values()))
            known = self._rates.get(stream)
            if known is None:
                self._rates[stream] = _Rate(second.bytes, pushes, now)
                continue
            known.rate = int(_SMOOTHING * second.bytes + (1 - _SMOOTHING) * known.rate)
            known.pushes = _SMOOTHING * pushes + (1 - _SMOOTHING) * known.pushes
            known.updated_s = now
        for stream, known in list(self._rates.items()):
            if stream in seen:
                continue
            if now - known.updated_s > _KEEP_ALIVE_S:
                del self._rates[stream]
                self._last_shard.pop(stream, None)
                continue
            known.rate = int((1 - _SMOOTHING) * known.rate)
            known.pushes = (1 - _SMOOTHING) * known.pushes


class IngestionLimiter:
    """Per-tenant token buckets, as Go's ``rate.Limiter.AllowN`` (the store's lock guards it)."""

    def __init__(self, rate_bytes: float, burst_bytes: int, clock: Callable[[], float]) -> None:
        """Buckets of ``burst_bytes`` refilled at ``rate_bytes`` per second of ``clock``."""
        self.rate_bytes = rate_bytes
        self.burst_bytes = burst_bytes
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, as of)

    def allow(self, tenant: str, size_bytes: int) -> bool:
        """Take ``size_bytes`` tokens if the bucket holds them; False, taking none, if not."""
        now = self._clock()
        tokens, since = self._buckets.get(tenant, (float(self.burst_bytes), now))
        tokens = min(float(self.burst_bytes), tokens + max(0.0, now - since) * self.rate_bytes)
        if size_bytes > tokens:
            self._buckets[tenant] = (tokens, now)
            return False
        self._buckets[tenant] = (tokens - size_bytes, now)
        return True
