"""`codepager search`: parity with ripgrep itself on a generated tree and on a real package,
grep-like output, JSON output, exit statuses, paths anywhere printed as rg prints them, and
options that do not fit the mode refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fastmcp
import pytest

from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest, SearchResult
from search_engine.regex.ripgrep import rg_path
from server.cli import main

CODEPAGER = Path(sys.executable).parent / "codepager"
FASTMCP_DIR = Path(fastmcp.__file__).parent

Hits = set[tuple[str, int]]


def rg_hits(root: Path, rg_flags: list[str], pattern: str) -> Hits:
    """(path, line) of every match event of a plain `rg --json`, run the way a person would."""
    env = {k: v for k, v in os.environ.items() if k != "RIPGREP_CONFIG_PATH"}
    out = subprocess.run(
        [rg_path(), "--json", *rg_flags, "-e", pattern],
        cwd=root,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=env,
        check=False,
    ).stdout
    hits = set()
    for line in out.splitlines():
        event = json.loads(line)
        if event["type"] == "match":
            hits.add((event["data"]["path"]["text"], event["data"]["line_number"]))
    return hits


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def cli_hits(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Hits:
    status, out, err = cli(["search", "--jsonl", "--limit", "1000000", *argv], capsys)
    assert status in (0, 1), err
    return {(m["path"], m["line"]) for m in map(json.loads, out.splitlines())}


@pytest.fixture(scope="module")
def parity_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git checkout with nested ignores, several languages, unicode and multi-line defs."""
    root = tmp_path_factory.mktemp("parity")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    files = {
        ".gitignore": "*.log\nout/\n",
        "app.log": "def logged(): TODO\n",
        "out/gen.py": "def generated(): pass\n",
        "pkg/.gitignore": "private_*.py\n",
        "pkg/private_x.py": "def hidden_by_nested_ignore(): pass\n",
        "docs/guide.md": "# Search guide\nThe search finds a.b( and getters.\nTODO: more\n",
        "docs/ünïcode.md": "Ünïcode line with search ☃ and get\n",
    }
    for i in range(30):
        body = []
        for j in range(12):
            body.append(f"def handler_{i}_{j}(request, get=None):")
            body.append(f"    # todo: handle {j}" if j % 3 else f"    # FIXME case {j}")
            body.append(f"    value = a.b(request)  # getter {j}")
            body.append("def multi(\n    arg,\n):" if j % 5 == 0 else f"import mod_{j}")
        files[f"pkg/sub{i % 4}/module_{i:02d}.py"] = "\n".join(body) + "\n"
        files[f"web/comp_{i:02d}.ts"] = f"export function get{i}() {{ return search('{i}'); }}\n"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


PARITY_CASES = [
    # (codepager flags, equivalent rg flags, pattern)
    ([], [], r"def \w+"),
    (["-i"], ["-i"], "todo|fixme"),
    (["-F"], ["-F"], "a.b("),
    (["-w"], ["-w"], "get"),
    (["-U"], ["-U"], r"def \w+\(\n\s+\w+"),
    (["--glob", "*.py"], ["-g", "*.py"], "import"),
    (["--exclude", "docs/**"], ["-g", "!docs/**"], "search"),
    (["-i", "-w", "--glob", "*.md"], ["-i", "-w", "-g", "*.md"], "search"),
]


