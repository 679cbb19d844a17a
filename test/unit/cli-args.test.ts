import { describe, expect, it } from 'vitest';
import { parseCliArgs, type CliSpec } from '../../api/src/cli.js';

const spec: CliSpec = { program: 'prog', help: () => 'Usage: prog [--help]\n\nmore', version: () => '1.2.3' };

describe('parseCliArgs', () => {
  it('runs with no argument', () => {
    expect(parseCliArgs([], spec)).toEqual({ kind: 'run' });
  });

  it('prints help and version to stdout with exit 0', () => {
    expect(parseCliArgs(['-h'], spec)).toEqual({ kind: 'print', stream: 'stdout', text: 'Usage: prog [--help]\n\nmore', exitCode: 0 });
    expect(parseCliArgs(['--version'], spec)).toEqual({ kind: 'print', stream: 'stdout', text: '1.2.3', exitCode: 0 });
  });

  it('refuses an unknown option or a stray argument with exit 2, naming it, then the usage line only', () => {
    const option = parseCliArgs(['--port', '80'], spec);
    expect(option).toEqual({ kind: 'print', stream: 'stderr', exitCode: 2, text: expect.stringMatching(/^prog: unknown option "--port" .*\nUsage: prog \[--help\]$/) as unknown });
    const stray = parseCliArgs(['serve'], spec);
    expect(stray).toMatchObject({ exitCode: 2, text: expect.stringContaining('unexpected argument "serve"') as unknown });
  });
});
