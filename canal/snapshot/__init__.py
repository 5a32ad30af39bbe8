"""Snapshots of existing tables, merged with the binlog: chunks exact at binlog positions (MariaDB's consistent
snapshot), their rows the same values the binlog decoder gives (:mod:`canal.snapshot.values`)."""

from canal.snapshot.reader import Chunk, ChunkReader

__all__ = ["Chunk", "ChunkReader"]
