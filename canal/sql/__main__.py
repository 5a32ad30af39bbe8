"""``python -m canal.sql`` prints the statement table of docs/concepts/fail-closed.md
(:func:`canal.sql.contract.contract_table`): what pycanal follows, knows to change nothing, or stops at."""

from canal.sql.contract import contract_table

print(contract_table(), end="")
