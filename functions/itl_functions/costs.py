"""The cost query function (POST .../costQuery; see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import costs as routes
from itl_functions.adapter import operation_handler

query = operation_handler(routes.router, "Costs_Query")
# <<< generated: handlers
