"""sparkJobs functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import spark_jobs as routes
from itl_functions.adapter import operation_handler

create = operation_handler(routes.router, "SparkJobs_Create")
create_or_update = operation_handler(routes.router, "SparkJobs_CreateOrUpdate")
get = operation_handler(routes.router, "SparkJobs_Get")
cancel = operation_handler(routes.router, "SparkJobs_Cancel")
delete = operation_handler(routes.router, "SparkJobs_Delete")
list_by_resource_group = operation_handler(routes.router, "SparkJobs_ListByResourceGroup")
list_by_subscription = operation_handler(routes.router, "SparkJobs_ListBySubscription")
# <<< generated: handlers
