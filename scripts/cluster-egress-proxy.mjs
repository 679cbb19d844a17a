#!/usr/bin/env node
// The cluster tier's way out (scripts/cluster-test.sh): an HTTP forward proxy (the `proxy`
// package: absolute-form requests and CONNECT) listening on a unix socket, started in the
// host's network namespace before the tier's own is made. Inside, the tier's global setup
// bridges TCP <node ip>:3128 to this socket (test/cluster/support/egress.ts), so app build
// pods reach npm and PyPI as BROWSERPLANE_APP_HTTPS_PROXY tells them, and nothing of the
// host's network configuration changes.
//
//   node scripts/cluster-egress-proxy.mjs <socket path>
//
// Only names on ports 80 and 443: no IP literals and no localhost, so a pod cannot use it to
// reach the host's own services. Each request is logged on stdout as `<verb> <target> <allowed|refused>`.
import { createServer } from 'node:http';
import { URL } from 'node:url';
import { createProxy } from 'proxy';

const socket = process.argv[2];
if (!socket) {
  console.error('usage: cluster-egress-proxy.mjs <socket path>');
  process.exit(2);
}

/** host:port of a CONNECT or of an absolute-form request. */
function target(req) {
  if (req.method === 'CONNECT') {
    const at = req.url.lastIndexOf(':');
    return { host: req.url.slice(0, at), port: Number(req.url.slice(at + 1)) };
  }
  try {
    const url = new URL(req.url);
    return { host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) };
  } catch {
    return { host: '', port: 0 };
  }
}

const server = createProxy(createServer());
server.authenticate = (req) => {
  const { host, port } = target(req);
  const isName = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/i.test(host) && !/^[0-9.]+$/.test(host);
  const allowed = isName && host.toLowerCase() !== 'localhost' && !host.toLowerCase().endsWith('.localhost') && (port === 443 || port === 80);
  console.log(`${req.method} ${host}:${port} ${allowed ? 'allowed' : 'refused'}`);
  return allowed;
};
server.listen(socket, () => console.error(`cluster-egress-proxy: listening on ${socket}`));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
