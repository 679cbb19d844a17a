import type { Logger } from 'pino';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { resolveSystemUser, type SystemUser } from '../../lib/system-user.js';
import { ChromiumStartError, findChromium, launchChromium, type RunningChromium } from './chromium.js';
import type { AgentConfig } from './config.js';
import type { XDisplay } from './display.js';
import { isolationWrap, type BindMount } from './isolation.js';
import type { WorkDir } from './work-dir.js';

/**
 * Who Chromium runs as and how it is started: in the session's namespaces as root, in
 * its own sandbox when the host allows one, without it (loudly) when not. The agent
 * (agent.ts) prepares everything this needs first: work dir, display, flags, policy.
 */

/**
 * What Chromium prints when the host refuses its namespace sandbox: a message naming the
 * sandbox (no user namespaces), or, where user namespaces work but the seccomp profile
 * refuses chroot to a process without CAP_SYS_CHROOT (podman's default profile in a pod
 * with every capability dropped, test/images), a failed check of the zygote's chroot and
 * the zygote's death, which never mention the sandbox.
 */
export const SANDBOX_REFUSED = /sandbox|sys_chroot|Zygote process exited prematurely/i;

/** The session's own uid when the runtime gave one (AGENT_CHROMIUM_UID), else the named user. */
export async function chromiumUserOf(config: Pick<AgentConfig, 'chromiumUid' | 'chromiumUser'>, log: Logger): Promise<SystemUser | undefined> {
  const uid = config.chromiumUid;
  if (uid !== undefined && process.getuid?.() === 0) return { uid, gid: uid, name: `uid ${uid}` };
  try {
    return await resolveSystemUser(config.chromiumUser);
  } catch (error) {
    log.error({ err: error, user: config.chromiumUser }, 'SANDBOX OFF: cannot find or create the unprivileged user; Chromium runs as root with --no-sandbox');
    return undefined;
  }
}

/** Settings of the spec this slice of the agent does not apply yet, so the log says so. */
export function unsupportedSettings(spec: BrowserLaunchSpec): string[] {
  const ignored: string[] = [];
  if (spec.kioskMode && spec.headless) ignored.push('kioskMode (headless)');
  return ignored;
}

export interface BrowserLaunch {
  config: AgentConfig;
  dirs: WorkDir;
  display: XDisplay | undefined;
  user: SystemUser | undefined;
  extraFlags: string[];
  /** Extra bind mounts of the session's mount namespace (chrome_policy's managed dir). */
  binds: BindMount[];
  signal: AbortSignal;
  log: Logger;
  /** Called as Chromium (or its wrapper) is spawned, for the start's timings. */
  onSpawn?: () => void;
}

/** As root without an unprivileged user the sandbox cannot work; elsewhere it is tried first. */
export async function launchBrowser({ config, dirs, display, user, extraFlags, binds, signal, log, onSpawn }: BrowserLaunch): Promise<RunningChromium> {
  const sandbox = !(process.getuid?.() === 0 && !user);
  const launchOptions = {
    executable: findChromium(config.chromePath),
    spec: config.spec,
    dirs,
    display,
    user,
    extraFlags,
    // As root, always: the session's own pid and mount namespaces (isolation.ts).
    ...(process.getuid?.() === 0 ? { wrap: isolationWrap({ user, workDir: dirs.root, binds }) } : {}),
    cdpPolicy: { blockPrivateNetworks: config.egress.blockPrivate, filesRoot: dirs.home },
    startTimeoutMs: config.startTimeoutMs,
    signal,
    log,
    ...(onSpawn ? { onSpawn } : {}),
  };
  try {
    return await launchChromium({ ...launchOptions, sandbox });
  } catch (error) {
    if (!sandbox || !(error instanceof ChromiumStartError) || !SANDBOX_REFUSED.test(error.stderrTail)) throw error;
    log.error({ stderr_tail: error.stderrTail }, 'SANDBOX OFF: this host does not allow the Chromium sandbox; relaunching with --no-sandbox');
    return launchChromium({ ...launchOptions, sandbox: false });
  }
}
