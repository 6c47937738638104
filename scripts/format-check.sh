#!/usr/bin/env bash
# format-check.sh -- check the C sources against .clang-format without
# changing them: clang-format --dry-run -Werror on every *.c and *.h under
# src include tests bench examples.  Exit 0 when all are formatted; else
# clang-format's warnings name each file and line.
#
#   scripts/format-check.sh              the whole tree
#   scripts/format-check.sh FILE...      only these files
#   CLANG_FORMAT=clang-format-14 scripts/format-check.sh
# To fix a file instead: clang-format -i FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
command -v "$cf" >/dev/null || { echo "format-check: $cf not found (Debian: apt-get install clang-format)" >&2; exit 2; }
if (($#)); then
    files=("$@")
else
    mapfile -t files < <(find src include tests bench examples -type f \( -name '*.c' -o -name '*.h' \) | sort)
fi
((${#files[@]})) || { echo "format-check: no C files" >&2; exit 2; }
"$cf" --style=file --dry-run -Werror "${files[@]}"
echo "format-check: ${#files[@]} files formatted as .clang-format says"
