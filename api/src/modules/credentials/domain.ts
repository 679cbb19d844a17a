import { domainToASCII } from 'node:url';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * The canonical form of a credential's domain: a bare host name, lower case, IDNs in
 * punycode (`bücher.example` → `xn--bcher-kva.example`), no trailing dot. Undefined when
 * the text is not a host name: a scheme, port, path, user info or wildcard is refused
 * rather than stripped, so a pasted URL is reported instead of half-understood.
 */
export function normaliseDomain(input: string): string | undefined {
  let host = input.trim().toLowerCase();
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host === '' || /[\s/\\:?#@*[\]%]/.test(host)) return undefined;
  const ascii = domainToASCII(host);
  if (ascii === '' || ascii.length > 253) return undefined;
  return ascii.split('.').every((label) => LABEL.test(label)) ? ascii : undefined;
}
