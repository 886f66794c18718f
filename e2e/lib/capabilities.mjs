// Prints the capabilities a running scimcp HTTP endpoint declares, as one
// space-separated line of names (e.g. "logging tools"). Used by run.sh to pick
// the capability-gated conformance scenarios.
//   usage: node lib/capabilities.mjs http://127.0.0.1:PORT/mcp

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.argv[2];
if (!url) {
  console.error('usage: capabilities.mjs URL');
  process.exit(2);
}
const client = new Client({ name: 'scimcp-e2e-capabilities', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const caps = client.getServerCapabilities() ?? {};
console.log(Object.keys(caps).sort().join(' '));
await transport.terminateSession().catch(() => {});
await client.close();
