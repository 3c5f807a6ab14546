"""What a path says before its content is read: the kind of every file in the benchmark
corpora, which queries lift which penalty (docs by kind of document, not by topic), and the
satellite packages beside a root package, platform ports and kept first versions."""

from __future__ import annotations

import pytest

from search_engine.files.languages import FileKind, file_kind, language_for
from search_engine.ranking.priors import (
    PLATFORM_FACTOR,
    SATELLITE_FACTOR,
    SHIM_FACTOR,
    PathPriors,
    TreeFacts,
    implemented_headers,
    kept_first_versions,
    satellite_packages,
    source_folders,
)
from search_engine.ranking.rules import RankingRules

KINDS = {
    "src/main/java/org/apache/commons/lang3/StringUtils.java": FileKind.CODE,
    "tokio/src/sync/mutex.rs": FileKind.CODE,
    "lib/sinatra/base.rb": FileKind.CODE,
    "sinatra.gemspec": FileKind.CODE,
    "Rakefile": FileKind.CODE,
    "lib/phoenix/router.ex": FileKind.CODE,
    "include/fmt/format.h": FileKind.CODE,
    "packages/server/src/http.ts": FileKind.CODE,
    "README.md": FileKind.DOCS,
    "www/docs/server/routers.mdx": FileKind.DOCS,
    "docs/src/loop.rst": FileKind.DOCS,
    "README.rdoc": FileKind.DOCS,
    "ChangeLog": FileKind.DOCS,
    "LICENSE-MIT": FileKind.DOCS,
    "serde/Cargo.toml": FileKind.CONFIG,
    "package.json": FileKind.CONFIG,
    ".github/workflows/ci.yml": FileKind.CONFIG,
    "CMakeLists.txt": FileKind.CONFIG,
    "m4/libuv-check-flags.m4": FileKind.DATA,
    "www/static/img/logo.svg": FileKind.DATA,
    "docs/logo.png": FileKind.DATA,
    "Cargo.lock": FileKind.GENERATED,
    "pnpm-lock.yaml": FileKind.GENERATED,
    "test_suite/tests/ui/remote/bad_getter.stderr": FileKind.GENERATED,
    "client/utils.gen.ts": FileKind.GENERATED,
    "dist/app.min.js": FileKind.GENERATED,
    "vendor/rack/lib/rack.rb": FileKind.VENDORED,
    "src/third_party/zlib/inflate.c": FileKind.VENDORED,
    "installer/templates/phx_single/lib/app_name_web.ex.eex": FileKind.TEMPLATE,
    "lib/sinatra/views/index.erb": FileKind.TEMPLATE,
}


@pytest.mark.parametrize("path", sorted(KINDS))
def test_every_kind_of_file_in_the_corpora_is_recognised(path: str) -> None:
    assert file_kind(path) is KINDS[path]
    assert file_kind(path, language_for(path)) is KINDS[path]


def _factor(query: str, path: str) -> float:
    return PathPriors.for_query(query).factor(path, language_for(path))


@pytest.mark.parametrize(
    "query",
    [
        "markdown rendering",
        "documentation generator",
        "how are docs built from doc comments",
        "parse the config file",
    ],
)
def test_topic_words_do_not_lift_the_prose_penalty(query: str) -> None:
    assert _factor(query, "docs/guide.md") < _factor(query, "src/render.rs")


@pytest.mark.parametrize("query", ["the README", "changelog for 2.0", "getting started guide", "routing tutorial"])
def test_asking_for_a_kind_of_document_lifts_it(query: str) -> None:
    assert _factor(query, "README.md") == _factor(query, "src/render.rs") == 1.0


def test_non_code_kinds_rank_below_code_and_generated_lowest() -> None:
    code = _factor("Router", "lib/router.ex")
    assert code == 1.0
    config, data = _factor("Router", "serde/Cargo.toml"), _factor("Router", "m4/flags.m4")
    generated = _factor("Router", "Cargo.lock")
    assert generated < data <= config < code
    assert _factor("Router", "installer/templates/router.ex.eex") < code
    assert _factor("router template", "installer/templates/router.ex.eex") == code


