"""File discovery: the one rule set both regex search and semantic indexing obey, checked on
real trees with the real rg, and checked against what regex search actually searches."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from infra import MAX_HELD, BeneathWalk, open_beneath, read_beneath
from search_engine.config import EngineConfig
from search_engine.errors import InvalidQueryError, PathNotFoundError, PathOutsideRootError
from search_engine.files import folder_listing
from search_engine.files.discovery import BINARY_SNIFF_BYTES, DiscoveredFile, discover
from search_engine.files.ignore_files import MAX_IGNORE_FILE_BYTES
from search_engine.files.paths import SearchLocation
from search_engine.models import SearchRequest
from search_engine.regex.search import regex_search
from sessions import CACHE_DIR_ENTRIES, CURSOR_KEY_FILE, load_or_create_key
from tests.code_tree import git_checkout

MARK = "MARKER"


def content(found: DiscoveredFile) -> bytes | None:
    """A discovered file's bytes, read as indexing reads them: by `rel`, beneath `root`."""
    return read_beneath(found.root, found.rel, 1 << 20)


def put(root: Path, rel: str, text: str = f"{MARK}\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Every kind of file discovery must keep or drop, in a git checkout (`.gitignore` files
    apply only in one, as for rg and git)."""
    root = git_checkout(tmp_path / "tree")
    for rel in (
        "main.py",
        "src/app.py",
        "src/deep/util.go",
        "docs/guide.md",
        "keep.log.txt",
    ):
        put(root, rel)
    put(root, ".gitignore", "*.log\n/generated/\n")
    put(root, "app.log")
    put(root, "generated/out.py")
    put(root, "src/.gitignore", "secret.py\n!keep_secret.py\n")
    put(root, "src/secret.py")
    put(root, "src/keep_secret.py")
    put(root, ".ignore", "scratch/\n")
    put(root, "scratch/tmp.py")
    put(root, ".hidden.py")
    put(root, ".config/settings.toml")
    put(root, "node_modules/lib/index.js")
    put(root, "build/out.js")
    put(root, "pkg/__pycache__/mod.py")
    put(root, "web/app.min.js")
    put(root, "package-lock.json")
    put(root, "Cargo.lock")
    (root / "binary.dat").write_bytes(b"\0\1\2" + MARK.encode() + b"\n")
    (root / "big.txt").write_text(MARK + "\n" + "x" * (EngineConfig().max_file_size + 10))
    return root


EXPECTED = ["docs/guide.md", "keep.log.txt", "main.py", "src/app.py", "src/deep/util.go", "src/keep_secret.py"]


def test_default_rules(tree: Path) -> None:
    assert [f.path for f in discover(SearchLocation(tree, None)).files] == EXPECTED


def test_what_the_rules_left_out_is_said_with_how_to_search_it(tree: Path) -> None:
    """Files an ignore rule or the minified excludes left out were left out silently: the
    answer now says how many, by which ignore file and rule, and how to search them."""
    notices = discover(SearchLocation(tree, None)).notices
    result = regex_search(SearchRequest(query=MARK, root=str(tree)), EngineConfig())
    assert result.notices == notices and result.warnings == []
    rules, minified = notices
    assert rules.startswith("4 files or folders were left out by ignore rules: ")
    assert "2 by .gitignore (*.log, /generated/)" in rules  # app.log, generated/ (keep.log.txt is not *.log)
    assert "1 by .ignore (scratch/)" in rules and "1 by src/.gitignore (secret.py)" in rules
    assert 'include_patterns that name them (["*"]' in rules and "as path" in rules
    assert (
        minified
        == "1 minified file was left out (*.min.js, *.min.css, in the default excludes); to search one, pass it as path"
    )
    readmitted = regex_search(SearchRequest(query=MARK, root=str(tree), include=("*",)), EngineConfig())
    assert {"app.log", "generated/out.py", "scratch/tmp.py", "src/secret.py"} <= {m.path for m in readmitted.matches}
    named = regex_search(SearchRequest(query=MARK, root=str(tree), path="web/app.min.js"), EngineConfig())
    assert [m.path for m in named.matches] == ["web/app.min.js"]


def test_regex_search_sees_exactly_the_discovered_files(tree: Path) -> None:
    result = regex_search(SearchRequest(query=MARK, root=str(tree)), EngineConfig())
    assert sorted({m.path for m in result.matches}) == [f.path for f in discover(SearchLocation(tree, None)).files]


def test_size_and_mtime_for_incremental_indexing(tree: Path) -> None:
    found = {f.path: f for f in discover(SearchLocation(tree, None)).files}
    st = (tree / "main.py").stat()
    main = found["main.py"]
    assert (main.size, main.mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert main.root / main.rel == tree / "main.py"


def test_include_and_exclude_globs(tree: Path) -> None:
    loc = SearchLocation(tree, None)
    assert [f.path for f in discover(loc, include=["*.md", "src/deep/*"]).files] == [
        "docs/guide.md",
        "src/deep/util.go",
    ]
    assert [f.path for f in discover(loc, exclude=["*.md", "deep"]).files] == [
        "keep.log.txt",
        "main.py",
        "src/app.py",
        "src/keep_secret.py",
    ]


def test_include_glob_readmits_ignored_files_like_rg(tree: Path) -> None:
    """rg's --glob overrides ignore files and hiding (how one searches an ignored file on
    purpose); directories pruned by them stay pruned, and excludes still win."""
    loc = SearchLocation(tree, None)
    assert [f.path for f in discover(loc, include=["*.py"]).files] == [
        ".hidden.py",
        "main.py",
        "src/app.py",
        "src/keep_secret.py",
        "src/secret.py",
    ]
    assert [f.path for f in discover(loc, include=["*.py"], exclude=["src/**", ".*"]).files] == ["main.py"]


def test_sub_path_keeps_root_ignore_rules(tree: Path) -> None:
    assert [f.path for f in discover(SearchLocation(tree, "src")).files] == [
        "src/app.py",
        "src/deep/util.go",
        "src/keep_secret.py",
    ]


def test_configured_size_limit_and_excludes(tree: Path) -> None:
    small = EngineConfig(max_file_size=3)
    assert discover(SearchLocation(tree, None), config=small).files == []
    no_defaults = EngineConfig(default_excludes=(), max_file_size=10 * 1024 * 1024)
    paths = [f.path for f in discover(SearchLocation(tree, None), config=no_defaults).files]
    assert {"node_modules/lib/index.js", "build/out.js", "package-lock.json", "big.txt"} <= set(paths)


def test_binary_sniff_window(tmp_path: Path) -> None:
    late = b"text\n" * (BINARY_SNIFF_BYTES // 5 + 10) + b"\0"
    (tmp_path / "late_nul.txt").write_bytes(late)
    (tmp_path / "early_nul.txt").write_bytes(b"text\n" * 100 + b"\0" + b"text\n")
    (tmp_path / "utf16.txt").write_text("hello", encoding="utf-16")
    (tmp_path / "empty.txt").write_bytes(b"")
    assert [f.path for f in discover(SearchLocation(tmp_path, None)).files] == ["empty.txt", "late_nul.txt"]


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = put(tmp_path, "outside/secret.txt")
    root = tmp_path / "root"
    put(root, "real/a.txt")
    (root / "link_out.txt").symlink_to(outside)
    (root / "link_dir").symlink_to(root / "real")
    (root / "link_out_dir").symlink_to(outside.parent)
    assert [f.path for f in discover(SearchLocation(root, None)).files] == ["real/a.txt"]


def test_non_utf8_file_name(tmp_path: Path) -> None:
    raw = os.path.join(os.fsencode(tmp_path), b"caf\xe9.py")
    with open(raw, "wb") as f:
        f.write(b"MARKER\n")
    put(tmp_path, "ok.py")
    found = discover(SearchLocation(tmp_path, None)).files
    assert [f.path for f in found] == ["caf\\xe9.py", "ok.py"]
    assert content(found[0]) == b"MARKER\n"
    result = regex_search(SearchRequest(query=MARK, root=str(tmp_path)), EngineConfig())
    assert [m.path for m in result.matches] == ["caf\\xe9.py", "ok.py"]


def test_a_name_spelling_another_names_escape_is_listed_once(tmp_path: Path) -> None:
    """`caf\\xe9.py` (a real backslash) shows as the non-UTF-8 `caf<0xE9>.py` does: listed
    twice, the pair corrupted the index (see tests/test_index.py). The file named as shown
    is kept: it is the one a caller can name."""
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.py"), "wb") as f:
        f.write(b"RAW\n")
    put(tmp_path, "caf\\xe9.py", "LITERAL\n")
    (found,) = discover(SearchLocation(tmp_path, None)).files
    assert found.path == "caf\\xe9.py" and content(found) == b"LITERAL\n"


def test_two_names_that_are_not_utf8_never_show_alike(tmp_path: Path) -> None:
    """`a<E9>\\xe9.py` and `a\\xe9<E9>.py` both showed as `a\\xe9\\xe9.py` (each a real file, neither
    named as shown), so the pair corrupted the index again. A real backslash in such a name is
    now shown doubled: one spelling per name, each file listed and searched under its own."""
    for name, text in ((b"a\xe9\\xe9.py", b"FIRST needle\n"), (b"a\\xe9\xe9.py", b"SECOND needle\n")):
        with open(os.path.join(os.fsencode(tmp_path), name), "wb") as f:
            f.write(text)
    found = discover(SearchLocation(tmp_path, None)).files
    assert sorted((f.path, content(f)) for f in found) == [
        ("a\\\\xe9\\xe9.py", b"SECOND needle\n"),
        ("a\\xe9\\\\xe9.py", b"FIRST needle\n"),
    ]
    result = regex_search(SearchRequest(query="needle", root=str(tmp_path)), EngineConfig())
    assert sorted((m.path, m.content) for m in result.matches) == [
        ("a\\\\xe9\\xe9.py", "SECOND needle"),
        ("a\\xe9\\\\xe9.py", "FIRST needle"),
    ]


@pytest.mark.parametrize("context", [0, 1])
def test_regex_search_shows_a_name_spelling_another_names_escape_once(tmp_path: Path, context: int) -> None:
    """Regex search showed both files of the pair under one path, two answers for a path that
    opens only one of them. It keeps the one discovery keeps, and counts only it."""
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.py"), "wb") as f:
        f.write(b"x\nRAW needle\nx\n")
    put(tmp_path, "caf\\xe9.py", "x\nLITERAL needle\nx\n")
    put(tmp_path, "ok.py", "needle\n")
    request = SearchRequest(query="needle", root=str(tmp_path), context_lines=context)
    result = regex_search(request, EngineConfig())
    assert [(m.path, m.content) for m in result.matches] == [("caf\\xe9.py", "LITERAL needle"), ("ok.py", "needle")]
    assert result.total_count == 2


def test_the_file_left_out_is_named_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Discovery runs on every update and every ranked search with globs: the warning naming
    the look-alike left out is said once, not on each."""
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.py"), "wb") as f:
        f.write(b"RAW\n")
    put(tmp_path, "caf\\xe9.py", "LITERAL\n")
    with caplog.at_level(logging.WARNING, logger="search_engine.files.discovery"):
        for _ in range(3):
            discover(SearchLocation(tmp_path, None))
    said = [r.getMessage() for r in caplog.records if "its name shows as" in r.getMessage()]
    assert len(said) == 1 and "caf\\xe9.py" in said[0], said


