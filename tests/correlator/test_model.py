"""The model's pure helpers, pinned to literal values."""

from __future__ import annotations

import pytest

from correlator.model import content_hash, hash_text


# content_hash decides what the store takes for evidence it already holds: re-ingesting a file
# adds only lines whose hash is new. These values were computed once and written down. A change
# of the hash (algorithm, digest size, personalisation, how text becomes bytes) would give every
# line already stored a new hash, so re-ingesting the same evidence would store it twice: such
# a change needs a migration of the stored hashes, not new literals here.
@pytest.mark.parametrize(
    ("source", "raw", "expected", "shown"),
    [
        ("ndjson", b"", -3521520561144127898, "cf210bb51bc51e66"),
        ("ndjson", b'{"event":"hello"}', -2362659698025792631, "df362585c60a7b89"),
        # The source kind is part of the hash: the same line from two kinds is two events.
        ("agent", b'{"event":"hello"}', 134871727791671918, "01df291f31440a6e"),
        (
            "nginx",
            '10.0.0.5 - - [22/Nov/2026:13:11:19 +0000] "GET / HTTP/1.1" 200 5',
            2197246309955141039,
            "1e7e2fe09ce9fdaf",
        ),
        # Text is hashed as its UTF-8 bytes; a lone surrogate (undecodable input kept as
        # surrogateescape) as surrogatepass writes it; bytes as they are.
        ("k8s", "caf\u00e9", -2187833648183016463, "e1a340e37c6783f1"),
        ("k8s", "caf\u00e9".encode(), -2187833648183016463, "e1a340e37c6783f1"),
        ("workflow", "\udcff", -6523578084832091269, "a577984b950f637b"),
        ("postgres", b"\xff\xfe", -6823514925406327550, "a14e0153ef946d02"),
        # BLAKE2b takes 16 bytes of personalisation: longer kinds are cut to them.
        ("a-source-kind-lo", b"x", 6720506148727230939, "5d4408bc49b711db"),
        ("a-source-kind-longer-than-16", b"x", 6720506148727230939, "5d4408bc49b711db"),
    ],
)
def test_content_hash_is_pinned(source: str, raw: bytes | str, expected: int, shown: str) -> None:
    assert content_hash(source, raw) == expected
    assert hash_text(expected) == shown
