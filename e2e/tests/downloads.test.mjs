// artifact_download through the TypeScript SDK client: a paper offered by an
// MCP source (examples/papers-source, a folder of PDFs) is downloaded with
// the user's permission (form elicitation), lands in the workspace with its
// provenance, is registered as a Project Artifact, and is extracted by job
// id in a later call. A client that cannot ask its user is refused by the
// default policy; a declining user leaves nothing behind.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { connectHttp, connectStdio, makeDirs, put, startHttp, textOf } from '../lib/harness.mjs';

const T = { timeout: 90_000 };
const PAPERS_SOURCE = process.env.PAPERS_SOURCE_BIN || path.resolve(import.meta.dirname, '..', '..', 'bin', 'papers-source');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

/** A minimal PDF with one line of text per page (Helvetica, no compression). */
function makePDF(title, pages) {
  const parts = ['%PDF-1.4\n'];
  const offsets = [];
  let len = parts[0].length;
  const obj = (body) => {
    offsets.push(len);
    const s = `${offsets.length} 0 obj\n${body}\nendobj\n`;
    parts.push(s);
    len += Buffer.byteLength(s);
  };
  const kids = pages.map((_, i) => `${4 + 2 * i} 0 R`).join(' ');
  obj('<< /Type /Catalog /Pages 2 0 R >>');
  obj(`<< /Type /Pages /Kids [${kids}] /Count ${pages.length} >>`);
  obj('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>');
  pages.forEach((text, i) => {
    obj(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${5 + 2 * i} 0 R >>`);
    const stream = `BT /F1 12 Tf 72 720 Td (${text}) Tj ET`;
    obj(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`);
  });
  obj(`<< /Title (${title}) /Author (scimcp e2e) >>`);
  const xref = len;
  let tail = `xref\n0 ${offsets.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) tail += `${String(o).padStart(10, '0')} 00000 n \n`;
  tail += `trailer\n<< /Size ${offsets.length + 1} /Root 1 0 R /Info ${offsets.length} 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  parts.push(tail);
  return Buffer.from(parts.join(''));
}

/** A library of two PDFs, served by papers-source as the MCP source "papers"; stdio unless http is set. */
async function setup(t, { ask, args = [], http = false } = {}) {
  assert.ok(existsSync(PAPERS_SOURCE), `no papers-source binary at ${PAPERS_SOURCE} (e2e/run.sh builds it)`);
  const dirs = await makeDirs(t);
  const paper = makePDF('Binding study', ['Abstract: Kd = 4.2 nM for compound A.', 'Methods: isothermal titration calorimetry.']);
  await put(dirs.root, 'library/binding-study.pdf', paper);
  await put(dirs.root, 'library/other-topic.pdf', makePDF('Other', ['Unrelated.']));
  const sourcesFile = await put(dirs.root, 'sources.json', JSON.stringify({
    mcpServers: { papers: { command: PAPERS_SOURCE, args: ['--dir', path.join(dirs.root, 'library')] } },
  }));
  const asked = [];
  const clientOpts = {
    capabilities: ask ? { elicitation: { form: {} } } : {},
    beforeConnect: ask
      ? (client) => client.setRequestHandler(ElicitRequestSchema, async (req) => {
        asked.push(req.params);
        return ask(req.params);
      })
      : undefined,
  };
  let conn;
  if (http) {
    const srv = await startHttp(t, { ...dirs, args: ['--sources', sourcesFile, ...args] });
    conn = await connectHttp(t, srv.url, clientOpts);
  } else {
    conn = await connectStdio(t, { ...dirs, args: ['--sources', sourcesFile, ...args], ...clientOpts });
  }
  for (let i = 0; i < 100; i++) {
    const { tools } = await conn.client.listTools();
    if (tools.some((x) => x.name === 'mcp__papers__search_papers')) break;
    await sleep(100);
  }
  return { ...conn, dirs, paper, asked };
}

