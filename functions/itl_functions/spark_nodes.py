"""sparkNodes functions: one handler per operation (see template.yaml)."""

from itl_functions.adapter import operation_handler

create = operation_handler("SparkNodes_Create")
create_or_update = operation_handler("SparkNodes_CreateOrUpdate")
get = operation_handler("SparkNodes_Get")
update = operation_handler("SparkNodes_Update")
delete = operation_handler("SparkNodes_Delete")
list_by_resource_group = operation_handler("SparkNodes_ListByResourceGroup")
list_by_subscription = operation_handler("SparkNodes_ListBySubscription")
get_stats = operation_handler("SparkNodes_GetStats")
