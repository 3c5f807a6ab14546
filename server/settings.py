"""Configuration: defaults < TOML file (`--config`) < environment (`CODEPAGER_<SECTION>__<KEY>`)
< command-line flags.

One `Settings` object is built at start-up and handed down; nothing reads the environment
later, and no module keeps a value read from these models when it was imported (a test or a
config change would not reach it). Each section is its own model so `codepager config` can
print it and docs can list it; a limit lives in the section of what it limits (`[sql]`, `[jq]`),
and the proxy overrides `[sql]` in `[proxy.sql]`. A knob nobody sets is a constant of the module
that uses it, saying why, not a setting: the list is meant to stay short enough to hold in mind
(`tests/test_settings_layout.py` bounds it). A key an earlier version had is refused with where
it went (`MOVED_SETTINGS`, `REMOVED_SETTINGS`), never silently dropped.
"""

from __future__ import annotations

import contextvars
import functools
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import platformdirs
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from search_engine import (
    DEFAULT_EMBEDDING_PROFILE,
    DEFAULT_MAX_FILE_SIZE,
    DEFAULT_MAX_LINE_WIDTH,
    DEFAULT_MAX_RESULTS,
    DEFAULT_RG_MAX_CONCURRENT,
    DEFAULT_TIMEOUT_S,
    MAX_FILE_SIZE_LIMIT,
    EngineConfig,
    default_cache_dir,
)
from server.transports.framing import (
    DEFAULT_CHUNK_LIMIT,
    DEFAULT_MAX_BUFFERED_BYTES,
)
from server.transports.framing import DEFAULT_TIMEOUT_S as DEFAULT_CHUNK_TIMEOUT_S
from server.validation_problems import validation_problems
from sessions import (
    CACHE_DIR_ENTRIES,
    DEFAULT_MAX_AGE_S,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TTL_S,
    MAX_PAGE_SIZE,
)

if sys.version_info >= (3, 11):
    from tomllib import TOMLDecodeError
else:  # what pydantic-settings reads TOML with before 3.11
    from tomli import TOMLDecodeError

_toml_path: contextvars.ContextVar[Path | None] = contextvars.ContextVar("codepager_toml", default=None)


