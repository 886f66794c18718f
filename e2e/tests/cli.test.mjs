// Command-line behaviour: version, refusing unsafe listeners, and the
// single-owner lock on the data folder.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { connectStdio, exitWithin, freePort, makeDirs, onCleanup, spawnBin, stopProc } from '../lib/harness.mjs';

test('scimcp version prints a version and exits 0', { timeout: 15_000 }, async () => {
  const h = spawnBin(['version'], { stdin: 'ignore' });
  const exit = await exitWithin(h.exited, 10_000);
  assert.ok(exit, 'scimcp version did not exit');
  assert.equal(exit.code, 0, h.out.stderr);
  assert.match(h.out.stdout, /\S/, 'version output is empty');
  assert.match(h.out.stdout + h.out.stderr, /scimcp|v?\d+\.\d+|dev|\(devel\)/i);
});

test('listening on a non-loopback address without a token is refused', { timeout: 15_000 }, async (t) => {
  const { workspace, data } = await makeDirs(t);
  const port = await freePort();
  const h = spawnBin(['serve', '--http', `0.0.0.0:${port}`, '--workspace', workspace, '--data', data], { stdin: 'pipe' });
  onCleanup(t, () => stopProc(h));
  const exit = await exitWithin(h.exited, 5000);
  assert.ok(exit, 'server started on 0.0.0.0 without a token instead of refusing');
  assert.notEqual(exit.code, 0);
  assert.match(h.out.stderr, /token/i, `refusal should mention the token: ${h.out.stderr}`);
});

test('a second server on the same data folder fails fast naming the folder and the owner PID', { timeout: 20_000 }, async (t) => {
  const { workspace, data } = await makeDirs(t);
  const first = await connectStdio(t, { workspace, data });
  await first.client.ping(); // the first server is fully up and owns the folder
  const ownerPid = first.transport.pid;
  assert.ok(ownerPid > 0);

  // stdin stays open: the second server must not wait for it (nor for the lock).
  const second = spawnBin(['serve', '--workspace', workspace, '--data', data], { stdin: 'pipe' });
  onCleanup(t, () => stopProc(second));
  const exit = await exitWithin(second.exited, 3000);
  assert.ok(exit, 'second server still running after 3 s');
  assert.notEqual(exit.code, 0, 'second server must exit non-zero');
  assert.ok(exit.ms < 2000, `second server took ${exit.ms} ms to give up`);
  assert.ok(second.out.stderr.includes(data), `message should name ${data}: ${second.out.stderr}`);
  assert.match(second.out.stderr, new RegExp(`\\b${ownerPid}\\b`), `message should name owner PID ${ownerPid}: ${second.out.stderr}`);
  assert.equal(second.out.stdout, '', 'second server wrote to stdout');

  // The owner is unaffected.
  await first.client.ping();
  const { tools } = await first.client.listTools();
  assert.ok(tools.length >= 2);
});

/** Starts a raw stdio server and waits until it has answered initialize (so it owns the data folder). */
async function startRawStdio(workspace, data) {
  const h = spawnBin(['serve', '--workspace', workspace, '--data', data], { stdin: 'pipe' });
  h.proc.stdin.write(
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'e2e', version: '1' } } }) + '\n',
  );
  const deadline = Date.now() + 10_000;
  while (!h.out.stdout.includes('\n')) {
    if (Date.now() > deadline || h.proc.exitCode !== null) throw new Error(`server not ready: ${h.out.stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return h;
}

for (const how of ['stdin closed', 'SIGKILL']) {
  test(`the data folder can be reused once its owner is gone (${how})`, { timeout: 20_000 }, async (t) => {
    const { workspace, data } = await makeDirs(t);
    const h = await startRawStdio(workspace, data);
    onCleanup(t, () => stopProc(h));
    if (how === 'SIGKILL') h.proc.kill('SIGKILL');
    else h.proc.stdin.end();
    const exit = await exitWithin(h.exited, 5000);
    assert.ok(exit, 'first server did not exit');
    if (how !== 'SIGKILL') assert.equal(exit.code, 0, `exit after stdin EOF: ${exit.code}\n${h.out.stderr}`);
    const again = await connectStdio(t, { workspace, data });
    await again.client.ping();
  });
}
