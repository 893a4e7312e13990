"""What the table's DynamoDB stream runs (at least once, in order per item, after the transaction committed)."""
