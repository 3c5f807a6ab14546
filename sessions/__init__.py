"""Remembering things: the store of full result lists, signed cursors and paging.
Knows nothing of MCP."""
