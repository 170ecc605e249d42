"""The interface of ``correlator/sources/native/`` (the record mapping for the common JSON
line, the nginx combined access line's, and the text formats' single-line records')."""

from collections.abc import Mapping, Sequence

#: A column's Arrow buffers: validity (None: no nulls), offsets (text columns), values, and
#: the null count.
Buffers = tuple[bytes | None, bytes | None, bytes, int]

def configure(
    layers: Sequence[str],
    owner_layers: Sequence[str],
    level_names: Sequence[str],
    level_words: Mapping[str, int],
    max_id_length: int,
    max_line_bytes: int,
) -> None: ...
def map_lines(
    lines: Sequence[bytes], source: str, origin: str, default_layer: str | None
) -> tuple[int, dict[str, Buffers], list[int]]: ...
def map_nginx(lines: Sequence[bytes], origin: str) -> tuple[int, dict[str, Buffers], list[int]]: ...
def configure_text(
    level_codes: Mapping[str, int],
    numbered_levels: Mapping[str, int],
    http_fields: Sequence[Sequence[str]],
    formats: Mapping[str, tuple[Mapping[str, int], Sequence[str], Sequence[str]]],
) -> None: ...
def map_text(
    lines: Sequence[bytes],
    origin: str,
    format: str,
    zone_starts: bytes,
    zone_offsets: bytes,
    service: str | None,
    file_service: str | None,
    now_year: int,
    latest_ns: int,
) -> tuple[int, dict[str, Buffers], list[int], bytes]: ...
def hash_lanes(lanes: int = ..., /) -> int: ...
