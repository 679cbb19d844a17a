import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../api/src/config.js';
import { egressEnv, isRefusedAddress, parseAllowedNetworks, parseEgressEnv, withoutRoutingPolicies, type EgressRules } from '../../contract/egress.js';

const blocking: EgressRules = { blockPrivate: true, allowed: [] };

describe('which addresses a browser may reach with private networks blocked', () => {
  it('refuses loopback, private, link-local, CGNAT, unspecified and their IPv4-mapped forms', () => {
    const refused = [
      '127.0.0.1', '127.255.255.254', '::1', '[::1]', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', 'fc00::1', 'fd12:3456::1',
      '169.254.169.254', 'fe80::1', '100.64.0.1', '100.127.255.255', '0.0.0.0', '0.1.2.3', '::', '::ffff:127.0.0.1', '::ffff:7f00:1',
      '[::ffff:169.254.169.254]', '::ffff:10.0.0.1', '224.0.0.1', '255.255.255.255', '64:ff9b::7f00:1', '::7f00:1', '[::7f00:1]', '::a00:1', 'not-an-address',
    ];
    expect(refused.filter((address) => !isRefusedAddress(blocking, address))).toEqual([]);
  });

  it('lets public addresses through, and everything when the block is off', () => {
    const allowed = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'];
    expect(allowed.filter((address) => isRefusedAddress(blocking, address))).toEqual([]);
    expect(isRefusedAddress({ blockPrivate: false, allowed: [] }, '127.0.0.1')).toBe(false);
  });

  it('lets allow-listed addresses and networks through, IPv4-mapped or not, and nothing next to them', () => {
    const rules: EgressRules = { blockPrivate: true, allowed: parseAllowedNetworks('127.0.0.2, 10.20.0.0/16 fd00::/8,::ffff:192.168.5.0/120') };
    expect(['127.0.0.2', '::ffff:127.0.0.2', '10.20.3.4', 'fd00::5', '192.168.5.9'].filter((a) => isRefusedAddress(rules, a))).toEqual([]);
    expect(['127.0.0.1', '127.0.0.3', '10.21.0.1', 'fc00::1', '192.168.6.1'].filter((a) => !isRefusedAddress(rules, a))).toEqual([]);
  });

  it('refuses an allow list entry that is neither an address nor a CIDR, naming it', () => {
    expect(() => parseAllowedNetworks('10.0.0.0/8, intranet.example')).toThrow('"intranet.example" is not an IP address or CIDR');
    expect(() => parseAllowedNetworks('10.0.0.0/33')).toThrow('"10.0.0.0/33"');
  });

  it('reaches the agent through its environment, and the service checks its settings', () => {
    expect(egressEnv({ blockPrivateNetworks: false, allowedNetworks: '10.0.0.0/8' })).toEqual({});
    const env = egressEnv({ blockPrivateNetworks: true, allowedNetworks: '10.0.0.0/8' });
    expect(env).toEqual({ AGENT_BLOCK_PRIVATE_NETWORKS: '1', AGENT_ALLOWED_NETWORKS: '10.0.0.0/8' });
    expect(isRefusedAddress(parseEgressEnv(env), '10.9.9.9')).toBe(false);
    expect(parseEgressEnv({}).blockPrivate).toBe(false);
    expect(() => parseEgressEnv({ AGENT_BLOCK_PRIVATE_NETWORKS: 'yes' })).toThrow('AGENT_BLOCK_PRIVATE_NETWORKS');

    expect(parseConfig({}).BROWSERPLANE_BLOCK_PRIVATE_NETWORKS).toBe(false);
    const on = parseConfig({ BROWSERPLANE_BLOCK_PRIVATE_NETWORKS: 'true', BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS: '10.0.0.0/8' });
    expect(on.BROWSERPLANE_BLOCK_PRIVATE_NETWORKS).toBe(true);
    expect(() => parseConfig({ BROWSERPLANE_BLOCK_PRIVATE_NETWORKS: '1' })).toThrow('BROWSERPLANE_BLOCK_PRIVATE_NETWORKS');
    expect(() => parseConfig({ BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS: 'intranet' })).toThrow('BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS');
  });

  it('drops chrome policies that would route around the forwarder, only when blocking', () => {
    const policy = { ProxyMode: 'direct', WebRtcIPHandling: 'default', HomepageLocation: 'https://example.test/' };
    expect(withoutRoutingPolicies(blocking, policy)).toEqual({ policy: { HomepageLocation: 'https://example.test/' }, dropped: ['ProxyMode', 'WebRtcIPHandling'] });
    expect(withoutRoutingPolicies({ blockPrivate: false, allowed: [] }, policy)).toEqual({ policy, dropped: [] });
  });
});
