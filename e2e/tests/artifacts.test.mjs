// Provenance and Project Artifacts: get_file_provenance credits workspace
// files to the run_shell execution that wrote them (or says unknown), keeps
// every revision with its content, diffs and a W3C PROV-JSON export;
// declare_artifact snapshots files as versioned artifacts that list_artifacts,
// read_artifact and MCP resources serve to every session of the project.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { ResourceListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { connectStdio, makeDirs, put, textOf } from '../lib/harness.mjs';

const T = { timeout: 30_000 };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha256 = (data) => createHash('sha256').update(data).digest('hex');
const REV = /^rev_[0-9a-f]{16}$/;
const ART = /^art_[0-9a-f]{16}$/;
const PAGE_BYTES = 40960;
const PAGE_LINES = 2000;

/** Calls a tool that must succeed; returns the result (structuredContent already schema-checked by the SDK). */
async function ok(client, name, args = {}) {
  const res = await client.callTool({ name, arguments: args });
  assert.notEqual(res.isError, true, `${name}(${JSON.stringify(args).slice(0, 300)}) failed: ${textOf(res)}`);
  assert.ok(res.structuredContent, `${name} returned no structuredContent: ${JSON.stringify(res).slice(0, 400)}`);
  return res;
}

/** Runs a command with run_shell that must succeed; returns its structuredContent. */
async function run(client, command, args) {
  const res = (await ok(client, 'run_shell', { command, ...(args ? { arguments: args } : {}) })).structuredContent;
  assert.equal(res.state, 'succeeded', `run_shell ${command}: ${JSON.stringify(res)}`);
  return res;
}

/** get_file_provenance; returns its structuredContent (and the text as .text). */
async function prov(client, file, extra = {}) {
  const res = await ok(client, 'get_file_provenance', { path: file, ...extra });
  return { ...res.structuredContent, text: textOf(res) };
}

/** Connects over stdio and lists tools, so the SDK checks every structuredContent against its schema. */
async function stdio(t, dirs) {
  const conn = await connectStdio(t, dirs);
  await conn.client.listTools();
  return conn;
}

/** Waits until cond() is true; fails with `what` after timeoutMs. */
async function waitFor(cond, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Counts notifications/resources/list_changed the client receives. */
function countListChanged(client) {
  const seen = { count: 0 };
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
    seen.count++;
  });
  return seen;
}

