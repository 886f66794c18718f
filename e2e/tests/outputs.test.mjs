// Result bounding: large tool results are stored verbatim under a ref named in
// _meta["scimcp/output"] and in the text, shown as a head/tail preview when
// they are very large, and read back with read_tool_output -- over stdio,
// across a restart on the same data folder, and per session over HTTP
// (including a client that resumes its session after a server restart).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import { connectHttp, connectStdio, makeDirs, rawPost, startHttp, stopProc, textOf } from '../lib/harness.mjs';

const T = { timeout: 30_000 };

const META = 'scimcp/output';
const STORE_ABOVE = 8192; // bytes of text above which a result is stored
const PREVIEW_BYTES = 51200; // above this (or PREVIEW_LINES) the text is a preview
const PREVIEW_LINES = 2000;
const READ_BOUND = 40960; // one read_tool_output answer
const BIG = 'seq 1 300000'; // ~2 MB of output; run_shell's own text is ~48 KiB, 7000+ lines

/** Calls a tool that must succeed; returns the result. */
async function ok(client, name, args = {}) {
  const res = await client.callTool({ name, arguments: args });
  assert.notEqual(res.isError, true, `${name}(${JSON.stringify(args)}) failed: ${textOf(res)}`);
  assert.ok(res.structuredContent, `${name} returned no structuredContent`);
  return res;
}

/** The stored-output entry of a result's _meta, checked for shape. */
function outputMeta(res) {
  const m = res._meta?.[META];
  assert.ok(m, `result has no _meta["${META}"]: _meta=${JSON.stringify(res._meta)} text=${textOf(res).slice(0, 300)}`);
  assert.match(m.ref, /^ref_[0-9a-f]{16}$/, `odd ref ${m.ref}`);
  assert.match(m.sha256, /^[0-9a-f]{64}$/, `odd sha256 ${m.sha256}`);
  assert.ok(Number.isInteger(m.bytes) && m.bytes > STORE_ABOVE, `bytes ${m.bytes}`);
  assert.ok(Number.isInteger(m.lines) && m.lines > 0, `lines ${m.lines}`);
  return m;
}

/** Reads a whole stored result page by page in line mode; checks every page's bound and bookkeeping. */
async function readAll(client, ref) {
  let offset = 0;
  let all = '';
  for (let pages = 0; pages < 20; pages++) {
    const res = await ok(client, 'read_tool_output', { ref, offset });
    const sc = res.structuredContent;
    assert.equal(sc.ref, ref);
    assert.equal(sc.mode, 'lines');
    assert.equal(sc.offset, offset);
    assert.ok(Buffer.byteLength(sc.content) <= READ_BOUND, `page at ${offset} is ${Buffer.byteLength(sc.content)} bytes, over 40 KiB`);
    assert.equal(sc.bytes, Buffer.byteLength(sc.content), 'bytes must count the returned content');
    all += sc.content;
    if (sc.eof) {
      assert.equal(sc.next_offset, undefined, 'next_offset must be absent at the end');
      return all;
    }
    assert.equal(sc.next_offset, offset + sc.lines);
    assert.ok(sc.lines > 0, 'a page must advance');
    offset = sc.next_offset;
  }
  assert.fail(`${ref} did not end within 20 pages`);
}

/** Runs `seq 1 300000` and returns { res, meta, text } after checking it came back as a preview + ref. */
async function bigResult(client) {
  const res = await ok(client, 'run_shell', { command: BIG });
  assert.equal(res.structuredContent.state, 'succeeded', textOf(res));
  const meta = outputMeta(res);
  const text = textOf(res);
  return { res, meta, text };
}

/** Finds "1500" (beyond the preview's head) with a literal search; returns the 1-based line of the match. */
async function find1500(client, ref) {
  const q = (await ok(client, 'read_tool_output', { ref, query: '1500' })).structuredContent;
  assert.equal(q.mode, 'query');
  assert.ok(q.total_matches >= 1, `query 1500 found nothing: ${JSON.stringify(q)}`);
  const m = q.matches.find((x) => x.context.includes('\n1500\n'));
  assert.ok(m, `no match shows the line "1500": ${JSON.stringify(q.matches).slice(0, 500)}`);
  assert.ok(Number.isInteger(m.line) && m.line > 1, `match line ${m.line}`);
  return m;
}

