"""sparkJobs functions: one handler per operation (see template.yaml)."""

from itl_functions.adapter import operation_handler

create = operation_handler("SparkJobs_Create")
create_or_update = operation_handler("SparkJobs_CreateOrUpdate")
get = operation_handler("SparkJobs_Get")
cancel = operation_handler("SparkJobs_Cancel")
delete = operation_handler("SparkJobs_Delete")
list_by_resource_group = operation_handler("SparkJobs_ListByResourceGroup")
list_by_subscription = operation_handler("SparkJobs_ListBySubscription")
get_stats = operation_handler("SparkJobs_GetStats")