def test_sorted_and_repeatable(tmp_path: Path) -> None:
    for i in range(60):
        put(tmp_path, f"d{i % 7}/f{i:02d}.py")
    runs = [[f.path for f in discover(SearchLocation(tmp_path, None)).files] for _ in range(3)]
    assert runs[0] == sorted(runs[0]) and len(runs[0]) == 60
    assert runs[0] == runs[1] == runs[2]


def test_bad_glob_is_refused(tree: Path) -> None:
    with pytest.raises(InvalidQueryError, match="invalid glob"):
        discover(SearchLocation(tree, None), include=["src/[a-"])


def test_empty_directory(tmp_path: Path) -> None:
    assert discover(SearchLocation(tmp_path, None)).files == []


def test_reads_beneath_the_root_refuse_links_at_any_depth_and_never_block(tmp_path: Path) -> None:
    """The one open every reader of a file inside a root uses: a link anywhere on the way is
    refused, a FIFO is refused without waiting for a writer, and the size limit is exact."""
    outside = put(tmp_path, "outside/sub/secret.txt")
    root = tmp_path / "root"
    put(root, "real/sub/a.txt", "x" * 10)
    (root / "dir_link").symlink_to(outside.parent.parent, target_is_directory=True)
    (root / "real" / "file_link.txt").symlink_to(outside)
    os.mkfifo(root / "real" / "pipe")
    assert read_beneath(root, "real/sub/a.txt", 10) == b"x" * 10
    assert read_beneath(root, "real/sub/a.txt", 9) is None
    for rel in (
        "dir_link/sub/secret.txt",
        "real/file_link.txt",
        "real/pipe",
        "real/../real/sub/a.txt",
        "/etc/passwd",
        "real//sub/a.txt",
    ):
        assert read_beneath(root, rel, 1 << 20) is None, rel
    with pytest.raises(OSError):
        open_beneath(root, "dir_link/sub/secret.txt")


