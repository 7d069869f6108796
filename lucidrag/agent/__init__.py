"""The agent's tools: search, list files and read around a passage in the knowledge bases the
calling pipeline may use (scope.py decides which), answered as compact JSON (output.py)."""
