"""The archive layer's writers: the same bytes whatever the machine, and read back as they were written."""

from __future__ import annotations

import hashlib
import io
import random

import pytest

from flagtree_feedstock._archive import compressed


def _payload(size: int) -> bytes:
    """``size`` bytes that compress about 3:1 with matches of every length (a seeded vocabulary of short
    random words): enough work for zstd's long-range search, quickly made."""
    rng = random.Random(7)
    words = [rng.randbytes(rng.randrange(2, 24)) for _ in range(4000)]
    out = bytearray()
    while len(out) < size:
        out += b"".join(rng.choices(words, k=4096))
    return bytes(out[:size])


def _zstd(data: bytes, level: int, piece: int) -> bytes:
    out = io.BytesIO()
    with compressed.zstd_writer(out, level) as writer:
        for at in range(0, len(data), piece):
            writer.write(data[at : at + piece])
    return out.getvalue()


def test_zstd_bytes_do_not_depend_on_the_cores_nor_on_the_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """zstd's multi-threaded mode cuts its input into jobs of a fixed size (8 MiB at level 3), whatever the
    workers: 40 MB is five jobs, compressed on one, two and three workers, written in pieces of three sizes.
    One digest. (Its single-threaded mode writes other bytes: the writer never uses it.)"""
    data = _payload(40 << 20)
    digests = set()
    for workers, piece in ((1, 1 << 20), (2, 65_537), (3, 8 << 20)):
        monkeypatch.setattr(compressed, "threads", lambda workers=workers: workers)
        digests.add(hashlib.sha256(_zstd(data, 3, piece)).hexdigest())
    assert len(digests) == 1
    import zstandard  # noqa: PLC0415 - only to show what the single-threaded mode would write

    single = zstandard.ZstdCompressor(level=3).compressobj()
    assert hashlib.sha256(single.compress(data) + single.flush()).hexdigest() not in digests
