#!/usr/bin/env bash
# Smoke test for the Kubernetes test control plane: starts etcd and kube-apiserver (built by
# scripts/k8s-test-binaries.sh) on loopback with envtest-style flags, waits for /readyz,
# checks that the version is stamped, that RBAC is enforced, and that a namespace and a
# ConfigMap can be created and read back; then stops both and removes every temp file.
# Usage: scripts/k8s-smoke.sh [bin-dir]   (default: build/find via k8s-test-binaries.sh)
# Needs curl and node (node for free ports, the service-account key and JSON checks).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$("$root/scripts/k8s-test-binaries.sh" | tail -n1)}
for b in etcd kube-apiserver; do
  [[ -x "$bin/$b" ]] || { echo "k8s-smoke: $bin/$b missing" >&2; exit 1; }
done

work=$(mktemp -d /tmp/k8s-smoke.XXXXXX)
pids=()
stop() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 1 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.25; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  # Stop only the processes this script started, one at a time and apiserver first:
  # kube-apiserver's graceful shutdown never finishes once etcd is gone (seen: it hung
  # for 10 minutes), so etcd must outlive it, and a SIGKILL backs up the SIGTERM.
  for (( i=${#pids[@]}-1; i>=0; i-- )); do stop "${pids[i]}"; done
  if (( rc != 0 )); then
    for log in "$work"/*.log; do
      [[ -f "$log" ]] && { echo "---- last lines of $(basename "$log")" >&2; tail -n 30 "$log" >&2; }
    done
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Free loopback ports: bind port 0, read it, release it. A race with another process is
# possible but unlikely; a failed start shows up in the logs below.
read -r etcd_client etcd_peer api_port < <(node -e '
  const net = require("node:net");
  Promise.all([0, 1, 2].map(() => new Promise((ok) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => ok(p)); });
  }))).then((ports) => console.log(ports.join(" ")));')

t0=$(date +%s%N)
elapsed() { local ms=$(( ($(date +%s%N) - t0) / 1000000 )); printf '%d.%01ds' $(( ms / 1000 )) $(( ms % 1000 / 100 )); }

# etcd: single member, temp data dir, no fsync (tests do not need durability, and fsync on
# a busy shared disk is what makes etcd slow), 5s progress notify as Kubernetes expects
# for consistent reads from the watch cache.
"$bin/etcd" \
  --name=smoke \
  --data-dir="$work/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_client" \
  --advertise-client-urls="http://127.0.0.1:$etcd_client" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-cluster="smoke=http://127.0.0.1:$etcd_peer" \
  --unsafe-no-fsync \
  --watch-progress-notify-interval=5s \
  --log-level=warn \
  >"$work/etcd.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 120); do
  curl -fsS --max-time 5 "http://127.0.0.1:$etcd_client/health" 2>/dev/null | grep -q '"health":"true"' && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "k8s-smoke: etcd exited" >&2; exit 1; }
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$etcd_client/health" | grep -q '"health":"true"' \
  || { echo "k8s-smoke: etcd not healthy" >&2; exit 1; }
echo "etcd healthy on 127.0.0.1:$etcd_client after $(elapsed)"

# Static tokens: an admin in system:masters, and a user with no bindings to prove that
# RBAC is really deciding.
admin_token=$(node -e 'console.log(require("node:crypto").randomBytes(24).toString("hex"))')
nobody_token=$(node -e 'console.log(require("node:crypto").randomBytes(24).toString("hex"))')
printf '%s,smoke-admin,uid-admin,"system:masters"\n%s,smoke-nobody,uid-nobody\n' \
  "$admin_token" "$nobody_token" >"$work/tokens.csv"
# Service-account signing key (required since 1.20); plain RSA PEM, no certificate.
node -e '
  const { generateKeyPairSync } = require("node:crypto");
  const fs = require("node:fs");
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  fs.writeFileSync(process.argv[1], privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
  fs.writeFileSync(process.argv[2], publicKey.export({ type: "spki", format: "pem" }));
' "$work/sa.key" "$work/sa.pub"

# envtest's flag set (controller-runtime pkg/internal/testing/controlplane), with a token
# file instead of client certificates. --advertise-address pins the "kubernetes" Service
# endpoint to loopback instead of whatever interface has the default route.
"$bin/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$etcd_client" \
  --cert-dir="$work/certs" \
  --secure-port="$api_port" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --service-cluster-ip-range=10.0.0.0/24 \
  --allow-privileged=true \
  --disable-admission-plugins=ServiceAccount \
  --authorization-mode=RBAC \
  --token-auth-file="$work/tokens.csv" \
  --service-account-issuer="https://127.0.0.1:$api_port/" \
  --service-account-key-file="$work/sa.pub" \
  --service-account-signing-key-file="$work/sa.key" \
  >"$work/kube-apiserver.log" 2>&1 &
pids+=($!)

api="https://127.0.0.1:$api_port"
# The apiserver writes a self-signed serving certificate (and its CA) into --cert-dir;
# trusting that file checks TLS for real instead of using -k.
kcurl() { curl -sS --max-time 10 --cacert "$work/certs/apiserver.crt" -H "Authorization: Bearer $admin_token" "$@"; }

ready=""
for _ in $(seq 1 240); do
  kill -0 "${pids[1]}" 2>/dev/null || { echo "k8s-smoke: kube-apiserver exited" >&2; exit 1; }
  if [[ -f "$work/certs/apiserver.crt" ]] && [[ "$(kcurl "$api/readyz" 2>/dev/null || true)" == ok ]]; then
    ready=1; break
  fi
  sleep 0.5
done
[[ -n "$ready" ]] || { echo "k8s-smoke: /readyz not ok after 120s" >&2; kcurl "$api/readyz?verbose" >&2 || true; exit 1; }
echo "kube-apiserver ready on $api after $(elapsed)"

json() { node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>{const o=JSON.parse(s);console.log(eval(process.argv[1]))})' "$1"; }

echo "version: $(kcurl "$api/version" | json 'o.gitVersion + " (go " + o.goVersion + ", built " + o.buildDate + ")"')"

code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --cacert "$work/certs/apiserver.crt" \
  -H "Authorization: Bearer $nobody_token" "$api/api/v1/namespaces")
[[ "$code" == 403 ]] || { echo "k8s-smoke: unbound user got $code listing namespaces, want 403" >&2; exit 1; }
echo "RBAC: user without bindings gets 403 listing namespaces"

ns="smoke-$(date +%s)"
kcurl -f -X POST -H 'Content-Type: application/json' "$api/api/v1/namespaces" \
  -d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
echo "created namespace $ns"
kcurl -f -X POST -H 'Content-Type: application/json' "$api/api/v1/namespaces/$ns/configmaps" \
  -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"smoke"},"data":{"hello":"world"}}' >/dev/null
got=$(kcurl -f "$api/api/v1/namespaces/$ns/configmaps/smoke" | json 'o.data.hello + " rv=" + o.metadata.resourceVersion')
[[ "$got" == world\ rv=* ]] || { echo "k8s-smoke: read back '$got'" >&2; exit 1; }
echo "created and read back configmap $ns/smoke: hello=$got"
echo "k8s-smoke: OK in $(elapsed)"
