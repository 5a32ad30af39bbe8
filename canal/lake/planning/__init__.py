"""A batch of change rows planned into ordered steps, each reduced to a plan per table, and the plans' JSON images typed
into MERGE sources -- Arrow kernels, no I/O."""