test('stdio: a huge run_shell result is a head/tail preview with a ref; query and line range recover hidden lines exactly', T, async (t) => {
  const dirs = await makeDirs(t);
  const { client } = await connectStdio(t, dirs);
  await client.listTools(); // lets the SDK check structuredContent against the output schemas

  const { res, meta, text } = await bigResult(client);
  assert.equal(meta.tool, 'run_shell');
  assert.equal(meta.preview, true, 'a result over 50 KiB / 2000 lines must be previewed');
  assert.ok(meta.bytes > PREVIEW_BYTES || meta.lines > PREVIEW_LINES, `meta ${JSON.stringify(meta)}`);
  assert.equal(res.content.length, 1, 'the preview should be one text block');

  // The visible text is a bounded preview naming the ref.
  assert.ok(text.includes(meta.ref), 'preview text does not name the ref');
  assert.ok(Buffer.byteLength(text) <= PREVIEW_BYTES, `preview is ${Buffer.byteLength(text)} bytes`);
  assert.ok(text.split('\n').length <= PREVIEW_LINES, `preview has ${text.split('\n').length} lines`);
  assert.ok(Buffer.byteLength(text) < meta.bytes / 4, `preview (${Buffer.byteLength(text)} B) is not much smaller than the result (${meta.bytes} B)`);
  assert.ok(text.includes('\n1\n2\n3\n'), 'preview lacks the head of the output');
  assert.ok(!text.includes('\n1500\n'), 'line 1500 should be hidden in the preview (test premise)');

  // A literal search finds a line the preview hid; a line range returns exactly the lines around it.
  const m = await find1500(client, meta.ref);
  const range = (await ok(client, 'read_tool_output', { ref: meta.ref, offset: m.line - 1, limit: 3 })).structuredContent;
  assert.equal(range.mode, 'lines');
  assert.equal(range.content, '1500\n1501\n1502\n');
  assert.equal(range.lines, 3);
  assert.equal(range.offset, m.line - 1);
  assert.equal(range.next_offset, m.line + 2);
  assert.equal(range.eof, false);
  assert.equal(range.total_lines, meta.lines);
  assert.equal(range.total_bytes, meta.bytes);

  // Paging through the ref rebuilds exactly what _meta describes, and it holds run_shell's output verbatim.
  const all = await readAll(client, meta.ref);
  assert.equal(Buffer.byteLength(all), meta.bytes, 'reassembled bytes differ from _meta.bytes');
  assert.equal(createHash('sha256').update(all).digest('hex'), meta.sha256, 'reassembled text does not hash to _meta.sha256');
  assert.equal(all.split('\n').length, meta.lines, 'reassembled line count differs from _meta.lines');
  assert.equal(all.slice(m.char_offset, m.char_offset + 4), '1500', 'match char_offset does not point at the match');
  assert.ok(all.includes(res.structuredContent.output), 'stored text does not hold structuredContent.output verbatim');

  // A repeated read is answered again, with advice rather than a refusal.
  const again = await ok(client, 'read_tool_output', { ref: meta.ref, offset: m.line - 1, limit: 3 });
  assert.equal(again.structuredContent.content, '1500\n1501\n1502\n');
  assert.ok(again.structuredContent.advice?.length > 0, `a duplicate read should carry advice: ${JSON.stringify(again.structuredContent)}`);
});

