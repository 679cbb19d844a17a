import { describe, expect, it } from 'vitest';
import { logQueryIssues, logStreamQuery } from '../../api/src/modules/browsers/logs-schema.js';
import { parseLogQuery } from '../../agent/src/logs/http.js';
import { LINE_CUT_MARK, LOG_LIMIT_DEFAULTS, parseLogLimits } from '../../agent/src/logs/limits.js';
import { LineSplitter } from '../../agent/src/logs/lines.js';
import { SupervisorLogs } from '../../agent/src/logs/supervisor.js';

/** The log streams' pure parts: lines, the per-process rings, the query on both sides, the limits. */

function split(chunks: Array<string | Buffer>, maxBytes = 16): { lines: string[]; splitter: LineSplitter } {
  const lines: string[] = [];
  const splitter = new LineSplitter(maxBytes, (line) => lines.push(line));
  for (const chunk of chunks) splitter.push(chunk);
  return { lines, splitter };
}

describe('LineSplitter', () => {
  it('joins lines across chunks, drops \\r before \\n and skips empty lines', () => {
    expect(split(['ab', 'c\nde\r', '\n\n\nf']).lines).toEqual(['abc', 'de']);
  });

  it('holds a line without newline until flushed', () => {
    const { lines, splitter } = split(['one\ntwo']);
    expect(lines).toEqual(['one']);
    expect(splitter.pending).toBe(3);
    splitter.flush();
    expect(lines).toEqual(['one', 'two']);
  });

  it('cuts a long line at maxBytes, marks it, and drops the rest up to its newline', () => {
    expect(split(['0123456789', '0123456789abcdef', 'zz\nnext\n'], 12).lines).toEqual([`012345678901${LINE_CUT_MARK}`, 'next']);
  });

  it('decodes UTF-8 split between chunks', () => {
    const bytes = Buffer.from('héllo\n');
    expect(split([bytes.subarray(0, 2), bytes.subarray(2)]).lines).toEqual(['héllo']);
  });

  it('forgets a held line on discard', () => {
    const { lines, splitter } = split(['half']);
    splitter.discard();
    splitter.push('whole\n');
    expect(lines).toEqual(['whole']);
  });
});

describe('SupervisorLogs', () => {
  const logs = (limits: Partial<typeof LOG_LIMIT_DEFAULTS> = {}) => {
    const supervisor = new SupervisorLogs();
    supervisor.configure({ ...LOG_LIMIT_DEFAULTS, ...limits });
    return supervisor;
  };
  const messages = (supervisor: SupervisorLogs, process?: 'chromium' | 'agent') => supervisor.buffered(process).map((line) => line.frame.message);

  it('keeps lines per process and replays all of them in the order they came', () => {
    const supervisor = logs();
    supervisor.feed('chromium', 'c1\n');
    supervisor.feed('agent', 'a1\n');
    supervisor.feed('chromium', 'c2\n');
    expect(messages(supervisor, 'chromium')).toEqual(['c1', 'c2']);
    expect(supervisor.buffered(undefined).map((line) => `${line.frame.process}:${line.frame.message}`)).toEqual(['chromium:c1', 'agent:a1', 'chromium:c2']);
  });

  it('drops the oldest lines past the line and byte limits', () => {
    const byLines = logs({ ringLines: 2 });
    byLines.feed('agent', 'a\nb\nc\n');
    expect(messages(byLines, 'agent')).toEqual(['b', 'c']);
    const byBytes = logs({ ringBytes: 10 });
    byBytes.feed('agent', 'aaaa\nbbbb\ncccc\n');
    expect(messages(byBytes, 'agent')).toEqual(['bbbb', 'cccc']);
  });

  it("keeps a process's last line without newline once it ended", () => {
    const supervisor = logs();
    supervisor.feed('chromium', 'last words');
    expect(messages(supervisor, 'chromium')).toEqual([]);
    supervisor.ended('chromium');
    expect(messages(supervisor, 'chromium')).toEqual(['last words']);
  });

  it("puts the agent's notes among a process's lines, after what it had written whole", () => {
    const supervisor = logs();
    supervisor.feed('chromium', 'own line\n');
    supervisor.note('chromium', 'exited: chromium (exit status 0)');
    expect(messages(supervisor, 'chromium')).toEqual(['own line', 'exited: chromium (exit status 0)']);
  });

  it('tells subscribers every new line until they unsubscribe', () => {
    const supervisor = logs();
    const seen: string[] = [];
    const unsubscribe = supervisor.subscribe((line) => seen.push(line.frame.message));
    supervisor.feed('agent', 'one\n');
    unsubscribe();
    supervisor.feed('agent', 'two\n');
    expect(seen).toEqual(['one']);
  });

  it('ends the open streams and forgets every line for the next holder of a pool browser', () => {
    const supervisor = logs();
    supervisor.feed('agent', 'of the previous holder\nhalf');
    let ended = 0;
    supervisor.trackStream(() => ended++);
    expect(supervisor.openStreams).toBe(1);
    supervisor.resetForNextHolder();
    supervisor.feed('agent', ' line\n');
    expect(ended).toBe(1);
    expect(supervisor.openStreams).toBe(0);
    expect(messages(supervisor, 'agent')).toEqual([' line']);
  });
});

