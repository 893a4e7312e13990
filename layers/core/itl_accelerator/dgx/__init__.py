"""DGX Platform client (the only code that imports httpx for the DGX Platform) and its contract."""
