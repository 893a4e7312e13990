"""Storage behind one ``typing.Protocol`` per aggregate (protocols.py), in two implementations with the same
semantics: ``dynamodb`` (the table) and ``memory`` (tests of the services in milliseconds). Typed failures:
errors.py."""