test('provenance: three files written by one run_shell name that execution; a second run adds a revision with a diff; PROV-JSON links them', T, async (t) => {
  const dirs = await makeDirs(t);
  const { client } = await stdio(t, dirs);

  const script = [
    'set -e',
    'mkdir -p results',
    'seq 1 5 > results/counts.txt',
    'printf "id,value\\n1,%s\\n" "$1" > results/table.csv',
    'printf \'{"ok": true}\\n\' > results/summary.json',
  ].join('\n');
  const first = await run(client, script, ['42']);
  const expected = {
    'results/counts.txt': '1\n2\n3\n4\n5\n',
    'results/table.csv': 'id,value\n1,42\n',
    'results/summary.json': '{"ok": true}\n',
  };

  const firstRevs = {};
  for (const [file, content] of Object.entries(expected)) {
    assert.equal(readFileSync(path.join(dirs.workspace, file), 'utf8'), content, `the script did not write ${file} as expected`);
    const p = await prov(client, file);
    assert.equal(p.mode, 'summary');
    assert.equal(p.exists, true);
    assert.equal(p.path, file);
    assert.equal(p.size, Buffer.byteLength(content));
    assert.equal(p.hash, sha256(content), `${file}: hash is not the sha256 of the file`);
    assert.equal(p.origin, 'execution', `${file} is not credited to the execution: ${JSON.stringify(p)}`);
    assert.equal(p.current_source?.kind, 'execution');
    assert.equal(p.current_source.execution_id, first.execution_id, `${file}: wrong execution`);
    assert.equal(p.current_source.command, script, `${file}: the source does not carry the command`);
    assert.deepEqual(p.current_source.arguments, ['42']);
    assert.equal(p.execution?.execution_id, first.execution_id);
    assert.equal(p.execution.command, script);
    assert.equal(p.execution.state, 'succeeded');
    assert.equal(p.execution.exit_code, 0);
    assert.equal(p.execution.runner, first.runner);
    assert.equal(p.execution.started, first.started, `${file}: execution start differs from run_shell's`);
    assert.equal(p.execution.ended, first.ended, `${file}: execution end differs from run_shell's`);
    assert.match(p.execution.session ?? '', /\S/, `${file}: the execution's session is not recorded`);
    assert.ok(p.text.includes(first.execution_id), `${file}: the text does not name the execution: ${p.text}`);
    assert.equal(p.history_total, 1);
    assert.equal(p.history.length, 1);
    const [rev] = p.history;
    assert.match(rev.revision_id, REV);
    assert.equal(rev.revision_id, p.current_revision);
    assert.equal(rev.change, 'created');
    assert.equal(rev.origin, 'execution');
    assert.equal(rev.writer.execution_id, first.execution_id);
    assert.equal(rev.content_kept, true);
    assert.equal(rev.seen_by, `scan after execution ${first.execution_id}`);
    assert.equal(p.parent?.previous_revision, undefined, `${file}: a first revision has no previous one`);
    firstRevs[file] = rev.revision_id;
  }
  assert.equal(new Set(Object.values(firstRevs)).size, 3, `three files need three revisions: ${JSON.stringify(firstRevs)}`);

  // A second run changes one line of one file.
  const bump = "sed -i 's/^3$/three/' results/counts.txt";
  const second = await run(client, bump);
  const file = 'results/counts.txt';
  const now = '1\n2\nthree\n4\n5\n';
  const p = await prov(client, file);
  assert.equal(p.hash, sha256(now));
  assert.equal(p.history_total, 2, `expected two revisions: ${JSON.stringify(p.history)}`);
  const [rev2, rev1] = p.history;
  assert.equal(rev1.revision_id, firstRevs[file]);
  assert.notEqual(rev2.revision_id, rev1.revision_id);
  assert.equal(p.current_revision, rev2.revision_id);
  assert.equal(rev2.change, 'modified');
  assert.equal(rev2.previous, rev1.revision_id);
  assert.equal(rev2.writer.execution_id, second.execution_id);
  assert.equal(rev2.writer.command, bump);
  assert.equal(rev2.hash, sha256(now));
  assert.equal(rev1.writer.execution_id, first.execution_id, 'the first revision must keep its own writer');
  assert.equal(rev1.hash, sha256(expected[file]));
  assert.equal(p.origin, 'execution');
  assert.equal(p.execution.execution_id, second.execution_id);
  assert.equal(p.execution.command, bump);
  assert.equal(p.parent?.previous_revision, rev1.revision_id);
  assert.equal(p.parent.previous_hash, sha256(expected[file]));

  // The files the second run did not touch got no new revision.
  for (const other of ['results/table.csv', 'results/summary.json']) {
    const o = await prov(client, other);
    assert.equal(o.history_total, 1, `${other} gained a revision though only ${file} changed: ${JSON.stringify(o.history)}`);
    assert.equal(o.current_revision, firstRevs[other]);
    assert.equal(o.execution.execution_id, first.execution_id);
  }

  // The earlier revision's content is kept and readable.
  const old = await prov(client, file, { revision: rev1.revision_id });
  assert.equal(old.mode, 'revision');
  assert.equal(old.page?.content, expected[file], `revision ${rev1.revision_id} content: ${JSON.stringify(old.page)}`);
  assert.equal(old.page.eof, true);

  // A unified diff of the two revisions shows exactly the change.
  const diff = await prov(client, file, { diff_from: rev1.revision_id });
  assert.equal(diff.mode, 'diff');
  assert.equal(diff.page?.diff_from, rev1.revision_id);
  assert.equal(diff.page.diff_to, rev2.revision_id, 'diff_to must default to the current revision');
  assert.equal(diff.page.identical ?? false, false);
  assert.equal(diff.page.added, 1);
  assert.equal(diff.page.removed, 1);
  assert.equal(diff.page.eof, true);
  const lines = diff.page.content.split('\n');
  assert.match(lines[0], /^--- /, diff.page.content);
  assert.match(lines[1], /^\+\+\+ /, diff.page.content);
  assert.equal(lines.slice(2).join('\n'), '@@ -1,5 +1,5 @@\n 1\n 2\n-3\n+three\n 4\n 5\n', `unexpected diff:\n${diff.page.content}`);
  const back = await prov(client, file, { diff_from: rev2.revision_id, diff_to: rev1.revision_id });
  assert.ok(back.page.content.includes('\n-three\n+3\n'), `reverse diff:\n${back.page.content}`);

  // PROV-JSON: it parses, and the file entity, its revisions and the executions are linked.
  const pj = await prov(client, file, { format: 'prov-json' });
  assert.equal(pj.mode, 'prov-json');
  assert.equal(pj.page?.eof, true, 'a two-revision export must fit one page');
  let doc;
  assert.doesNotThrow(() => (doc = JSON.parse(pj.page.content)), `PROV-JSON does not parse: ${pj.page.content.slice(0, 400)}`);
  assert.ok(doc.prefix?.scimcp, 'the scimcp prefix is not declared');
  const fileIds = Object.entries(doc.entity ?? {})
    .filter(([, e]) => e['scimcp:path'] === file && e['prov:type']?.$ === 'scimcp:File')
    .map(([id]) => id);
  assert.equal(fileIds.length, 1, `expected one file entity for ${file}: ${JSON.stringify(Object.keys(doc.entity ?? {}))}`);
  const [fileId] = fileIds;
  const r1 = `scimcp:${rev1.revision_id}`;
  const r2 = `scimcp:${rev2.revision_id}`;
  const e1 = `scimcp:${first.execution_id}`;
  const e2 = `scimcp:${second.execution_id}`;
  assert.equal(doc.entity[r2]?.['scimcp:sha256'], rev2.hash);
  assert.equal(doc.entity[r1]?.['scimcp:sha256'], rev1.hash);
  assert.equal(doc.activity?.[e2]?.['scimcp:command'], bump);
  assert.equal(doc.activity?.[e1]?.['scimcp:command'], script);
  assert.equal(doc.activity[e2]['scimcp:exitCode'], 0);
  assert.ok(doc.activity[e2]['prov:startTime'] && doc.activity[e2]['prov:endTime'], 'the execution activity has no times');
  const rel = (kind, want) => Object.values(doc[kind] ?? {}).some((r) => Object.entries(want).every(([k, v]) => r[k] === v));
  assert.ok(rel('specializationOf', { 'prov:generalEntity': fileId, 'prov:specificEntity': r2 }), `${r2} is not a specialization of ${fileId}`);
  assert.ok(rel('specializationOf', { 'prov:generalEntity': fileId, 'prov:specificEntity': r1 }), `${r1} is not a specialization of ${fileId}`);
  assert.ok(rel('wasGeneratedBy', { 'prov:entity': r2, 'prov:activity': e2 }), `${r2} wasGeneratedBy ${e2} missing: ${JSON.stringify(doc.wasGeneratedBy)}`);
  assert.ok(rel('wasGeneratedBy', { 'prov:entity': r1, 'prov:activity': e1 }), `${r1} wasGeneratedBy ${e1} missing: ${JSON.stringify(doc.wasGeneratedBy)}`);
  assert.ok(rel('wasDerivedFrom', { 'prov:generatedEntity': r2, 'prov:usedEntity': r1 }), `${r2} wasDerivedFrom ${r1} missing`);
  const assoc = Object.values(doc.wasAssociatedWith ?? {}).filter((r) => r['prov:activity'] === e2).map((r) => r['prov:agent']);
  assert.ok(assoc.length >= 1 && assoc.every((a) => doc.agent?.[a]), `${e2} is not associated with agents of the document: ${JSON.stringify(assoc)}`);
  // Every reference of every relation points at a record of the document.
  const records = new Set([...Object.keys(doc.entity ?? {}), ...Object.keys(doc.activity ?? {}), ...Object.keys(doc.agent ?? {})]);
  const refKeys = ['prov:entity', 'prov:activity', 'prov:agent', 'prov:generalEntity', 'prov:specificEntity', 'prov:generatedEntity', 'prov:usedEntity'];
  for (const kind of Object.keys(doc).filter((k) => !['prefix', 'entity', 'activity', 'agent'].includes(k))) {
    for (const [id, r] of Object.entries(doc[kind])) {
      for (const k of refKeys) {
        if (r[k] !== undefined) assert.ok(records.has(r[k]), `${kind} ${id}: ${k} ${r[k]} is not a record of the document`);
      }
    }
  }
});

