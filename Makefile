# Set-up commands for a fresh machine: each target installs what is missing first.
.PHONY: install run test typecheck chromium bench bench-noisy clean

BIN := node_modules/.bin
CHROMIUM := /usr/bin/chromium
STAMP := node_modules/.berth-installed

# Installs the versions pinned in package-lock.json; sqlite3 builds from source the first time
# (about a minute). `npm install` rather than `npm ci`: npm records only this platform's optional
# `@deno/*` binary in the lockfile and then `npm ci` refuses the very lockfile it wrote.
$(STAMP): package.json package-lock.json
	npm install --no-audit --no-fund
	@touch $@

install: $(STAMP)

run: install
	node control-plane/cli/berth.js serve

# tsc checks the Node side; Deno checks the code that runs inside workers with Deno's own types.
typecheck: install
	$(BIN)/tsc --noEmit -p tsconfig.json
	$(BIN)/tsc --noEmit -p control-plane/dashboard/tsconfig.json
	NO_COLOR=1 $(BIN)/deno check --no-config --quiet deno-shim/*.ts test/fixtures/functions/*.ts

# The dashboard's browser tests drive Debian's Chromium: installed when missing (as root, as CI runs),
# and a failure stops the tests loudly rather than skipping them.
$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } || \
	  { echo "make: could not install Debian's chromium package; the browser tests need $(CHROMIUM) (install it as root: apt-get install chromium)" >&2; exit 1; }
	@test -x $(CHROMIUM) || { echo "make: the chromium package is installed but $(CHROMIUM) is missing" >&2; exit 1; }

chromium: $(CHROMIUM)

test: typecheck chromium
	$(BIN)/ava

bench: install
	node --import tsx bench/main.ts

bench-noisy: install
	node --import tsx bench/noisy-neighbour.ts

clean:
	rm -rf node_modules .berth
