import { describe, expect, it } from 'vitest';
import { isBypassed, parseBypassRule } from '../../agent/src/proxy.js';

/** The forwarder reads a proxy's bypass_hosts as Chromium reads --proxy-bypass-list. */
const bypasses = (entries: string[], host: string, port = 80) =>
  isBypassed(
    entries.map((entry) => parseBypassRule(entry)!),
    host,
    port,
  );

describe('proxy bypass rules', () => {
  it('matches a host name exactly, ignoring case and a trailing dot, and not its subdomains', () => {
    expect(bypasses(['Example.com'], 'example.com')).toBe(true);
    expect(bypasses(['example.com.'], 'EXAMPLE.com')).toBe(true);
    expect(bypasses(['example.com'], 'www.example.com')).toBe(false);
    expect(bypasses(['example.com'], 'notexample.com')).toBe(false);
  });

  it('reads *.domain and .domain as subdomains only, and other wildcards as globs', () => {
    for (const rule of ['*.example.com', '.example.com']) {
      expect(bypasses([rule], 'a.b.example.com')).toBe(true);
      expect(bypasses([rule], 'example.com')).toBe(false);
      expect(bypasses([rule], 'badexample.com')).toBe(false);
    }
    expect(bypasses(['*example.com'], 'badexample.com')).toBe(true);
    expect(bypasses(['internal.*'], 'internal.corp')).toBe(true);
  });

  it('restricts a rule with a port to that port, for names and IP literals (IPv6 bracketed or not)', () => {
    expect(bypasses(['example.com:8080'], 'example.com', 8080)).toBe(true);
    expect(bypasses(['example.com:8080'], 'example.com', 443)).toBe(false);
    expect(bypasses(['10.0.0.1'], '10.0.0.1', 443)).toBe(true);
    expect(bypasses(['[::1]:8443'], '[::1]', 8443)).toBe(true);
    expect(bypasses(['[::1]:8443'], '::1', 80)).toBe(false);
    expect(bypasses(['fe80::1'], '[fe80::1]', 80)).toBe(true);
  });

  it('ignores entries it cannot honour rather than bypassing everything', () => {
    expect(parseBypassRule('')).toBeUndefined();
    expect(parseBypassRule('<local>')).toBeUndefined();
    expect(parseBypassRule('10.0.0.0/8')).toBeUndefined();
    expect(bypasses(['a.test'], 'b.test')).toBe(false);
  });
});
