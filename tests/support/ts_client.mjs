// Drives game-bridge-mcp with an official TypeScript MCP client, as a user's client would:
// connect, list the tools, then run the steps it is given. Used by tests/support/ts_helpers.py.
//
//   node ts_client.mjs < plan.json > report.json
//
// plan: {root: the npm folder holding the package, flavor: "sdk" (@modelcontextprotocol/sdk 1.x)
//        or "client" (@modelcontextprotocol/client 2.x), negotiation: "legacy" | "auto" | a
//        version to pin (client only), transport: {kind: "stdio", command, args, env, cwd} or
//        {kind: "http", url, token}, steps: [{tool, arguments, progress: bool}]}
// report: {protocolVersion, tools: [{name, outputSchema}], steps: [{ok, result | error, progress}],
//          closedEarly: whether the connection closed by itself, errors: the transport's errors}
// A result is summarised (a big text is not echoed whole): see summarise().

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const plan = JSON.parse(readFileSync(0, "utf8"));
const require = createRequire(path.join(plan.root, "package.json"));

let Client, StdioClientTransport, StreamableHTTPClientTransport;
if (plan.flavor === "sdk") {
  ({ Client } = require("@modelcontextprotocol/sdk/client/index.js"));
  ({ StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js"));
  ({ StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js"));
} else {
  ({ Client, StreamableHTTPClientTransport } = require("@modelcontextprotocol/client"));
  ({ StdioClientTransport } = require("@modelcontextprotocol/client/stdio"));
}

const TEXT_ECHO = 200_000;

function summarise(result) {
  const out = { isError: Boolean(result.isError), content: [] };
  for (const block of result.content ?? []) {
    if (block.type === "text") {
      const entry = { type: "text", length: block.text.length };
      if (block.text.length <= TEXT_ECHO) entry.text = block.text;
      else entry.head = block.text.slice(0, 4000);
      out.content.push(entry);
    } else if (block.type === "image") {
      out.content.push({ type: "image", mimeType: block.mimeType, length: block.data.length,
                         head: Buffer.from(block.data.slice(0, 16), "base64").toString("hex") });
    } else {
      out.content.push({ type: block.type });
    }
  }
  if (result.structuredContent !== undefined) {
    const json = JSON.stringify(result.structuredContent);
    out.structuredLength = json.length;
    if (json.length <= TEXT_ECHO) out.structuredContent = result.structuredContent;
  }
  return out;
}

const report = { steps: [], errors: [], closed: false };
const options = {};
if (plan.flavor === "client" && plan.negotiation && plan.negotiation !== "legacy") {
  options.versionNegotiation = { mode: plan.negotiation === "auto" ? "auto" : { pin: plan.negotiation } };
}
const client = new Client({ name: "game-bridge-ts-test", version: "1.0.0" }, options);

let transport;
const t = plan.transport;
if (t.kind === "stdio") {
  transport = new StdioClientTransport({ command: t.command, args: t.args, env: t.env, cwd: t.cwd, stderr: "inherit" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(t.url), {
    requestInit: { headers: { Authorization: `Bearer ${t.token}` } },
  });
}
client.onclose = () => { report.closed = true; };
client.onerror = (error) => { report.errors.push(String(error?.message ?? error).slice(0, 500)); };

try {
  await client.connect(transport);
  report.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null;
  report.serverCapabilities = client.getServerCapabilities() ?? null;
  const listed = await client.listTools();
  report.tools = listed.tools.map((tool) => ({ name: tool.name, outputSchema: tool.outputSchema }));
  for (const step of plan.steps) {
    const progress = [];
    const requestOptions = { timeout: 120_000 };
    if (step.progress) {
      requestOptions.onprogress = (p) => progress.push(p);
      requestOptions.resetTimeoutOnProgress = true;
    }
    try {
      const params = { name: step.tool, arguments: step.arguments ?? {} };
      const result = plan.flavor === "sdk" ? await client.callTool(params, undefined, requestOptions)
                                           : await client.callTool(params, requestOptions);
      report.steps.push({ ok: true, result: summarise(result), progress });
    } catch (error) {
      report.steps.push({ ok: false, error: { code: error?.code ?? null, message: String(error?.message ?? error).slice(0, 2000) },
                          progress });
    }
  }
  // Still connected after every step: the tools can be listed again.
  report.listedAfter = (await client.listTools()).tools.length;
  report.closedEarly = report.closed;  // before this script closes it
} catch (error) {
  report.fatal = String(error?.stack ?? error).slice(0, 4000);
} finally {
  try {
    if (t.kind === "http" && transport.sessionId && transport.terminateSession) await transport.terminateSession();
  } catch (error) {
    report.errors.push("terminateSession: " + String(error?.message ?? error));
  }
  await client.close().catch(() => {});
}
// exit once the report is out (a pipe is written asynchronously; exiting at once would cut it)
process.stdout.write(JSON.stringify(report), () => process.exit(0));
