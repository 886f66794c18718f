// Upstream MCP sources: the official "everything" reference server, once
// over stdio and once over streamable HTTP, behind scimcp's tool_search.
// tools/list stays small (deferred placeholders), tool_search finds and
// promotes tools for the searching session only, and calls go through to
// both sources, marked as untrusted external data.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { E2E_DIR, connectStdio, freePort, makeDirs, onCleanup, put, textOf } from '../lib/harness.mjs';

const T = { timeout: 60_000 };
const EVERYTHING = path.join(E2E_DIR, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Starts the everything server's streamable HTTP transport; resolves its URL (and process) once it listens. */
async function everythingHttp(t, port) {
  port ??= await freePort();
  const proc = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  onCleanup(t, () => proc.kill('SIGKILL'));
  let err = '';
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`everything server did not start: ${err}`)), 15_000);
    proc.stderr.on('data', (d) => {
      err += d;
      if (err.includes('listening on port')) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.on('exit', (code) => reject(new Error(`everything server exited ${code}: ${err}`)));
  });
  const url = `http://127.0.0.1:${port}/mcp`;
  everythingHttp.procs.set(url, proc);
  return url;
}
everythingHttp.procs = new Map();

async function waitForTool(client, name) {
  for (let i = 0; i < 100; i++) {
    const { tools } = await client.listTools();
    if (tools.some((t) => t.name === name)) return tools;
    await sleep(100);
  }
  throw new Error(`tool ${name} never appeared`);
}

test('everything over stdio and HTTP: deferred listing, tool_search promotion, calls', T, async (t) => {
  const url = await everythingHttp(t);
  const dirs = await makeDirs(t);
  const sourcesFile = await put(dirs.root, 'sources.json', JSON.stringify({
    mcpServers: {
      'ev-stdio': { command: process.execPath, args: [EVERYTHING, 'stdio'] },
      'ev-http': { type: 'http', url },
    },
  }));
  const a = await connectStdio(t, { ...dirs, args: ['--sources', sourcesFile] });
  const tools = await waitForTool(a.client, 'mcp__ev-http__echo');
  await waitForTool(a.client, 'mcp__ev-stdio__echo');

  // Deferred: name and one line only, a placeholder schema, marked in _meta.
  const deferred = tools.filter((t) => t.name.startsWith('mcp__'));
  assert.ok(deferred.length >= 10, `expected the everything tools from two sources, got ${deferred.length}`);
  for (const tool of deferred) {
    assert.equal(tool._meta?.['scimcp/deferred'], true, `${tool.name} is not marked deferred`);
    assert.deepEqual(Object.keys(tool.inputSchema.properties ?? {}), [], `${tool.name} exposes parameters before tool_search`);
  }
  assert.ok(tools.some((t) => t.name === 'tool_search'));

  // tool_search finds echo in both sources and promotes them.
  const found = await a.client.callTool({ name: 'tool_search', arguments: { query: 'echo message back', limit: 4 } });
  assert.notEqual(found.isError, true, textOf(found));
  const names = found.structuredContent.tools.map((x) => x.name);
  assert.ok(names.includes('mcp__ev-stdio__echo') && names.includes('mcp__ev-http__echo'), `tool_search returned ${names}`);
  const promoted = (await a.client.listTools()).tools.find((x) => x.name === 'mcp__ev-http__echo');
  assert.ok(promoted.inputSchema.properties?.message, `promoted echo lacks its schema: ${JSON.stringify(promoted.inputSchema)}`);

  for (const name of ['mcp__ev-stdio__echo', 'mcp__ev-http__echo']) {
    const res = await a.client.callTool({ name, arguments: { message: `hello via ${name}` } });
    assert.notEqual(res.isError, true, textOf(res));
    assert.match(textOf(res), new RegExp(`hello via ${name}`));
    assert.match(textOf(res), /untrusted result from MCP source/);
    assert.ok(res._meta?.['scimcp/untrusted']?.mcpInvocationId?.startsWith('inv_'), JSON.stringify(res._meta));
  }

  // A call with wrong arguments is refused with the schema's complaint.
  const bad = await a.client.callTool({ name: 'mcp__ev-stdio__echo', arguments: { msg: 'x' } });
  assert.equal(bad.isError, true);
});