test('stdio: the preview shows exactly the head and the longer tail it announces', T, async (t) => {
  const dirs = await makeDirs(t);
  const { client } = await connectStdio(t, dirs);
  const { meta, text } = await bigResult(client);
  const stored = await readAll(client, meta.ref);
  const lines = stored.split('\n');
  assert.equal(lines.length, meta.lines);

  const shown = text.match(/Shown: the first (\d+) and the last (\d+) lines/);
  assert.ok(shown, `preview does not say what it shows: ${text.slice(0, 400)}`);
  const [nHead, nTail] = [Number(shown[1]), Number(shown[2])];
  assert.ok(nHead > 0 && nTail > nHead, `preview should favour the tail: first ${nHead}, last ${nTail} lines`);
  const omitted = text.match(/\[… (\d+) lines \((\d+) bytes\) omitted/);
  assert.ok(omitted, `preview has no omission marker: ${text.slice(0, 400)}`);
  assert.equal(Number(omitted[1]), meta.lines - nHead - nTail, 'omitted line count does not add up');

  const head = lines.slice(0, nHead).join('\n') + '\n';
  const tail = lines.slice(-nTail).join('\n');
  const before = text.slice(0, text.indexOf(omitted[0]));
  const after = text.slice(text.indexOf(omitted[0]) + omitted[0].length).replace(/^[^\n]*\n/, ''); // rest of the marker line
  assert.ok(before.endsWith(head), `the preview head is not the first ${nHead} stored lines:\n${before.slice(-300)}`);
  assert.equal(after, tail, `the preview tail is not the last ${nTail} stored lines; it holds ${after.split('\n').length} line(s):\n${after.slice(0, 400)}`);
  assert.equal(Number(omitted[2]), Buffer.byteLength(stored) - Buffer.byteLength(head) - Buffer.byteLength(tail), 'omitted byte count does not add up');
});

test('stdio: a result between 8 KiB and the preview limits is returned whole and stored under a ref', T, async (t) => {
  const dirs = await makeDirs(t);
  const { client } = await connectStdio(t, dirs);
  await client.listTools();

  const res = await ok(client, 'run_shell', { command: 'seq -w 1 1800' }); // 9000 bytes, ~1800 lines
  const meta = outputMeta(res);
  assert.equal(meta.preview, false, 'under 50 KiB and 2000 lines the text must not be a preview');
  const text = textOf(res);
  assert.ok(text.includes(meta.ref), 'text does not name the ref');
  const expected = Array.from({ length: 1800 }, (_, i) => String(i + 1).padStart(4, '0')).join('\n') + '\n';
  assert.equal(res.structuredContent.output, expected);
  assert.ok(text.includes(expected), 'the whole output must be in the text');

  const all = await readAll(client, meta.ref);
  assert.equal(createHash('sha256').update(all).digest('hex'), meta.sha256);
  assert.ok(text.startsWith(all), 'the stored text must be the result text as returned (before the ref note)');

  const chars = (await ok(client, 'read_tool_output', { ref: meta.ref, charOffset: all.indexOf('1234\n'), charLimit: 9 })).structuredContent;
  assert.equal(chars.mode, 'chars');
  assert.equal(chars.content, '1234\n1235');
});

test('stdio: a ref stays readable after the server restarts on the same data folder', T, async (t) => {
  const dirs = await makeDirs(t);
  const first = await connectStdio(t, dirs);
  const { meta } = await bigResult(first.client);
  const m = await find1500(first.client, meta.ref);
  await first.client.close(); // stdin EOF: the server exits and frees the data folder

  const second = await connectStdio(t, dirs);
  await second.client.listTools();
  assert.notEqual(second.transport.pid, first.transport.pid);
  const range = (await ok(second.client, 'read_tool_output', { ref: meta.ref, offset: m.line - 1, limit: 3 })).structuredContent;
  assert.equal(range.content, '1500\n1501\n1502\n');
  assert.equal(range.total_bytes, meta.bytes);
  const all = await readAll(second.client, meta.ref);
  assert.equal(createHash('sha256').update(all).digest('hex'), meta.sha256, 'the ref changed across the restart');
});

test('HTTP: another session cannot read a session\'s ref', T, async (t) => {
  const dirs = await makeDirs(t);
  const srv = await startHttp(t, dirs);
  const a = await connectHttp(t, srv.url);
  const b = await connectHttp(t, srv.url);
  assert.notEqual(a.transport.sessionId, b.transport.sessionId);

  const { meta } = await bigResult(a.client);
  const mine = await ok(a.client, 'read_tool_output', { ref: meta.ref, query: '299999' });
  assert.ok(mine.structuredContent.total_matches >= 1, 'the owner session must read its ref');

  for (const args of [{ ref: meta.ref, query: '299999' }, { ref: meta.ref, offset: 0, limit: 50 }, { ref: meta.ref, charOffset: 0 }]) {
    const other = await b.client.callTool({ name: 'read_tool_output', arguments: args });
    assert.equal(other.isError, true, `session B read A's ref with ${JSON.stringify(args)}: ${JSON.stringify(other).slice(0, 400)}`);
    assert.match(textOf(other), /no stored output .*in this session/, textOf(other));
    assert.ok(!JSON.stringify(other).includes('299999'), 'the refusal leaked content of the ref');
    assert.equal(other.structuredContent, undefined);
  }
});

test('HTTP: a client that keeps its session id reads its ref after the server restarts', T, async (t) => {
  const dirs = await makeDirs(t);
  const srv1 = await startHttp(t, dirs);
  const a = await connectHttp(t, srv1.url);
  const sessionId = a.transport.sessionId;
  assert.match(sessionId ?? '', /\S/, 'no Mcp-Session-Id');
  const { meta } = await bigResult(a.client);
  const m = await find1500(a.client, meta.ref);

  const stop = await stopProc(srv1.handle); // SIGTERM: a restart, not the end of the client's session
  assert.equal(stop.code, 0, `server exit ${JSON.stringify(stop)}\n${srv1.stderr().slice(-2000)}`);
  await a.client.close().catch(() => {});

  const srv2 = await startHttp(t, dirs);
  const resumed = await connectHttp(t, srv2.url, { sessionId });
  assert.equal(resumed.transport.sessionId, sessionId);
  const range = await resumed.client.callTool({ name: 'read_tool_output', arguments: { ref: meta.ref, offset: m.line - 1, limit: 3 } });
  assert.notEqual(range.isError, true, `resumed session could not read its ref: ${JSON.stringify(range)}\n--- server log ---\n${srv2.stderr().slice(-2000)}`);
  assert.equal(range.structuredContent?.content, '1500\n1501\n1502\n', JSON.stringify(range).slice(0, 500));
  const q = await ok(resumed.client, 'read_tool_output', { ref: meta.ref, query: '299999' });
  assert.ok(q.structuredContent.total_matches >= 1);

  // The restarted server still keeps the ref from other sessions, and does not accept made-up ids.
  const fresh = await connectHttp(t, srv2.url);
  const other = await fresh.client.callTool({ name: 'read_tool_output', arguments: { ref: meta.ref, query: '299999' } });
  assert.equal(other.isError, true, `a new session read the resumed session's ref: ${JSON.stringify(other).slice(0, 400)}`);
  const forged = `mcp-session-${'0'.repeat(32)}`;
  assert.notEqual(forged, sessionId);
  const bogus = await rawPost(srv2.url, { jsonrpc: '2.0', id: 7, method: 'tools/list' }, { 'Mcp-Session-Id': forged, 'Mcp-Protocol-Version': '2025-06-18' });
  await bogus.body?.cancel();
  assert.equal(bogus.status, 404, 'a never-issued session id must get 404 after a restart');
});
