# Two commands set up and run everything on a fresh machine:
#   make demo   start a local cluster (GPUs if present, else CPU) and run the demo job
#   make test   run the test suite (GPU tests run only where a GPU and cuDF are present)
# Both create .venv and install gpuframe into it (editable, with its C++/CUDA core built).
# GPU hosts: add the CUDA extra, e.g. `make demo EXTRAS=cu13`.

PYTHON ?= python3
VENV ?= .venv
EXTRAS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.gpuframe-installed
SOURCES := pyproject.toml CMakeLists.txt $(shell find gpuframe_cpp -type f 2>/dev/null)
PYTEST_ARGS ?=

.PHONY: demo test test-ucx lint info cpu-build clean

$(STAMP): $(SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test$(if $(EXTRAS),$(comma)$(EXTRAS))]"
	# The dask-kubernetes operator's resource definitions, for the offline schema test of
	# deploy/kubernetes (tests/deploy/test_kubernetes.py reads its files; nothing imports it,
	# so its Kubernetes clients are left out).
	$(BIN)/python -m pip install -q --no-deps "dask-kubernetes==2026.3.0"
	touch $@

comma := ,

demo: $(STAMP)
	$(BIN)/gpuframe demo

test: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

# Style and types: ruff over the code, its tests and benchmarks; mypy over the package.
lint: $(STAMP)
	$(BIN)/ruff check gpuframe tests benchmarks
	$(BIN)/mypy

# The suite again with distributed-ucxx, in a venv of its own: its joins' UCX tests run, and
# everything runs on the dask that distributed-ucxx pins (what GPU hosts get), except what
# `make test` covers alone so that CI's two runs fit its time: the reliability suite (minutes
# of killed workers and spilled joins), and the matrices of pandas' own semantics (every pair
# of key types, pandas' merge tests), which exercise pandas and the join's type rules, the
# same in both venvs, more than Dask or the comm.
UCX_SKIPS := --ignore=tests/reliability --ignore=tests/operators/test_merge_pandas.py \
	--deselect tests/operators/test_join.py::test_key_type_pairs_join_like_pandas_or_are_refused
test-ucx:
	$(MAKE) test VENV=.venv-ucx EXTRAS=ucx PYTEST_ARGS="$(PYTEST_ARGS) $(UCX_SKIPS)"

info: $(STAMP)
	$(BIN)/gpuframe info

# The C++ core without CUDA, as a wheel, and its module loaded from that wheel.
cpu-build: $(STAMP)
	rm -rf build/cpu-wheel
	GPUFRAME_CUDA=OFF $(BIN)/python -m pip wheel -q --no-deps -w build/cpu-wheel .
	$(BIN)/python -m zipfile -e build/cpu-wheel/gpuframe-*.whl build/cpu-wheel/unpacked
	$(BIN)/python -c "import glob, importlib.util as u; \
	path = glob.glob('build/cpu-wheel/unpacked/gpuframe/_core*')[0]; \
	spec = u.spec_from_file_location('_core', path); core = u.module_from_spec(spec); \
	spec.loader.exec_module(core); assert not core.built_with_cuda; \
	print('CPU-only core from the wheel:', path)"

clean:
	rm -rf $(VENV) build dist
