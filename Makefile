# Set-up commands for a fresh machine: each target installs what is missing first.
.PHONY: node install run test typecheck lint chromium nginx iproute2 pebble caddy postgresql radosgw npm-fixtures bench bench-noisy clean

BIN := node_modules/.bin

# Berth runs on Node 24 (22.14 and later work too: `engines` in package.json). On a machine whose Node
# is older, every target runs Node 24 from the npm registry's build of it, unpacked once into .tools/ and
# put first on PATH for npm, tsc, the tests and the server; `berth` finds it there too (cli/berth.js).
NODE24_VERSION := 24.21.0
NODE24_PLATFORM := $(subst Linux,linux,$(subst Darwin,darwin,$(shell uname -s)))-$(subst x86_64,x64,$(subst aarch64,arm64,$(shell uname -m)))
NODE24 := .tools/node-$(NODE24_VERSION)
SYSTEM_NODE := $(shell node --version 2>/dev/null)
SYSTEM_NODE_FITS := $(shell node -e 'const [a, b] = process.versions.node.split(".").map(Number); console.log(a >= 24 || (a === 22 && b >= 14))' 2>/dev/null)
ifneq ($(SYSTEM_NODE_FITS),true)
NODE_RUNTIME := $(NODE24)/bin/node
export PATH := $(CURDIR)/$(NODE24)/bin:$(PATH)
# Where node-gyp finds the headers, should a native module have no prebuilt binary for this platform.
export npm_config_nodedir := $(CURDIR)/$(NODE24)
endif
CHROMIUM := /usr/bin/chromium
NGINX := /usr/sbin/nginx
STAMP := node_modules/.berth-installed

$(NODE24)/bin/node:
	@echo "make: fetching Node $(NODE24_VERSION) from the npm registry (node-$(NODE24_PLATFORM)) into $(NODE24)"
	rm -rf $(NODE24) $(NODE24).tmp && mkdir -p $(NODE24).tmp
	cd $(NODE24).tmp && npm pack --silent node-$(NODE24_PLATFORM)@$(NODE24_VERSION) && tar xzf node-$(NODE24_PLATFORM)-$(NODE24_VERSION).tgz
	mv $(NODE24).tmp/package $(NODE24) && rm -rf $(NODE24).tmp

node: $(NODE_RUNTIME)
ifneq ($(SYSTEM_NODE_FITS),true)
	@echo "make: this machine's Node is $(or $(SYSTEM_NODE),missing); Berth runs on Node $(NODE24_VERSION) from $(NODE24)"
endif

# Installs exactly what package-lock.json pins (`npm ci`). The lockfile holds every platform's optional
# `@deno/*` binary (test/lockfile.test.ts checks it), so it installs on any of them; better-sqlite3
# carries its Node-API binaries for the common platforms inside its package and compiles SQLite (a
# minute or two, while npm prints nothing) only on another.
$(STAMP): package.json package-lock.json | node
	@echo "make: installing Berth's dependencies with npm ci"
	npm ci --no-audit --no-fund
	@touch $@

install: node $(STAMP)

run: install
	node control-plane/cli/berth.js serve

