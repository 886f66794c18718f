// Shared helpers for the scimcp end-to-end tests.
//
// Every test gets its own temporary workspace and data folder and spawns its
// own scimcp process, exactly as an MCP host would: over stdio through the
// SDK's StdioClientTransport, or over HTTP through StreamableHTTPClientTransport.

import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, realpath, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const E2E_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Absolute path of the scimcp binary under test (env SCIMCP_BIN, default ../bin/scimcp). */
export const BIN = path.resolve(E2E_DIR, process.env.SCIMCP_BIN || path.join('..', 'bin', 'scimcp'));

if (!existsSync(BIN)) {
  throw new Error(
    `scimcp binary not found at ${BIN}; build it with "go build -o bin/scimcp ./cmd/scimcp" ` +
      'in the repository root or point SCIMCP_BIN at it',
  );
}

export const CLIENT_INFO = { name: 'scimcp-e2e', version: '1.0.0' };

const cleanups = new WeakMap();

/**
 * Registers fn to run after test t, in reverse order of registration (clients
 * close before their server stops, servers stop before their folders go).
 * Every step runs even if an earlier one failed; the first error is rethrown.
 */
export function onCleanup(t, fn) {
  let stack = cleanups.get(t);
  if (!stack) {
    stack = [];
    cleanups.set(t, stack);
    t.after(async () => {
      let first;
      while (stack.length > 0) {
        try {
          await stack.pop()();
        } catch (err) {
          first ??= err;
        }
      }
      if (first) throw first;
    });
  }
  stack.push(fn);
}

/**
 * Creates a fresh temp root holding `workspace/` and `data/` (and room for
 * files "outside" the workspace). Everything is removed after the test.
 * Paths are realpath'd so that /tmp symlinks cannot confuse assertions.
 */
export async function makeDirs(t) {
  const root = await realpath(await mkdtemp(path.join(os.tmpdir(), 'scimcp-e2e-')));
  const workspace = path.join(root, 'workspace');
  const data = path.join(root, 'data');
  await mkdir(workspace);
  await mkdir(data);
  onCleanup(t, () => rm(root, { recursive: true, force: true }));
  return { root, workspace, data };
}

/** Writes a file below `dir`, creating parent folders. */
export async function put(dir, rel, content) {
  const full = path.join(dir, rel);
  await mkdir(path.dirname(full), { recursive: true });
  await writeFile(full, content);
  return full;
}

/**
 * Starts `scimcp serve` over stdio with the SDK client and connects.
 * Returns { client, transport, stderr(), protocolErrors }.
 * Every JSON-RPC framing problem the transport sees (a stdout line that is
 * not a JSON-RPC message) lands in protocolErrors; the close hook asserts it
 * stays empty, so any test fails if stdout carries anything else.
 */
