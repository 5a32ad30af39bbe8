"""What a mirror applied, per app id, and under which source lineage: its record, the step journal, forks of MariaDB
servers' histories, which app id and which writer owns a table or a root."""
