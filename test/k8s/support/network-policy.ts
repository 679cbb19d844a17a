/**
 * What a NetworkPolicy lets through, judged from the object alone: which pods its selectors
 * match and which IPv4 addresses its ipBlocks admit. No CNI runs in the test cluster (no
 * kubelet networking at all), so the chart's policies are checked by reading them against
 * the labels real pods carry; a CNI's enforcement is out of reach here.
 */

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

export interface PolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}

export interface PolicyPort {
  port?: number | string;
  protocol?: string;
}

export interface PolicyRule {
  from?: PolicyPeer[];
  to?: PolicyPeer[];
  ports?: PolicyPort[];
}

export interface NetworkPolicySpec {
  podSelector: LabelSelector;
  policyTypes?: string[];
  ingress?: PolicyRule[];
  egress?: PolicyRule[];
}

/** Whether the selector matches the labels; an empty selector matches everything, as in Kubernetes. */
export function selects(selector: LabelSelector, labels: Record<string, string>): boolean {
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  const byExpressions = (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    switch (operator) {
      case 'In':
        return key in labels && values.includes(labels[key]!);
      case 'NotIn':
        return !(key in labels) || !values.includes(labels[key]!);
      case 'Exists':
        return key in labels;
      case 'DoesNotExist':
        return !(key in labels);
      default:
        throw new Error(`unknown selector operator ${operator}`);
    }
  });
  return byLabels && byExpressions;
}

/** The names of the candidates (name → pod labels) that a same-namespace pod peer matches. */
export function peersMatching(peers: PolicyPeer[], candidates: Record<string, Record<string, string>>): string[] {
  return Object.entries(candidates)
    .filter(([, labels]) => peers.some((peer) => !peer.namespaceSelector && !peer.ipBlock && peer.podSelector && selects(peer.podSelector, labels)))
    .map(([name]) => name)
    .sort();
}

function ipv4(address: string): number {
  const parts = address.split('.').map(Number);
  if (parts.length !== 4 || parts.some((part) => !Number.isInteger(part) || part < 0 || part > 255)) throw new Error(`not an IPv4 address: ${address}`);
  return parts.reduce((value, part) => value * 256 + part, 0);
}

export function cidrContains(cidr: string, address: string): boolean {
  const [base = '', bits = '32'] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  const start = Math.floor(ipv4(base) / size) * size;
  const ip = ipv4(address);
  return ip >= start && ip < start + size;
}

/**
 * Whether some egress rule admits a TCP connection to address:port that is not a pod's
 * (a rule without `to` admits every address; pod and namespace peers are not addresses).
 */
export function egressAdmits(rules: PolicyRule[], address: string, port: number): boolean {
  return rules.some((rule) => {
    const portOk = !rule.ports?.length || rule.ports.some((p) => (p.protocol ?? 'TCP') === 'TCP' && (p.port === undefined || p.port === port));
    const peerOk =
      !rule.to?.length ||
      rule.to.some(({ ipBlock }) => ipBlock && cidrContains(ipBlock.cidr, address) && !(ipBlock.except ?? []).some((except) => cidrContains(except, address)));
    return portOk && peerOk;
  });
}
