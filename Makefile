# Two entry points a newcomer needs (see README): `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_OUT ?= out/demo

.PHONY: setup dev demo test lint typecheck bench clean docs

$(BIN)/lumos:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .

$(VENV)/.dev: $(BIN)/lumos pyproject.toml
	$(BIN)/pip install -q -e ".[dev,plot]"
	$(BIN)/pip install -q --no-deps mlc-chakra==1.0.0
	@# The capture tests need torch; the +cpu pin never pulls the multi-GB CUDA build.
	$(BIN)/pip install -q "torch==2.13.0+cpu" || echo "note: no CPU torch wheel here; the live capture tests will skip"
	touch $@

setup: $(BIN)/lumos
dev: $(VENV)/.dev

demo: $(BIN)/lumos
	bash scripts/demo.sh $(BIN)/lumos $(DEMO_OUT)

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: dev
	bash scripts/typecheck.sh $(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q -n 2 --dist loadfile

# The docs site (MkDocs Material + mkdocstrings), strict: any warning fails the build.
docs: dev
	$(BIN)/pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q

bench: setup
	$(BIN)/python scripts/bench_et_io.py

clean:
	rm -rf out .mypy_tree .pytest_cache .ruff_cache
