import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseOomReports, topTasks } from '../../agent/src/telemetry/oom-report.js';
import { locateOomCounter, oomEvent } from '../../agent/src/telemetry/oom-watch.js';

/**
 * The kernel's OOM report as /dev/kmsg gives it, record by record. MEMCG is a real one,
 * captured on this host (Linux 6.18, cgroup v1) from `head -c 300M /dev/zero | tail` in a
 * 64 MiB memory cgroup, with the call trace and most stats left out; GLOBAL is the shape of
 * a whole-host OOM (Mem-Info and every task of the host), numbers made up.
 */

const MEMCG = [
  '4,1032,22617318790,-;tail invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0',
  '4,1033,22617318835,-;CPU: 0 UID: 0 PID: 23688 Comm: tail Not tainted 6.18.44-fc-v669 #1 PREEMPT(none)',
  '4,1034,22617318848,-;Call Trace:',
  '4,1037,22617321543,-; dump_header+0x43/0x1c0',
  '6,1088,22617324309,-;memory: usage 65536kB, limit 65536kB, failcnt 78',
  '6,1091,22617324320,-;Memory cgroup stats for /process_api/d26e/bptest:',
  '6,1134,22617324414,-;Tasks state (memory values in pages):',
  '6,1135,22617324415,-;[  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name',
  '6,1136,22617324417,-;[  23686]     0 23686      648      400        0      400         0    40960        0             0 sh',
  '6,1137,22617324420,-;[  23687]     0 23687      732      410        0      410         0    53248        0             0 head',
  '6,1138,22617324421,-;[  23688]     0 23688    16938    16589    16192      397         0   176128        0             0 tail',
  '6,1139,22617324423,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/process_api/d26e/bptest,task_memcg=/process_api/d26e/bptest,task=tail,pid=23688,uid=0',
  '3,1140,22617324444,-;Memory cgroup out of memory: Killed process 23688 (tail) total-vm:67752kB, anon-rss:64768kB, file-rss:1588kB, shmem-rss:0kB, UID:0 pgtables:172kB oom_score_adj:0',
];

const GLOBAL = [
  '4,2000,30000000000,-;chrome invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=300',
  '4,2001,30000000001,-;CPU: 1 PID: 5000 Comm: chrome Not tainted 5.15.0 #1',
  '4,2002,30000000002,-;Mem-Info:',
  '4,2003,30000000003,-;active_anon:100 inactive_anon:200 isolated_anon:0\n active_file:1 inactive_file:2 isolated_file:0',
  '4,2004,30000000003,-;active_anon:100 inactive_anon:200 isolated_anon:0 active_file:1 inactive_file:2 isolated_file:0 unevictable:0 dirty:0 writeback:0 slab_reclaimable:5 slab_unreclaimable:6 mapped:7 shmem:8 pagetables:9 sec_pagetables:0 bounce:0 kernel_misc_reclaimable:0 free:12800 free_pcp:10 free_cma:0',
  '4,2005,30000000004,-;6291456 pages RAM',
  '6,2006,30000000005,-;Tasks state (memory values in pages):',
  '6,2007,30000000006,-;[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name',
  '6,2008,30000000007,-;[   4000]  1000  4000   900000   500000  4000000        0           300 other-tenant',
  '6,2009,30000000008,-;[   5000]  1001  5000   800000   400000  3000000        0           300 chrome',
  '6,2010,30000000009,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/a/b,task=chrome,pid=5000,uid=1001',
  '3,2011,30000000010,-;Out of memory: Killed process 5000 (chrome) total-vm:3200000kB, anon-rss:1500000kB, file-rss:100000kB, shmem-rss:0kB, UID:1001 pgtables:3000kB oom_score_adj:300',
];

