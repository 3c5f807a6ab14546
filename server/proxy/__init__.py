"""`codepager proxy`: the large-result layer in front of any MCP server.

Results under the threshold pass through untouched; larger ones are saved as datasets and
answered with a compact description (`interceptor`, `extraction`, `saver`, `answer`), and
the client can query and page the datasets with tools the proxy adds (`app`). `backends`
turns a command line or an `mcpServers` config into the servers behind it.
"""

from server.proxy.app import build_proxy_app
from server.proxy.backends import Backend, command_backend, config_backends

__all__ = ["Backend", "build_proxy_app", "command_backend", "config_backends"]
