"""Pydantic models of the API (camelCase on the wire, snake_case accepted on input)."""