class _Section(BaseModel):
    """A settings section: a misspelt key is an error, never silently ignored, and so is an
    infinite or NaN number (`timeout_s = inf` killed the timer thread, leaving no limit)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


#: The longest duration a setting may give: a year, no limit in practice, and within what
#: `threading.Timer` takes (a timeout of 1e300 s was an OverflowError in the timer's thread).
MAX_SECONDS = 365 * 24 * 3600.0
Seconds = Annotated[float, Field(le=MAX_SECONDS)]
Hours = Annotated[float, Field(le=MAX_SECONDS / 3600)]
Days = Annotated[float, Field(le=MAX_SECONDS / 86400)]


@functools.lru_cache(maxsize=8)
def _duckdb_size(value: str) -> str:
    """A `duckdb_memory_limit` as DuckDB reads it, checked at load: a typo (`1XB`) used to
    pass here and fail every SQL call with DuckDB's parser error. Defaults are not validated,
    so DuckDB is imported here only when a value is set (or flags re-validate the settings,
    which is why each value is checked once: a connection per check costs ~30 ms)."""
    import duckdb

    try:
        with duckdb.connect() as con:
            con.execute(f"SET memory_limit = '{value.replace(chr(39), chr(39) * 2)}'")
    except duckdb.Error as exc:
        raise ValueError(
            f"not a size DuckDB takes ({str(exc).splitlines()[0][:200]}); write e.g. 512MB or 2GiB"
        ) from None
    return value


DuckdbSize = Annotated[str, AfterValidator(_duckdb_size)]


class SearchSettings(_Section):
    timeout_s: Seconds = Field(DEFAULT_TIMEOUT_S, gt=0, description="Kill a regex search after this many seconds.")
    max_results: int = Field(
        DEFAULT_MAX_RESULTS,
        ge=1,
        description=(
            "Stop collecting regex matches past this; the result is marked truncated. (The CLI prints every match "
            "unless given --limit.)"
        ),
    )
    max_file_size: int = Field(
        DEFAULT_MAX_FILE_SIZE, ge=1, le=MAX_FILE_SIZE_LIMIT, description="Skip files larger than this (bytes)."
    )
    default_page_size: int = Field(
        DEFAULT_PAGE_SIZE,
        ge=1,
        le=MAX_PAGE_SIZE,
        description=f"Matches per page when a search call gives no page_size (a call may ask for {MAX_PAGE_SIZE}).",
    )


#: The embedding models shipped with codepager (`index.model` names one, or any other model).
ShippedModel = Literal["static", "minilm"]


class IndexSettings(_Section):
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description=(
            "Where indexes and the cursor key live: a directory of yours that others cannot write in (refused "
            "otherwise), outside repositories you did not write (what is there is read as codepager's own)."
        ),
    )
    model: str = Field(
        DEFAULT_EMBEDDING_PROFILE,
        min_length=1,
        description=(
            "The embedding model: `static` or `minilm`, both shipped (see docs/benchmarks.md for the measurement "
            "behind the default), or any sentence-transformers model name or local path."
        ),
    )
    ready_wait_s: Seconds = Field(
        30.0,
        ge=0,
        description=(
            "How long a semantic call waits for indexing (with progress notifications) before answering 'not ready' "
            "with an estimate of the time left."
        ),
    )
    index_on_start: bool = Field(
        True, description="Start indexing every root in the background when the server starts."
    )
    watch: bool = Field(
        True,
        description=(
            "Find file changes by events (inotify, FSEvents, ReadDirectoryChangesW); false lists the tree on every "
            "semantic or hybrid search instead (network filesystems are always listed)."
        ),
    )


class SessionSettings(_Section):
    backend: str = Field(
        "memory",
        description="'memory', or a redis:// (rediss://, unix://) URL shared by replicas; Redis needs the redis "
        'extra: `pip install "codepager[redis]"`.',
    )
    ttl_s: Seconds = Field(DEFAULT_TTL_S, gt=0, description="Sliding time-to-live of a cached result list.")
    max_memory_mb: float = Field(
        DEFAULT_MAX_BYTES / 2**20,
        gt=0,
        description="Memory budget of the cached result lists (estimated); least recently used evicted first.",
    )
    secret_key: str | None = Field(
        None,
        description=(
            "Secret the cursor sealing key is derived from (replicas share it); generated and kept in the cache dir "
            "when unset."
        ),
    )
    cursor_max_age_s: Seconds = Field(
        DEFAULT_MAX_AGE_S,
        gt=0,
        description="Cursors older than this are refused as expired (the search must be re-run).",
    )


def _default_offload_dir() -> Path:
    """Where only this user can create the directory: `$XDG_RUNTIME_DIR/codepager` when that is
    set and a directory of this user's others cannot write in (the session's own, 0700), else
    `offload` in the user's cache dir. The default was `codepager-<user>` in the shared temp dir,
    a name anyone could create first: every large page then came back cut inline ("belongs to
    another user", which is still refused), with no file, SQL or resource."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and _ours_alone(Path(runtime)):
        return Path(runtime) / "codepager"
    return default_cache_dir() / "offload"


def _ours_alone(path: Path) -> bool:
    """Whether `path` is a directory of this user's that no one else can write in."""
    try:
        st = path.stat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


class ClientBudget(_Section):
    """One client's limits (see `server.clients` for the built-in table); unset ones fall back to
    the server default."""

    max_tokens: int | None = Field(None, ge=256, description="Largest answer in estimated tokens.")
    max_bytes: int | None = Field(None, ge=1024, description="Largest answer in bytes.")
    max_lines: int | None = Field(None, ge=16, description="Largest text block in lines.")
    reads: Literal["structured", "text", "both"] = Field(
        "both", description="Which block of a result the client shows its model."
    )


class OffloadSettings(_Section):
    output_dir: Path = Field(
        default_factory=_default_offload_dir, description="Where offloaded pages (JSONL) are written; created 0700."
    )
    max_tokens: int = Field(
        20_000, ge=100, description="Page ceiling in estimated tokens; above it a page goes to a file."
    )
    retention_hours: Hours = Field(24.0, gt=0, description="Offloaded files older than this are deleted.")
    clients: dict[str, ClientBudget] = Field(
        default_factory=dict,
        description=(
            "Per-client page limits, keyed by a substring of the client's clientInfo.name; they override the built-in "
            "table (docs/tools.md, Client budgets)."
        ),
    )


class SqlSettings(_Section):
    """The limits every analyze-with-duckdb query runs under (`[proxy.sql]` overrides them
    for the proxy's queries)."""

    memory_limit: DuckdbSize = Field("512MB", description="DuckDB memory_limit of one query.")
    threads: int = Field(1, ge=1, description="DuckDB threads of one query.")
    timeout_s: Seconds = Field(30.0, gt=0, description="Interrupt a query after this long.")
    max_rows: int = Field(
        100_000,
        ge=1,
        description=(
            "Rows kept from one SQL result, and from the whole result list an offloaded search page names as its "
            "dataset; the rest is reported as left out (so is any past 64 MiB of JSON)."
        ),
    )


class ProxySqlSettings(_Section):
    """`[proxy.sql]`: the `[sql]` keys the proxy's queries run under instead; a key left out
    (None) is `[sql]`'s. The proxy's datasets are whole tool results, so by default its queries
    get more memory and threads."""

    memory_limit: DuckdbSize | None = "1GB"
    threads: Annotated[int, Field(ge=1)] | None = 2
    timeout_s: Annotated[Seconds, Field(gt=0)] | None = None
    max_rows: Annotated[int, Field(ge=1)] | None = None

    def over(self, sql: SqlSettings) -> SqlSettings:
        """`sql` with the keys set here."""
        return sql.model_copy(update=self.model_dump(exclude_none=True))


class JqSettings(_Section):
    """The limits every `jq_filter` runs under."""

    timeout_s: Seconds = Field(5.0, gt=0, description="Kill a jq_filter after this many seconds.")


class ProxySettings(_Section):
    threshold_tokens: int = Field(
        8192,
        ge=1,
        description="Proxied results estimated above this many tokens (the one estimate) are saved as datasets.",
    )
    excluded_tools: list[str] = Field(
        default_factory=list,
        description="Tools whose results always pass through (as the client or the backend names them).",
    )
    data_dir: Path = Field(
        default_factory=lambda: Path(platformdirs.user_data_dir("codepager", appauthor=False)),
        description="Saved datasets go to <data_dir>/datasets/YYYY/MM/DD/.",
    )
    cleanup_after_days: Days = Field(
        30.0, gt=0, description="Saved datasets older than this are removed in the background."
    )
    call_timeout_s: Seconds | None = Field(
        300.0, gt=0, description="A backend call running longer than this fails with a timeout error."
    )
    sql: ProxySqlSettings = Field(
        default_factory=ProxySqlSettings,
        description=(
            "`[proxy.sql]`: any `[sql]` key, for the proxy's analyze-with-duckdb queries instead of `[sql]`'s; "
            'a key left out is `[sql]`\'s, except memory_limit ("1GB") and threads (2): whole tool results are '
            "larger than search pages. One key as a variable: `CODEPAGER_PROXY__SQL__THREADS=4`; as flags: "
            "`proxy --duckdb-memory-limit`, `proxy --duckdb-threads`."
        ),
    )


class ServerSettings(_Section):
    roots: list[Path] = Field(
        default_factory=lambda: [Path.cwd()],
        description=(
            "Directories the tools may search (`--root`, repeatable); paths outside them are refused. "
            "(`codepager search` in a shell searches whatever paths it is given.)"
        ),
    )
    transport: Literal["stdio", "http", "chunked-stdio"] = Field(
        "stdio", description="How the MCP server is served (see docs/transports.md)."
    )
    host: str = Field("127.0.0.1", description="HTTP bind address.")
    port: int = Field(8765, ge=0, le=65535, description="HTTP port.")
    auth_token: str | None = Field(
        None,
        description=(
            "The token HTTP requests need (`Authorization: Bearer <token>`), checked on the headers before any body is "
            "read. Unset: the one kept in `http-token` in the user state dir (`~/.local/state/codepager` on Linux), "
            "generated on first start; delete that file and restart to rotate it."
        ),
    )
    no_auth: bool = Field(
        False,
        description=(
            "HTTP: serve every request without a token (warned about at start): every user of this machine, and "
            "anyone who can reach the address, can then call the tools."
        ),
    )
    allowed_hosts: tuple[str, ...] = Field(
        (),
        description=(
            "HTTP: Host names answered besides localhost, loopback addresses and `host` (any port), e.g. the name a "
            'reverse proxy forwards; other Hosts get 403 (DNS-rebinding guard). `"*"` allows any.'
        ),
    )
    allowed_origins: tuple[str, ...] = Field(
        (),
        description=(
            "HTTP: browser origins (`scheme://host[:port]`) allowed besides pages on localhost, loopback addresses and "
            "`host`; a request with another Origin gets 403. Requests without Origin (non-browser clients) are not "
            'affected. `"*"` allows any.'
        ),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "WARNING", description="Log level of codepager, fastmcp and (on HTTP) uvicorn; logs go to stderr only."
    )
    # At most what all requests still arriving may hold together (64 MiB, a constant of
    # server.transports.framing): a larger one could never be taken in.
    max_request_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        le=DEFAULT_MAX_BUFFERED_BYTES,
        description=(
            "Largest request accepted on every transport; a larger one gets JSON-RPC error -32600 (HTTP 413) and is "
            "never held whole. HTTP also keeps the MCP SDK's own 4 MiB cap."
        ),
    )
    # One budget in time for requests still arriving, on either transport that takes them in
    # pieces (one server runs one transport): the same default, the same concept.
    request_timeout_s: Seconds = Field(
        DEFAULT_CHUNK_TIMEOUT_S,
        gt=0,
        description=(
            "A request that stops arriving for this many seconds is dropped. HTTP: a body that sends nothing for "
            "this long, or headers not all in within this long of their start, are answered 408 and the connection "
            "closed. chunked-stdio: an incomplete message with no new frame for this long is dropped."
        ),
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_case_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("auth_token")
    @classmethod
    def _token_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("server.auth_token is empty; set it to a long random string or unset it")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        from server.transports.http_origin import ANY, split_host

        for entry in entries:
            host = split_host(entry)
            if entry != ANY and (host is None or host.port is not None or "/" in entry):
                raise ValueError(
                    f'server.allowed_hosts: {entry!r} is not a host name; give names like "code.example.com" or '
                    '"10.0.0.5", without scheme or port (any port is accepted)'
                )
        return entries

    @model_validator(mode="after")
    def _no_token_with_no_auth(self) -> ServerSettings:
        if self.no_auth and self.auth_token is not None:
            raise ValueError(
                "server.no_auth (--no-auth) and server.auth_token (--auth-token) contradict each other; drop one"
            )
        return self

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        from server.transports.http_origin import ANY, parse_origin

        for entry in entries:
            if entry != ANY and parse_origin(entry) is None:
                raise ValueError(
                    f"server.allowed_origins: {entry!r} is not an origin; give scheme://host[:port], like "
                    '"https://code.example.com", without a path'
                )
        return entries


#: Keys of earlier versions that moved: `section.key`, as the refusal names it -> where they are
#: now. An old file or variable naming one is refused with the new name rather than read (a
#: value silently left unread would be a limit the user believes in and does not have).
_MOVED: dict[str, str] = {
    "index.profile": "index.model",
    **{f"server.{key}": "server.request_timeout_s" for key in ("body_timeout_s", "chunk_timeout_s")},
    **{
        f"server.{key}": "server.max_buffered_request_bytes"
        for key in ("body_max_buffered_bytes", "chunk_max_buffered_bytes")
    },
    **{f"offload.jq_{key}": f"jq.{key}" for key in ("timeout_s", "memory_mb", "max_concurrent")},
    **{
        f"offload.duckdb_{key}": f"sql.{key}"
        for key in ("memory_limit", "threads", "timeout_s", "max_concurrent", "max_rows", "max_result_bytes")
    },
    **{f"proxy.duckdb_{key}": f"proxy.sql.{key}" for key in ("memory_limit", "threads")},
}

#: Keys of earlier versions that are no longer settings: `section.key` -> what codepager does
#: instead (each a constant of the module that uses it, which says why it needs no setting).
REMOVED_SETTINGS: dict[str, str] = {
    "server.chunk_max_partial_messages": "64",
    "server.chunk_max_frames_per_message": "32,768",
    "search.default_snippet_length": "500; a call's snippet_length still picks its own",
    "search.default_ranked_snippet_length": "300; a call's snippet_length still picks its own",
    "search.max_snippet_length": "2,000",
    "index.fresh_wait_s": "0.5 s",
    "sessions.namespace": (
        '"default"; servers that must not share sessions give each its own Redis database in sessions.backend, '
        "e.g. redis://host:6379/1"
    ),
    "sessions.sweep_interval_s": "60 s",
    "offload.sweep_interval_s": "600 s",
    "offload.duckdb_fetch": "streamed, or spooled on DuckDB 1.x",
    "proxy.schema_sample_size": "100 records",
    "search.max_line_width": f"{DEFAULT_MAX_LINE_WIDTH} characters around the match",
    "search.rg_max_concurrent": f"{DEFAULT_RG_MAX_CONCURRENT} ripgrep processes at once",
    "search.max_page_size": f"{MAX_PAGE_SIZE} results; search.default_page_size still sets the default",
    "sql.max_concurrent": "2 queries at once; sql.memory_limit bounds each",
    "sql.max_result_bytes": "64 MiB of JSON; sql.max_rows still caps the rows",
    "jq.memory_mb": "512 MiB",
    "jq.max_concurrent": "2 filters at once",
    "offload.max_bytes": (
        "1 MiB, which a page within offload.max_tokens never reaches below 262,144 tokens; a client's own byte "
        "limit goes in offload.clients"
    ),
    "server.chunk_limit": (
        f"{DEFAULT_CHUNK_LIMIT:,} bytes a frame, under the 64 KiB pipe buffer of macOS; readers take frames of any size"
    ),
    "server.max_buffered_request_bytes": (
        f"{DEFAULT_MAX_BUFFERED_BYTES >> 20} MiB for all requests still arriving together; server.max_request_bytes "
        "still bounds one"
    ),
    "proxy.max_backend_message_bytes": "64 MiB of one backend reply",
    "server.auth_token_file": (
        "http-token in the user state dir, e.g. ~/.local/state/codepager/http-token (XDG_STATE_HOME moves it); "
        "server.auth_token gives a token of your own"
    ),
    "sessions.max_sessions": f"{DEFAULT_MAX_SESSIONS} result lists; sessions.max_memory_mb bounds their memory",
}


# A key that moved and later went (`offload.jq_memory_mb` -> `jq.memory_mb`) is refused as the
# one it moved to is, no longer a setting.
MOVED_SETTINGS = {old: new for old, new in _MOVED.items() if new not in REMOVED_SETTINGS}
REMOVED_SETTINGS.update({old: REMOVED_SETTINGS[new] for old, new in _MOVED.items() if old not in MOVED_SETTINGS})


def _old_keys(data: object) -> list[str]:
    """What to do about each key of an earlier version in `data` (the settings as read, a
    section a dict of keys), in one line each."""
    found = []
    sections = data if isinstance(data, dict) else {}
    for section, keys in sections.items():
        for key in keys if isinstance(keys, dict) else ():
            old = f"{section}.{key}"
            if (new := MOVED_SETTINGS.get(old)) is not None:
                table, _, name = new.rpartition(".")
                env = f"CODEPAGER_{new.upper().replace('.', '__')}"
                found.append(f"{old} is now {new}: write it as `{name}` under [{table}] (or set {env})")
            elif (fixed := REMOVED_SETTINGS.get(old)) is not None:
                found.append(f"{old} is no longer a setting (codepager uses {fixed}): remove it")
    return found


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CODEPAGER_", env_nested_delimiter="__", extra="forbid")

    server: ServerSettings = Field(default_factory=ServerSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    offload: OffloadSettings = Field(default_factory=OffloadSettings)
    sql: SqlSettings = Field(default_factory=SqlSettings)
    jq: JqSettings = Field(default_factory=JqSettings)
    proxy: ProxySettings = Field(default_factory=ProxySettings)

    @model_validator(mode="before")
    @classmethod
    def _no_old_keys(cls, data: Any) -> Any:
        if found := _old_keys(data):
            raise ValueError("; ".join(found))
        return data

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml = _toml_path.get()
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)

    def proxy_sql(self) -> SqlSettings:
        """The limits of the proxy's queries: `[sql]`, with `[proxy.sql]` over it."""
        return self.proxy.sql.over(self.sql)

    def engine_config(self) -> EngineConfig:
        shipped = self.index.model in get_args(ShippedModel)
        return EngineConfig(
            timeout_s=self.search.timeout_s,
            max_file_size=self.search.max_file_size,
            cache_dir=self.index.cache_dir,
            cache_entries=CACHE_DIR_ENTRIES,
            embedding_profile=self.index.model if shipped else DEFAULT_EMBEDDING_PROFILE,
            embedding_model=None if shipped else self.index.model,
            watch=self.index.watch,
        )


#: Settings whose values are never shown (`codepager config` masks them, errors do not echo them);
#: `sessions.backend` is shown with its password redacted.
SECRET_SETTINGS = (("sessions", "secret_key"), ("server", "auth_token"))


def default_of(section: type[BaseModel], key: str) -> Any:
    """A setting's built-in default, for CLI help and for the defaults of the classes the
    settings configure: the defaults are written once, in the models above, and nothing that
    reads them drifts from them."""
    return section.model_fields[key].get_default(call_default_factory=True)


def load_settings(config_file: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Build settings from a TOML file, the environment and explicit overrides (CLI flags).

    `overrides` is nested like the TOML (`{"server": {"port": 9000}}`); a section given there
    is merged over what the file and environment said, key by key, so a flag changes only
    its own key.
    """
    if config_file is not None and not Path(config_file).is_file():
        if Path(config_file).exists():
            raise ValueError(f"config file {config_file} is not a regular file: pass a TOML file")
        raise FileNotFoundError(f"config file not found: {config_file}")
    token = _toml_path.set(Path(config_file) if config_file else None)
    try:
        base = Settings()
        if not overrides:
            return base
        return Settings.model_validate(_merged(base.model_dump(), overrides))
    except ValidationError as exc:
        raise ValueError(invalid_settings(exc, config_file)) from None
    except TOMLDecodeError as exc:  # only the file is TOML: a variable's bad JSON is a SettingsError
        raise ValueError(f"{config_file} is not valid TOML: {exc}") from None
    except RecursionError:  # the TOML parser nests recursively: 100,000 `[` overflow it
        raise ValueError(f"{config_file} is not valid TOML: its arrays or tables nest too deeply") from None
    finally:
        _toml_path.reset(token)


def _merged(settings: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with each value of `overrides` that is not None over it, tables merged key by
    key at every depth (`{"proxy": {"sql": {"threads": 4}}}` keeps proxy.sql's other keys)."""
    merged = dict(settings)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        elif value is not None:
            merged[key] = value
    return merged


def invalid_settings(exc: ValidationError, config_file: Path | None) -> str:
    """What is wrong with the settings and where a user changes it."""
    problems = validation_problems(exc, shown=_not_secret)
    where = f"{config_file}, " if config_file is not None else ""
    return (
        f"invalid settings: {'; '.join(problems)}. Fix {'it' if len(problems) == 1 else 'them'} in {where}the "
        "CODEPAGER_<SECTION>__<KEY> environment variables or the command's flags (`codepager config` prints what "
        "is in effect)."
    )


def _not_secret(loc: tuple[str | int, ...]) -> bool:
    """Whether the value refused at `loc` holds no secret: it is not a secret setting, a part
    of one, or a section (or the whole) holding one (`sessions = ["<key>"]` is refused whole)."""
    holds = any(tuple(loc[: len(secret)]) == secret[: len(loc)] for secret in SECRET_SETTINGS)
    return not holds and loc[-1:] != ("backend",)