# tsc checks the Node side; Deno checks the code that runs inside Deno (workers and site database
# processes) with Deno's own types.
typecheck: install
	$(BIN)/tsc --noEmit -p tsconfig.json
	$(BIN)/tsc --noEmit -p control-plane/dashboard/tsconfig.json
	NO_COLOR=1 $(BIN)/deno check --no-config --quiet --unstable-bundle deno-shim/*.ts control-plane/site-databases/deno/*.ts \
	  control-plane/builds/deno/*.ts \
	  test/fixtures/functions/*.ts

# The formatter and the linter (Biome, configured in .biome.jsonc): a change that is not formatted or
# breaks a rule (floating promises, the import boundaries between subsystems) fails `make test`.
lint: install
	npm run --silent format:check
	npm run --silent lint

# The dashboard's browser tests drive Debian's Chromium: installed when missing (as root, as CI runs),
# and a failure stops the tests loudly rather than skipping them.
$(CHROMIUM):
	@echo "make: installing Debian's chromium for the browser tests (apt-get; a minute or two)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } || \
	  { echo "make: could not install Debian's chromium package; the browser tests need $(CHROMIUM) (install it as root: apt-get install chromium)" >&2; exit 1; }
	@test -x $(CHROMIUM) || { echo "make: the chromium package is installed but $(CHROMIUM) is missing" >&2; exit 1; }

chromium: $(CHROMIUM)

# A test runs Berth behind Debian's nginx terminating TLS (with a certificate openssl makes), as docs/deploy.md sets it up.
$(NGINX):
	@echo "make: installing Debian's nginx for the reverse-proxy test (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y nginx openssl || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nginx openssl; } || \
	  { echo "make: could not install Debian's nginx package; the proxy test needs $(NGINX) (install it as root: apt-get install nginx)" >&2; exit 1; }
	@test -x $(NGINX) || { echo "make: the nginx package is installed but $(NGINX) is missing" >&2; exit 1; }

nginx: $(NGINX)

# Certificates are tested for real: Debian's pebble (Let's Encrypt's test CA) with its test DNS server
# (pebble-challtestsrv, which the custom-domain tests answer TXT records with too), and Debian's caddy
# for on-demand TLS in front of Berth.
PEBBLE := /usr/bin/pebble
$(PEBBLE):
	@echo "make: installing Debian's pebble for the certificate and domain tests (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y pebble openssl || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y pebble openssl; } || \
	  { echo "make: could not install Debian's pebble package; the certificate tests need $(PEBBLE) (install it as root: apt-get install pebble)" >&2; exit 1; }
	@test -x $(PEBBLE) || { echo "make: the pebble package is installed but $(PEBBLE) is missing" >&2; exit 1; }

pebble: $(PEBBLE)

CADDY := /usr/bin/caddy
$(CADDY):
	@echo "make: installing Debian's caddy for the on-demand TLS test (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y caddy || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y caddy; } || \
	  { echo "make: could not install Debian's caddy package; the on-demand TLS test needs $(CADDY) (install it as root: apt-get install caddy)" >&2; exit 1; }
	@test -x $(CADDY) || { echo "make: the caddy package is installed but $(CADDY) is missing" >&2; exit 1; }

caddy: $(CADDY)

# The egress tests put a server on a public-looking address in a network namespace of their own (ip netns).
IP := /usr/sbin/ip
$(IP):
	@echo "make: installing Debian's iproute2 for the egress tests (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y iproute2 || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y iproute2; } || \
	  { echo "make: could not install Debian's iproute2 package; the egress tests need $(IP) (install it as root: apt-get install iproute2)" >&2; exit 1; }

iproute2: $(IP)

# The suite runs Berth on PostgreSQL too: test/run-suite.ts starts a throwaway cluster from Debian's
# server binaries (initdb into a temp dir as the postgres user), unless BERTH_TEST_DATABASE_URL names one.
postgresql:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
	  echo "make: installing Debian's postgresql for the PostgreSQL pass of the suite (apt-get)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; } || \
	  { echo "make: could not install Debian's postgresql package; the suite needs its server (install it as root: apt-get install postgresql)" >&2; exit 1; }; }

# The suite keeps blobs in an S3-compatible object store too: test/run-suite.ts starts Ceph's radosgw on
# a one-host Ceph cluster (a monitor and an OSD keeping objects in memory) in a temp dir.
RADOSGW := /usr/bin/radosgw
CEPH_PACKAGES := ceph-mon ceph-osd ceph-base radosgw
$(RADOSGW):
	@echo "make: installing Ceph's radosgw from Debian for the object-store pass of the suite (apt-get; about 60 MB)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(CEPH_PACKAGES) || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(CEPH_PACKAGES); } || \
	  { echo "make: could not install Debian's Ceph packages; the suite needs radosgw (install them as root: apt-get install $(CEPH_PACKAGES))" >&2; exit 1; }
	@test -x $(RADOSGW) || { echo "make: the radosgw package is installed but $(RADOSGW) is missing" >&2; exit 1; }

radosgw: $(RADOSGW)

# The build tests publish the real hono and zod into their own npm registry (Verdaccio, started by
# test/helpers/npm-registry.ts, which names the same versions): packed once from the npm registry into
# .tools/npm-fixtures/, never committed.
NPM_FIXTURES := .tools/npm-fixtures
NPM_FIXTURE_PACKAGES := hono@4.13.19 zod@4.6.7
npm-fixtures: | node
	@for spec in $(NPM_FIXTURE_PACKAGES); do \
	  file=$(NPM_FIXTURES)/$$(echo $$spec | tr @ -).tgz; test -f $$file && continue; \
	  echo "make: fetching $$spec from the npm registry into $(NPM_FIXTURES)"; \
	  rm -rf $(NPM_FIXTURES).tmp && mkdir -p $(NPM_FIXTURES).tmp $(NPM_FIXTURES) && \
	  npm pack --silent --pack-destination $(NPM_FIXTURES).tmp $$spec >/dev/null && \
	  mv $(NPM_FIXTURES).tmp/*.tgz $$file && rm -rf $(NPM_FIXTURES).tmp || exit 1; \
	done

# The whole suite twice: on the embedded defaults (SQLite and the data dir), then on the shared
# backends (PostgreSQL and the object store).
test: typecheck lint chromium nginx iproute2 pebble caddy postgresql radosgw npm-fixtures
	node --import tsx test/run-suite.ts

# The cluster costs and the deployments' times are measured even when the main run reported failed
# requests; make still fails then.
bench: install npm-fixtures
	node --import tsx bench/main.ts; main=$$?; node --import tsx bench/cluster.ts && node --import tsx bench/deployments.ts && node --import tsx bench/replication.ts && node --import tsx bench/analytics.ts && node --import tsx bench/builds.ts && node --import tsx bench/routing.ts && node --import tsx bench/branches.ts && exit $$main

bench-noisy: install
	node --import tsx bench/noisy-neighbour.ts

clean:
	rm -rf node_modules .berth .tools
