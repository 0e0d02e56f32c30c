# SPDX-License-Identifier: MIT
# bash completion for redlease(1): its subcommands, their options, and the actions of `semaphore`
# and `latch`. Installed as share/bash-completion/completions/redlease (loaded on demand by
# bash-completion); plain bash (compgen) only, so `source` works without bash-completion too.
# tests/package/package_test.sh checks that every subcommand and long option the tool's --help lists
# is offered here.

_redlease() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  # bash splits --opt=value at the = (COMP_WORDBREAKS): "--opt" "=" "value".
  if [[ $prev == = ]] && ((COMP_CWORD >= 2)); then
    prev=${COMP_WORDS[COMP_CWORD - 2]}
  fi
  [[ $cur == = ]] && cur=""
  local commands="run status unlock doctor demo semaphore latch top exporter"
  local connection="--redis --cacert --cert --key --sni --tls --insecure --sentinel-password"
  # The options that take a value (the next word); --opt=value is one word.
  local valued="--redis --cacert --cert --key --sni --sentinel-password --wait --lease --watchdog-timeout
                --kill-after --ttl --acl-user --permits --interval --max-load --sort --kind --limit --listen
                --prefix-depth --prefix-separator --max-prefixes"
  COMPREPLY=()

  # The subcommand: the first word that is no option. Then its positional arguments, in order.
  local i word cmd="" positionals=() skip=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if ((skip)); then
      ((skip -= 1))
    elif [[ -n $cmd && $cmd == run && $word == -- ]]; then
      # `run NAME -- COMMAND ...`: a command, then its own arguments (files).
      if ((i + 1 == COMP_CWORD)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
      else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      fi
      return 0
    elif [[ $word == -* ]]; then
      if [[ " ${valued//$'\n'/ } " == *" $word "* ]]; then
        skip=1
        [[ ${COMP_WORDS[i + 1]-} == = ]] && skip=2
      fi
    elif [[ -z $cmd ]]; then
      cmd=$word
    else
      positionals+=("$word")
    fi
  done

  if [[ -z $cmd ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$commands --help --version" -- "$cur")
    return 0
  fi

  case $prev in
    --cacert | --cert | --key)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
      ;;
    --sni)
      mapfile -t COMPREPLY < <(compgen -A hostname -- "$cur")
      return 0
      ;;
    --redis | --sentinel-password | --wait | --lease | --watchdog-timeout | --kill-after | --ttl | --acl-user | --permits |\
      --interval | --max-load | --limit | --listen | --prefix-depth | --prefix-separator | --max-prefixes)
      return 0  # a URL, a secret, a duration (5s, 2m, 1h), a user, a number, an address: nothing to offer
      ;;
    --sort)
      mapfile -t COMPREPLY < <(compgen -W "age name ttl waiters holders kind" -- "$cur")
      return 0
      ;;
    --kind)
      mapfile -t COMPREPLY < <(compgen -W "reentrant fair read-write mutex semaphore permit-semaphore latch" -- "$cur")
      return 0
      ;;
  esac

  local options="" actions=""
  case $cmd in
    run)
      options="--help $connection --wait --lease --watchdog-timeout --kill-after --mutex --fair --read --write
               --redlock --semaphore --permits --quiet --verbose --json"
      # After the lock's name, the command follows --.
      ((${#positionals[@]} >= 1)) && options+=" --"
      ;;
    status) options="--help $connection --json --redlock" ;;
    unlock) options="--help --force $connection" ;;
    doctor) options="--help $connection --json --acl-user --probe" ;;
    demo) options="--help $connection" ;;
    top) options="--help $connection --interval --max-load --sort --reverse --kind --limit --once --json" ;;
    exporter) options="--help $connection --listen --interval --prefix-depth --prefix-separator --max-prefixes --by-node" ;;
    semaphore | latch)
      # redlease semaphore NAME ACTION [N]; an action's own option only once the action is known.
      if [[ $cmd == semaphore ]]; then
        actions="set add drain status acquire release"
      else
        actions="set down wait status"
      fi
      options="--help $connection"
      case ${positionals[1]-} in
        set) options+=" --ttl" ;;
        acquire | wait) options+=" --wait" ;;
        status) options+=" --json" ;;
      esac
      ;;
    *) return 0 ;;
  esac

  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
  elif [[ -n $actions && ${#positionals[@]} -eq 1 ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$actions" -- "$cur")
  fi
  return 0
}

complete -F _redlease redlease
