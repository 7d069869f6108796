#!/usr/bin/env python3
"""The operator's journey in a real browser: LangBot 4.11.2's web UI in Debian's Chromium.

Run by tests/e2e/drive.py (inside run.sh's private network namespace) near the end of its journey,
with the Python that runs pytest (it has Playwright from requirements-dev.txt; Playwright drives the
system Chromium through `executable_path`, no browser download). LangBot is up; LucidRAG and the
fixture runner are attached; the admin account, the "offline-embed" embedding model and the
"retrieval-preview" LLM exist (drive.py made them). Standalone, `--lbp` and `--runner-dir` make it
attach LucidRAG and the runner itself. Then it clicks through:

  log in -> create a LucidRAG knowledge base through the form (two steps: the engine's settings
  appear after the first Save) -> upload a good and a broken file -> both reach their status in the
  file list -> (--drop-file) a picture dragged onto the upload box (the file picker does not offer
  pictures) is read by OCR and Retrieve Test finds its text -> Retrieve Test finds the good file's
  passage -> a pipeline with the KB bound answers in
  its debug chat with that passage -> Retrieve Test with a 0.99 score threshold finds nothing for a
  nonsense question -> Plugin Pages -> LucidRAG Console shows the broken file's reason, lists the
  questions asked (the nonsense one marked nothing found), in English and in Chinese.

One `[PASS] browser.<what>` / `[FAIL] browser.<what>` line per step, a screenshot per step in
--shots (git-ignored .e2e-artifacts/browser/ by default), last line `N passed, M failed`.
If Playwright or Chromium is missing, or Chromium cannot start here, it prints
`SKIPPED browser: <reason>` and exits 77.
"""
from __future__ import annotations

import argparse
import base64
import glob
import mimetypes
import os
import re
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from drive import Api, PluginProc, ok_body, read_plugin_id, short  # noqa: E402

# as /work/.library/env/machines/python.md: Chromium's own background connections are refused
# on a closed network, and the sandbox needs privileges a user namespace does not give
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]
STEP_TIMEOUT_MS = 60_000


class Report:
    def __init__(self) -> None:
        self.passed = self.failed = 0

    def check(self, what: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"[{'PASS' if ok else 'FAIL'}] browser.{what}" + (f" -- {detail}" if detail else ""), flush=True)
        return ok


R = Report()


class Stop(Exception):
    """A step the rest depends on failed."""


