"""The long-lived objects one server process shares across tool calls, built once from
`Settings`. Tools receive this instead of reaching for globals, which keeps them testable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from search_engine import SearchEngine
from server.background_indexer import BackgroundIndexer
from server.output import OffloadStore, OutputLayer
from server.settings import Settings
from server.sql import Datasets
from sessions import Pager


@dataclass
class Services:
    settings: Settings
    roots: list[Path]
    engine: SearchEngine
    pager: Pager
    offload: OffloadStore
    datasets: Datasets
    layer: OutputLayer
    indexer: BackgroundIndexer
