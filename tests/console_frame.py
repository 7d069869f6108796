"""The console page in Chromium inside a frame like LangBot 4.11.2's: the HTML as a blob: URL in an
iframe with sandbox="allow-scripts allow-forms" (web/dist: no allow-same-origin, no
allow-downloads, no clipboard permission), the SDK tag rewritten to an absolute URL that serves
the SDK's own page-sdk.js, and the page's `langbot.api` calls answered by the real Page component.
System Chromium through `executable_path` (no browser download)."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import langbot_plugin.assets
from langbot_plugin.api.definition.components.page import PageRequest

from components.pages.console.console import LucidRagConsole

ROOT = Path(__file__).resolve().parent.parent
ORIGIN = "http://langbot.test"
SDK_TAG = '<script src="/api/v1/plugins/_sdk/page-sdk.js"></script>'
LANGBOT_SANDBOX = "allow-scripts allow-forms"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

_HOST_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head>
<body style="margin:0"><iframe id="plugin-page" sandbox="%(sandbox)s" style="width:100%%;height:100vh;border:0"></iframe>
<script>
  var frame = document.getElementById('plugin-page');
  var html = %(html)s;
  frame.src = URL.createObjectURL(new Blob([html], { type: 'text/html' }));
  frame.addEventListener('load', function () {
    frame.contentWindow.postMessage({ type: 'langbot:context', theme: 'light', language: %(language)s }, '*');
  });
  window.addEventListener('message', function (event) {
    var m = event.data;
    if (!m || m.type !== 'langbot:api') return;
    window.pageApi(m.endpoint, m.body).then(function (data) {
      frame.contentWindow.postMessage({ type: 'langbot:api:response', requestId: m.requestId, data: data }, '*');
    });
  });
</script></body></html>"""


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@asynccontextmanager
async def console_in_langbot_frame(page_component: LucidRagConsole, language: str = "en-US",
                                   sandbox: str = LANGBOT_SANDBOX) -> AsyncIterator[Any]:
    """A Playwright page showing the console as LangBot does; yields (page, frame)."""
    from playwright.async_api import async_playwright

    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    html = html.replace(SDK_TAG, f'<script src="{ORIGIN}/api/v1/plugins/_sdk/page-sdk.js"></script>')
    sdk = (Path(langbot_plugin.assets.__file__).parent / "langbot-page-sdk.js").read_text(encoding="utf-8")
    inline = json.dumps(html).replace("</", "<\\/")  # a "</script>" in it would end the host page's script
    host_page = _HOST_PAGE % {"sandbox": sandbox, "html": inline, "language": json.dumps(language)}

    async def page_api(endpoint: str, body: Any) -> Any:
        response = await page_component.handle_api(PageRequest(endpoint=endpoint, method="POST", body=body))
        return response.data

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_FLAGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1100, "height": 900})
            await page.expose_function("pageApi", page_api)

            async def serve(route: Any) -> None:
                if route.request.url.endswith("/page-sdk.js"):
                    await route.fulfill(body=sdk, content_type="application/javascript")
                elif route.request.url.rstrip("/") == ORIGIN:
                    await route.fulfill(body=host_page, content_type="text/html")
                else:
                    await route.fulfill(status=404, body="")

            await page.route(f"{ORIGIN}/**", serve)
            await page.goto(ORIGIN + "/")
            frame = page.frame_locator("#plugin-page")
            yield page, frame
        finally:
            await browser.close()
