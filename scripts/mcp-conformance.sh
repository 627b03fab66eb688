#!/bin/sh
# The MCP conformance suite's client scenarios against logbook's client (docs/mcp.md,
# "Conformance"), the `all` suite of version 0.1.16 in groups: `sse-retry` alone first (it times the
# client's reconnection, and the OAuth flows served by the same harness process beside it can make
# the measure late), then the others, each group in parallel. Exits non-zero when a scenario fails
# that the baseline does not list, or one it lists passes.
client="node --import tsx scripts/mcp-conformance-client.ts"
baseline=scripts/mcp-conformance-baseline.yml
status=0
run() { conformance client --command "$client" --expected-failures "$baseline" "$@" || status=1; }
run --scenario sse-retry
run --scenario initialize
run --scenario tools_call
run --scenario elicitation-sep1034-client-defaults
run --suite auth
run --suite backcompat
run --suite draft
run --suite extensions
exit $status