describe('parseOomReports', () => {
  it('reads a cgroup OOM kill: the killed process, its rss, the constraint, the trigger and the cgroup\'s tasks', () => {
    const [report, ...more] = parseOomReports(MEMCG);
    expect(more).toEqual([]);
    expect(report).toMatchObject({
      seq: 1140,
      usec: 22617324444,
      cgroup: '/process_api/d26e/bptest',
      pid: 23688,
      process_name: 'tail',
      rss_kb: 64768 + 1588,
      constraint: 'memcg',
      trigger_pid: 23688,
      trigger_process_name: 'tail',
    });
    expect(report!.mem_free_kb).toBeUndefined();
    expect(topTasks(report!.tasks)).toEqual([
      { pid: 23688, name: 'tail', rss_kb: 16589 * 4 },
      { pid: 23687, name: 'head', rss_kb: 410 * 4 },
      { pid: 23686, name: 'sh', rss_kb: 400 * 4 },
    ]);
  });

  it('reads a global OOM with the older table columns and Mem-Info, and several reports in one buffer', () => {
    const reports = parseOomReports(['6,1,1,-;unrelated line', ...MEMCG, '6,1500,1,-;more noise', ...GLOBAL]);
    expect(reports.map((r) => r.seq)).toEqual([1140, 2011]);
    expect(reports[1]).toMatchObject({ pid: 5000, process_name: 'chrome', rss_kb: 1_600_000, constraint: 'none', mem_free_kb: 12800 * 4, mem_total_kb: 6291456 * 4, cgroup: '/a/b', trigger_pid: 5000 });
    expect(reports[1]!.tasks.map((t) => t.name)).toEqual(['other-tenant', 'chrome']);
  });

  it('takes nothing from a report cut short (no "Killed process" line) or from noise', () => {
    expect(parseOomReports(MEMCG.slice(0, -1))).toEqual([]);
    expect(parseOomReports(['garbage', '6,7,8,-;Killed process 1 (x) anon-rss:1kB, file-rss:1kB, shmem-rss:1kB'])).toEqual([]);
  });
});

describe('oomEvent', () => {
  it('reports a cgroup kill whole: the cgroup holds this browser\'s processes only', () => {
    const event = oomEvent(parseOomReports(MEMCG)[0]!);
    expect(event).toMatchObject({ category: 'system', type: 'system_oom_kill', source: { kind: 'local_process', event: 'oom_kill' } });
    expect(event.data).toMatchObject({ pid: 23688, process_name: 'tail', rss_kb: 66356, constraint: 'memcg', trigger_pid: 23688, trigger_process_name: 'tail' });
    expect((event.data as { top_tasks: unknown[] }).top_tasks).toHaveLength(3);
  });

  it('keeps other tenants\' tasks and the host\'s memory out of a global kill\'s event', () => {
    const event = oomEvent(parseOomReports(GLOBAL)[0]!);
    expect(event.data).toEqual({ pid: 5000, process_name: 'chrome', rss_kb: 1_600_000, constraint: 'none', trigger_pid: 5000, trigger_process_name: 'chrome' });
    expect(JSON.stringify(event)).not.toContain('other-tenant');
    const triggeredElsewhere = oomEvent({ ...parseOomReports(GLOBAL)[0]!, trigger_pid: 4000, trigger_process_name: 'other-tenant' });
    expect(JSON.stringify(triggeredElsewhere)).not.toContain('other-tenant');
    expect(triggeredElsewhere.data).not.toHaveProperty('trigger_pid');
  });
});

describe('locateOomCounter', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'oom-counter-'));
  const write = (name: string, text: string) => {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
    return path.join(dir, name);
  };

  it('finds cgroup v1\'s memory.oom_control by the memory controller\'s line', () => {
    const cgroup = write('v1', '5:devices:/x\n4:memory:/process_api/abc/browserplane/b1\n0::/\n');
    expect(locateOomCounter(cgroup, '/sys/fs/cgroup')).toEqual({ file: '/sys/fs/cgroup/memory/process_api/abc/browserplane/b1/memory.oom_control', cgroup: '/process_api/abc/browserplane/b1' });
  });

  it('finds cgroup v2\'s memory.events by the unified line, and nothing without either', () => {
    expect(locateOomCounter(write('v2', '0::/kubepods/pod1/c1\n'), '/sys/fs/cgroup')).toEqual({ file: '/sys/fs/cgroup/kubepods/pod1/c1/memory.events', cgroup: '/kubepods/pod1/c1' });
    expect(locateOomCounter(write('none', '5:devices:/x\n'))).toBeUndefined();
    expect(locateOomCounter(path.join(dir, 'missing'))).toBeUndefined();
  });
});
