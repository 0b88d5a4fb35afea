# Set-up commands for a fresh machine: each target installs what is missing first.
.PHONY: install run test typecheck bench bench-noisy clean

BIN := node_modules/.bin
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

test: typecheck
	$(BIN)/ava

bench: install
	node --import tsx bench/main.ts

bench-noisy: install
	node --import tsx bench/noisy-neighbour.ts

clean:
	rm -rf node_modules .berth
