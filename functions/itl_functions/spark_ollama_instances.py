"""sparkOllamaInstances functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import spark_ollama_instances as routes
from itl_functions.adapter import operation_handler

create = operation_handler(routes.router, "SparkOllamaInstances_Create")
create_or_update = operation_handler(routes.router, "SparkOllamaInstances_CreateOrUpdate")
get = operation_handler(routes.router, "SparkOllamaInstances_Get")
delete = operation_handler(routes.router, "SparkOllamaInstances_Delete")
list_by_node = operation_handler(routes.router, "SparkOllamaInstances_ListByNode")
# <<< generated: handlers