export async function connectStdio(t, { workspace, data, args = [], logLevel = 'debug', capabilities = {}, beforeConnect }) {
  const transport = new StdioClientTransport({
    command: BIN,
    args: ['serve', '--workspace', workspace, '--data', data, '--log-level', logLevel, ...args],
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr.on('data', (chunk) => {
    stderr += chunk.toString();
  });
  const protocolErrors = [];
  const client = new Client(CLIENT_INFO, { capabilities });
  client.onerror = (err) => protocolErrors.push(err);
  if (beforeConnect) beforeConnect(client);
  await client.connect(transport);
  onCleanup(t, async () => {
    await client.close();
    if (protocolErrors.length > 0) {
      throw new Error(
        `stdio transport saw ${protocolErrors.length} protocol error(s): ` +
          protocolErrors.map((e) => e.message).join(' | ') +
          `\n--- server stderr ---\n${stderr}`,
      );
    }
  });
  return { client, transport, stderr: () => stderr, protocolErrors };
}

/** Asks the kernel for a currently free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** The caller's environment without SCIMCP_* settings, so a developer's shell cannot change what is tested. */
export function cleanEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SCIMCP_')));
}

/** Spawns the binary with stdio pipes; collects output; resolves `exited` with {code, signal, ms}. */
export function spawnBin(args, { stdin = 'pipe', env } = {}) {
  const started = Date.now();
  const proc = spawn(BIN, args, {
    stdio: [stdin, 'pipe', 'pipe'],
    env: { ...cleanEnv(), ...env },
  });
  const out = { stdout: '', stderr: '' };
  proc.stdout.on('data', (c) => (out.stdout += c.toString()));
  proc.stderr.on('data', (c) => (out.stderr += c.toString()));
  const exited = new Promise((resolve) => {
    proc.on('error', (err) => resolve({ code: null, signal: null, ms: Date.now() - started, error: err }));
    proc.on('close', (code, signal) => resolve({ code, signal, ms: Date.now() - started }));
  });
  return { proc, out, exited };
}

/** Resolves with the exit info, or with null when the process is still running after `ms`. */
export function exitWithin(exited, ms) {
  return Promise.race([exited, new Promise((r) => setTimeout(() => r(null), ms).unref())]);
}

/** Terminates a spawned process (SIGTERM, then SIGKILL) and waits for it. */
export async function stopProc(handle, graceMs = 3000) {
  if (handle.proc.exitCode !== null || handle.proc.signalCode !== null) return handle.exited;
  handle.proc.kill('SIGTERM');
  const res = await exitWithin(handle.exited, graceMs);
  if (res) return res;
  handle.proc.kill('SIGKILL');
  return handle.exited;
}

/**
 * Starts `scimcp serve --http 127.0.0.1:PORT` and waits until the endpoint
 * answers HTTP. Returns { url, port, handle, stderr() }. Stopped after the test.
 */
export async function startHttp(t, { workspace, data, args = [], logLevel = 'debug' }) {
  let lastErr;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const handle = spawnBin([
      'serve', '--http', `127.0.0.1:${port}`,
      '--workspace', workspace, '--data', data, '--log-level', logLevel, ...args,
    ]);
    const url = `http://127.0.0.1:${port}/mcp`;
    try {
      await waitForHttp(url, handle, 10_000);
    } catch (err) {
      lastErr = err;
      await stopProc(handle);
      if (/address already in use/i.test(handle.out.stderr)) continue; // lost a port race, retry
      throw err;
    }
    onCleanup(t, () => stopProc(handle));
    return { url, port, handle, stderr: () => handle.out.stderr };
  }
  throw lastErr;
}

async function waitForHttp(url, handle, timeoutMs) {
  // A plain TCP connect: an HTTP probe (a GET on /mcp) would itself open an
  // SSE stream or a session on the server under test.
  const { hostname, port } = new URL(url);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (handle.proc.exitCode !== null || handle.proc.signalCode !== null) {
      throw new Error(`scimcp exited early (code ${handle.proc.exitCode})\n--- stderr ---\n${handle.out.stderr}`);
    }
    const up = await new Promise((resolve) => {
      const sock = net.connect({ host: hostname, port: Number(port) });
      sock.once('connect', () => {
        sock.destroy();
        resolve(true);
      });
      sock.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`scimcp did not listen on ${url} within ${timeoutMs} ms\n--- stderr ---\n${handle.out.stderr}`);
}

/**
 * Connects an SDK client over Streamable HTTP; optional bearer token. Closed after the test.
 * With `sessionId` the transport resumes that Mcp-Session-Id (the SDK then skips
 * initialize), as a host does when it reconnects to a restarted server.
 */
export async function connectHttp(t, url, { token, sessionId, capabilities = {}, beforeConnect } = {}) {
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit, sessionId });
  const client = new Client(CLIENT_INFO, { capabilities });
  const errors = [];
  client.onerror = (err) => errors.push(err);
  if (beforeConnect) beforeConnect(client);
  await client.connect(transport);
  onCleanup(t, () => client.close().catch(() => {}));
  return { client, transport, errors };
}

/** All text content of a tool result, joined. */
export function textOf(result) {
  return (result.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/**
 * Calls a tool and returns either { result } or { rpcError } (for servers
 * answering with a JSON-RPC error instead of an isError result).
 */
export async function callToolLoose(client, name, args) {
  try {
    return { result: await client.callTool({ name, arguments: args }) };
  } catch (err) {
    return { rpcError: err };
  }
}

/** Raw JSON-RPC POST (no SDK) used for header-level checks. */
export function rawPost(url, body, headers = {}) {
  return fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

export const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: CLIENT_INFO },
};
