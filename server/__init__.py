"""Speaking MCP: the fastmcp app, tools, the inline/file_ref output layer, proxy mode,
transports, settings and the CLI."""

__version__ = "0.1.0"
