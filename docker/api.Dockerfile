# syntax=docker/dockerfile:1
# The api/operator image: one image, two entry points.
#   API:      node dist/api/src/main.js       (the default command)
#   Operator: node dist/operator/src/main.js  (the chart sets it as args)
# No Chromium here: browsers run in pods of the browser image (browser.Dockerfile).
# Build from the repository root:  docker build -f docker/api.Dockerfile -t browserplane/api:0.1.0 .

ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: TypeScript -> dist/ with the dev dependencies (tsc) ---
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

# --- runtime ---
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    # Listen on every interface of the pod; config.ts defaults to loopback for local use.
    HOST=0.0.0.0 \
    PORT=8080 \
    BROWSERPLANE_DATA_DIR=/data
# The same uid as the browser image's user, so the chart's securityContext fits both.
RUN groupadd --system --gid 10001 browserplane \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --shell /usr/sbin/nologin browserplane \
 && mkdir -p /data && chown 10001:10001 /data
WORKDIR /app
# packageRoot() walks up from dist/ to package.json; migrations are read from api/migrations.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json package-lock.json ./
COPY api/migrations ./api/migrations
# Numeric, so runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["node"]
CMD ["dist/api/src/main.js"]
