"""Regex search: finding and running ripgrep, and reading its JSON event stream."""
