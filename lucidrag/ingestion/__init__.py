"""Ingest: bytes → parse → chunk → embed → store."""
