"""`codepager config`: print the effective settings (defaults < TOML < env).

Secrets are masked: the output is meant to be pasted into bug reports and chats."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from server.settings import SECRET_SETTINGS, Settings, load_settings

MASK = "***"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="print the effective settings as JSON")
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config)
    except (FileNotFoundError, ValueError) as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(masked(settings), indent=2))
    return 0


def masked(settings: Settings) -> dict[str, Any]:
    """The settings as JSON, with the cursor key, the HTTP token and any Redis password hidden."""
    from sessions import redacted  # here, not at the top: every command imports this module

    dumped = settings.model_dump(mode="json")
    for section, key in SECRET_SETTINGS:
        if dumped[section][key] is not None:
            dumped[section][key] = MASK
    dumped["sessions"]["backend"] = redacted(dumped["sessions"]["backend"])
    return dumped
