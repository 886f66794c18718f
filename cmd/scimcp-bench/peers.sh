#!/usr/bin/env bash
# Benchmarks scimcp against its peers in ONE run of scimcp-bench:
#   scimcp                                   (built here: go build -o bin/scimcp ./cmd/scimcp)
#   @modelcontextprotocol/server-filesystem  (npm, pinned below)
#   @wonderwhy-er/desktop-commander          (npm, pinned below)
# The harness alternates between the three servers on every repetition and
# prints, per scenario, each peer's figure divided by scimcp's.
#
#   bash cmd/scimcp-bench/peers.sh [scimcp-bench flags…]     e.g. -runs 200 -scenarios far_page
#
# Everything goes to a scratch folder, $SCIMCP_BENCH_DIR (default
# ${TMPDIR:-/tmp}/scimcp-bench-peers): the npm packages, Desktop Commander's
# home (its config lives there, not in your ~), the fixtures, and the
# results (results.txt, results.json, results.md). Needs go, node >= 18 and
# npm; reaches only the npm registry (and the Go module proxy for the build).
#
# Peers' background work, and what this script does about it:
# - npm install runs with --ignore-scripts: Desktop Commander's postinstall
#   (track-installation.js: an install-telemetry event, then a ripgrep check)
#   does not run, and neither does any dependency's download script
#   (puppeteer's Chrome: PUPPETEER_SKIP_DOWNLOAD=1 as well).
# - Desktop Commander gets its own HOME with config.json:
#   telemetryEnabled=false (and DESKTOP_COMMANDER_DISABLE_TELEMETRY=1), no
#   welcome page, no onboarding or feedback prompts (also --no-onboarding),
#   allowedDirectories = the fixtures.
# - Chrome: after every initialize Desktop Commander looks for Chrome for PDF
#   export and, finding none, downloads it in the background
#   (ensureChromeAvailable in dist/tools/pdf/markdown.js); no setting turns
#   this off. It stops looking once its puppeteer cache holds a build, so the
#   script puts a stub executable at
#   $DC_HOME/.claude-server-commander/puppeteer-cache/chrome/linux-stub/chrome-linux64/chrome.
# - Feature flags: fetched from desktopcommander.app at start and every 30
#   minutes; no setting turns this off, but DC_FLAG_URL points it at a closed
#   loopback port, so it fails at once and no traffic leaves the machine.
# - Not avoidable: on every tool call Desktop Commander appends to
#   tool-history.jsonl, rewrites config.json (usage counters, under a lock
#   directory), and builds telemetry properties even with telemetry off, which
#   runs `python3 --version` synchronously (utils/system-info.js). That last
#   one is why every server gets PATH=/usr/local/bin:/usr/bin:/bin: with a
#   pyenv shim first in PATH (as on this project's machines) each Desktop
#   Commander call costs about 300 ms more, which would measure pyenv, not the
#   server.
# - The filesystem server has no telemetry or background work.
set -euo pipefail

FS_VERSION=2026.8.31
DC_VERSION=0.2.52

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCRATCH=${SCIMCP_BENCH_DIR:-${TMPDIR:-/tmp}/scimcp-bench-peers}
NODE=${NODE:-$(command -v node)}
mkdir -p "$SCRATCH"
SCRATCH=$(cd "$SCRATCH" && pwd)
NPM_DIR=$SCRATCH/npm
DC_HOME=$SCRATCH/dc-home
WORK=$SCRATCH/work
FIXTURES=$WORK/fixtures
SERVER_PATH=/usr/local/bin:/usr/bin:/bin

say() { printf 'peers.sh: %s\n' "$*" >&2; }

