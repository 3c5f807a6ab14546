"""Real processes that the tests and the benchmarks both start: `codepager serve` over HTTP, a
real redis-server, the chunked-stdio fixture server and the proxy's stdio backend.

They live outside tests/ so that benchmarks/ never imports the test suite, and outside the
shipped packages (the wheel carries search_engine, sessions and server only)."""
