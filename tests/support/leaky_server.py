"""A served env that leaks sessions (OpenEnv #1000's class of bug), for ``validate --soak``: it speaks the env server's
``/ws`` frames and ``/health``, but never frees a session, whether the client closes, drops or goes silent.

Run as ``python tests/support/leaky_server.py``: it prints its URL (``http://127.0.0.1:PORT``) and serves until killed.
"""

from __future__ import annotations

import json
import socket

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute

SESSIONS: set[int] = set()


async def health(request):
    return JSONResponse({"status": "healthy", "sessions": len(SESSIONS)})


async def reset(request):
    return JSONResponse({"observation": "Guess.", "reward": None, "done": False})


async def ws(websocket):
    await websocket.accept()
    SESSIONS.add(id(websocket))  # the fault: never removed
    try:
        while True:
            message = json.loads(await websocket.receive_text())
            reply = (
                {"observation": "Guess.", "reward": 0.0, "done": False}
                if message.get("type") in ("reset", "step")
                else {}
            )
            await websocket.send_text(json.dumps({"type": "observation", "data": reply}))
    except Exception:
        pass


app = Starlette(routes=[Route("/health", health), Route("/reset", reset, methods=["POST"]), WebSocketRoute("/ws", ws)])

if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"serving on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
