#!/usr/bin/env bash
set -euo pipefail
{
  echo "CCACHE_DIR=${CCACHE_DIR-<unset>}"
  echo "TOY_NOT_PASSED=${TOY_NOT_PASSED-<unset>}"
  echo "SRC_DIR=${SRC_DIR}"
  echo "PREFIX=${PREFIX}"
  echo "BUILD_PREFIX=${BUILD_PREFIX}"
} >"${TOY_ENV_REPORT}"
mkdir -p "${PREFIX}/share" && echo ok >"${PREFIX}/share/toy-script-env.txt"
