import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unique } from './support/sdk.js';
import { PythonError, runPython, type PythonTarget } from './support/python.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';

/**
 * The Python SDK (`kernel` 0.131.0 from PyPI, scripts/python-sdk.sh) as a new user tries
 * it against the real service. The SDK validates responses loosely, so each snippet
 * reads the parsed objects' attributes and emits them for the checks here.
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

/** Python's own RFC 6238, independent of the service's. */
const PY_TOTP = `
import base64, hashlib, hmac, struct
def totp(secret, counter, algorithm, digits):
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    mac = hmac.new(key, struct.pack(">Q", counter), getattr(hashlib, algorithm.lower())).digest()
    offset = mac[-1] & 0x0F
    return str((struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF) % 10 ** digits).zfill(digits)
`;

describe('the Python SDK 0.131', () => {
  it('deploys with env_vars[KEY] and sends a source as source[...] brackets, both read', async () => {
    const got = await runPython<{ id: string; env: Record<string, string> }>(
      target,
      `
      d = client().deployments.create(file=("index.js", b"export {}"), entrypoint_rel_path="index.js", env_vars={"FOO": "bar"}, version=${JSON.stringify(unique('py'))})
      client().deployments.delete(d.id)
      emit({"id": d.id, "env": d.env_vars})
      `,
    );
    expect(got.env).toEqual({ FOO: '' });
    // A local repository is refused for what it is: the bracketed source was read whole.
    const error = await runPython(
      target,
      'client().deployments.create(source={"type": "github", "url": "/etc", "ref": "main", "entrypoint": "a.js", "auth": {"method": "github_token", "token": "t"}})',
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PythonError);
    expect(error).toMatchObject({ status: 400, body: { code: 'invalid_source' } });
  });

  it('creates a browser with Kernel(project=name) in that project, not the default one', async () => {
    const project = unique('Python Project');
    await service.client().projects.create({ name: project });
    const got = await runPython<{ id: string; region: string; memory: string; listed: string[]; defaultListed: string[] }>(
      target,
      `
      k = client(project=${JSON.stringify(project)})
      b = k.browsers.create(headless=True, region="us-west", memory="2GiB", location={"timezone": "Europe/Paris"})
      listed = [x.session_id for x in k.browsers.list()]
      default_listed = [x.session_id for x in client().browsers.list()]
      k.browsers.delete_by_id(b.session_id)
      emit({"id": b.session_id, "region": b.region, "memory": b.memory, "listed": listed, "defaultListed": default_listed})
      `,
    );
    expect(got.region).toBe('us-east');
    expect(got.memory).toBe('1GiB');
    expect(got.listed).toContain(got.id);
    expect(got.defaultListed).not.toContain(got.id);
  });

  it('is refused a project that does not exist, and creates nothing', async () => {
    const before = (await service.client().browsers.list()).items.length;
    const error = await runPython(target, 'client(project="no such project").browsers.create(headless=True)').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PythonError);
    expect(error).toMatchObject({ type: 'NotFoundError', status: 404, body: { code: 'project_not_found' } });
    expect((await service.client().browsers.list()).items.length).toBe(before);
  });

  it('parses browsers from list and retrieve, region and memory included', async () => {
    const got = await runPython<Record<string, unknown>>(
      target,
      `
      k = client()
      b = k.browsers.create(headless=True, name="py-parse")
      r = k.browsers.retrieve(b.session_id)
      page = k.browsers.list()
      mine = [x for x in page if x.session_id == b.session_id][0]
      k.browsers.delete_by_id(b.session_id)
      emit({
          "types": [type(r).__name__, type(mine).__name__, type(r.created_at).__name__],
          "retrieved": {"region": r.region, "memory": r.memory, "name": r.name, "headless": r.headless, "timeout": r.timeout_seconds, "cdp": r.cdp_ws_url.startswith("ws")},
          "listed": {"region": mine.region, "memory": mine.memory, "webdriver": mine.webdriver_ws_url.startswith("ws")},
      })
      `,
    );
    expect(got).toEqual({
      types: ['BrowserRetrieveResponse', 'BrowserListResponse', 'datetime'],
      retrieved: { region: 'us-east', memory: '1GiB', name: 'py-parse', headless: true, timeout: 60, cdp: true },
      listed: { region: 'us-east', memory: '1GiB', webdriver: true },
    });
  });

  it('parses pools from create, list and retrieve, region included', async () => {
    const name = unique('py-pool');
    const got = await runPython<Record<string, unknown>>(
      target,
      `
      k = client()
      p = k.browser_pools.create(name=${JSON.stringify(name)}, size=1, headless=True, region="eu-west", memory="1GiB")
      r = k.browser_pools.retrieve(p.id)
      listed = [x for x in k.browser_pools.list() if x.id == p.id]
      k.browser_pools.delete(p.id, force=True)
      emit({
          "created": p.region, "retrieved": r.region, "listed": [x.region for x in listed],
          "size": r.browser_pool_config.size, "type": type(r.created_at).__name__, "extension_ids": r.extension_ids,
      })
      `,
    );
    expect(got).toEqual({ created: 'us-east', retrieved: 'us-east', listed: ['us-east'], size: 1, type: 'datetime', extension_ids: [] });
  });

  it('makes credentials with totp options whose codes match Python’s own hmac', async () => {
    const name = unique('py-totp');
    const got = await runPython<{ fields: unknown[]; matches: boolean[]; digits: number }>(
      target,
      [
        PY_TOTP,
        `
      import calendar
      secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
      k = client()
      c = k.credentials.create(name=${JSON.stringify(name)}, domain="example.com", values={"username": "u"},
                               totp_secret=secret, totp_algorithm="SHA256", totp_digits=8, totp_period=60)
      code = k.credentials.totp_code(c.name)
      def expected(expires_at):
          return totp(secret, calendar.timegm(expires_at.utctimetuple()) // 60 - 1, "SHA256", 8)
      again = k.credentials.retrieve(c.name)
      emit({
          "fields": [c.totp_algorithm, c.totp_digits, c.totp_period, again.totp_algorithm, again.totp_digits, again.totp_period],
          "matches": [c.totp_code == expected(c.totp_code_expires_at), code.code == expected(code.expires_at)],
          "digits": len(code.code),
      })
      `,
      ],
    );
    expect(got).toEqual({ fields: ['SHA256', 8, 60, 'SHA256', 8, 60], matches: [true, true], digits: 8 });
  });

  it('makes an API key with expires_at that works, and is refused one in the past', async () => {
    const got = await runPython<{ expires: string; type: string; works: boolean; past: unknown }>(
      target,
      `
      from datetime import datetime, timedelta, timezone
      k = client()
      at = (datetime.now(timezone.utc) + timedelta(days=2)).replace(microsecond=0)
      key = k.api_keys.create(name="py-expiring", expires_at=at)
      works = len(list(Kernel(api_key=key.key, max_retries=0).credentials.list())) >= 0
      try:
          k.api_keys.create(name="py-past", expires_at=datetime.now(timezone.utc) - timedelta(hours=1))
          past = None
      except kernel.BadRequestError as error:
          past = {"status": error.status_code, "fields": [d["field"] for d in error.body["details"]]}
      emit({"expires": key.expires_at.isoformat(), "type": type(key.expires_at).__name__, "works": works, "past": past, "at": at.isoformat()})
      `,
    );
    expect(got).toMatchObject({ type: 'datetime', works: true, past: { status: 400, fields: ['body.expires_at'] } });
    expect(Date.parse(got.expires)).toBe(Date.parse((got as unknown as { at: string }).at));
  });

  it('parses the org limits with the fields it requires', async () => {
    const got = await runPython<Record<string, unknown>>(
      target,
      `
      l = client().organization.limits.retrieve()
      emit({"type": type(l).__name__, "values": [l.auth_connections_used, l.min_health_check_interval_seconds, l.vaults_used, l.max_vaults,
            isinstance(l.max_concurrent_sessions, int), isinstance(l.concurrent_sessions_used, int), isinstance(l.concurrent_sessions_available, int)]})
      `,
    );
    expect(got).toEqual({ type: 'OrgLimits', values: [0, 300, 0, 0, true, true, true] });
  });

  it('reads status_reason on a failed invocation', async () => {
    const got = await runPython<{ updated: string | null; retrieved: string | null; status: string }>(
      target,
      `
      k = client()
      inv = k.invocations.create(app_name="py-app", action_name="run", version="1", async_=True)
      updated = k.invocations.update(inv.id, status="failed")
      r = k.invocations.retrieve(inv.id)
      emit({"updated": updated.status_reason, "retrieved": r.status_reason, "status": r.status})
      `,
    );
    expect(got).toEqual({ updated: 'Marked failed with PATCH /invocations/{id}', retrieved: 'Marked failed with PATCH /invocations/{id}', status: 'failed' });
  });

  it('navigates the browser with browsers.update(start_url=...)', async () => {
    const got = await runPython<{ id: string; cdp: string; start: string | null }>(
      target,
      `
      k = client()
      b = k.browsers.create(headless=True)
      u = k.browsers.update(b.session_id, start_url=${JSON.stringify(`${pages.url}/from-python`)})
      emit({"id": b.session_id, "cdp": u.cdp_ws_url, "start": u.start_url})
      `,
    );
    const browser = await chromium.connectOverCDP(got.cdp);
    try {
      expect(browser.contexts()[0]!.pages()[0]!.url()).toBe(`${pages.url}/from-python`);
    } finally {
      await browser.close().catch(() => undefined);
    }
    expect(pages.requests).toContain('/from-python');
    await service.client().browsers.deleteByID(got.id);
  });
});
