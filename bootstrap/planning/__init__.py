"""Planning: the plan model and its rendering, the offline plan under Pulumi's mock runtime, and the
posture rules."""