describe('the query', () => {
  const agentQuery = (query: Record<string, string>) => parseLogQuery(new URLSearchParams(query));

  it('follows by default, as Kernel does, and reads follow=false', () => {
    expect(agentQuery({ source: 'path', path: '/a.log' })).toEqual({ source: 'path', follow: true, path: '/a.log' });
    expect(agentQuery({ source: 'supervisor', follow: 'false' })).toEqual({ source: 'supervisor', follow: false });
    expect(agentQuery({ source: 'supervisor', follow: 'No' }).follow).toBe(false);
    expect(agentQuery({ source: 'supervisor', follow: 'yes' }).follow).toBe(true);
  });

  it("takes Kernel's kernel-images-api for the agent", () => {
    expect(agentQuery({ source: 'supervisor', supervisor_process: 'kernel-images-api' }).process).toBe('agent');
    expect(logStreamQuery.safeParse({ source: 'supervisor', supervisor_process: 'kernel-images-api' }).success).toBe(true);
  });

  it.each<Record<string, string>>([
    {},
    { source: 'files' },
    { source: 'path' },
    { source: 'path', path: '/a.log', supervisor_process: 'agent' },
    { source: 'supervisor', path: '/a.log' },
    { source: 'supervisor', supervisor_process: 'dbus' },
    { source: 'supervisor', follow: 'sometimes' },
  ])('is refused by the agent and the API alike: %j', (query) => {
    expect(() => agentQuery(query)).toThrow();
    const parsed = logStreamQuery.safeParse(query);
    expect(!parsed.success || logQueryIssues(parsed.data).length > 0).toBe(true);
  });
});

describe('parseLogLimits', () => {
  it('has the documented defaults and reads the AGENT_LOGS_* variables', () => {
    expect(parseLogLimits({})).toEqual(LOG_LIMIT_DEFAULTS);
    expect(parseLogLimits({ AGENT_LOGS_RING_LINES: '50', AGENT_LOGS_LINE_KB: '4', AGENT_LOGS_MAX_STREAMS: '2' })).toMatchObject({ ringLines: 50, lineBytes: 4096, maxStreams: 2 });
  });

  it('refuses a value that is not a positive integer in range', () => {
    expect(() => parseLogLimits({ AGENT_LOGS_MAX_STREAMS: '0' })).toThrow(/AGENT_LOGS_MAX_STREAMS/);
    expect(() => parseLogLimits({ AGENT_LOGS_RING_KB: 'lots' })).toThrow(/AGENT_LOGS_RING_KB/);
  });
});