def open_descriptors() -> int:
    """This process's open descriptors (`/dev/fd` lists them on Linux and macOS alike)."""
    return len(os.listdir("/dev/fd"))


def test_a_walk_reuses_directories_yet_refuses_a_link_swapped_in_and_leaks_nothing(tmp_path: Path) -> None:
    """Discovery opens every file through one `BeneathWalk`, which keeps the directories on the
    way to the last file: siblings, cousins and a path visited out of order open the right
    files; a directory replaced by a link once the walk has left it is refused when visited
    again; and closing the walk leaves no descriptor open."""
    outside = put(tmp_path, "outside/b/secret.txt", "secret")
    root = tmp_path / "root"
    for rel in ("a/b/x.txt", "a/b/y.txt", "a/c/z.txt", "d.txt", "a/b/w.txt"):
        put(root, rel, rel)
    fds = open_descriptors()
    with BeneathWalk(root) as walk:
        for rel in ("a/b/x.txt", "a/b/y.txt", "a/c/z.txt", "d.txt", "a/b/w.txt"):
            fd = walk.open(rel)
            try:
                assert os.read(fd, 100) == rel.encode(), rel
            finally:
                os.close(fd)
        held = open_descriptors() - fds
        assert held == 3, "the root, a and a/b"  # nothing more than the path's depth
        os.rename(root / "a", root / "a_moved")
        (root / "a").symlink_to(outside.parent.parent, target_is_directory=True)
        fd = walk.open("a/b/w.txt")  # `a` and `a/b` are still held: the directory that was checked
        try:
            assert os.read(fd, 100) == b"a/b/w.txt"
        finally:
            os.close(fd)
        os.close(walk.open("d.txt"))  # leaves `a`; its next visit walks again and meets the link
        with pytest.raises(OSError):
            walk.open("a/b/secret.txt")
        with pytest.raises(OSError):
            walk.open("a/../d.txt")
    assert open_descriptors() == fds