@pytest.mark.parametrize(("ours", "theirs", "pattern"), PARITY_CASES)
def test_parity_with_rg_on_generated_tree(
    parity_tree: Path, ours: list[str], theirs: list[str], pattern: str, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(parity_tree)
    expected = rg_hits(parity_tree, theirs, pattern)
    assert expected, "a parity case must match something"
    assert cli_hits([*ours, pattern], capsys) == expected


@pytest.mark.parametrize(
    ("ours", "theirs", "pattern"),
    [
        ([], [], r"def \w+"),
        (["-i"], ["-i"], "context"),
        (["-F", "-w"], ["-F", "-w"], "self.name"),
        (["-U"], ["-U"], r"async def \w+\(\n\s+self"),
        (["--glob", "*.py", "--exclude", "client/**"], ["-g", "*.py", "-g", "!client/**"], "import"),
    ],
)
def test_parity_with_rg_on_the_fastmcp_package(
    ours: list[str], theirs: list[str], pattern: str, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(FASTMCP_DIR)
    expected = rg_hits(FASTMCP_DIR, theirs, pattern)
    assert expected
    assert cli_hits([*ours, pattern], capsys) == expected


@pytest.mark.slow
def test_parity_through_the_installed_command(parity_tree: Path) -> None:
    done = subprocess.run(
        [str(CODEPAGER), "search", "--jsonl", "-i", "todo|fixme"],
        cwd=parity_tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = {(m["path"], m["line"]) for m in map(json.loads, done.stdout.splitlines())}
    assert got == rg_hits(parity_tree, ["-i"], "todo|fixme")


def test_text_output_is_rg_and_grep_layout(parity_tree: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(parity_tree)
    status, out, _ = cli(["search", "-C", "2", "FIXME", "pkg/sub1"], capsys)
    expected = subprocess.run(
        [rg_path(), "--no-config", "--sort", "path", "-n", "-H", "--no-heading", "-C", "2", "FIXME", "pkg/sub1"],
        cwd=parity_tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == 0
    assert out == expected
    assert "--\n" in out and ".py-1-def handler" in out  # context lines and group separators


def test_json_outputs(parity_tree: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(parity_tree)
    _, jsonl, _ = cli(["search", "--jsonl", "Search guide"], capsys)
    _, array, _ = cli(["search", "--json", "Search guide"], capsys)
    [match] = [json.loads(line) for line in jsonl.splitlines()]
    assert json.loads(array) == [match]
    assert match == {"path": "docs/guide.md", "line": 1, "text": "# Search guide"}
    _, full, _ = cli(["search", "--jsonl", "--detail", "full", "Search guide"], capsys)
    assert json.loads(full) == {
        "file": {"path": "docs/guide.md", "language": "markdown"},
        "match": {
            "span": {"byte_start": 2, "byte_end": 14, "line_start": 1, "line_end": 1},
            "content": "# Search guide",
            "line_number": 1,
        },
        "type": "regex_match",
    }


def test_exit_status_follows_grep(parity_tree: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(parity_tree)
    assert cli(["search", "handler_3_4"], capsys)[0] == 0
    # nothing found: what the ignore rules left out is said, and how to search it (37.1)
    status, out, err = cli(["search", "no_such_thing_anywhere"], capsys)
    assert (status, out) == (1, "")
    assert err.startswith("codepager: warning: 3 files or folders were left out by ignore rules: 2 by .gitignore")
    status, out, err = cli(["search", "a{2,1}"], capsys)
    assert (status, out) == (2, "")
    assert "invalid regex at position 1" in err


@pytest.mark.parametrize(("flag", "mode"), [("--sem", SearchMode.SEMANTIC), ("--hybrid", SearchMode.HYBRID)])
def test_semantic_modes_reach_the_engine_with_top_k_and_threshold(
    parity_tree: Path, flag: str, mode: SearchMode, capsys, monkeypatch
) -> None:
    """The CLI builds the request and calls the engine for every mode (no mode-specific code);
    --top-k and --threshold travel in the request."""
    seen: list[SearchRequest] = []

    def record(self: SearchEngine, request: SearchRequest) -> SearchResult:
        seen.append(request)
        return SearchResult(matches=[], total_count=0)

    monkeypatch.setattr(SearchEngine, "search", record)
    monkeypatch.chdir(parity_tree)
    status, out, err = cli(
        ["search", flag, "where are requests handled", "pkg", "--top-k", "3", "--threshold", "0.5"], capsys
    )
    assert (status, out, err) == (1, "", "")
    [request] = seen
    assert (request.mode, request.query, request.root, request.path) == (
        mode,
        "where are requests handled",
        str(parity_tree),
        "pkg",
    )
    assert (request.top_k, request.threshold) == (3, 0.5)


def test_limit_reports_the_true_total(parity_tree: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(parity_tree)
    status, out, err = cli(["search", "--limit", "5", r"def handler_\w+"], capsys)
    assert status == 0 and len(out.splitlines()) == 5
    assert "showing the first 5 of 360 matches" in err


def test_config_file_is_honoured_but_not_its_roots(parity_tree: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """Search settings apply (`max_file_size` = 1 skips every file); `server.roots` binds
    servers, not the user's own shell: the working directory is searched, as rg would."""
    monkeypatch.chdir(parity_tree)
    config = tmp_path / "codepager.toml"
    config.write_text(f'[server]\nroots = ["{tmp_path / "elsewhere"}"]\n')
    status, out, err = cli(["search", "--config", str(config), "--jsonl", "value = a"], capsys)
    assert status == 0 and len(out.splitlines()) == 360 and err == ""
    config.write_text(f'[server]\nroots = ["{tmp_path / "elsewhere"}"]\n[search]\nmax_file_size = 1\n')
    status, out, err = cli(["search", "--config", str(config), "--jsonl", "value = a"], capsys)
    assert (status, out) == (1, ""), (status, out, err)  # every file is over max_file_size: no match
    status, _, err = cli(["search", "--config", str(tmp_path / "missing.toml"), "x"], capsys)
    assert status == 2 and "config file not found" in err


def test_a_missing_pattern_names_only_the_pattern(capsys) -> None:
    """PATH is optional (the working directory by default), so the usage error must not say it
    is required too."""
    with pytest.raises(SystemExit) as exited:
        main(["search"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert "the following arguments are required: PATTERN" in err and "PATH" not in err.splitlines()[-1]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory (x.py, sub/y.py, a link to sub) next to another tree, other/."""
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "x.py").write_text("needle here\nplain\nneedle again\n")
    (work / "sub" / "y.py").write_text("needle in sub\n")
    (work / "lnk").symlink_to(work / "sub", target_is_directory=True)
    (tmp_path / "other" / "deep").mkdir(parents=True)
    (tmp_path / "other" / "z.py").write_text("needle elsewhere\n")
    (tmp_path / "other" / "deep" / "w.py").write_text("before\nneedle deeper\n")
    monkeypatch.chdir(work)
    return work


def rg_text(cwd: Path, args: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [rg_path(), "--no-config", "--sort", "path", "-n", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    "paths",
    [
        [],
        ["."],
        ["./"],
        ["sub"],
        ["sub/"],
        ["./sub"],
        ["lnk"],
        ["../other"],
        ["../other/"],
        ["ABS"],
        ["ABS/"],
        ["x.py"],
        ["./x.py"],
        ["../other/deep/w.py"],
        ["x.py", "sub/y.py"],
        [".", "../other"],
        ["sub//"],
        [".//"],
    ],
)
def test_any_path_is_searched_and_printed_as_rg_prints_it(work: Path, paths: list[str], capsys) -> None:
    """Outside the working directory too (the CLI is the user's own tool), several at once;
    paths relative as typed, absolute when given absolute, a lone file without its name."""
    paths = [p.replace("ABS", str(work.parent / "other")) for p in paths]
    for flags in ([], ["-C", "1"]):
        status, out, err = cli(["search", *flags, "needle", *paths], capsys)
        assert (status, out, err) == (0, *rg_text(work, [*flags, "needle", *paths])[1:]), (flags, paths)


def test_json_paths_are_the_printed_paths(work: Path, capsys) -> None:
    _, text, _ = cli(["search", "needle", "../other", "x.py"], capsys)
    _, jsonl, _ = cli(["search", "--jsonl", "needle", "../other", "x.py"], capsys)
    assert [json.loads(line)["path"] for line in jsonl.splitlines()] == [
        line.split(":")[0] for line in text.splitlines()
    ]
    assert "../other/deep/w.py" in jsonl and '"x.py"' in jsonl


def test_a_missing_path_is_reported_like_rg_and_the_others_still_searched(work: Path, capsys) -> None:
    status, out, err = cli(["search", "needle", "missing", "x.py"], capsys)
    rg_status, rg_out, rg_err = rg_text(work, ["needle", "missing", "x.py"])
    assert (status, out) == (rg_status, rg_out) == (2, "x.py:1:needle here\nx.py:3:needle again\n")
    assert err == "codepager: missing: No such file or directory\n" and "missing: No such file or directory" in rg_err
    assert cli(["search", "needle", "missing"], capsys) == (2, "", "codepager: missing: No such file or directory\n")
    status, out, err = cli(["search", "needle", "x.py/nope"], capsys)
    assert (status, out, err) == (2, "", "codepager: x.py/nope: Not a directory\n")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--top-k", "3"], "--top-k"),
        (["--threshold", "0.5"], "--threshold"),
        (["--sem", "-i"], "-i/--ignore-case"),
        (["--hybrid", "-F"], "-F/--fixed-strings"),
        (["--hybrid", "-w"], "-w/--word-regexp"),
        (["--sem", "-U"], "-U/--multiline"),
        (["--hybrid", "-C", "0"], "-C/--context"),
        (["--sem", "--limit", "3"], "--limit"),
    ],
)
def test_an_option_that_does_not_apply_to_the_mode_is_an_error(
    work: Path, argv: list[str], named: str, capsys, monkeypatch
) -> None:
    """It used to be ignored silently (--top-k with a regex), answering another question."""

    def never(self: SearchEngine, request: SearchRequest) -> SearchResult:
        raise AssertionError("searched despite the error")

    monkeypatch.setattr(SearchEngine, "search", never)
    status, out, err = cli(["search", *argv, "needle"], capsys)
    assert (status, out) == (2, "")
    assert err.startswith(f"codepager: {named} applies to ") and err.count("\n") == 1, err


def test_non_utf8_names_and_lines_print(tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt"), "wb") as f:
        f.write(b"needle \xff here\n")
    done = subprocess.run([str(CODEPAGER), "search", "needle"], cwd=tmp_path, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "caf\\xe9.txt:1:needle \ufffd here\n"


def test_bad_arguments_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["search", "-C", "11", "x"])
    assert exit_.value.code == 2
    assert "from 0 to 10" in capsys.readouterr().err


def test_every_match_is_printed_without_a_limit(tmp_path: Path, capsys, monkeypatch) -> None:
    """The CLI is the full-results path: past the server's 10,000 cap, nothing is held back."""
    (tmp_path / "many.txt").write_text("hit\n" * 12_345)
    monkeypatch.chdir(tmp_path)
    status, out, err = cli(["search", "hit"], capsys)
    assert (status, len(out.splitlines()), err) == (0, 12_345, "")


def test_options_may_follow_positionals(parity_tree: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(parity_tree)
    before = cli(["search", "-i", "-w", "--jsonl", "search", "docs"], capsys)
    after = cli(["search", "search", "-i", "docs", "-w", "--jsonl"], capsys)
    assert before == after and before[0] == 0 and len(before[1].splitlines()) == 3


def test_an_unusable_cache_dir_is_an_error_not_nothing_found(parity_tree: Path, tmp_path: Path) -> None:
    """Exit 1 would tell a script "no match"; an OS error must be 2, with the reason."""
    not_a_dir = tmp_path / "cache-is-a-file"
    not_a_dir.write_text("")
    env = {**os.environ, "CODEPAGER_INDEX__CACHE_DIR": str(not_a_dir)}
    done = subprocess.run(
        [str(CODEPAGER), "search", "--hybrid", "handler"],
        cwd=parity_tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("codepager: ") and "Not a directory" in done.stderr and "Traceback" not in done.stderr


def test_version_and_help(capsys) -> None:
    from server import __version__

    for argv in (["--version"], ["--help"], ["search", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0, argv
    out = capsys.readouterr().out
    assert f"codepager {__version__}\n" in out
    assert "examples:" in out and "codepager search --hybrid" in out and "exit status: 0 if something matched" in out


def test_hybrid_and_semantic_search_for_real(tmp_path: Path, capsys, monkeypatch) -> None:
    """No stub: the CLI builds the index with the shipped model, ranks, and prints scores and
    component ranks; the definition the question describes comes first."""
    cache = tmp_path / "cache"
    cache.mkdir()
    config = tmp_path / "codepager.toml"
    config.write_text(f'[index]\ncache_dir = "{cache}"\n')
    project = tmp_path / "project"
    (project / "net").mkdir(parents=True)
    (project / "net" / "retry.py").write_text(
        "def retry_with_backoff(call, attempts=5):\n"
        '    """Call again after a failure, waiting twice as long each time."""\n'
        "    for attempt in range(attempts):\n        try:\n            return call()\n"
        "        except ConnectionError:\n            time.sleep(2 ** attempt)\n"
    )
    (project / "render.py").write_text("def render_page(template, context):\n    return template.format(**context)\n")
    (project / "notes.md").write_text("# Notes\n\nHow pages are rendered from templates.\n")
    monkeypatch.chdir(project)
    for flag, kind in (("--hybrid", "hybrid"), ("--sem", "semantic")):
        argv = ["search", flag, "retry a failed call with backoff", "--config", str(config), "--jsonl", "--top-k", "2"]
        status, out, _ = cli([*argv, "--detail", "full"], capsys)
        matches = [json.loads(line) for line in out.splitlines()]
        assert status == 0 and len(matches) == 2, flag
        assert matches[0]["file"]["path"] == "net/retry.py" and matches[0]["type"] == f"{kind}_match"
        assert matches[0]["match"]["score"] >= matches[1]["match"]["score"]
        if kind == "hybrid":
            assert matches[0]["match"]["ranks"], matches[0]
        _, compact_out, _ = cli(argv, capsys)
        compact = [json.loads(line) for line in compact_out.splitlines()]
        assert [(c["path"], c["line"], c["end"]) for c in compact] == [
            (m["file"]["path"], m["match"]["span"]["line_start"], m["match"]["span"]["line_end"]) for m in matches
        ]
        assert "ranks" not in compact[0] and compact[0]["score"] >= compact[1]["score"]
