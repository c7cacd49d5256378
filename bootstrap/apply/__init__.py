"""Applying an environment: the orchestrator, its per-layer steps and the approval gate."""
