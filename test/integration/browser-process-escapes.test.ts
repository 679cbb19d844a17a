import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { chmod, mkdtemp, readdir, rm, symlink, writeFile as writeHostFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { ProcessCalls } from './browser-process.fixtures.js';

/**
 * Every way out of a process's sandbox we know of, one test each, against real headful
 * sessions (their own Xvfb, Chromium, agent, bubblewrap). Each attack is first run on the
 * host as the same unprivileged uid without the sandbox (asSessionUser), where it works:
 * what refuses it inside is the sandbox, not the file modes. Targets the uid could not
 * reach anyway are opened up for that control (chmod), as a mistake elsewhere might.
 */

interface Session {
  id: string;
  proc: ProcessCalls;
  hostRoot: string;
  workDir: string;
  uid: number;
  gid: number;
  chromiumPid: number;
  xauthority: string;
}

let app: TestApp;
let a: Session;
let b: Session;
let outside: string;

async function headfulSession(): Promise<Session> {
  const { http } = await newProject(app.tenant.http);
  const res = await http.post('/browsers', { headless: false });
  if (res.status !== 200) throw new Error(`create failed: ${res.status} ${res.text}`);
  const id = res.body.session_id as string;
  const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [id]);
  const root = (await (await fetch(`${rows[0]!.agent_url}/fs/root`, { headers: { authorization: `Bearer ${app.deps.agentTokens(id)}` } })).json()) as { host_root: string };
  const workDir = path.dirname(root.host_root);
  const info = statSync(workDir);
  const chromiumPid = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .find((pid) => {
      try {
        // Chromium's browser process itself: not its isolation wrapper (bwrap), not a child (--type=).
        const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return /chrom/.test(path.basename(args[0]!)) && args.includes(`--user-data-dir=${workDir}/user-data`) && !args.some((arg) => arg.startsWith('--type='));
      } catch {
        return false;
      }
    });
  const xauthority = [path.join(workDir, 'x11', 'Xauthority'), path.join(root.host_root, 'Xauthority')].find((file) => existsSync(file));
  if (!chromiumPid || !xauthority) throw new Error(`chromium ${chromiumPid} or Xauthority ${xauthority} of ${workDir} not found`);
  return { id, proc: new ProcessCalls(http, id), hostRoot: root.host_root, workDir, uid: info.uid, gid: info.gid, chromiumPid: Number(chromiumPid), xauthority };
}

/** The attack on the host, as the session's uid with no sandbox: the control. */
function asSessionUser(session: Session, script: string, env: Record<string, string> = {}): { code: number | null; out: string; err: string } {
  const run = spawnSync('setpriv', [`--reuid=${session.uid}`, `--regid=${session.gid}`, '--clear-groups', '--', 'sh', '-c', script], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin', ...env },
  });
  return { code: run.status, out: run.stdout, err: run.stderr };
}

const ppid = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);

