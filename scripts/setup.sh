#!/usr/bin/env bash
# One idempotent set-up step for getagrip_ros on Debian/Ubuntu with Python 3.11:
#   1. system packages (apt) when missing,
#   2. .venv with pinned Python dependencies: ROS 2 Kilted wheels, CPU torch, the rest,
#   3. getagrip_interfaces (ament_cmake + rosidl) built and installed into the venv,
#   4. getagrip_ros installed in editable mode.
# A second run with nothing changed only checks a stamp and returns in about a second.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GETAGRIP_VENV:-$ROOT/.venv}"
STAMP="$VENV/.getagrip_setup_stamp"
TORCH_VERSION="2.13.0+cpu"
TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"

log() { printf '[setup] %s\n' "$*"; }

fingerprint() {
  # Everything whose change requires re-running the set-up.
  (cd "$ROOT" && cat scripts/setup.sh requirements/*.txt setup.py setup.cfg package.xml \
      getagrip_interfaces/CMakeLists.txt getagrip_interfaces/package.xml \
      getagrip_interfaces/msg/* getagrip_interfaces/action/* scripts/venv_interfaces/*/*.txt \
      scripts/venv_interfaces/*/*.xml scripts/venv_interfaces/*/msg/* 2>/dev/null) | sha256sum | cut -d' ' -f1
}

if [[ -f "$STAMP" && -x "$VENV/bin/python" && "$(cat "$STAMP")" == "$(fingerprint)" ]]; then
  log "up to date ($VENV)"
  exit 0
fi

# 1. system packages -------------------------------------------------------------------------
mapfile -t APT_PKGS < <(grep -v '^\s*#' "$ROOT/requirements/apt.txt" | awk 'NF {print $1}')
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing system packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# 2. virtual environment ---------------------------------------------------------------------
PYTHON="${PYTHON:-$(command -v python3.11 || true)}"
if [[ -z "$PYTHON" ]] || ! "$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
  echo "[setup] error: Python 3.11 is required (the ROS 2 Kilted wheels are cp311); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade "pip==25.3" "setuptools==79.0.1" wheel

# torch: the CPU build. Use a local wheel when the machine has one, else PyTorch's CPU index.
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__ != '$TORCH_VERSION')" 2>/dev/null; then
  log "installing torch $TORCH_VERSION"
  if ls /opt/wheels/torch-${TORCH_VERSION/+/[+]}-cp311-*.whl >/dev/null 2>&1; then
    "${PIP[@]}" install -q --find-links /opt/wheels "torch==$TORCH_VERSION"
  else
    "${PIP[@]}" install -q --extra-index-url "$TORCH_CPU_INDEX" "torch==$TORCH_VERSION"
  fi
fi

log "installing pinned Python dependencies"
"${PIP[@]}" install -q -r "$ROOT/requirements/ros.txt" -r "$ROOT/requirements/python.txt" \
  -r "$ROOT/requirements/nerf.txt" -r "$ROOT/requirements/ray.txt" -c "$ROOT/requirements/constraints.txt"
"${PIP[@]}" install -q --no-deps -r "$ROOT/requirements/nerf-nodeps.txt" -c "$ROOT/requirements/constraints.txt"

# 3. getagrip_interfaces ---------------------------------------------------------------------
# The ROS wheels carry CMake exports that point at the wheel builder's Python and numpy include
# directories; point them at this interpreter's so that CMake accepts them.
PY_INC="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [[ ! -f "$PY_INC/Python.h" ]]; then
  echo "[setup] error: Python headers missing in $PY_INC (apt-get install python3.11-dev)" >&2
  exit 1
fi
NP_INC="$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')"
{ grep -rlZ '/opt/python/cp311-cp311' "$VENV"/share/*/cmake/ 2>/dev/null || true; } | \
  xargs -0 -r sed -i -e "s#/opt/python/cp311-cp311/include/python3.11#$PY_INC#g" \
                     -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$NP_INC#g"

build_interfaces() {  # build_interfaces <package source dir>: an ament_cmake/rosidl package into the venv
  local src="$1" build="$VENV/build/$(basename "$1")"
  log "building $(basename "$src") into the venv"
  rm -rf "$build"; mkdir -p "$build"
  cmake -S "$src" -B "$build" -G Ninja -Wno-dev \
    -DCMAKE_INSTALL_PREFIX="$VENV" -DCMAKE_PREFIX_PATH="$VENV" \
    -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF >"$build.configure.log" 2>&1 \
    || { tail -30 "$build.configure.log"; exit 1; }
  cmake --build "$build" -j "$(nproc)" >"$build.build.log" 2>&1 \
    || { tail -30 "$build.build.log"; exit 1; }
  cmake --install "$build" >/dev/null
}
# tf2_msgs has no PyPI wheel; /tf needs its TFMessage (a ROS install has the real package).
if [[ -f "$VENV/build/tf2_msgs.stamp" ]] || ! "$VENV/bin/python" -c 'import tf2_msgs.msg' 2>/dev/null; then
  build_interfaces "$ROOT/scripts/venv_interfaces/tf2_msgs" && touch "$VENV/build/tf2_msgs.stamp"
fi
build_interfaces "$ROOT/getagrip_interfaces"

# 4. getagrip_ros ----------------------------------------------------------------------------
log "installing getagrip_ros (editable)"
"${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"

"$VENV/bin/python" -c 'import rclpy, torch, getagrip_interfaces.action, getagrip_ros' \
  || { echo "[setup] error: import check failed" >&2; exit 1; }
fingerprint >"$STAMP"
log "done"