def test_benchmarks_scripts_and_code_samples_in_docs_are_scaled_down_unless_asked_for() -> None:
    for path in ("benches/spawn.rs", "benchmarks/bench_parse.py", "scripts/release.sh", "docs/code/tcp/main.c"):
        assert _factor("spawn a task", path) < 1.0, path
    assert _factor("spawn benchmark", "benches/spawn.rs") == 1.0


def test_build_scripts_and_manifests_in_code_languages_are_tooling() -> None:
    """`Rakefile` named every part of sinatra and ranked first for "application startup";
    build files implement nothing the query asks about."""
    for path in (
        "Rakefile",
        "sinatra.gemspec",
        "mix.exs",
        "build.gradle.kts",
        "setup.py",
        "vite.config.ts",
        "build.rs",
    ):
        assert _factor("application startup and command line entrypoint", path) < 1.0, path
    for path in ("lib/sinatra/main.rb", "src/config.ts", "lib/mix/tasks/phx.new.ex", "src/setup/mod.rs"):
        assert _factor("application startup and command line entrypoint", path) == 1.0, path
    assert _factor("rake release task", "Rakefile") == 1.0


def test_a_header_beside_its_source_file_ranks_below_it() -> None:
    """libuv's `src/idna.h` declares what `src/idna.c` implements; a header-only library's
    header, or a public header with no source of its name, keeps full weight."""
    paths = [
        "src/idna.h",
        "src/idna.c",
        "include/uv.h",
        "include/fmt/format.h",
        "src/format.cc",
        "lib/Widget.hpp",
        "lib/Widget.cpp",
    ]
    languages = [language_for(p) for p in paths]
    factors = dict(zip(paths, PathPriors.for_query("IDNA domain name encoding").factors(paths, languages), strict=True))
    assert factors["src/idna.h"] < factors["src/idna.c"] == 1.0
    assert factors["lib/Widget.hpp"] < factors["lib/Widget.cpp"] == 1.0
    assert factors["include/uv.h"] == factors["include/fmt/format.h"] == 1.0
    asked = PathPriors.for_query("the IDNA header declarations").factors(paths, languages)
    assert dict(zip(paths, asked, strict=True))["src/idna.h"] == 1.0


SINATRA_LIKE = [
    "sinatra.gemspec",
    "lib/sinatra/base.rb",
    "rack-protection/rack-protection.gemspec",
    "rack-protection/lib/rack/protection/http_origin.rb",
    "sinatra-contrib/sinatra-contrib.gemspec",
    "sinatra-contrib/lib/sinatra/namespace.rb",
    "examples/chat.rb",
]


def test_sibling_packages_of_a_root_package_are_satellites() -> None:
    """A folder with its own manifest and lib/ beside a root package (sinatra's rack-protection,
    phoenix's installer) is a satellite; a workspace whose root is no package has none."""
    assert satellite_packages(SINATRA_LIKE) == {
        "rack-protection": frozenset({"rack", "protection"}),
        "sinatra-contrib": frozenset({"sinatra", "contrib"}),
    }
    phoenix = ["mix.exs", "lib/phoenix/router.ex", "installer/mix.exs", "installer/lib/phx_new.ex", "assets/js/app.js"]
    assert satellite_packages(phoenix) == {"installer": frozenset({"installer"})}
    workspace = ["Cargo.toml", "tokio/Cargo.toml", "tokio/src/lib.rs", "tokio-util/Cargo.toml", "tokio-util/src/lib.rs"]
    assert satellite_packages(workspace) == {}
    no_manifest_beside = ["package.json", "src/index.ts", "website/src/page.ts"]  # no manifest in website/
    assert satellite_packages(no_manifest_beside) == {}


def test_satellite_packages_rank_below_the_root_package_unless_the_query_names_one() -> None:
    languages = [language_for(p) for p in SINATRA_LIKE]
    satellites = satellite_packages(SINATRA_LIKE)

    def factors(query: str) -> dict[str, float]:
        priors = PathPriors.for_query(query, satellites)
        return dict(zip(SINATRA_LIKE, priors.factors(SINATRA_LIKE, languages), strict=True))

    plain = factors("how the Rack middleware stack is assembled")
    assert plain["lib/sinatra/base.rb"] == 1.0
    assert plain["rack-protection/lib/rack/protection/http_origin.rb"] == SATELLITE_FACTOR
    assert plain["sinatra-contrib/lib/sinatra/namespace.rb"] == SATELLITE_FACTOR
    named = factors("rack protection against forged origins")
    assert named["rack-protection/lib/rack/protection/http_origin.rb"] == 1.0
    assert named["sinatra-contrib/lib/sinatra/namespace.rb"] == SATELLITE_FACTOR


