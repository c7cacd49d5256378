"""The evidence kept in the state bucket beside the states: rehearsal, drill and drift records read back as
untrusted input, the bucket's protection, and the per-layer rehearsal summary; fleet, rehearsal and drills read it."""
