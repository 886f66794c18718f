// stdio framing without the SDK: every byte on stdout must belong to a
// newline-delimited JSON-RPC 2.0 message, logs go to stderr, and closing
// stdin ends the server cleanly.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { CLIENT_INFO, exitWithin, makeDirs, onCleanup, put, spawnBin, stopProc } from '../lib/harness.mjs';

test('stdout carries only JSON-RPC frames, logs go to stderr, EOF on stdin exits 0', { timeout: 30_000 }, async (t) => {
  const { workspace, data } = await makeDirs(t);
  await put(workspace, 'a.txt', 'alpha\nbeta\n');
  const h = spawnBin(['serve', '--workspace', workspace, '--data', data, '--log-level', 'debug']);
  onCleanup(t, () => stopProc(h));

  const send = (msg) => h.proc.stdin.write(JSON.stringify(msg) + '\n');
  const waitFor = async (id) => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const frames = h.out.stdout.split('\n').filter((l) => l.length > 0);
      for (const line of frames) {
        try {
          const m = JSON.parse(line);
          if (m.id === id) return m;
        } catch {
          /* checked below */
        }
      }
      if (h.proc.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`no response with id ${id}; stdout=${JSON.stringify(h.out.stdout)} stderr=${h.out.stderr}`);
  };

  send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: CLIENT_INFO } });
  const init = await waitFor(1);
  assert.ok(init.result, `initialize failed: ${JSON.stringify(init)}`);
  assert.equal(init.result.protocolVersion, '2025-06-18', 'server should accept the offered 2025-06-18 version');
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
  await waitFor(2);
  send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'a.txt' } } });
  const read = await waitFor(3);
  assert.equal(read.result?.structuredContent?.content, 'alpha\nbeta\n');
  send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'read_file', arguments: { path: '../nope' } } });
  await waitFor(4);
  send({ jsonrpc: '2.0', id: 5, method: 'no/such/method' });
  const unknown = await waitFor(5);
  assert.equal(unknown.error?.code, -32601, `unknown method should be -32601, got ${JSON.stringify(unknown)}`);
  // A broken line must not kill the server or pollute stdout with non-JSON.
  h.proc.stdin.write('this is not json\n');
  send({ jsonrpc: '2.0', id: 6, method: 'ping' });
  const pong = await waitFor(6);
  assert.deepEqual(pong.result, {});

  h.proc.stdin.end();
  const exit = await exitWithin(h.exited, 5000);
  assert.ok(exit, 'server did not exit within 5 s after stdin closed');
  assert.equal(exit.code, 0, `exit code after EOF: ${exit.code} signal ${exit.signal}\n${h.out.stderr}`);

  assert.ok(h.out.stdout.endsWith('\n'), 'stdout must end with a complete line');
  const lines = h.out.stdout.split('\n').slice(0, -1);
  for (const line of lines) {
    let m;
    assert.doesNotThrow(() => (m = JSON.parse(line)), `non-JSON line on stdout: ${JSON.stringify(line.slice(0, 200))}`);
    assert.equal(m.jsonrpc, '2.0', `not a JSON-RPC 2.0 frame: ${line.slice(0, 200)}`);
    assert.ok('id' in m || 'method' in m, `frame without id or method: ${line.slice(0, 200)}`);
  }
  assert.ok(h.out.stderr.trim().length > 0, 'with --log-level debug the server should log something to stderr');
});
