"""The interface of ``correlator/sources/native/`` (the record mapping for the common JSON
line, and the nginx combined access line's)."""

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
