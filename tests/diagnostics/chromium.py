"""A real headless Chromium driven over the DevTools protocol (tornado's websocket client; no
other dependency), for tests that must see what a browser renders.

Bokeh draws into shadow DOM and canvases, so the page's content is read the way a user's browser
holds it: the BokehJS documents' data sources and the text of every shadow root.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from tornado.websocket import websocket_connect

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


class Chromium:
    """One headless browser process; :meth:`render` opens a URL in its page."""

    def __init__(self, binary: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="gpuframe-chromium-")
        self.process = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "--window-size=1400,1300", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = Path(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"{binary} did not start: {self.process.stderr.read()!r}")
            time.sleep(0.05)
        self.port = int(port_file.read_text().split()[0])
        self._ids = itertools.count(1)

    def render(self, url: str, ready: str, timeout: float = 30) -> tuple[Any, bytes]:
        """Open ``url``; once the JavaScript expression ``ready`` returns a non-null value,
        return that value (JSON) and a PNG screenshot of the page."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list") as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        return asyncio.run(self._render(page["webSocketDebuggerUrl"], url, ready, timeout))

    async def _render(self, debugger: str, url: str, ready: str,
                      timeout: float) -> tuple[Any, bytes]:
        socket = await websocket_connect(debugger, max_message_size=64 * 2**20)
        try:
            await self._call(socket, "Page.enable")
            await self._call(socket, "Page.navigate", url=url)
            deadline = time.monotonic() + timeout
            value = None
            while value is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{url} was not ready in {timeout} s: {ready}")
                await asyncio.sleep(0.25)
                answer = await self._call(socket, "Runtime.evaluate", expression=ready,
                                          returnByValue=True)
                value = answer["result"].get("value")
            await asyncio.sleep(0.5)  # let the canvases paint before the screenshot
            shot = await self._call(socket, "Page.captureScreenshot", format="png")
            return json.loads(value), base64.b64decode(shot["data"])
        finally:
            socket.close()

    async def _call(self, socket: Any, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        await socket.write_message(json.dumps({"id": ident, "method": method,
                                               "params": params}))
        while True:
            message = await socket.read_message()
            if message is None:
                raise RuntimeError(f"Chromium closed the DevTools connection during {method}")
            reply = json.loads(message)
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def page_state(*texts: str) -> str:
    """JavaScript reading a rendered gpuframe page: its named data sources, the text of the page
    including every shadow root, and its canvases; null until BokehJS has drawn the engine's
    figures with data and the page shows each of ``texts``."""
    return PAGE_STATE.replace("REQUIRED_TEXTS", json.dumps(["gpuframe engine", *texts]))


PAGE_STATE = """
(() => {
  if (!window.Bokeh || !Bokeh.documents || !Bokeh.documents.length) return null;
  const doc = Bokeh.documents.find(d => d.get_model_by_name('gpuframe-stages'));
  if (!doc) return null;
  const plain = d => Object.fromEntries(
    Object.entries(d instanceof Map ? Object.fromEntries(d) : d)
      .map(([k, v]) => [k, Array.from(v, x => (ArrayBuffer.isView(x) ? Array.from(x) : x))]));
  const sources = {};
  for (const name of ['gpuframe-stages', 'gpuframe-pairs', 'gpuframe-ingest',
                      'gpuframe-stage-table']) {
    sources[name] = plain(doc.get_model_by_name(name).data);
  }
  const texts = [];
  const walk = root => {
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot);
    texts.push(root.textContent || '');
  };
  walk(document);
  const canvases = [];
  const count = root => {
    for (const el of root.querySelectorAll('*')) {
      if (el.tagName === 'CANVAS') canvases.push(el.width * el.height);
      if (el.shadowRoot) count(el.shadowRoot);
    }
  };
  count(document);
  const text = texts.join(' ');
  if (!REQUIRED_TEXTS.every(t => text.includes(t)) || !sources['gpuframe-stages'].stage.length)
    return null;
  return JSON.stringify({sources, text, canvases,
                         menu: Array.from(document.querySelectorAll('.navbar a'),
                                          a => a.textContent.trim())});
})()
"""
