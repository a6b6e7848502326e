#!/usr/bin/env bash
# Kaldi-style option parsing, sourced by pipelines and recipes after they declare their defaults:
#   --foo-bar 3 / --foo_bar 3  sets foo_bar=3 (the variable must already exist: every lower-case
#                              variable defined before this file is sourced is an option)
#   --config FILE              sources FILE first (lines like foo_bar=3)
#   --help                     prints the script's header comment and the current values
# An option whose default is true or false is a boolean: it takes only true or false, so that
# "if ${flag}" can never run a command (still, test it as [ "${flag}" = true ]).
# Options are written "--name value" (never "--name=value"); each takes exactly one value.
# Unknown options are refused, naming the option. Positional arguments stay in "$@".
#
# Pass-through (a recipe in front of a pipeline, as run.sh in front of asr.sh / mt.sh / ocr.sh):
#   __options_pass_to=./mt.sh     set just before sourcing this file
# Then an option the script does not declare is no error: it stays in "$@" with its value, in the
# order given, and the script hands "$@" on to that pipeline, which parses it with this file and
# refuses what it does not know in turn. --config FILE is sourced here and stays in "$@" too, so one
# file may set options of both scripts; --help also names the pipeline. Options the script declares
# are its own and are not passed on.

__usage_and_exit() {
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    echo "Options (current values):"
    # shellcheck disable=SC2154
    for __name in ${__option_names}; do printf '  --%s %q\n' "${__name}" "${!__name}"; done
    if [ -n "${__options_pass_to:-}" ]; then
        echo "Every other option goes to ${__options_pass_to} (${__options_pass_to} --help)."
    fi
    exit "${1:-0}"
}

# Every variable defined before this file is sourced is an option; remember which ones for --help.
__option_names=$(set -o posix; set | sed -n 's/^\([a-z][a-z0-9_]*\)=.*/\1/p' | tr '\n' ' ')

__passed=()
while [ $# -gt 0 ]; do
    case "$1" in
        --help|-h) __usage_and_exit 0 ;;
        --config)
            [ -f "${2:-}" ] || { echo "$0: --config: no such file: ${2:-}" >&2; exit 1; }
            # shellcheck disable=SC1090
            . "$2"
            [ -z "${__options_pass_to:-}" ] || __passed+=("$1" "$2")
            shift 2 ;;
        --*=*)
            echo "$0: write options as '--name value', not '$1'" >&2; exit 1 ;;
        --*)
            [ $# -ge 2 ] || { echo "$0: option $1 needs a value" >&2; exit 1; }
            __name=$(echo "${1#--}" | tr '-' '_')
            # Declared before sourcing, not merely set since (a --config file may set anything).
            if [[ " ${__option_names} " != *" ${__name} "* ]]; then
                if [ -n "${__options_pass_to:-}" ]; then
                    __passed+=("$1" "$2"); shift 2; continue
                fi
                echo "$0: unknown option $1 (see --help)" >&2; exit 1
            fi
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
set -- "${__passed[@]}" "$@"
unset __name __old __passed __options_pass_to
true
