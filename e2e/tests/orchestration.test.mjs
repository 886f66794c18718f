// Orchestration: update_plan (whole-plan snapshots, calls arriving together
// batched so only the last commits, the per-session plan resource with
// planProgress and notifications/resources/updated) and timers (a reminder as
// notifications/message and attached to the next tool result, timers tied to
// an execution, per-session isolation over HTTP, refused input).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { connectHttp, connectStdio, makeDirs, startHttp, textOf } from '../lib/harness.mjs';

const T = { timeout: 30_000 };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const NOTICES = 'scimcp/notices';
const STEP = 'scimcp/modelStep';
const TIMER = /^timer_[0-9a-f]{16}$/;

/** Calls a tool that must succeed; returns the result. `step` names the model step in _meta. */
async function ok(client, name, args = {}, step) {
  const res = await client.callTool({ name, arguments: args, ...(step === undefined ? {} : { _meta: { [STEP]: step } }) });
  assert.notEqual(res.isError, true, `${name}(${JSON.stringify(args).slice(0, 300)}) failed: ${textOf(res)}`);
  assert.ok(res.structuredContent, `${name} returned no structuredContent: ${JSON.stringify(res).slice(0, 400)}`);
  return res;
}

/** Calls a tool that must fail with an isError result; returns its text. */
async function fails(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name}(${JSON.stringify(args).slice(0, 300)}) should be isError, got ${JSON.stringify(res).slice(0, 400)}`);
  const text = textOf(res);
  assert.ok(text.trim().length > 0, `${name} error result has no text`);
  return text;
}

/** Connects over stdio and lists tools, so the SDK checks every structuredContent against its schema. */
async function stdio(t, args = []) {
  const dirs = await makeDirs(t);
  const conn = await connectStdio(t, { ...dirs, args });
  await conn.client.listTools();
  return { ...dirs, ...conn };
}

/** Waits until cond() is true; fails with `what` after timeoutMs. */
async function waitFor(cond, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Collects notifications/resources/updated URIs. */
function collectUpdated(client) {
  const uris = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => uris.push(n.params.uri));
  return uris;
}

/** Collects timer reminders (notifications/message from logger scimcp.timer) with their arrival time. */
function collectTimers(client) {
  const got = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    if (n.params.logger === 'scimcp.timer') got.push({ ...n.params, at: Date.now() });
  });
  return got;
}

/** Reads the plan resource and parses its JSON. */
async function readPlan(client, uri) {
  const r = await client.readResource({ uri });
  assert.equal(r.contents.length, 1, JSON.stringify(r));
  assert.equal(r.contents[0].uri, uri);
  assert.equal(r.contents[0].mimeType, 'application/json');
  return JSON.parse(r.contents[0].text);
}

/** The timer notices attached to a tool result: [text blocks, _meta entries]. */
function noticesOf(res) {
  const texts = (res.content ?? []).filter((c) => c.type === 'text' && c.text.startsWith('[scimcp timer]')).map((c) => c.text);
  return [texts, res._meta?.[NOTICES] ?? []];
}

test('update_plan: set, replaced, and read back as the session\'s plan resource with planProgress after other tool calls', T, async (t) => {
  const { client } = await stdio(t);
  const updated = collectUpdated(client);

  const planA = [
    { step: 'load the data', status: 'in_progress' },
    { step: 'fit the model', status: 'pending' },
    { step: 'write the report', status: 'pending' },
  ];
  const u1 = (await ok(client, 'update_plan', { plan: planA, explanation: 'first plan' })).structuredContent;
  assert.equal(u1.status, 'committed', JSON.stringify(u1));
  assert.equal(u1.revision, 1);
  assert.equal(u1.batch, 1, 'a call sent alone is a batch of one');
  assert.deepEqual(u1.plan, planA);
  assert.equal(u1.explanation, 'first plan');
  assert.deepEqual([u1.pending, u1.in_progress, u1.completed], [2, 1, 0]);
  assert.match(u1.resource_uri, /^scimcp:\/\/sessions\/[^/]+\/plan$/);
  assert.equal(u1.progress_since_previous_update, undefined, 'the first plan replaces nothing');
  const uri = u1.resource_uri;
  await waitFor(() => updated.includes(uri), 3000, `notifications/resources/updated for ${uri}`);

  // Three other tool results (one an error) in two model steps.
  await ok(client, 'run_shell', { command: 'true' }, 'step-1');
  await ok(client, 'list_artifacts', {}, 'step-1');
  const miss = await client.callTool({ name: 'read_file', arguments: { path: 'missing.txt' }, _meta: { [STEP]: 'step-2' } });
  assert.equal(miss.isError, true, 'test premise: reading a missing file is an error result');

  const planB = [
    { step: 'load the data', status: 'completed' },
    { step: 'check outliers', status: 'in_progress' },
    { step: 'fit the model', status: 'pending' },
  ];
  const u2 = (await ok(client, 'update_plan', { plan: planB, explanation: 'added a check' }, 'step-3')).structuredContent;
  assert.equal(u2.status, 'committed');
  assert.equal(u2.revision, 2);
  assert.deepEqual(u2.plan, planB, 'the whole plan must be replaced');
  assert.deepEqual([u2.pending, u2.in_progress, u2.completed], [1, 1, 1]);
  assert.equal(u2.resource_uri, uri);
  const prev = u2.progress_since_previous_update;
  assert.ok(prev, `no progress_since_previous_update: ${JSON.stringify(u2)}`);
  assert.equal(prev.tool_results, 3, `tool results since the first update (error results included): ${JSON.stringify(prev)}`);
  assert.equal(prev.model_steps, 2, `model steps since the first update: ${JSON.stringify(prev)}`);
  assert.equal(prev.since, u1.updated);
  await waitFor(() => updated.filter((u) => u === uri).length >= 2, 3000, 'a second notifications/resources/updated');

  // Three more tool results: one in the step that called update_plan (not counted as a step), two in another step.
  await ok(client, 'list_artifacts', {}, 'step-3');
  await ok(client, 'timer_list', {}, 'step-4');
  await ok(client, 'run_shell', { command: 'echo hi' }, 'step-4');

  const res = await readPlan(client, uri);
  assert.equal(res.revision, 2);
  assert.deepEqual(res.plan, planB);
  assert.equal(res.explanation, 'added a check');
  assert.deepEqual([res.pending, res.in_progress, res.completed], [1, 1, 1]);
  assert.equal(res.updated, u2.updated);
  assert.equal(res.resource_uri, uri);
  assert.equal(res.progress?.tool_results, 3, `planProgress in the resource: ${JSON.stringify(res.progress)}`);
  assert.equal(res.progress.model_steps, 1, `the step that called update_plan must not count: ${JSON.stringify(res.progress)}`);
  assert.equal(res.progress.since, u2.updated);
  assert.equal(updated.filter((u) => u === uri).length, 2, `one notification per committed update: ${JSON.stringify(updated)}`);

  // An empty list clears the plan.
  const cleared = (await ok(client, 'update_plan', { plan: [] })).structuredContent;
  assert.equal(cleared.revision, 3);
  assert.deepEqual(cleared.plan ?? [], []);
  assert.deepEqual((await readPlan(client, uri)).plan ?? [], []);
});

test('10 concurrent update_plan calls: exactly one is committed, the rest are superseded, and the resource holds it', T, async (t) => {
  // A wider batching window than the default 50 ms, so a loaded CI machine
  // still delivers the ten calls within one window.
  const { client } = await stdio(t, ['--plan-window', '400ms']);
  const updated = collectUpdated(client);
  const base = (await ok(client, 'update_plan', { plan: [{ step: 'base', status: 'pending' }] })).structuredContent;
  assert.equal(base.revision, 1);
  await waitFor(() => updated.length >= 1, 3000, 'notifications/resources/updated for the base plan');

  const plans = Array.from({ length: 10 }, (_, i) => [
    { step: `variant ${i}`, status: 'in_progress' },
    { step: `follow-up ${i}`, status: i % 2 ? 'completed' : 'pending' },
  ]);
  const t0 = Date.now();
  const results = await Promise.all(plans.map((plan) => ok(client, 'update_plan', { plan })));
  const took = Date.now() - t0;
  const sc = results.map((r) => r.structuredContent);

  const committed = sc.map((s, i) => [s, i]).filter(([s]) => s.status === 'committed');
  const superseded = sc.filter((s) => s.status === 'superseded');
  // On a badly overloaded machine the calls can reach the server more than the window apart and form two batches;
  // the message shows the batch sizes so that case is told apart from a batching bug.
  assert.equal(committed.length, 1, `exactly one call must commit: ${JSON.stringify(sc.map((s) => [s.status, s.revision, s.batch]))}`);
  assert.equal(superseded.length, 9, `the other nine must say superseded: ${JSON.stringify(sc.map((s) => s.status))}`);
  const [[won, wonIndex]] = committed;
  assert.deepEqual(won.plan, plans[wonIndex], 'the committed call must commit its own plan');
  assert.equal(won.revision, 2, 'one batch is one revision');
  for (const s of sc) {
    assert.equal(s.revision, 2, `every call of the batch reports the committed revision: ${JSON.stringify(s)}`);
    assert.equal(s.batch, 10, `every call of the batch reports its size: ${JSON.stringify(s)}`);
    assert.deepEqual(s.plan, won.plan, 'a superseded call reports the plan as committed');
    assert.equal(s.updated, won.updated);
  }
  assert.ok(took < 3000, `the batch took ${took} ms`);

  const res = await readPlan(client, base.resource_uri);
  assert.equal(res.revision, 2);
  assert.deepEqual(res.plan, won.plan, 'the resource does not hold the committed plan');
  assert.equal(res.updated, won.updated);
  await sleep(300);
  assert.equal(updated.length, 2, `one notifications/resources/updated per commit, not per call: ${JSON.stringify(updated)}`);

  // A single later call commits normally again.
  const next = (await ok(client, 'update_plan', { plan: [{ step: 'after', status: 'completed' }] })).structuredContent;
  assert.deepEqual([next.status, next.revision, next.batch], ['committed', 3, 1]);
});

test('a timer with after_ms 300 fires as a notification and is attached once to the next tool result', T, async (t) => {
  const { client } = await stdio(t);
  const reminders = collectTimers(client);

  const t0 = Date.now();
  const tm = (await ok(client, 'timer_create', { after_ms: 300, message: 'check the fit' })).structuredContent;
  assert.match(tm.timer_id, TIMER);
  assert.equal(tm.state, 'pending');
  assert.equal(tm.message, 'check the fit');
  const due = Date.parse(tm.due) - Date.parse(tm.created);
  assert.ok(due >= 299 && due <= 301, `due is ${due} ms after created`);
  const pending = (await ok(client, 'timer_list')).structuredContent;
  assert.deepEqual(pending.pending.map((x) => x.timer_id), [tm.timer_id]);

  await waitFor(() => reminders.length >= 1, 5000, 'the timer notification');
  const n = reminders[0];
  assert.ok(n.at - t0 >= 300, `the reminder arrived after ${n.at - t0} ms, before its 300 ms`);
  assert.ok(n.at - t0 < 3000, `the reminder arrived after ${n.at - t0} ms`);
  assert.equal(n.level, 'notice');
  assert.equal(n.data?.details?.timer_id, tm.timer_id, JSON.stringify(n));
  assert.equal(n.data.details.trigger, 'deadline');
  assert.equal(n.data.details.message, 'check the fit');
  assert.ok(n.data.text.includes(tm.timer_id) && n.data.text.includes('check the fit'), n.data.text);

  // The next tool result carries the same reminder, as text and in _meta.
  const next = await ok(client, 'list_artifacts');
  const [texts, metas] = noticesOf(next);
  assert.equal(texts.length, 1, `the next tool result lacks the "[scimcp timer]" text: ${JSON.stringify(next.content)}`);
  assert.ok(texts[0].includes(n.data.text), `${texts[0]} vs ${n.data.text}`);
  assert.equal(metas.length, 1, `_meta["${NOTICES}"]: ${JSON.stringify(next._meta)}`);
  assert.equal(metas[0].kind, 'timer');
  assert.equal(metas[0].details?.timer_id, tm.timer_id);
  assert.equal(next.structuredContent.count, 0, 'the tool\'s own result must be unchanged');

  // Only once: the result after that has no notice, and the timer is fired and delivered.
  const list = await ok(client, 'timer_list');
  assert.deepEqual(noticesOf(list), [[], []], `the reminder was attached twice: ${JSON.stringify(list).slice(0, 600)}`);
  assert.equal(list.structuredContent.pending.length, 0);
  const fired = list.structuredContent.recent.find((x) => x.timer_id === tm.timer_id);
  assert.equal(fired?.state, 'fired', JSON.stringify(list.structuredContent));
  assert.equal(fired.trigger, 'deadline');
  assert.equal(fired.delivery, 'delivered');
  assert.ok(Date.parse(fired.fired_at) >= Date.parse(tm.due), `fired at ${fired.fired_at}, due ${tm.due}`);
  assert.equal(reminders.length, 1, 'the notification was sent more than once');
});

test('a timer tied to a background execution fires when it ends and reports its status', T, async (t) => {
  const { client } = await stdio(t);
  const reminders = collectTimers(client);

  const bg = (await ok(client, 'run_shell', { command: 'sleep 1; exit 3', background: true })).structuredContent;
  assert.equal(bg.state, 'running', JSON.stringify(bg));
  const t0 = Date.now();
  const tm = (await ok(client, 'timer_create', { after_ms: 60_000, message: 'the sleep is done', execution_id: bg.execution_id })).structuredContent;
  assert.equal(tm.state, 'pending');
  assert.equal(tm.execution_id, bg.execution_id);
  assert.equal(tm.execution_state, 'running');

  await waitFor(() => reminders.length >= 1, 10_000, 'the reminder of the execution timer');
  assert.ok(reminders[0].at - t0 < 8000, `fired ${reminders[0].at - t0} ms after creation; the execution takes about 1 s`);
  const d = reminders[0].data.details;
  assert.equal(d.timer_id, tm.timer_id, JSON.stringify(reminders[0]));
  assert.equal(d.trigger, 'execution', 'the execution ended long before the deadline');
  assert.equal(d.execution_id, bg.execution_id);
  assert.equal(d.execution_state, 'failed');
  assert.equal(d.exit_code, 3);
  const text = reminders[0].data.text;
  assert.ok(text.includes(bg.execution_id) && /failed/.test(text) && /exit code 3/.test(text), `the reminder does not say the execution's status: ${text}`);

  const st = await ok(client, 'execution_status', { execution_id: bg.execution_id });
  const [texts, metas] = noticesOf(st);
  assert.equal(texts.length, 1, `the next tool result lacks the reminder: ${JSON.stringify(st.content)}`);
  assert.ok(texts[0].includes(bg.execution_id), texts[0]);
  assert.equal(metas[0]?.details?.exit_code, 3);
  const exec = st.structuredContent.execution;
  assert.equal(exec.state, 'failed');
  assert.equal(exec.exit_code, 3);
  assert.ok(Date.parse(d.fired_at) >= Date.parse(exec.ended), `the timer fired (${d.fired_at}) before the execution ended (${exec.ended})`);

  const list = (await ok(client, 'timer_list')).structuredContent;
  const rec = list.recent.find((x) => x.timer_id === tm.timer_id);
  assert.equal(rec?.state, 'fired', JSON.stringify(list));
  assert.equal(rec.trigger, 'execution');
  assert.equal(rec.execution_state, 'failed');
  assert.equal(rec.exit_code, 3);
  assert.equal(rec.delivery, 'delivered');

  // A timer on an execution that has already ended fires at once.
  const late = (await ok(client, 'timer_create', { after_ms: 60_000, message: 'already over', execution_id: bg.execution_id })).structuredContent;
  await waitFor(() => reminders.some((r) => r.data.details.timer_id === late.timer_id), 3000, 'the reminder of a timer on an ended execution');
  const r2 = reminders.find((r) => r.data.details.timer_id === late.timer_id).data.details;
  assert.equal(r2.trigger, 'execution');
  assert.equal(r2.exit_code, 3);
});

