"""The Pulumi versions groundctl supports and ships with: the one place every other file takes them from
(the CLI check, the Dockerfile, the generated workflows, the README and the tests)."""

# `config set --raw` (how a secret's exact bytes reach the CLI on stdin) exists only from v3.247.0.
PULUMI_CLI_MIN = "3.247.0"
# The release the fleet image and the generated workflows install, and the engine tier was run with.
PULUMI_CLI_PINNED = "3.259.0"
# `Stack.refresh(clear_pending_creates=...)` exists only from the Python SDK 3.151.0.
PULUMI_SDK_MIN = "3.151.0"
