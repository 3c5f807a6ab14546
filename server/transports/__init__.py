"""Transports beyond fastmcp's own, and the limits every transport enforces.

`checked_stdio` is plain stdio that answers malformed or oversized requests (the default);
`framing` is the pure chunked wire format, `chunked_stdio.run_chunked_stdio` serves a FastMCP
app with it (`codepager serve --transport chunked-stdio`) and `chunked_client.ChunkedStdioTransport`
is the matching client transport for `fastmcp.Client`; `wire` reads lines with a size bound;
on HTTP, `http_origin` refuses foreign Host/Origin headers (DNS rebinding), `http_limit` bounds
request bodies in size and idle time, and `http_errors` is the JSON-RPC shape of their refusals
(the bearer-token check is `server.auth`); `run` picks a transport from the settings. See
docs/transports.md.
"""
