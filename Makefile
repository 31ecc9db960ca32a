# One command runs the stack (make run), one runs the tests (make test);
# each builds the virtualenv first. Only Python 3.11+ and make are needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install run test test-fast test-server browser lint clean chaos chaos-provider fuzz

.PHONY: pgbouncer test-pgbouncer chaos-failover

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

# Compiled catalogs (.mo) are built, never committed: each from its .po when that changes.
PO_FILES := $(wildcard translations/*/LC_MESSAGES/*.po)
MO_FILES := $(PO_FILES:.po=.mo)
translations/%.mo: translations/%.po $(STAMP)
	$(BIN)/pybabel -q compile -i $< -o $@

install: $(STAMP) $(MO_FILES)

# Languages and their words (docs/translating.md): extract each domain's messages into
# translations/<domain>.pot, merge them into every shipped locale's .po (a new locale's
# is started), then compile. DOMAINS=pages limits it to one domain.
DOMAINS ?= pages emails
CATALOG_LOCALES := de fr es pt_BR ar
.PHONY: translations
translations: $(STAMP)
	@for domain in $(DOMAINS); do \
	  $(BIN)/pybabel -q extract -F babel-$$domain.cfg -k _l -k lazy_gettext -k _ln:1,2 -k lazy_ngettext:1,2 -k N_ -k translate:2 --sort-by-file \
	    --no-wrap --project=authsvc --msgid-bugs-address=- -o translations/$$domain.pot . || exit 1; \
	  for locale in $(CATALOG_LOCALES); do \
	    if [ -f translations/$$locale/LC_MESSAGES/$$domain.po ]; then \
	      $(BIN)/pybabel -q update -D $$domain -i translations/$$domain.pot -d translations \
	        -l $$locale --no-wrap --ignore-obsolete || exit 1; \
	    else \
	      $(BIN)/pybabel -q init -D $$domain -i translations/$$domain.pot -d translations \
	        -l $$locale --no-wrap || exit 1; \
	    fi; \
	  done; \
	done
	@for po in translations/*/LC_MESSAGES/*.po; do \
	  $(BIN)/pybabel -q compile -i $$po -o $${po%.po}.mo || exit 1; done

# make run PORT=8200 SMTP_PORT=2725 DATA_DIR=/tmp/authsvc-b: a second stack beside the first.
PORT      ?= 8000
SMTP_PORT ?= 2525
DATA_DIR  ?=
run: $(STAMP) $(MO_FILES)
	$(if $(DATA_DIR),AUTHSVC_DATA_DIR=$(DATA_DIR)) $(BIN)/authsvc dev --port $(PORT) --smtp-port $(SMTP_PORT)

# Page tests drive Debian's Chromium; install it when missing and we may.
# With AUTHSVC_REQUIRE_BROWSER=1 (CI) a missing Chromium or axe-core stops here, and the
# browser tests fail rather than skip (tests/browser_support.py).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the page tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || { echo "chromium could not be installed; page tests will be skipped"; \
	           [ "$$AUTHSVC_REQUIRE_BROWSER" != 1 ]; }; \
	  else echo "chromium not found; page tests will be skipped"; \
	    [ "$$AUTHSVC_REQUIRE_BROWSER" != 1 ]; fi; }
	@# axe-core for the accessibility scans, injected from disk (no CDN).
	@test -f tests/browser/node_modules/axe-core/axe.min.js || { \
	  command -v npm >/dev/null 2>&1 && (cd tests/browser && npm ci --no-audit --no-fund --silent) \
	    || { echo "axe-core could not be installed; the axe browser tests will be skipped"; \
	         [ "$$AUTHSVC_REQUIRE_BROWSER" != 1 ]; }; }

# The suite's own temp root: pytest prunes /tmp/pytest-of-$USER when other
# runs start, which would delete a running embedded PostgreSQL's data dir.
# Short and per checkout (the server's Unix socket path must stay < 108 bytes).
TEST_TMP ?= /tmp/authsvc-test-$(shell printf '%s' "$(CURDIR)" | cksum | cut -d' ' -f1)

# Each xdist worker imports the whole suite, and pytest rewrites every test module's
# asserts on import: with PYTHONDONTWRITEBYTECODE set (as on this machine) neither is
# cached, which costs each worker seconds of CPU per run. The suites write the usual
# __pycache__ folders (ignored by git) whatever the environment says.
BYTECODE := PYTHONDONTWRITEBYTECODE=

test: $(STAMP) $(MO_FILES) browser
	$(BYTECODE) $(BIN)/pytest -n 2 --dist loadfile -q --basetemp=$(TEST_TMP)

# The inner loop: the unit and integration tests (markers set in tests/conftest.py),
# with the generated-input tests on their quick modes. It leaves out every e2e test
# (gunicorn, workers, `authsvc dev`, the chaos run, pip, openssl, PgBouncer,
# Chromium), runs 50 and 40 state-machine examples instead of 500 and 150, a quarter
# of the API and form fuzzers' examples and 29 of the 187 code-try sequences; `make test`
# runs all of it. Four test processes even on two cores: much of a test's time is
# spent waiting on PostgreSQL (at 1fad353, 2 min 23 s against 2 min 50 s with two).
test-fast: $(STAMP) $(MO_FILES)
	$(BYTECODE) AUTHSVC_HYPOTHESIS_PROFILE=quick AUTHSVC_FUZZ_MODE=quick $(BIN)/pytest -m "not e2e and not slow" -n 4 \
	  --dist loadfile -q --basetemp=$(TEST_TMP)-fast

# The same suite against a normal server (this machine's PostgreSQL 15).
TEST_SERVER_URL ?= postgresql://postgres@127.0.0.1:5432/test
test-server: $(STAMP) $(MO_FILES) browser
	AUTHSVC_TEST_DATABASE_URL=$(TEST_SERVER_URL) $(BIN)/pytest -n 2 --dist loadfile -q --basetemp=$(TEST_TMP)

# The suite through a transaction pooler (SPEC §11, issue 15): a throwaway PostgreSQL
# (pgserver's binaries) with Debian's PgBouncer in transaction mode in front, both
# started and stopped by tests/pooled_run.py. Installs pgbouncer when missing and root.
pgbouncer:
	@command -v pgbouncer >/dev/null 2>&1 || test -x /usr/sbin/pgbouncer || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's pgbouncer for the pooled suite"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; \
	  else echo "pgbouncer not found: install it (Debian: apt-get install pgbouncer)"; exit 1; fi; }

# It leaves out what the pooler cannot change: the tests that start a PostgreSQL of
# their own (the chaos run, failover, many hosts, a restarted server) and the QA-scale
# test of 1,000 long polls; `make test` runs them once.
POOLED_SKIP := --ignore=tests/test_chaos.py --ignore=tests/test_failover.py \
  --ignore=tests/test_many_hosts.py --ignore=tests/test_web_database_restart.py \
  --ignore=tests/test_inbox_scale.py
test-pgbouncer: $(STAMP) $(MO_FILES) browser pgbouncer
	$(BIN)/python -m tests.pooled_run -n 2 --dist loadfile -q --basetemp=$(TEST_TMP)-pgb \
	  $(POOLED_SKIP)

# migrations/schema.sql from a freshly migrated database (tests/test_schema_file.py holds
# the file to the migrations): run after adding a migration.
.PHONY: schema
schema: $(STAMP)
	$(BIN)/python -m tools.schema_sql

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .authsvc .pytest_cache .mypy_cache .ruff_cache

# Worker figures (not tests), all from one run (issue 11): drains beside pgqueuer and the raw
# limit, latency, a slow sink, claim latency up to 1M rows, HTTP resets, RSS. Writes
# docs/BENCHMARKS.md and docs/benchmarks.png (about 10 minutes on 2 shared cores).
.PHONY: bench bench-report
bench: $(STAMP)
	$(BIN)/python -m bench.suite
	$(BIN)/python bench/password_hashing.py
	$(BIN)/python -m bench.inbox_wakeup
	$(BIN)/python -m bench.console_code_timing

bench-report: $(STAMP)
	$(BIN)/python -m bench.suite --report-only

# Long-mode reliability runs (docs/RELIABILITY.md); each prints its figures.
chaos: $(STAMP)
	$(BIN)/python -m chaos --requests 5000 --workers 4 --kills 24 --kill-every 2 --rate 100

# The same schedule against a local provider fake (tools/local_*.py; PROVIDER=resend, brevo,
# postmark, ses, sendgrid, mailgun, or hook: an app that delivers its own mail): every kill
# lands after the provider accepted and before the worker recorded.
PROVIDER ?= resend
chaos-provider: $(STAMP)
	$(BIN)/python -m chaos --transport http --provider $(PROVIDER) --requests 5000 --workers 4 --kills 24 --kill-every 2 --rate 100
# A primary and a streaming standby of its own (pgserver's binaries), the standby
# promoted mid-run under the chaos load (issue 15); ends with a `chaos:` line.
chaos-failover: $(STAMP)
	$(BIN)/python -m chaos --failover --requests 600 --workers 3 --kills 4 --kill-every 2 --rate 60

fuzz: $(STAMP)
	AUTHSVC_FUZZ_MODE=long AUTHSVC_HYPOTHESIS_PROFILE=long $(BIN)/pytest tests/test_api_schemathesis.py tests/test_pages_input_properties.py tests/test_properties_ownership.py -q -s -p no:cacheprovider -o timeout=3600