/** Calls a tool until it succeeds; returns the result and how many calls failed first. */
async function untilOk(client, name, args, ms) {
  const deadline = Date.now() + ms;
  let failed = 0;
  let last;
  while (Date.now() < deadline) {
    last = await client.callTool({ name, arguments: args });
    if (last.isError !== true) return { res: last, failed };
    failed++;
    await sleep(200);
  }
  assert.fail(`${name} never succeeded within ${ms} ms; last: ${textOf(last)}`);
}

/** PIDs of processes whose command line contains marker. */
function pidsWith(marker) {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(marker)) out.push(Number(d));
    } catch { /* gone */ }
  }
  return out;
}

test('calls survive an upstream restart: a killed stdio source is restarted, a restarted HTTP source gets a new session', T, async (t) => {
  const dirs = await makeDirs(t);
  const url = await everythingHttp(t);
  const port = Number(new URL(url).port);
  // A unique argument marks the stdio source's process.
  const marker = `stdio-restart-${process.pid}-${Date.now()}`;
  const sourcesFile = await put(dirs.root, 'sources.json', JSON.stringify({
    mcpServers: {
      'ev-stdio': { command: process.execPath, args: [EVERYTHING, 'stdio', marker] },
      'ev-http': { type: 'http', url },
    },
  }));
  const a = await connectStdio(t, { ...dirs, args: ['--sources', sourcesFile] });
  await waitForTool(a.client, 'mcp__ev-http__echo');
  await waitForTool(a.client, 'mcp__ev-stdio__echo');
  await a.client.callTool({ name: 'tool_search', arguments: { query: 'select:mcp__ev-stdio__echo,mcp__ev-http__echo' } });
  for (const name of ['mcp__ev-stdio__echo', 'mcp__ev-http__echo']) {
    const res = await a.client.callTool({ name, arguments: { message: 'before' } });
    assert.notEqual(res.isError, true, textOf(res));
  }

  // The stdio source dies: its tools fail with a clear error, then work again.
  const pids = pidsWith(marker);
  assert.equal(pids.length, 1, `expected one stdio source process, found ${pids}`);
  process.kill(pids[0], 'SIGKILL');
  const { res: again } = await untilOk(a.client, 'mcp__ev-stdio__echo', { message: 'after stdio restart' }, 30_000);
  assert.match(textOf(again), /after stdio restart/);
  const fresh = pidsWith(marker);
  assert.equal(fresh.length, 1);
  assert.notEqual(fresh[0], pids[0], 'the source was not restarted');
  // The other source never noticed.
  const other = await a.client.callTool({ name: 'mcp__ev-http__echo', arguments: { message: 'unaffected' } });
  assert.notEqual(other.isError, true, textOf(other));

  // The HTTP source restarts (its old session is gone): while it is down
  // calls fail with a clear error; once it is back they work again, and the
  // tool stays promoted in this session.
  everythingHttp.procs.get(url).kill('SIGKILL');
  await sleep(300);
  const down = await a.client.callTool({ name: 'mcp__ev-http__echo', arguments: { message: 'while down' } });
  assert.equal(down.isError, true, 'a call to a dead source must fail');
  assert.match(textOf(down), /ev-http/);
  await everythingHttp(t, port);
  const { res: back } = await untilOk(a.client, 'mcp__ev-http__echo', { message: 'after http restart' }, 30_000);
  assert.match(textOf(back), /after http restart/);
  const listed = (await a.client.listTools()).tools.find((x) => x.name === 'mcp__ev-http__echo');
  assert.ok(listed.inputSchema.properties?.message, 'the promotion was lost across the source restart');
  // The server itself stayed up throughout.
  const ping = await a.client.callTool({ name: 'list_files', arguments: {} });
  assert.notEqual(ping.isError, true);
});
