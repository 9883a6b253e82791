"""The audit log's tests use the console's `world`: two tenants and the people in them."""

from tests.console.conftest import world  # noqa: F401
