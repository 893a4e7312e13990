"""Usage statistics functions (GET .../stats of instances, jobs and nodes): one handler per operation (see
template.yaml), in a module of their own so the resource functions never import the stats routes."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import usage_stats as routes
from itl_functions.adapter import operation_handler

node_stats = operation_handler(routes.router, "SparkNodes_GetStats")
instance_stats = operation_handler(routes.router, "SparkOllamaInstances_GetStats")
job_stats = operation_handler(routes.router, "SparkJobs_GetStats")
# <<< generated: handlers
