"""The MCP SDK and fastmcp internals codepager relies on are all still where `server.sdk_shim`
reaches them: a release that moves or renames one fails here, naming it, instead of deep inside
a transport or the proxy at run time."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from importlib.metadata import version
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from server import sdk_shim

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; pytest itself depends on tomli there
    import tomli as tomllib


def _owner(path: str) -> object:
    """The module, class or (for `pkg.Class()`) fresh instance named by `path`."""
    instance = path.endswith("()")
    dotted = path.removesuffix("()")
    module_name, _, attribute = dotted.rpartition(".")
    try:
        owner: object = importlib.import_module(dotted)
    except ModuleNotFoundError:
        owner = getattr(importlib.import_module(module_name), attribute)
    if not instance:
        return owner
    if owner.__name__ == "FastMCP":  # type: ignore[attr-defined]
        return owner("shim-check")  # type: ignore[operator]
    if owner.__name__ == "StreamableHttpTransport":  # type: ignore[attr-defined]
        return owner("http://127.0.0.1:9/mcp")  # type: ignore[operator]
    return owner("codepager", ["--version"])  # type: ignore[operator]


def test_every_private_name_the_shim_uses_still_exists() -> None:
    missing = [f"{owner}.{name}" for owner, name in sdk_shim.PRIVATE_ATTRIBUTES if not hasattr(_owner(owner), name)]
    assert missing == []


def test_the_shim_lists_every_private_name_it_reads() -> None:
    """Each `._name` the shim's code reads is in PRIVATE_ATTRIBUTES, so the first test covers it."""
    listed = {name for _, name in sdk_shim.PRIVATE_ATTRIBUTES}
    source = inspect.getsource(sdk_shim).split("PRIVATE_ATTRIBUTES: tuple")[0]
    own_aliases = {"_claim", "_client_stdio", "_server_stdio", "_FastMCPProxyMetadata"}
    read = set(re.findall(r"(?:\.|import )(_[A-Za-z][A-Za-z0-9_]*)", source)) - own_aliases
    assert read <= listed, read - listed


def test_the_callable_internals_keep_the_signatures_the_shim_calls_them_with() -> None:
    expected = {
        "create_process": ["command", "args", "env", "errlog", "cwd"],
        "claim_fd": ["fd", "stream", "mode", "open_diversion"],
        "read_upstream": ["self", "client", "context"],
    }
    from fastmcp.server.providers.proxy import ProxyMetadataMiddleware
    from mcp.server import stdio as server_stdio

    actual = {
        "create_process": list(inspect.signature(sdk_shim.create_process).parameters),
        "claim_fd": list(inspect.signature(server_stdio._claim_fd).parameters),
        "read_upstream": list(inspect.signature(ProxyMetadataMiddleware._read_upstream).parameters),
    }
    assert actual == expected


def test_the_installed_sdk_is_in_the_range_pinned_in_pyproject() -> None:
    dependencies = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {spec.split(">")[0].split("=")[0].split("<")[0].strip(): spec for spec in dependencies}
    for package in ("mcp", "fastmcp"):
        specifier = SpecifierSet(pins[package].removeprefix(package).split(";")[0].split("#")[0].strip())
        assert Version(version(package)) in specifier, (package, version(package), specifier)
