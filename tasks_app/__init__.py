"""Tasks, their history, artifacts and event log; the A2A services and protocol adapters."""
