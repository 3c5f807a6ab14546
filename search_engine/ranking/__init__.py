"""Semantic and hybrid ranking over one index generation: words, meaning, names and path priors."""
