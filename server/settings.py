"""Configuration: defaults < TOML file (`--config`) < environment (`CODEPAGER_<SECTION>__<KEY>`)
< command-line flags.

One `Settings` object is built at start-up and handed down; nothing reads the environment
later. Each section is its own model so `codepager config` can print it and docs can list it.
"""

from __future__ import annotations

import contextvars
import functools
import os
import stat
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

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
    DEFAULT_FRESH_WAIT_S,
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
    DEFAULT_MAX_FRAMES_PER_MESSAGE,
    DEFAULT_MAX_PARTIAL_MESSAGES,
    FRAME_OVERHEAD,
    MIN_CHUNK_LIMIT,
)
from server.transports.framing import DEFAULT_TIMEOUT_S as DEFAULT_CHUNK_TIMEOUT_S
from sessions import (
    CACHE_DIR_ENTRIES,
    DEFAULT_MAX_AGE_S,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_NAMESPACE,
    DEFAULT_PAGE_SIZE,
    DEFAULT_SWEEP_INTERVAL_S,
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
    max_line_width: int = Field(
        DEFAULT_MAX_LINE_WIDTH, ge=40, description="Cut long lines to this many characters around the match."
    )
    max_file_size: int = Field(
        DEFAULT_MAX_FILE_SIZE, ge=1, le=MAX_FILE_SIZE_LIMIT, description="Skip files larger than this (bytes)."
    )
    rg_max_concurrent: int = Field(
        DEFAULT_RG_MAX_CONCURRENT,
        ge=1,
        description=(
            "ripgrep processes running at once (regex searches and file listings for the index), each held to "
            "192 MiB plus 4x max_file_size of memory; a search past it waits for one to finish, and the wait counts "
            "against its timeout_s."
        ),
    )
    default_page_size: int = Field(
        DEFAULT_PAGE_SIZE, ge=1, description="Matches per page when a search call gives no page_size."
    )
    max_page_size: int = Field(MAX_PAGE_SIZE, ge=1, description="Largest page_size a search call may ask for.")
    default_snippet_length: int = Field(
        500, ge=1, description="Characters of each regex match's content shown when a call gives no snippet_length."
    )
    default_ranked_snippet_length: int = Field(
        300,
        ge=1,
        description=(
            "The same for semantic and hybrid chunks (6-8 lines: enough to recognise the code, and more files fit a "
            "token budget)."
        ),
    )
    max_snippet_length: int = Field(2000, ge=1, description="Largest snippet_length a search call may ask for.")


class IndexSettings(_Section):
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description=(
            "Where indexes and the cursor key live: a directory of yours that others cannot write in (refused "
            "otherwise), outside repositories you did not write (what is there is read as codepager's own)."
        ),
    )
    profile: Literal["static", "minilm"] = Field(
        DEFAULT_EMBEDDING_PROFILE,
        description="Embedding profile (see docs/benchmarks.md for the measurement behind the default).",
    )
    model: str | None = Field(
        None, description="Any sentence-transformers model name or local path; overrides the profile."
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
    fresh_wait_s: Seconds = Field(
        DEFAULT_FRESH_WAIT_S,
        ge=0,
        description=(
            "How long a semantic or hybrid call waits for files changed before it to be folded into the index, when "
            "it cannot take them live (more than 16 files, a directory moved in, an ignore file, polling); past it the "
            "answer leaves them out and says so (freshness 'updating')."
        ),
    )


class SessionSettings(_Section):
    backend: str = Field(
        "memory",
        description="'memory', or a redis:// (rediss://, unix://) URL shared by replicas; Redis needs the redis "
        'extra: `pip install "codepager[redis]"`.',
    )
    namespace: str = Field(
        DEFAULT_NAMESPACE,
        description="Redis key prefix codepager:<namespace>:; replicas sharing sessions use the same one.",
    )
    ttl_s: Seconds = Field(DEFAULT_TTL_S, gt=0, description="Sliding time-to-live of a cached result list.")
    max_sessions: int = Field(
        DEFAULT_MAX_SESSIONS, ge=1, description="Cached result lists kept; the least recently used is evicted first."
    )
    max_memory_mb: float = Field(
        DEFAULT_MAX_BYTES / 2**20,
        gt=0,
        description="Memory budget of the cached result lists (estimated); least recently used evicted first.",
    )
    sweep_interval_s: Seconds = Field(
        DEFAULT_SWEEP_INTERVAL_S, gt=0, description="How often the memory backend frees expired sessions."
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
    max_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description=(
            "Page ceiling in bytes of JSON; above it (or max_tokens) a page goes to a file. Also the most one read "
            "of a codepager://results resource returns."
        ),
    )
    retention_hours: Hours = Field(24.0, gt=0, description="Offloaded files older than this are deleted.")
    sweep_interval_s: Seconds = Field(600.0, gt=0, description="How often expired offload files are swept.")
    jq_timeout_s: Seconds = Field(5.0, gt=0, description="Kill a jq_filter after this many seconds.")
    jq_memory_mb: int = Field(
        512,
        ge=16,
        description=(
            "Memory (address space) a jq_filter may use on top of its worker process's own; "
            "the filter is stopped past it."
        ),
    )
    # Each running filter is a worker process that may use jq_memory_mb on top of its own, so
    # the cap times that (2 x 512 MiB = 1 GiB by default) bounds them all; 2 also matches a
    # 2-core machine, where a third CPU-bound filter would only slow the others down. Filters
    # are short (most take ~0.1 s, mostly the worker's start), so a few waiting cost little.
    jq_max_concurrent: int = Field(
        2,
        ge=1,
        description=(
            "jq_filter workers running at once, so at most this many times jq_memory_mb is in use; a filter past it "
            "waits for one to finish, and the wait counts against its jq_timeout_s."
        ),
    )
    duckdb_memory_limit: DuckdbSize = Field("512MB", description="DuckDB memory_limit for analyze-with-duckdb.")
    duckdb_threads: int = Field(1, ge=1, description="DuckDB threads for analyze-with-duckdb.")
    duckdb_timeout_s: Seconds = Field(30.0, gt=0, description="Interrupt an analyze-with-duckdb query after this long.")
    # Each query has its own connection and duckdb_memory_limit (a query producing 100 KB rows
    # peaks ~600 MB at 512MB), so the cap times that bounds them all: 2 x 512 MB = 1 GB by
    # default (2 x 1GB on the proxy, whose limit is its own). 2 is also one query per core at
    # duckdb_threads = 1 on a 2-core machine: more at once would only share the same cores.
    duckdb_max_concurrent: int = Field(
        2,
        ge=1,
        description=(
            "analyze-with-duckdb queries running at once (here and on the proxy), so at most this many times the "
            "DuckDB memory limit is in use; a query past it waits for one to finish, and the wait counts against its "
            "duckdb_timeout_s."
        ),
    )
    duckdb_max_rows: int = Field(
        100_000,
        ge=1,
        description=(
            "Rows kept from one SQL result, and from the whole result list an offloaded search page names as its "
            "dataset; the rest is reported as left out."
        ),
    )
    duckdb_max_result_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description=(
            "JSON bytes of one SQL result written to its offload file, and of the whole result list an offloaded "
            "search page names as its dataset; the rows past it are left out and the answer says so."
        ),
    )
    duckdb_fetch: Literal["auto", "spool"] = Field(
        "auto",
        description=(
            "How SQL result rows reach the server. auto: streamed as they are read (DuckDB 2), or spooled on DuckDB "
            "1.x (the newest Python 3.10 gets), whose client would hold a whole result in memory. spool: the result "
            "is first written into a table inside DuckDB, under duckdb_memory_limit (the rest spills to disk), then "
            "read back a batch at a time."
        ),
    )
    clients: dict[str, ClientBudget] = Field(
        default_factory=dict,
        description=(
            "Per-client page limits, keyed by a substring of the client's clientInfo.name; they override the built-in "
            "table (docs/tools.md, Client budgets)."
        ),
    )


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
    schema_sample_size: int = Field(100, ge=1, description="Records sampled to infer a saved dataset's field types.")
    duckdb_memory_limit: DuckdbSize = Field(
        "1GB", description="DuckDB memory_limit for analyze-with-duckdb on the proxy."
    )
    duckdb_threads: int = Field(2, ge=1, description="DuckDB threads for analyze-with-duckdb on the proxy.")
    call_timeout_s: Seconds | None = Field(
        300.0, gt=0, description="A backend call running longer than this fails with a timeout error."
    )
    max_backend_message_bytes: int = Field(
        DEFAULT_MAX_BUFFERED_BYTES,
        ge=1024,
        description=(
            "Largest message read from a stdio or streamable-HTTP backend (as JSON or as one server-sent event); a "
            "larger reply fails its call with an error saying so and is never held whole."
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
            "read. Unset: the one kept in auth_token_file, generated on first start."
        ),
    )
    auth_token_file: Path = Field(
        default_factory=lambda: Path(platformdirs.user_state_dir("codepager", appauthor=False)) / "http-token",
        description=(
            "HTTP without auth_token: where the generated token is kept (0600, in a directory others cannot write in) "
            "and read again at each start; delete the file and restart to rotate the token."
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
    body_timeout_s: Seconds = Field(
        30.0,
        gt=0,
        description=(
            "HTTP: a request body that sends nothing for this many seconds, or request headers not all in within this "
            "many seconds of their start, are answered 408 and the connection closed."
        ),
    )
    body_max_buffered_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description=(
            "HTTP: bytes all request bodies still arriving may hold together; a request whose body would pass it "
            "is answered 503 (JSON-RPC -32600) and its connection closed."
        ),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "WARNING", description="Log level of codepager, fastmcp and (on HTTP) uvicorn; logs go to stderr only."
    )
    chunk_limit: int = Field(
        DEFAULT_CHUNK_LIMIT,
        ge=MIN_CHUNK_LIMIT,
        description="chunked-stdio: messages above this many bytes are split into frames of at most this much data.",
    )
    max_request_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description=(
            "Largest request accepted on every transport; a larger one gets JSON-RPC error -32600 (HTTP 413) and is "
            "never held whole. HTTP also keeps the MCP SDK's own 4 MiB cap."
        ),
    )
    chunk_timeout_s: Seconds = Field(
        DEFAULT_CHUNK_TIMEOUT_S,
        gt=0,
        description="chunked-stdio: an incomplete incoming message with no new frame for this long is dropped.",
    )
    chunk_max_buffered_bytes: int = Field(
        DEFAULT_MAX_BUFFERED_BYTES,
        ge=1,
        description=(
            "chunked-stdio: bytes all incomplete incoming messages may hold together, each frame counting its data "
            f"plus {FRAME_OVERHEAD}; a frame past it drops its message (answered -32600)."
        ),
    )
    chunk_max_partial_messages: int = Field(
        DEFAULT_MAX_PARTIAL_MESSAGES,
        ge=1,
        description=(
            "chunked-stdio: incoming messages that may be incomplete at once; the first frame of one more is refused "
            "with -32600."
        ),
    )
    chunk_max_frames_per_message: int = Field(
        DEFAULT_MAX_FRAMES_PER_MESSAGE,
        ge=1,
        description=(
            "chunked-stdio: most frames one incoming message may claim (totalChunks); a message claiming more is "
            "refused with -32600 at its first frame."
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

    @model_validator(mode="after")
    def _one_request_fits_the_body_budget(self) -> ServerSettings:
        if self.body_max_buffered_bytes < self.max_request_bytes:
            raise ValueError(
                f"server.body_max_buffered_bytes ({self.body_max_buffered_bytes}) is below server.max_request_bytes "
                f"({self.max_request_bytes}): a request of the largest allowed size would always be refused; raise "
                "the first or lower the second"
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


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CODEPAGER_", env_nested_delimiter="__", extra="forbid")

    server: ServerSettings = Field(default_factory=ServerSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    offload: OffloadSettings = Field(default_factory=OffloadSettings)
    proxy: ProxySettings = Field(default_factory=ProxySettings)

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

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            timeout_s=self.search.timeout_s,
            max_line_width=self.search.max_line_width,
            max_file_size=self.search.max_file_size,
            rg_max_concurrent=self.search.rg_max_concurrent,
            cache_dir=self.index.cache_dir,
            cache_entries=CACHE_DIR_ENTRIES,
            embedding_profile=self.index.profile,
            embedding_model=self.index.model,
            watch=self.index.watch,
            fresh_wait_s=self.index.fresh_wait_s,
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
        merged = base.model_dump()
        for section, values in overrides.items():
            if isinstance(values, dict):
                merged.setdefault(section, {}).update({k: v for k, v in values.items() if v is not None})
            elif values is not None:
                merged[section] = values
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ValueError(invalid_settings(exc, config_file)) from None
    except TOMLDecodeError as exc:  # only the file is TOML: a variable's bad JSON is a SettingsError
        raise ValueError(f"{config_file} is not valid TOML: {exc}") from None
    except RecursionError:  # the TOML parser nests recursively: 100,000 `[` overflow it
        raise ValueError(f"{config_file} is not valid TOML: its arrays or tables nest too deeply") from None
    finally:
        _toml_path.reset(token)


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
    """One line a problem of a settings file, an mcpServers file or a tool call's arguments
    (`search.max_results: ... (got -5)`), the value echoed only where `shown(location)`
    allows: pydantic's own report names the model rather than the file, ends each error with
    a documentation link, and prints every refused value, secrets (a token, a server's `env`)
    included, into terminals and bug reports. `names` renames a location's first part (a
    model's field to the tool argument it came from)."""
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
