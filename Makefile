# Browserplane. `make run` starts the service; `make test` runs every test tier.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NPM ?= npm
VITEST := node_modules/.bin/vitest
DEPS_STAMP := node_modules/.deps-stamp

.PHONY: help run test build crds deps system-packages test-packages lint typecheck test-unit test-integration test-e2e test-k8s test-cluster test-faults soak k8s-binaries helm-binary fuzz reliability bench bench-peer clean images test-images

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

deps: $(DEPS_STAMP) ## Install npm dependencies (npm ci) when package-lock.json changed

$(DEPS_STAMP): package.json package-lock.json
	$(NPM) ci --no-audit --no-fund
	@touch $@

system-packages: ## Install the Debian packages the service uses when missing (chromium, zstd, Xvfb and X tools, ffmpeg, python3-venv)
	@scripts/ensure-debian-packages.sh git=git chromium=chromium zstd=zstd Xvfb=xvfb xdotool=xdotool xclip=xclip xwd=x11-apps xmodmap=x11-xserver-utils xrandr=x11-xserver-utils unclutter=unclutter-xfixes xprop=x11-utils x11vnc=x11vnc unshare=util-linux setpriv=util-linux prlimit=util-linux mount=mount bwrap=bubblewrap ffmpeg=ffmpeg
	@# Python apps build a venv with Debian's python3 (the sandbox sees /usr only); python3-venv has no command to look for.
	@/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || scripts/ensure-debian-packages.sh python3=python3 no-such-command-python3-venv=python3-venv

test-packages: ## Install the Debian packages the tests use when missing (zstd, chromium, Xvfb and X tools, ffmpeg, python3-venv)
	@scripts/ensure-debian-packages.sh git=git zstd=zstd chromium=chromium Xvfb=xvfb xdotool=xdotool xclip=xclip xwd=x11-apps xmodmap=x11-xserver-utils xrandr=x11-xserver-utils unclutter=unclutter-xfixes xprop=x11-utils x11vnc=x11vnc unshare=util-linux setpriv=util-linux prlimit=util-linux mount=mount bwrap=bubblewrap ffmpeg=ffmpeg
	@# Python apps build a venv with Debian's python3 (the sandbox sees /usr only); python3-venv has no command to look for.
	@/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || scripts/ensure-debian-packages.sh python3=python3 no-such-command-python3-venv=python3-venv

build: deps ## Compile TypeScript to dist/
	node_modules/.bin/tsc -p tsconfig.build.json

run: deps system-packages build ## Start the service in embedded mode (see --help for settings)
	node dist/api/src/main.js

lint: deps ## ESLint with type-aware rules (package boundaries included), then no import cycle and no product file over 400 lines
	node_modules/.bin/eslint --max-warnings 0 .
	node scripts/check-architecture.mjs

typecheck: deps ## Type-check everything, tests included
	node_modules/.bin/tsc -p tsconfig.json --noEmit

test-unit: deps ## Unit tier: no I/O, seconds
	$(VITEST) run --config test/vitest.unit.ts

test-integration: build test-packages ## Integration tier: the app in-process against a real Postgres
	$(VITEST) run --config test/vitest.integration.ts

test-e2e: build test-packages ## End-to-end tier: the built service started as a user starts it, driven by @onkernel/sdk
	@scripts/python-sdk.sh >/dev/null
	$(VITEST) run --config test/vitest.e2e.ts

k8s-binaries: ## Build etcd, kube-apiserver and kube-controller-manager from Go modules when missing (cold: ~12 min)
	scripts/k8s-test-binaries.sh >/dev/null

helm-binary: ## Build Helm v3 from Go modules when missing (cold: ~10 min on a busy 2-core machine)
	scripts/helm-binary.sh >/dev/null

test-k8s: build k8s-binaries helm-binary ## Kubernetes tier: CRDs, leases, the operator and the Helm chart against a real kube-apiserver + etcd
	$(VITEST) run --config test/vitest.k8s.ts

test-cluster: deps ## Cluster tier: a real node (containerd + runc, kubelet, kube-proxy) runs pods from local images, all inside namespaces of its own (root; cold: ~13 min of builds)
	scripts/cluster-test.sh

images: ## Build the api/operator, browser and app runner images (docker, else podman; cold ~6 min on 2 cores, warm ~10 s); prints refs and ctr-importable archives
	scripts/images.sh

test-images: deps images k8s-binaries ## Image tier: both images run as the chart's pods (podman + runc, read-only root, uid 10001) against Postgres and a kube-apiserver
	$(VITEST) run --config test/vitest.images.ts

test-faults: build test-packages ## Fault tier: the service SIGKILLed mid-operation, Postgres restarted under load, Chromium and agents killed under live clients (FAULT_ROUNDS, FAULT_SEED)
	$(VITEST) run --config test/vitest.faults.ts

soak: build system-packages ## Soak: session, pool and API loops for SOAK_MINUTES (default 3), failing on leaks of fds, processes, connections or memory
	SOAK_MINUTES=$${SOAK_MINUTES:-3} node dist/bench/soak.js

test: deps test-packages ## Everything CI runs: lint, type check, every test tier, the short soak, the short API fuzz, then the container tiers (images, cluster) once their caches are warm (scripts/container-tiers.sh)
	@rm -rf .test-results
	$(MAKE) --no-print-directory lint typecheck
	$(MAKE) --no-print-directory test-unit test-integration test-e2e test-k8s test-faults
	SOAK_MINUTES=3 $(MAKE) --no-print-directory soak
	FUZZ_RESULTS=.test-results/fuzz.counts $(MAKE) --no-print-directory fuzz
	scripts/container-tiers.sh
	@node scripts/test-summary.mjs

crds: build ## Regenerate crds/ (and the chart's copy) from the API's zod schemas (a unit test fails when they are stale)
	node dist/operator/src/k8s/write-crds.js
	cp crds/*.yaml charts/browserplane/crds/

fuzz: build ## Schemathesis against /openapi.json: no 5xx, every response as documented (FUZZ_EXAMPLES, FUZZ_RANDOM=1)
	scripts/fuzz.sh

reliability: build test-packages ## The long forms: random-seed fuzz (100 examples per operation), hostile input, both authorisation suites, three fault rounds, a one-hour soak
	FUZZ_EXAMPLES=100 FUZZ_RANDOM=1 scripts/fuzz.sh
	$(VITEST) run --config test/vitest.integration.ts test/integration/hostile-input.test.ts test/integration/authorization-matrix.test.ts test/integration/authorization-tokens.test.ts
	FAULT_ROUNDS=3 $(VITEST) run --config test/vitest.faults.ts
	SOAK_MINUTES=$${SOAK_MINUTES:-60} node dist/bench/soak.js

bench: build system-packages ## Benchmarks; print figures and ratios against a baseline from the same run
	node dist/bench/run.js
	node dist/bench/sessions.js
	node dist/bench/spares.js
	node dist/bench/memory.js
	node dist/bench/pools.js
	node dist/bench/load.js

bench-peer: build system-packages ## Peer benchmark: installs Browserless (pinned, cached in ~/.cache/browserplane/peers) and times connect → page loaded beside raw Chromium and Browserplane's create and acquire
	BENCH_PEER=browserless node dist/bench/peer.js

clean: ## Remove build output (keeps .data)
	rm -rf dist .test-results
