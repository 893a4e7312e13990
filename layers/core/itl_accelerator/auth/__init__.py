"""Identity (JWT → principal), role-based permissions and tenant scopes."""
