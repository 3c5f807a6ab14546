"""jq over result lists, run as untrusted code: `apply_jq` runs an agent's filter in a
sandboxed child process (`sandbox`, `worker`), and `jq_view` makes a search's `jq_filter` a
session view of its matches (`view`). Its errors are in `server.errors`."""

from server.jq.sandbox import apply_jq, check_expression
from server.jq.view import jq_view

__all__ = ["apply_jq", "check_expression", "jq_view"]
