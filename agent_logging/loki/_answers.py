"""What Loki's answer to a push means: :class:`PushResult` and :func:`classify_response`.

A push's answer becomes an ``outcome`` that tells the shipper what to do next:

- ``ok``: a 2xx, the entries are stored;
- ``retry``: try the same entries again later: 429, 5xx, 408, timeouts, refused or reset
  connections, and every refusal of the request rather than of its entries: 401/403/404 (our
  own credentials, tenant or URL are wrong), a 400 that is not one of Loki's entry refusals
  (a tenant ID Loki cannot take, nginx's "plain HTTP request was sent to HTTPS port", a
  body Loki cannot decode), 405, 413, 415 and any other 4xx. That gets fixed, and until then
  the spool keeps the data rather than the shipper throwing it away;
- ``reject``: Loki refuses entries themselves: a 400 whose text is one of Loki's per-entry
  or per-stream refusals (:func:`is_entry_refusal`: line too long, timestamp too old or too
  new, entry too far behind, label or structured-metadata limits). Loki stores the other
  entries of such a push; the shipper splits the batch to find the entries at fault, unless
  the answer shows that it refused every entry for one reason (:func:`count_refused`).

A ``retry`` may also say that the body is too large (``too_large``): a 413; gRPC's refusal of a
message over 4 MiB between Loki's distributor and its ingester, which a stock Loki answers
with a 500 (``received message larger than max``) however often the push is repeated; and a
429 of the tenant's rate limit for a push carrying more bytes than the limit allows per
second, which a bucket whose burst is not larger never lets through. Smaller pushes pass.

Telling the two apart by Loki's message, not by the status, matters: Loki and the proxies in
front of it answer 400 for both, and taking a refusal of the request for one of the entries
would split the batch down to single entries and dead-letter every one of them. Pure: no I/O
(``_client`` is the HTTP edge).
"""

from __future__ import annotations

import email.utils
import math
import re
from dataclasses import dataclass
from datetime import UTC
from typing import Final, Literal

__all__ = [
    "Outcome",
    "PushResult",
    "classify_response",
    "clip_reason",
    "count_refused",
    "is_entry_refusal",
    "parse_retry_after",
]

# Refusals of the request, whatever entries it carries: our configuration's fault (or a
# proxy's), not the data's. Retried, never dead-lettered.
_REQUEST_REFUSED: Final = {
    401: "Loki refused our credentials",
    403: "Loki refused our credentials or tenant",
    404: "no Loki push endpoint at this URL",
    405: "this URL does not take a push (a proxy, or not Loki's push URL)",
    413: "the push body is over a size limit of Loki or of a proxy in front of it",
    415: "the push body's content type is refused (a proxy or gateway)",
}
_TOO_LARGE: Final = 413
_OTHER_REQUEST_REFUSED: Final = (
    "the request was refused, not its entries (check the tenant, the URL and its scheme, "
    "and any proxy in front of Loki)"
)

# Loki's refusals of single entries or streams (Loki 2.9 to 3.x, ``pkg/validation/
# validate.go`` and the ingester's ``pkg/ingester/stream.go``, ``pkg/chunkenc``). A 400 whose
# text holds one of these refuses those entries only (Loki stores the rest of the push);
# compared in lower case. Left out on purpose, since every entry would be refused alike
# until someone changes a configuration: structured metadata "disallowed"
# (``allow_structured_metadata``), "missing required labels" (enforced labels) and
# "ingestion blocked" for the tenant.
_ENTRY_REFUSALS: Final = (
    "bytes exceeded for stream",  # Max entry size '%d' bytes exceeded for stream (line_too_long)
    "has timestamp too old",  # reject_old_samples_max_age
    "has timestamp too new",  # creation_grace_period
    "entry too far behind",  # the ingester's out-of-order window (max_chunk_age / 2)
    "entry out of order",  # ingesters without unordered writes
    "label names; limit",  # max_label_names_per_series
    "has label name too long",
    "has label value too long",
    "has duplicate label name",
    "at least one label pair is required per stream",
    "has structured metadata too large",
    "has too many structured metadata labels",
    "couldn't parse labels",  # the push parser: labels of one stream that do not parse
    "error parsing labels",  # invalid_labels
)

# Those of the refusals above that Loki makes of a whole stream, every entry of it, once per
# stream (``ValidateLabels``): their count in an answer is of streams, not of entries.
_STREAM_REFUSALS: Final = frozenset(
    {
        "label names; limit",
        "has label name too long",
        "has label value too long",
        "has duplicate label name",
        "at least one label pair is required per stream",
        "couldn't parse labels",
        "error parsing labels",
    }
)
# How Loki counts refused entries in a 400: the distributor groups identical validation
# errors (``N errors like: <message>``, joined by "; "; a single error stands alone), the
# ingester says ``total ignored: N out of M for stream: {...}`` (of the first stream it
# refused only: an answer may count fewer than were refused, never more).
_GROUP: Final = re.compile(r"(?:^|; )(\d+) errors like: ")
_IGNORED: Final = re.compile(r"total ignored: (\d+) out of \d+ for stream")

