"""The job log function: ``GET .../sparkJobs/{jobName}/logs`` (see template.yaml). It proxies the DGX Platform, so
unlike the other API functions it loads the DGX client (httpx) and reads the platform's API key."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import job_logs as routes
from itl_functions.adapter import operation_handler

get_logs = operation_handler(routes.router, "SparkJobs_GetLogs")
# <<< generated: handlers
