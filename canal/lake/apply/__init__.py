"""Applying a planned batch: rows appended to change logs (or staged) or MERGEd, DDL done to the files, foreign keys'
actions, XA transactions, partial row images made whole, and the typed stops."""
