import { describe, expect, it } from 'vitest';
import type { XDisplay } from '../../agent/src/display.js';
import { CappedBuffer, OutputLog, type OutputFrame } from '../../agent/src/process/output.js';
import { Sandbox, XAUTHORITY_INSIDE } from '../../agent/src/process/sandbox.js';

/** The pure parts of process execution: output keeping and capping, and the sandbox's command line. */

const b64 = (value: string) => Buffer.from(value).toString('base64');

describe('OutputLog', () => {
  it('gives a late subscriber what is kept, both streams in order, then live frames and the exit', () => {
    const log = new OutputLog(1024);
    log.push('stdout', Buffer.from('one'));
    log.push('stderr', Buffer.from('two'));
    const seen: OutputFrame[] = [];
    log.subscribe((frame) => seen.push(frame));
    log.push('stdout', Buffer.from('three'));
    log.end(7);
    log.push('stdout', Buffer.from('after the end'));
    expect(seen).toEqual([
      { stream: 'stdout', data_b64: b64('one') },
      { stream: 'stderr', data_b64: b64('two') },
      { stream: 'stdout', data_b64: b64('three') },
      { event: 'exit', exit_code: 7 },
    ]);
  });

  it('keeps only the latest bytes past its limit, dropping whole chunks from the front', () => {
    const log = new OutputLog(10);
    for (const chunk of ['aaaa', 'bbbb', 'cccc']) log.push('stdout', Buffer.from(chunk));
    log.end(0);
    const seen: OutputFrame[] = [];
    log.subscribe((frame) => seen.push(frame));
    expect(seen).toEqual([{ stream: 'stdout', data_b64: b64('bbbb') }, { stream: 'stdout', data_b64: b64('cccc') }, { event: 'exit', exit_code: 0 }]);
    expect(log.dropped).toBe(4);
  });
});

describe('CappedBuffer', () => {
  it('keeps the first bytes up to its cap and says it cut', () => {
    const buffer = new CappedBuffer(5);
    buffer.push(Buffer.from('abc'));
    buffer.push(Buffer.from('defg'));
    expect(Buffer.from(buffer.base64(), 'base64').toString()).toBe('abcde');
    expect(buffer.truncated).toBe(true);
  });
});

describe('Sandbox.plan', () => {
  const display = { name: ':7', number: 7, xauthority: '/work/x11/Xauthority' } as XDisplay;
  const request = { command: 'sh', args: ['-c', 'id'], env: { SECRET: 'value' }, cwd: '/Downloads', tty: false };

  it('runs bwrap with the session root as / and the caller\'s environment only inside', () => {
    const plan = new Sandbox('bwrap', '/srv/b/home', { uid: 61000, gid: 61000 }, display).plan(request);
    const line = [plan.command, ...plan.args];
    expect(plan.env).toEqual({});
    expect(line.join(' ')).toContain('--bind /srv/b/home /');
    expect(line.join(' ')).toContain('--ro-bind /usr /usr');
    expect(line.join(' ')).toContain(`--ro-bind /work/x11/Xauthority ${XAUTHORITY_INSIDE}`);
    // The display by its abstract socket: no socket file bound into the session's own /tmp.
    expect(line.join(' ')).not.toContain('.X11-unix');
    expect(line.join(' ')).toContain('--dir /tmp');
    expect(line.join(' ')).toContain('--setenv SECRET value');
    expect(line.join(' ')).toContain(`--setenv XAUTHORITY ${XAUTHORITY_INSIDE}`);
    expect(line).toContain('--new-session');
    expect(line.slice(-5)).toEqual(['/Downloads', '--', 'sh', '-c', 'id']);
    if (process.getuid?.() === 0) expect(line.slice(0, 5)).toEqual(['setpriv', '--reuid=61000', '--regid=61000', '--clear-groups', '--no-new-privs']);
    expect(line.join(' ')).toContain('prlimit --nproc=512:512 -- bwrap');
  });

  it('keeps the caller\'s terminal session with a TTY (no --new-session)', () => {
    const plan = new Sandbox('bwrap', '/srv/b/home', { uid: 61000, gid: 61000 }, undefined).plan({ ...request, tty: true });
    expect(plan.args).not.toContain('--new-session');
    expect(plan.args.join(' ')).toContain('--setenv TERM xterm-256color');
  });

  it('runs the command itself in the session\'s home when unconfined', () => {
    const plan = new Sandbox('unconfined', '/srv/b/home', { uid: 1000, gid: 1000 }, undefined).plan(request);
    // No prlimit: RLIMIT_NPROC would count the tasks of every pod sharing the uid on the node.
    expect(plan).toMatchObject({ command: 'sh', args: ['-c', 'id'], cwd: '/srv/b/home/Downloads' });
    expect(plan.env).toMatchObject({ HOME: '/srv/b/home', SECRET: 'value' });
  });
});
