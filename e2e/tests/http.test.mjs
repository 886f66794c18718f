// scimcp over Streamable HTTP (stateful sessions on /mcp), driven by the
// SDK's StreamableHTTPClientTransport and by raw fetch for header checks.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import {
  CLIENT_INFO,
  INITIALIZE,
  connectHttp,
  connectStdio,
  exitWithin,
  freePort,
  makeDirs,
  put,
  rawPost,
  startHttp,
  textOf,
} from '../lib/harness.mjs';

const T = { timeout: 30_000 };

test('HTTP: initialize, tools/list, list_files and read_file over a session', T, async (t) => {
  const dirs = await makeDirs(t);
  await put(dirs.workspace, 'notes/a.md', '# A\nbody\n');
  await put(dirs.workspace, 'b.txt', '0123456789');
  await put(dirs.root, 'outside.txt', 'OUTSIDE-SECRET\n');
  const srv = await startHttp(t, dirs);
  const { client, transport } = await connectHttp(t, srv.url);

  assert.ok(transport.sessionId, 'server did not assign an Mcp-Session-Id');
  assert.ok(SUPPORTED_PROTOCOL_VERSIONS.includes(transport.protocolVersion), `odd protocol version ${transport.protocolVersion}`);
  assert.ok(transport.protocolVersion <= '2025-11-25', `protocol ${transport.protocolVersion} is newer than 2025-11-25`);

  const { tools } = await client.listTools();
  const names = tools.map((x) => x.name);
  assert.ok(names.includes('list_files') && names.includes('read_file'), `tools: ${names}`);

  const list = await client.callTool({ name: 'list_files', arguments: {} });
  assert.notEqual(list.isError, true, textOf(list));
  const byPath = Object.fromEntries(list.structuredContent.entries.map((e) => [e.path, e]));
  assert.equal(byPath['b.txt']?.size, 10);
  assert.equal(byPath['notes/a.md']?.size, 9);
  assert.equal(byPath.notes?.type, 'dir');

  const read = await client.callTool({ name: 'read_file', arguments: { path: 'notes/a.md', offset: 1 } });
  assert.notEqual(read.isError, true, textOf(read));
  assert.equal(read.structuredContent.content, 'body\n');
  assert.equal(read.structuredContent.eof, true);

  const esc = await client.callTool({ name: 'read_file', arguments: { path: '../outside.txt' } });
  assert.equal(esc.isError, true);
  assert.ok(!JSON.stringify(esc).includes('OUTSIDE-SECRET'));

  await client.ping();

  // Version negotiation: a known version is echoed, an unknown future one gets the server's own.
  for (const [offered, expect] of [['2025-06-18', '2025-06-18'], ['2099-01-01', null]]) {
    const r = await rawPost(srv.url, { ...INITIALIZE, params: { ...INITIALIZE.params, protocolVersion: offered } });
    assert.equal(r.status, 200);
    const body = await readJsonOrSse(r);
    const got = body.result?.protocolVersion;
    if (expect) assert.equal(got, expect, `offered ${offered}`);
    else assert.ok(SUPPORTED_PROTOCOL_VERSIONS.includes(got) && got <= '2025-11-25', `offered ${offered}, got ${got}`);
  }
});

/** Parses a POST answer that is either application/json or a one-message SSE stream. */
async function readJsonOrSse(res) {
  const text = await res.text();
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const data = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
    return JSON.parse(data[0]);
  }
  return JSON.parse(text);
}

test('HTTP: requests from a foreign browser Origin are refused (DNS rebinding / CSRF)', T, async (t) => {
  const dirs = await makeDirs(t);
  const srv = await startHttp(t, dirs);
  for (const origin of [`http://127.0.0.1:${srv.port}`, `http://localhost:${srv.port}`]) {
    const ok = await rawPost(srv.url, INITIALIZE, { Origin: origin });
    await ok.body?.cancel();
    assert.equal(ok.status, 200, `loopback Origin ${origin} must be accepted`);
  }
  const evil = await rawPost(srv.url, INITIALIZE, { Origin: 'http://evil.example.com' });
  await evil.body?.cancel();
  assert.equal(evil.status, 403, 'Origin: http://evil.example.com must get 403 (MCP 2025-11-25 transports: servers MUST validate Origin)');
  assert.equal(evil.headers.get('mcp-session-id'), null, 'a refused Origin must not open a session');
});

