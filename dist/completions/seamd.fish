# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_seamd_global_optspecs
    string join \n h/help V/version
end

function __fish_seamd_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_seamd_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_seamd_using_subcommand
    set -l cmd (__fish_seamd_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c seamd -n "__fish_seamd_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c seamd -n "__fish_seamd_needs_command" -s V -l version -d 'Print version'
complete -c seamd -n "__fish_seamd_needs_command" -f -a "run" -d 'Install healed index proposals in CHECKOUT\'s git dirs, pass after pass'
complete -c seamd -n "__fish_seamd_needs_command" -f -a "doctor" -d 'Report the checkout\'s cross-kernel state: proposals, autostashes, old locks, index-box'
complete -c seamd -n "__fish_seamd_needs_command" -f -a "parked" -d 'What seamfs parked before box processes destroyed it: list (newest first), restore, prune. Runs no git and writes nothing outside CHECKOUT'
complete -c seamd -n "__fish_seamd_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamd -n "__fish_seamd_using_subcommand run" -l interval-ms -d 'Milliseconds between passes' -r
complete -c seamd -n "__fish_seamd_using_subcommand run" -l feed -d 'Also serve the change feed at ADDR: unix:PATH or vsock:CID:PORT (listened on), or a character device path (written to). The boxes\' seamfs mounts take `--feed`' -r
complete -c seamd -n "__fish_seamd_using_subcommand run" -l once -d 'One pass, then exit'
complete -c seamd -n "__fish_seamd_using_subcommand run" -s h -l help -d 'Print help'
complete -c seamd -n "__fish_seamd_using_subcommand doctor" -l lock-age-s -d 'Report lock files older than this many seconds' -r
complete -c seamd -n "__fish_seamd_using_subcommand doctor" -l json -d 'One JSON document: {"tool", "path", "worst", "rows": [{"kind", "severity", "at", "found", "recovery"}]} (docs/box-setup.md, "Doctor output")'
complete -c seamd -n "__fish_seamd_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -s h -l help -d 'Print help'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -a "restore" -d 'Write an entry back, byte-exact with its mode (ID from the list, or a path: its newest)'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -a "prune" -d 'Drop park commits older than DURATION (14d, 12h, 30m...) [default: 14d]'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from restore" -l to -d 'Write into this directory instead (for an entry from a removed linked worktree)' -r -F
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from restore" -l force -d 'Replace the file even if it changed since and its bytes are in no object'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from restore" -s h -l help -d 'Print help'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from prune" -l older-than -d 'Age past which parked bytes are dropped' -r
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from help" -f -a "restore" -d 'Write an entry back, byte-exact with its mode (ID from the list, or a path: its newest)'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Drop park commits older than DURATION (14d, 12h, 30m...) [default: 14d]'
complete -c seamd -n "__fish_seamd_using_subcommand parked; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamd -n "__fish_seamd_using_subcommand help; and not __fish_seen_subcommand_from run doctor parked help" -f -a "run" -d 'Install healed index proposals in CHECKOUT\'s git dirs, pass after pass'
complete -c seamd -n "__fish_seamd_using_subcommand help; and not __fish_seen_subcommand_from run doctor parked help" -f -a "doctor" -d 'Report the checkout\'s cross-kernel state: proposals, autostashes, old locks, index-box'
complete -c seamd -n "__fish_seamd_using_subcommand help; and not __fish_seen_subcommand_from run doctor parked help" -f -a "parked" -d 'What seamfs parked before box processes destroyed it: list (newest first), restore, prune. Runs no git and writes nothing outside CHECKOUT'
complete -c seamd -n "__fish_seamd_using_subcommand help; and not __fish_seen_subcommand_from run doctor parked help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamd -n "__fish_seamd_using_subcommand help; and __fish_seen_subcommand_from parked" -f -a "restore" -d 'Write an entry back, byte-exact with its mode (ID from the list, or a path: its newest)'
complete -c seamd -n "__fish_seamd_using_subcommand help; and __fish_seen_subcommand_from parked" -f -a "prune" -d 'Drop park commits older than DURATION (14d, 12h, 30m...) [default: 14d]'