def test_a_hostile_deep_tree_cannot_exhaust_descriptors(tmp_path: Path) -> None:
    """A tree far deeper than `MAX_HELD` directories: its files are still found and opened,
    a link deep below the kept directories is still refused, and the walk never holds more
    than `MAX_HELD` directories (plus the root and the file) however deep the path."""
    outside = put(tmp_path, "outside/secret.txt", "secret")
    root = tmp_path / "root"
    deep = "/".join(["d"] * (MAX_HELD * 3))
    put(root, f"{deep}/a.txt", "a")
    put(root, f"{deep}/b.txt", "b")
    (root / deep / "link").symlink_to(outside.parent, target_is_directory=True)
    fds = open_descriptors()
    with BeneathWalk(root) as walk:
        for name in ("a.txt", "b.txt"):
            fd = walk.open(f"{deep}/{name}")
            try:
                assert open_descriptors() - fds <= MAX_HELD + 2
                assert os.read(fd, 10) == name[0].encode()
            finally:
                os.close(fd)
        with pytest.raises(OSError):
            walk.open(f"{deep}/link/secret.txt")
    assert open_descriptors() == fds
    assert [f.path for f in discover(SearchLocation(root, None)).files] == [f"{deep}/a.txt", f"{deep}/b.txt"]


@pytest.mark.parametrize("named", ["sub", "sub/a.txt"])
def test_a_named_path_swapped_for_a_link_after_it_was_resolved_is_refused(tmp_path: Path, named: str) -> None:
    """A request carries its path as resolved when it was asked (a cursor re-runs it later):
    if `sub` has become a link out since, rg, which follows links named on its command line,
    is never handed it."""
    outside = put(tmp_path, "outside/a.txt", f"{MARK} outside\n")
    root = tmp_path / "root"
    put(root, "sub/a.txt")
    request = SearchRequest(query=MARK, root=str(root), path=named)
    assert [m.content for m in regex_search(request, EngineConfig()).matches] == [MARK]
    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(PathNotFoundError, match="no longer opens inside the root"):
        regex_search(request, EngineConfig())