/** Display numbers whose listening socket belongs to `pid` (an Xvfb). */
function displayOf(xauthority: string): number {
  const xvfb = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .find((pid) => {
      try {
        const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return args[0]?.endsWith('Xvfb') && args.includes(xauthority);
      } catch {
        return false;
      }
    });
  const inodes = new Set(readdirSync(`/proc/${xvfb}/fd`).map((fd) => /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${xvfb}/fd/${fd}`, 'utf8'))?.[1]));
  const line = readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .map((entry) => entry.trim().split(/\s+/))
    .find((fields) => inodes.has(fields[6]) && /\.X11-unix\/X\d+$/.test(fields[7] ?? ''));
  return Number(/X(\d+)$/.exec(line![7]!)![1]);
}

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  [a, b] = [await headfulSession(), await headfulSession()];
  outside = await mkdtemp(path.join(os.tmpdir(), 'bp-proc-outside-'));
  await chmod(outside, 0o777);
  await writeHostFile(path.join(outside, 'secret.txt'), 'secret', { mode: 0o644 });
}, 180_000);
afterAll(async () => {
  await app?.close();
  if (outside) await rm(outside, { recursive: true, force: true });
});

describe('process escapes', () => {
  it('cannot read the service\'s files on the host', async () => {
    const secret = path.join(outside, 'secret.txt');
    expect(asSessionUser(a, `cat ${secret}`).out).toBe('secret');
    const inside = await a.proc.sh(`cat ${secret}; ls ${path.dirname(a.workDir)}`);
    expect(inside.exit_code).not.toBe(0);
    expect(inside.stdout).toBe('');
  });

  it('cannot read another session\'s files', async () => {
    await writeHostFile(path.join(b.hostRoot, 'b-secret.txt'), 'b secret', { mode: 0o644 });
    await chmod(b.workDir, 0o755);
    await chmod(b.hostRoot, 0o755);
    try {
      expect(asSessionUser(a, `cat ${b.hostRoot}/b-secret.txt`).out).toBe('b secret');
      const inside = await a.proc.sh(`cat ${b.hostRoot}/b-secret.txt`);
      expect(inside.exit_code).not.toBe(0);
      expect(inside.stdout).toBe('');
    } finally {
      await chmod(b.workDir, 0o700);
      await chmod(b.hostRoot, 0o700);
    }
  });

  it('reaches its own display with its own cookie, and neither reads nor uses another display\'s', async () => {
    const own = await a.proc.sh('xdotool getmouselocation');
    expect(own.exit_code, own.stderr).toBe(0);
    expect((await a.proc.sh('echo $XAUTHORITY')).stdout).toBe('/run/browserplane/Xauthority\n');
    const otherDisplay = `:${displayOf(b.xauthority)}`;
    const opened = [b.workDir, path.dirname(b.xauthority)];
    for (const dir of opened) await chmod(dir, 0o755);
    await chmod(b.xauthority, 0o644);
    try {
      const control = asSessionUser(a, 'xdotool getmouselocation', { DISPLAY: otherDisplay, XAUTHORITY: b.xauthority });
      expect(control.code, `${otherDisplay} ${control.err}`).toBe(0);
      const read = await a.proc.sh(`cat ${b.xauthority} | wc -c`);
      expect(read.stdout.trim()).toBe('0');
      const use = await a.proc.sh(`XAUTHORITY=${b.xauthority} DISPLAY=${otherDisplay} xdotool getmouselocation`);
      expect(use.exit_code).not.toBe(0);
      const withOwnCookie = await a.proc.sh(`DISPLAY=${otherDisplay} xdotool getmouselocation`);
      expect(withOwnCookie.exit_code).not.toBe(0);
    } finally {
      await chmod(b.xauthority, 0o600);
      for (const dir of opened) await chmod(dir, 0o700);
    }
  });

  it('cannot signal its agent, its own or another session\'s Chromium, or the service', async () => {
    const agentPid = ppid(ppid(a.chromiumPid));
    expect(asSessionUser(a, `kill -0 ${a.chromiumPid}`).code).toBe(0);
    for (const pid of [agentPid, a.chromiumPid, b.chromiumPid, process.pid]) {
      const inside = await a.proc.sh(`kill -TERM ${pid}`);
      expect(inside.exit_code, `pid ${pid}`).not.toBe(0);
    }
    expect(existsSync(`/proc/${a.chromiumPid}`)).toBe(true);
    expect(existsSync(`/proc/${b.chromiumPid}`)).toBe(true);
    expect(existsSync(`/proc/${agentPid}`)).toBe(true);
    expect((await a.proc.sh('echo alive')).stdout).toBe('alive\n');
  });

  it('sees only its own processes in /proc', async () => {
    const count = 'ls /proc | grep -c "^[0-9]"';
    expect(Number(asSessionUser(a, count).out)).toBeGreaterThan(20);
    const inside = await a.proc.sh(`${count}; test -e /proc/${a.chromiumPid} && echo visible`);
    expect(Number(inside.stdout.split('\n')[0])).toBeLessThanOrEqual(5);
    expect(inside.stdout).not.toContain('visible');
  });

  it('writes nothing outside the session\'s root', async () => {
    expect(asSessionUser(a, `touch ${outside}/by-control && echo done`).out).toBe('done\n');
    await rm(path.join(outside, 'by-control'));
    const inside = await a.proc.sh(`touch ${outside}/evil; echo x > /usr/bp-evil; echo x > /etc/bp-evil; echo x > /etc/passwd; echo x > /tmp/bp-tmp; ls /etc/bp-evil`);
    expect(inside.stdout).toBe('/etc/bp-evil\n');
    expect(await readdir(outside)).toEqual(['secret.txt']);
    for (const file of ['/usr/bp-evil', '/etc/bp-evil', '/tmp/bp-tmp']) expect(existsSync(file)).toBe(false);
    expect(readFileSync('/etc/passwd', 'utf8')).toContain('root:');
    // /etc is the sandbox's own tmpfs: nothing lands in the session's root either. /tmp is
    // the session's own /tmp (the fs API's), not the host's.
    expect(existsSync(path.join(a.hostRoot, 'etc', 'bp-evil'))).toBe(false);
    expect(existsSync(path.join(a.hostRoot, 'tmp', 'bp-tmp'))).toBe(true);
  });

  it('gets an /etc and a /run of 1 MiB of memory each, not more', async () => {
    const filled = await a.proc.sh('head -c 5000000 /dev/zero > /etc/fill; wc -c < /etc/fill; head -c 5000000 /dev/zero > /run/fill; wc -c < /run/fill');
    const [etc, run] = filled.stdout.trim().split('\n').map(Number);
    expect(etc).toBeLessThanOrEqual(1024 * 1024);
    expect(run).toBeLessThanOrEqual(1024 * 1024);
    expect(filled.stderr).toContain('No space left on device');
  });

  it('refuses a cwd with ".." or through a symlink leading out, and cannot follow one from inside', async () => {
    await symlink(outside, path.join(a.hostRoot, 'abs-out'));
    await symlink(`${'../'.repeat(a.hostRoot.split('/').length)}${outside.slice(1)}`, path.join(a.hostRoot, 'rel-out'));
    expect(asSessionUser(a, `cat ${a.hostRoot}/abs-out/secret.txt`).out).toBe('secret');
    for (const cwd of ['/abs-out', '/rel-out', '/../..', '/Downloads/../../..']) {
      const res = await a.proc.exec({ command: 'cat', args: ['secret.txt'], cwd });
      expect(res.status, cwd).toBe(400);
      expect(res.body.code).toBe('invalid_path');
    }
    const inside = await a.proc.sh('cat /abs-out/secret.txt /rel-out/secret.txt; cd /../../.. && ls');
    expect(inside.stdout).not.toContain('secret');
    expect(inside.stdout).toContain('Downloads');
  });

  it('refuses to start when a mount point of the root was replaced by a symlink', async () => {
    const run = path.join(a.hostRoot, 'run');
    await rm(run, { recursive: true, force: true });
    await symlink(outside, run);
    try {
      const res = await a.proc.exec({ command: 'id' });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('mount_point_taken');
    } finally {
      await rm(run);
    }
    expect((await a.proc.sh('echo ok')).stdout).toBe('ok\n');
    expect(await readdir(outside)).toEqual(['secret.txt']);
  });

  it('runs nothing as root, and nothing as another user', async () => {
    expect((await a.proc.exec({ command: 'id', as_root: true })).body.code).toBe('as_root_unsupported');
    expect((await a.proc.exec({ command: 'id', as_user: String(b.uid) })).body.code).toBe('as_user_unsupported');
    expect((await a.proc.sh('id -u')).stdout).toBe(`${a.uid}\n`);
    expect(execFileSync('id', ['-u'], { encoding: 'utf8' }).trim()).toBe('0');
  });
});
