# syntax=docker/dockerfile:1
# The runner image: the pods of the app runtime in Kubernetes mode (docs/apps.md,
# "Kubernetes mode"), a build Job per deployment and a run Job per invocation, both
# started by the API. It is the api image (Node, dist/, the runtime node_modules, uid
# 10001) plus what builds and apps need from Debian: python3 and python3-venv for Python
# apps, git for deployments from a repository, CA certificates for npm, PyPI and git.
# The container's args are `build <deploymentId>` or
# `invoke <invocationId> <appName> <actionName>`; the pod program reaches the API at
# BROWSERPLANE_INTERNAL_URL with the Job's token (BROWSERPLANE_APP_JOB_TOKEN).
# Build from the repository root after the api image (scripts/images.sh does both):
#   docker build -f docker/runner.Dockerfile --build-arg API_IMAGE=browserplane/api:0.1.0 -t browserplane/runner:0.1.0 .

ARG API_IMAGE=browserplane/api:0.1.0
FROM ${API_IMAGE}
USER root
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv --help >/dev/null && git --version
# The pod is the sandbox (sandbox.ts runs code directly: no bubblewrap, no uid switch).
# The Job mounts emptyDirs on /work (dataDir; HOME=/work/home) and /tmp on a read-only root.
ENV BROWSERPLANE_APP_SANDBOX=pod \
    BROWSERPLANE_DATA_DIR=/work \
    HOME=/work/home
WORKDIR /app
USER 10001:10001
ENTRYPOINT ["node", "dist/api/src/modules/apps/pod/job-main.js"]
CMD []
