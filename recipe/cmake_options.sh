# shellcheck shell=bash
# Sourced by build-llvm.sh and build-flagtree.sh: conda's CMAKE_ARGS as separate arguments, and arguments as
# one string for a tool that reads it back with shlex.split (FlagTree's setup.py).

# split_options STRING: each option of STRING (conda's CMAKE_ARGS), each followed by a NUL byte. conda's
# compiler activation joins its options with spaces and quotes none, and conda-forge's own scripts expand
# them unquoted (`cmake ${CMAKE_ARGS}`), which cuts a path with a space (a prefix under ".../My Projects/...")
# into two arguments. Each of its options is -DNAME=VALUE, so STRING is cut only at a blank followed by "-"
# and a non-blank: "-DCMAKE_INSTALL_PREFIX=/a/My Projects/p -DX=1" is two options, the path whole, and so is
# ".../Work - Archive/..." (a path holding " -x" is still cut there).
split_options() {
  local rest="$1" option
  while [[ "${rest}" =~ [^[:space:]] ]]; do
    rest="${rest#"${rest%%[![:space:]]*}"}"
    option="${rest%%[[:space:]]-[![:space:]]*}"
    rest="${rest:${#option}}"
    option="${option%"${option##*[![:space:]]}"}"
    printf '%s\0' "${option}"
  done
}

# shell_words ARG...: the arguments as one line of POSIX shell words, each in single quotes, which Python's
# shlex.split reads back as they were (bash's printf %q may write $'...', which shlex does not read).
shell_words() {
  local arg words=()
  for arg in "$@"; do
    words+=("'${arg//\'/\'\\\'\'}'")
  done
  echo "${words[*]}"
}