test('provenance: a workspace script run by scriptPath is named with its own revision, and PROV says the run used it', T, async (t) => {
  const dirs = await makeDirs(t);
  const { client } = await stdio(t, dirs);
  const maker = await run(client, 'printf \'%s\\n\' "#!/bin/sh" "echo \\"made from \\$1\\" > made.txt" > make.sh');
  const scriptProv = await prov(client, 'make.sh');
  assert.equal(scriptProv.current_source?.execution_id, maker.execution_id);

  const res = (await ok(client, 'run_shell', { scriptPath: 'make.sh', arguments: ['input-7'] })).structuredContent;
  assert.equal(res.state, 'succeeded', JSON.stringify(res));
  assert.equal(readFileSync(path.join(dirs.workspace, 'made.txt'), 'utf8'), 'made from input-7\n');
  const p = await prov(client, 'made.txt');
  assert.equal(p.origin, 'execution');
  assert.equal(p.execution?.execution_id, res.execution_id);
  assert.equal(p.execution.scriptPath, 'make.sh');
  assert.deepEqual(p.execution.arguments, ['input-7']);
  assert.equal(p.execution.script_revision, scriptProv.current_revision, 'the run does not name the script revision it ran');

  const doc = JSON.parse((await prov(client, 'made.txt', { format: 'prov-json' })).page.content);
  const act = `scimcp:${res.execution_id}`;
  const scriptRev = `scimcp:${scriptProv.current_revision}`;
  const used = Object.values(doc.used ?? {}).find((u) => u['prov:activity'] === act && u['prov:entity'] === scriptRev);
  assert.ok(used, `no "used" relation from ${act} to the script revision ${scriptRev}: ${JSON.stringify(doc.used)}`);
  assert.equal(used['prov:role']?.$, 'scimcp:script');
  assert.ok(doc.entity?.[scriptRev], 'the script revision is not an entity of the document');
});

