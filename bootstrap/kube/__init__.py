"""A read-only client of a cluster's Kubernetes API, for what groundctl checks on the cluster itself."""
