"""The SLO report function: ``GET /subscriptions/{sub}/providers/ITL.Accelerator/slo`` (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import slo as routes
from itl_functions.adapter import operation_handler

get = operation_handler(routes.router, "Slo_Get")
# <<< generated: handlers
