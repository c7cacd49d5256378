"""Planning: the plan model and its rendering, the offline plan under Pulumi's mock runtime, and the
posture rules, and a plan in words (`summary`) for the console, run records and status."""