def find_chromium() -> str | None:
    for c in (os.environ.get("LUCIDRAG_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def skip(reason: str) -> int:
    print(f"SKIPPED browser: {reason}", flush=True)
    print("0 passed, 0 failed", flush=True)
    return 77


class Journey:
    def __init__(self, page, args, shots: str) -> None:
        self.page, self.args, self.shots = page, args, shots
        self.n = 0
        self.kb_url = ""

    def shot(self, name: str) -> str:
        self.n += 1
        path = os.path.join(self.shots, f"{self.n:02d}-{name}.png")
        self.page.screenshot(path=path, full_page=False)
        return path

    def step(self, what: str, ok: bool, detail: str = "", must: bool = True) -> None:
        path = self.shot(re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")[:50])
        if not R.check(what, ok, (detail + "; " if detail else "") + f"screenshot {os.path.relpath(path)}") and must:
            raise Stop(what)

    def dismiss_guides(self) -> None:
        """LangBot shows a user guide and a workspace assistant on first visits; close them."""
        p = self.page
        for _ in range(3):
            skip_btn = p.get_by_text("Skip", exact=True)
            if skip_btn.count() and skip_btn.first.is_visible():
                skip_btn.first.click()
                ok = p.get_by_role("button", name="OK", exact=True)
                if ok.count() and ok.first.is_visible():
                    ok.first.click()
                p.wait_for_timeout(400)
            else:
                break
        collapse = p.get_by_role("button", name="Collapse workspace assistant")
        if collapse.count() and collapse.first.is_visible():
            collapse.first.click()

    def wait_text(self, text: str, timeout_ms: int = STEP_TIMEOUT_MS, scope=None) -> bool:
        try:
            (scope or self.page).get_by_text(text, exact=False).first.wait_for(state="visible", timeout=timeout_ms)
            return True
        except Exception:  # noqa: BLE001  a timeout is the answer
            return False

    # ------------------------------------------------------------------ steps

    def login(self) -> None:
        p = self.page
        p.goto(self.args.base_url + "/login")
        p.get_by_placeholder("Enter email address").fill(self.args.user)
        p.get_by_placeholder("Enter password").fill(self.args.password)
        p.get_by_role("button", name="Login with password").click()
        # the first login may land on /home and then be sent to a Quick Start wizard: Skip, then OK
        t0, settled = time.time(), 0
        while time.time() - t0 < STEP_TIMEOUT_MS / 1000 and settled < 3:
            wizard = p.get_by_text("Select a Platform")
            if wizard.count() and wizard.first.is_visible():
                self.shot("quick-start-wizard")
                p.get_by_text("Skip", exact=True).first.click()
                p.get_by_role("button", name="OK", exact=True).click()
                settled = 0
            elif "/home" in p.url and p.get_by_text("Knowledge", exact=True).count():
                settled += 1  # still on /home half a second later, three times over
            p.wait_for_timeout(500)
        self.dismiss_guides()
        self.step("log in (email + password) reaches the dashboard", "/home" in p.url, p.url)

    def create_kb(self, name: str) -> str:
        p = self.page
        p.get_by_role("button", name="Create Knowledge", exact=True).click()
        p.get_by_text("Create Knowledge Base").first.wait_for(timeout=STEP_TIMEOUT_MS)
        self.dismiss_guides()
        p.locator("input:not([type=file])").first.fill(name)
        p.get_by_role("combobox").filter(has_text="LucidRAG").first.click()
        p.get_by_role("option").filter(has_text="LucidRAG").first.click()
        self.shot("kb-form-step-1")
        p.get_by_role("button", name="Save", exact=True).click()
        # step 2: the KB exists; the engine's creation settings appear
        p.wait_for_url(re.compile(r"knowledge\?id=(?!new)"), timeout=STEP_TIMEOUT_MS)
        p.get_by_text("Embedding model").first.wait_for(timeout=STEP_TIMEOUT_MS)
        self.dismiss_guides()
        self.step("KB form, step 1: Save creates the KB and shows LucidRAG's settings",
                  p.get_by_role("combobox").filter(has_text="Select Embedding Model").count() > 0, p.url)
        p.get_by_role("combobox").filter(has_text="Select Embedding Model").first.click()
        p.get_by_role("option").filter(has_text=self.args.embed_model).first.click()
        p.get_by_role("button", name="Save", exact=True).click()
        saved = self.wait_text("updated successfully", 20_000)
        kb_uuid = p.url.split("id=")[-1].split("&")[0]
        self.kb_url = p.url
        self.step(f"KB form, step 2: embedding model '{self.args.embed_model}' saved", saved, f"kb {kb_uuid}")
        return kb_uuid

    def upload(self, good: str, bad: str) -> None:
        p = self.page
        p.get_by_text("Documents", exact=True).first.click()
        for path in (good, bad):  # as a user does: click the drop zone, pick the file in the dialog
            with p.expect_file_chooser() as chooser:
                p.get_by_text("Drag and drop files here or click to upload").first.click()
            chooser.value.set_files(path)
            self.wait_text("uploaded successfully", 30_000)
            p.wait_for_timeout(1500)  # the dialog is busy until POST …/files returns
        # the file list shows storage keys, not names: rows are told apart by their extension
        statuses: dict[str, str] = {}
        t0 = time.time()
        while time.time() - t0 < 90:
            rows = p.locator("table tbody tr").all_inner_texts()
            statuses = {os.path.basename(f): next((r for r in rows if r.split("\t")[0].strip().endswith(
                os.path.splitext(f)[1])), "") for f in (good, bad)}
            if all(re.search(r"Completed|Failed", s) for s in statuses.values()):
                break
            p.wait_for_timeout(1000)
        g, b = statuses[os.path.basename(good)], statuses[os.path.basename(bad)]
        status_cell = p.get_by_text("Failed", exact=True)
        if status_cell.count():  # long storage keys push the Status column off screen
            status_cell.first.scroll_into_view_if_needed()
        self.step(f"upload {os.path.basename(good)} -> Completed, {os.path.basename(bad)} -> Failed in the file list",
                  "Completed" in g and "Failed" in b,
                  f"rows: {short(g.replace(chr(9), ' | '), 80)} / {short(b.replace(chr(9), ' | '), 80)}")

    def drop(self, path: str) -> None:
        """Drag a file from the desktop onto the upload box: a drop event carrying the file, as the
        browser sends it. LangBot 4.11.2's drop handler takes any type (only the picker filters)."""
        p = self.page
        p.get_by_text("Documents", exact=True).first.click()
        name = os.path.basename(path)
        with open(path, "rb") as f:
            payload = base64.b64encode(f.read()).decode("ascii")
        transfer = p.evaluate_handle(
            """([b64, name, type]) => {
                 const raw = atob(b64), bytes = new Uint8Array(raw.length);
                 for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
                 const dt = new DataTransfer();
                 dt.items.add(new File([bytes], name, { type }));
                 return dt;
               }""", [payload, name, mimetypes.guess_type(name)[0] or "application/octet-stream"])
        p.get_by_text("Drag and drop files here or click to upload").first.dispatch_event(
            "drop", {"dataTransfer": transfer})
        uploaded = self.wait_text("uploaded successfully", 30_000)
        ext = os.path.splitext(name)[1]
        status = ""
        t0 = time.time()
        while uploaded and time.time() - t0 < 120:
            rows = p.locator("table tbody tr").all_inner_texts()
            status = next((r for r in rows if r.split("\t")[0].strip().endswith(ext)), "")
            if re.search(r"Completed|Failed", status):
                break
            p.wait_for_timeout(1000)
        self.step(f"drag and drop {name} onto the upload box -> Completed (read by OCR)",
                  uploaded and "Completed" in status, short(status.replace(chr(9), " | "), 80))

    def retrieve_test(self, query: str, expect: str) -> None:
        p = self.page
        p.get_by_text("Retrieve Test", exact=True).first.click()
        p.get_by_placeholder("Enter query text...").fill(query)
        p.get_by_role("button", name="Query").click()
        found = self.wait_text(expect, 30_000)
        self.step(f"Retrieve Test: '{query[:40]}' shows '{expect}'", found)

    def pipeline(self, kb_name: str, query: str, expect: str) -> None:
        p = self.page
        p.get_by_role("button", name="Create Processors", exact=True).click()
        p.get_by_text("Create event processor").first.wait_for(timeout=STEP_TIMEOUT_MS)
        self.dismiss_guides()
        p.get_by_text("Pipeline", exact=True).first.click()
        p.get_by_role("combobox").filter(has_text="Select").first.click()
        p.get_by_role("option").filter(has_text="Knowledge base preview").first.click()
        p.locator("input:not([type=file])").first.fill("browser-e2e-pipeline")
        p.get_by_role("button", name="Submit").click()
        p.wait_for_url(re.compile(r"agents\?id=(?!new)"), timeout=STEP_TIMEOUT_MS)
        p.get_by_role("tab", name="AI").first.wait_for(timeout=STEP_TIMEOUT_MS)
        self.dismiss_guides()
        p.get_by_role("tab", name="AI").first.click()
        p.get_by_role("combobox").filter(has_text="Select Model").first.click()
        p.get_by_role("option").filter(has_text=self.args.llm_model).first.click()
        p.get_by_role("button", name="Add Knowledge Base").click()
        p.get_by_role("dialog").get_by_text(kb_name).first.click()
        p.get_by_role("button", name="Confirm").click()
        p.get_by_role("button", name="Save", exact=True).click()
        p.wait_for_timeout(1500)
        self.step("pipeline: runner 'Knowledge base preview', model and KB bound, saved",
                  p.get_by_text(kb_name).count() > 0)
        box = p.get_by_placeholder(re.compile("Send Private Chat message"))
        box.fill(query)
        p.get_by_role("button", name=re.compile("^(Send|Save and send)$")).click()
        answered = self.wait_text("source:", 60_000) and self.wait_text(expect, 5_000)
        self.step(f"debug chat: the bot is told the passage with '{expect}' and its source", answered)

    def console(self, api: Api, kb_uuid: str, kb_name: str, bad_name: str, reason: str) -> None:
        """Sidebar -> Plugin Pages -> LucidRAG Console (a sandboxed iframe); pick the KB; read the
        broken file's own row (found by the file id LangBot gave it): status, reason, what to do."""
        p = self.page
        s, b = api.call("GET", f"/api/v1/knowledge/bases/{kb_uuid}/files")
        rows = (b.get("data") or {}).get("files", []) if ok_body(s, b) else []
        bad_id = next((r["uuid"] for r in rows if r.get("file_name", "").endswith(os.path.splitext(bad_name)[1])), "")
        link = p.get_by_text("LucidRAG Console", exact=True)
        try:
            link.first.wait_for(state="visible", timeout=20_000)
        except Exception:  # noqa: BLE001
            self.step("console page listed in the sidebar (Plugin Pages -> LucidRAG Console)", False,
                      "no 'LucidRAG Console' entry")
            return
        link.first.click()
        body = p.frame_locator("iframe").first.locator("body")
        detail = ""
        try:
            select = body.locator("[data-testid=kb-select]")
            select.locator("option").first.wait_for(state="attached", timeout=30_000)
            select.select_option(value=kb_uuid)
            row = body.locator(f'[data-testid=file-row][data-file-id="{bad_id}"]')
            row.wait_for(timeout=30_000)
            status = row.get_attribute("data-status")
            shown = row.locator("[data-testid=file-reason]").inner_text(timeout=10_000)
            advice = row.locator("[data-testid=file-advice]").inner_text(timeout=10_000)
            ok = status == "failed" and reason.lower() in shown.lower() and bool(advice.strip())
            detail = f"row {bad_id[:8]}: {status}; {short(shown, 120)} / {short(advice, 80)}"
        except Exception as e:  # noqa: BLE001  the screenshot shows what was there instead
            ok, detail = False, f"row {bad_id[:8] or '?'} not shown: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        self.step(f"console, KB {kb_name}: the broken {bad_name} shows its reason and what to do", ok, detail)

    def retrieve_nothing(self, api: Api, kb_uuid: str, query: str) -> None:
        """A question the KB has no answer to: its score threshold raised to 0.99 (the field of the
        KB form, saved through the API as that form's Save does), then Retrieve Test in the web UI,
        whose answer (read off the network) has no result; the threshold goes back afterwards."""
        p = self.page
        s, b = api.call("GET", f"/api/v1/knowledge/bases/{kb_uuid}")
        base = (b.get("data") or {}).get("base") or {} if ok_body(s, b) else {}
        saved = dict(base.get("retrieval_settings") or {})

        def put(settings: dict) -> bool:
            s, b = api.call("PUT", f"/api/v1/knowledge/bases/{kb_uuid}", {
                "name": base.get("name"), "description": base.get("description") or "", "emoji": base.get("emoji"),
                "knowledge_engine_plugin_id": base.get("knowledge_engine_plugin_id"),
                "creation_settings": base.get("creation_settings") or {}, "retrieval_settings": settings})
            return ok_body(s, b)

        if not (base and put(dict(saved, score_threshold=0.99))):
            self.step("score threshold 0.99 saved for the nothing-found question", False, short(b), must=False)
            return
        results: list | None = None
        try:
            p.goto(self.kb_url)
            p.get_by_text("Retrieve Test", exact=True).first.click()
            p.get_by_placeholder("Enter query text...").fill(query)
            with p.expect_response(lambda r: r.url.endswith(f"/knowledge/bases/{kb_uuid}/retrieve"),
                                   timeout=30_000) as answer:
                p.get_by_role("button", name="Query").click()
            results = ((answer.value.json().get("data") or {}).get("results"))
            p.wait_for_timeout(500)
        finally:
            restored = put(saved)
        self.step(f"Retrieve Test with score threshold 0.99: '{query}' finds nothing (threshold restored after)",
                  results == [] and restored, f"{len(results) if results is not None else '?'} results", must=False)

    def analytics(self, questions: dict[str, int], nothing: str) -> None:
        """In the open console: the KB's "Questions asked" view lists every question the journey
        asked through LangBot (Retrieve Test and the pipeline's debug chat), each as often as it was
        asked (`questions`: text -> times), the one without an answer marked "nothing found" and
        counted in the summary."""
        body = self.page.frame_locator("iframe").first.locator("body")
        view = body.locator("[data-testid=analytics]")
        shown: dict[str, str] = {}
        times: dict[str, int] = {}
        detail = ""
        try:
            body.locator("[data-testid=question-row]").first.wait_for(timeout=30_000)
            view.scroll_into_view_if_needed()
            for row in body.locator("[data-testid=question-row]").all():
                text = row.locator("[data-testid=question-text]").inner_text().strip()
                flag = "nothing" if row.get_attribute("data-nothing-found") == "true" else "found"
                if flag == "nothing" and not row.locator("[data-testid=question-nothing-found]").is_visible():
                    flag = "nothing (no badge)"
                if shown.setdefault(text, flag) != flag:
                    shown[text] = "found and nothing"
                times[text] = times.get(text, 0) + 1
            stat = body.locator("[data-testid=stat-nothing-found]").inner_text()
            missing = [q for q, n in questions.items() if times.get(q, 0) < n]
            ok = (not missing and all(shown[q] == "found" for q in questions)
                  and shown.get(nothing) == "nothing" and "(1)" in stat)
            detail = (f"{sum(times.values())} rows: " + "; ".join(f"{short(q, 40)} x{times[q]} -> {f}"
                                                                 for q, f in shown.items())
                      + f"; {short(stat, 60)}" + (f"; missing: {missing}" if missing else ""))
        except Exception as e:  # noqa: BLE001  the screenshot shows what was there instead
            ok, detail = False, f"questions view not shown: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        self.step("console: the questions asked are listed, the unanswered one marked nothing found", ok, detail,
                  must=False)

    def analytics_zh(self, kb_uuid: str, nothing: str) -> None:
        """The same view with LangBot in Simplified Chinese (LangBot keeps its language in
        localStorage `langbot_language`; the console follows the language LangBot gives it)."""
        p = self.page
        console_url = p.url
        p.evaluate("() => localStorage.setItem('langbot_language', 'zh-Hans')")
        detail = ""
        try:
            p.goto(console_url)
            frame = p.frame_locator("iframe").first
            body = frame.locator("body")
            select = body.locator("[data-testid=kb-select]")
            select.locator("option").first.wait_for(state="attached", timeout=30_000)
            select.select_option(value=kb_uuid)
            row = body.locator("[data-testid=question-row][data-nothing-found=true]").filter(has_text=nothing)
            badge = row.locator("[data-testid=question-nothing-found]").first
            badge.wait_for(timeout=30_000)
            body.locator("[data-testid=analytics]").scroll_into_view_if_needed()
            lang = frame.locator("html").get_attribute("lang")
            marked = badge.inner_text().strip()
            ok = lang == "zh-Hans" and re.search(r"[\u4e00-\u9fff]", marked) is not None
            detail = f"html lang={lang}; '{short(nothing, 30)}' marked '{marked}'"
        except Exception as e:  # noqa: BLE001  the screenshot shows what was there instead
            ok, detail = False, f"questions view not shown: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        finally:
            p.evaluate("() => localStorage.setItem('langbot_language', 'en-US')")
        self.step("console in Chinese: the unanswered question marked nothing found (ZH)", ok, detail, must=False)


def attach(api: Api, args) -> tuple[PluginProc, PluginProc]:
    s, b = api.call("GET", "/api/v1/plugins/debug-info")
    if not ok_body(s, b):
        raise Stop(f"debug-info: {short(b)}")
    url, key = b["data"]["debug_url"], b["data"]["plugin_debug_key"]
    plugin, runner = PluginProc(), PluginProc()
    plugin.start(args.lbp, args.plugin_dir, url, key, os.path.join(args.log_dir, "browser-plugin.log"),
                 os.path.join(args.pid_dir, "browser-plugin.pid") if args.pid_dir else None)
    if args.runner_dir:
        runner.start(args.lbp, args.runner_dir, url, key, os.path.join(args.log_dir, "browser-runner.log"),
                     os.path.join(args.pid_dir, "browser-runner.pid") if args.pid_dir else None)
    plugin_id, t0 = read_plugin_id(args.plugin_dir), time.time()
    while time.time() - t0 < 90 and plugin.alive():
        s, b = api.call("GET", "/api/v1/knowledge/engines")
        if ok_body(s, b) and any(e.get("plugin_id") == plugin_id for e in b["data"].get("engines", [])):
            break
        time.sleep(1)
    else:
        raise Stop("LucidRAG did not attach (see browser-plugin.log)")
    return plugin, runner


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", default="http://127.0.0.1:5300")
    ap.add_argument("--user", default="e2e@lucidrag.invalid")
    ap.add_argument("--password", default="e2e-Passw0rd!")
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--runner-dir", default="", help="with --lbp: attach this fixture runner copy too")
    ap.add_argument("--lbp", default="", help="attach LucidRAG (and the runner) with this lbp first")
    ap.add_argument("--good-file", required=True)
    ap.add_argument("--bad-file", required=True)
    ap.add_argument("--bad-reason", default="This PDF is damaged", help="text of the broken file's reason")
    ap.add_argument("--query", default="What torque does the Zorblatt valve need?")
    ap.add_argument("--expect", default="47 newton-metres")
    ap.add_argument("--nothing-query", default="Xylqorbeth vrenmuzzle quantaflux",
                    help="asked with a 0.99 score threshold: finds nothing")
    ap.add_argument("--drop-file", default="", help="a picture to drag onto the upload box (OCR)")
    ap.add_argument("--drop-query", default="")
    ap.add_argument("--drop-expect", default="")
    ap.add_argument("--embed-model", default="offline-embed")
    ap.add_argument("--llm-model", default="retrieval-preview")
    ap.add_argument("--shots", required=True)
    ap.add_argument("--log-dir", default=".")
    ap.add_argument("--pid-dir", default="")
    ap.add_argument("--console", choices=("auto", "yes", "no"), default="auto",
                    help="auto: check the console page when the plugin has a Page component")
    args = ap.parse_args()

    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        return skip(f"Playwright is not installed for {sys.executable} ({e}); pip install -r requirements-dev.txt")
    chromium = find_chromium()
    if not chromium:
        return skip("no Chromium executable (Debian: apt-get install chromium; or set LUCIDRAG_CHROMIUM)")

    os.makedirs(args.shots, exist_ok=True)
    for old in glob.glob(os.path.join(args.shots, "*.png")):
        os.remove(old)
    t_start = time.time()
    api = Api(args.base_url)
    s, b = api.call("POST", "/api/v1/user/auth", {"user": args.user, "password": args.password})
    if not ok_body(s, b):
        R.check("log in through the API to attach the plugins", False, short(b))
        print(f"{R.passed} passed, {R.failed} failed", flush=True)
        return 1
    api.token = b["data"]["token"]
    has_page = "Page:" in open(os.path.join(args.plugin_dir, "manifest.yaml"), encoding="utf-8").read()
    plugin = runner = None
    with sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS, headless=True)
        except Exception as e:  # noqa: BLE001
            return skip(f"Chromium ({chromium}) cannot start here: {str(e).splitlines()[0][:300]}")
        page = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US").new_page()
        page.set_default_timeout(STEP_TIMEOUT_MS)
        j = Journey(page, args, args.shots)
        kb_uuid = ""
        try:
            if args.lbp:
                plugin, runner = attach(api, args)
            j.login()
            kb_uuid = j.create_kb("browser-e2e")
            j.upload(args.good_file, args.bad_file)
            if args.drop_file:
                j.drop(args.drop_file)
                j.retrieve_test(args.drop_query, args.drop_expect)
            j.retrieve_test(args.query, args.expect)
            j.pipeline("browser-e2e", args.query, args.expect)
            j.retrieve_nothing(api, kb_uuid, args.nothing_query)
            if args.console == "yes" or (args.console == "auto" and has_page):
                j.console(api, kb_uuid, "browser-e2e", os.path.basename(args.bad_file), args.bad_reason)
                asked = {args.query: 2}  # Retrieve Test and the debug chat
                if args.drop_file:
                    asked[args.drop_query] = 1
                j.analytics(asked, args.nothing_query)
                j.analytics_zh(kb_uuid, args.nothing_query)
            else:
                print("SKIPPED browser.console: this checkout has no Page component (manifest.yaml), so there "
                      "is no LucidRAG console to open", flush=True)
        except Stop as e:
            print(f"       stopped after a failed step: {e}", flush=True)
        except Exception as e:  # noqa: BLE001  a broken step must still give a FAIL line and a screenshot
            try:
                path = j.shot("error")
            except Exception:  # noqa: BLE001
                path = "(no screenshot)"
            R.check("journey ran without an exception", False, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}; "
                    f"screenshot {os.path.relpath(path)}")
        finally:
            browser.close()
            if kb_uuid:  # the pipeline stays in this run's throwaway data dir; the KB is deleted while LucidRAG runs
                api.call("DELETE", f"/api/v1/knowledge/bases/{kb_uuid}")
            for proc in (plugin, runner):
                if proc:
                    proc.stop()
    print(f"browser journey took {time.time() - t_start:.1f}s; screenshots in {args.shots}", flush=True)
    print(f"{R.passed} passed, {R.failed} failed", flush=True)
    return 0 if R.failed == 0 and R.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
