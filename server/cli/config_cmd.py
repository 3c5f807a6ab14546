"""`codepager config`: print the effective settings (defaults < TOML < env < flags)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from server.settings import load_settings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="print the effective settings as JSON")
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config)
    except (FileNotFoundError, ValueError) as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(settings.model_dump(mode="json"), indent=2))
    return 0
