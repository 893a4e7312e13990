"""The provider's own words, free of storage and transport: the states of its state machines (``states``) and the
typed records of its aggregates (``records``) — nodes, Ollama instances, jobs, long-running operations — that the
repositories take and return and the services reason about."""