@pytest.mark.parametrize(
    "path", ["src/win/tcp.c", "include/uv/win.h", "src/os390.c", "os/file_windows.go", "tokio/src/signal/windows.rs"]
)
def test_platform_ports_rank_a_little_below_the_main_implementation_unless_a_platform_is_named(path: str) -> None:
    assert _factor("TCP stream connect and accept implementation", path) == PLATFORM_FACTOR
    assert _factor("how TCP connect works on Windows", path) == 1.0
    assert _factor("platform-specific TCP connect", path) == 1.0


@pytest.mark.parametrize("path", ["src/unix/tcp.c", "src/window.ts", "lib/twin.rb", "os/file_unix.go", "src/linux.c"])
def test_the_main_implementation_and_look_alike_names_are_no_platform_port(path: str) -> None:
    assert _factor("TCP stream connect and accept implementation", path) == 1.0


def test_a_v1_folder_twinning_the_files_above_it_is_a_kept_first_version() -> None:
    """pydantic keeps its first API in `pydantic/v1/` beside the current modules: scaled like a
    compat shim unless the query says v1; a `v2/` (Go's new major version) or a v1 folder of
    its own files (`api/v1/` routes) is current code."""
    paths = [
        "pydantic/fields.py",
        "pydantic/main.py",
        "pydantic/types.py",
        "pydantic/v1/fields.py",
        "pydantic/v1/main.py",
        "pydantic/v1/types.py",
        "pydantic/v1/only_here.py",
        "mod/client.go",
        "mod/server.go",
        "mod/codec.go",
        "mod/v2/client.go",
        "mod/v2/server.go",
        "mod/v2/codec.go",
        "api/v1/users.py",
        "api/v1/orders.py",
        "api/v1/items.py",
    ]
    assert kept_first_versions(paths) == {"pydantic/v1/"}
    languages = [language_for(p) for p in paths]
    plain = dict(
        zip(paths, PathPriors.for_query("how are model fields declared").factors(paths, languages), strict=True)
    )
    assert plain["pydantic/v1/fields.py"] == plain["pydantic/v1/only_here.py"] == SHIM_FACTOR
    assert plain["pydantic/fields.py"] == plain["mod/v2/client.go"] == plain["api/v1/users.py"] == 1.0
    asked = PathPriors.for_query("how v1 model fields are declared").factors(paths, languages)
    assert dict(zip(paths, asked, strict=True))["pydantic/v1/fields.py"] == 1.0


def test_the_tree_facts_an_index_finds_once_are_the_ones_its_priors_read() -> None:
    """A corpus finds its tree facts (headers with a source beside them, kept first versions,
    satellite packages) once and hands them to every variant of the priors: they are what the
    three finders say, and factors read them instead of finding them again."""
    paths = [
        *SINATRA_LIKE,
        "lib/Widget.hpp",
        "lib/Widget.cpp",
        *(f"pydantic/{name}.py" for name in ("fields", "main", "types")),
        *(f"pydantic/v1/{name}.py" for name in ("fields", "main", "types")),
    ]
    languages = [language_for(p) for p in paths]
    tree = TreeFacts.of(paths)
    assert tree.implemented == set(implemented_headers(paths)) == {"lib/Widget.hpp"}
    assert set(tree.kept_versions) == kept_first_versions(paths) == {"pydantic/v1/"}
    assert tree.satellites == satellite_packages(paths) != {}
    for query in ("how the Rack middleware stack is assembled", "rack protection", "v1 fields", "the header"):
        priors = PathPriors.for_query(query, tree.satellites)
        assert priors.factors(paths, languages, tree) == priors.factors(paths, languages), query
    unaware = dict(zip(paths, PathPriors().factors(paths, languages, TreeFacts.of([])), strict=True))
    aware = dict(zip(paths, PathPriors().factors(paths, languages, tree), strict=True))
    for path in ("lib/Widget.hpp", "pydantic/v1/fields.py", "rack-protection/lib/rack/protection/http_origin.rb"):
        assert aware[path] < unaware[path] == 1.0, path


