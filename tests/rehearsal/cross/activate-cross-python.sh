# shellcheck shell=bash
# Stand-in for the activation of conda-forge's cross-python_linux-aarch64 (cross-python-feedstock,
# recipe/activate-cross-python.sh), reduced to what `${PYTHON} -m pip install .` of FlagTree needs. Like the
# real one it acts only in a build (CONDA_BUILD=1, not the test phase) and makes ${PYTHON}, the target's
# python ($PREFIX/bin/python, which cannot run on the build machine), a python of the build machine that builds
# for the target, as crossenv's cross-python does: sysconfig reports the target's platform
# (_PYTHON_HOST_PLATFORM), sys.prefix is the host prefix (PYTHONHOME), so pip installs into $PREFIX and tags
# the wheel for the target, and the build environment's site-packages come first (PYTHONPATH); `python` on
# PATH stays the build machine's.
# It cannot show: the target's sysconfigdata (EXT_SUFFIX, the target compiler's settings: the stub host python
# has none), crossenv's patched os.uname() and platform.machine(), and a host python that cannot run here (the
# stub's is this machine's interpreter, so a build step that runs it without cross-python does not fail).
if [[ "${CONDA_BUILD:-0}" == "1" && "${CONDA_BUILD_STATE:-}" != "TEST" ]]; then
  # The machine's own interpreter behind the stub's venv-style copy: run as itself, it takes PYTHONHOME (the
  # host prefix, where pip and the host packages are), where the copy would read its own pyvenv.cfg.
  _cross_python_build="$(readlink -f "$("${BUILD_PREFIX}/bin/python" -c 'import sys; print(sys._base_executable)')")"
  _cross_python_stdlib="$("${_cross_python_build}" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
  _cross_python_version="$("${_cross_python_build}" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  mkdir -p "${BUILD_PREFIX}/venv/bin"
  {
    echo '#!/bin/sh'
    echo '# cross-python stand-in of the rehearsal (tests/rehearsal/cross/activate-cross-python.sh)'
    echo "export _PYTHON_HOST_PLATFORM=linux-aarch64 PYTHONHOME='${PREFIX}'"
    echo "PYTHONPATH='${_cross_python_stdlib}:${_cross_python_stdlib}/lib-dynload'\${PYTHONPATH:+:\${PYTHONPATH}}"
    echo 'export PYTHONPATH'
    echo "exec '${_cross_python_build}' \"\$@\""
  } >"${BUILD_PREFIX}/venv/bin/cross-python"
  chmod +x "${BUILD_PREFIX}/venv/bin/cross-python"
  # The real one replaces the file behind $PREFIX/bin/python; the stub's is a copy of this machine's
  # interpreter, replaced here.
  rm -f "${PREFIX}/bin/python"
  cp "${BUILD_PREFIX}/venv/bin/cross-python" "${PREFIX}/bin/python"
  export PYTHONPATH="${BUILD_PREFIX}/lib/python${_cross_python_version}/site-packages"
  unset _cross_python_build _cross_python_stdlib _cross_python_version
fi
