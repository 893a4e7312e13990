"""What the API services, the workflow steps, the schedules and the stream consumers share."""
