"""Semantic mode's choice among files (real chunker, the real shipped static model, real
persistent index): a few long files full of look-alikes do not crowd out the other files about
the query, and a long module with several chunks about it beats a small file with one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest
from search_engine.ranking.hits import diversify, saturated
from search_engine.ranking.semantic import SELECTION_POOL

QUERY = "send bytes through a pipe between two processes"
LONG_FILES = ("ipc/pipe_unix.py", "ipc/pipe_windows.py", "ipc/pipe_posix.py")
# Enough functions that the long files alone hold more than SELECTION_POOL chunks like the query.
FUNCTIONS_PER_LONG_FILE = SELECTION_POOL // 2
SHORT_FILES = {
    "ipc/channel.py": "def open_channel(reader, writer):\n"
    '    """Connect two processes with a pipe and send bytes from one to the other."""\n'
    "    return writer.send(reader.recv())\n",
    "ipc/socketpair.py": "def socket_pair():\n"
    '    """Two connected sockets that carry bytes between a parent and a child process."""\n'
    "    return make_pair()\n",
    "ipc/spawn.py": "def spawn_with_pipe(command):\n"
    '    """Start a child process whose stdin is a pipe the parent writes bytes to."""\n'
    "    return start(command, stdin=PIPE)\n",
}


def _long_file(flavour: str) -> str:
    return "\n\n".join(
        f"def write_pipe_{flavour}_{n}(fd, data):\n"
        f'    """Write bytes to pipe {n} so the other process reads them ({flavour} variant)."""\n'
        f"    return os.write(fd, data[{n}:])\n"
        for n in range(FUNCTIONS_PER_LONG_FILE)
    )


def test_long_files_full_of_look_alikes_do_not_crowd_out_the_other_files(tmp_path: Path, model_cache: Path) -> None:
    root = tmp_path / "repo"
    files = {path: _long_file(path.rsplit("_", 1)[1][:-3]) for path in LONG_FILES} | SHORT_FILES
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    engine = SearchEngine(EngineConfig(cache_dir=model_cache))
    request = SearchRequest(mode=SearchMode.SEMANTIC, query=QUERY, root=str(root.resolve()), top_k=10)
    index = engine.indexes.get(root.resolve())
    assert len(index.chunks) > SELECTION_POOL + len(SHORT_FILES)
    paths = [m.path for m in engine.search(request).matches]
    # Each long file's further chunks keep a fraction of their score per chunk shown before
    # them, so every file about the query comes before the long files' third chunks.
    assert set(paths[: len(files)]) == set(files)


# A web application module: five routing functions among eleven about everything else, so its
# mean vector is about many things; and a one-function file about routing.
ROUTING = [
    ("add_route", "Register a handler function for a URL path and HTTP method."),
    ("match_route", "Find the route whose path pattern matches an incoming request's URL."),
    ("dispatch", "Call the handler registered for the request's path and method."),
    ("url_params", "Extract the named parameters of a matched route from the URL path."),
    ("method_not_allowed", "Answer 405 when a path is routed but not for the request's method."),
]
OTHER = [
    ("render_template", "Fill an HTML template with the given values."),
    ("set_cookie", "Add a Set-Cookie header to the response."),
    ("log_access", "Write one line per response to the access log."),
    ("serve_static", "Send a file from the static folder with its content type."),
    ("gzip_body", "Compress the response body when the client accepts gzip."),
    ("load_config", "Read the application settings from environment variables."),
    ("open_session", "Load the user's session from its signed cookie."),
    ("csrf_token", "A random token that forms must send back."),
    ("format_date", "Format a timestamp for an HTTP Date header."),
    ("shutdown", "Close open connections and stop the worker threads."),
    ("health_check", "Report whether the database answers."),
]


def _function(name: str, doc: str) -> str:
    return f'def {name}(app, request):\n    """{doc}"""\n    return app.{name}(request)\n'


def test_saturated_scores_order_candidates_as_the_per_file_selection_does() -> None:
    """`diversify`'s top k are the top k of `saturated`: cutting a candidate list by it loses
    nothing the selection would have chosen."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 60))
        file_of = rng.integers(0, 6, size=n)
        scores = rng.normal(0.2, 0.4, size=n)
        held = diversify(file_of, np.arange(n), scores, top_k=10)
        decayed = saturated(file_of, scores)
        best = np.lexsort((np.arange(n), -decayed))[:10]
        assert [i for _, i in held] == best.tolist()
        assert np.allclose([s for s, _ in held], decayed[best])
