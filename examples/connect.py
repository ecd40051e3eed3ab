#!/usr/bin/env python3
"""Drive game-bridge-mcp from your own Python code, through the official MCP SDK (1.x or 2.x).

Run it where a ``gamebridge.json`` is (``game-bridge-mcp demo --init`` writes one for the
bundled game), with a Python that has the package and its SDK:

    python examples/connect.py

It starts the server over stdio, launches the game, drops two fruit (each call waits until
the board is still), prints what it scored and stops the game. The two SDK majors name a
result's fields differently (``result.isError`` in 1.x, ``result.is_error`` in 2.x), so the
result is read as the wire sends it, ``result.model_dump(by_alias=True)``, the same on both.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

#: The server, started by this interpreter: works installed and vendored alike. With the
#: package installed, ``StdioServerParameters(command="game-bridge-mcp")`` is the same.
SERVER = StdioServerParameters(command=sys.executable, args=["-m", "game_bridge_mcp"])


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call: the bridge's answer, or its error (``GameOffline: ...``) raised."""
    result = (await session.call_tool(tool, arguments)).model_dump(by_alias=True, exclude_none=True)
    if result.get("isError"):
        raise RuntimeError(result["content"][0]["text"])
    answer: dict[str, Any] = result["structuredContent"]
    return answer


async def main() -> None:
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        launched = await call(session, "launch_instance", {})
        port = launched["port"]
        print(f"{launched['name']} is up on port {port}")
        try:
            await call(session, "call_tool", {"port": port, "name": "click", "arguments": {"label": "Start"}})
            for x in (1, 1):
                dropped = await call(session, "call_tool", {
                    "port": port, "name": "drop", "arguments": {"x": x},
                    "until": {"path": "game.moving", "equals": 0, "timeoutMs": 10000}})
                print(f"drop at x={x}: {dropped['result']}")
            state = await call(session, "call_tool", {"port": port, "name": "get_state", "arguments": {"summary": True}})
            print(f"score: {state['game']['score']}")
        finally:
            stopped = await call(session, "stop_instance", {"port": port})
            print(f"stopped: {stopped['how']}")


if __name__ == "__main__":
    asyncio.run(main())
