#!/usr/bin/env bash
# End-to-end suite for the scimcp binary.
#
#   e2e/run.sh                     node tests + conformance suite
#   e2e/run.sh --tests-only        only the node tests
#   e2e/run.sh --conformance-only  only the conformance suite
#
# Environment:
#   SCIMCP_BIN        binary under test (default: <repo>/bin/scimcp, rebuilt
#                     from ./cmd/scimcp first unless SCIMCP_NO_BUILD=1)
#   PAPERS_SOURCE_BIN the example paper-library source (default: built from
#                     ./examples/papers-source into <repo>/bin)
#   CONFORMANCE_OUT   keep the conformance checks.json files in this folder
#
# Needs only the npm registry: `npm ci` brings the MCP SDK, the conformance
# CLI and a Node 22 binary (npm package "node"), which runs everything here.
# Exits non-zero if any node test or conformance scenario fails. The last
# lines are the node test runner's TAP summary (# tests/# pass/# fail ...).
set -euo pipefail

MODE=all
case "${1:-}" in
  "") ;;
  --tests-only) MODE=tests ;;
  --conformance-only) MODE=conformance ;;
  -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
  *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
esac

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$E2E_DIR/.." && pwd)"
cd "$E2E_DIR"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/scimcp-e2e-run.XXXXXX")"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf '==> %s\n' "$*"; }

# ---------------------------------------------------------------- npm deps
# Reinstall when node_modules is missing or was installed from another
# package.json / package-lock.json, or when the Node 22 binary is missing.
STAMP="node_modules/.scimcp-e2e-stamp"
WANT="$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"
NODE22="$E2E_DIR/node_modules/node/bin/node"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$WANT" || ! -x "$NODE22" ]]; then
  log "npm ci (node_modules missing or out of date)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$WANT" > "$STAMP"
fi
NODE_VERSION="$("$NODE22" --version)"
if [[ "$NODE_VERSION" != v22.* ]]; then
  echo "run.sh: $NODE22 is $NODE_VERSION, expected v22.x (npm package 'node' did not install its binary)" >&2
  exit 1
fi
log "node $NODE_VERSION ($NODE22)"

# ---------------------------------------------------------------- binary
if [[ -z "${SCIMCP_BIN:-}" ]]; then
  SCIMCP_BIN="$REPO_DIR/bin/scimcp"
  if [[ "${SCIMCP_NO_BUILD:-0}" != 1 ]]; then
    log "go build -o bin/scimcp ./cmd/scimcp"
    (cd "$REPO_DIR" && go build -o bin/scimcp ./cmd/scimcp)
  fi
fi
SCIMCP_BIN="$(cd "$E2E_DIR" && realpath "$SCIMCP_BIN")"
export SCIMCP_BIN
[[ -x "$SCIMCP_BIN" ]] || { echo "run.sh: no executable scimcp at $SCIMCP_BIN" >&2; exit 1; }
log "binary $SCIMCP_BIN ($("$SCIMCP_BIN" version 2>&1 | head -n1))"
# The example paper-library source (examples/papers-source), an upstream
# for the artifact_download tests.
if [[ -z "${PAPERS_SOURCE_BIN:-}" ]]; then
  PAPERS_SOURCE_BIN="$REPO_DIR/bin/papers-source"
  log "go build -o bin/papers-source ./examples/papers-source"
  (cd "$REPO_DIR" && go build -o bin/papers-source ./examples/papers-source)
fi
export PAPERS_SOURCE_BIN

TESTS_RC=0
CONF_RC=0
TAP="$WORK/tests.tap"

# ---------------------------------------------------------------- node tests
if [[ "$MODE" != conformance ]]; then
  log "node --test tests/*.test.mjs"
  set +e
  "$NODE22" --test --test-concurrency=2 --test-timeout=90000 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$TAP" \
    tests/*.test.mjs
  TESTS_RC=$?
  set -e
fi

# ---------------------------------------------------------------- conformance
# Classification of every server scenario of @modelcontextprotocol/conformance
# (see docs/CONFORMANCE.md for the reasons).
ALWAYS=(server-initialize ping tools-list server-sse-multiple-streams dns-rebinding-protection)
# scenario:capability -- runs only when the server declares that capability
GATED=(logging-set-level:logging resources-list:resources prompts-list:prompts)
NOT_APPLICABLE=(
  completion-complete tools-call-simple-text tools-call-image tools-call-audio
  tools-call-embedded-resource tools-call-mixed-content tools-call-with-logging
  tools-call-error tools-call-with-progress tools-call-sampling tools-call-elicitation
  json-schema-2020-12 elicitation-sep1034-defaults elicitation-sep1330-enums
  server-sse-polling resources-read-text resources-read-binary resources-templates-read
  resources-subscribe resources-unsubscribe prompts-get-simple prompts-get-with-args
  prompts-get-embedded-resource prompts-get-with-image
)

