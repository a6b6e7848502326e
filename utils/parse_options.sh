#!/usr/bin/env bash
# Kaldi-style option parsing, sourced by pipelines after they declare their defaults:
#   --foo-bar 3 / --foo_bar 3  sets foo_bar=3 (the variable must already exist)
#   --config FILE              sources FILE first (lines like foo_bar=3)
#   --help                     prints the script's header comment and the current values
# Positional arguments stay in "$@".

__usage_and_exit() {
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    echo "Options (current values):"
    # shellcheck disable=SC2154
    for __name in ${__option_names}; do printf '  --%s %q\n' "${__name}" "${!__name}"; done
    exit "${1:-0}"
}

# Every variable defined before this file is sourced is an option; remember which ones for --help.
__option_names=$(set -o posix; set | sed -n 's/^\([a-z][a-z0-9_]*\)=.*/\1/p' | tr '\n' ' ')

while [ $# -gt 0 ]; do
    case "$1" in
        --help|-h) __usage_and_exit 0 ;;
        --config)
            [ -f "$2" ] || { echo "$0: --config: no such file: $2" >&2; exit 1; }
            # shellcheck disable=SC1090
            . "$2"; shift 2 ;;
        --*=*)
            echo "$0: write options as '--name value', not '$1'" >&2; exit 1 ;;
        --*)
            __name=$(echo "${1#--}" | tr '-' '_')
            if ! declare -p "${__name}" >/dev/null 2>&1 || [[ "${__name}" == __* ]]; then
                echo "$0: unknown option $1 (see --help)" >&2; exit 1
            fi
            [ $# -ge 2 ] || { echo "$0: option $1 needs a value" >&2; exit 1; }
            __old="${!__name}"
            # Booleans stay booleans so that "if ${flag}; then" cannot run an arbitrary command.
            if [ "${__old}" = true ] || [ "${__old}" = false ]; then
                [ "$2" = true ] || [ "$2" = false ] || { echo "$0: $1 takes true or false, not '$2'" >&2; exit 1; }
            fi
            printf -v "${__name}" '%s' "$2"
            shift 2 ;;
        *) break ;;
    esac
done
unset __name __old
true
