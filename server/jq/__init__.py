"""jq over result lists, run as untrusted code: `apply_jq` runs an agent's filter in a
sandboxed child process (`sandbox`, `worker`), and `jq_view` makes a search's `jq_filter` a
session view of its matches (`view`; `view_key` names the view of a filter over records of
one detail level). Its errors are in `server.errors`."""

from server.jq.sandbox import apply_jq, check_expression
from server.jq.view import jq_view, view_expression, view_key

__all__ = ["apply_jq", "check_expression", "jq_view", "view_expression", "view_key"]
