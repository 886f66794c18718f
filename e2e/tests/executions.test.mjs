// Executions: run_shell round trips (stdio and HTTP), following a running
// command with execution_logs, cancelling it, progress notifications, the
// bubblewrap sandbox (read-only system folders, no data folder, no network),
// and executions that were running when the server was killed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

import { connectHttp, connectStdio, makeDirs, onCleanup, put, startHttp, textOf } from '../lib/harness.mjs';

const T = { timeout: 30_000 };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const marker = (what) => `e2e-${what}-${randomBytes(6).toString('hex')}`;

/** Calls a tool that must succeed; returns its structuredContent. */
async function ok(client, name, args = {}, options) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  assert.notEqual(res.isError, true, `${name}(${JSON.stringify(args)}) failed: ${textOf(res)}`);
  assert.ok(res.structuredContent, `${name} returned no structuredContent: ${JSON.stringify(res).slice(0, 400)}`);
  return res.structuredContent;
}

/** Connects over stdio and lists tools, so the SDK checks every structuredContent against its schema. */
async function stdio(t, populate) {
  const dirs = await makeDirs(t);
  if (populate) await populate(dirs);
  const conn = await connectStdio(t, dirs);
  await conn.client.listTools();
  return { ...dirs, ...conn };
}

/** PIDs of live processes whose command line contains `text` (zombies excluded). */
function processesWith(text) {
  const found = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text)) continue;
      if (/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))) continue;
      found.push(Number(pid));
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}

/** Waits until no live process carries `text` in its command line; returns the PIDs still left after timeoutMs. */
async function processesGone(text, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let left = processesWith(text);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(100);
    left = processesWith(text);
  }
  return left;
}

