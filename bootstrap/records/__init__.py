"""What groundctl keeps beside the state in the bucket: key layout, the ledger every apply writes, the
environment lock and the run records."""
