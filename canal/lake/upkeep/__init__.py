"""Folds and upkeep: folding change logs into their bases, scheduled compaction and vacuum, the mirror's health and
bounded records of what it did."""
