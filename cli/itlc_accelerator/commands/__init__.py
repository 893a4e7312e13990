"""The command groups, one module per noun: node, instance, job, usage, audit, operation."""
