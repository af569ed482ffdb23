"""The workspace daemon: its process, its serving thread, the audit of its watcher."""
