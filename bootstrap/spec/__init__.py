"""The environment spec: `environments/<name>.yaml`, the single source of truth for an environment.

Validation is written for the mistakes people make: a typo'd key, a network too small for its
availability zones, a node group whose desired size is outside its bounds, a branch deployed to
production, a bucket name S3 would refuse. Each problem names the field path and the fix.

The models and their checks of one field are in `models`, the rules across fields in `rules`, and
reading a spec (pydantic's errors said as problems with their fix) in `parse`, finding the file in `spec_file`,
and the stacks' configuration derived from a spec in `stack_config`; this package is their public face.
"""

from bootstrap.spec.models import (AwsSpec, BackendSpec, ClusterSpec, EnvironmentSpec, FleetSpec, FluxRef,
                                   FluxSpec, NetworkSpec, NodeGroupSpec, RecoverySpec, bucket_name_problem)
from bootstrap.spec.parse import load_spec, parse_spec

__all__ = ["AwsSpec", "BackendSpec", "ClusterSpec", "EnvironmentSpec", "FleetSpec", "FluxRef", "FluxSpec",
           "NetworkSpec", "NodeGroupSpec", "RecoverySpec", "bucket_name_problem", "load_spec", "parse_spec"]
