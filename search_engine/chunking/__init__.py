"""Cutting files into chunks a search can return whole, in memory-limited worker processes."""
