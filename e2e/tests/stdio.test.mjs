// scimcp over stdio, driven by the official TypeScript SDK client, as a
// desktop MCP host would do it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { callToolLoose, connectStdio, makeDirs, put, textOf } from '../lib/harness.mjs';

const T = { timeout: 30_000 };

/** Calls a tool that must succeed; returns the result (structuredContent already schema-checked by the SDK). */
async function ok(client, name, args = {}) {
  const res = await client.callTool({ name, arguments: args });
  assert.notEqual(res.isError, true, `${name}(${JSON.stringify(args)}) failed: ${textOf(res)}`);
  assert.ok(res.structuredContent, `${name} returned no structuredContent`);
  return res;
}

/** Calls a tool that must fail with an isError result; returns its text. */
async function fails(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name}(${JSON.stringify(args)}) should be isError, got ${JSON.stringify(res).slice(0, 400)}`);
  const text = textOf(res);
  assert.ok(text.trim().length > 0, `${name}(${JSON.stringify(args)}) error result has no text`);
  return { res, text };
}

/** Starts a server on a fresh workspace, lists tools so the SDK caches the output schemas. */
async function setup(t, populate) {
  const dirs = await makeDirs(t);
  if (populate) await populate(dirs);
  const conn = await connectStdio(t, dirs);
  const { tools } = await conn.client.listTools();
  return { ...dirs, ...conn, tools };
}

test('initialize and tools/list advertise list_files and read_file with input and output schemas', T, async (t) => {
  const { client, tools } = await setup(t);

  const info = client.getServerVersion();
  assert.ok(info?.name, 'serverInfo.name missing');
  assert.ok(info?.version, 'serverInfo.version missing');
  const caps = client.getServerCapabilities();
  assert.ok(caps?.tools, `tools capability missing: ${JSON.stringify(caps)}`);

  const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
  for (const name of ['list_files', 'read_file']) {
    const tool = byName[name];
    assert.ok(tool, `tool ${name} not listed; got ${Object.keys(byName).join(', ')}`);
    assert.ok(tool.description && tool.description.length > 10, `${name} has no useful description`);
    assert.equal(tool.inputSchema?.type, 'object', `${name} inputSchema.type`);
    assert.equal(tool.outputSchema?.type, 'object', `${name} outputSchema.type`);
  }
  for (const tool of tools) {
    assert.ok(tool.description, `tool ${tool.name} has no description`);
  }

  const rf = byName.read_file;
  assert.deepEqual(rf.inputSchema.required, ['path'], 'read_file must require exactly path');
  for (const p of ['path', 'offset', 'limit']) {
    assert.ok(rf.inputSchema.properties?.[p], `read_file inputSchema lacks property ${p}`);
  }
  for (const p of ['entries', 'count', 'truncated']) {
    assert.ok(byName.list_files.outputSchema.properties?.[p], `list_files outputSchema lacks ${p}`);
  }
  for (const p of ['path', 'offset', 'lines', 'eof', 'size', 'media_type', 'binary', 'content']) {
    assert.ok(rf.outputSchema.properties?.[p], `read_file outputSchema lacks ${p}`);
  }
  assert.ok(!(byName.list_files.inputSchema.required?.length > 0), 'list_files must not require arguments');
});

test('list_files returns the workspace files and folders with correct sizes and times', T, async (t) => {
  const files = {
    'a.txt': 'hello world\n', // 12 bytes
    'empty.dat': '',
    'sub/b.csv': 'x,y\n1,2\n3,4\n',
    'sub/deeper/c.json': JSON.stringify({ k: 'v'.repeat(300) }),
    'with space/ünïcode.md': '# title\n',
  };
  const { client, workspace } = await setup(t, async ({ workspace }) => {
    for (const [rel, content] of Object.entries(files)) await put(workspace, rel, content);
    await mkdir(path.join(workspace, 'emptydir'));
  });

  const res = await ok(client, 'list_files');
  const sc = res.structuredContent;
  assert.ok(Array.isArray(sc.entries), 'entries must be an array');
  assert.equal(sc.count, sc.entries.length, 'count must equal entries.length');
  assert.equal(sc.truncated, false);

  const byPath = Object.fromEntries(sc.entries.map((e) => [e.path, e]));
  for (const [rel, content] of Object.entries(files)) {
    const e = byPath[rel];
    assert.ok(e, `file ${rel} missing from listing: ${Object.keys(byPath).join(', ')}`);
    assert.equal(e.type, 'file', `${rel} type`);
    assert.equal(e.size, Buffer.byteLength(content), `${rel} size`);
    const st = await stat(path.join(workspace, rel));
    const mtime = Date.parse(e.mtime);
    assert.ok(!Number.isNaN(mtime), `${rel} mtime not RFC3339: ${e.mtime}`);
    assert.ok(Math.abs(mtime - st.mtimeMs) < 2000, `${rel} mtime ${e.mtime} far from ${st.mtime.toISOString()}`);
  }
  for (const dir of ['sub', 'sub/deeper', 'with space', 'emptydir']) {
    assert.equal(byPath[dir]?.type, 'dir', `directory ${dir} missing or wrong type`);
  }
  const expected = Object.keys(files).length + 4;
  assert.equal(sc.entries.length, expected, `unexpected extra entries: ${Object.keys(byPath).join(', ')}`);
  for (const e of sc.entries) {
    assert.ok(!path.isAbsolute(e.path) && !e.path.startsWith('./') && !e.path.includes('\\'), `path not workspace-relative: ${e.path}`);
  }

  const text = textOf(res);
  for (const rel of Object.keys(files)) assert.ok(text.includes(rel), `text listing lacks ${rel}`);
});

test('list_files skips symlinks to files and folders', T, async (t) => {
  const { client } = await setup(t, async ({ workspace, root }) => {
    await put(workspace, 'real.txt', 'real\n');
    await put(workspace, 'realdir/inner.txt', 'inner\n');
    await put(root, 'outside/secret.txt', 'secret\n');
    await symlink(path.join(workspace, 'real.txt'), path.join(workspace, 'link.txt'));
    await symlink(path.join(workspace, 'realdir'), path.join(workspace, 'linkdir'));
    await symlink(path.join(root, 'outside'), path.join(workspace, 'outlink'));
    await symlink(path.join(workspace, 'nowhere'), path.join(workspace, 'dangling'));
  });

  const res = await ok(client, 'list_files');
  const paths = res.structuredContent.entries.map((e) => e.path).sort();
  assert.deepEqual(paths, ['real.txt', 'realdir', 'realdir/inner.txt']);
  if ('symlinks_skipped' in res.structuredContent) assert.equal(res.structuredContent.symlinks_skipped, 4);
  const text = textOf(res);
  for (const name of ['link.txt', 'linkdir', 'outlink', 'secret.txt', 'dangling']) {
    assert.ok(!text.includes(name), `text listing mentions symlink ${name}`);
  }
});

test('list_files stops at 500 entries and says how many were left out', T, async (t) => {
  const total = 620; // 1 folder + 619 files
  const { client } = await setup(t, async ({ workspace }) => {
    await mkdir(path.join(workspace, 'many'));
    await Promise.all(
      Array.from({ length: total - 1 }, (_, i) => writeFile(path.join(workspace, 'many', `f${String(i).padStart(4, '0')}.txt`), 'x')),
    );
  });
  const res = await ok(client, 'list_files');
  const sc = res.structuredContent;
  assert.equal(sc.entries.length, 500);
  assert.equal(sc.count, 500);
  assert.equal(sc.truncated, true);
  assert.equal(sc.omitted, total - 500);
  assert.equal(new Set(sc.entries.map((e) => e.path)).size, 500, 'duplicate paths in listing');
  const text = textOf(res);
  assert.match(text, /500/, 'text should say it stopped at 500');
  assert.match(text, new RegExp(`\\b${total - 500}\\b`), `text should say ${total - 500} entries were left out`);
});

test('read_file pages a 5000-line file by 2000 lines and returns exact content', T, async (t) => {
  const lines = Array.from({ length: 5000 }, (_, i) => `line ${i + 1} ${'abcdefghij'.slice(0, i % 10)}`);
  const body = lines.join('\n') + '\n';
  const { client } = await setup(t, async ({ workspace }) => put(workspace, 'big/lines.txt', body));

  const p0 = (await ok(client, 'read_file', { path: 'big/lines.txt' })).structuredContent;
  assert.equal(p0.path, 'big/lines.txt');
  assert.equal(p0.offset, 0);
  assert.equal(p0.lines, 2000);
  assert.equal(p0.next_offset, 2000);
  assert.equal(p0.eof, false);
  assert.equal(p0.binary, false);
  assert.equal(p0.size, Buffer.byteLength(body));
  assert.match(p0.media_type, /^text\//);
  if (p0.total_lines !== undefined) assert.equal(p0.total_lines, 5000);
  assert.equal(p0.content, lines.slice(0, 2000).join('\n') + '\n');

  const p2 = (await ok(client, 'read_file', { path: 'big/lines.txt', offset: 4000 })).structuredContent;
  assert.equal(p2.offset, 4000);
  assert.equal(p2.lines, 1000);
  assert.equal(p2.eof, true);
  assert.equal(p2.next_offset, undefined, 'next_offset must be absent at the end');
  assert.equal(p2.content, lines.slice(4000).join('\n') + '\n', 'lines 4001..5000 must come back exactly');

  const mid = (await ok(client, 'read_file', { path: 'big/lines.txt', offset: 2500, limit: 7 })).structuredContent;
  assert.equal(mid.lines, 7);
  assert.equal(mid.next_offset, 2507);
  assert.equal(mid.eof, false);
  assert.equal(mid.content, lines.slice(2500, 2507).join('\n') + '\n');

  // Following next_offset from the start rebuilds the file byte for byte.
  let offset = 0;
  let rebuilt = '';
  for (let pages = 0; pages < 10; pages++) {
    const page = (await ok(client, 'read_file', { path: 'big/lines.txt', offset })).structuredContent;
    rebuilt += page.content;
    if (page.eof) break;
    assert.ok(page.next_offset > offset, 'next_offset must advance');
    offset = page.next_offset;
  }
  assert.equal(rebuilt, body);
});

test('read_file caps a page at 40 KiB of whole lines', T, async (t) => {
  const line = 'y'.repeat(99); // 100 bytes with the newline
  const body = Array.from({ length: 1000 }, () => line).join('\n') + '\n'; // 100 000 bytes
  const { client } = await setup(t, async ({ workspace }) => put(workspace, 'wide.txt', body));

  const p = (await ok(client, 'read_file', { path: 'wide.txt' })).structuredContent;
  assert.ok(Buffer.byteLength(p.content) <= 40960, `page is ${Buffer.byteLength(p.content)} bytes, over 40 KiB`);
  assert.ok(p.lines >= 400 && p.lines < 1000, `unexpected line count ${p.lines}`);
  assert.equal(p.content, Array.from({ length: p.lines }, () => line).join('\n') + '\n', 'page must hold whole lines only');
  assert.equal(p.next_offset, p.lines);
  assert.equal(p.eof, false);
});

test('read_file reports binary files (even named .txt) without a body', T, async (t) => {
  const bin = Buffer.alloc(3000);
  for (let i = 0; i < bin.length; i++) bin[i] = (i * 7) % 256; // includes NUL bytes
  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 1)]);
  const { client } = await setup(t, async ({ workspace }) => {
    await put(workspace, 'data.txt', bin);
    await put(workspace, 'pic.png', png);
  });

  const res = await ok(client, 'read_file', { path: 'data.txt' });
  const sc = res.structuredContent;
  assert.equal(sc.binary, true);
  assert.equal(sc.size, bin.length);
  assert.equal(sc.content, undefined, 'binary file must not return content');
  assert.equal(typeof sc.media_type, 'string');
  assert.ok(!sc.media_type.startsWith('text/'), `binary data.txt labelled ${sc.media_type}`);
  const text = textOf(res);
  assert.ok(!text.includes('\u0000'), 'text content carries raw NUL bytes');
  assert.ok(!text.includes(bin.toString('base64').slice(0, 40)), 'text content carries base64 of the file');
  assert.ok(text.length < 2000, `text for a binary file is suspiciously long (${text.length})`);
  for (const c of res.content) assert.equal(c.type, 'text', `binary file returned a ${c.type} block`);

  const p = (await ok(client, 'read_file', { path: 'pic.png' })).structuredContent;
  assert.equal(p.binary, true);
  assert.equal(p.media_type, 'image/png');
  assert.equal(p.size, png.length);
  assert.equal(p.content, undefined);
});

test('read_file refuses paths that escape the workspace and never leaks them', T, async (t) => {
  const SECRET = 'TOP-SECRET-7f3a9c';
  const { client, root } = await setup(t, async ({ workspace, root }) => {
    await put(root, 'outside', `${SECRET}\n`);
    await put(root, 'outdir/secret.txt', `${SECRET}\n`);
    await put(workspace, 'sub/ok.txt', 'fine\n');
    await symlink(path.join(root, 'outside'), path.join(workspace, 'escape.txt'));
    await symlink(path.join(root, 'outdir'), path.join(workspace, 'escapedir'));
    await symlink('../../outside', path.join(workspace, 'sub', 'rel-escape.txt'));
  });

  const attempts = [
    '../outside',
    'sub/../../outside',
    './../outside',
    path.join(root, 'outside'), // absolute path of the outside file
    '/etc/passwd',
    'escape.txt',
    'escapedir/secret.txt',
    'sub/rel-escape.txt',
    '%2e%2e/outside',
  ];
  for (const p of attempts) {
    const { text, res } = await fails(client, 'read_file', { path: p });
    const all = JSON.stringify(res);
    assert.ok(!all.includes(SECRET), `read_file(${p}) leaked the outside file`);
    assert.ok(!/root:.*:0:0:/.test(all), `read_file(${p}) leaked /etc/passwd`);
    assert.ok(text.length > 0);
  }
});

test('read_file errors are isError results with a helpful text', T, async (t) => {
  const { client } = await setup(t, async ({ workspace }) => {
    await put(workspace, 'three.txt', 'one\ntwo\nthree\n');
    await mkdir(path.join(workspace, 'folder'));
  });
  {
    const { text } = await fails(client, 'read_file', { path: 'missing.txt' });
    assert.match(text, /missing\.txt/, 'error should name the missing path');
    assert.match(text, /not (found|exist)|no such/i);
  }
  {
    const { text } = await fails(client, 'read_file', { path: 'folder' });
    assert.match(text, /dir/i, 'error should say it is a directory');
  }
  {
    const { text } = await fails(client, 'read_file', { path: 'three.txt', offset: 50 });
    assert.match(text, /offset|past|beyond|end/i);
    assert.match(text, /\b3\b/, 'error should tell how many lines the file has');
  }
});

test('read_file rejects invalid arguments with isError', T, async (t) => {
  const { client } = await setup(t, async ({ workspace }) => put(workspace, 'f.txt', 'a\nb\n'));
  const bad = [
    { path: 'f.txt', bogus: true },
    { path: 123 },
    {},
    { path: 'f.txt', limit: 0 },
    { path: 'f.txt', limit: 5000 },
    { path: 'f.txt', offset: -1 },
    { path: 'f.txt', offset: 'zero' },
    { path: 'f.txt', limit: 1.5 },
  ];
  for (const args of bad) await fails(client, 'read_file', args);
  // And the good call still works afterwards on the same session.
  const good = await ok(client, 'read_file', { path: 'f.txt', limit: 1 });
  assert.equal(good.structuredContent.content, 'a\n');
});

test('unknown tool is rejected', T, async (t) => {
  const { client } = await setup(t);
  const { result, rpcError } = await callToolLoose(client, 'no_such_tool', {});
  if (rpcError) {
    assert.ok(typeof rpcError.code === 'number', `expected a JSON-RPC error, got ${rpcError}`);
    assert.match(rpcError.message, /no_such_tool|not found|unknown/i);
  } else {
    assert.equal(result.isError, true);
    assert.match(textOf(result), /no_such_tool/);
  }
  // The session survives.
  await client.ping();
});
