"""Restore rehearsals: proof, layer by layer, that the state a recovery would restore today can be restored,
decrypted and matches the cloud, without touching the real stack.

For each layer: choose the version `recover` would choose (the guide's own read phases, ledger and all),
restore it and the layers it references into a scratch `file://` backend with the same project and stack
names, decrypt it with the state's own secrets provider, and preview it with `--refresh --expect-no-changes`.
The outcome, the version's age, the measured RPO (what a restore of it now would lose: 0 when it is the
stack's newest state) and the seconds of each phase are kept
under `.groundctl/rehearsals/<env>/` in the state bucket, the only write a rehearsal makes.

The modules: `scope` (which layers, which references, in what order), `judge` (what a decryption or a
preview proved), `record` (the stored record: built, named, validated on read) — pure — and the shell:
`choosing` (the recovery's choice), `scratch` (the scratch backend), `run` (the phases, I/O passed in).
"""
