"""Trigger plugins: one module per built-in, plus the registry."""