free_port() {
  "$NODE22" -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

start_server() {
  local ws="$WORK/workspace" data="$WORK/data" port
  mkdir -p "$ws/docs" "$data"
  printf 'hello from the conformance workspace\n' > "$ws/README.md"
  printf 'a,b\n1,2\n' > "$ws/docs/table.csv"
  for attempt in 1 2 3; do
    port="$(free_port)"
    "$SCIMCP_BIN" serve --http "127.0.0.1:$port" --workspace "$ws" --data "$data" \
      --log-level info 2> "$WORK/server.log" < /dev/null &
    SERVER_PID=$!
    # Wait (up to 10 s) until the port accepts TCP connections (a GET on /mcp
    # would open an SSE stream), or the server exits.
    if "$NODE22" -e '
      const [port, pid] = process.argv.slice(1);
      const end = Date.now() + 10000;
      const alive = () => { try { return !/\) Z /.test(require("fs").readFileSync(`/proc/${pid}/stat`, "utf8")); } catch { return false; } };
      const probe = () => new Promise((r) => { const s = require("net").connect(Number(port), "127.0.0.1");
        s.once("connect", () => { s.destroy(); r(true); }); s.once("error", () => r(false)); });
      (async () => {
        while (Date.now() < end && alive()) {
          if (await probe()) process.exit(0);
          await new Promise((r) => setTimeout(r, 50));
        }
        process.exit(1);
      })();' "$port" "$SERVER_PID"; then
      URL="http://127.0.0.1:$port/mcp"
      return 0
    fi
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    echo "run.sh: scimcp did not come up on port $port (attempt $attempt):" >&2
    cat "$WORK/server.log" >&2
  done
  return 1
}

CONF_PASSED=()
CONF_FAILED=()
if [[ "$MODE" != tests ]]; then
  CONFORMANCE=("$NODE22" "$E2E_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js")
  OUT_DIR="${CONFORMANCE_OUT:-$WORK/conformance-results}"
  mkdir -p "$OUT_DIR"
  log "conformance $("${CONFORMANCE[@]}" --version)"

  # Warn about scenarios this script does not know yet (new CLI versions).
  known=" ${ALWAYS[*]} ${GATED[*]%%:*} ${NOT_APPLICABLE[*]} "
  while read -r s; do
    [[ -z "$s" || "$known" == *" $s "* ]] || echo "run.sh: WARNING: conformance scenario '$s' is not classified in run.sh/docs/CONFORMANCE.md" >&2
  done < <("${CONFORMANCE[@]}" list --server | sed -n 's/^  - \([^ ]*\).*/\1/p')

  if ! start_server; then
    CONF_FAILED+=("(server did not start)")
  else
    log "scimcp serving $URL (pid $SERVER_PID)"
    caps="$("$NODE22" lib/capabilities.mjs "$URL")" || { echo "run.sh: could not read server capabilities" >&2; caps=""; }
    log "server capabilities: ${caps:-<none>}"
    SCENARIOS=("${ALWAYS[@]}")
    for g in "${GATED[@]}"; do
      if [[ " $caps " == *" ${g##*:} "* ]]; then SCENARIOS+=("${g%%:*}"); else log "skip ${g%%:*} (server declares no ${g##*:} capability)"; fi
    done
    for s in "${SCENARIOS[@]}"; do
      log "conformance server --scenario $s"
      set +e
      timeout 120 "${CONFORMANCE[@]}" server --url "$URL" --scenario "$s" -o "$OUT_DIR" > "$WORK/conf-$s.txt" 2>&1
      rc=$?
      set -e
      # One line per check plus the result line; full output only on failure.
      if [[ $rc -eq 0 ]]; then
        sed -E 's/\x1B\[[0-9;]*m//g' "$WORK/conf-$s.txt" \
          | grep -E '^(Passed:|[0-9T:.Z-]+ \[[^]]*\] +(SUCCESS|WARNING|FAILURE) )' \
          | sed -E 's/^[0-9T:.Z-]+ /  /; s/ +\]/]/; s/\] +/] /' || true
        CONF_PASSED+=("$s")
      else
        sed -E 's/\x1B\[[0-9;]*m//g' "$WORK/conf-$s.txt"
        CONF_FAILED+=("$s")
      fi
    done
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "run.sh: scimcp died during the conformance run; its log:" >&2
      cat "$WORK/server.log" >&2
      CONF_FAILED+=("(server crashed)")
    fi
  fi
  [[ ${#CONF_FAILED[@]} -eq 0 ]] || CONF_RC=1
  if [[ $CONF_RC -ne 0 && -s "$WORK/server.log" ]]; then
    echo "--- scimcp log (conformance server) ---"; tail -n 50 "$WORK/server.log"
  fi
fi

# ---------------------------------------------------------------- summary
echo
if [[ "$MODE" != tests ]]; then
  echo "conformance scenarios run: ${#CONF_PASSED[@]} ok (${CONF_PASSED[*]:-none}), ${#CONF_FAILED[@]} failing (${CONF_FAILED[*]:-none})"
fi
if [[ "$MODE" != conformance ]]; then
  if [[ -s "$TAP" ]]; then
    # The node test runner's own closing summary, last in the output for CI.
    grep -E '^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ' "$TAP" | tail -n 8
  else
    echo "# tests 0"; echo "# pass 0"; echo "# fail 1"
  fi
fi
if [[ $TESTS_RC -ne 0 || $CONF_RC -ne 0 ]]; then
  exit 1
fi
