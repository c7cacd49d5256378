"""Flux: its install manifest (`manifest`: named, bounded, checked against its digest), the owners of what it
installs (`owners`), and Flux's own readiness, read through the Kubernetes API: the controllers available and the Kustomizations
(the root one at the revision the flux layer asked for) Ready. `up`, a recovery's verification of the flux
layer and the rebuild drill all judge Flux with these modules."""
