"""Turning chunks and queries into vectors: the shipped static model, and how to rebuild it."""
