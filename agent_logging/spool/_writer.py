"""The spool's active segment: a preallocated file and the shared mapping appends copy into.

Why a mapping. A ``write`` system call releases the GIL; beside a thread busy in Python, the
logging thread then waits for that thread's switch interval (5 ms) before its call returns
(``benchmarks/convoy.py``: p99 5.4 ms per log call). A copy into a ``MAP_SHARED`` mapping of the
file is a ``memcpy`` under the GIL, and its bytes are in the kernel's page cache, which is the
file: a SIGKILL of the process right after the copy loses nothing. ``fsync`` on the file writes
back the pages dirtied through the mapping too, so the fsync policies are unchanged.

Preallocation. The file is allocated on disk to its capacity with ``posix_fallocate`` before
it is mapped: on a full disk that fails (an ``OSError`` the spool counts) instead of the first
copy into an unallocated page killing the process with SIGBUS. For the same reason nothing but
the owner may truncate the file while it is mapped. Readers take the zeros after the last frame
for space not written yet (``_framing``).

Memory. Written pages of a shared mapping count in the process's RSS until unmapped: behind the
writer, every ``RELEASE_BYTES``, ``MADV_DONTNEED`` drops them from this process only (the data,
dirty or not, stays in the page cache, and a read of the mapping faults it back in).

Without a mapping. Some filesystems cannot map a file shared and writable (FUSE filesystems
that bypass the page cache, some network filesystems: ``mmap`` fails with ENODEV or EINVAL).
There the writer keeps the descriptor only (:attr:`mapping` is None, :attr:`unmapped_reason`
says why) and the spool writes each frame with one ``os.pwrite``: a returned call still means
the record is in the kernel's hands, so a kill loses nothing, but every log call makes a
system call, with the GIL hand-over that costs beside a busy thread (see above). Readers of
such a segment use ``pread`` (they get no mapping from the spool either).

On a disk too full. The spool asks for a smaller segment when the disk cannot hold a whole
one (``_spool``'s slow path), down to a segment of no capacity at all: an empty file,
neither allocated nor mapped, that takes no record (every append rotates, and so tries again).

Sealing unmaps the file and cuts it back to its content; in a forked child, :meth:`forget`
drops this process's mapping and descriptor without touching the file the parent writes.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from pathlib import Path
from typing import Final

from agent_logging.spool._segments import unlink

__all__ = ["RELEASE_BYTES", "SegmentWriter"]

_OPEN_NEW: Final = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
#: The writer gives back the pages of its mapping behind it every this many bytes.
RELEASE_BYTES: Final = 1 << 20


class SegmentWriter:
    """A new segment file of ``capacity`` bytes, allocated on disk, and its mapping.

    The spool copies frames into :attr:`mapping` at offsets it tracks itself (under its lock)
    and calls :meth:`release_behind` once the end of what it wrote passes :attr:`release_at`.

    Raises:
        OSError: the file cannot be created, allocated (a full disk) or mapped; nothing is
            left behind.
    """

    __slots__ = ("_released", "capacity", "fd", "mapping", "release_at", "unmapped_reason")

    def __init__(self, path: Path, capacity: int) -> None:
        fd = os.open(path, _OPEN_NEW, 0o600)
        self.fd = fd
        self.capacity = capacity
        self.release_at = RELEASE_BYTES
        self._released = 0
        self.mapping: mmap.mmap | None = None
        self.unmapped_reason: str | None = None
        if capacity == 0:  # a placeholder on a full disk: nothing to allocate or map
            return
        try:
            os.posix_fallocate(fd, 0, capacity)
        except OSError as exc:
            os.close(fd)
            unlink(path)
            # The bare errno ("No space left on device") would not say what was asked.
            raise OSError(
                exc.errno,
                f"cannot allocate {capacity:,} bytes on disk for {path}: {exc.strerror or exc}",
            ) from exc
        try:
            self.mapping = mmap.mmap(fd, capacity)
        except OSError as exc:  # a filesystem that cannot map it: one pwrite per record
            self.unmapped_reason = f"cannot map {path} shared and writable: {exc.strerror or exc}"

    def write_unmapped(self, start: int, frame: bytes) -> None:
        """Write ``frame`` at ``start`` with ``os.pwrite``: the writer has no mapping.

        Raises:
            ValueError: the writer is sealed.
            OSError: the write failed; part of the frame may be on disk, where the next write
                at ``start`` replaces it (or replay finds a torn tail, skipped and counted).
        """
        if self.fd < 0:
            raise ValueError(f"segment writer is sealed (fd {self.fd})")
        view = memoryview(frame)
        while view:  # a regular file takes it whole unless the disk fills; loop regardless
            written = os.pwrite(self.fd, view, start)
            if written <= 0:
                raise OSError(errno.EIO, f"pwrite of {len(view)} bytes wrote nothing")
            view, start = view[written:], start + written

    def release_behind(self, end: int) -> None:
        """Give back the mapping's pages below ``end`` (the spool's lock held)."""
        upto = end - end % mmap.PAGESIZE
        if self.mapping is not None and upto > self._released:
            with contextlib.suppress(OSError, ValueError):
                self.mapping.madvise(mmap.MADV_DONTNEED, self._released, upto - self._released)
            self._released = upto
        self.release_at = upto + RELEASE_BYTES

    def seal(self, size: int) -> None:
        """Unmap, cut the file back to its ``size`` bytes of content, close it. Idempotent."""
        if self.mapping is not None:
            self.mapping.close()
            self.mapping = None
        if self.fd >= 0:
            with contextlib.suppress(OSError):  # left uncut, readers skip the zeros
                os.ftruncate(self.fd, size)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def forget(self) -> None:
        """In a forked child: drop this process's mapping and descriptor, touch no file."""
        if self.mapping is not None:
            with contextlib.suppress(BufferError, OSError):
                self.mapping.close()
            self.mapping = None
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
