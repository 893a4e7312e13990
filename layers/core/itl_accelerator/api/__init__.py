"""HTTP layer: FastAPI routes (one router per resource type), the ARM protocol middleware and error rendering."""
