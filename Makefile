# Convenience targets; the README's commands are the primary interface.
PY ?= .venv/bin/python

.PHONY: test test-all fuzz bench
test:
	$(PY) -m pytest -n 2 -q
test-all:
	IRKIT_SLOW=1 $(PY) -m pytest -n 2 -q
fuzz:
	$(PY) scripts/fuzz.py --graphs 10000 --target-graphs 500 --texts 100000
bench:
	$(PY) benchmarks/ir_scaling.py
