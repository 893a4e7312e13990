"""Lambda entry points. Thin: each handler adapts one API operation (Mangum → FastAPI route) or the authorizer.

template.yaml names them as ``itl_functions.<module>.<handler>``; the core library comes from the layer.
"""