test('provenance: a file put into the workspace by hand has origin unknown after a restart', T, async (t) => {
  const dirs = await makeDirs(t);
  const first = await stdio(t, dirs);
  const ran = await run(first.client, 'echo from-run > ran.txt');
  const content = 'copied in by hand\n';
  await put(dirs.workspace, 'notes/by-hand.txt', content); // not through run_shell
  await first.client.close(); // stdin EOF: the server exits and frees the data folder

  const second = await stdio(t, dirs);
  assert.notEqual(second.transport.pid, first.transport.pid);
  const p = await prov(second.client, 'notes/by-hand.txt');
  assert.equal(p.exists, true);
  assert.equal(p.hash, sha256(content));
  assert.equal(p.origin, 'unknown', `a hand-written file was credited: ${JSON.stringify(p)}`);
  assert.equal(p.current_source?.kind, 'unknown');
  assert.match(p.current_source.note ?? '', /\S/, 'unknown needs a note saying why');
  assert.equal(p.current_source.execution_id, undefined);
  assert.equal(p.execution, undefined, `an unknown origin must not name an execution: ${JSON.stringify(p.execution)}`);
  assert.equal(p.history_total, 1);
  assert.equal(p.history[0].origin, 'unknown');
  assert.equal(p.history[0].writer.kind, 'unknown');
  assert.equal(p.history[0].seen_by, 'server start', `the restart's scan should have found it: ${JSON.stringify(p.history[0])}`);
  assert.match(p.text, /unknown/i);
  assert.ok(!p.text.includes(ran.execution_id), 'the text credits the earlier execution');

  // What the execution wrote is still credited to it after the restart.
  const r = await prov(second.client, 'ran.txt');
  assert.equal(r.origin, 'execution');
  assert.equal(r.execution?.execution_id, ran.execution_id);
  assert.equal(r.history_total, 1, `the restart must not add a revision to an unchanged file: ${JSON.stringify(r.history)}`);
});

