"""The shell's kit, used by every floor above (bootstrap's packages, recovery, the CLI): errors and exit
codes, the console, masking, untrusted-input checks, user-named files, interrupts, invocation and scratch folders."""
