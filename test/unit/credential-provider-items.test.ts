import { describe, expect, it } from 'vitest';
import { scimString, type ConnectItem } from '../../api/src/modules/credential-providers/connect-client.js';
import { domainFit, hostOf, itemSecrets, parseOtp, presentItem, splitPath } from '../../api/src/modules/credential-providers/items.js';

/** What Browserplane reads from 1Password Connect's items: no I/O, the shapes of Connect's documented JSON. */

const item = (fields: ConnectItem['fields'], urls: string[] = []): ConnectItem => ({
  id: 'item1',
  title: 'Example',
  vault: { id: 'vault1' },
  category: 'LOGIN',
  urls: urls.map((href) => ({ href })),
  fields,
});

describe('itemSecrets', () => {
  it('takes the USERNAME and PASSWORD purpose fields, and the OTP field’s otpauth secret with its options', () => {
    const secrets = itemSecrets(
      item([
        { id: 'notesPlain', type: 'STRING', purpose: 'NOTES', label: 'notesPlain', value: 'not a password' },
        { id: 'username', type: 'STRING', purpose: 'USERNAME', label: 'username', value: 'alice' },
        { id: 'password', type: 'CONCEALED', purpose: 'PASSWORD', label: 'password', value: 'pw' },
        { id: 'TOTP_x', type: 'OTP', label: 'one-time password', value: 'otpauth://totp/Ex:alice?secret=JBSWY3DPEHPK3PXP&algorithm=SHA256&digits=8&period=60', totp: '12345678' },
      ]),
    );
    expect(secrets).toEqual({
      values: { username: 'alice', password: 'pw' },
      totpSecret: 'JBSWY3DPEHPK3PXP',
      totpOptions: { algorithm: 'SHA256', digits: 8, periodSeconds: 60 },
    });
  });

  it('falls back to fields labelled username or email and a concealed field labelled password', () => {
    const secrets = itemSecrets(
      item([
        { id: 'a', type: 'EMAIL', label: 'Email', value: 'a@example.com' },
        { id: 'b', type: 'CONCEALED', label: 'Password', value: 'pw' },
      ]),
    );
    expect(secrets).toEqual({ values: { username: 'a@example.com', password: 'pw' }, totpSecret: null });
  });

  it('skips empty values and items without fields', () => {
    expect(itemSecrets(item([{ id: 'u', purpose: 'USERNAME', value: '' }]))).toEqual({ values: {}, totpSecret: null });
    expect(itemSecrets(item(undefined))).toEqual({ values: {}, totpSecret: null });
  });
});

describe('parseOtp', () => {
  it('reads a bare base32 secret with the RFC 6238 defaults, spaces ignored', () => {
    expect(parseOtp('jbsw y3dp ehpk 3pxp')).toEqual({ secret: 'JBSWY3DPEHPK3PXP', options: { algorithm: 'SHA1', digits: 6, periodSeconds: 30 } });
  });

  it('refuses what cannot make codes unattended: HOTP counters, bad secrets, unknown algorithms', () => {
    expect(parseOtp('otpauth://hotp/Ex:alice?secret=JBSWY3DPEHPK3PXP&counter=1')).toBeUndefined();
    expect(parseOtp('not-base32!')).toBeUndefined();
    expect(parseOtp('otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&algorithm=MD5')).toBeUndefined();
  });
});

describe('finding an item', () => {
  it('splits a path at every vault (by name or id) it starts with; titles may hold "/"', () => {
    const vaults = [
      { id: 'v1', name: 'Web' },
      { id: 'v2', name: 'Web/Team' },
    ];
    expect(splitPath('Web/Team/Site', vaults)).toEqual([
      { vault: vaults[0], item: 'Team/Site' },
      { vault: vaults[1], item: 'Site' },
    ]);
    expect(splitPath('v1/Site', vaults)).toEqual([{ vault: vaults[0], item: 'Site' }]);
    expect(splitPath('Web/', vaults)).toEqual([]);
    expect(splitPath('Elsewhere/Site', vaults)).toEqual([]);
  });

  it('ranks an item’s URLs against a domain: exact host 2, sub- or parent domain 1, else 0', () => {
    expect(domainFit(item([], ['https://example.com/login']), 'example.com')).toBe(2);
    expect(domainFit(item([], ['example.com']), 'example.com')).toBe(2);
    expect(domainFit(item([], ['https://login.example.com']), 'example.com')).toBe(1);
    expect(domainFit(item([], ['https://example.com']), 'login.example.com')).toBe(1);
    expect(domainFit(item([], ['https://notexample.com', 'ftp://']), 'example.com')).toBe(0);
    expect(domainFit(item([], []), 'example.com')).toBe(0);
  });

  it('reads hosts from URLs with or without a scheme', () => {
    expect(hostOf('Example.COM.')).toBe('example.com');
    expect(hostOf('http://127.0.0.1:8080/x')).toBe('127.0.0.1');
    expect(hostOf('  ')).toBeUndefined();
  });

  it('escapes quotes and backslashes in a SCIM filter string', () => {
    expect(scimString('Say "hi" \\ bye')).toBe('"Say \\"hi\\" \\\\ bye"');
  });
});

describe('presentItem', () => {
  it('shows the path VaultName/Title, and URLs only when there are some', () => {
    expect(presentItem({ id: 'i', title: 'T', vault: { id: 'v' }, urls: [{ href: 'https://a.example' }] }, 'Vault')).toEqual({
      id: 'i',
      path: 'Vault/T',
      title: 'T',
      vault_id: 'v',
      vault_name: 'Vault',
      urls: ['https://a.example'],
    });
    expect(presentItem({ id: 'i', title: 'T', vault: { id: 'v' } }, 'Vault')).not.toHaveProperty('urls');
  });
});
