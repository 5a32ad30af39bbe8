"""The DDL of a change batch as the mirror models it: a statement's text and names, the layout after it, and every value
conversion of an ALTER TABLE (or a typed stop)."""
