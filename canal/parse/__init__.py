"""Binlog sources, decoding, conversion to entries, start-position finding and the parser loop."""