/** Kills processes this test started (found by its marker) that outlived what should have stopped them. */
function killLeftovers(pids) {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

async function echoRoundTrip(client) {
  const hi = await ok(client, 'run_shell', { command: 'echo hi' });
  assert.match(hi.execution_id, /^exec_[0-9a-f]{16}$/);
  assert.equal(hi.state, 'succeeded');
  assert.equal(hi.exit_code, 0);
  assert.equal(hi.output, 'hi\n');
  assert.equal(hi.output_complete, true);
  assert.equal(hi.log_bytes, 3);
  assert.equal(hi.next_cursor, 3);

  // Exit codes, both streams in the output, stderr alone on request, arguments as $1.
  const mixed = await ok(client, 'run_shell', { command: 'echo "out:$1"; echo "err:$1" >&2; exit 3', arguments: ['a b'] });
  assert.equal(mixed.state, 'failed');
  assert.equal(mixed.exit_code, 3);
  assert.ok(mixed.output.includes('out:a b\n') && mixed.output.includes('err:a b\n'), JSON.stringify(mixed.output));
  const err = await ok(client, 'execution_logs', { execution_id: mixed.execution_id, stream: 'stderr' });
  assert.equal(err.text, 'err:a b\n');
  assert.equal(err.more, false);

  const st = await ok(client, 'execution_status', { execution_id: hi.execution_id });
  assert.equal(st.execution?.state, 'succeeded');
  assert.equal(st.execution?.exit_code, 0);
  const list = await ok(client, 'execution_status', {});
  assert.deepEqual(list.executions.map((e) => e.execution_id), [mixed.execution_id, hi.execution_id], 'newest first, this session only');
}

test('stdio: echo hi round trip', T, async (t) => {
  const { client } = await stdio(t);
  await echoRoundTrip(client);
});

test('HTTP: echo hi round trip', T, async (t) => {
  const dirs = await makeDirs(t);
  const srv = await startHttp(t, dirs);
  const { client } = await connectHttp(t, srv.url);
  await client.listTools();
  await echoRoundTrip(client);
  // Another session neither lists nor reads these executions.
  const other = await connectHttp(t, srv.url);
  await other.client.listTools();
  const list = await ok(other.client, 'execution_status', {});
  assert.equal(list.executions?.length ?? 0, 0, `a fresh session sees executions: ${JSON.stringify(list)}`);
  const { executions } = await ok(client, 'execution_status', {});
  for (const [name, args] of [['execution_logs', { cursor: 0 }], ['execution_status', {}], ['execution_cancel', {}]]) {
    const res = await other.client.callTool({ name, arguments: { execution_id: executions[0].execution_id, ...args } });
    assert.equal(res.isError, true, `another session used ${name} on this session's execution: ${JSON.stringify(res).slice(0, 400)}`);
    assert.ok(!JSON.stringify(res).includes('out:a b'), `${name} leaked the output to another session`);
  }
});

test('a long command returns running; execution_logs follows it live; cancel kills it and is idempotent', T, async (t) => {
  const { client } = await stdio(t);
  const tag = marker('loop');
  const command = `: ${tag}; for i in $(seq 1 50); do echo step $i; sleep 0.2; done`;

  const t0 = Date.now();
  const start = await ok(client, 'run_shell', { command, wait_ms: 300 });
  const took = Date.now() - t0;
  assert.equal(start.state, 'running', JSON.stringify(start));
  assert.ok(took < 3000, `run_shell with wait_ms 300 took ${took} ms`);
  assert.equal(start.exit_code, undefined);
  assert.equal(start.output, undefined, 'no output is inlined while running');
  const id = start.execution_id;
  onCleanup(t, async () => killLeftovers(processesWith(tag)));

  // Follow the log with cursor + wait_ms: chunks arrive while the command still runs.
  let cursor = 0;
  let seen = '';
  const live = [];
  const deadline = Date.now() + 8000;
  while (live.length < 3 && Date.now() < deadline) {
    const chunk = await ok(client, 'execution_logs', { execution_id: id, cursor, wait_ms: 3000 });
    assert.equal(chunk.cursor, cursor);
    assert.equal(chunk.next_cursor, cursor + Buffer.byteLength(chunk.text), 'next_cursor must advance by the bytes returned');
    if (chunk.text !== '') {
      assert.equal(chunk.state, 'running', `the loop ended early: ${JSON.stringify(chunk)}`);
      assert.equal(chunk.more, true);
      live.push(chunk.text);
    }
    seen += chunk.text;
    cursor = chunk.next_cursor;
  }
  assert.ok(live.length >= 2, `expected at least 2 non-empty chunks while running, got ${JSON.stringify(live)}`);
  assert.match(seen, /^step 1\r?\nstep 2\r?\n/, `log does not start with the first steps: ${JSON.stringify(seen)}`);
  const steps = seen.match(/step \d+/g);
  assert.deepEqual(steps, steps.map((_, i) => `step ${i + 1}`), 'steps arrived out of order or duplicated');

  const c0 = Date.now();
  const cancel = await ok(client, 'execution_cancel', { execution_id: id });
  assert.equal(cancel.state, 'cancelled', JSON.stringify(cancel));
  assert.equal(cancel.already_finished, false);
  assert.ok(Date.now() - c0 < 5000, `cancel took ${Date.now() - c0} ms`);

  // It is really gone: no process left, and the log stops growing.
  const left = await processesGone(tag, 4000);
  assert.deepEqual(left, [], `processes of the cancelled loop still run: ${left}`);
  const before = (await ok(client, 'execution_status', { execution_id: id })).execution;
  assert.equal(before.state, 'cancelled');
  await sleep(700); // more than 3 loop iterations
  const after = (await ok(client, 'execution_status', { execution_id: id })).execution;
  assert.equal(after.log_bytes, before.log_bytes, 'the log grew after cancel');
  const whole = Array.from({ length: 50 }, (_, i) => `step ${i + 1}\n`).join('').length;
  assert.ok(before.log_bytes < whole, `the loop ran to the end (${before.log_bytes} of ${whole} bytes)`);
  const tail = await ok(client, 'execution_logs', { execution_id: id, cursor });
  assert.equal(tail.more, false);
  assert.equal(tail.state, 'cancelled');
  assert.ok(!/step 50\b/.test(seen + tail.text), 'the loop ran to the end');

  const again = await ok(client, 'execution_cancel', { execution_id: id });
  assert.equal(again.already_finished, true, JSON.stringify(again));
  assert.equal(again.state, 'cancelled');
  assert.equal(again.ended, cancel.ended, 'a second cancel must change nothing');
});

test('sandbox: /usr and /etc are read-only and writes to them never reach the host', T, async (t) => {
  const { client } = await stdio(t);
  const name = marker('write');
  const hostFiles = [`/usr/${name}`, `/etc/${name}`];
  onCleanup(t, async () => {
    for (const f of hostFiles) await rm(f, { force: true }); // only if the sandbox leaked them
  });
  const res = await ok(client, 'run_shell', {
    command: 'echo x > "/usr/$1"; echo "usr=$?"; echo x > "/etc/$1"; echo "etc=$?"; cat "/etc/$1" 2>/dev/null; echo "etc-read=$?"',
    arguments: [name],
  });
  assert.ok(['succeeded', 'failed'].includes(res.state), JSON.stringify(res));
  for (const f of hostFiles) assert.equal(existsSync(f), false, `${f} appeared on the host`);
  const out = res.output;
  const rc = (k) => Number(out.match(new RegExp(`^${k}=(\\d+)`, 'm'))?.[1]);
  assert.notEqual(rc('usr'), 0, `writing /usr/${name} succeeded in the sandbox:\n${out}`);
  assert.notEqual(rc('etc'), 0, `writing /etc/${name} succeeded in the sandbox (run_shell promises read-only system folders):\n${out}`);
});

test('sandbox: the server\'s data folder is not readable', T, async (t) => {
  const SECRET = marker('data-secret');
  const { client, data } = await stdio(t, async ({ data }) => put(data, 'e2e-secret.txt', `${SECRET}\n`));
  await ok(client, 'run_shell', { command: 'echo warm' }); // the data folder now also holds executions and state
  const secret = path.join(data, 'e2e-secret.txt');
  const cat = await ok(client, 'run_shell', { command: 'cat "$1"', arguments: [secret] });
  assert.equal(cat.state, 'failed', `cat of ${secret} did not fail: ${JSON.stringify(cat)}`);
  assert.notEqual(cat.exit_code, 0);
  assert.ok(!cat.output.includes(SECRET), 'the data folder leaked into the sandbox');
  const ls = await ok(client, 'run_shell', { command: 'ls -la "$1"', arguments: [data] });
  assert.equal(ls.state, 'failed', `the data folder is listable in the sandbox: ${ls.output}`);
  assert.ok(!/state\.db|e2e-secret/.test(ls.output), ls.output);
});

test('sandbox: no connection to a loopback TCP listener of the host', T, async (t) => {
  const { client } = await stdio(t);
  let connections = 0;
  const listener = net.createServer((sock) => {
    connections++;
    sock.end('HELLO-FROM-HOST\n');
  });
  await new Promise((r) => listener.listen(0, '127.0.0.1', r));
  onCleanup(t, () => new Promise((r) => listener.close(r)));
  const { port } = listener.address();
  const probe = 'exec 3<>"/dev/tcp/127.0.0.1/$1" && echo CONNECTED && head -n1 <&3';

  // Control: the very same probe does connect from the host, so a failure below is the sandbox's doing.
  const host = await new Promise((resolve) => execFile('bash', ['-c', probe, 'probe', String(port)], { timeout: 5000 }, (err, stdout) => resolve(stdout)));
  assert.match(host, /CONNECTED\nHELLO-FROM-HOST/, 'control: the probe cannot connect even from the host');
  await sleep(100);
  const base = connections;
  assert.ok(base >= 1);

  const res = await ok(client, 'run_shell', { command: probe, arguments: [String(port)], wait_ms: 15000 });
  assert.equal(res.state, 'failed', `the sandbox reached 127.0.0.1:${port}: ${JSON.stringify(res)}`);
  assert.ok(!res.output.includes('CONNECTED') && !res.output.includes('HELLO-FROM-HOST'), res.output);
  await sleep(200);
  assert.equal(connections, base, 'the listener saw a connection from the sandbox');
});

test('run_shell sends progress notifications while it waits for a 2.5 s command', T, async (t) => {
  const { client } = await stdio(t);
  const progress = [];
  const res = await ok(client, 'run_shell', { command: 'sleep 2.5; echo done' }, { onprogress: (p) => progress.push(p) });
  assert.equal(res.state, 'succeeded');
  assert.equal(res.output, 'done\n');
  assert.ok(progress.length >= 2, `expected progress about every second, got ${JSON.stringify(progress)}`);
  for (let i = 1; i < progress.length; i++) {
    assert.ok(progress[i].progress > progress[i - 1].progress, `progress must increase: ${JSON.stringify(progress)}`);
  }
  assert.ok(progress.some((p) => (p.message ?? '').includes(res.execution_id)), `progress messages do not name the execution: ${JSON.stringify(progress)}`);

});

test('kill -9 of the server: the running execution is lost after a restart and its log stays readable', T, async (t) => {
  const dirs = await makeDirs(t);
  const tag = marker('lost');
  const first = await connectStdio(t, dirs);
  await first.client.listTools();
  const closed = new Promise((r) => (first.client.onclose = r));
  onCleanup(t, async () => killLeftovers(processesWith(tag)));

  const t0 = Date.now();
  const bg = await ok(first.client, 'run_shell', { command: `echo "before-kill ${tag}"; sleep 30`, background: true });
  assert.ok(Date.now() - t0 < 3000, `background run_shell took ${Date.now() - t0} ms`);
  assert.equal(bg.state, 'running');
  const id = bg.execution_id;
  const printed = await ok(first.client, 'execution_logs', { execution_id: id, cursor: 0, wait_ms: 5000 });
  assert.match(printed.text, new RegExp(`before-kill ${tag}`), `nothing printed before the kill: ${JSON.stringify(printed)}`);
  assert.equal(printed.state, 'running');

  process.kill(first.transport.pid, 'SIGKILL');
  await closed;

  const second = await connectStdio(t, dirs);
  await second.client.listTools();
  const st = (await ok(second.client, 'execution_status', { execution_id: id })).execution;
  assert.equal(st.state, 'lost', JSON.stringify(st));
  assert.ok(st.ended, 'a lost execution must have an end time');
  const list = await ok(second.client, 'execution_status', {});
  assert.equal(list.executions?.find((e) => e.execution_id === id)?.state, 'lost', JSON.stringify(list));

  const logs = await ok(second.client, 'execution_logs', { execution_id: id, cursor: 0 });
  assert.ok(logs.text.startsWith(`before-kill ${tag}\n`), `the log lost what was printed before the kill: ${JSON.stringify(logs)}`);
  assert.equal(logs.state, 'lost');
  assert.equal(logs.more, false);

  // The sandboxed sleep did not outlive the killed server.
  const left = await processesGone(tag, 3000);
  assert.deepEqual(left, [], `processes of the lost execution still run after the server was killed: ${left}`);

  // log_bytes is documented as the bytes in the execution's log.
  assert.equal(st.log_bytes, logs.next_cursor, `execution_status log_bytes (${st.log_bytes}) differs from the log's length (${logs.next_cursor})`);
});
