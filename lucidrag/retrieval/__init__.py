"""Retrieve: query → vector and keyword candidates → fuse → rerank → cite."""
