"""What the EventBridge Scheduler schedules of template.yaml run: each run is bounded and idempotent."""
