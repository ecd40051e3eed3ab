// Drive game-bridge-mcp from your own TypeScript or JavaScript code, through the official
// MCP SDK (npm install @modelcontextprotocol/sdk).
//
// Run it where a gamebridge.json is (`game-bridge-mcp demo --init` writes one for the bundled
// game), with game-bridge-mcp on PATH (or set GAME_BRIDGE_COMMAND to its full path):
//
//   node examples/connect.mjs
//
// It starts the server over stdio, launches the game, drops two fruit (each call waits until
// the board is still), prints what it scored and stops the game. Closing the client ends the
// server, which stops whatever it launched that is still running.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const transport = new StdioClientTransport({
  command: process.env.GAME_BRIDGE_COMMAND ?? "game-bridge-mcp",
  args: [],
  stderr: "inherit",
});
const client = new Client({ name: "connect-example", version: "1.0.0" });

// One tool call: the bridge's answer, or its error ("GameOffline: ...") thrown.
async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) throw new Error(result.content[0].text);
  return result.structuredContent;
}

await client.connect(transport);
try {
  const launched = await call("launch_instance", {});
  const port = launched.port;
  console.log(`${launched.name} is up on port ${port}`);
  try {
    await call("call_tool", { port, name: "click", arguments: { label: "Start" } });
    for (const x of [1, 1]) {
      const dropped = await call("call_tool", {
        port, name: "drop", arguments: { x },
        until: { path: "game.moving", equals: 0, timeoutMs: 10000 },
      });
      console.log(`drop at x=${x}: ${JSON.stringify(dropped.result)}`);
    }
    const state = await call("call_tool", { port, name: "get_state", arguments: { summary: true } });
    console.log(`score: ${state.game.score}`);
  } finally {
    const stopped = await call("stop_instance", { port });
    console.log(`stopped: ${stopped.how}`);
  }
} finally {
  await client.close();
}
