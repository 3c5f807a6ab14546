"""Opt-in transports beyond fastmcp's own: chunked stdio framing for very large messages.

`framing` is the pure wire format; `chunked_stdio.run_chunked_stdio` serves a FastMCP app with
it (`codepager serve --transport chunked-stdio`); `chunked_client.ChunkedStdioTransport` is the
matching client transport for `fastmcp.Client`. See docs/transports.md.
"""
