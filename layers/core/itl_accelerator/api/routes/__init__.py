"""One APIRouter per resource type."""
