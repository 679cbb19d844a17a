/**
 * The process an app's code runs in, inside the sandbox (runner.ts starts it; compiled to
 * dist and copied into the data dir, so it imports Node's modules only):
 *
 *   node runner-child.js inspect <entry>
 *   node runner-child.js invoke <entry> <app> <action> <invocation id>   (payload on stdin)
 *
 * It imports the entry, then reads the app registry of the @onkernel/sdk instance the entry
 * used: resolved from the entry's own location, the CommonJS one (core/app-framework.js,
 * what `require` and a TypeScript build to CommonJS load) and the ESM one
 * (core/app-framework.mjs, what an ESM `import` loads), each loaded by its own file so it is
 * the very module instance the entry registered into. Its answer is one JSON line on fd 3
 * (stdout and stderr are the app's log): inspect → the registry's export(); invoke →
 * {ok, output} (the return value as JSON text, undefined → null) or {ok: false, error}.
 */
import { readFileSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

interface Action {
  name: string;
  handler: (context: { invocation_id: string }, payload?: unknown) => Promise<unknown>;
}
interface App {
  name: string;
  getAction(name: string): Action | undefined;
}
interface Registry {
  getApps(): App[];
  getAppByName(name: string): App | undefined;
  export(): { apps: { name: string; actions: { name: string }[] }[] };
}

const RESULT_FD = 3;

function answer(value: unknown): void {
  writeSync(RESULT_FD, `\n${JSON.stringify(value)}\n`);
}

async function registries(entry: string): Promise<Registry[]> {
  let sdkIndex: string;
  try {
    sdkIndex = createRequire(entry).resolve('@onkernel/sdk');
  } catch {
    throw new Error('the entry cannot resolve @onkernel/sdk: add it to the dependencies in package.json');
  }
  const root = path.dirname(sdkIndex);
  const found: Registry[] = [];
  const cjs = path.join(root, 'core', 'app-framework.js');
  const esm = path.join(root, 'core', 'app-framework.mjs');
  try {
    found.push((createRequire(entry)(cjs) as { appRegistry: Registry }).appRegistry);
  } catch {
    // This SDK build has no CommonJS framework.
  }
  try {
    found.push(((await import(pathToFileURL(esm).href)) as { appRegistry: Registry }).appRegistry);
  } catch {
    // Nor an ESM one.
  }
  return found;
}

async function main(): Promise<void> {
  const [mode, entry, appName, actionName, invocationId] = process.argv.slice(2);
  if (!entry || (mode !== 'inspect' && mode !== 'invoke')) throw new Error('usage: runner-child inspect|invoke <entry> ...');
  // Read before the app runs: its code must not get at the payload of anything else, and stdin is ours.
  const payloadText = mode === 'invoke' ? readFileSync(0, 'utf8') : '';
  await import(pathToFileURL(entry).href);
  const found = await registries(entry);
  if (mode === 'inspect') {
    const apps = found.flatMap((registry) => registry.export().apps);
    answer({ apps });
    return;
  }
  const app = found.map((registry) => registry.getAppByName(appName!)).find((candidate) => candidate !== undefined);
  if (!app) return answer({ ok: false, error: `the entry registers no app named ${JSON.stringify(appName)}` });
  const action = app.getAction(actionName!);
  if (!action) return answer({ ok: false, error: `app ${JSON.stringify(appName)} has no action named ${JSON.stringify(actionName)}` });
  let payload: unknown;
  if (payloadText !== '') {
    try {
      payload = JSON.parse(payloadText);
    } catch {
      payload = payloadText;
    }
  }
  let value: unknown;
  try {
    value = await action.handler({ invocation_id: invocationId! }, payload);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return answer({ ok: false, error: error instanceof Error ? error.message : String(error) });
  }
  let output: string;
  try {
    output = value === undefined ? 'null' : JSON.stringify(value);
  } catch (error) {
    return answer({ ok: false, error: `the action's return value is not JSON: ${error instanceof Error ? error.message : String(error)}` });
  }
  answer({ ok: true, output: output === undefined ? null : output });
}

main().then(
  // Exit now: an app may leave timers or sockets open (a browser connection) that would keep Node up.
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    try {
      answer({ ok: false, error: error instanceof Error ? error.message : String(error) });
    } finally {
      process.exit(1);
    }
  },
);
