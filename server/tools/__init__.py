"""The MCP tools, one module per family; each exposes register_*(app, services)."""
