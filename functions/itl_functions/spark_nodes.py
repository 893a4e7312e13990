"""sparkNodes functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import spark_nodes as routes
from itl_functions.adapter import operation_handler

create = operation_handler(routes.router, "SparkNodes_Create")
create_or_update = operation_handler(routes.router, "SparkNodes_CreateOrUpdate")
get = operation_handler(routes.router, "SparkNodes_Get")
update = operation_handler(routes.router, "SparkNodes_Update")
delete = operation_handler(routes.router, "SparkNodes_Delete")
list_by_resource_group = operation_handler(routes.router, "SparkNodes_ListByResourceGroup")
list_by_subscription = operation_handler(routes.router, "SparkNodes_ListBySubscription")
# <<< generated: handlers