test('HTTP: SIGTERM stops the server promptly after clients came and went', T, async (t) => {
  const dirs = await makeDirs(t);
  const srv = await startHttp(t, dirs);
  for (let i = 0; i < 2; i++) {
    const transport = new StreamableHTTPClientTransport(new URL(srv.url));
    const client = new Client(CLIENT_INFO);
    await client.connect(transport);
    await client.listTools();
    await client.close(); // what hosts do: the GET stream is dropped, no DELETE
  }
  await new Promise((r) => setTimeout(r, 200));
  srv.handle.proc.kill('SIGTERM');
  const exit = await exitWithin(srv.handle.exited, 2000);
  assert.ok(exit, `scimcp still running 2 s after SIGTERM\n${srv.stderr().split('\n').slice(-5).join('\n')}`);
  assert.equal(exit.code, 0);
});

test('HTTP: --token-file requires the bearer token on every request', T, async (t) => {
  const dirs = await makeDirs(t);
  await put(dirs.workspace, 'x.txt', 'x\n');
  const TOKEN = 'e2e-token-Zq81xV3c';
  const tokenFile = path.join(dirs.root, 'token');
  await writeFile(tokenFile, `  ${TOKEN}\n`, { mode: 0o600 }); // surrounding whitespace is trimmed
  const srv = await startHttp(t, { ...dirs, args: ['--token-file', tokenFile] });

  const noAuth = await rawPost(srv.url, INITIALIZE);
  assert.equal(noAuth.status, 401, 'POST without Authorization');
  assert.equal(noAuth.headers.get('mcp-session-id'), null, '401 must not open a session');
  assert.match(noAuth.headers.get('www-authenticate') ?? '', /^Bearer\b/, '401 must carry WWW-Authenticate: Bearer (RFC 6750)');
  await noAuth.body?.cancel();
  for (const auth of [`Bearer wrong-${TOKEN}`, `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, TOKEN, `Basic ${TOKEN}`, 'Bearer ']) {
    const r = await rawPost(srv.url, INITIALIZE, { Authorization: auth });
    assert.equal(r.status, 401, `Authorization: ${JSON.stringify(auth)} must be refused`);
    await r.body?.cancel();
  }
  const get = await fetch(srv.url, { method: 'GET', headers: { Accept: 'text/event-stream' } });
  await get.body?.cancel();
  assert.equal(get.status, 401, 'GET without token');
  const del = await fetch(srv.url, { method: 'DELETE' });
  await del.body?.cancel();
  assert.equal(del.status, 401, 'DELETE without token');

  const good = await rawPost(srv.url, INITIALIZE, { Authorization: `Bearer ${TOKEN}` });
  assert.equal(good.status, 200, 'POST with the right token');
  assert.ok(good.headers.get('mcp-session-id'), 'initialize with the right token opens a session');
  await good.body?.cancel();

  // A session id alone is not a credential.
  const sid = good.headers.get('mcp-session-id');
  const hijack = await rawPost(srv.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'Mcp-Session-Id': sid, 'Mcp-Protocol-Version': '2025-06-18' });
  assert.equal(hijack.status, 401, 'request with a valid session id but no token');

  await assert.rejects(connectHttp(t, srv.url), 'SDK client without token must fail to connect');

  const { client } = await connectHttp(t, srv.url, { token: TOKEN });
  const res = await client.callTool({ name: 'read_file', arguments: { path: 'x.txt' } });
  assert.notEqual(res.isError, true, textOf(res));
  assert.equal(res.structuredContent.content, 'x\n');

  assert.ok(!srv.stderr().includes(TOKEN), 'the token appears in the server log');
});

test('HTTP: the bearer auth scheme is case-insensitive', T, async (t) => {
  const dirs = await makeDirs(t);
  const TOKEN = 'e2e-token-case-0123456789';
  const tokenFile = path.join(dirs.root, 'token');
  await writeFile(tokenFile, TOKEN, { mode: 0o600 });
  const srv = await startHttp(t, { ...dirs, args: ['--token-file', tokenFile] });
  // RFC 9110 section 11.1: the scheme token is case-insensitive; some clients send "bearer".
  for (const scheme of ['bearer', 'BEARER']) {
    const r = await rawPost(srv.url, INITIALIZE, { Authorization: `${scheme} ${TOKEN}` });
    await r.body?.cancel();
    assert.equal(r.status, 200, `Authorization: ${scheme} <token> must be accepted`);
  }
});

test('HTTP: concurrent clients get separate sessions', T, async (t) => {
  const dirs = await makeDirs(t);
  const lines = Array.from({ length: 3000 }, (_, i) => `row ${i}`).join('\n') + '\n';
  await put(dirs.workspace, 'rows.txt', lines);
  const srv = await startHttp(t, dirs);

  const [a, b] = await Promise.all([connectHttp(t, srv.url), connectHttp(t, srv.url)]);
  assert.ok(a.transport.sessionId && b.transport.sessionId);
  assert.notEqual(a.transport.sessionId, b.transport.sessionId, 'two clients share a session id');

  await Promise.all([a.client.listTools(), b.client.listTools()]);
  const calls = [];
  for (let i = 0; i < 6; i++) {
    const c = i % 2 ? a.client : b.client;
    calls.push(c.callTool({ name: 'read_file', arguments: { path: 'rows.txt', offset: i * 400, limit: 3 } }));
  }
  const results = await Promise.all(calls);
  results.forEach((r, i) => {
    assert.notEqual(r.isError, true, textOf(r));
    assert.equal(r.structuredContent.content, `row ${i * 400}\nrow ${i * 400 + 1}\nrow ${i * 400 + 2}\n`);
  });

  // Ending one session leaves the other alone; the ended id is no longer accepted.
  const endedId = a.transport.sessionId;
  await a.transport.terminateSession();
  await b.client.ping();
  const stale = await rawPost(srv.url, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, { 'Mcp-Session-Id': endedId, 'Mcp-Protocol-Version': '2025-06-18' });
  assert.equal(stale.status, 404, 'a terminated session id must get 404');
  await stale.body?.cancel();

  const bogus = await rawPost(srv.url, { jsonrpc: '2.0', id: 10, method: 'tools/list' }, { 'Mcp-Session-Id': 'not-a-session', 'Mcp-Protocol-Version': '2025-06-18' });
  assert.ok(bogus.status === 404 || bogus.status === 400, `unknown session id got ${bogus.status}`);
  await bogus.body?.cancel();
});

test('--stdio --http serves both transports from one process', T, async (t) => {
  const dirs = await makeDirs(t);
  await put(dirs.workspace, 'both.txt', 'both\n');
  const port = await freePort();
  const stdio = await connectStdio(t, { ...dirs, args: ['--stdio', '--http', `127.0.0.1:${port}`] });
  const url = `http://127.0.0.1:${port}/mcp`;
  let http;
  for (let i = 0; ; i++) {
    try {
      http = await connectHttp(t, url);
      break;
    } catch (err) {
      if (i > 100) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const [r1, r2] = await Promise.all([
    stdio.client.callTool({ name: 'read_file', arguments: { path: 'both.txt' } }),
    http.client.callTool({ name: 'read_file', arguments: { path: 'both.txt' } }),
  ]);
  assert.equal(r1.structuredContent?.content, 'both\n', textOf(r1));
  assert.equal(r2.structuredContent?.content, 'both\n', textOf(r2));
});
