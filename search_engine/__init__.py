"""Finding things in a codebase: discovery, regex (ripgrep), chunking, embeddings, the
persistent index, semantic and hybrid ranking. Knows nothing of MCP or sessions."""

from search_engine.config import EngineConfig
from search_engine.errors import SearchError
from search_engine.models import Match, MatchType, SearchMode, SearchRequest, SearchResult

__all__ = [
    "EngineConfig",
    "Match",
    "MatchType",
    "SearchError",
    "SearchMode",
    "SearchRequest",
    "SearchResult",
]
