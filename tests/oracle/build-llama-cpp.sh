#!/usr/bin/env bash
# build-llama-cpp.sh — build the llama.cpp oracle (PyPI llama-cpp-python, which compiles the
# llama.cpp it vendors from source) into a Python virtual environment outside the tree.
#
#   tests/oracle/build-llama-cpp.sh            # venv at ${SJK_ORACLE_VENV:-$HOME/.cache/sjkvarn/oracle-venv}
#
# The oracle only generates test data (tests/oracle/make_golden.py); nothing in the product
# links or calls it. The build runs once (idempotent: an existing venv that imports
# llama_cpp is kept) at low priority, since it takes several minutes on two cores.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
VENV=${SJK_ORACLE_VENV:-$HOME/.cache/sjkvarn/oracle-venv}
JOBS=${JOBS:-2}

if [ -x "$VENV/bin/python" ] &&
   "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_PYTHON_VERSION')" 2>/dev/null; then
  echo "build-llama-cpp: llama-cpp-python $LLAMA_CPP_PYTHON_VERSION already in $VENV"
  exit 0
fi

command -v cmake >/dev/null || { echo "build-llama-cpp: cmake is required (apt-get install cmake)" >&2; exit 1; }
command -v c++ >/dev/null || { echo "build-llama-cpp: a C++ compiler is required (apt-get install g++)" >&2; exit 1; }

python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q numpy

# Native CPU build; no multimodal library (not needed for tokenisation and logits).
export CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL=$JOBS
echo "build-llama-cpp: building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (several minutes)"
nice -n 19 "$VENV/bin/pip" install --no-cache-dir --no-binary llama-cpp-python \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
"$VENV/bin/python" -c "import llama_cpp; print('build-llama-cpp: ok, llama-cpp-python', llama_cpp.__version__)"
