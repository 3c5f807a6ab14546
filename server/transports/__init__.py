"""Transports beyond fastmcp's own, and the limits every transport enforces.

`checked_stdio` is plain stdio that answers malformed or oversized requests (the default);
`framing` is the pure chunked wire format, `chunked_stdio.chunked_stdio_server` carries a FastMCP
app over it (`codepager serve --transport chunked-stdio`) and `chunked_client.ChunkedStdioTransport`
is the matching client transport for `fastmcp.Client`; `wire` reads lines with a size bound;
`backend` is how the proxy connects to a backend over any transport (`tool_listings` checks
its tool lists tool by tool; none of the front connection's headers is forwarded);
on HTTP, `http_origin` refuses foreign Host/Origin headers (DNS rebinding), `http_limit` bounds
request bodies in size and idle time, and `http_errors` is the JSON-RPC shape of their refusals
(the bearer-token check is `server.auth`); `run` picks a transport from the settings
(`run.run_stdio` serves either stdio flavour; the SDK internals they reuse are behind
`server.sdk_shim`). See docs/transports.md.
"""
