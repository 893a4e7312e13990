"""offers functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import offers as routes
from itl_functions.adapter import operation_handler

list_offers = operation_handler(routes.router, "Offers_List")
# <<< generated: handlers
