"""Data access: the single DynamoDB table. Only this package imports a DynamoDB client."""
