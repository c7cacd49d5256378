"""Restore and report: the restore itself (versioned copy first, under the lock, rerunnable after a kill) and
the redacted JSON transcript and Markdown report of a recovery. Entered by restore and report."""
