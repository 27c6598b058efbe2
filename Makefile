# Convenience targets; the README's commands are the primary interface.
PY ?= .venv/bin/python

.PHONY: test test-all fuzz bench conformance
test:
	$(PY) -m pytest -n 2 -q
test-all:
	IRKIT_SLOW=1 $(PY) -m pytest -n 2 -q
fuzz:
	$(PY) scripts/fuzz.py --graphs 10000 --target-graphs 500 --texts 100000
bench:
	$(PY) benchmarks/ir_scaling.py

# The frameworks' conformance suites on the interpreter, ort, tvm-llvm and xla-cpu, with the peers
# (onnxruntime, TVM Relax's importers); per-case JSON under build/, the summary in CONFORMANCE.md.
IRKIT ?= $(dir $(PY))irkit
CONFORMANCE_JOBS ?= 2
conformance:
	mkdir -p build
	$(IRKIT) conformance --suite all --targets ort,tvm-llvm,xla-cpu --peers --jobs $(CONFORMANCE_JOBS) \
		--json build/conformance.json --report CONFORMANCE.md
