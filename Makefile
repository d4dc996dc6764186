# Two commands on a fresh machine (Python 3.11 and Java 17 present):
#   make scenario NAME=steady     # sets everything up, runs the scenario
#   make test                     # the test suite (what CI runs)
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JVM_STAMP := $(VENV)/.jvm-ready
NAME ?= steady
CHROMIUM ?= chromium
ARGS ?=

.PHONY: setup scenario capacity soak rehearse test test-slow list compare kafka-up kafka-down bench clean-runs

# The exact tested set (constraints.txt) inside pyproject.toml's ranges; either file changing reinstalls.
$(STAMP): pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (set PYTHON=...)"; exit 2; }
	@command -v java >/dev/null || { echo "need Java 17 (java on PATH)"; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,eventhubs,plots]'
	touch $(STAMP)

# The JVM jars, the setting names, and what a first run would otherwise make on its way (the JVMs' class
# archives: `harness setup` starts steady's broker and query once), so the first run starts as fast as the tenth.
$(JVM_STAMP): $(STAMP) harness/jvm/settings.xml harness/jvm/kafka-broker/pom.xml harness/jvm/spark-kafka/pom.xml
	$(PY) -m harness setup
	touch $(JVM_STAMP)

setup: $(JVM_STAMP)

scenario: setup
	$(PY) -m harness run $(NAME) $(ARGS)

capacity: setup
	$(PY) -m harness capacity $(NAME) $(ARGS)

# make soak [NAME=soak] [DURATION=2h] [ARGS="--baseline runs/... --fail-fast"]
SOAK_NAME = $(if $(filter command line,$(origin NAME)),$(NAME),soak)
soak: setup
	$(PY) -m harness soak $(SOAK_NAME) $(if $(DURATION),--duration $(DURATION)) $(ARGS)

# make rehearse [NAME=spark-changes] [ARGS="--only 'shuffle partitions 4 to 8'"]
REHEARSAL = $(if $(filter command line,$(origin NAME)),$(NAME),spark-changes)
rehearse: setup
	$(PY) -m harness rehearse $(REHEARSAL) $(ARGS)

list: $(STAMP)
	@$(PY) -m harness list

# The HTML report tests drive a headless Chromium (tests/browser.py): install Debian's when it is missing.
.PHONY: browser
browser:
	@command -v $(CHROMIUM) >/dev/null 2>&1 && exit 0; \
	command -v apt-get >/dev/null 2>&1 || { echo "make browser: no $(CHROMIUM) on PATH and no apt-get to install it: install Chromium (the HTML report tests drive it headless) or set CHROMIUM=/path/to/chromium"; exit 2; }; \
	[ "$$(id -u)" = 0 ] || { echo "make browser: no $(CHROMIUM) on PATH; installing it needs root: sudo apt-get install chromium (or set CHROMIUM=/path/to/chromium)"; exit 2; }; \
	echo "make browser: installing chromium with apt-get (for the HTML report tests)"; \
	log=$$(mktemp); \
	if apt-get update -qq >$$log 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >>$$log 2>&1; \
	then rm -f $$log; \
	else cat $$log; rm -f $$log; echo "make browser: apt-get install chromium failed"; exit 2; fi; \
	command -v $(CHROMIUM) >/dev/null 2>&1 || { echo "make browser: chromium installed but $(CHROMIUM) is not on PATH"; exit 2; }

test: setup browser
	$(PY) -m pytest -q

test-slow: setup browser
	$(PY) -m pytest -q -m slow

compare: $(STAMP)
	$(PY) -m harness compare $(A) $(B) $(ARGS)

kafka-up: setup
	$(PY) -m harness kafka up

kafka-down: $(STAMP)
	$(PY) -m harness kafka down

bench: setup
	$(PY) -m harness bench all $(ARGS)

clean-runs:
	rm -rf runs
