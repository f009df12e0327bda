# `make test` and `make demo` do all the set-up on a fresh Debian 12 machine:
# Debian packages from bindep.txt, a virtualenv with the Python packages,
# SPDK built from source (cached outside the checkout), hugepages for the
# SPDK targets and the test guests, libvirtd. Run as root or with sudo.

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
STAMP := $(VENV)/.installed
# 2 MiB pages: 256 MiB per SPDK target, plus the test guests' memory.
HUGEPAGES ?= 4096

.PHONY: test test-setup demo debs venv spdk host unit pep8 docs genconfig \
	clean cinder-deploy

# The set-up steps run side by side where one does not need another (the
# SPDK builds use the CPU while pip downloads, pep8 and the docs run),
# each one's output printed when it ends; then every test tree.
test:
	$(MAKE) --no-print-directory -j3 --output-sync=target test-setup
	tools/run-tests.sh $(BIN)

test-setup: debs venv spdk host pep8 docs

demo: debs venv spdk host
	PYTHONPATH=$(CURDIR) $(BIN)/python tools/demo.py

debs:
	$(SUDO) tools/install-debs.sh bindep.txt

venv: $(STAMP)

# After the Debian packages (python3-venv, libvirt-dev), without being
# rebuilt for them.
$(STAMP): requirements.txt test-requirements.txt doc/requirements.txt \
		setup.cfg | debs
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -r requirements.txt -r test-requirements.txt \
		-r doc/requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

# Every supported SPDK release from ../shared/spdk (or git), each built
# once per machine. SPDK_VERSION is the one the whole suite runs on; the
# upgrade tests and the transcript replay run on every one of
# SPDK_VERSIONS (tools/run-tests.sh).
SPDK_VERSION ?= 26.05
SPDK_VERSIONS ?= 26.01 26.05
export SPDK_VERSION SPDK_VERSIONS
spdk: debs
	for v in $(SPDK_VERSIONS); do \
		tools/build-spdk.sh $$v >/dev/null || exit 1; done

host: debs
	$(SUDO) tools/setup-cpu.sh
	$(SUDO) HUGEPAGES=$(HUGEPAGES) tools/setup-hugepages.sh
	$(SUDO) tools/start-libvirt.sh
	$(SUDO) tools/start-services.sh

# The Cinder deployment of tests/deployment in the foreground (Ctrl-C stops
# it): cinder-api (noauth), -scheduler, -volume on MariaDB and RabbitMQ.
cinder-deploy: venv
	$(SUDO) tools/start-services.sh
	PYTHONPATH=$(CURDIR) $(BIN)/python -m tests.deployment $(DEPLOY_ARGS)

unit: venv
	$(BIN)/stestr run tests.unit

pep8: venv
	$(BIN)/flake8
	$(BIN)/doc8 doc/source releasenotes/notes README.rst
	shellcheck -x tools/*.sh testbed/guest/*.sh .ci/run
	shellcheck -x -s bash devstack/plugin.sh devstack/settings \
		devstack/override-defaults devstack/lib/* tests/unit/devstack/*.sh

docs: venv
	$(BIN)/sphinx-build -W -q -b html doc/source doc/build/html

genconfig: venv
	for f in tools/config/*.conf; do \
		$(BIN)/oslo-config-generator --config-file $$f || exit 1; done

clean:
	rm -rf $(VENV) .stestr doc/build releasenotes/build *.egg-info
