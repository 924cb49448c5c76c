#!/bin/sh
# Soak mcpgate (issue 9 item 6): 60 s at 64 concurrent MCP sessions of mixed
# calls (tools/list, reads, writes, upstream 500s, a slow route) against a
# local upstream, all on 127.0.0.1. Exits non-zero when a check fails: an
# error other than the expected isError answers, a wrong-client answer, RSS
# growth of 10% or more under load, goroutines not back to their count after
# warm-up. Flags are passed on, e.g. scripts/soak.sh -duration 20s -c 32.
# Not run in CI: it takes over a minute and both cores.
set -eu
cd "$(dirname "$0")/.."
exec go run ./cmd/mcpgate-bench soak "$@"
