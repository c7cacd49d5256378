"""The guided recovery of one stack: Assess → Candidates → Lineage/serial → Choose → Restore →
Reconcile → Import → Pending creates → Verify.

Each phase ends in a `Condition` (like a Flux condition: a status, a CamelCase reason, a message and
the operator's next step), and "attempted" is kept apart from "achieved": a restore that was refused
was not attempted; an import that failed was attempted and not achieved. `plan_phases` (pure) says
which phases a run will attempt; `run_guide` runs them, doing I/O only through `GuideServices`, and
stops at the first refusal or failure, marking the rest not attempted. The recovery is complete only
when the final verification (`preview --refresh --expect-no-changes`) shows no changes.

Interactive by default (`confirm` is asked before each write); `yes` answers it, but never lifts a
refusal that needs a flag; `dry_run` stops before any write (reconcile still runs, read-only, against
the chosen state, so the import plan can be reviewed, and the pending-creates phase says what it would
do, or refuses as the real run would).

The modules: `model` (options, services, conditions, the transcript), `run` (what one run carries from
phase to phase), `flow` (the phases in order, where the run stops), and one module per stretch of the
flow: `reading` (Assess, Candidates, Lineage/serial), `choosing` (Choose), `restoring` (Restore),
`reconciling` (Reconcile, Import, Pending creates) and `verifying` (Verify).
"""