# Loki's distributor refusing a whole push for the tenant's ingestion rate limit
# (``validation.RateLimitedErrorMsg``), before storing any of it; compared in lower case.
_TENANT_RATE_LIMITED: Final = "ingestion rate limit exceeded for user"
# ... and what it says of the limit and of the push: ``(limit: 4194304 bytes/sec) while
# attempting to ingest '1900' lines totaling '3808390' bytes``.
_RATE_AND_PUSH: Final = re.compile(r"limit: (\d+) bytes/sec\).*? totaling '(\d+)' bytes")
# gRPC's refusal of a message over ``grpc_server_max_recv_msg_size`` (4 MiB by default): a
# push that large never reaches Loki's ingester, answered 500 (``ResourceExhausted``).
_GRPC_TOO_LARGE: Final = "received message larger than max"

# Loki's error bodies are one line; a proxy's HTML page can be long. Reasons stay readable.
_MAX_REASON_CHARS: Final = 1024
_HTML_TITLE: Final = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TAG: Final = re.compile(r"<[^>]*>")
_SPACES: Final = re.compile(r"\s+")

Outcome = Literal["ok", "retry", "reject"]


@dataclass(frozen=True, slots=True)
class PushResult:
    """What became of one push.

    Attributes:
        outcome: ``ok`` (stored), ``retry`` (send the same entries again later) or
            ``reject`` (Loki refuses the content; do not resend it unchanged).
        status: the HTTP status, or None when no response arrived.
        retry_after_s: Loki's ``Retry-After``, in seconds, when it sent one.
        reason: why, in words; Loki's own message for refusals.
        nothing_stored: certainly none of the entries is in Loki: the connection was never
            made, or the whole request was refused (credentials, URL, size, the tenant's
            ingestion rate limit). False when some may be (a timeout, a reset, a 5xx, a 429
            or 400 refusing some entries only): they must not be pushed again unreconciled
            (``shipping._reconcile``). The shipper also sets it on a ``reject`` that refused every
            entry (:meth:`refuses_every_entry`).
        too_large: the body is over a size limit; the same entries pass in smaller pushes.
        refused: for ``reject``, how many entries Loki's answer says it refused (a stream
            refusal counts once per stream), or None when it does not say.
        refusal_kinds: for ``reject``, the kinds of Loki's refusals the answer names (the
            markers of :func:`is_entry_refusal`), in the order found.
        refill_s: for a 429 of the tenant's rate limit, how long its bucket takes to refill
            the bytes of the push (its size over the limit per second, both as Loki says
            them), or None.
    """

    outcome: Outcome
    status: int | None
    retry_after_s: float | None
    reason: str
    nothing_stored: bool = False
    too_large: bool = False
    refused: int | None = None
    refusal_kinds: tuple[str, ...] = ()
    refill_s: float | None = None

    def refuses_every_entry(self, entries: int, *, streams: int) -> bool:
        """Whether this answer refuses each of the ``entries`` pushed, for one reason.

        True when it names one kind of refusal and counts every entry pushed as refused, or,
        for a refusal of a stream (its labels), when the push carried that one stream.
        Loki stores nothing of such a push: its entries may be dead-lettered together,
        without a split. An answer that counts fewer (Loki reports the ingester's refusals
        of its first stream only) says nothing: the push is split to find out.

        Args:
            entries: how many entries the push carried.
            streams: how many streams (label sets) they make.
        """
        if self.outcome != "reject" or len(self.refusal_kinds) != 1:
            return False
        if self.refusal_kinds[0] in _STREAM_REFUSALS:
            return streams == 1
        return self.refused == entries


def parse_retry_after(value: str | None, *, now_unix_s: float) -> float | None:
    """Parse a ``Retry-After`` header (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.

    Args:
        value: the header value, or None when absent.
        now_unix_s: the current time, to turn a date into a delay.

    Returns:
        The delay in seconds (0 for a date in the past), or None when absent or unparsable.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an obsolete date form without zone: HTTP dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now_unix_s)


def clip_reason(text: str) -> str:
    """An answer's text, stripped and cut to ``_MAX_REASON_CHARS``, to quote in a reason."""
    text = text.strip()
    if len(text) > _MAX_REASON_CHARS:
        return text[:_MAX_REASON_CHARS] + "..."
    return text


def _readable(body: str) -> str:
    """A response body as a reason: an HTML error page (a proxy's) becomes its title."""
    text = body.strip()
    if not (text.startswith("<") and "<html" in text[:512].lower()):
        return clip_reason(text)
    title = _HTML_TITLE.search(text)
    shown = title.group(1) if title is not None else _HTML_TAG.sub(" ", text)
    return clip_reason(_SPACES.sub(" ", shown))


