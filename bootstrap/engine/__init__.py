"""The engine boundary: the Engine protocol over the Pulumi Automation API, and the translation of its
events, errors and results; the preflight of the CLI, pip and plugins."""