def test_a_docs_named_folder_of_source_files_is_code_not_documentation() -> None:
    """Issue 39: what a folder holds, not its name, decides whether it is documentation. cobra's
    `doc/` is the package that writes man pages and Markdown (Go files, one README), tokio's
    `src/doc/` a module; libuv's `docs/` is pages with sample programs beside them, and a site
    of HTML pages with one script is pages too."""
    paths = [
        "doc/man_docs.go",
        "doc/md_docs.go",
        "doc/yaml_docs.go",
        "doc/README.md",
        "tokio/src/doc/mod.rs",
        "docs/src/tcp.rst",
        "docs/src/udp.rst",
        "docs/code/tcp-echo-server/main.c",
        "www/index.html",
        "www/guide.html",
        "www/app.js",
        "command.go",
    ]
    assert source_folders(paths) == {"doc/", "tokio/src/doc/"}
    languages = [language_for(p) for p in paths]
    tree = TreeFacts.of(paths)
    factors = dict(zip(paths, PathPriors().factors(paths, languages, tree), strict=True))
    assert factors["doc/md_docs.go"] == factors["tokio/src/doc/mod.rs"] == factors["command.go"] == 1.0
    assert factors["docs/code/tcp-echo-server/main.c"] < 1.0 and factors["www/app.js"] < 1.0
    assert factors["doc/README.md"] < 1.0  # its prose is still prose
    off = PathPriors.for_query("x", rules=RankingRules().without("code_under_docs"))
    assert dict(zip(paths, off.factors(paths, languages, tree), strict=True))["docs/code/tcp-echo-server/main.c"] == 1.0


def test_a_file_named_as_a_re_export_that_defines_code_is_code() -> None:
    """Issue 39: what a file holds, not its name, decides whether it only re-exports. vitest's
    `packages/spy/src/index.ts` is the spy library itself (800 lines of functions); a
    `composables/index.ts` of `export * from` lines, or an `__init__.py` of imports, is a
    re-export and ranks below the modules it names."""
    paths = ["packages/spy/src/index.ts", "client/composables/index.ts", "pkg/__init__.py", "pkg/core.py"]
    defines = {"packages/spy/src/index.ts": True, "client/composables/index.ts": False, "pkg/__init__.py": False}
    tree = TreeFacts.of(paths, defines=defines.__getitem__)  # asked of re-export names only: no KeyError
    assert tree.defining == {"packages/spy/src/index.ts"}
    languages = [language_for(p) for p in paths]
    factors = dict(zip(paths, PathPriors().factors(paths, languages, tree), strict=True))
    assert factors["packages/spy/src/index.ts"] == factors["pkg/core.py"] == 1.0
    assert factors["client/composables/index.ts"] < 1.0 and factors["pkg/__init__.py"] < 1.0


def test_live_files_are_judged_again_as_a_fresh_index_would() -> None:
    """Before the next fold, a changed file's facts are read from its code as it is now
    (`TreeFacts.beside`): an `__init__.py` that now defines a function is code, a header that
    now documents more than its source keeps full weight, and a source that gained the
    documentation sends its header back down; files nothing changed keep their facts."""
    base = ["pkg/__init__.py", "pkg/core.py", "db/table.h", "db/table.cc", "src/idna.h", "src/idna.c"]
    counts = {"db/table.h": 0, "db/table.cc": 0, "src/idna.h": 5, "src/idna.c": 1}
    tree = TreeFacts.of(base, counts.__getitem__, lambda _: False)
    assert tree.defining == set() and tree.documented == {"src/idna.h"}
    now = {**counts, "db/table.h": 4, "src/idna.c": 9}
    live = tree.beside(["pkg/__init__.py", "db/table.h", "src/idna.c"], set(base).__contains__, now.__getitem__, bool)
    assert live.defining == {"pkg/__init__.py"}
    assert live.documented == {"db/table.h"} and live.implemented == tree.implemented
    assert live == TreeFacts.of(base, now.__getitem__, lambda p: p == "pkg/__init__.py")  # as a fresh index
    assert tree.beside(["pkg/core.py"], set(base).__contains__, now.__getitem__, bool) is tree