@pytest.mark.parametrize("inside", [True, False], ids=["cache-dir-in-root", "cache-dir-is-root"])
def test_the_cursor_key_in_a_cache_dir_under_the_root_is_never_searched(tmp_path: Path, inside: bool) -> None:
    """Before: with `index.cache_dir` inside a searched root, a regex search for `.` printed
    the cursor key, the secret cursors are sealed with; only the index had left the cache out.
    Now no walk sees it: not the root's, not one naming the cache or the key (rg searches a
    path it is named whatever the globs say, so that is refused)."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("def f():\n    pass\n")
    cache = root / "cache" if inside else root
    load_or_create_key(cache)
    config = EngineConfig(cache_dir=cache, cache_entries=CACHE_DIR_ENTRIES)
    secret = (cache / CURSOR_KEY_FILE).read_text().strip()
    every = regex_search(SearchRequest(query=".", root=str(root)), config)
    assert {m.path for m in every.matches} == {"src/a.py"}
    assert not any(secret in m.content for m in every.matches)
    assert [f.path for f in discover(SearchLocation(root, None), config=config).files] == ["src/a.py"]
    named = (cache / CURSOR_KEY_FILE).relative_to(root).as_posix()
    for sub in {named, (cache.relative_to(root).as_posix() if inside else named)}:
        with pytest.raises(PathOutsideRootError, match="codepager's own cache"):
            regex_search(SearchRequest(query=".", root=str(root), path=sub), config)
        with pytest.raises(PathOutsideRootError, match="codepager's own cache"):
            discover(SearchLocation(root, sub), config=config)
    # Found in review: the check compared spellings, so a name that reaches the key another
    # way was searched; now by file identity (here a link, as a case-insensitive file system
    # would spell it `Cache/CURSOR.KEY`), and the key's temporary files by name
    (cache / ".cursor.key.123.abcd").write_text(secret)
    if inside:
        (root / "alias").symlink_to(cache)
        aliases = ["alias", f"alias/{CURSOR_KEY_FILE}"]
    else:
        (root / "alias.key").symlink_to(cache / CURSOR_KEY_FILE)
        aliases = ["alias.key", ".CURSOR.KEY.123.abcd"]
    for sub in aliases:
        with pytest.raises(PathOutsideRootError, match="codepager's own cache"):
            regex_search(SearchRequest(query=".", root=str(root), path=sub), config)
    hidden = regex_search(SearchRequest(query=".", root=str(root), include=("*.123.*",)), config)
    assert not any(secret in m.content for m in hidden.matches)
    # a root named through a link still holds the cache
    linked = tmp_path / "linked-root"
    linked.symlink_to(root)
    through = regex_search(SearchRequest(query=".", root=str(linked), include=("**/*key*",)), config)
    assert not any(secret in m.content for m in through.matches)
    # a directory that merely shares a name with what codepager keeps is searched as usual
    (root / "src" / "indexes").mkdir()
    (root / "src" / "indexes" / "b.py").write_text("def g():\n    pass\n")
    found = regex_search(SearchRequest(query="def", root=str(root), path="src"), config)
    assert [m.path for m in found.matches] == ["src/a.py", "src/indexes/b.py"]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def _oversized(path: Path) -> None:
    path.write_text("x\n" * (MAX_IGNORE_FILE_BYTES // 2 + 1))


@pytest.mark.parametrize(
    ("name", "plant", "said", "off"),
    [
        (
            "sub/.ignore",
            _link("/dev/zero"),
            "a link that leads out of the root, to /dev/zero",
            "no .ignore or .rgignore",
        ),
        ("sub/.gitignore", _fifo, "a FIFO, which would hold the search", "no .gitignore rules"),
        (".gitignore", _link("/proc/self/fd/1"), "out of the root, to /proc/self/fd/1", "no .gitignore rules"),
        ("sub/.rgignore", _link("../../elsewhere.txt"), "out of the root, to ../../elsewhere.txt", "no .ignore or"),
        ("sub/.ignore", _oversized, "over the 1,048,576 an ignore file may have", "no .ignore or .rgignore"),
        ("sub/.git/info/exclude", _fifo, "a FIFO", "no .git/info/exclude rules"),
    ],
)
def test_an_ignore_file_rg_must_not_read_is_not_read_and_the_answer_says_so(
    tmp_path: Path, name: str, plant: Callable[[Path], None], said: str, off: str
) -> None:
    """rg reads every ignore file it walks past, through links: `sub/.ignore -> /dev/zero` had
    it read until its memory ran out (an abort counted as success: the index was built empty),
    a FIFO or `.gitignore -> /proc/self/fd/1` held every search until its time limit, and a
    link out of the root was applied. Each is now checked first and its kind of ignore file
    not read in that walk; the search answers at once, saying which file and what it means."""
    root = tmp_path / "repo"
    put(root, "a.py", "def a():\n    pass\n")
    put(root, "sub/b.py", "def b():\n    pass\n")
    (tmp_path / "elsewhere.txt").write_text("*.py\n")
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    plant(root / name)
    config = EngineConfig(timeout_s=20)
    found = discover(SearchLocation(root, None), config=config)
    result = regex_search(SearchRequest(query="def", root=str(root)), config)
    assert [f.path for f in found.files] == [m.path for m in result.matches] == ["a.py", "sub/b.py"]
    (warning,) = found.warnings
    assert result.warnings == [warning]
    assert warning.startswith(f"an ignore file was not read: {name} is "), warning
    assert said in warning and off in warning


def test_an_ignore_file_linked_inside_the_root_is_read_as_before(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    put(root, "a.py")
    put(root, "sub/b.py")
    put(root, "shared/ignore", "b.py\n")
    (root / "sub" / ".ignore").symlink_to("../shared/ignore")
    result = regex_search(SearchRequest(query=MARK, root=str(root)), EngineConfig())
    assert [m.path for m in result.matches] == ["a.py"]
    assert result.warnings == []
    assert result.notices == [
        "1 file or folder was left out by ignore rules: 1 by sub/.ignore (b.py). To search them, pass "
        'include_patterns that name them (["*"] takes in every ignored and hidden file; the default excludes '
        "still apply; --glob on the command line), or a file or folder of theirs as path"
    ]


def test_an_unreadable_ignore_file_above_the_root_is_not_read_either(tmp_path: Path) -> None:
    """rg reads the ignore files of every folder above the one it searches, to `/` (even with
    `--no-ignore-parent`): a FIFO there (a neighbour's, in a shared folder) held every search.
    Its kind is not read then; the other kinds still apply."""
    os.mkfifo(tmp_path / ".gitignore")
    root = tmp_path / "repo"
    put(root, "a.py")
    put(root, "skip.py")
    put(root, ".ignore", "skip.py\n")
    result = regex_search(SearchRequest(query=MARK, root=str(root)), EngineConfig(timeout_s=20))
    assert [m.path for m in result.matches] == ["a.py"]
    assert result.warnings[0] == (
        f"an ignore file was not read: {tmp_path / '.gitignore'} is a FIFO, which would hold the search until "
        "its time limit. So no .gitignore rules (nor .git/info/exclude or git's global excludes) apply to this "
        "search, and the results may hold files those rules would leave out (exclude_patterns leaves them out)"
    )


def test_what_a_walk_left_out_is_read_once_until_the_tree_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rg's debug log, which says what rules left out, costs it ~9 ms a search on the standard
    library; the notices are kept while every folder and ignore file the walk depends on keeps
    its stamp, and read again (`--debug`) once one changes: a file added, an ignore file edited
    in place, an unreadable ignore file planted in a new folder."""
    monkeypatch.setattr(folder_listing, "SETTLED_NS", 0)  # folders count as settled at once
    commands: list[list[str]] = []
    real_popen = subprocess.Popen
    this_thread = threading.get_ident()

    def spy(args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        if threading.get_ident() == this_thread:  # not a process another test left running starts
            commands.append(args)
        return real_popen(args, **kwargs)  # type: ignore[call-overload, no-any-return]

    root = git_checkout(tmp_path / "repo")
    monkeypatch.setattr(subprocess, "Popen", spy)
    put(root, ".gitignore", "*.log\n")
    put(root, "a.py")
    put(root, "logs/a.log")
    for folder in (root, root / "logs"):
        os.utime(folder, ns=(1, 1))  # long ago: a change now gives a new stamp whatever the clock's grain

    def search() -> tuple[bool, list[str], list[str]]:
        result = regex_search(SearchRequest(query=MARK, root=str(root)), EngineConfig())
        return "--debug" in commands[-1], result.notices, result.warnings

    first = search()
    assert first[0] and first[1][0].startswith("1 file or folder was left out by ignore rules: 1 by .gitignore")
    assert search() == (False, first[1], [])  # unchanged: known, no debug log
    put(root, "logs/b.log")
    added = search()
    assert added[0] and added[1][0].startswith("2 files or folders were left out")
    assert search()[0] is False
    put(root, ".gitignore", "*.log\na.py\n")  # edited in place: the folder's stamp is unchanged
    edited = search()
    assert edited[0] and edited[1][0].startswith("3 files or folders were left out")
    (root / "new").mkdir()
    os.mkfifo(root / "new" / ".ignore")
    planted = search()
    assert planted[0] and planted[2][0].startswith("an ignore file was not read: new/.ignore is a FIFO")
