"""Tenants, agents and API keys; agent cards; the executor registry and built-in executors."""
