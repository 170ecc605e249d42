"""Decoding a push body the way ``pkg/loghttp/push/push.go`` does.

- ``Content-Encoding``: empty or ``snappy`` (a no-op: protobuf bodies are always
  snappy), ``gzip``, ``deflate``; anything else is refused.
- ``Content-Type`` goes through Go's ``mime.ParseMediaType``: a missing header is an
  error (``mime: no media type``), ``application/json`` (parameters allowed) is JSON,
  and every other type is read as snappy-compressed protobuf.
- JSON: ``{"streams": [{"stream": {...}, "values": [["<ns>", "<line>", {metadata}]]}]}``;
  the ``stream`` map becomes Loki's ``LabelSet.String()`` text (names unquoted), so
  bad label names fail later, in label parsing, as in Loki.
- JSON text that is not UTF-8 is not refused: Loki's decoder (json-iterator) keeps a string's
  bytes as they come, and every answer that shows them (``query_range``, which json-iterator
  writes like ``encoding/json``) has U+FFFD in place of each invalid byte, so that is what is
  stored here. A ``\\uD800``-style escape of half a surrogate pair decodes to U+FFFD too
  (json-iterator's ``appendRune``, as Go's ``utf8.EncodeRune``), where Python would keep a
  lone surrogate that no UTF-8 answer can carry.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Mapping

from tests.lokisim._labels import format_labels
from tests.lokisim._proto import DecodedPush, PushEntry, PushStream, decode_protobuf

__all__ = ["decode_push", "decode_push_body"]

_INT_RE = re.compile(r"-?[0-9]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_push_body(headers: Mapping[str, str], body: bytes) -> list[PushStream]:
    """Decode a push request body.

    Args:
        headers: request headers with lower-case names.
        body: the raw body.

    Returns:
        The streams in wire order.

    Raises:
        ValueError: the body cannot be decoded; the message is the 400's text.
    """
    return decode_push(headers, body).to_streams()


def decode_push(headers: Mapping[str, str], body: bytes) -> DecodedPush:
    """Decode a push request body into the compact form the store ingests.

    Args:
        headers: request headers with lower-case names.
        body: the raw body.

    Returns:
        The decoded push (:meth:`DecodedPush.to_streams` gives :func:`decode_push_body`).

    Raises:
        ValueError: the body cannot be decoded; the message is the 400's text.
    """
    encoding = headers.get("content-encoding", "")
    if encoding == "gzip":
        try:
            body = gzip.decompress(body)
        except gzip.BadGzipFile as exc:
            raise ValueError("gzip: invalid header") from exc
        except (EOFError, zlib.error) as exc:
            raise ValueError("unexpected EOF") from exc
    elif encoding == "deflate":
        try:
            body = zlib.decompress(body, wbits=-zlib.MAX_WBITS)
        except zlib.error as exc:
            raise ValueError("flate: corrupt input") from exc
    elif encoding not in ("", "snappy"):
        raise ValueError(f'Content-Encoding "{encoding}" not supported')
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not media_type:
        raise ValueError("mime: no media type")
    if media_type == "application/json":
        return DecodedPush.from_streams(_decode_json(body))
    return decode_protobuf(body)


def _decode_json(body: bytes) -> list[PushStream]:
    try:
        document = json.loads(body.decode("utf-8", "replace"))
    except ValueError as exc:
        raise ValueError(f"loghttp.PushRequest: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError("loghttp.PushRequest: ReadObjectCB: expect { or n")
    raw_streams = document.get("streams") or []
    if not isinstance(raw_streams, list):
        raise ValueError("loghttp.PushRequest.Streams: ReadArrayCB: expect [ or n")
    return [_decode_json_stream(raw) for raw in raw_streams]


def _decode_json_stream(raw: object) -> PushStream:
    if not isinstance(raw, dict):
        raise ValueError("loghttp.PushRequest.Streams: ReadObjectCB: expect { or n")
    labels = raw.get("stream") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError("loghttp.Stream.Labels: label values must be strings")
    labels = {_go_string(name): _go_string(value) for name, value in labels.items()}
    values = raw.get("values") or []
    if not isinstance(values, list):
        raise ValueError("loghttp.Stream.Entries: expect [ or n")
    entries = tuple(_decode_json_entry(value) for value in values)
    return PushStream(format_labels(labels, quote_names=False), entries)


def _decode_json_entry(value: object) -> PushEntry:
    # pkg/loghttp/entry.go: [ts string, line string, optional metadata object].
    if not isinstance(value, list) or len(value) < 2:
        raise ValueError("loghttp.Entry: expect [ts, line] or [ts, line, metadata]")
    ts, line = value[0], value[1]
    if not isinstance(ts, str) or not isinstance(line, str):
        raise ValueError("Value is string, but can't find closing '\"' symbol")
    if not _INT_RE.fullmatch(ts):
        raise ValueError("Value is number, but can't parse it")
    metadata: list[tuple[str, str]] = []
    if len(value) > 2:
        raw = value[2]
        if not isinstance(raw, dict):
            raise ValueError("Value looks like object, but can't find closing '}' symbol")
        nested = raw.get("structuredMetadata")
        for name, item in (nested if isinstance(nested, dict) else raw).items():
            if isinstance(item, dict):
                continue
            if not isinstance(item, str | int | float) or isinstance(item, bool):
                raise ValueError("could not parse structured metadata or parsed fileds")
            text = _go_string(item) if isinstance(item, str) else json.dumps(item)
            metadata.append((_go_string(name), text))
    return PushEntry(int(ts), _go_string(line), tuple(sorted(metadata)))


def _go_string(text: str) -> str:
    """``text`` as json-iterator decodes it into a Go string: half a surrogate pair (Python's
    ``json`` joins whole pairs, so any surrogate left is a half) becomes U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text
