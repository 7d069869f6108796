"""Retrieval benchmark support: vendored test collections, offline embedders, embedding cache."""