/** Searches the library through the source; returns the invocation id, candidates and text. */
async function search(client, query) {
  await client.callTool({ name: 'tool_search', arguments: { query: 'select:mcp__papers__search_papers' } });
  const res = await client.callTool({ name: 'mcp__papers__search_papers', arguments: { query } });
  assert.notEqual(res.isError, true, textOf(res));
  const meta = res._meta?.['scimcp/untrusted'];
  assert.ok(meta?.mcpInvocationId?.startsWith('inv_'), `no invocation id in ${JSON.stringify(res._meta)}`);
  return { inv: meta.mcpInvocationId, candidates: meta.candidates ?? [], text: textOf(res) };
}

test('a paper offered by an MCP source is downloaded with permission, registered with provenance, and extracted in a later call', T, async (t) => {
  const { client, dirs, paper, asked } = await setup(t, { ask: () => ({ action: 'accept', content: { allow: true } }) });

  const { inv, candidates, text } = await search(client, 'binding');
  assert.equal(candidates.length, 1, `candidates: ${JSON.stringify(candidates)}`);
  const [c1] = candidates;
  assert.equal(c1.candidateId, 'c1');
  assert.equal(c1.kind, 'resource_link');
  assert.equal(c1.uri, 'papers://binding-study.pdf');
  assert.equal(c1.size, paper.length);
  assert.match(text, /untrusted result from MCP source "papers"/);
  assert.match(text, /c1: resource link papers:\/\/binding-study\.pdf/, 'the model sees the candidate in the text');

  const res = await client.callTool({ name: 'artifact_download', arguments: { mcpInvocationId: inv, candidateId: 'c1' } });
  assert.notEqual(res.isError, true, textOf(res));
  const out = res.structuredContent;
  assert.equal(out.state, 'completed');
  assert.equal(out.permission, 'user');
  assert.equal(out.path, 'downloads/binding-study.pdf');
  assert.equal(out.sha256, sha256(paper));
  assert.equal(out.bytes, paper.length);
  assert.equal(out.media_type, 'application/pdf');
  assert.ok(out.artifactJobId.startsWith('dl_'));
  assert.deepEqual(readFileSync(path.join(dirs.workspace, out.path)), paper, 'the workspace file is the paper, byte for byte');

  // The user was asked once, with a form, naming the source and the file.
  assert.equal(asked.length, 1);
  assert.equal(asked[0].mode ?? 'form', 'form');
  assert.match(asked[0].message, /papers:\/\/binding-study\.pdf/);
  assert.match(asked[0].message, /"papers"/);
  assert.equal(asked[0].requestedSchema.properties.allow.type, 'boolean');

  // Provenance: written by the download, naming invocation, candidate, job, URI, hash and size.
  const fp = await client.callTool({ name: 'get_file_provenance', arguments: { path: out.path } });
  assert.notEqual(fp.isError, true, textOf(fp));
  const w = fp.structuredContent.history[0].writer;
  assert.equal(w.kind, 'download');
  assert.equal(w.source.mcpInvocationId, inv);
  assert.equal(w.source.candidateId, 'c1');
  assert.equal(w.source.artifactJobId, out.artifactJobId);
  assert.equal(w.source.uri, 'papers://binding-study.pdf');
  assert.equal(w.source.hash, sha256(paper));
  assert.equal(w.source.bytes, paper.length);
  assert.equal(w.source.mcp_source, 'papers');

  // The Project Artifact, with the download as its origin.
  const list = await client.callTool({ name: 'list_artifacts', arguments: {} });
  const art = list.structuredContent.artifacts.find((a) => a.artifact_id === out.artifact_id);
  assert.ok(art, `artifact ${out.artifact_id} not listed: ${textOf(list)}`);
  assert.equal(art.name, 'downloads/binding-study.pdf');
  const read = await client.callTool({ name: 'read_artifact', arguments: { artifact_id: out.artifact_id } });
  assert.equal(read.structuredContent.binary, true);
  assert.equal(read.structuredContent.media_type, 'application/pdf');

  // A later call: extraction by job id.
  const ex = await client.callTool({ name: 'paper_extract_pdf', arguments: { artifactJobId: out.artifactJobId } });
  assert.notEqual(ex.isError, true, textOf(ex));
  assert.equal(ex.structuredContent.pages, 2);
  assert.equal(ex.structuredContent.metadata.Title, 'Binding study');
  const et = textOf(ex);
  assert.ok(et.indexOf('=== page 1 of 2 ===') < et.indexOf('Kd = 4.2 nM'), et);
  assert.ok(et.indexOf('=== page 2 of 2 ===') < et.indexOf('isothermal titration'), et);

  // Bad input: clear errors, and the user is not bothered.
  for (const [args, want] of [
    [{ mcpInvocationId: 'inv_0000', candidateId: 'c1' }, /no MCP invocation/],
    [{ mcpInvocationId: inv, candidateId: 'c7' }, /its candidates are c1/],
    [{ mcpInvocationId: inv, candidateId: 'c1', destinationPath: out.path }, /never overwrite/],
  ]) {
    const r = await client.callTool({ name: 'artifact_download', arguments: args });
    assert.equal(r.isError, true, JSON.stringify(args));
    assert.match(textOf(r), want);
  }
  assert.equal(asked.length, 1, 'bad input must not ask the user');
});

