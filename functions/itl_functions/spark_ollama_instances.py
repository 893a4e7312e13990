"""sparkOllamaInstances functions: one handler per operation (see template.yaml)."""

from itl_functions.adapter import operation_handler

create = operation_handler("SparkOllamaInstances_Create")
create_or_update = operation_handler("SparkOllamaInstances_CreateOrUpdate")
get = operation_handler("SparkOllamaInstances_Get")
delete = operation_handler("SparkOllamaInstances_Delete")
list_by_node = operation_handler("SparkOllamaInstances_ListByNode")
get_stats = operation_handler("SparkOllamaInstances_GetStats")
