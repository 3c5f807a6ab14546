"""`codepager search`: not built yet (see the open issue that owns it)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="(not available yet)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("codepager: 'search' is not available yet", file=sys.stderr)
    return 2
