"""Where the cursor key (the secret cursors are sealed with) comes from.

A configured key wins (replicas behind one load balancer must share it). Without one, a random
key is generated on first start and kept in the cache dir (`infra.SecretFile`: 0600,
published atomically), so cursors an agent holds survive a server restart on the same machine,
and two servers starting at once agree on one key.
"""

from __future__ import annotations

import logging
from pathlib import Path

from infra import MIN_SECRET_LENGTH, SecretFile, check_cache_dir

log = logging.getLogger(__name__)

CURSOR_KEY_FILE = "cursor.key"
"""The cache dir's cursor key, the secret cursors are sealed with."""
CURSOR_KEY_TEMP_PREFIX = f".{CURSOR_KEY_FILE}."
"""How the cursor key's temporary files are named while it is published."""
CACHE_DIR_ENTRIES = (CURSOR_KEY_FILE, f"{CURSOR_KEY_TEMP_PREFIX}*")
"""What the sessions keep in the cache dir, for the engine to leave out of searches
(`EngineConfig.cache_entries`): a regex search of a root holding the cache showed the key to
anyone who may search. The temporary files too: one outlives a process killed between writing
and publishing it, holding the live key."""


def load_or_create_key(cache_dir: Path, configured: str | None = None) -> bytes:
    """The cursor key: `configured` if given, else the one kept in `cache_dir/cursor.key`.
    ValueError when the kept one is not a usable key file; OSError when it cannot be had (the
    server then keeps a key for this process only)."""
    if configured is not None:
        if not configured.strip():
            raise ValueError("sessions.secret_key is empty; set it to a long random string or unset it")
        if len(configured) < MIN_SECRET_LENGTH:
            log.warning(
                "sessions.secret_key is only %d characters; cursors sealed with a short key are easier "
                "to forge. Use e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`",
                len(configured),
            )
        return configured.encode()
    check_cache_dir(Path(cache_dir))  # a key planted there would seal cursors its planter can read
    key_file = SecretFile(
        Path(cache_dir) / CURSOR_KEY_FILE,
        temp_prefix=CURSOR_KEY_TEMP_PREFIX,
        label="the cursor key file",
        remedy="delete it to have a new key generated (outstanding cursors will stop working), or set "
        "sessions.secret_key",
    )
    return key_file.load_or_create().encode()
