# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_seamfs_global_optspecs
    string join \n h/help V/version
end

function __fish_seamfs_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_seamfs_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_seamfs_using_subcommand
    set -l cmd (__fish_seamfs_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c seamfs -n "__fish_seamfs_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c seamfs -n "__fish_seamfs_needs_command" -s V -l version -d 'Print version'
complete -c seamfs -n "__fish_seamfs_needs_command" -f -a "mount" -d 'Mount LOWER on MOUNTPOINT, or over DIR itself with --over'
complete -c seamfs -n "__fish_seamfs_needs_command" -f -a "umount" -d 'Unmount a seamfs mount (only seamfs; also clears one whose daemon died)'
complete -c seamfs -n "__fish_seamfs_needs_command" -f -a "doctor" -d 'Check a seamfs mount from inside the box: up and answering, data path, the share, seam-git as core.hooksPath, git\'s version, the index split. Exit 1 when a check fails'
complete -c seamfs -n "__fish_seamfs_needs_command" -f -a "parked" -d 'What seamfs parked before box processes destroyed it: list (newest first), restore, prune'
complete -c seamfs -n "__fish_seamfs_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l over -d 'Mount on top of DIR itself, reaching DIR\'s contents through a directory fd opened first' -r -F
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l ttl -d 'Kernel cache TTL for the work tree, in seconds (0-3600): no longer than the share\'s own [default: 1; work-tree entries 60 over 9p cache=loose, whose own never expires]' -r
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l threads -d 'FUSE worker threads (1-256) [default: 4]' -r
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l log -d 'Log file for the daemon (default: no log once daemonised)' -r -F
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l lock-wait-ms -d 'How long a box lock create waits behind a host-held lock before EEXIST, in ms [default: 1000]' -r
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l shared-index-wait-ms -d 'How long a first touch of `index` retries a shared index that reads missing, in ms [default: 2000]' -r
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l config -d 'Settings file (default /etc/seamfs.toml when it exists); flags override it' -r -F
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l feed -d 'The host change feed (seamd run --feed): unix:PATH, vsock:CID:PORT, or a character device such as /dev/virtio-ports/seam.feed. While it is live the work tree stays cached until the host changes it, and box watchers see host edits' -r
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l box-id -d 'This box\'s id (1-32 of a-z 0-9 _ -): its index on the share is `index-box.ID`, and every other box is another side, as the host is [default: from /etc/machine-id]' -r
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l foreground -d 'Stay in the foreground and log to stderr'
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l no-passthrough -d 'Never use FUSE passthrough for file data (what a kernel before 6.9 gets anyway)'
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l no-park -d 'Do not park what box processes destroy (uncommitted bytes kept on refs/seam/parked)'
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -l no-index-split -d 'Let the box use the shared index instead of its own `index-box.ID`'
complete -c seamfs -n "__fish_seamfs_using_subcommand mount" -s h -l help -d 'Print help'
complete -c seamfs -n "__fish_seamfs_using_subcommand umount" -s h -l help -d 'Print help'
complete -c seamfs -n "__fish_seamfs_using_subcommand doctor" -l json -d 'One JSON document instead of text (fields: docs/box-setup.md, "seamfs doctor")'
complete -c seamfs -n "__fish_seamfs_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -s h -l help -d 'Print help'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -a "restore" -d 'Write an entry back, byte-exact with its mode (ID from the list, or a path: its newest)'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -a "prune" -d 'Drop park commits older than DURATION (14d, 12h, 30m...) [default: 14d]'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and not __fish_seen_subcommand_from restore prune help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from restore" -l to -d 'Write into this directory instead (for an entry from a removed linked worktree)' -r -F
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from restore" -l force -d 'Replace the file even if it changed since and its bytes are in no object'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from restore" -s h -l help -d 'Print help'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from prune" -l older-than -d 'Age past which parked bytes are dropped' -r
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from help" -f -a "restore" -d 'Write an entry back, byte-exact with its mode (ID from the list, or a path: its newest)'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Drop park commits older than DURATION (14d, 12h, 30m...) [default: 14d]'
complete -c seamfs -n "__fish_seamfs_using_subcommand parked; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamfs -n "__fish_seamfs_using_subcommand help; and not __fish_seen_subcommand_from mount umount doctor parked help" -f -a "mount" -d 'Mount LOWER on MOUNTPOINT, or over DIR itself with --over'
complete -c seamfs -n "__fish_seamfs_using_subcommand help; and not __fish_seen_subcommand_from mount umount doctor parked help" -f -a "umount" -d 'Unmount a seamfs mount (only seamfs; also clears one whose daemon died)'
complete -c seamfs -n "__fish_seamfs_using_subcommand help; and not __fish_seen_subcommand_from mount umount doctor parked help" -f -a "doctor" -d 'Check a seamfs mount from inside the box: up and answering, data path, the share, seam-git as core.hooksPath, git\'s version, the index split. Exit 1 when a check fails'
complete -c seamfs -n "__fish_seamfs_using_subcommand help; and not __fish_seen_subcommand_from mount umount doctor parked help" -f -a "parked" -d 'What seamfs parked before box processes destroyed it: list (newest first), restore, prune'
complete -c seamfs -n "__fish_seamfs_using_subcommand help; and not __fish_seen_subcommand_from mount umount doctor parked help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seamfs -n "__fish_seamfs_using_subcommand help; and __fish_seen_subcommand_from parked" -f -a "restore" -d 'Write an entry back, byte-exact with its mode (ID from the list, or a path: its newest)'
complete -c seamfs -n "__fish_seamfs_using_subcommand help; and __fish_seen_subcommand_from parked" -f -a "prune" -d 'Drop park commits older than DURATION (14d, 12h, 30m...) [default: 14d]'
