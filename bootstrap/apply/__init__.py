"""Applying an environment: the steps a command runs, the runner that runs them (preflight, each layer's
up, destroy, the previews) and the approval gate."""
