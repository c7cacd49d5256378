"""Lineage and serial: is a state integral, of this stack's lineage, the head of an intact ledger, and where its
object sits in the bucket. Entered by verify (the verdict), integrity, placement and tamper."""
