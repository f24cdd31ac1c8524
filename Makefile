# Every target bootstraps its own virtual environment, so a fresh clone needs only Python 3.11+.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: `make run` needs Charter and its runtime dependencies only; `make test` (and
# lint, typecheck, bench) add the development extras on top of the same venv.
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
# Exact versions of everything `.[dev]` installs, of pip and of the build backend
# (setuptools, wheel). pyproject.toml keeps the ranges a library user gets; this file pins
# what `make run`/`make test` and CI install, so a new release of a dependency changes
# nothing here until `make lock` is run.
LOCK := constraints.txt
LOCK_VENV := .lock-venv

.PHONY: run test lint typecheck pytest bench clean lock wheel

$(RUNTIME): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit("Charter needs Python 3.11+") if sys.version_info < (3, 11) else None'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade -c $(LOCK) pip setuptools wheel
	@# No build isolation: the build backend is the pinned setuptools above, not the
	@# newest one an isolated build would fetch.
	$(BIN)/python -m pip install --quiet --no-build-isolation -c $(LOCK) -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install --quiet --no-build-isolation -c $(LOCK) -e '.[dev]'
	touch $(STAMP)

## lock: resolve pyproject.toml's ranges afresh in a clean venv and pin the result in constraints.txt
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip setuptools wheel
	$(LOCK_VENV)/bin/python -m pip install --quiet --no-build-isolation '.[dev]'
	{ echo '# Pinned by `make lock` (a fresh venv, pip install .[dev], pip freeze --all).'; \
	  echo '# Edit the ranges in pyproject.toml, never this file; `make` installs with -c it.'; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude charter; } > $(LOCK).tmp
	@# A lock must hold name==version only: no URLs or paths of the machine that made it.
	@if grep -nvE '^(#|[A-Za-z0-9._-]+(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.!+_-]+$$)' $(LOCK).tmp; then \
		echo 'make lock: the lines above are not name==version pins' >&2; rm -f $(LOCK).tmp; exit 1; fi
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)

## run: start Charter on its embedded PostgreSQL with the live automation demo (make run PORT=8421)
run: $(RUNTIME)
	$(BIN)/charter up --demo $(if $(PORT),--port $(PORT))

## wheel: build dist/charter-VERSION-py3-none-any.whl (install it with -c constraints.txt)
wheel: $(RUNTIME)
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation -c $(LOCK) -w dist .

## test: lint, type-check and run the whole test suite
test: lint typecheck pytest

## lint: ruff on the code, and sdk/client.py being what tools/async_to_sync.py makes of sdk/aio.py
lint: $(STAMP)
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/python tools/async_to_sync.py --check

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

## bench: every capability's benchmark, printing its figures (needs the local PostgreSQL)
bench: $(STAMP)
	for script in signing verification disclosures dsl engine ingest up_split notify automation runs_admission runs tlog_core; do \
		$(BIN)/python bench/$$script.py || exit 1; done

clean:
	rm -rf $(VENV) $(LOCK_VENV) build dist .mypy_cache .pytest_cache .ruff_cache
