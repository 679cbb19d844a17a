import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { BuildError } from './build-error.js';
import { VENV_DIR } from './python-runner.js';
import { runSandboxed, type LogStream } from './sandbox.js';

/**
 * The dependencies of a Python app (an entrypoint ending .py), in the app sandbox like npm:
 *
 *   1. `python3 -m venv .browserplane/venv` with the host's /usr/bin Python (the sandbox
 *      binds /usr read-only; the venv links to it, so the runner needs nothing else);
 *   2. what to install: requirements.txt when there is one, else pyproject.toml's
 *      [project].dependencies, read with tomllib by the venv's python in the sandbox (the
 *      file is the app author's). Kernel's templates have no [build-system], so the
 *      project itself is not installed (`pip install .` would try a setuptools build of a
 *      flat layout). A uv.lock is not read: pip resolves the declared ranges (uv is not on
 *      the host; docs/apps.md says so). A single .py file gets kernel at the version the
 *      e2e tier checks, as a single index.ts gets @onkernel/sdk;
 *   3. `pip install` of that list (`-r requirements.txt`, or the requirements after `--`), with network.
 */

export const PY_ENTRY = /\.py$/;

/** The `kernel` a source without pyproject.toml or requirements.txt gets (the one scripts/python-sdk.sh tests). */
export const DEFAULT_PYTHON_SDK_VERSION = '0.131.0';

const READ_PYPROJECT = `
import json, os, sys
def reply(value):
    os.write(3, (json.dumps(value) + "\\n").encode("utf-8"))
try:
    import tomllib
    with open("pyproject.toml", "rb") as f:
        data = tomllib.load(f)
    deps = data.get("project", {}).get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        reply({"error": "[project].dependencies of pyproject.toml is not a list of strings"})
    else:
        reply({"dependencies": deps})
except Exception as error:
    reply({"error": "pyproject.toml cannot be read: " + str(error)})
`;

interface StepOptions {
  dataDir: string;
  signal: AbortSignal;
  onLog: (stream: LogStream, line: string) => void;
  timeoutMs: () => number;
}

const exists = (file: string) => lstat(file).then((info) => info.isFile(), () => false);

export async function installPythonDependencies(buildDir: string, options: StepOptions): Promise<void> {
  const python = path.join(buildDir, VENV_DIR, 'bin', 'python');
  const run = (command: string, args: string[], network: boolean, resultFd = false) =>
    runSandboxed({
      command,
      args,
      cwd: buildDir,
      writable: [buildDir],
      readable: [],
      env: { PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', PIP_PROGRESS_BAR: 'off', PYTHONDONTWRITEBYTECODE: '1' },
      timeoutMs: options.timeoutMs(),
      signal: options.signal,
      onLog: options.onLog,
      network,
      dataDir: options.dataDir,
      resultFd,
    });

  // --clear: a venv the source carries (.browserplane/venv in a zip) must not stand in for
  // ours. Done in the sandbox, as every write into the build dir is: a git tree may hold
  // links (.browserplane -> /somewhere) that root would follow.
  options.onLog('stdout', `python3 -m venv --clear ${VENV_DIR}`);
  const venv = await run('python3', ['-m', 'venv', '--clear', VENV_DIR], false);
  if (venv.timedOut) throw new BuildError('making the virtualenv took longer than the build may (BROWSERPLANE_APP_BUILD_TIMEOUT_SECONDS)');
  if (venv.code !== 0) throw new BuildError(`python3 -m venv failed (exit ${venv.code ?? venv.signal}): the host needs python3 and python3-venv`);
  options.signal.throwIfAborted();

  let what = ['-r', 'requirements.txt'];
  if (!(await exists(path.join(buildDir, 'requirements.txt')))) {
    let dependencies: string[];
    if (await exists(path.join(buildDir, 'pyproject.toml'))) {
      if (await exists(path.join(buildDir, 'uv.lock'))) options.onLog('stdout', 'uv.lock is not read: pip installs the ranges of [project].dependencies');
      const read = await run(python, ['-E', '-B', '-c', READ_PYPROJECT], false, true);
      const answer = parseAnswer(read.result);
      if (typeof answer?.error === 'string') throw new BuildError(answer.error);
      if (read.code !== 0 || !Array.isArray(answer?.dependencies)) throw new BuildError(`reading pyproject.toml failed (exit ${read.code ?? read.signal})`);
      dependencies = answer.dependencies as string[];
      const bad = dependencies.find((dep) => dep.trim().startsWith('-') || /[\r\n]/.test(dep));
      if (bad !== undefined) throw new BuildError(`[project].dependencies holds ${JSON.stringify(bad)}, which is not a requirement`);
      options.onLog('stdout', `pyproject.toml: ${dependencies.length === 0 ? 'no dependencies' : dependencies.join(', ')}`);
    } else {
      options.onLog('stdout', `no pyproject.toml or requirements.txt: installing kernel ${DEFAULT_PYTHON_SDK_VERSION}`);
      dependencies = [`kernel==${DEFAULT_PYTHON_SDK_VERSION}`];
    }
    if (dependencies.length === 0) return;
    // After `--` (optparse's end of options) a requirement is never read as an option.
    what = ['--', ...dependencies];
  }
  options.onLog('stdout', `pip install ${what.join(' ')}`);
  const pip = await run(python, ['-E', '-m', 'pip', 'install', '--no-input', '--disable-pip-version-check', '--progress-bar', 'off', ...what], true);
  if (pip.timedOut) throw new BuildError('pip took longer than the build may (BROWSERPLANE_APP_BUILD_TIMEOUT_SECONDS)');
  if (pip.code !== 0) throw new BuildError(`pip install failed (exit ${pip.code ?? pip.signal}): a dependency could not be installed`);
}

function parseAnswer(text: string | undefined): { dependencies?: unknown; error?: unknown } | undefined {
  const last = (text ?? '').split('\n').filter((line) => line.trim() !== '').at(-1);
  if (last === undefined) return undefined;
  try {
    return JSON.parse(last) as { dependencies?: unknown; error?: unknown };
  } catch {
    return undefined;
  }
}