test('HTTP: another session can neither see, cancel nor receive a session\'s timer, nor read its plan', T, async (t) => {
  const dirs = await makeDirs(t);
  const srv = await startHttp(t, dirs);
  const a = await connectHttp(t, srv.url);
  const b = await connectHttp(t, srv.url);
  assert.notEqual(a.transport.sessionId, b.transport.sessionId);
  await a.client.listTools();
  await b.client.listTools();
  const remindersA = collectTimers(a.client);
  const remindersB = collectTimers(b.client);

  const secret = 'secret-reminder-of-A';
  const tm = (await ok(a.client, 'timer_create', { after_ms: 60_000, message: secret })).structuredContent;
  const listB = await ok(b.client, 'timer_list');
  assert.equal(listB.structuredContent.pending.length, 0, `session B sees A's timer: ${JSON.stringify(listB.structuredContent)}`);
  assert.ok(!JSON.stringify(listB).includes(secret));

  const refused = await fails(b.client, 'timer_cancel', { timer_id: tm.timer_id });
  assert.ok(!refused.includes(secret), `the refusal leaked the message: ${refused}`);
  const unknownId = 'timer_0123456789abcdef';
  assert.notEqual(unknownId, tm.timer_id);
  const unknown = await fails(b.client, 'timer_cancel', { timer_id: unknownId });
  assert.equal(refused.replaceAll(tm.timer_id, 'ID'), unknown.replaceAll(unknownId, 'ID'), 'another session\'s timer must be reported like an unknown one');

  // A's timer is untouched; A cancels it, idempotently.
  const listA = (await ok(a.client, 'timer_list')).structuredContent;
  assert.deepEqual(listA.pending.map((x) => [x.timer_id, x.state]), [[tm.timer_id, 'pending']], `B's cancel reached A's timer: ${JSON.stringify(listA)}`);
  const c1 = (await ok(a.client, 'timer_cancel', { timer_id: tm.timer_id })).structuredContent;
  assert.equal(c1.state, 'cancelled');
  assert.equal(c1.already_done, false);
  const c2 = (await ok(a.client, 'timer_cancel', { timer_id: tm.timer_id })).structuredContent;
  assert.equal(c2.state, 'cancelled');
  assert.equal(c2.already_done, true);
  assert.equal(c2.cancelled_at, c1.cancelled_at, 'a second cancel must change nothing');

  // B cannot tie a timer to A's execution (reported like an unknown one).
  const ex = (await ok(a.client, 'run_shell', { command: 'true' })).structuredContent;
  await fails(b.client, 'timer_create', { after_ms: 1000, message: 'x', execution_id: ex.execution_id });

  // A's firing timer reaches A only.
  const quick = (await ok(a.client, 'timer_create', { after_ms: 200, message: 'for A only' })).structuredContent;
  await waitFor(() => remindersA.length >= 1, 5000, 'the reminder on session A');
  assert.equal(remindersA[0].data.details.timer_id, quick.timer_id);
  const nextB = await ok(b.client, 'list_artifacts');
  assert.deepEqual(noticesOf(nextB), [[], []], `session B got A's reminder with its tool result: ${JSON.stringify(nextB).slice(0, 500)}`);
  const nextA = await ok(a.client, 'list_artifacts');
  assert.equal(noticesOf(nextA)[1][0]?.details?.timer_id, quick.timer_id, `session A's next result lacks the reminder: ${JSON.stringify(nextA).slice(0, 500)}`);
  assert.equal(remindersB.length, 0, `session B was notified of A's timer: ${JSON.stringify(remindersB)}`);

  // A session reads only its own plan.
  const up = (await ok(a.client, 'update_plan', { plan: [{ step: 'private step of A', status: 'pending' }] })).structuredContent;
  await assert.rejects(b.client.readResource({ uri: up.resource_uri }), (err) => {
    assert.ok(!String(err.message).includes('private step of A'), err.message);
    return true;
  });
  assert.deepEqual((await readPlan(a.client, up.resource_uri)).plan, up.plan);
});

