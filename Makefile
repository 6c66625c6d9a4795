# slurmkit developer targets. On a fresh Debian/Ubuntu machine, as root:
#   make demo   - virtual environment, local Slurm devcluster, submit the 2-node example, show status and logs
#   make test   - the whole test suite: unit tests, then the integration tests on the running devcluster
#                 (what .ci/run runs, once per Slurm version)
#   make test-unit / make test-integration   - either half
#   make up SLURM=25.11  /  make demo SLURM=25.11   - the devcluster on Slurm 25.11 (built from source, reused);
#                 SLURM=22.05 (Debian packages); empty: contrib/devcluster/up's default (22.05). `make down` first
#                 to switch versions.
# The system python, not a pyenv under /root (mode 0700): tests run sk as unprivileged users too.
PY ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
VENV := .venv
SK := $(VENV)/bin/sk
SITE := site_config/devcluster.yaml
SLURM ?=
PYTEST := $(VENV)/bin/pytest -q
# PostgreSQL for the store tests: $SK_TEST_PG_URL, or the private server contrib/devcluster/pg-up starts.
PG_URL = $${SK_TEST_PG_URL:-$$(contrib/devcluster/pg-up | tail -n 1)}

.PHONY: venv up down test test-unit test-integration test-deps lint golden demo bench

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip
	$(VENV)/bin/pip install -q -e '.[all,test]'

venv: $(VENV)/bin/python

up:
	contrib/devcluster/up $(if $(SLURM),--slurm $(SLURM))

down:
	contrib/devcluster/down

# Debian packages the tests use (Chromium, shellcheck, numactl, PostgreSQL): installed when missing.
test-deps:
	contrib/devcluster/test-deps

# pytest exit 5 (nothing collected, e.g. a marker that matches no test) fails make like any other failure.
test: test-unit test-integration

test-unit: venv test-deps
	SK_TEST_PG_URL="$(PG_URL)" $(PYTEST) -m 'not integration'

# On the devcluster that is running (either Slurm version); with CI=true a cluster that is down fails them.
test-integration: venv test-deps
	SK_TEST_PG_URL="$(PG_URL)" $(PYTEST) -m integration

lint: venv
	$(VENV)/bin/ruff check slurmkit tests bench

golden: venv
	$(VENV)/bin/python -m tests.golden

bench: venv
	$(VENV)/bin/python bench/render.py
	$(VENV)/bin/python bench/submit.py
	$(VENV)/bin/python bench/report.py
	$(VENV)/bin/python bench/accounting.py

demo: venv test-deps up
	mkdir -p /tmp/sk-demo
	cd /tmp/sk-demo && $(CURDIR)/$(SK) submit $(CURDIR)/examples/torchrun-2node.yaml --site $(CURDIR)/$(SITE) \
	    --set 'command=[bash, -c, "echo rank $$RANK of $$WORLD_SIZE on $$SLURMD_NODENAME GPU $$SK_GPU NUMA $$SK_NUMA CPUs $$SK_CPUS HCA $$SK_HCA"]' \
	    --set launcher=srun --json | tee /tmp/sk-demo/submit.json
	$(VENV)/bin/python -c 'import json; print(json.load(open("/tmp/sk-demo/submit.json"))[0]["job_id"])' > /tmp/sk-demo/job
	$(SK) wait $$(cat /tmp/sk-demo/job)
	$(SK) status --me
	$(SK) logs $$(cat /tmp/sk-demo/job)
	@# The job's record comes from the jobcomp hook, which Slurm runs right after the job ends: ingest until it is in.
	for i in 1 2 3 4 5 6 7 8 9 10; do \
	    $(SK) admin ingest --site $(SITE) && $(SK) report job $$(cat /tmp/sk-demo/job) --site $(SITE) && break; sleep 1; \
	done
	$(SK) report usage --site $(SITE)
