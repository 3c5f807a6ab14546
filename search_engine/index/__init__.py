"""The persistent index of a root: its on-disk store, the incremental update, vectors and tables."""
