import path from 'node:path';

/**
 * The Python counterpart of runner-child.ts: the process a Python app's code runs in,
 * started by runner.ts with the build's venv python inside the sandbox. Kept here as text
 * (tsc does not copy a .py file to dist); runner.ts writes it next to runner-child.mjs.
 *
 *   python runner.py inspect <entry>
 *   python runner.py invoke <entry> <app> <action> <invocation id>   (payload on stdin)
 *
 * The entry's dir and the build dir go on sys.path (templates import their own modules:
 * `from agent import Agent`), the entry is imported by path under its file's stem (not as
 * __main__: a template's `if __name__ == "__main__"` block is for local runs). The registry
 * and KernelContext come from the kernel package the app installed, the one whose
 * isinstance check the action wrapper makes. export_registry() of kernel 0.131 cannot
 * serialise its own dataclasses, so inspect walks get_apps(). The payload is always passed
 * positionally (the wrapper raises on a 2-parameter handler without one): the parsed JSON,
 * the text itself when it is not JSON, None when there is none. A coroutine is awaited.
 * The answer is one JSON line on fd 3, in runner-child's shapes.
 */
export const PYTHON_RUNNER_NAME = 'runner.py';

/** The build's virtualenv, inside the build dir (not .venv: an upload may carry its author's). */
export const VENV_DIR = '.browserplane/venv';

export const venvPython = (buildDir: string): string => path.join(buildDir, VENV_DIR, 'bin', 'python');

export const PYTHON_RUNNER = String.raw`
import asyncio, inspect, importlib.util, json, os, sys, traceback

RESULT_FD = 3


def answer(value):
    os.write(RESULT_FD, ("\n" + json.dumps(value) + "\n").encode("utf-8"))


def load_entry(entry):
    here = os.path.dirname(entry)
    cwd = os.getcwd()
    for path in (cwd, here):
        if path not in sys.path:
            sys.path.insert(0, path)
    name = os.path.splitext(os.path.basename(entry))[0]
    spec = importlib.util.spec_from_file_location(name, entry)
    if spec is None or spec.loader is None:
        raise RuntimeError("cannot load " + entry)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def framework():
    try:
        from kernel import app_framework
    except ImportError as error:
        raise RuntimeError("the entry cannot import kernel.app_framework (" + str(error) + "): add kernel to [project].dependencies in pyproject.toml") from None
    return app_framework


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    entry = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode not in ("inspect", "invoke") or not entry:
        raise RuntimeError("usage: runner.py inspect|invoke <entry> ...")
    # Read before the app runs: stdin is ours.
    payload_text = sys.stdin.read() if mode == "invoke" else ""
    load_entry(entry)
    fw = framework()
    registry = fw.app_registry
    if mode == "inspect":
        apps = [{"name": app.name, "actions": [{"name": action.name} for action in app.get_actions()]} for app in registry.get_apps()]
        answer({"apps": apps})
        return
    app_name, action_name, invocation_id = sys.argv[3], sys.argv[4], sys.argv[5]
    app = registry.get_app_by_name(app_name)
    if app is None:
        return answer({"ok": False, "error": "the entry registers no app named " + json.dumps(app_name)})
    action = app.get_action(action_name)
    if action is None:
        return answer({"ok": False, "error": "app " + json.dumps(app_name) + " has no action named " + json.dumps(action_name)})
    payload = None
    if payload_text != "":
        try:
            payload = json.loads(payload_text)
        except ValueError:
            payload = payload_text
    try:
        value = action.handler(fw.KernelContext(invocation_id=invocation_id), payload)
        if inspect.isawaitable(value):
            async def wait(awaitable):
                return await awaitable
            value = asyncio.run(wait(value))
    except BaseException as error:
        traceback.print_exc()
        message = str(error) or type(error).__name__
        return answer({"ok": False, "error": message})
    try:
        # Compact, as JSON.stringify writes it for a TS app.
        output = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        return answer({"ok": False, "error": "the action's return value is not JSON: " + str(error)})
    answer({"ok": True, "output": output})


def finish(code):
    # Exit now: an app may leave threads or sockets open that would keep Python up.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    try:
        main()
    except BaseException as error:
        traceback.print_exc()
        try:
            answer({"ok": False, "error": str(error) or type(error).__name__})
        finally:
            finish(1)
    finish(0)
`;
