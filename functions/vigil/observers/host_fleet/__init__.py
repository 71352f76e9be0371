"""The manager's side of pooled hosts: the host item, its data access, and pure planning."""
