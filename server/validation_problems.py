"""Validation errors as one line a problem (`search.max_results: ... (got -5)`), for a settings
file, an mcpServers file, a proxied server's answer or a tool call's arguments alike.

pydantic's own report names the model rather than the file, ends each error with a
documentation link, and prints every refused value, secrets (a token, a server's `env`)
included, into terminals and bug reports; and it builds every error of a huge input at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import ValidationError

#: Problems listed at most: a list of thousands of bad items is as many errors, and the
#: message of a refused tool call goes into an agent's context.
MAX_PROBLEMS = 10
#: Errors read out of one ValidationError at most. pydantic builds them all at once (~10 us
#: each), so past this many only their count is told: a malformed answer of a proxied server
#: of 1.9M bad items would otherwise hold the event loop for 20 s. Our tools' own arguments are
#: bounded far below it (`server.tools.bounds`).
MAX_READ_ERRORS = 10_000


def validation_problems(
    exc: ValidationError,
    *,
    shown: Callable[[tuple[str | int, ...]], bool],
    names: Mapping[str | int, str] | None = None,
) -> list[str]:
    """One line a problem of `exc`, the value echoed only where `shown(location)` allows.
    `names` renames a location's first part (a model's field to the tool argument it came
    from)."""
    count = exc.error_count()
    if count > MAX_READ_ERRORS:
        return [f"{count:,} values are not what the schema allows (too many to list)"]
    problems = []
    for error in exc.errors(include_url=False)[:MAX_PROBLEMS]:
        first, *rest = error["loc"] or ("",)
        key = ".".join(str(part) for part in ((names or {}).get(first, first), *rest))
        message = error["msg"].removeprefix("Value error, ")  # our validators' messages name the key
        problem = message if message.startswith(key) or not key else f"{key}: {message}"
        if shown(error["loc"]) and error["type"] not in ("extra_forbidden", "missing", "value_error", "json_invalid"):
            given = repr(error["input"])
            problem += f" (got {given if len(given) <= 200 else given[:200] + '...'})"
        problems.append(problem)
    if count > MAX_PROBLEMS:
        problems.append(f"and {count - MAX_PROBLEMS:,} more")
    return problems
