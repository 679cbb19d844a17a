import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unique } from './support/sdk.js';
import { runPython, type PythonTarget } from './support/python.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';

/**
 * Issue 22's families through the Python SDK (`kernel` 0.131.0 from PyPI, newer than the TS
 * SDK), as a Python user's script calls them against the built service: a replay recorded
 * and downloaded, telemetry listed, an extension uploaded and loaded into a running browser,
 * the audit log listed. Each snippet emits what it read; the checks are here.
 */

let service: RunningService;
let target: PythonTarget;
let pages: TestPageServer;

beforeAll(async () => {
  service = await startService();
  target = { url: service.url, apiKey: service.adminKey };
  pages = await startTestPageServer();
}, 600_000);
afterAll(async () => {
  await pages?.close();
  await cleanupServices();
});

describe('the Python SDK 0.131 on replays, telemetry, extensions and audit logs', () => {
  it('records a replay and downloads an MP4, and lists a page\'s console.log in telemetry', async () => {
    const got = await runPython<{ replays: string[]; head: string; size: number; categories: string[] }>(
      target,
      `
      import time
      k = client()
      b = k.browsers.create(headless=True, telemetry={"enabled": True, "browser": {"console": {"enabled": True}, "page": {"enabled": True}}})
      try:
          r = k.browsers.replays.start(b.session_id, framerate=5, max_duration_in_seconds=30)
          k.browsers.playwright.execute(b.session_id, code="await page.setContent('<script>console.log(\\"py telemetry\\")</script>'); await page.waitForTimeout(1200); return 1")
          k.browsers.replays.stop(r.replay_id, id_or_name=b.session_id)
          video = b""
          for _ in range(120):
              try:
                  video = k.browsers.replays.download(r.replay_id, id_or_name=b.session_id).read()
                  break
              except Exception as error:
                  if getattr(error, "status_code", None) != 409:
                      raise
                  time.sleep(0.5)
          replays = [x.replay_id for x in k.browsers.replays.list(b.session_id)]
          categories = []
          for _ in range(60):
              events = list(k.browsers.telemetry.events(b.session_id, category=["console"]))
              categories = [e.event.category for e in events if "py telemetry" in json.dumps(dump(e))]
              if categories:
                  break
              time.sleep(0.5)
          emit({"replays": replays, "head": video[4:8].decode("latin1"), "size": len(video), "categories": categories})
      finally:
          k.browsers.delete_by_id(b.session_id)
      `,
    );
    expect(got.head).toBe('ftyp');
    expect(got.size).toBeGreaterThan(1000);
    expect(got.replays).toHaveLength(1);
    expect(got.categories[0]).toBe('console');
  }, 180_000);

  it('uploads an extension, lists, reads its metadata, downloads and deletes it; the audit log lists the upload', async () => {
    const name = unique('py-ext');
    const got = await runPython<{ uploaded: string; listed: boolean; metaName: string; downloadedHead: string; afterDelete: boolean; audited: boolean }>(
      target,
      `
      import io, time, zipfile
      buf = io.BytesIO()
      with zipfile.ZipFile(buf, "w") as z:
          z.writestr("manifest.json", json.dumps({"manifest_version": 3, "name": "py marker", "version": "1.0"}))
      k = client()
      start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
      e = k.extensions.upload(file=("ext.zip", buf.getvalue(), "application/zip"), name=${JSON.stringify(name)})
      listed = any(x.id == e.id for x in k.extensions.list())
      meta = k.extensions.get(${JSON.stringify(name)})
      downloaded = k.extensions.download(e.id).read()
      k.extensions.delete(e.id)
      after = any(x.id == e.id for x in k.extensions.list())
      end = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
      audited = False
      for _ in range(40):
          entries = list(k.audit_logs.list(start=start, end=end, method="POST"))
          audited = any(x.path == "/extensions" for x in entries)
          if audited:
              break
          time.sleep(0.25)
      emit({"uploaded": e.id, "listed": listed, "metaName": meta.name, "downloadedHead": downloaded[:2].decode("latin1"), "afterDelete": after, "audited": audited})
      `,
    );
    expect(got).toMatchObject({ listed: true, metaName: name, downloadedHead: 'PK', afterDelete: false, audited: true });
  }, 120_000);

  it('loads an extension into a running browser with load_extensions (its extensions[][name] / extensions[][zip_file] form), and its content script marks pages', async () => {
    const got = await runPython<{ marked: unknown; error: unknown }>(
      target,
      `
      import io, zipfile
      buf = io.BytesIO()
      with zipfile.ZipFile(buf, "w") as z:
          z.writestr("manifest.json", json.dumps({"manifest_version": 3, "name": "py marker", "version": "1.0", "content_scripts": [{"matches": ["<all_urls>"], "js": ["mark.js"], "run_at": "document_start"}]}))
          z.writestr("mark.js", "document.documentElement.dataset.ext = 'loaded';")
      k = client()
      b = k.browsers.create(headless=True)
      try:
          k.browsers.load_extensions(b.session_id, extensions=[{"name": "pymarker", "zip_file": ("marker.zip", buf.getvalue(), "application/zip")}])
          r = k.browsers.playwright.execute(b.session_id, code="await page.goto('${pages.url}/marked'); return await page.evaluate(() => document.documentElement.dataset.ext ?? 'none')")
          emit({"marked": r.result, "error": r.error})
      finally:
          k.browsers.delete_by_id(b.session_id)
      `,
    );
    expect(got.marked, String(got.error)).toBe('loaded');
  }, 120_000);

  it('lists a Turnstile widget’s observed outcome as the SDK’s BrowserCaptchaChallengeResultEvent (captcha is on by default)', async () => {
    const got = await runPython<{ kinds: string[]; data: Record<string, unknown>[]; error: unknown }>(
      target,
      `
      import time
      k = client()
      b = k.browsers.create(headless=True, telemetry={"enabled": True})
      try:
          widget = '<div class="cf-turnstile" style="width:300px;height:65px"><input type="hidden" name="cf-turnstile-response" value="py-token"></div>'
          r = k.browsers.playwright.execute(b.session_id, code="await page.goto('${pages.url}/captcha?q=1'); await page.evaluate((html) => document.body.insertAdjacentHTML('beforeend', html), " + json.dumps(widget) + "); return 1")
          events = []
          for _ in range(60):
              events = list(k.browsers.telemetry.events(b.session_id, category=["captcha"]))
              if events:
                  break
              time.sleep(0.5)
          emit({"kinds": [type(e.event).__name__ for e in events], "data": [dump(e.event.data) for e in events], "error": r.error})
      finally:
          k.browsers.delete_by_id(b.session_id)
      `,
    );
    expect(got.kinds, String(got.error)).toEqual(['BrowserCaptchaChallengeResultEvent']);
    expect(got.data[0]).toMatchObject({ status: 'solved', captcha_provider: 'turnstile', captcha_type: 'turnstile', website_host: '127.0.0.1', website_path: '/captcha' });
    expect(JSON.stringify(got.data)).not.toContain('py-token');
  }, 120_000);
});
