"""Importing the survivors: what the live cloud still holds against the chosen state, the import IDs and the
import plan, and the pending creates to reconcile. Entered by import_plan, inventory and pending_creates."""
