"""Programs the tests run as separate OS processes (to SIGKILL them)."""
