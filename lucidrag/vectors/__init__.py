"""Embedding and the host's vector DB: batching, unit vectors, distance → cosine, reading back."""