test('a declining user and a client that cannot ask: nothing is downloaded, and the model is told why', T, async (t) => {
  const declining = await setup(t, { ask: () => ({ action: 'decline' }) });
  const { inv } = await search(declining.client, 'binding');
  const res = await declining.client.callTool({ name: 'artifact_download', arguments: { mcpInvocationId: inv, candidateId: 'c1' } });
  assert.equal(res.isError, true);
  assert.match(textOf(res), /declined/);
  assert.equal(declining.asked.length, 1);
  assert.equal(existsSync(path.join(declining.dirs.workspace, 'downloads')), false, 'a declined download wrote into the workspace');
  const job = textOf(res).match(/dl_[0-9a-f]+/)?.[0];
  const ex = await declining.client.callTool({ name: 'paper_extract_pdf', arguments: { artifactJobId: job } });
  assert.equal(ex.isError, true);
  assert.match(textOf(ex), /declined/);

  // No elicitation capability: the default policy refuses, and says how to change it.
  const mute = await setup(t);
  const s = await search(mute.client, 'binding');
  const refused = await mute.client.callTool({ name: 'artifact_download', arguments: { mcpInvocationId: s.inv, candidateId: 'c1' } });
  assert.equal(refused.isError, true);
  assert.match(textOf(refused), /elicitation/);
  assert.match(textOf(refused), /--download-policy allow/);

  // The same client, with the policy set to allow.
  const allowed = await setup(t, { args: ['--download-policy', 'allow'] });
  const a = await search(allowed.client, 'other');
  const ok = await allowed.client.callTool({ name: 'artifact_download', arguments: { mcpInvocationId: a.inv, candidateId: 'c1', destinationPath: 'papers/other.pdf' } });
  assert.notEqual(ok.isError, true, textOf(ok));
  assert.equal(ok.structuredContent.permission, 'policy');
  assert.equal(ok.structuredContent.path, 'papers/other.pdf');
});

test('over streamable HTTP the permission question travels on the call\'s stream, and the paper is downloaded and extracted', T, async (t) => {
  const { client, dirs, paper, asked } = await setup(t, { http: true, ask: () => ({ action: 'accept', content: { allow: true } }) });
  const { inv, candidates } = await search(client, 'binding');
  assert.equal(candidates.length, 1);
  const res = await client.callTool({ name: 'artifact_download', arguments: { mcpInvocationId: inv, candidateId: 'c1', destinationPath: 'papers/binding.pdf' } });
  assert.notEqual(res.isError, true, textOf(res));
  assert.equal(res.structuredContent.state, 'completed');
  assert.equal(res.structuredContent.permission, 'user');
  assert.equal(asked.length, 1, 'the user was asked once over HTTP');
  assert.deepEqual(readFileSync(path.join(dirs.workspace, 'papers', 'binding.pdf')), paper);
  const ex = await client.callTool({ name: 'paper_extract_pdf', arguments: { artifactJobId: res.structuredContent.artifactJobId } });
  assert.notEqual(ex.isError, true, textOf(ex));
  assert.equal(ex.structuredContent.pages, 2);
});
