"""The services behind the API routes: one per resource type, plus operations, subscriptions, audit and stats."""
