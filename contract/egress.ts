import ipaddr from 'ipaddr.js';

/**
 * Which addresses a browser's traffic may reach (BROWSERPLANE_BLOCK_PRIVATE_NETWORKS). Off,
 * everything goes; on, only public unicast addresses, plus networks an operator allows on
 * purpose (BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS: an internal site, an in-cluster proxy).
 *
 * "Public" is ipaddr.js's `unicast` range after IPv4-mapped IPv6 is unwrapped: loopback
 * (127/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16
 * with the cloud metadata address, fe80::/10), CGNAT (100.64/10), unspecified (0/8, ::,
 * which Linux connects to loopback), multicast, broadcast, reserved and the IPv6
 * translation prefixes (NAT64, 6to4, Teredo) are all something else. The same rule as the
 * proxy check's (api/src/modules/proxies/probe.ts isPublicAddress).
 */

type Network = [ipaddr.IPv4 | ipaddr.IPv6, number];

export interface EgressRules {
  blockPrivate: boolean;
  /** Networks reachable even when blockPrivate is on. */
  allowed: Network[];
}

export const OPEN_EGRESS: EgressRules = { blockPrivate: false, allowed: [] };

export class EgressConfigError extends Error {}

/**
 * Comma- or space-separated addresses and CIDRs (`10.1.2.3`, `10.0.0.0/8`, `fd00::/8`).
 * Throws EgressConfigError naming the first entry that is neither.
 */
export function parseAllowedNetworks(text: string | undefined): Network[] {
  const networks: Network[] = [];
  for (const entry of (text ?? '').split(/[\s,]+/).filter(Boolean)) {
    try {
      if (entry.includes('/')) {
        const [address, bits] = ipaddr.parseCIDR(entry);
        networks.push(address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96 ? [(address as ipaddr.IPv6).toIPv4Address(), bits - 96] : [address, bits]);
      } else {
        const address = ipaddr.process(entry);
        networks.push([address, address.kind() === 'ipv4' ? 32 : 128]);
      }
    } catch {
      throw new EgressConfigError(`${JSON.stringify(entry)} is not an IP address or CIDR`);
    }
  }
  return networks;
}

/** True when `address` (an IP literal, IPv6 with or without brackets) must not be reached. */
export function isRefusedAddress(rules: EgressRules, address: string): boolean {
  if (!rules.blockPrivate) return false;
  const text = address.replace(/^\[|\]$/g, '');
  // Not an address (a name nobody resolved): refused, since nothing says where it goes.
  if (!ipaddr.isValid(text)) return true;
  const parsed = ipaddr.process(text);
  if (rules.allowed.some(([network, bits]) => network.kind() === parsed.kind() && parsed.match(network, bits))) return false;
  // IPv4-compatible IPv6 (::a.b.c.d, deprecated by RFC 4291): ipaddr.js calls ::7f00:1
  // unicast, and Chromium writes [::127.0.0.1] that way.
  if (parsed.kind() === 'ipv6' && parsed.match(IPV4_COMPATIBLE, 96)) return true;
  return parsed.range() !== 'unicast';
}

const IPV4_COMPATIBLE = ipaddr.parse('::');

/** The agent's side of the setting: AGENT_BLOCK_PRIVATE_NETWORKS=1 and AGENT_ALLOWED_NETWORKS. */
export function parseEgressEnv(env: NodeJS.ProcessEnv): EgressRules {
  const flag = env.AGENT_BLOCK_PRIVATE_NETWORKS ?? '';
  if (!['', '0', '1'].includes(flag)) throw new EgressConfigError('AGENT_BLOCK_PRIVATE_NETWORKS must be 0 or 1');
  return { blockPrivate: flag === '1', allowed: parseAllowedNetworks(env.AGENT_ALLOWED_NETWORKS) };
}

/** The environment that hands `rules`' source settings to an agent (see parseEgressEnv). */
export function egressEnv(settings: { blockPrivateNetworks: boolean; allowedNetworks?: string | undefined }): Record<string, string> {
  if (!settings.blockPrivateNetworks) return {};
  return { AGENT_BLOCK_PRIVATE_NETWORKS: '1', ...(settings.allowedNetworks ? { AGENT_ALLOWED_NETWORKS: settings.allowedNetworks } : {}) };
}

/**
 * Chrome policies that would take the browser's traffic around the forwarder: a proxy of
 * their own, or WebRTC IP handling (which overrides --webrtc-ip-handling-policy). The API
 * refuses them already (api/src/modules/browsers/policy.ts); with private networks
 * blocked, the agent drops them too, in case a spec carries one anyway.
 */
const ROUTING_POLICIES = ['ProxySettings', 'ProxyMode', 'ProxyServer', 'ProxyServerMode', 'ProxyPacUrl', 'ProxyBypassList', 'WebRtcIPHandling', 'WebRtcIPHandlingUrl'];

export function withoutRoutingPolicies(rules: EgressRules, policy: Record<string, unknown>): { policy: Record<string, unknown>; dropped: string[] } {
  const dropped = rules.blockPrivate ? Object.keys(policy).filter((name) => ROUTING_POLICIES.includes(name)) : [];
  if (dropped.length === 0) return { policy, dropped };
  return { policy: Object.fromEntries(Object.entries(policy).filter(([name]) => !dropped.includes(name))), dropped };
}
