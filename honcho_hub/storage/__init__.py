"""The plugin's local files: the outbox file (SQLite, shared by every process of the install) and
its tables, each process's capture journal, and the marker beside the outbox. No module here does
network I/O (docs/architecture.md, "Storage").
"""
