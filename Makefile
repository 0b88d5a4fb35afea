# Set-up commands for a fresh machine: each target installs what is missing first.
.PHONY: install run test typecheck bench clean

BIN := node_modules/.bin
STAMP := node_modules/.berth-installed

# npm ci installs exactly the lockfile; sqlite3 builds from source the first time (about a minute).
$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

install: $(STAMP)

run: install
	node control-plane/cli/berth.js serve

typecheck: install
	$(BIN)/tsc --noEmit -p tsconfig.json

test: typecheck
	$(BIN)/ava

bench: install
	node --import tsx bench/run.ts

clean:
	rm -rf node_modules .berth
