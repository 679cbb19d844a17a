import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The refs `make images` built, e.g. localhost/browserplane/browser:0.1.0-<hash>. */
    images: { api: string; browser: string; runner: string };
  }
}

const ROOT = path.resolve(import.meta.dirname, '../../..');

/**
 * The images of this checkout: scripts/images.sh with podman (the tests run containers
 * with podman), which builds what changed and otherwise answers in seconds. Its last
 * stdout lines are `api=<ref> <archive>`, `browser=<ref> <archive>` and `runner=<ref> <archive>`.
 */
export default async function setup(project: TestProject): Promise<void> {
  const { stdout } = await promisify(execFile)(path.join(ROOT, 'scripts/images.sh'), {
    env: { ...process.env, IMAGES_ENGINE: 'podman' },
    maxBuffer: 64 * 1024 * 1024,
    timeout: 60 * 60_000,
  });
  const ref = (name: string) => {
    const line = stdout.split('\n').find((candidate) => candidate.startsWith(`${name}=`));
    if (!line) throw new Error(`scripts/images.sh printed no ${name}= line:\n${stdout}`);
    return line.slice(name.length + 1).split(' ')[0]!;
  };
  project.provide('images', { api: ref('api'), browser: ref('browser'), runner: ref('runner') });
}