# 1. The peers, from the npm registry, pinned; reused when already there.
FS_MAIN=$NPM_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
DC_MAIN=$NPM_DIR/node_modules/@wonderwhy-er/desktop-commander/dist/index.js
installed_version() { "$NODE" -p "require('$NPM_DIR/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [[ "$(installed_version @modelcontextprotocol/server-filesystem)" != "$FS_VERSION" ||
      "$(installed_version @wonderwhy-er/desktop-commander)" != "$DC_VERSION" ]]; then
	say "installing @modelcontextprotocol/server-filesystem@$FS_VERSION and @wonderwhy-er/desktop-commander@$DC_VERSION into $NPM_DIR"
	rm -rf "$NPM_DIR"
	mkdir -p "$NPM_DIR"
	cat >"$NPM_DIR/package.json" <<EOF
{
  "name": "scimcp-bench-peers",
  "private": true,
  "dependencies": {
    "@modelcontextprotocol/server-filesystem": "$FS_VERSION",
    "@wonderwhy-er/desktop-commander": "$DC_VERSION"
  }
}
EOF
	(cd "$NPM_DIR" && PUPPETEER_SKIP_DOWNLOAD=1 npm_config_update_notifier=false \
		npm install --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
[[ -f $FS_MAIN && -f $DC_MAIN ]] || { say "the npm install did not give $FS_MAIN and $DC_MAIN"; exit 1; }

# 2. Desktop Commander's configuration, fresh for every run (it keeps usage
#    counters in it).
rm -rf "$DC_HOME"
DC_CONF=$DC_HOME/.claude-server-commander
mkdir -p "$DC_CONF/puppeteer-cache/chrome/linux-stub/chrome-linux64"
cat >"$DC_CONF/config.json" <<EOF
{
  "telemetryEnabled": false,
  "allowedDirectories": ["$FIXTURES"],
  "pendingWelcomeOnboarding": false,
  "welcomeOnboardingEligible": false,
  "onboarding_injection": false,
  "feedbackGiven": true
}
EOF
printf '#!/bin/sh\necho "stub: scimcp-bench keeps Desktop Commander from downloading Chrome" >&2\nexit 1\n' \
	>"$DC_CONF/puppeteer-cache/chrome/linux-stub/chrome-linux64/chrome"
chmod +x "$DC_CONF/puppeteer-cache/chrome/linux-stub/chrome-linux64/chrome"

# 3. scimcp and the harness, from this tree.
say "building bin/scimcp and scimcp-bench"
(cd "$ROOT" && go build -o bin/scimcp ./cmd/scimcp && go build -o "$SCRATCH/scimcp-bench" ./cmd/scimcp-bench)

# 4. The three servers. scimcp gets a fresh --data folder per process ({tmp}).
#    A second scimcp configuration, "scimcp+sources", runs only tool_search
#    and proxied_call: its upstream sources are the filesystem server on the
#    fixtures ("peer") and 1,000 stand-in tools ("many", scimcp-bench
#    -fake-upstream 1000). The plain scimcp has no sources, so that no
#    upstream process starts beside it in the other scenarios.
cat >"$SCRATCH/sources.json" <<EOF
{
  "mcpServers": {
    "peer": {"command": "$NODE", "args": ["$FS_MAIN", "$FIXTURES"], "env": {"PATH": "$SERVER_PATH"}},
    "many": {"command": "$SCRATCH/scimcp-bench", "args": ["-fake-upstream", "1000"]}
  }
}
EOF
cat >"$SCRATCH/servers.json" <<EOF
{
  "baseline": "scimcp",
  "servers": [
    {
      "name": "scimcp",
      "command": ["$ROOT/bin/scimcp", "serve", "--workspace", "{fixtures}", "--data", "{tmp}"],
      "env": {"PATH": "$SERVER_PATH"},
      "scenarios": {
        "tool_search": {"unsupported": "needs upstream sources: see scimcp+sources"},
        "proxied_call": {"unsupported": "needs upstream sources: see scimcp+sources"}
      }
    },
    {
      "name": "scimcp+sources",
      "command": ["$ROOT/bin/scimcp", "serve", "--workspace", "{fixtures}", "--data", "{tmp}", "--sources", "$SCRATCH/sources.json"],
      "env": {"PATH": "$SERVER_PATH"},
      "only": ["tool_search", "proxied_call"]
    },
    {
      "name": "filesystem",
      "command": ["$NODE", "$FS_MAIN", "{fixtures}"],
      "env": {"PATH": "$SERVER_PATH"}
    },
    {
      "name": "desktop-commander",
      "command": ["$NODE", "$DC_MAIN", "--no-onboarding"],
      "env": {
        "PATH": "$SERVER_PATH",
        "HOME": "$DC_HOME",
        "DESKTOP_COMMANDER_DISABLE_TELEMETRY": "1",
        "DC_FLAG_URL": "http://127.0.0.1:9/flags.json"
      }
    }
  ]
}
EOF

# 5. One run, all three servers, alternating per repetition.
LABEL="scimcp $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '(no git)'); server-filesystem $FS_VERSION; desktop-commander $DC_VERSION; node $("$NODE" --version)"
say "running; results in $SCRATCH/results.{txt,json,md}"
set -x
"$SCRATCH/scimcp-bench" -config "$SCRATCH/servers.json" -out "$WORK" -label "$LABEL" \
	-json "$SCRATCH/results.json" -md "$SCRATCH/results.md" "$@" | tee "$SCRATCH/results.txt"
