"""Read-your-writes: change detection (inotify, watchers, polling) and the live layer of
files changed since the index generation a search answers from.
"""
