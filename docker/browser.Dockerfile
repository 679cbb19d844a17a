# syntax=docker/dockerfile:1
# The browser image: the Browserplane agent (dist/agent/src/main.js) and Debian's
# Chromium, one browser per pod, started by the operator. The agent serves CDP, WebDriver
# BiDi, VNC, the file and computer APIs on one port (AGENT_PORT) and runs Chromium with
# the flags in agent/src/chromium.ts (no background networking, no QUIC, DevTools on
# 127.0.0.1 only, the sandbox on unless the kernel refuses it).
# Build from the repository root:  docker build -f docker/browser.Dockerfile -t browserplane/browser:0.1.0 .

ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: TypeScript -> dist/ ---
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# build-ca: the build machine's extra CA certificates when its egress inspects TLS
# (scripts/images.sh passes NODE_EXTRA_CA_CERTS); a secret, so no layer keeps it.
RUN --mount=type=secret,id=build-ca \
    if [ -s /run/secrets/build-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/build-ca; fi \
 && npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsconfig.images.json ./
COPY api ./api
COPY operator ./operator
COPY agent ./agent
COPY contract ./contract
COPY lib ./lib
RUN node_modules/.bin/tsc -p tsconfig.images.json

# --- runtime dependencies only ---
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=build-ca \
    if [ -s /run/secrets/build-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/build-ca; fi \
 && npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# --- runtime: Node 24 on Debian bookworm, Chromium from Debian's archive ---
FROM ${NODE_IMAGE}
# The Makefile's system-packages list (Chromium, Xvfb and the X tools for headful
# browsers, live view and the computer API, zstd for profile archives, util-linux and
# mount for chrome_policy, ffmpeg for replays), plus fonts, CA certificates and tini to reap Chromium's
# orphaned children (the agent is not a reaper).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      chromium zstd xvfb xdotool xclip x11-apps x11-xserver-utils unclutter-xfixes x11-utils \
      x11vnc util-linux mount bubblewrap ffmpeg \
      fonts-liberation fonts-noto-color-emoji ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
# The unprivileged user the agent and Chromium run as (AGENT_CHROMIUM_USER's default).
# Chromium's policy directory is made the user's, so chrome_policy works without root
# (agent/src/policy.ts writes the file straight into it when it is writable).
RUN groupadd --system --gid 10001 browserplane \
 && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/browserplane --shell /usr/sbin/nologin browserplane \
 && mkdir -p /etc/chromium/policies/managed \
 && chown 10001:10001 /etc/chromium/policies/managed
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
ENV NODE_ENV=production \
    CHROME_PATH=/usr/lib/chromium/chromium \
    AGENT_HOST=0.0.0.0 \
    AGENT_PORT=9222 \
    AGENT_CHROMIUM_USER=browserplane \
    LANG=C.UTF-8
USER 10001:10001
EXPOSE 9222
ENTRYPOINT ["/usr/bin/tini", "--", "node"]
# The flags of AGENT_NODE_FLAGS (api/src/runtime/agent-process.ts): a pod's agent idles
# in 15-20 MiB rather than 31-37.
CMD ["--single-threaded", "--optimize-for-size", "--jitless", "dist/agent/src/main.js"]