test('bad input is refused with isError and changes nothing: 21 plan items, an unknown status, both after_ms and at, negative after_ms', T, async (t) => {
  const { client } = await stdio(t);
  const good = (await ok(client, 'update_plan', { plan: [{ step: 'keep me', status: 'pending' }] })).structuredContent;

  const tooMany = Array.from({ length: 21 }, (_, i) => ({ step: `step ${i + 1}`, status: 'pending' }));
  const t21 = await fails(client, 'update_plan', { plan: tooMany });
  assert.match(t21, /20/, t21);
  const twenty = (await ok(client, 'update_plan', { plan: tooMany.slice(0, 20) })).structuredContent;
  assert.equal(twenty.plan.length, 20, 'exactly 20 items are allowed');
  assert.equal(twenty.revision, 2);

  const badStatus = await fails(client, 'update_plan', {
    plan: [
      { step: 'load the data', status: 'completed' },
      { step: 'run the assay', status: 'done' },
    ],
  });
  assert.match(badStatus, /plan\[1\] \("run the assay"\)\.status "done" is not one of pending, in_progress, completed/, badStatus);
  const after = await readPlan(client, good.resource_uri);
  assert.equal(after.revision, 2, 'a refused snapshot must not be stored');
  assert.deepEqual(after.plan, twenty.plan);

  const at = new Date(Date.now() + 60_000).toISOString();
  const both = await fails(client, 'timer_create', { after_ms: 1000, at, message: 'both' });
  assert.match(both, /after_ms/, both);
  await fails(client, 'timer_create', { message: 'neither' });
  const negative = await fails(client, 'timer_create', { after_ms: -5, message: 'negative' });
  assert.match(negative, /after_ms/, negative);
  await fails(client, 'timer_create', { after_ms: 604_800_001, message: 'past 7 days' });
  await fails(client, 'timer_create', { at: new Date(Date.now() - 60_000).toISOString(), message: 'in the past' });
  const list = (await ok(client, 'timer_list')).structuredContent;
  assert.equal(list.pending.length, 0, `a refused timer was stored: ${JSON.stringify(list)}`);
  assert.equal(list.recent.length, 0);
});