def is_entry_refusal(text: str) -> bool:
    """Whether a refusal's text is one of Loki's refusals of entries, not of the request.

    Args:
        text: the response body (Loki's message).

    Returns:
        True when the text holds one of Loki's per-entry or per-stream refusal messages
        (line too long, timestamp too old or too new, entry too far behind or out of order,
        label or structured-metadata limits, labels that do not parse).
    """
    lowered = text.lower()
    return any(message in lowered for message in _ENTRY_REFUSALS)


def _kinds(lowered: str) -> tuple[str, ...]:
    return tuple(message for message in _ENTRY_REFUSALS if message in lowered)


def count_refused(text: str) -> int | None:
    """How many entries a 400 of Loki says it refused, or None when it does not count them.

    Args:
        text: the whole response body (before it is clipped for a reason).

    Returns:
        The sum of the distributor's ``N errors like`` groups (a lone message counts 1) and
        the ingester's ``total ignored: N``; None when the text counts nothing.
    """
    groups = [int(n) for n in _GROUP.findall(text)]
    ignored = [int(n) for n in _IGNORED.findall(text)]
    if not groups and not ignored:
        # One validation error alone is its bare message; an ingester's always has a total.
        return 1 if is_entry_refusal(text) and "ignored, reason" not in text else None
    return sum(groups) + sum(ignored)


def _refill_s(text: str) -> float | None:
    """How many seconds of the tenant's rate the push a rate-limit 429 refused is worth."""
    found = _RATE_AND_PUSH.search(text)
    if found is None or not int(found.group(1)):
        return None
    return int(found.group(2)) / int(found.group(1))


def classify_response(
    status: int, body: str, retry_after: str | None, *, now_unix_s: float
) -> PushResult:
    """Decide what a push response means for the entries sent.

    Args:
        status: the HTTP status.
        body: the response body as text (Loki puts its reason there).
        retry_after: the ``Retry-After`` header, if any.
        now_unix_s: the current time, for HTTP-date ``Retry-After`` values.

    Returns:
        The result: ``ok`` for 2xx; ``reject`` for a 400 that is one of Loki's refusals of
        entries (:func:`is_entry_refusal`); ``retry`` for everything else: 408, 429, 5xx,
        1xx/3xx, and the 4xx that refuse the request rather than its entries (401, 403,
        404, 405, 413, 415, a 400 with any other text, an HTML error page); ``too_large``
        for a 413, a 5xx of gRPC's message limit and a rate-limit 429 of a push larger than
        the rate; a ``reject`` counts the entries refused and names the kinds of refusal.
    """
    delay = parse_retry_after(retry_after, now_unix_s=now_unix_s)
    text = _readable(body)
    if 200 <= status < 300:
        return PushResult("ok", status, None, f"HTTP {status}")
    if status in (408, 429) or not 400 <= status < 500:
        # 408/429/5xx are transient by definition; 1xx/3xx mean a proxy or URL problem, which
        # is ours to fix, so the data waits in the spool rather than being dropped.
        reason = f"HTTP {status}: {text}" if text else f"HTTP {status}"
        # The tenant's rate limit refuses the whole push before anything is stored; a 3xx
        # never reached Loki. A 5xx, a 408 or another 429 (a stream's own limit) may have
        # stored some of it.
        lowered = body.lower()
        rate_limited = status == 429 and _TENANT_RATE_LIMITED in lowered
        whole = rate_limited or 300 <= status < 400
        refill_s = _refill_s(body) if rate_limited else None
        # A push worth more than a second of the rate may never fit the bucket: halved.
        too_large = (refill_s is not None and refill_s > 1.0) or (
            status >= 500 and _GRPC_TOO_LARGE in lowered
        )
        return PushResult(
            "retry",
            status,
            delay,
            reason,
            nothing_stored=whole,
            too_large=too_large,
            refill_s=refill_s,
        )
    if status == 400 and is_entry_refusal(text):
        return PushResult(
            "reject",
            status,
            delay,
            text,
            refused=count_refused(body),
            refusal_kinds=_kinds(body.lower()),
        )
    # A 4xx about the request (credentials, tenant, URL, scheme, method, body size or
    # encoding): the same request would be refused whatever entries it held, so splitting
    # it would only dead-letter every entry one by one. Kept for retry instead.
    explanation = _REQUEST_REFUSED.get(status, _OTHER_REQUEST_REFUSED)
    reason = f"HTTP {status}: {explanation}; entries kept for retry"
    return PushResult(
        "retry",
        status,
        delay,
        f"{reason}: {text}" if text else reason,
        nothing_stored=True,
        too_large=status == _TOO_LARGE,
    )
