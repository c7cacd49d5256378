"""The drills: rebuild-cluster and state-loss, their shared runner, phases, reports, timelines and the
Flux readiness probe."""
