#!/usr/bin/env bash
# Formats the C++ sources with clang-format and the repository's .clang-format.
#
# usage: scripts/format.sh            reformat every source file in place
#        scripts/format.sh --check    change nothing; list the files that
#                                     differ and exit 1 if there are any
# environment: CLANG_FORMAT (default: clang-format)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
clang_format=${CLANG_FORMAT:-clang-format}
cd "$root"

mapfile -t files < <(find src include tools tests bench -type f \( -name '*.cc' -o -name '*.h' \) | sort)
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    if ! "$clang_format" --dry-run -Werror "$f" >/dev/null 2>&1; then
      bad+=("$f")
    fi
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf '%s\n' "${bad[@]}"
    echo "format: ${#bad[@]} file(s) differ from .clang-format; run scripts/format.sh" >&2
    exit 1
  fi
  exit 0
fi
"$clang_format" -i "${files[@]}"
