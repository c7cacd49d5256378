"""Choosing a version: the bucket's versions evaluated newest first and the recovery point chosen among them.
Entered by choose (the pure rule), evaluator and versions (the reading), choose_inputs and recovery_point."""