test('artifacts: declare two files, again unchanged, v2 after a change, 51 paths refused; resource links and list_changed', T, async (t) => {
  const dirs = await makeDirs(t);
  const { client } = await stdio(t, dirs);
  const changed = countListChanged(client);

  const run1 = await run(client, 'mkdir -p out && printf "x,y\\n1,2\\n" > out/fig.csv && printf "# Notes\\n\\nfirst\\n" > out/notes.md');
  const csv = 'x,y\n1,2\n';
  const mdV1 = '# Notes\n\nfirst\n';
  const notesRev1 = (await prov(client, 'out/notes.md')).current_revision;

  const decl = await ok(client, 'declare_artifact', { paths: ['out/fig.csv', 'out/notes.md'], name: 'paper', description: 'figure data and notes' });
  const d = decl.structuredContent;
  assert.deepEqual([d.declared, d.unchanged, d.failed], [2, 0, 0], JSON.stringify(d));
  assert.equal(d.entries.length, 2);
  const [fig, notes] = d.entries;
  for (const [e, file, name, content, preview] of [
    [fig, 'out/fig.csv', 'paper/fig.csv', csv, 'table'],
    [notes, 'out/notes.md', 'paper/notes.md', mdV1, 'markdown'],
  ]) {
    assert.equal(e.ok, true, JSON.stringify(e));
    assert.equal(e.path, file);
    assert.equal(e.name, name, 'with several paths, name is a virtual folder');
    assert.match(e.artifact_id, ART);
    assert.equal(e.version, 1);
    assert.equal(e.new_artifact, true);
    assert.equal(e.unchanged ?? false, false);
    assert.equal(e.uri, `scimcp://artifacts/${e.artifact_id}/v1`);
    assert.equal(e.hash, sha256(content));
    assert.equal(e.size, Buffer.byteLength(content));
    assert.equal(e.preview, preview, `${file} preview kind`);
    assert.equal(e.origin.kind, 'execution');
    assert.equal(e.origin.execution_id, run1.execution_id);
    assert.match(e.origin.file_revision ?? '', REV);
  }
  assert.notEqual(fig.artifact_id, notes.artifact_id);
  assert.equal(notes.origin.file_revision, notesRev1, 'the version must name the file revision it snapshots');

  // One resource_link per declared version.
  const links = decl.content.filter((c) => c.type === 'resource_link');
  assert.deepEqual(links.map((l) => l.uri).sort(), [fig.uri, notes.uri].sort(), `resource links: ${JSON.stringify(decl.content)}`);
  for (const l of links) assert.match(l.name ?? '', /^paper\//);
  await waitFor(() => changed.count >= 1, 5000, 'notifications/resources/list_changed after declaring two artifacts');
  const afterFirst = changed.count;

  // Provenance names the artifact version declared from the file.
  const np = await prov(client, 'out/notes.md');
  assert.ok(
    np.artifacts?.some((a) => a.artifact_id === notes.artifact_id && a.version === 1 && a.uri === notes.uri),
    `get_file_provenance does not list the artifact: ${JSON.stringify(np.artifacts)}`,
  );

  // Declaring the same content again under the same name makes no version.
  const again = (await ok(client, 'declare_artifact', { path: 'out/notes.md', name: 'paper/notes.md' })).structuredContent;
  assert.deepEqual([again.declared, again.unchanged, again.failed], [0, 1, 0], JSON.stringify(again));
  assert.equal(again.entries[0].unchanged, true);
  assert.equal(again.entries[0].artifact_id, notes.artifact_id);
  assert.equal(again.entries[0].version, 1);
  assert.equal(again.entries[0].new_artifact ?? false, false);

  // After a change, the same name gets version 2; version 1 keeps its content.
  const run2 = await run(client, 'echo "second" >> out/notes.md');
  const mdV2 = mdV1 + 'second\n';
  const v2 = await ok(client, 'declare_artifact', { path: 'out/notes.md', name: 'paper/notes.md' });
  const e2 = v2.structuredContent.entries[0];
  assert.deepEqual([v2.structuredContent.declared, v2.structuredContent.unchanged], [1, 0], JSON.stringify(v2.structuredContent));
  assert.equal(e2.artifact_id, notes.artifact_id, 'the same name must be the same artifact');
  assert.equal(e2.version, 2);
  assert.equal(e2.new_artifact ?? false, false);
  assert.equal(e2.uri, `scimcp://artifacts/${notes.artifact_id}/v2`);
  assert.equal(e2.hash, sha256(mdV2));
  assert.equal(e2.origin.execution_id, run2.execution_id);
  assert.deepEqual(v2.content.filter((c) => c.type === 'resource_link').map((l) => l.uri), [e2.uri]);
  await waitFor(() => changed.count > afterFirst, 5000, 'notifications/resources/list_changed after declaring v2');
  const v1read = (await ok(client, 'read_artifact', { artifact_id: notes.artifact_id, version: 1 })).structuredContent;
  assert.equal(v1read.content, mdV1, 'version 1 changed after the file changed');
  assert.equal(v1read.latest_version, 2);

  // 51 paths refuse the whole call and store nothing, even though every file exists.
  await run(client, 'mkdir -p many && for i in $(seq 1 51); do echo "$i" > "many/f$i.txt"; done');
  const many = Array.from({ length: 51 }, (_, i) => `many/f${i + 1}.txt`);
  const refused = await client.callTool({ name: 'declare_artifact', arguments: { paths: many } });
  assert.equal(refused.isError, true, `51 paths were accepted: ${JSON.stringify(refused).slice(0, 600)}`);
  assert.match(textOf(refused), /50/, textOf(refused));
  const list = (await ok(client, 'list_artifacts')).structuredContent;
  assert.equal(list.count, 2, `the refused call stored artifacts: ${JSON.stringify(list.artifacts.map((a) => a.name))}`);
  assert.deepEqual(list.artifacts.map((a) => a.name).sort(), ['paper/fig.csv', 'paper/notes.md']);
});

test('artifacts: resources/list and resources/read serve them; a second session on the same data folder lists and reads every version', T, async (t) => {
  const dirs = await makeDirs(t);
  const first = await stdio(t, dirs);
  const run1 = await run(first.client, 'printf "a\\tb\\n1\\t2\\n" > data.tsv && echo "v1 text" > report.txt');
  const d1 = (await ok(first.client, 'declare_artifact', { paths: ['data.tsv', 'report.txt'] })).structuredContent;
  assert.equal(d1.declared, 2, JSON.stringify(d1));
  const [tsv, report] = d1.entries;
  assert.equal(tsv.name, 'data.tsv', 'the default name is the workspace path');
  assert.equal(report.name, 'report.txt');
  const run2 = await run(first.client, 'echo "v2 text" > report.txt');
  const d2 = (await ok(first.client, 'declare_artifact', { path: 'report.txt' })).structuredContent;
  assert.equal(d2.entries[0].version, 2, JSON.stringify(d2));
  assert.equal(d2.entries[0].artifact_id, report.artifact_id);
  const firstSession = (await prov(first.client, 'report.txt')).execution.session;

  // resources/list: one resource per artifact, the latest-version URI.
  const { resources } = await first.client.listResources();
  const byUri = Object.fromEntries(resources.map((r) => [r.uri, r]));
  for (const e of [tsv, report]) {
    assert.ok(byUri[`scimcp://artifacts/${e.artifact_id}`], `resources/list lacks ${e.name}: ${JSON.stringify(resources)}`);
    assert.equal(byUri[`scimcp://artifacts/${e.artifact_id}`].name, e.name);
  }
  assert.equal(resources.filter((r) => r.uri.startsWith('scimcp://artifacts/')).length, 2, JSON.stringify(resources));
  assert.equal(byUri[`scimcp://artifacts/${report.artifact_id}`].size, Buffer.byteLength('v2 text\n'));

  // resources/read: latest and pinned versions return their text.
  const readText = async (client, uri) => {
    const r = await client.readResource({ uri });
    assert.equal(r.contents.length, 1, JSON.stringify(r));
    assert.equal(r.contents[0].uri, uri);
    assert.equal(r.contents[0].blob, undefined, `${uri} came back as a blob`);
    return r.contents[0].text;
  };
  assert.equal(await readText(first.client, `scimcp://artifacts/${report.artifact_id}`), 'v2 text\n');
  assert.equal(await readText(first.client, `scimcp://artifacts/${report.artifact_id}/v1`), 'v1 text\n');
  assert.equal(await readText(first.client, `scimcp://artifacts/${report.artifact_id}/v2`), 'v2 text\n');
  assert.equal(await readText(first.client, tsv.uri), 'a\tb\n1\t2\n');
  await assert.rejects(first.client.readResource({ uri: `scimcp://artifacts/${report.artifact_id}/v3` }), 'a version that does not exist must not be readable');

  await first.client.close();
  const second = await stdio(t, dirs);
  assert.notEqual(second.transport.pid, first.transport.pid);

  const list = (await ok(second.client, 'list_artifacts')).structuredContent;
  assert.equal(list.count, 2, JSON.stringify(list));
  const byName = Object.fromEntries(list.artifacts.map((a) => [a.name, a]));
  const r = byName['report.txt'];
  assert.ok(r, `the second session does not list report.txt: ${JSON.stringify(list)}`);
  assert.equal(r.artifact_id, report.artifact_id);
  assert.equal(r.latest_version, 2);
  assert.equal(r.creation.version, 1);
  assert.equal(r.creation.hash, sha256('v1 text\n'));
  assert.equal(r.creation.origin.execution_id, run1.execution_id);
  assert.equal(r.creation.session, firstSession, 'the creation snapshot must name the session that declared it');
  assert.equal(r.creation.source_path, 'report.txt');
  assert.equal(r.latest.version, 2);
  assert.equal(r.latest.hash, sha256('v2 text\n'));
  assert.equal(r.latest.origin.execution_id, run2.execution_id);
  assert.equal(r.latest.uri, `scimcp://artifacts/${report.artifact_id}/v2`);
  assert.equal(r.origin.execution_id, run1.execution_id, 'origin is the creation snapshot\'s');
  const t2 = byName['data.tsv'];
  assert.equal(t2?.latest_version, 1);
  assert.equal(t2.latest.preview, 'table');
  assert.equal(t2.creation.hash, t2.latest.hash);

  const v1 = (await ok(second.client, 'read_artifact', { name: 'report.txt', version: 1 })).structuredContent;
  assert.equal(v1.content, 'v1 text\n');
  assert.equal(v1.version, 1);
  assert.equal(v1.latest_version, 2);
  assert.equal(v1.uri, `scimcp://artifacts/${report.artifact_id}/v1`);
  const latest = (await ok(second.client, 'read_artifact', { artifact_id: report.artifact_id })).structuredContent;
  assert.equal(latest.content, 'v2 text\n');
  assert.equal(latest.version, 2);
  assert.equal(await readText(second.client, `scimcp://artifacts/${report.artifact_id}/v1`), 'v1 text\n');
  const again = await second.client.listResources();
  assert.ok(again.resources.some((x) => x.uri === `scimcp://artifacts/${tsv.artifact_id}`), 'the second session does not list the resources');
});

test('read_artifact pages a 5000-line artifact exactly, following next_offset', T, async (t) => {
  const dirs = await makeDirs(t);
  const { client } = await stdio(t, dirs);
  // Lines of varying length (8 to 70 bytes): 2000 of them exceed 40 KiB, so pages end on the byte bound.
  await run(
    client,
    'seq 1 5000 | awk \'{ printf "row %d %s\\n", $1, substr("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 1, $1 % 61) }\' > long.txt',
  );
  const whole = readFileSync(path.join(dirs.workspace, 'long.txt'), 'utf8');
  const all = whole.split('\n').slice(0, -1);
  assert.equal(all.length, 5000, 'test premise: 5000 lines');
  const decl = (await ok(client, 'declare_artifact', { path: 'long.txt', name: 'tables/long.txt' })).structuredContent;
  const id = decl.entries[0].artifact_id;

  let offset = 0;
  let text = '';
  let pages = 0;
  for (;;) {
    const p = (await ok(client, 'read_artifact', pages === 0 ? { name: 'tables/long.txt' } : { artifact_id: id, offset })).structuredContent;
    pages++;
    assert.ok(pages <= 20, 'did not end within 20 pages');
    assert.equal(p.artifact_id, id);
    assert.equal(p.version, 1);
    assert.equal(p.binary, false);
    assert.equal(p.size, Buffer.byteLength(whole));
    assert.equal(p.offset, offset);
    assert.equal(p.total_lines, 5000);
    assert.equal(p.bytes, Buffer.byteLength(p.content), 'bytes must count the returned content');
    assert.ok(p.bytes <= PAGE_BYTES && p.lines <= PAGE_LINES, `page at ${offset}: ${p.lines} lines, ${p.bytes} bytes`);
    assert.equal(p.content, all.slice(offset, offset + p.lines).join('\n') + '\n', `page at ${offset} is not lines ${offset + 1}–${offset + p.lines}`);
    text += p.content;
    if (p.eof) {
      assert.equal(p.next_offset, undefined, 'next_offset must be absent at the end');
      assert.equal(offset + p.lines, 5000);
      break;
    }
    assert.ok(p.lines > 0, 'a page must advance');
    assert.equal(p.next_offset, offset + p.lines);
    // The page is full: one more line would have crossed the 40 KiB bound.
    assert.ok(p.bytes + Buffer.byteLength(all[offset + p.lines] + '\n') > PAGE_BYTES, `page at ${offset} stopped early (${p.lines} lines, ${p.bytes} bytes)`);
    offset = p.next_offset;
  }
  assert.ok(pages >= 4, `expected at least 4 pages of at most 40 KiB, got ${pages}`);
  assert.equal(text, whole, 'the pages do not rebuild the artifact');

  // An explicit range and the last lines.
  const mid = (await ok(client, 'read_artifact', { artifact_id: id, offset: 1234, limit: 3 })).structuredContent;
  assert.equal(mid.content, all.slice(1234, 1237).join('\n') + '\n');
  assert.equal(mid.lines, 3);
  assert.equal(mid.next_offset, 1237);
  assert.equal(mid.eof, false);
  const end = (await ok(client, 'read_artifact', { artifact_id: id, offset: 4995, limit: 100 })).structuredContent;
  assert.equal(end.content, all.slice(4995).join('\n') + '\n');
  assert.equal(end.lines, 5);
  assert.equal(end.eof, true);
});
