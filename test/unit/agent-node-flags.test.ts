import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_NODE_FLAGS } from '../../api/src/runtime/agent-process.js';

/**
 * The agent's Node flags (memory: see AGENT_NODE_FLAGS) hold in both modes: the embedded
 * runtime passes them itself, a browser pod gets them from the image's command line.
 */

const dockerfile = readFileSync(path.resolve(import.meta.dirname, '../../docker/browser.Dockerfile'), 'utf8');
const instruction = (name: string): string[] => JSON.parse(new RegExp(`^${name} (\\[.*\\])$`, 'm').exec(dockerfile)?.[1] ?? '[]') as string[];

describe('the browser image', () => {
  it('starts the agent with the flags the embedded runtime uses', () => {
    const argv = [...instruction('ENTRYPOINT'), ...instruction('CMD')];
    expect(argv.slice(argv.indexOf('node'))).toEqual(['node', ...AGENT_NODE_FLAGS, 'dist/agent/src/main.js']);
  });
});
