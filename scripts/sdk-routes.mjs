#!/usr/bin/env node
// Which of the HTTP routes @onkernel/sdk can call does a running service serve?
//
//   node scripts/sdk-routes.mjs --base-url http://127.0.0.1:8080 --api-key KEY [--json]
//   (or KERNEL_BASE_URL / KERNEL_API_KEY)
//
// The routes are read from the SDK itself: every this._client.<method>(path`…`) call in
// node_modules/@onkernel/sdk/resources/**/*.js (127 in 0.84.0). Each is called once with a
// valid key: routes under /browsers/{id} on a throwaway headless browser created for the
// run (deleted at the end), other ids made up. Bodies are deliberately invalid
// ({"__route_probe__": true}) so that no call changes anything: a served route answers 400,
// 404 not_found, 415 or the like; an unserved one answers 404 route_not_found (or 405
// method_not_allowed when the path is served under another method). Prints served/total per
// family, then the unserved routes; --json prints the same as one JSON document.

/* global fetch, URL, AbortSignal -- Node 20's own, which the scripts' ESLint globals do not list */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROBE_BODY = JSON.stringify({ __route_probe__: true });
const MADE_UP_ID = 'route-probe-nonexistent';
const CALL_TIMEOUT_MS = 30_000;

/** First match wins: the browser sub-resources before the browsers family itself. */
export const FAMILIES = [
  ['fs', /^\/browsers\/\{\}\/fs\//],
  ['computer', /^\/browsers\/\{\}\/computer\//],
  ['process', /^\/browsers\/\{\}\/process\//],
  ['playwright', /^\/browsers\/\{\}\/playwright\//],
  ['curl', /^\/browsers\/\{\}\/curl$/],
  ['replays', /^\/browsers\/\{\}\/replays/],
  ['logs', /^\/browsers\/\{\}\/logs\//],
  ['telemetry', /^\/browsers\/\{\}\/telemetry\//],
  ['extensions', /^(\/browsers\/\{\}\/extensions$|\/extensions)/],
  ['browsers', /^\/browsers(\/\{\})?$/],
  ['pools', /^\/browser_pools/],
  ['profiles', /^\/profiles/],
  ['proxies', /^\/proxies/],
  ['credentials', /^\/credentials/],
  ['credential providers', /^\/org\/credential_providers/],
  ['api keys', /^\/org\/api_keys/],
  ['projects', /^\/org\/projects/],
  ['org limits', /^\/org\/limits$/],
  ['auth connections', /^\/auth\/connections/],
  ['invocations', /^\/invocations/],
  ['deployments/apps', /^(\/deployments|\/apps$)/],
  ['audit logs', /^\/audit-logs/],
];

export const familyOf = (template) => FAMILIES.find(([, pattern]) => pattern.test(template))?.[0] ?? 'other';

/** Every route the SDK's resource classes call, as {method, template} with each path parameter written {}. */
export function sdkRoutes(sdkDir = path.join(REPO_ROOT, 'node_modules/@onkernel/sdk')) {
  const files = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.js')) files.push(full);
    }
  };
  walk(path.join(sdkDir, 'resources'));
  // '/literal' or (0, path_1.path)`/with/${param}`; getAPIList is a GET that pages.
  const call = /this\._client\.(get|post|put|patch|delete|getAPIList)\(\s*(?:'([^']*)'|\(0,\s*\w+\.path\)\s*`([^`]*)`)/g;
  const routes = new Map();
  for (const file of files.sort()) {
    for (const match of readFileSync(file, 'utf8').matchAll(call)) {
      const method = (match[1] === 'getAPIList' ? 'get' : match[1]).toUpperCase();
      const template = (match[2] ?? match[3]).replace(/\$\{[^}]*\}/g, '{}');
      routes.set(`${method} ${template}`, { method, template, family: familyOf(template) });
    }
  }
  return [...routes.values()].sort((a, b) => a.template.localeCompare(b.template) || a.method.localeCompare(b.method));
}

/** The URL path to call: the throwaway browser under /browsers/{id}/…, made-up ids elsewhere. */
function concretePath(route, browserId) {
  let first = true;
  return route.template.replace(/\{\}/g, () => {
    const useBrowser = first && route.template.startsWith('/browsers/{}') && !(route.template === '/browsers/{}' && route.method === 'DELETE');
    first = false;
    return encodeURIComponent(useBrowser ? browserId : MADE_UP_ID);
  });
}

async function call(baseUrl, apiKey, method, urlPath, body) {
  const response = await fetch(new URL(urlPath, baseUrl), {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body } : {}),
    signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
  });
  let code;
  let payload;
  if ((response.headers.get('content-type') ?? '').includes('application/json')) {
    const text = await response.text();
    try {
      payload = JSON.parse(text);
      code = typeof payload?.code === 'string' ? payload.code : undefined;
    } catch {
      // not JSON after all: judged by the status alone
    }
  } else {
    // A stream (SSE, a download) or nothing: the status is all we need.
    await response.body?.cancel();
  }
  return { status: response.status, code, payload };
}

/** Calls every route against the service; resolves to the report. */
export async function checkRoutes({ baseUrl, apiKey, sdkDir }) {
  const routes = sdkRoutes(sdkDir);
  const created = await call(baseUrl, apiKey, 'POST', '/browsers', JSON.stringify({ headless: true }));
  if (created.status !== 200 || typeof created.payload?.session_id !== 'string') {
    throw new Error(`could not create the throwaway browser: ${created.status} ${JSON.stringify(created.payload)}`);
  }
  const browserId = created.payload.session_id;
  const results = [];
  try {
    for (const route of routes) {
      const urlPath = concretePath(route, browserId);
      const body = ['POST', 'PUT', 'PATCH'].includes(route.method) ? PROBE_BODY : undefined;
      try {
        const { status, code } = await call(baseUrl, apiKey, route.method, urlPath, body);
        const served = !((status === 404 && code === 'route_not_found') || (status === 405 && code === 'method_not_allowed'));
        results.push({ ...route, status, code, served });
      } catch (error) {
        results.push({ ...route, status: 0, code: `no answer: ${error.message}`, served: false });
      }
    }
  } finally {
    await call(baseUrl, apiKey, 'DELETE', `/browsers/${encodeURIComponent(browserId)}`).catch(() => undefined);
  }
  const families = {};
  for (const result of results) {
    const family = (families[result.family] ??= { served: 0, total: 0, unserved: [] });
    family.total++;
    if (result.served) family.served++;
    else family.unserved.push(`${result.method} ${result.template} (${result.status} ${result.code ?? ''})`.trim());
  }
  return { total: results.length, served: results.filter((r) => r.served).length, families, routes: results };
}

function printReport(report) {
  const lines = [`served ${report.served}/${report.total} SDK routes`, ''];
  const width = Math.max(...Object.keys(report.families).map((name) => name.length));
  for (const [name, family] of Object.entries(report.families).sort(([a], [b]) => a.localeCompare(b))) {
    lines.push(`  ${name.padEnd(width)}  ${String(family.served).padStart(3)}/${String(family.total).padEnd(3)}`);
  }
  const unserved = Object.values(report.families).flatMap((family) => family.unserved);
  if (unserved.length) lines.push('', `unserved (${unserved.length}):`, ...unserved.map((route) => `  ${route}`));
  console.log(lines.join('\n'));
}

async function main() {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      'api-key': { type: 'string' },
      'sdk-dir': { type: 'string' },
      json: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
    },
  });
  if (values.list) {
    for (const route of sdkRoutes(values['sdk-dir'])) console.log(`${route.method} ${route.template}  [${route.family}]`);
    return;
  }
  const baseUrl = values['base-url'] ?? process.env.KERNEL_BASE_URL;
  const apiKey = values['api-key'] ?? process.env.KERNEL_API_KEY;
  if (!baseUrl || !apiKey) {
    console.error('usage: node scripts/sdk-routes.mjs --base-url URL --api-key KEY [--json] (or KERNEL_BASE_URL, KERNEL_API_KEY); --list prints the routes only');
    process.exit(2);
  }
  const report = await checkRoutes({ baseUrl, apiKey, sdkDir: values['sdk-dir'] });
  if (values.json) console.log(JSON.stringify(report, null, 2));
  else printReport(report);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
